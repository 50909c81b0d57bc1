"""The performance model against measured Megatron runs (the package's copy, checked equal to ../shared's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sfenv.experiments.validate_model import MULTI, SINGLE, default_data_dir, load_runs, published_table, summarise

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
