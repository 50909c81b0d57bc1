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
- ``zb-h1`` and ``zb-h2``, the hand-crafted zero-bubble schedules of Qi et al., "Zero Bubble
  Pipeline Parallelism", ICLR 2024 (arXiv 2401.10241; their bubble rates ``(p-1)/(3m)`` and 0 at
  1F1B's and twice 1F1B's activation memory, with ``T_F = T_B = T_W``).  A micro-batch's activations are held
  from its forward until its weight gradient is done, and the window ``w_k`` counts exactly those
  (forwards started minus weight gradients done).  Stage k runs ``u_k`` warm-up forwards, then for
  each micro-batch i its input gradient, the weight gradient of micro-batch ``i - d_k`` (deferred
  by ``d_k = w_k - u_k``) and the forward of micro-batch ``i + u_k``, and the deferred weight
  gradients last (:func:`zero_bubble_order`).  ZB-H1: ``u_k = p - k`` (1F1B's warm-up) and
  ``d_k = k``, so every stage holds ``w_k = p`` micro-batches, 1F1B's peak (its first stage's);
  without communication its bubble is ``(p-1)(T_F + T_B - T_W)``, ``(p-1)/3`` of a micro-batch's
  ``c`` (1F1B: ``p - 1``).  ZB-H2: ``u_k = 2(p-k) - 1`` and ``d_k = 2k``, ``w_k = 2p - 1`` (the
  paper's memory); the pipeline becomes a parallelogram, every stage busy from its first forward
  to its last weight gradient, and with the optimizer step's synchronisation off the critical path
  (the paper's optimizer post-validation) the next iteration starts on each stage as soon as that
  stage is done, so an iteration takes the longest stage span (first operation's start to last
  operation's end) rather than the makespan: no bubble once ``m >= 2p - 1`` (otherwise
  ``(2p - 1 - m)/3`` of ``c``).  Widened windows (below) add warm-up forwards.  The replay also
  runs a greedy order within the same windows (each stage runs a ready input gradient, else a
  forward its window allows, else a pending weight gradient), which adapts to WAN latencies and
  unequal stages where the hand-built order does not, and takes the faster of the two;
  :func:`sfenv.model.perf.evaluate_plan` also takes 1F1B's time (and for ZB-H2, ZB-H1's) when
  faster, as those orders fit in the zero-bubble schedule's memory.

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
from collections.abc import Collection, Sequence
from functools import lru_cache
from types import ModuleType
from typing import Literal

import numpy as np

from sfenv.interrupts import ctrl_c_deferred

__all__ = [
    "SCHEDULES",
    "default_windows",
    "hop_overlap",
    "pipeline_time",
    "prepare_compiled",
    "replay_held",
    "replay_pipeline",
    "steady_period",
    "zero_bubble_order",
    "zero_bubble_split",
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
    if schedule == "zb-h2":  # the hand-crafted schedules hold as much on every stage (see the module docstring)
        base = [2 * p - 1] * p
    elif schedule == "zb-h1":
        base = [p] * p
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


@lru_cache(maxsize=1 << 12)
def zero_bubble_split(schedule: str, windows: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The hand-crafted zero-bubble order within ``windows``: warm-up forwards ``u_k`` and deferral ``d_k``.

    Qi et al.'s ZB-H1 runs ``p - k`` warm-up forwards at stage k and ZB-H2 ``2(p - k) - 1``; the
    rest of the window, ``d_k = w_k - u_k``, defers weight gradients (``k`` and ``2k``: both hold
    their full window, ``p`` and ``2p - 1``, on every stage).  A window widened past the schedule's
    own adds warm-up forwards (as 1F1B's ``extra_inflight`` does); one cut short (fewer
    micro-batches than the window) keeps as many warm-up forwards as fit.  ``u_k`` never increases
    with k, which keeps the order free of deadlocks (stage k + 1's input gradient of micro-batch i
    waits for its forward of ``i + u_{k+1} - 1``, which stage k runs before its own input gradient
    of i only if ``u_{k+1} <= u_k``).
    """
    p = len(windows)
    if schedule == "zb-h2":
        full, warm = 2 * p - 1, [2 * (p - k) - 1 for k in range(p)]
    else:
        full, warm = p, [p - k for k in range(p)]
    u = tuple([max(1, min(w, a + max(0, w - full))) for w, a in zip(windows, warm)])
    return u, tuple([max(0, w - uk) for w, uk in zip(windows, u)])


@lru_cache(maxsize=1 << 12)
def zero_bubble_order(m: int, u: int, d: int) -> tuple[tuple[int, int], ...]:
    """One stage's hand-crafted zero-bubble order: ``[(kind, micro-batch), ...]``.

    ``u`` forwards, then for each micro-batch i its input gradient, the weight gradient of ``i - d``
    and the forward of ``i + u``, then the weight gradients still deferred (Qi et al. 2024, ZB-H1
    and ZB-H2; :func:`zero_bubble_split` gives ``u`` and ``d``).  At most ``u + d`` micro-batches are
    held (forwards started minus weight gradients done).
    """
    order = [(_F, i) for i in range(min(u, m))]
    weights = 0
    for i in range(m):
        order.append((_B, i))
        if i >= d:
            order.append((_W, i - d))
            weights += 1
        if i + u < m:
            order.append((_F, i + u))
    order.extend([(_W, i) for i in range(weights, m)])
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
    (1F1B, GPipe) or its weight gradient is done (zero-bubble schedules).  A zero-bubble schedule is
    replayed twice within the same windows, in its hand-crafted order (:func:`zero_bubble_order`)
    and in the greedy order, and the faster is returned: by its makespan for ZB-H1, by its longest
    stage span for ZB-H2 (whose optimizer step is off the critical path; module docstring).

    :param compute: ``c_k``, seconds of forward + backward compute per micro-batch on stage k.
    :param latency: ``l_k``, one-way latency of hop k (stage k -> k+1), seconds.
    :param transfer: ``x_k``, transfer time of one micro-batch's boundary tensor over hop k,
        seconds (the same each way).
    :param m: micro-batches.
    :param schedule: one of :data:`SCHEDULES`.
    :param windows: in-flight limit per stage (default :func:`default_windows`).
    :return: ``(time from the first forward to the last backward (weight gradient included; for
        ZB-H2 the longest such time of one stage), [max micro-batches held at once, per stage])``.
    """
    p = len(compute)
    if len(latency) != p - 1 or len(transfer) != p - 1:
        raise ValueError(f"{p} stages need {p - 1} hops, got {len(latency)} latencies, {len(transfer)} transfers")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; expected one of {SCHEDULES}")
    w = list(windows) if windows is not None else list(default_windows(p, m, schedule))
    if schedule.startswith("zb"):
        u, d = zero_bubble_split(schedule, tuple(w))
        orders = [zero_bubble_order(m, u[k], d[k]) for k in range(p)]
        hand_end, hand_held, hand_span = _EventReplay(compute, latency, transfer, m, schedule, w, orders).run()
        greedy_end, greedy_held, greedy_span = _replay_zero_bubble(compute, latency, transfer, m, w)
        hand, greedy = (hand_span, greedy_span) if schedule == "zb-h2" else (hand_end, greedy_end)
        return (hand, hand_held) if hand <= greedy else (greedy, greedy_held)
    duration, held, _ = _replay(compute, latency, transfer, m, schedule, w)
    return duration, held


def _replay(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
    w: list[int],
) -> tuple[float, list[int], float]:
    """The event-driven replay of one schedule's own order (the greedy one for zero-bubble schedules).

    :return: ``(makespan, per-stage peak of micro-batches held, longest stage span)``.
    """
    return _EventReplay(compute, latency, transfer, m, schedule, w).run()


_EV_DONE, _EV_FWD, _EV_GRAD = 0, 1, 2  # event kinds of _EventReplay: an operation done, a message arrived


class _EventReplay:
    """The state of :func:`_replay`: stages, channels and the event queue of one schedule's replay.

    Events are ``(time, push sequence, kind, stage, data)`` and pop by time, then push order;
    an operation's done event carries ``kind * m + micro-batch``.
    """

    __slots__ = ("bdone", "busy", "chan_free", "dur", "events", "fdone", "first", "fwd_in", "grad_in", "last_end",
                 "latency", "m", "nb", "nf", "nw", "orders", "p", "peak", "pos", "schedule", "seq", "trace",
                 "transfer", "w", "wdone", "zb")

    def __init__(
        self, compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, schedule: str,
        w: list[int], orders: list[tuple[tuple[int, int], ...]] | None = None,
        trace: list[tuple[int, int, int, float, float]] | None = None,
    ) -> None:
        """Set up the replay of ``schedule`` (arguments as :func:`_replay`).

        :param orders: each stage's fixed order of operations; default 1F1B's or GPipe's, and for
            zero-bubble schedules none (the greedy order).
        :param trace: if given, every operation is appended to it as it starts: ``(stage, kind,
            micro-batch, start, end)`` (tests check the schedule with it).
        """
        self.trace = trace
        p = len(compute)
        zb = schedule.startswith("zb")
        self.p, self.m, self.w, self.zb, self.schedule = p, m, w, zb, schedule
        self.latency, self.transfer = latency, transfer
        self.dur = [
            (c / 3.0, c / 3.0, c / 3.0) if zb else (c / 3.0, 2.0 * c / 3.0, 0.0)
            for c in compute
        ]
        if orders is None and not zb:
            orders = [_fixed_order(schedule, m, w[k]) for k in range(p)]
        self.orders = orders
        self.first = [-1.0] * p  # when each stage starts its first operation
        self.last_end = [0.0] * p  # when each stage's latest operation ended
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

    def run(self) -> tuple[float, list[int], float]:
        """Replay every event: ``(time of the last operation's end, per-stage peak of micro-batches held, span)``.

        The span is the longest time from a stage's first operation's start to its last one's end.
        """
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
        return end_time, self.peak, max([self.last_end[k] - self.first[k] for k in range(self.p)])

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
        self.last_end[k] = t
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
        if self.first[k] < 0.0:
            self.first[k] = t
        if self.trace is not None:
            self.trace.append((k, kind, i, t, t + self.dur[k][kind]))
        self.push(t + self.dur[k][kind], _EV_DONE, k, kind * self.m + i)

    def next_in_order(self, order: tuple[tuple[int, int], ...], k: int) -> tuple[int, int] | None:
        """Stage ``k``'s next operation of its fixed ``order`` (GPipe, 1F1B, zero-bubble), if its input is there."""
        if self.pos[k] >= len(order):
            return None
        kind, i = order[self.pos[k]]
        if kind == _F:
            return (kind, i) if i < self.fwd_in[k] else None
        if kind == _W:
            return (kind, i) if i < self.bdone[k] else None
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
) -> tuple[float, list[int], float]:
    """:func:`_replay` of a zero-bubble schedule's greedy order: the same events in the same order, faster.

    The same event-driven replay, equal to :func:`_replay` bit for bit (durations, per-stage peaks
    and spans; ``tests/test_pipeline_replay.py`` compares them on a seeded grid where equal event times
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
    :return: ``(duration, [max micro-batches held at once, per stage], longest stage span)``.
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
    done_at = [0.0] * p  # when a busy stage's operation ends (at the end: its last operation's end)
    first = [0.0] * p  # when each stage starts its first forward (stage 0: at 0)
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
                if f == 1:  # a stage's first operation is its first forward
                    first[k] = t
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
    return end_time, peak, max([done_at[k] - first[k] for k in range(p)])


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


#: a weight gradient in :func:`_zero_bubble_rows` (the other kinds as in :func:`_sweep_plan`)
_WEIGHT = 4


@lru_cache(maxsize=512)
def _zero_bubble_rows(m: int, u: tuple[int, ...], d: tuple[int, ...]) -> tuple[_Op, ...]:
    """The stages' hand-crafted zero-bubble orders (:func:`zero_bubble_order`) merged for :func:`_sweep_zero_bubble`.

    One list in which every operation comes after those it waits for: its stage's previous one,
    the forward of the same micro-batch on the stage before (a forward) or the input gradient on
    the stage after (an input gradient).  Built by advancing each stage while its next operation's
    input is placed, revisiting a neighbour whenever an operation may have unblocked it.  Rows as
    :func:`_sweep_plan`'s, plus :data:`_WEIGHT` (target unused).
    """
    p = len(u)
    last = p - 1
    orders = [zero_bubble_order(m, u[k], d[k]) for k in range(p)]
    pos = [0] * p
    placed = [[0] * p, [0] * p]  # forwards and input gradients placed per stage (in micro-batch order)
    rows: list[_Op] = []
    todo = list(range(last, -1, -1))  # stages to advance, the first stage on top
    while todo:
        k = todo.pop()
        order, n = orders[k], pos[k]
        while n < len(order):
            kind, i = order[n]
            if kind == _F:
                if k and placed[_F][k - 1] <= i:
                    break
                j = k * m + i
                rows.append((_SEND_DOWN, k, j, j + m) if k < last else (_LAST_F, k, j, 0))
                if k < last:
                    todo.append(k + 1)
            elif kind == _B:
                if k < last and placed[_B][k + 1] <= i:
                    break
                rows.append((_SEND_UP, k, k * m + i, k - 1) if k else (_FIRST_B, k, i, 0))
                if k:
                    todo.append(k - 1)
            else:
                rows.append((_WEIGHT, k, 0, 0))
            if kind != _W:
                placed[kind][k] += 1
            n += 1
        pos[k] = n
    if len(rows) != 3 * m * p:  # pragma: no cover - zero_bubble_split keeps u non-increasing
        raise RuntimeError(f"hand-crafted zero-bubble order deadlocks: warm-up {u}, deferral {d}, m {m}")
    return tuple(rows)


def _sweep_zero_bubble(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], m: int, rows: Sequence[_Op],
) -> tuple[float, float]:
    """Exact ``(makespan, longest stage span)`` of the hand-crafted zero-bubble order, operation by operation.

    :func:`_sweep_fixed_order` for :func:`_zero_bubble_rows`: each operation starts when its stage
    is free and its input has arrived and lasts ``c_k / 3``; a weight gradient's input gradient ran
    before it on the same stage.  Equal to the event replay of the same order bit for bit (tested):
    the same float operations on the same values, in an order that respects every dependency.  A
    stage's first operation is its first forward, which starts when that forward's input arrives
    (at 0 on the first stage), so the spans need no bookkeeping in the loop.
    """
    p = len(compute)
    third = [c / 3.0 for c in compute]
    f_arr = [-math.inf] * m + [0.0] * ((p - 1) * m)  # activation arrival, by stage * m + micro-batch
    g_arr = [0.0] * (p * m)  # gradient arrival; the last stage's forward end
    free = [0.0] * p
    down = [0.0] * p  # time each hop's forward channel is free
    up = [0.0] * p  # time each hop's backward channel is free
    for kind, k, j, to in rows:
        t = free[k]
        if kind == _WEIGHT:
            free[k] = t + third[k]
            continue
        if kind == _SEND_DOWN or kind == _LAST_F:
            a = f_arr[j]
        else:
            a = g_arr[j]
        if a > t:
            t = a
        t += third[k]
        free[k] = t
        if kind == _SEND_DOWN:  # the activation goes to stage k + 1
            dn = down[k]
            dn = (t if t > dn else dn) + transfer[k]
            down[k] = dn
            f_arr[to] = dn + latency[k]
        elif kind == _SEND_UP:  # the gradient goes to stage k - 1 over hop ``to``
            st = up[to]
            st = (t if t > st else st) + transfer[to]
            up[to] = st
            g_arr[j - m] = st + latency[to]
        elif kind == _LAST_F:  # the last stage's input gradient waits on its forward
            g_arr[j] = t
    span = free[0]
    for k in range(1, p):
        if free[k] - f_arr[k * m] > span:
            span = free[k] - f_arr[k * m]
    return max(free), span


def _zero_bubble_period(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], u: Sequence[int],
) -> float:
    """Asymptotic time per micro-batch of the hand-crafted zero-bubble order with warm-up ``u``.

    The largest cycle mean of its dependencies: each stage's own work (``c_k``), each hop's channel
    (``x_k``), and for stages k < j the cycle of stage k's forward of micro-batch ``i + u_k``: it
    follows that stage's input gradient of i and one weight gradient, and stage j's input gradient
    of ``i + u_k - u_j + 1`` follows its forward of ``i + u_k``, so ``u_k - u_j + 1`` micro-batches
    share the time of forwards down to j, input gradients back up to k, both ways over every hop,
    and stage k's weight gradient.
    """
    p = len(compute)
    period = max(max(compute), max(transfer) if transfer else 0.0)
    for k in range(p - 1):
        rt = compute[k]  # its forward, input gradient and weight gradient
        for j in range(k + 1, p):
            rt += 2.0 * compute[j] / 3.0 + 2.0 * (latency[j - 1] + transfer[j - 1])
            tokens = u[k] - u[j] + 1
            if rt / tokens > period:
                period = rt / tokens
    return period


def _window_period(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], windows: Sequence[int],
) -> float:
    """The largest cycle mean of 1F1B with ``windows`` (see :func:`steady_period`)."""
    p = len(compute)
    hop = [latency[k] + transfer[k] for k in range(p - 1)]
    period = max(max(compute), max(transfer) if transfer else 0.0)
    for k in range(p - 1):
        rt = 0.0
        for j in range(k, p):
            rt += compute[j] + (2.0 * hop[j - 1] if j > k else 0.0)
            tokens = windows[k] - (windows[j] if j < p - 1 else 1) + 1
            if tokens >= 1 and rt / tokens > period:
                period = rt / tokens
    return period


def _greedy_period(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], windows: Sequence[int],
) -> float:
    """The greedy zero-bubble order's steady period, estimated from its window cycles (see :func:`steady_period`).

    Stage k admits a new forward only once a held micro-batch's weight gradient is done, and input
    gradients go first, so the cycle of ``w_k`` micro-batches from stage k to the last stage and
    back binds: forwards and input gradients on the way, both ways over every hop, and stage k's
    weight gradient.  Summed from the last stage up, one pass.
    """
    p = len(compute)
    period = max(max(compute), max(transfer) if transfer else 0.0)
    down_and_up = 2.0 / 3.0 * compute[p - 1]  # forwards and input gradients from stage k to the last
    for k in range(p - 2, -1, -1):
        down_and_up += 2.0 / 3.0 * compute[k] + 2.0 * (latency[k] + transfer[k])
        rt = compute[k] / 3.0 + down_and_up
        if rt / windows[k] > period:
            period = rt / windows[k]
    return period


def steady_period(
    compute: Sequence[float], latency: Sequence[float], transfer: Sequence[float], schedule: str,
    windows: Sequence[int],
) -> float:
    """Asymptotic time per micro-batch: the largest cycle mean of the schedule's dependencies.

    Cycles: each stage's own work (``c_k``), each hop's channel (``x_k``) and the window cycles:
    stage k may start micro-batch i + (w_k - w_j + 1) only after micro-batch i has gone to stage j
    and back (1F1B).  Zero-bubble schedules: the smaller of their hand-crafted order's period
    (:func:`_zero_bubble_period`) and their greedy order's (which prioritises input gradients, so
    only the cycle to the last stage binds, and it adds stage k's own weight gradient, which frees
    the activations the window counts), as the replay keeps the faster order.
    """
    if schedule.startswith("zb"):
        u, _ = zero_bubble_split(schedule, tuple(windows))
        return min(_zero_bubble_period(compute, latency, transfer, u),
                   _greedy_period(compute, latency, transfer, windows))
    return _window_period(compute, latency, transfer, windows)


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
    if not schedule.startswith("zb"):
        return _extended(compute, latency, transfer, m, windows, "1f1b", 2 * windows[0] + 2, False)
    # zero-bubble: the faster of the hand-crafted and the greedy order (see replay_held); their
    # makespans for ZB-H1, their longest stage spans for ZB-H2
    span = schedule == "zb-h2"
    hand = _extended(compute, latency, transfer, m, windows, schedule, 2 * max(windows) + 2, span)
    greedy = _extended(compute, latency, transfer, m, windows, _GREEDY, 4 * windows[0] + 4, span)
    return min(hand, greedy)


#: the order key of the zero-bubble schedules' greedy replay (:func:`_replayed_head`, :func:`_steady_period_cached`)
_GREEDY = "greedy"


def _extended(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m: int,
    windows: tuple[int, ...], order: str, head: int, span: bool,
) -> float:
    """An order's time: its first ``head`` micro-batches replayed exactly, the rest at its steady period.

    :param order: ``"1f1b"``, a zero-bubble schedule (its hand-crafted order) or :data:`_GREEDY`.
    :param span: extend the longest stage span instead of the makespan.
    """
    m0 = min(m, head)
    t0 = _replayed_head(compute, latency, transfer, m0, windows, order)[1 if span else 0]
    if m0 == m:
        return t0
    return t0 + (m - m0) * _steady_period_cached(compute, latency, transfer, order, windows)


#: bound on :func:`_replayed_head` and :func:`_steady_period_cached` entries (a few kB each)
_HEAD_ENTRIES = 1 << 12


@lru_cache(maxsize=_HEAD_ENTRIES)
def _replayed_head(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], m0: int,
    windows: tuple[int, ...], order: str,
) -> tuple[float, float]:
    """The exactly replayed first ``m0`` micro-batches of an order, memoised: ``(makespan, longest stage span)``.

    ``order`` is ``"1f1b"`` (its span is not computed: the makespan twice), a zero-bubble schedule
    (its hand-crafted order, :func:`_sweep_zero_bubble`) or :data:`_GREEDY` (the greedy zero-bubble
    order, :func:`_replay_zero_bubble`).  Keyed without the iteration's ``m``: plans that differ only
    in their data-parallel degree (so in ``m``, not in their stages) share the replayed head whenever
    ``m`` exceeds ``m0`` (about half the replays of plan search on spider-64 were such repeats).  A
    pure function of its arguments: the same values as calling those functions.
    """
    jit = _jit_kernels()
    if order == _GREEDY:
        if jit is None:
            duration, _, span = _replay_zero_bubble(compute, latency, transfer, m0, windows)
            return duration, span
        c, lat, x = _arrays(compute, latency, transfer)
        duration, span, _, completed = jit.replay_zero_bubble(c, lat, x, m0, np.array(windows, dtype=np.int64))
        if not completed:  # pragma: no cover - a schedule bug, not an input error
            raise RuntimeError(f"replay of a zero-bubble schedule deadlocked: windows {windows}, m {m0}")
        return float(duration), float(span)
    if order != "1f1b":  # the hand-crafted zero-bubble order
        u, d = zero_bubble_split(order, windows)
        if jit is None:
            return _sweep_zero_bubble(compute, latency, transfer, m0, _zero_bubble_rows(m0, u, d))
        rows = _zero_bubble_row_array(m0, u, d)
        makespan, span = jit.sweep_zero_bubble(*_arrays(compute, latency, transfer), m0, rows)
        return float(makespan), float(span)
    if jit is None:
        t = _sweep_fixed_order(compute, latency, transfer, m0, windows, gpipe=False)
    else:
        t = float(jit.sweep_fixed_order(*_arrays(compute, latency, transfer), m0, _sweep_plan_rows(False, m0, windows)))
    return t, t


_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
#: the last :func:`_arrays` call: its three tuples (held, so their ids are not reused) and its arrays
_last_arrays: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], _Arrays] | None = None


def _arrays(compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...]) -> _Arrays:
    """The replays' inputs as the float arrays the compiled code takes (which only reads them).

    One evaluation replays up to three orders of the same stages and hops (a zero-bubble schedule's
    two, and :func:`sfenv.model.perf.evaluate_plan`'s fallbacks), each with the same tuples: the
    arrays of the last call are handed out again when the tuples are the same objects.
    """
    global _last_arrays
    last = _last_arrays
    if last is not None and last[0] is compute and last[1] is latency and last[2] is transfer:
        return last[3]
    arrays = (np.array(compute, dtype=np.float64), np.array(latency, dtype=np.float64),
              np.array(transfer, dtype=np.float64))
    _last_arrays = (compute, latency, transfer, arrays)
    return arrays


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
        with ctrl_c_deferred():  # numba and llvmlite lose or mangle a KeyboardInterrupt raised inside them
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


@lru_cache(maxsize=512)
def _zero_bubble_row_array(m: int, u: tuple[int, ...], d: tuple[int, ...]) -> np.ndarray:
    """:func:`_zero_bubble_rows` as an ``(operations, 4)`` integer array, built by the compiled code (read-only)."""
    jit = _jit_kernels()
    assert jit is not None  # called only when the compiled replays are in use
    rows: np.ndarray = jit.zero_bubble_rows(m, np.array(u, dtype=np.int64), np.array(d, dtype=np.int64))
    rows.setflags(write=False)
    return rows


@lru_cache(maxsize=_HEAD_ENTRIES)
def _steady_period_cached(
    compute: tuple[float, ...], latency: tuple[float, ...], transfer: tuple[float, ...], order: str,
    windows: tuple[int, ...],
) -> float:
    """An order's steady period (as :func:`_replayed_head`'s ``order``), memoised: it does not depend on ``m``."""
    if order == _GREEDY:
        return _greedy_period(compute, latency, transfer, windows)
    if order != "1f1b":
        return _zero_bubble_period(compute, latency, transfer, zero_bubble_split(order, windows)[0])
    return _window_period(compute, latency, transfer, windows)


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
    For 1F1B and the zero-bubble schedules' two orders (see :func:`replay_held`) the first ``m0``
    micro-batches are replayed exactly (``m0 = 2 w_0 + 2`` for 1F1B and the hand-crafted
    zero-bubble order, ``4 w_0 + 4`` for the greedy one, which settles more slowly) and the
    remaining ones are added at the order's steady period (:func:`steady_period`).  Tested against
    the full replay (``tests/test_pipeline_replay.py``) on the grid p 2-16, 0.5-100 Gbit/s,
    1-200 ms, m 1-512 and on random chains: 1F1B within 5 %, the zero-bubble schedules within 8 %
    (the greedy order's transient can outlast ``m0``).  Results are memoised on the exact inputs.
    """
    p = len(compute)
    w = tuple(windows) if windows is not None else default_windows(p, m, schedule)
    return _pipeline_time_cached(
        tuple(float(c) for c in compute), tuple(float(v) for v in latency), tuple(float(v) for v in transfer),
        int(m), schedule, w,
    )


class _ChannelReplay(_EventReplay):
    """:class:`_EventReplay` with its own transfer time per hop and direction, recording when each channel sends."""

    __slots__ = ("sending", "two_ways")

    def __init__(self, compute: Sequence[float], latency: Sequence[float], forward: Sequence[float],
                 backward: Sequence[float], m: int, schedule: str, w: list[int]) -> None:
        super().__init__(compute, latency, forward, m, schedule, w)
        self.two_ways = (forward, backward)
        self.sending: dict[tuple[int, int], list[tuple[float, float]]] = {}

    def send(self, t: float, hop: int, direction: int, dst: int, kind: int, i: int) -> None:
        """As :meth:`_EventReplay.send`, with the direction's transfer time, and the channel's busy interval kept."""
        key = (hop, direction)
        x = self.two_ways[direction][hop]
        start = max(t, self.chan_free.get(key, 0.0))
        self.chan_free[key] = start + x
        self.sending.setdefault(key, []).append((start, start + x))
        self.push(start + x + self.latency[hop], kind, dst, i)


def hop_overlap(
    compute: Sequence[float], latency: Sequence[float], forward: Sequence[float], backward: Sequence[float], m: int,
    schedule: str, windows: Sequence[int], pairs: Collection[tuple[int, int]] | None = None,
) -> dict[tuple[int, int], float]:
    """How a pipeline's own hop transfers overlap in time under its schedule (one iteration, replayed).

    A schedule fixes when each stage sends (a 1F1B stage alternates forwards and backwards, so two hops
    that meet on a link may never send at once, or always); their overlap is not the product of their
    duties.  Each hop direction is a channel busy for its transfer time per micro-batch
    (:func:`replay_pipeline`'s model, each way its own time), timed position by position as
    :func:`_sweep_fixed_order` times the schedule (the event replay :class:`_ChannelReplay` gives the
    same, tested).

    :param pairs: the ``(a, b)`` wanted (None: every pair of channels that send).
    :return: ``{(a, b): share of channel a's sending time during which channel b sends}`` for channels
        ``a != b`` keyed ``2 hop + direction`` (0 forward), as :class:`sfenv.model.sharing.FlowGroup.key`.
    """
    if schedule not in ("1f1b", "gpipe"):
        raise ValueError(f"hop_overlap replays 1f1b and gpipe only, got {schedule!r}")
    jit = _jit_kernels()
    if jit is not None and len(compute) > 1:
        channels = 2 * (len(compute) - 1)
        wanted = np.ones((channels, channels), dtype=np.bool_)
        if pairs is not None:
            wanted[:] = False
            for a, b in pairs:
                if a < channels and b < channels:
                    wanted[a, b] = True
        arrays = [np.array(v, dtype=np.float64) for v in (compute, latency, forward, backward)]
        shares = jit.hop_overlap(*arrays, m, _sweep_plan_rows(schedule == "gpipe", m, tuple(windows)), wanted)
        return {(a, b): float(shares[a, b]) for a in range(channels) for b in range(channels) if shares[a, b] >= 0.0}
    busy = _channel_busy(compute, latency, forward, backward, m, tuple(windows), schedule == "gpipe")
    out: dict[tuple[int, int], float] = {}
    for a, ia in busy.items():
        total = 0.0
        for start, end in ia:
            total += end - start
        for b, ib in busy.items():
            if a != b and total > 0.0 and (pairs is None or (a, b) in pairs):
                out[(a, b)] = _shared_time(ia, ib) / total
    return out


def _shared_time(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """How long two channels send at once: a merge of their sorted, disjoint sending intervals."""
    both = 0.0
    i = n = 0
    while i < len(a) and n < len(b):
        lo = a[i][0] if a[i][0] > b[n][0] else b[n][0]
        hi = a[i][1] if a[i][1] < b[n][1] else b[n][1]
        if hi > lo:
            both += hi - lo
        if a[i][1] < b[n][1]:
            i += 1
        else:
            n += 1
    return both


def _channel_busy(
    compute: Sequence[float], latency: Sequence[float], forward: Sequence[float], backward: Sequence[float], m: int,
    windows: tuple[int, ...], gpipe: bool,
) -> dict[int, list[tuple[float, float]]]:
    """Each hop direction's sending intervals over one iteration, keyed ``2 hop + direction``, in time order.

    :func:`_sweep_fixed_order`'s loop with each direction's own transfer time, recording when each
    channel sends (a FIFO channel: each transfer starts when it is handed over or when the one before
    it has left, whichever is later).
    """
    p = len(compute)
    fwd = [c / 3.0 for c in compute]
    bwd = [2.0 * c / 3.0 for c in compute]
    f_arr = [-math.inf] * m + [0.0] * ((p - 1) * m)
    g_arr = [0.0] * (p * m)
    free = [0.0] * p
    down = [0.0] * p
    up = [0.0] * p
    busy: dict[int, list[tuple[float, float]]] = {}
    for kind, k, j, to in _sweep_plan(gpipe, m, windows):
        if kind == _LAST_F or kind == _FIRST_B:
            t = free[k]
            ready = f_arr[j] if kind == _LAST_F else g_arr[j]
            t = (ready if ready > t else t) + (fwd[k] if kind == _LAST_F else bwd[k])
            free[k] = t
            if kind == _LAST_F:
                g_arr[j] = t
            continue
        if kind == _SEND_DOWN:
            ready, hop, op, chan, x = f_arr[j], k, fwd[k], down, forward[k]
        else:
            ready, hop, op, chan, x = g_arr[j], to, bwd[k], up, backward[to]
        t = free[k]
        t = (ready if ready > t else t) + op
        free[k] = t
        start = t if t > chan[hop] else chan[hop]
        chan[hop] = start + x
        busy.setdefault(2 * hop + (kind == _SEND_UP), []).append((start, start + x))
        if kind == _SEND_DOWN:
            f_arr[to] = start + x + latency[hop]
        else:
            g_arr[j - m] = start + x + latency[hop]
    return busy
