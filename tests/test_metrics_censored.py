"""Metrics that cannot hide a starved job: censored JCTs, partial work, the evaluator's rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sfenv.agents.fifo import FIFOAgent

from sfenv.app.evaluate import run_episode
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.sim.metrics import EpisodeReport, JobRecord

VICTIM = 2
HORIZON_H = 48.0


class StarvingAgent(FIFOAgent):
    """FIFO first-fit for every job but one, which it never starts (not blocking, so the rest run)."""

    name = "starving"
    blocking = False

    def __init__(self, victim: int):
        super().__init__()
        self.victim = victim

    def propose(self, view, job, k=1):
        return [] if job.job_id == self.victim else super().propose(view, job, k)


def _scenario(num_jobs: int = 6, horizon_h: float = HORIZON_H):
    return load_scenario("spider-8").with_overrides(workload={"num_jobs": num_jobs}, sim={"horizon_h": horizon_h})


@pytest.fixture(scope="module")
def starved():
    sc = _scenario()
    sim = make_simulator(sc, 0)
    report = sim.run(StarvingAgent(VICTIM).decide)
    return sc, sim, report, sim.records()


def test_starved_job_counts_with_horizon_minus_arrival(starved):
    sc, sim, report, records = starved
    horizon = HORIZON_H * 3600
    victim = records[VICTIM]
    assert not victim.finished and math.isnan(victim.first_start) and victim.arrival < horizon
    assert report.unfinished == 1 and report.censored == 1 and report.finished == report.jobs - 1
    assert report.makespan_s == pytest.approx(horizon)  # the simulator waited to the horizon
    # brute force: every arrived job's JCT, the starved one censored at horizon - arrival
    jcts = np.array([r.finish - r.arrival if r.finished else horizon - r.arrival for r in records])
    assert report.mean_jct_s == pytest.approx(float(np.mean(jcts)))
    assert report.p95_jct_s == pytest.approx(float(np.percentile(jcts, 95)))
    finished_mean = float(np.mean([r.finish - r.arrival for r in records if r.finished]))
    assert report.mean_jct_finished_s == pytest.approx(finished_mean)
    assert report.mean_jct_s > finished_mean  # the optimistic figure would hide the starved job
    assert victim.censored_jct(report.makespan_s) == pytest.approx(horizon - victim.arrival)
    # its wait is censored too, and it contributes zero throughput (it got no service)
    waits = [r.first_start - r.arrival if r.finished else horizon - r.arrival for r in records]
    assert report.mean_wait_s == pytest.approx(float(np.mean(waits)))
    tputs = [r.tokens / (r.finish - r.first_start) if r.finished else 0.0 for r in records]
    assert report.mean_throughput_tokens_s == pytest.approx(float(np.mean(tputs)))


def test_evaluator_rows_carry_censored_jcts():
    sc = _scenario()
    row = run_episode(StarvingAgent(VICTIM), sc, 0)
    assert row["unfinished"] == 1 and sum(row["jct_censored"]) == 1
    assert row["mean_jct_s"] == pytest.approx(float(np.mean(row["jcts_s"])))
    assert row["jct_censored"][VICTIM] and row["jcts_s"][VICTIM] == max(row["jcts_s"])


def test_partial_work_of_a_job_running_at_the_end_counts():
    # a horizon too short for the jobs started: they are still running when the episode ends
    sc = _scenario(num_jobs=4, horizon_h=1.0)
    sim = make_simulator(sc, 0)
    report = sim.run(FIFOAgent().decide)
    records = sim.records()
    end = report.makespan_s
    running = [r for r in records if not r.finished and not math.isnan(r.first_start)]
    assert running, "the test needs a job running at the end of the episode"
    for r in running:
        assert r.tokens > 0 and r.cost_usd > 0
        assert r.throughput(end) == pytest.approx(r.tokens / (end - r.first_start))
        assert r.segments[-1][1] == pytest.approx(end)  # its open run ends at the episode's end
    assert report.cost_usd == pytest.approx(sum(r.cost_usd for r in records))
    assert report.total_tokens == pytest.approx(sum(r.tokens for r in records))
    arrived = [r for r in records if r.finished or r.arrival < end]
    assert report.mean_throughput_tokens_s == pytest.approx(float(np.mean([r.throughput(end) for r in arrived])))
    assert report.mean_jct_s == pytest.approx(float(np.mean([r.censored_jct(end) for r in arrived])))
    assert report.unfinished == len(records) - report.finished and report.censored == len(arrived) - report.finished


def test_report_mid_episode_censors_at_the_current_time():
    sim = make_simulator(_scenario(num_jobs=8), 1)
    agent = FIFOAgent()
    for _ in range(3):  # a few decisions, then stop (as an env truncation would)
        plan = agent.decide(sim.view())
        if plan is None:
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()
    now = sim.time
    report = sim.report()
    arrived = [r for r in sim.records() if r.finished or r.arrival < now]
    assert report.unfinished > 0 and report.makespan_s == now
    assert report.mean_jct_s == pytest.approx(float(np.mean([r.censored_jct(now) for r in arrived])))


def test_records_hold_the_runs_of_every_job(starved):
    _, sim, report, records = starved
    total = sim.topo.gpu_counts
    for r in records:
        if r.finished:
            assert r.segments and r.segments[0][0] == r.first_start and r.segments[-1][1] == r.finish
            assert sum(n for _, n in r.segments[-1][2]) == r.gpus  # no preemption here: one run
        for start, end, placement in r.segments:
            assert start <= end and all(0 < n <= total[g] for g, n in placement)


def test_all_finished_is_unchanged_and_no_jobs_is_nan():
    rec = JobRecord(0, "m", 10.0, 20.0, 110.0, 5, 8, 1, 1.0, 2.0, 0.0, 0, 1000.0)
    rep = EpisodeReport.from_records([rec], 200.0, 800.0, 8)
    assert rep.mean_jct_s == rep.p95_jct_s == rep.mean_jct_finished_s == 100.0
    assert rep.mean_throughput_tokens_s == pytest.approx(1000.0 / 90.0) and rep.censored == 0
    late = JobRecord(1, "m", 300.0, math.nan, math.nan, 5, 0, 0, 0.0, 0.0, 0.0, 0, 0.0)  # arrives after the end
    rep2 = EpisodeReport.from_records([rec, late], 200.0, 800.0, 8)
    assert rep2.unfinished == 1 and rep2.censored == 0 and rep2.mean_jct_s == 100.0
    empty = EpisodeReport.from_records([late], 200.0, 0.0, 8)
    assert math.isnan(empty.mean_jct_s) and math.isnan(empty.p95_jct_s)


def test_a_dead_end_charges_the_stuck_job_to_the_horizon(monkeypatch):
    """Nothing left to happen while a job waits (it can never start): the episode ends at the horizon.

    Ending at the dead end instead would stop the job-time (the reward) and censor the JCT early,
    which made leaving a job stuck look cheap.
    """
    from agent_worlds import job, region, world
    from sfenv.agents.fifo import FIFOAgent

    sim = world([region("a", 8, "z")], [], {"z": 50.0},
                [job(0, min_gpus=8, max_gpus=8, iterations=50), job(1, min_gpus=16, max_gpus=16, arrival=100.0)])
    monkeypatch.setattr(type(sim.prices), "next_change", lambda self, t: float("inf"))  # no wake-ups
    rep = sim.run(FIFOAgent().decide)
    horizon = sim.config.horizon_s
    assert sim.done and sim.time == horizon and rep.unfinished == 1
    job0 = sim.jobs[0]
    assert sim.job_seconds == pytest.approx((job0.finish - 0.0) + (horizon - 100.0))
    assert rep.mean_jct_s == pytest.approx(((job0.finish - 0.0) + (horizon - 100.0)) / 2)
