"""Genetic baseline: improves on its initial population and beats random search at equal evaluations."""

from __future__ import annotations

import numpy as np
import pytest
from sfenv.agents.genetic import ChainFitness, GeneticAgent, random_search

from sfenv.scenario import load_scenario
from sfenv.workload import MODEL_ZOO, JobSpec


def _case(seed: int = 0):
    sc = load_scenario("spider-16")
    sim = sc.make_simulator(0)
    view = sim.view()
    big = JobSpec(999, MODEL_ZOO["gpt-6.7b"], 512, 100, 0.0, min_gpus=136, max_gpus=160)  # > any one cluster
    regions = [r for r in range(sim.topo.num_regions) if view.free_gpus[r] > 0]
    return view, big, regions


@pytest.mark.parametrize("seed", [0, 1])
def test_improves_over_initial_population_and_beats_random_search(seed):
    view, job, regions = _case()
    agent = GeneticAgent(population=20, generations=12, seed=seed)
    agent.reset(seed)
    fit = ChainFitness(view, job, regions)
    best = agent.optimise(fit, len(regions))
    initial = min(fit.history[: agent.population])
    final = fit(best)
    assert np.isfinite(final)
    assert final < initial  # the search improved on its random initial population
    budget = fit.evaluations
    rs = ChainFitness(view, job, regions)
    rand = random_search(rs, len(regions), budget, np.random.default_rng(seed))
    assert rs.evaluations == budget
    assert final <= rand


def test_seeded_and_counted():
    view, job, regions = _case()
    results = []
    for seed in (3, 3):
        agent = GeneticAgent(population=10, generations=3)
        agent.reset(seed)
        plan = agent.propose(view, job)[0]
        results.append((plan, agent.evaluations))
    assert results[0] == results[1] and results[0][1] > 10
