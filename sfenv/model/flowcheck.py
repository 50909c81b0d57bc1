"""The independent check of WAN sharing: an event-driven, flow-level simulation of jobs that share links.

:mod:`sfenv.model.sharing` predicts a transfer's rate from *expected* load (duties, average rates);
this module plays the same jobs transfer by transfer, as :func:`sfenv.model.pipeline.replay_pipeline`
plays one pipeline operation by operation, and shares nothing with the fast path's rate arithmetic:

- each job runs its plan iteration after iteration: every distinct replica pipeline (replicas whose
  stages sit in the same regions run identically, so one stands for all, with their count as its
  weight) replays GPipe or 1F1B with the plan's windows (forward ``c/3``, backward ``2c/3`` per
  micro-batch, the model's compute times), or a zero-bubble schedule (forward, input gradient and
  weight gradient ``c/3`` each; Qi et al., ICLR 2024) in its hand-crafted order or greedily (each
  stage runs a ready input gradient, else a forward its window allows, else a pending weight
  gradient), each hop and direction a FIFO channel; the schedule's order and the greedy rule are the
  model's (:mod:`sfenv.model.pipeline`), the timing of every operation and transfer the check's own.
  Under ZB-H2 the next iteration may start on each stage when that stage is done (the optimizer step
  off the critical path), so the model takes its longest stage span as its pipeline time; the check
  plays the iterations one after another and takes that span too (it does not play the overlap).
  Until 2026-11-27 the check refused zero-bubble plans (and before that played them as 1F1B).  Then (or, with
  ``dp_overlap`` 1, from the iteration's start) every stage whose replicas span regions runs its
  ring all-reduce: ``2 (d - 1)`` steps in which every ring edge sends ``bytes / d``, a step ending
  when its slowest edge has arrived;
- a message or ring step across regions is a *transfer* on the directed links of its route
  (the plan's pinned :attr:`~sfenv.model.perf.Plan.routes` under ``sim.routing: load``, else
  :meth:`sfenv.world.topology.Topology.route_for`); inside a region it takes its bytes alone, a
  pipeline message over the intra-region bandwidth, a ring step of a stage inside one region over
  the servers the model packs its replicas into (:func:`sfenv.model.perf.dp_ring_bps`; until
  2026-11-27 over one GPU's network bandwidth, the model's charge before its data-parallel
  correction, which made every such ring slower than the model meant).  It arrives the route's
  latency after its last bit;
- at every instant the transfers sending share the links max-min fairly (progressive filling,
  Bertsekas & Gallager, *Data Networks*, §6.5.2), each also bounded by its TCP connections
  (``streams x window / RTT``, on each hop of a relayed route: relays terminate the connections) and,
  on a measured grid, by the VM-pair rate of each hop in its direction (one VM pair per hop; until
  2026-11-27 the check had no such bound), and
  rates change whenever a transfer starts or ends.

Jobs start at seeded random offsets, so their phases are independent.  Optionally each message's
latency is scaled by a seeded random factor ``1 + jitter z`` (z standard normal, cut at 0) to see
what jitter does.  The result is each job's mean iteration time after warm-up iterations, to
compare with :func:`sfenv.model.perf.evaluate_plan` under the settled load
(:meth:`sfenv.sim.links.LinkState.settle`).  Only ``dp_overlap`` 0 (the all-reduce after the
pipeline) and 1 (from the iteration's start) are timelines; the model's values in between are a
mix of the two (its iteration time interpolates them), so the check takes those two.

To tell where the fast path's error comes from, :func:`simulate_jobs` can also record how long each
transfer across regions sent (``trace``, by :data:`TransferKind`), and play jobs whose transfers across
regions take given times instead of sharing the network (``given``): a job played alone at the
times it had when played with others keeps their effect without their company
(:func:`experiments.flow_check.decomposed_errors`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sfenv.model.perf import ACT_BYTES, PerfParams, Plan, Stage, dp_ring_bps, evaluate_plan, plan_wan_transfers
from sfenv.model.pipeline import zero_bubble_order, zero_bubble_split
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

#: a kind of WAN transfer of a played job: ``(the job's index in the played list, source region, destination
#: region, bits, tag)``, the tag as in :func:`sfenv.model.perf.plan_wan_transfers` (a ring step's is its stage's)
TransferKind = tuple[int, int, int, float, int]
#: every WAN transfer a play sent, by kind: ``(start, seconds until its last bit left)`` each
TransferTrace = dict[TransferKind, list[tuple[float, float]]]

__all__ = ["PLAYED_SCHEDULES", "ZERO_BUBBLE_ORDERS", "FlowSim", "max_min_rates", "simulate_jobs",
           "zero_bubble_candidates"]

#: the pipeline schedules :func:`simulate_jobs` plays (any other is refused)
PLAYED_SCHEDULES = ("gpipe", "1f1b", "zb-h1", "zb-h2")
#: the operation orders a zero-bubble plan may be played in: Qi et al.'s hand-crafted one, or greedy
ZERO_BUBBLE_ORDERS = ("hand", "greedy")
_ZERO_BUBBLE = ("zb-h1", "zb-h2")

_F, _B, _W = 0, 1, 2  # forward, backward (zero-bubble: input gradient), weight gradient


def max_min_rates(
    routes: Sequence[Sequence[int]], weights: Sequence[float], bounds: Sequence[float], capacity: Sequence[float],
) -> list[float]:
    """Max-min fair rates by progressive filling: free transfers' rates rise alike until a link fills or a bound is hit.

    :param routes: directed links of each transfer.
    :param weights: transfers each entry stands for (a link carries ``weight x rate`` of it).
    :param bounds: most rate per transfer (its own bound), bit/s.
    :param capacity: capacity of every directed link, bit/s.
    :return: the rate of one transfer of each entry, bit/s.
    """
    n = len(routes)
    rate = [0.0] * n
    left = {e: float(capacity[e]) for r in routes for e in r}
    live = [i for i in range(n) if routes[i]]
    for i in range(n):
        if not routes[i]:
            rate[i] = bounds[i]
    while live:
        load: dict[int, float] = {}
        for i in live:
            for e in routes[i]:
                load[e] = load.get(e, 0.0) + weights[i]
        step = min(left[e] / w for e, w in load.items())
        step = min(step, min(bounds[i] - rate[i] for i in live))
        step = max(step, 0.0)
        for i in live:
            rate[i] += step
        for e, w in load.items():
            left[e] -= step * w
        full = {e for e in load if left[e] <= 1e-9 * capacity[e]}
        live = [i for i in live if rate[i] < bounds[i] * (1.0 - 1e-12) and not full.intersection(routes[i])]
    return rate


@dataclass
class _Transfer:
    """A transfer sending: ``weight`` identical transfers of ``left`` more bits each."""

    route: tuple[int, ...]
    weight: float
    left: float
    bound: float
    done: Callable[[], None]
    bits: float = 0.0
    rate: float = 0.0


class FlowSim:
    """The network and the clock: transfers sharing directed links max-min fairly, and timed callbacks.

    :param capacity: capacity of every directed link, bit/s.
    """

    def __init__(self, capacity: Sequence[float]) -> None:
        self.capacity = [float(c) for c in capacity]
        self.now = 0.0
        self.sending: list[_Transfer] = []
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._stale = False

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Run ``action`` at time ``t``."""
        heapq.heappush(self._events, (t, self._seq, action))
        self._seq += 1

    def send(self, route: tuple[int, ...], weight: float, bits: float, bound: float, done: Callable[[], None]) -> None:
        """Start a transfer of ``bits`` (each of ``weight`` alike) now; ``done()`` runs when its last bit has left."""
        self.sending.append(_Transfer(route, weight, bits, bound, done, bits))
        self._stale = True

    def _rates(self) -> None:
        live = self.sending
        rates = max_min_rates([t.route for t in live], [t.weight for t in live], [t.bound for t in live],
                              self.capacity)
        for t, r in zip(live, rates):
            t.rate = r
        self._stale = False

    def run(self, until: Callable[[], bool]) -> None:
        """Advance time, event by event, until ``until()`` is true or nothing is left to happen."""
        while not until():
            if self._stale:
                self._rates()
            t_net, first = math.inf, None
            for tr in self.sending:
                if tr.rate > 0 and self.now + tr.left / tr.rate < t_net:
                    t_net, first = self.now + tr.left / tr.rate, tr
            t_ev = self._events[0][0] if self._events else math.inf
            t = min(t_net, t_ev)
            if t == math.inf:
                return
            dt = t - self.now
            for tr in self.sending:
                tr.left -= tr.rate * dt
            if first is not None and t == t_net:
                first.left = 0.0
            finished = [tr for tr in self.sending if tr.left <= 1e-9 * tr.bits]
            self.now = t
            if finished:
                self.sending = [tr for tr in self.sending if tr not in finished]
                self._stale = True
                for tr in finished:
                    tr.done()
            while self._events and self._events[0][0] <= self.now:
                _, _, action = heapq.heappop(self._events)
                action()


@dataclass
class _Pipe:
    """One distinct replica pipeline of a job: its regions per stage and how many replicas run it."""

    regions: tuple[int, ...]
    weight: int
    pos: list[int] = field(default_factory=list)
    busy: list[bool] = field(default_factory=list)
    fwd_in: list[int] = field(default_factory=list)
    grad_in: list[int] = field(default_factory=list)
    fdone: list[int] = field(default_factory=list)
    nf: list[int] = field(default_factory=list)  # greedy zero-bubble play: forwards, input and weight
    nb: list[int] = field(default_factory=list)  # gradients started per stage, and weight gradients done
    nw: list[int] = field(default_factory=list)
    wdone: list[int] = field(default_factory=list)
    first: list[float] = field(default_factory=list)  # each stage's first operation's start, last one's end
    last: list[float] = field(default_factory=list)
    left: int = 0
    queues: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    channel_busy: dict[tuple[int, int], bool] = field(default_factory=dict)


class _Job:
    """A job iterating its plan in a :class:`FlowSim` (see the module docstring)."""

    def __init__(self, sim: FlowSim, topo: Topology, plan: Plan, job: JobSpec, params: PerfParams,
                 overlap: int, rng: np.random.Generator, jitter: float, order: str = "hand") -> None:
        perf = evaluate_plan(plan, job, topo, params)  # for the compute times and windows only
        if not perf.feasible:
            raise ValueError(f"infeasible plan: {perf.reason}")
        self.sim, self.topo, self.plan, self.params = sim, topo, plan, params
        self.overlap, self.rng, self.jitter = overlap, rng, jitter
        self.p = len(plan.stages)
        self.m = perf.microbatches
        self.d = plan.dp
        self.compute = list(perf.compute_times)
        self.windows = tuple(perf.windows)
        self.zero_bubble = plan.schedule in _ZERO_BUBBLE
        self.greedy = self.zero_bubble and order == "greedy"
        #: ZB-H2 runs the next iteration on each stage as soon as it is done (the optimizer step off the
        #: critical path), so its pipeline takes its longest stage span (:mod:`sfenv.model.pipeline`)
        self.span = plan.schedule == "zb-h2"
        self.orders = [self._order(k, perf.windows[k]) for k in range(self.p)]
        model = job.model
        self.act_bits = 8.0 * ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden
        self.act_bytes = self.act_bits / 8.0
        replicas = [st.replica_regions() for st in plan.stages]
        counts: dict[tuple[int, ...], int] = {}
        for i in range(self.d):
            key = tuple(replicas[k][i] for k in range(self.p))
            counts[key] = counts.get(key, 0) + 1
        self.pipes = [_Pipe(regions, n) for regions, n in counts.items()]
        emb = model.embedding_params
        self.grad = [2.0 * (model.layer_params * st.layers + ((k == 0) + (k == self.p - 1 and self.p > 1)) * emb)
                     for k, st in enumerate(plan.stages)]
        #: pinned routes (sim.routing "load") by (source, destination, tag of plan_wan_transfers); empty: static
        self.pinned: dict[tuple[int, int, int], tuple[int, ...]] = {}
        if plan.routes:
            transfers = plan_wan_transfers(plan, job)
            if len(transfers) != len(plan.routes):
                raise ValueError(f"routes: the plan pins {len(plan.routes)} routes for its {len(transfers)} "
                                 "cross-region transfers")
            self.pinned = {(a, b, tag): links for (a, b, _, tag, _), links in zip(transfers, plan.routes)}
        #: under ``vm_pair_cap: server``, the share of one VM pair's rate a hop's replica pair may take, by
        #: (source, destination, tag): the servers its sending stage's replicas fill over the pairs
        self.pair_share: dict[tuple[int, int, int], float] = {}
        if params.vm_pair_cap == "server":
            pairs: dict[tuple[int, int, int], int] = {}  # replica pairs per hop direction and pair of regions
            for pipe in self.pipes:
                for hop in range(self.p - 1):
                    a, b = pipe.regions[hop], pipe.regions[hop + 1]
                    if a != b:
                        for key in ((a, b, -1 - 2 * hop), (b, a, -2 - 2 * hop)):
                            pairs[key] = pairs.get(key, 0) + pipe.weight
            for (src, dst, tag), n in pairs.items():
                sender = plan.stages[(-1 - tag) // 2 + (-1 - tag) % 2]  # hop k's forward: stage k, backward: k + 1
                per_server = max(1, int(topo.scalars.gpus_per_server[src]) // sender.tp)
                self.pair_share[(src, dst, tag)] = min(1.0, math.ceil(n / per_server) / n)
        self.times: list[float] = []
        #: its index in the played list, where its WAN transfers are recorded (if at all), and the times they
        #: take instead of sharing the network (if given): see :func:`simulate_jobs`
        self.index = 0
        self.trace: TransferTrace | None = None
        self.given: Callable[[TransferKind], float] | None = None
        self.start = 0.0
        self.waiting = 0
        self.rings_started = False

    def _order(self, k: int, w: int) -> list[tuple[int, int]]:
        m = self.m
        if self.zero_bubble:  # Qi et al.'s hand-crafted order within the windows (the greedy play needs none)
            u, d = zero_bubble_split(self.plan.schedule, self.windows)
            return list(zero_bubble_order(m, u[k], d[k]))
        if self.plan.schedule == "gpipe":
            return [(_F, i) for i in range(m)] + [(_B, i) for i in range(m)]
        order = [(_F, i) for i in range(min(w, m))]
        for i in range(m):
            order.append((_B, i))
            if i + w < m:
                order.append((_F, i + w))
        return order

    # ---------------------------------------------------------------- iterations
    def begin(self) -> None:
        """Start an iteration: every replica pipeline, and the rings too under full overlap."""
        self.start = self.sim.now
        self.rings_started = bool(self.overlap)
        self.waiting = len(self.pipes)
        self.pipes_left = len(self.pipes)
        self.pipes_done_at = self.rings_done_at = self.start
        for pipe in self.pipes:
            p = self.p
            pipe.pos, pipe.busy = [0] * p, [False] * p
            pipe.fwd_in = [self.m] + [0] * (p - 1)
            pipe.grad_in, pipe.fdone = [0] * p, [0] * p
            pipe.nf, pipe.nb, pipe.nw, pipe.wdone = [0] * p, [0] * p, [0] * p, [0] * p
            pipe.first, pipe.last = [math.inf] * p, [self.start] * p
            pipe.left = (3 if self.zero_bubble else 2) * self.m * p
            pipe.queues, pipe.channel_busy = {}, {}
        rings = self._ring_stages()
        self.waiting += len(rings)
        for pipe in self.pipes:
            for k in range(self.p):
                self._try(pipe, k)
        if self.overlap:
            for k in rings:
                self._ring_step(k, 0)

    def _part_done(self, ring: bool = False) -> None:
        self.waiting -= 1
        if ring:
            self.rings_done_at = self.sim.now
        else:
            self.pipes_left -= 1
            if self.pipes_left == 0:
                self.pipes_done_at = self.sim.now
        rings = self._ring_stages()
        if not self.rings_started and self.waiting == len(rings):  # the pipelines are done: the rings start
            self.rings_started = True
            for k in rings:
                self._ring_step(k, 0)
        if self.waiting == 0:
            self.times.append(self._iteration_time())
            self.begin()

    def _iteration_time(self) -> float:
        """The iteration just played: its pipeline time (ZB-H2: the longest stage span), then the rings' rest."""
        pipeline = self.pipes_done_at - self.start
        if self.span:
            pipeline = max(pipe.last[k] - pipe.first[k] for pipe in self.pipes for k in range(self.p))
        if self.overlap:  # the rings ran from the iteration's start, beside the pipelines
            return max(pipeline, self.rings_done_at - self.start)
        return pipeline + max(0.0, self.rings_done_at - self.pipes_done_at)

    def _ring_stages(self) -> list[int]:
        return list(range(self.p)) if self.d > 1 else []

    # ---------------------------------------------------------------- pipeline
    def _try(self, pipe: _Pipe, k: int) -> None:
        if pipe.busy[k]:
            return
        if self.greedy:
            picked = self._greedy_op(pipe, k)
            if picked is None:
                return
            kind, i = picked
        else:
            if pipe.pos[k] >= len(self.orders[k]):
                return
            kind, i = self.orders[k][pipe.pos[k]]
            if kind == _F and i >= pipe.fwd_in[k]:
                return
            if kind == _B:
                have = pipe.fdone[k] if k == self.p - 1 else pipe.grad_in[k]
                if i >= have or i >= pipe.fdone[k]:
                    return
            pipe.pos[k] += 1
        pipe.busy[k] = True
        pipe.first[k] = min(pipe.first[k], self.sim.now)
        dur = self.compute[k] / 3.0 if kind == _F or self.zero_bubble else 2.0 * self.compute[k] / 3.0
        self.sim.at(self.sim.now + dur, lambda: self._op_done(pipe, k, kind, i))

    def _greedy_op(self, pipe: _Pipe, k: int) -> tuple[int, int] | None:
        """The greedy zero-bubble choice at stage ``k``, or None if no operation is ready.

        A ready input gradient, else a forward its window allows (forwards started minus weight
        gradients done), else a pending weight gradient (:mod:`sfenv.model.pipeline`'s greedy order).
        """
        b, f = pipe.nb[k], pipe.nf[k]
        if b < self.m and b < (pipe.fdone[k] if k == self.p - 1 else pipe.grad_in[k]):
            pipe.nb[k] += 1
            return _B, b
        if f < self.m and f < pipe.fwd_in[k] and f - pipe.wdone[k] < self.windows[k]:
            pipe.nf[k] += 1
            return _F, f
        if pipe.nw[k] < b:
            pipe.nw[k] += 1
            return _W, pipe.nw[k] - 1
        return None

    def _op_done(self, pipe: _Pipe, k: int, kind: int, i: int) -> None:
        pipe.busy[k] = False
        pipe.left -= 1
        pipe.last[k] = self.sim.now
        if kind == _F:
            pipe.fdone[k] += 1
            if k < self.p - 1:
                self._enqueue(pipe, k, 0, i)
        elif kind == _W:
            pipe.wdone[k] += 1
        elif k > 0:
            self._enqueue(pipe, k - 1, 1, i)
        self._try(pipe, k)
        if pipe.left == 0:
            self._part_done()

    def _enqueue(self, pipe: _Pipe, hop: int, direction: int, i: int) -> None:
        key = (hop, direction)
        pipe.queues.setdefault(key, []).append(i)
        if not pipe.channel_busy.get(key, False):
            self._next_message(pipe, key)

    def _next_message(self, pipe: _Pipe, key: tuple[int, int]) -> None:
        queue = pipe.queues[key]
        if not queue:
            pipe.channel_busy[key] = False
            return
        queue.pop(0)
        pipe.channel_busy[key] = True
        hop, direction = key
        src, dst = pipe.regions[hop], pipe.regions[hop + 1]
        if direction:
            src, dst = dst, src
        target = hop + 1 if direction == 0 else hop

        def arrive() -> None:
            if direction == 0:
                pipe.fwd_in[target] += 1
            else:
                pipe.grad_in[target] += 1
            self._try(pipe, target)

        tag = -1 - 2 * hop - direction  # plan_wan_transfers' tag of this hop and direction

        def left_channel() -> None:
            self.sim.at(self.sim.now + self._latency(src, dst, self.act_bytes, tag), arrive)
            self._next_message(pipe, key)

        self._transfer(src, dst, self.act_bytes, self.act_bits, pipe.weight, 1, left_channel, tag)

    # ---------------------------------------------------------------- transfers
    def _route(self, a: int, b: int, nbytes: float, tag: int) -> tuple[tuple[int, ...], float]:
        """The links and latency of a transfer from ``a`` to ``b``: its pinned route, else the static one."""
        links = self.pinned.get((a, b, tag))
        if links is None:
            links, lat, _ = self.topo.route_for(a, b, nbytes)
            return links, lat
        return links, float(sum(self.topo.link_latency_s[k] for k in links))

    def _latency(self, a: int, b: int, nbytes: float, tag: int) -> float:
        lat = self._route(a, b, nbytes, tag)[1]
        if self.jitter > 0.0:
            lat *= max(0.0, 1.0 + self.jitter * float(self.rng.standard_normal()))
        return lat

    def _transfer(self, a: int, b: int, nbytes: float, bits: float, weight: float, tp: int,
                  done: Callable[[], None], tag: int) -> None:
        """Send ``bits`` from ``a`` to ``b``: over the WAN as a shared transfer, inside a region at its bandwidth."""
        topo = self.topo
        if a == b:
            self.sim.at(self.sim.now + bits / (float(topo.intra_bw_bps[a]) * tp), done)
            return
        kind: TransferKind = (self.index, a, b, bits, tag)
        if self.trace is not None:
            done = self._traced(self.trace.setdefault(kind, []), done)
        if self.given is not None:
            self.sim.at(self.sim.now + self.given(kind), done)
            return
        links = self._route(a, b, nbytes, tag)[0]
        route = topo.directed_route(a, b, links)
        pr = self.params
        # one VM pair per hop carries the transfer (a measured grid's per-pair rates; inf without them), and each hop
        # of a relayed route is its own TCP connections (the relay terminates them)
        bound = topo.flow_cap_bps(a, tuple(links)) if topo.has_pair_caps else math.inf
        share = self.pair_share.get((a, b, tag), 1.0)
        if share < 1.0:  # vm_pair_cap "server": the replica pairs a server sends share its VM pair's rate
            bound *= share
        for k in links:
            hop_lat = float(topo.link_latency_s[k])
            if hop_lat > 0:
                bound = min(bound, pr.wan_streams * pr.tcp_window_bytes * 8.0 / (2.0 * hop_lat))
        self.sim.send(route, weight, bits, bound, done)

    def _traced(self, log: list[tuple[float, float]], done: Callable[[], None]) -> Callable[[], None]:
        """``done`` that first appends the transfer's ``(start, seconds)`` to ``log``."""
        start = self.sim.now

        def traced() -> None:
            log.append((start, self.sim.now - start))
            done()

        return traced

    # ---------------------------------------------------------------- rings
    def _intra_ring_bps(self, st: Stage, region: int) -> float:
        """Bandwidth of one of ``st``'s ``tp`` rings on an edge inside ``region``, bit/s (the model's servers).

        A stage inside one region packs its replicas into servers, so its rings run on the GPU link
        inside a server and on the servers' NICs across them (:func:`sfenv.model.perf.dp_ring_bps`, a
        physical assumption the check takes as given: it checks the sharing of the WAN, not that);
        a ring across regions has each GPU's network bandwidth on its edges inside a region, as the
        model charges it.
        """
        if len(st.placement) == 1:
            return dp_ring_bps(self.topo.scalars, region, st.tp, self.d)
        return float(self.topo.intra_bw_bps[region])

    def _ring_step(self, k: int, step: int) -> None:
        if step == 2 * (self.d - 1):
            self._part_done(ring=True)
            return
        st = self.plan.stages[k]
        regs = st.replica_regions()
        chunk = self.grad[k] / self.d
        edges = [(regs[i], regs[(i + 1) % self.d]) for i in range(self.d)]
        wan_edges = [(a, b) for a, b in edges if a != b]
        intra = max((chunk * 8.0 / (self._intra_ring_bps(st, a) * st.tp) + float(self.topo.intra_latency_s[a])
                     for a, b in edges if a == b), default=0.0)
        pending = [len(wan_edges) + 1]

        def one_done() -> None:
            pending[0] -= 1
            if pending[0] == 0:
                self._ring_step(k, step + 1)

        self.sim.at(self.sim.now + intra, one_done)
        for a, b in wan_edges:
            def edge_left(a: int = a, b: int = b) -> None:
                self.sim.at(self.sim.now + self._latency(a, b, self.grad[k], k), one_done)

            self._transfer(a, b, self.grad[k], chunk * 8.0, 1, 1, edge_left, k)


def zero_bubble_candidates(plan: Plan) -> list[tuple[Plan, str]]:
    """The ways the model may run ``plan``, as (plan, order) pairs for :func:`simulate_jobs`.

    A zero-bubble plan: its schedule in the hand-crafted and the greedy order, and the schedules it
    falls back to within its memory when they are faster (ZB-H2: ZB-H1 in both orders, and 1F1B;
    ZB-H1: 1F1B), each with its own windows, as :func:`sfenv.model.perf.evaluate_plan` takes the
    fastest of them.  Any other plan: itself.
    """
    if plan.schedule not in _ZERO_BUBBLE or len(plan.stages) == 1:
        return [(plan, "hand")]
    schedules = [plan.schedule, *(("zb-h1",) if plan.schedule == "zb-h2" else ()), "1f1b"]
    out: list[tuple[Plan, str]] = []
    for schedule in schedules:
        variant = plan if schedule == plan.schedule else dataclasses.replace(plan, schedule=schedule)
        out += [(variant, order) for order in (ZERO_BUBBLE_ORDERS if schedule != "1f1b" else ("hand",))]
    return out


def simulate_jobs(
    topo: Topology, jobs: Sequence[tuple[Plan, JobSpec]], params: PerfParams, iterations: int = 6, warmup: int = 2,
    seed: int = 0, jitter: float = 0.0, capacity_bps: Sequence[float] | None = None,
    orders: Sequence[str] | None = None, trace: TransferTrace | None = None,
    given: Callable[[TransferKind], float] | None = None,
) -> list[float]:
    """Play ``jobs`` together (see the module docstring); each one's mean iteration time after ``warmup`` iterations.

    :param jobs: each job's plan (GPipe or 1F1B, :data:`PLAYED_SCHEDULES`) and spec.
    :param params: the model's constants: ``dp_overlap`` must be 0 or 1; the transport bound uses
        ``wan_streams`` and ``tcp_window_bytes``.
    :param iterations: iterations averaged per job (every job runs until all have done
        ``warmup + iterations``).
    :param seed: seeds the start offsets (and the jitter).
    :param jitter: relative spread of each message's latency (0: none).
    :param capacity_bps: capacity of every directed link (default: the topology's).
    :param orders: per job, the order a zero-bubble plan is played in, one of :data:`ZERO_BUBBLE_ORDERS`
        (default ``hand`` for all; other plans ignore it).  The model takes the faster of the two (and of
        the orders it may fall back to, :func:`zero_bubble_candidates`), so a job played alone is compared
        with the fastest candidate.
    :param trace: if given, filled with every WAN transfer's start and seconds sending (its latency
        after), by :data:`TransferKind` (the job's index in ``jobs`` first), warm-up included.
    :param given: if given, every WAN transfer takes ``given(kind)`` seconds instead of sharing the
        network (its latency still follows): plays jobs at transfer times measured elsewhere.
    """
    if params.dp_overlap not in (0.0, 1.0):
        raise ValueError(f"dp_overlap must be 0 or 1 for a timeline, not {params.dp_overlap}")
    for plan, _job in jobs:
        if plan.schedule not in PLAYED_SCHEDULES:
            raise ValueError(f"job {plan.job_id}: schedule {plan.schedule!r}: the check plays "
                             f"{', '.join(PLAYED_SCHEDULES)} only")
    order_of = ["hand"] * len(jobs) if orders is None else list(orders)
    if len(order_of) != len(jobs) or any(o not in ZERO_BUBBLE_ORDERS for o in order_of):
        raise ValueError(f"orders: expected one of {list(ZERO_BUBBLE_ORDERS)} per job, got {order_of}")
    rng = np.random.default_rng(seed)
    sim = FlowSim(topo.directed_bw_bps.tolist() if capacity_bps is None else capacity_bps)
    runs = [_Job(sim, topo, plan, job, params, int(params.dp_overlap), rng, jitter, order)
            for (plan, job), order in zip(jobs, order_of, strict=True)]
    for index, run in enumerate(runs):
        run.index, run.trace, run.given = index, trace, given
    for run in runs:
        offset = float(rng.uniform(0.0, 1.0)) * run.m * max(run.compute)
        sim.at(offset, run.begin)
    need = warmup + iterations
    sim.run(lambda: all(len(r.times) >= need for r in runs))
    return [float(np.mean(r.times[warmup:need])) for r in runs]
