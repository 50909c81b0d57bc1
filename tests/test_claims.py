"""The claims experiment: paired ratios computed from runs, resumable runs, plots."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from sfenv.experiments import claims as C

import sfenv.app.evaluate as evaluate_mod
from sfenv.runs.results import read_results, scenario_hash
from sfenv.scenario import load_scenario

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
    # the interval is the Student-t interval of the mean log ratio, mapped to the claim's figure
    logs = [math.log(a / b) for a, b in zip(sys_jct, base_jct)]
    lo, hi = stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    ends = sorted(C._figure(kind, x) for x in (lo, hi))
    assert (res["ci_low"], res["ci_high"]) == pytest.approx(tuple(ends))


@pytest.mark.parametrize("method, least", [("t", 0.92), ("bca", 0.85)])
def test_interval_covers_the_true_mean_at_ten_seeds(method, least):
    """At 10 seeds the interval covers the true mean log ratio about 95 % of the time (simulated)."""
    rng = np.random.default_rng(1)
    reps = 300 if method == "t" else 120
    hits = 0
    for _ in range(reps):
        x = rng.normal(0.3, 0.2, size=10)
        lo, hi = C.interval(x, method, seed=int(rng.integers(1 << 30)))
        hits += lo <= 0.3 <= hi
    assert hits / reps >= least
    # the old percentile bootstrap over 3 seeds had 10 distinct resamples and covered far less
    old = 0
    for _ in range(reps):
        x = rng.normal(0.3, 0.2, size=3)
        means = rng.choice(x, size=(2000, 3)).mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        old += lo <= 0.3 <= hi
    assert old / reps < least


def test_interval_edge_cases():
    assert all(math.isnan(v) for v in C.interval([0.1]))
    assert C.interval([0.2, 0.2, 0.2]) == pytest.approx((0.2, 0.2))  # equal ratios: no spread
    with pytest.raises(ValueError, match="interval method"):
        C.interval([0.1, 0.2], "percentile")


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
    rows["a"][0]["unfinished"] = 2
    rows["b"][1]["unfinished"] = 3
    res = C.measure(claim, rows)
    assert [r["scenario"] for r in res] == ["a", "b", "all"]
    assert [r["unfinished_jobs"] for r in res] == [2, 3, 5]  # pooled: computed, not 0
    assert res[-1]["value"] == pytest.approx(40.0) and res[-1]["verdict"] == "inside"  # sqrt(10 * 160)
    assert res[0]["verdict"] == "below" and res[1]["verdict"] == "above"


def test_pooled_row_names_its_scenarios_when_it_pools_fewer_than_the_claims():
    (overhead,) = (c for c in C.CLAIMS if c.key == "spiderflow-overhead")
    rows = {sc: [_row("spiderflow", 0, decision_time_mean_s=1.0), _row("ilp", 0, decision_time_mean_s=f)]
            for sc, f in (("spider-8", 10.0), ("spider-16", 160.0))}
    restricted = C.restrict_scenarios([overhead], ["spider-8", "spider-16"])[0]
    for claim in (overhead, restricted):  # runs missing for spider-32/64, or a run restricted to two sizes
        pooled = [r for r in C.measure(claim, rows) if r["baseline"] == "ilp"][-1]
        assert pooled["scenario"] == "pooled: spider-8, spider-16"
        assert pooled["pooled_over"] == ["spider-8", "spider-16"]
        assert pooled["value"] == pytest.approx(40.0)
    rows.update({sc: rows["spider-8"] for sc in ("spider-32", "spider-64")})
    assert [r for r in C.measure(overhead, rows) if r["baseline"] == "ilp"][-1]["scenario"] == "all"


def test_run_resume_and_outputs(tmp_path, monkeypatch):
    out = tmp_path / "claims"
    # the tiny configuration: 10 seeds, 3 jobs of the cheap cee scenario, SpanTrain and its ablation
    argv = ["--only", "spantrain", "--seeds", "10", "--num-jobs", "3", "--out", str(out), "--quiet"]
    assert C.main(argv) == 0
    runs = read_results(out / "runs-cee.json")[1]
    agents = ["ddp", "fifo", "spantrain", "spantrain-placement", "spantrain-zb"]
    assert sorted((r["agent"], r["seed"]) for r in runs) == [(a, s) for a in agents for s in range(10)]
    by = {(r["agent"], r["seed"]): r for r in runs}
    saved = json.loads((out / "claims.json").read_text())
    for key, system, base, metric in [("spantrain-throughput", "spantrain", "fifo", "mean_throughput_tokens_s"),
                                      ("spantrain-ablation-zb", "spantrain-zb", "spantrain-placement",
                                       "mean_throughput_tokens_s"),
                                      ("spantrain-jct", "spantrain", "fifo", "mean_jct_s")]:
        logs = [math.log(by[(system, s)][metric] / by[(base, s)][metric]) for s in range(10)]
        result = next(r for r in saved["results"][key] if r["baseline"] == base)
        q = math.exp(np.mean(logs))
        assert result["value"] == pytest.approx(1 / q if metric == "mean_jct_s" else q)  # from these very runs
        assert result["seeds"] == 10
        assert result["unfinished_jobs"] == sum(by[(a, s)]["unfinished"] for a in (system, base) for s in range(10))
    assert saved["interval_method"] == C.INTERVALS["t"] and saved["jobs_per_episode"] == {"cee": 3}
    assert (out / "claims.png").read_bytes()[:8] == PNG
    md = (out / "claims.md").read_text()
    assert "spantrain vs fifo" in md and "spantrain-zb vs spantrain-placement" in md
    assert C.INTERVALS["t"] in md and "per-job run rate" in md

    def no_more_episodes(*a, **k):
        raise AssertionError("a finished episode was run again")

    monkeypatch.setattr(evaluate_mod, "run_episode", no_more_episodes)
    assert C.main(argv) == 0  # resumed: everything is already there
    (out / "claims.json").unlink()
    assert C.main([*argv, "--report-only"]) == 0  # measured again from the saved runs alone
    again = json.loads((out / "claims.json").read_text())["results"]["spantrain-throughput"][0]
    assert again == saved["results"]["spantrain-throughput"][0]
    assert C.main([*argv, "--report-only", "--interval", "bca"]) == 0  # the other method, same runs
    assert C.INTERVALS["bca"] in (out / "claims.md").read_text()
    before = (out / "runs-cee.json").read_text()
    with pytest.raises(ValueError, match="other settings"):
        C.main(["--only", "spantrain", "--seeds", "10", "--num-jobs", "5", "--out", str(out), "--quiet"])
    assert (out / "runs-cee.json").read_text() == before  # nothing lost or mixed


def test_overhead_plot(tmp_path):
    rows = {sc: [_row(a, 0, decision_time_mean_s=t * n) for a, t in (("spiderflow", 1e-3), ("ilp", 1e-2))]
            for sc, n in zip(C.SPIDER, (1, 2, 4, 8))}
    C.plot_overhead(rows, tmp_path / "o.png", ["spiderflow", "ilp", "genetic"])
    assert (tmp_path / "o.png").read_bytes()[:8] == PNG


def test_unknown_claim_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown claim"):
        C.main(["--only", "nope"])


@pytest.mark.parametrize("argv, msg", [(["--seeds", "1"], "--seeds"), (["--num-jobs", "-1"], "--num-jobs"),
                                       (["--wan-sharing", "v9"], "--wan-sharing")])
def test_bad_arguments_exit_2_with_one_line(argv, msg, capsys):
    with pytest.raises(SystemExit) as exc:
        C.main([*argv, "--only", "spantrain"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sfenv: ") and msg in err and len(err.splitlines()) == 1


def test_default_job_caps_name_the_ilp_scenarios():
    jobs = C.job_caps(["spider-8", "spider-16", "cee"], None, C.JOB_CAPS)
    assert jobs["spider-8"] is None and jobs["cee"] is None
    assert jobs["spider-16"] == C.JOB_CAPS["spider-16"]
    assert C.job_caps(["cee"], 1000) == {"cee": 12}  # a cap above the workload: its own size
    md = C.format_markdown([], {}, "t", jobs)
    assert "spider-16 12 (capped: the ILP baseline's cost)" in md and "spider-8 all" in md


@pytest.mark.slow
def test_quick_run_of_every_claim(tmp_path):
    assert C.main(["--quick", "--seeds", "2", "--out", str(tmp_path), "--quiet"]) == 0
    # explicit seeds are labelled as such (and the split whose range holds them named), per scenario
    seeds_line = (tmp_path / "claims.md").read_text().splitlines()[1]
    assert seeds_line.startswith("Seeds: ")
    assert "spider-8 0..1 (explicit seeds, in the train split's range)" in seeds_line
    results = json.loads((tmp_path / "claims.json").read_text())["results"]
    assert set(results) == {c.key for c in C.CLAIMS}
    assert all(r["seeds"] >= 1 for rs in results.values() for r in rs)
    assert (tmp_path / "overhead.png").exists()


def test_split_plays_the_splits_first_seeds_and_says_so(tmp_path):
    from sfenv.runs import protocol

    argv = ["--quick", "--seeds", "2", "--split", "test", "--only", "bace", "--out", str(tmp_path), "--quiet"]
    assert C.main(argv) == 0
    settings, rows = read_results(tmp_path / "runs-bace-6.json")
    first = protocol.seeds("test", 2, "bace-6")
    assert settings["split"] == "test" and settings["seeds"] == first
    assert {r["seed"] for r in rows} == set(first)
    assert f"bace-6 {first[0]}..{first[1]} (the test split's first 2)" in (tmp_path / "claims.md").read_text()


def test_the_claims_run_under_another_wan_sharing_model_apart(tmp_path):
    """By default every episode is played as env v6 plays it (its scenario hash), the version and its sharing model
    ``v5`` recorded in the run's settings, so a ``--env-version v5`` run or a ``--wan-sharing v4``, ``v3`` or ``v2``
    run in the same folder is refused rather than mixed; ``--env-version v5`` plays the ``-v5`` ids' settings and
    records what env v5's runs recorded; v2 runs keep env v2's settings and scenario hash."""
    from sfenv.registration import VERSION_SIM

    argv = ["--only", "spantrain", "--seeds", "2", "--num-jobs", "2", "--quiet"]
    assert C.main([*argv, "--out", str(tmp_path / "v6")]) == 0
    assert C.main([*argv, "--out", str(tmp_path / "v5"), "--env-version", "v5"]) == 0
    assert C.main([*argv, "--out", str(tmp_path / "v2"), "--wan-sharing", "v2"]) == 0
    v6, v5, v2 = (read_results(tmp_path / v / "runs-cee.json")[0] for v in ("v6", "v5", "v2"))
    assert v6["scenario"] == v5["scenario"] == v2["scenario"] == "cee"
    assert len({v6["scenario_sha"], v5["scenario_sha"], v2["scenario_sha"]}) == 3
    cee = load_scenario("cee").with_overrides(workload={"num_jobs": 2})
    assert v6["scenario_sha"] == scenario_hash(cee)  # the bundled file, as env v6 plays it
    assert v5["scenario_sha"] == scenario_hash(cee.with_overrides(sim=VERSION_SIM["v5"]))  # as the -v5 ids play it
    assert v2["scenario_sha"] == scenario_hash(cee.with_overrides(sim={"wan_sharing": "v2"}))
    config = {v: json.loads((tmp_path / v / "config.json").read_text()) for v in ("v6", "v5", "v2")}
    assert config["v6"]["wan_sharing"] == config["v5"]["wan_sharing"] == "v5"
    assert config["v6"]["env_version"] == "v6" and "env_version" not in config["v5"]  # as env v5's runs recorded
    assert "wan_sharing" not in config["v2"]
    for other in (["--env-version", "v5"], ["--wan-sharing", "v4"], ["--wan-sharing", "v3"], ["--wan-sharing", "v2"]):
        with pytest.raises(ValueError, match="other settings"):
            C.main([*argv, "--out", str(tmp_path / "v6"), *other])
    with pytest.raises(SystemExit) as e:
        C.main([*argv, "--out", str(tmp_path / "x"), "--env-version", "v1"])
    assert e.value.code == 2


def test_scenarios_restrict_a_run():
    claims = C.restrict_scenarios(C._select(["spiderflow", "bace"]), ["spider-8"])
    assert {c.group for c in claims} == {"spiderflow"}  # the bace claims run elsewhere: dropped
    assert all(c.scenarios == ("spider-8",) for c in claims)
    assert list(C._plan(claims)) == ["spider-8"]
    with pytest.raises(ValueError, match="no selected claim runs on"):
        C.restrict_scenarios(C._select(["bace"]), ["spider-8"])
