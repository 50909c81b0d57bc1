"""learned_vs_heuristics reports cost and cross-region traffic beside JCT, per agent, from the episodes played."""

from __future__ import annotations

import numpy as np
import pytest
from sfenv.agents.registry import make_agent
from sfenv.experiments.learned_vs_heuristics import METRICS, _ratios, compare, report

from sfenv.app.evaluate import run_episode
from sfenv.runs.stats import paired_ratio
from sfenv.scenario import load_scenario

SEEDS = [10_000, 10_001]
JOBS = 6


def test_cost_and_cross_region_tb_columns_come_from_the_runs(capsys) -> None:
    """On geo-8-contended spinsearch sends tens of TB between regions and pays egress; fifo and fastest+swf none.

    The columns are checked against episodes played here, independently of the experiment; the
    learned policy's stand-in (``spec``) is a heuristic, so that no model needs training.
    """
    sc = load_scenario("geo-8-contended").with_overrides(workload={"num_jobs": JOBS})
    agents = ["spinsearch", "fifo", "fastest+swf"]
    own = {a: [run_episode(make_agent(a), sc, s) for s in SEEDS] for a in agents}
    res = compare("spinsearch", agents[1:], "geo-8-contended", SEEDS, num_jobs=JOBS, rows_out=True)
    for a in agents:
        for key, field, scale in METRICS:
            assert res["summary"][a][key] == pytest.approx(np.mean([r[field] * scale for r in own[a]]), rel=1e-9)
        s = res["summary"][a]
        assert s["total_cost_usd"] == pytest.approx(s["cost_usd"] + s["egress_usd"], rel=1e-9)
    assert res["summary"]["spinsearch"]["wan_tb"] > 1 and res["summary"]["spinsearch"]["egress_usd"] > 100
    best = res["best_heuristic"]
    assert res["summary"][best]["wan_tb"] == 0  # the best heuristic moves nothing across regions here ...
    assert res["wan_tb_ratio_to_best"] is None and res["egress_usd_ratio_to_best"] is None  # ... no ratio to 0
    total = [np.array([r["total_cost_usd"] for r in own[a]]) for a in ("spinsearch", best)]
    assert res["total_cost_usd_ratio_to_best"] == pytest.approx(list(paired_ratio(*total)), rel=1e-9)
    report("spinsearch", res)
    out = capsys.readouterr().out
    assert "WAN TB" in out and "wait h" in out and f"cross-region TB: {best} has none" in out
    for a in agents:  # the wait is part of the JCT
        assert 0 <= res["summary"][a]["mean_wait_h"] <= res["summary"][a]["mean_jct_h"]
    # against a heuristic that does move data (spinsearch as the only one), the ratios are defined
    mine = _ratios("fifo", ["spinsearch"], res["rows"], SEEDS, {s: sc for s in SEEDS}, None)
    assert mine["best_heuristic"] == "spinsearch"
    for key, field in (("wan_tb_ratio_to_best", "wan_tb"), ("egress_usd_ratio_to_best", "egress_usd"),
                       ("total_cost_usd_ratio_to_best", "total_cost_usd"), ("cost_ratio_to_best", "cost_usd")):
        pair = [np.array([r[field] for r in own[a]]) for a in ("fifo", "spinsearch")]
        assert mine[key] == pytest.approx(list(paired_ratio(*pair)), rel=1e-9), key


def test_saved_episodes_are_continued_not_played_again(tmp_path, monkeypatch) -> None:
    """With ``episodes``, the heuristics' episodes are saved per scenario and read back for the next model.

    The second comparison adds one agent: only its episodes are played (counted), and every figure equals
    that of a comparison without a saved file.
    """
    import sfenv.app.evaluate as evaluate

    saved, jobs = tmp_path / "episodes", 4
    first = compare("fifo", ["fastest+swf"], "spider-8", SEEDS, num_jobs=jobs, episodes=saved, split="validation")
    assert (saved / "spider-8.json").is_file()
    played: list[str] = []
    real = evaluate._play

    def counting(agent, *args, **kwargs):
        played.append(agent.name)
        return real(agent, *args, **kwargs)

    monkeypatch.setattr(evaluate, "_play", counting)
    again = compare("fastest", ["fastest+swf", "fifo"], "spider-8", SEEDS, num_jobs=jobs, episodes=saved,
                    split="validation")
    assert played == ["fastest"] * len(SEEDS)  # fifo and fastest+swf came from the file
    fresh = compare("fastest", ["fastest+swf", "fifo"], "spider-8", SEEDS, num_jobs=jobs)
    assert again == fresh
    assert again["summary"]["fifo"] == first["summary"]["fifo"]
