"""Measured per-VM-pair rates (issue 31 §4): a flow runs at most at its direction's measured rate; the WAN-share report.

The Skyplane grid gives one VM pair's iperf3 goodput per direction; geo-8's links keep the scaled
capacity their flows share, and each flow (one replica pair) is capped at the measured rate.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from pathlib import Path

import pytest
from sfenv.experiments.validate_model import _free_wan, wan_share

from sfenv.model.perf import ACT_BYTES, PerfParams, Plan, Stage, _evaluate_general, _Wan, evaluate_plan
from sfenv.model.sharing import transport_cap_bps
from sfenv.scenario import load_scenario
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

DATA = Path(os.environ.get("SFENV_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
GRID = DATA / "network" / "skyplane_grid_jan2022_8regions.csv"
JOB = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 256, 10, 0.0, 1, 256)
PARAMS = PerfParams(memory_headroom=1.0)


def _topo(ab: float | None, ba: float | None, gbps: float = 40.0) -> Topology:
    regions = [Region("a", get_gpu("A100-80GB"), 64, "z"), Region("b", get_gpu("A100-80GB"), 64, "z")]
    return Topology(regions, [Link(0, 1, gbps, 20.0, ab, ba)])


def _window_bps(one_way_ms: float) -> float:
    """TCP's window bound of one transfer over a hop of ``one_way_ms`` (the defaults: 16 streams of 3 MiB)."""
    return transport_cap_bps(2 * one_way_ms / 1e3, PARAMS.wan_streams, PARAMS.tcp_window_bytes)


def _act_bits(micro_batch: int = 1) -> float:
    return ACT_BYTES * micro_batch * JOB.model.seq_len * JOB.model.hidden * 8.0


@pytest.mark.parametrize(("dp", "rate_gbps", "server_gbps"), [(1, 4.0, 4.0), (8, 4.0, 0.5), (16, 40.0 / 16, 0.5)])
def test_a_hop_runs_at_the_slower_directions_pair_rate_or_its_share(dp, rate_gbps, server_gbps):
    """Each replica pair at the slower direction's VM-pair rate or its share of the link (``member``, env v5's); under
    ``server`` (env v6's) the replica pairs of one server (8 at tp 1) share that rate: dp 8 on one server, 16 on two."""
    plan = Plan(0, (Stage.at(0, 12, dp=dp), Stage.at(1, 12, dp=dp)))
    capped = evaluate_plan(plan, JOB, _topo(8.0, 4.0), dataclasses.replace(PARAMS, vm_pair_cap="member"))
    assert capped.transfer_times[0] == pytest.approx(_act_bits() / (rate_gbps * 1e9), rel=1e-12)
    per_server = evaluate_plan(plan, JOB, _topo(8.0, 4.0), PARAMS)
    assert per_server.transfer_times[0] == pytest.approx(_act_bits() / (server_gbps * 1e9), rel=1e-12)
    nominal = evaluate_plan(plan, JOB, _topo(None, None), PARAMS)  # the scaled capacity (and TCP's window) alone
    assert nominal.transfer_times[0] == pytest.approx(_act_bits() / min(40e9 / dp, _window_bps(20.0)), rel=1e-12)
    assert capped.iter_time >= nominal.iter_time


def test_rings_and_spanning_stages_are_capped_on_the_general_path_too():
    # a stage spanning both regions: its two-region ring runs both ways, at most the slower pair rate
    plan = Plan(0, (Stage(24, ((0, 1), (1, 1))),))
    capped = evaluate_plan(plan, JOB, _topo(8.0, 4.0), PARAMS)
    wide = evaluate_plan(plan, JOB, _topo(None, None), PARAMS)
    assert capped.bottleneck_bw_bps == 4e9 and wide.bottleneck_bw_bps == pytest.approx(_window_bps(20.0), rel=1e-12)
    assert capped.allreduce_times[0] > wide.allreduce_times[0]
    # chain plans: the fast path and the general path agree on a capped hop, per member (env v5) and per server
    chain = Plan(0, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)))
    topo = _topo(8.0, 4.0)
    for params, rate in ((dataclasses.replace(PARAMS, vm_pair_cap="member"), 4e9), (PARAMS, 2e9)):
        a = evaluate_plan(chain, JOB, topo, params)
        b = _evaluate_general(chain, JOB, topo, params, _Wan(chain, JOB, topo, params, None, None, None))
        assert a.transfer_times == b.transfer_times == [_act_bits() / rate] and a.iter_time == b.iter_time


def test_a_relayed_route_runs_at_its_slowest_hop():
    regions = [Region(n, get_gpu("A100-80GB"), 64, "z") for n in "abc"]
    topo = Topology(regions, [Link(0, 1, 100.0, 5.0, 9.0, 9.0), Link(1, 2, 100.0, 5.0, 3.0, 7.0),
                              Link(0, 2, 1.0, 5.0)])
    assert topo.flow_cap_bps(0, topo.route_links[0][2]) == 3e9  # a -> b -> c: the b -> c VM pair
    assert topo.flow_cap_bps(2, topo.route_links[2][0]) == 7e9  # c -> b -> a
    assert topo.flow_cap_bps(0, topo.route_links[0][2], both_ways=True) == 3e9


def test_geo8_links_follow_the_measured_directed_pair_rates():
    topo = load_scenario("geo-8").topology
    assert topo.has_pair_caps
    names = topo.region_names
    east, au = names.index("aws-us-east-1"), names.index("azure-australiaeast")
    # the grid's one-VM-pair goodputs: 3.10 Gbit/s east -> Sydney, 1.51 back; the link shares 4 x 1.51
    assert topo.pair_cap_bps[east, au] == 3.1e9 and topo.pair_cap_bps[au, east] == 1.51e9
    link = topo.links[topo.link_between(east, au)]
    assert link.bandwidth_gbps == 6.06
    # one replica pair from us-east-1 to Sydney: the route relays through canadacentral (wider than the
    # direct link), so the flow runs at the slowest of its four directed VM-pair rates, 4.69 Gbit/s
    # (us-east-1 -> canadacentral), not at a share of the links' scaled capacity (18.78 and 38.04)
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, 10, 0.0, 1, 64)
    canada = names.index("azure-canadacentral")
    act = ACT_BYTES * job.model.seq_len * job.model.hidden
    assert topo.route_for(east, au, act)[0] == (topo.link_between(east, canada), topo.link_between(canada, au))
    perf = evaluate_plan(Plan(0, (Stage.at(east, 12, tp=8), Stage.at(au, 12, tp=8))), job, topo, PARAMS)
    # ... or below it, TCP's window over the relay's longest hop (each relay terminates the connections)
    longest_ms = max(topo.links[k].latency_ms for k in topo.route_for(east, au, act)[0])
    rate = min(4.69e9, _window_bps(longest_ms))
    assert perf.transfer_times[0] == pytest.approx(_act_bits() / rate, rel=1e-12)
    assert perf.bottleneck_bw_bps == pytest.approx(rate, rel=1e-12)


@pytest.mark.skipif(not GRID.exists(), reason=f"the shared data are not at {DATA}")
def test_every_geo8_pair_rate_is_the_grids_goodput():
    topo = load_scenario("geo-8").topology
    index = {n: i for i, n in enumerate(topo.region_names)}
    with open(GRID, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 56
    for row in rows:
        a, b = (index[row[k].replace(":", "-")] for k in ("src_region", "dst_region"))
        assert topo.pair_cap_bps[a, b] == pytest.approx(round(float(row["throughput_gbps"]), 2) * 1e9, abs=1.0)


def test_the_wan_share_report_is_computed():
    sc = load_scenario("spider-8")
    r = wan_share(sc, max_pairs=3)
    assert r["scenario"] == "spider-8" and r["model"] == "gpt-2.7b" and r["pairs"] == len(r["shares"]) > 0
    assert all(0.0 <= x < 1.0 for x in r["shares"]) and r["low"] <= r["median"] <= r["high"]
    # by hand on a two-region world: 1 - T(free WAN) / T, and a crawling link is mostly WAN time
    slow = load_scenario({
        "name": "crawl", "topology": {
            "regions": [{"name": "a", "gpu": "A100-80GB", "gpus": 16, "zone": "z"},
                        {"name": "b", "gpu": "A100-80GB", "gpus": 16, "zone": "z"}],
            "links": [{"a": "a", "b": "b", "bandwidth_gbps": 0.05, "latency_ms": 150}]},
        "prices": {"kind": "time_of_use", "zones": {"z": {"base": 40, "peak": 80}}},
        "workload": {"models": [{"name": "gpt-1.3b"}], "global_batch": [64], "min_gpus": 8, "max_gpus": 32}})
    r = wan_share(slow)
    assert r["pairs"] == 1 and r["median"] > 0.5
    from sfenv.model.planning import fit_plan

    topo = slow.topology
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, 1, 0.0, 8, 32)
    params = PerfParams()
    plan, perf = fit_plan(job, topo, [0, 1], [16, 16], lambda p, j: evaluate_plan(p, j, topo, params))
    free = evaluate_plan(plan, job, _free_wan(topo), params)
    assert r["median"] == pytest.approx(1.0 - free.iter_time / perf.iter_time, rel=1e-12)


def test_the_flow_check_plays_the_pair_rates_too():
    """The independent check bounds each transfer by its direction's VM-pair rate, so it agrees with the fast path
    on a capped hop (and the caps matter: uncapped, both are faster)."""
    import dataclasses

    from sfenv.model.flowcheck import simulate_jobs

    plan = Plan(0, (Stage.at(0, 12, dp=1), Stage.at(1, 12, dp=1)))
    params = dataclasses.replace(PARAMS, dp_overlap=0.0)
    times = []
    for ab, ba in ((8.0, 4.0), (0.5, 0.5), (None, None)):
        topo = _topo(ab, ba)
        fast = evaluate_plan(plan, JOB, topo, params).iter_time
        played = simulate_jobs(topo, [(plan, JOB)], params, iterations=3, warmup=1)[0]
        assert played == pytest.approx(fast, rel=1e-6), (ab, ba)
        times.append(played)
    assert times[1] > times[0] > times[2]


@pytest.mark.parametrize(("dp", "tp", "servers"), [(1, 1, 1), (4, 1, 1), (8, 1, 1), (16, 1, 2), (4, 2, 1), (4, 8, 4)])
def test_under_server_caps_the_replica_pairs_of_one_server_share_its_vm_pairs_rate(dp, tp, servers):
    """``vm_pair_cap: server``: a hop's replica pairs that one server sends (8 GPUs, ``8 // tp`` replicas) share
    one VM pair's measured rate; ``member`` (env v5) gives each its own, to the same floats as before."""
    plan = Plan(0, (Stage.at(0, 12, dp=dp, tp=tp), Stage.at(1, 12, dp=dp, tp=tp)))
    topo = _topo(8.0, 4.0, gbps=400.0)
    member = evaluate_plan(plan, JOB, topo, dataclasses.replace(PARAMS, vm_pair_cap="member"))
    server = evaluate_plan(plan, JOB, topo, PARAMS)  # env v6's default
    assert member.transfer_times[0] == pytest.approx(_act_bits() / min(4e9, 400e9 / dp), rel=1e-12)
    assert server.transfer_times[0] == pytest.approx(_act_bits() / (4e9 * servers / dp), rel=1e-12)
    assert (server.iter_time > member.iter_time) == (servers < dp)


def test_the_flow_check_plays_server_caps_too():
    """The independent check shares one VM pair's rate among a server's replica pairs as the fast path does: they
    agree under ``server`` and differ from ``member`` (8 replica pairs of one server: 8x slower transfers)."""
    from sfenv.model.flowcheck import simulate_jobs

    plan = Plan(0, (Stage.at(0, 12, dp=8), Stage.at(1, 12, dp=8)))
    topo = _topo(4.0, 4.0, gbps=400.0)  # one rate both ways: the fast path's one transfer time per hop is exact
    played = {}
    for scope in ("member", "server"):
        params = dataclasses.replace(PARAMS, dp_overlap=0.0, vm_pair_cap=scope)
        fast = evaluate_plan(plan, JOB, topo, params).iter_time
        played[scope] = simulate_jobs(topo, [(plan, JOB)], params, iterations=3, warmup=1)[0]
        assert played[scope] == pytest.approx(fast, rel=1e-6), scope
    assert played["server"] > played["member"]


def test_vm_pair_cap_is_a_scenario_setting_server_by_default_and_member_keeps_env_v5s_hash():
    """``sim.vm_pair_cap``: ``server`` by default (env v6), in every dump and the hash; ``member`` (env v5's) is kept
    through plain dumps but left out of the hash, so env v5's scenarios keep theirs."""
    from sfenv.registration import VERSION_SIM
    from sfenv.runs.results import scenario_hash
    from sfenv.scenario import Scenario, ScenarioError

    base = load_scenario("geo-8")
    member = base.with_overrides(sim={"vm_pair_cap": "member"})
    assert PerfParams().vm_pair_cap == "server" and base.cfg.sim.perf_params().vm_pair_cap == "server"
    assert member.cfg.sim.perf_params().vm_pair_cap == "member"
    assert base.cfg.model_dump()["sim"]["vm_pair_cap"] == "server"
    assert '"vm_pair_cap":"server"' in base.cfg.identity_json()
    assert member.cfg.model_dump()["sim"]["vm_pair_cap"] == "member" and "vm_pair_cap" not in member.cfg.identity_json()
    assert Scenario.from_dict(member.cfg.model_dump()).cfg.sim.vm_pair_cap == "member"  # a dump round-trips it
    assert scenario_hash(member) != scenario_hash(base)
    # env v5's hash of geo-8, as main recorded it before the v6 bump (af1533e)
    assert scenario_hash(base.with_overrides(sim=VERSION_SIM["v5"])) == "42f54faf7637a015"
    with pytest.raises(ScenarioError, match=r"sim\.vm_pair_cap"):
        base.with_overrides(sim={"vm_pair_cap": "rack"})
    with pytest.raises(ValueError, match="vm_pair_cap"):
        PerfParams(vm_pair_cap="rack")


def test_the_wan_share_report_plays_the_scenarios_model_settings_and_the_docs_quote_server_caps():
    """``wan_share`` evaluates plans with the scenario's own model settings (here ``vm_pair_cap``); docs/model.md
    quotes geo-8's WAN share under ``server`` as computed."""
    base = load_scenario("geo-8")
    member, server = (wan_share(base.with_overrides(sim={"vm_pair_cap": v})) for v in ("member", "server"))
    assert server["median"] > member["median"]
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "model.md").read_text().split())
    assert (f"median WAN share is {100 * server['median']:.1f} % under `server` against "
            f"{100 * member['median']:.1f} % (range {100 * server['low']:.1f}-{100 * server['high']:.1f} % against "
            f"{100 * member['low']:.1f}-{100 * member['high']:.1f} %)") in doc
