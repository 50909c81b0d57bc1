"""Carbon (issue 33 §1): the scenario's ``carbon`` section, the carbon of a job, and the fallback.

Each test fails if the code is wrong: the integral is checked against sums written out hour by
hour, the bundled series against the shared file it was copied from, and bad sections against
the field their error must name.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sfenv.model.perf import PlanPerf
from sfenv.scenario import Scenario, ScenarioError, load_scenario
from sfenv.sim import JobState, make_simulator
from sfenv.sim.billing import Billing
from sfenv.world.carbon import (
    DEFAULT_GCO2_PER_KWH,
    CarbonSeries,
    bundled_carbon_csv,
    carbon_profile,
    read_carbon_csv,
)
from sfenv.world.prices import PriceSeries
from sfenv.world.workload import MODEL_ZOO, JobSpec

SHARED_CSV = Path("/work/shared/data/energy/carbon_intensity_gco2_per_kwh_2023.csv")


def _with_carbon(name: str, carbon: dict, **overrides: dict) -> Scenario:
    """Bundled scenario ``name`` with its ``carbon`` section replaced (not merged) by ``carbon``."""
    data = load_scenario(name).with_overrides(**overrides).cfg.model_dump()
    data["carbon"] = carbon
    return Scenario.from_dict(data)


def _job_state() -> JobState:
    return JobState(spec=JobSpec(0, MODEL_ZOO["gpt-1.3b"], 8, 10**9, 0.0, 1, 8))


def test_billing_integrates_carbon_across_hour_boundaries_and_an_outage():
    """Two zones, intensities changing every hour; a job runs 00:30-02:15, is stopped by an outage
    until 03:00, runs again until 03:45 at another power.  kg = sum over hours of W x s x g/kWh / 3.6e9."""
    zones = ["a", "b"]
    carbon = CarbonSeries(zones, np.array([[100.0, 200.0, 300.0, 400.0], [50.0, 60.0, 70.0, 80.0]]), "lca")
    prices = PriceSeries(zones, np.full((2, 4), 10.0))
    billing = Billing(prices, np.array([0, 1]), carbon=carbon)
    js = _job_state()
    first = PlanPerf(feasible=True, iter_time=1.0, power_by_region={0: 1000.0, 1: 500.0})
    second = PlanPerf(feasible=True, iter_time=1.0, power_by_region={1: 2000.0})
    js.last_update = 1800.0
    billing.fold(1800.0)
    billing.rate(js, first)
    billing.accrue(js, 2 * 3600 + 900.0)  # the outage at 02:15
    billing.fold(2 * 3600 + 900.0)
    billing.unrate(js)
    js.perf = None
    billing.accrue(js, 3 * 3600.0)  # restarted at 03:00: nothing accrued while stopped
    billing.fold(3 * 3600.0)
    billing.rate(js, second)
    billing.accrue(js, 3 * 3600 + 2700.0)
    # by hand, W x s x g/kWh: zone a 1000 W, zone b 500 W from 00:30 to 02:15, then zone b 2000 W 03:00-03:45
    a = 1000 * (1800 * 100 + 3600 * 200 + 900 * 300)
    b = 500 * (1800 * 50 + 3600 * 60 + 900 * 70) + 2000 * 2700 * 80
    assert js.carbon_kg == pytest.approx((a + b) / 3.6e9, rel=1e-12)
    assert billing.carbon_total(3 * 3600 + 2700.0) == pytest.approx(js.carbon_kg, rel=1e-12)
    assert carbon.kg(np.array([1000.0, 500.0]), 1800.0, 2 * 3600 + 900.0) == pytest.approx(
        (a + 500 * (1800 * 50 + 3600 * 60 + 900 * 70)) / 3.6e9, rel=1e-12)


def test_an_episodes_carbon_is_its_power_integrated_hour_by_hour():
    """End to end, with outages: every single-region job's carbon equals its (constant) power times the
    intensity summed hour by hour over its runs, the hourly sums written out here."""
    sc = load_scenario("geo-8").with_overrides(workload={"num_jobs": 12})
    from sfenv.agents.registry import make_agent

    sim = make_simulator(sc, 3)
    agent = make_agent("fifo")
    agent.reset(3)
    report = sim.run(agent.decide)
    carbon = sim.carbon
    assert carbon is not None
    checked = 0
    for js, rec in zip(sim.jobs, sim.records()):
        regions = {r for _, _, held in rec.segments for r, _ in held}
        if len(regions) != 1 or not rec.segments:
            continue
        (region,) = regions
        zone = carbon.zone_index[sim.topo.regions[region].zone]
        run_s = sum(end - start for start, end, _ in rec.segments)
        power = rec.energy_j / run_s
        kg = 0.0
        for start, end, _ in rec.segments:
            t = start
            while t < end:
                step_end = min(end, (math.floor(t / 3600.0) + 1) * 3600.0)
                kg += power * (step_end - t) * carbon.hourly[zone, int(t // 3600.0) % carbon.hours] / 3.6e9
                t = step_end
        assert js.carbon_kg == pytest.approx(kg, rel=1e-9)
        checked += 1
    assert checked >= 5
    assert report.carbon_kg == pytest.approx(sum(j.carbon_kg for j in sim.jobs), rel=1e-12)
    assert sim.carbon_kg() == pytest.approx(report.carbon_kg, rel=1e-9)


def test_outages_stop_the_carbon_with_the_power():
    """Jobs stopped by outages and restarted elsewhere: at a constant 250 g/kWh in every zone each
    job's carbon is its energy x 250 g/kWh, whatever its runs."""
    sc = _with_carbon("geo-8", {"default": {"kind": "constant", "gco2_per_kwh": 250.0}},
                      workload={"num_jobs": 12}, outages={"rate_per_region_per_day": 12.0})
    from sfenv.agents.registry import make_agent

    sim = make_simulator(sc, 0)
    agent = make_agent("fifo")
    agent.reset(0)
    report = sim.run(agent.decide)
    assert report.preemptions > 0
    for js in sim.jobs:
        assert js.carbon_kg == pytest.approx(js.energy_j / 3.6e6 * 0.250, rel=1e-12)
    assert report.carbon_kg == pytest.approx(report.energy_kwh * 0.250, rel=1e-12)


def test_a_zone_without_a_series_gets_the_fallback_and_says_so():
    sc = _with_carbon("geo-8", {"zones": {"DE-LU": {"kind": "csv"}}})
    series = sc.make_carbon(None)
    assert series.sources["DE-LU"] == "csv"
    assert series.fallback_zones == sorted(z for z in series.zones if z != "DE-LU")
    assert np.all(series.hourly[series.zone_index["SG"]] == DEFAULT_GCO2_PER_KWH)
    # a scenario without the section: every zone is the fallback, and the episode says so
    sim = make_simulator(load_scenario("spider-8"), 0)
    assert sim.carbon is not None and sim.carbon.fallback_zones == sim.carbon.zones
    assert sim.carbon.signal == "lca"


def test_bundled_series_is_the_shared_file(tmp_path):
    if not SHARED_CSV.exists():
        pytest.skip("the shared data folder is not here")
    assert bundled_carbon_csv().read_bytes() == SHARED_CSV.read_bytes()
    sc = load_scenario("geo-8")
    series = sc.make_carbon(None)
    shared = read_carbon_csv(SHARED_CSV, ["DE-LU_lca"])["DE-LU_lca"]
    assert np.array_equal(series.hourly[series.zone_index["DE-LU"], :len(shared)], shared)
    direct = sc.with_overrides(carbon={"signal": "direct", "start_hour": 5}).make_carbon(None)
    assert direct.signal == "direct"
    shared_direct = read_carbon_csv(SHARED_CSV, ["DE-LU_direct"])["DE-LU_direct"]
    assert direct.hourly[direct.zone_index["DE-LU"], 0] == shared_direct[5]


def test_profile_is_seeded_and_has_its_shape():
    a = carbon_profile(np.random.default_rng(1), 400.0, 48, diurnal_amplitude=0.3, noise=0.05)
    b = carbon_profile(np.random.default_rng(1), 400.0, 48, diurnal_amplitude=0.3, noise=0.05)
    assert np.array_equal(a, b)
    flat = carbon_profile(None, 400.0, 24, diurnal_amplitude=0.3, seasonal_amplitude=0.0, clean_hour_local=13.0,
                          utc_offset_h=2.0)
    assert int(np.argmin(flat)) == 11  # 13:00 local at UTC+2
    assert flat.min() == pytest.approx(400.0 * 0.7)


@pytest.mark.parametrize(("section", "field"), [
    ({"signal": "marginal"}, "carbon.signal"),
    ({"zones": {"DE-LU": {"kind": "constant", "gco2_per_kwh": -1}}}, "carbon.zones.DE-LU.gco2_per_kwh"),
    ({"zones": {"DE-LU": {"kind": "constant", "gco2_per_kwh": 1e6}}}, "carbon.zones.DE-LU.gco2_per_kwh"),
    ({"zones": {"DE-LU": {"kind": "csv", "column": "NOWHERE"}}}, "carbon.zones.DE-LU.column"),
    ({"zones": {"DE-LU": {"kind": "csv"}}, "path": "missing.csv"}, "carbon.path"),
    ({"default": {"kind": "csv"}}, "carbon.default"),
    ({"forecast": {"kind": "perfect"}}, "carbon.forecast.kind"),
    ({"forecast": {"mape_24h": 2.0}}, "carbon.forecast.mape_24h"),
    ({"embodied_kg_per_gpu_hour": -0.1}, "carbon.embodied_kg_per_gpu_hour"),
    ({"start_hour": -1}, "carbon.start_hour"),
])
def test_bad_carbon_sections_name_the_field(section, field):
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        load_scenario("geo-8").with_overrides(carbon=section)


def test_embodied_carbon_is_gpu_hours_times_the_figure():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6},
                                                  carbon={"embodied_kg_per_gpu_hour": 0.01})
    from sfenv.agents.registry import make_agent

    sim = make_simulator(sc, 0)
    agent = make_agent("fifo")
    agent.reset(0)
    report = sim.run(agent.decide)
    gpu_s = sum((end - start) * sum(n for _, n in held) for rec in sim.records() for start, end, held in rec.segments)
    assert report.embodied_kg == pytest.approx(0.01 * gpu_s / 3600.0, rel=1e-12)
    assert report.embodied_kg > 0


def test_carbon_off_leaves_the_scenario_hash():
    from sfenv.runs.results import scenario_hash

    sc = load_scenario("spider-8")
    assert "carbon" not in sc.cfg.model_dump() and "carbon_weight" not in sc.cfg.model_dump()["reward"]
    assert scenario_hash(sc) == scenario_hash(sc.with_overrides(reward={"carbon_weight": 0.0}))


# ---------------------------------------------------------------- forecasts and the observation
def _series(hours: int = 96) -> CarbonSeries:
    t = np.arange(hours, dtype=float)
    return CarbonSeries(["a", "b"], np.vstack([300 + 100 * np.sin(t / 5), 80 + 10 * np.cos(t / 3)]), "lca")


def test_persistence_forecast_as_of_t_never_reads_after_t():
    """Change every intensity after hour h: the persistence forecast issued at h is unchanged; the oracle's is not."""
    from sfenv.world.carbon import CarbonForecaster

    base = _series()
    for h in (0, 5, 30, 70):
        altered = base.hourly.copy()
        altered[:, h + 1:] *= 3.0
        other = CarbonSeries(base.zones, altered, "lca")
        t = h * 3600.0 + 1234.0
        fc = CarbonForecaster(base, "persistence").issued(t, 48)
        assert np.array_equal(fc, CarbonForecaster(other, "persistence").issued(t, 48))
        assert np.array_equal(fc[:, 0], base.hourly[:, h])  # the current hour is measured
        truth = CarbonForecaster(base, "oracle").issued(t, 48)
        assert np.array_equal(truth, base.hour_values(np.arange(h, h + 49)))
        if h + 1 < base.hours:
            assert not np.array_equal(truth, CarbonForecaster(other, "oracle").issued(t, 48))


def test_noisy_forecast_is_issued_once_per_hour_seeded_and_of_the_published_size():
    from sfenv.world.carbon import PUBLISHED_DAY_AHEAD_MAPE, CarbonForecaster

    series = CarbonSeries(["z"], np.full((1, 24 * 400), 400.0), "lca")
    fc = CarbonForecaster(series, "noisy", seed=7)
    a = fc.issued(5 * 3600.0 + 10.0, 24)
    later = CarbonForecaster(series, "noisy", seed=7).issued(5 * 3600.0 + 3000.0, 24)
    assert np.array_equal(a, later)  # issued as of the hour
    assert not np.array_equal(a, CarbonForecaster(series, "noisy", seed=8).issued(5 * 3600.0, 24))
    assert a[0, 0] == 400.0  # now: measured
    errors = np.array([abs(fc.issued(h * 3600.0, 24)[0, 24] / 400.0 - 1.0) for h in range(24 * 300)])
    assert np.mean(errors) == pytest.approx(PUBLISHED_DAY_AHEAD_MAPE, rel=0.1)  # the 24-hour lead's MAPE
    early = np.array([abs(fc.issued(h * 3600.0, 24)[0, 1] / 400.0 - 1.0) for h in range(24 * 300)])
    assert np.mean(early) < np.mean(errors) / 3  # errors grow with the lead


@pytest.mark.parametrize("obs_mode", ["full", "compact"])
def test_carbon_key_is_the_forecast_issued_now_and_passes_the_checkers(obs_mode):
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    env = gym.make("sfenv/Geo8-v6", num_jobs=6, obs_mode=obs_mode, carbon_obs=True).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    obs, info = env.reset(seed=3)
    sim = env.sim
    rows = sim.carbon_forecaster.issued(sim.time, 24)
    zone_of = [sim.carbon.zone_index[r.zone] for r in sim.topo.regions]
    if obs_mode == "full":
        assert obs["carbon"].shape == (8 * 25,)
        assert np.allclose(obs["carbon"].reshape(8, 25), np.clip(rows[zone_of] / 1000, 0, 1), atol=1e-6)
    else:
        assert obs["carbon"].shape == (3 + 24,)
        assert obs["carbon"][0] == pytest.approx(rows[zone_of, 0].min() / 1000, abs=1e-6)
    assert info["carbon_signal"] == "lca" and info["carbon_kg"] == 0.0
    assert not env.privileged_carbon
    assert "carbon" not in gym.make("sfenv/Geo8-v6", num_jobs=6).observation_space.spaces  # off by default


def test_oracle_is_labelled_privileged():
    from sfenv.env import GeoSchedEnv

    sc = load_scenario("geo-8").with_overrides(carbon={"forecast": {"kind": "oracle"}}, workload={"num_jobs": 4})
    assert GeoSchedEnv(sc, carbon_obs=True).privileged_carbon
    assert not GeoSchedEnv(sc).privileged_carbon  # no carbon key, nothing privileged


def test_carbon_weight_enters_the_reward_and_info_counts_the_kg():
    from sfenv.env import GeoSchedEnv

    sums = {}
    for weight in (0.0, 2.0):
        env = GeoSchedEnv("geo-8", num_jobs=5, carbon_weight=weight)
        env.reset(seed=1)
        total, kg, done = 0.0, 0.0, False
        while not done:
            mask = env.action_masks()
            _, r, done, _, info = env.step(int(np.flatnonzero(mask)[0]))
            total += r
            kg += info["step_carbon_kg"]
        sums[weight] = (total, kg, info["carbon_kg"], info["episode_report"]["carbon_kg"])
    (r0, kg0, c0, rep0), (r2, kg2, _, _) = sums[0.0], sums[2.0]
    assert kg0 == pytest.approx(c0) and c0 == pytest.approx(rep0, rel=1e-9) and kg0 > 0
    assert kg2 == pytest.approx(kg0)  # the same episode: the weight changes the reward only
    assert r2 == pytest.approx(r0 - 2.0 * kg0, rel=1e-9)


def test_three_objective_front_and_plot(tmp_path):
    from sfenv.app.plots import pareto_front_nd, plot_tradeoff_pairs

    pts = [(1.0, 5.0, 9.0), (2.0, 4.0, 1.0), (2.0, 6.0, 2.0), (3.0, 5.0, 9.5), (float("nan"), 0.0, 0.0)]
    # (2, 6, 2) is dominated by (2, 4, 1); (3, 5, 9.5) by (1, 5, 9); the NaN point is never on the front
    assert pareto_front_nd(pts) == [0, 1]
    rows = [{"agent": f"a{i}", "mean_jct_h": p[0], "cost_usd": p[1], "carbon_kg": p[2], "carbon_signal": "lca"}
            for i, p in enumerate(pts[:4])]
    fig = plot_tradeoff_pairs(rows, tmp_path / "t.png", scenario="geo-8")
    assert (tmp_path / "t.png").stat().st_size > 0
    assert len(fig.axes) == 3 and "(lca)" in fig.axes[1].get_ylabel()
