"""The compiled pipeline replays (:mod:`sfenv.model._pipeline_jit`) equal the Python loops bit for bit."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest

from sfenv.model import pipeline
from sfenv.model.pipeline import (
    _replay,
    _replay_zero_bubble,
    _sweep_fixed_order,
    _sweep_plan,
    _sweep_zero_bubble,
    _zero_bubble_rows,
    default_windows,
    zero_bubble_split,
)

jit = pytest.importorskip("sfenv.model._pipeline_jit")
if not jit.AVAILABLE:  # pragma: no cover - numba missing or SFENV_NO_JIT set
    pytest.skip("numba is not installed (or SFENV_NO_JIT is set)", allow_module_level=True)


def _cases(count: int, seed: int) -> list[tuple]:
    """Seeded chains whose times are drawn from few values, so that equal event times are common."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        p, m = rng.randint(2, 12), rng.randint(1, 40)
        c = tuple(rng.choice([0.5, 1.0, 1.5, 3.0, rng.random()]) for _ in range(p))
        lat = tuple(rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(p - 1))
        x = tuple(rng.choice([0.0, 0.25, 1.0, rng.random()]) for _ in range(p - 1))
        cross = [rng.random() < 0.5 for _ in range(p - 1)]
        out.append((c, lat, x, m, cross, rng.randint(0, 3), rng.randint(-1, 3)))
    return out


def _arrays(c: tuple, lat: tuple, x: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array(c, dtype=np.float64), np.array(lat, dtype=np.float64), np.array(x, dtype=np.float64)


def test_zero_bubble_replay_equals_the_python_loop() -> None:
    """Duration, span and per-stage peaks equal, on 800 chains (ties common), and equal the reference event replay."""
    equal_reference = 0
    for c, lat, x, m, _, _, shift in _cases(800, seed=3):
        w = tuple(max(1, len(c) - k + shift) for k in range(len(c)))
        want = _replay_zero_bubble(c, lat, x, m, w)
        duration, span, peaks, completed = jit.replay_zero_bubble(*_arrays(c, lat, x), m,
                                                                   np.array(w, dtype=np.int64))
        assert completed
        assert duration == want[0] and span == want[2]
        assert peaks.tolist() == list(want[1])
        ref = _replay(c, lat, x, m, "zb-h1", list(w))
        equal_reference += ref[0] == duration and list(ref[1]) == peaks.tolist() and ref[2] == span
    assert equal_reference == 800


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2"])
def test_hand_crafted_zero_bubble_sweep_equals_the_python_loop(schedule: str) -> None:
    """Its table of operations (the same rows) and its makespan and span (the same floats), on 400 chains."""
    for c, lat, x, m, cross, extra, shift in _cases(400, seed=9 + (schedule == "zb-h2")):
        w = default_windows(len(c), m, schedule, cross, extra)
        if shift < 0:  # windows as a caller may give them: any non-increasing values in 1..m
            w = tuple(sorted((random.Random(m).randint(1, m) for _ in c), reverse=True))
        u, d = zero_bubble_split(schedule, w)
        rows = np.array(_zero_bubble_rows(m, u, d), dtype=np.int64).reshape(-1, 4)
        got = jit.zero_bubble_rows(m, np.array(u, dtype=np.int64), np.array(d, dtype=np.int64))
        assert np.array_equal(got, rows)
        assert jit.sweep_zero_bubble(*_arrays(c, lat, x), m, got) == _sweep_zero_bubble(c, lat, x, m, rows.tolist())


@pytest.mark.parametrize("gpipe", [False, True])
def test_fixed_order_sweep_equals_the_python_loop(gpipe: bool) -> None:
    """1F1B and GPipe orders with default and widened windows: the same float, on 800 chains."""
    for c, lat, x, m, cross, extra, _ in _cases(800, seed=5):
        w = default_windows(len(c), m, "gpipe" if gpipe else "1f1b", cross, extra)
        rows = np.array(_sweep_plan(gpipe, m, w), dtype=np.int64).reshape(-1, 4)
        assert np.array_equal(jit.sweep_plan(gpipe, m, np.array(w, dtype=np.int64)), rows)
        assert jit.sweep_fixed_order(*_arrays(c, lat, x), m, rows) == _sweep_fixed_order(c, lat, x, m, w, gpipe)


def test_pipeline_time_is_the_same_with_and_without_the_compiled_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`sfenv.model.pipeline.pipeline_time` on 300 chains and every schedule: equal floats either way."""
    cases = _cases(300, seed=7)
    schedules = ("1f1b", "zb-h1", "zb-h2", "gpipe")

    def times() -> list[float]:
        for f in (pipeline._pipeline_time_cached, pipeline._replayed_head, pipeline._steady_period_cached):
            f.cache_clear()
        out = []
        for i, (c, lat, x, m, cross, extra, _) in enumerate(cases):
            s = schedules[i % 4]
            out.append(pipeline.pipeline_time(c, lat, x, 4 * m, s, default_windows(len(c), 4 * m, s, cross, extra)))
        return out

    monkeypatch.setattr(pipeline, "_jit", jit)
    compiled = times()
    monkeypatch.setattr(pipeline, "_jit", None)
    assert times() == compiled


def test_sfenv_no_jit_turns_the_compiled_replays_off() -> None:
    """``SFENV_NO_JIT=1``: the Python loops run (and numba is not imported by the replay)."""
    code = ("import sys; from sfenv.model import pipeline; "
            "pipeline.pipeline_time((1.0, 2.0), (0.1,), (0.2,), 8, 'zb-h1'); "
            "print(pipeline._jit is None, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "SFENV_NO_JIT": "1"})
    assert out.stdout.split() == ["True", "False"]


def test_building_an_env_loads_the_compiled_replays_so_no_step_pays_for_it() -> None:
    """``gym.make`` imports numba and loads every kernel for the types the replays pass (not the first step)."""
    code = ("import sys, gymnasium as gym, sfenv; from sfenv.model import pipeline; "
            "assert 'numba' not in sys.modules; gym.make('sfenv/GeoSched-v6'); j = pipeline._jit; "
            "kernels = (j.replay_zero_bubble, j.sweep_fixed_order, j.sweep_plan, j.sweep_zero_bubble, "
            "j.zero_bubble_rows); "
            "print(*[len(k.signatures) for k in kernels]); "
            "pipeline.pipeline_time((1.0, 2.0, 1.5), (0.1, 0.2), (0.2, 0.1), 32, 'zb-h1'); "
            "pipeline.pipeline_time((1.0, 2.0, 1.5), (0.1, 0.2), (0.2, 0.1), 32, 'zb-h2'); "
            "pipeline.pipeline_time((1.0, 2.0, 1.5), (0.1, 0.2), (0.2, 0.1), 32, '1f1b'); "
            "print(*[len(k.signatures) for k in kernels])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, after_replays = out.stdout.strip().splitlines()
    assert loaded == after_replays == "1 1 1 1 1"  # replays after gym.make need no new compiled version


def test_hop_overlap_is_the_same_with_and_without_the_compiled_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`sfenv.model.pipeline.hop_overlap` (the v3 sharing model's own-hop overlap): equal floats, on 400
    chains under 1F1B and GPipe with each direction's own transfer time, and only the pairs asked for."""
    rng = random.Random(11)
    for c, lat, x, m, cross, extra, _ in _cases(400, seed=11):
        schedule = "gpipe" if rng.random() < 0.5 else "1f1b"
        back = tuple(rng.choice([0.0, 0.25, v]) for v in x)
        w = default_windows(len(c), m, schedule, cross, extra)
        pairs = {(a, b) for a in range(2 * len(c) - 2) for b in range(2 * len(c) - 2) if rng.random() < 0.3}
        compiled = [pipeline.hop_overlap(c, lat, x, back, m, schedule, w, chosen) for chosen in (None, pairs)]
        monkeypatch.setattr(pipeline, "_jit", None)
        python = [pipeline.hop_overlap(c, lat, x, back, m, schedule, w, chosen) for chosen in (None, pairs)]
        monkeypatch.undo()
        assert compiled == python
        assert set(compiled[1]) <= pairs
