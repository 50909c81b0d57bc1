"""End-to-end: the default scenario runs to completion with the FIFO baseline."""

import math

from sfenv.agents.fifo import FIFOAgent

from sfenv.scenario import DEFAULT_SCENARIO, load_scenario
from sfenv.sim import make_simulator


def test_default_scenario_runs_with_fifo():
    sc = load_scenario(DEFAULT_SCENARIO)
    sim = make_simulator(sc, 0)
    report = sim.run(FIFOAgent().decide)
    records = sim.records()
    assert report.jobs == sc.cfg.workload.num_jobs
    assert report.finished == report.jobs and report.unfinished == 0
    # the report aggregates the per-job records
    jcts = [r.jct for r in records]
    assert math.isclose(report.mean_jct_s, sum(jcts) / len(jcts))
    assert math.isclose(report.cost_usd, sum(r.cost_usd for r in records))
    assert all(r.finish >= r.first_start >= r.arrival for r in records)
    assert report.cost_usd > 0 and report.energy_kwh > 0
    assert 0 < report.utilisation <= 1


def test_importing_sfenv_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, sfenv, sfenv.sim, sfenv.scenario, sfenv.env; "
        "print('torch' in sys.modules, 'stable_baselines3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
