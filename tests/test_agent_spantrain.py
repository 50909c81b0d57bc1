"""SpanTrain: grouping, zero-bubble plans, and the adapter under a bandwidth drop."""

from __future__ import annotations

from agent_worlds import job, region, world
from sfenv.agents.spantrain import SpanTrainAgent

from sfenv.perf import Plan, Stage
from sfenv.scenario import load_scenario
from sfenv.topology import Link


def test_network_groups_on_cee():
    sc = load_scenario("cee")
    sim = sc.make_simulator(0)
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
