"""DT-FM's world-wide slowdown (Yuan et al., NeurIPS 2022): 1.7-2.3x against one datacentre.

Delays (ms) and per-GPU-pair bandwidths (Gbit/s) are DT-FM's own simulation figures for its case 0
(on-demand datacentre: 8 GPUs per instance at 100 Gbit/s inside, 3.125 Gbit/s between instances)
and case 4 (world-wide: 8 GPUs in each of 8 cities, 2 Gbit/s and 10 ms inside a city), from
DS3Lab/DT-FM ``scheduler/generate_sim_com_matrices.py``.  A link between two places carries the 8
replica pairs of a pipeline hop, so its capacity is 8 x the pair bandwidth (DT-FM's cost model gives
each pair its own bandwidth; the fidelity review's convention).  For the same reason every GPU is its
own server here (``gpus_per_server=1``): a data-parallel ring then runs at DT-FM's pair bandwidth
inside a place, where 8 GPUs per server would put each stage's 8 replicas on one server's NVLink
(sfenv's data-parallel ring model; the ratio would be 2.03 instead of 2.21).

The plan is DT-FM's shape: GPT3-XL, 8 stages of 3 layers, 8 data-parallel replicas per stage
(64 V100), micro-batch 1 (DT-FM's scripts), global batch 1024, 1F1B with the window ``fit_plan`` adds
on WAN chains, full recomputation; the world-wide pipeline follows the better of two city orders.
The ratio depends on the settings: with these it is about 2.2; with B 512 about 2.6, without
recomputation 3.3-3.5 (faster compute leaves the WAN more exposed), with GPipe 3.6-3.8.
"""

from __future__ import annotations

from dataclasses import replace

from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.model.planning import window_to_hide_round_trips
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import JobSpec, ModelSpec

CITIES = ("Oregon", "Virginia", "Ohio", "Tokyo", "Seoul", "London", "Frankfurt", "Ireland")
# (delay ms, bandwidth Gbit/s) per city pair, DT-FM's case 4
PAIRS = {
    ("Oregon", "Virginia"): (67, 0.79), ("Oregon", "Ohio"): (49, 1.10), ("Oregon", "Tokyo"): (96, 0.523),
    ("Oregon", "Seoul"): (124, 0.46), ("Oregon", "London"): (136, 0.42), ("Oregon", "Frankfurt"): (143, 0.404),
    ("Oregon", "Ireland"): (124, 0.482), ("Virginia", "Ohio"): (11, 1.12), ("Virginia", "Tokyo"): (143, 0.524),
    ("Virginia", "Seoul"): (172, 0.500), ("Virginia", "London"): (76, 1.16), ("Virginia", "Frankfurt"): (90, 1.02),
    ("Virginia", "Ireland"): (67, 1.05), ("Ohio", "Tokyo"): (130, 0.694), ("Ohio", "Seoul"): (159, 0.529),
    ("Ohio", "London"): (86, 1.05), ("Ohio", "Frankfurt"): (99, 0.799), ("Ohio", "Ireland"): (77, 1.14),
    ("Tokyo", "Seoul"): (34, 1.10), ("Tokyo", "London"): (210, 0.366), ("Tokyo", "Frankfurt"): (223, 0.36),
    ("Tokyo", "Ireland"): (199, 0.465), ("Seoul", "London"): (238, 0.342), ("Seoul", "Frankfurt"): (235, 0.358),
    ("Seoul", "Ireland"): (228, 0.335), ("London", "Frankfurt"): (14, 1.14), ("London", "Ireland"): (12, 1.09),
    ("Frankfurt", "Ireland"): (24, 1.08),
}
GPT3_XL = ModelSpec("gpt3-xl", layers=24, hidden=2048, heads=16, seq_len=2048, vocab=50257)


def _pair(a: str, b: str) -> tuple[float, float]:
    return PAIRS.get((a, b)) or PAIRS[(b, a)]


def _datacentre() -> Topology:
    g = get_gpu("V100")
    regions = [Region(f"instance{i}", g, 8, "z", intra_bw_gbps=100.0, intra_latency_ms=0.0, gpus_per_server=1)
               for i in range(8)]
    return Topology(regions, [Link(i, j, 8 * 3.125, 0.0) for i in range(8) for j in range(i + 1, 8)])


def _world() -> Topology:
    g = get_gpu("V100")
    regions = [Region(c, g, 8, "z", intra_bw_gbps=2.0, intra_latency_ms=10.0, gpus_per_server=1) for c in CITIES]
    links = []
    for i in range(8):
        for j in range(i + 1, 8):
            delay, bw = _pair(CITIES[i], CITIES[j])
            links.append(Link(i, j, 8 * bw, delay))
    return Topology(regions, links)


def _iteration(topo: Topology, order: list[int], job: JobSpec) -> float:
    plan = Plan(0, tuple(Stage.at(r, 3, dp=8) for r in order), micro_batch=1, recompute="full")
    perf = evaluate_plan(plan, job, topo, PerfParams())
    assert perf.feasible, perf.reason
    best = perf.iter_time
    if len(set(order)) > 1:  # the window fit_plan adds on WAN chains (its _widen_window rule)
        need = window_to_hide_round_trips(plan, perf)
        for extra in (need, need // 2):
            wide = evaluate_plan(replace(plan, extra_inflight=extra), job, topo, PerfParams())
            if wide.feasible:
                best = min(best, wide.iter_time)
                break
    return best


def test_world_wide_slowdown_within_dtfm_range():
    job = JobSpec(0, GPT3_XL, 1024, 1, 0.0, 1, 1024)
    one_dc = _iteration(_datacentre(), list(range(8)), job)
    # US west -> US east -> Europe -> Asia, and Asia -> US -> Europe (no city twice)
    orders = [[0, 2, 1, 7, 5, 6, 3, 4], [4, 3, 0, 2, 1, 7, 5, 6]]
    world = min(_iteration(_world(), o, job) for o in orders)
    published_low, published_high = 1.7, 2.3  # DT-FM's world-wide slowdown against one datacentre
    assert published_low <= world / one_dc <= published_high
