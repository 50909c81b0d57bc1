"""BACE-Pipe behaviour on constructed cases."""

from __future__ import annotations

from agent_worlds import job, region, world
from sfenv.agents.bace_pipe import BACEPipeAgent

from sfenv.topology import Link


def test_prefers_the_cheaper_of_two_equal_regions():
    for cheap in (0, 1):
        prices = {"z0": 30.0 if cheap == 0 else 90.0, "z1": 30.0 if cheap == 1 else 90.0}
        # two identical regions, each able to hold the job: equal-speed paths, only the price differs
        single = world([region("a", 32, "z0"), region("b", 32, "z1")], [Link(0, 1, 10, 10)], prices,
                       [job(0, min_gpus=8, max_gpus=32)])
        plan = BACEPipeAgent().decide(single.view())
        assert plan is not None and plan.regions == (cheap,)
        # a job bigger than either region: the path spans both, Cost-Min fills the cheap one first
        span = world([region("a", 24, "z0"), region("b", 24, "z1")], [Link(0, 1, 100, 1)], prices,
                     [job(0, model="gpt-6.7b", min_gpus=30, max_gpus=40)])
        by = BACEPipeAgent().decide(span.view()).gpus_by_region()
        assert by[cheap] > by[1 - cheap]


def test_no_head_of_line_blocking():
    # head job needs more GPUs than are free; small jobs behind it must start
    jobs = [job(0, model="gpt-13b", min_gpus=64, max_gpus=64), job(1, min_gpus=8, max_gpus=16, arrival=1.0),
            job(2, min_gpus=8, max_gpus=16, arrival=2.0)]
    sim = world([region("a", 32, "z0"), region("b", 16, "z0")], [Link(0, 1, 1, 50)], {"z0": 50.0}, jobs)
    agent = BACEPipeAgent()
    while len(sim.waiting) < 3:
        sim.wait()
    plan = agent.decide(sim.view())
    assert plan is not None and plan.job_id in (1, 2)
    # the FIFO-ordered ablation without priority still skips the infeasible head (no blocking either)
    assert BACEPipeAgent(priority=False).decide(sim.view()).job_id in (1, 2)


def test_ablation_switches_change_behaviour():
    # priority: a long job arrives first, a short one second; priority serves the short one first
    jobs = [job(0, iterations=5000, min_gpus=8, max_gpus=8), job(1, iterations=50, min_gpus=8, max_gpus=8, arrival=1.0)]
    sim = world([region("a", 8, "z0")], [], {"z0": 50.0}, jobs)
    while len(sim.waiting) < 2:
        sim.wait()
    assert BACEPipeAgent().decide(sim.view()).job_id == 1
    assert BACEPipeAgent(priority=False).decide(sim.view()).job_id == 0
    # pathfinder: the only second region sits behind a very slow link; the stall-free rule refuses it
    slow = world([region("a", 16, "z0"), region("b", 16, "z0")], [Link(0, 1, 0.01, 200)], {"z0": 50.0},
                 [job(0, model="gpt-6.7b", min_gpus=24, max_gpus=32)])
    assert BACEPipeAgent().decide(slow.view()) is None
    plan = BACEPipeAgent(pathfinder=False).decide(slow.view())
    assert plan is not None and len(plan.regions) == 2
    # cost_min: fill by price vs by capacity
    prices = {"z0": 90.0, "z1": 20.0}
    cm = world([region("a", 24, "z0"), region("b", 20, "z1")], [Link(0, 1, 100, 1)], prices,
               [job(0, model="gpt-6.7b", min_gpus=30, max_gpus=40)])
    with_cm = BACEPipeAgent().decide(cm.view()).gpus_by_region()
    without = BACEPipeAgent(cost_min=False).decide(cm.view()).gpus_by_region()
    assert with_cm.get(1, 0) > without.get(1, 0)
