"""DT-FM's world-wide slowdown (Yuan et al., NeurIPS 2022: 1.7-2.3x against one datacentre), under DT-FM's own settings.

Every setting is DT-FM's (DS3Lab/DT-FM @cda948f), none chosen to land in the band:

- **job**: ``scripts/local_scripts/gpt3_xl_pp8_dp8.sh`` as ``scripts/aws_run_batch_gpt3_optimal.sh`` calls it:
  ``--pp-mode gpipe --dp-mode central_ps``, 8 stages of 3 layers (GPT3-XL: hidden 2048, 16 heads,
  sequence 2048, the default ``--seq-length``), 8 replicas per stage, ``--batch-size 64
  --micro-batch-size 1`` per pipeline and ``--gradient-accumulate-step 2`` (global batch
  2 x 64 x 8 = 1024), fp16 (``model.half()``: fp16 gradients); each layer checkpoints its attention and
  MLP (full recomputation).  The task (QQP) ends in a 2-class head, so the model has no LM head
  (vocabulary 2 here).  ``GpipeAsync.sgd_iter`` runs the gradient-accumulation steps one after another
  (all forwards, all backwards, per step), then the data-parallel step: an iteration is two GPipe
  passes of 64 micro-batches plus the gradient sync, nothing overlapped with it (``dp_overlap`` 0).
  Sends and receives run on their own CUDA streams, overlapped with compute, as the model's channels are.
- **allocation** (which GPU runs which stage and replica): the one DT-FM's runs used.  The "optimal"
  run (``aws_run_batch_gpt3_optimal.sh`` -> ``aws_run_gpt3_optimal_1gpu_training.sh``, and its
  ``_Ngpu_`` twin for the 8-GPU datacentre instances) gives the i-th GPU of the IP list's machines,
  in order, rank i (``scheduler/generate_assignment.py`` leaves these cases in that order: "no
  special alignment"), and ``comm/comm_utils.py`` forms pipeline group ``rank // 8`` (stage
  ``rank % 8``) and data-parallel group ``rank % 8`` (replica ``rank // 8``).  The emulated network
  puts machine i of its IP list (taken as the same order) in city ``i // 8``
  (``generate_heterogeneous_tc.py`` with ``generate_sim_com_matrices.py``'s world-wide case); in the
  datacentre GPU i is in instance ``i // 8``.
  So **each pipeline runs inside one city (one instance), and each stage's 8 replicas sit in the 8
  cities, one each**: the pipeline hops stay inside a city, the gradient sync crosses the world.
  DT-FM's scheduler's cost model (``scheduler/heuristic_evolutionary_solver/scheduler.py``: the
  gradient all-to-all of each data-parallel group plus twice the open-loop TSP over bottleneck-matched
  pipeline hops) agrees: it scores this allocation below the one with each stage in one city
  (49.2 against 59.4 world-wide, 3.4 against 17.0 in the datacentre), and its evolutionary search,
  run unchanged on both cases (seeded, outside this repository: :data:`SEARCH_PICKS`), returns this
  allocation: each data-parallel group one GPU per city, the hops matched inside cities.
- **datacentre** (``generate_sim_com_matrices.py`` case 0): 8-GPU instances, 100 Gbit/s inside, 3.125
  Gbit/s between GPUs of two instances (a 25 Gbit/s NIC for 8 GPUs), no delay.  Every GPU is its own
  server here (``gpus_per_server=1``): DT-FM gives each GPU pair its own bandwidth, so a data-parallel
  ring across instances runs at the pair bandwidth.
- **world** (case 4): 8 cities x 8 GPUs, 10 ms and 2 Gbit/s inside a city, the pair matrix between
  cities; ``generate_heterogeneous_tc.py`` puts netem's ``delay`` on each machine's egress with a
  ``rate`` per destination class, so a GPU pair across cities has the pair's rate each way (a link
  carries the 8 stages' ring edges between its two cities: 8 x the pair rate, each ring capped at the
  pair's rate) and a round trip sees twice the delay (the model's one-way link latency).  Peers talk
  directly (no relays): every city pair has its own link, and each ring edge is pinned to it.  The
  ring runs in data-parallel rank order (Oregon, Virginia, Ohio, Tokyo, Seoul, London, Frankfurt,
  Ireland), as NCCL orders a ring over one GPU per machine.
- **gradient sync**: DT-FM's ``central_ps`` is an NCCL reduce to replica 0 then a broadcast from it; the
  model has a ring all-reduce, kept here as before.  Computed from the model's parts in its place,
  the reduce and the broadcast (each a pipelined chain along the ring) give a ratio of 2.21 (a test below).
- **transport**: NCCL's socket transport on AWS (the p3 instances' ENA) opens 16 sockets per
  connection, the model's default ``wan_streams``; with 3 MiB windows over the longest round trip
  of the ring (Seoul-London, 476 ms) that is 0.85 Gbit/s, above that edge's 0.342, so TCP's window
  never binds.
- **software**: DT-FM's layers are plain PyTorch (``modules/gpt_modules.py``: separate q, k and v
  ``nn.Linear``, ``torch.matmul`` for the scores, their division by the scale, ``softmax``, ``relu``,
  residual adds and ``nn.LayerNorm``, each its own kernel): unfused, as Megatron-LM's 2019 code was.
  The GPUs are the catalogue's V100 (p3's SXM2, 125 TFLOP/s) with :meth:`KernelModel.eager`'s
  memory traffic, fitted on Megatron-LM 2019's single-V100 baseline (39 TFLOP/s; Shoeybi et al.,
  arXiv 1909.08053) and within 10 % on its held-out 2-512 GPU runs (``validate_model``).

Result: the model's ratio is **2.29**, inside the band: the band test passes (a strict expected failure
while this test assumed each stage's replicas in one city, which gives 2.62).  The world-wide iteration
(29.2 s) is more than half gradient sync: the ring crosses Seoul-London (0.342 Gbit/s, 238 ms), 15.7 s;
the two GPipe passes take 13.5 s, their forwards paced by the in-city 2 Gbit/s hop (34 ms per
micro-batch against 27 ms of forward compute).  The datacentre's (12.8 s) is compute: 11.4 s of
pipeline, 1.35 s of sync between instances.  The margin is thin and rests on the kernel model: with
the catalogue's fused V100 kernels the ratio is 2.86, and with the FLOP count's uncertainty in the
eager fit (16.3 instead of 18.67 bytes per activation byte, docs/model.md) 2.38, both outside.
sfenv's model prefers DT-FM's allocation world-wide (29.2 s against 31.5 s) but not in the datacentre
(12.8 s against 12.0 s), where DT-FM's cost model prefers it fivefold; DT-FM's runs used it in both,
so the ratio does.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from sfenv.model.perf import PerfParams, Plan, PlanPerf, Stage, allreduce_time, evaluate_plan, plan_wan_transfers
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
IN_CITY = (10, 2.0)  # delay ms, Gbit/s between two GPUs of one city in the emulated network (the scheduler's: 5 ms)
GPT3_XL = ModelSpec("gpt3-xl", layers=24, hidden=2048, heads=16, seq_len=2048, vocab=2)  # QQP's 2-class head
STAGES = REPLICAS = 8
LAYERS_PER_STAGE = 3
BATCH_PER_STEP = 64  # --batch-size, per pipeline; --micro-batch-size 1
GA_STEPS = 2  # --gradient-accumulate-step
PARAMS = PerfParams(dp_overlap=0.0)  # the gradient sync starts after the last backward
# scheduler.py's payload of a pipeline hop, GiB (2024 x 2048 fp16 values per sequence, 1.25e5/2048 sequences)
SEND_GIB = 2024 * 2048 * 2 * (1.25e5 / 2048) / 2**30
# scheduler.py's payload of a gradient exchange, GB: fp32 gradients of GPT3-XL's 1.3e9 parameters, a 3-of-24-layer slice
GRAD_GB = 1.3 * 4 * LAYERS_PER_STAGE / 24
BAND = (1.7, 2.3)  # the paper's world-wide slowdown against the datacentre
MEASURED_RATIO = 2.286  # this model's, under the settings above (DT-FM's allocation, unfused kernels)
FUSED_RATIO = 2.855  # with the catalogue V100's fused kernels
STAGE_PER_CITY_RATIO = 2.620  # each stage's replicas in one city, cities in TSP order (this test's former allocation)

# What DT-FM's evolutionary search (``GCMA`` in scheduler.py, its defaults: population 100, 4,900 trials, mode
# "default") returned, run unchanged outside this repository on its case 4 (world) and case 0 (datacentre) with
# Python's and numpy's generators seeded: the GPU ids of each data-parallel group (GPU i in city / instance
# i // 8) and the allocation's cost, per case and seed (the datacentre run with 1,000 trials)
SEARCH_PICKS = {
    ("world", 0): (
        [[5, 9, 23, 27, 35, 42, 52, 60], [6, 12, 21, 31, 37, 45, 54, 63], [0, 8, 17, 24, 36, 44, 51, 57],
         [7, 15, 18, 28, 33, 47, 55, 56], [4, 14, 22, 26, 38, 43, 53, 59], [2, 13, 20, 25, 39, 46, 48, 61],
         [1, 10, 19, 30, 34, 41, 50, 62], [3, 11, 16, 29, 32, 40, 49, 58]], 49.218380053128435),
    ("world", 1): (
        [[1, 11, 17, 31, 37, 47, 52, 60], [7, 9, 18, 26, 33, 42, 51, 61], [6, 8, 20, 27, 35, 40, 54, 58],
         [2, 14, 23, 28, 36, 45, 50, 56], [5, 10, 22, 25, 34, 41, 49, 57], [3, 13, 21, 24, 39, 46, 48, 63],
         [4, 15, 16, 29, 38, 43, 55, 59], [0, 12, 19, 30, 32, 44, 53, 62]], 49.218380053128435),
    ("datacentre", 0): (
        [[0, 10, 23, 29, 37, 40, 51, 63], [6, 11, 19, 27, 38, 45, 48, 62], [3, 14, 18, 26, 36, 44, 50, 59],
         [5, 15, 16, 25, 34, 47, 54, 60], [2, 9, 21, 24, 33, 43, 52, 61], [1, 8, 22, 28, 39, 46, 55, 58],
         [4, 13, 20, 30, 35, 41, 53, 57], [7, 12, 17, 31, 32, 42, 49, 56]], 3.439799129486084),
}

Network = Callable[[int, int], tuple[float, float]]  # (delay ms, Gbit/s) between the GPUs' cities or instances


def dtfm_gpu() -> GPUSpec:
    """DT-FM's GPU: the catalogue's V100 running unfused PyTorch kernels (:meth:`KernelModel.eager`)."""
    v100 = get_gpu("V100")
    assert v100.kernels is not None
    return replace(v100, kernels=v100.kernels.eager())


def dtfm_allocation() -> tuple[tuple[int, ...], ...]:
    """Per stage, the city of each replica (in data-parallel rank order) in DT-FM's runs.

    Machine i of the IP list runs rank i and sits in city ``i // 8``; ``comm_utils`` puts rank r in
    stage ``r % 8`` of pipeline (and replica) ``r // 8``.
    """
    city_of_rank = [rank // STAGES for rank in range(STAGES * REPLICAS)]
    return tuple(tuple(city_of_rank[replica * STAGES + stage] for replica in range(REPLICAS))
                 for stage in range(STAGES))


def _pair(a: int, b: int) -> tuple[float, float]:
    return PAIRS.get((CITIES[a], CITIES[b])) or PAIRS[(CITIES[b], CITIES[a])]


# --- DT-FM's scheduler's cost model (scheduler/heuristic_evolutionary_solver/scheduler.py), re-derived ---

def scheduler_world(a: int, b: int) -> tuple[float, float]:
    """The scheduler's world-wide network (its ``config.py``, case 4): 5 ms and 2 Gbit/s inside a city."""
    return (5.0, 2.0) if a == b else _pair(a, b)


def scheduler_datacentre(a: int, b: int) -> tuple[float, float]:
    """The scheduler's datacentre (case 0): 100 Gbit/s inside an 8-GPU instance, 3.125 between, no delay."""
    return (0.0, 100.0) if a == b else (0.0, 3.125)


def _least_cost_path(cost: np.ndarray) -> tuple[float, list[int]]:
    """The open path through all nodes of least total ``cost`` (Held-Karp), as DT-FM's open-loop TSP."""
    n = len(cost)
    best: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {(1 << i, i): (0.0, (i,)) for i in range(n)}
    for size in range(2, n + 1):
        for subset in itertools.combinations(range(n), size):
            mask = sum(1 << i for i in subset)
            for j in subset:
                rest = mask ^ (1 << j)
                best[(mask, j)] = min((best[(rest, i)][0] + cost[i, j], best[(rest, i)][1] + (j,))
                                      for i in subset if i != j)
    total, path = min(best[((1 << n) - 1, j)] for j in range(n))
    return float(total), list(path)


def _bottleneck_matching(cost: np.ndarray) -> float:
    """The least, over one-to-one matchings of two groups, of the matching's largest pair cost."""
    for limit in np.unique(cost):
        rows, cols = linear_sum_assignment(cost > limit)
        if not (cost[rows, cols] > limit).any():
            return float(limit)
    raise AssertionError("unreachable: the largest cost admits every matching")


def scheduler_cost(groups: Sequence[Sequence[int]], network: Network) -> tuple[float, float]:
    """DT-FM's cost of an allocation: ``(data-parallel cost, 2 x pipeline cost)``, seconds.

    ``groups[k]`` holds the cities of stage k's GPUs.  Data parallel: each GPU exchanges its
    gradients with every other of its group, ``2 (delay + 8 GRAD_GB / (d bw))`` per peer (d GPUs a group), summed;
    the largest GPU sum of any group.  Pipeline: between two groups, the best one-to-one matching's
    slowest pair (``delay + SEND_GIB x 8 / bw``); the groups ordered by an open-loop TSP over those costs.
    """
    dp = 0.0
    for group in groups:
        for i, a in enumerate(group):
            per_gpu = 0.0
            for j, b in enumerate(group):
                if i != j:
                    delay_ms, gbps = network(a, b)
                    per_gpu += 2 * (delay_ms / 1e3 + GRAD_GB * 8 / (gbps * len(group)))
            dp = max(dp, per_gpu)

    def hop(a: int, b: int) -> float:
        delay_ms, gbps = network(a, b)
        return delay_ms / 1e3 + SEND_GIB * 8 / gbps

    hops = np.array([[_bottleneck_matching(np.array([[hop(a, b) for b in dst] for a in src])) if s != d else 0.0
                      for d, dst in enumerate(groups)] for s, src in enumerate(groups)])
    return dp, 2 * _least_cost_path(hops)[0]


# --- the allocation's iteration in sfenv's model ---

def _mesh(regions: list[Region], network: Network) -> Topology:
    """Every pair of regions linked directly: 8 x the pair's rate, each flow capped at the (GPU) pair's rate."""
    links = []
    for a, b in itertools.combinations(range(len(regions)), 2):
        delay_ms, gbps = network(a, b)
        links.append(Link(a, b, REPLICAS * gbps, delay_ms, pair_gbps_ab=gbps, pair_gbps_ba=gbps))
    return Topology(regions, links)


def world(gpu: GPUSpec) -> Topology:
    """DT-FM's emulated world (case 4): the 8 cities, 10 ms and 2 Gbit/s inside each, the pair matrix between."""
    regions = [Region(c, gpu, 8, "z", intra_bw_gbps=IN_CITY[1], intra_latency_ms=IN_CITY[0], gpus_per_server=1)
               for c in CITIES]
    return _mesh(regions, _pair)


def datacentre(gpu: GPUSpec) -> Topology:
    """DT-FM's datacentre (case 0): 8 instances of 8 GPUs, 100 Gbit/s inside, 3.125 per GPU pair between, no delay."""
    regions = [Region(f"instance{i}", gpu, 8, "z", intra_bw_gbps=100.0, intra_latency_ms=0.0, gpus_per_server=1)
               for i in range(8)]
    return _mesh(regions, lambda a, b: (0.0, 3.125))


STEP = JobSpec(0, GPT3_XL, BATCH_PER_STEP * REPLICAS, 1, 0.0, 1, 1024)  # one accumulation step: m = 64


def dtfm_plan(topo: Topology) -> Plan:
    """DT-FM's allocation as a plan: stage k's replica i in city i, every ring edge pinned to its direct link."""
    stages = tuple(Stage(LAYERS_PER_STAGE, tuple((city, 1) for city in cities)) for cities in dtfm_allocation())
    plan = Plan(0, stages, micro_batch=1, schedule="gpipe", recompute="full")
    direct = {}
    for k, ln in enumerate(topo.links):
        direct[(ln.a, ln.b)] = direct[(ln.b, ln.a)] = k
    return plan.with_routes([(direct[(a, b)],) for a, b, *_ in plan_wan_transfers(plan, STEP)])


def iteration(topo: Topology, plan: Plan, params: PerfParams = PARAMS) -> tuple[float, PlanPerf]:
    """DT-FM's iteration: two GPipe passes of 64 micro-batches, then the gradient sync; with one pass's evaluation."""
    perf = evaluate_plan(plan, STEP, topo, params)
    assert perf.feasible, perf.reason
    return GA_STEPS * perf.pipeline_time + max(perf.allreduce_times), perf


def slowdown(gpu: GPUSpec) -> float:
    """World-wide / datacentre iteration time of DT-FM's allocation with ``gpu`` everywhere."""
    w, dc = world(gpu), datacentre(gpu)
    return iteration(w, dtfm_plan(w))[0] / iteration(dc, dtfm_plan(dc))[0]


# --- the allocation this test assumed before: each stage's replicas in one city ---

def _hop_cost(a: int, b: int) -> float:
    """DT-FM's scheduler's cost of a pipeline hop between two cities: delay + payload / rate, s."""
    delay_ms, gbps = _pair(a, b)
    return delay_ms / 1e3 + SEND_GIB * 8 / gbps


@lru_cache(maxsize=1)
def stage_per_city_order() -> tuple[int, ...]:
    """The city order of least hop cost when each stage sits in one city (the scheduler's TSP over cities)."""
    cost = np.array([[_hop_cost(a, b) if a != b else 0.0 for b in range(8)] for a in range(8)])
    return tuple(_least_cost_path(cost)[1])


def stage_per_city_iterations(gpu: GPUSpec) -> tuple[float, float]:
    """World and datacentre iterations, each stage in one city (instance), cities in :func:`stage_per_city_order`."""
    order = stage_per_city_order()
    regions = [Region(c, gpu, 8, "z", intra_bw_gbps=IN_CITY[1], intra_latency_ms=IN_CITY[0], gpus_per_server=1)
               for c in CITIES]
    chain = Topology(regions, [Link(a, b, 8 * _pair(a, b)[1], _pair(a, b)[0]) for a, b in itertools.pairwise(order)])

    def plan(regions_in_order: Sequence[int]) -> Plan:
        return Plan(0, tuple(Stage.at(r, LAYERS_PER_STAGE, dp=REPLICAS) for r in regions_in_order), micro_batch=1,
                    schedule="gpipe", recompute="full")

    return iteration(chain, plan(order))[0], iteration(datacentre(gpu), plan(range(8)))[0]


# --- tests ---

def test_dtfm_runs_each_pipeline_inside_one_city():
    allocation = dtfm_allocation()
    assert all(sorted(cities) == list(range(8)) for cities in allocation)  # each stage: one replica per city
    assert all(len({allocation[k][i] for k in range(STAGES)}) == 1 for i in range(REPLICAS))  # each pipeline: one city


@pytest.mark.parametrize(("network", "stage_per_city", "dtfm"), [
    (scheduler_world, (4.620, 54.817), (22.758, 26.460)),
    (scheduler_datacentre, (0.091, 16.890), (2.912, 0.528)),
])
def test_dtfm_cost_model_prefers_its_allocation(network: Network, stage_per_city: tuple[float, float],
                                                dtfm: tuple[float, float]):
    """The expected figures are what DT-FM's own ``compute_data_parallel_cost`` and ``compute_pipeline_parallel_cost``
    print for the two allocations (run unchanged outside this repository)."""
    ours = scheduler_cost(dtfm_allocation(), network)
    stages_in_cities = scheduler_cost([[city] * REPLICAS for city in range(8)], network)
    assert ours == pytest.approx(dtfm, abs=1e-3)
    assert stages_in_cities == pytest.approx(stage_per_city, abs=1e-3)
    assert sum(ours) < sum(stages_in_cities)


def test_world_wide_iteration_is_set_by_the_gradient_ring():
    v100 = dtfm_gpu()
    topo = world(v100)
    t_iter, perf = iteration(topo, dtfm_plan(topo))
    # every hop inside a city: 2 Gbit/s and 10 ms per micro-batch's boundary tensor, slower than a stage's forward
    act_bits = 2 * 2048 * 2048 * 8
    assert perf.transfer_times == pytest.approx([act_bits / 2e9] * (STAGES - 1))
    assert perf.latency_times == pytest.approx([0.010] * (STAGES - 1))
    c = perf.compute_times
    assert max(c) / 3 < act_bits / 2e9 < 2 * max(c) / 3
    # GPipe: each pass's forward streams at the hop's pace, its backward at the stage's backward compute
    x, lat, m = act_bits / 2e9, sum(perf.latency_times), BATCH_PER_STEP
    fwd = sum(c) / 3 + lat + (STAGES - 1) * x + (m - 1) * x
    bwd = 2 * sum(c) / 3 + lat + (STAGES - 1) * x + (m - 1) * 2 * max(c) / 3
    assert perf.pipeline_time == pytest.approx(fwd + bwd)
    # the ring in rank order crosses Seoul-London (0.342 Gbit/s, 238 ms), its narrowest and longest edge
    grad_bytes = 2 * (GPT3_XL.layer_params * LAYERS_PER_STAGE + GPT3_XL.embedding_params)  # the first stage's
    assert max(perf.allreduce_times) == pytest.approx(allreduce_time(grad_bytes, REPLICAS, 0.342e9, 0.238))
    assert 0.5 < max(perf.allreduce_times) / t_iter < 0.6  # more than half the iteration
    longest_rtt = 2 * 0.238
    assert PARAMS.wan_streams * PARAMS.tcp_window_bytes * 8 / longest_rtt > 2 * 0.342e9  # TCP's window does not bind


def test_slowdown_under_dtfm_allocation():
    assert slowdown(dtfm_gpu()) == pytest.approx(MEASURED_RATIO, abs=0.005)
    assert slowdown(get_gpu("V100")) == pytest.approx(FUSED_RATIO, abs=0.005)  # the catalogue's fused kernels
    # the eager fit's FLOP-count uncertainty (docs/model.md: 16.3 bytes per activation byte instead of 18.67)
    eager = dtfm_gpu()
    assert eager.kernels is not None and eager.kernels.mem_traffic == pytest.approx(18.67)
    assert slowdown(replace(eager, kernels=replace(eager.kernels, mem_traffic=16.3))) == pytest.approx(2.38, abs=0.005)
    # the allocation this test assumed before: paced by its Pacific hop (Ohio-Tokyo), 2.62
    assert [CITIES[i] for i in stage_per_city_order()] in (
        ["Oregon", "Virginia", "London", "Frankfurt", "Ireland", "Ohio", "Tokyo", "Seoul"],
        ["Seoul", "Tokyo", "Ohio", "Ireland", "Frankfurt", "London", "Virginia", "Oregon"])
    world_a, datacentre_a = stage_per_city_iterations(dtfm_gpu())
    assert world_a / datacentre_a == pytest.approx(STAGE_PER_CITY_RATIO, abs=0.005)
    # sfenv's model, like DT-FM's cost model, prefers DT-FM's allocation world-wide; in the datacentre it does not
    w, dc = world(dtfm_gpu()), datacentre(dtfm_gpu())
    world_b, datacentre_b = iteration(w, dtfm_plan(w))[0], iteration(dc, dtfm_plan(dc))[0]
    assert (world_b, world_a) == pytest.approx((29.16, 31.51), abs=0.01)
    assert (datacentre_b, datacentre_a) == pytest.approx((12.76, 12.03), abs=0.01)


def test_world_wide_slowdown_within_dtfm_range():
    low, high = BAND
    assert low <= slowdown(dtfm_gpu()) <= high


def test_central_ps_sync_keeps_the_ratio_in_band():
    """DT-FM's ``central_ps``: an NCCL reduce to replica 0 (Oregon), then a broadcast from it, each a chain along the
    ring, pipelined: the gradients over the chain's narrowest edge plus the chain's latencies.  Computed from the
    model's pipeline times in place of its ring all-reduce."""
    v100 = dtfm_gpu()
    grad_bits = 8 * 2 * (GPT3_XL.layer_params * LAYERS_PER_STAGE + GPT3_XL.embedding_params)
    ring = list(range(REPLICAS))  # data-parallel rank order: city i
    edges = [_pair(a, b) for a, b in zip(ring, ring[1:] + ring[:1])]  # (delay ms, Gbit/s), edge i from city i
    reduce_chain, broadcast_chain = edges[1:], edges[:-1]  # into replica 0, out of it
    sync = sum(grad_bits / (min(g for _, g in chain) * 1e9) + sum(d for d, _ in chain) / 1e3
               for chain in (reduce_chain, broadcast_chain))
    w, dc = world(v100), datacentre(v100)
    world_t = GA_STEPS * iteration(w, dtfm_plan(w))[1].pipeline_time + sync
    dc_t = GA_STEPS * iteration(dc, dtfm_plan(dc))[1].pipeline_time + 2 * grad_bits / 3.125e9
    assert world_t / dc_t == pytest.approx(2.21, abs=0.01)
    assert BAND[0] <= world_t / dc_t <= BAND[1]


@pytest.mark.parametrize("pick", sorted(SEARCH_PICKS))
def test_dtfm_search_picks_its_runs_allocation(pick: tuple[str, int]):
    network = scheduler_world if pick[0] == "world" else scheduler_datacentre
    groups, cost = SEARCH_PICKS[pick]
    cities = [[gpu // 8 for gpu in group] for group in groups]
    assert all(sorted(c) == list(range(8)) for c in cities)  # each data-parallel group: one GPU per city
    assert sum(scheduler_cost(cities, network)) == pytest.approx(cost, rel=1e-9)
    assert sum(scheduler_cost(dtfm_allocation(), network)) == pytest.approx(cost, rel=1e-9)
