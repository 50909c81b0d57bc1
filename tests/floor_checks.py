"""The menu floors' quantities computed here independently of the env (shared by the floor tests)."""

from __future__ import annotations

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
