"""The main job (`sfenv benchmark`), the evaluate table's confidence intervals and `evaluate --csv`."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from sfenv.app.benchmark import DEFAULT_SEEDS, FILES, run_benchmark
from sfenv.app.cli import build_parser, main
from sfenv.app.evaluate import format_table, mean_ci, summarise, write_csv
from sfenv.errors import InvalidInput
from sfenv.runs.results import read_results

# two-sided 95 % Student t quantiles t_{0.975, df} from printed tables (not from the code under test)
T975 = {1: 12.706204736, 2: 4.302652730, 4: 2.776445105}


def _row(agent: str, seed: int, jct_s: float, p95_s: float, cost: float, tput: float, unfinished: int) -> dict:
    return {"agent": agent, "seed": seed, "mean_jct_s": jct_s, "p95_jct_s": p95_s, "cost_usd": cost,
            "mean_throughput_tokens_s": tput, "unfinished": unfinished, "energy_kwh": 1.0, "utilisation": 0.5,
            "decision_time_mean_s": 0.001, "decision_time_max_s": 0.002}


def test_summary_ci_matches_numpy_on_known_rows():
    rng = np.random.default_rng(7)
    vals = {k: rng.uniform(1, 100, size=5) for k in ("jct", "p95", "cost", "tput")}
    unf = [0, 1, 0, 2, 0]
    rows = [_row("a", s, vals["jct"][s] * 3600, vals["p95"][s] * 3600, vals["cost"][s], vals["tput"][s], unf[s])
            for s in range(5)] + [_row("b", 0, 7200.0, 7200.0, 3.0, 4.0, 0)]
    summary = summarise(rows)
    assert [s["agent"] for s in summary] == ["a", "b"] and [s["seeds"] for s in summary] == [5, 1]
    a = summary[0]
    for col, x in (("mean_jct_h", vals["jct"]), ("p95_jct_h", vals["p95"]), ("cost_usd", vals["cost"]),
                   ("throughput_tok_s", vals["tput"]), ("unfinished", np.array(unf, dtype=float))):
        assert a[col] == pytest.approx(float(np.mean(x)))
        assert a[col + "_ci"] == pytest.approx(T975[4] * float(np.std(x, ddof=1)) / math.sqrt(5), rel=1e-8)
    b = summary[1]  # one seed: a mean but no interval
    assert b["mean_jct_h"] == 2.0 and math.isnan(b["mean_jct_h_ci"])
    table = format_table(summary)
    assert f"{a['mean_jct_h']:.2f} ± {a['mean_jct_h_ci']:.2f}" in table
    assert f"{a['unfinished']:.1f} ± {a['unfinished_ci']:.1f}" in table
    assert "2.00 ± -" in table and "95 % CI" in table


def test_mean_ci_small_samples():
    assert mean_ci([1.0, 3.0]) == pytest.approx((2.0, T975[1] * math.sqrt(2) / math.sqrt(2)))
    m, h = mean_ci([4.0, 4.0, 4.0])
    assert m == 4.0 and h == 0.0
    m, h = mean_ci([1.0, math.nan, 2.0, 3.0])  # NaN episodes are left out
    assert m == 2.0 and h == pytest.approx(T975[2] * 1.0 / math.sqrt(3))
    assert all(math.isnan(v) for v in mean_ci([]))


def test_write_csv_one_row_per_episode(tmp_path):
    rows = [dict(_row("a", s, 1.0 + s, 2.0, 3.0, 4.0, s), jcts_s=[1.0, 2.0]) for s in range(3)]
    rows[2]["stopped_early"] = True  # a column only some rows have
    path = tmp_path / "sub" / "ep.csv"
    write_csv(rows, path)
    with path.open() as f:
        got = list(csv.DictReader(f))
    assert len(got) == 3 and "jcts_s" not in got[0]
    assert got[2]["stopped_early"] == "True" and got[0]["stopped_early"] == ""
    assert [float(g["mean_jct_s"]) for g in got] == [1.0, 2.0, 3.0] and not list(path.parent.glob(".*.tmp"))


def test_benchmark_writes_its_results_in_the_callers_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run_benchmark("fifo,random", seeds=2, num_jobs=4, progress=False, log=lambda m: None)
    out = tmp_path / "results" / "spider-8"
    assert res["ran"] == 4 and {str(out / f) for f in FILES.values()} == set(res["files"])
    for name in FILES.values():
        assert (out / name).stat().st_size > 0, name
    assert not list(out.glob(".*.tmp"))
    with (out / "episodes.csv").open() as f:
        csv_rows = list(csv.DictReader(f))
    episodes = read_results(out / "episodes.json")[1]
    assert [(r["agent"], int(r["seed"])) for r in csv_rows] == [(r["agent"], r["seed"]) for r in episodes] == [
        ("fifo", 0), ("fifo", 1), ("random", 0), ("random", 1)]
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["episodes"] == episodes and bench["meta"]["num_jobs"] == 4
    assert bench["summary"] == summarise(episodes)
    tl = bench["timeline"]
    assert tl["agent"] == "fifo" and tl["seed"] == 0 and len(tl["jobs"]) == 4
    fifo0 = episodes[0]
    assert tl["finished"] == fifo0["finished"] and tl["end_s"] == fifo0["makespan_s"]  # the same episode replayed
    assert len(tl["prices_usd_mwh"]) == len(tl["regions"]) == 8
    assert len(tl["prices_usd_mwh"][0]) == math.ceil(tl["end_s"] / 3600)


def test_benchmark_resume_runs_only_missing_episodes_and_refuses_other_settings(tmp_path):
    first = run_benchmark("fifo", seeds=2, num_jobs=4, out_dir=tmp_path, progress=False, plots=False,
                          log=lambda m: None)
    more = run_benchmark("fifo", seeds=3, num_jobs=4, out_dir=tmp_path, resume=True, progress=False, plots=False,
                         log=lambda m: None)
    assert first["ran"] == 2 and more["ran"] == 1  # only seed 2 ran
    assert more["episodes"][:2] == first["episodes"] and [r["seed"] for r in more["episodes"]] == [0, 1, 2]
    again = run_benchmark("fifo", seeds=3, num_jobs=4, out_dir=tmp_path, resume=True, progress=False, plots=False,
                          log=lambda m: None)
    assert again["ran"] == 0 and again["episodes"] == more["episodes"]
    with pytest.raises(InvalidInput, match="num_jobs: 4 in the file, 5 now"):
        run_benchmark("fifo", seeds=3, num_jobs=5, out_dir=tmp_path, resume=True, progress=False, plots=False,
                      log=lambda m: None)


def test_an_interrupted_benchmark_keeps_its_settings(tmp_path):
    seen = []

    def log(msg: str) -> None:  # the first message comes before any episode runs
        if not seen:
            seen.append(json.loads((tmp_path / "benchmark.json").read_text()))

    run_benchmark("fifo", seeds=1, num_jobs=4, out_dir=tmp_path, progress=False, plots=False, log=log)
    assert seen[0]["meta"]["num_jobs"] == 4 and seen[0]["episodes"] == []
    # episodes saved without a benchmark.json (e.g. by sfenv evaluate --out) are checked by their own settings
    (tmp_path / "benchmark.json").unlink()
    with pytest.raises(InvalidInput, match="num_jobs: 4 in the file, 5 now"):
        run_benchmark("fifo", seeds=2, num_jobs=5, out_dir=tmp_path, resume=True, progress=False, plots=False,
                      log=lambda m: None)
    res = run_benchmark("fifo", seeds=2, num_jobs=4, out_dir=tmp_path, resume=True, progress=False, plots=False,
                        log=lambda m: None)
    assert res["ran"] == 1


def test_cli_benchmark_and_plot_from_a_temporary_folder(tmp_path):
    # tpa solves MILPs with HiGHS: its start-up banner must not reach stdout
    cmd = [sys.executable, "-m", "sfenv", "benchmark", "--agents", "fifo,tpa", "--seeds", "2", "--num-jobs", "3"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "results" / "spider-8"
    assert "HiGHS" not in proc.stdout and "Copyright" not in proc.stdout
    assert "mean_jct_h" in proc.stdout and "tpa" in proc.stdout and str(out / "benchmark.json") in proc.stdout
    assert "benchmark: 2 agents x 2 seeds" in proc.stderr  # progress lines on stderr
    assert "episode/s" not in proc.stderr and "s/episode" not in proc.stderr  # a pipe: no bar (tests/test_progress.py)
    pngs = {p.name: p.stat().st_mtime_ns for p in out.glob("*.png")}
    assert set(pngs) == {FILES[k] for k in ("jct", "cost", "tradeoff", "timeline", "prices")}
    for p in out.glob("*.png"):
        p.unlink()
    proc = subprocess.run([sys.executable, "-m", "sfenv", "plot", "results/spider-8/benchmark.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.glob("*.png")} == set(pngs)


def test_highs_banner_is_kept_off_stdout():
    code = "import highspy; {}highspy.Highs(); highspy.Highs(); print('ok')"
    quiet = "from sfenv.app.evaluate import quiet_solver_banner; quiet_solver_banner(); "
    plain = subprocess.run([sys.executable, "-c", code.format("")], capture_output=True, text=True, check=True)
    assert "Running HiGHS" in plain.stdout  # the banner exists (else this test proves nothing)
    fixed = subprocess.run([sys.executable, "-c", code.format(quiet)], capture_output=True, text=True, check=True)
    assert fixed.stdout == "ok\n" and "HiGHS" not in fixed.stderr


def test_plot_from_an_evaluate_results_list_and_evaluate_csv(tmp_path, capsys):
    res, table = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["evaluate", "--agents", "fifo,cheapest", "--seeds", "2", "--num-jobs", "3", "--out", str(res),
                 "--csv", str(table), "--quiet"]) == 0
    assert "± " in capsys.readouterr().out
    with table.open() as f:
        rows = list(csv.DictReader(f))
    saved = read_results(res)[1]
    assert len(rows) == 4 and [float(r["mean_jct_s"]) for r in rows] == [r["mean_jct_s"] for r in saved]
    assert main(["plot", str(res), "--out-dir", str(tmp_path / "figs")]) == 0
    assert {p.name for p in (tmp_path / "figs").glob("*.png")} == {"jct.png", "cost.png", "tradeoff.png"}
    assert main(["plot", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    assert main(["plot", str(tmp_path / "junk.json")]) == 2 and main(["plot", str(tmp_path / "other.json")]) == 2


def test_cli_defaults_match_the_module():
    args = build_parser().parse_args(["benchmark"])
    assert args.seeds == DEFAULT_SEEDS and args.agents == "default" and args.scenario == "spider-8"
