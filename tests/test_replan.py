"""Re-planning a running job: the re-partition pause, its accounting, and the simulator invariants."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import check_link_load
from hypothesis import given, settings
from hypothesis import strategies as st

from sfenv.model.perf import Plan, PlanPerf, Stage, evaluate_plan
from sfenv.model.planning import fit_plan
from sfenv.scenario import Scenario
from sfenv.sim import InvalidDecision, LinkDynamics, SimConfig, Simulator, SimView, make_simulator
from sfenv.world.hardware import get_gpu
from sfenv.world.prices import JOULES_PER_MWH, PriceSeries
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

PRICE = 50.0  # USD/MWh, flat


def two_regions(config: SimConfig | None = None, jobs: int = 1, iterations: int = 400, gbps: float = 10.0,
                dynamics: LinkDynamics | None = None, seed: int = 0) -> Simulator:
    regions = [Region("a", get_gpu("A100-80GB"), 8, "z", pue=1.1), Region("b", get_gpu("A100-80GB"), 8, "z", pue=1.3)]
    specs = [JobSpec(i, MODEL_ZOO["gpt-1.3b"], 64, iterations, 0.0, 8, 16) for i in range(jobs)]
    prices = PriceSeries(["z"], np.array([[PRICE] * 24]))
    return Simulator(Topology(regions, [Link(0, 1, gbps, 30)]), prices, specs, config or SimConfig(),
                     dynamics=dynamics, rng=np.random.default_rng(seed))


def pipe(split: tuple[int, int], micro_batch: int = 1) -> Plan:
    """Two stages, ``split`` layers, 4 replicas in region a then 4 in region b."""
    return Plan(0, (Stage.at(0, split[0], dp=4), Stage.at(1, split[1], dp=4)), micro_batch=micro_batch)


FREE = SimConfig(replan_restart_s=0.0, replan_state_bytes_per_param=0.0)


def test_pause_is_the_restart_plus_the_moved_layers_over_the_link():
    sim = two_regions()
    sim.schedule(pipe((12, 12)))
    cfg, job = sim.config, sim.jobs[0].spec
    # micro-batch only: nothing moves, the restart constant alone
    assert sim.check_replan(pipe((12, 12), micro_batch=2))[1] == cfg.replan_restart_s
    # 4 layers move from b to a over the 10 Gbit/s, 30 ms link (no other job on it)
    nbytes = 4 * job.model.layer_params * cfg.replan_state_bytes_per_param
    expected = cfg.replan_restart_s + 0.030 + nbytes * 8.0 / 10e9
    assert sim.check_replan(pipe((16, 8)))[1] == pytest.approx(expected, rel=1e-12)
    # moving everything to region a: b's 12 layers and the LM-head copy arrive at a, nothing at b
    single = Plan(0, (Stage.at(0, 24, dp=8),))
    nbytes = (12 * job.model.layer_params) * cfg.replan_state_bytes_per_param
    assert sim.check_replan(single)[1] == pytest.approx(cfg.replan_restart_s + 0.030 + nbytes * 8 / 10e9, rel=1e-12)


def _run_with_switch(config: SimConfig, new: Plan) -> tuple[Simulator, float, float]:
    """Start ``pipe((12, 12))``, switch to ``new`` at the first (no-op) link event, run to the end.

    Returns the simulator, the switch time and the pause.
    """
    noop = LinkDynamics((0,), low_factor=1.0, mean_good_s=500.0, mean_bad_s=500.0)  # factor stays 1
    sim = two_regions(config, jobs=2, dynamics=noop)  # job 1 waits for GPUs the whole time job 0 holds them
    switched: list[tuple[float, float]] = []

    def hook(view: SimView) -> list[Plan]:
        if switched:
            return []
        switched.append((view.time, view.evaluate_replan(new)[1]))
        return [new]

    sim.run(lambda v: pipe((12, 12)) if v.waiting and v.waiting[0].job_id == 0 else
            (Plan(1, (Stage.at(0, 24, dp=8),)) if v.waiting and v.free_gpus[0] >= 8 else None), replan=hook)
    return sim, *switched[0]


@pytest.mark.parametrize("new", [pipe((16, 8)), pipe((12, 12), micro_batch=2), Plan(0, (Stage.at(1, 24, dp=8),))])
def test_switch_is_charged_in_jct_energy_and_cost(new):
    paid, t0, pause = _run_with_switch(SimConfig(), new)
    free, t0_free, zero = _run_with_switch(FREE, new)
    assert t0 == t0_free and 0 < t0 and pause > 0 and zero == 0.0
    a, b = paid.records()[0], free.records()[0]
    assert a.finished and b.finished and paid.jobs[0].replans == 1 and paid.jobs[0].replan_pause_s == pause
    # no work lost: progress at the switch carries over, the rest runs at the new plan's speed
    it_old = paid.evaluate(pipe((12, 12)))
    it_new = evaluate_plan(new, paid.jobs[0].spec, paid.topo, paid.params)
    done = t0 / it_old.iter_time
    assert a.finish == pytest.approx(t0 + pause + (a.iterations - done) * it_new.iter_time, rel=1e-9)
    assert a.jct - b.jct == pytest.approx(pause, rel=1e-9)  # the pause is on the critical path
    old, nw = pipe((12, 12)).gpus_by_region(), new.gpus_by_region()
    held = {r: max(old.get(r, 0), nw.get(r, 0)) for r in (0, 1)}
    topo = paid.topo
    idle_w = sum(n * topo.regions[r].gpu.idle_w * topo.regions[r].pue for r, n in held.items())
    assert a.energy_j - b.energy_j == pytest.approx(idle_w * pause, rel=1e-6)
    assert a.cost_usd == pytest.approx(a.energy_j * PRICE / JOULES_PER_MWH, rel=1e-9)
    assert a.cost_usd > b.cost_usd
    segs = a.segments  # the run before, the pause (on the GPUs held) and the run after
    assert [t for s in segs for t in s[:2]] == pytest.approx([0.0, t0, t0, t0 + pause, t0 + pause, a.finish])
    assert [dict(s[2]) for s in segs] == [old, held, nw]
    # job 1 needs 8 GPUs in region a: none are lent to it before the pause ends
    assert paid.records()[1].first_start >= t0 + pause - 1e-9


def test_paused_job_holds_old_and_new_gpus_draws_idle_power_and_makes_no_progress():
    sim = two_regions(jobs=2)
    sim.schedule(pipe((12, 12)))
    new = Plan(0, (Stage.at(1, 24, dp=8),))  # everything to region b
    pause = sim.replan(new)
    info = sim.view().running[0]
    assert info.plan == new and info.paused_until == pytest.approx(pause) and info.throughput == 0.0
    assert info.progress == 0.0 and info.remaining_s > pause
    assert sim.view().gpus_held(0) == {0: 4, 1: 8} and list(sim.free) == [4, 0]
    topo = sim.topo
    idle_w = 4 * topo.regions[0].gpu.idle_w * topo.regions[0].pue + 8 * topo.regions[1].gpu.idle_w * topo.regions[1].pue
    assert sim.jobs[0].perf.power_w == pytest.approx(idle_w)
    assert sim.link_flows.sum() == 0  # the new plan is inside one region
    sim.advance()  # job 1 (8 GPUs) can start once the pause frees region a
    assert sim.time == pytest.approx(pause) and list(sim.free) == [8, 0]
    assert sim.jobs[0].progress == 0.0 and not sim.jobs[0].paused


def test_invalid_replans_leave_the_state_unchanged():
    sim = two_regions(jobs=2)
    plan = pipe((12, 12))
    sim.schedule(plan)
    before = (sim.free.copy(), sim.link_flows.copy(), sim.jobs[0].version, sim.jobs[0].plan)
    bad = [
        plan,  # the plan it runs
        Plan(1, (Stage.at(0, 24, dp=8),)),  # a waiting job
        Plan(0, (Stage.at(0, 24, dp=16),)),  # 16 GPUs in a: 4 held + 4 free
        Plan(0, (Stage.at(0, 10, dp=4), Stage.at(1, 12, dp=4))),  # wrong layer count
        Plan(7, (Stage.at(0, 24, dp=8),)),  # unknown job
    ]
    for p in bad:
        with pytest.raises(InvalidDecision):
            sim.replan(p)
        assert np.array_equal(sim.free, before[0]) and np.array_equal(sim.link_flows, before[1])
        assert (sim.jobs[0].version, sim.jobs[0].plan) == before[2:]
    sim.replan(pipe((16, 8)))
    with pytest.raises(InvalidDecision, match="already switching"):
        sim.replan(pipe((12, 12)))


def test_the_hook_runs_after_link_changes_only_and_reports_are_deterministic():
    dyn = LinkDynamics((0,), low_factor=0.1, mean_good_s=300.0, mean_bad_s=300.0)
    calls: list[float] = []

    def hook(view: SimView) -> list[Plan]:
        calls.append(view.time)
        out = []
        for info in view.running:  # flip the micro-batch at every change
            if math.isnan(info.paused_until):
                out.append(replace(info.plan, micro_batch=3 - info.plan.micro_batch))
        return out

    reports = []
    for _ in range(2):
        calls.clear()
        sim = two_regions(dynamics=dyn, iterations=3000)
        report = sim.run(lambda v: pipe((12, 12)) if v.waiting else None, replan=hook)
        reports.append((report.to_dict(), sim.replans, tuple(calls)))
        assert sim.replans >= 2 and len(calls) >= sim.replans
    assert reports[0] == reports[1]
    # no hook, no re-planning, and the same events otherwise
    sim = two_regions(dynamics=dyn, iterations=3000)
    sim.run(lambda v: pipe((12, 12)) if v.waiting else None)
    assert sim.replans == 0


def test_an_hourly_hook_is_called_at_every_hour_a_job_runs_and_only_when_asked():
    dyn = LinkDynamics((0,), low_factor=0.1, mean_good_s=3000.0, mean_bad_s=3000.0)
    first = lambda v: pipe((12, 12)) if v.waiting else None  # noqa: E731
    link_calls: list[float] = []
    sim = two_regions(dynamics=dyn, iterations=6000)
    plain = sim.run(first, replan=lambda v: link_calls.append(v.time) or [])
    hourly_calls: list[float] = []
    twin = two_regions(dynamics=dyn, iterations=6000)
    hourly = twin.run(first, replan=lambda v: hourly_calls.append(v.time) or [], replan_hourly=True)
    hours = [3600.0 * k for k in range(1, int(plain.makespan_s // 3600.0) + 1)]
    assert len(hours) >= 2  # the job runs over several hour boundaries
    # the hourly hook: every link change and every hour boundary while the job runs, nothing else
    assert sorted(set(hourly_calls)) == sorted(set(link_calls) | set(hours))
    assert not set(hours) & set(link_calls)  # without hourly, no call at an hour (no change there)
    # a hook that switches nothing changes nothing but the clock's stops (rounding of the sums)
    for key, value in plain.to_dict().items():
        assert hourly.to_dict()[key] == pytest.approx(value, rel=1e-9), key
    assert twin.events_processed == sim.events_processed
    # hourly without a hook is no hook
    bare = two_regions(dynamics=dyn, iterations=6000)
    bare.set_replanner(None, hourly=True)
    assert not bare.replan_hourly


# ------------------------------------------------------------------ invariants under random re-plans
@st.composite
def scenarios(draw) -> Scenario:
    n = draw(st.integers(2, 4))
    regions = [{"name": f"r{i}", "gpu": draw(st.sampled_from(["A100-80GB", "V100", "H100-SXM"])),
                "gpus": draw(st.integers(4, 24)), "zone": f"z{i % 2}"} for i in range(n)]
    links = []
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        links.append({"a": f"r{i}", "b": f"r{j}", "bandwidth_gbps": draw(st.sampled_from([0.5, 5, 25])),
                      "latency_ms": draw(st.floats(1, 100)), "dynamic": True})
    return Scenario.from_dict({
        "name": "random",
        "topology": {"regions": regions, "links": links},
        "prices": {"kind": "time_of_use", "days": 2, "noise": 0.1,
                   "zones": {"z0": {"base": 20, "peak": 90}, "z1": {"base": 60, "peak": 200, "utc_offset_h": 8}}},
        "workload": {"num_jobs": draw(st.integers(2, 6)), "arrival": {"process": "poisson", "rate_per_hour": 4},
                     "models": [{"name": "gpt-350m"}, {"name": "gpt-1.3b"}], "global_batch": [32, 64],
                     "iterations": [50, 600], "min_gpus": 1, "max_gpus": 24},
        "outages": {"rate_per_region_per_day": draw(st.sampled_from([0.0, 4.0])), "mean_duration_h": 0.5},
        "dynamics": {"links": "all", "mean_good_h": 0.3, "mean_bad_h": 0.3},
        "sim": {"horizon_h": 24 * 60, "checkpoint_interval_s": 600},
    })


def random_replanner(rng: np.random.Generator):
    """A hook that re-plans one random running job onto a random chain of held and free GPUs."""

    def hook(view: SimView) -> list[Plan]:
        running = [i for i in view.running if math.isnan(i.paused_until)]
        if not running or rng.random() < 0.3:
            return []
        info = running[int(rng.integers(len(running)))]
        held = view.gpus_held(info.job.job_id)
        free = view.free_gpus
        avail = {r: held.get(r, 0) + int(free[r]) for r in range(view.topo.num_regions) if not view.down[r]}
        avail = {r: g for r, g in avail.items() if g > 0}
        k = int(rng.integers(1, min(3, len(avail)) + 1))
        chain = [int(x) for x in rng.choice(sorted(avail), size=k, replace=False)]

        def evaluate(p: Plan, j: JobSpec) -> PlanPerf:
            try:
                return view.evaluate_replan(p)[0]
            except InvalidDecision as e:  # the current plan, or one that cannot be switched to
                return PlanPerf(feasible=False, reason=str(e))

        res = fit_plan(info.job, view.topo, chain, [int(rng.integers(1, avail[r] + 1)) for r in chain], evaluate)
        if res is None or res[0] == info.plan:
            return []
        try:
            view.evaluate_replan(res[0])
        except InvalidDecision:
            return []
        return [res[0]]

    return hook


def check_state(sim: Simulator) -> None:
    total = sim.topo.gpu_counts
    alloc = np.zeros_like(total)
    for jid in sim.running:
        js = sim.jobs[jid]
        plan_gpus = js.plan.gpus_by_region()
        for r, g in js.held.items():
            alloc[r] += g
            assert g >= plan_gpus.get(r, 0)
        if not js.paused:
            assert js.held == plan_gpus
    assert np.all(sim.free >= 0)
    assert np.array_equal(sim.free + alloc, total), "GPUs not conserved"
    check_link_load(sim)
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


@settings(max_examples=25, deadline=None)
@given(sc=scenarios(), seed=st.integers(0, 2**16))
def test_random_replans_keep_the_invariants(sc, seed):
    sim = make_simulator(sc, seed)
    rng = np.random.default_rng(seed)
    inner = random_replanner(rng)

    def hook(view: SimView) -> list[Plan]:
        check_state(sim)  # before the switch, after the link change's refresh
        return inner(view)

    sim.set_replanner(hook)
    last_t = sim.time
    steps = 0
    while not sim.done and steps < 5000:
        check_state(sim)
        view = sim.view()
        plan = None
        if view.waiting and rng.random() < 0.8:
            job = view.waiting[0]
            free = view.free_gpus
            chain = [r for r in range(sim.topo.num_regions) if free[r] > 0][:2]
            if chain:
                res = fit_plan(job, sim.topo, chain, [int(free[r]) for r in chain], view.evaluate)
                plan = None if res is None else res[0]
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
    assert all(r.finished for r in records)
    for rec, js in zip(records, sim.jobs):
        assert rec.finish >= rec.first_start + js.replan_pause_s - 1e-6
