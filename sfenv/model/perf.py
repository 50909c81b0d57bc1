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
  delivers ``2 b s h`` bytes first; under ``sim.routing: load`` the route pinned in
  :attr:`Plan.routes` when the job started, :mod:`sfenv.model.routing`) and transfer
  ``x_k = 2 b s h / rate``, where ``rate`` is what the
  hop's transfers get while they send, each direction on its own (full-duplex) link direction,
  shared with other jobs' flows by their duty and bounded by TCP's window over the round trip
  and, where the links give one, by the measured rate of one VM pair on each hop of its route
  (:attr:`sfenv.world.topology.Topology.directed_pair_cap_bps`: the Skyplane grid is per VM pair and directed)
  (:mod:`sfenv.model.sharing`; intra-region bandwidth when both stages share a region);
- pipeline time: per schedule (1F1B, GPipe, ZB-H1, ZB-H2) with each stage's in-flight window
  ``w_k`` (1F1B p-k, plus ``extra_inflight`` per downstream WAN hop), by :mod:`sfenv.model.pipeline`:
  exact for GPipe, and for the others an exact replay of the first micro-batches extended at the
  schedule's steady period, tested against a full event-driven replay.  Under 1F1B every WAN
  round trip is exposed once a window is full (the period is at least ``R_k / w_k``, R_k the round
  trip from stage k to the last stage and back); zero-bubble schedules remove compute bubbles,
  not WAN transfer or latency, and run 1F1B's order (ZB-H2 also ZB-H1's) when that is faster.
  BACE-Pipe's stall-free rule (``x_k <= c_k``) is :attr:`PlanPerf.stall_free`;
- data-parallel gradient sync of stage k: a ring all-reduce of ``2 P_k`` bytes (bf16) over d
  replicas: ``2 (d-1)/d * bytes / bw + 2 (d-1) lat``; in one region ``t_k`` rings of ``2 P_k / t_k``
  bytes, each on the NICs of its members in a server, ``min(GPU link, g / t_k x per-GPU bandwidth)``
  for ``g`` GPUs per server (the GPU link when the ring fits in one server: :func:`dp_ring_bps`)
  or, when replicas span regions, at the narrowest rate of its WAN ring edges
  (:mod:`sfenv.model.sharing`);
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
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from sfenv.hashing import HashedKey, cached_hash, cached_value, state_without_hash
from sfenv.model.compute import RECOMPUTE_MODES, layer_costs, lm_head_time, stage_unit
from sfenv.model.hopshare import HopFlow, replay_shared
from sfenv.model.pipeline import SCHEDULES, _pipeline_time_cached, default_windows, hop_overlap, steady_period
from sfenv.model.sharing import (
    BULK,
    BURST,
    BUSY,
    VM_PAIR_CAPS,
    WAN_SHARING,
    FlowGroup,
    duties,
    empty_load,
    group_rates,
    own_load,
    self_sharing,
)
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
    "dp_ring_bps",
    "evaluate_plan",
    "flow_group_on",
    "moved_perf",
    "plan_flow_groups",
    "plan_flows",
    "plan_routes",
    "plan_wan_transfers",
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
    :param routes: pinned WAN routes: the link indices of each cross-region transfer of
        :func:`plan_wan_transfers`, in its order (:mod:`sfenv.model.routing` pins them at a job's start
        under ``sim.routing: load``).  Empty (the default): each transfer takes the static route
        :meth:`Topology.route_for` picks for its payload.  Every user of a plan's routes (the fast
        path, the link state, egress billing, the flow check) reads them from here.
    """

    job_id: int
    stages: tuple[Stage, ...]
    micro_batch: int = 1
    schedule: str = "1f1b"
    recompute: str = "none"
    extra_inflight: int = 0
    sequence_parallel: bool = False
    routes: tuple[tuple[int, ...], ...] = field(default=(), repr=False)

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
        """Everything but the job id (stages, micro-batch, schedule, recompute, window, SP, routes): a hashed key."""
        return HashedKey((self.stages, self.micro_batch, self.schedule, self.recompute, self.extra_inflight,
                          self.sequence_parallel, self.routes))

    def unrouted(self) -> Plan:
        """The same plan without pinned routes (itself when it has none)."""
        if not self.routes:
            return self
        return Plan(self.job_id, self.stages, self.micro_batch, self.schedule, self.recompute, self.extra_inflight,
                    self.sequence_parallel)

    def with_routes(self, routes: Sequence[Sequence[int]]) -> Plan:
        """The same plan with ``routes`` pinned (one link-index route per :func:`plan_wan_transfers` entry)."""
        return Plan(self.job_id, self.stages, self.micro_batch, self.schedule, self.recompute, self.extra_inflight,
                    self.sequence_parallel, tuple(tuple(int(k) for k in r) for r in routes))

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
    :param wan_streams: parallel TCP connections per WAN transfer (one replica pair's); 16 is NCCL's
        socket transport on AWS (2 threads x 8 sockets; 1 socket on other clouds), see
        :mod:`sfenv.model.sharing`.
    :param tcp_window_bytes: bytes in flight per connection and round trip: 3 MiB, half of Linux's
        default largest receive buffer (``tcp_rmem`` 6 MiB, ``tcp_adv_win_scale`` 1).
    :param wan_sharing: how transfers share the WAN, one of :data:`sfenv.model.sharing.WAN_SHARING`:
        ``v5`` (the default, env v5's and v6's: as ``v4``, but where a plan's own hops share a link its pipeline
        time is the replay's own, :func:`_at_pipeline_time`, and zero-bubble plans are replayed too, in
        their hand-crafted and greedy orders), ``v4`` (env v4's: as ``v3``, with a 1F1B or GPipe plan's
        own hops sharing their links as :func:`sfenv.model.hopshare.replay_shared` plays them), ``v3``
        (env v3's: other jobs' bursts seen as they come and go, a job's own hops as its schedule has
        them send; :mod:`sfenv.model.sharing`, docs/model.md) or ``v2`` (env v2's).
    :param skip_zero_bubble_periods: under ``v5``, replay a zero-bubble plan's steady state once and
        move on by whole periods, as 1F1B's always is (:func:`sfenv.model.hopshare.replay_shared`'s
        ``skip_periods``): the zero-bubble replays of SpanTrain's candidates on spider-64 take half the
        time (the env's steps 1.4-1.5x as many a second), its times within about 1e-9 of the full
        replay's.  On by default since env v6; false replays every period, as env v5 did (docs/model.md).
    :param vm_pair_cap: what one VM pair's measured rate (a link's ``pair_gbps_ab``/``_ba``) binds:
        ``server`` (the default since env v6), the replica pairs a server sends together
        (:func:`sending_servers`) share it, as NCCL between two GCP regions measured (docs/model.md,
        "Checked against NCCL between two GCP regions"); ``member`` (env v5's), each replica pair of a
        hop as if on a VM pair of its own.
    """

    mfu: float = 0.4
    dp_overlap: float = 0.5
    memory_headroom: float = 0.9
    wan_streams: int = 16
    tcp_window_bytes: float = 3.0 * 2**20
    wan_sharing: str = "v5"
    skip_zero_bubble_periods: bool = True
    vm_pair_cap: str = "server"

    def __post_init__(self) -> None:
        if self.wan_sharing not in WAN_SHARING:
            raise ValueError(f"wan_sharing: expected one of {list(WAN_SHARING)}, got {self.wan_sharing!r}")
        if self.vm_pair_cap not in VM_PAIR_CAPS:
            raise ValueError(f"vm_pair_cap: expected one of {list(VM_PAIR_CAPS)}, got {self.vm_pair_cap!r}")


@dataclass
class PlanPerf:
    """What the model predicts for a plan under given link shares.

    ``feasible`` is False with a ``reason`` when the plan is malformed or does not fit in memory;
    times are then ``inf``.  All times in seconds, power in watts, throughput in tokens/s.  For a
    plan across regions, ``flow_rates_bps``, ``flow_duty`` and ``flow_levels_bps`` give, per group of
    :func:`plan_flow_groups`, its rate per member while it sends, the share of the iteration it sends,
    and the rate it could get on each link of its route (:mod:`sfenv.model.sharing`); ``flow_overlap``
    how its hop directions overlap under its schedule where its own groups share a link
    (:func:`sfenv.model.pipeline.hop_overlap`), else None.
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
    flow_rates_bps: list[float] = field(default_factory=list)
    flow_duty: list[float] = field(default_factory=list)
    flow_levels_bps: list[list[float]] = field(default_factory=list)
    flow_overlap: dict[tuple[int, int], float] | None = None

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
    """WAN transfers a plan sends at once on each directed link: ``{directed link: transfers}``.

    Directed links are ``2 k`` (link k from its ``a`` end) and ``2 k + 1`` (back); see
    :class:`~sfenv.world.topology.Topology`.  Pipeline hops pair replica i of stage k with replica i
    of stage k+1; each pair in different regions sends activations forward and gradients back, one
    transfer each way.  A stage whose replicas span regions adds one ring all-reduce transfer per
    region boundary of its ring, each way round the ring.  With ``job`` the routes are the ones
    :func:`evaluate_plan` uses (the plan's pinned :attr:`Plan.routes`, else :meth:`Topology.route_for`
    of each transfer's payload; the groups of :func:`plan_flow_groups`); without it, the pinned routes
    or else the widest routes.
    """
    flows: dict[int, int] = {}
    if len(plan.regions) < 2:  # a plan inside one region puts nothing on the WAN
        return flows
    if job is not None:
        for g in plan_flow_groups(plan, topo, job):
            for e in g.links:
                flows[e] = flows.get(e, 0) + g.members
        return flows
    pairs = _wan_pairs(plan)
    routes = _checked_routes(plan, len(pairs))
    for i, (a, b, n, _) in enumerate(pairs):
        for e in topo.directed_route(a, b, routes[i] if routes else topo.route_links[a][b]):
            flows[e] = flows.get(e, 0) + n
    return flows


def _wan_pairs(plan: Plan) -> list[tuple[int, int, int, int]]:
    """``(source region, destination region, transfers, tag)`` of each cross-region traffic of a plan.

    Hop k's replica pairs forward (tag ``-1 - 2 k``) and backward (``-2 - 2 k``), then each stage's
    ring edges (tagged with the stage).
    """
    out: list[tuple[int, int, int, int]] = []
    stages = plan.stages
    for k in range(len(stages) - 1):
        for (a, b), n in stages[k].hop_pairs(stages[k + 1]).items():
            if a != b:
                out.append((a, b, n, -1 - 2 * k))
                out.append((b, a, n, -2 - 2 * k))
    for i, st in enumerate(stages):
        for a, b in _ring_edges(st.regions):
            out.append((a, b, 1, i))
    return out


def _checked_routes(plan: Plan, transfers: int) -> tuple[tuple[int, ...], ...]:
    """The plan's pinned routes (empty when none), checked to give one route per cross-region transfer.

    :raises ValueError: naming ``routes`` when their number does not match the plan's transfers.
    """
    routes = plan.routes
    if routes and len(routes) != transfers:
        raise ValueError(f"routes: the plan pins {len(routes)} routes for its {transfers} cross-region transfers")
    return routes


def plan_wan_transfers(plan: Plan, job: JobSpec) -> list[tuple[int, int, int, int, float]]:
    """Each cross-region traffic of a plan: ``(source, destination, members, tag, payload bytes)``, in route order.

    The order of :attr:`Plan.routes`: hop k's replica pairs forward (tag ``-1 - 2 k``) and backward
    (``-2 - 2 k``), then each stage's ring edges at region boundaries (tagged with the stage).  The
    payload is what the static route is chosen for: one micro-batch's boundary tensor (``2 b s h``
    bytes) for a hop, the stage's gradients (``2 P_k``) for a ring edge.
    """
    model = job.model
    act = ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden
    out: list[tuple[int, int, int, int, float]] = []
    for a, b, n, tag in _wan_pairs(plan):
        if tag < 0:
            out.append((a, b, n, tag, act))
        else:
            out.append((a, b, n, tag, 2.0 * (model.layer_params * plan.stages[tag].layers
                                             + _embedding_copies(tag, len(plan.stages)) * model.embedding_params)))
    return out


def plan_routes(plan: Plan, topo: Topology, job: JobSpec) -> tuple[tuple[int, ...], ...]:
    """The route (link indices) each cross-region transfer of :func:`plan_wan_transfers` takes.

    The plan's pinned :attr:`Plan.routes` when it has them, else :meth:`Topology.route_for` of each
    transfer's payload (the static routes).

    :raises ValueError: if pinned routes do not match the plan's transfers.
    """
    transfers = plan_wan_transfers(plan, job)
    routes = _checked_routes(plan, len(transfers))
    if routes:
        return routes
    return tuple(topo.route_for(a, b, payload)[0] for a, b, _, _, payload in transfers)


#: :func:`plan_flow_groups` memos, one per topology (a topology's routes never change)
_GROUP_MEMOS: weakref.WeakKeyDictionary[Topology, dict[tuple[object, object], tuple[FlowGroup, ...]]] = \
    weakref.WeakKeyDictionary()


def _hop_rtt_s(topo: Topology, links: Sequence[int]) -> float:
    """The round trip that bounds a transfer's TCP window: its route's longest hop's, seconds.

    A route through other regions is relayed hop by hop (each relay terminates the connections, as
    Skyplane's overlay does), so each hop's window bound applies on its own and the longest round
    trip sets the pace.
    """
    lat = topo.link_latency_s
    return 2.0 * max([float(lat[k]) for k in links]) if links else 0.0


def flow_group_on(
    plan: Plan, job: JobSpec, topo: Topology, transfer: tuple[int, int, int, int, float], links: tuple[int, ...],
    latency_s: float | None = None,
) -> FlowGroup:
    """The :class:`~sfenv.model.sharing.FlowGroup` of one :func:`plan_wan_transfers` entry sent over ``links``.

    :param latency_s: the route's one-way latency (default: the sum of its links').
    :raises ValueError: if ``links`` is not a route from the transfer's source to its destination.
    """
    a, b, n, tag, payload = transfer
    lat = float(sum(topo.link_latency_s[k] for k in links)) if latency_s is None else latency_s
    route = topo.directed_route(a, b, links)
    if tag < 0:  # a hop's direction: 2 k + direction = -1 - tag
        return FlowGroup(BURST, -1 - tag, route, n, 8.0 * payload, plan.num_microbatches(job),
                         _hop_rtt_s(topo, links), lat, plan.schedule == "gpipe", sending_servers(plan, topo, a, n, tag))
    d = plan.dp
    return FlowGroup(BULK, -1, route, 1, 8.0 * payload / d, 2 * (d - 1), _hop_rtt_s(topo, links), lat, servers=1)


def sending_servers(plan: Plan, topo: Topology, region: int, members: int, tag: int) -> int:
    """Servers of ``region`` that a hop direction's ``members`` replica pairs send from, packed.

    The sending stage (hop k's forward: stage k; its backward: stage k + 1) puts each replica on
    ``tp`` GPUs of one server, so a server holds ``GPUs per server // tp`` of them and ``members``
    replicas fill ``ceil(members / that)`` servers at the least.  Only :attr:`PerfParams.vm_pair_cap`
    ``server`` uses it.
    """
    hop, direction = divmod(-1 - tag, 2)
    per_server = max(1, int(topo.scalars.gpus_per_server[region]) // plan.stages[hop + direction].tp)
    return -(-members // per_server)


def plan_flow_groups(plan: Plan, topo: Topology, job: JobSpec) -> tuple[FlowGroup, ...]:
    """The WAN traffic of a plan, as :class:`~sfenv.model.sharing.FlowGroup` s (empty inside one region).

    Per pipeline hop k and direction (``key = 2 k`` forward, ``2 k + 1`` backward), one group per
    pair of regions, with the hop's replica pairs between them as members: ``m`` transfers of one
    micro-batch's boundary tensor (``2 b s h`` bytes) per iteration.  Per stage whose replicas span
    regions, one group per ring edge at a region boundary (each way round the ring; two edges for two
    regions, one each way): ``2 (d - 1)`` steps of ``2 P_k / d`` bytes.  Each goes over its pinned
    route (:attr:`Plan.routes`) or, with none pinned, the route :meth:`Topology.route_for` picks for
    its payload.  Memoised per plan (routes included) and job shape.

    :raises ValueError: if the plan's pinned routes do not match its transfers or are not routes
        between their regions.
    """
    if len(plan.regions) < 2:
        return ()
    memo = _GROUP_MEMOS.get(topo)
    if memo is None:
        memo = _GROUP_MEMOS[topo] = {}
    key = (plan.shape_key, job.shape_key)
    hit = memo.get(key)
    if hit is not None:
        return hit
    transfers = plan_wan_transfers(plan, job)
    routes = _checked_routes(plan, len(transfers))
    groups: list[FlowGroup] = []
    for i, tr in enumerate(transfers):
        if routes:
            groups.append(flow_group_on(plan, job, topo, tr, routes[i]))
        else:
            links, lat, _ = topo.route_for(tr[0], tr[1], tr[4])
            groups.append(flow_group_on(plan, job, topo, tr, links, lat))
    res = tuple(groups)
    if len(memo) >= 1 << 14:
        memo.clear()
    memo[key] = res
    return res


def _embedding_copies(k: int, p: int) -> int:
    """Copies of the tied embedding stage k of p holds: the first stage's, and the last stage's when p > 1."""
    return (1 if k == 0 else 0) + (1 if k == p - 1 and p > 1 else 0)


def _ring_edges(regs: tuple[int, ...]) -> list[tuple[int, int]]:
    """Region-boundary edges of a ring all-reduce over ``regs``, in ring order.

    Links are full duplex, so a ring over two regions sends one way on its first edge and back on
    its second: two edges, each on its own direction.
    """
    if len(regs) < 2:
        return []
    return [(regs[i], regs[(i + 1) % len(regs)]) for i in range(len(regs))]


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


def dp_ring_bps(sc: Scalars, r: int, tp: int, d: int) -> float:
    """Bandwidth of each of a stage's ``tp`` data-parallel rings of ``d`` replicas in region ``r``, bit/s.

    The input of :func:`allreduce_time` for the ring's ``2 P_k / t`` bytes.  A stage's GPUs are taken
    as packed into servers in Megatron's rank order (tensor ranks inside a server, as the model
    already requires, then data-parallel ranks), so a server of ``g`` GPUs holds ``n = g // t``
    members of each of the stage's ``t`` rings:

    - ``d <= n``: the ring is inside one server and runs at the GPU's server link (NVLink or PCIe,
      :attr:`GPUSpec.link_bps`);
    - otherwise it crosses servers.  Each GPU has its own NIC at the region's per-GPU bandwidth
      (``intra_bw_gbps``; DGX A100: eight single-port 200 Gb/s HDR InfiniBand adapters for eight GPUs,
      NVIDIA DGX A100 User Guide DU-09821-001, "Component Specifications"), and NCCL splits a
      collective into channels that enter and leave a server through different NICs, the hops
      inside the server on the GPU link: "NCCL is able to aggregate the bandwidth of multiple NICs,
      but that requires GPUs to be connected with NVLink with a bandwidth that matches or exceeds the
      sum of the bandwidth of all NICs" (S. Jeaugey, NCCL maintainer, github.com/NVIDIA/nccl/issues/412,
      2020-10-28; nccl-tests' all-reduce bus bandwidth across A100 servers with four HDR NICs each
      reaches 85-96 GB/s of the NICs' 100, github.com/NVIDIA/nccl-tests/issues/119).  So each ring
      gets its ``n`` members' NICs, bounded by the GPU link: ``min(link, n x intra_bw)``; a server
      holding fewer members (the last, with ``d mod n``) sets the pace.

    Before, every ring was charged one GPU's network bandwidth; ``t = g`` (one member per server)
    still is.
    """
    per_server = sc.gpus_per_server[r] // tp
    if d <= per_server:
        return sc.tp_bw[r]
    members = d % per_server or per_server
    return min(sc.tp_bw[r], members * sc.intra_bw[r])


def evaluate_plan(
    plan: Plan,
    job: JobSpec,
    topo: Topology,
    params: PerfParams,
    link_capacity_bps: np.ndarray | None = None,
    link_load: np.ndarray | None = None,
    own_duty: Sequence[float] | None = None,
    stage_slowdown: Sequence[float] | None = None,
) -> PlanPerf:
    """Predict iteration time, throughput, memory and power of ``plan`` for ``job``.

    :param link_capacity_bps: current capacity of each link (bandwidth x fluctuation factor, the same
        each way) or of each directed link; defaults to the nominal bandwidths.
    :param link_load: *other* jobs' load on each directed link (the layout of
        :func:`sfenv.model.sharing.empty_load`; default none).  The plan's own WAN transfers
        (:func:`plan_flow_groups`) share the links with it as :mod:`sfenv.model.sharing` describes.
    :param own_duty: the share of the iteration each of the plan's groups spends sending, when known
        (a running job's, from :class:`sfenv.sim.links.LinkState`); by default it follows from this
        evaluation's own iteration time (it matters only where the plan's own groups cross a common link).
    :param stage_slowdown: a factor per stage (at least 1) on its compute time per micro-batch, its
        tensor-parallel part included: a straggling GPU slows the stage it serves, which runs at its
        slowest GPU (synchronous training; Lin et al., OSDI 2025; Wu et al., FALCON, 2024).  None: none slowed.
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
    wan = _Wan(plan, job, topo, params, link_capacity_bps, link_load, own_duty) if len(plan.regions) > 1 else None
    if stage_slowdown is not None and len(stage_slowdown) != p:
        return _infeasible(f"stage_slowdown has {len(stage_slowdown)} factors, plan has {p} stages")
    slow = None if stage_slowdown is None or all(f == 1.0 for f in stage_slowdown) else tuple(stage_slowdown)
    perf = _evaluate_chain(plan, job, topo, params, wan, slow)
    if perf is None:
        perf = _evaluate_general(plan, job, topo, params, wan, slow)
    if wan is not None and perf.feasible and params.wan_sharing != "v2" and plan.schedule in _ZERO_BUBBLE_FALLBACKS \
            and self_sharing(wan.groups):
        twin = evaluate_plan(replace(plan, schedule=_ZERO_BUBBLE_FALLBACKS[plan.schedule][0]), job, topo, params,
                             link_capacity_bps, link_load, own_duty, stage_slowdown)
        return _fastest_fallback(perf, twin)
    return perf


def _fastest_fallback(perf: PlanPerf, twin: PlanPerf) -> PlanPerf:
    """A zero-bubble plan whose own hops share a link, under ``v3``: its evaluation or its first fallback's, the faster.

    A zero-bubble runtime may run its fallbacks' orders within its memory
    (:data:`_ZERO_BUBBLE_FALLBACKS`); the pipeline replay already takes them, but at the plan's own
    hop rates.  Under ``v3`` a 1F1B order's hops meet as its schedule has them send
    (:func:`_schedule_overlap`), while a zero-bubble order's stay independent flows (the sweep replays
    1F1B and GPipe only; sweeping a zero-bubble plan in 1F1B's order made it up to 34 % optimistic
    alone against the flow-level check).  So the first fallback is evaluated as its own plan, with
    its own overlap (it takes the next fallback so in turn: ZB-H2 -> ZB-H1 -> 1F1B), and the faster
    is taken, as the flow-level check plays a zero-bubble plan
    (:func:`sfenv.model.flowcheck.zero_bubble_candidates`).  ZB-H2 is then never modelled slower than
    ZB-H1, nor ZB-H1 than 1F1B; without it, ZB-H1 was up to 45 % slower than 1F1B on plans whose 1F1B
    time the check confirms (2026-11-27, docs/model.md, "Zero-bubble plans under v3").
    """
    return twin if twin.feasible and twin.iter_time < perf.iter_time else perf


def _slowed(times: list[float], slow: Sequence[float] | None) -> list[float]:
    """Per-stage ``times`` times each stage's straggler factor (``times`` itself when none is slowed)."""
    if slow is None:
        return times
    return [t * f for t, f in zip(times, slow)]


class _Wan:
    """The WAN side of one evaluation: the plan's flow groups, the link state they share, and their rates.

    :meth:`solve` runs the evaluation's last steps (``assemble``: hop and all-reduce times from the
    rates, then the iteration time) once, or twice where the plan's own groups that do not send
    together cross a common directed link: their duties, and so their rates, follow from the
    iteration time of the first pass (or from ``own_duty``).
    """

    __slots__ = ("_groups", "cap", "job", "load", "own_duty", "params", "plan", "topo")

    def __init__(self, plan: Plan, job: JobSpec, topo: Topology, params: PerfParams,
                 link_capacity_bps: np.ndarray | None, link_load: np.ndarray | None,
                 own_duty: Sequence[float] | None) -> None:
        self.plan, self.job, self.topo = plan, job, topo
        self._groups: tuple[FlowGroup, ...] | None = None
        if link_capacity_bps is None:
            self.cap = topo.directed_bw_bps
        elif len(link_capacity_bps) == topo.num_directed:
            self.cap = link_capacity_bps
        else:
            self.cap = np.repeat(link_capacity_bps, 2)
        if link_load is None:
            link_load = _NO_LOAD.get(topo.num_directed)
            if link_load is None:
                link_load = _NO_LOAD[topo.num_directed] = empty_load(topo.num_directed)
        self.load: np.ndarray = link_load
        self.params = params
        self.own_duty = own_duty

    @property
    def groups(self) -> tuple[FlowGroup, ...]:
        """The plan's flow groups (:func:`plan_flow_groups`), found when first asked for (after the plan's checks)."""
        if self._groups is None:
            self._groups = plan_flow_groups(self.plan, self.topo, self.job)
        return self._groups

    def rates(self, own: Sequence[Sequence[tuple[float, float]]] | None) -> tuple[list[float], list[list[float]]]:
        """Rates and per-link levels of the groups (:func:`sfenv.model.sharing.group_rates`)."""
        pr = self.params
        topo = self.topo
        member_cap = topo.directed_pair_cap_bps if topo.has_pair_caps else None
        return group_rates(self.groups, self.cap, self.load, own, pr.wan_streams, pr.tcp_window_bytes, member_cap,
                           pr.wan_sharing != "v2", pr.vm_pair_cap == "server")

    def solve(self, assemble: Callable[[list[float]], PlanPerf], gpipe: bool) -> PlanPerf:
        """The plan's evaluation: ``assemble(rates)`` at the groups' rates, with their duties.

        Where the plan's own groups that do not send together cross a common link, a second pass
        takes their overlap (:func:`sfenv.model.sharing.own_load`) from the first pass's iteration
        time (or from ``own_duty``) and, under the ``v3`` sharing model, for its hops from a replay of
        its schedule at the first pass's rates (:func:`_schedule_overlap`).

        :param gpipe: the plan runs GPipe (its forward and backward transfers never send together).
        """
        groups = self.groups
        rates, levels = self.rates(None)
        perf = assemble(rates)
        overlap = None
        if self_sharing(groups):
            duty = list(self.own_duty) if self.own_duty is not None else duties(groups, rates, perf.iter_time)
            replayed = _REPLAYED.get(self.params.wan_sharing, ())
            if self.plan.schedule in replayed and perf.feasible \
                    and len(self.plan.stages) > 1:
                return self._solve_replayed(assemble, gpipe, perf, duty)
            if self.params.wan_sharing != "v2":
                overlap = _schedule_overlap(self.plan, groups, rates, perf)
            own = own_load(groups, duty, perf.iter_time, _phases(perf, gpipe), self.params.dp_overlap, overlap)
            rates, levels = self.rates(own)
            perf = assemble(rates)
        perf.flow_rates_bps = rates
        perf.flow_levels_bps = levels
        perf.flow_duty = duties(groups, rates, perf.iter_time)
        perf.flow_overlap = overlap
        return perf

    def _solve_replayed(self, assemble: Callable[[list[float]], PlanPerf], gpipe: bool, first: PlanPerf,
                        duty: list[float]) -> PlanPerf:
        """:meth:`solve`'s second pass under ``v4``: the plan's own hops share links as its schedule plays them.

        The rings and the other jobs' load are taken as under ``v3`` (a pass with the hops' own overlap
        left out); then :func:`sfenv.model.hopshare.replay_shared` plays the schedule with every hop
        member bounded by that pass's rate and sharing its links max-min with the plan's other hops
        and the other jobs' flows (:func:`sfenv.model.sharing.max_min_rates`), and each hop group's
        rate becomes its bits over its mean played transfer time.  On the links the plan's other hops
        cross, a group's level falls with its rate (it still takes a full share there, so the load it
        exports counts it present), and the replay's co-sending shares are its ``flow_overlap``.
        Measured against the flow-level check on 2026-11-27 (docs/model.md, "Deep 1F1B chains").
        """
        groups = self.groups
        apart = {(g.key, h.key): 0.0 for g in groups for h in groups if g.kind == h.kind == BURST and g.key != h.key}
        own = own_load(groups, duty, first.iter_time, _phases(first, gpipe), self.params.dp_overlap, apart)
        bound, levels = self.rates(own)
        perf = assemble(bound)
        if not perf.feasible:  # pragma: no cover - rates never change memory feasibility
            return perf
        burst = [i for i, g in enumerate(groups) if g.kind == BURST]
        flows = [HopFlow(groups[i].key, groups[i].bits, groups[i].links, groups[i].members, bound[i]) for i in burst]
        skip = self.plan.schedule not in _ORDERS or self.params.skip_zero_bubble_periods
        played = min((replay_shared(perf.compute_times, perf.latency_times, perf.transfer_times, perf.microbatches,
                                    self.plan.schedule, perf.windows, flows, self.cap, self.load[BUSY], order=order,
                                    skip_periods=skip)
                      for order in _ORDERS.get(self.plan.schedule, ("hand",))), key=lambda r: r.pipeline_s)
        rates = list(bound)
        for i, x in zip(burst, played.transfer_s):
            if x > 0.0:  # nan: the hop never sent (cannot happen once m >= 1)
                rates[i] = min(bound[i], groups[i].bits / x)
        perf = assemble(rates)
        if self.params.wan_sharing == "v5" and perf.feasible:
            perf = _at_pipeline_time(perf, played.pipeline_s, self.plan, self.job, self.topo.scalars, self.params)
        crossed = {(i, e) for i, g in enumerate(groups) for h in groups
                   if g.kind == h.kind == BURST and g.key != h.key for e in set(g.links) & set(h.links)}
        perf.flow_rates_bps = rates
        perf.flow_levels_bps = [[lv * rates[i] / bound[i] if (i, e) in crossed and bound[i] > 0 else lv
                                 for e, lv in zip(g.links, levels[i])] for i, g in enumerate(groups)]
        perf.flow_duty = duties(groups, rates, perf.iter_time)
        perf.flow_overlap = played.overlap or None
        return perf


#: per sharing model, the schedules whose plans replay their own hops' sharing (:meth:`_Wan._solve_replayed`)
_REPLAYED: dict[str, tuple[str, ...]] = {"v4": ("1f1b", "gpipe"), "v5": ("1f1b", "gpipe", "zb-h1", "zb-h2")}
#: the orders a zero-bubble plan is replayed in under ``v5``: the faster is taken, as
#: :func:`sfenv.model.pipeline.replay_pipeline` (and the flow-level check) take it
_ORDERS = {"zb-h1": ("hand", "greedy"), "zb-h2": ("hand", "greedy")}


def _at_pipeline_time(perf: PlanPerf, t_pp: float, plan: Plan, job: JobSpec, sc: Scalars,
                      params: PerfParams) -> PlanPerf:
    """``perf`` with pipeline time ``t_pp`` (the ``v5`` model's: the replay's own) and what follows from it.

    The iteration adds the all-reduce as :func:`_iteration_time` does (:func:`_after_pipeline`); the
    bubble, throughput and power follow from the new times.  The hops' rates, transfer and latency
    times stay those the replay played.
    """
    m = perf.microbatches
    _, bubble, t_iter = _after_pipeline(t_pp, perf.compute_times, perf.allreduce_times, m, params)
    return replace(perf, pipeline_time=t_pp, iter_time=t_iter, bubble_time=bubble,
                   throughput=job.tokens_per_iteration / t_iter,
                   power_by_region=_power_by_region(plan.stages, perf.compute_times, m, t_iter, sc))


def _schedule_overlap(
    plan: Plan, groups: Sequence[FlowGroup], rates: Sequence[float], perf: PlanPerf,
) -> dict[tuple[int, int], float] | None:
    """How the plan's hop directions overlap under its schedule at these rates.

    :func:`sfenv.model.pipeline.hop_overlap` replays the schedule.  Each hop direction's transfer
    time is its slowest group's (:func:`_wan_hops`), a hop inside a region keeps its own.  None for
    one stage, an infeasible first pass, or a zero-bubble schedule (the replay of its greedy order
    is not a fixed channel sequence; its hops stay independent).
    """
    p = len(plan.stages)
    if p < 2 or plan.schedule not in ("1f1b", "gpipe") or not perf.feasible:
        return None
    fwd = list(perf.transfer_times)
    bwd = list(perf.transfer_times)
    for k, hop in enumerate(_wan_hops(groups, rates, p - 1)):
        if hop is not None:
            fwd[k], bwd[k] = hop[1], hop[2]
    pairs = {(g.key, h.key) for g in groups for h in groups
             if g.kind == h.kind == BURST and g.key != h.key and set(g.links) & set(h.links)}
    return hop_overlap(perf.compute_times, perf.latency_times, fwd, bwd, perf.microbatches, plan.schedule, perf.windows,
                       pairs)


def _phases(perf: PlanPerf, gpipe: bool) -> tuple[float, float, float]:
    """Shares of the iteration the forward pass, the backward pass and the whole pipeline take.

    GPipe's forward pass is its flow shop of forward operations and transfers (the closed form of
    :func:`sfenv.model.pipeline.pipeline_time`); under the other schedules both directions stream
    all through the pipeline.
    """
    t, t_pp = perf.iter_time, perf.pipeline_time
    pipe = t_pp / t if t > 0 else 1.0
    if not gpipe:
        return pipe, pipe, pipe
    c, lat, x, m = perf.compute_times, perf.latency_times, perf.transfer_times, perf.microbatches
    fwd = sum(c) / 3.0 + sum(lat) + sum(x) + (m - 1) * max(max(c) / 3.0, max(x, default=0.0))
    fwd = min(fwd, t_pp)
    return fwd / t, (t_pp - fwd) / t, pipe


#: an empty load array per number of directed links (read-only use)
_NO_LOAD: dict[int, np.ndarray] = {}


def _wan_hops(
    groups: Sequence[FlowGroup], rates: Sequence[float], hops: int,
) -> list[tuple[float, float, float] | None]:
    """Per pipeline hop, ``(latency, forward transfer time, backward transfer time)`` over the WAN, or None.

    Each direction's time is that of its slowest group (the larger latency + transfer); the latency
    is the larger of the two directions'.
    """
    worst: list[list[tuple[float, float] | None]] = [[None, None] for _ in range(hops)]
    for g, r in zip(groups, rates):
        if g.kind != BURST:
            continue
        x = g.bits / r
        cur = worst[g.key >> 1][g.key & 1]
        if cur is None or g.latency_s + x > cur[0] + cur[1]:
            worst[g.key >> 1][g.key & 1] = (g.latency_s, x)
    out: list[tuple[float, float, float] | None] = []
    for fwd, bwd in worst:
        if fwd is None or bwd is None:
            out.append(None)
        else:
            out.append((fwd[0] if fwd[0] > bwd[0] else bwd[0], fwd[1], bwd[1]))
    return out


def _wan_totals(groups: Sequence[FlowGroup], rates: Sequence[float]) -> tuple[float, float]:
    """``(narrowest rate of any group, WAN bytes per iteration)``."""
    bottleneck = math.inf
    total = 0.0
    for g, r in zip(groups, rates):
        bottleneck = min(bottleneck, r)
        total += g.members * g.bits / 8.0 * g.transfers
    return bottleneck, total


def _evaluate_general(
    plan: Plan,
    job: JobSpec,
    topo: Topology,
    params: PerfParams,
    wan: _Wan | None,
    slow: Sequence[float] | None = None,
) -> PlanPerf:
    """:func:`evaluate_plan` for any placement (replicas of a stage may span regions).

    The plan-wide checks (stages, schedule, micro-batch, window, layer count) are done by the caller.
    The model's steps, one function each: the stages' checks (:func:`_stage_problem`), compute and
    memory (:func:`_stage_costs`: a stage that does not fit ends the evaluation), communication
    (:func:`_hop_times`, then :func:`_allreduce_times`, at the rates of :class:`_Wan`), and the
    iteration time and power of :func:`_feasible_perf`.
    """
    problem = _stage_problem(plan, job, topo)
    if problem is not None:
        return problem
    if plan.recompute not in _MODES:
        return _infeasible(f"recompute {plan.recompute!r}: expected one of {RECOMPUTE_MODES}")
    stages = plan.stages
    sc = topo.scalars
    m = plan.num_microbatches(job)
    windows = _stage_windows(plan, m, wan is not None)
    fallbacks = _fallback_windows(plan, m, wan is not None)
    costs = _stage_costs(plan, job, sc, params, windows)
    if isinstance(costs, PlanPerf):
        return costs  # a stage does not fit
    compute, tp_comm, mem, min_headroom, stage_params = costs
    compute, tp_comm = _slowed(compute, slow), _slowed(tp_comm, slow)
    model = job.model
    act_bytes = ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden  # one micro-batch's boundary activation

    def assemble(rates: list[float]) -> PlanPerf:
        groups = wan.groups if wan is not None else ()
        hops, lats, xfers, xback = _hop_times(stages, topo, act_bytes, _wan_hops(groups, rates, len(stages) - 1))
        allreduce = _allreduce_times(stages, topo, stage_params, groups, rates)
        bottleneck, wan_bytes = _wan_totals(groups, rates)
        return _feasible_perf(plan, job, sc, params, m, windows, fallbacks, compute, tp_comm, mem, min_headroom,
                              allreduce, hops, lats, xfers, xback, bottleneck, wan_bytes)

    if wan is None:
        return assemble([])
    return wan.solve(assemble, plan.schedule == "gpipe")


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
    stages: Sequence[Stage], topo: Topology, act_bytes: float, wan: Sequence[tuple[float, float, float] | None],
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Each pipeline hop's time per micro-batch, each way: its slowest replica pair's latency and transfers.

    A pair inside one region uses the intra-region bandwidth; the pairs across regions are the hop's
    WAN flow groups, whose slowest groups ``wan[k]`` (:func:`_wan_hops`) stand for them.  Each
    direction takes its slowest pair (latency + transfer); the hop's latency is the larger of the two.

    :return: ``(hop times (latency + the slower direction's transfer), latencies, forward transfer
        times, backward transfer times)``.
    """
    sc = topo.scalars
    intra_bw, intra_lat = sc.intra_bw, sc.intra_latency
    act_bits = act_bytes * 8.0
    hops: list[float] = []
    lats: list[float] = []
    xfers: list[float] = []
    xback: list[float] = []
    for k in range(len(stages) - 1):
        src, dst = stages[k], stages[k + 1]
        if len(src.placement) == 1 and len(dst.placement) == 1:
            pairs: Iterable[tuple[int, int]] = ((src.placement[0][0], dst.placement[0][0]),)
        else:
            pairs = src.hop_pairs(dst)
        f_sum, f_lat, f_x = -1.0, 0.0, 0.0
        for a, b in pairs:
            if a == b and intra_lat[a] + act_bits / intra_bw[a] > f_sum:
                f_lat, f_x = intra_lat[a], act_bits / intra_bw[a]
                f_sum = f_lat + f_x
        b_sum, b_lat, b_x = f_sum, f_lat, f_x
        cross = wan[k]
        if cross is not None:
            if cross[0] + cross[1] > f_sum:
                f_sum, f_lat, f_x = cross[0] + cross[1], cross[0], cross[1]
            if cross[0] + cross[2] > b_sum:
                b_sum, b_lat, b_x = cross[0] + cross[2], cross[0], cross[2]
        lat = f_lat if f_lat > b_lat else b_lat
        hops.append(lat + (f_x if f_x > b_x else b_x))
        lats.append(lat)
        xfers.append(f_x)
        xback.append(b_x)
    return hops, lats, xfers, xback


def _allreduce_times(
    stages: Sequence[Stage], topo: Topology, stage_params: Sequence[float], groups: Sequence[FlowGroup],
    rates: Sequence[float],
) -> list[float]:
    """Each stage's data-parallel gradient sync: a ring all-reduce of its bf16 gradients over its ``d`` replicas.

    In one region, each of the stage's ``t`` rings carries ``2 P_k / t`` bytes at :func:`dp_ring_bps`
    (its servers' NICs, the GPU link inside a server); replicas across regions sync over the WAN at
    the narrowest rate of the ring's edges (its bulk flow groups, in stage order) and the largest
    of their latencies.
    """
    sc = topo.scalars
    intra_lat = sc.intra_latency
    d = stages[0].dp
    allreduce: list[float] = []
    ring = [(g, r) for g, r in zip(groups, rates) if g.kind == BULK]
    at = 0
    for k, st in enumerate(stages):
        grad_bytes = 2.0 * stage_params[k]
        regs = st.regions
        if len(regs) == 1:
            r = regs[0]
            allreduce.append(allreduce_time(grad_bytes / st.tp, d, dp_ring_bps(sc, r, st.tp, d), intra_lat[r])
                             if d > 1 else 0.0)
            continue
        bw = min(float(topo.intra_bw_bps[r]) * st.tp for r in regs)
        lat = 0.0
        for g, rate in ring[at:at + len(regs)]:  # the stage's ring edges, one per region boundary
            bw = min(bw, rate)
            lat = max(lat, g.latency_s)
        at += len(regs)
        allreduce.append(allreduce_time(grad_bytes, d, bw, lat))
    return allreduce


def _feasible_perf(
    plan: Plan, job: JobSpec, sc: Scalars, params: PerfParams, m: int, windows: Sequence[int],
    fallbacks: tuple[tuple[str, tuple[int, ...]], ...], compute: list[float], tp_comm: list[float], mem: list[float],
    min_headroom: float, allreduce: list[float], hops: list[float], lats: list[float], xfers: list[float],
    xback: list[float], bottleneck: float, wan_bytes: float,
) -> PlanPerf:
    """The :class:`PlanPerf` of a plan that fits, from its per-stage and per-hop figures (both paths' last step).

    Adds the pipeline and iteration time (:func:`_iteration_time`; ``fallbacks`` as
    :func:`_fallback_windows` gives them), the throughput and the power (:func:`_power_by_region`).
    ``xfers`` and ``xback`` are each hop's forward and backward transfer times;
    :attr:`PlanPerf.transfer_times` holds the slower of the two.
    """
    t_pp, bubble, t_iter = _iteration_time(compute, lats, xfers, xback, allreduce, m, plan.schedule, windows, params,
                                           fallbacks)
    if xfers != xback:
        xfers = [f if f > b else b for f, b in zip(xfers, xback)]
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
    compute: list[float], lats: list[float], xfers: list[float], xback: list[float], allreduce: list[float], m: int,
    schedule: str, windows: Sequence[int], params: PerfParams, fallbacks: tuple[tuple[str, tuple[int, ...]], ...] = (),
) -> tuple[float, float, float]:
    """Pipeline time, bubble and iteration time (the all-reduce overlapped by ``dp_overlap``).

    :param fallbacks: other schedules the plan's runtime may run instead, with their windows (a
        zero-bubble schedule's :data:`_ZERO_BUBBLE_FALLBACKS`): the pipeline time is the fastest.
    """
    if len(compute) == 1:
        t_pp = m * compute[0]
    elif xfers == xback:
        c, lat, x = tuple(compute), tuple(lats), tuple(xfers)
        t_pp = _pipeline_time_cached(c, lat, x, m, schedule, tuple(windows))
        for other, other_windows in fallbacks:
            t_pp = min(t_pp, _pipeline_time_cached(c, lat, x, m, other, other_windows))
    else:
        t_pp = _pipeline_time_two_ways(compute, lats, xfers, xback, m, schedule, windows)
        for other, other_windows in fallbacks:
            t_pp = min(t_pp, _pipeline_time_two_ways(compute, lats, xfers, xback, m, other, other_windows))
    return _after_pipeline(t_pp, compute, allreduce, m, params)


def _after_pipeline(t_pp: float, compute: Sequence[float], allreduce: Sequence[float], m: int,
                    params: PerfParams) -> tuple[float, float, float]:
    """``(pipeline time, bubble, iteration time)`` from a pipeline time: the all-reduce overlapped by ``dp_overlap``."""
    bubble = max(0.0, t_pp - m * max(compute))
    ar = max(allreduce)
    w = params.dp_overlap
    return t_pp, bubble, t_pp + (1.0 - w) * ar + w * max(0.0, ar - t_pp)


def _pipeline_time_two_ways(
    compute: list[float], lats: list[float], xfers: list[float], xback: list[float], m: int, schedule: str,
    windows: Sequence[int],
) -> float:
    """Pipeline time when a hop's transfers take longer one way than the other (the load differs per direction).

    :mod:`sfenv.model.pipeline` takes one transfer time per hop.  GPipe is two flow shops, one per
    direction, so its closed form (:func:`sfenv.model.pipeline.pipeline_time`'s) takes each
    direction's times exactly.  For the other schedules the pipeline is replayed with each hop's
    mean of the two ways (exact for every round trip, which crosses the hop both ways), and where
    one direction's channel is slower than that schedule's steady period
    (:func:`sfenv.model.pipeline.steady_period`), the channel paces the remaining ``m - 1``
    micro-batches instead.
    """
    if schedule == "gpipe":
        c_sum, c_max = sum(compute), max(compute)
        fwd = c_sum / 3.0 + sum(lats) + sum(xfers) + (m - 1) * max(c_max / 3.0, max(xfers))
        bwd = 2.0 * c_sum / 3.0 + sum(lats) + sum(xback) + (m - 1) * max(2.0 * c_max / 3.0, max(xback))
        return fwd + bwd
    mean = tuple([(f + b) / 2.0 for f, b in zip(xfers, xback)])
    c, lt, w = tuple(compute), tuple(lats), tuple(windows)
    t = _pipeline_time_cached(c, lt, mean, m, schedule, w)
    period = steady_period(c, lt, mean, schedule, w)
    slowest = max(max(xfers), max(xback))
    if slowest > period:
        t += (m - 1) * (slowest - period)
    return t


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
    wan: _Wan | None,
    slow: Sequence[float] | None = None,
) -> PlanPerf | None:
    """:func:`evaluate_plan` for plans whose every stage sits in one region (None for others).

    The hot path of plan search (:func:`sfenv.model.planning.chain_plan` builds such plans): one pass
    over the stages for compute, memory, the all-reduce and the hops, with the same arithmetic, in the
    same order, as :func:`_evaluate_general`'s steps (tests compare the two bit for bit), then the
    same last step (:func:`_feasible_perf`); the windows and WAN flows as there (the cross-region hops
    filled in from :class:`_Wan`'s rates).  One pass on purpose: split into :func:`_evaluate_general`'s
    steps, chain plans evaluated about a fifth slower.
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
    windows = _stage_windows(plan, m, wan is not None, chain)
    fallbacks = _fallback_windows(plan, m, wan is not None, chain)
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
            ring_bps = dp_ring_bps(sc, r, tp, d)
            allreduce.append(2.0 * (d - 1) / d * nbytes * 8.0 / ring_bps + 2.0 * (d - 1) * intra_lat[r])
        else:
            allreduce.append(0.0)
        if k:  # the hop from the previous stage (across regions: filled in below, from the rates)
            lat, x = (intra_lat[r], act_bits / intra_bw[r]) if prev == r else (0.0, 0.0)
            hops.append(lat + x)
            lats.append(lat)
            xfers.append(x)
        prev = r
    compute, tp_comm = _slowed(compute, slow), _slowed(tp_comm, slow)
    if wan is None:
        return _feasible_perf(plan, job, sc, params, m, windows, fallbacks, compute, tp_comm, mem, min_headroom,
                              allreduce, hops, lats, xfers, xfers, math.inf, 0.0)
    groups = wan.groups

    def assemble(rates: list[float]) -> PlanPerf:
        h, lt, xf, xb = list(hops), list(lats), list(xfers), list(xfers)
        for k, cross in enumerate(_wan_hops(groups, rates, p - 1)):
            if cross is not None:
                lt[k], xf[k], xb[k] = cross
                h[k] = cross[0] + (cross[1] if cross[1] > cross[2] else cross[2])
        bottleneck, wan_bytes = _wan_totals(groups, rates)
        return _feasible_perf(plan, job, sc, params, m, windows, fallbacks, compute, tp_comm, mem, min_headroom,
                              allreduce, h, lt, xf, xb, bottleneck, wan_bytes)

    return wan.solve(assemble, plan.schedule == "gpipe")


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
