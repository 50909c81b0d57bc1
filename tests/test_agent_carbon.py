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
    assert resolve_names("carbon") == ["lowest-carbon", "forecast-carbon", "carbon-defer", "carbon-st",
                                       "carbon-elastic"]
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
    """The experiment end to end on a tiny setting: rows per arm and seed, ratios to the baseline.

    The persistence forecast stands for every kind here (noisy and oracle run the same code with another
    ``carbon.forecast.kind``; noisy is the baseline's); the elastic arm plays with its hourly hook.
    """
    from sfenv.experiments.carbon import BASELINE, arms, compare, format_markdown, run_carbon, summarise

    rows = run_carbon("geo-8", [0], slacks=[6.0], forecasts=["persistence"], num_jobs=3)
    assert len(rows) == len(arms([6.0], ["persistence"]))
    assert {r["arm"]: r["forecast"] for r in rows}["carbon-elastic/slack=6h/persistence"] == "persistence"
    assert {r["kind"] for r in rows} == {"baseline", "spatial", "temporal", "spatio-temporal", "elastic"}
    summary = summarise(rows)
    base = next(e for e in summary if e["arm"] == BASELINE)
    assert base["carbon_ratio"] == pytest.approx(1.0) and base["signal"] == "lca"
    for e in summary:  # each ratio is the arm's mean over the baseline's on the same seeds
        mine = [r["carbon_kg"] for r in rows if r["arm"] == e["arm"]]
        theirs = [r["carbon_kg"] for r in rows if r["arm"] == BASELINE]
        assert e["carbon_ratio"] == pytest.approx(sum(mine) / sum(theirs))
    # elastic against deferral at the same slack and forecast (no oracle here: no forecast comparison)
    (pair,) = compare(rows)
    kg = {r["arm"]: r["carbon_kg"] for r in rows}
    assert (pair["arm"], pair["reference"]) == ("carbon-elastic/slack=6h/persistence",
                                                 "carbon-defer/slack=6h/persistence")
    assert pair["ratio"] == pytest.approx(kg[pair["arm"]] / kg[pair["reference"]])
    text = format_markdown(summary, "geo-8", [0], 3, [pair])
    assert "carbon-elastic/slack=6h/persistence" in text and "elastic vs deferral" in text


def test_carbon_experiment_refuses_bad_settings(capsys):
    from sfenv.experiments.carbon import arms, main

    with pytest.raises(ValueError, match="forecasts"):
        arms([6.0], ["tomorrow"])
    with pytest.raises(SystemExit) as exc:
        main(["--forecasts", "noisy,tomorrow", "--seeds", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sfenv: carbon: forecasts: 'tomorrow'")


def _elastic_world(pattern: list[float], hours_at_16: float = 3.0) -> Simulator:
    """One job that runs ``hours_at_16`` hours on 16 GPUs (8 GPUs: about twice as long); ``pattern`` in both zones."""
    probe = _world(pattern, pattern)
    plan = _decide("fastest", probe)
    assert plan.gpus == 16
    iterations = round(hours_at_16 * 3600.0 / probe.view().evaluate(plan).iter_time)
    return _world(pattern, pattern, iterations=iterations)


def test_carbon_elastic_scales_up_in_clean_hours_and_down_in_dirty_ones():
    # clean hour 0, dirty hours 1-2, clean hours 3-4; a run of 3 h at 16 GPUs, 1.5 h of slack: the
    # greedy must put 16 GPUs on the clean hours 0 and 3 and 8 on the dirty ones (work in 16-GPU hours:
    # 2.25 at 8 GPUs on every slot, +0.5 per clean hour widened, 3 needed)
    pattern = [50.0, 900.0, 900.0, 50.0, 50.0] + [900.0] * 19
    sim = _elastic_world(pattern)
    agent = make_agent("carbon-elastic", slack_h=1.5)
    agent.reset(0)
    assert agent.replan_hourly and agent.replans
    first = agent.decide(sim.view())
    assert first is not None and first.gpus == 16  # hour 0 is clean: widest
    report = sim.run(agent.decide, replan=agent.replan, replan_hourly=True)
    assert report.finished == 1
    # the width of each run (pauses excluded): 16 in hour 0, 8 from hour 1, 16 from hour 3
    widths_by_hour: dict[int, int] = {}
    for start, end, held in sim.records()[0].segments:
        if end - start > 120.0:
            widths_by_hour.setdefault(int(start // 3600), sum(n for _, n in held))
    assert widths_by_hour == {0: 16, 1: 8, 3: 16}  # no switch in hour 2 (dirty) nor near the end
    assert agent.switches == 2 and sim.jobs[0].replans == 2
    # same region: no state moves, each pause is the restart constant
    assert sim.jobs[0].replan_pause_s == pytest.approx(2 * SimConfig().replan_restart_s)


def test_carbon_elastic_stays_narrow_when_the_slack_allows_and_wide_without_slack():
    dirty = [900.0] * 24
    assert _decide("carbon-elastic", _elastic_world(dirty), slack_h=24.0).gpus == 8  # time enough at 8
    assert _decide("carbon-elastic", _elastic_world(dirty), slack_h=0.0).gpus == 16  # no slack: widest


def test_greedy_widths_picks_the_most_work_per_carbon():
    from sfenv.agents.carbon import greedy_widths

    # two levels, rates 1 and 2 per s, power 100 and 200 W; slots of 10 s at 300, 100, 200 g/kWh
    slots = [(10.0, 300.0), (10.0, 100.0), (10.0, 200.0)]
    assert greedy_widths([1.0, 2.0], [100.0, 200.0], slots, 30.0) == [0, 0, 0]
    assert greedy_widths([1.0, 2.0], [100.0, 200.0], slots, 35.0) == [0, 1, 0]  # cleanest first
    assert greedy_widths([1.0, 2.0], [100.0, 200.0], slots, 45.0) == [0, 1, 1]
    assert greedy_widths([1.0, 2.0], [100.0, 200.0], slots, 99.0) == [1, 1, 1]  # cannot: all widest
    with pytest.raises(ValueError, match="rates"):
        greedy_widths([], [], slots, 1.0)
    with pytest.raises(ValueError, match="slack_h"):
        make_agent("carbon-elastic", slack_h=-1.0)


def test_carbon_elastic_plays_through_the_env_and_the_evaluator():
    """The env path (``predict`` installs the hourly hook) and the evaluator's episode give the same carbon."""
    import gymnasium as gym

    import sfenv  # noqa: F401
    from sfenv.app.evaluate import run_episode
    from sfenv.errors import InvalidInput
    from sfenv.runs.replay import replay
    from sfenv.scenario import load_scenario

    env = gym.make("sfenv/Geo8-v6", num_jobs=4)
    agent = make_agent("carbon-elastic", slack_h=24.0).bind(env)
    agent.reset(0)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        action, _ = agent.predict(obs)
        obs, _, term, trunc, info = env.step(int(action))
        assert not info["invalid_action"]
        done = term or trunc
    sim = env.unwrapped.sim
    assert sim.replan_hourly and sim.replans > 0  # it scaled running jobs
    scenario = load_scenario("geo-8").with_overrides(workload={"num_jobs": 4})
    row = run_episode(make_agent("carbon-elastic", slack_h=24.0), scenario, 0, record_actions=True)
    assert row["actions"]["replan_hourly"] is True
    assert row["carbon_kg"] == pytest.approx(sim.carbon_kg(), rel=1e-12)
    env.close()
    # the action log replays (sfenv validate): the hook is called at the same hours
    assert replay(scenario, 0, row["actions"])["carbon_kg"] == row["carbon_kg"]
    with pytest.raises(InvalidInput, match="re-planning entries left"):  # without the hourly calls: no fit
        replay(scenario, 0, {**row["actions"], "replan_hourly": False})
