"""sfenv leaderboard on a tiny configuration, sfenv validate on honest and edited entries, evaluate --split."""

from __future__ import annotations

import copy
import csv
import json
import math

import numpy as np
import pytest

from sfenv.app.cli import main
from sfenv.runs import protocol
from sfenv.runs.stats import iqm_interval, paired_ratio, probability_of_improvement
from sfenv.sim import make_simulator

TINY = ["--agents", "fifo,spinsearch", "--scenario", "spider-8", "--seeds", "2", "--num-jobs", "4", "--quiet"]


@pytest.fixture(scope="module")
def entry(tmp_path_factory) -> tuple[dict, object]:
    """An honest entry: two agents, two test seeds, actions recorded (through the CLI)."""
    path = tmp_path_factory.mktemp("entry") / "entry.json"
    assert main(["evaluate", *TINY, "--out", str(path), "--record-actions"]) == 0
    data = json.loads(path.read_text())
    assert data["settings"]["split"] == "test" and data["settings"]["seeds"] == protocol.seeds("test", 2)
    assert data["settings"]["record_actions"] is True and data["settings"]["protocol"] == 1
    return data, path


def test_the_entry_records_test_seeds_actions_and_the_scenario_hash(entry):
    rows = entry[0]["episodes"]
    assert {(r["agent"], r["seed"]) for r in rows} == {(a, s) for a in ("fifo", "spinsearch")
                                                      for s in protocol.seeds("test", 2)}
    for r in rows:
        decisions = r["actions"]["decisions"]
        assert len(decisions) == r["decisions"] and any(d is not None for d in decisions)
        assert len(r["scenario_sha"]) == 16


def _write(tmp_path, doc, name="e.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_validate_accepts_an_honest_entry(entry, capsys):
    _, path = entry
    assert main(["validate", str(path)]) == 0
    assert "every metric reproduced" in capsys.readouterr().out


def test_validate_rejects_an_edited_metric(entry, tmp_path, capsys):
    bad = copy.deepcopy(entry[0])
    bad["episodes"][2]["mean_jct_s"] *= 0.97  # a better JCT than the actions give
    assert main(["validate", _write(tmp_path, bad)]) == 1
    err = capsys.readouterr().err
    assert "REJECTED" in err and "row 2" in err and "mean_jct_s" in err


def test_validate_rejects_an_edited_action(entry, tmp_path, capsys):
    bad = copy.deepcopy(entry[0])
    decisions = bad["episodes"][0]["actions"]["decisions"]
    first = next(i for i, d in enumerate(decisions) if d is not None)
    decisions[first]["micro_batch"] *= 2  # the same job started with another plan
    assert main(["validate", _write(tmp_path, bad)]) == 1
    err = capsys.readouterr().err
    assert "REJECTED" in err and "row 0" in err


def test_validate_rejects_another_scenario(entry, tmp_path, capsys):
    bad = copy.deepcopy(entry[0])
    bad["episodes"][1]["jobs"] = 5  # claims a 5-job workload: the recorded hash is not that scenario's
    assert main(["validate", _write(tmp_path, bad)]) == 1
    assert "scenario hash" in capsys.readouterr().err


def test_validate_exits_2_on_unreadable_input(entry, tmp_path, capsys):
    rows = entry[0]["episodes"]
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert main(["validate", str(junk)]) == 2
    no_actions = [{k: v for k, v in r.items() if k != "actions"} for r in rows]
    assert main(["validate", _write(tmp_path, no_actions)]) == 2
    assert main(["validate", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("sfenv: ") for line in err)


def test_validate_rejects_seeds_mislabelled_as_the_test_split(entry, tmp_path, capsys):
    bad = copy.deepcopy(entry[0])
    for r in bad["episodes"]:  # honest episodes of other seeds, still labelled "test"
        r["seed"] += 5
    assert main(["validate", _write(tmp_path, bad)]) == 1
    assert "not the first 2 of split 'test'" in capsys.readouterr().err


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
    assert "capped at 4 jobs" in capsys.readouterr().out
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
    md = (out / "leaderboard.md").read_text()
    html = (out / "leaderboard.html").read_text()
    for agent in ranked:
        assert f"| {agent} |" in md and f"<td>{agent}</td>" in html
    assert "test split" in md and "<script" not in html and "http" not in html  # self-contained
    # resumable: a second run plays nothing new and gives the same table
    before = (out / "leaderboard.csv").read_text()
    assert main([*argv, "--resume"]) == 0
    assert (out / "leaderboard.csv").read_text() == before


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
