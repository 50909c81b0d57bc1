"""BACE-Pipe: bandwidth-aware, cost-efficient pipeline-parallel scheduling across regions.

Source: arXiv 2605.25375 (Zhang, Liu, Xu), known to us only through two AI summaries of the full
text and its abstract (see the project's research notes).  Nothing here is checked against the
paper itself.

Follows the source
    - [summary] Pipeline parallelism only, with a fixed pipeline degree for the whole run; each
      job uses ``K* = argmin_k t_iter(k)`` GPUs.
    - [summary] Dynamic priority ``P_j = (1 - a)(1 - I_j) + a (1 - D_j)`` with ``I_j`` the
      normalised compute intensity, ``D_j`` the normalised bandwidth demand and ``a`` rising with
      network congestion; jobs are tried in priority order and a job whose path is infeasible is
      skipped (no head-of-line blocking).
    - [summary] Pathfinder: Prim-like greedy growth of a region path that adds only hops whose
      per-micro-batch transfer time does not exceed the stage compute time (no pipeline stall),
      preferring high bandwidth.
    - [summary] Cost-Min: one GPU (stage) per path region first, keeping the chain connected, then
      the remaining ``K* - |path|`` GPUs in path regions by ascending electricity price.
    - [summary] Electricity is billed only while a job runs (the simulator does this).

Our design (the summaries give no detail)
    - ``I_j``: the job's total training FLOPs over the largest in the queue.  ``D_j``: activation
      bytes per micro-batch over the per-stage compute time at ``K*`` (bytes/s the pipe needs),
      over the largest in the queue.  ``a``: the share of WAN links that carry at least one flow.
    - ``K*``: the GPU count (one GPU per stage, tensor parallelism only when a stage cannot fit)
      minimising the modelled iteration time on the job's fastest free GPU type, searched over a
      grid of counts from the memory minimum up; cached per job shape and GPU type.
    - Path start: regions by free GPUs capped at ``K*`` (most first; with Cost-Min, ties, e.g.
      two regions that can each hold the whole job, go to the cheaper); the next hop is chosen among all regions not
      yet on the path (routes follow the WAN graph), stall-free hops only, by route bandwidth share.
    - A path that cannot collect ``K*`` GPUs is accepted if it reaches the job's minimum GPUs and
      the memory minimum (the plan then has fewer stages).
    - Stall-free check uses the simulator's performance model (``PlanPerf.hop_times`` vs
      ``compute_times``), so the rule is the model's, not a separate formula.

Parameters
    priority: use the dynamic priority (False: arrival order), ablation switch.
    pathfinder: use the stall-free, bandwidth-preferring path finder (False: add regions by free
        GPUs with no stall check), ablation switch.
    cost_min: fill GPUs by ascending price (False: by descending free capacity), ablation switch.
    schedule: pipeline schedule of the plans (``"1f1b"`` as in the source).
"""

from __future__ import annotations

import math

import numpy as np
from sfenv.agents.base import SchedulerAgent

from sfenv.perf import Plan, PlanPerf
from sfenv.planning import chain_plan
from sfenv.sim import SimView
from sfenv.workload import JobSpec

__all__ = ["BACEPipeAgent", "pp_plan", "k_star", "min_stages"]

TP_OPTIONS = (1, 2, 4, 8)


def min_stages(job: JobSpec, memory_bytes: float, tp: int = 1, headroom: float = 0.9) -> int:
    """Fewest pipeline stages whose weights and optimizer state fit (activations ignored)."""
    return max(1, math.ceil(16.0 * job.model.params / (tp * memory_bytes * headroom)))


def pp_plan(
    view: SimView, job: JobSpec, chain: list[int], gpus: list[int], schedule: str = "1f1b"
) -> tuple[Plan, PlanPerf] | None:
    """A pipeline-only plan with ``gpus[i]`` GPUs in ``chain[i]``.

    One stage per GPU (t = 1), or fewer, wider stages (t = 2, 4, 8) when one-GPU stages do not
    fit; recomputation as a last resort. Returns the feasible ``(plan, perf)`` with the lowest
    iteration time, or None.
    """
    best: tuple[Plan, PlanPerf] | None = None
    for tp in TP_OPTIONS:
        stages = [g // tp for g in gpus]
        if min(stages) < 1 or sum(stages) > job.model.layers or job.model.heads % tp:
            continue
        if any(tp > view.topo.regions[r].gpus_per_server for r in chain):
            continue
        for recompute in (False, True):
            plan = chain_plan(job, view.topo, chain, stages, dp=1, tp=tp, schedule=schedule, recompute=recompute)
            if plan is None:
                break
            perf = view.evaluate(plan, job)
            if perf.feasible:
                if best is None or perf.iter_time < best[1].iter_time:
                    best = (plan, perf)
                break
        if best is not None:
            break
    return best


def k_star(view: SimView, job: JobSpec, region: int, cache: dict | None = None) -> int:
    """``K* = argmin_k t_iter(k)`` for pipeline-only plans in one region.

    Plans come from :func:`pp_plan` in a region of ``region``'s GPU type, ignoring how many GPUs
    are free, from the memory minimum up to ``min(8 L, max_gpus)`` GPUs (stages widen with
    tensor parallelism when one GPU is too small).
    """
    gpu = view.topo.regions[region].gpu
    key = (job.model, job.global_batch, job.min_gpus, job.max_gpus, gpu.name)
    if cache is not None and key in cache:
        return cache[key]
    lo = max(job.min_gpus, min_stages(job, gpu.memory_bytes))
    hi = max(lo, min(job.model.layers, job.max_gpus))
    best_k, best_t = lo, math.inf
    hi_gpus = max(lo, min(job.model.layers * 8, job.max_gpus))
    for k in sorted({lo, hi, *[x for x in (2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256) if lo <= x <= hi_gpus]}):
        res = pp_plan(view, job, [region], [k])
        if res is not None and res[1].iter_time < best_t:
            best_k, best_t = res[0].gpus, res[1].iter_time
    if cache is not None:
        cache[key] = best_k
    return best_k


class BACEPipeAgent(SchedulerAgent):
    """BACE-Pipe (see the module docstring for what follows the source and what is ours)."""

    name = "bace-pipe"

    def __init__(self, priority: bool = True, pathfinder: bool = True, cost_min: bool = True, schedule: str = "1f1b"):
        self.priority = priority
        self.pathfinder = pathfinder
        self.cost_min = cost_min
        self.schedule = schedule
        self.evaluations = 0
        self._kstar: dict = {}

    def reset(self, seed: int | None = None) -> None:
        """Reset the evaluation counter."""
        self.evaluations = 0

    # ---------------------------------------------------------------- priority
    def _demand(self, view: SimView, job: JobSpec) -> tuple[float, float]:
        """(compute intensity, bandwidth demand in bytes/s) of ``job``."""
        r = int(np.argmax(view.topo.gpu_flops))
        k = k_star(view, job, r, self._kstar)
        stage_compute = 6.0 * job.model.params / k * job.model.seq_len / (view.topo.gpu_flops[r] * view.params.mfu)
        act = 2.0 * job.model.seq_len * job.model.hidden
        return job.total_flops, act / stage_compute

    def congestion(self, view: SimView) -> float:
        """``a``: the share of WAN links carrying at least one flow."""
        flows = view.link_flows
        return float((flows > 0).mean()) if len(flows) else 0.0

    def order(self, view: SimView) -> list[JobSpec]:
        """Jobs by descending dynamic priority (arrival order when ``priority=False``)."""
        jobs = view.waiting
        if not self.priority or len(jobs) < 2:
            return jobs
        dem = [self._demand(view, j) for j in jobs]
        imax = max(d[0] for d in dem) or 1.0
        dmax = max(d[1] for d in dem) or 1.0
        a = self.congestion(view)
        prio = [(1 - a) * (1 - i / imax) + a * (1 - d / dmax) for i, d in dem]
        return [j for _, _, j in sorted(zip(prio, [-j.job_id for j in jobs], jobs), key=lambda x: (-x[0], -x[1]))]

    # ---------------------------------------------------------------- path + allocation
    def _hop_ok(self, view: SimView, job: JobSpec, a: int, b: int, k: int) -> bool:
        """Stall-free check from the performance model.

        A probe: a two-stage slice of the model (each stage with the layers one of ``k`` stages would
        hold, no embedding) over the hop a->b, under current link shares; the hop is stall-free when
        its per-micro-batch transfer time does not exceed the stage compute time.
        """
        from dataclasses import replace as _replace

        from sfenv.perf import Stage

        per = max(1, round(job.model.layers / max(1, k)))
        probe_model = _replace(job.model, layers=2 * per, vocab=0)
        probe_job = _replace(job, model=probe_model, min_gpus=1, max_gpus=max(2, job.max_gpus))
        plan = Plan(job.job_id, (Stage.at(a, per), Stage.at(b, per)), schedule=self.schedule, recompute=True)
        perf = view.evaluate(plan, probe_job)
        self.evaluations += 1
        if not perf.feasible or not perf.hop_times:
            return False
        return perf.hop_times[0] <= perf.compute_times[0]

    def find_path(self, view: SimView, job: JobSpec, k: int) -> list[int] | None:
        """Regions for a pipeline of ``k`` GPUs (see module docstring), or None."""
        free = view.free_gpus
        topo = view.topo
        need = max(job.min_gpus, min_stages(job, float(topo.gpu_memory.min())))
        prices = view.prices_now()
        if self.cost_min:  # regions that can each hold all k GPUs are equal; the cheaper one first
            starts = sorted((r for r in range(topo.num_regions) if free[r] > 0),
                            key=lambda r: (-min(int(free[r]), k), prices[r], r))
        else:
            starts = sorted((r for r in range(topo.num_regions) if free[r] > 0), key=lambda r: (-free[r], r))
        for start in starts[:3]:
            path, total = [start], int(free[start])
            while total < k:
                tail = path[-1]
                options = [r for r in range(topo.num_regions) if free[r] > 0 and r not in path]
                if not options:
                    break
                if self.pathfinder:
                    options = [r for r in options if self._hop_ok(view, job, tail, r, k)]
                    if not options:
                        break
                    nxt = max(options, key=lambda r: (topo.route_bw_bps[tail, r] / (1 + min(
                        (view.link_flows[e] for e in topo.route(tail, r)), default=0)), free[r], -r))
                else:
                    nxt = max(options, key=lambda r: (free[r], -r))
                path.append(nxt)
                total += int(free[nxt])
            if total >= min(k, need) and total >= job.min_gpus:
                return path
        return None

    def allocate(self, view: SimView, job: JobSpec, path: list[int], k: int) -> list[int]:
        """GPUs per path region: one each, then the rest by ascending price (or by capacity)."""
        free = view.free_gpus
        alloc = [1] * len(path)
        left = k - len(path)
        prices = view.prices_now()
        key = (lambda i: (prices[path[i]], i)) if self.cost_min else (lambda i: (-free[path[i]], i))
        for i in sorted(range(len(path)), key=key):
            if left <= 0:
                break
            take = min(left, int(free[path[i]]) - alloc[i])
            alloc[i] += take
            left -= take
        return alloc

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The BACE-Pipe plan for ``job`` now, if its path is feasible."""
        free = view.free_gpus
        if int(free.sum()) < job.min_gpus:
            return []
        fastest = max((r for r in range(view.topo.num_regions) if free[r] > 0), key=lambda r: view.topo.gpu_flops[r])
        kk = k_star(view, job, fastest, self._kstar)
        path = self.find_path(view, job, kk)
        if path is None:
            return []
        alloc = self.allocate(view, job, path, min(kk, int(sum(free[r] for r in path))))
        chain = [r for r, g in zip(path, alloc) if g > 0]
        gpus = [g for g in alloc if g > 0]
        res = pp_plan(view, job, chain, gpus, self.schedule)
        self.evaluations += 1
        return [] if res is None else [res[0]]
