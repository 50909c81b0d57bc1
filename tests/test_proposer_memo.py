"""Memoised proposers decide as computed afresh: the recommended recipe's candidates are unchanged by speed work.

``proposers="best+spantrain"`` asks SpanTrain for a decision at every step; SpanTrain remembers its
placements, plan fits and adapter choices per state (``SpanTrainAgent(memo=True)``, the default),
and the SpinSearch and first-fit proposers their plans per job shape and state (``memo=True``).
These tests play seeded episodes with random masked actions through an env built that way and
through one whose proposers recompute everything (``memo=False``, the code as it was), and require
the same candidates, performance figures and recorded decisions at every step.  The inlined zero-bubble replay
both use is checked against the reference replay in ``tests/test_pipeline_replay.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sfenv.agents.ordering import DecisionProposer, FirstFitProposer, SpinSearchProposer, ordered_class
from sfenv.agents.proposer_sets import best_heuristic_proposers
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import PlanCache
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator


def _recipe_env(scenario, memo: bool) -> GeoSchedEnv:
    """An env with the ``best+spantrain`` proposers, memoised (SpanTrain, SpinSearch, first fit) or not."""
    cache = PlanCache()
    proposers = best_heuristic_proposers(8, cache, spantrain=True)
    memoised = [p for p in proposers if hasattr(p, "memo")]
    assert len(memoised) == 3  # fastest+swf, fifo+swf, spinsearch+swf
    for p in memoised:
        p.memo = memo
    i = next(i for i, p in enumerate(proposers) if isinstance(p, DecisionProposer))
    proposers[i] = DecisionProposer(ordered_class(SpanTrainAgent, "spantrain", "swf")(memo=memo))
    return GeoSchedEnv(scenario, proposers=proposers)


def _decisions(env: GeoSchedEnv) -> list:
    return [getattr(p, "decision", None) for p in env.proposers]


def _spantrain(env: GeoSchedEnv) -> SpanTrainAgent:
    return next(p for p in env.proposers if isinstance(p, DecisionProposer)).agent.placement


def _spantrain_decision(env: GeoSchedEnv):
    return next(p for p in env.proposers if isinstance(p, DecisionProposer)).decision


def test_best_spantrain_proposers_name_the_memoised_spantrain():
    """The recipe's proposers (``proposers="best+spantrain"``) use the memoised SpanTrain this file checks."""
    env = GeoSchedEnv("spider-8-contended", proposers="best+spantrain")
    assert _spantrain(env).memo


@pytest.mark.parametrize(("scenario", "num_jobs", "seeds", "steps"),
                         [("spider-8-contended", 40, (0, 1, 2), 150), ("spider-64", 24, (3,), 40)])
def test_memoised_recipe_proposes_as_computed_afresh(scenario, num_jobs, seeds, steps):
    """Same candidates and decisions at every step of several episodes (memos carried across them)."""
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": num_jobs})
    fast, ref = _recipe_env(sc, memo=True), _recipe_env(sc, memo=False)
    compared, spantrain_plans, episodes = 0, 0, 0
    for seed in seeds:
        rng = np.random.default_rng(seed)
        fast.reset(seed=seed)
        ref.reset(seed=seed)
        for _ in range(steps):
            assert fast.candidates == ref.candidates
            assert [p.job_id for p in fast.candidates] == [p.job_id for p in ref.candidates]
            assert _decisions(fast) == _decisions(ref)
            assert [fast._perf(i) for i in range(len(fast.candidates))] == \
                [ref._perf(i) for i in range(len(ref.candidates))]
            compared += 1
            spantrain_plans += _spantrain_decision(fast) is not None
            mask = fast.action_masks()
            assert np.array_equal(mask, ref.action_masks())
            action = int(rng.choice(np.flatnonzero(mask)))
            _, _, term, trunc, _ = fast.step(action)
            _, _, term_ref, trunc_ref, _ = ref.step(action)
            assert (term, trunc) == (term_ref, trunc_ref)
            if term or trunc:  # the same episode, then another one on the same memos
                assert fast.sim.report().mean_jct_s == ref.sim.report().mean_jct_s
                episodes += 1
                fast.reset(seed=seed + 1000)
                ref.reset(seed=seed + 1000)
    assert compared == len(seeds) * steps
    assert spantrain_plans >= 10  # SpanTrain had decisions to make
    assert _spantrain(fast)._fit_memo and not _spantrain(ref)._fit_memo  # one remembered, one did not
    # the evaluation counter counts what a computation from scratch would have evaluated
    assert _spantrain(fast).evaluations == _spantrain(ref).evaluations
    assert episodes >= 1


def test_memo_is_not_carried_to_another_platform():
    """One SpanTrain scheduling two platforms in turn decides on each as a fresh one does."""
    agent = ordered_class(SpanTrainAgent, "spantrain", "swf")()
    for scenario in ("spider-8-contended", "geo-8-contended", "spider-8-contended"):
        sc = load_scenario(scenario).with_overrides(workload={"num_jobs": 30})
        fresh = ordered_class(SpanTrainAgent, "spantrain", "swf")(memo=False)
        decided = []

        def decide(view, fresh=fresh, decided=decided):
            plan = agent.decide(view)
            assert plan == fresh.decide(view)
            decided.append(plan)
            return plan

        make_simulator(sc, 5).run(decide)
        assert sum(p is not None for p in decided) >= 30


def test_memo_follows_the_link_state():
    """A cross-region fit and adapter choice remembered under one link state are not reused under another."""
    sim = make_simulator(load_scenario("spider-8-contended"), 0)
    view = sim.view()
    job = sim.jobs[0].spec
    agent = SpanTrainAgent()
    chain = max(agent.groups(view), key=len)[:2]
    budget = [int(min(view.free_gpus[r], job.max_gpus // 2)) for r in chain]
    links = sorted({k for a in chain for b in chain if a != b for k in sim.topo.route(a, b)})
    plans = []
    for extra_flows in (0, 40, 0):
        sim.links.load[0, _directed(links)] += extra_flows  # more transfers sending at once, both ways
        fresh = SpanTrainAgent(memo=False)
        fit, fit_fresh = agent._fit(view, job, chain, budget), fresh._fit(view, job, chain, budget)
        assert fit is not None and fit_fresh is not None
        assert fit[0] == fit_fresh[0] and fit[1].iter_time == fit_fresh[1].iter_time
        assert agent.adapt(fit[0], job, view) == fresh.adapt(fit[0], job, view)
        plans.append(fit[0])
        sim.links.load[0, _directed(links)] -= extra_flows
    assert plans[0] != plans[1] and plans[0] == plans[2]  # the load changes the plan: the check has teeth


def test_proposer_memos_follow_the_link_state():
    """SpinSearch's and first fit's plans for a job no region holds alone are not reused under another link load."""
    sim = make_simulator(load_scenario("spider-8-contended"), 0)
    view = sim.view()
    biggest = int(view.free_gpus.max())
    job = replace(sim.jobs[0].spec, min_gpus=biggest + 1, max_gpus=2 * biggest)
    cache = PlanCache()
    memoised = [SpinSearchProposer(cache), FirstFitProposer(cache)]
    fresh = [SpinSearchProposer(PlanCache(), memo=False), FirstFitProposer(PlanCache(), memo=False)]
    crossing = 0
    for extra_flows in (0, 40, 0):
        sim.links.load[0] += extra_flows
        for proposer, reference in zip(memoised, fresh):
            plan, ref_plan = proposer.plan(view, job), reference.plan(view, job)
            assert plan is not None and plan == ref_plan
            assert view.evaluate(plan, job) == view.evaluate(ref_plan, job)
            assert cache.recent[plan].iter_time == reference.cache.recent[ref_plan].iter_time
            crossing += len(plan.regions) > 1
        sim.links.load[0] -= extra_flows
    assert crossing == 6


def _directed(links) -> list[int]:
    """Both directions of each link (directed ids ``2 k`` and ``2 k + 1``)."""
    return [e for k in links for e in (2 * k, 2 * k + 1)]
