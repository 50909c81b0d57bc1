"""BACE-Pipe: bandwidth-aware, cost-efficient pipeline-parallel scheduling across regions.

Source: arXiv 2605.25375 (Zhang, Liu, Xu), known to us only through two AI summaries of the full
text and its abstract (see the project's research notes).  Nothing here is checked against the
paper itself.

Follows the source
    - [summary] Pipeline parallelism only, with a fixed pipeline degree for the whole run: each
      job runs on exactly its ``K*`` GPUs, or waits (it is never started on fewer).
    - [summary] Dynamic priority ``P_j = (1 - a)(1 - I_j) + a (1 - D_j)`` with ``I_j`` the
      normalised compute intensity, ``D_j`` the normalised bandwidth demand and ``a`` rising with
      network congestion; jobs are tried in priority order and a job whose path is infeasible is
      skipped (no head-of-line blocking).
    - [summary] Pathfinder: a region path grown hop by hop, preferring high bandwidth, that adds
      only hops whose per-micro-batch *transfer* time (activation bytes over the route's
      bandwidth share, no latency) does not exceed the stage compute time (no pipeline stall).
    - [summary] The cheapest feasible path is chosen (review of the summaries: "cheapest among
      all feasible paths").
    - [summary] Cost-Min: one stage per path region first, keeping the chain connected, then the
      remaining stages in path regions by ascending electricity price.
    - [summary] Electricity is billed only while a job runs (the simulator does this).

Our design (the summaries give no detail, or our model differs)
    - ``K*``: the summaries say ``argmin_k t_iter(k)``.  In our model a pipeline inside one region
      keeps getting faster up to the top of any grid (256 micro-batches keep the bubble small),
      so the plain argmin always saturates.  We take the *knee* of the modelled throughput of a
      pipeline whose last stage boundary crosses the WAN: plans of ``k`` GPUs (``k`` on a grid,
      from the memory minimum to ``min(max_gpus, GPUs in the topology)``) with all stages but one
      in the fastest region and the last stage in its lowest-latency neighbour, evaluated with
      nominal link capacities and no other traffic.  Growing ``k`` is accepted while the
      marginal throughput per added GPU is at least ``knee`` (default 0.5) times the throughput
      per GPU already reached (for a doubling: at least a 1.5x speed-up); a dip of the curve
      (e.g. where recomputation switches on) is skipped if a larger ``k`` passes the test from
      the current one.  Where stage compute falls below the boundary hop's time, the pipeline
      across the boundary stops scaling, so ``K*`` grows with the compute per micro-batch
      (model size) and falls with WAN latency.  Cached per job shape and topology.  The probe's
      plans are not completed (micro-batch 1, plain 1F1B window): ``K*`` is BACE-Pipe's sizing
      rule, kept as it was; only the plans it finally runs are completed.
    - Tensor parallelism: the degree (1, 2, 4, 8, within a server, dividing the heads and every
      region's GPU count) with the best modelled iteration time, for ``K*`` and for every path.
    - Paths: simple region paths over regions with free GPUs, grown until they hold ``K*``
      free GPUs (a path that already holds them stops), with stall-free hops only; depth-first
      in order of route bandwidth share from *every* start region, at most ``paths_per_start``
      per start (a documented search budget: "cheapest among all feasible paths" is exact only
      while no start has more paths than that; on bace-6, 6 starts x 8 = 48 paths at most).
      [Before, one budget of 32 paths was shared by all starts, and the first start's depth-first
      search could fill it before any other start was tried.]  Each is allocated by Cost-Min,
      planned (tensor degree by the uncompleted plans' times, to keep the evaluations down),
      completed by the shared completion step (:func:`sfenv.model.planning.complete_plan`:
      micro-batch, recomputation, in-flight window; the stages, hence ``K*`` and the path, stay;
      the summaries fix neither micro-batch nor window), evaluated under current link shares and
      kept if feasible and stall-free (``transfer <= compute`` on every hop of the final plan;
      if the completed plan is not, the plan before completion is tried).  The cheapest is the
      one with the lowest cost for the job's remaining iterations: electricity at today's prices
      plus the egress the simulator bills for the plan's bytes between regions
      (:meth:`SimView.plan_egress_usd_per_iter`; ``egress=False``: electricity only, as the
      summaries count cost); ties go to the shorter iteration time.  [Issue 31: with egress left
      out, BACE-Pipe's pipelines across regions cost 1.5-9.6x the whole bill of its baselines on
      bace-6; docs/claims.md.]
    - Stall-free test: ``PlanPerf.transfer_times`` when the model provides it; otherwise
      ``2 b s h`` bytes over the route's fair bandwidth share (:func:`transfer_times`).
    - ``I_j``: the job's total training FLOPs over the largest in the queue.  ``D_j``: activation
      bytes per micro-batch over the stage compute time of the ``K*`` reference plan, over the
      largest in the queue.  ``a``: the share of WAN links that carry at least one flow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sfenv.agents.base import SchedulerAgent

from sfenv.model.perf import Plan, PlanPerf, evaluate_plan, plan_flows
from sfenv.model.planning import DEFAULT_MENU, RECOMPUTE_MODES, PlanMenu, chain_plan, complete_plan
from sfenv.sim import SimView
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = [
    "KNEE_THRESHOLD",
    "K_GRID",
    "BACEPipeAgent",
    "KStar",
    "k_star",
    "knee_point",
    "min_stages",
    "pp_plan",
    "stall_free",
    "transfer_times",
]

TP_OPTIONS = (1, 2, 4, 8)
#: GPU counts tried for ``K*``
K_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
#: default knee threshold: marginal throughput per added GPU over throughput per GPU
KNEE_THRESHOLD = 0.5
ACT_BYTES = 2.0  # bf16 boundary activations

Evaluate = Callable[[Plan, JobSpec], PlanPerf]


def min_stages(job: JobSpec, memory_bytes: float, tp: int = 1, headroom: float = 0.9) -> int:
    """Fewest pipeline stages whose weights and optimizer state fit (activations ignored).

    :param job: the job.
    :param memory_bytes: memory of one GPU.
    :param tp: tensor-parallel degree of every stage.
    :param headroom: usable fraction of the memory.
    """
    return max(1, math.ceil(16.0 * job.model.params / (tp * memory_bytes * headroom)))


def transfer_times(
    plan: Plan,
    perf: PlanPerf,
    job: JobSpec,
    topo: Topology,
    link_capacity_bps: np.ndarray | None = None,
    link_busy: np.ndarray | None = None,
) -> list[float]:
    """Per-hop, per-micro-batch transfer time of ``plan`` without latency, seconds.

    ``perf.transfer_times`` when the performance model provides it; otherwise ``2 b s h`` bytes
    over the fair share of the bottleneck directed link of the hop's route (the plan's own
    transfers added to ``link_busy``; intra-region bandwidth when both stages share a region).

    :param link_capacity_bps: current link capacities, each way (default: nominal).
    :param link_busy: other jobs' transfers sending at once per directed link (default: none;
        :attr:`sfenv.sim.SimView.link_load`'s first row).
    """
    given = getattr(perf, "transfer_times", None)
    if given:
        return [float(x) for x in given]
    cap = topo.link_bw_bps if link_capacity_bps is None else np.asarray(link_capacity_bps, dtype=float)
    busy = np.zeros(topo.num_directed) if link_busy is None else np.asarray(link_busy, dtype=float).copy()
    for e, n in plan_flows(plan, topo).items():
        busy[e] += n
    bits = ACT_BYTES * plan.micro_batch * job.model.seq_len * job.model.hidden * 8.0
    out = []
    for src, dst in zip(plan.stages, plan.stages[1:]):
        worst = 0.0
        for (a, b), _ in src.hop_pairs(dst).items():
            links = topo.directed_route(a, b, topo.route_links[a][b]) if a != b else ()
            bw = min((cap[e >> 1] / max(busy[e], 1.0) for e in links), default=float(topo.intra_bw_bps[a]))
            worst = max(worst, bits / bw)
        out.append(worst)
    return out


def stall_free(perf: PlanPerf, xfer: Sequence[float]) -> bool:
    """BACE-Pipe's rule: every hop's transfer time is at most its neighbouring stages' compute time."""
    c = perf.compute_times
    return all(x <= min(c[k], c[k + 1]) + 1e-12 for k, x in enumerate(xfer))


def _tp_options(view: SimView, job: JobSpec, chain: Sequence[int]) -> list[int]:
    per_server = min(view.topo.regions[r].gpus_per_server for r in chain)
    return [t for t in TP_OPTIONS if t <= per_server and job.model.heads % t == 0]


def _plan_stages(
    evaluate: Evaluate, job: JobSpec, topo: Topology, chain: Sequence[int], stages: Sequence[int], tp: int,
    schedule: str,
) -> tuple[Plan, PlanPerf] | None:
    """The plan with ``stages[i]`` stages of ``tp`` GPUs in ``chain[i]``; the least recomputation that fits."""
    if min(stages) < 1 or sum(stages) > job.model.layers:
        return None
    for recompute in RECOMPUTE_MODES:
        plan = chain_plan(job, topo, chain, stages, dp=1, tp=tp, schedule=schedule, recompute=recompute)
        if plan is None:
            return None
        perf = evaluate(plan, job)
        if perf.feasible:
            return plan, perf
    return None


def pp_plan(
    view: SimView,
    job: JobSpec,
    chain: list[int],
    gpus: list[int],
    schedule: str = "1f1b",
    exact: bool = False,
    evaluate: Evaluate | None = None,
    menu: PlanMenu | None = DEFAULT_MENU,
) -> tuple[Plan, PlanPerf] | None:
    """The fastest pipeline-only plan with at most ``gpus[i]`` GPUs in ``chain[i]``.

    For every tensor degree t (the model chooses it: lowest modelled iteration time), region i
    holds ``gpus[i] // t`` stages of t GPUs; recomputation only when the plain plan does not fit.
    Each tensor degree's plan is completed (:func:`sfenv.model.planning.complete_plan` with ``menu``;
    None: not completed) before they are compared.

    :param exact: only tensor degrees that divide every ``gpus[i]`` (the plan then uses exactly
        ``sum(gpus)`` GPUs).
    :param evaluate: the evaluator (default ``view.evaluate``: current link shares).
    :return: ``(plan, perf)`` or None when nothing fits.
    """
    ev = view.evaluate if evaluate is None else evaluate
    best: tuple[Plan, PlanPerf] | None = None
    for tp in _tp_options(view, job, chain):
        if exact and any(g % tp for g in gpus):
            continue
        res = _plan_stages(ev, job, view.topo, chain, [g // tp for g in gpus], tp, schedule)
        if res is not None and menu is not None:
            res = complete_plan(res[0], job, ev, menu, res[1])
        if res is not None and (best is None or res[1].iter_time < best[1].iter_time):
            best = res
    return best


def knee_point(points: Sequence[tuple[int, float]], threshold: float = KNEE_THRESHOLD) -> int:
    """The knee of a scaling curve: ``points`` are ``(gpus, iteration time)`` in increasing gpus.

    Starting at the first point, move to the smallest larger ``k'`` whose marginal throughput
    per added GPU, ``(1/T' - 1/T) / (k' - k)``, is at least ``threshold`` times the throughput
    per GPU at the current point, ``1/(T k)``; stop when no larger point passes.

    :raises ValueError: on an empty curve.
    """
    if not points:
        raise ValueError("knee_point needs at least one (gpus, time) point")
    k, t = points[0]
    while True:
        nxt = next(((k2, t2) for k2, t2 in points if k2 > k and (1 / t2 - 1 / t) / (k2 - k) >= threshold / (t * k)),
                   None)
        if nxt is None:
            return k
        k, t = nxt


def _reference_chain(topo: Topology) -> tuple[int, int | None]:
    """The ``K*`` probe's regions: the fastest region and its lowest-latency neighbour.

    Ties among the fastest go to the most GPUs, then the lowest index; the neighbour is None in a
    one-region world.
    """
    r = max(range(topo.num_regions), key=lambda i: (topo.gpu_flops[i], topo.regions[i].num_gpus, -i))
    others = [i for i in range(topo.num_regions) if i != r]
    if not others:
        return r, None
    n = min(others, key=lambda i: (topo.route_latency_s[r, i], -topo.route_bw_bps[r, i], i))
    return r, n


@dataclass(frozen=True)
class KStar:
    """A job's pipeline size and the reference plan it was measured on.

    :param k: ``K*``, GPUs.
    :param iter_time: modelled iteration time of the reference plan at ``K*``, s.
    :param stage_compute: shortest stage compute time per micro-batch of that plan, s.
    :param curve: ``(gpus, iteration time)`` of every feasible grid point.
    """

    k: int
    iter_time: float
    stage_compute: float
    curve: tuple[tuple[int, float], ...]


def k_star(
    view: SimView, job: JobSpec, cache: dict | None = None, threshold: float = KNEE_THRESHOLD,
    schedule: str = "1f1b",
) -> KStar | None:
    """``K*`` of ``job`` (see the module docstring): the knee of a pipeline across a WAN boundary.

    :param cache: a dict to memoise results in (key: job shape, topology, threshold).
    :return: None if no grid point fits in memory.
    """
    topo = view.topo
    # keyed by the topology's id; the entry holds the topology itself, so the id cannot be reused
    key = (job.model, job.global_batch, job.min_gpus, job.max_gpus, id(topo), threshold, schedule)
    if cache is not None and key in cache:
        return cache[key][1]
    r, n = _reference_chain(topo)

    def nominal(plan: Plan, j: JobSpec) -> PlanPerf:
        return evaluate_plan(plan, j, topo, view.params)

    top = min(job.max_gpus, topo.total_gpus)
    lo = max(job.min_gpus, min_stages(job, topo.regions[r].gpu.memory_bytes))
    curve: list[tuple[int, float, float]] = []
    for k in sorted({x for x in K_GRID if lo <= x <= top} | ({top} if top >= lo else set())):
        best: tuple[Plan, PlanPerf] | None = None
        for tp in _tp_options(view, job, [r] if n is None else [r, n]):
            stages = k // tp
            if k % tp or stages < 1:
                continue
            chain, split = ([r], [stages]) if stages == 1 or n is None else ([r, n], [stages - 1, 1])
            res = _plan_stages(nominal, job, topo, chain, split, tp, schedule)
            if res is not None and (best is None or res[1].iter_time < best[1].iter_time):
                best = res
        if best is not None:
            curve.append((k, best[1].iter_time, min(best[1].compute_times)))
    out = None
    if curve:
        kk = knee_point([(k, t) for k, t, _ in curve], threshold)
        _, t, c = next(p for p in curve if p[0] == kk)
        out = KStar(kk, t, c, tuple((k, t) for k, t, _ in curve))
    if cache is not None:
        cache[key] = (topo, out)
    return out


class BACEPipeAgent(SchedulerAgent):
    """BACE-Pipe (see the module docstring for what follows the source and what is ours).

    :param priority: use the dynamic priority (False: arrival order); ablation switch.
    :param pathfinder: stall-free, bandwidth-ordered paths (False: one path per start region,
        adding the region with the most free GPUs, no stall check); ablation switch.
    :param cost_min: fill stages by ascending price (False: by descending free capacity), and
        pick the cheapest path (False: the fastest); ablation switch.
    :param schedule: pipeline schedule of the plans (``"1f1b"`` as in the source).
    :param knee: ``K*`` knee threshold (see :func:`knee_point`).
    :param paths_per_start: most candidate paths examined per start region, job and decision.
    :param menu: the completion step's menu (None: plans are not completed; for comparisons).
    :param egress: count the egress of a path's plan in its cost (False: electricity only, as the
        summaries count cost).
    """

    name = "bace-pipe"

    def __init__(self, priority: bool = True, pathfinder: bool = True, cost_min: bool = True, schedule: str = "1f1b",
                 knee: float = KNEE_THRESHOLD, paths_per_start: int = 8, menu: PlanMenu | None = DEFAULT_MENU,
                 egress: bool = True):
        if paths_per_start < 1:
            raise ValueError(f"paths_per_start must be >= 1, got {paths_per_start}")
        self.priority = priority
        self.pathfinder = pathfinder
        self.cost_min = cost_min
        self.schedule = schedule
        self.knee = knee
        self.paths_per_start = paths_per_start
        self.menu = menu
        self.egress = egress
        self.evaluations = 0
        self._kstar: dict = {}

    def reset(self, seed: int | None = None) -> None:
        """Reset the evaluation counter."""
        self.evaluations = 0

    def kstar(self, view: SimView, job: JobSpec) -> KStar | None:
        """``K*`` of ``job`` (memoised)."""
        return k_star(view, job, self._kstar, self.knee, self.schedule)

    # ---------------------------------------------------------------- priority
    def _demand(self, view: SimView, job: JobSpec) -> tuple[float, float]:
        """(compute intensity, bandwidth demand in bytes/s) of ``job``."""
        ks = self.kstar(view, job)
        act = ACT_BYTES * job.model.seq_len * job.model.hidden
        return job.total_flops, (act / ks.stage_compute if ks is not None else 0.0)

    def congestion(self, view: SimView) -> float:
        """``a``: the share of WAN links carrying at least one flow."""
        flows = view.link_flows
        return float((flows > 0).mean()) if len(flows) else 0.0

    def priorities(self, view: SimView) -> dict[int, float]:
        """``P_j`` of every waiting job, by job id."""
        jobs = view.waiting
        dem = [self._demand(view, j) for j in jobs]
        imax = max((d[0] for d in dem), default=0.0) or 1.0
        dmax = max((d[1] for d in dem), default=0.0) or 1.0
        a = self.congestion(view)
        return {j.job_id: (1 - a) * (1 - i / imax) + a * (1 - d / dmax) for j, (i, d) in zip(jobs, dem)}

    def order(self, view: SimView) -> list[JobSpec]:
        """Jobs by descending dynamic priority (arrival order when ``priority=False``)."""
        jobs = view.waiting
        if not self.priority or len(jobs) < 2:
            return jobs
        prio = self.priorities(view)
        return sorted(jobs, key=lambda j: (-prio[j.job_id], j.job_id))

    # ---------------------------------------------------------------- paths
    def _share_bps(self, view: SimView, a: int, b: int) -> float:
        """Fair bandwidth share one more flow would get on the route a->b (:meth:`SimView.share_bps`)."""
        return view.share_bps(a, b)

    def _hop_ok(self, view: SimView, job: JobSpec, a: int, b: int, stage_compute: float) -> bool:
        """Stall-free hop: transfer time of one micro-batch a->b (no latency) <= stage compute."""
        bits = ACT_BYTES * job.model.seq_len * job.model.hidden * 8.0
        return bits / self._share_bps(view, a, b) <= stage_compute

    def find_paths(self, view: SimView, job: JobSpec, k: int, stage_compute: float) -> list[list[int]]:
        """Candidate region paths that hold ``k`` free GPUs (see the module docstring)."""
        free = view.free_gpus
        regions = [r for r in range(view.topo.num_regions) if free[r] > 0]
        paths: list[list[int]] = []
        if not self.pathfinder:  # ablation: one greedy path per start, by free GPUs, no stall check
            for start in sorted(regions, key=lambda r: (-free[r], r)):
                path, total = [start], int(free[start])
                rest = sorted((r for r in regions if r != start), key=lambda r: (-free[r], r))
                while total < k and rest:
                    path.append(rest.pop(0))
                    total += int(free[path[-1]])
                if total >= k:
                    paths.append(path)
            return paths

        def grow(path: list[int], total: int, found: list[list[int]]) -> None:
            if len(found) >= self.paths_per_start:
                return
            if total >= k:
                found.append(list(path))
                return
            tail = path[-1]
            nxt = [r for r in regions if r not in path and self._hop_ok(view, job, tail, r, stage_compute)]
            for r in sorted(nxt, key=lambda r: (-self._share_bps(view, tail, r), -free[r], r)):
                path.append(r)
                grow(path, total + int(free[r]), found)
                path.pop()

        for start in sorted(regions, key=lambda r: (-min(int(free[r]), k), r)):
            found: list[list[int]] = []
            grow([start], int(free[start]), found)
            paths.extend(found)
        return paths

    def allocate(self, view: SimView, path: list[int], stages: int, tp: int) -> list[int] | None:
        """Stages per path region: one each, then the rest by ascending price (or by free GPUs)."""
        free = view.free_gpus
        cap = [int(free[r]) // tp for r in path]
        if stages < len(path) or min(cap) < 1:
            return None
        alloc = [1] * len(path)
        left = stages - len(path)
        prices = view.prices_now()
        key = (lambda i: (prices[path[i]], i)) if self.cost_min else (lambda i: (-free[path[i]], i))
        for i in sorted(range(len(path)), key=key):
            take = min(left, cap[i] - alloc[i])
            alloc[i] += take
            left -= take
        return alloc if left == 0 else None

    def path_plan(self, view: SimView, job: JobSpec, path: list[int], k: int) -> tuple[Plan, PlanPerf] | None:
        """The fastest feasible, stall-free plan of exactly ``k`` GPUs on ``path`` (TP by the model), completed."""
        best: tuple[Plan, PlanPerf] | None = None
        for tp in _tp_options(view, job, path):
            if k % tp:
                continue
            alloc = self.allocate(view, path, k // tp, tp)
            if alloc is None:
                continue
            res = _plan_stages(view.evaluate, job, view.topo, path, alloc, tp, self.schedule)
            self.evaluations += 1
            if res is None or res[0].gpus != k:
                continue
            if not self._stall_free(view, job, res):
                continue
            if best is None or res[1].iter_time < best[1].iter_time:
                best = res
        if best is None or self.menu is None:
            return best

        def counted(plan: Plan, j: JobSpec) -> PlanPerf:
            self.evaluations += 1
            return view.evaluate(plan, j)

        done = complete_plan(best[0], job, counted, self.menu, best[1])
        return done if done is not None and self._stall_free(view, job, done) else best

    def _stall_free(self, view: SimView, job: JobSpec, res: tuple[Plan, PlanPerf]) -> bool:
        """The pathfinder's rule on a plan (always True in the ablation without the pathfinder)."""
        if not self.pathfinder:
            return True
        xfer = transfer_times(res[0], res[1], job, view.topo, view.link_capacity_bps, view.link_load[0])
        return stall_free(res[1], xfer)

    def job_cost_usd(self, view: SimView, job: JobSpec, perf: PlanPerf, plan: Plan | None = None) -> float:
        """Cost of the job's remaining iterations on a plan: electricity at today's prices, plus egress.

        :param plan: the plan ``perf`` is for; with it (and ``egress``), the egress the simulator bills
            for its bytes between regions is added.
        """
        prices = view.prices_now()  # USD/MWh
        left = max(0.0, job.iterations - view.waiting_progress(job.job_id))
        hours = perf.iter_time * left / 3600.0
        energy = sum(w * float(prices[r]) for r, w in perf.power_by_region.items()) / 1e6 * hours
        if plan is None or not self.egress:
            return energy
        return energy + view.plan_egress_usd_per_iter(plan, job) * left

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """Up to ``k`` plans on ``job``'s ``K*`` GPUs, cheapest path first (empty: the job waits)."""
        ks = self.kstar(view, job)
        if ks is None or int(view.free_gpus.sum()) < ks.k:
            return []
        scored = []
        for i, path in enumerate(self.find_paths(view, job, ks.k, ks.stage_compute)):
            res = self.path_plan(view, job, path, ks.k)
            if res is None:
                continue
            cost = self.job_cost_usd(view, job, res[1], res[0]) if self.cost_min else 0.0
            scored.append((cost, res[1].iter_time, i, res[0]))
        scored.sort(key=lambda x: x[:3])
        out: list[Plan] = []
        for *_, plan in scored:
            if plan not in out:
                out.append(plan)
        return out[:k]
