"""The ``v4`` sharing model: a plan's own hops share links as a replay of its schedule plays them.

:func:`sfenv.model.sharing.max_min_rates` (progressive filling), :func:`sfenv.model.hopshare.replay_shared`
(against the reference pipeline replay where nothing is shared, and by hand where two channels are), and the
model against the flow-level check on deep 1F1B chains, where ``v3`` was 10-14 % optimistic (docs/model.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from sfenv.model.flowcheck import simulate_jobs
from sfenv.model.hopshare import HopFlow, replay_shared
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.model.pipeline import _jit_kernels, default_windows, hop_overlap, replay_pipeline
from sfenv.model.sharing import max_min_rates
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import JobSpec, ModelSpec

GPU = get_gpu("A100-80GB")


def test_max_min_rates_are_the_textbook_progressive_filling():
    """Two links of 1 and 2 units, flow a on the first, b on both, c on the second: a = b = 1/2, c = 3/2;
    a bound of 0.2 on a gives b 0.8 and c 1.2; one other job's flow on the first link takes a third there."""
    cap = np.array([1.0, 2.0])
    none = np.zeros(2)
    flows = [((0,), 1, np.inf), ((0, 1), 1, np.inf), ((1,), 1, np.inf)]
    assert max_min_rates(flows, cap, none) == pytest.approx([0.5, 0.5, 1.5])
    flows[0] = ((0,), 1, 0.2)
    assert max_min_rates(flows, cap, none) == pytest.approx([0.2, 0.8, 1.2])
    flows[0] = ((0,), 1, np.inf)
    assert max_min_rates(flows, cap, np.array([1.0, 0.0])) == pytest.approx([1 / 3, 1 / 3, 5 / 3])
    assert max_min_rates([((1,), 4, np.inf)], cap, none) == pytest.approx([0.5])  # members share alike


@pytest.mark.parametrize("compiled", [False, None])
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_unshared_the_replay_times_the_pipeline_as_the_reference_replay(schedule, compiled):
    """Hops on links of their own: the same iteration, transfer times and overlaps as the reference replays."""
    compute, latency = [0.3, 0.5, 0.4, 0.2], [0.02, 0.0, 0.05]
    bits, rate = {0: 8e8, 2: 4e8}, {0: 1e9, 2: 2e9}
    transfer = [bits[0] / rate[0], 0.07, bits[2] / rate[2]]
    flows = [HopFlow(2 * k + d, bits[k], (2 * k + d,), 1, rate[k]) for k in (0, 2) for d in (0, 1)]
    cap = np.full(6, 1e12)
    m = 6
    windows = default_windows(4, m, schedule)
    played = replay_shared(compute, latency, transfer, m, schedule, windows, flows, cap, np.zeros(6), compiled)
    assert played.pipeline_s == pytest.approx(replay_pipeline(compute, latency, transfer, m, schedule, windows))
    assert played.transfer_s == pytest.approx([transfer[f.channel >> 1] for f in flows])
    expected = hop_overlap(compute, latency, transfer, transfer, m, schedule, windows)
    assert played.overlap == pytest.approx({key: expected[key] for key in played.overlap})
    assert set(played.overlap) == {(a, b) for a in (0, 1, 4, 5) for b in (0, 1, 4, 5) if a != b}


@pytest.mark.parametrize("compiled", [False, None])
def test_two_hops_that_send_together_split_their_link_and_take_longer(compiled):
    """A 3-stage GPipe whose two forward hops cross one link of 1 unit: while both send each gets half, so a
    transfer takes longer than alone, never more than twice, and the replay says they overlap."""
    compute, latency, m, bits = [0.1, 0.1, 0.1], [0.0, 0.0], 4, 0.3
    cap = np.array([1.0, 1.0, 1.0, 1.0])
    shared = [HopFlow(0, bits, (0,), 1, 1.0), HopFlow(1, bits, (1,), 1, 1.0), HopFlow(2, bits, (0,), 1, 1.0),
              HopFlow(3, bits, (3,), 1, 1.0)]
    apart = [f._replace(links=(f.channel,)) for f in shared]
    windows = default_windows(3, m, "gpipe")
    played, alone = (replay_shared(compute, latency, [0.0, 0.0], m, "gpipe", windows, flows, cap, np.zeros(4),
                                   compiled) for flows in (shared, apart))
    assert bits < played.transfer_s[0] <= 2 * bits and bits < played.transfer_s[2] <= 2 * bits
    assert alone.transfer_s == pytest.approx([bits] * 4)
    assert played.pipeline_s > alone.pipeline_s
    assert played.overlap[(0, 2)] > 0.5 and played.overlap[(0, 1)] == 0.0  # GPipe: no backward in the forward pass


def test_the_compiled_replay_gives_the_python_replays_floats():
    """On random shared chains (2-7 stages, several members and routes, other jobs' flows, bounds), bit for bit."""
    if _jit_kernels() is None:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    rng = np.random.default_rng(3)
    for _ in range(40):
        p, m = int(rng.integers(2, 8)), int(rng.integers(1, 12))
        schedule = str(rng.choice(["1f1b", "gpipe"]))
        links = 6
        flows = [HopFlow(ch, float(rng.choice([1e8, 3e8, 1e9])),
                         tuple(int(e) for e in rng.choice(links, size=int(rng.integers(1, 4)), replace=False)),
                         int(rng.integers(1, 4)), float(rng.choice([np.inf, 2e8, 5e8])))
                 for ch in range(2 * (p - 1)) for _ in range(int(rng.integers(0, 3)))]
        args = (list(rng.uniform(0.05, 0.5, p)), list(rng.uniform(0.0, 0.05, p - 1)),
                list(rng.uniform(0.0, 0.1, p - 1)), m, schedule, default_windows(p, m, schedule), flows,
                rng.choice([1e9, 2e9, 5e9], size=links), rng.integers(0, 3, size=links).astype(float))
        python, compiled = replay_shared(*args, compiled=False), replay_shared(*args, compiled=True)
        assert python.pipeline_s == compiled.pipeline_s
        assert np.array_equal(python.transfer_s, compiled.transfer_s, equal_nan=True)
        assert python.overlap == compiled.overlap


def _random_chain(rng: np.random.Generator, p: int, m: int, schedule: str) -> tuple:
    """replay_shared's arguments for a random shared chain (several members and routes, other jobs, bounds)."""
    links = 6
    flows = [HopFlow(ch, float(rng.choice([1e8, 3e8, 1e9])),
                     tuple(int(e) for e in rng.choice(links, size=int(rng.integers(1, 4)), replace=False)),
                     int(rng.integers(1, 4)), float(rng.choice([np.inf, 2e8, 5e8])))
             for ch in range(2 * (p - 1)) for _ in range(int(rng.integers(0, 3)))]
    return (list(rng.uniform(0.05, 0.5, p)), list(rng.uniform(0.0, 0.05, p - 1)), list(rng.uniform(0.0, 0.1, p - 1)),
            m, schedule, default_windows(p, m, schedule), flows, rng.choice([1e9, 2e9, 5e9], size=links),
            rng.integers(0, 3, size=links).astype(float))


def test_skipping_repeated_periods_gives_the_full_replays_result():
    """Long random 1F1B chains: once the steady state repeats the replay skips whole periods, and the iteration,
    the transfer times and the co-sending shares agree with playing every micro-batch within 1e-8."""
    rng = np.random.default_rng(5)
    skipped = 0
    for _ in range(24):
        p, m = int(rng.integers(3, 9)), int(rng.integers(40, 160))
        args = _random_chain(rng, p, m, "1f1b")
        fast, full = replay_shared(*args, compiled=False), replay_shared(*args, compiled=False, skip_periods=False)
        assert full.skipped == 0 and fast.skipped < m
        skipped += fast.skipped > 0
        assert fast.pipeline_s == pytest.approx(full.pipeline_s, rel=1e-8)
        assert fast.transfer_s == pytest.approx(full.transfer_s, rel=1e-8)
        assert set(fast.overlap) == set(full.overlap)
        assert all(abs(fast.overlap[key] - full.overlap[key]) < 1e-8 for key in full.overlap)
    assert skipped >= 20  # the steady state repeats in nearly all of them
    gpipe = _random_chain(rng, 5, 80, "gpipe")
    assert replay_shared(*gpipe, compiled=False).skipped == 0  # GPipe has no steady state to repeat


def test_the_compiled_replay_skips_the_same_periods():
    """Long random 1F1B chains, compiled and in Python: the same micro-batches skipped and the same floats."""
    if _jit_kernels() is None:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    from sfenv.model import _pipeline_jit, hopshare

    assert _pipeline_jit._PERIODS == hopshare._PERIODS and _pipeline_jit._SAME == hopshare._SAME
    rng = np.random.default_rng(8)
    skipped = 0
    for _ in range(16):
        args = _random_chain(rng, int(rng.integers(3, 9)), int(rng.integers(40, 160)), "1f1b")
        python, compiled = replay_shared(*args, compiled=False), replay_shared(*args, compiled=True)
        assert python.skipped == compiled.skipped
        skipped += python.skipped > 0
        assert python.pipeline_s == compiled.pipeline_s
        assert np.array_equal(python.transfer_s, compiled.transfer_s, equal_nan=True)
        assert python.overlap == compiled.overlap
    assert skipped >= 12


@pytest.mark.parametrize("order", ["hand", "greedy"])
def test_skipping_repeated_zero_bubble_periods_gives_the_full_replays_result(order):
    """Long random ZB-H1 and ZB-H2 chains: the replay skips whole periods of the steady state once it repeats
    (hand-crafted orders once every stage reads its orders' periodic part, greedy ones while their counters
    stay short of m), and agrees with playing every micro-batch within 1e-8."""
    rng = np.random.default_rng(21 if order == "hand" else 22)
    skipped = 0
    for n in range(24):
        args = _random_chain(rng, int(rng.integers(3, 9)), int(rng.integers(40, 160)), ("zb-h1", "zb-h2")[n % 2])
        fast = replay_shared(*args, compiled=False, order=order)
        full = replay_shared(*args, compiled=False, order=order, skip_periods=False)
        assert full.skipped == 0 and fast.skipped < args[3]
        skipped += fast.skipped > 0
        assert fast.pipeline_s == pytest.approx(full.pipeline_s, rel=1e-8)
        assert fast.transfer_s == pytest.approx(full.transfer_s, rel=1e-8, nan_ok=True)
        assert set(fast.overlap) == set(full.overlap)
        assert all(abs(fast.overlap[key] - full.overlap[key]) < 1e-8 for key in full.overlap)
    assert skipped >= 20  # the steady state repeats in nearly all of them


def test_the_compiled_replay_skips_the_same_zero_bubble_periods():
    """Long random zero-bubble chains, both orders, compiled and in Python, with and without skipping: the same
    micro-batches skipped and the same floats."""
    if _jit_kernels() is None:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    rng = np.random.default_rng(23)
    skipped = 0
    for n in range(24):
        schedule, order = ("zb-h1", "zb-h2")[n % 2], ("hand", "greedy")[(n // 2) % 2]
        args = _random_chain(rng, int(rng.integers(2, 9)), int(rng.integers(1, 160)), schedule)
        for skip in (True, False):
            python = replay_shared(*args, compiled=False, order=order, skip_periods=skip)
            compiled = replay_shared(*args, compiled=True, order=order, skip_periods=skip)
            assert python.skipped == compiled.skipped, (n, schedule, order, skip)
            assert python.pipeline_s == compiled.pipeline_s
            assert np.array_equal(python.transfer_s, compiled.transfer_s, equal_nan=True)
            assert python.overlap == compiled.overlap
            skipped += python.skipped > 0
    assert skipped >= 16


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe", "zb-h1", "zb-h2"])
def test_the_compiled_replay_remembers_rates_per_set_of_senders_only_where_it_has_a_row_for_each(schedule):
    """The compiled replays keep each set of senders' max-min rates (a row per subset, up to ``_MEMO_FLOWS``
    flows): with few flows and with more than that, both orders, they give the Python replay's floats, and the
    memo has a row for every subset only when there are at most ``_MEMO_FLOWS`` flows."""
    if _jit_kernels() is None:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    from sfenv.model import _pipeline_jit

    limit = _pipeline_jit._MEMO_FLOWS
    assert _pipeline_jit._rate_memo(limit).shape == (1 << limit, limit)
    assert _pipeline_jit._rate_memo(limit + 1).shape == (1, 1)
    assert np.isnan(_pipeline_jit._rate_memo(3)).all()
    rng = np.random.default_rng(31)
    p = 5
    for nf in (3, limit, limit + 2):
        # every flow on one of two shared links at least, so the senders' set changes the rates
        flows = [HopFlow(i % (2 * (p - 1)), float(rng.choice([1e8, 3e8])), (i % 2, 2 + int(rng.integers(0, 2))),
                         int(rng.integers(1, 3)), float(rng.choice([np.inf, 2e8]))) for i in range(nf)]
        args = (list(rng.uniform(0.05, 0.5, p)), list(rng.uniform(0.0, 0.05, p - 1)),
                list(rng.uniform(0.0, 0.1, p - 1)), 24, schedule, default_windows(p, 24, schedule), flows,
                np.array([1e9, 2e9, 1e9, 5e9]), np.array([1.0, 0.0, 2.0, 0.0]))
        for order in (("hand", "greedy") if schedule.startswith("zb") else ("hand",)):
            python = replay_shared(*args, compiled=False, order=order, skip_periods=False)
            compiled = replay_shared(*args, compiled=True, order=order, skip_periods=False)
            assert python.pipeline_s == compiled.pipeline_s, (nf, order)
            assert np.array_equal(python.transfer_s, compiled.transfer_s, equal_nan=True)
            assert python.overlap == compiled.overlap
            assert len({round(x, 12) for x in python.transfer_s}) > 1  # the flows did not all send alike


def test_the_model_skips_zero_bubble_periods_unless_told_not_to():
    """``PerfParams.skip_zero_bubble_periods`` (on by default since env v6; off: env v5's episodes as recorded)
    times zero-bubble plans within 1e-8 of the full replay; 1F1B plans skip either way."""
    from sfenv.model import hopshare

    calls: list[tuple[str, bool]] = []
    real = hopshare._replay_once

    def spy(jit, compute, latency, transfer, m, schedule, *rest):
        calls.append((schedule, rest[-2]))
        return real(jit, compute, latency, transfer, m, schedule, *rest)

    hopshare._replay_once = spy
    try:
        checked = 0
        for topo, plan, job, params in _deep_chains(24, 8):
            for schedule in ("zb-h1", "zb-h2", "1f1b"):
                plan = dataclasses.replace(plan, schedule=schedule)
                full = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing="v5",
                                                                          skip_zero_bubble_periods=False))
                fast = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing="v5",
                                                                          skip_zero_bubble_periods=True))
                if full.feasible and full.flow_overlap:
                    checked += 1
                    assert fast.iter_time == pytest.approx(full.iter_time, rel=1e-8)
    finally:
        hopshare._replay_once = real
    assert checked >= 6
    assert ("zb-h1", False) in calls and ("zb-h1", True) in calls and ("zb-h2", True) in calls
    assert ("1f1b", False) not in calls


def test_an_episode_that_skips_zero_bubble_periods_is_its_own_and_env_v5s_to_the_last_bits():
    """SpanTrain's candidates on cee (zero-bubble plans across flapping links, the fixture's ``zero-bubble-shared``
    case), the fixture's fixed policy: with ``sim.skip_zero_bubble_periods`` (env v6's default) two plays are
    identical, info included; against env v5 (every period replayed) the same actions are taken and the report
    agrees within 1e-9."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from episode_identity import play

    from sfenv.model import hopshare
    from sfenv.scenario import load_scenario

    skipped: list[int] = []
    real = hopshare._replay_once

    def spy(*args, **kwargs):
        played = real(*args, **kwargs)
        skipped.append(played.skipped if args[5] in ("zb-h1", "zb-h2") else 0)
        return played

    assert load_scenario("cee").cfg.sim.skip_zero_bubble_periods
    kwargs = {"proposers": "best+spantrain", "num_jobs": 6}
    hopshare._replay_once = spy
    try:
        hopshare._replay_remembered.cache_clear()
        first, again = (play("sfenv/CEE-v6", kwargs, 1) for _ in range(2))
        assert sum(n > 0 for n in skipped) >= 20  # the option skips
        skipped.clear()
        hopshare._replay_remembered.cache_clear()
        default = play("sfenv/CEE-v5", kwargs, 1)
        assert skipped and not any(skipped)  # env v5 does not
    finally:
        hopshare._replay_once = real
    assert first == again
    assert first["steps"] == default["steps"] and first["done"]
    for key, value in default["report"].items():
        if value not in ("None", "nan") and not value.startswith(("'", "[", "{")):
            assert float(first["report"][key]) == pytest.approx(float(value), rel=1e-9, abs=1e-9), key


def test_the_model_remembers_replays_of_the_same_inputs_and_hands_out_copies():
    """replay_shared with ``compiled=None`` (the model's calls) plays exact inputs once; what it returns may be
    changed by the caller without changing what the next call gets; other loads are played afresh."""
    from sfenv.model.hopshare import _replay_remembered

    args = _random_chain(np.random.default_rng(11), 5, 60, "1f1b")
    first = replay_shared(*args)
    hits = _replay_remembered.cache_info().hits
    first.overlap.clear()
    first.transfer_s[0] = -1.0
    again = replay_shared(*args)
    assert _replay_remembered.cache_info().hits == hits + 1
    played = replay_shared(*args, compiled=False)
    assert again.pipeline_s == played.pipeline_s and again.transfer_s == played.transfer_s
    assert again.overlap == played.overlap and again.overlap
    loaded = (*args[:-1], args[-1] + 1.0)
    assert replay_shared(*loaded).pipeline_s == replay_shared(*loaded, compiled=False).pipeline_s
    assert _replay_remembered.cache_info().hits == hits + 1


def test_the_replay_refuses_what_it_does_not_play():
    """Unknown schedules and orders; zero-bubble schedules play in Python only (no compiled twin)."""
    with pytest.raises(ValueError, match="interleaved"):
        replay_shared([1.0, 1.0], [0.0], [0.1], 2, "interleaved", (2, 1), [], np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="order 'fastest'"):
        replay_shared([1.0, 1.0], [0.0], [0.1], 2, "zb-h1", (2, 1), [], np.ones(2), np.zeros(2), order="fastest")


def test_the_compiled_replay_of_zero_bubble_schedules_gives_the_python_replays_floats():
    """ZB-H1 and ZB-H2, hand-crafted and greedy orders, on random shared chains: bit for bit."""
    if _jit_kernels() is None:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    rng = np.random.default_rng(5)
    for n in range(32):
        schedule, order = ("zb-h1", "zb-h2")[n % 2], ("hand", "greedy")[(n // 2) % 2]
        args = _random_chain(rng, int(rng.integers(2, 8)), int(rng.integers(1, 12)), schedule)
        python = replay_shared(*args, compiled=False, order=order)
        compiled = replay_shared(*args, compiled=True, order=order)
        assert python.pipeline_s == compiled.pipeline_s, (n, schedule, order)
        assert np.array_equal(python.transfer_s, compiled.transfer_s, equal_nan=True)
        assert python.overlap == compiled.overlap


def _deep_chains(seed: int, n: int):
    """Random 1F1B chains of 4-7 stages over 2-3 regions on a line, each alone (docs/model.md's deep-chain family)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        nreg, p = int(rng.integers(2, 4)), int(rng.integers(4, 8))
        regs = [int(rng.integers(0, nreg)) for _ in range(p)]
        layers = [int(rng.integers(1, 4)) for _ in range(p)]
        bw = [float(rng.choice([1.0, 2.0, 5.0])) for _ in range(2)]
        links = [Link(0, 1, bw[0], 20.0)] + ([Link(1, 2, bw[1], 30.0)] if nreg == 3 else [])
        topo = Topology([Region(f"r{i}", GPU, 32, "z", intra_bw_gbps=100.0, intra_latency_ms=0.01)
                         for i in range(nreg)], links)
        model = ModelSpec("m", layers=sum(layers), hidden=2048, heads=16, seq_len=2048)
        job = JobSpec(0, model, int(rng.choice([16, 32, 64])), 1, 0.0, 1, 512)
        plan = Plan(0, tuple(Stage.at(r, n) for r, n in zip(regs, layers)), schedule="1f1b")
        if len(set(regs)) > 1:
            yield topo, plan, job, PerfParams(dp_overlap=float(rng.integers(0, 2)))


def test_deep_chains_alone_agree_with_the_flow_level_check_under_v4():
    """Measured 2026-11-27 on 58 such chains (a seed kept for judging): v4 mean error 1.2 %, 97 % within 5 %,
    largest 5.1 %; v3 4.1 %, 69 %, 27.6 %.  Here (another seed): every v4 chain within 6 %, v3 worse in the mean and
    some v3 chain beyond 5 %."""
    errors: dict[str, list[float]] = {"v3": [], "v4": []}
    for topo, plan, job, params in _deep_chains(21, 16):
        if not evaluate_plan(plan, job, topo, params).feasible:
            continue
        played = simulate_jobs(topo, [(plan, job)], params, iterations=4, warmup=1, orders=["hand"])[0]
        for model in errors:
            fast = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing=model)).iter_time
            errors[model].append(abs(fast / played - 1.0))
    v3, v4 = np.array(errors["v3"]), np.array(errors["v4"])
    assert len(v4) >= 10
    assert v4.max() <= 0.06 and v4.mean() <= 0.02
    assert v3.mean() > v4.mean() and v3.max() > 0.05


def test_v4_changes_only_plans_whose_own_hops_share_a_link():
    """A chain over one link each way (its hops never meet) times alike under v3 and v4; a chain that comes
    back over the same link does not, and v4 gives the overlap it played."""
    topo = Topology([Region(f"r{i}", GPU, 32, "z") for i in range(2)], [Link(0, 1, 2.0, 20.0)])
    job = JobSpec(0, ModelSpec("m", layers=8, hidden=2048, heads=16, seq_len=2048), 32, 1, 0.0, 1, 512)
    apart = Plan(0, (Stage.at(0, 4), Stage.at(1, 4)), schedule="1f1b")
    v3, v4 = (evaluate_plan(apart, job, topo, PerfParams(wan_sharing=s)) for s in ("v3", "v4"))
    assert v3.feasible and v4.iter_time == v3.iter_time
    shared = Plan(0, (Stage.at(0, 3), Stage.at(1, 3), Stage.at(0, 2)), schedule="1f1b")
    v3, v4 = (evaluate_plan(shared, job, topo, PerfParams(wan_sharing=s)) for s in ("v3", "v4"))
    assert v4.iter_time != v3.iter_time and v4.flow_overlap


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_v5_times_a_chain_alone_as_the_flow_level_check_plays_it(schedule):
    """Under ``v5`` a plan whose own hops share a link takes the replay's own pipeline time: alone, the replay and
    the check (written apart) play the same fluid schedule, so they agree to float rounding, where ``v4``, which
    assembles a pipeline again from the hops' mean played transfer times, is off by up to 6 %."""
    v4_errors, v5_errors = [], []
    for topo, plan, job, params in _deep_chains(22, 16):
        plan = dataclasses.replace(plan, schedule=schedule)
        if not evaluate_plan(plan, job, topo, params).feasible:
            continue
        played = simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1, orders=["hand"])[0]
        for model, errors in (("v4", v4_errors), ("v5", v5_errors)):
            fast = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing=model))
            errors.append(abs(fast.iter_time / played - 1.0))
            assert fast.throughput == pytest.approx(job.tokens_per_iteration / fast.iter_time)
    assert len(v5_errors) >= 10
    assert max(v5_errors) < 1e-6
    assert max(v4_errors) > 1e-3  # the assembled pipeline is not the replay's


def test_v5_changes_only_plans_whose_own_hops_share_a_link():
    """A chain over one link each way times alike under v4 and v5 (no replay); one that comes back over the same
    link takes the replay's pipeline time, and its iteration adds the all-reduce as before."""
    topo = Topology([Region(f"r{i}", GPU, 32, "z") for i in range(2)], [Link(0, 1, 2.0, 20.0)])
    job = JobSpec(0, ModelSpec("m", layers=8, hidden=2048, heads=16, seq_len=2048), 32, 1, 0.0, 1, 512)
    apart = Plan(0, (Stage.at(0, 4), Stage.at(1, 4)), schedule="1f1b")
    v4, v5 = (evaluate_plan(apart, job, topo, PerfParams(wan_sharing=s)) for s in ("v4", "v5"))
    assert v4.feasible and v5 == v4
    shared = Plan(0, (Stage.at(0, 3, dp=2), Stage.at(1, 3, dp=2), Stage.at(0, 2, dp=2)), schedule="1f1b")
    params = PerfParams(wan_sharing="v5", dp_overlap=0.0)
    v4, v5 = (evaluate_plan(shared, job, topo, dataclasses.replace(params, wan_sharing=s)) for s in ("v4", "v5"))
    assert v5.pipeline_time != v4.pipeline_time and v5.allreduce_times == v4.allreduce_times
    assert v5.iter_time == pytest.approx(v5.pipeline_time + max(v5.allreduce_times))


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2"])
def test_v5_replays_zero_bubble_chains_as_the_flow_level_check_plays_them(schedule):
    """Under ``v5`` a zero-bubble plan whose own hops share a link is replayed in its hand-crafted and greedy orders
    (the faster is taken, as the check takes it): alone it times within 1 % of the check's fastest play (measured:
    exactly on 22 of these 24 chains, 0.6 % the largest), where ``v4`` (independent flows) is up to 17 % off."""
    from sfenv.experiments.flow_check import fastest_alone

    v4_errors, v5_errors = [], []
    for topo, plan, job, params in _deep_chains(23, 12):
        plan = dataclasses.replace(plan, schedule=schedule)
        params = dataclasses.replace(params, wan_sharing="v5")
        if not evaluate_plan(plan, job, topo, params).feasible:
            continue
        _, _, played = fastest_alone(topo, params, plan, job, iterations=3, warmup=1)
        v5_errors.append(abs(evaluate_plan(plan, job, topo, params).iter_time / played - 1.0))
        v4 = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing="v4")).iter_time
        v4_errors.append(abs(v4 / played - 1.0))
    assert len(v5_errors) >= 10
    assert max(v5_errors) <= 0.01 and sorted(v5_errors)[len(v5_errors) // 2] < 1e-6
    assert max(v4_errors) > 0.05


def test_the_zero_bubble_replay_times_the_pipeline_as_the_reference_replay_when_nothing_is_shared():
    """No WAN flow: the faster of the hand-crafted and greedy replays is :func:`replay_pipeline`'s time (its
    makespan for ZB-H1, its longest stage span for ZB-H2), the same schedule played by another loop."""
    compute, latency, transfer, m = [0.3, 0.5, 0.4, 0.3], [0.01] * 3, [0.05, 0.2, 0.1], 12
    for schedule in ("zb-h1", "zb-h2"):
        windows = tuple(default_windows(4, m, schedule))
        played = [replay_shared(compute, latency, transfer, m, schedule, windows, [], np.ones(2), np.zeros(2),
                                order=order).pipeline_s for order in ("hand", "greedy")]
        assert min(played) == pytest.approx(replay_pipeline(compute, latency, transfer, m, schedule, windows),
                                            rel=1e-12)
        assert played[0] != played[1]  # the two orders differ here
