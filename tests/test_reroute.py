"""Re-routing running jobs (``sim.routing: adaptive``, sfenv.sim.reroute) on test_routing's three-region WAN.

A two-stage pipeline from a to b starts alone and takes the direct link (20 ms; the relay a-c-b is
2 x 12 ms).  Then the direct link's capacity falls to a twentieth.  Under ``load`` the pipeline keeps
its pinned route; under ``adaptive`` it moves to the relay, and its rates, load, flows and egress bill
follow from that moment.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_routing import A_C, C_B, DIRECT, PARAMS, PRICES_PER_GB, _world

from sfenv.model.flowcheck import simulate_jobs
from sfenv.model.perf import evaluate_plan, plan_flows
from sfenv.model.traffic import egress_usd_per_iter
from sfenv.runs.results import scenario_hash
from sfenv.scenario import load_scenario
from sfenv.sim import Simulator, make_simulator
from sfenv.sim.reroute import REROUTE_MIN_GAIN
from sfenv.world.egress import BYTES_PER_GB

RELAY = ((A_C, C_B), (C_B, A_C))


def _narrow_direct_link(sim, factor: float) -> None:  # type: ignore[no-untyped-def]
    """What a capacity change does (sfenv.sim.handlers.on_bandwidth), without the next flip."""
    sim.links.factor[DIRECT] = factor
    sim.refresh({2 * DIRECT, 2 * DIRECT + 1})


@pytest.mark.parametrize("routing", ["load", "adaptive"])
def test_a_running_job_leaves_a_narrowed_link_only_under_adaptive(routing: str) -> None:
    sim, _, pipe = _world(routing)
    sim.schedule(pipe)
    js = sim.jobs[1]
    assert js.plan is not None and js.plan.routes == ((DIRECT,), (DIRECT,))  # alone: the shorter route
    before = js.perf.iter_time
    _narrow_direct_link(sim, 0.05)
    if routing == "load":
        assert js.plan.routes == ((DIRECT,), (DIRECT,)) and sim.reroutes == 0
        assert js.perf.iter_time > 1.2 * before  # it pays for the narrow link
        return
    assert js.plan.routes == RELAY and sim.reroutes == 1
    assert js.plan.unrouted() == pipe  # only the routes changed: the same stages, GPUs and schedule
    # the link state, the flows the simulator keeps and the rates follow the relay
    assert set(sim.links.jobs[1].links.tolist()) == set(plan_flows(js.plan, sim.topo)) == set(js.flows)
    expected = evaluate_plan(js.plan, js.spec, sim.topo, PARAMS, sim.links.directed_capacity_bps,
                             sim.links.without(1))
    assert js.perf.iter_time == pytest.approx(expected.iter_time, rel=1e-9)
    assert js.perf.iter_time < 1.2 * before
    # the flow check, played on the new routes, agrees with the fast path
    played = simulate_jobs(sim.topo, [(js.plan, js.spec)], PARAMS, iterations=3, warmup=1,
                           capacity_bps=sim.links.directed_capacity_bps)
    assert abs(js.perf.iter_time / played[0] - 1.0) <= 0.05


def test_the_egress_bill_changes_routes_at_the_move() -> None:
    """Bytes sent before the move are billed on the direct link, those after it on the relay's hops."""
    sim, _, pipe = _world("adaptive")
    sim.schedule(pipe)
    js = sim.jobs[1]
    price = PRICES_PER_GB / BYTES_PER_GB
    direct_usd = egress_usd_per_iter(js.plan, js.spec, sim.topo, price)
    assert js.egress_usd_per_iter == pytest.approx(direct_usd, rel=1e-12)
    it_direct = js.perf.iter_time
    sim.time = 100.0  # the engine's clock, moved by hand: a change 100 s after the start
    _narrow_direct_link(sim, 0.05)
    relay_usd = egress_usd_per_iter(js.plan, js.spec, sim.topo, price)
    assert js.plan.routes == RELAY and js.egress_usd_per_iter == pytest.approx(relay_usd, rel=1e-12)
    assert relay_usd != pytest.approx(direct_usd)
    sim.time = 250.0
    sim.billing.accrue(js, sim.time)
    billed = 100.0 / it_direct * direct_usd + 150.0 / js.perf.iter_time * relay_usd
    assert js.egress_usd == pytest.approx(billed, rel=1e-9)


def test_a_move_needs_more_than_the_minimum_gain() -> None:
    """Back on a partly recovered direct link the job stays on the relay while the direct link would save it
    less than REROUTE_MIN_GAIN, and returns once it saves more (at full capacity: the relay's extra 4 ms)."""
    sim, _, pipe = _world("adaptive")
    sim.schedule(pipe)
    js = sim.jobs[1]
    _narrow_direct_link(sim, 0.05)
    assert js.plan.routes == RELAY
    direct = js.plan.unrouted().with_routes(((DIRECT,), (DIRECT,)))

    def gain(factor: float) -> float:  # what the direct link would save the job at this capacity factor
        bw = sim.topo.link_bw_bps.copy()
        bw[DIRECT] *= factor
        cap, others = np.repeat(bw, 2), sim.links.without(1)
        on_relay = evaluate_plan(js.plan, js.spec, sim.topo, PARAMS, cap, others).iter_time
        return 1.0 - evaluate_plan(direct, js.spec, sim.topo, PARAMS, cap, others).iter_time / on_relay

    small = [f for f in np.linspace(0.05, 1.0, 96) if 0.0 < gain(f) < REROUTE_MIN_GAIN]
    assert small and gain(1.0) > REROUTE_MIN_GAIN
    _narrow_direct_link(sim, float(small[-1]))
    assert js.plan.routes == RELAY and sim.reroutes == 1  # better, by too little
    _narrow_direct_link(sim, 1.0)
    assert js.plan.routes == ((DIRECT,), (DIRECT,)) and sim.reroutes == 2


def test_a_ring_started_next_moves_the_pipeline_only_if_it_gains() -> None:
    """The ring then the pipeline, as in test_routing: under adaptive the ring, alone on the direct link,
    stays put; the pipeline takes the relay at its start, as under load: nothing moves when nothing gains."""
    sim, ring, pipe = _world("adaptive")
    sim.schedule(ring)
    sim.schedule(pipe)
    assert sim.jobs[0].plan.routes == ((DIRECT,), (DIRECT,)) and sim.jobs[1].plan.routes == RELAY
    assert sim.reroutes == 0


def _ring_then_long_pipe(routing: str) -> Simulator:
    """test_routing's world with a short ring (5 iterations) and a long pipeline (100), both started at 0."""
    sim, ring, pipe = _world(routing)
    jobs = [replace(sim.jobs[0].spec, iterations=5), replace(sim.jobs[1].spec, iterations=100)]
    sim = Simulator(sim.topo, sim.prices, jobs, sim.config, egress_usd_per_byte=PRICES_PER_GB / BYTES_PER_GB)
    sim.schedule(ring)
    sim.schedule(pipe)
    return sim


def test_the_pipeline_moves_back_when_the_ring_ends_and_episodes_repeat() -> None:
    """The ring's end frees the direct link: under adaptive the pipeline moves back to it (by the event, not by
    hand) and finishes sooner than under load; the same episode twice gives the same report."""
    ends = {}
    for routing in ("load", "adaptive", "adaptive"):
        sim = _ring_then_long_pipe(routing)
        assert sim.jobs[1].plan.routes == RELAY
        report = sim.run(lambda view: None)
        assert report.finished == 2
        expected = ((DIRECT,), (DIRECT,)) if routing == "adaptive" else RELAY
        assert sim.jobs[1].plan.routes == expected and sim.reroutes == (routing == "adaptive")
        ends.setdefault(routing, []).append(report)
    load, adaptive = ends["load"][0], ends["adaptive"][0]
    assert adaptive == ends["adaptive"][1]
    assert adaptive.mean_jct_s < load.mean_jct_s
    assert adaptive.egress_usd != pytest.approx(load.egress_usd)  # the bytes after the move paid the direct price


def test_bundled_episodes_are_unchanged_when_no_route_gains() -> None:
    """On geo-8-contended (30 jobs) no running job ever gains 1 % by moving: adaptive plays load's episode."""
    from sfenv.agents.registry import make_agent

    reports = {}
    for routing in ("load", "adaptive"):
        sc = load_scenario("geo-8-contended").with_overrides(sim={"routing": routing}, workload={"num_jobs": 30})
        agent = make_agent("spinsearch")
        agent.reset(10000)
        sim = make_simulator(sc, 10000)
        reports[routing] = (sim.run(agent.decide), sim.reroutes)
    assert reports["adaptive"] == reports["load"] and reports["load"][1] == 0
    base = load_scenario("geo-8-contended")
    assert scenario_hash(base.with_overrides(sim={"routing": "adaptive"})) != scenario_hash(
        base.with_overrides(sim={"routing": "load"}))
