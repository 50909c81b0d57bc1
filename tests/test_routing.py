"""Load-aware routing (``sim.routing: load``, sfenv.model.routing) on a constructed three-region WAN.

Regions a, b, c; the direct link a-b (20 ms) is the shortest route, the relay a-c-b (2 x 12 ms) the
other, every link 10 Gbit/s.  Job 0 runs a data-parallel ring across a and b on the direct link;
job 1, a two-stage pipeline from a to b, starts next.  Under ``static`` both take the direct link;
under ``load`` job 1 takes the relay, and its egress bill, its load on the links and the flow check
all follow the relay.
"""

from __future__ import annotations

import numpy as np
import pytest

from sfenv.model.flowcheck import simulate_jobs
from sfenv.model.perf import PerfParams, Plan, Stage, plan_flow_groups, plan_flows
from sfenv.model.routing import candidate_routes
from sfenv.model.traffic import hop_bytes_per_iter, pair_bytes_per_iter
from sfenv.runs.replay import plan_from_json, plan_to_json
from sfenv.runs.results import scenario_hash
from sfenv.scenario import ScenarioError, load_scenario
from sfenv.sim import Simulator
from sfenv.sim.state import SimConfig
from sfenv.world.egress import BYTES_PER_GB
from sfenv.world.hardware import get_gpu
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

GPU = get_gpu("A100-80GB")
DIRECT, A_C, C_B = 0, 1, 2  # link indices
#: USD/GB from row region to column region: the direct link is dear, every relay hop priced apart
PRICES_PER_GB = np.array([[0.0, 0.09, 0.01],
                          [0.08, 0.0, 0.03],
                          [0.04, 0.02, 0.0]])
PARAMS = PerfParams(dp_overlap=0.0)  # a timeline the flow check plays (0 or 1)


def _world(routing: str) -> tuple[Simulator, Plan, Plan]:
    topo = Topology([Region(n, GPU, 64, "z") for n in "abc"],
                    [Link(0, 1, 10.0, 20.0), Link(0, 2, 10.0, 12.0), Link(2, 1, 10.0, 12.0)])
    model = MODEL_ZOO["gpt-1.3b"]
    jobs = [JobSpec(0, model, 64, 20, 0.0, 1, 256), JobSpec(1, model, 128, 20, 0.0, 1, 256)]
    sim = Simulator(topo, PriceSeries(["z"], np.full((1, 24), 50.0)), jobs, SimConfig(perf=PARAMS, routing=routing),
                    egress_usd_per_byte=PRICES_PER_GB / BYTES_PER_GB)
    ring = Plan(0, (Stage(24, ((0, 4), (1, 4))),), recompute="full")
    pipe = Plan(1, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4)), recompute="full")
    return sim, ring, pipe


def test_the_candidates_are_the_widest_and_the_lowest_latency_paths():
    sim, _, _ = _world("load")
    assert candidate_routes(sim.topo, 0, 1) == ((DIRECT,), (A_C, C_B))
    with pytest.raises(ValueError, match="both 0"):
        candidate_routes(sim.topo, 0, 0)


@pytest.mark.parametrize("routing", ["static", "load"])
def test_a_new_job_avoids_the_loaded_shortest_route_only_under_load(routing):
    sim, ring, pipe = _world(routing)
    sim.schedule(ring)
    # what an agent sees of the unrouted candidate is the plan on the routes it would be pinned to now
    pinned_now = sim.links.routed(pipe, sim.jobs[1].spec)
    assert sim.evaluate(pipe).iter_time == sim.evaluate(pinned_now).iter_time
    sim.schedule(pipe)
    first, second = sim.jobs[0].plan, sim.jobs[1].plan
    assert first is not None and second is not None
    if routing == "static":
        assert first.routes == second.routes == ()  # nothing pinned: Topology.route_for, as before
        assert {g.links for g in plan_flow_groups(second, sim.topo, sim.jobs[1].spec)} == {(0,), (1,)}
        return
    # the ring started alone: the direct link (shorter, equal rate); the pipeline then takes the relay
    assert first.routes == ((DIRECT,), (DIRECT,))
    assert second.routes == ((A_C, C_B), (C_B, A_C))
    relay_fwd = sim.topo.directed_route(0, 1, (A_C, C_B))
    relay_bwd = sim.topo.directed_route(1, 0, (C_B, A_C))
    assert {g.links for g in plan_flow_groups(second, sim.topo, sim.jobs[1].spec)} == {relay_fwd, relay_bwd}
    # the link state carries job 1 on the relay only, and the flows the simulator keeps agree
    assert set(sim.links.jobs[1].links.tolist()) == set(relay_fwd) | set(relay_bwd)
    assert set(sim.jobs[1].flows) == set(relay_fwd) | set(relay_bwd) == set(plan_flows(second, sim.topo))
    assert second == pinned_now  # the routes the candidate was evaluated on are the ones it runs on


def test_load_routing_beats_static_on_this_case():
    times = {}
    for routing in ("static", "load"):
        sim, ring, pipe = _world(routing)
        sim.schedule(ring)
        sim.schedule(pipe)
        times[routing] = [sim.jobs[j].perf.iter_time for j in (0, 1)]
    assert times["load"][0] < 0.95 * times["static"][0]  # the ring has the direct link to itself
    assert times["load"][1] <= times["static"][1]


@pytest.mark.parametrize("routing", ["static", "load"])
def test_the_egress_bill_follows_the_route_taken(routing):
    sim, ring, pipe = _world(routing)
    sim.schedule(ring)
    sim.schedule(pipe)
    js = sim.jobs[1]
    assert js.plan is not None
    pairs = pair_bytes_per_iter(js.plan, js.spec)
    forward, backward = pairs[(0, 1)], pairs[(1, 0)]
    if routing == "static":  # a -> b and b -> a on the direct link
        expected = forward * 0.09 + backward * 0.08
        assert set(hop_bytes_per_iter(js.plan, js.spec, sim.topo)) == {(0, 1), (1, 0)}
    else:  # a -> c -> b forward, b -> c -> a back: every relay hop billed at its own price
        expected = forward * (0.01 + 0.02) + backward * (0.03 + 0.04)
        assert set(hop_bytes_per_iter(js.plan, js.spec, sim.topo)) == {(0, 2), (2, 1), (1, 2), (2, 0)}
    assert js.egress_usd_per_iter == pytest.approx(expected / BYTES_PER_GB, rel=1e-12)
    # the view bills an unrouted candidate on the routes it would get now (job 1 is running: the same
    # load as at its start is not there any more, so only the static case must match)
    if routing == "static":
        assert sim.view().plan_egress_usd_per_iter(pipe) == pytest.approx(js.egress_usd_per_iter, rel=1e-12)


def test_the_flow_check_plays_the_pinned_routes_and_agrees_with_the_fast_path():
    sim, ring, pipe = _world("load")
    sim.schedule(ring)
    sim.schedule(pipe)
    jobs = [(sim.jobs[j].plan, sim.jobs[j].spec) for j in (0, 1)]
    fast = [sim.jobs[j].perf.iter_time for j in (0, 1)]
    played = simulate_jobs(sim.topo, jobs, PARAMS, iterations=3, warmup=1)
    for f, t in zip(fast, played):
        assert abs(f / t - 1.0) <= 0.05, (f, t)
    # the check honours the pins: played on the static routes, the ring shares its link and slows down
    unpinned = simulate_jobs(sim.topo, [(p.unrouted(), j) for p, j in jobs], PARAMS, iterations=3, warmup=1)
    assert unpinned[0] > 1.05 * played[0]


def test_pinned_routes_are_checked_and_survive_an_action_log():
    sim, ring, pipe = _world("load")
    sim.schedule(ring)
    sim.schedule(pipe)
    routed = sim.jobs[1].plan
    assert routed is not None
    assert plan_from_json(plan_to_json(routed)) == routed
    assert "routes" not in plan_to_json(pipe)  # logs of unrouted plans keep their former fields
    assert routed.unrouted() == pipe and routed.shape_key != pipe.shape_key  # caches key on the routes
    with pytest.raises(ValueError, match="routes"):
        plan_flow_groups(pipe.with_routes([(A_C, C_B)]), sim.topo, sim.jobs[1].spec)
    with pytest.raises(ValueError, match="does not leave"):
        plan_flow_groups(pipe.with_routes([(C_B,), (C_B, A_C)]), sim.topo, sim.jobs[1].spec)


def test_the_routing_option_validates():
    assert load_scenario("spider-8").cfg.sim.routing == "static"
    sc = load_scenario("spider-8").with_overrides(sim={"routing": "load"})
    assert sc.cfg.sim.routing == "load"
    base = load_scenario("spider-8")  # static leaves the scenario's hash as before the option; load changes it
    assert scenario_hash(base.with_overrides(sim={"routing": "static"})) == scenario_hash(base) != scenario_hash(sc)
    assert "routing" not in base.cfg.model_dump()["sim"]
    with pytest.raises(ScenarioError, match=r"sim\.routing.*did you mean 'load'"):
        load_scenario("spider-8").with_overrides(sim={"routing": "laod"})
    with pytest.raises(ValueError, match="routing"):
        SimConfig(routing="shortest")


def test_a_replan_routes_the_new_plan_without_the_jobs_old_flows():
    """Job 1 re-plans to two micro-batches per transfer: its new plan is pinned (on the relay: the ring still
    loads the direct link), its old flows leave, and re-planning to the same stages is refused."""
    sim, ring, pipe = _world("load")
    sim.schedule(ring)
    sim.schedule(pipe)
    with pytest.raises(ValueError, match="already runs"):
        sim.replan(pipe)  # the same stages, unrouted: not a new plan
    new = Plan(1, pipe.stages, micro_batch=2, recompute="full")
    sim.replan(new)
    js = sim.jobs[1]
    assert js.plan is not None and js.plan.unrouted() == new
    assert js.plan.routes == ((A_C, C_B), (C_B, A_C))
    assert set(sim.links.jobs[1].links.tolist()) == set(plan_flows(js.plan, sim.topo))
