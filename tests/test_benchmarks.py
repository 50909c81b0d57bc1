"""The benchmark scripts run at tiny sizes and measure what they claim to (no timing asserts)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from sfenv.experiments import bench_agents, bench_env, bench_sim


def test_bench_sim_runs_a_workload_to_the_end():
    row = bench_sim.run("spider-8", jobs=20, rate_scale=1.0)
    assert row["finished"] == 20 and row["events"] >= 40  # an arrival and a completion per job
    assert row["evals_per_s"] > 0 and row["heap_ref_s"] > 0


SHARED = Path(os.environ.get("SFENV_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
TRACE = SHARED / "traces" / "philly_jobs_2017-10-02_7d.csv"  # tests may read ../shared and skip without it
needs_trace = pytest.mark.skipif(not TRACE.is_file(), reason=f"shared Philly trace not found at {TRACE}")


def _write_trace(path, rows):
    path.write_text("submit_offset_s,num_gpus,duration_s\n" + "".join(f"{t},{g},{d}\n" for t, g, d in rows))
    return path


@needs_trace
def test_trace_replay_smoke_on_the_first_300_philly_jobs():
    rows = {a: bench_sim.run_trace(TRACE, a, jobs=300) for a in ("fifo", "spinsearch")}
    for agent, row in rows.items():
        assert row["agent"] == agent and row["scenario"] == "spider-64" and row["jobs"] == 300
        assert row["finished"] + row["unfinished"] == 300 and row["finished"] > 0
        assert row["events"] >= 2 * row["finished"]  # an arrival and a completion per finished job
        assert row["agent_calls"] >= row["decisions"] >= row["finished"]
        assert row["wall_s"] >= row["run_s"] > 0 and row["events_per_s"] > 0
        assert row["peak_mb"] >= row["rss_before_mb"] > 0
    assert rows["fifo"]["digest"] != rows["spinsearch"]["digest"]  # the agent drove the episode
    assert bench_sim.run_trace(TRACE, "fifo", jobs=300)["digest"] == rows["fifo"]["digest"]  # deterministic


@needs_trace
def test_trace_scenario_replays_the_csv_rows():
    from sfenv.world.workload import read_trace_csv

    sc = bench_sim.trace_scenario(TRACE, jobs=50, time_scale=0.5)
    jobs = sc.make_jobs(np.random.default_rng(0))
    rows = read_trace_csv(TRACE, limit=50)
    assert [j.arrival for j in jobs] == [(r.submit_s - rows[0].submit_s) * 0.5 for r in rows]
    assert [j.max_gpus for j in jobs] == [max(8, 8 * r.gpus) for r in rows]
    assert bench_sim.trace_rows(TRACE) == 11386
    assert len(bench_sim.trace_scenario(TRACE).make_jobs(np.random.default_rng(0))) == 11386  # whole file by default


def test_trace_replay_in_a_fresh_process_is_the_same_episode(tmp_path):
    csv = _write_trace(tmp_path / "t.csv", [(60 * i, [1, 1, 2, 8, 1, 4][i % 6], 600 + 97 * i) for i in range(40)])
    here = bench_sim.run_trace(csv, "fifo")
    there = bench_sim.run_trace_isolated(csv, "fifo")
    assert here["jobs"] == there["jobs"] == 40 and here["finished"] == 40
    assert there["digest"] == here["digest"]


def test_bench_sim_main_replays_a_given_trace(tmp_path, capsys):
    csv = _write_trace(tmp_path / "t.csv", [(120 * i, 1 + i % 3, 900) for i in range(30)])
    bench_sim.main(["--trace-only", "--in-process", "--trace", str(csv)])
    out = capsys.readouterr().out
    lines = [ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0] in ("fifo", "spinsearch")]
    assert [ln[0] for ln in lines] == ["fifo", "spinsearch"]
    assert all(ln[1] == "30" for ln in lines) and "30 s, 500 MB" in out


def test_bench_sim_without_the_shared_trace_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_sim, "DEFAULT_TRACE", None)
    bench_sim.main(["--trace-only"])  # no --trace and no default file: a message, not a crash
    captured = capsys.readouterr()
    assert "trace replay skipped" in captured.err and "--trace PATH" in captured.err and captured.out == ""
    with pytest.raises(SystemExit) as e:
        bench_sim.main(["--trace-only", "--trace", str(tmp_path / "absent.csv")])
    assert e.value.code == 2


@pytest.mark.slow
@needs_trace
def test_trace_replay_of_the_philly_week_with_fifo_and_spinsearch():
    for agent in ("fifo", "spinsearch"):
        row = bench_sim.run_trace_isolated(TRACE, agent)
        assert row["jobs"] == row["finished"] == 11386
        assert row["peak_mb"] < bench_sim.TARGET_RSS_MB  # memory target (the wall-time target is not asserted)


def test_bench_env_counts_steps():
    assert bench_env.steps_per_s("sfenv/Spider8-v6", 50, masked=True, num_jobs=5) > 0


def test_bench_env_training_share_is_a_fraction_of_the_run():
    share, wall = bench_env.training_share(64)  # one MaskablePPO rollout of 1,024 steps
    assert 0.0 < share < 1.0 and wall > 0
    assert bench_env.StepTimer.total == pytest.approx(share * wall)  # the timer measured the env in this run


def test_bench_agents_times_every_agent_on_the_same_points(tmp_path):
    names = ["spinsearch", "fifo", "ilp"]
    row = bench_agents.decision_times("spider-8", names, points=2, num_jobs=4)
    assert row["points"] == 2 and set(row["mean_s"]) == set(names)
    assert all(row["max_s"][n] >= row["mean_s"][n] > 0 for n in names)
    assert row["planned"]["fifo"] >= 1  # FIFO drives the episode, so it plans at some decision point
    table = bench_agents.format_rows([row], names)
    assert "ilp/spin" in table and "spider-8" in table
    out = tmp_path / "r.json"
    bench_agents.atomic_write_json(out, [row])
    assert json.loads(out.read_text())[0]["points"] == 2


def test_bench_env_compares_with_another_checkout(tmp_path):
    """Smoke: this code against itself (a stand-in for another revision), one round, few steps."""
    from pathlib import Path

    here = Path(bench_env.__file__).resolve().parents[1]
    rows = bench_env.compare_with_checkout(here, steps=30, rounds=1, env_ids=("sfenv/Spider8-v0",))
    assert len(rows) == 1 and set(rows[0]) == {"other", "this"}
    for m in rows[0].values():
        assert m["sfenv/Spider8-v0"] > 0 and m["cartpole"] > 0
        assert Path(m["sfenv"]).resolve().parent.parent == here  # each run imported the folder it was given


def test_bench_env_proposer_rows_measure_each_set(capsys):
    """Smoke: one round of two proposer sets on spider-8, this code against itself, and the printed ratio."""
    from pathlib import Path

    here = Path(bench_env.__file__).resolve().parents[1]
    rows = bench_env.proposer_rows(steps=20, rounds=1, env_ids=("sfenv/Spider8-v0",), sets=("default", "best"),
                                   checkout=here)
    assert len(rows) == 1 and set(rows[0]) == {"other", "this"}
    for by_env in rows[0].values():
        figures = by_env["sfenv/Spider8-v0"]
        assert list(figures) == ["default", "best"] and min(figures.values()) > 0
    bench_env.print_proposer_rows(rows)
    this, other = rows[0]["this"]["sfenv/Spider8-v0"], rows[0]["other"]["sfenv/Spider8-v0"]
    out = capsys.readouterr().out
    assert f"best/default {this['best'] / this['default']:.3f}" in out
    assert "this/other Spider8-v0" in out and f"best {this['best'] / other['best']:.3f}" in out


def test_bench_env_prints_a_decimal_for_a_few_steps_per_second():
    """spider-64 with SpanTrain's candidates plays a few steps/s: one decimal keeps 6.4 from 7.3 apart."""
    assert bench_env._steps_rate(6.44) == "   6.4" and bench_env._steps_rate(7.3) == "   7.3"
    assert bench_env._steps_rate(5190.4) == "  5190"


def test_bench_env_sets_may_play_an_earlier_wan_model():
    """A ``--sets`` entry ``NAME:v4`` plays the env id's own scenario with env v4's settings, ``NAME:full-zb`` with
    every zero-bubble period replayed; a bare or unknown suffix is refused, naming it."""
    import gymnasium as gym

    assert bench_env.set_kwargs("sfenv/Spider8-v0", "best") == {"proposers": "best"}
    kw = bench_env.set_kwargs("sfenv/Spider8-v0", "best+spantrain:full-zb")
    assert kw["proposers"] == "best+spantrain" and not kw["scenario"].cfg.sim.skip_zero_bubble_periods
    assert kw["scenario"].cfg.sim.vm_pair_cap == "server"
    assert kw["scenario"].cfg.name == gym.spec("sfenv/Spider8-v0").kwargs["scenario"]
    old = bench_env.set_kwargs("sfenv/Spider8-v0", "best+spantrain:v4")["scenario"].cfg.sim
    assert (old.wan_sharing, old.vm_pair_cap, old.skip_zero_bubble_periods) == ("v4", "member", False)
    assert bench_env.steps_per_s("sfenv/Spider8-v0", 20, True, num_jobs=5, **kw) > 0
    for bad in (":full-zb", "best:skip-zb", "best:full-zb:full-zb", "best:v6", "best:"):
        with pytest.raises(ValueError, match="--sets"):
            bench_env.set_kwargs("sfenv/Spider8-v0", bad)


def test_bench_env_imports_every_package_of_the_other_checkout(tmp_path):
    """A checkout keeps agents/ beside sfenv/: the probe imports both from it, never mixed with the install."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(bench_env.__file__).resolve().parents[1]
    other = tmp_path / "other"
    for sub in ("sfenv", "agents", "experiments", "scenarios"):
        shutil.copytree(here / sub, other / sub, ignore=shutil.ignore_patterns("__pycache__"))
    (other / "agents" / "_only_in_other.py").write_text("MARK = 1\n")
    check = "\nimport sfenv.agents._only_in_other\nprint(sfenv.agents.__file__)"

    def probe(path: Path) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(path)}
        return subprocess.run([sys.executable, "-c", bench_env._SAME_SOURCE + check], env=env,
                              capture_output=True, text=True, cwd=tmp_path)

    mixed = probe(other)  # the checkout's root alone: its sfenv, the installed sfenv.agents
    assert mixed.returncode != 0 and "different sources" in mixed.stderr
    ok = probe(bench_env.import_root(other, tmp_path / "scratch"))
    assert ok.returncode == 0, ok.stderr
    assert Path(ok.stdout.strip()).resolve().parent == (other / "agents").resolve()


def test_bench_env_fit_reuse_counts_every_search(monkeypatch, capsys):
    """--fit-reuse: its counts equal the plan searches SpanTrain and the plan cache really make, and print."""
    from sfenv.agents import spantrain

    from sfenv.env import proposers

    searches: dict[str, list[tuple]] = {"spantrain": [], "plan_cache": []}
    st_search, fit_plan = spantrain.SpanTrainAgent._fit_now, proposers.fit_plan

    recording = [True]  # the counts are of the recipe's first pass (then come replays and the default env)
    timed_play = bench_env._timed_play

    def first_pass_only(*a, **kw):
        out = timed_play(*a, **kw)
        recording[0] = False
        return out

    def counted_st(self, view, job, chain, budget):
        if recording[0]:
            searches["spantrain"].append((job.shape_key, tuple(chain), tuple(budget)))
        return st_search(self, view, job, chain, budget)

    def counted_fit(job, topo, chain, budget, *a, **kw):
        if recording[0]:
            searches["plan_cache"].append((job.shape_key, tuple(chain), tuple(budget)))
        return fit_plan(job, topo, chain, budget, *a, **kw)

    monkeypatch.setattr(bench_env, "_timed_play", first_pass_only)
    monkeypatch.setattr(spantrain.SpanTrainAgent, "_fit_now", counted_st)
    monkeypatch.setattr(proposers, "fit_plan", counted_fit)
    counts = bench_env.fit_reuse("sfenv/Spider8Contended-v6", 300)
    for name, seen in searches.items():
        multi = [k for k in seen if len(k[1]) > 1]
        assert counts[name]["fits"] == len(seen) > 0
        assert counts[name]["multi_region"] == len(multi)
        assert counts[name]["multi_region_distinct_without_links"] == len(set(multi))
        rounded = {(k[0], k[1], tuple(map(proposers.round_budget, k[2]))) for k in multi}
        assert counts[name]["multi_region_distinct_rounded"] == len(rounded)
    assert counts["plan_cache"]["multi_region"] > 0  # the scenario makes cross-region searches to count
    rates = counts["rates"]
    assert rates["replay_searches"] == 0  # the replayed steps were answered from the memos, as printed
    assert min(rates[k] for k in ("recipe_first", "recipe_replayed", "default_first", "default_replayed")) > 0
    bench_env.print_fit_reuse("sfenv/Spider8Contended-v6", 300, counts)
    out = capsys.readouterr().out
    assert f"{counts['spantrain']['fits']:5d} plan searches" in out


def test_bench_env_fit_reuse_command(monkeypatch, capsys):
    """Smoke of the documented command `bench_env --fit-reuse`: both scenarios, both proposer rows."""
    import sys

    monkeypatch.setattr(sys, "argv", ["bench_env", "--fit-reuse", "--steps", "40"])
    bench_env.main()
    out = capsys.readouterr().out
    assert bench_env.FIT_REUSE_ENV_IDS == ("sfenv/Spider8Contended-v6", "sfenv/Spider64-v6")
    for env_id in bench_env.FIT_REUSE_ENV_IDS:
        assert f"{env_id}, 40 masked random steps with best+spantrain:" in out
    assert out.count("plan searches") == 2 * len(bench_env.FIT_REUSE_ENV_IDS)


def test_bench_env_proposers_sets_option(monkeypatch, capsys):
    """`bench_env --proposers --sets A,B`: those sets on both scenarios, ratios to the first; a bad name exits 2."""
    import sys

    monkeypatch.setattr(sys, "argv", ["bench_env", "--proposers", "--steps", "10", "--rounds", "1",
                                      "--sets", "default,first-fit"])
    bench_env.main()
    out = capsys.readouterr().out
    assert out.count("first-fit/default") == len(bench_env.PROPOSER_ENV_IDS)
    monkeypatch.setattr(sys, "argv", ["bench_env", "--proposers", "--sets", "default,bestest"])
    with pytest.raises(SystemExit) as exc:
        bench_env.main()
    assert exc.value.code == 2 and "--sets" in capsys.readouterr().err


@pytest.mark.parametrize("script, args, option", [
    ("bench_env", ["--steps", "-1"], "--steps"),
    ("bench_env", ["--proposers", "--rounds", "0"], "--rounds"),
    ("bench_env", ["--train-steps", "x"], "--train-steps"),
    ("bench_agents", ["--points", "-1"], "--points"),
    ("bench_agents", ["--jobs", "0"], "--jobs"),
    ("bench_fork", ["--steps", "0"], "--steps"),
    ("bench_sim", ["--jobs", "-5"], "--jobs"),
    ("bench_results", ["--seeds", "-1"], "--seeds"),
    ("bace_sensitivity", ["--perms", "-1"], "--perms"),
    ("bace_sensitivity", ["--num-jobs", "0"], "--num-jobs"),
    ("validate_model", ["--resamples", "-1"], "--resamples"),
    ("bench_fork", ["--seed", "-1", "--steps", "2"], "--seed"),
    ("bace_sensitivity", ["--quick", "--perm-seed", "-1", "--out", "x"], "--perm-seed"),
    ("bace_coincidence", ["--seeds", "1", "--num-jobs", "0"], "--num-jobs"),
    ("bench_env", ["--against", "nodir", "--steps", "10"], "--against"),
])
def test_experiment_scripts_refuse_a_count_below_one_before_measuring(script, args, option, tmp_path):
    """A count of steps, rounds, points, jobs, seeds, permutations or resamples below one exits 2 with argparse's
    line naming the option, and no traceback (``bench_env --steps -1`` used to print negative steps per second,
    ``bace_sensitivity --perms -1`` an empty table, ``validate_model --resamples -1`` scipy's traceback)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", f"sfenv.experiments.{script}", *args], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert option in res.stderr.strip().splitlines()[-1]
