"""Stragglers (issue 31 §2): slow GPUs slow the stage they serve, as seeded events; off by default."""

from __future__ import annotations

import math

import numpy as np
import pytest
from agent_worlds import job, region
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.errors import SfenvError
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.scenario import load_scenario
from sfenv.sim import SimConfig, Simulator, SimView, make_simulator
from sfenv.sim.events import Straggler
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Topology

PRICES = PriceSeries(["z"], np.array([[50.0] * 24]))


def _world(stragglers: list[Straggler], config: SimConfig | None = None) -> Simulator:
    regions = [region("a", 8, "z"), region("b", 8, "z")]
    jobs = [job(0, min_gpus=8, max_gpus=8, batch=64, iterations=2000)]
    return Simulator(Topology(regions, [Link(0, 1, 10, 30)]), PRICES, jobs, config or SimConfig(),
                     stragglers=stragglers)


def _watch(sim: Simulator, plan: Plan) -> list[tuple[float, float]]:
    """Start ``plan``, run to the end; (time, iteration time in the view) at each re-plan call."""
    seen: list[tuple[float, float]] = []

    def hook(view: SimView) -> list[Plan]:
        seen.extend((view.time, info.iter_time) for info in view.running)
        return []

    sim.schedule(plan)
    sim.run(lambda v: None, replan=hook)
    return seen


def test_a_straggler_slows_its_stage_by_the_factor_and_clears():
    # one stage of 8 replicas, the all-reduce fully overlapped: the iteration is m c, so x2 exactly
    cfg = SimConfig(perf=PerfParams(dp_overlap=1.0))
    sim = _world([Straggler(0, 100.0, 200.0, 0.3, 2.0)], config=cfg)
    plan = Plan(0, (Stage.at(0, 24, dp=8),))
    base = sim.evaluate(plan).iter_time
    seen = _watch(sim, plan)
    assert seen[0] == (100.0, pytest.approx(2.0 * base, rel=1e-12))
    assert seen[1] == (300.0, base)
    assert sim.stragglers.hits == 1
    js = sim.jobs[0]
    assert js.status == "done"
    # the run: base until 100 s, twice as slow for 200 s, base again
    done = 100.0 / base + 200.0 / (2.0 * base)
    assert js.finish == pytest.approx(300.0 + (2000 - done) * base, rel=1e-9)


def test_a_straggler_on_a_pipeline_stage_slows_that_stage_as_the_model_says():
    plan = Plan(0, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4)))
    # region b's GPU 0 serves stage 1; a second straggler on an idle GPU of a does nothing
    sim = _world([Straggler(1, 50.0, 100.0, 0.0, 1.5), Straggler(0, 60.0, 10.0, 0.9, 3.0)])
    base = sim.evaluate(plan).iter_time
    seen = _watch(sim, plan)
    expect = evaluate_plan(plan, sim.jobs[0].spec, sim.topo, sim.params, stage_slowdown=(1.0, 1.5)).iter_time
    assert [t for t, _ in seen] == [50.0, 150.0] and sim.stragglers.hits == 1
    assert seen[0][1] == pytest.approx(expect, rel=1e-6) and seen[0][1] > base
    assert seen[1][1] == pytest.approx(base, rel=1e-6)


def test_stage_slowdown_of_ones_is_the_plain_evaluation():
    sim = _world([])
    plan = Plan(0, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4)))
    spec = sim.jobs[0].spec
    plain = evaluate_plan(plan, spec, sim.topo, sim.params)
    assert evaluate_plan(plan, spec, sim.topo, sim.params, stage_slowdown=(1.0, 1.0)) == plain
    assert not evaluate_plan(plan, spec, sim.topo, sim.params, stage_slowdown=(2.0,)).feasible


def _scenario(rate: float | None):
    over = {"workload": {"num_jobs": 6}, "sim": {"horizon_h": 48.0}}
    if rate is not None:
        over["stragglers"] = {"rate_per_gpu_per_day": rate, "slowdown": 2.0, "mean_duration_h": 2.0}
    return load_scenario("cee").with_overrides(**over)


def _play(sc, seed: int, replan: bool) -> tuple[dict, int, int, int]:
    """Report, re-plans, straggler hits and re-planning calls of a SpanTrain episode."""
    sim = make_simulator(sc, seed)
    agent = SpanTrainAgent(replan_running=replan)
    calls = [0]

    def hook(view: SimView) -> list[Plan]:
        calls[0] += 1
        return agent.replan(view)

    report = sim.run(agent.decide, replan=hook if replan else None)
    return report.to_dict(), sim.replans, sim.stragglers.hits, calls[0]


def test_off_is_bit_identical_and_keeps_the_hash():
    from sfenv.runs.results import scenario_hash

    off, zero = _scenario(None), _scenario(0.0)
    assert "stragglers" not in off.cfg.model_dump() and off.cfg.stragglers is None
    assert _play(off, 3, False) == _play(zero, 3, False)
    assert scenario_hash(off) != scenario_hash(_scenario(0.5))


def test_on_is_deterministic_per_seed_and_a_replanning_agent_sees_it():
    on, off = _scenario(0.5), _scenario(None)
    a, b = _play(on, 3, True), _play(on, 3, True)
    assert a == b and a[2] > 0
    base = _play(off, 3, True)
    # the agent is asked after every straggler that hit a job, and its episode differs
    assert a[0] != base[0] and a[3] >= base[3] + a[2]


def test_bounds_and_event_budget():
    with pytest.raises(SfenvError, match="slowdown"):
        _scenario(None).with_overrides(stragglers={"rate_per_gpu_per_day": 1.0, "slowdown": 11.0})
    with pytest.raises(SfenvError, match="rate_per_gpu_per_day"):
        _scenario(None).with_overrides(stragglers={"rate_per_gpu_per_day": 25.0})
    with pytest.raises(SfenvError, match="straggler starts and ends"):
        _scenario(None).with_overrides(stragglers={"rate_per_gpu_per_day": 24.0}, sim={"horizon_h": 8760.0})
    assert math.isfinite(_scenario(24.0).cfg.stragglers.rate_per_gpu_per_day)
