"""The evaluator: identical seeded episodes for every agent, atomic and resumable results."""

from __future__ import annotations

import pytest
from sfenv.agents.fifo import FIFOAgent

from sfenv.app.evaluate import evaluate_agents, format_table, summarise
from sfenv.runs.results import read_results
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator


def test_agents_see_identical_episodes():
    rows = evaluate_agents(["fifo", "cheapest"], "spider-8", seeds=[0, 1], num_jobs=8, progress=False)
    assert [(r["agent"], r["seed"]) for r in rows] == [("fifo", 0), ("fifo", 1), ("cheapest", 0), ("cheapest", 1)]
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 8})
    direct = make_simulator(sc, 1).run(FIFOAgent().decide).to_dict()
    assert {k: rows[1][k] for k in direct} == direct  # the evaluator's episode is the seeded episode
    assert all(r["decisions"] >= 8 and r["decision_time_max_s"] >= r["decision_time_mean_s"] > 0 for r in rows)


def test_results_are_written_atomically_and_resume(tmp_path):
    out = tmp_path / "res.json"
    rows = evaluate_agents(["fifo"], "spider-8", seeds=[0, 1], num_jobs=5, out=out, progress=False)
    saved = read_results(out)[1]
    assert len(saved) == 2 and not list(tmp_path.glob(".*.tmp"))
    seen = []
    more = evaluate_agents(["fifo"], "spider-8", seeds=[0, 1, 2], num_jobs=5, out=out, resume=True,
                           progress=False, on_row=seen.append)
    assert [r["seed"] for r in seen] == [2]  # only the missing episode ran
    assert len(more) == 3 and more[:2] == saved
    assert rows[0]["mean_jct_s"] == more[0]["mean_jct_s"]


def test_summary_and_table():
    rows = evaluate_agents(["fifo", "random"], "spider-8", seeds=[0, 1], num_jobs=6, progress=False)
    summary = summarise(rows)
    assert [s["agent"] for s in summary] == ["fifo", "random"]
    fifo = summary[0]
    jcts = [j for r in rows if r["agent"] == "fifo" for j in r["jcts_s"]]
    assert fifo["mean_jct_h"] == pytest.approx(sum(jcts) / len(jcts) / 3600)
    table = format_table(summary)
    assert "fifo" in table and "random" in table and "mean_jct_h" in table
