"""The performance model against measured Megatron runs (the package's copy, checked equal to ../shared's)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from sfenv.experiments.validate_model import (
    MULTI,
    SINGLE,
    default_data_dir,
    error_for_rank_target,
    load_runs,
    published_table,
    summarise,
)

DATA = default_data_dir()
SHARED = Path(os.environ.get("SFENV_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) / "measured"


@pytest.mark.skipif(not (SHARED / SINGLE).exists(), reason=f"the shared data are not at {SHARED}")
@pytest.mark.parametrize("name", [SINGLE, MULTI])
def test_the_bundled_runs_are_the_shared_ones(name):
    assert (DATA / name).read_bytes() == (SHARED / name).read_bytes()


def test_single_server_set_meets_the_targets():
    s = summarise(load_runs(DATA / SINGLE, False))
    assert s["modelled"] == s["runs"] == 1440
    assert s["mape"] <= 0.10
    assert min(s["spearman"].values()) >= 0.9
    assert 0.9 <= s["median_ratio"] <= 1.1


def test_multi_node_set():
    s = summarise(load_runs(DATA / MULTI, True))
    # the six TP-16 runs span two servers: rejected by the model, and counted
    assert s["runs"] - s["modelled"] == sum(s["rejected"].values()) == 6
    assert s["mape"] <= 0.10
    assert 0.9 <= s["median_ratio"] <= 1.1
    # target 0.9 NOT met: the 18.4B runs differ by a few per cent (near the noise), the model ranks
    # them at 0.57; this bound only keeps the figure from sliding further
    assert s["spearman_mean"] >= 0.7
    assert s["best_within_5pct"] == s["best_cases"]


def test_megatron_table1_within_ten_percent():
    rows = published_table()
    assert all(abs(r["model"] / r["published"] - 1) <= 0.10 for r in rows)


def test_error_for_rank_target_is_where_a_noisy_exact_model_ranks_at_the_target():
    """Checked with other draws and scipy's Spearman: at the returned spread the mean is the target."""
    rng = np.random.default_rng(7)
    close = 10.0 * np.exp(rng.normal(0.0, 0.04, 14))  # runs a few per cent apart
    spread = 10.0 * np.exp(rng.normal(0.0, 0.5, 14))
    sigma = error_for_rank_target(close)
    assert 0.0 < sigma < error_for_rank_target(spread)  # closer runs need a more exact model
    check = np.random.default_rng(99)
    got = np.mean([spearmanr(close, close * np.exp(sigma * check.standard_normal(14))).statistic
                   for _ in range(3000)])
    assert abs(got - 0.9) < 0.02


def test_multi_node_ranks_need_more_exactness_than_the_model_has():
    """What the script prints beside the missed target: 18.4B needs a few per cent; the model is off by more."""
    s = summarise(load_runs(DATA / MULTI, True))
    need, have = s["error_for_spearman_0_9"], s["log_error_sd"]
    assert need["18.4B"] < 0.05 < have["18.4B"]
    assert need["18.4B"] < need["3.6B"]  # the 18.4B runs lie closer together
