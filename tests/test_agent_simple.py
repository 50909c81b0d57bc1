"""Random and cheapest-region baselines."""

from __future__ import annotations

from agent_worlds import job, region, world
from sfenv.agents.simple import CheapestRegionAgent, RandomAgent

from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.world.topology import Link


def test_cheapest_picks_the_cheapest_fitting_region():
    sim = world([region("dear", 32, "d"), region("cheap-small", 4, "c"), region("cheap", 16, "c2")],
                [Link(0, 1, 10, 10), Link(1, 2, 10, 10)],
                {"d": 100.0, "c": 10.0, "c2": 20.0}, [job(0, min_gpus=8, max_gpus=16)])
    plan = CheapestRegionAgent().decide(sim.view())
    assert plan.regions == (2,)  # the cheapest region with at least min_gpus free


def test_random_is_seeded_and_valid():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 10})
    reports = []
    for seed in (1, 1, 2):
        agent = RandomAgent()
        agent.reset(seed)
        reports.append(make_simulator(sc, 0).run(agent.decide))
    assert reports[0] == reports[1]
    assert reports[0] != reports[2]
    assert reports[0].finished == 10
