"""Pipeline time of one training iteration under each modelled schedule.

Two implementations of the same thing:

- :func:`replay_pipeline`, the reference: an event-driven replay of the schedule, operation by
  operation, with every stage a single processor and every pipeline hop two FIFO channels (one per
  direction; WAN links are full duplex).  A message of hop k occupies its channel for its transfer
  time ``x_k`` and arrives ``l_k`` (the route's latency) after leaving the channel.  It is slow
  (O(p m) events) and exists to check the fast path.
- :func:`pipeline_time`, the fast path used by :func:`sfenv.model.perf.evaluate_plan`: a closed form
  in O(p^2), tested against the replay over a grid of depths, bandwidths, latencies, micro-batch
  counts, unequal stages and shared links (``tests/test_pipeline_replay.py``).

The schedules (per micro-batch at stage k: compute ``c_k``, split as forward ``F = c/3`` and
backward ``2c/3``; the zero-bubble schedules split the backward into input gradient ``B = c/3``
and weight gradient ``W = c/3``, Qi et al., ICLR 2024):

- ``gpipe``: all m forwards, then all m backwards, at every stage.
- ``1f1b``: ``w_k`` warm-up forwards, then one backward and one forward alternately, then the
  remaining backwards (Narayanan et al. 2021).  Stage k holds at most ``w_k`` micro-batches in
  flight; the standard schedule has ``w_k = p - k``.
- ``zb-h1``: 1F1B's window, weight gradients deferred to fill idle time: each stage runs a ready
  input-gradient first, then a forward if its window allows, then a pending weight gradient.
  A micro-batch's activations are held until its weight gradient is done, and the window counts
  exactly those (forwards started minus weight gradients done), so the deferral is bounded as in
  the paper's schedules and the memory is 1F1B's.
- ``zb-h2``: the same with a window of ``2(p - k) - 1`` (p - k - 1 more warm-up forwards: about
  twice 1F1B's activation memory).  Without communication this greedy, bounded replay idles the
  fill's forwards and the drain's input gradients, ``2 (p-1)/3`` of a stage's per-micro-batch time
  for both zero-bubble schedules (the paper: ``(p-1)/3`` for ZB-H1, about 0 for ZB-H2, with
  hand-built orders and the optimizer step off the critical path); ZB-H2's larger window pays off
  where WAN round trips bind.

With numba installed (the ``fast`` extra), the replays inside :func:`pipeline_time` run as compiled
twins of the Python loops (:mod:`sfenv.model._pipeline_jit`, the same floats bit for bit);
``SFENV_NO_JIT=1`` keeps the Python loops.

Windows can be widened per WAN hop (``extra_inflight``): every stage before a cross-region hop
keeps e more micro-batches in flight per such hop downstream of it, which hides the hop's round
trip at the price of activation memory, as cross-region pipelines do.

Why WAN latency shows under 1F1B: stage k can start micro-batch i + w_k only when micro-batch i's
gradient has come back, so the round trip from stage k to the last stage and back,
``R_k = sum_{j>=k} c_j + 2 sum_{j>=k} (l_j + x_j)``, is spread over at most ``w_k`` micro-batches:
the period is at least ``R_k / w_k``.  More generally every sub-pipeline k..j forms such a cycle
with ``w_k - w_j + 1`` micro-batches on it.  Zero-bubble schedules remove compute bubbles, not WAN
transfer or latency.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType
from typing import Literal

import numpy as np

__all__ = [
    "SCHEDULES",
    "default_windows",
    "pipeline_time",
    "prepare_compiled",
    "replay_held",
    "replay_pipeline",
    "steady_period",
]

SCHEDULES = ("1f1b", "gpipe", "zb-h1", "zb-h2")


def default_windows(
    p: int, m: int, schedule: str, cross: Sequence[bool] | None = None, extra: int = 0
) -> tuple[int, ...]:
    """Micro-batches stage k may hold in flight: ``w_k``.

    :param p: pipeline depth.
    :param m: micro-batches per iteration (no window exceeds it).
    :param schedule: one of :data:`SCHEDULES`.
    :param cross: ``cross[k]`` is True when hop k (stage k -> k+1) crosses regions.
    :param extra: extra in-flight micro-batches per cross-region hop downstream of a stage.
    :return: ``(w_0, ..., w_{p-1})``, non-increasing in k, each in ``1..m`` (memoised).
    """
    return _windows(p, m, schedule, None if cross is None else tuple(bool(c) for c in cross), extra)


@lru_cache(maxsize=1 << 14)
def _windows(p: int, m: int, schedule: str, cross: tuple[bool, ...] | None, extra: int) -> tuple[int, ...]:
    if schedule == "gpipe":
        return (m,) * p
    hops_after = [0] * p
    if extra and cross is not None:
        acc = 0
        for k in range(p - 2, -1, -1):
            acc += 1 if cross[k] else 0
            hops_after[k] = acc
    if schedule == "zb-h2":
        base = [2 * (p - k) - 1 for k in range(p)]
    else:
        base = [p - k for k in range(p)]
    return tuple([max(1, min(m, base[k] + extra * hops_after[k])) for k in range(p)])


# ---------------------------------------------------------------------------------------------
# reference: event-driven replay
# ---------------------------------------------------------------------------------------------

_F, _B, _W = 0, 1, 2  # operation kinds (for 1F1B and GPipe, _B is the whole backward)


@lru_cache(maxsize=1 << 12)
def _fixed_order(schedule: str, m: int, w: int) -> tuple[tuple[int, int], ...]:
    """The operation order of one stage under GPipe or 1F1B: ``[(kind, micro-batch), ...]``."""
    if schedule == "gpipe":
        return tuple([(_F, i) for i in range(m)] + [(_B, i) for i in range(m)])
    order = [(_F, i) for i in range(w)]
    for i in range(m):
        order.append((_B, i))
        if i + w < m:
            order.append((_F, i + w))
    return tuple(order)


def replay_pipeline(
    compute: Sequence[float],
    latency: Sequence[float],
    transfer: Sequence[float],
    m: int,
    schedule: str = "1f1b",
    windows: Sequence[int] | None = None,
) -> float:
    """Replay one iteration of a pipeline schedule event by event; return its duration.

    Arguments as :func:`replay_held`, which also returns the activations each stage held.
    """
    return replay_held(compute, latency, transfer, m, schedule, windows)[0]


def replay_held(
    compute: Sequence[float],
    latency: Sequence[float],
    transfer: Sequence[float],
    m: int,
    schedule: str = "1f1b",
    windows: Sequence[int] | None = None,
) -> tuple[float, list[int]]:
    """Replay one iteration event by event: its duration and, per stage, the most micro-batches held.

    A micro-batch's activations are held from the start of its forward until its backward is done
    (1F1B, GPipe) or its weight gradient is done (zero-bubble schedules).  A zero-bubble runtime can
    always run each weight gradient right after its input gradient, which is 1F1B's order with the
    same windows and memory, so a zero-bubble replay returns the faster of its greedy order and
    that one.

    :param compute: ``c_k``, seconds of forward + backward compute per micro-batch on stage k.
    :param latency: ``l_k``, one-way latency of hop k (stage k -> k+1), seconds.
    :param transfer: ``x_k``, transfer time of one micro-batch's boundary tensor over hop k,
        seconds (the same each way).
    :param m: micro-batches.
    :param schedule: one of :data:`SCHEDULES`.
    :param windows: in-flight limit per stage (default :func:`default_windows`).
    :return: ``(time from the first forward to the last backward (weight gradient included),
        [max micro-batches held at once, per stage])``.
    """
    p = len(compute)
    if len(latency) != p - 1 or len(transfer) != p - 1:
        raise ValueError(f"{p} stages need {p - 1} hops, got {len(latency)} latencies, {len(transfer)} transfers")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; expected one of {SCHEDULES}")
    w = list(windows) if windows is not None else list(default_windows(p, m, schedule))
    zb = schedule.startswith("zb")
    if zb:
        greedy = _replay_zero_bubble(compute, latency, transfer, m, w)
        in_order = _replay(compute, latency, transfer, m, "1f1b", w)
        return greedy if greedy[0] <= in_order[0] else in_order
    return _replay(compute, latency, transfer, m, schedule, w)


def _replay(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
    w: list[int],
) -> tuple[float, list[int]]:
    """The event-driven replay of one schedule's own order (see :func:`replay_held`)."""
    return _EventReplay(compute, latency, transfer, m, schedule, w).run()


_EV_DONE, _EV_FWD, _EV_GRAD = 0, 1, 2  # event kinds of _EventReplay: an operation done, a message arrived


class _EventReplay:
    """The state of :func:`_replay`: stages, channels and the event queue of one schedule's replay.

    Events are ``(time, push sequence, kind, stage, data)`` and pop by time, then push order;
    an operation's done event carries ``kind * m + micro-batch``.
    """

    __slots__ = ("bdone", "busy", "chan_free", "dur", "events", "fdone", "fwd_in", "grad_in", "latency", "m",
                 "nb", "nf", "nw", "orders", "p", "peak", "pos", "schedule", "seq", "transfer", "w", "wdone", "zb")

    def __init__(
        self, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
        w: list[int],
    ) -> None:
        """Set up the replay of ``schedule`` (arguments as :func:`_replay`)."""
        p = len(compute)
        zb = schedule.startswith("zb")
        self.p, self.m, self.w, self.zb, self.schedule = p, m, w, zb, schedule
        self.latency, self.transfer = latency, transfer
        self.dur = [
            (c / 3.0, c / 3.0, c / 3.0) if zb else (c / 3.0, 2.0 * c / 3.0, 0.0)
            for c in compute
        ]
        self.orders = None if zb else [_fixed_order(schedule, m, w[k]) for k in range(p)]
        self.pos = [0] * p  # next index into a fixed order
        self.fwd_in = [m if k == 0 else 0 for k in range(p)]  # activations arrived (in order)
        self.grad_in = [0] * p  # gradients arrived (in order); the last stage uses its own forwards
        self.nf = [0] * p  # forwards started
        self.nb = [0] * p  # (input-)backwards started
        self.nw = [0] * p  # weight gradients started (zero-bubble)
        self.bdone = [0] * p  # (input-)backwards finished: 1F1B's window counts forwards not yet back
        self.wdone = [0] * p  # weight gradients finished: the zero-bubble window counts activations still held
        self.fdone = [0] * p  # forwards finished
        self.busy = [False] * p
        self.peak = [0] * p  # most micro-batches held at once
        self.chan_free: dict[tuple[int, int], float] = {}  # (hop, direction) -> time the channel is free
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, stage, data)
        self.seq = 0

    def run(self) -> tuple[float, list[int]]:
        """Replay every event: ``(time of the last operation's end, per-stage peak of micro-batches held)``."""
        try_start, finish, pop = self.try_start, self.finish, heapq.heappop
        for k in range(self.p):
            try_start(0.0, k)
        end_time = 0.0
        events, fwd_in, grad_in = self.events, self.fwd_in, self.grad_in
        while events:
            t, _, kind, k, data = pop(events)
            if kind == _EV_DONE:
                end_time = max(end_time, t)
                finish(t, k, data)
            elif kind == _EV_FWD:
                fwd_in[k] += 1
            else:
                grad_in[k] += 1
            try_start(t, k)
        expected = self.m * (3 if self.zb else 2)
        done = [self.nf[k] + self.nb[k] + self.nw[k] for k in range(self.p)]
        if any(d != expected for d in done):  # pragma: no cover - a schedule bug, not an input error
            raise RuntimeError(f"replay of {self.schedule} deadlocked: operations run per stage {done}, "
                               f"expected {expected}")
        return end_time, self.peak

    def push(self, t: float, kind: int, k: int, data: int) -> None:
        """Queue an event at time ``t``."""
        heapq.heappush(self.events, (t, self.seq, kind, k, data))
        self.seq += 1

    def send(self, t: float, hop: int, direction: int, dst: int, kind: int, i: int) -> None:
        """Send micro-batch ``i``'s message over ``hop`` at ``t``: it waits for the channel, then arrives at ``dst``."""
        key = (hop, direction)
        start = max(t, self.chan_free.get(key, 0.0))
        self.chan_free[key] = start + self.transfer[hop]
        self.push(start + self.transfer[hop] + self.latency[hop], kind, dst, i)

    def finish(self, t: float, k: int, data: int) -> None:
        """Stage ``k``'s operation ends at ``t``: count it and send its activation or gradient on."""
        op, i = divmod(data, self.m)
        self.busy[k] = False
        if op == _F:
            self.fdone[k] += 1
            if k < self.p - 1:
                self.send(t, k, 0, k + 1, _EV_FWD, i)
        elif op == _B:
            self.bdone[k] += 1
            if k > 0:
                self.send(t, k - 1, 1, k - 1, _EV_GRAD, i)
        else:
            self.wdone[k] += 1

    def try_start(self, t: float, k: int) -> None:
        """Start stage ``k``'s next operation at ``t`` if it is free and the operation is ready."""
        if self.busy[k]:
            return
        orders = self.orders
        op = self.next_in_order(orders[k], k) if orders is not None else self.next_zero_bubble(k)
        if op is None:
            return
        kind, i = op
        if orders is not None:
            self.pos[k] += 1
        if kind == _F:
            self.nf[k] += 1
            held = self.nf[k] - (self.wdone[k] if self.zb else self.bdone[k])
            if held > self.peak[k]:
                self.peak[k] = held
        elif kind == _B:
            self.nb[k] += 1
        else:
            self.nw[k] += 1
        self.busy[k] = True
        self.push(t + self.dur[k][kind], _EV_DONE, k, kind * self.m + i)

    def next_in_order(self, order: tuple[tuple[int, int], ...], k: int) -> tuple[int, int] | None:
        """Stage ``k``'s next operation of its fixed ``order`` (GPipe, 1F1B), if its input is there."""
        if self.pos[k] >= len(order):
            return None
        kind, i = order[self.pos[k]]
        if kind == _F:
            return (kind, i) if i < self.fwd_in[k] else None
        have = self.fdone[k] if k == self.p - 1 else self.grad_in[k]
        return (kind, i) if i < have and i < self.fdone[k] else None

    def next_zero_bubble(self, k: int) -> tuple[int, int] | None:
        """Stage ``k``'s next zero-bubble operation: input gradient, forward within the window, weight gradient."""
        nb, nf, m = self.nb[k], self.nf[k], self.m
        have = self.fdone[k] if k == self.p - 1 else self.grad_in[k]
        if nb < m and nb < have:
            return (_B, nb)
        if nf < m and nf < self.fwd_in[k] and nf - self.wdone[k] < self.w[k]:
            return (_F, nf)
        if self.nw[k] < nb and self.nw[k] < m:
            return (_W, self.nw[k])
        return None


# event codes of :func:`_replay_zero_bubble`: an operation done (its kind), a message arrived
_DONE_F, _DONE_B, _DONE_W, _ARRIVE_ACT, _ARRIVE_GRAD = 0, 1, 2, 3, 4
_SEQ = 1024  # an event's tag is ``_SEQ * push sequence + 8 * stage + code`` (stages < 128)


def _replay_zero_bubble(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, w: Sequence[int],
) -> tuple[float, list[int]]:
    """:func:`_replay` of a zero-bubble schedule's greedy order: the same events in the same order, faster.

    The same event-driven replay, equal to :func:`_replay` bit for bit (durations and per-stage
    peaks; ``tests/test_pipeline_replay.py`` compares them on a seeded grid where equal event times
    are common): the heap pops events by time, then push sequence, as there; the float arithmetic
    is the same, in the same order.  What differs is how it is written: the operation choice, the
    channels and the events inline, an event a ``(time, tag)`` pair and the messages' hops looked
    up in tables, and a message that reaches a stage busy beyond its arrival is counted at once
    instead of queued (nothing else can happen at its arrival; the stage reads the count only when
    its operation ends).  About 2x faster; this replay is most of the cost of a new plan's evaluation
    under the zero-bubble schedules (SpanTrain's).

    :param compute: ``c_k`` per stage (s).
    :param latency: ``l_k`` per hop (s).
    :param transfer: ``x_k`` per hop (s).
    :param m: micro-batches.
    :param w: in-flight limit per stage (activations held until the weight gradient is done).
    :return: ``(duration, [max micro-batches held at once, per stage])``.
    """
    p = len(compute)
    if p >= _SEQ // 8:
        raise ValueError(f"at most {_SEQ // 8 - 1} stages, got {p}")
    last = p - 1
    dur = [c / 3.0 for c in compute]  # forward, input gradient and weight gradient alike
    arrived = [[m] + [0] * last, [0] * p]  # activations, gradients (the last stage uses its own forwards)
    nf, nb, nw = [0] * p, [0] * p, [0] * p  # forwards, input gradients, weight gradients started
    done = [[0] * p, [0] * p, [0] * p]  # forwards, input gradients, weight gradients finished
    fdone, wdone = done[_DONE_F], done[_DONE_W]
    busy = [False] * p
    peak = [0] * p
    # the message an operation sends: channel (forward on hop k: k; backward on hop k: p + k), or -1
    channel = [[k if k < last else -1 for k in range(p)], [p + k - 1 if k else -1 for k in range(p)], [-1] * p]
    chan_free = [0.0] * (2 * p)  # time each channel is free
    chan_x = [*transfer, 0.0, *transfer, 0.0]
    chan_l = [*latency, 0.0, *latency, 0.0]
    chan_tag = [8 * (k + 1) + _ARRIVE_ACT for k in range(p)] + [8 * k + _ARRIVE_GRAD for k in range(p)]
    chan_dest = [k + 1 for k in range(p)] + list(range(p))  # the stage a channel's messages go to
    chan_count = [arrived[0]] * p + [arrived[1]] * p  # and the counter they add to
    done_at = [0.0] * p  # when a busy stage's operation ends
    events: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    for k in range(p):  # every stage's first operation at time 0 (a forward on stage 0 only)
        op = _zb_next_op(k, last, m, w[k], arrived, nf, nb, nw, fdone, wdone, peak)
        if op >= 0:
            busy[k] = True
            done_at[k] = 0.0 + dur[k]
            push(events, (done_at[k], seq + 8 * k + op))
            seq += _SEQ
    end_time = 0.0
    grad_in = arrived[1]
    while events:
        t, tag = pop(events)
        kind = tag & 7
        k = (tag & (_SEQ - 1)) >> 3
        if kind <= _DONE_W:
            busy[k] = False
            if t > end_time:
                end_time = t
            done[kind][k] += 1
            ch = channel[kind][k]
            if ch >= 0:  # send: (max(t, channel free) + x) + l, as _replay's send
                free = chan_free[ch]
                free = chan_free[ch] = (free if free > t else t) + chan_x[ch]
                arrival, dest = free + chan_l[ch], chan_dest[ch]
                if busy[dest] and arrival < done_at[dest]:
                    # the receiver is busy until after it arrives: nothing but this count can happen at
                    # the arrival, and the receiver reads it only when its operation ends: count it now
                    chan_count[ch][dest] += 1
                else:
                    push(events, (arrival, seq + chan_tag[ch]))
                    seq += _SEQ
        else:
            arrived[kind - _ARRIVE_ACT][k] += 1
            if busy[k]:
                continue
        # the stage is free: its next operation, chosen as _replay's ready_ops chooses it
        b = nb[k]
        if b < m and b < (fdone[k] if k == last else grad_in[k]):
            nb[k] = b + 1
            op = _DONE_B
        else:
            f = nf[k] + 1
            if f <= m and f <= arrived[0][k] and f - wdone[k] <= w[k]:
                nf[k] = f
                peak[k] = max(peak[k], f - wdone[k])
                op = _DONE_F
            elif nw[k] < b:  # (b <= m)
                nw[k] += 1
                op = _DONE_W
            else:
                continue
        busy[k] = True
        done_at[k] = t + dur[k]
        push(events, (done_at[k], seq + 8 * k + op))
        seq += _SEQ
    if any(nf[k] + nb[k] + nw[k] != 3 * m for k in range(p)):  # pragma: no cover - a schedule bug
        raise RuntimeError(f"replay of a zero-bubble schedule deadlocked: {nf}, {nb}, {nw} of {m}")
    return end_time, peak


def _zb_next_op(
    k: int, last: int, m: int, window: int, arrived: list[list[int]], nf: list[int], nb: list[int], nw: list[int],
    fdone: list[int], wdone: list[int], peak: list[int],
) -> int:
    """Start stage ``k``'s next zero-bubble operation (counters updated): its done code, or -1 if none is ready."""
    b = nb[k]
    if b < m and b < (fdone[k] if k == last else arrived[1][k]):
        nb[k] = b + 1
        return _DONE_B
    f = nf[k]
    if f < m and f < arrived[0][k] and f - wdone[k] < window:
        nf[k] = f + 1
        peak[k] = max(peak[k], f + 1 - wdone[k])
        return _DONE_F
    if nw[k] < b:
        nw[k] += 1
        return _DONE_W
    return -1


# ---------------------------------------------------------------------------------------------
# fast path
# ---------------------------------------------------------------------------------------------


def _sweep_fixed_order(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, windows: Sequence[int],
    gpipe: bool,
) -> float:
    """Exact time of a fixed-order schedule (1F1B or GPipe), computed position by position.

    Equal to :func:`replay_pipeline` (tested) but without an event queue: at every position of the
    stages' operation lists, forwards are resolved from the first stage down and backwards from
    the last stage up, which respects every dependency of these two schedules.  Which operations
    sit at each position comes from :func:`_sweep_plan` (memoised: the same schedule, ``m`` and
    windows recur across evaluations), flattened into one list of operations, each tagged with
    what it does (a forward that sends downstream or one on the last stage, a backward that sends
    upstream or one on the first stage), so the loop visits each operation once with no per-stage
    test; the arithmetic is the same, in the same order, as the previous per-stage scan
    (``tests/test_pipeline_replay.py`` compares the two bit for bit).  The first stage's arrival
    times are ``-inf`` (never later than its own free time: the previous scan skipped the test), and
    the last stage's forward ends are kept where the other stages' gradient arrivals are (its
    backward waits on them alike).
    """
    p = len(compute)
    fwd = [c / 3.0 for c in compute]
    bwd = [2.0 * c / 3.0 for c in compute]
    f_arr = [-math.inf] * m + [0.0] * ((p - 1) * m)  # activation arrival, by stage * m + micro-batch
    g_arr = [0.0] * (p * m)  # gradient arrival; the last stage's forward end
    free = [0.0] * p
    down = [0.0] * p  # time each hop's forward channel is free
    up = [0.0] * p  # time each hop's backward channel is free
    # The four branches repeat "start when the stage is free and the input has arrived" inline on
    # purpose: this loop runs for every plan evaluation, and a helper call per operation would add a
    # Python call to each of its 2 * p * m iterations.
    for kind, k, j, to in _sweep_plan(gpipe, m, tuple(windows)):
        if kind == _SEND_DOWN:  # forward on stage k < p - 1: its activation goes to stage k + 1
            t = free[k]
            a = f_arr[j]
            if a > t:
                t = a
            t += fwd[k]
            free[k] = t
            d = down[k]
            st = t if t > d else d
            d = st + transfer[k]
            down[k] = d
            f_arr[to] = d + latency[k]
        elif kind == _SEND_UP:  # backward on stage k > 0: its gradient goes to stage k - 1 (hop ``to``)
            t = free[k]
            g = g_arr[j]
            if g > t:
                t = g
            t += bwd[k]
            free[k] = t
            u = up[to]
            st = t if t > u else u
            u = st + transfer[to]
            up[to] = u
            g_arr[j - m] = u + latency[to]
        elif kind == _LAST_F:  # forward on the last stage: its backward waits on it
            t = free[k]
            a = f_arr[j]
            if a > t:
                t = a
            t += fwd[k]
            free[k] = t
            g_arr[j] = t
        else:  # backward on the first stage
            t = free[k]
            g = g_arr[j]
            if g > t:
                t = g
            free[k] = t + bwd[k]
    return max(free)


#: what an operation of :func:`_sweep_plan` does (see :func:`_sweep_fixed_order`)
_SEND_DOWN, _SEND_UP, _LAST_F, _FIRST_B = 0, 1, 2, 3
_Op = tuple[int, int, int, int]


@lru_cache(maxsize=512)  # about 900 distinct keys in 1,500 steps of spider-8-contended; ~60 kB each
def _sweep_plan(gpipe: bool, m: int, windows: tuple[int, ...]) -> tuple[_Op, ...]:
    """The operations of the stages' lists (GPipe or 1F1B) in the order :func:`_sweep_fixed_order` resolves them.

    Per position, forwards by stage, then backwards from the last stage up.  Each operation is
    ``(what, stage, stage * m + micro-batch, target)``: ``what`` one of :data:`_SEND_DOWN` (target:
    the next stage's index of the micro-batch), :data:`_SEND_UP` (target: the hop to the previous
    stage), :data:`_LAST_F` and :data:`_FIRST_B` (target unused).
    """
    p = len(windows)
    last = p - 1
    orders = [_fixed_order("gpipe" if gpipe else "1f1b", m, windows[k]) for k in range(p)]
    plan: list[_Op] = []
    for pos in range(2 * m):
        ops = [(k, orders[k][pos]) for k in range(p)]
        for k, (kind, i) in ops:
            if kind == _F:
                j = k * m + i
                plan.append((_SEND_DOWN, k, j, j + m) if k < last else (_LAST_F, k, j, 0))
        for k, (kind, i) in reversed(ops):
            if kind == _B:
                plan.append((_SEND_UP, k, k * m + i, k - 1) if k else (_FIRST_B, k, i, 0))
    return tuple(plan)


def steady_period(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], schedule: str,
    windows: Sequence[int],
) -> float:
    """Asymptotic time per micro-batch: the largest cycle mean of the schedule's dependencies.

    Cycles: each stage's own work (``c_k``), each hop's channel (``x_k``) and the window cycles:
    stage k may start micro-batch i + (w_k - w_j + 1) only after micro-batch i has gone to stage j
    and back (1F1B; zero-bubble schedules prioritise input gradients, so only the cycle to the last
    stage binds, and it adds stage k's own weight gradient, which frees the activations the window counts).
    """
    p = len(compute)
    hop = [latency[k] + transfer[k] for k in range(p - 1)]
    period = max(max(compute), max(transfer) if transfer else 0.0)
    zb = schedule.startswith("zb")
    frac = 2.0 / 3.0 if zb else 1.0
    for k in range(p - 1):
        # zero-bubble: stage k admits a new forward only once a held micro-batch's weight gradient is done
        rt = compute[k] / 3.0 if zb else 0.0
        for j in range(k, p):
            rt += frac * compute[j] + (2.0 * hop[j - 1] if j > k else 0.0)
            if zb and j < p - 1:
                continue
            tokens = windows[k] - (windows[j] if j < p - 1 else 1) + 1
            if tokens >= 1 and rt / tokens > period:
                period = rt / tokens
    return period


@lru_cache(maxsize=1 << 15)
def _pipeline_time_cached(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m: int, schedule: str,
    windows: tuple[int, ...],
) -> float:
    p = len(compute)
    if p == 1:
        return m * compute[0]
    if schedule == "gpipe":  # a flow shop of identical jobs, each direction: exact
        hops = sum(latency) + sum(transfer)
        xmax = max(transfer)
        fwd = sum(compute) / 3.0 + hops + (m - 1) * max(max(compute) / 3.0, xmax)
        bwd = 2.0 * sum(compute) / 3.0 + hops + (m - 1) * max(2.0 * max(compute) / 3.0, xmax)
        return fwd + bwd
    in_order = _one_f_one_b(compute, latency, transfer, m, windows)
    if not schedule.startswith("zb"):
        return in_order
    # zero-bubble: the faster of the greedy order and 1F1B's order (see replay_held)
    m0 = min(m, 4 * windows[0] + 4)
    t0 = _replayed_head(compute, latency, transfer, m0, windows, True)
    greedy = t0 if m0 == m else t0 + (m - m0) * _steady_period_cached(compute, latency, transfer, schedule, windows)
    return min(greedy, in_order)


def _one_f_one_b(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m: int,
    windows: tuple[int, ...],
) -> float:
    """1F1B's time: the first ``2 w_0 + 2`` micro-batches exactly, the rest at the steady period."""
    m0 = min(m, 2 * windows[0] + 2)
    t0 = _replayed_head(compute, latency, transfer, m0, windows, False)
    if m0 == m:
        return t0
    return t0 + (m - m0) * _steady_period_cached(compute, latency, transfer, "1f1b", windows)


#: bound on :func:`_replayed_head` and :func:`_steady_period_cached` entries (a few kB each)
_HEAD_ENTRIES = 1 << 12


@lru_cache(maxsize=_HEAD_ENTRIES)
def _replayed_head(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m0: int,
    windows: tuple[int, ...], zero_bubble: bool,
) -> float:
    """The exactly replayed first ``m0`` micro-batches of 1F1B (or of the zero-bubble greedy order), memoised.

    Keyed without the iteration's ``m``: plans that differ only in their data-parallel degree (so
    in ``m``, not in their stages) share the replayed head whenever ``m`` exceeds ``m0`` (about
    half the replays of plan search on spider-64 were such repeats).  A pure function of its
    arguments: the same value as calling :func:`_sweep_fixed_order` / :func:`_replay_zero_bubble`.
    """
    jit = _jit_kernels()
    if jit is None:
        if zero_bubble:
            return _replay_zero_bubble(compute, latency, transfer, m0, windows)[0]
        return _sweep_fixed_order(compute, latency, transfer, m0, windows, gpipe=False)
    c = np.array(compute, dtype=np.float64)
    lat = np.array(latency, dtype=np.float64)
    x = np.array(transfer, dtype=np.float64)
    if zero_bubble:
        duration, _, completed = jit.replay_zero_bubble(c, lat, x, m0, np.array(windows, dtype=np.int64))
        if not completed:  # pragma: no cover - a schedule bug, not an input error
            raise RuntimeError(f"replay of a zero-bubble schedule deadlocked: windows {windows}, m {m0}")
        return float(duration)
    return float(jit.sweep_fixed_order(c, lat, x, m0, _sweep_plan_rows(False, m0, windows)))


#: :mod:`sfenv.model._pipeline_jit` when numba is usable, None when not, False before the first look
_jit: ModuleType | Literal[False] | None = False


def _jit_kernels() -> ModuleType | None:
    """The compiled replays (:mod:`sfenv.model._pipeline_jit`), or None without numba or with ``SFENV_NO_JIT=1``.

    Looked up at the first replay (or by :func:`prepare_compiled`), so that importing sfenv does not
    import numba.
    """
    global _jit
    kernels = _jit
    if kernels is False:
        from sfenv.model import _pipeline_jit

        if _pipeline_jit.AVAILABLE:
            _pipeline_jit.warm_up()
        kernels = _jit = _pipeline_jit if _pipeline_jit.AVAILABLE else None
    return kernels


def prepare_compiled() -> bool:
    """Load the compiled replays now rather than at the first replay; True if they are used.

    Loading them costs about half a second once per process (importing numba and reading its
    on-disk cache; the first process after an install also compiles, a few seconds).
    :class:`sfenv.env.GeoSchedEnv` calls this when it is built, so that the cost falls on
    ``gym.make`` and not on a step.
    """
    return _jit_kernels() is not None


@lru_cache(maxsize=512)
def _sweep_plan_rows(gpipe: bool, m: int, windows: tuple[int, ...]) -> np.ndarray:
    """:func:`_sweep_plan` as an ``(operations, 4)`` integer array, built by the compiled code (read-only)."""
    jit = _jit_kernels()
    assert jit is not None  # called only when the compiled replays are in use
    rows: np.ndarray = jit.sweep_plan(gpipe, m, np.array(windows, dtype=np.int64))
    rows.setflags(write=False)
    return rows


@lru_cache(maxsize=_HEAD_ENTRIES)
def _steady_period_cached(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], schedule: str,
    windows: tuple[int, ...],
) -> float:
    """:func:`steady_period` memoised (it does not depend on ``m``, so it recurs like :func:`_replayed_head`)."""
    return steady_period(compute, latency, transfer, schedule, windows)


def pipeline_time(
    compute: Sequence[float],
    latency: Sequence[float],
    transfer: Sequence[float],
    m: int,
    schedule: str = "1f1b",
    windows: Sequence[int] | None = None,
) -> float:
    """Pipeline time of one iteration; arguments as :func:`replay_pipeline`.

    GPipe has an exact closed form (each direction is a flow shop of identical micro-batches).
    For 1F1B and the zero-bubble schedules the first ``m0`` micro-batches are replayed exactly
    (``m0 = 2 w_0 + 2`` for 1F1B; ``4 w_0 + 4`` for the zero-bubble schedules, whose greedy
    replay settles more slowly) and the remaining ones are added at the schedule's steady period
    (:func:`steady_period`).  Tested against the full replay (``tests/test_pipeline_replay.py``):
    within 5 % on the grid p 2-16, 0.5-100 Gbit/s, 1-200 ms, m 1-512; on random chains 1F1B is
    within 5 % and the zero-bubble schedules within 8 % (their transient can outlast ``m0``).
    Results are memoised on the exact inputs.
    """
    p = len(compute)
    w = tuple(windows) if windows is not None else default_windows(p, m, schedule)
    return _pipeline_time_cached(
        tuple(float(c) for c in compute), tuple(float(v) for v in latency), tuple(float(v) for v in transfer),
        int(m), schedule, w,
    )
