"""experiments/scenario_spread: smoke run and the table's arithmetic."""

import json
import math

import pytest
from sfenv.experiments.scenario_spread import format_markdown, main, play, run_spread, spread_table

from sfenv.sim import make_simulator


def test_quick_run_prints_a_table(capsys):
    main(["--quick"])
    out = capsys.readouterr().out
    assert "| spider-8 |" in out and "random/best" in out


def test_rows_resume_and_table(tmp_path):
    out = tmp_path / "spread.json"
    rows = run_spread(["spider-8"], ["random", "fifo", "fifo+swf"], [0, 1], out=out, num_jobs=10, progress=False)
    assert len(rows) == 6 and json.loads(out.read_text()) == rows
    again = run_spread(["spider-8"], ["random", "fifo", "fifo+swf"], [0, 1, 2], out=out, resume=True, num_jobs=10,
                       progress=False)
    assert len(again) == 9 and again[:6] == rows  # only seed 2 was played
    t = spread_table(again)[0]
    jct = {a: sum(r["mean_jct_s"] for r in again if r["agent"] == a) / 3 / 3600 for a in ("random", "fifo", "fifo+swf")}
    assert t["jct_h"] == pytest.approx(jct)
    assert t["best_jct_h"] == min(jct.values())
    assert t["worst"] != "random" and t["worst_jct_h"] == max(jct["fifo"], jct["fifo+swf"])
    assert t["spread_random"] == pytest.approx(jct["random"] / t["best_jct_h"] - 1)
    assert t["seeds"] == 3 and not math.isnan(t["offered_load"])
    assert "| spider-8 |" in format_markdown([t])


def test_play_is_the_seeded_episode():
    from sfenv.agents.registry import make_agent

    from sfenv.scenario import load_scenario

    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 8})
    agent = make_agent("spinsearch+swf")
    agent.reset(3)
    assert play("spinsearch+swf", sc, 3)["mean_jct_s"] == make_simulator(sc, 3).run(agent.decide).mean_jct_s
