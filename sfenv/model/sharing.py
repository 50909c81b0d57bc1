"""How WAN transfers share links: full-duplex capacity, each flow's demand, and the rate a transfer gets while it sends.

**What flows are.**  A plan that spans regions sends two kinds of traffic over the WAN
(:func:`sfenv.model.perf.plan_flow_groups` lists them as :class:`FlowGroup` s):

- *bursts*: a pipeline hop sends one micro-batch's boundary tensor per micro-batch and direction
  (activations forward, gradients backward), ``m`` transfers per iteration, and is idle in between;
- *bulk*: a data-parallel ring all-reduce whose replicas span regions sends ``2 (d - 1)`` steps of
  ``bytes / d`` over each region boundary of its ring, once per iteration.

The replica pairs of one hop send at the same moment; they form one group of ``members``
transfers.  Links are full duplex (:class:`sfenv.world.topology.Link`): each direction is a
*directed link* with the link's capacity to itself, so a hop's activations and its gradients do not
compete.

**Rates.**  At every instant the transfers sending over a network share it max-min fairly
(Bertsekas & Gallager, *Data Networks*, 2nd ed. 1992, §6.5.2, progressive filling), the flow-level
model of TCP sharing of Bonald & Massoulié (SIGMETRICS 2001).  A transfer's time depends on which
other transfers send *while it sends*, and they send only part of the time: a flow's *duty*
``delta`` is the share of the iteration it is sending (``transfers x bits / (rate x T)``), its
*demand* the average rate ``a = delta x rate`` it needs.  The fast path computes the expected rate
of a transfer while it sends under independent activity of other jobs' flows, in two time scales:

- a burst (a hop transfer, short) sees every other flow frozen for its duration: present with
  probability ``delta``, and then an equal sharer.  On one link of capacity ``C`` its expected
  transfer time is ``bits (n + sum delta_g n_g) / (n C)``, exact for equal sharing on one link
  (time is linear in the number of active sharers), i.e. processor sharing among concurrently
  active flows weighted by their duty cycles.  Other jobs' bursts come and go while it sends when their
  on-off cycle is not long against it: its time is the frozen one's, pulled towards the fluid one
  (they take their average rate off the link) by the exact result for a rate modulated by a
  two-state Markov chain (:func:`_modulated`);
- bulk traffic (an all-reduce step, long) sees bursts come and go many times while it sends: they
  take their average rate ``sum a_g`` off the link (work conservation: whatever they do not use is
  left to it), and other bulk flows are frozen as above.  It gets the larger of that residual
  share and the frozen share (the frozen share bounds it from below: bursts cannot take more than
  equal sharing while they send).

Which of the two views holds depends on how long the bulk step lasts against the bursts' cycle
(the two limiting regimes of elastic flows sharing with varying traffic, *fluid* when it varies
fast and *quasi-stationary* when it varies slowly: Delcoigne, Proutière & Régnié, "Modeling
integration of streaming and data traffic", Performance Evaluation 55, 2004).  A 1F1B hop's
transfers are spread over the iteration, so a ring step sees them as fluid; a GPipe hop sends all
its transfers in one pass, so a step shorter than that job's iteration ``T`` meets its pass frozen.
Our interpolation between the limits (no fitted constant): a step of ``S`` seconds sees such
*phased* bursts frozen with weight ``w = 1 - S / T`` (0 once ``S >= T``: a step spanning a whole
cycle sees the pass's share of it) and as fluid with ``1 - w``.

A bulk step bounded elsewhere (its transport bound, a VM pair's rate) cannot take what the bursts
leave beyond its bound: its rate is the time average of ``min(bound, what they leave)``.  We take
the bursts' aggregate rate as a two-point variable, off or on, with the mean and variance of
independent on-off groups (each group on with probability its duty), and average over the two
(our approximation; exact for one group).  Unbounded, this is the residual above.

A flow limited elsewhere (another link, or its transport bound) uses less than a share of this
link: its presence counts with the fraction ``rate / level`` of a share it uses here.  Within one
job (:func:`own_load`), groups of the same hop and direction (and all ring steps) send together
(co-active); its other hops send with their duty within the pipeline's share of the iteration
(under GPipe a forward hop only in the forward pass, a backward one only in the backward pass);
its rings and hops overlap by the plan's ``dp_overlap``.  Under GPipe and 1F1B the schedule fixes
when each hop sends, so two of the job's hops that meet on a link send together for the share of
time a replay of the schedule gives (:func:`sfenv.model.pipeline.hop_overlap`), not as independent
flows (a 1F1B hop's forward and another hop's backward may never, or always, send at once); and a
hop meets another of its job's hops as that hop is without it (the arrival theorem,
:func:`_own_arrival`).  The same overlap gives the covariance of the job's bursts in its load
(:func:`_burst_covariance`).

The duties depend on the iteration times, which depend on the rates: a fixed point, solved by
:class:`sfenv.sim.links.LinkState` for the running jobs (a few sweeps) and by
:func:`sfenv.model.perf.evaluate_plan` for one plan against the others' load.
:mod:`sfenv.model.flowcheck` is the independent check: an event-driven simulation of the same jobs
whose transfers share links by exact max-min fairness at every instant; the two agree within 5 %
on most random shared-link cases; docs/model.md gives the measured spread (``tests/test_flow_sharing.py``).

**Transport.**  One transfer (of one member) is also bounded by its TCP connections: at most a
window of bytes in flight per round trip on each of ``streams`` parallel connections,
``rate <= streams x window / RTT`` (the window bound of TCP, Mathis et al., CCR 1997 give the
loss bound, which needs a loss rate no scenario measures), with the link's measured rate as the
ceiling.  The defaults (:class:`sfenv.model.perf.PerfParams`): 16 connections per transfer, NCCL's
socket transport on AWS (2 threads x 8 sockets, ``src/transport/net_socket.cc`` since NCCL 2.4.8;
1 socket elsewhere), and a window of 3 MiB, Linux's default largest receive buffer (``tcp_rmem``
6 MiB) of which half is advertised (``tcp_adv_win_scale`` 1; ip-sysctl documentation, kernels
4.20-6.15).  The link figures themselves (Skyplane's grid, Jain et al., NSDI 2023) were measured
with 64 connections per VM pair, so a transfer with fewer connections can fall short of them on
long round trips.  The round trip is twice the one-way latency of the route's longest hop (a relay
terminates the connections; queueing ignored).

**Load arrays.**  The load of a set of flows on each directed link is a ``(LOAD_ROWS, directed
links)`` array: row :data:`BUSY` the expected number of transfers sending at once (``sum n delta``,
scaled as above), :data:`BULK_BUSY` the part of it from bulk flows, :data:`BURST_BPS` the bursts'
average rate in bit/s and :data:`BURST_VAR` its variance; of the phased (GPipe) bursts,
:data:`PHASED_BUSY`, :data:`PHASED_BPS`, :data:`PHASED_VAR` the same, and :data:`PHASED_CYCLE` the
sum of their presence times their job's iteration time.  It is all a plan's evaluation reads of
other jobs' traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "BULK",
    "BULK_BUSY",
    "BURST",
    "BURST_BPS",
    "BURST_DECAY",
    "BURST_VAR",
    "BUSY",
    "LOAD_ROWS",
    "PHASED_BPS",
    "PHASED_BUSY",
    "PHASED_CYCLE",
    "PHASED_VAR",
    "WAN_SHARING",
    "FlowGroup",
    "duties",
    "empty_load",
    "group_rates",
    "load_of",
    "max_min_rates",
    "own_load",
    "self_sharing",
    "transport_cap_bps",
]

#: flow kinds: a pipeline hop's transfers (short, once per micro-batch) and ring all-reduce steps (long)
BURST, BULK = 0, 1
#: rows of a load array: transfers sending at once, of which bulk, and the bursts' average rate (bit/s); of the
#: bursts that send only in one pass (GPipe): transfers sending at once, their average rate, and the sum of
#: their transfers sending at once times their job's iteration time (s)
BUSY, BULK_BUSY, BURST_BPS, PHASED_BUSY, PHASED_BPS, PHASED_CYCLE = 0, 1, 2, 3, 4, 5
#: rows of a load array: the variance of the bursts' rate ((bit/s)^2), all of them and those of one pass
BURST_VAR, PHASED_VAR = 6, 7
#: row of a load array: the bursts' rate variance times how fast their on-off state decorrelates
#: (:func:`_switching`), (bit/s)^2/s
BURST_DECAY = 8
#: rows of a load array
LOAD_ROWS = 9
#: the sharing models (:attr:`sfenv.model.perf.PerfParams.wan_sharing`): ``v2``, env v2's (bursts see other flows
#: frozen, a job's hops meet as independent flows), ``v3`` (bursts see other jobs' bursts come and go, a job's
#: hops meet as its schedule has them send; measured 2026-11-27, docs/model.md), env v3's, and ``v4`` (as ``v3``,
#: but a 1F1B or GPipe plan's own hops share their links as a replay of its schedule plays them,
#: :func:`max_min_rates` at every instant; measured 2026-11-27, docs/model.md), env v4's, and
#: ``v5`` (as ``v4``, but such a plan's pipeline time is the replay's own rather than one assembled again from its
#: hops' mean transfer times, and zero-bubble plans are replayed too; measured 2026-11-27, docs/model.md), env
#: v5's and the default
WAN_SHARING = ("v2", "v3", "v4", "v5")
#: what one VM pair's measured rate binds (:attr:`sfenv.model.perf.PerfParams.vm_pair_cap`)
VM_PAIR_CAPS = ("member", "server")


class FlowGroup(NamedTuple):
    """Transfers of one plan that send together over one route.

    :param kind: :data:`BURST` (a pipeline hop) or :data:`BULK` (a ring all-reduce edge).
    :param key: which transfers of the job send at the same moment: groups of equal kind and key are
        co-active (a hop's direction: ``2 hop + direction``, direction 0 forward; every ring step of
        a job: ``-1``).
    :param links: directed links of the route, in order.
    :param members: identical transfers sent at once (replica pairs of a hop; 1 for a ring edge).
    :param bits: bits per member per transfer.
    :param transfers: transfers per iteration (``m`` for a hop, ``2 (d - 1)`` ring steps).
    :param rtt_s: round trip that bounds the transfer's TCP window, seconds: twice the one-way latency of
        the route's longest hop (relays terminate connections).
    :param latency_s: one-way latency of the route, seconds.
    :param phased: a GPipe hop: it sends only in its pass (forward or backward) of the pipeline.
    :param servers: the servers the members send from (a hop's: its sending stage's replicas packed on
        servers, :func:`sfenv.model.perf.flow_group_on`); 0 when not known.  Used only where one VM
        pair's measured rate binds the members of a server together (:func:`group_rates`'s
        ``per_server``).
    """

    kind: int
    key: int
    links: tuple[int, ...]
    members: int
    bits: float
    transfers: int
    rtt_s: float
    latency_s: float
    phased: bool = False
    servers: int = 0


def empty_load(num_directed: int) -> np.ndarray:
    """A load array with no flows: ``(LOAD_ROWS, num_directed)`` zeros (rows :data:`BUSY` to :data:`BURST_BPS`)."""
    return np.zeros((LOAD_ROWS, num_directed))


def transport_cap_bps(rtt_s: float, streams: int, window_bytes: float) -> float:
    """The most one transfer's ``streams`` TCP connections carry: ``streams x window / RTT`` bit/s (inf at RTT 0)."""
    if rtt_s <= 0.0:
        return math.inf
    return streams * window_bytes * 8.0 / rtt_s


def self_sharing(groups: Sequence[FlowGroup]) -> bool:
    """True when two groups of one plan that are not co-active cross a common directed link (duties then matter)."""
    seen: dict[int, tuple[int, int]] = {}
    for g in groups:
        tag = (g.kind, g.key)
        for e in g.links:
            other = seen.setdefault(e, tag)
            if other != tag:
                return True
    return False


def max_min_rates(
    flows: Sequence[tuple[tuple[int, ...], float, float]], cap_bps: np.ndarray, others_busy: np.ndarray,
) -> list[float]:
    """Max-min fair rate per member of flows that send at once, by progressive filling (water-filling).

    Each flow is ``(directed links, members, bound)``: ``members`` identical transfers over the links,
    each carrying at most ``bound`` bit/s whatever the links leave.  Other jobs' transfers are
    ``others_busy[e]`` flows on link ``e`` alone, unbounded (the frozen view of :func:`_level`).  The
    textbook algorithm (Bertsekas & Gallager, *Data Networks*, 2nd ed., 1992, section 6.5.2): raise
    every unfixed rate together; a link whose capacity runs out fixes the flows on it, a flow that
    reaches its bound is fixed there; repeat on what is left.  Ties go to the first link met (flows
    in order, each route in order) and the first flow, so that the compiled twin in
    :mod:`sfenv.model._pipeline_jit` gives the same floats.

    :return: the rate of one member of each flow, bit/s, in the order given.
    """
    rate = [math.nan] * len(flows)
    left = list(range(len(flows)))
    room: dict[int, float] = {}
    own: dict[int, float] = {}
    other: dict[int, float] = {}
    for links, members, _ in flows:
        for e in links:
            if e not in room:
                room[e], own[e], other[e] = float(cap_bps[e]), 0.0, float(others_busy[e])
            own[e] += members
    while left:
        share, tight = math.inf, -1
        for e, c in room.items():
            if own[e] > 0.0:
                s = (c if c > 0.0 else 0.0) / (own[e] + other[e])
                if s < share:
                    share, tight = s, e
        first = left[0]
        for i in left:
            if flows[i][2] < flows[first][2]:
                first = i
        if flows[first][2] <= share:
            fixed, value = [first], flows[first][2]
        else:
            fixed, value = [i for i in left if tight in flows[i][0]], share
            room[tight] -= value * other[tight]
            other[tight] = 0.0
        for i in fixed:
            rate[i] = value
            left.remove(i)
            links, members, _ = flows[i]
            for e in links:
                room[e] -= value * members
                own[e] -= members
    return rate


def _level(
    i: int, e: int, cap: float, others: np.ndarray, groups: Sequence[FlowGroup],
    own: Sequence[Sequence[tuple[float, float]]] | None, bound: float = math.inf, switching: bool = False,
) -> tuple[float, float]:
    """Per-member rate group ``groups[i]`` expects on directed link ``e`` while it sends (see the module docstring).

    :param own: ``own[i][j]``: how many of group j's members send while group i sends, and their rate
        (:func:`own_load`); None: only co-active groups send together.
    :param bound: the most one member carries whatever the link leaves (transport, VM pair), bit/s.
    :param switching: the sharing model of env v3 (:data:`WAN_SHARING`): a burst meets its job's other
        hops by the arrival theorem (:func:`_own_arrival`) and other jobs' bursts as they come and go
        (:func:`_modulated`); False: env v2's frozen view.
    :return: ``(level, rate)``: the link's share for one member, unbounded (what :func:`load_of`
        scales presence by), and the member's expected rate on this link under ``bound``.
    """
    g = groups[i]
    co = float(g.members)
    busy = bulk_busy = burst = burst_var = 0.0
    for j, h in enumerate(groups):
        if j == i or e not in h.links:
            continue
        if h.kind == g.kind and h.key == g.key:
            co += h.members  # sends at the same moment as g
            continue
        if own is None:
            continue
        presence, usage = own[i][j]
        if switching and g.kind == BURST and h.kind == BURST and presence > 0.0:
            presence *= _own_arrival(i, j, e, others, groups, own)
        busy += presence
        if h.kind == BULK:
            bulk_busy += presence
        elif presence > 0.0:
            burst += usage
            together = presence / h.members
            burst_var += usage * usage * (1.0 - together) / together
    frozen = cap / (co + float(others[BUSY, e]) + busy)
    if g.kind == BURST:
        if switching:
            frozen = _modulated(g.bits, frozen, cap, others, e, co + busy)
        return frozen, (frozen if frozen < bound else bound)
    burst += float(others[BURST_BPS, e])
    burst_var += float(others[BURST_VAR, e])
    bulk_busy += float(others[BULK_BUSY, e])
    burst_busy = busy - bulk_busy + float(others[BUSY, e])
    phased = float(others[PHASED_BUSY, e])
    if phased > 0.0 and cap > burst:
        # a step shorter than the passes' cycle sees them frozen, as a burst does; longer, it averages them
        w = 1.0 - g.bits * (co + bulk_busy) / (cap - burst) / (float(others[PHASED_CYCLE, e]) / phased)
        if w > 0.0:
            burst -= w * float(others[PHASED_BPS, e])
            burst_var -= w * float(others[PHASED_VAR, e])
            burst_busy -= w * phased
            bulk_busy += w * phased
    sharers = co + bulk_busy
    residual = (cap - burst) / sharers
    level = residual if residual > frozen else frozen
    if burst <= 0.0 or bound >= cap / sharers:
        return level, (level if level < bound else bound)
    # bounded elsewhere, the step cannot take what the bursts leave beyond its bound: the time average of
    # min(bound, what they leave), the bursts' rate a two-point (off / on) variable of its mean and variance
    second = burst_var + burst * burst if burst_var > 0.0 else burst * burst
    on = burst * burst / second
    left = max((cap - second / burst) / sharers, cap / (sharers + burst_busy / on))
    return level, (1.0 - on) * bound + on * (left if left < bound else bound)


def _modulated(bits: float, frozen: float, cap: float, others: np.ndarray, e: int, sharers: float) -> float:
    """A burst's mean rate on directed link ``e`` when other jobs' bursts come and go while it sends.

    The frozen rate holds when they keep their state for the whole transfer; the fluid rate (they
    take their average rate off the link, work conservation) when they switch many times during it.
    For a rate modulated by a two-state Markov chain, the expected time to send ``x`` bits from a
    random moment is exactly ``x / E[r] + (E[1/r] - 1/E[r]) (1 - e^-u) / u``, ``u`` the transfer's
    length in units of the chain's correlation time (Kulkarni, Nicola & Trivedi, "The completion
    time of a job on multimode systems", Adv. Appl. Prob. 19, 1987: in the work clock the chain's
    generator is ``diag(1/r) Q``, whose stationary law weights states by rate).  We take ``x E[1/r]``
    as the frozen time, ``x / E[r]`` as the fluid one, and the bursts' correlation time as their
    rate-variance-weighted mean decorrelation rate (rows :data:`BURST_VAR`, :data:`BURST_DECAY`),
    the transfer's length as its frozen time.

    :param sharers: this group's co-active members and its own job's presence on ``e`` (frozen).
    """
    burst = float(others[BURST_BPS, e])
    var, decay = float(others[BURST_VAR, e]), float(others[BURST_DECAY, e])
    if burst <= 0.0 or burst >= cap or var <= 0.0 or decay <= 0.0:
        return frozen
    fluid = (cap - burst) / (sharers + float(others[BULK_BUSY, e]))
    if fluid <= frozen:
        return frozen
    u = bits / frozen * decay / var
    weight = 1.0 if u < 1e-9 else -math.expm1(-u) / u
    return 1.0 / (1.0 / fluid + (1.0 / frozen - 1.0 / fluid) * weight)


def _switching(g: FlowGroup, rate: float, duty: float, iter_time: float) -> float:
    """How fast a burst group's on-off state decorrelates, ``1 / (t_on (1 - duty))`` in 1/s (0 if always on).

    The rate of an on-off Markov chain with mean on time ``t_on`` and on probability ``duty``;
    ``t_on`` is one transfer, or for a phased (GPipe) group its whole pass (``duty x iter_time``).
    """
    on = duty * iter_time if g.phased else g.bits / rate
    return 1.0 / (on * (1.0 - duty)) if on > 0.0 and duty < 1.0 else 0.0


def _own_arrival(
    i: int, j: int, e: int, others: np.ndarray, groups: Sequence[FlowGroup],
    own: Sequence[Sequence[tuple[float, float]]],
) -> float:
    """The share of the job's own burst group j's presence on link ``e`` that its burst group i meets.

    j's presence counts the time i's transfers (and those co-active with them) stretch j's own; i
    meets j as it is without them: the arrival theorem of closed product-form networks (Lavenberg &
    Reiser, J. Appl. Prob. 17, 1980; Reiser & Lavenberg, "Mean-value analysis of closed multichain
    queuing networks", JACM 27(2), 1980: a customer arriving at a processor-sharing station sees the
    network with itself removed, ``R = D (1 + Q(N - 1))``; taking ``Q(N)`` overstates it).  To first
    order, without i j's frozen time falls by the share ``mine / sharers`` i takes of it, and its
    duty by that share times ``1 - together`` (the iteration shrinks by the same time; exact for one
    on-off neighbour whose cycle is its transfer and think time).
    """
    g, h = groups[i], groups[j]
    mine = 0.0
    sharers = float(h.members) + float(others[BUSY, e])
    for k, f in enumerate(groups):
        if k == j or e not in f.links:
            continue
        if f.kind == h.kind and f.key == h.key:
            sharers += f.members
            continue
        seen = own[j][k][0]
        sharers += seen
        if k == i or (f.kind == g.kind and f.key == g.key):
            mine += seen
    together = own[i][j][0] / h.members
    cut = (1.0 - together) * mine / sharers
    return 1.0 - cut if cut < 1.0 else 0.0


def group_rates(
    groups: Sequence[FlowGroup], cap_bps: np.ndarray, others: np.ndarray,
    own: Sequence[Sequence[tuple[float, float]]] | None, streams: int, window_bytes: float,
    member_cap_bps: np.ndarray | None = None, switching: bool = False, per_server: bool = False,
) -> tuple[list[float], list[list[float]]]:
    """Rate per member of each group while it sends, against other jobs' load ``others`` and the plan's own groups.

    :param cap_bps: capacity of each directed link now, bit/s.
    :param others: other jobs' load array (:func:`empty_load` layout).
    :param own: how the plan's own groups overlap (:func:`own_load`); None: only co-active groups send
        together (a first pass, before the iteration time is known).
    :param streams: TCP connections per transfer; ``window_bytes``: their window.
    :param member_cap_bps: the most one member carries over each directed link (the measured rate of
        one VM pair, :attr:`sfenv.world.topology.Topology.directed_pair_cap_bps`), or None: no such cap.
    :param switching: the sharing model of env v3 (:func:`_level`); False: env v2's.
    :param per_server: one VM pair's rate binds the members a server sends together (each member then
        at most ``servers / members`` of it, where the group knows its servers and has more members than
        servers); False (env v5's): each member is a VM pair of its own.
    :return: ``(rates in bit/s, per group the level on each of its links)``.
    """
    rates: list[float] = []
    levels: list[list[float]] = []
    for i, g in enumerate(groups):
        bound = transport_cap_bps(g.rtt_s, streams, window_bytes)
        if member_cap_bps is not None:  # a relayed route runs at its slowest hop's VM-pair rate
            packed = per_server and 0 < g.servers < g.members
            for e in g.links:
                cap = float(member_cap_bps[e])
                bound = min(bound, cap * g.servers / g.members if packed else cap)
        per_link = [_level(i, e, float(cap_bps[e]), others, groups, own, bound, switching) for e in g.links]
        rate = min(bounded for _, bounded in per_link) if per_link else math.inf
        rates.append(rate if rate < bound else bound)
        levels.append([level for level, _ in per_link])
    return rates, levels


def own_load(
    groups: Sequence[FlowGroup], duty: Sequence[float], iter_time: float, phases: tuple[float, float, float],
    overlap: float, hops: dict[tuple[int, int], float] | None = None,
) -> list[list[tuple[float, float]]]:
    """How a plan's own groups send together: ``[i][j]`` = (members of group j sending while group i sends, their rate).

    Hops send only while the pipeline runs (a share ``pipe`` of the iteration), so while one hop
    sends another sends with its duty over that share; under GPipe (``phased`` groups) forward
    transfers run only in the forward pass (share ``fwd``) and backward ones in the backward pass
    (``bwd``), never together.  A job's rings and hops send together as much as the all-reduce
    overlaps the pipeline (``overlap``, the plan's ``dp_overlap``); a ring sees the hops of the
    pipeline it overlaps spread over its own time.

    :param duty: each group's duty; ``iter_time``: the iteration time it was computed with.
    :param phases: ``(fwd, bwd, pipe)`` shares of the iteration (``fwd + bwd = pipe``).
    :param hops: the schedule's own overlap of two hop directions (``(a, b)``: the share of a's
        sending time during which b sends, :func:`sfenv.model.pipeline.hop_overlap`), or None: hops
        send independently, each with its duty within its share of the iteration.
    """
    fwd, bwd, pipe = phases
    out: list[list[tuple[float, float]]] = []
    for g, dg in zip(groups, duty):
        row: list[tuple[float, float]] = []
        for h, d in zip(groups, duty):
            rate = h.transfers * h.bits / (d * iter_time) if d > 0 and iter_time > 0 else 0.0  # while it sends
            if h.kind == BURST and g.kind == BURST:
                if hops is not None and (g.key, h.key) in hops:
                    together = hops[(g.key, h.key)]
                elif h.phased:
                    together = 0.0 if (g.key & 1) != (h.key & 1) else _within(d, bwd if h.key & 1 else fwd)
                else:
                    together = _within(d, pipe)
            elif h.kind == BURST:
                together = overlap * _within(d, max(pipe, dg))
            elif g.kind == BURST:
                together = overlap * _within(d, pipe)
            else:
                together = d
            row.append((h.members * together, h.members * together * rate))
        out.append(row)
    return out


def _within(duty: float, share: float) -> float:
    """A group's duty within a share of the iteration that holds all its sending (at most 1)."""
    return min(1.0, duty / share) if share > 0 else 1.0


def duties(groups: Sequence[FlowGroup], rates: Sequence[float], iter_time: float) -> list[float]:
    """Each group's duty: the share of an iteration of ``iter_time`` seconds it spends sending (at most 1)."""
    out = []
    for g, r in zip(groups, rates):
        d = g.transfers * g.bits / (r * iter_time) if r > 0 and iter_time > 0 else 1.0
        out.append(d if d < 1.0 else 1.0)
    return out


def _burst_covariance(
    groups: Sequence[FlowGroup], rates: Sequence[float], duty: Sequence[float], iter_time: float,
    overlap: dict[tuple[int, int], float] | None, acc: dict[int, list[float]],
) -> None:
    """Add to ``acc``'s variance rows the covariance of one plan's bursts that cross a common link.

    Groups of one hop and direction send at the same moments (on together with the smaller duty);
    two hop directions are on together for the share of the first's sending the schedule gives
    (``overlap``), else independently: ``Var(sum) = sum Var + 2 sum Cov``; a covariance decorrelates
    at the mean of its two groups' rates (row :data:`BURST_DECAY`).
    """
    bursts = [(g, r, d) for g, r, d in zip(groups, rates, duty) if g.kind == BURST and r > 0.0]
    touched: set[int] = set()
    for a, (g, rg, dg) in enumerate(bursts):
        for h, rh, dh in bursts[a + 1:]:
            if g.key == h.key:
                both = dg if dg < dh else dh
            elif overlap is not None and (g.key, h.key) in overlap:
                both = dg * overlap[(g.key, h.key)]
            else:
                continue
            cov = g.members * h.members * rg * rh * (both - dg * dh)
            rate = 0.5 * (_switching(g, rg, dg, iter_time) + _switching(h, rh, dh, iter_time))
            for e in set(g.links) & set(h.links):
                row = acc[e]
                row[BURST_VAR] += 2.0 * cov
                row[BURST_DECAY] += 2.0 * cov * rate
                if g.phased and h.phased:
                    row[PHASED_VAR] += 2.0 * cov
                touched.add(e)
    for e in touched:
        row = acc[e]
        for k in (BURST_VAR, BURST_DECAY, PHASED_VAR):
            row[k] = row[k] if row[k] > 0.0 else 0.0


def load_of(
    groups: Sequence[FlowGroup], rates: Sequence[float], levels: Sequence[Sequence[float]], duty: Sequence[float],
    iter_time: float = 0.0, overlap: dict[tuple[int, int], float] | None = None, switching: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """What a plan's groups add to the load of each directed link they cross.

    A group is present ``members x duty`` times, each presence scaled by the share of the link's
    level it uses (``rate / level``: 1 on its bottleneck, less where it is limited elsewhere); a
    burst group also adds its average rate ``members x duty x rate`` and its variance (all members
    on with probability ``duty``), a phased (GPipe) one also to the phased rows, with ``iter_time``
    (its job's iteration time, seconds) as its cycle.

    :param overlap: how the plan's hop directions overlap under its schedule
        (:func:`sfenv.model.pipeline.hop_overlap`), for the covariance of its bursts on a common link
        (:func:`_burst_covariance`); None: bursts of different hops independent.
    :param switching: the sharing model of env v3 (:data:`WAN_SHARING`): the covariance of the plan's
        bursts is added; False (env v2): each group's variance alone.
    :return: ``(directed link ids, (LOAD_ROWS, len(ids)) values)`` in the :func:`empty_load` row
        layout (a link crossed by several groups appears once, summed).
    """
    acc: dict[int, list[float]] = {}
    for g, r, lv, d in zip(groups, rates, levels, duty):
        n = g.members * d
        for e, level in zip(g.links, lv):
            scale = r / level if r < level else 1.0
            row = acc.setdefault(e, [0.0] * LOAD_ROWS)
            row[BUSY] += n * scale
            if g.kind == BULK:
                row[BULK_BUSY] += n * scale
            else:
                var = g.members * g.members * r * r * d * (1.0 - d)  # on (all members) with probability d
                row[BURST_BPS] += n * r
                row[BURST_VAR] += var
                row[BURST_DECAY] += var * _switching(g, r, d, iter_time)
                if g.phased:
                    row[PHASED_BUSY] += n * scale
                    row[PHASED_BPS] += n * r
                    row[PHASED_VAR] += var
                    row[PHASED_CYCLE] += n * scale * iter_time
    if switching:
        _burst_covariance(groups, rates, duty, iter_time, overlap, acc)
    ids = sorted(acc)
    vals = np.array([acc[e] for e in ids], dtype=float).reshape(len(ids), LOAD_ROWS).T.copy()
    return np.array(ids, dtype=np.intp), vals
