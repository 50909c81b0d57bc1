"""The ranking-miss diagnosis (experiments/ranking_misses.py): its two measures on hand-made groups, and its report."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from sfenv.experiments.ranking_misses import groups_missing_targets, main, within_group_errors


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
