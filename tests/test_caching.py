"""The caches behind the fast step: cached hashes, interned stages, memoised plan evaluations."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from agent_worlds import job, region, world
from sfenv.agents.fifo import FIFOAgent

from sfenv.model.perf import Plan, Stage, evaluate_plan
from sfenv.scenario import load_scenario
from sfenv.sim import evaluation_cache_for, make_simulator
from sfenv.world.topology import Link
from sfenv.world.workload import MODEL_ZOO


def _cross_plan(job_id: int) -> Plan:
    return Plan(job_id, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)))


def _fresh(sim, plan: Plan):
    return evaluate_plan(plan, sim.jobs[plan.job_id].spec, sim.topo, sim.params, sim.link_capacity_bps,
                         sim.links.load)


def test_cached_hash_equals_field_hash_and_survives_pickling():
    plan = _cross_plan(3)
    assert hash(plan) == hash((3, plan.stages, 1, "1f1b", "none", 0, False, ()))  # ..., recompute, window, SP, routes
    model = MODEL_ZOO["gpt-1.3b"]
    assert hash(model) == hash(tuple(getattr(model, f) for f in ("name", "layers", "hidden", "heads", "seq_len",
                                                                     "vocab")))
    hash(plan)
    state = plan.__getstate__()
    assert "_hash" not in state  # a string-dependent hash must not travel to another process
    copy = pickle.loads(pickle.dumps(plan))
    assert copy == plan and hash(copy) == hash(plan) and {copy: 1}[plan] == 1


def test_pickled_plan_hashes_correctly_in_another_process():
    # string hashes differ between processes (PYTHONHASHSEED): a stale cached hash would break dicts
    blob = pickle.dumps({_cross_plan(5): "x"})
    code = (
        "import pickle, sys\n"
        "from sfenv.model.perf import Plan, Stage\n"
        "d = pickle.loads(sys.stdin.buffer.read())\n"
        "p = Plan(5, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)))\n"
        "print(d[p])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert out.stdout.decode().strip() == "x"


def test_stages_are_interned_with_plain_ints():
    a = Stage.at(np.int64(1), np.int64(6), np.int64(2), 1)
    b = Stage.at(1, 6, 2, 1)
    assert a is b
    assert all(type(x) is int for x in (a.layers, a.tp, a.placement[0][0], a.placement[0][1]))


def test_wan_evaluations_follow_link_changes():
    sim = world([region("a", 16, "z"), region("b", 16, "z")], [Link(0, 1, 10, 30)], {"z": 50.0},
                [job(0, min_gpus=4, max_gpus=16), job(1, min_gpus=4, max_gpus=16)])
    plan = _cross_plan(0)
    before = sim.evaluate(plan)
    assert sim.evaluate(plan) is before  # memoised while nothing changes
    sim.schedule(_cross_plan(1))  # another job's flows now share the link
    shared = sim.evaluate(plan)
    assert shared == _fresh(sim, plan) and shared.bottleneck_bw_bps < before.bottleneck_bw_bps
    sim.link_factor[0] = 0.1  # edited directly: the memo notices
    dropped = sim.evaluate(plan)
    assert dropped == _fresh(sim, plan) and dropped.bottleneck_bw_bps < shared.bottleneck_bw_bps


def test_single_region_evaluations_are_shared_across_episodes():
    sc = load_scenario("spider-8")
    cache = evaluation_cache_for(sc)
    first = make_simulator(sc, 0, cache)
    plan = Plan(first.waiting[0], (Stage.at(0, 24, dp=8),))
    perf = first.evaluate(plan)
    assert perf == _fresh(first, plan)
    second = make_simulator(sc, 1, cache)
    same_shape = next(j for j in second.jobs if j.spec.model == first.jobs[plan.job_id].spec.model
                      and j.spec.global_batch == first.jobs[plan.job_id].spec.global_batch
                      and (j.spec.min_gpus, j.spec.max_gpus) == (first.jobs[plan.job_id].spec.min_gpus,
                                                                 first.jobs[plan.job_id].spec.max_gpus))
    assert second.evaluate(Plan(same_shape.spec.job_id, plan.stages)) is perf


def test_evaluation_cache_rejects_another_topology():
    cache = evaluation_cache_for(load_scenario("spider-8"))
    with pytest.raises(ValueError, match="another topology"):
        make_simulator(load_scenario("spider-16"), 0, cache)


def test_shared_cache_does_not_change_episodes():
    sc = load_scenario("spider-8")
    cache = evaluation_cache_for(sc)
    for seed in (0, 1):
        reports = []
        for c in (None, cache):
            sim = make_simulator(sc, seed, c)
            reports.append(sim.run(FIFOAgent().decide).to_dict())
        assert reports[0] == reports[1]


def test_memo_tells_plans_apart_by_their_in_flight_window():
    """Regression: the memo key once left out ``extra_inflight``, so a widened plan got the narrow plan's figures."""
    sim = make_simulator(load_scenario("spider-8"), 0)
    job = sim.jobs[sim.waiting[0]].spec
    half = job.model.layers // 2
    plan = Plan(job.job_id, (Stage.at(0, half, 1, 4), Stage.at(1, job.model.layers - half, 1, 4)))
    narrow = sim.evaluate(plan)
    wide = sim.evaluate(replace(plan, extra_inflight=3))
    assert wide == _fresh(sim, replace(plan, extra_inflight=3))
    assert wide.windows[0] == narrow.windows[0] + 3 and wide.iter_time < narrow.iter_time


def test_hashed_keys_survive_pickling_into_a_fresh_interpreter():
    sim = make_simulator(load_scenario("spider-8"), 0)
    job = sim.jobs[0].spec
    plan = Plan(job.job_id, (Stage.at(0, job.model.layers),))
    blob = pickle.dumps((plan.shape_key, job.shape_key, plan, job))
    code = ("import pickle, sys; a, b, p, j = pickle.loads(sys.stdin.buffer.read()); "
            "assert hash(a) == hash(p.shape_key) == hash(tuple(a)) and hash(b) == hash(j.shape_key); "
            "assert {a: 1}[p.shape_key] == 1 and {j.shape_key: 2}[b] == 2")
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.returncode == 0, out.stderr.decode()


def test_single_region_plans_move_between_regions_that_plan_alike():
    """PlanCache.fit moves a plan found for one region to an equal one: the same plan as fit_plan's there."""
    from sfenv.env.proposers import PlanCache
    from sfenv.model.planning import fit_plan

    sc = load_scenario("spider-64")
    topo = sc.topology
    classes = {}
    for r, rep in enumerate(topo.plan_class):
        classes.setdefault(rep, []).append(r)
        a, b = topo.regions[r], topo.regions[rep]
        assert (a.gpu, a.gpus_per_server, a.intra_bw_gbps, a.intra_latency_ms) == \
            (b.gpu, b.gpus_per_server, b.intra_bw_gbps, b.intra_latency_ms)
    assert len(classes) < topo.num_regions  # spider-64 repeats its cluster types
    sim = make_simulator(sc, 0)
    view = sim.view()
    cache = PlanCache()
    moved = calls = 0
    for spec in [js.spec for js in sim.jobs[:6]]:
        for members in classes.values():
            budget = min([int(topo.regions[r].num_gpus) for r in members[:3]] + [spec.max_gpus])
            for r in members[:3]:
                if budget < spec.min_gpus:
                    continue
                got = cache.fit(view, spec, (r,), (budget,))
                calls += 1
                direct = fit_plan(spec, topo, (r,), (budget,), view.evaluate)
                assert (got is None) == (direct is None)
                if got is not None:
                    assert got[0] == direct[0] and got[1] == direct[1]
                    assert set(got[1].power_by_region) == {r}
                    moved += r != topo.plan_class[r]
    assert moved > 5 and cache.misses < calls / 2  # fit_plan ran for fewer than half of the asks
