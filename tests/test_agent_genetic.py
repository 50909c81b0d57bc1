"""Genetic baseline: its chromosome carries the GPU count (it finds the brute-force best plan on
spider-8, 32 H100 rather than the largest cluster), it improves on its initial population, beats
random search at equal evaluations, and its DT-FM budget preset has DT-FM's size."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sfenv.agents.base import fill_budget
from sfenv.agents.genetic import BUDGETS, ChainFitness, GeneticAgent, random_search

from sfenv.model.planning import fit_plan
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.world.workload import MODEL_ZOO, JobSpec


def _case(seed: int = 0):
    sc = load_scenario("spider-16")
    sim = make_simulator(sc, 0)
    view = sim.view()
    big = JobSpec(999, MODEL_ZOO["gpt-6.7b"], 512, 100, 0.0, min_gpus=136, max_gpus=160)  # > any one cluster
    regions = [r for r in range(sim.topo.num_regions) if view.free_gpus[r] > 0]
    return view, big, regions


def _spider8_first_job():
    sim = make_simulator(load_scenario("spider-8"), 0)
    view = sim.view()
    return view, view.waiting[0]


def _brute_force(view, job, max_len: int = 3):
    """Best fit_plan over every ordered chain of up to ``max_len`` clusters (all their free GPUs)."""
    free = view.free_gpus
    best = None
    for k in range(1, max_len + 1):
        for chain in itertools.permutations(range(view.topo.num_regions), k):
            budget = fill_budget(free, chain, job.max_gpus)
            if min(budget) < 1 or sum(budget) < job.min_gpus:
                continue
            res = fit_plan(job, view.topo, list(chain), budget, view.evaluate)
            if res is not None and (best is None or res[1].iter_time < best[1].iter_time):
                best = res
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_finds_the_brute_force_plan_on_spider8_not_the_largest_cluster(seed):
    view, job = _spider8_first_job()
    free = view.free_gpus
    exact = _brute_force(view, job)
    assert exact is not None
    agent = GeneticAgent()  # default budget: 750 trials
    agent.reset(seed)
    plan = agent.propose(view, job)[0]
    assert agent.evaluations == agent.trials == 750
    perf = view.evaluate(plan, job)
    assert perf.iter_time == pytest.approx(exact[1].iter_time, rel=1e-9)
    # the brute-force optimum is not the largest free cluster's own plan, the only target of the old
    # decoder (GPU target = largest free cluster).  (Under the flat-MFU model it was 32 H100; with the
    # calibrated kernel model small GEMMs waste more of an H100, and it is a 64-GPU chain.)
    assert job.min_gpus <= int(free.max())
    largest = max(range(view.topo.num_regions), key=lambda r: (free[r], -r))
    res = fit_plan(job, view.topo, [largest], [int(free[largest])], view.evaluate)
    assert res is not None and perf.iter_time < res[1].iter_time


def test_stop_gene_sets_the_number_of_clusters():
    view, job = _spider8_first_job()
    regions = list(range(view.topo.num_regions))
    fit = ChainFitness(view, job, regions)
    stop = fit.stop
    assert fit.genes == len(regions) + 1
    assert fit.decode(np.array([1, stop, 0, 2, 3, 4, 5, 6, 7]))[0] == [1]
    assert fit.decode(np.array([1, 0, stop, 2, 3, 4, 5, 6, 7]))[0] == [1, 0]
    # a chain that passed the stop gene ends as soon as it holds min_gpus
    small = JobSpec(7, job.model, job.global_batch, 10, 0.0, min_gpus=40, max_gpus=200)
    fit2 = ChainFitness(view, small, regions)
    assert fit2.decode(np.array([stop, 1, 0, 2, 3, 4, 5, 6, 7]))[0] == [1, 0]
    assert fit2.decode(np.array([1, stop, 0, 2, 3, 4, 5, 6, 7]))[0] == [1, 0]
    # max_gpus ends the chain whatever the stop gene says
    assert fit.decode(np.array([0, 1, 2, stop, 3, 4, 5, 6, 7]))[0] == [0]


def _ga_best(seed: int, view, job, regions) -> tuple[float, float, int]:
    """The GA's best chain time on ``_case()`` at the default budget, its initial population's best, its evaluations."""
    agent = GeneticAgent(seed=seed)
    agent.reset(seed)
    fit = ChainFitness(view, job, regions)
    best = agent.optimise(fit, fit.genes)
    return fit(best), min(fit.history[: agent.population]), fit.evaluations


def test_improves_over_its_initial_population():
    """Each search ends below the best of its random initial population (2 seeds in the default run; the
    comparison with random search, which needs 8 seeds of both, is the slow test below)."""
    view, job, regions = _case()
    for seed in range(2):
        final, initial, _ = _ga_best(seed, view, job, regions)
        assert np.isfinite(final) and final < initial


@pytest.mark.slow
def test_improves_over_initial_population_and_beats_random_search_on_average():
    # a rugged landscape (chain order changes the plan's time up to 2x): per seed the GA and random
    # search trade wins, so the comparison is over seeds, at equal evaluations in each.  (With
    # duplicates eliminated by permutation instead of by decoded chain, the GA lost this on 24 seeds.)
    # At the default budget (750 trials).  At the earlier 270 the GA tied random search here (mean
    # best 7.16 s against 7.15 s over 12 seeds): the reason the default grew (module docstring).
    # Slow: 8 seeds of 750 trials each for both searches take about 2 CPU minutes.
    view, job, regions = _case()
    ga, rand = [], []
    for seed in range(8):
        final, initial, evaluations = _ga_best(seed, view, job, regions)
        assert np.isfinite(final)
        assert final < initial  # the search improved on its random initial population
        rs = ChainFitness(view, job, regions)
        rand.append(random_search(rs, rs.genes, evaluations, np.random.default_rng(seed)))
        assert rs.evaluations == evaluations
        ga.append(final)
    assert np.mean(ga) < 0.9 * np.mean(rand)  # measured over seeds 0..11: 4.23 s against 6.26 s


def test_dtfm_budget_has_dtfm_size():
    assert BUDGETS["dtfm"][0] == 100
    agent = GeneticAgent(budget="dtfm")
    assert agent.population == 100 and agent.trials == 4900
    assert GeneticAgent().trials * 6 < agent.trials  # the default is about 15 % of it
    view, job = _spider8_first_job()
    agent.reset(0)
    assert agent.propose(view, job) and agent.evaluations == 4900  # every trial counted
    with pytest.raises(ValueError, match="budget"):
        GeneticAgent(budget="huge")


def test_seeded_and_counted():
    view, job, regions = _case()
    results = []
    for seed in (3, 3):
        agent = GeneticAgent(population=10, generations=3)
        agent.reset(seed)
        plan = agent.propose(view, job)[0]
        results.append((plan, agent.evaluations))
    assert results[0] == results[1] and results[0][1] > 10


def test_population_holds_distinct_chains():
    view, job, regions = _case()
    fit = ChainFitness(view, job, regions)
    a = np.arange(fit.genes)
    b = a.copy()
    # permutations that differ only after the decoded chain ends are one phenotype
    chain, _ = fit.decode(a)
    tail = np.arange(len(chain) + 1, fit.genes)
    b[tail] = b[tail][::-1]
    assert not np.array_equal(a, b) and fit.decode(b)[0] == chain
    assert np.array_equal(fit.phenotype(a), fit.phenotype(b))
    c = a.copy()
    c[0], c[1] = c[1], c[0]  # another chain order: another phenotype
    assert not np.array_equal(fit.phenotype(a), fit.phenotype(c))
