"""DT-FM's world-wide slowdown (Yuan et al., NeurIPS 2022: 1.7-2.3x against one datacentre), under DT-FM's own settings.

Every setting is DT-FM's (DS3Lab/DT-FM @cda948f), none chosen to land in the band:

- **job**: ``scripts/local_scripts/gpt3_xl_pp8_dp8.sh`` as ``scripts/aws_run_batch_gpt3_optimal.sh`` calls it:
  ``--pp-mode gpipe --dp-mode central_ps``, 8 stages of 3 layers (GPT3-XL: hidden 2048, 16 heads,
  sequence 2048, the default ``--seq-length``), 8 replicas per stage, ``--batch-size 64
  --micro-batch-size 1`` per pipeline and ``--gradient-accumulate-step 2`` (global batch
  2 x 64 x 8 = 1024), fp16; each layer checkpoints its attention and MLP (full recomputation).
  The task (QQP) ends in a 2-class head, so the model has no LM head (vocabulary 2 here).
  ``GpipeAsync.sgd_iter`` runs the gradient-accumulation steps one after another (all forwards,
  all backwards, per step), then the data-parallel step: an iteration is two GPipe passes of 64
  micro-batches plus the gradient sync, nothing overlapped with it (``dp_overlap`` 0).  Sends and
  receives run on their own CUDA streams, overlapped with compute, as the model's channels are.
- **datacentre** (``scheduler/generate_sim_com_matrices.py`` case 0): 8-GPU instances, 100 Gbit/s
  inside, 3.125 Gbit/s between GPUs of two instances (a 25 Gbit/s NIC for 8 GPUs), no delay; each
  stage's replicas in one instance. Every GPU is its own server here (``gpus_per_server=1``): DT-FM
  gives each GPU pair its own bandwidth (64 single-GPU nodes in its runs), so a data-parallel ring
  runs at the pair bandwidth, not on one server's NVLink.
- **world** (case 4): 8 cities x 8 GPUs, 10 ms and 2 Gbit/s inside a city, the pair matrix between
  cities; ``generate_heterogeneous_tc.py`` puts netem's ``delay`` on each node's egress with a
  ``rate`` per destination class, so a GPU pair across cities has the pair's rate each way (a link
  carries the 8 replica pairs of a hop: 8 x the pair rate) and a round trip sees twice the delay
  (the model's one-way link latency).  DT-FM's scheduler puts each stage's replicas in one city
  and orders the cities by an open-loop TSP over the matched pairs' costs ``delay + payload /
  rate`` (``heuristic_evolutionary_solver/scheduler.py``, its ``send_activation_size`` as payload);
  :func:`dtfm_order` solves it exactly (Held-Karp).  Peers talk directly (no relays): the world
  topology holds only the order's links.
- **transport**: NCCL's socket transport on AWS (the p3 instances' ENA) opens 16 sockets per
  connection, the model's default ``wan_streams``; with 3 MiB windows over the longest round trip
  of the order (260 ms) that is 1.5 Gbit/s, above every pair's rate, so TCP's window never binds.
- **software**: DT-FM's layers are plain PyTorch (``modules/gpt_modules.py``: separate q, k and v
  ``nn.Linear``, ``torch.matmul`` for the scores, their division by the scale, ``softmax``, ``relu``,
  residual adds and ``nn.LayerNorm``, each its own kernel): unfused, as Megatron-LM's 2019 code was.
  The GPUs are the catalogue's V100 (p3's SXM2, 125 TFLOP/s) with :meth:`KernelModel.eager`'s
  memory traffic, fitted on Megatron-LM 2019's single-V100 baseline (39 TFLOP/s; Shoeybi et al.,
  arXiv 1909.08053) and within 10 % on its held-out 2-512 GPU runs (``validate_model``).  DT-FM's
  layers have fewer elementwise kernels than Megatron's (no dropout, no mask, ReLU for GeLU), so
  they move less memory than that fit says: the ratio below is the lowest this kernel model gives.

Result: the model's ratio is **2.62**, still outside the band (3.46 with the catalogue's fused kernels,
as before this calibration).  Nothing in the WAN model moves it under DT-FM's settings (one job, each
hop on its own link, the window not binding).  The world-wide pipeline is paced by its Pacific hop
(Ohio-Tokyo, 0.694 Gbit/s per pair: 97 ms per micro-batch against the stages' 80 ms of forward,
recomputation and backward), so its time is set by the measured network; the datacentre's is set by
compute.  The band needs the datacentre slower still: DT-FM's GPUs would have to run these stages at
22-31 TFLOP/s (18-25 % of a V100's 125), where the calibrated model runs them at 36 (the fused,
A100-scaled one at 52).  DT-FM's absolute throughput, the honest anchor, was not found (the paper's
figures are not in reach here).  The band test is a strict expected failure with that reason; the
other tests hold the measured ratio and what the band requires.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import lru_cache

import pytest

from sfenv.model.perf import PerfParams, Plan, PlanPerf, Stage, evaluate_plan
from sfenv.world.hardware import GPUSpec, get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import JobSpec, ModelSpec

CITIES = ("Oregon", "Virginia", "Ohio", "Tokyo", "Seoul", "London", "Frankfurt", "Ireland")
# (delay ms, bandwidth Gbit/s) per city pair, DT-FM's case 4 (generate_sim_com_matrices.py)
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
GPT3_XL = ModelSpec("gpt3-xl", layers=24, hidden=2048, heads=16, seq_len=2048, vocab=2)  # QQP's 2-class head
STAGES = REPLICAS = 8
LAYERS_PER_STAGE = 3
BATCH_PER_STEP = 64  # --batch-size, per pipeline; --micro-batch-size 1
GA_STEPS = 2  # --gradient-accumulate-step
PARAMS = PerfParams(dp_overlap=0.0)  # the gradient sync starts after the last backward
# scheduler.py's payload of a pipeline hop, GiB (2024 x 2048 fp16 values per sequence, 1.25e5/2048 sequences)
SEND_GIB = 2024 * 2048 * 2 * (1.25e5 / 2048) / 2**30
BAND = (1.7, 2.3)  # the paper's world-wide slowdown against the datacentre
MEASURED_RATIO = 2.620  # this model's, under the settings above (DT-FM's unfused kernels)
FUSED_RATIO = 3.464  # with the catalogue V100's fused kernels
MEGATRON_V100_TFLOPS = 39.0  # Megatron-LM's single-V100 baseline, 30 % of peak (Shoeybi et al., arXiv 1909.08053)


def dtfm_gpu() -> GPUSpec:
    """DT-FM's GPU: the catalogue's V100 running unfused PyTorch kernels (:meth:`KernelModel.eager`)."""
    v100 = get_gpu("V100")
    assert v100.kernels is not None
    return replace(v100, kernels=v100.kernels.eager())


def _pair(a: int, b: int) -> tuple[float, float]:
    return PAIRS.get((CITIES[a], CITIES[b])) or PAIRS[(CITIES[b], CITIES[a])]


def _hop_cost(a: int, b: int) -> float:
    """DT-FM's scheduler's cost of a pipeline hop between two cities: delay + payload / rate, s."""
    delay_ms, gbps = _pair(a, b)
    return delay_ms / 1e3 + SEND_GIB * 8 / gbps


@lru_cache(maxsize=1)
def _order() -> tuple[int, ...]:
    return tuple(dtfm_order())


def dtfm_order() -> list[int]:
    """The city order DT-FM's scheduler picks: the open path through the 8 cities of least hop cost (Held-Karp)."""
    n = len(CITIES)
    best: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {(1 << i, i): (0.0, (i,)) for i in range(n)}
    for size in range(2, n + 1):
        for subset in itertools.combinations(range(n), size):
            mask = sum(1 << i for i in subset)
            for j in subset:
                rest = mask ^ (1 << j)
                best[(mask, j)] = min((best[(rest, i)][0] + _hop_cost(i, j), best[(rest, i)][1] + (j,))
                                      for i in subset if i != j)
    return list(min(best[((1 << n) - 1, j)] for j in range(n))[1])


def _datacentre(gpu: GPUSpec) -> Topology:
    regions = [Region(f"instance{i}", gpu, 8, "z", intra_bw_gbps=100.0, intra_latency_ms=0.0,
                      gpus_per_server=1) for i in range(8)]
    return Topology(regions, [Link(i, j, 8 * 3.125, 0.0) for i in range(8) for j in range(i + 1, 8)])


def _world(order: list[int], gpu: GPUSpec) -> Topology:
    """The cities, with only the links between consecutive cities of ``order`` (DT-FM's peers talk directly)."""
    regions = [Region(c, gpu, 8, "z", intra_bw_gbps=2.0, intra_latency_ms=10.0, gpus_per_server=1) for c in CITIES]
    links = [Link(a, b, 8 * _pair(a, b)[1], _pair(a, b)[0]) for a, b in itertools.pairwise(order)]
    return Topology(regions, links)


def iteration(topo: Topology, order: list[int], params: PerfParams = PARAMS) -> tuple[float, PlanPerf]:
    """DT-FM's iteration: two GPipe passes of 64 micro-batches, then the gradient sync; with one pass's evaluation."""
    step = JobSpec(0, GPT3_XL, BATCH_PER_STEP * REPLICAS, 1, 0.0, 1, 1024)  # one accumulation step: m = 64
    plan = Plan(0, tuple(Stage.at(r, LAYERS_PER_STAGE, dp=REPLICAS) for r in order), micro_batch=1,
                schedule="gpipe", recompute="full")
    perf = evaluate_plan(plan, step, topo, params)
    assert perf.feasible, perf.reason
    return GA_STEPS * perf.pipeline_time + max(perf.allreduce_times), perf


def slowdown(gpu: GPUSpec, params: PerfParams = PARAMS) -> float:
    """World-wide / datacentre iteration time with ``gpu`` everywhere."""
    order = list(_order())
    return iteration(_world(order, gpu), order, params)[0] / iteration(_datacentre(gpu), list(range(8)), params)[0]


def test_dtfm_order_is_the_least_cost_path_of_its_scheduler():
    order = dtfm_order()
    cost = sum(_hop_cost(a, b) for a, b in itertools.pairwise(order))
    brute = min(sum(_hop_cost(a, b) for a, b in itertools.pairwise(p)) for p in itertools.permutations(range(8)))
    assert cost == pytest.approx(brute)
    names = [CITIES[i] for i in order]
    assert names in (["Oregon", "Virginia", "London", "Frankfurt", "Ireland", "Ohio", "Tokyo", "Seoul"],
                     ["Seoul", "Tokyo", "Ohio", "Ireland", "Frankfurt", "London", "Virginia", "Oregon"])


def test_world_wide_pipeline_is_paced_by_its_pacific_hop():
    v100 = dtfm_gpu()
    order = dtfm_order()
    _, perf = iteration(_world(order, v100), order)
    act_bits = 2 * 2048 * 2048 * 8  # one micro-batch's fp16 boundary tensor
    assert max(perf.transfer_times) == pytest.approx(act_bits / 0.694e9)  # Ohio-Tokyo: each pair its own rate
    assert max(perf.transfer_times) > 2 * max(perf.compute_times) / 3  # slower than a stage's backward
    longest_rtt = 2 * max(perf.latency_times)
    assert 16 * PARAMS.tcp_window_bytes * 8 / longest_rtt > 0.694e9 * 1.5  # TCP's window does not bind here
    # GPipe: each pass fills the pipeline, then streams its other 63 micro-batches at the hop's pace
    c, hops = perf.compute_times, sum(perf.latency_times) + sum(perf.transfer_times)
    paced = sum(c) + 2 * hops + 2 * (BATCH_PER_STEP - 1) * act_bits / 0.694e9
    assert perf.pipeline_time == pytest.approx(paced)


def test_slowdown_under_dtfm_settings_and_what_the_band_needs():
    v100 = dtfm_gpu()
    assert slowdown(v100) == pytest.approx(MEASURED_RATIO, abs=0.005)
    assert slowdown(get_gpu("V100")) == pytest.approx(FUSED_RATIO, abs=0.005)
    # the kernel model's speed on these stages: FLOPs per micro-batch (full recomputation) over the compute time
    _, dc = iteration(_datacentre(v100), list(range(8)))
    flops = 4 * LAYERS_PER_STAGE * 24 * 2048 * 2048**2 * (1 + 2048 / (6 * 2048))
    model_tflops = flops / dc.compute_times[0] / 1e12
    assert model_tflops == pytest.approx(36.2, abs=0.5)
    # the speed at which the band's edges would be met, with the same V100 at a flat fraction of its peak
    flat = replace(v100, kernels=None)

    def speed_for(ratio: float) -> float:
        lo, hi = 0.05, 0.6  # fractions of peak; the slowdown grows with the GPUs' speed
        for _ in range(20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if slowdown(flat, replace(PARAMS, mfu=mid)) < ratio else (lo, mid)
        return lo * v100.tflops

    fast_edge, slow_edge = speed_for(BAND[1]), speed_for(BAND[0])
    assert 26.0 < fast_edge < 32.0 and 18.0 < slow_edge < 23.0
    # the band needs GPUs slower than the calibrated model's, and slower than Megatron 2019's own unfused code
    assert fast_edge < model_tflops and fast_edge < MEGATRON_V100_TFLOPS * 125 / 130  # its DGX-2H V100: 130 peak


@pytest.mark.xfail(strict=True, reason="2.62x, not 1.7-2.3x: the V100 model calibrated on Megatron-LM 2019's unfused "
                                        "code runs these stages at 36 TFLOP/s; the band needs 22-31 (DT-FM's own "
                                        "throughput, the anchor, not found)")
def test_world_wide_slowdown_within_dtfm_range():
    low, high = BAND
    assert low <= slowdown(dtfm_gpu()) <= high


def test_the_pacific_crossing_alone_costs_twice_the_datacentre_iteration():
    """Any order crosses between Asia and the rest once; at best on Ohio-Tokyo.  That crossing's pace alone is 2.0x
    the datacentre's iteration (2.7x with fused kernels, beyond the band): the rest of the 2.62 is the pipeline's
    fill and drain over the WAN's latencies and the stages' compute."""
    v100 = dtfm_gpu()
    asia = {CITIES.index("Tokyo"), CITIES.index("Seoul")}
    widest = max(_pair(a, b)[1] for a in asia for b in range(8) if b not in asia)
    assert widest == 0.694
    crossing = GA_STEPS * 2 * (BATCH_PER_STEP - 1) * 2 * 2048 * 2048 * 8 / (widest * 1e9)  # both passes of both steps
    datacentre = iteration(_datacentre(v100), list(range(8)))[0]
    assert crossing / datacentre == pytest.approx(2.03, abs=0.01)
    assert crossing / iteration(_datacentre(get_gpu("V100")), list(range(8)))[0] > BAND[1]
