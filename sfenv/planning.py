"""Plan construction helpers shared by the environment's proposers and the agents.

:func:`fit_plan` turns an ordered chain of regions with a GPU budget in each into the best plan
of a simple, standard shape: pipeline stages follow the chain, every stage keeps its ``d``
data-parallel replicas and ``t``-way tensor parallelism inside its region (so only pipeline
boundaries cross the WAN, the placement rule DT-FM and BACE-Pipe agree on), and layers are split
in proportion to each stage's compute speed.  It enumerates ``(t, d)`` and the stage count per
region and keeps the feasible plan with the shortest modelled iteration time; on a chain that crosses
regions it then widens the pipeline's in-flight window (``Plan.extra_inflight``) while that shortens
the modelled iteration and fits in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from sfenv.compute import RECOMPUTE_MODES
from sfenv.perf import Plan, PlanPerf, Stage, compute_lower_bound, stage_layer_split
from sfenv.topology import Topology
from sfenv.workload import JobSpec, ModelSpec

__all__ = ["fit_plan", "chain_plan", "Evaluator"]

Evaluator = Callable[[Plan, JobSpec], PlanPerf]

TP_DEGREES = (1, 2, 4, 8)
DP_DEGREES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)


@lru_cache(maxsize=1 << 14)
def _layer_split(layers: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    return tuple(stage_layer_split(layers, weights))


def _head_layers(job: JobSpec) -> int:
    """The LM head's compute in transformer-layer equivalents (0 without a vocabulary)."""
    return _head_layers_of(job.model)


@lru_cache(maxsize=256)
def _head_layers_of(model: ModelSpec) -> int:
    return int(round(model.embedding_params / model.layer_params)) if model.embedding_params else 0


@lru_cache(maxsize=1 << 14)
def _head_aware_split(layers: int, head: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    if len(weights) == 1 or head == 0:
        return _layer_split(layers, weights)
    parts = list(_layer_split(layers + head, weights))
    take = min(head, parts[-1] - 1)
    parts[-1] -= take
    rest = head - take  # a head heavier than the last stage's share: trim the largest others
    while rest > 0:
        i = max(range(len(parts) - 1), key=lambda j: (parts[j], -j))
        if parts[i] <= 1:
            break
        parts[i] -= 1
        rest -= 1
    # hand back any layers the trimming could not place (only when every stage is down to 1)
    parts[0] += layers - sum(parts)
    return tuple(parts)


def chain_plan(
    job: JobSpec,
    topo: Topology,
    chain: Sequence[int],
    stages_per_region: Sequence[int],
    dp: int,
    tp: int,
    schedule: str = "1f1b",
    micro_batch: int = 1,
    recompute: str | bool = "none",
) -> Plan | None:
    """A plan with ``stages_per_region[i]`` stages in region ``chain[i]``, all with ``dp`` x ``tp``.

    Layers are split in proportion to each stage's GPU speed, counting the LM head on the last
    stage as the layers its compute equals (``V h / 12 h^2``, rounded): the last stage gets that
    many fewer layers (at least one).  Returns None if the chain holds more stages than the model
    has layers.
    """
    regions: list[int] = []
    for r, n in zip(chain, stages_per_region):
        regions.extend([r] * n)
    if not regions or len(regions) > job.model.layers:
        return None
    flops = topo.scalars.flops
    split = _head_aware_split(job.model.layers, _head_layers(job), tuple([flops[r] for r in regions]))
    stages = tuple([Stage.at(r, layers, dp, tp) for r, layers in zip(regions, split)])
    return Plan(job.job_id, stages, micro_batch=micro_batch, schedule=schedule, recompute=recompute)


def fit_plan(
    job: JobSpec,
    topo: Topology,
    chain: Sequence[int],
    budget: Sequence[int],
    evaluate: Evaluator,
    schedule: str = "1f1b",
    micro_batch: int = 1,
    max_evals: int = 48,
    max_depth: int = 16,
) -> tuple[Plan, PlanPerf] | None:
    """Best feasible plan on ``chain`` using at most ``budget[i]`` GPUs in region ``chain[i]``.

    Candidates: every tensor degree t (within a server, dividing the heads) and data-parallel
    degree d such that each region gets at least one stage; a region then holds
    ``budget // (d t)`` stages (capped so the whole pipeline has at most ``min(L, max_depth)``
    stages and the job at most ``max_gpus`` GPUs).  Combinations whose weights and optimizer state
    alone cannot fit (``16 P / (p t)`` over the smallest GPU memory) are skipped without
    evaluation.  Recomputation modes are tried in order of compute cost (none, selective, full):
    a plan gets the cheapest one that fits.  For each t the scan
    over d stops once the iteration time rises (a heuristic: it is close to unimodal in d).
    Returns ``(plan, perf)`` with the lowest iteration time, or None when nothing fits.
    """
    if not chain or len(chain) != len(budget) or min(budget) < 1:
        return None
    heads = job.model.heads
    max_tp = min(topo.regions[r].gpus_per_server for r in chain)
    best: tuple[Plan, PlanPerf] | None = None
    evals = 0
    min_mem = min(topo.scalars.memory[r] for r in chain)
    state_bytes = 16.0 * job.model.params
    for tp in TP_DEGREES:
        if tp > max_tp or heads % tp:
            continue
        prev_time = None
        for dp in DP_DEGREES:
            unit = dp * tp
            if unit > min(budget):
                break
            per_region = [g // unit for g in budget]
            total = sum(per_region)
            # cap pipeline depth by layers and GPUs by the job's maximum, trimming from the end
            cap_stages = min(job.model.layers, max_depth, job.max_gpus // unit)
            if cap_stages < len(chain):
                continue
            while total > cap_stages:
                i = max(range(len(per_region)), key=lambda j: (per_region[j], j))
                per_region[i] -= 1
                total -= 1
            if total * unit < job.min_gpus:
                continue
            if state_bytes / (total * tp) > min_mem:  # cannot fit even without activations
                continue
            perf = None
            for recompute in RECOMPUTE_MODES:
                plan = chain_plan(job, topo, chain, per_region, dp, tp, schedule, micro_batch, recompute)
                if plan is None:
                    break
                if best is not None and compute_lower_bound(plan, job, topo) >= best[1].iter_time:
                    break  # cannot beat the best (more recomputation only costs more): skip unevaluated
                perf = evaluate(plan, job)
                evals += 1
                if perf.feasible:
                    if best is None or (perf.iter_time, plan.gpus) < (best[1].iter_time, best[0].gpus):
                        best = (plan, perf)
                    break
            if perf is not None and perf.feasible:
                # iteration time is close to unimodal in d for fixed t: stop once it rises
                if prev_time is not None and perf.iter_time > prev_time:
                    break
                prev_time = perf.iter_time
            if evals >= max_evals:
                return _widen_window(best, job, evaluate)
    return _widen_window(best, job, evaluate)


def _widen_window(
    best: tuple[Plan, PlanPerf] | None, job: JobSpec, evaluate: Evaluator
) -> tuple[Plan, PlanPerf] | None:
    """Widen a cross-region 1F1B/zero-bubble plan's in-flight window if that shortens its iteration.

    The in-flight window is a plan choice (:mod:`sfenv.pipeline`): it hides WAN round trips at the
    price of activation memory.  The extra micro-batches per WAN hop are computed, not searched:
    the smallest ``e`` with which no window cycle is slower than the plan's slowest stage or
    channel (:func:`window_to_hide_round_trips`); if that does not fit in memory, half of it.
    """
    if best is None or len(best[0].regions) < 2 or best[0].schedule == "gpipe":
        return best
    plan, perf = best
    need = window_to_hide_round_trips(plan, perf)
    for extra in (need, need // 2):
        if extra <= plan.extra_inflight:
            break
        cand = replace(plan, extra_inflight=extra)
        cp = evaluate(cand, job)
        if cp.feasible:
            if cp.iter_time < perf.iter_time * (1.0 - 1e-9):
                return cand, cp
            break
    return plan, perf


def window_to_hide_round_trips(plan: Plan, perf: PlanPerf, cap: int = 64) -> int:
    """Extra in-flight micro-batches per WAN hop after which no 1F1B window cycle binds.

    A cycle from stage k to stage j carries ``(j - k + 1) + e H`` micro-batches (H: WAN hops
    between them) and takes ``R_kj`` (compute and hops both ways), so it stops binding once
    ``R_kj / tokens <= max(c, x)``.  Returns the largest such ``e`` over all cycles (at most ``cap``).
    """
    c, lat, x = perf.compute_times, perf.latency_times, perf.transfer_times
    p = len(c)
    rho = max(max(c), max(x) if x else 0.0)
    stages = plan.stages
    cross = [any(a != b for a, b in stages[k].hop_pairs(stages[k + 1])) for k in range(p - 1)]
    need = 0
    for k in range(p - 1):
        rt, wan = c[k], 0
        for j in range(k + 1, p):
            rt += c[j] + 2.0 * (lat[j - 1] + x[j - 1])
            wan += 1 if cross[j - 1] else 0
            if wan:
                need = max(need, math.ceil((rt / rho - (j - k + 1)) / wan - 1e-9))
    return int(min(max(need, 0), cap))
