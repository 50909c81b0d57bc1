"""Every bundled scenario loads, is well formed, and runs an episode to completion."""

from __future__ import annotations

import networkx as nx
import pytest
from sfenv.agents.fifo import FIFOAgent

from sfenv.scenario import bundled_scenarios, load_scenario
from sfenv.sim import link_dynamics_for, make_simulator

EXPECTED = {"spider-8", "spider-16", "spider-32", "spider-64", "cee", "geo-8", "bace-6"}


def test_expected_scenarios_are_bundled():
    assert EXPECTED <= set(bundled_scenarios())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_is_well_formed_and_runs(name):
    sc = load_scenario(name)
    topo = sc.topology
    assert nx.is_connected(topo.graph)
    prices = sc.make_prices(None)
    assert {r.zone for r in topo.regions} <= set(prices.zones)
    sim = make_simulator(sc.with_overrides(workload={"num_jobs": 6}), 0)
    report = sim.run(FIFOAgent().decide)
    assert report.finished == 6 and report.cost_usd > 0 and report.energy_kwh > 0


@pytest.mark.parametrize("name", ["spider-16", "spider-32", "spider-64"])
def test_simulated_platforms_have_multi_hop_routes(name):
    topo = load_scenario(name).topology
    c = topo.num_regions
    assert topo.num_links < c * (c - 1) // 2  # not complete
    hops = [len(topo.route(a, b)) for a in range(c) for b in range(c) if a != b]
    assert max(hops) >= 3


def test_generated_topologies_are_stable():
    a, b = load_scenario("spider-32").topology, load_scenario("spider-32").topology
    assert [(ln.a, ln.b, ln.bandwidth_gbps, ln.latency_ms) for ln in a.links] == [
        (ln.a, ln.b, ln.bandwidth_gbps, ln.latency_ms) for ln in b.links
    ]


def test_cee_is_a_hierarchy_with_unstable_edges():
    sc = load_scenario("cee")
    tiers = {r.tier for r in sc.topology.regions}
    assert tiers == {"cloud", "edge", "end"}
    dyn = link_dynamics_for(sc)
    assert dyn is not None and len(dyn.links) >= 1
    slow = [ln for ln in sc.topology.links if ln.bandwidth_gbps <= 0.1]
    assert slow and all("cloud" in (sc.topology.regions[ln.a].tier, sc.topology.regions[ln.b].tier) for ln in slow)
