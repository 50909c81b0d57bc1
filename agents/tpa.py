"""TPA (SpiderFlow, ACL 2026): two-level automated parallelisation.

Source: only SpiderFlow's abstract is public [paper]: TPA handles automated model parallelisation
with a heuristic across clusters and an ILP inside each cluster, which shrinks the search space
while keeping throughput high.

Follows the source
    - [paper] Level 1, across clusters: a heuristic.  Level 2, inside each cluster: an ILP
      (ours is solved exactly by enumeration by default, see below; the MILP form is kept).

Our design (the abstract gives no detail)
    - Level 1: the chain's clusters get consecutive blocks of layers in proportion to their
      compute (free GPUs used x peak FLOP/s), then the split is rebalanced: while a cluster
      boundary's transfer time exceeds the compute of the smaller neighbouring block's stages,
      one layer moves from the faster to the slower side (at most L moves).
    - Level 2: for each global data-parallel degree ``d`` and micro-batch size ``b`` (our Plan
      model shares both across stages; ``m = ceil(B / (d b))`` micro-batches), every cluster
      picks one option ``(t, p_c)`` (tensor degree within a server, local pipeline depth) from an
      enumerated set, with ``d t p_c`` GPUs within its budget and options over the memory limit
      excluded, minimising the 1F1B time of the compute
      ``(m - 1) max_c tau_c + sum_c p_c tau_c`` (``tau_c`` the option's stage time) plus
      ``1e-6`` s per GPU.  The second term is the pipeline-depth term: the fill grows with the
      number of stages, so at equal beat fewer stages (more tensor parallelism) win instead of
      an arbitrary tie.  Once the beat is fixed the problem separates by cluster, so it is
      solved exactly by enumeration (:func:`level2_enumerate`): for each candidate beat (an
      option's stage time) every cluster takes its cheapest option under that beat (a prefix
      minimum over its options sorted by stage time); ``O(N log N)`` for N options, no solver.
      The same problem as a PuLP MILP (:func:`intra_cluster_ilp`, HiGHS) and a brute force
      (:func:`brute_force`) are kept for the exactness tests.  The ``(d, b)`` whose plan has
      the lowest modelled iteration time (full performance model) wins.
      [Earlier versions solved one MILP per ``(d, b)``: about 30 HiGHS calls and ~97 % of
      SpiderFlow's decision time for the same optimum.]
    - Completion: the winning plan goes through the shared completion step
      (:func:`sfenv.model.planning.complete_plan`): TPA's stages stay, the micro-batch size,
      recomputation and the in-flight window per WAN hop are chosen by the full model, as for every
      agent (the abstract says nothing that fixes them).  [Before, TPA's plans kept the 1F1B
      window while ``fit_plan``'s plans widened it: a median 1.29x handicap on spider-8's WAN chains.]
    - TPA alone (``tpa``) plans on a simple chain: the first cluster, in index order, that holds
      the job, else clusters in index order (like FIFO's first fit); SpiderFlow uses SpinSearch's
      chain (:mod:`sfenv.agents.spiderflow`).

Parameters
    time_limit: seconds per MILP solve (only with ``solver="milp"``).  solver: ``"enumerate"``
    (default) or ``"milp"`` (same optimum, for comparison).  dp_options, micro_batches,
    tp_options: the option grid.  schedule: pipeline schedule.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pulp
from sfenv.agents.base import SchedulerAgent, index_order_chain
from sfenv.agents.milp import new_var, solve

from sfenv.model.compute import activation_bytes
from sfenv.model.perf import Plan, PlanPerf, Stage
from sfenv.model.planning import DEFAULT_MENU, PlanMenu, complete_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "MICRO_BATCHES",
    "ClusterOption",
    "TPAAgent",
    "brute_force",
    "intra_cluster_ilp",
    "level1_split",
    "level2_enumerate",
    "level2_objective",
    "tpa_plan",
]


@dataclass(frozen=True)
class ClusterOption:
    """One level-2 choice for a cluster: tensor degree, local pipeline depth, GPUs, stage time (s)."""

    tp: int
    stages: int
    gpus: int
    stage_time: float


GPU_PENALTY = 1e-6  # s per GPU: at equal modelled time, fewer GPUs
MICRO_BATCHES = (1, 2, 4)  # micro-batch sizes TPA tries (the ILP baseline offers the same)


def level2_objective(options: Sequence[Sequence[ClusterOption]], chosen: Sequence[int], microbatches: int = 1,
                     gpu_penalty: float = GPU_PENALTY) -> float:
    """Level-2 objective of one option per cluster: ``(m-1) max tau + sum p tau + gpu_penalty x GPUs``."""
    opts = [options[c][o] for c, o in enumerate(chosen)]
    beat = max(o.stage_time for o in opts)
    return ((microbatches - 1) * beat + sum(o.stages * o.stage_time for o in opts)
            + gpu_penalty * sum(o.gpus for o in opts))


def level2_enumerate(
    options: Sequence[Sequence[ClusterOption]], budgets: Sequence[int], microbatches: int = 1,
    gpu_penalty: float = GPU_PENALTY, stats: dict | None = None,
) -> tuple[list[int], float] | None:
    """Exact level-2 optimum by enumerating the beat (no solver).

    Once the beat ``z`` is fixed, the objective separates by cluster: each cluster takes, among
    its options with stage time at most ``z``, the one with the least ``p tau + gpu_penalty x
    GPUs``.  The optimum's beat is one of the options' stage times, so scanning those (each
    cluster's best is a prefix minimum over its options sorted by stage time) finds it.  Ties go
    to the lower option index.  ``stats["level2_beats"]`` counts the beats scanned.

    :param options: per cluster, its options.
    :param budgets: per cluster, its GPU budget.
    :param microbatches: m, micro-batches per iteration.
    :return: ``(chosen option index per cluster, objective)`` or None if some cluster has no option.
    """
    per_cluster: list[tuple[list[float], list[tuple[float, int]]]] = []
    floor = 0.0
    for c, opts in enumerate(options):
        idx = [o for _, o in sorted((opts[o].stage_time, o) for o in range(len(opts)) if opts[o].gpus <= budgets[c])]
        if not idx:
            return None
        times, prefix = [], []
        best: tuple[float, int] | None = None
        for o in idx:
            opt = opts[o]
            key = (opt.stages * opt.stage_time + gpu_penalty * opt.gpus, o)
            if best is None or key < best:
                best = key
            times.append(opt.stage_time)
            prefix.append(best)
        per_cluster.append((times, prefix))
        floor = max(floor, times[0])
    beats = sorted({t for times, _ in per_cluster for t in times if t >= floor})
    result: tuple[list[int], float] | None = None
    for z in beats:
        chosen = [prefix[bisect.bisect_right(times, z) - 1][1] for times, prefix in per_cluster]
        obj = level2_objective(options, chosen, microbatches, gpu_penalty)
        if result is None or obj < result[1]:
            result = (chosen, obj)
    if stats is not None:
        stats["level2_beats"] = stats.get("level2_beats", 0) + len(beats)
    return result


def intra_cluster_ilp(
    options: Sequence[Sequence[ClusterOption]], budgets: Sequence[int], time_limit: float = 2.0,
    gpu_penalty: float = GPU_PENALTY, microbatches: int = 1,
) -> tuple[list[int], float, bool] | None:
    """The level-2 problem as a PuLP MILP (HiGHS): same objective as :func:`level2_enumerate`.

    Binary ``x[c, o]`` (one option per cluster), beat ``z >= tau(c, o) x[c, o]`` summed over o,
    option GPUs within the cluster's budget.  Kept to test the enumeration against.

    :return: ``(chosen option index per cluster, objective, proven optimal)`` or None if infeasible.
    """
    prob = pulp.LpProblem("tpa_level2", pulp.LpMinimize)
    z = new_var(prob, "beat", lowBound=0)
    x = {(c, o): new_var(prob, f"x_{c}_{o}", cat="Binary") for c, opts in enumerate(options)
         for o in range(len(opts))}
    prob += (microbatches - 1) * z + pulp.lpSum(
        (options[c][o].stages * options[c][o].stage_time + gpu_penalty * options[c][o].gpus) * v
        for (c, o), v in x.items())
    for c, opts in enumerate(options):
        if not opts:
            return None
        prob += pulp.lpSum(x[c, o] for o in range(len(opts))) == 1
        prob += pulp.lpSum(opts[o].gpus * x[c, o] for o in range(len(opts))) <= budgets[c]
        prob += z >= pulp.lpSum(opts[o].stage_time * x[c, o] for o in range(len(opts)))
    res = solve(prob, time_limit)
    if not res.has_solution:
        return None
    chosen = [max(range(len(opts)), key=lambda o: x[c, o].value() or 0.0) for c, opts in enumerate(options)]
    return chosen, float(pulp.value(prob.objective)), res.optimal


def brute_force(
    options: Sequence[Sequence[ClusterOption]], budgets: Sequence[int], gpu_penalty: float = GPU_PENALTY,
    microbatches: int = 1,
) -> tuple[list[int], float] | None:
    """Exhaustive search over the same option set (for tests)."""
    best = None
    for combo in itertools.product(*[range(len(o)) for o in options]):
        if any(options[c][o].gpus > budgets[c] for c, o in enumerate(combo)):
            continue
        obj = level2_objective(options, combo, microbatches, gpu_penalty)
        if best is None or obj < best[1] - 1e-12:
            best = (list(combo), obj)
    return best


def level1_split(view: SimView, job: JobSpec, chain: Sequence[int], budget: Sequence[int]) -> list[int]:
    """Layers per cluster: proportional to compute, then rebalanced away from stalling boundaries."""
    topo = view.topo
    w = [budget[i] * topo.gpu_flops[r] for i, r in enumerate(chain)]
    L = job.model.layers
    raw = [L * x / sum(w) for x in w]
    layers = [max(1, math.floor(v)) for v in raw]
    while sum(layers) > L:
        i = max(range(len(layers)), key=lambda j: layers[j] - raw[j])
        layers[i] -= 1
    while sum(layers) < L:
        i = max(range(len(layers)), key=lambda j: raw[j] - layers[j])
        layers[i] += 1
    act_bits = 2.0 * job.model.seq_len * job.model.hidden * 8.0
    per_layer = 6.0 * job.model.layer_params * job.model.seq_len / view.params.mfu
    for _ in range(L):
        moved = False
        for i in range(len(chain) - 1):
            a, b = chain[i], chain[i + 1]
            hop = topo.route_latency_s[a, b] + act_bits / max(topo.route_bw_bps[a, b], 1.0)
            ca = per_layer * layers[i] / (budget[i] * topo.gpu_flops[a])
            cb = per_layer * layers[i + 1] / (budget[i + 1] * topo.gpu_flops[b])
            if hop > min(ca, cb):
                # give the smaller block one more layer so its stages outlast the transfer
                src, dst = (i + 1, i) if ca < cb else (i, i + 1)
                if layers[src] > 1:
                    layers[src] -= 1
                    layers[dst] += 1
                    moved = True
        if not moved:
            break
    return layers


def _options(view: SimView, job: JobSpec, region: int, layers: int, budget: int, d: int, b: int,
             p_total_guess: int, tp_options: Sequence[int]) -> list[ClusterOption]:
    topo = view.topo
    reg = topo.regions[region]
    mem = reg.gpu.memory_bytes * view.params.memory_headroom
    out = []
    model = job.model
    for t in tp_options:
        if t > reg.gpus_per_server or model.heads % t:
            continue
        for p in range(1, layers + 1):
            gpus = d * t * p
            if gpus > budget:
                break
            lps = math.ceil(layers / p)
            weights = 16.0 * model.layer_params * lps / t
            # screening estimate: Korthikanti's selective-recompute + SP figure, 34 s b h / t per layer
            act = activation_bytes(model.seq_len, b, model.hidden, model.heads, t, "selective", True) * lps * min(
                p_total_guess, 8)
            if weights + act > mem:
                continue
            stage_time = 6.0 * model.layer_params * lps * b * model.seq_len / (t * reg.gpu.flops * view.params.mfu)
            out.append(ClusterOption(t, p, gpus, stage_time))
    return out


def tpa_plan(
    view: SimView, job: JobSpec, chain: Sequence[int], budget: Sequence[int], time_limit: float = 2.0,
    dp_options: Sequence[int] = (1, 2, 4, 8, 16), micro_batches: Sequence[int] = MICRO_BATCHES,
    tp_options: Sequence[int] = (1, 2, 4, 8), schedule: str = "1f1b", stats: dict | None = None,
    solver: str = "enumerate", menu: PlanMenu | None = DEFAULT_MENU,
) -> tuple[Plan, PlanPerf] | None:
    """TPA's plan for ``job`` on ``chain`` with at most ``budget[i]`` GPUs in cluster ``chain[i]``.

    :param solver: ``"enumerate"`` (exact, no solver) or ``"milp"`` (PuLP/HiGHS, same optimum).
    :param stats: if given, counts ``level2`` problems, ``milp_solves``, ``level2_beats``,
        full-model ``evaluations`` of the search and ``completion_evaluations`` of the completion
        step; ``optimal`` stays True while every level-2 optimum is proven.
    :param menu: the completion step's menu (:func:`sfenv.model.planning.complete_plan`); None returns
        TPA's own plan uncompleted (for comparisons).
    :return: ``(plan, perf)`` with the lowest modelled iteration time, or None.
    """
    if solver not in ("enumerate", "milp"):
        raise ValueError(f"solver must be 'enumerate' or 'milp', not {solver!r}")
    layers = level1_split(view, job, chain, budget)
    best: tuple[Plan, PlanPerf] | None = None
    for d in dp_options:
        if d > min(budget):
            break
        for b in micro_batches:
            if d * b > job.global_batch:
                continue
            opts = [_options(view, job, r, layers[i], budget[i], d, b, len(chain), tp_options)
                    for i, r in enumerate(chain)]
            if any(not o for o in opts):
                continue
            m = max(1, math.ceil(job.global_batch / (d * b)))
            chosen = _solve_level2(opts, budget, m, solver, time_limit, stats)
            if chosen is None:
                continue
            stages: list[Stage] = []
            for i, (r, o) in enumerate(zip(chain, chosen)):
                opt = opts[i][o]
                n = min(opt.stages, layers[i])
                base, extra = divmod(layers[i], n)
                stages.extend(Stage.at(r, base + (1 if s < extra else 0), dp=d, tp=opt.tp) for s in range(n))
            plan = Plan(job.job_id, tuple(stages), micro_batch=b, schedule=schedule)
            if not job.min_gpus <= plan.gpus <= job.max_gpus:
                continue
            perf = view.evaluate(plan, job)
            if stats is not None:
                stats["evaluations"] = stats.get("evaluations", 0) + 1
            if not perf.feasible:
                plan = Plan(job.job_id, tuple(stages), micro_batch=b, schedule=schedule, recompute="full")
                perf = view.evaluate(plan, job)
                if stats is not None:
                    stats["evaluations"] += 1
            if perf.feasible and (best is None or perf.iter_time < best[1].iter_time):
                best = (plan, perf)
    return best if best is None or menu is None else _complete(view, job, best, menu, stats)


def _solve_level2(opts: list[list[ClusterOption]], budget: Sequence[int], m: int, solver: str, time_limit: float,
                  stats: dict | None) -> list[int] | None:
    """One level-2 problem by ``solver``: the chosen option per cluster, or None; counted in ``stats``."""
    if stats is not None:
        stats["level2"] = stats.get("level2", 0) + 1
    if solver == "milp":
        sol = intra_cluster_ilp(opts, budget, time_limit, microbatches=m)
        if stats is not None:
            stats["milp_solves"] = stats.get("milp_solves", 0) + 1
            stats["optimal"] = stats.get("optimal", True) and bool(sol and sol[2])
        return None if sol is None else sol[0]
    sol2 = level2_enumerate(opts, budget, m, stats=stats)
    if stats is not None:
        stats.setdefault("optimal", True)
    return None if sol2 is None else sol2[0]


def _complete(view: SimView, job: JobSpec, best: tuple[Plan, PlanPerf], menu: PlanMenu,
              stats: dict | None) -> tuple[Plan, PlanPerf] | None:
    """TPA's plan through the shared completion step, its evaluations counted in ``stats``."""

    def counted(plan: Plan, j: JobSpec) -> PlanPerf:
        if stats is not None:
            stats["completion_evaluations"] = stats.get("completion_evaluations", 0) + 1
        return view.evaluate(plan, j)

    return complete_plan(best[0], job, counted, menu, best[1])


class TPAAgent(SchedulerAgent):
    """TPA on a first-fit chain (see the module docstring)."""

    name = "tpa"

    def __init__(self, time_limit: float = 2.0, schedule: str = "1f1b", solver: str = "enumerate"):
        self.time_limit = time_limit
        self.schedule = schedule
        self.solver = solver
        self.stats: dict = {}
        self.evaluations = 0

    def reset(self, seed: int | None = None) -> None:
        """Reset the counters."""
        self.stats = {}
        self.evaluations = 0

    def chain_for(self, view: SimView, job: JobSpec) -> tuple[list[int], list[int]] | None:
        """First region that holds the job, else regions in index order (first fit)."""
        free = view.free_gpus
        for r in range(view.topo.num_regions):
            if free[r] >= job.min_gpus:
                return [r], [min(int(free[r]), job.max_gpus)]
        return index_order_chain(free, job)

    def plan_on(self, view: SimView, job: JobSpec, chain: list[int], budget: list[int]) -> Plan | None:
        """TPA's plan on a given chain."""
        res = tpa_plan(view, job, chain, budget, self.time_limit, schedule=self.schedule, stats=self.stats,
                       solver=self.solver)
        self.evaluations = self.stats.get("evaluations", 0) + self.stats.get("completion_evaluations", 0)
        return None if res is None else res[0]

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """TPA's plan for ``job`` on the first-fit chain."""
        cb = self.chain_for(view, job)
        if cb is None:
            return []
        plan = self.plan_on(view, job, *cb)
        return [] if plan is None else [plan]
