"""Simulator invariants on random small scenarios with random valid decisions (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import check_link_load
from hypothesis import given, settings
from hypothesis import strategies as st

from sfenv.model.perf import Plan, Stage, evaluate_plan, plan_flow_groups
from sfenv.model.planning import fit_plan
from sfenv.scenario import Scenario
from sfenv.sim import InvalidDecision, Simulator, make_simulator
from sfenv.world.prices import JOULES_PER_MWH

GPUS = ["A100-80GB", "V100", "L40S", "A6000", "H100-SXM"]


@st.composite
def scenarios(draw) -> Scenario:
    n = draw(st.integers(2, 5))
    regions = [
        {"name": f"r{i}", "gpu": draw(st.sampled_from(GPUS)), "gpus": draw(st.integers(4, 32)), "zone": f"z{i % 2}"}
        for i in range(n)
    ]
    links = []
    for i in range(1, n):  # random spanning tree, then extra chords
        j = draw(st.integers(0, i - 1))
        links.append({"a": f"r{i}", "b": f"r{j}", "bandwidth_gbps": draw(st.sampled_from([0.5, 1, 5, 25])),
                      "latency_ms": draw(st.floats(1, 100)), "dynamic": draw(st.booleans())})
    return Scenario.from_dict({
        "name": "random",
        "topology": {"regions": regions, "links": links},
        "prices": {"kind": "time_of_use", "days": 2, "noise": 0.1,
                   "zones": {"z0": {"base": 20, "peak": 90}, "z1": {"base": 60, "peak": 200, "utc_offset_h": 8}}},
        "workload": {"num_jobs": draw(st.integers(2, 8)),
                     "arrival": {"process": draw(st.sampled_from(["poisson", "mmpp"])), "rate_per_hour": 3},
                     "models": [{"name": "gpt-350m"}, {"name": "gpt-1.3b"}], "global_batch": [32, 64],
                     "iterations": [20, 400], "min_gpus": 1, "max_gpus": 32},
        "outages": {"rate_per_region_per_day": draw(st.sampled_from([0.0, 2.0, 6.0])), "mean_duration_h": 0.5},
        "dynamics": {"links": draw(st.sampled_from(["none", "flagged", "all"])), "mean_good_h": 0.5, "mean_bad_h": 0.5},
        "sim": {"horizon_h": 24 * 60, "checkpoint_interval_s": 600},
    })


def random_plan(sim: Simulator, rng: np.random.Generator) -> Plan | None:
    view = sim.view()
    if not view.waiting or rng.random() < 0.25:
        return None
    job = view.waiting[int(rng.integers(len(view.waiting)))]
    free = view.free_gpus
    avail = [r for r in range(sim.topo.num_regions) if free[r] > 0]
    if not avail:
        return None
    k = int(rng.integers(1, min(3, len(avail)) + 1))
    chain = [int(x) for x in rng.choice(avail, size=k, replace=False)]
    budget = [int(rng.integers(1, free[r] + 1)) for r in chain]
    res = fit_plan(job, sim.topo, chain, budget, view.evaluate)
    return None if res is None else res[0]


def check_state(sim: Simulator) -> None:
    total = sim.topo.gpu_counts
    alloc = np.zeros_like(total)
    for jid in sim.running:
        js = sim.jobs[jid]
        for r, g in js.plan.gpus_by_region().items():
            alloc[r] += g
    assert np.all(sim.free >= 0)
    assert np.array_equal(sim.free + alloc, total), "GPUs not conserved"
    check_link_load(sim)
    cap = sim.link_capacity_bps
    for entry in sim.links.jobs.values():  # no flow group sends faster than any link it crosses can carry
        groups = plan_flow_groups(entry.plan, sim.topo, entry.job)
        for g, rate in zip(groups, entry.perf.flow_rates_bps):
            assert all(g.members * rate <= cap[e >> 1] * (1 + 1e-9) for e in g.links)
    # totals() (platform-wide rates) agree with the jobs' own accounts plus their pending accruals
    cost = energy = 0.0
    for js in sim.jobs:
        cost += js.cost_usd
        energy += js.energy_j
        dt = sim.time - js.last_update
        if js.status == "running" and dt > 0:
            f = sim.prices.cumulative
            cost += float(np.dot(js.power_zone, f(sim.time) - f(js.last_update))) / JOULES_PER_MWH
            energy += js.perf.power_w * dt
    got = sim.totals()
    assert got[0] == pytest.approx(cost, rel=1e-9, abs=1e-9)
    assert got[1] == pytest.approx(energy, rel=1e-9, abs=1e-6)
    for jid in sim.waiting:  # a preempted job restarts from a checkpoint
        js = sim.jobs[jid]
        if js.preemptions:
            q = js.progress / js.checkpoint_iters
            assert abs(q - round(q)) < 1e-6


@settings(max_examples=40, deadline=None)
@given(sc=scenarios(), seed=st.integers(0, 2**16))
def test_random_episodes_keep_invariants(sc, seed):
    sim = make_simulator(sc, seed)
    rng = np.random.default_rng(seed)
    last_t = sim.time
    steps = 0
    while not sim.done and steps < 5000:
        check_state(sim)
        plan = random_plan(sim, rng)
        if plan is not None:  # memoised evaluations equal fresh ones, whatever the link state
            fresh = evaluate_plan(plan, sim.jobs[plan.job_id].spec, sim.topo, sim.params,
                                  sim.link_capacity_bps, sim.links.load)
            assert sim.evaluate(plan) == fresh
        if plan is None:
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()
        assert sim.time >= last_t
        last_t = sim.time
        steps += 1
    check_state(sim)
    records = sim.records()
    assert len(records) == len(sim.jobs)  # every arrived job is reported
    for rec, js in zip(records, sim.jobs):
        assert rec.cost_usd >= 0 and rec.energy_j >= 0 and rec.wan_bytes >= 0
        if rec.finished:
            assert js.status == "done" and rec.finish >= rec.first_start >= rec.arrival
        else:
            assert js.status in ("pending", "waiting", "running")
    # small jobs on a long horizon: nothing is lost, outages included
    assert all(r.finished for r in records)


def test_outage_preempts_and_requeues_without_loss():
    sc = Scenario.from_dict({
        "name": "outage",
        "topology": {"regions": [{"name": "a", "gpu": "A100-80GB", "gpus": 8, "zone": "z"},
                                 {"name": "b", "gpu": "A100-80GB", "gpus": 8, "zone": "z"}],
                     "links": [{"a": "a", "b": "b", "bandwidth_gbps": 10, "latency_ms": 5}]},
        "prices": {"zones": {"z": {"base": 50, "peak": 50}}, "noise": 0},
        "workload": {"num_jobs": 1, "iterations": [3000, 3000], "models": [{"name": "gpt-1.3b"}],
                     "min_gpus": 8, "max_gpus": 8},
        "sim": {"checkpoint_interval_s": 600},
    })
    from sfenv.sim import Outage

    base = make_simulator(sc, 0)
    job = base.jobs[0].spec
    sim = Simulator(base.topo, base.prices, [job], base.config, outages=[Outage(0, job.arrival + 1000.0, 3600.0)])
    res = fit_plan(job, sim.topo, [0], [8], sim.evaluate)
    sim.schedule(res[0])
    sim.advance()
    ckpt = sim.jobs[0].checkpoint_iters
    # run until the outage hits
    while sim.jobs[0].preemptions == 0:
        sim.wait()
    js = sim.jobs[0]
    assert js.status == "waiting" and sim.down[0]
    done_before = 1000.0 / res[1].iter_time
    assert done_before - ckpt <= js.progress <= done_before + 1e-9  # lost at most one checkpoint interval
    assert sim.free[0] == 8 and sim.view().free_gpus[0] == 0  # GPUs returned but region unavailable
    t_preempted = sim.time
    sim.wait()  # restart a while later: the downtime must not be billed
    assert sim.time > t_preempted and sim.jobs[0].status == "waiting"
    res_b = fit_plan(job, sim.topo, [1], [8], sim.evaluate)
    sim.schedule(res_b[0])
    sim.advance()
    while not sim.done:
        sim.wait()
    rec = sim.records()[0]
    assert rec.finished and rec.preemptions == 1
    # a flat price of 50 USD/MWh: the cost is exactly the energy drawn while running at that price
    assert rec.cost_usd == pytest.approx(rec.energy_j * 50.0 / JOULES_PER_MWH, rel=1e-9)


def test_invalid_decision_leaves_state_unchanged():
    sc = Scenario.from_dict({
        "name": "tiny",
        "topology": {"regions": [{"name": "a", "gpu": "V100", "gpus": 4, "zone": "z"}]},
        "prices": {"zones": {"z": {"base": 50, "peak": 50}}},
        "workload": {"num_jobs": 2, "models": [{"name": "gpt-350m"}], "min_gpus": 1},
    })
    sim = make_simulator(sc, 1)
    jid = sim.waiting[0]
    before = (sim.free.copy(), sim.link_flows.copy(), list(sim.waiting), sim.time)
    bad = [
        Plan(jid, (Stage.at(0, 24, dp=8),)),  # more GPUs than free
        Plan(99, (Stage.at(0, 24),)),  # unknown job
        Plan(jid, (Stage.at(0, 10),)),  # wrong layer count
        Plan(jid, (Stage.at(3, 24),)),  # unknown region
    ]
    for plan in bad:
        with pytest.raises(InvalidDecision):
            sim.schedule(plan)
        after = (sim.free.copy(), sim.link_flows.copy(), list(sim.waiting), sim.time)
        assert all(np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(before, after))
    assert math.isnan(sim.jobs[jid].first_start)
