"""The ranking-miss diagnosis (experiments/ranking_misses.py): its two measures on hand-made groups, and its report."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from sfenv.experiments.ranking_misses import (
    falling_micro_batch_steps,
    groups_missing_targets,
    layer_linearity,
    main,
    within_group_errors,
)
from sfenv.experiments.validate_model import SINGLE, Run, default_data_dir, load_runs


def _run(layers: int, seconds: float, dp: int = 1, micro_batch: int = 1, batch: int = 8, tp: int = 1) -> Run:
    return Run(f"h1024-l{layers}", 8, batch, micro_batch, 1024, 16, layers, 1024, tp, dp, 8 // (tp * dp), seconds,
               False)


def test_layer_linearity_tells_a_composed_set_from_measured_times():
    linear = [_run(n, 0.1 + 0.02 * n) for n in (12, 16, 20, 24)]
    noisy = [_run(n, 0.1 + 0.02 * n + (1e-4 if n == 20 else 0.0), dp=2) for n in (12, 16, 20, 24)]
    two_points = [_run(n, 0.3, micro_batch=2) for n in (12, 16)]  # too few layer counts to tell
    assert layer_linearity(linear + noisy + two_points) == {"dp = 1": (1, 1), "dp > 1": (1, 0)}


def test_falling_micro_batch_steps_per_pipeline_slot():
    # pp 8, batch 8: b 1 has 8 micro-batches (15 slots), b 2 has 4 (11 slots), b 4 has 2 (9 slots)
    runs = [_run(12, 15 * 0.010, micro_batch=1), _run(12, 11 * 0.009, micro_batch=2),
            _run(12, 9 * 0.020, micro_batch=4)]
    assert falling_micro_batch_steps(runs) == {(1024, 1, 1): pytest.approx(0.9)}  # b 2 -> 4 rises: not listed


def test_the_single_server_set_is_composed_not_timed():
    """Every data-parallel-1 configuration is linear in the layer count to a nanosecond: a composition of costs."""
    runs = load_runs(default_data_dir() / SINGLE, False)
    assert layer_linearity(runs) == {"dp = 1": (160, 160), "dp > 1": (200, 0)}
    falling = falling_micro_batch_steps(runs)
    assert falling[(1024, 8, 1)] == pytest.approx(0.83, abs=0.01)
    assert falling[(2048, 8, 1)] == pytest.approx(0.83, abs=0.01)
    assert len(falling) == 6


def test_within_group_errors_remove_each_groups_common_factor():
    meas = np.array([1.0, 2.0, 4.0, 1.0, 3.0])
    pred = meas * np.array([2.0, 2.0, 2.0, 0.5, 1.0])  # group a all 2x high: no within-group error
    err = within_group_errors(pred, meas, {"a": [0, 1, 2], "b": [3, 4]})
    assert err[:3] == pytest.approx([0.0, 0.0, 0.0])
    assert err[3:] == pytest.approx([np.log(0.5) / 2, -np.log(0.5) / 2])


def test_groups_missing_targets_counts_pair_order_and_regret_per_group():
    meas = np.array([1.0, 1.5, 2.0, 1.0, 1.2])
    pred = np.array([1.0, 2.0, 3.0, 1.3, 1.2])  # group a exact; group b picks its slower run (20 % regret)
    assert groups_missing_targets(pred, meas, {"a": [0, 1, 2], "b": [3, 4]}) == (1, 1)
    assert groups_missing_targets(meas, meas, {"a": [0, 1, 2], "b": [3, 4]}) == (0, 0)


@pytest.mark.slow
def test_the_report_on_the_single_server_set():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--draws", "3"]) == 0
    text = out.getvalue()
    assert "1440 runs in 144 groups" in text
    assert "groups missing pair order >= 0.95 / top-1 regret <= 5 %: modelled 20 / 37" in text
    assert "dp = 1: 160 of 160 configurations; dp > 1: 0 of 200 configurations; 32 (hidden, TP, micro-batch)" in text
    assert "without the 11 cells at either end of those steps (1088 runs, 136 groups): groups missing pair order / " \
           "regret 5 / 4" in text
