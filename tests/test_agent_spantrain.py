"""SpanTrain: grouping, zero-bubble plans, the adapter under a bandwidth drop and its run-time re-plans."""

from __future__ import annotations

import numpy as np
import pytest
from agent_worlds import job, region, world
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.model.perf import Plan, Stage
from sfenv.scenario import load_scenario
from sfenv.sim import LinkDynamics, SimConfig, Simulator, make_simulator
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Topology


def test_network_groups_on_cee():
    sc = load_scenario("cee")
    sim = make_simulator(sc, 0)
    groups = SpanTrainAgent().groups(sim.view())
    names = [{sim.topo.regions[r].name for r in g} for g in groups]
    assert {"cloud-0", "cloud-1"} in names
    assert {"edge-0", "edge-1", "end-0", "end-1", "end-2"} in names


def test_plans_use_zero_bubble_schedules():
    sim = world([region("a", 16, "z")], [], {"z": 50.0}, [job(0, min_gpus=8, max_gpus=16)])
    plan = SpanTrainAgent().decide(sim.view())
    assert plan is not None and plan.schedule in ("zb-h1", "zb-h2")


def test_adapter_recovers_throughput_after_bandwidth_drop():
    sim = world([region("a", 8, "z"), region("b", 8, "z")], [Link(0, 1, 10, 30)], {"z": 50.0},
                [job(0, min_gpus=2, max_gpus=16, batch=64)])
    plan = Plan(0, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4)), micro_batch=1, schedule="zb-h1")
    agent = SpanTrainAgent()
    before = sim.view().evaluate(plan)
    sim.link_factor[0] = 0.05  # the link drops to 5 % of its bandwidth
    view = sim.view()
    dropped = view.evaluate(plan)
    adapted = agent.adapt(plan, view.job(0), view)
    after = view.evaluate(adapted)
    assert dropped.throughput < before.throughput
    assert adapted != plan and after.feasible
    assert after.throughput > dropped.throughput


def _dropping_world(config: SimConfig | None = None) -> Simulator:
    """Two 8-GPU regions over a 10 Gbit/s, 30 ms link that drops to 5 % (seeded two-state dynamics).

    The job arrives at 900 s, during the link's first drop (with this seed): its plan is tuned for
    the dropped link (a transfer-bound pipeline gains nothing from a wider in-flight window), and
    the link's recovery makes re-tuning pay (a wider window hides the round trips again).
    """
    regions = [region("a", 8, "z"), region("b", 8, "z")]
    prices = PriceSeries(["z"], np.array([[50.0] * 24]))
    dyn = LinkDynamics((0,), low_factor=0.05, mean_good_s=600.0, mean_bad_s=3600.0)
    jobs = [job(0, min_gpus=16, max_gpus=16, batch=64, iterations=3000, arrival=900.0)]
    return Simulator(Topology(regions, [Link(0, 1, 10, 30)]), prices, jobs, config or SimConfig(),
                     dynamics=dyn, rng=np.random.default_rng(0))


def _run_with_hook(agent: SpanTrainAgent, config: SimConfig | None, record) -> Simulator:
    sim = _dropping_world(config)

    def hook(view):
        plans = agent.replan(view)
        if plans:
            record(view, plans)
        return plans

    sim.run(agent.decide, replan=hook)
    return sim


def _run(agent: SpanTrainAgent, config: SimConfig | None = None) -> tuple[Simulator, list[tuple[float, float]]]:
    """Run the dropping world; returns the simulator and (time, link factor) at each re-plan."""
    seen: list[tuple[float, float]] = []
    sim = _run_with_hook(agent, config, lambda view, plans: seen.extend(
        (view.time, float(view.link_capacity_bps[0] / 10e9)) for _ in plans))
    return sim, seen


def test_spantrain_replans_after_a_bandwidth_drop_and_pays_the_switch():
    sim, seen = _run(SpanTrainAgent())
    js = sim.jobs[0]
    assert sim.replans == js.replans >= 1 and js.status == "done"
    # switches follow link changes (to 5 % or back to full bandwidth): re-tuned for the new state
    assert all(f == pytest.approx(0.05) or f == pytest.approx(1.0) for _, f in seen)
    assert js.replan_pause_s == pytest.approx(js.replans * sim.config.replan_restart_s)  # stages kept
    # the same switches made for free (replayed at the same link changes) finish earlier by the
    # pauses, and spend less energy
    switches: dict[float, list[Plan]] = {}
    recorder = SpanTrainAgent()
    _run_with_hook(recorder, None, lambda view, plans: switches.setdefault(view.time, plans))
    agent = SpanTrainAgent()
    free = _dropping_world(SimConfig(replan_restart_s=0.0, replan_state_bytes_per_param=0.0))
    free.run(agent.decide, replan=lambda view: switches.get(view.time, []))
    assert free.replans == js.replans and free.jobs[0].replan_pause_s == 0.0
    # (not by exactly the pauses: a pause shifts later work across link changes, which run at other rates)
    assert js.finish > free.jobs[0].finish
    assert free.jobs[0].energy_j < js.energy_j
    # without re-planning the job keeps the plan it started with and finishes later than with it
    static, none = _run(SpanTrainAgent(replan_running=False))
    assert none == [] and static.replans == 0
    assert static.jobs[0].finish > js.finish
    assert static.jobs[0].plan != js.plan


def test_spantrain_does_not_switch_when_the_gain_is_below_the_pause():
    sim, seen = _run(SpanTrainAgent(replan_margin=1e6))
    assert seen == [] and sim.replans == 0
