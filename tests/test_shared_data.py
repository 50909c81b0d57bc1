"""Loaders on the real measured data in ../shared/data (skipped when it is not there)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from sfenv.agents.fifo import FIFOAgent

from sfenv.scenario import load_scenario
from sfenv.sim import SimConfig, Simulator
from sfenv.world.prices import read_price_csv
from sfenv.world.workload import MODEL_ZOO, jobs_from_trace, read_trace_csv

DATA = Path(os.environ.get("SFENV_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "README.md").exists(), reason=f"shared data not found at {DATA}")

PRICES = "energy/electricity_price_usd_per_mwh_2023.csv"
TRACE = "traces/philly_jobs_2017-10-02_7d.csv"
# 2023 means (USD/MWh) stated in the data README
MEANS = {"US-MIDA-PJM": 35.7, "US-CAL-CISO": 61.5, "CA-ON": 20.0, "DE-LU": 102.6, "JP-TK": 89.3, "SG": 184.9,
         "AU-NSW": 96.0, "IN-WE": 61.9}


def test_price_csv_loads_with_stated_means():
    series = read_price_csv(DATA / PRICES)
    assert set(series.zones) == set(MEANS) and series.hours == 8760
    for z, mean in MEANS.items():
        assert series.hourly[series.zone_index[z]].mean() == pytest.approx(mean, abs=0.5)
    assert series.hourly.min() < 0  # negative prices survive loading (DE-LU)
    # the exact integral over the year equals the sum of hourly prices x 3600 s
    i = series.zone_index["DE-LU"]
    assert series.integral(i, 0, 8760 * 3600) == pytest.approx(series.hourly[i].sum() * 3600)


def test_philly_trace_loads_and_replays():
    rows = read_trace_csv(DATA / TRACE)
    assert len(rows) == 11386
    counts = {g: sum(1 for r in rows if r.gpus == g) for g in (1, 2, 4, 8, 16, 32)}
    assert counts == {1: 10823, 2: 248, 4: 93, 8: 203, 16: 4, 32: 15}
    big = [r for r in rows if r.gpus >= 8][:12]
    table = [(1, MODEL_ZOO["gpt-350m"]), (8, MODEL_ZOO["gpt-1.3b"]), (16, MODEL_ZOO["gpt-2.7b"])]
    jobs = jobs_from_trace(big, table, global_batch=64, ref_flops_per_gpu=312e12, mfu=0.4, max_iterations=2000)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs) and jobs[0].arrival == 0.0
    sc = load_scenario("spider-8")
    sim = Simulator(sc.topology, sc.make_prices(np.random.default_rng(0)), jobs, SimConfig())
    report = sim.run(FIFOAgent().decide)
    assert report.finished == len(jobs)


def test_geo8_is_reproducible_from_the_data():
    from sfenv.experiments.derive_geo8 import derive

    d = derive(DATA)
    text = (Path(__file__).resolve().parents[1] / "scenarios" / "geo-8.yaml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["topology"]["links"] == d["links"]
    assert cfg["prices"]["profiles"] == d["profiles"]
    zones = {r["name"]: r["zone"] for r in cfg["topology"]["regions"]}
    assert zones == d["zones"]
    assert load_scenario("geo-8").topology.num_links == 28
