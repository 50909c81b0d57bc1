"""Activation memory per Korthikanti et al. 2022, recomputation modes, and zero-bubble memory vs the replay."""

from __future__ import annotations

import pytest
from conftest import make_job, make_region

from sfenv.model.compute import RECOMPUTE_MODES, activation_bytes
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.model.pipeline import default_windows, replay_held
from sfenv.model.planning import fit_plan
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import JobSpec, ModelSpec

GPT3 = ModelSpec("gpt-3-175b", layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)


def test_gpt3_175b_activation_per_layer_matches_the_review():
    # the review's figures from Korthikanti et al.'s formulas: t 8, s 2048, b 1
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    assert activation_bytes(s, b, h, a, t, "none", False) == pytest.approx(0.579e9, rel=2e-3)
    assert activation_bytes(s, b, h, a, t, "none", True) == pytest.approx(0.359e9, rel=2e-3)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_modes_follow_korthikanti_table_2(t):
    s, b, h, a = 2048, 2, 4096, 32
    sbh = s * b * h
    none = activation_bytes(s, b, h, a, t, "none", False)
    # without TP the no-recompute figure is s b h (34 + 5 a s / h) with and without SP
    if t == 1:
        assert none == pytest.approx(sbh * (34 + 5 * a * s / h))
        assert activation_bytes(s, b, h, a, t, "none", True) == pytest.approx(none)
    # selective recomputation drops exactly the attention core's 5 a s / (h t) per s b h
    assert none - activation_bytes(s, b, h, a, t, "selective", False) == pytest.approx(sbh * 5 * a * s / (h * t))
    # sequence parallelism splits the 10 s b h of layernorm and dropout over t
    sel_sp = activation_bytes(s, b, h, a, t, "selective", True)
    assert activation_bytes(s, b, h, a, t, "selective", False) - sel_sp == pytest.approx(sbh * 10 * (1 - 1 / t))
    assert activation_bytes(s, b, h, a, t, "full", False) == pytest.approx(2 * sbh)
    mems = [activation_bytes(s, b, h, a, t, mode, False) for mode in RECOMPUTE_MODES]
    assert mems == sorted(mems, reverse=True)  # more recomputation, less memory


def _one_server_region(n: int = 8) -> Topology:
    return Topology([Region("dc", get_gpu("A100-80GB"), n, "z", gpus_per_server=8)], [])


def test_megatron_175b_needs_recomputation_on_80gb():
    # Megatron's GPT-3 175B plan (t 8, p 12, b 1): stage 0 holds 12 micro-batches of 8 layers
    topo = _one_server_region(96)
    job = JobSpec(0, GPT3, 1536, 1, 0.0, 1, 1 << 20)
    stages = tuple(Stage.at(0, 8, dp=1, tp=8) for _ in range(12))
    perf = {mode: evaluate_plan(Plan(0, stages, micro_batch=1, recompute=mode), job, topo, PerfParams())
            for mode in RECOMPUTE_MODES}
    assert not perf["none"].feasible and "GB" in perf["none"].reason
    assert perf["full"].feasible
    # charged: weights + optimizer state, then the window's activations per the paper's formula
    emb = GPT3.vocab * GPT3.hidden
    weights = 16 * (12 * GPT3.hidden ** 2 * 8 + emb) / 8
    act = activation_bytes(2048, 1, GPT3.hidden, GPT3.heads, 8, "full", False)
    assert perf["full"].memory_per_gpu[0] == pytest.approx(weights + act * 8 * 12)
    # compute: selective recompute costs more than none, full more than selective
    sp = {mode: evaluate_plan(Plan(0, stages, micro_batch=1, recompute=mode, sequence_parallel=True), job, topo,
                              PerfParams(memory_headroom=10.0)) for mode in RECOMPUTE_MODES}
    c = [sp[mode].compute_times[0] for mode in RECOMPUTE_MODES]
    assert c[0] < c[1] < c[2]


def test_old_bool_recompute_still_accepted():
    stages = (Stage.at(0, 4),)
    assert Plan(0, stages, recompute=True) == Plan(0, stages, recompute="full")
    assert hash(Plan(0, stages, recompute=False)) == hash(Plan(0, stages))
    assert Plan(0, stages, recompute=True).shape_key == Plan(0, stages, recompute="full").shape_key


def test_unknown_mode_is_infeasible_with_a_reason():
    topo = _one_server_region()
    job = make_job()
    perf = evaluate_plan(Plan(0, (Stage.at(0, 4),), recompute="some"), job, topo, PerfParams())
    assert not perf.feasible and "recompute" in perf.reason


def test_fit_plan_takes_the_cheapest_mode_that_fits():
    # a 1-server region: no recomputation does not fit, selective does; fit_plan must stop there
    gpu = get_gpu("A100-40GB")
    topo = Topology([Region("dc", gpu, 8, "z", gpus_per_server=8)], [])
    model = ModelSpec("m", layers=24, hidden=4096, heads=32, seq_len=4096, vocab=0)
    job = JobSpec(0, model, 64, 1, 0.0, 8, 8)
    params = PerfParams()

    def ev(plan, j):
        return evaluate_plan(plan, j, topo, params)

    got = fit_plan(job, topo, [0], [8], ev, micro_batch=1)
    assert got is not None
    plan, _ = got
    by_mode = {mode: ev(Plan(0, plan.stages, micro_batch=1, recompute=mode), job) for mode in RECOMPUTE_MODES}
    cheaper = [mode for mode in RECOMPUTE_MODES[:RECOMPUTE_MODES.index(plan.recompute)]]
    assert all(not by_mode[mode].feasible for mode in cheaper)
    assert plan.recompute != "none"  # the case exercises the loop


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2", "1f1b"])
@pytest.mark.parametrize("p,m,lat,x", [(8, 64, 0.0, 0.0), (4, 64, 0.03, 0.01), (4, 16, 0.0, 0.0)])
def test_memory_charged_equals_what_the_replay_holds(schedule, p, m, lat, x):
    c = [1.0] * p
    lats = [lat if k == 1 else 0.0 for k in range(p - 1)]
    xs = [x if k == 1 else 0.0 for k in range(p - 1)]
    w = default_windows(p, m, schedule)
    _, held = replay_held(c, lats, xs, m, schedule, w)
    assert held == list(w)


def test_evaluate_plan_charges_the_replayed_window():
    # a zero-bubble plan over a WAN hop: the replay never holds more than evaluate_plan charges, and
    # the stages before the hop (which wait for the round trip) fill their window; a stage after the
    # slow hop is starved by it and holds less
    topo = Topology([make_region("A", 8), make_region("B", 8)], [Link(0, 1, 1.0, 30.0)])
    job = make_job(batch=32)
    plan = Plan(0, (Stage.at(0, 1), Stage.at(0, 1), Stage.at(1, 1), Stage.at(1, 1)), schedule="zb-h2",
                extra_inflight=2)
    perf = evaluate_plan(plan, job, topo, PerfParams(memory_headroom=1.0))
    _, held = replay_held(perf.compute_times, perf.latency_times, perf.transfer_times, perf.microbatches,
                          "zb-h2", perf.windows)
    assert all(hd <= w for hd, w in zip(held, perf.windows))
    assert held[:2] == perf.windows[:2]
