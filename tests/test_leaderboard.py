"""sfenv leaderboard on a tiny configuration (its episodes replay-checked), evaluate --split, the statistics.

sfenv validate on honest and edited entries: tests/test_validate_entry.py.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from sfenv.app.cli import main
from sfenv.runs import protocol
from sfenv.runs.stats import iqm_interval, paired_ratio, probability_of_improvement
from sfenv.sim import make_simulator


def test_evaluate_labels_explicit_seeds_and_refuses_them_as_a_split(tmp_path, capsys):
    assert main(["evaluate", "--agents", "fifo", "--seeds", "1", "--num-jobs", "3", "--quiet", "--seed", "7"]) == 0
    assert "explicit seeds: 1 seeds 7..7" in capsys.readouterr().out
    argv = ["evaluate", "--agents", "fifo", "--seeds", "1", "--num-jobs", "3", "--quiet"]
    assert main([*argv, "--split", "validation"]) == 0
    assert "split validation (protocol 1): 1 seeds 10000..10000" in capsys.readouterr().out
    assert main(["evaluate", "--agents", "fifo", "--seeds", "1", "--split", "test", "--seed", "7"]) == 2
    assert "explicit seeds cannot be labelled as split 'test'" in capsys.readouterr().err


def test_leaderboard_on_a_tiny_configuration(tmp_path, capsys):
    out = tmp_path / "lb"
    argv = ["leaderboard", "--agents", "fifo,spinsearch", "--scenarios", "spider-8", "--seeds", "2", "--num-jobs", "4",
            "--out-dir", str(out), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "capped at 4 jobs" in printed
    for ext in ("md", "csv", "html", "json"):
        assert (out / f"leaderboard.{ext}").is_file()
    data = json.loads((out / "leaderboard.json").read_text())
    assert data["settings"]["scenarios"]["spider-8"]["seeds"] == protocol.seeds("test", 2)
    episodes = json.loads((out / "episodes" / "spider-8.json").read_text())
    assert episodes["settings"]["split"] == "test"
    episodes = episodes["episodes"]
    jct = {a: np.array([r["mean_jct_s"] / 3600 for r in sorted(episodes, key=lambda r: r["seed"]) if r["agent"] == a])
           for a in ("fifo", "spinsearch")}
    ranked = sorted(jct, key=lambda a: jct[a].mean())
    with (out / "leaderboard.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [r["agent"] for r in table] == ranked and [r["rank"] for r in table] == ["1", "2"]
    for r in table:  # the figures are the episodes' own
        assert float(r["mean_jct_h"]) == pytest.approx(jct[r["agent"]].mean())
    assert float(table[1]["ratio_to_best"]) == pytest.approx(jct[ranked[1]].mean() / jct[ranked[0]].mean())
    _check_printed_ranking(printed, ranked, jct)
    md = (out / "leaderboard.md").read_text()
    html = (out / "leaderboard.html").read_text()
    for agent in ranked:
        assert f"| {agent} |" in md and f"<td>{agent}</td>" in html
    assert "test split" in md and "<script" not in html and "http" not in html  # self-contained
    assert all(r["actions"]["decisions"] for r in episodes)  # recorded: the cached episodes can be replayed
    # resumable: a second run plays nothing new and gives the same table
    before = (out / "leaderboard.csv").read_text()
    assert main([*argv, "--resume"]) == 0
    assert (out / "leaderboard.csv").read_text() == before
    # other settings in the same folder: refused before any episode, the tables kept; --overwrite replaces them
    capsys.readouterr()
    other = [a if a != "fifo,spinsearch" else "fifo" for a in argv]
    assert main(other) == 2
    assert capsys.readouterr().err == (f"sfenv: {out}: its leaderboard ranks other settings (agents ['fifo', "
                                       "'spinsearch'] now ['fifo']); choose another --out-dir, or --overwrite to "
                                       "replace it\n")
    assert (out / "leaderboard.csv").read_text() == before
    assert main([*other, "--overwrite"]) == 0
    assert [r["agent"] for r in csv.DictReader((out / "leaderboard.csv").open())] == ["fifo"]


def _check_printed_ranking(printed: str, ranked: list[str], jct: dict[str, np.ndarray]) -> None:
    """The table printed at the end ranks the agents as their episodes' mean JCT does, with those means."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["rank", "scenario", "agent"])
    end = lines.index("files:")
    body = [line.split() for line in lines[start + 1:end] if line.strip()]
    assert [cells[2] for cells in body] == ranked  # best mean JCT first
    assert [cells[0] for cells in body] == [str(i + 1) for i in range(len(ranked))]
    assert all(cells[1] == "spider-8" for cells in body)
    for cells in body:
        assert float(cells[3]) == pytest.approx(jct[cells[2]].mean(), abs=5e-4)  # mean JCT h, 3 decimals


def test_leaderboard_refuses_an_edited_cached_episode(tmp_path, capsys):
    """The review's tamper: the loser's cached mean JCT set to 1 s must not make it rank first on --resume."""
    out = tmp_path / "lb"
    argv = ["leaderboard", "--agents", "fifo,spinsearch", "--scenarios", "spider-8", "--seeds", "2", "--num-jobs", "4",
            "--out-dir", str(out), "--quiet"]
    assert main(argv) == 0
    table = (out / "leaderboard.csv").read_text()
    path = out / "episodes" / "spider-8.json"
    doc = json.loads(path.read_text())
    loser = list(csv.DictReader(table.splitlines()))[-1]["agent"]
    edited = next(i for i, r in enumerate(doc["episodes"]) if r["agent"] == loser)
    doc["episodes"][edited]["mean_jct_s"] = 1.0
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sfenv")]  # not the progress
    assert len(err) == 1 and err[0].startswith(f"sfenv: leaderboard: REJECTED {path}: row {edited} ({loser}, ")
    assert "mean_jct_s is 1.0 in the file" in err[0] and "--overwrite" in err[0]
    assert (out / "leaderboard.csv").read_text() == table  # nothing ranked from the edited file
    assert main([*argv, "--overwrite"]) == 0  # played again: the same table as the honest run
    assert (out / "leaderboard.csv").read_text() == table


def test_leaderboard_says_spider64_is_capped(tmp_path):
    from sfenv.app.leaderboard import JOB_CAPS, write_outputs

    settings = {"sfenv": "x", "protocol": 1, "env_version": "v1", "seeds_per_scenario": 2, "scenarios": {},
                "caps": {"spider-64": JOB_CAPS["spider-64"]}}
    write_outputs([], settings, tmp_path)
    md = (tmp_path / "leaderboard.md").read_text()
    assert f"spider-64 is played with {JOB_CAPS['spider-64']} jobs per episode" in md


def test_stats_against_direct_computations():
    rng = np.random.default_rng(4)
    b = rng.uniform(2, 4, 20)
    a = b * rng.uniform(0.85, 1.0, 20)
    r, lo, hi = paired_ratio(a, b)
    assert r == pytest.approx(a.mean() / b.mean()) and lo < r < hi < 1.0
    assert paired_ratio(b, b) == (1.0, 1.0, 1.0)
    assert paired_ratio(a, b) == paired_ratio(a, b)  # fixed random state
    x = np.arange(1.0, 13.0)
    iqm, lo, hi = iqm_interval(x)
    assert iqm == pytest.approx(np.mean(np.sort(x)[3:9])) and lo <= iqm <= hi
    assert probability_of_improvement([1, 2], [3, 4]) == 1.0 and probability_of_improvement([3, 4], [1, 2]) == 0.0
    assert probability_of_improvement(x, x) == 0.5
    assert math.isnan(paired_ratio([1.0], [2.0])[1])


@pytest.mark.parametrize("agent", ["spantrain", "spinsearch+swf"])
def test_plans_survive_the_action_log(agent):
    """Every plan an agent starts comes back equal from its JSON form (all fields: schedule, recompute ...)."""
    from sfenv.agents.registry import make_agent

    from sfenv.runs.replay import plan_from_json, plan_to_json
    from sfenv.scenario import load_scenario

    sc = load_scenario("spider-8-contended").with_overrides(workload={"num_jobs": 6})
    ag = make_agent(agent)
    ag.reset(1_000_000)
    sim = make_simulator(sc, 1_000_000)
    plans = []

    def decide(view):
        plan = ag.decide(view)
        plans.append(plan)
        return plan

    sim.run(decide)
    started = [p for p in plans if p is not None]
    assert started
    for p in started:
        assert plan_from_json(json.loads(json.dumps(plan_to_json(p)))) == p
