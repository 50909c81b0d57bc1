"""A pipeline's own hop transfers sharing their links, replayed under its schedule (the ``v4`` sharing model).

Under 1F1B and GPipe a schedule fixes when each stage sends, so whether two of a plan's hops that
cross a common link send at once, and for how long, follows from the schedule and from the rates
they get while they do.  The ``v3`` sharing model replays the schedule once at the rates each hop
gets alone (:func:`sfenv.model.pipeline.hop_overlap`) and charges the overlap it finds; but hops
that share a link send longer and so overlap more, and on deep chains over relayed routes that
replay was 10-14 % optimistic against the flow-level check (docs/model.md, "Deep 1F1B chains").

:func:`replay_shared` plays the schedule instead as a fluid model of the plan's own transfers: the
stages run their 1F1B or GPipe order (forward ``c/3``, backward ``2c/3``, as
:func:`sfenv.model.pipeline.replay_pipeline`), each hop direction is a FIFO channel, and while
several channels send their members share the links at the max-min fair rates of
:func:`sfenv.model.sharing.max_min_rates`, recomputed at every event (processor sharing, the fluid
view of TCP flows that Bertsekas & Gallager, and Massoulie & Roberts, "Bandwidth sharing: objectives
and algorithms", IEEE/ACM ToN 10(3), 2002, take for elastic traffic).  It returns each flow's
mean transfer time and the channels' co-sending shares.  Other jobs' traffic enters as the rates
each flow gets without its own job's other hops (its bound) and as frozen flows on the links.

Under 1F1B the steady state repeats: after a few micro-batches the whole state of the replay (each
stage's place in its order and running operation, each channel's queue, transfer and messages in
flight, the bits each flow has left), taken when the first stage starts a steady-state forward and
read relative to that time and micro-batch, equals the state one or two micro-batches before.  From
then on every micro-batch plays the same until a stage reaches its cool-down, so the replay moves
time, micro-batches and its sums on by whole periods instead of playing them (``skip_periods``; the
states agree within a share of 1e-9 of each entry, so the result agrees with the full replay to
about that, as ``tests/test_hopshare.py`` checks).  On the 16-stage chains of 256-512 micro-batches
that SpanTrain proposes the steady state starts after 11-26 micro-batches.

Zero-bubble schedules (ZB-H1, ZB-H2; forward, input and weight gradient a third of the compute
each) are replayed too, in Qi et al.'s hand-crafted order or the greedy one (``order``), as
:mod:`sfenv.model.pipeline` and the flow-level check play them; only the ``v5`` sharing model asks
for them.  They have a compiled twin of their own
(:func:`sfenv.model._pipeline_jit.replay_shared_zero_bubble`).  Their steady state is skipped as
1F1B's is (the state then also holds a greedy order's counters; a hand-crafted order's entries repeat
three positions on), but the model asks for it only under
:attr:`sfenv.model.perf.PerfParams.skip_zero_bubble_periods`, so env v5's episodes stay as recorded.
A greedy order whose stages slide against each other (a window still filling) never repeats and is
played in full.

With numba installed the replay of 1F1B and GPipe runs as a compiled twin
(:func:`sfenv.model._pipeline_jit.replay_shared`, the same floats in the same order, compared in
``tests/test_hopshare.py``).

The replay is written apart from :mod:`sfenv.model.flowcheck` (which plays every job's transfers
together, with start offsets, for many iterations) and is checked against it in
``tests/test_hopshare.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from sfenv.model.pipeline import (
    _B,
    _F,
    _W,
    _fixed_order,
    _jit_kernels,
    _shared_time,
    zero_bubble_order,
    zero_bubble_split,
)
from sfenv.model.sharing import max_min_rates

__all__ = ["REPLAYED_SCHEDULES", "ZERO_BUBBLE_ORDERS", "HopFlow", "SharedReplay", "replay_shared"]

#: the schedules :func:`replay_shared` plays
REPLAYED_SCHEDULES = ("1f1b", "gpipe", "zb-h1", "zb-h2")
#: the orders a zero-bubble schedule is replayed in: Qi et al.'s hand-crafted one, or greedy
#: (:mod:`sfenv.model.pipeline`'s rule: a ready input gradient, else a forward the window allows, else
#: a pending weight gradient)
ZERO_BUBBLE_ORDERS = ("hand", "greedy")

#: a flow's transfer is done when this share of its bits is left (float rounding)
_DONE = 1e-9
#: the most micro-batches one period of the steady state may span
_PERIODS = 4
#: two states are the same when each entry agrees within this share of the larger (and 1e-12 absolute)
_SAME = 1e-9


def state_size(p: int, flows: int, greedy: bool = False) -> int:
    """The longest state :meth:`_Replay.state` keeps for ``p`` stages and ``flows`` flows (longer: no period is sought).

    Besides a fixed part per stage (four more entries under a greedy zero-bubble order), channel and
    flow, it leaves room for eight queued or in-flight messages per stage and channel (1F1B's windows
    keep fewer in its steady state).
    """
    channels = 2 * (p - 1)
    return (8 if greedy else 4) * p + 6 * channels + 2 * flows + 1 + 8 * (p + channels)


def _periodic_part(schedule: str, m: int, windows: tuple[int, ...]) -> list[tuple[int, int]]:
    """Per stage, the periodic part ``[start, end)`` of its hand-crafted zero-bubble order.

    In it each entry is the one three positions back with the next micro-batch: ``[u + 2d - 1, 3m - 2u - d)``
    (:func:`sfenv.model.pipeline.zero_bubble_order`: the last warm-up or deferral forward, then the
    blocks of input gradient, weight gradient and forward).
    """
    u, d = zero_bubble_split(schedule, windows)
    return [(uk + 2 * dk - 1, 3 * m - 2 * uk - dk) for uk, dk in zip(u, d)]


def same_state(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether two states agree entry by entry within :data:`_SAME` of the larger magnitude (plus 1e-12)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if abs(x - y) > _SAME * max(abs(x), abs(y)) + 1e-12:
            return False
    return True


class HopFlow(NamedTuple):
    """The members of one pipeline hop direction over one route (a burst :class:`sfenv.model.sharing.FlowGroup`).

    :param channel: the hop direction, ``2 hop + direction`` (0 forward).
    :param bits: bits per member per transfer.
    :param links: directed links of the route.
    :param members: identical transfers sent at once (replica pairs).
    :param bound: the most one member carries, bit/s, whatever its own job's other hops leave.
    """

    channel: int
    bits: float
    links: tuple[int, ...]
    members: int
    bound: float


class SharedReplay(NamedTuple):
    """What :func:`replay_shared` found.

    :param pipeline_s: time from the first forward to the last backward of the first stage.
    :param transfer_s: per flow (in the order given), its mean transfer time over the iteration, seconds.
    :param overlap: ``{(a, b): share of channel a's sending time during which channel b sends}`` for
        WAN channels ``a != b`` that send, as :func:`sfenv.model.pipeline.hop_overlap` keys them.
    :param skipped: micro-batches of the steady state repeated rather than played (``skip_periods``).
    """

    pipeline_s: float
    transfer_s: list[float]
    overlap: dict[tuple[int, int], float]
    skipped: int = 0


class _Seen(NamedTuple):
    """A state :meth:`_Replay.look_for_period` recorded, with the time and the sums a skip moves on from."""

    state: list[float]
    t: float
    done: int
    total: list[float]
    transfers: list[int]
    spans: list[int]
    wdone: list[int]
    ops_done: list[int]


class _Replay:
    """The state of one Python run of :func:`replay_shared` (see there); the compiled twin mirrors it."""

    def __init__(self, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int,
                 schedule: str, windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray,
                 others_busy: np.ndarray, skip_periods: bool = True, order: str = "hand") -> None:
        p = len(compute)
        self.p, self.m = p, m
        self.zero_bubble = schedule in ("zb-h1", "zb-h2")
        self.span = schedule == "zb-h2"  # its pipeline time is its longest stage span
        self.greedy = self.zero_bubble and order == "greedy"
        # zero-bubble counters: input gradients, forwards and weight gradients started; weight gradients and
        # operations done; each stage's first start and last end
        self.nb, self.nf, self.nw, self.wdone, self.ops_done = [0] * p, [0] * p, [0] * p, [0] * p, [0] * p
        self.first, self.last = [math.inf] * p, [0.0] * p
        self.windows = list(windows)
        self.compute, self.latency, self.transfer = compute, latency, transfer
        self.flows, self.cap, self.others = flows, cap_bps, others_busy
        self.of_channel: list[list[int]] = [[] for _ in range(2 * (p - 1))]
        for f, flow in enumerate(flows):
            self.of_channel[flow.channel].append(f)
        if self.zero_bubble:
            u, d = zero_bubble_split(schedule, tuple(windows))
            self.orders = [zero_bubble_order(m, u[k], d[k]) for k in range(p)]
        else:
            self.orders = [_fixed_order(schedule, m, windows[k]) for k in range(p)]
        self.pos = [0] * p
        self.op_end = [math.inf] * p  # when the stage's running operation ends (inf: idle)
        self.op: list[tuple[int, int]] = [(0, 0)] * p
        self.act = [[0.0 if k == 0 else math.inf for _ in range(m)] for k in range(p)]  # activation arrivals
        self.grad = [[math.inf] * m for _ in range(p)]  # gradient arrivals (the last stage: its own forward)
        self.queue: list[list[int]] = [[] for _ in range(2 * (p - 1))]
        self.busy = [False] * (2 * (p - 1))
        self.began = [0.0] * (2 * (p - 1))
        self.sending_mb = [0] * (2 * (p - 1))
        self.local_end = [math.inf] * (2 * (p - 1))  # a transfer inside a region: when it ends
        self.on = [False] * len(flows)  # a transfer of the flow under way
        self.left = [0.0] * len(flows)  # its bits left
        self.arrivals: list[tuple[float, int, int]] = []  # (time, channel, micro-batch)
        self.spans: list[list[tuple[float, float]]] = [[] for _ in range(2 * (p - 1))]
        self.total = [0.0] * len(flows)
        self.count = [0] * len(flows)
        self.done = 0
        self.t = 0.0
        self.arrived = [0] * (2 * (p - 1))  # per channel, messages arrived
        self.seeking = skip_periods and schedule != "gpipe"  # a period is still looked for (GPipe has none)
        # per micro-batch of the steady state, the order entries each stage reads (1F1B: B, F; zero-bubble: B, W, F)
        self.per_mb = 3 if self.zero_bubble else 2
        if self.zero_bubble and not self.greedy:
            self.periodic = _periodic_part(schedule, m, tuple(windows))
        self.history: list[_Seen] = []
        self.skipped = 0

    def start(self) -> None:
        """Start every stage operation and channel transfer that can start now."""
        t = self.t
        for k in range(self.p):
            if self.zero_bubble:
                if self.op_end[k] == math.inf:
                    picked = self._zero_bubble_op(k)
                    if picked is not None:  # forward, input and weight gradient: a third of the compute each
                        self.op_end[k] = t + self.compute[k] / 3.0
                        self.op[k] = picked
                        self.first[k] = min(self.first[k], t)
            elif self.op_end[k] == math.inf and self.pos[k] < len(self.orders[k]):
                kind, i = self.orders[k][self.pos[k]]
                if (self.act[k][i] if kind == _F else self.grad[k][i]) <= t:
                    c = self.compute[k]
                    self.op_end[k] = t + (c / 3.0 if kind == _F else 2.0 * c / 3.0)
                    self.op[k] = (kind, i)
                    self.pos[k] += 1
        for ch, waiting in enumerate(self.queue):
            if waiting and not self.busy[ch]:
                self.busy[ch] = True
                self.sending_mb[ch] = waiting.pop(0)
                self.began[ch] = t
                if self.of_channel[ch]:
                    for f in self.of_channel[ch]:
                        self.on[f] = True
                        self.left[f] = self.flows[f].bits
                else:
                    self.local_end[ch] = t + self.transfer[ch >> 1]

    def _zero_bubble_op(self, k: int) -> tuple[int, int] | None:
        """The operation stage ``k`` starts now under a zero-bubble schedule (taken from its order), or None."""
        t = self.t
        if not self.greedy:
            if self.pos[k] >= len(self.orders[k]):
                return None
            kind, i = self.orders[k][self.pos[k]]
            if (kind == _F and self.act[k][i] > t) or (kind == _B and self.grad[k][i] > t):
                return None
            self.pos[k] += 1
            return kind, i
        b, f = self.nb[k], self.nf[k]
        if b < self.m and self.grad[k][b] <= t:
            self.nb[k] += 1
            return _B, b
        if f < self.m and self.act[k][f] <= t and f - self.wdone[k] < self.windows[k]:
            self.nf[k] += 1
            return _F, f
        if self.nw[k] < b:
            self.nw[k] += 1
            return _W, self.nw[k] - 1
        return None

    def finished(self) -> bool:
        """Whether the iteration is played: the first stage's last backward, or every operation (zero-bubble)."""
        return min(self.ops_done) >= 3 * self.m if self.zero_bubble else self.done >= self.m

    def pipeline_time(self) -> float:
        """The iteration's pipeline time: its end, or under ZB-H2 its longest stage span (the next may start early)."""
        if self.span:
            return max(end - start for start, end in zip(self.first, self.last))
        return self.t

    def step(self) -> bool:
        """Advance to the next event and handle it; False when nothing is left to happen."""
        ids = [f for f in range(len(self.flows)) if self.on[f]]
        rates = max_min_rates([(self.flows[f].links, float(self.flows[f].members), self.flows[f].bound)
                               for f in ids], self.cap, self.others) if ids else []
        nxt = min(min(self.op_end), min(self.local_end), min([a[0] for a in self.arrivals], default=math.inf))
        for f, r in zip(ids, rates):
            nxt = min(nxt, self.t + self.left[f] / r)
        if nxt == math.inf:
            return False
        dt, self.t = nxt - self.t, nxt
        for f, r in zip(ids, rates):
            self.left[f] -= r * dt
        self._finish_ops()
        self._finish_transfers()
        self._arrive()
        return True

    def _finish_ops(self) -> None:
        for k, end in enumerate(self.op_end):
            if end <= self.t:
                self.op_end[k] = math.inf
                kind, i = self.op[k]
                self.ops_done[k] += 1
                self.last[k] = self.t
                if kind == _W:
                    self.wdone[k] += 1
                elif kind == _F and k < self.p - 1:
                    self.queue[2 * k].append(i)
                elif kind == _F:
                    self.grad[k][i] = self.t
                elif k:
                    self.queue[2 * (k - 1) + 1].append(i)
                else:
                    self.done += 1

    def _finish_transfers(self) -> None:
        t = self.t
        for ch, members in enumerate(self.of_channel):
            if not self.busy[ch]:
                continue
            if members:
                for f in members:
                    if self.on[f] and self.left[f] <= self.flows[f].bits * _DONE:
                        self.on[f] = False
                        self.total[f] += t - self.began[ch]
                        self.count[f] += 1
                if any(self.on[f] for f in members):
                    continue
                self.spans[ch].append((self.began[ch], t))
            elif self.local_end[ch] > t:
                continue
            self.local_end[ch] = math.inf
            self.busy[ch] = False
            self.arrivals.append((t + self.latency[ch >> 1], ch, self.sending_mb[ch]))

    def _arrive(self) -> None:
        keep = []
        for when, ch, mb in self.arrivals:
            if when > self.t:
                keep.append((when, ch, mb))
            elif ch & 1:
                self.grad[ch >> 1][mb] = when
                self.arrived[ch] += 1
            else:
                self.act[(ch >> 1) + 1][mb] = when
                self.arrived[ch] += 1
        self.arrivals = keep

    def state(self) -> list[float] | None:
        """The state relative to now and to the first stage's micro-batch (None: longer than :func:`state_size`)."""
        t, i, s = self.t, self.op[0][1], self.per_mb
        out: list[float] = []
        for k in range(self.p):
            kind, mb = self.op[k]
            at = 0.0 if self.greedy else float(self.pos[k] - s * i)  # a greedy order keeps no position
            if self.op_end[k] == math.inf:
                out += [at, -1.0, -1.0, 0.0]
            else:
                out += [at, self.op_end[k] - t, float(kind), float(mb - i)]
            if self.greedy:  # its counters, not its position, say where it is
                out += [float(self.nb[k] - i), float(self.nf[k] - i), float(self.nw[k] - i), float(self.wdone[k] - i)]
        for ch, waiting in enumerate(self.queue):
            local = self.local_end[ch] - t if self.local_end[ch] != math.inf else -1.0
            if self.busy[ch]:
                out += [float(len(waiting)), 1.0, float(self.sending_mb[ch] - i), self.began[ch] - t, local]
            else:
                out += [float(len(waiting)), 0.0, 0.0, 0.0, local]
            out.append(float(self.arrived[ch] - i))
            out += [float(mb - i) for mb in waiting]
        for f in range(len(self.flows)):
            out += [1.0, self.left[f]] if self.on[f] else [0.0, 0.0]
        out.append(float(len(self.arrivals)))
        for when, ch, mb in self.arrivals:
            out += [when - t, float(ch), float(mb - i)]
        return out if len(out) <= state_size(self.p, len(self.flows), self.greedy) else None

    def look_for_period(self) -> None:
        """The first stage has just started an operation: if the state repeats one of the last few, skip ahead."""
        kind, i = self.op[0]
        if not self.seeking or kind != _F or i < self.windows[0]:
            return
        now = self.state()
        if now is None:
            self.history.clear()
            return
        self.history.append(_Seen(now, self.t, self.done, list(self.total), list(self.count),
                                  [len(s) for s in self.spans], list(self.wdone), list(self.ops_done)))
        if len(self.history) > _PERIODS + 1:
            del self.history[0]
        for q in range(1, len(self.history)):
            if same_state(now, self.history[-1 - q].state):
                if self.zero_bubble and self._periods_left(q) < 1:
                    return  # a stage still reads its order's warm-up: look again later (1F1B looks once)
                self.seeking = False
                self._skip(q, self.history[-1 - q])
                return

    def _periods_left(self, q: int) -> int:
        """How many whole periods of ``q`` micro-batches can be skipped from now (0: none).

        Every order entry the skipped periods read must repeat one read in the period seen.  1F1B's
        entries repeat two positions on, micro-batch plus one, from ``w - 1`` to ``2m - w``; a
        hand-crafted zero-bubble order's three on, from ``u + 2d - 1`` to ``3m - 2u - d``
        (:func:`sfenv.model.pipeline.zero_bubble_order`); a greedy one reads no order, and its
        counters must stay short of ``m`` (so every test against ``m`` the period made still holds).
        """
        if self.greedy:
            return min((self.m - 1 - max(self.nb[k], self.nf[k])) // q for k in range(self.p))
        if self.zero_bubble:
            if any(self.pos[k] - 3 * q < start for k, (start, _) in enumerate(self.periodic)):
                return 0
            return min((end - 1 - self.pos[k]) // (3 * q) for k, (_, end) in enumerate(self.periodic))
        if any(self.pos[k] - 2 * q < self.windows[k] - 1 for k in range(self.p)):
            return 0
        return min((2 * self.m - self.windows[k] - self.pos[k]) // (2 * q) for k in range(self.p))

    def _skip(self, q: int, before: _Seen) -> None:
        """Play whole periods of ``q`` micro-batches, as many as :meth:`_periods_left` allows, at once."""
        n = self._periods_left(q)
        if n < 1:
            return
        period, nq = self.t - before.t, n * q
        shift = n * period
        self.t += shift
        for k in range(self.p):
            self.pos[k] += self.per_mb * nq if not self.greedy else 0
            self.op[k] = (self.op[k][0], self.op[k][1] + nq)
            if self.op_end[k] != math.inf:
                self.op_end[k] += shift
            for times in (self.act[k], self.grad[k]) if k else (self.grad[k],):
                for mb in range(self.m - 1, nq - 1, -1):
                    times[mb] = times[mb - nq] + shift
        if self.zero_bubble:
            self._skip_zero_bubble(n, nq, shift, before)
        for ch in range(len(self.queue)):
            self.queue[ch] = [mb + nq for mb in self.queue[ch]]
            self.sending_mb[ch] += nq
            self.began[ch] += shift
            self.arrived[ch] += nq
            if self.local_end[ch] != math.inf:
                self.local_end[ch] += shift
            seen = self.spans[ch][before.spans[ch]:]
            for j in range(1, n + 1):
                self.spans[ch] += [(start + j * period, end + j * period) for start, end in seen]
        self.arrivals = [(when + shift, ch, mb + nq) for when, ch, mb in self.arrivals]
        for f in range(len(self.flows)):
            self.total[f] += n * (self.total[f] - before.total[f])
            self.count[f] += n * (self.count[f] - before.transfers[f])
        self.done += n * (self.done - before.done)
        self.skipped = nq

    def _skip_zero_bubble(self, n: int, nq: int, shift: float, before: _Seen) -> None:
        """:meth:`_skip`'s zero-bubble counters: started, done, and each stage's last end."""
        for k in range(self.p):
            if self.greedy:
                self.nb[k] += nq
                self.nf[k] += nq
                self.nw[k] += nq
            self.wdone[k] += n * (self.wdone[k] - before.wdone[k])
            self.ops_done[k] += n * (self.ops_done[k] - before.ops_done[k])
            self.last[k] += shift


def _replay_python(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
    windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray, others_busy: np.ndarray,
    skip_periods: bool = True, order: str = "hand",
) -> SharedReplay:
    """:func:`replay_shared` in Python (the reference of the compiled twins)."""
    run = _Replay(compute, latency, transfer, m, schedule, windows, flows, cap_bps, others_busy, skip_periods, order)
    while not run.finished():
        idle = run.op_end[0] == math.inf
        run.start()
        if idle and run.op_end[0] != math.inf:  # the first stage started an operation
            run.look_for_period()
        if not run.step():
            raise RuntimeError("replay_shared: the schedule stalled")  # pragma: no cover - orders are deadlock-free
    overlap: dict[tuple[int, int], float] = {}
    for a, sa in enumerate(run.spans):
        total = 0.0
        for start, end in sa:
            total += end - start
        for b, sb in enumerate(run.spans):
            if a != b and total > 0.0 and sb:
                overlap[(a, b)] = _shared_time(sa, sb) / total
    mean = [run.total[f] / run.count[f] if run.count[f] else math.nan for f in range(len(flows))]
    return SharedReplay(run.pipeline_time(), mean, overlap, run.skipped)


def replay_shared(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
    windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray, others_busy: np.ndarray,
    compiled: bool | None = None, skip_periods: bool = True, order: str = "hand",
) -> SharedReplay:
    """One iteration of a pipeline whose WAN hops share links as they send (see the module docstring).

    :param compute: per stage, its compute time per micro-batch (forward and backward).
    :param latency: per hop, the one-way latency a message takes after leaving its channel.
    :param transfer: per hop, its transfer time where no flow is given for its channels (inside a region).
    :param m: micro-batches; ``windows``: each stage's 1F1B window (ignored by GPipe).
    :param flows: the WAN flows; a transfer on a channel ends when all its flows have sent.
    :param cap_bps: capacity of each directed link; ``others_busy``: other jobs' flows on each, frozen.
    :param compiled: use the compiled twin (None: when numba is available).
    :param skip_periods: under 1F1B and the zero-bubble schedules, skip whole periods of the steady
        state once it repeats (see the module docstring); False plays every micro-batch.
    :param order: a zero-bubble schedule's order, one of :data:`ZERO_BUBBLE_ORDERS` (forward, input
        and weight gradient a third of the compute each; the operation orders are
        :mod:`sfenv.model.pipeline`'s, as the flow-level check plays them).  :attr:`SharedReplay.pipeline_s`
        is then the iteration's end, or under ZB-H2 its longest stage span.
    :return: the :class:`SharedReplay`.
    """
    if schedule not in REPLAYED_SCHEDULES:
        raise ValueError(f"replay_shared plays {', '.join(REPLAYED_SCHEDULES)}, got {schedule!r}")
    if order not in ZERO_BUBBLE_ORDERS:
        raise ValueError(f"replay_shared: order {order!r}, expected one of {ZERO_BUBBLE_ORDERS}")
    zero_bubble = schedule in ("zb-h1", "zb-h2")
    jit = _jit_kernels() if compiled is not False else None
    if compiled and jit is None:
        raise ValueError("replay_shared: compiled=True needs numba (pip install sfenv[fast])")
    if not zero_bubble:
        order = "hand"  # 1F1B and GPipe have one order
    if compiled is None:  # the model's calls: the same inputs recur (a plan evaluated again), so remember them
        cap, others = np.asarray(cap_bps, dtype=np.float64), np.asarray(others_busy, dtype=np.float64)
        played = _replay_remembered(
            jit is not None, tuple(map(float, compute)), tuple(map(float, latency)), tuple(map(float, transfer)), m,
            schedule, tuple(map(int, windows)), tuple(flows), cap.tobytes(), others.tobytes(), skip_periods, order)
        return played._replace(transfer_s=list(played.transfer_s), overlap=dict(played.overlap))
    return _replay_once(jit, compute, latency, transfer, m, schedule, windows, flows, cap_bps, others_busy,
                        skip_periods, order)


@lru_cache(maxsize=1 << 11)  # a few kB a key on 64 regions
def _replay_remembered(
    compiled: bool, compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m: int,
    schedule: str, windows: tuple[int, ...], flows: tuple[HopFlow, ...], cap: bytes, others: bytes,
    skip_periods: bool, order: str = "hand",
) -> SharedReplay:
    """:func:`replay_shared` of exact inputs, remembered (the links' capacities and loads as their float64 bytes).

    On 600 random masked steps of spider-64 with SpanTrain's candidates, 4,686 of 5,720 replays had
    inputs not seen before (docs/model.md).
    """
    # writable copies: the compiled twin is compiled (warm_up) for writable arrays
    return _replay_once(_jit_kernels() if compiled else None, compute, latency, transfer, m, schedule, windows, flows,
                        np.frombuffer(cap).copy(), np.frombuffer(others).copy(), skip_periods, order)


def _replay_once(
    jit: object | None, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int,
    schedule: str, windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray, others_busy: np.ndarray,
    skip_periods: bool, order: str = "hand",
) -> SharedReplay:
    if jit is None or len(compute) < 2:
        return _replay_python(compute, latency, transfer, m, schedule, windows, flows, cap_bps, others_busy,
                              skip_periods, order)
    if schedule in ("zb-h1", "zb-h2"):
        return _replay_compiled_zero_bubble(jit, compute, latency, transfer, m, schedule, windows, flows, cap_bps,
                                            others_busy, order, skip_periods)
    return _replay_compiled(jit, compute, latency, transfer, m, schedule, windows, flows, cap_bps, others_busy,
                            skip_periods)


def _replay_compiled(
    jit: object, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int,
    schedule: str, windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray, others_busy: np.ndarray,
    skip_periods: bool,
) -> SharedReplay:
    """:func:`replay_shared` through the compiled twin: the same state, laid out in arrays."""
    kinds, mbs = _order_arrays(schedule, m, tuple(windows))
    links = _flow_links(flows)
    end, total, count, shares, skipped = jit.replay_shared(  # type: ignore[attr-defined]
        np.asarray(compute, dtype=np.float64), np.asarray(latency, dtype=np.float64),
        np.asarray(transfer, dtype=np.float64), m, kinds, mbs, np.array([f.channel for f in flows], dtype=np.int64),
        np.array([f.bits for f in flows], dtype=np.float64), np.array([float(f.members) for f in flows]),
        np.array([f.bound for f in flows], dtype=np.float64), links,
        np.asarray(cap_bps, dtype=np.float64), np.asarray(others_busy, dtype=np.float64),
        np.asarray(windows, dtype=np.int64), skip_periods and schedule == "1f1b", state_size(len(compute), len(flows)))
    return _compiled_result(end, total, count, shares, skipped)


def _compiled_result(end: float, total: np.ndarray, count: np.ndarray, shares: np.ndarray,
                     skipped: int) -> SharedReplay:
    """The :class:`SharedReplay` of a compiled twin's arrays (mean transfer time per flow, co-sending shares)."""
    mean = [float(total[f] / count[f]) if count[f] else math.nan for f in range(total.shape[0])]
    channels = shares.shape[0]
    overlap = {(a, b): float(shares[a, b]) for a in range(channels) for b in range(channels) if shares[a, b] >= 0.0}
    return SharedReplay(float(end), mean, overlap, int(skipped))


def _flow_links(flows: Sequence[HopFlow]) -> np.ndarray:
    """Each flow's directed links, a row each (``-1`` padded): the compiled twins' layout."""
    width = max([len(f.links) for f in flows], default=1)
    links = np.full((len(flows), width), -1, dtype=np.int64)
    for i, f in enumerate(flows):
        links[i, : len(f.links)] = f.links
    return links


def _replay_compiled_zero_bubble(
    jit: object, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int,
    schedule: str, windows: Sequence[int], flows: Sequence[HopFlow], cap_bps: np.ndarray, others_busy: np.ndarray,
    order: str, skip_periods: bool,
) -> SharedReplay:
    """:func:`replay_shared` of a zero-bubble schedule through its compiled twin."""
    kinds, mbs = _zero_bubble_arrays(schedule, m, tuple(windows))
    periodic = np.array(_periodic_part(schedule, m, tuple(windows)), dtype=np.int64).T.copy()
    greedy = order == "greedy"
    end, total, count, shares, skipped = jit.replay_shared_zero_bubble(  # type: ignore[attr-defined]
        np.asarray(compute, dtype=np.float64), np.asarray(latency, dtype=np.float64),
        np.asarray(transfer, dtype=np.float64), m, kinds, mbs, greedy, schedule == "zb-h2",
        np.array([f.channel for f in flows], dtype=np.int64), np.array([f.bits for f in flows], dtype=np.float64),
        np.array([float(f.members) for f in flows]), np.array([f.bound for f in flows], dtype=np.float64),
        _flow_links(flows), np.asarray(cap_bps, dtype=np.float64), np.asarray(others_busy, dtype=np.float64),
        np.asarray(windows, dtype=np.int64), periodic, skip_periods, state_size(len(compute), len(flows), greedy))
    return _compiled_result(end, total, count, shares, skipped)


@lru_cache(maxsize=1 << 10)
def _zero_bubble_arrays(schedule: str, m: int, windows: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The stages' hand-crafted orders (:func:`sfenv.model.pipeline.zero_bubble_order`), read-only arrays."""
    u, d = zero_bubble_split(schedule, windows)
    orders = np.array([zero_bubble_order(m, u[k], d[k]) for k in range(len(windows))], dtype=np.int64)
    kinds, mbs = np.ascontiguousarray(orders[:, :, 0]), np.ascontiguousarray(orders[:, :, 1])
    kinds.setflags(write=False)
    mbs.setflags(write=False)
    return kinds, mbs


@lru_cache(maxsize=1 << 10)
def _order_arrays(schedule: str, m: int, windows: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The stages' operation kinds and micro-batches (:func:`sfenv.model.pipeline._fixed_order`), read-only arrays."""
    orders = np.array([_fixed_order(schedule, m, w) for w in windows], dtype=np.int64)
    kinds, mbs = np.ascontiguousarray(orders[:, :, 0]), np.ascontiguousarray(orders[:, :, 1])
    kinds.setflags(write=False)
    mbs.setflags(write=False)
    return kinds, mbs
