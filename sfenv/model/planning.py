"""Plan construction helpers shared by the environment's proposers and the agents.

:func:`fit_plan` turns an ordered chain of regions with a GPU budget in each into the best plan
of a simple, standard shape: pipeline stages follow the chain, every stage keeps its ``d``
data-parallel replicas and ``t``-way tensor parallelism inside its region (so only pipeline
boundaries cross the WAN, as in BACE-Pipe's pipeline-only plans; DT-FM's own world-wide runs did
the opposite, each pipeline inside a city and each stage's replicas spread over the cities, see
``tests/test_dtfm_slowdown.py``: our shape is a choice, not DT-FM's rule), and layers are split
in proportion to each stage's compute speed.  It enumerates ``(t, d)`` and the stage count per
region and keeps the feasible plan with the shortest modelled iteration time, then hands it to
:func:`complete_plan`.

:func:`complete_plan` is the one completion step every agent's final plan goes through (the
agents' own docstrings name any exception and its source): with the stages fixed (regions, GPUs,
tensor and data-parallel degrees, layer split: the agent's decisions), it picks the *knobs* of
:class:`PlanMenu`: micro-batch size, recomputation, schedule (among those the agent allows) and
the in-flight window per WAN hop, by modelled iteration time under the memory limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from sfenv.hashing import HashedKey
from sfenv.model.compute import RECOMPUTE_MODES
from sfenv.model.perf import Plan, PlanPerf, Stage, compute_lower_bound, stage_layer_split
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec, ModelSpec

__all__ = [
    "DEFAULT_MENU",
    "MICRO_BATCHES",
    "RECOMPUTE_MODES",
    "Evaluator",
    "PlanMenu",
    "chain_plan",
    "complete_plan",
    "fit_plan",
    "window_to_hide_round_trips",
]

Evaluator = Callable[[Plan, JobSpec], PlanPerf]

TP_DEGREES = (1, 2, 4, 8)
DP_DEGREES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)
#: micro-batch sizes of the shared plan menu (sequences per micro-batch)
MICRO_BATCHES = (1, 2, 4, 8)
#: wider windows probed past the round-trip window while they still shorten the iteration
MAX_WINDOW_PROBES = 8
#: the recomputation modes of the shared plan menu are :data:`sfenv.model.compute.RECOMPUTE_MODES`, least
#: recomputation (most memory) first: none, selective (Korthikanti et al.), full


@dataclass(frozen=True)
class PlanMenu:
    """The knobs :func:`complete_plan` may set on a plan whose stages are fixed.

    :param micro_batches: micro-batch sizes tried.
    :param recompute_modes: values of ``Plan.recompute`` tried, least recomputation first.
    :param schedules: pipeline schedules tried; None keeps the plan's own (the schedule family is
        the agent's choice, e.g. SpanTrain's zero-bubble pipeline [paper]).
    :param widen_window: widen the in-flight window on cross-region pipelines
        (``Plan.extra_inflight``, see :func:`window_to_hide_round_trips`).
    :raises ValueError: for an empty menu or a micro-batch size below 1.
    """

    micro_batches: tuple[int, ...] = MICRO_BATCHES
    recompute_modes: tuple[str, ...] = RECOMPUTE_MODES
    schedules: tuple[str, ...] | None = None
    widen_window: bool = True

    def __post_init__(self) -> None:
        """Validate the menu."""
        if not self.micro_batches or min(self.micro_batches) < 1:
            raise ValueError(f"PlanMenu.micro_batches must be non-empty sizes >= 1, got {self.micro_batches}")
        if not self.recompute_modes:
            raise ValueError("PlanMenu.recompute_modes must not be empty")
        if self.schedules is not None and not self.schedules:
            raise ValueError("PlanMenu.schedules must be None or non-empty")


#: the menu every agent gets unless its source says otherwise
DEFAULT_MENU = PlanMenu()


@lru_cache(maxsize=1 << 14)
def _layer_split(layers: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    return tuple(stage_layer_split(layers, weights))


def _head_layers(job: JobSpec) -> int:
    """The LM head's compute in transformer-layer equivalents (0 without a vocabulary)."""
    return _head_layers_of(job.model)


@lru_cache(maxsize=256)
def _head_layers_of(model: ModelSpec) -> int:
    return round(model.embedding_params / model.layer_params) if model.embedding_params else 0


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
    recompute: str = "none",
) -> Plan | None:
    """A plan with ``stages_per_region[i]`` stages in region ``chain[i]``, all with ``dp`` x ``tp``.

    Layers are split in proportion to each stage's GPU speed, counting the LM head on the last
    stage as the layers its compute equals (``V h / 12 h^2``, rounded): the last stage gets that
    many fewer layers (at least one).  Returns None if the chain holds more stages than the model
    has layers.  ``recompute`` is the plan's (:class:`~sfenv.model.perf.Plan`, which still takes
    the former bool).
    """
    regions: list[int] = []
    for r, n in zip(chain, stages_per_region):
        regions.extend([r] * n)
    if not regions or len(regions) > job.model.layers:
        return None
    flops = topo.scalars.flops
    split = _head_aware_split(job.model.layers, _head_layers(job), tuple([flops[r] for r in regions]))
    return Plan(job.job_id, _chain_stages(tuple(regions), split, dp, tp), micro_batch=micro_batch,
                schedule=schedule, recompute=recompute)


@lru_cache(maxsize=1 << 14)
def _chain_stages(regions: tuple[int, ...], split: tuple[int, ...], dp: int, tp: int) -> tuple[Stage, ...]:
    """The stages of :func:`chain_plan`: ``split[k]`` layers in ``regions[k]``, ``dp`` x ``tp`` each (memoised).

    Plan search builds the same chains for every recomputation mode, budget and job of a shape.  A
    :class:`~sfenv.hashing.HashedKey` (a tuple, equal to and hashed as the plain one): a plan's hash
    and its shape key's then ask its stages once, not each stage on every new plan.
    """
    return HashedKey([Stage.at(r, layers, dp, tp) for r, layers in zip(regions, split)])


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
    menu: PlanMenu = DEFAULT_MENU,
) -> tuple[Plan, PlanPerf] | None:
    """Best feasible plan on ``chain`` using at most ``budget[i]`` GPUs in region ``chain[i]``.

    Candidates: every tensor degree t (within a server, dividing the heads) and data-parallel
    degree d such that each region gets at least one stage; a region then holds
    ``budget // (d t)`` stages (capped so the whole pipeline has at most ``min(L, max_depth)``
    stages and the job at most ``max_gpus`` GPUs).  Combinations whose weights and optimizer state
    alone cannot fit (``16 P / (p t)`` over the smallest GPU memory) are skipped without
    evaluation.  The search builds plans with ``schedule`` and ``micro_batch`` and the first
    recomputation mode of ``menu`` that fits (modes in order of compute cost: none, selective, full;
    a plan gets the cheapest that fits).  For each t the scan over d stops once the iteration
    time rises (a heuristic: it is close to unimodal in d).  The best structure then goes through
    :func:`complete_plan` with ``menu`` (micro-batch, recomputation, schedule, window).
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
            per_region = _stage_counts(job, budget, len(chain), unit, max_depth)
            if per_region is None:
                continue
            if state_bytes / (sum(per_region) * tp) > min_mem:  # cannot fit even without activations
                continue
            fitted, tried = _least_recompute(job, topo, chain, per_region, dp, tp, schedule, micro_batch, menu,
                                             evaluate, None if best is None else best[1].iter_time)
            evals += tried
            if fitted is not None:
                plan, perf = fitted
                if best is None or (perf.iter_time, plan.gpus) < (best[1].iter_time, best[0].gpus):
                    best = fitted
                # iteration time is close to unimodal in d for fixed t: stop once it rises
                if prev_time is not None and perf.iter_time > prev_time:
                    break
                prev_time = perf.iter_time
            if evals >= max_evals:
                return None if best is None else complete_plan(best[0], job, evaluate, menu, best[1])
    return None if best is None else complete_plan(best[0], job, evaluate, menu, best[1])


def _least_recompute(
    job: JobSpec, topo: Topology, chain: Sequence[int], per_region: Sequence[int], dp: int, tp: int, schedule: str,
    micro_batch: int, menu: PlanMenu, evaluate: Evaluator, to_beat: float | None,
) -> tuple[tuple[Plan, PlanPerf] | None, int]:
    """:func:`chain_plan` with the first recomputation mode of ``menu`` that fits, evaluated.

    Modes go in order of compute cost, so the search stops at the first that fits, and before
    evaluating a plan whose :func:`~sfenv.model.perf.compute_lower_bound` is no better than
    ``to_beat`` (the best iteration time so far: more recomputation only costs more).

    :return: ``((plan, perf) or None when no mode fits or is worth evaluating, evaluations made)``.
    """
    tried = 0
    for recompute in menu.recompute_modes:
        plan = chain_plan(job, topo, chain, per_region, dp, tp, schedule, micro_batch, recompute)
        if plan is None:
            break
        if to_beat is not None and compute_lower_bound(plan, job, topo) >= to_beat:
            break  # cannot beat the best: skip unevaluated
        perf = evaluate(plan, job)
        tried += 1
        if perf.feasible:
            return (plan, perf), tried
    return None, tried


def _stage_counts(job: JobSpec, budget: Sequence[int], regions: int, unit: int, max_depth: int) -> list[int] | None:
    """Stages per region for ``unit`` GPUs per stage, or None if the job cannot be met.

    Each region holds ``budget // unit`` stages, trimmed (from the largest, later first) so the
    pipeline has at most ``min(L, max_depth)`` stages and the job at most ``max_gpus`` GPUs.
    None when some region would hold no stage or the job's minimum GPUs is not reached.
    """
    per_region = [g // unit for g in budget]
    total = sum(per_region)
    cap_stages = min(job.model.layers, max_depth, job.max_gpus // unit)
    if cap_stages < regions:
        return None
    while total > cap_stages:
        i = max(range(len(per_region)), key=lambda j: (per_region[j], j))
        per_region[i] -= 1
        total -= 1
    if total * unit < job.min_gpus:
        return None
    return per_region


def complete_plan(
    plan: Plan, job: JobSpec, evaluate: Evaluator, menu: PlanMenu = DEFAULT_MENU, perf: PlanPerf | None = None,
) -> tuple[Plan, PlanPerf] | None:
    """The plan's stages with the best knobs of ``menu``: the shared completion step.

    The stages (regions, GPUs, tensor and data-parallel degrees, layer split) stay as the agent
    chose them.  For every schedule and micro-batch size of the menu (sizes with ``d b`` above the
    global batch skipped), the recomputation modes are tried in order, least recomputation first;
    the first that fits gives a candidate, and on a multi-stage pipeline (not GPipe) its in-flight
    window is widened to the smallest ``e`` that hides every WAN round trip
    (:func:`window_to_hide_round_trips`: the window is first-order on WAN chains, see
    :mod:`sfenv.model.pipeline`) or, if that does not fit in memory, the widest that fits (bisection);
    wider windows are probed while they still gain.  (Zero-bubble schedules use the same rule;
    their replayed time is not exactly monotone in the window: on spider-8 another window was
    better by at most 2.2e-5 of the iteration, and a full scan costs ~50x the evaluations.)
    Only when the full window does not fit
    is the next recomputation mode tried (it frees activation memory for the window; otherwise it
    only adds compute).  The plan as given is a candidate too, so completion never makes a plan
    slower.  The candidate with the lowest modelled iteration time wins; ties go to the earlier
    one (the given plan, then smaller micro-batches, less recomputation).

    Micro-batch sizes are tried in increasing order and the scan stops at the first size that fits
    in no recomputation mode (activation memory grows with the micro-batch).  Cost: typically three
    evaluations per micro-batch size and schedule (the plain plan, the full window and one wider
    probe), plus ``log2(e)`` when the full window does not fit.

    :param plan: the agent's plan (its knobs are only a starting point).
    :param job: the job.
    :param evaluate: the performance model (e.g. ``SimView.evaluate``: current link shares).
    :param menu: the knobs to choose from.
    :param perf: ``evaluate(plan, job)`` if the caller has it (saves one evaluation).
    :return: ``(plan, perf)``, or None if no candidate (not even ``plan``) fits.
    """
    best: tuple[Plan, PlanPerf] | None = None

    def keep(cand: Plan, cand_perf: PlanPerf) -> None:
        nonlocal best
        if cand_perf.feasible and (best is None or cand_perf.iter_time < best[1].iter_time * (1.0 - 1e-9)):
            best = (cand, cand_perf)

    keep(plan, evaluate(plan, job) if perf is None else perf)
    pipelined = plan.num_stages > 1 and menu.widen_window
    for schedule in menu.schedules or (plan.schedule,):
        for b in sorted(menu.micro_batches):
            if b > 1 and plan.dp * b > job.global_batch:
                continue
            fitted = False
            for mode in menu.recompute_modes:
                cand = replace(plan, micro_batch=b, schedule=schedule, recompute=mode, extra_inflight=0)
                cand_perf = evaluate(cand, job) if cand != plan or perf is None else perf
                if not cand_perf.feasible:
                    continue
                fitted = True
                keep(cand, cand_perf)
                if not pipelined or schedule == "gpipe" or _widen(cand, cand_perf, job, evaluate, keep):
                    break  # the window is as wide as it needs to be: more recomputation only costs
            if not fitted:
                break  # activation memory grows with the micro-batch: larger ones do not fit either
    return best


def _widen(plan: Plan, perf: PlanPerf, job: JobSpec, evaluate: Evaluator,
           keep: Callable[[Plan, PlanPerf], None]) -> bool:
    """Offer ``plan`` with the widest useful window that fits; True if the one hiding every round trip fits.

    Past ``need`` (:func:`window_to_hide_round_trips`) no 1F1B window cycle binds, so a wider window
    mostly costs memory; below it, activation memory grows with the window, so the widest feasible
    window is found by bisection between the plan's own (feasible) and ``need`` (infeasible).
    When ``need`` fits, wider windows are probed while they still shorten the iteration (at most
    :data:`MAX_WINDOW_PROBES`): ``need`` is computed from per-stage times for 1F1B and can fall a
    little short (zero-bubble schedules hold their windows differently).  A plan in one region has
    no WAN hop to widen for.
    """
    if len(plan.regions) < 2:
        return True
    need = window_to_hide_round_trips(plan, perf)
    fits, too_wide = plan.extra_inflight, need
    best = (plan, perf)
    extra = need
    while too_wide > fits:
        wide = replace(plan, extra_inflight=extra)
        wide_perf = evaluate(wide, job)
        if wide_perf.feasible:
            fits, best = extra, (wide, wide_perf)
        else:
            too_wide = extra
        extra = (fits + too_wide) // 2
        if too_wide - fits <= 1:
            break
    hidden = fits >= need
    if hidden:
        for extra in range(fits + 1, fits + 1 + MAX_WINDOW_PROBES):
            wide = replace(plan, extra_inflight=extra)
            wide_perf = evaluate(wide, job)
            if not wide_perf.feasible or wide_perf.iter_time >= best[1].iter_time * (1.0 - 1e-9):
                break
            best = (wide, wide_perf)
    keep(*best)
    return hidden


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
