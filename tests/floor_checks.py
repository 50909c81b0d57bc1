"""The menu floors' quantities computed here independently of the env (shared by the floor tests)."""

from __future__ import annotations

import math

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import round_budget
from sfenv.model.perf import Plan


def plan_mfu(env: GeoSchedEnv, plan: Plan) -> float:
    """Tokens/s per peak FLOP/s of the plan's GPUs, computed here from the plan and a fresh evaluation."""
    perf = env.view.evaluate(plan)
    flops = env.scenario.topology.gpu_flops
    peak = sum(n * s.tp * flops[r] for s in plan.stages for r, n in s.placement)
    return perf.throughput / peak if perf.feasible else 0.0


def best_single_region_mfu(env: GeoSchedEnv, job_id: int) -> float:
    """The job's best single-region MFU over every region's whole capacity (up to its max_gpus)."""
    job = env.view.job(job_id)
    best = 0.0
    for r, n in enumerate(env.scenario.topology.gpu_counts.tolist()):
        budget = round_budget(min(n, job.max_gpus))
        if budget >= job.min_gpus:
            res = env.cache.fit(env.view, job, (r,), (budget,))
            if res is not None:
                best = max(best, plan_mfu(env, res[0]))
    return best


def single_region_finish(env: GeoSchedEnv, job_id: int) -> float:
    """The job's earliest finish on one region, from now, recomputed here from the view (no env internals).

    Every region's capacity up to the job's ``max_gpus`` and its halves; each waits until the running jobs
    it overlaps, at their predicted ends, leave it enough free GPUs.
    """
    view = env.view
    job = view.job(job_id)
    left = job.iterations - view.waiting_progress(job_id)
    best = math.inf
    for region, capacity in enumerate(env.scenario.topology.gpu_counts.tolist()):
        if view.down[region]:
            continue
        ends = sorted((r.remaining_s, r.plan.gpus_by_region().get(region, 0)) for r in view.running)
        cap = min(capacity, job.max_gpus)
        for budget in {round_budget(cap), round_budget(cap // 2), round_budget(cap // 4)}:
            if budget < max(1, job.min_gpus):
                continue
            res = env.cache.fit(view, job, (region,), (budget,))
            if res is None or not res[1].feasible:
                continue
            free, wait = int(view.free_gpus[region]), 0.0
            for at, gpus in ends:
                if free >= res[0].gpus:
                    break
                free, wait = free + gpus, at
            if free >= res[0].gpus:
                best = min(best, wait + left * res[1].iter_time)
    return best
