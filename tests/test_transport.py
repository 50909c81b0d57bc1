"""Transport: TCP's window bound per transfer, checked against Skyplane's measured grid; jitter off by default.

A transfer carries at most ``streams x window / RTT`` (PerfParams.wan_streams parallel TCP connections,
PerfParams.tcp_window_bytes each), with the link's measured rate as the ceiling (sfenv.model.sharing).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from sfenv.model.flowcheck import simulate_jobs
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.model.sharing import transport_cap_bps
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

SHARED = Path(os.environ.get("SFENV_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
GRID = SHARED / "network" / "skyplane_grid_jan2022_8regions.csv"
needs_grid = pytest.mark.skipif(not GRID.is_file(), reason=f"shared Skyplane grid not found at {GRID}")
MIB = 2**20


def _long_link(lat_ms: float) -> tuple[Topology, JobSpec, Plan]:
    regions = [Region(n, get_gpu("A100-80GB"), 8, "z") for n in ("a", "b")]
    topo = Topology(regions, [Link(0, 1, 100.0, lat_ms)])
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 16, 1, 0.0, 1, 8)
    return topo, job, Plan(0, (Stage.at(0, 12), Stage.at(1, 12)), recompute="full")


def test_a_transfer_is_bounded_by_its_connections_window_over_the_round_trip():
    topo, job, plan = _long_link(100.0)  # 200 ms round trip on a 100 Gbit/s link, one replica pair
    rate = {s: evaluate_plan(plan, job, topo, PerfParams(wan_streams=s)).flow_rates_bps[0] for s in (1, 16, 64, 4096)}
    window_bits = 3 * MIB * 8  # the default window: half of Linux's 6 MiB tcp_rmem maximum
    assert rate[1] == pytest.approx(window_bits / 0.2)  # one connection: 126 Mbit/s
    assert rate[16] == pytest.approx(16 * window_bits / 0.2)  # NCCL's 16 sockets on AWS: 2.0 Gbit/s
    assert rate[64] == pytest.approx(64 * window_bits / 0.2)
    assert rate[4096] == pytest.approx(100e9)  # enough connections: the link's rate is the ceiling
    near = evaluate_plan(plan, job, _long_link(1.0)[0], PerfParams())
    assert near.flow_rates_bps[0] == pytest.approx(100e9)  # 2 ms round trip: 16 connections fill the link


@needs_grid
def test_the_default_window_admits_skyplanes_measurements_at_its_64_connections():
    """Skyplane measured each pair with 64 TCP connections (iperf3): a window bound below it would contradict it.

    With the default 3 MiB window every AWS- and GCP-sourced pair lies under ``64 x window / RTT``
    (their measurements imply windows of at most 1.9 MiB: egress caps, not windows, limited them);
    the two Azure-to-Azure pairs imply 3.6 MiB (Azure's images raise Linux's buffers).
    """
    implied: dict[str, float] = {}
    with open(GRID, newline="") as fh:
        for row in csv.DictReader(fh):
            rtt = float(row["rtt_avg_ms"]) / 1e3
            thr = float(row["throughput_gbps"]) * 1e9
            cloud = row["src_region"].split(":")[0]
            implied[cloud] = max(implied.get(cloud, 0.0), thr * rtt / 64 / 8)  # bytes in flight per connection
            if cloud != "azure":
                assert thr <= transport_cap_bps(rtt, 64, PerfParams().tcp_window_bytes)
    assert implied["aws"] < 1.5 * MIB and implied["gcp"] < 2 * MIB
    assert 3 * MIB < implied["azure"] < 4 * MIB


@needs_grid
def test_jitter_of_the_measured_size_moves_a_wan_pipeline_by_little():
    """Per-transfer jitter is off by default: at the RTT spread of Skyplane's pings it moves the played time < 1 %.

    The spread (max - min) / mean of each pair's pings is 0.2 % at the median and 2.2 % at the 90th
    percentile; the flow-level check scales each message's latency by ``1 + 0.022 z`` (z standard
    normal, seeded) and compares with no jitter.
    """
    with open(GRID, newline="") as fh:
        rows = list(csv.DictReader(fh))
    spread = [(float(r["rtt_max_ms"]) - float(r["rtt_min_ms"])) / float(r["rtt_avg_ms"]) for r in rows]
    sigma = float(np.percentile(spread, 90))
    assert 0.01 < sigma < 0.03
    topo, job, plan = _long_link(60.0)
    params = PerfParams(dp_overlap=0.0)
    still = simulate_jobs(topo, [(plan, job)], params, iterations=4, warmup=1)[0]
    shaken = simulate_jobs(topo, [(plan, job)], params, iterations=4, warmup=1, seed=3, jitter=sigma)[0]
    assert still == pytest.approx(evaluate_plan(plan, job, topo, params).iter_time, rel=1e-6)
    assert shaken != still and abs(shaken / still - 1.0) < 0.01
