"""The claims experiment: paired ratios computed from runs, resumable runs, plots."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sfenv.agents.evaluate as evaluate_mod
from sfenv.experiments import claims as C

from sfenv.results import read_results

PNG = b"\x89PNG\r\n\x1a\n"


def _row(agent: str, seed: int, **metrics: float) -> dict:
    base = {"agent": agent, "seed": seed, "unfinished": 0, "mean_jct_s": 1.0, "cost_usd": 1.0,
            "mean_throughput_tokens_s": 1.0, "decision_time_mean_s": 1.0}
    return {**base, **metrics}


def _claim(kind: str, low: float = 1.0, high: float = 2.0, metric: str = "mean_jct_s") -> C.Claim:
    return C.Claim("k", "g", "src", "text", "sys", ("base",), ("sc",), metric, kind, low, high)


@pytest.mark.parametrize("kind", ["lower", "higher", "reduction", "increase"])
def test_measure_takes_the_geometric_mean_of_paired_ratios(kind):
    sys_jct, base_jct = [1.0, 2.0, 4.0], [2.0, 3.0, 12.0]
    rows = {"sc": [_row("sys", s, mean_jct_s=v) for s, v in enumerate(sys_jct)]
            + [_row("base", s, mean_jct_s=v) for s, v in enumerate(base_jct)]}
    (res,) = C.measure(_claim(kind), rows)
    q = math.exp(np.mean([math.log(a / b) for a, b in zip(sys_jct, base_jct)]))  # system / baseline
    expected = {"lower": 1 / q, "higher": q, "reduction": 100 * (1 - q), "increase": 100 * (q - 1)}[kind]
    assert res["value"] == pytest.approx(expected)
    assert res["ci_low"] <= res["value"] <= res["ci_high"]
    assert res["seeds"] == 3 and res["scenario"] == "sc" and res["baseline"] == "base"


def test_verdicts_and_skipped_seeds():
    rows = {"sc": [_row("sys", 0, mean_jct_s=1.0), _row("base", 0, mean_jct_s=1.5),
                   _row("sys", 1, mean_jct_s=math.nan), _row("base", 1, mean_jct_s=2.0)]}
    (res,) = C.measure(_claim("lower", 1.2, 1.3), rows)
    assert res["value"] == pytest.approx(1.5) and res["verdict"] == "above"
    assert res["seeds"] == 1 and res["skipped_seeds"] == 1  # a seed without a finished job
    assert math.isnan(res["ci_low"])  # one seed: no interval
    (res,) = C.measure(_claim("lower", 1.6, 2.0), rows)
    assert res["verdict"] == "below"
    (res,) = C.measure(_claim("lower", 1.4, 1.6), rows)
    assert res["verdict"] == "inside"


def test_pooled_figure_over_scenarios():
    claim = C.Claim("k", "g", "src", "t", "sys", ("base",), ("a", "b"), "decision_time_mean_s", "lower", 20, 90,
                    pooled=True)
    rows = {sc: [_row("sys", 0, decision_time_mean_s=1.0), _row("base", 0, decision_time_mean_s=f)]
            for sc, f in (("a", 10.0), ("b", 160.0))}
    res = C.measure(claim, rows)
    assert [r["scenario"] for r in res] == ["a", "b", "all"]
    assert res[-1]["value"] == pytest.approx(40.0) and res[-1]["verdict"] == "inside"  # sqrt(10 * 160)
    assert res[0]["verdict"] == "below" and res[1]["verdict"] == "above"


def test_run_resume_and_outputs(tmp_path, monkeypatch):
    out = tmp_path / "claims"
    argv = ["--only", "spantrain", "--seeds", "2", "--num-jobs", "4", "--out", str(out), "--quiet"]
    assert C.main(argv) == 0
    runs = read_results(out / "runs-cee.json")[1]
    assert sorted((r["agent"], r["seed"]) for r in runs) == [("ddp", 0), ("ddp", 1), ("fifo", 0), ("fifo", 1),
                                                             ("spantrain", 0), ("spantrain", 1)]
    by = {(r["agent"], r["seed"]): r["mean_throughput_tokens_s"] for r in runs}
    expected = math.exp(np.mean([math.log(by[("spantrain", s)] / by[("fifo", s)]) for s in (0, 1)]))
    result = json.loads((out / "claims.json").read_text())["results"]["spantrain-throughput"][0]
    assert result["value"] == pytest.approx(expected)  # the figure comes from these very runs
    assert (out / "claims.png").read_bytes()[:8] == PNG
    assert "spantrain vs fifo" in (out / "claims.md").read_text()

    def no_more_episodes(*a, **k):
        raise AssertionError("a finished episode was run again")

    monkeypatch.setattr(evaluate_mod, "run_episode", no_more_episodes)
    assert C.main(argv) == 0  # resumed: everything is already there
    (out / "claims.json").unlink()
    assert C.main([*argv, "--report-only"]) == 0  # measured again from the saved runs alone
    again = json.loads((out / "claims.json").read_text())["results"]["spantrain-throughput"][0]
    assert again["value"] == pytest.approx(expected)
    before = (out / "runs-cee.json").read_text()
    with pytest.raises(ValueError, match="other settings"):
        C.main(["--only", "spantrain", "--seeds", "2", "--num-jobs", "5", "--out", str(out), "--quiet"])
    assert (out / "runs-cee.json").read_text() == before  # nothing lost or mixed


def test_overhead_plot(tmp_path):
    rows = {sc: [_row(a, 0, decision_time_mean_s=t * n) for a, t in (("spiderflow", 1e-3), ("ilp", 1e-2))]
            for sc, n in zip(C.SPIDER, (1, 2, 4, 8))}
    C.plot_overhead(rows, tmp_path / "o.png", ["spiderflow", "ilp", "genetic"])
    assert (tmp_path / "o.png").read_bytes()[:8] == PNG


def test_unknown_claim_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown claim"):
        C.main(["--only", "nope"])


@pytest.mark.slow
def test_quick_run_of_every_claim(tmp_path):
    assert C.main(["--quick", "--seeds", "2", "--out", str(tmp_path), "--quiet"]) == 0
    results = json.loads((tmp_path / "claims.json").read_text())["results"]
    assert set(results) == {c.key for c in C.CLAIMS}
    assert all(r["seeds"] >= 1 for rs in results.values() for r in rs)
    assert (tmp_path / "overhead.png").exists()


def test_scenarios_restrict_a_run():
    claims = C.restrict_scenarios(C._select(["spiderflow", "bace"]), ["spider-8"])
    assert {c.group for c in claims} == {"spiderflow"}  # the bace claims run elsewhere: dropped
    assert all(c.scenarios == ("spider-8",) for c in claims)
    assert list(C._plan(claims)) == ["spider-8"]
    with pytest.raises(ValueError, match="no selected claim runs on"):
        C.restrict_scenarios(C._select(["bace"]), ["spider-8"])
