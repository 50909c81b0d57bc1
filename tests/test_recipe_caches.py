"""The recommended recipe's env (``proposers="best+spantrain"``) plays the same episodes with its caches as without.

Speed work on the recipe (issue 20, section 4) may only remember or compute faster, never decide
otherwise.  These tests play masked random actions on spider-8-contended through the env users get
(every memo and cache on, process-wide tables shared) and through a reference whose caches are
disabled or emptied before every step (proposers and SpanTrain with ``memo=False``, the plan cache,
the simulator's evaluation memos, the pipeline-time and sweep-plan tables cleared, the reference
event replay instead of the inlined zero-bubble one), and require the same observations, rewards,
terminations and ``info`` at every step; and that an episode does not depend on what ran before it
in the process.
"""

from __future__ import annotations

import numpy as np
import pytest
from envs import play_masked, same_values
from sfenv.agents.ordering import DecisionProposer, ordered_class
from sfenv.agents.proposer_sets import best_heuristic_proposers
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import PlanCache
from sfenv.model import pipeline
from sfenv.model.sharing import BULK_BUSY, BURST_BPS, BURST_DECAY, BURST_VAR, BUSY, empty_load
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator

SCENARIO = "spider-8-contended"
NUM_JOBS = 24
STEPS = 250


def _scenario():
    return load_scenario(SCENARIO).with_overrides(workload={"num_jobs": NUM_JOBS})


def _uncached_env() -> GeoSchedEnv:
    """The recipe's proposers computing everything afresh (memos off; :func:`_clear_caches` before each step)."""
    cache = PlanCache()
    proposers = best_heuristic_proposers(8, cache, spantrain=True)
    for p in proposers:
        if hasattr(p, "memo"):
            p.memo = False
    i = next(i for i, p in enumerate(proposers) if isinstance(p, DecisionProposer))
    proposers[i] = DecisionProposer(ordered_class(SpanTrainAgent, "spantrain", "swf")(memo=False))
    return GeoSchedEnv(_scenario(), proposers=proposers)


def _clear_caches(env: GeoSchedEnv) -> None:
    """Empty every cache the step reads: the env's plan cache, the simulator's memos and the process-wide tables."""
    env.cache.clear()
    for p in env.proposers:
        if isinstance(p, PlanCache):
            p.clear()
    env._evaluations.local.clear()  # the scenario's single-region evaluations, shared by its envs
    if env.sim is not None:
        env.sim.links.memo_local.clear()
        env.sim.links.memo_wan.clear()
        env.sim.links.memo_wan_state = None
    pipeline._pipeline_time_cached.cache_clear()
    pipeline._replayed_head.cache_clear()
    pipeline._steady_period_cached.cache_clear()
    pipeline._sweep_plan.cache_clear()
    pipeline._sweep_plan_rows.cache_clear()


def _assert_same_episode(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert same_values(a, b), f"step {i} differs"


def test_recipe_caches_play_the_uncached_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every observation, reward and ``info`` equal over a few hundred masked random steps, with and without caches."""
    cached = GeoSchedEnv(_scenario(), proposers="best+spantrain")
    got, actions = play_masked(cached, seed=11, steps=STEPS)
    assert len(actions) == STEPS
    assert sum(len(s) == 5 and s[2] for s in got) >= 2  # several episodes: memos carried from one to the next
    assert sum(int(np.sum(s[-1]["action_mask"])) > 2 for s in got) >= 50  # real choices among candidates
    # the reference: the event replay as written first (in Python), nothing remembered between steps
    monkeypatch.setattr(pipeline, "_jit", None)
    monkeypatch.setattr(pipeline, "_replay_zero_bubble",
                        lambda c, lat, x, m, w: pipeline._replay(c, lat, x, m, "zb-h1", list(w)))
    pipeline._pipeline_time_cached.cache_clear()
    pipeline._replayed_head.cache_clear()
    reference = _uncached_env()
    want, _ = play_masked(reference, seed=11, steps=STEPS, actions=actions, before_step=_clear_caches)
    _assert_same_episode(got, want)


def test_recipe_episode_does_not_depend_on_what_ran_before() -> None:
    """The same seed and actions give the same episode in a fresh env and in one that played another episode first."""
    fresh = GeoSchedEnv(_scenario(), proposers="best+spantrain")
    first, actions = play_masked(fresh, seed=23, steps=150)
    used = GeoSchedEnv(_scenario(), proposers="best+spantrain")
    play_masked(used, seed=5, steps=150)  # warms every memo with another episode's states
    again, _ = play_masked(used, seed=23, steps=150, actions=actions)
    _assert_same_episode(again, first)
    later = GeoSchedEnv(_scenario(), proposers="best+spantrain")  # a new env in a process whose tables are warm
    once_more, _ = play_masked(later, seed=23, steps=150, actions=actions)
    _assert_same_episode(once_more, first)


def _cross_region_plans(sim, count: int, seed: int) -> list:
    """Seeded plans of the first job across 2-3 random regions (fit_plan on the simulator's evaluator)."""
    from sfenv.model.planning import fit_plan

    rng = np.random.default_rng(seed)
    job = sim.jobs[0].spec
    view = sim.view()
    plans = []
    while len(plans) < count:
        chain = [int(r) for r in rng.choice(sim.topo.num_regions, size=int(rng.integers(2, 4)), replace=False)]
        res = fit_plan(job, sim.topo, chain, [8] * len(chain), view.evaluate)
        if res is not None and len(res[0].regions) > 1:
            plans.append(res[0])
    return plans


def _off_widest_plans(sim, count: int) -> list:
    """Two-region plans whose hop takes the lowest-latency route, not the widest (:meth:`Topology.route_for`)."""
    from sfenv.model.perf import ACT_BYTES
    from sfenv.model.planning import fit_plan

    topo, job, view = sim.topo, sim.jobs[0].spec, sim.view()
    plans = []
    for a in range(topo.num_regions):
        for b in range(topo.num_regions):
            if a == b or len(plans) >= count:
                continue
            res = fit_plan(job, topo, [a, b], [8, 8], view.evaluate)
            if res is None or len(res[0].regions) < 2:
                continue
            act = ACT_BYTES * res[0].micro_batch * job.model.seq_len * job.model.hidden
            if not set(topo.route_for(a, b, act)[0]) <= set(topo.route(a, b)) | set(topo.route(b, a)):
                plans.append(res[0])
    assert len(plans) == count
    return plans


def test_a_cross_region_plan_reads_only_the_links_among_its_regions() -> None:
    """The memo key of cross-region plans (:meth:`SimView.link_state_among`) holds all the link state evaluation reads.

    On spider-64 (many links), any change of load or capacities outside ``Topology.links_among``
    (either direction) leaves a plan's modelled performance equal in every field; a change inside
    changes it.
    """
    from sfenv.model.perf import evaluate_plan

    sim = make_simulator(load_scenario("spider-64"), 0)
    job, topo, params = sim.jobs[0].spec, sim.topo, sim.params
    rng = np.random.default_rng(1)
    busy = rng.integers(0, 5, topo.num_directed).astype(float)
    load = empty_load(topo.num_directed)  # every row the sharing model reads (v3's variance and decay too)
    load[BUSY], load[BULK_BUSY], load[BURST_BPS] = busy, 0.5 * busy, 1e8 * busy  # transfers; of which bulk; bit/s
    load[BURST_VAR], load[BURST_DECAY] = 1e15 * busy, 1e16 * busy
    cap = topo.link_bw_bps * rng.uniform(0.5, 1.0, topo.num_links)
    for plan in _cross_region_plans(sim, 12, seed=2) + _off_widest_plans(sim, 4):
        among = topo.links_among(plan.regions)
        outside = np.setdiff1d(np.arange(topo.num_links), among)
        assert 0 < len(among) < topo.num_links
        base = evaluate_plan(plan, job, topo, params, cap, load)
        load_out, cap_out = load.copy(), cap.copy()
        load_out[:, _directed(outside)] += 7.0
        cap_out[outside] *= 0.3
        assert evaluate_plan(plan, job, topo, params, cap_out, load_out) == base
        load_in = load.copy()
        load_in[:, _directed(among)] += 7.0
        assert evaluate_plan(plan, job, topo, params, cap, load_in).iter_time != base.iter_time


def _directed(links: np.ndarray) -> np.ndarray:
    """Both directions of each link (directed ids ``2 k`` and ``2 k + 1``)."""
    return np.concatenate([2 * links, 2 * links + 1])


def test_spantrain_memo_reuses_fits_across_changes_elsewhere_and_only_there() -> None:
    """A cross-region fit is remembered across a load change on other links (equal to a fresh one), not on its own."""
    sim = make_simulator(load_scenario("spider-64"), 0)
    view = sim.view()
    job = sim.jobs[0].spec
    plan = _cross_region_plans(sim, 1, seed=3)[0]
    chain = sorted(plan.regions)
    budget = [8] * len(chain)
    among = sim.topo.links_among(chain)
    outside = np.setdiff1d(np.arange(sim.topo.num_links), among)
    agent = SpanTrainAgent()
    first = agent._fit(view, job, chain, budget)
    sizes = []
    for links in (outside, among):
        sim.links.load[0, _directed(links)] += 5  # 5 more transfers sending at once, both ways
        fit, fresh = agent._fit(view, job, chain, budget), SpanTrainAgent(memo=False)._fit(view, job, chain, budget)
        assert fit is not None and fresh is not None
        assert fit[0] == fresh[0] and fit[1] == fresh[1]
        sizes.append(len(agent._fit_memo))
        sim.links.load[0, _directed(links)] -= 5
    assert first is not None and sizes == [1, 2]  # a hit for the change elsewhere, a new fit for its own links
