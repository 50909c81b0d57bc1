"""The simulator's queue bookkeeping (kept in step for speed at scale) against brute force.

The simulator keeps the waiting ids sorted by insertion, their specs in a parallel list (what
``SimView.waiting`` and ``waiting_head`` read) and a count of waiting jobs per ``min_gpus`` (what
the decision-point test reads).  These tests recompute all of it from the jobs' states after every
decision and event of episodes with mixed job minimums, preemptions by outages and random plans.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sfenv.agents.base import SchedulerAgent
from sfenv.agents.fifo import FIFOAgent

from sfenv.model.planning import fit_plan
from sfenv.scenario import load_scenario
from sfenv.sim import Outage, SimConfig, Simulator
from sfenv.world.workload import MODEL_ZOO, JobSpec


def _jobs(rng: np.random.Generator, n: int) -> list[JobSpec]:
    models = [MODEL_ZOO["gpt-1.3b"], MODEL_ZOO["gpt-6.7b"]]
    t = np.cumsum(rng.exponential(120.0, size=n))
    return [
        JobSpec(i, models[int(rng.integers(2))], 256, int(rng.integers(500, 5000)), float(t[i]),
                min_gpus=int(rng.choice([1, 4, 8, 16, 64])), max_gpus=64)
        for i in range(n)
    ]


def _check_queue(sim: Simulator) -> None:
    truth = [j for j, js in enumerate(sim.jobs) if js.status == "waiting"]
    assert sim.waiting == truth  # ascending ids = arrival order
    view = sim.view()
    assert [j.job_id for j in view.waiting] == truth and view.num_waiting == len(truth)
    assert view.waiting_head(3) == view.waiting[:3] and view.waiting_head(0) == []
    assert sim.queue.min_counts == dict(Counter(sim.jobs[j].spec.min_gpus for j in truth))
    free = int(sim.free[~sim.down].sum())
    brute = bool(truth) and free >= min(sim.jobs[j].spec.min_gpus for j in truth)
    assert sim.is_decision_point() == brute


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_queue_bookkeeping_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    sc = load_scenario("spider-8")
    jobs = _jobs(rng, 40)
    starts = np.sort(rng.uniform(0, 15000, 30))
    outages = [Outage(int(r), float(t), 1800.0) for r, t in zip(rng.integers(0, 8, 30), starts)]
    sim = Simulator(sc.topology, sc.make_prices(np.random.default_rng(0)), jobs, SimConfig(), outages=outages)
    started = requeued = 0
    steps = 0
    while not sim.done and steps < 2000:
        steps += 1
        _check_queue(sim)
        view = sim.view()
        plan = None
        if view.waiting and rng.random() < 0.7:  # a random waiting job (not the head: out-of-order removals)
            job = view.waiting[int(rng.integers(view.num_waiting))]
            free = view.free_gpus
            avail = [r for r in range(sim.topo.num_regions) if free[r] > 0]
            if avail:
                r = int(rng.choice(avail))
                res = fit_plan(job, sim.topo, [r], [min(int(free[r]), job.max_gpus)], view.evaluate)
                if res is not None and view.can_start(res[0]):
                    plan = res[0]
        if plan is None:
            before = sum(js.preemptions for js in sim.jobs)
            sim.wait()
            requeued += sum(js.preemptions for js in sim.jobs) - before
        else:
            sim.schedule(plan)
            started += 1
            _check_queue(sim)
            sim.advance()
    _check_queue(sim)
    assert started > 20 and requeued > 0  # the episode exercised removals and re-queues


def _queued_episode(seed: int) -> Simulator:
    """spider-8 with 60 jobs of mixed minimums arriving every ~2 minutes: a queue builds up behind the head."""
    sc = load_scenario("spider-8")
    jobs = _jobs(np.random.default_rng(seed), 60)
    return Simulator(sc.topology, sc.make_prices(np.random.default_rng(0)), jobs, SimConfig())


def test_fifo_head_only_decision_equals_the_base_decision():
    fifo = FIFOAgent()
    sim = _queued_episode(3)
    points = waited = 0
    longest = 0
    while not sim.done:
        view = sim.view()
        plan = fifo.decide(view)
        assert plan == SchedulerAgent.decide(fifo, view)  # the base class's blocking decision over the whole queue
        points += 1
        longest = max(longest, view.num_waiting)
        if plan is None:
            waited += 1
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()
    assert sim.report().finished == 60 and waited > 0 and longest >= 5  # blocking happened behind a queue


def test_fifo_subclasses_that_do_not_block_keep_the_base_decision():
    class SkipHead(FIFOAgent):
        blocking = False

        def propose(self, view, job, k=1):
            return [] if job.job_id == 0 else super().propose(view, job, k)

    sc = load_scenario("spider-8")
    jobs = [JobSpec(i, MODEL_ZOO["gpt-1.3b"], 64, 100, 0.0, 8, 64) for i in range(3)]
    sim = Simulator(sc.topology, sc.make_prices(np.random.default_rng(0)), jobs, SimConfig())
    view = sim.view()
    assert view.num_waiting == 3
    assert FIFOAgent().decide(view).job_id == 0
    assert SkipHead().decide(view).job_id == 1  # it backfilled past the head instead of blocking
