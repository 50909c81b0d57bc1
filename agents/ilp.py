"""ILP baseline: a PuLP MILP over job-to-region-chain placement, GPU counts and layer split.

SpiderFlow compares against "ILP-based" cross-cluster schedulers without naming them [paper]; the
research notes point to Alpa/CrossPipe-style formulations [inferred].  This MILP is our design in
that spirit: exact for its plan family, and its size grows with clusters x GPU options plus
clusters^2 ordering arcs, which is what makes such schedulers slow on large platforms.

Plan family (for each data-parallel degree d in ``dp_options``; t = 1, b = 1): an ordered chain of
regions; region r holds ``g_r / d`` consecutive pipeline stages (``g_r`` GPUs from a menu of
multiples of d) with ``l_r`` layers in total; stages are d-way data parallel inside the region.

Variables: ``x[r, g]`` (region r uses g GPUs), ``l[r, g]`` (its layers), ``s[r]`` (chain starts at
r), ``e[r, r']`` (r' follows r), MTZ order ``u[r]``, beat ``tau``.  With ``alpha_r`` the compute
time of one layer for one micro-batch on one GPU of r and ``a[r, r']`` the per-micro-batch hop
time under current link shares, it minimises the 1F1B iteration time of the chain

    (m - 1) tau + sum alpha_r l_r + 2 sum a[r, r'] e[r, r']

subject to ``tau >= alpha_r d l_r / g_r`` (stage compute), ``tau >= a[r, r'] e[r, r']`` (hops),
one menu entry per used region, ``sum l = L``, at least one layer per stage, weights and optimizer
state within each GPU's memory, GPUs within the job's bounds and free GPUs, and a single simple
path through the used regions.  Gradient all-reduce and activation memory are left to the full
performance model, which scores the solution (``recompute`` is tried if activations do not fit).
Solver: HiGHS via PuLP (CBC fallback), always under ``time_limit``; a run stopped by the limit
returns its incumbent with ``optimal=False``.  If no MILP yields an incumbent within the limit
(the full 64-region model, about 5k variables, needs about 2.5 s on one core), the agent falls back
to the first-fit plan of :class:`sfenv.agents.fifo.FIFOAgent` and counts it in ``fallbacks`` [our choice:
a production scheduler would not leave GPUs idle because its solver timed out].  Queue: arrival
order with backfilling.

Parameters
    time_limit: seconds per MILP.  dp_options: data-parallel degrees tried (one MILP each).
    max_regions: consider only the regions with the most free compute (None = all).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pulp
from sfenv.agents.base import SchedulerAgent
from sfenv.agents.fifo import FIFOAgent
from sfenv.agents.milp import new_var, solve

from sfenv.perf import Plan, PlanPerf, Stage
from sfenv.sim import SimView
from sfenv.workload import JobSpec

__all__ = ["ILPAgent", "ILPInstance", "solve_instance", "brute_force_instance", "build_instance"]

MENU = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


@dataclass
class ILPInstance:
    """Data of one MILP: regions (indices into the topology) and their coefficients."""

    regions: list[int]
    menus: list[list[int]]  # GPU options per region (multiples of d)
    alpha: list[float]  # s per layer per micro-batch on one GPU
    mem_layers: list[float]  # max layers per GPU by weight memory
    hop: np.ndarray  # per-micro-batch hop time between listed regions (s)
    layers: int
    m: int
    d: int
    min_gpus: int
    max_gpus: int
    stats: dict = field(default_factory=dict)


def objective(inst: ILPInstance, order: Sequence[int], gpus: Sequence[int], layers: Sequence[int]) -> float:
    """The MILP's objective for a chain (indices into ``inst.regions``)."""
    tau = max(inst.alpha[i] * inst.d * li / g for i, g, li in zip(order, gpus, layers))
    hops = [inst.hop[a, b] for a, b in zip(order, order[1:])]
    tau = max([tau, *hops])
    return (inst.m - 1) * tau + sum(inst.alpha[i] * li for i, li in zip(order, layers)) + 2 * sum(hops)


def solve_instance(inst: ILPInstance, time_limit: float = 2.0) -> tuple[list[tuple[int, int, int]], float, bool] | None:
    """Solve; returns ``([(region index, gpus, layers) in chain order], objective, proven optimal)``."""
    n = len(inst.regions)
    L = inst.layers
    prob = pulp.LpProblem("ilp_placement", pulp.LpMinimize)
    x, lv = {}, {}
    for i in range(n):
        for g in inst.menus[i]:
            x[i, g] = new_var(prob, f"x_{i}_{g}", cat="Binary")
            lv[i, g] = new_var(prob, f"l_{i}_{g}", lowBound=0, upBound=L, cat="Integer")
    s = {i: new_var(prob, f"s_{i}", cat="Binary") for i in range(n)}
    e = {(i, j): new_var(prob, f"e_{i}_{j}", cat="Binary") for i in range(n) for j in range(n) if i != j}
    u = {i: new_var(prob, f"u_{i}", lowBound=0, upBound=n) for i in range(n)}
    tau = new_var(prob, "tau", lowBound=0)
    y = {i: pulp.lpSum(x[i, g] for g in inst.menus[i]) for i in range(n)}
    prob += (inst.m - 1) * tau + pulp.lpSum(inst.alpha[i] * lv[i, g] for (i, g) in lv) + 2 * pulp.lpSum(
        inst.hop[i, j] * v for (i, j), v in e.items())
    for i in range(n):
        prob += y[i] <= 1
        prob += s[i] <= y[i]
        prob += pulp.lpSum(e[j, i] for j in range(n) if j != i) + s[i] == y[i]  # one predecessor or start
        prob += pulp.lpSum(e[i, j] for j in range(n) if j != i) <= y[i]
        for g in inst.menus[i]:
            prob += lv[i, g] <= L * x[i, g]
            prob += lv[i, g] >= (g // inst.d) * x[i, g]  # at least one layer per stage
            prob += lv[i, g] * inst.d <= inst.mem_layers[i] * g  # weights per GPU fit
            prob += tau >= inst.alpha[i] * inst.d / g * lv[i, g]
    prob += pulp.lpSum(s.values()) == 1
    prob += pulp.lpSum(e.values()) == pulp.lpSum(y.values()) - 1
    for (i, j), v in e.items():
        prob += v <= y[j]
        prob += tau >= inst.hop[i, j] * v
        prob += u[j] >= u[i] + 1 - (n + 1) * (1 - v)  # MTZ: no cycles
    prob += pulp.lpSum(lv.values()) == L
    gpus = pulp.lpSum(g * x[i, g] for (i, g) in x)
    prob += gpus >= inst.min_gpus
    prob += gpus <= inst.max_gpus
    res = solve(prob, time_limit)
    inst.stats["variables"] = len(prob.variables())
    inst.stats["constraints"] = prob.numConstraints()
    if not res.has_solution:
        return None
    used = {i: g for (i, g), v in x.items() if (v.value() or 0) > 0.5}
    if not used:
        return None
    start = next(i for i in range(n) if (s[i].value() or 0) > 0.5)
    order = [start]
    while True:
        nxt = [j for j in range(n) if j != order[-1] and (e[order[-1], j].value() or 0) > 0.5]
        if not nxt or nxt[0] in order:
            break
        order.append(nxt[0])
    if set(order) != set(used):
        return None
    chain = [(i, used[i], int(round(lv[i, used[i]].value() or 0))) for i in order]
    return chain, float(pulp.value(prob.objective)), res.optimal


def brute_force_instance(inst: ILPInstance) -> float | None:
    """Exhaustive optimum of the same problem (tiny instances only; for tests)."""
    n, L = len(inst.regions), inst.layers
    best = None
    for k in range(1, n + 1):
        for order in itertools.permutations(range(n), k):
            for gpus in itertools.product(*[inst.menus[i] for i in order]):
                if not inst.min_gpus <= sum(gpus) <= inst.max_gpus:
                    continue
                mins = [g // inst.d for g in gpus]
                for layers in itertools.product(*[range(mn, L + 1) for mn in mins]):
                    if sum(layers) != L:
                        continue
                    if any(li * inst.d > inst.mem_layers[i] * g for i, g, li in zip(order, gpus, layers)):
                        continue
                    obj = objective(inst, order, gpus, layers)
                    if best is None or obj < best:
                        best = obj
    return best


def build_instance(view: SimView, job: JobSpec, d: int, max_regions: int | None = None) -> ILPInstance | None:
    """The MILP data for ``job`` with data-parallel degree ``d`` in the current state."""
    topo = view.topo
    free = view.free_gpus
    regs = [r for r in range(topo.num_regions) if free[r] >= d]
    regs.sort(key=lambda r: (-free[r] * topo.gpu_flops[r], r))
    if max_regions is not None:
        regs = regs[:max_regions]
    if not regs:
        return None
    model = job.model
    b, s = 1, model.seq_len
    headroom = view.params.memory_headroom
    menus = [[g for g in MENU if g % d == 0 and g <= min(int(free[r]), job.max_gpus) and g // d <= model.layers]
             for r in regs]
    alpha = [6.0 * model.layer_params * b * s / (topo.gpu_flops[r] * view.params.mfu) for r in regs]
    mem_layers = [topo.gpu_memory[r] * headroom / (16.0 * model.layer_params) for r in regs]
    act_bits = 2.0 * b * s * model.hidden * 8.0
    cap, flows = view.link_capacity_bps, view.link_flows
    n = len(regs)
    hop = np.zeros((n, n))
    for i, a in enumerate(regs):
        for j, c in enumerate(regs):
            if i != j:
                share = min(cap[k] / (flows[k] + d) for k in topo.route(a, c))
                hop[i, j] = topo.route_latency_s[a, c] + act_bits / share
    m = max(1, math.ceil(job.global_batch / (d * b)))
    return ILPInstance(regs, menus, alpha, mem_layers, hop, model.layers, m, d, job.min_gpus, job.max_gpus)


class ILPAgent(SchedulerAgent):
    """The ILP baseline (see the module docstring)."""

    name = "ilp"

    def __init__(self, time_limit: float = 2.0, dp_options: tuple[int, ...] = (1, 2, 4, 8),
                 max_regions: int | None = None):
        self.time_limit = time_limit
        self.dp_options = dp_options
        self.max_regions = max_regions
        self.evaluations = 0
        self.solves = 0
        self.proven_optimal = 0
        self.fallbacks = 0
        self.last_stats: dict = {}

    def reset(self, seed: int | None = None) -> None:
        """Reset the counters."""
        self.evaluations = self.solves = self.proven_optimal = self.fallbacks = 0

    def plan(self, view: SimView, job: JobSpec) -> tuple[Plan, PlanPerf, bool] | None:
        """The best plan over ``dp_options`` and whether every MILP behind it was proven optimal."""
        best = None
        all_optimal = True
        for d in self.dp_options:
            inst = build_instance(view, job, d, self.max_regions)
            if inst is None or not any(inst.menus):
                continue
            sol = solve_instance(inst, self.time_limit)
            self.solves += 1
            self.last_stats = inst.stats
            if sol is None:
                continue
            chain, _, optimal = sol
            all_optimal &= optimal
            self.proven_optimal += int(optimal)
            stages: list[Stage] = []
            for i, g, layers in chain:
                n = g // d
                if n < 1 or layers < n:
                    break
                base, extra = divmod(layers, n)
                stages.extend(Stage.at(inst.regions[i], base + (1 if k < extra else 0), dp=d) for k in range(n))
            else:
                for recompute in (False, True):
                    plan = Plan(job.job_id, tuple(stages), recompute=recompute)
                    perf = view.evaluate(plan, job)
                    self.evaluations += 1
                    if perf.feasible:
                        if best is None or perf.iter_time < best[1].iter_time:
                            best = (plan, perf)
                        break
        return None if best is None else (best[0], best[1], all_optimal)

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The MILP's plan for ``job`` now, if any."""
        if int(view.free_gpus.sum()) < job.min_gpus:
            return []
        res = self.plan(view, job)
        if res is not None:
            return [res[0]]
        fallback = FIFOAgent().propose(view, job)
        self.fallbacks += int(bool(fallback))
        return fallback
