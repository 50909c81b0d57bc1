"""The performance model of a pipeline-parallel LLM training job over a WAN (pure functions).

A :class:`Plan` splits a job's L layers into an ordered list of pipeline stages.  Stage k has
``l_k`` layers, ``t_k``-way tensor parallelism inside one server and ``d`` data-parallel replicas
(the same ``d`` for every stage), placed in one region or spread over several (``placement``).
A global batch of B sequences is cut into ``m = ceil(B / (d*b))`` micro-batches of ``b`` sequences.

With ``P_k = 12 h^2 l_k`` parameters on stage k (plus the V*h tied embedding: in memory on the
first stage and, when p > 1, a copy on the last; in compute on the last stage, the LM head):

- compute per micro-batch: ``c_k = l_k * layer time + LM head on the last stage``, with FLOPs
  counted as Megatron does (attention matmuls included, ``24 b s h^2 (1 + s/(6h))`` per layer
  forward) and per-GPU kernel efficiency (GEMM efficiency with a fixed time per GEMM, memory-bound
  work over HBM bandwidth, Megatron's tensor-parallel all-reduces with a per-step latency), the
  recomputation mode of the plan adding the attention core (selective) or a forward pass (full):
  :mod:`sfenv.model.compute`; F is the slowest GPU holding the stage.  GPU types without a kernel model
  run at the flat :attr:`PerfParams.mfu`;
- pipeline hop k->k+1, per micro-batch and direction: latency ``l_k`` of the route the payload takes
  (:meth:`sfenv.world.topology.Topology.route_for`: the widest or the lowest-latency path, whichever
  delivers ``2 b s h`` bytes first) and transfer ``x_k = 2 b s h / bw``, where ``bw`` is the flow's
  fair share of the route's bottleneck (intra-region bandwidth when both stages share a region);
- pipeline time: per schedule (1F1B, GPipe, ZB-H1, ZB-H2) with each stage's in-flight window
  ``w_k`` (1F1B p-k, plus ``extra_inflight`` per downstream WAN hop), by :mod:`sfenv.model.pipeline`:
  exact for GPipe, and for the others an exact replay of the first micro-batches extended at the
  schedule's steady period, tested against a full event-driven replay.  Under 1F1B every WAN
  round trip is exposed once a window is full (the period is at least ``R_k / w_k``, R_k the round
  trip from stage k to the last stage and back); zero-bubble schedules remove compute bubbles,
  not WAN transfer or latency, and run 1F1B's order (ZB-H2 also ZB-H1's) when that is faster.
  BACE-Pipe's stall-free rule (``x_k <= c_k``) is :attr:`PlanPerf.stall_free`;
- data-parallel gradient sync of stage k: a ring all-reduce of ``2 P_k`` bytes (bf16) over d
  replicas: ``2 (d-1)/d * bytes / bw + 2 (d-1) lat``, on the per-GPU intra-region bandwidth
  (``2 P_k / t_k`` bytes per ring) or, when replicas span regions, on the WAN share;
  overlapped with the pipeline by a fraction ``dp_overlap``;
- memory per GPU: ``16 P_k / t_k`` bytes (bf16 weights and grads, fp32 Adam state and master
  weights) plus activations per layer and micro-batch per Korthikanti et al. 2022 for the plan's
  recomputation mode and sequence parallelism (:func:`sfenv.model.compute.activation_bytes`; e.g.
  ``s b h (10 + 24/t + 5 a s / (h t))`` without recomputation or SP), times the micro-batches in
  flight ``w_k`` (1F1B: p-k, GPipe: m, ZB-H1: p, ZB-H2: 2p-1 on every stage, as Qi et al.'s
  hand-crafted schedules hold them until their weight gradients are done; each plus the plan's extra
  window; the replays hold no more than that).  A plan that does not fit is infeasible;
- power per GPU: ``idle + (TDP - idle) * util`` with ``util = m c_k / T``, times PUE;
- throughput ``B s / T`` tokens/s; energy per iteration = power x T.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sfenv.hashing import HashedKey, cached_hash, cached_value, state_without_hash
from sfenv.model.compute import RECOMPUTE_MODES, layer_costs, lm_head_time, stage_unit
from sfenv.model.pipeline import SCHEDULES, _pipeline_time_cached, default_windows
from sfenv.world.topology import Scalars, Topology
from sfenv.world.workload import JobSpec

__all__ = [
    "BUBBLE_FACTOR",
    "SCHEDULES",
    "PerfParams",
    "Plan",
    "PlanPerf",
    "Stage",
    "allreduce_time",
    "bubble_rate",
    "compute_lower_bound",
    "evaluate_plan",
    "moved_perf",
    "plan_flows",
    "same_region_figures",
    "stage_layer_split",
]

#: bubble rate per schedule in units of 1F1B's ``(p - 1)/m``, equal stages and no communication (the
#: zero-bubble figures are Qi et al.'s, ICLR 2024, with T_F = T_B = T_W; ZB-H1's holds for m >= p,
#: ZB-H2's for m >= 2p - 1: :func:`bubble_rate` is exact for every m)
BUBBLE_FACTOR = {"1f1b": 1.0, "gpipe": 1.0, "zb-h1": 1.0 / 3.0, "zb-h2": 0.0}
ACT_BYTES = 2.0  # bf16 activations
_MODES = frozenset(RECOMPUTE_MODES)


@dataclass(frozen=True)
class Stage:
    """One pipeline stage.

    :param layers: transformer layers on this stage (>= 1).
    :param placement: ``((region, replicas), ...)``: where the stage's data-parallel replicas run.
    :param tp: tensor-parallel degree (GPUs per replica, inside one server).
    """

    layers: int
    placement: tuple[tuple[int, int], ...]
    tp: int = 1
    dp: int = field(init=False, repr=False, compare=False)
    gpus: int = field(init=False, repr=False, compare=False)
    regions: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # derived fields, stored once (hot loops read them many times)
        dp = sum(n for _, n in self.placement)
        object.__setattr__(self, "dp", dp)
        object.__setattr__(self, "gpus", dp * self.tp)
        object.__setattr__(self, "regions", tuple(r for r, _ in self.placement))

    __hash__ = cached_hash
    __getstate__ = state_without_hash

    @staticmethod
    def at(region: int, layers: int, dp: int = 1, tp: int = 1) -> Stage:
        """A stage with all ``dp`` replicas in one region (interned: stages are immutable)."""
        return _stage_at(region, layers, dp, tp)

    def replica_regions(self) -> list[int]:
        """Region of each replica, in replica order."""
        out: list[int] = []
        for r, n in self.placement:
            out.extend([r] * n)
        return out

    def hop_pairs(self, nxt: Stage) -> dict[tuple[int, int], int]:
        """``{(src region, dst region): replica pairs}`` of the hop from this stage to ``nxt``."""
        if len(self.placement) == 1 and len(nxt.placement) == 1:
            return {(self.placement[0][0], nxt.placement[0][0]): self.dp}
        out: dict[tuple[int, int], int] = {}
        for a, b in zip(self.replica_regions(), nxt.replica_regions()):
            out[(a, b)] = out.get((a, b), 0) + 1
        return out


@lru_cache(maxsize=1 << 16)
def _stage_at(region: int, layers: int, dp: int, tp: int) -> Stage:
    return Stage(layers=int(layers), placement=((int(region), int(dp)),), tp=int(tp))


@dataclass(frozen=True)
class Plan:
    """A parallel plan for one job.

    :param job_id: the job this plan is for.
    :param stages: pipeline stages in order.
    :param micro_batch: sequences per micro-batch, b.
    :param schedule: pipeline schedule, one of :data:`SCHEDULES`.
    :param recompute: activation recomputation: ``"none"``, ``"selective"`` (the attention core) or
        ``"full"`` (:mod:`sfenv.model.compute`); more recomputation costs compute and saves activation
        memory.  The former bool is accepted: True means ``"full"``, False ``"none"``.
    :param sequence_parallel: Megatron's sequence parallelism (layernorm and dropout activations
        split over the tensor-parallel GPUs; Korthikanti et al. 2022).  Has no effect at t = 1.
    :param extra_inflight: extra micro-batches each stage keeps in flight per cross-region hop
        downstream of it (0: the schedule's standard window).  More warm-up micro-batches hide a
        WAN round trip at the price of activation memory (see :mod:`sfenv.model.pipeline`).
    """

    job_id: int
    stages: tuple[Stage, ...]
    micro_batch: int = 1
    schedule: str = "1f1b"
    recompute: str = "none"
    extra_inflight: int = 0
    sequence_parallel: bool = False

    __hash__ = cached_hash  # plans are set members and dictionary keys on every environment step
    __getstate__ = state_without_hash

    def __post_init__(self) -> None:
        # the former ``recompute: bool`` (True: full recomputation), so older callers keep working
        rc: object = self.recompute  # typed ``str``; older callers' bools still arrive here
        if rc is True or rc is False:
            object.__setattr__(self, "recompute", "full" if rc else "none")

    @property
    def dp(self) -> int:
        """Data-parallel degree (the first stage's)."""
        return self.stages[0].dp

    @property
    def num_stages(self) -> int:
        """Pipeline depth p."""
        return len(self.stages)

    @cached_value
    def gpus(self) -> int:
        """Total GPUs."""
        return sum(s.gpus for s in self.stages)

    def gpus_by_region(self) -> dict[int, int]:
        """GPUs per region."""
        out: dict[int, int] = {}
        for s in self.stages:
            for r, n in s.placement:
                out[r] = out.get(r, 0) + n * s.tp
        return out

    @cached_value
    def regions(self) -> tuple[int, ...]:
        """Distinct regions used, in first-use order."""
        seen: dict[int, None] = {}
        for s in self.stages:
            for r in s.regions:
                seen.setdefault(r, None)
        return tuple(seen)

    def num_microbatches(self, job: JobSpec) -> int:
        """``m = ceil(B / (d b))``."""
        return max(1, math.ceil(job.global_batch / (self.dp * self.micro_batch)))

    @cached_value
    def shape_key(self) -> HashedKey:
        """Everything but the job id (stages, micro-batch, schedule, recompute, window, SP): a hashed key."""
        return HashedKey((self.stages, self.micro_batch, self.schedule, self.recompute, self.extra_inflight,
                          self.sequence_parallel))

    def for_job(self, job_id: int) -> Plan:
        """The same plan for job ``job_id`` (equal to ``replace(plan, job_id=...)``).

        Derived values already computed (GPUs, regions, shape key) are carried over, not recomputed: plan
        caches hand one fitted plan to every job of the same shape on every environment step.
        """
        if job_id == self.job_id:
            return self
        state = dict(self.__dict__)
        state.pop("_hash", None)
        state["job_id"] = job_id
        new = object.__new__(Plan)
        new.__dict__.update(state)
        return new


@dataclass(frozen=True)
class PerfParams:
    """Tunable constants of the performance model.

    :param mfu: achievable fraction of peak FLOP/s for GPU types without a kernel model
        (:attr:`sfenv.world.hardware.GPUSpec.kernels`); catalogue GPUs use their fitted kernel model.
    :param dp_overlap: fraction of the gradient all-reduce hidden behind the pipeline (0..1).
    :param memory_headroom: usable fraction of GPU memory (framework, fragmentation).
    """

    mfu: float = 0.4
    dp_overlap: float = 0.5
    memory_headroom: float = 0.9


@dataclass
class PlanPerf:
    """What the model predicts for a plan under given link shares.

    ``feasible`` is False with a ``reason`` when the plan is malformed or does not fit in memory;
    times are then ``inf``.  All times in seconds, power in watts, throughput in tokens/s.
    """

    feasible: bool
    reason: str = ""
    iter_time: float = math.inf
    pipeline_time: float = math.inf
    compute_times: list[float] = field(default_factory=list)
    hop_times: list[float] = field(default_factory=list)
    transfer_times: list[float] = field(default_factory=list)
    latency_times: list[float] = field(default_factory=list)
    tp_comm_times: list[float] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)
    allreduce_times: list[float] = field(default_factory=list)
    bubble_time: float = math.inf
    microbatches: int = 0
    throughput: float = 0.0
    memory_per_gpu: list[float] = field(default_factory=list)
    memory_headroom: float = 0.0
    power_by_region: dict[int, float] = field(default_factory=dict)
    bottleneck_bw_bps: float = math.inf
    wan_bytes_per_iter: float = 0.0

    @property
    def power_w(self) -> float:
        """Total facility power (PUE included), watts."""
        return float(sum(self.power_by_region.values()))

    @property
    def bubble_rate(self) -> float:
        """Bubble time over busy time of the bottleneck, as in the zero-bubble paper."""
        busy = self.pipeline_time - self.bubble_time
        return self.bubble_time / busy if busy > 0 else 0.0

    @cached_value
    def stall_free(self) -> bool:
        """BACE-Pipe's rule: every hop's transfer time (latency excluded) is at most its stages' compute."""
        c = self.compute_times
        return all(x <= min(c[k], c[k + 1]) + 1e-12 for k, x in enumerate(self.transfer_times))


def _crosses(src: Stage, dst: Stage) -> bool:
    """True when the hop from ``src`` to ``dst`` sends some replica's activations across regions."""
    if len(src.placement) == 1 and len(dst.placement) == 1:
        return src.placement[0][0] != dst.placement[0][0]
    return any(a != b for a, b in src.hop_pairs(dst))


def _infeasible(reason: str) -> PlanPerf:
    return PlanPerf(feasible=False, reason=reason)


def plan_flows(plan: Plan, topo: Topology, job: JobSpec | None = None) -> dict[int, int]:
    """WAN flows a plan puts on each link: ``{link index: flows}``.

    Pipeline hops pair replica i of stage k with replica i of stage k+1; each pair in different
    regions is one flow on every link of its route.  A stage whose replicas span regions adds
    one ring all-reduce flow per region boundary of its ring.  With ``job`` the routes are the
    ones :func:`evaluate_plan` uses (:meth:`Topology.route_for` of each transfer's payload);
    without it, the widest routes.
    """
    flows: dict[int, int] = {}
    if len(plan.regions) < 2:  # a plan inside one region puts nothing on the WAN
        return flows
    act, grad = _payloads(plan, job)
    stages = plan.stages
    for k in range(len(stages) - 1):
        for (a, b), n in stages[k].hop_pairs(stages[k + 1]).items():
            if a != b:
                for link in _route(topo, a, b, act):
                    flows[link] = flows.get(link, 0) + n
    for st in stages:
        for a, b in _ring_edges(st.regions):
            for link in _route(topo, a, b, grad(st)):
                flows[link] = flows.get(link, 0) + 1
    return flows


def _payloads(plan: Plan, job: JobSpec | None) -> tuple[float | None, Callable[[Stage], float | None]]:
    """Per-transfer payloads: one micro-batch's boundary activation, and a stage's gradients (None without a job)."""
    if job is None:
        return None, lambda st: None
    model = job.model
    act = ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden
    return act, lambda st: 2.0 * model.layer_params * st.layers


def _route(topo: Topology, a: int, b: int, nbytes: float | None) -> tuple[int, ...]:
    return topo.route_links[a][b] if nbytes is None else topo.route_for(a, b, nbytes)[0]


def _ring_edges(regs: tuple[int, ...]) -> list[tuple[int, int]]:
    """Region-boundary edges of a ring all-reduce over ``regs``.

    Links are full duplex, so the two directions between the same pair of regions (a 2-region
    ring) are one flow each way, not two flows on one link.
    """
    if len(regs) < 2:
        return []
    edges = [(regs[i], regs[(i + 1) % len(regs)]) for i in range(len(regs))]
    return edges[:1] if len(regs) == 2 else edges


def _share_bps(links: tuple[int, ...], cap: np.ndarray, flows: np.ndarray) -> float:
    """Fair share of one flow on a WAN route (``flows`` already counts this flow)."""
    return float(min(cap[k] / max(flows[k], 1.0) for k in links))


def allreduce_time(nbytes: float, d: int, bw_bps: float, latency_s: float) -> float:
    """Ring all-reduce time of ``nbytes`` over ``d`` participants: 2(d-1)/d * bytes/bw + 2(d-1) lat."""
    if d <= 1:
        return 0.0
    return 2.0 * (d - 1) / d * nbytes * 8.0 / bw_bps + 2.0 * (d - 1) * latency_s


def bubble_rate(p: int, m: int, schedule: str) -> float:
    """Closed-form bubble rate for p equal stages, m micro-batches, no communication.

    Idle time over busy time, as :attr:`PlanPerf.bubble_rate`.  1F1B and GPipe: ``(p-1)/m``.  The
    zero-bubble schedules (Qi et al., ICLR 2024; :mod:`sfenv.model.pipeline`), with their forward,
    input and weight gradients each a third of a micro-batch's compute ``c``: ZB-H1 idles
    ``(p-1)(T_F + T_B - T_W) = (p-1) c/3``, a rate of ``(p-1)/(3m)``, when ``m >= p``; ZB-H2's longest
    stage idles nothing once ``m >= 2p - 1``.  With fewer micro-batches the first stage has run all
    its forwards before the first input gradient comes back after ``2p - 1`` thirds of ``c``, so
    both idle ``(2p - 1 - m) c/3`` (ZB-H1 at least its ``(p-1) c/3``).
    """
    if schedule == "zb-h1":
        return max(p - 1, 2 * p - 1 - m) / (3.0 * m)
    if schedule == "zb-h2":
        return max(0, 2 * p - 1 - m) / (3.0 * m)
    return BUBBLE_FACTOR[schedule] * (p - 1) / m


def evaluate_plan(
    plan: Plan,
    job: JobSpec,
    topo: Topology,
    params: PerfParams,
    link_capacity_bps: np.ndarray | None = None,
    link_flows: np.ndarray | None = None,
    include_own_flows: bool = True,
) -> PlanPerf:
    """Predict iteration time, throughput, memory and power of ``plan`` for ``job``.

    :param link_capacity_bps: current capacity of each link (bandwidth x fluctuation factor);
        defaults to the nominal bandwidths.
    :param link_flows: flows of *other* jobs on each link (default none).  With
        ``include_own_flows`` the plan's own flows are added before computing fair shares;
        pass False when ``link_flows`` already contains them (a running job).
    """
    # Hot path (plan search evaluates thousands of plans): plain-Python per-region figures from
    # ``topo.scalars``, fast paths for stages in one region, and no WAN bookkeeping for plans in
    # one region; the arithmetic is written exactly as in the module docstring.
    model = job.model
    stages = plan.stages
    p = len(stages)
    if p == 0:
        return _infeasible("plan has no stages")
    if plan.schedule not in BUBBLE_FACTOR:
        return _infeasible(f"unknown schedule {plan.schedule!r}; expected one of {SCHEDULES}")
    if plan.micro_batch < 1:
        return _infeasible("micro_batch must be >= 1")
    if plan.extra_inflight < 0:
        return _infeasible("extra_inflight must be >= 0")
    if sum([s.layers for s in stages]) != model.layers:
        return _infeasible(f"stages hold {sum(s.layers for s in stages)} layers, model has {model.layers}")
    fast = _evaluate_chain(plan, job, topo, params, link_capacity_bps, link_flows, include_own_flows)
    if fast is not None:
        return fast
    return _evaluate_general(plan, job, topo, params, link_capacity_bps, link_flows, include_own_flows)


def _evaluate_general(
    plan: Plan,
    job: JobSpec,
    topo: Topology,
    params: PerfParams,
    link_capacity_bps: np.ndarray | None,
    link_flows: np.ndarray | None,
    include_own_flows: bool,
) -> PlanPerf:
    """:func:`evaluate_plan` for any placement (replicas of a stage may span regions).

    The plan-wide checks (stages, schedule, micro-batch, window, layer count) are done by the caller.
    The model's steps, one function each: the stages' checks (:func:`_stage_problem`), compute and
    memory (:func:`_stage_costs`: a stage that does not fit ends the evaluation), communication
    (:func:`_hop_times`, then :func:`_allreduce_times`), and the iteration time and power of
    :func:`_feasible_perf`.
    """
    problem = _stage_problem(plan, job, topo)
    if problem is not None:
        return problem
    if plan.recompute not in _MODES:
        return _infeasible(f"recompute {plan.recompute!r}: expected one of {RECOMPUTE_MODES}")
    stages = plan.stages
    sc = topo.scalars
    m = plan.num_microbatches(job)
    multi = len(plan.regions) > 1
    flows = _wan_flows(plan, topo, job, link_flows, include_own_flows) if multi else None
    cap = topo.link_bw_bps if link_capacity_bps is None else link_capacity_bps
    windows = _stage_windows(plan, m, multi)
    fallbacks = _fallback_windows(plan, m, multi)
    costs = _stage_costs(plan, job, sc, params, windows)
    if isinstance(costs, PlanPerf):
        return costs  # a stage does not fit
    compute, tp_comm, mem, min_headroom, stage_params = costs
    model = job.model
    act_bytes = ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden  # one micro-batch's boundary activation
    hops, lats, xfers, bottleneck, wan_bytes = _hop_times(stages, topo, cap, flows, act_bytes, m)
    allreduce, bottleneck, wan_bytes = _allreduce_times(stages, topo, cap, flows, stage_params, bottleneck, wan_bytes)
    return _feasible_perf(plan, job, sc, params, m, windows, fallbacks, compute, tp_comm, mem, min_headroom,
                          allreduce, hops, lats, xfers, bottleneck, wan_bytes)


def _stage_problem(plan: Plan, job: JobSpec, topo: Topology) -> PlanPerf | None:
    """The first thing wrong with a plan's stages, as an infeasible :class:`PlanPerf`; None when nothing is.

    Every stage has layers, the first stage's number of replicas (at least one in each of its
    regions), a tensor degree that divides the heads and fits in a server of each of its regions,
    and known regions; the plan's GPUs are within the job's range.
    """
    stages = plan.stages
    nreg = topo.num_regions
    per_server = topo.scalars.gpus_per_server
    d = stages[0].dp
    heads = job.model.heads
    for k, st in enumerate(stages):
        if st.layers < 1:
            return _infeasible(f"stage {k} has no layers")
        pl = st.placement
        if st.dp != d or (pl[0][1] < 1 if len(pl) == 1 else any(n < 1 for _, n in pl)):
            return _infeasible(f"stage {k} has {st.dp} replicas, stage 0 has {d}")
        if st.tp < 1 or heads % st.tp != 0:
            return _infeasible(f"stage {k}: tp={st.tp} must divide {heads} heads")
        for r, _ in pl:
            if not 0 <= r < nreg:
                return _infeasible(f"stage {k}: unknown region {r}")
            if st.tp > per_server[r]:
                return _infeasible(f"stage {k}: tp={st.tp} exceeds {per_server[r]} GPUs/server")
    gpus = plan.gpus
    if gpus < job.min_gpus or gpus > job.max_gpus:
        return _infeasible(f"plan uses {gpus} GPUs, job accepts {job.min_gpus}..{job.max_gpus}")
    return None


def _wan_flows(
    plan: Plan, topo: Topology, job: JobSpec, link_flows: np.ndarray | None, include_own_flows: bool,
) -> np.ndarray:
    """Flows on each link for a plan that spans regions: other jobs' ``link_flows``, plus the plan's own."""
    flows = np.zeros(topo.num_links) if link_flows is None else np.asarray(link_flows, dtype=float).copy()
    if include_own_flows:
        for k, n in plan_flows(plan, topo, job).items():
            flows[k] += n
    return flows


def _stage_windows(
    plan: Plan, m: int, multi: bool, chain: Sequence[int] | None = None, schedule: str | None = None,
) -> tuple[int, ...]:
    """Micro-batches each stage holds in flight: the schedule's window, widened per WAN hop downstream.

    :param multi: the plan spans regions (only then can a hop cross regions).
    :param chain: each stage's region when each stage sits in one (a hop then crosses regions when
        they differ, as :func:`_crosses` finds, without a call per hop).
    :param schedule: the schedule whose windows to give (default the plan's).
    """
    schedule = plan.schedule if schedule is None else schedule
    stages = plan.stages
    p = len(stages)
    if p == 1:
        return (m if schedule == "gpipe" else 1,)
    if not multi or not plan.extra_inflight:  # no hop crosses regions, or no extra window
        return default_windows(p, m, schedule)
    if chain is None:
        cross = tuple([_crosses(stages[k], stages[k + 1]) for k in range(p - 1)])
    else:
        cross = tuple([chain[k] != chain[k + 1] for k in range(p - 1)])
    return default_windows(p, m, schedule, cross, plan.extra_inflight)


#: orders a zero-bubble runtime may also run, within its own memory, when they are faster than its
#: own: each weight gradient right after its input gradient is 1F1B's order (with 1F1B's windows,
#: which lie within both zero-bubble schedules'), and ZB-H1's windows lie within ZB-H2's (Qi et al.,
#: ICLR 2024: ZB-H1 holds 1F1B's peak, ZB-H2 about twice that)
_ZERO_BUBBLE_FALLBACKS: dict[str, tuple[str, ...]] = {"zb-h1": ("1f1b",), "zb-h2": ("zb-h1", "1f1b")}


def _fallback_windows(
    plan: Plan, m: int, multi: bool, chain: Sequence[int] | None = None,
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The plan's :data:`_ZERO_BUBBLE_FALLBACKS` with their windows (none for other schedules)."""
    fallbacks = _ZERO_BUBBLE_FALLBACKS.get(plan.schedule)
    if not fallbacks or len(plan.stages) == 1:
        return ()
    return tuple([(s, _stage_windows(plan, m, multi, chain, s)) for s in fallbacks])


def _stage_costs(
    plan: Plan, job: JobSpec, sc: Scalars, params: PerfParams, windows: Sequence[int],
) -> tuple[list[float], list[float], list[float], float, list[float]] | PlanPerf:
    """Compute and memory of each stage, or an infeasible :class:`PlanPerf` at the first stage that does not fit.

    Compute per micro-batch: the slowest GPU type holding the stage sets its time (all replicas step
    together; :func:`sfenv.model.compute.stage_unit`, the LM head on the last stage).  Memory per
    GPU: weights, gradients and optimizer state (``16 P_k / t_k``, the tied embedding on the first
    stage and a copy on the last) plus ``w_k`` micro-batches' activations, against the usable memory
    of the smallest GPU holding the stage.  One step, as both come from the stage's unit and a stage
    that does not fit ends the evaluation.

    :return: ``(compute times, of which tensor-parallel communication, memory per GPU, least memory
        headroom, parameters held)``, per stage but the headroom.
    """
    model = job.model
    stages = plan.stages
    p = len(stages)
    b, s, h = plan.micro_batch, model.seq_len, model.hidden
    mode, sp, mfu = plan.recompute, plan.sequence_parallel, params.mfu
    layer_params = model.layer_params
    emb = model.embedding_params
    memory_of, gpu_of = sc.memory, sc.gpu
    headroom = params.memory_headroom
    compute: list[float] = []
    tp_comm: list[float] = []
    mem: list[float] = []
    stage_params: list[float] = []
    min_headroom = math.inf
    for k, st in enumerate(stages):
        pk = layer_params * st.layers
        # tied embedding: held by the first stage, and a copy on the last stage when p > 1 (Megatron)
        pk_mem = pk + (emb if k == 0 else 0.0) + (emb if k == p - 1 and p > 1 else 0.0)
        stage_params.append(pk_mem)
        c_k, t_tp, act_layer = -1.0, 0.0, 0.0
        for r in st.regions:
            per_layer, comm, head, act_layer = stage_unit(gpu_of[r], b, s, h, model.heads, model.vocab, st.tp, mode,
                                                          sp, mfu)
            c = per_layer * st.layers + (head if k == p - 1 else 0.0)
            if c > c_k:
                c_k, t_tp = c, comm * st.layers
        compute.append(c_k)
        tp_comm.append(t_tp)
        need = 16.0 * pk_mem / st.tp + act_layer * st.layers * windows[k]
        mem.append(need)
        avail = min(memory_of[r] for r in st.regions) * headroom
        min_headroom = min(min_headroom, (avail - need) / avail)
        if need > avail:
            return _out_of_memory(k, need, avail, mem, min_headroom)
    return compute, tp_comm, mem, min_headroom, stage_params


def _out_of_memory(k: int, need: float, avail: float, mem: list[float], min_headroom: float) -> PlanPerf:
    """The infeasible :class:`PlanPerf` of a plan whose stage ``k`` needs ``need`` bytes per GPU of ``avail``."""
    return PlanPerf(
        feasible=False,
        reason=f"stage {k} needs {need / 1e9:.1f} GB per GPU, {avail / 1e9:.1f} GB usable",
        memory_per_gpu=mem,
        memory_headroom=min_headroom,
    )


def _hop_times(
    stages: Sequence[Stage], topo: Topology, cap: np.ndarray, flows: np.ndarray | None, act_bytes: float, m: int,
) -> tuple[list[float], list[float], list[float], float, float]:
    """Each pipeline hop's time per micro-batch and direction: its slowest replica pair's latency and transfer.

    A pair inside one region uses the intra-region bandwidth; across regions, the route
    :meth:`Topology.route_for` picks for the activation, at the flow's fair share of its bottleneck.

    :return: ``(hop times, latencies, transfer times, narrowest WAN share (bit/s), WAN bytes per
        iteration)``.
    """
    sc = topo.scalars
    intra_bw, intra_lat = sc.intra_bw, sc.intra_latency
    act_bits = act_bytes * 8.0
    hops: list[float] = []
    lats: list[float] = []
    xfers: list[float] = []
    bottleneck = math.inf
    wan_bytes = 0.0
    for k in range(len(stages) - 1):
        src, dst = stages[k], stages[k + 1]
        if len(src.placement) == 1 and len(dst.placement) == 1:
            pairs: Iterable[tuple[tuple[int, int], int]] = (((src.placement[0][0], dst.placement[0][0]), src.dp),)
        else:
            pairs = src.hop_pairs(dst).items()
        worst, w_lat, w_x = -1.0, 0.0, 0.0
        for (a, b), n in pairs:
            if a == b:
                lat, x = intra_lat[a], act_bits / intra_bw[a]
            else:
                assert flows is not None
                links, lat, _ = topo.route_for(a, b, act_bytes)
                bw = _share_bps(links, cap, flows)
                x = act_bits / bw
                bottleneck = min(bottleneck, bw)
                wan_bytes += 2.0 * act_bytes * m * n
            if lat + x > worst:
                worst, w_lat, w_x = lat + x, lat, x
        hops.append(worst)
        lats.append(w_lat)
        xfers.append(w_x)
    return hops, lats, xfers, bottleneck, wan_bytes


def _allreduce_times(
    stages: Sequence[Stage], topo: Topology, cap: np.ndarray, flows: np.ndarray | None, stage_params: Sequence[float],
    bottleneck: float, wan_bytes: float,
) -> tuple[list[float], float, float]:
    """Each stage's data-parallel gradient sync: a ring all-reduce of its bf16 gradients over its ``d`` replicas.

    In one region, each of the stage's ``t`` rings carries ``2 P_k / t`` bytes at the per-GPU
    intra-region bandwidth; replicas across regions sync over the WAN at the ring's narrowest share.

    :param bottleneck: narrowest WAN share so far (the pipeline hops'); WAN rings lower it.
    :param wan_bytes: WAN bytes per iteration so far (the hops'); WAN rings add theirs.
    :return: ``(all-reduce times, bottleneck, wan_bytes)``.
    """
    sc = topo.scalars
    intra_bw, intra_lat = sc.intra_bw, sc.intra_latency
    d = stages[0].dp
    allreduce: list[float] = []
    for k, st in enumerate(stages):
        grad_bytes = 2.0 * stage_params[k]
        regs = st.regions
        if len(regs) == 1:
            r = regs[0]
            allreduce.append(allreduce_time(grad_bytes / st.tp, d, intra_bw[r], intra_lat[r]) if d > 1 else 0.0)
            continue
        assert flows is not None
        bw = min(float(topo.intra_bw_bps[r]) * st.tp for r in regs)
        lat = 0.0
        for a, b in _ring_edges(regs):
            links, r_lat, _ = topo.route_for(a, b, grad_bytes)
            share = _share_bps(links, cap, flows)
            bottleneck = min(bottleneck, share)
            bw = min(bw, share)
            lat = max(lat, r_lat)
        allreduce.append(allreduce_time(grad_bytes, d, bw, lat))
        wan_bytes += 2.0 * (d - 1) / d * grad_bytes * len(regs)
    return allreduce, bottleneck, wan_bytes


def _feasible_perf(
    plan: Plan, job: JobSpec, sc: Scalars, params: PerfParams, m: int, windows: Sequence[int],
    fallbacks: tuple[tuple[str, tuple[int, ...]], ...], compute: list[float], tp_comm: list[float], mem: list[float],
    min_headroom: float, allreduce: list[float], hops: list[float], lats: list[float], xfers: list[float],
    bottleneck: float, wan_bytes: float,
) -> PlanPerf:
    """The :class:`PlanPerf` of a plan that fits, from its per-stage and per-hop figures (both paths' last step).

    Adds the pipeline and iteration time (:func:`_iteration_time`; ``fallbacks`` as
    :func:`_fallback_windows` gives them), the throughput and the power (:func:`_power_by_region`).
    """
    t_pp, bubble, t_iter = _iteration_time(compute, lats, xfers, allreduce, m, plan.schedule, windows, params,
                                           fallbacks)
    return PlanPerf(
        feasible=True,
        iter_time=t_iter,
        pipeline_time=t_pp,
        compute_times=compute,
        hop_times=hops,
        transfer_times=xfers,
        latency_times=lats,
        tp_comm_times=tp_comm,
        windows=list(windows),
        allreduce_times=allreduce,
        bubble_time=bubble,
        microbatches=m,
        throughput=job.tokens_per_iteration / t_iter,
        memory_per_gpu=mem,
        memory_headroom=min_headroom,
        power_by_region=_power_by_region(plan.stages, compute, m, t_iter, sc),
        bottleneck_bw_bps=bottleneck,
        wan_bytes_per_iter=wan_bytes,
    )


def _iteration_time(
    compute: list[float], lats: list[float], xfers: list[float], allreduce: list[float], m: int, schedule: str,
    windows: Sequence[int], params: PerfParams, fallbacks: tuple[tuple[str, tuple[int, ...]], ...] = (),
) -> tuple[float, float, float]:
    """Pipeline time, bubble and iteration time (the all-reduce overlapped by ``dp_overlap``).

    :param fallbacks: other schedules the plan's runtime may run instead, with their windows (a
        zero-bubble schedule's :data:`_ZERO_BUBBLE_FALLBACKS`): the pipeline time is the fastest.
    """
    if len(compute) == 1:
        t_pp = m * compute[0]
    else:
        c, lat, x = tuple(compute), tuple(lats), tuple(xfers)
        t_pp = _pipeline_time_cached(c, lat, x, m, schedule, tuple(windows))
        for other, other_windows in fallbacks:
            t_pp = min(t_pp, _pipeline_time_cached(c, lat, x, m, other, other_windows))
    bubble = max(0.0, t_pp - m * max(compute))
    ar = max(allreduce)
    w = params.dp_overlap
    return t_pp, bubble, t_pp + (1.0 - w) * ar + w * max(0.0, ar - t_pp)


def _power_by_region(stages: Sequence[Stage], compute: Sequence[float], m: int, t_iter: float,
                     sc: Scalars) -> dict[int, float]:
    """Facility power per region of a plan's stages (the module docstring's power model).

    Each GPU draws idle power plus the busy share (``m c_k / t``, at most 1) of the rest up to its
    TDP, times the region's PUE.
    """
    power: dict[int, float] = {}
    idle_w, tdp_w, pue = sc.idle_w, sc.tdp_w, sc.pue
    for st, c in zip(stages, compute):
        util = m * c / t_iter
        util = util if util < 1.0 else 1.0  # min(1.0, util), without the call
        tp = st.tp
        for r, n in st.placement:
            idle = idle_w[r]
            watts = n * tp * (idle + (tdp_w[r] - idle) * util) * pue[r]
            power[r] = power.get(r, 0.0) + watts
    return power


def _chain_regions(plan: Plan, job: JobSpec, topo: Topology) -> list[int] | PlanPerf | None:
    """The region of each stage of a plan whose stages each sit in one region, checked for :func:`_evaluate_chain`.

    :return: the regions, None when some stage's replicas span regions, or an infeasible
        :class:`PlanPerf` naming the first thing wrong (the checks and reasons of
        :func:`_stage_problem`).
    """
    stages = plan.stages
    nreg = topo.num_regions
    per_server = topo.scalars.gpus_per_server
    heads = job.model.heads
    d = stages[0].dp
    chain: list[int] = []
    for k, st in enumerate(stages):
        pl = st.placement
        if len(pl) != 1:
            return None
        r, n = pl[0]
        if st.layers < 1:
            return _infeasible(f"stage {k} has no layers")
        if n != d or n < 1:
            return _infeasible(f"stage {k} has {n} replicas, stage 0 has {d}")
        tp = st.tp
        if tp < 1 or heads % tp != 0:
            return _infeasible(f"stage {k}: tp={tp} must divide {heads} heads")
        if not 0 <= r < nreg:
            return _infeasible(f"stage {k}: unknown region {r}")
        if tp > per_server[r]:
            return _infeasible(f"stage {k}: tp={tp} exceeds {per_server[r]} GPUs/server")
        chain.append(r)
    gpus = plan.gpus
    if gpus < job.min_gpus or gpus > job.max_gpus:
        return _infeasible(f"plan uses {gpus} GPUs, job accepts {job.min_gpus}..{job.max_gpus}")
    return chain


def _evaluate_chain(
    plan: Plan,
    job: JobSpec,
    topo: Topology,
    params: PerfParams,
    link_capacity_bps: np.ndarray | None,
    link_flows: np.ndarray | None,
    include_own_flows: bool,
) -> PlanPerf | None:
    """:func:`evaluate_plan` for plans whose every stage sits in one region (None for others).

    The hot path of plan search (:func:`sfenv.model.planning.chain_plan` builds such plans): one pass
    over the stages for compute, memory, the all-reduce and the hops, with the same arithmetic, in the
    same order, as :func:`_evaluate_general`'s steps (tests compare the two bit for bit), then the
    same last step (:func:`_feasible_perf`); the windows and WAN flows as there.  One pass on purpose:
    split into :func:`_evaluate_general`'s steps, chain plans evaluated about a fifth slower.
    """
    chain = _chain_regions(plan, job, topo)
    if not isinstance(chain, list):
        return chain  # replicas across regions (None), or a malformed plan
    mode = plan.recompute
    if mode not in _MODES:
        return _infeasible(f"recompute {mode!r}: expected one of {RECOMPUTE_MODES}")
    stages = plan.stages
    sc = topo.scalars
    model = job.model
    d = stages[0].dp
    p = len(stages)
    last = p - 1
    m = plan.num_microbatches(job)
    multi = len(plan.regions) > 1
    flows = _wan_flows(plan, topo, job, link_flows, include_own_flows) if multi else None
    cap = topo.link_bw_bps if link_capacity_bps is None else link_capacity_bps
    windows = _stage_windows(plan, m, multi, chain)
    fallbacks = _fallback_windows(plan, m, multi, chain)
    b, s, h = plan.micro_batch, model.seq_len, model.hidden
    mfu, sp = params.mfu, plan.sequence_parallel
    act_bytes = ACT_BYTES * b * s * h
    act_bits = act_bytes * 8.0
    layer_params = model.layer_params
    emb = model.embedding_params
    heads, vocab = model.heads, model.vocab
    memory_of, gpu_of = sc.memory, sc.gpu
    intra_bw, intra_lat = sc.intra_bw, sc.intra_latency
    headroom = params.memory_headroom
    compute: list[float] = []
    tp_comm: list[float] = []
    mem: list[float] = []
    allreduce: list[float] = []
    hops: list[float] = []
    lats: list[float] = []
    xfers: list[float] = []
    min_headroom = math.inf
    bottleneck = math.inf
    wan_bytes = 0.0
    prev = -1
    units: dict[tuple[int, int], tuple[float, float, float, float]] = {}  # stage_unit per (region, tp)
    for k, st in enumerate(stages):
        r = chain[k]
        tp = st.tp
        layers = st.layers
        pk = layer_params * layers
        pk_mem = pk + (emb if k == 0 else 0.0) + (emb if k == last and p > 1 else 0.0)
        unit = units.get((r, tp))
        if unit is None:
            unit = units[(r, tp)] = stage_unit(gpu_of[r], b, s, h, heads, vocab, tp, mode, sp, mfu)
        per_layer, comm, head, act_layer = unit
        compute.append(per_layer * layers + (head if k == last else 0.0))
        tp_comm.append(comm * layers)
        need = 16.0 * pk_mem / tp + act_layer * layers * windows[k]
        mem.append(need)
        avail = memory_of[r] * headroom
        spare = (avail - need) / avail
        if spare < min_headroom:  # min(min_headroom, spare), without the call
            min_headroom = spare
        if need > avail:
            return _out_of_memory(k, need, avail, mem, min_headroom)
        if d > 1:  # allreduce_time of each of the t rings' 2 P_k / t bytes, written out
            nbytes = 2.0 * pk_mem / tp
            allreduce.append(2.0 * (d - 1) / d * nbytes * 8.0 / intra_bw[r] + 2.0 * (d - 1) * intra_lat[r])
        else:
            allreduce.append(0.0)
        if k:  # the hop from the previous stage
            if prev == r:
                lat, x = intra_lat[r], act_bits / intra_bw[r]
            else:
                assert flows is not None
                links, lat, _ = topo.route_for(prev, r, act_bytes)
                bw = float(min([cap[i] / max(flows[i], 1.0) for i in links]))  # _share_bps, written out
                x = act_bits / bw
                bottleneck = min(bottleneck, bw)
                wan_bytes += 2.0 * act_bytes * m * d
            hops.append(lat + x)
            lats.append(lat)
            xfers.append(x)
        prev = r
    return _feasible_perf(plan, job, sc, params, m, windows, fallbacks, compute, tp_comm, mem, min_headroom,
                          allreduce, hops, lats, xfers, bottleneck, wan_bytes)


def same_region_figures(topo: Topology, a: int, b: int) -> bool:
    """True when :func:`evaluate_plan` reads the same figures for a single-region plan in ``a`` and in ``b``.

    The GPU type (compute, memory, idle and peak power), GPUs per server and the intra-region
    bandwidth and latency; only the PUE and the region itself (the key of ``power_by_region``) may
    differ (see :func:`moved_perf`).
    """
    sc = topo.scalars
    return (sc.gpu[a] == sc.gpu[b] and sc.memory[a] == sc.memory[b] and sc.gpus_per_server[a] == sc.gpus_per_server[b]
            and sc.intra_bw[a] == sc.intra_bw[b] and sc.intra_latency[a] == sc.intra_latency[b]
            and sc.idle_w[a] == sc.idle_w[b] and sc.tdp_w[a] == sc.tdp_w[b])


def moved_perf(perf: PlanPerf, plan: Plan, topo: Topology) -> PlanPerf:
    """:func:`evaluate_plan` of ``plan`` (all stages in one region) from ``perf``, its stages' evaluation elsewhere.

    ``perf`` must be the feasible evaluation of the same stages, micro-batch, schedule, window and
    recomputation in a region with :func:`same_region_figures`: every time, memory and throughput
    figure is then the same, and only the power (the region's PUE, keyed by the region) is
    recomputed, by :func:`evaluate_plan`'s own :func:`_power_by_region` (tests compare the result
    with :func:`evaluate_plan` field by field).
    """
    stages = plan.stages
    m, compute, t_iter = perf.microbatches, perf.compute_times, perf.iter_time
    power = _power_by_region(stages, compute, m, t_iter, topo.scalars)
    return PlanPerf(
        feasible=True,
        iter_time=t_iter,
        pipeline_time=perf.pipeline_time,
        compute_times=list(compute),
        hop_times=list(perf.hop_times),
        transfer_times=list(perf.transfer_times),
        latency_times=list(perf.latency_times),
        tp_comm_times=list(perf.tp_comm_times),
        windows=list(perf.windows),
        allreduce_times=list(perf.allreduce_times),
        bubble_time=perf.bubble_time,
        microbatches=m,
        throughput=perf.throughput,
        memory_per_gpu=list(perf.memory_per_gpu),
        memory_headroom=perf.memory_headroom,
        power_by_region=power,
        bottleneck_bw_bps=perf.bottleneck_bw_bps,
        wan_bytes_per_iter=perf.wan_bytes_per_iter,
    )


def compute_lower_bound(plan: Plan, job: JobSpec, topo: Topology) -> float:
    """A lower bound on :func:`evaluate_plan`'s iteration time: ``m`` times the slowest stage's compute.

    Every schedule runs each stage's ``m`` micro-batches one after another, so the pipeline takes at
    least ``m max_k c_k``.  Computed with the fallback efficiency at 1.0 (a GPU without a kernel
    model cannot beat its peak) and the fastest GPU type of each stage: a bound, not an estimate.
    Plan search uses it to skip plans that cannot beat the best found so far.
    """
    model = job.model
    b, s, h = plan.micro_batch, model.seq_len, model.hidden
    gpu_of = topo.scalars.gpu
    mode, sp = plan.recompute, plan.sequence_parallel
    last = len(plan.stages) - 1
    worst = 0.0
    per_layer: dict[tuple[int, int], float] = {}  # layer time per (region, tp): most plans repeat both
    for k, st in enumerate(plan.stages):
        tp = st.tp
        costs = []
        for r in st.regions:
            unit = per_layer.get((r, tp))
            if unit is None:
                unit = per_layer[(r, tp)] = layer_costs(gpu_of[r], b, s, h, model.heads, tp, mode, sp, 1.0)[0]
            costs.append(unit * st.layers
                         + (lm_head_time(gpu_of[r], b, s, h, model.vocab, tp, 1.0) if k == last else 0.0))
        worst = max(worst, min(costs))
    return plan.num_microbatches(job) * worst


def stage_layer_split(layers: int, weights: Sequence[float]) -> list[int]:
    """Split ``layers`` into len(weights) positive parts proportional to ``weights`` (largest remainder)."""
    n = len(weights)
    if n > layers:
        raise ValueError(f"cannot split {layers} layers into {n} stages")
    tot = float(sum(weights))
    raw = [layers * w / tot for w in weights]
    parts = [max(1, math.floor(x)) for x in raw]
    while sum(parts) > layers:
        i = max(range(n), key=lambda j: (parts[j] - raw[j], parts[j]))
        if parts[i] > 1:
            parts[i] -= 1
        else:  # pragma: no cover - guarded by n <= layers
            break
    while sum(parts) < layers:
        i = max(range(n), key=lambda j: raw[j] - parts[j])
        parts[i] += 1
    return parts
