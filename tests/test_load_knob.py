"""workload.load: the Poisson rate derived from a target offered utilisation, and its validation."""

import math

import pytest
from sfenv.agents.registry import make_agent

from sfenv.scenario import ScenarioError, load_scenario
from sfenv.sim import make_simulator
from sfenv.world.workload import mean_iterations, platform_job_rate, rate_for_load


def _busy_fraction(sim, t0: float, t1: float) -> float:
    """Busy GPU-time inside [t0, t1] over the platform's GPU-time there, from the job records."""
    busy = 0.0
    for rec in sim.records():
        for a, b, held in rec.segments:
            lo, hi = max(a, t0), min(b, t1)
            if hi > lo:
                busy += (hi - lo) * sum(g for _, g in held)
    return busy / (sim.topo.total_gpus * (t1 - t0))


@pytest.mark.parametrize("rho", [0.6, 0.85])
def test_long_fifo_run_uses_the_asked_utilisation(rho):
    """Busy GPU-time / capacity over the arrival period (first 10 % dropped) is within 10 % of rho."""
    sc = load_scenario("spider-8").with_overrides(workload={"load": rho, "num_jobs": 1500}, sim={"horizon_h": 5000})
    assert sc.cfg.workload.arrival.rate_per_hour is None
    sim = make_simulator(sc, 0)
    agent = make_agent("fifo")
    agent.reset(0)
    sim.run(agent.decide)
    arrivals = [js.spec.arrival for js in sim.jobs]
    used = _busy_fraction(sim, arrivals[len(arrivals) // 10], arrivals[-1])
    assert abs(used / rho - 1) < 0.10, (rho, used)


def test_rate_scales_with_load_and_capacity_with_gpus():
    sc = load_scenario("spider-8")
    a, b = (sc.with_overrides(workload={"load": x}) for x in (0.3, 0.9))
    assert b.arrival_rate_per_hour == pytest.approx(3 * a.arrival_rate_per_hour)
    assert a.offered_load == pytest.approx(0.3) and b.offered_load == pytest.approx(0.9)
    # twice the GPUs in every region (same GPU types): more capacity, hence a higher rate at the same load
    regions = [dict(r.model_dump(), gpus=2 * r.gpus) for r in sc.cfg.topology.regions]
    big = sc.with_overrides(topology={"regions": regions}, workload={"load": 0.9})
    assert big.job_capacity_per_hour > 1.5 * sc.job_capacity_per_hour
    # longer jobs: less capacity
    longer = sc.with_overrides(workload={"iterations": [5000, 50000], "load": 0.9})
    assert longer.arrival_rate_per_hour < b.arrival_rate_per_hour / 5


def test_offered_load_of_a_rate_scenario():
    sc = load_scenario("spider-8")
    assert sc.offered_load == pytest.approx(sc.cfg.workload.arrival.rate_per_hour / sc.job_capacity_per_hour)
    mm = sc.with_overrides(workload={"arrival": {"process": "mmpp", "rate_per_hour": 1, "burst_rate_per_hour": 7,
                                                 "mean_calm_h": 3, "mean_burst_h": 1}})
    assert mm.offered_load == pytest.approx((1 * 3 + 7 * 1) / 4 / sc.job_capacity_per_hour)


def test_helpers():
    assert mean_iterations(100, 100) == 100
    assert mean_iterations(1, 2, [10, 20, 60]) == 30
    assert mean_iterations(500, 5000) == pytest.approx(4500 / math.log(10))
    # two regions: 10 GPUs at 100 GPU-s per job, 30 GPUs at 300: each completes 0.1 job/s
    assert platform_job_rate([10, 30], [100, 300]) == pytest.approx(0.2 * 3600)
    assert platform_job_rate([10, 30], [100, math.inf]) == pytest.approx(0.1 * 3600)
    assert rate_for_load(0.5, 8.0) == 4.0
    with pytest.raises(ValueError, match="no region"):
        platform_job_rate([10], [math.inf])
    with pytest.raises(ValueError):
        rate_for_load(0.0, 8.0)


def test_load_and_rate_replace_each_other_in_overrides():
    sc = load_scenario("spider-8").with_overrides(workload={"load": 0.9})
    back = sc.with_overrides(workload={"arrival": {"rate_per_hour": 3}})
    assert back.cfg.workload.load is None and back.arrival_rate_per_hour == 3
    assert sc.with_overrides(workload={"num_jobs": 5}).cfg.workload.load == 0.9


@pytest.mark.parametrize(("workload", "match"), [
    ({"load": 0.9, "arrival": {"rate_per_hour": 3}}, "not both"),
    ({"load": 0.9, "arrival": {"process": "mmpp"}}, "Poisson"),
    ({"load": 0}, "greater than 0"),
    ({"load": 90}, "less than or equal to 10"),
    ({"load": True}, "boolean"),
])
def test_bad_load_is_refused_with_the_field(workload, match):
    data = load_scenario("spider-8").cfg.model_dump()
    data["workload"]["arrival"]["rate_per_hour"] = None
    for k, v in workload.items():
        if k == "arrival":
            data["workload"]["arrival"].update(v)
        else:
            data["workload"][k] = v
    with pytest.raises(ScenarioError, match=match) as e:
        load_scenario(data)
    assert "workload" in str(e.value)


def test_contended_scenarios_are_at_rho_0_9():
    for name in ("spider-8-contended", "geo-8-contended", "geo-8-contended-cost"):
        sc = load_scenario(name)
        assert sc.offered_load == pytest.approx(0.9)
        assert sc.cfg.workload.num_jobs >= 100
    assert load_scenario("geo-8-contended-cost").cfg.reward.cost_weight > 0
