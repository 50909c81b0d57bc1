"""Carbon-aware agents (issue 33 §2): each one's decision on a constructed case.

Two identical regions in zones ``za`` and ``zb`` whose hourly intensities are written out here; the
forecast is the oracle (exact) so that every decision follows from the numbers in the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from agent_worlds import job, region
from sfenv.agents.carbon import expected_kg
from sfenv.agents.registry import make_agent

from sfenv.sim import SimConfig, Simulator
from sfenv.world.carbon import CarbonForecaster, CarbonSeries
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Topology


def _world(za: list[float], zb: list[float], jobs: int = 1, iterations: int = 400) -> Simulator:
    """Regions 0 (zone za) and 1 (zone zb), 16 A100s each; hourly intensities ``za`` and ``zb`` (then repeated)."""
    topo = Topology([region("a", 16, "za"), region("b", 16, "zb")], [Link(0, 1, 10.0, 20.0)])
    prices = PriceSeries(["za", "zb"], np.full((2, 24), 50.0))
    carbon = CarbonSeries(["za", "zb"], np.array([za, zb], dtype=float), "lca")
    specs = [job(i, iterations=iterations, min_gpus=8, max_gpus=16) for i in range(jobs)]
    return Simulator(topo, prices, specs, SimConfig(), carbon=carbon,
                     carbon_forecaster=CarbonForecaster(carbon, "oracle"))


def _decide(name: str, sim: Simulator, **kwargs):
    agent = make_agent(name, **kwargs)
    agent.reset(0)
    return agent.decide(sim.view())


def test_lowest_carbon_picks_the_cleanest_region_now():
    assert _decide("lowest-carbon", _world([500.0] * 24, [100.0] * 24)).regions == (1,)
    assert _decide("lowest-carbon", _world([90.0] * 24, [100.0] * 24)).regions == (0,)


def test_forecast_carbon_looks_past_the_current_hour():
    # b is cleaner this hour only; over a run of several hours a is cleaner
    za, zb = [300.0] * 24, [100.0] + [900.0] * 23
    sim = _world(za, zb, iterations=8000)
    plan = _decide("forecast-carbon", sim)
    perf = sim.view().evaluate(plan)
    assert perf.iter_time * 8000 > 3 * 3600  # a run of several hours
    assert plan.regions == (0,)
    assert _decide("lowest-carbon", _world(za, zb, iterations=8000)).regions == (1,)  # the myopic choice differs


def test_carbon_defer_waits_for_a_cleaner_hour_within_its_slack():
    za = [500.0, 500.0, 500.0] + [50.0] * 21
    assert _decide("carbon-defer", _world(za, za), slack_h=6.0) is None  # cleaner from hour 3: wait
    assert _decide("carbon-defer", _world(za, za), slack_h=1.0) is not None  # the clean hours are past the slack
    assert _decide("carbon-defer", _world([50.0] * 24, [50.0] * 24), slack_h=6.0) is not None  # nothing to gain


def test_carbon_defer_starts_when_the_clean_hour_comes():
    za = [500.0, 500.0, 500.0] + [50.0] * 21
    sim = _world(za, za)
    agent = make_agent("carbon-defer", slack_h=6.0)
    agent.reset(0)
    report = sim.run(agent.decide)
    assert report.finished == 1
    assert sim.records()[0].first_start == pytest.approx(3 * 3600.0)


def test_carbon_st_picks_the_best_region_and_hour():
    za = [300.0] * 24
    zb = [500.0, 500.0] + [50.0] * 22
    assert _decide("carbon-st", _world(za, zb), slack_h=6.0) is None  # b from hour 2 beats a now: wait
    plan = _decide("carbon-st", _world(za, zb), slack_h=0.0)  # no slack: the cleaner region now
    assert plan is not None and plan.regions == (0,)
    sim = _world(za, zb)
    agent = make_agent("carbon-st", slack_h=6.0)
    agent.reset(0)
    sim.run(agent.decide)
    rec = sim.records()[0]
    assert rec.first_start == pytest.approx(2 * 3600.0) and rec.segments[0][2][0][0] == 1


def test_ordering_combinations_and_the_group_resolve():
    from sfenv.agents.registry import resolve_names

    assert make_agent("lowest-carbon+swf").name == "lowest-carbon+swf"
    assert resolve_names("carbon") == ["lowest-carbon", "forecast-carbon", "carbon-defer", "carbon-st"]
    with pytest.raises(ValueError, match="slack_h"):
        make_agent("carbon-defer", slack_h=-1.0)


def test_expected_kg_integrates_the_forecast_by_hand():
    row = np.array([100.0, 200.0, 400.0])
    # now = 00:30, start in 15 min, run 2 h at 3.6 kW: 15 min at 100, 60 min at 200, 45 min at 400
    kg = expected_kg(row, 1800.0, 900.0, 7200.0, 3600.0)
    assert kg == pytest.approx(3600.0 * (900 * 100 + 3600 * 200 + 2700 * 400) / 3.6e9)
    # past the forecast: its mean
    assert expected_kg(row, 0.0, 3 * 3600.0, 3600.0, 1000.0) == pytest.approx(1000.0 * 3600 * row.mean() / 3.6e9)
    assert math.isinf(expected_kg(row, 0.0, 0.0, math.inf, 1.0))


def test_carbon_experiment_smoke():
    """The experiment end to end on a tiny setting: rows per arm and seed, ratios to the baseline."""
    from sfenv.experiments.carbon import BASELINE, arms, format_markdown, run_carbon, summarise

    rows = run_carbon("geo-8", [0], slacks=[6.0], forecasts=["noisy"], num_jobs=3)
    assert len(rows) == len(arms([6.0], ["noisy"]))
    summary = summarise(rows)
    base = next(e for e in summary if e["arm"] == BASELINE)
    assert base["carbon_ratio"] == pytest.approx(1.0) and base["signal"] == "lca"
    for e in summary:  # each ratio is the arm's mean over the baseline's on the same seeds
        mine = [r["carbon_kg"] for r in rows if r["arm"] == e["arm"]]
        theirs = [r["carbon_kg"] for r in rows if r["arm"] == BASELINE]
        assert e["carbon_ratio"] == pytest.approx(sum(mine) / sum(theirs))
    assert "carbon-st/slack=6h/noisy" in format_markdown(summary, "geo-8", [0], 3)
