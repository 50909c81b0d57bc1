"""Hand-computed cases for the performance model (expected values from the formulas, not the code)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import TOY_GPU, TOY_MODEL, flat_prices, make_job, make_region, two_region_topo

from sfenv.model.perf import PerfParams, Plan, Stage, _evaluate_general, allreduce_time, evaluate_plan
from sfenv.model.pipeline import replay_pipeline
from sfenv.sim import SimConfig, Simulator
from sfenv.world.hardware import GPUSpec
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Topology
from sfenv.world.workload import ModelSpec

F = 100e12  # toy GPU peak FLOP/s
H, S, L = 1024, 1024, 4
LAYER_P = 12 * H * H


def stage_compute(layers: int, b: int = 1, tp: int = 1, mfu: float = 0.5) -> float:
    # Megatron's count: 6 P b s for the linear layers plus the attention matmuls, x (1 + s / (6 h))
    return 6 * LAYER_P * layers * b * S * (1 + S / (6 * H)) / (tp * F * mfu)


def test_single_region_data_parallel(params):
    topo = Topology([make_region("A", 8)], [])
    job = make_job(batch=8)
    plan = Plan(0, (Stage.at(0, 4, dp=2),))
    perf = evaluate_plan(plan, job, topo, params)
    m = 8 // 2
    c = stage_compute(4)
    grad_bytes = 2 * LAYER_P * 4
    # 2 replicas fit in one 8-GPU server: the ring runs over the GPU link (31.5 GB/s), not the 100 Gbit/s NICs
    ar = 2 * (2 - 1) / 2 * grad_bytes * 8 / (31.5 * 8e9)
    assert perf.feasible
    assert perf.microbatches == m
    assert perf.compute_times == pytest.approx([c])
    assert perf.allreduce_times == pytest.approx([ar])
    assert perf.iter_time == pytest.approx(m * c + ar)  # dp_overlap = 0: fully exposed
    assert perf.throughput == pytest.approx(8 * S / (m * c + ar))
    # power: 2 GPUs at idle + (TDP - idle) * util, util = m c / T, PUE 1
    util = m * c / perf.iter_time
    assert perf.power_w == pytest.approx(2 * (100 + 300 * util))


NVLINK_GPU = GPUSpec("nvlink-toy", tflops=100.0, memory_gb=80.0, tdp_w=400.0, idle_w=100.0, link_gbs=300.0)


@pytest.mark.parametrize("tp, dp, ring_gbps", [
    (1, 8, 2400.0),  # the 8 replicas fill one server: NVLink (300 GB/s), no NIC
    (1, 16, 800.0),  # 2 servers of 8 members: the ring's channels use the server's 8 NICs of 100 Gbit/s
    (2, 8, 400.0),  # t = 2: a server holds 4 members of each of the 2 rings, so each ring gets 4 NICs
    (8, 4, 100.0),  # t = 8: one member per server, one NIC (the model before this change)
    (1, 12, 400.0),  # 8 + 4 members: the server with 4 sets the pace
])
def test_data_parallel_ring_uses_its_servers_nics(params, tp, dp, ring_gbps):
    """Each of a stage's t rings gets min(GPU link, (GPUs per server / t) x per-GPU bandwidth) across
    servers (NCCL's channels over every NIC of a server, NVIDIA/nccl issue 412), the GPU link inside one."""
    topo = Topology([make_region("A", 128, gpu=NVLINK_GPU, intra_bw_gbps=100.0, intra_latency_ms=0.01)], [])
    job = make_job(batch=48)
    plan = Plan(0, (Stage.at(0, 4, dp=dp, tp=tp),))
    perf = evaluate_plan(plan, job, topo, params)
    ring_bytes = 2 * LAYER_P * 4 / tp
    ar = 2 * (dp - 1) / dp * ring_bytes * 8 / (ring_gbps * 1e9) + 2 * (dp - 1) * 1e-5
    assert perf.feasible and perf.allreduce_times == pytest.approx([ar], rel=1e-12)
    assert perf == _evaluate_general(plan, job, topo, params, None)  # the chain path agrees (one region: no WAN)


def test_data_parallel_ring_is_bounded_by_the_gpu_link(params):
    # 8 NICs of 400 Gbit/s would carry 3,200 Gbit/s, but every channel crosses the GPUs' 2,400 Gbit/s NVLink
    topo = Topology([make_region("A", 128, gpu=NVLINK_GPU, intra_bw_gbps=400.0)], [])
    perf = evaluate_plan(Plan(0, (Stage.at(0, 4, dp=16, tp=1),)), make_job(batch=16), topo, params)
    assert perf.allreduce_times == pytest.approx([2 * 15 / 16 * 2 * LAYER_P * 4 * 8 / 2400e9], rel=1e-12)


def test_two_regions_one_slow_hop(params):
    topo = two_region_topo(bw_gbps=1.0, lat_ms=20.0)
    job = make_job(batch=8)
    plan = Plan(0, (Stage.at(0, 2), Stage.at(1, 2)))
    perf = evaluate_plan(plan, job, topo, params)
    m, c = 8, stage_compute(2)
    x = 2 * 1 * S * H * 8 / 1e9  # bf16 activation over 1 Gbit/s
    assert perf.hop_times == pytest.approx([0.020 + x])
    assert perf.transfer_times == pytest.approx([x]) and perf.latency_times == pytest.approx([0.020])
    assert perf.windows == [2, 1]  # 1F1B: stage k holds p - k micro-batches
    assert perf.iter_time == pytest.approx(replay_pipeline([c, c], [0.020], [x], m, "1f1b"))
    assert perf.bottleneck_bw_bps == pytest.approx(1e9)
    assert perf.wan_bytes_per_iter == pytest.approx(2 * 2 * S * H * m)  # activations + gradients back


def test_1f1b_exposes_the_round_trip(params):
    # Two equal stages, a 2 ms hop with (almost) no transfer time, m = 8, windows (2, 1): stage 0
    # sends micro-batches in pairs, each pair waits for the first one's round trip 2c + 2l, so
    # T = 4 round trips + one stage slot for the pair's second micro-batch = 9c + 8l.
    topo = two_region_topo(bw_gbps=1e9, lat_ms=2.0)
    params = replace(params, wan_streams=1 << 20)  # TCP's window bound lifted too: no transfer time
    job = make_job(batch=8)
    perf = evaluate_plan(Plan(0, (Stage.at(0, 2), Stage.at(1, 2))), job, topo, params)
    c, lat = stage_compute(2), 0.002
    assert lat < c
    assert perf.pipeline_time == pytest.approx(9 * c + 8 * lat, rel=1e-6)
    # the GPipe-style formula fill + (m - 1) beat of the earlier model hid the latency behind compute
    old = (2 * c + 2 * lat) + 7 * max(c, lat)
    assert perf.pipeline_time > 1.3 * old
    # one more warm-up micro-batch per WAN hop hides one more micro-batch per round trip
    wide = evaluate_plan(Plan(0, (Stage.at(0, 2), Stage.at(1, 2)), extra_inflight=1), job, topo, params)
    assert wide.windows == [3, 1] and wide.pipeline_time < perf.pipeline_time
    assert wide.memory_per_gpu[0] > perf.memory_per_gpu[0]  # paid in activation memory


def test_tensor_parallel_allreduce_cost(params):
    # Megatron TP: 4 all-reduces of the 2 b s h activation per layer and micro-batch over the server link
    topo = Topology([make_region("A", 8)], [])
    job = make_job(batch=8)
    perf = evaluate_plan(Plan(0, (Stage.at(0, 4, dp=1, tp=4),)), job, topo, params)
    link = TOY_GPU.link_gbs * 8e9
    ar = 4 * 4 * 2 * (4 - 1) / 4 * (2 * S * H) * 8 / link
    assert perf.tp_comm_times == pytest.approx([ar])
    assert perf.compute_times == pytest.approx([stage_compute(4, tp=4) + ar])
    assert perf.iter_time == pytest.approx(8 * (stage_compute(4, tp=4) + ar))
    none = evaluate_plan(Plan(0, (Stage.at(0, 4, dp=1, tp=1),)), job, topo, params)
    assert none.tp_comm_times == [0.0]


def test_dp_over_wan_vs_pp_over_wan(params):
    topo = two_region_topo(bw_gbps=1.0, lat_ms=20.0, gpus=4)
    job = make_job(batch=8)
    m_dp, m_pp = 8 // 2, 8
    # DP over the WAN: one 4-layer stage, one replica per region; ring all-reduce over the WAN link
    dp_plan = Plan(0, (Stage(4, ((0, 1), (1, 1))),))
    dp = evaluate_plan(dp_plan, job, topo, params)
    c4 = stage_compute(4)
    grad = 2 * LAYER_P * 4
    # the ring's A->B and B->A edges use the two directions of the full-duplex link: 1 Gbit/s each
    ar = 2 * (1 / 2) * grad * 8 / 1e9 + 2 * 1 * 0.020
    assert dp.allreduce_times == pytest.approx([ar])
    assert dp.iter_time == pytest.approx(m_dp * c4 + ar)
    # PP over the WAN: two 2-layer stages, one in each region
    pp = evaluate_plan(Plan(0, (Stage.at(0, 2), Stage.at(1, 2))), job, topo, params)
    c2 = stage_compute(2)
    assert pp.iter_time == pytest.approx(replay_pipeline([c2, c2], [0.020], [2 * S * H * 8 / 1e9], m_pp))
    assert pp.iter_time < dp.iter_time  # why data parallelism stays inside a region


def test_memory_infeasible_plan_rejected(params):
    small = GPUSpec("tiny", tflops=100.0, memory_gb=16.0, tdp_w=300.0, idle_w=50.0)
    topo = Topology([make_region("A", 8, gpu=small)], [])
    big = ModelSpec("big", layers=32, hidden=4096, heads=32, seq_len=2048)  # 6.4e9 params -> 103 GB of state
    job = make_job(model=big, batch=8)
    perf = evaluate_plan(Plan(0, (Stage.at(0, 32, dp=1),)), job, topo, params)
    assert not perf.feasible
    assert "GB" in perf.reason and "stage 0" in perf.reason
    # weights+optimizer alone: 16 * 12 h^2 L bytes > 16 GB
    assert perf.memory_per_gpu[0] >= 16 * 12 * 4096**2 * 32
    # splitting over 8 stages with recomputation fits: 16 * 12 h^2 * 4 = 12.9 GB + small activations
    split = Plan(0, tuple(Stage.at(0, 4) for _ in range(8)), recompute=True)
    assert evaluate_plan(split, job, topo, params).feasible


def test_price_change_mid_job_costs_exact_integral():
    topo = Topology([make_region("A", 8)], [])
    prices = PriceSeries(["z0"], np.array([[10.0, 50.0] + [50.0] * 22]))  # 10 USD/MWh, then 50 from 1 h
    params = PerfParams(mfu=0.5, dp_overlap=0.0, memory_headroom=1.0)
    job = make_job(batch=8, iterations=1)
    plan = Plan(0, (Stage.at(0, 4, dp=1),))
    iter_time = evaluate_plan(plan, job, topo, params).iter_time
    iters = math.ceil(5400.0 / iter_time)  # runs about 1.5 h
    job = make_job(batch=8, iterations=iters, arrival=0.0)
    sim = Simulator(topo, prices, [job], SimConfig(perf=params))
    perf = sim.schedule(plan)
    sim.advance()
    while not sim.done:
        sim.wait()
    rec = sim.records()[0]
    run = iters * iter_time
    assert run > 3600
    expected = perf.power_w * (10.0 * 3600 + 50.0 * (run - 3600)) / 3.6e9
    assert rec.cost_usd == pytest.approx(expected, rel=1e-9)
    assert rec.energy_j == pytest.approx(perf.power_w * run, rel=1e-9)
    assert rec.finish == pytest.approx(run)


@pytest.mark.parametrize("schedule,factor", [("1f1b", 1.0), ("gpipe", 1.0), ("zb-h1", 1 / 3), ("zb-h2", 0.0)])
def test_bubble_rates(schedule, factor):
    # equal stages, negligible communication: 1F1B and GPipe (p-1)/m; the zero-bubble schedules as Qi et
    # al. (ICLR 2024) build them: ZB-H1 (p-1)/(3m) at 1F1B's peak memory, ZB-H2 none (m >= 2p - 1, its
    # optimizer step off the critical path) at 2p - 1 micro-batches per stage
    p, m = 4, 16
    topo = Topology([make_region("A", 8, intra_bw_gbps=1e9)], [])
    job = make_job(batch=m)
    plan = Plan(0, tuple(Stage.at(0, 1) for _ in range(p)), schedule=schedule)
    perf = evaluate_plan(plan, job, topo, PerfParams(mfu=0.5, memory_headroom=1.0))
    assert perf.bubble_rate == pytest.approx(factor * (p - 1) / m, rel=1e-6, abs=1e-6)


def test_zero_bubble_schedules_cut_the_bubble():
    p, m = 4, 16
    topo = Topology([make_region("A", 8, intra_bw_gbps=1e9)], [])
    job = make_job(batch=m)
    rate = {
        s: evaluate_plan(Plan(0, tuple(Stage.at(0, 1) for _ in range(p)), schedule=s), job, topo,
                         PerfParams(mfu=0.5, memory_headroom=1.0)).bubble_rate
        for s in ("1f1b", "zb-h1", "zb-h2")
    }
    assert rate["zb-h2"] <= rate["zb-h1"] < rate["1f1b"]


def test_stall_free_rule_emerges():
    # BACE-Pipe's rule compares a hop's transfer time (not its latency) with the stage compute
    # enough TCP connections to fill 100 Gbit/s over a 400 ms round trip (the window bound is
    # test_transport's subject)
    params = PerfParams(mfu=0.5, dp_overlap=0.0, memory_headroom=1.0, wan_streams=4096)
    job = make_job(batch=32)
    plan = Plan(0, (Stage.at(0, 2), Stage.at(1, 2)))
    fast = evaluate_plan(plan, job, two_region_topo(bw_gbps=100.0, lat_ms=200.0), params)
    slow = evaluate_plan(plan, job, two_region_topo(bw_gbps=0.1, lat_ms=1.0), params)
    assert fast.stall_free and not slow.stall_free  # a 200 ms link can be stall-free, a thin one not
    c = stage_compute(2)
    assert fast.transfer_times[0] < c < slow.transfer_times[0]
    # a hop slower than its stages sets the pace: one micro-batch per transfer in the steady state
    longer = evaluate_plan(plan, make_job(batch=64), two_region_topo(bw_gbps=0.1, lat_ms=1.0), params)
    assert longer.pipeline_time - slow.pipeline_time == pytest.approx(32 * slow.transfer_times[0], rel=0.05)


def test_dtfm_sanity_anchor():
    # DT-FM: a 3-layer slice of a 1.3B model (grad ~0.65 GB fp32) over 1 Gbit/s: ~5 s per ring step
    grad_bytes = 1.3e9 * 4 * 3 / 24
    step = grad_bytes * 8 / 1e9
    assert 5.0 <= step <= 5.5
    # our ring over 2 regions moves 2(d-1)/d of the bytes: about one such step at d = 2
    assert allreduce_time(grad_bytes, 2, 1e9, 0.0) == pytest.approx(step)


def test_toy_model_constants():
    assert TOY_MODEL.layer_params == LAYER_P
    assert flat_prices().prices_at(0.0)[0] == 100.0
