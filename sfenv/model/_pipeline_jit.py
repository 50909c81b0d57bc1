"""Compiled twins of the pipeline replays that dominate plan evaluation (optional, needs numba).

:func:`sfenv.model.pipeline._replay_zero_bubble`, :func:`sfenv.model.pipeline._sweep_fixed_order` and
:func:`sfenv.model.pipeline._sweep_zero_bubble` (with the tables they walk, built by
:func:`sfenv.model.pipeline._sweep_plan` and :func:`sfenv.model.pipeline._zero_bubble_rows`) are
pure-Python loops over every operation of a pipeline iteration's first micro-batches; they are
most of the cost of evaluating a new multi-stage plan (72 % of a ``proposers="best+spantrain"``
step on spider-64 under cProfile).  The functions here are the same algorithms, written over
NumPy arrays so that numba compiles them: the same float operations in the same order, so the
same results bit for bit (``tests/test_pipeline_jit.py`` compares them on seeded grids where
equal event times are common).

Used when numba imports and the environment variable ``SFENV_NO_JIT`` is unset or ``0``
(:data:`AVAILABLE`); otherwise :mod:`sfenv.model.pipeline` runs its Python loops.  Compiled code is
cached on disk (numba's ``cache=True``), so only the first process pays the compile time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "AVAILABLE", "hop_overlap", "replay_shared", "replay_zero_bubble", "sweep_fixed_order", "sweep_plan",
    "sweep_zero_bubble", "warm_up", "zero_bubble_rows",
]

try:  # numba is optional: ``pip install sfenv[fast]``
    if os.environ.get("SFENV_NO_JIT", "0") not in ("", "0"):
        raise ImportError("SFENV_NO_JIT is set")
    from numba import njit
except ImportError:  # pragma: no cover - depends on the installation
    AVAILABLE = False
else:
    AVAILABLE = True

# event codes, as in sfenv.model.pipeline
_DONE_F, _DONE_B, _DONE_W, _ARRIVE_ACT, _ARRIVE_GRAD = 0, 1, 2, 3, 4
#: the most micro-batches one period of the steady state may span (as ``sfenv.model.hopshare._PERIODS``)
_PERIODS = 4
#: two replay states are the same within this share of each entry (as ``sfenv.model.hopshare._SAME``)
_SAME = 1e-9
_SEQ = 1024
#: the most WAN flows of a replay whose max-min rates :func:`_advance` remembers per set of senders
_MEMO_FLOWS = 10


def _heap_push(times: np.ndarray, tags: np.ndarray, n: int, t: float, tag: int) -> int:
    """Push ``(t, tag)`` onto the binary min-heap of the first ``n`` entries; the new size."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        pt, ptag = times[parent], tags[parent]
        if pt < t or (pt == t and ptag < tag):
            break
        times[i], tags[i] = pt, ptag
        i = parent
    times[i], tags[i] = t, tag
    return n + 1


def _heap_pop(times: np.ndarray, tags: np.ndarray, n: int) -> int:
    """Remove the heap's least entry (read it from index 0 first); the new size."""
    n -= 1
    t, tag = times[n], tags[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and (times[right] < times[child] or (times[right] == times[child] and tags[right] < tags[child])):
            child = right
        ct, ctag = times[child], tags[child]
        if t < ct or (t == ct and tag < ctag):
            break
        times[i], tags[i] = ct, ctag
        i = child
    times[i], tags[i] = t, tag
    return n


def _next_op(
    k: int, last: int, m: int, window: int, arrived: np.ndarray, nf: np.ndarray, nb: np.ndarray, nw: np.ndarray,
    done: np.ndarray, peak: np.ndarray,
) -> int:
    """Start stage ``k``'s next operation (counters updated): its done code or -1, as ``pipeline._zb_next_op``."""
    b = nb[k]
    if b < m and b < (done[_DONE_F, k] if k == last else arrived[1, k]):
        nb[k] = b + 1
        return _DONE_B
    f = nf[k]
    if f < m and f < arrived[0, k] and f - done[_DONE_W, k] < window:
        nf[k] = f + 1
        peak[k] = max(peak[k], f + 1 - done[_DONE_W, k])
        return _DONE_F
    if nw[k] < b:
        nw[k] += 1
        return _DONE_W
    return -1


def _channels(
    latency: np.ndarray, transfer: np.ndarray, p: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The greedy replay's channel tables: forward on hop k is channel k, backward on hop k is p + k.

    :return: ``(channel of each operation kind and stage or -1, transfer, latency, destination stage,
        arrival tag)``, the last four per channel.
    """
    channel = np.full((3, p), -1, np.int64)
    chan_x, chan_l = np.zeros(2 * p), np.zeros(2 * p)
    chan_dest, chan_tag = np.zeros(2 * p, np.int64), np.zeros(2 * p, np.int64)
    for k in range(p):
        chan_dest[k], chan_tag[k] = k + 1, 8 * (k + 1) + _ARRIVE_ACT
        chan_dest[p + k], chan_tag[p + k] = k, 8 * k + _ARRIVE_GRAD
        if k < p - 1:
            channel[_DONE_F, k] = k
            chan_x[k] = chan_x[p + k] = transfer[k]
            chan_l[k] = chan_l[p + k] = latency[k]
        if k > 0:
            channel[_DONE_B, k] = p + k - 1
    return channel, chan_x, chan_l, chan_dest, chan_tag


def _replay_zero_bubble(
    compute: np.ndarray, latency: np.ndarray, transfer: np.ndarray, m: int, w: np.ndarray
) -> tuple[float, float, np.ndarray, bool]:
    """:func:`sfenv.model.pipeline._replay_zero_bubble` over arrays: ``(duration, span, peaks, completed)``."""
    p = compute.shape[0]
    last = p - 1
    dur = compute / 3.0
    arrived = np.zeros((2, p), np.int64)  # activations, gradients (the last stage uses its own forwards)
    arrived[0, 0] = m
    nf, nb, nw = np.zeros(p, np.int64), np.zeros(p, np.int64), np.zeros(p, np.int64)
    done = np.zeros((3, p), np.int64)
    busy = np.zeros(p, np.bool_)
    peak = np.zeros(p, np.int64)
    channel, chan_x, chan_l, chan_dest, chan_tag = _channels(latency, transfer, p)
    chan_free = np.zeros(2 * p)
    done_at = np.zeros(p)  # when a busy stage's operation ends (at the end: its last operation's end)
    first = np.zeros(p)  # when each stage starts its first forward (stage 0: at 0)
    times, tags = np.empty(3 * m * p + 4 * p + 8), np.empty(3 * m * p + 4 * p + 8, np.int64)
    n = seq = 0
    for k in range(p):  # every stage's first operation at time 0 (a forward on stage 0 only)
        op = _next_op(k, last, m, w[k], arrived, nf, nb, nw, done, peak)
        if op >= 0:
            busy[k] = True
            done_at[k] = 0.0 + dur[k]
            n = _heap_push(times, tags, n, done_at[k], seq + 8 * k + op)
            seq += _SEQ
    end_time = 0.0
    while n > 0:
        t, tag = times[0], tags[0]
        n = _heap_pop(times, tags, n)
        kind = tag & 7
        k = (tag & (_SEQ - 1)) >> 3
        if kind <= _DONE_W:
            busy[k] = False
            if t > end_time:
                end_time = t
            done[kind, k] += 1
            ch = channel[kind, k]
            if ch >= 0:
                free = chan_free[ch]
                free = (free if free > t else t) + chan_x[ch]
                chan_free[ch] = free
                arrival = free + chan_l[ch]
                dest = chan_dest[ch]
                if busy[dest] and arrival < done_at[dest]:  # the receiver reads the count only when its operation ends
                    arrived[(chan_tag[ch] & 7) - _ARRIVE_ACT, dest] += 1
                else:
                    n = _heap_push(times, tags, n, arrival, seq + chan_tag[ch])
                    seq += _SEQ
        else:
            arrived[kind - _ARRIVE_ACT, k] += 1
            if busy[k]:
                continue
        # the stage is free: its next operation, as _next_op chooses it (written out: a call here costs 3x)
        b = nb[k]
        if b < m and b < (done[_DONE_F, k] if k == last else arrived[1, k]):
            nb[k] = b + 1
            op = _DONE_B
        else:
            f = nf[k] + 1
            if f <= m and f <= arrived[0, k] and f - done[_DONE_W, k] <= w[k]:
                nf[k] = f
                peak[k] = max(peak[k], f - done[_DONE_W, k])
                if f == 1:  # a stage's first operation is its first forward
                    first[k] = t
                op = _DONE_F
            elif nw[k] < b:
                nw[k] += 1
                op = _DONE_W
            else:
                continue
        busy[k] = True
        done_at[k] = t + dur[k]
        n = _heap_push(times, tags, n, done_at[k], seq + 8 * k + op)
        seq += _SEQ
    return end_time, np.max(done_at - first), peak, bool(np.all(nf + nb + nw == 3 * m))


def _sweep_start(
    compute: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fixed-order sweep's state before its first operation.

    Forward and backward times per stage, arrival times (activations, ``-inf`` at the first stage;
    gradients), and when each stage and each hop channel (down, up) is free.
    """
    p = compute.shape[0]
    f_arr = np.zeros(p * m)
    for j in range(m):
        f_arr[j] = -np.inf
    return compute / 3.0, 2.0 * compute / 3.0, f_arr, np.zeros(p * m), np.zeros(p), np.zeros(p), np.zeros(p)


def _sweep_fixed_order(
    compute: np.ndarray, latency: np.ndarray, transfer: np.ndarray, m: int, plan: np.ndarray
) -> float:
    """:func:`sfenv.model.pipeline._sweep_fixed_order` over arrays.

    ``plan`` is :func:`sfenv.model.pipeline._sweep_plan` as rows.
    """
    p = compute.shape[0]
    fwd, bwd, f_arr, g_arr, free, down, up = _sweep_start(compute, m)
    for r in range(plan.shape[0]):
        kind, k, j, to = plan[r, 0], plan[r, 1], plan[r, 2], plan[r, 3]
        forward = kind == 0 or kind == 2  # sends downstream (0), or on the last stage (2)
        t = free[k]
        ready = f_arr[j] if forward else g_arr[j]  # the input's arrival
        if ready > t:
            t = ready
        t += fwd[k] if forward else bwd[k]
        free[k] = t
        if kind == 0:  # the activation goes to stage k + 1 (index ``to``)
            d = down[k]
            d = (t if t > d else d) + transfer[k]
            down[k] = d
            f_arr[to] = d + latency[k]
        elif kind == 1:  # the gradient goes to stage k - 1 over hop ``to``
            u = up[to]
            u = (t if t > u else u) + transfer[to]
            up[to] = u
            g_arr[j - m] = u + latency[to]
        elif kind == 2:  # the last stage's backward waits on its forward
            g_arr[j] = t
    best: float = free[0]
    for k in range(1, p):
        if free[k] > best:
            best = free[k]
    return best


def _hop_overlap(
    compute: np.ndarray, latency: np.ndarray, forward: np.ndarray, backward: np.ndarray, m: int, plan: np.ndarray,
    wanted: np.ndarray,
) -> np.ndarray:
    """:func:`sfenv.model.pipeline.hop_overlap` over arrays: the share of channel a's sending during which b sends.

    Channel ``2 hop + direction``; ``plan`` is :func:`sfenv.model.pipeline._sweep_plan` as rows, and
    ``wanted[a, b]`` says which shares to compute (the others are returned as -1).  Each channel sends
    its ``m`` transfers in time order (:func:`sfenv.model.pipeline._channel_busy`'s arithmetic); two
    channels' shared time is a merge of their sorted intervals.
    """
    p = compute.shape[0]
    fwd, bwd, f_arr, g_arr, free, down, up = _sweep_start(compute, m)
    channels = 2 * (p - 1)
    starts = np.zeros((channels, m))
    ends = np.zeros((channels, m))
    count = np.zeros(channels, np.int64)
    for r in range(plan.shape[0]):
        kind, k, j, to = plan[r, 0], plan[r, 1], plan[r, 2], plan[r, 3]
        forward_op = kind == 0 or kind == 2
        t = free[k]
        ready = f_arr[j] if forward_op else g_arr[j]
        t = (ready if ready > t else t) + (fwd[k] if forward_op else bwd[k])
        free[k] = t
        if kind == 0:
            start = t if t > down[k] else down[k]
            down[k] = start + forward[k]
            c = 2 * k
            starts[c, count[c]], ends[c, count[c]] = start, start + forward[k]
            count[c] += 1
            f_arr[to] = start + forward[k] + latency[k]
        elif kind == 1:
            start = t if t > up[to] else up[to]
            up[to] = start + backward[to]
            c = 2 * to + 1
            starts[c, count[c]], ends[c, count[c]] = start, start + backward[to]
            count[c] += 1
            g_arr[j - m] = start + backward[to] + latency[to]
        elif kind == 2:
            g_arr[j] = t
    shares = -np.ones((channels, channels))
    for a in range(channels):
        total = 0.0
        for i in range(count[a]):
            total += ends[a, i] - starts[a, i]
        for b in range(channels):
            if a == b or not wanted[a, b] or total <= 0.0:
                continue
            both = 0.0
            i = 0
            n = 0
            while i < count[a] and n < count[b]:
                lo = starts[a, i] if starts[a, i] > starts[b, n] else starts[b, n]
                hi = ends[a, i] if ends[a, i] < ends[b, n] else ends[b, n]
                if hi > lo:
                    both += hi - lo
                if ends[a, i] < ends[b, n]:
                    i += 1
                else:
                    n += 1
            shares[a, b] = both / total
    return shares


def _sweep_plan(gpipe: bool, m: int, windows: np.ndarray) -> np.ndarray:
    """:func:`sfenv.model.pipeline._sweep_plan` as an ``(operations, 4)`` array (the same rows in the same order)."""
    p = windows.shape[0]
    last = p - 1
    kinds = np.empty((p, 2 * m), np.int64)  # per stage, its order (:func:`sfenv.model.pipeline._fixed_order`)
    index = np.empty((p, 2 * m), np.int64)
    for k in range(p):
        n = 0
        if gpipe:
            for i in range(m):
                kinds[k, n], index[k, n] = 0, i
                n += 1
            for i in range(m):
                kinds[k, n], index[k, n] = 1, i
                n += 1
        else:
            w = windows[k]
            for i in range(w):
                kinds[k, n], index[k, n] = 0, i
                n += 1
            for i in range(m):
                kinds[k, n], index[k, n] = 1, i
                n += 1
                if i + w < m:
                    kinds[k, n], index[k, n] = 0, i + w
                    n += 1
    rows = np.zeros((2 * m * p, 4), np.int64)
    r = 0
    for pos in range(2 * m):
        for k in range(p):  # forwards from the first stage down
            if kinds[k, pos] == 0:
                j = k * m + index[k, pos]
                if k < last:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 0, k, j, j + m
                else:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 2, k, j, 0
                r += 1
        for k in range(last, -1, -1):  # backwards from the last stage up
            if kinds[k, pos] == 1:
                if k > 0:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 1, k, k * m + index[k, pos], k - 1
                else:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 3, k, index[k, pos], 0
                r += 1
    return rows[:r]


def _zero_bubble_orders(m: int, u: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each stage's :func:`sfenv.model.pipeline.zero_bubble_order`: ``(kinds, micro-batches)``, ``(p, 3 m)`` each."""
    p = u.shape[0]
    size = 3 * m
    kinds = np.empty((p, size), np.int64)
    index = np.empty((p, size), np.int64)
    for k in range(p):
        n = 0
        for i in range(min(u[k], m)):
            kinds[k, n], index[k, n] = 0, i
            n += 1
        weights = 0
        for i in range(m):
            kinds[k, n], index[k, n] = 1, i
            n += 1
            if i >= d[k]:
                kinds[k, n], index[k, n] = 2, i - d[k]
                n += 1
                weights += 1
            if i + u[k] < m:
                kinds[k, n], index[k, n] = 0, i + u[k]
                n += 1
        for i in range(weights, m):
            kinds[k, n], index[k, n] = 2, i
            n += 1
    return kinds, index


def _zero_bubble_rows(m: int, u: np.ndarray, d: np.ndarray) -> np.ndarray:
    """:func:`sfenv.model.pipeline._zero_bubble_rows` as an ``(operations, 4)`` array (the same rows, same order)."""
    p = u.shape[0]
    last = p - 1
    size = 3 * m
    kinds, index = _zero_bubble_orders(m, u, d)
    rows = np.zeros((size * p, 4), np.int64)
    r = 0
    pos = np.zeros(p, np.int64)
    placed = np.zeros((2, p), np.int64)  # forwards and input gradients placed per stage
    todo = np.empty(size * p + p, np.int64)  # a stack of stages to advance, the first stage on top
    top = 0
    for k in range(last, -1, -1):
        todo[top] = k
        top += 1
    while top > 0:
        top -= 1
        k = todo[top]
        n = pos[k]
        while n < size:
            kind, i = kinds[k, n], index[k, n]
            if kind == 0:
                if k > 0 and placed[0, k - 1] <= i:
                    break
                j = k * m + i
                if k < last:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 0, k, j, j + m
                    todo[top] = k + 1
                    top += 1
                else:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 2, k, j, 0
                placed[0, k] += 1
            elif kind == 1:
                if k < last and placed[1, k + 1] <= i:
                    break
                if k > 0:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 1, k, k * m + i, k - 1
                    todo[top] = k - 1
                    top += 1
                else:
                    rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 3, k, i, 0
                placed[1, k] += 1
            else:
                rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = 4, k, 0, 0
            r += 1
            n += 1
        pos[k] = n
    return rows[:r]


def _sweep_zero_bubble(
    compute: np.ndarray, latency: np.ndarray, transfer: np.ndarray, m: int, rows: np.ndarray
) -> tuple[float, float]:
    """:func:`sfenv.model.pipeline._sweep_zero_bubble` over arrays: ``(makespan, longest stage span)``."""
    p = compute.shape[0]
    third = compute / 3.0
    f_arr = np.zeros(p * m)
    for j in range(m):
        f_arr[j] = -np.inf
    g_arr = np.zeros(p * m)
    free = np.zeros(p)
    down = np.zeros(p)
    up = np.zeros(p)
    for r in range(rows.shape[0]):
        kind, k, j, to = rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3]
        t = free[k]
        if kind == 4:  # a weight gradient: its input gradient ran before it on this stage
            free[k] = t + third[k]
            continue
        ready = f_arr[j] if kind == 0 or kind == 2 else g_arr[j]  # the input's arrival
        if ready > t:
            t = ready
        t += third[k]
        free[k] = t
        if kind == 0:  # the activation goes to stage k + 1 (index ``to``)
            dn = down[k]
            dn = (t if t > dn else dn) + transfer[k]
            down[k] = dn
            f_arr[to] = dn + latency[k]
        elif kind == 1:  # the gradient goes to stage k - 1 over hop ``to``
            st = up[to]
            st = (t if t > st else st) + transfer[to]
            up[to] = st
            g_arr[j - m] = st + latency[to]
        elif kind == 2:  # the last stage's input gradient waits on its forward
            g_arr[j] = t
    makespan: float = free[0]
    span: float = free[0]
    for k in range(1, p):
        if free[k] > makespan:
            makespan = free[k]
        if free[k] - f_arr[k * m] > span:
            span = free[k] - f_arr[k * m]
    return makespan, span


def _links_met(ids: np.ndarray, nids: int, f_links: np.ndarray, f_members: np.ndarray, cap: np.ndarray,
               others: np.ndarray, work: np.ndarray, seen: np.ndarray, elist: np.ndarray) -> int:
    """The links of flows ``ids[:nids]`` in the order met into ``elist``, with room, members and others in ``work``."""
    ne = 0
    for q in range(nids):
        f = ids[q]
        for j in range(f_links.shape[1]):
            e = f_links[f, j]
            if e < 0:
                break
            if not seen[e]:
                seen[e] = True
                elist[ne] = e
                ne += 1
                work[0, e] = cap[e]
                work[1, e] = 0.0
                work[2, e] = others[e]
            work[1, e] += f_members[f]
    return ne


def _tightest(work: np.ndarray, elist: np.ndarray, ne: int) -> tuple[float, int]:
    """The least share a link with unfixed flows offers, and the first such link."""
    share = np.inf
    tight = -1
    for a in range(ne):
        e = elist[a]
        if work[1, e] > 0.0:
            c = work[0, e]
            s = (c if c > 0.0 else 0.0) / (work[1, e] + work[2, e])
            if s < share:
                share = s
                tight = e
    return share, tight


def _crosses(f_links: np.ndarray, f: int, e: int) -> bool:
    for j in range(f_links.shape[1]):
        if f_links[f, j] == e:
            return True
    return False


def _fix(q: int, f: int, value: float, f_links: np.ndarray, f_members: np.ndarray, rate: np.ndarray,
         fixed: np.ndarray, work: np.ndarray) -> None:
    """Fix flow ``ids[q] = f`` at ``value`` and take it off its links."""
    rate[q] = value
    fixed[q] = True
    for j in range(f_links.shape[1]):
        e = f_links[f, j]
        if e < 0:
            break
        work[0, e] -= value * f_members[f]
        work[1, e] -= f_members[f]


def _max_min(ids: np.ndarray, nids: int, f_links: np.ndarray, f_members: np.ndarray, f_bound: np.ndarray,
             cap: np.ndarray, others: np.ndarray, rate: np.ndarray, work: np.ndarray, seen: np.ndarray,
             elist: np.ndarray, fixed: np.ndarray) -> None:
    """:func:`sfenv.model.sharing.max_min_rates` over the flows ``ids[:nids]``: their rates into ``rate[:nids]``.

    ``work`` holds per link its room, own members and other flows (rows 0-2); ``seen`` marks the links
    met, in ``elist`` in the order met (as the dicts of the Python function); both are left clean.
    """
    ne = _links_met(ids, nids, f_links, f_members, cap, others, work, seen, elist)
    fixed[:nids] = False
    left = nids
    while left > 0:
        share, tight = _tightest(work, elist, ne)
        first = -1
        for q in range(nids):
            if not fixed[q] and (first < 0 or f_bound[ids[q]] < f_bound[ids[first]]):
                first = q
        if f_bound[ids[first]] <= share:
            _fix(first, ids[first], f_bound[ids[first]], f_links, f_members, rate, fixed, work)
            left -= 1
            continue
        work[0, tight] -= share * work[2, tight]
        work[2, tight] = 0.0
        for q in range(nids):
            if not fixed[q] and _crosses(f_links, ids[q], tight):
                _fix(q, ids[q], share, f_links, f_members, rate, fixed, work)
                left -= 1
    for a in range(ne):
        seen[elist[a]] = False


def _start_channels(t: float, transfer: np.ndarray, queue: np.ndarray, chan: np.ndarray, began: np.ndarray,
                    local_end: np.ndarray, ch_flows: np.ndarray, f_bits: np.ndarray, on: np.ndarray,
                    left_bits: np.ndarray) -> None:
    """Start every idle channel's next queued transfer (:meth:`sfenv.model.hopshare._Replay.start`'s second half)."""
    for ch in range(queue.shape[0]):
        if chan[0, ch] < chan[1, ch] and not chan[2, ch]:
            chan[2, ch] = 1
            chan[3, ch] = queue[ch, chan[0, ch]]
            chan[0, ch] += 1
            began[1, ch] = t
            if ch_flows[ch, 0] < 0:
                local_end[ch] = t + transfer[ch >> 1]
            for j in range(ch_flows.shape[1]):
                f = ch_flows[ch, j]
                if f < 0:
                    break
                on[f] = True
                left_bits[f] = f_bits[f]


def _start_shared(t: float, compute: np.ndarray, transfer: np.ndarray, kinds: np.ndarray, mbs: np.ndarray,
                  stage: np.ndarray, act: np.ndarray, grad: np.ndarray, queue: np.ndarray, chan: np.ndarray,
                  began: np.ndarray, local_end: np.ndarray, ch_flows: np.ndarray, f_bits: np.ndarray,
                  on: np.ndarray, left_bits: np.ndarray) -> None:
    """:meth:`sfenv.model.hopshare._Replay.start`.

    ``stage`` rows: next position, running operation's kind and micro-batch; ``chan`` rows: queue
    head, queue tail, busy, micro-batch under way.  ``began[0]``: operation ends (inf: idle).
    """
    p = compute.shape[0]
    for k in range(p):
        if began[0, k] == np.inf and stage[0, k] < kinds.shape[1]:
            kind, i = kinds[k, stage[0, k]], mbs[k, stage[0, k]]
            if (act[k, i] if kind == 0 else grad[k, i]) <= t:
                c = compute[k]
                began[0, k] = t + (c / 3.0 if kind == 0 else 2.0 * c / 3.0)
                stage[1, k] = kind
                stage[2, k] = i
                stage[0, k] += 1
    _start_channels(t, transfer, queue, chan, began, local_end, ch_flows, f_bits, on, left_bits)


def _end_ops(t: float, began: np.ndarray, stage: np.ndarray, grad: np.ndarray, queue: np.ndarray,
             chan: np.ndarray) -> int:
    """:meth:`sfenv.model.hopshare._Replay._finish_ops`; returns the first stage's backwards that ended."""
    p = stage.shape[1]
    ended = 0
    for k in range(p):
        if began[0, k] <= t:
            began[0, k] = np.inf
            kind, i = stage[1, k], stage[2, k]
            if kind == 0 and k == p - 1:
                grad[k, i] = t
                continue
            if kind != 0 and k == 0:
                ended += 1
                continue
            c = 2 * k if kind == 0 else 2 * (k - 1) + 1
            queue[c, chan[1, c]] = i
            chan[1, c] += 1
    return ended


def _end_transfers(t: float, latency: np.ndarray, chan: np.ndarray, began: np.ndarray, local_end: np.ndarray,
                   ch_flows: np.ndarray, f_bits: np.ndarray, on: np.ndarray, left_bits: np.ndarray,
                   total: np.ndarray, count: np.ndarray, spans: np.ndarray, nspan: np.ndarray,
                   arrivals: np.ndarray, narr: int) -> int:
    """:meth:`sfenv.model.hopshare._Replay._finish_transfers`; returns the number of messages in flight."""
    for ch in range(chan.shape[1]):
        if not chan[2, ch]:
            continue
        if ch_flows[ch, 0] >= 0:
            still = False
            for j in range(ch_flows.shape[1]):
                f = ch_flows[ch, j]
                if f < 0:
                    break
                if on[f] and left_bits[f] <= f_bits[f] * 1e-9:
                    on[f] = False
                    total[f] += t - began[1, ch]
                    count[f] += 1
                still = still or on[f]
            if still:
                continue
            spans[0, ch, nspan[ch]] = began[1, ch]
            spans[1, ch, nspan[ch]] = t
            nspan[ch] += 1
        elif local_end[ch] > t:
            continue
        local_end[ch] = np.inf
        chan[2, ch] = 0
        arrivals[0, narr] = t + latency[ch >> 1]
        arrivals[1, narr] = ch
        arrivals[2, narr] = chan[3, ch]
        narr += 1
    return narr


def _arrive(t: float, arrivals: np.ndarray, narr: int, act: np.ndarray, grad: np.ndarray, chan: np.ndarray) -> int:
    """:meth:`sfenv.model.hopshare._Replay._arrive`; returns the number of messages still in flight."""
    kept = 0
    for a in range(narr):
        when, ch, mb = arrivals[0, a], int(arrivals[1, a]), int(arrivals[2, a])
        if when > t:
            arrivals[0, kept], arrivals[1, kept], arrivals[2, kept] = when, ch, mb
            kept += 1
            continue
        if ch & 1:
            grad[ch >> 1, mb] = when
        else:
            act[(ch >> 1) + 1, mb] = when
        chan[4, ch] += 1
    return kept


def _state(t: float, stage: np.ndarray, began: np.ndarray, chan: np.ndarray, queue: np.ndarray,
           local_end: np.ndarray, on: np.ndarray, left_bits: np.ndarray, arrivals: np.ndarray, narr: int,
           out: np.ndarray, per_mb: int, greedy: bool, counts: np.ndarray) -> int:
    """:meth:`sfenv.model.hopshare._Replay.state` into ``out``; returns its length (-1: longer than ``out``).

    ``per_mb``: order entries per micro-batch (1F1B 2, zero-bubble 3); ``greedy``: a greedy zero-bubble
    order, whose counters (``counts``' first four rows) stand for its position.
    """
    i, cap, n = stage[2, 0], out.shape[0], 0
    p = stage.shape[1]
    for k in range(p):
        if n + (8 if greedy else 4) > cap:
            return -1
        out[n] = 0.0 if greedy else stage[0, k] - per_mb * i
        busy = began[0, k] != np.inf
        out[n + 1] = began[0, k] - t if busy else -1.0
        out[n + 2] = stage[1, k] if busy else -1.0
        out[n + 3] = stage[2, k] - i if busy else 0.0
        n += 4
        if greedy:
            for r in range(4):
                out[n + r] = counts[r, k] - i
            n += 4
    for ch in range(chan.shape[1]):
        if n + 6 + chan[1, ch] - chan[0, ch] > cap:
            return -1
        busy = chan[2, ch] != 0
        out[n] = chan[1, ch] - chan[0, ch]
        out[n + 1] = 1.0 if busy else 0.0
        out[n + 2] = chan[3, ch] - i if busy else 0.0
        out[n + 3] = began[1, ch] - t if busy else 0.0
        out[n + 4] = local_end[ch] - t if local_end[ch] != np.inf else -1.0
        out[n + 5] = chan[4, ch] - i
        n += 6
        for j in range(chan[0, ch], chan[1, ch]):
            out[n] = queue[ch, j] - i
            n += 1
    return _state_tail(t, i, on, left_bits, arrivals, narr, out, n)


def _state_tail(t: float, i: int, on: np.ndarray, left_bits: np.ndarray, arrivals: np.ndarray, narr: int,
                out: np.ndarray, n: int) -> int:
    """:func:`_state`'s flows and messages in flight."""
    if n + 2 * on.shape[0] + 1 + 3 * narr > out.shape[0]:
        return -1
    for f in range(on.shape[0]):
        out[n] = 1.0 if on[f] else 0.0
        out[n + 1] = left_bits[f] if on[f] else 0.0
        n += 2
    out[n] = narr
    n += 1
    for a in range(narr):
        out[n] = arrivals[0, a] - t
        out[n + 1] = arrivals[1, a]
        out[n + 2] = arrivals[2, a] - i
        n += 3
    return n


def _same_state(a: np.ndarray, b: np.ndarray, n: int) -> bool:
    """:func:`sfenv.model.hopshare.same_state` over the first ``n`` entries."""
    for j in range(n):
        x, y = a[j], b[j]
        if abs(x - y) > _SAME * max(abs(x), abs(y)) + 1e-12:
            return False
    return True


def _seek(t: float, done: int, stage: np.ndarray, began: np.ndarray, chan: np.ndarray, queue: np.ndarray,
          local_end: np.ndarray, on: np.ndarray, left_bits: np.ndarray, arrivals: np.ndarray, narr: int,
          total: np.ndarray, count: np.ndarray, nspan: np.ndarray, hist: np.ndarray, hmeta: np.ndarray,
          hsums: np.ndarray, nhist: int, per_mb: int, greedy: bool, counts: np.ndarray) -> tuple[int, int]:
    """:meth:`sfenv.model.hopshare._Replay.look_for_period`'s record and search.

    ``hist`` rows hold the last states (a ring), ``hmeta`` their time, ``done`` and length, ``hsums``
    their flows' totals and counts, channels' spans and (zero-bubble) stages' weight gradients and
    operations done (``counts``' last two rows).  Returns the states kept and the period found (0: none).
    """
    slots = hist.shape[0]
    slot = nhist % slots
    n = _state(t, stage, began, chan, queue, local_end, on, left_bits, arrivals, narr, hist[slot], per_mb, greedy,
               counts)
    if n < 0:
        return 0, 0
    nf, nch, p = total.shape[0], nspan.shape[0], stage.shape[1]
    hmeta[slot, 0], hmeta[slot, 1], hmeta[slot, 2] = t, done, n
    hsums[slot, :nf] = total
    hsums[slot, nf:2 * nf] = count
    hsums[slot, 2 * nf:2 * nf + nch] = nspan
    hsums[slot, 2 * nf + nch:2 * nf + nch + p] = counts[3]
    hsums[slot, 2 * nf + nch + p:] = counts[4]
    nhist += 1
    for q in range(1, min(nhist, slots)):
        other = (nhist - 1 - q) % slots
        if hmeta[other, 2] == n and _same_state(hist[slot], hist[other], n):
            return nhist, q
    return nhist, 0


def _skip(t: float, done: int, q: int, before: int, m: int, windows: np.ndarray, stage: np.ndarray,
          began: np.ndarray, chan: np.ndarray, queue: np.ndarray, local_end: np.ndarray, act: np.ndarray,
          grad: np.ndarray, arrivals: np.ndarray, narr: int, total: np.ndarray, count: np.ndarray,
          spans: np.ndarray, nspan: np.ndarray, hmeta: np.ndarray, hsums: np.ndarray) -> tuple[float, int, int]:
    """:meth:`sfenv.model.hopshare._Replay._skip` from the state in slot ``before``; returns ``(t, done, skipped)``."""
    p = stage.shape[1]
    n = m
    for k in range(p):
        if stage[0, k] - 2 * q < windows[k] - 1:
            return t, done, 0
        n = min(n, (2 * m - windows[k] - stage[0, k]) // (2 * q))
    if n < 1:
        return t, done, 0
    return _shift(t, done, n, q, 2, before, m, stage, began, chan, queue, local_end, act, grad, arrivals, narr,
                  total, count, spans, nspan, hmeta, hsums)


def _shift(t: float, done: int, n: int, q: int, per_mb: int, before: int, m: int, stage: np.ndarray,
           began: np.ndarray, chan: np.ndarray, queue: np.ndarray, local_end: np.ndarray, act: np.ndarray,
           grad: np.ndarray, arrivals: np.ndarray, narr: int, total: np.ndarray, count: np.ndarray,
           spans: np.ndarray, nspan: np.ndarray, hmeta: np.ndarray, hsums: np.ndarray) -> tuple[float, int, int]:
    """:meth:`sfenv.model.hopshare._Replay._skip`'s move by ``n`` periods of ``q`` micro-batches.

    ``per_mb``: order entries per micro-batch (0: a greedy order, which keeps no position).  Returns
    ``(t, done, skipped)``.
    """
    p, nf = stage.shape[1], total.shape[0]
    period, nq = t - hmeta[before, 0], n * q
    shift = n * period
    t += shift
    for k in range(p):
        stage[0, k] += per_mb * nq
        stage[2, k] += nq
        if began[0, k] != np.inf:
            began[0, k] += shift
        for mb in range(m - 1, nq - 1, -1):
            if k:
                act[k, mb] = act[k, mb - nq] + shift
            grad[k, mb] = grad[k, mb - nq] + shift
    for ch in range(chan.shape[1]):
        for j in range(chan[1, ch] - 1, chan[0, ch] - 1, -1):
            queue[ch, j + nq] = queue[ch, j] + nq
        chan[0, ch] += nq
        chan[1, ch] += nq
        chan[3, ch] += nq
        chan[4, ch] += nq
        began[1, ch] += shift
        if local_end[ch] != np.inf:
            local_end[ch] += shift
        seen = nspan[ch] - int(hsums[before, 2 * nf + ch])
        origin = nspan[ch] - seen
        for j in range(1, n + 1):
            for s in range(seen):
                spans[0, ch, origin + j * seen + s] = spans[0, ch, origin + s] + j * period
                spans[1, ch, origin + j * seen + s] = spans[1, ch, origin + s] + j * period
        nspan[ch] += n * seen
    for a in range(narr):
        arrivals[0, a] += shift
        arrivals[2, a] += nq
    for f in range(nf):
        total[f] += n * (total[f] - hsums[before, f])
        count[f] += n * (count[f] - int(hsums[before, nf + f]))
    return t, done + n * (done - int(hmeta[before, 1])), nq


def _least(rows: np.ndarray, r: int) -> int:
    """The least entry of row ``r`` of a table of counters (the zero-bubble replay's loop test, each event)."""
    least = int(rows[r, 0])
    for k in range(1, rows.shape[1]):
        least = min(least, int(rows[r, k]))
    return least


def _co_sending(spans: np.ndarray, nspan: np.ndarray) -> np.ndarray:
    """``[a, b]``: the share of channel a's sending time during which b sends (-1: a or b never sends)."""
    nch = nspan.shape[0]
    shares = np.full((nch, nch), -1.0)
    for a in range(nch):
        whole = 0.0
        for n in range(nspan[a]):
            whole += spans[1, a, n] - spans[0, a, n]
        for b in range(nch):
            if a == b or whole <= 0.0 or nspan[b] == 0:
                continue
            both = 0.0
            i = n = 0
            while i < nspan[a] and n < nspan[b]:
                lo = spans[0, a, i] if spans[0, a, i] > spans[0, b, n] else spans[0, b, n]
                hi = spans[1, a, i] if spans[1, a, i] < spans[1, b, n] else spans[1, b, n]
                if hi > lo:
                    both += hi - lo
                if spans[1, a, i] < spans[1, b, n]:
                    i += 1
                else:
                    n += 1
            shares[a, b] = both / whole
    return shares


def _channel_flows(f_ch: np.ndarray, nch: int) -> np.ndarray:
    """Per channel, its flows in order (``-1`` padded)."""
    per = np.zeros(nch, dtype=np.int64)
    for f in range(f_ch.shape[0]):
        per[f_ch[f]] += 1
    out = np.full((nch, max(1, per.max())), -1, dtype=np.int64)
    per[:] = 0
    for f in range(f_ch.shape[0]):
        out[f_ch[f], per[f_ch[f]]] = f
        per[f_ch[f]] += 1
    return out


def _advance(t: float, p: int, last: int, on: np.ndarray, ids: np.ndarray, f_links: np.ndarray,
             f_members: np.ndarray, f_bound: np.ndarray, cap: np.ndarray, others: np.ndarray, rate: np.ndarray,
             work: np.ndarray, seen: np.ndarray, elist: np.ndarray, fixed: np.ndarray, began: np.ndarray,
             local_end: np.ndarray, arrivals: np.ndarray, narr: int, left_bits: np.ndarray,
             memo: np.ndarray) -> tuple[float, int]:
    """:meth:`sfenv.model.hopshare._Replay.step` up to its handlers: rates, the next event, the bits sent.

    The senders' max-min rates are recomputed only when the set of senders changed since the ``last``
    of them; then the next event's time, and the bits each sender sent until then.  Within one replay
    the rates depend on the set of senders alone (the links, bounds and other jobs' load are fixed), so
    ``memo`` keeps them per set (row: the set as a bit mask; NaN: not yet computed), when it has a row
    for every set (:func:`_rate_memo`); the same floats either way.

    :return: ``(the next event's time, the number of senders)``.
    """
    nids, same, mask = 0, True, 0
    for f in range(on.shape[0]):
        if on[f]:
            same = same and nids < last and ids[nids] == f
            ids[nids] = f
            nids += 1
            mask |= 1 << min(f, 62)  # beyond _MEMO_FLOWS flows the memo has no row for any set
    if nids and not (same and nids == last):  # the rates change only when the set of senders does
        if mask < memo.shape[0] and not np.isnan(memo[mask, 0]):
            for q in range(nids):
                rate[q] = memo[mask, q]
        else:
            _max_min(ids, nids, f_links, f_members, f_bound, cap, others, rate, work, seen, elist, fixed)
            if mask < memo.shape[0]:
                for q in range(nids):
                    memo[mask, q] = rate[q]
    nxt = np.inf
    for k in range(p):
        nxt = min(nxt, began[0, k])
    for ch in range(local_end.shape[0]):
        nxt = min(nxt, local_end[ch])
    for a in range(narr):
        nxt = min(nxt, arrivals[0, a])
    for q in range(nids):
        nxt = min(nxt, t + left_bits[ids[q]] / rate[q])
    if nxt == np.inf:
        raise RuntimeError("replay_shared: the schedule stalled")
    dt = nxt - t
    for q in range(nids):
        left_bits[ids[q]] -= rate[q] * dt
    return nxt, nids


def _rate_memo(nf: int) -> np.ndarray:
    """:func:`_advance`'s memo of max-min rates per set of senders: a NaN row per set of ``nf`` flows.

    Only up to :data:`_MEMO_FLOWS` flows (a row per subset); beyond, one row that no set reaches.
    """
    if nf > _MEMO_FLOWS:
        return np.full((1, 1), np.nan)
    return np.full((1 << nf, max(nf, 1)), np.nan)


def _replay_shared(
    compute: np.ndarray, latency: np.ndarray, transfer: np.ndarray, m: int, kinds: np.ndarray, mbs: np.ndarray,
    f_ch: np.ndarray, f_bits: np.ndarray, f_members: np.ndarray, f_bound: np.ndarray, f_links: np.ndarray,
    cap: np.ndarray, others: np.ndarray, windows: np.ndarray, seek: bool, size: int,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`sfenv.model.hopshare._replay_python` over arrays, the same floats in the same order.

    ``seek``: look for a period of the steady state (1F1B with ``skip_periods``); ``size``: the longest
    state kept (:func:`sfenv.model.hopshare.state_size`).

    :return: ``(end, total transfer time per flow, transfers per flow, co-sending shares, micro-batches
        skipped)`` (:func:`_co_sending`).
    """
    p, nf = compute.shape[0], f_ch.shape[0]
    nch = 2 * (p - 1)
    ch_flows = _channel_flows(f_ch, nch)
    stage = np.zeros((3, p), dtype=np.int64)
    chan = np.zeros((5, nch), dtype=np.int64)
    began = np.full((2, max(p, nch)), np.inf)
    act = np.full((p, m), np.inf)
    act[0, :] = 0.0
    grad = np.full((p, m), np.inf)
    queue = np.zeros((nch, m), dtype=np.int64)
    local_end = np.full(nch, np.inf)
    on = np.zeros(nf, dtype=np.bool_)
    left_bits, total, rate = np.zeros(nf), np.zeros(nf), np.zeros(nf)
    count, ids = np.zeros(nf, dtype=np.int64), np.zeros(nf, dtype=np.int64)
    arrivals = np.zeros((3, nch * m + 1))
    spans, nspan = np.zeros((2, nch, m)), np.zeros(nch, dtype=np.int64)
    work, seen = np.zeros((3, cap.shape[0])), np.zeros(cap.shape[0], dtype=np.bool_)
    elist, fixed = np.zeros(cap.shape[0], dtype=np.int64), np.zeros(nf, dtype=np.bool_)
    hist, hmeta = np.zeros((_PERIODS + 1, size)), np.zeros((_PERIODS + 1, 3))
    hsums = np.zeros((_PERIODS + 1, 2 * nf + nch + 2 * p))
    no_counts = np.zeros((5, p), dtype=np.int64)
    memo = _rate_memo(nf)
    done, narr, t, last, nhist, skipped = 0, 0, 0.0, -1, 0, 0
    while done < m:
        first = stage[0, 0]
        _start_shared(t, compute, transfer, kinds, mbs, stage, act, grad, queue, chan, began, local_end, ch_flows,
                      f_bits, on, left_bits)
        if seek and stage[0, 0] != first and stage[1, 0] == 0 and stage[2, 0] >= windows[0]:
            nhist, q = _seek(t, done, stage, began, chan, queue, local_end, on, left_bits, arrivals, narr, total,
                             count, nspan, hist, hmeta, hsums, nhist, 2, False, no_counts)
            if q:
                seek = False
                t, done, skipped = _skip(t, done, q, (nhist - 1 - q) % (_PERIODS + 1), m, windows, stage, began,
                                         chan, queue, local_end, act, grad, arrivals, narr, total, count, spans,
                                         nspan, hmeta, hsums)
        t, last = _advance(t, p, last, on, ids, f_links, f_members, f_bound, cap, others, rate, work, seen, elist,
                           fixed, began, local_end, arrivals, narr, left_bits, memo)
        done += _end_ops(t, began, stage, grad, queue, chan)
        narr = _end_transfers(t, latency, chan, began, local_end, ch_flows, f_bits, on, left_bits, total, count,
                              spans, nspan, arrivals, narr)
        narr = _arrive(t, arrivals, narr, act, grad, chan)
    return t, total, count, _co_sending(spans, nspan), skipped

def _start_zero_bubble(t: float, compute: np.ndarray, transfer: np.ndarray, kinds: np.ndarray, mbs: np.ndarray,
                       greedy: bool, windows: np.ndarray, stage: np.ndarray, counts: np.ndarray, span: np.ndarray,
                       act: np.ndarray, grad: np.ndarray, queue: np.ndarray, chan: np.ndarray, began: np.ndarray,
                       local_end: np.ndarray, ch_flows: np.ndarray, f_bits: np.ndarray, on: np.ndarray,
                       left_bits: np.ndarray) -> None:
    """:meth:`sfenv.model.hopshare._Replay.start` under a zero-bubble schedule (:meth:`_Replay._zero_bubble_op`).

    ``counts`` rows: input gradients, forwards and weight gradients started, weight gradients done, operations
    done; ``span`` rows: each stage's first start and last end.
    """
    p, m = compute.shape[0], act.shape[1]
    for k in range(p):
        if began[0, k] != np.inf:
            continue
        kind, i = -1, 0
        if not greedy:
            if stage[0, k] < kinds.shape[1]:
                a, j = kinds[k, stage[0, k]], mbs[k, stage[0, k]]
                if not ((a == 0 and act[k, j] > t) or (a == 1 and grad[k, j] > t)):
                    kind, i = a, j
                    stage[0, k] += 1
        else:
            b, f = counts[0, k], counts[1, k]
            if b < m and grad[k, b] <= t:
                counts[0, k] += 1
                kind, i = 1, b
            elif f < m and act[k, f] <= t and f - counts[3, k] < windows[k]:
                counts[1, k] += 1
                kind, i = 0, f
            elif counts[2, k] < b:
                counts[2, k] += 1
                kind, i = 2, counts[2, k] - 1
        if kind >= 0:
            began[0, k] = t + compute[k] / 3.0
            stage[1, k] = kind
            stage[2, k] = i
            span[0, k] = min(span[0, k], t)
    _start_channels(t, transfer, queue, chan, began, local_end, ch_flows, f_bits, on, left_bits)


def _end_zero_bubble_ops(t: float, began: np.ndarray, stage: np.ndarray, counts: np.ndarray, span: np.ndarray,
                         grad: np.ndarray, queue: np.ndarray, chan: np.ndarray) -> None:
    """:meth:`sfenv.model.hopshare._Replay._finish_ops` under a zero-bubble schedule."""
    p = stage.shape[1]
    for k in range(p):
        if began[0, k] <= t:
            began[0, k] = np.inf
            kind, i = stage[1, k], stage[2, k]
            counts[4, k] += 1
            span[1, k] = t
            if kind == 2:
                counts[3, k] += 1
            elif kind == 0 and k == p - 1:
                grad[k, i] = t
            elif kind == 0:
                queue[2 * k, chan[1, 2 * k]] = i
                chan[1, 2 * k] += 1
            elif k > 0:
                c = 2 * (k - 1) + 1
                queue[c, chan[1, c]] = i
                chan[1, c] += 1


def _zero_bubble_periods(q: int, m: int, greedy: bool, periodic: np.ndarray, stage: np.ndarray,
                         counts: np.ndarray) -> int:
    """:meth:`sfenv.model.hopshare._Replay._periods_left` under a zero-bubble schedule.

    ``periodic``: per stage, the hand-crafted order's periodic part, ``[start, end)`` in its two rows.
    """
    p, n = stage.shape[1], m
    if greedy:
        for k in range(p):
            n = min(n, (m - 1 - max(counts[0, k], counts[1, k])) // q)
        return n
    for k in range(p):
        if stage[0, k] - 3 * q < periodic[0, k]:
            return 0
        n = min(n, (periodic[1, k] - 1 - stage[0, k]) // (3 * q))
    return n


def _shift_zero_bubble(t: float, n: int, q: int, greedy: bool, before: int, counts: np.ndarray, span: np.ndarray,
                       hmeta: np.ndarray, hsums: np.ndarray, col: int) -> None:
    """:meth:`sfenv.model.hopshare._Replay._skip_zero_bubble`, called before :func:`_shift` moves ``t``.

    ``col``: the first of ``hsums``' weight-gradient columns.
    """
    p = counts.shape[1]
    shift = n * (t - hmeta[before, 0])
    for k in range(p):
        if greedy:
            for r in range(3):
                counts[r, k] += n * q
        counts[3, k] += n * (counts[3, k] - int(hsums[before, col + k]))
        counts[4, k] += n * (counts[4, k] - int(hsums[before, col + p + k]))
        span[1, k] += shift


def _replay_shared_zero_bubble(
    compute: np.ndarray, latency: np.ndarray, transfer: np.ndarray, m: int, kinds: np.ndarray, mbs: np.ndarray,
    greedy: bool, h2: bool, f_ch: np.ndarray, f_bits: np.ndarray, f_members: np.ndarray, f_bound: np.ndarray,
    f_links: np.ndarray, cap: np.ndarray, others: np.ndarray, windows: np.ndarray, periodic: np.ndarray,
    seek: bool, size: int,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`sfenv.model.hopshare._replay_python` of a zero-bubble schedule over arrays, the same floats in order.

    ``kinds`` and ``mbs``: the hand-crafted order (ignored when ``greedy``); ``h2``: ZB-H2, whose pipeline
    time is its longest stage span; ``periodic``: the hand-crafted orders' periodic parts
    (:func:`_zero_bubble_periods`); ``seek``: look for a period of the steady state; ``size``: the longest
    state kept (:func:`sfenv.model.hopshare.state_size`).

    :return: ``(pipeline time, total transfer time per flow, transfers per flow, co-sending shares,
        micro-batches skipped)``.
    """
    p, nf = compute.shape[0], f_ch.shape[0]
    nch = 2 * (p - 1)
    ch_flows = _channel_flows(f_ch, nch)
    stage = np.zeros((3, p), dtype=np.int64)
    counts = np.zeros((5, p), dtype=np.int64)
    span = np.zeros((2, p))
    span[0, :] = np.inf
    chan = np.zeros((5, nch), dtype=np.int64)
    began = np.full((2, max(p, nch)), np.inf)
    act = np.full((p, m), np.inf)
    act[0, :] = 0.0
    grad = np.full((p, m), np.inf)
    queue = np.zeros((nch, m), dtype=np.int64)
    local_end = np.full(nch, np.inf)
    on = np.zeros(nf, dtype=np.bool_)
    left_bits, total, rate = np.zeros(nf), np.zeros(nf), np.zeros(nf)
    count, ids = np.zeros(nf, dtype=np.int64), np.zeros(nf, dtype=np.int64)
    arrivals = np.zeros((3, nch * m + 1))
    spans, nspan = np.zeros((2, nch, m)), np.zeros(nch, dtype=np.int64)
    work, seen = np.zeros((3, cap.shape[0])), np.zeros(cap.shape[0], dtype=np.bool_)
    elist, fixed = np.zeros(cap.shape[0], dtype=np.int64), np.zeros(nf, dtype=np.bool_)
    hist, hmeta = np.zeros((_PERIODS + 1, size)), np.zeros((_PERIODS + 1, 3))
    hsums = np.zeros((_PERIODS + 1, 2 * nf + nch + 2 * p))
    memo = _rate_memo(nf)
    narr, t, last, nhist, skipped = 0, 0.0, -1, 0, 0
    while _least(counts, 4) < 3 * m:
        idle = began[0, 0] == np.inf
        _start_zero_bubble(t, compute, transfer, kinds, mbs, greedy, windows, stage, counts, span, act, grad, queue,
                           chan, began, local_end, ch_flows, f_bits, on, left_bits)
        if seek and idle and began[0, 0] != np.inf and stage[1, 0] == 0 and stage[2, 0] >= windows[0]:
            nhist, q = _seek(t, 0, stage, began, chan, queue, local_end, on, left_bits, arrivals, narr, total,
                             count, nspan, hist, hmeta, hsums, nhist, 3, greedy, counts)
            n = _zero_bubble_periods(q, m, greedy, periodic, stage, counts) if q else 0
            if n >= 1:
                seek = False
                before = (nhist - 1 - q) % (_PERIODS + 1)
                _shift_zero_bubble(t, n, q, greedy, before, counts, span, hmeta, hsums, 2 * nf + nch)
                t, _, skipped = _shift(t, 0, n, q, 0 if greedy else 3, before, m, stage, began, chan, queue,
                                       local_end, act, grad, arrivals, narr, total, count, spans, nspan, hmeta, hsums)
        t, last = _advance(t, p, last, on, ids, f_links, f_members, f_bound, cap, others, rate, work, seen, elist,
                           fixed, began, local_end, arrivals, narr, left_bits, memo)
        _end_zero_bubble_ops(t, began, stage, counts, span, grad, queue, chan)
        narr = _end_transfers(t, latency, chan, began, local_end, ch_flows, f_bits, on, left_bits, total, count,
                              spans, nspan, arrivals, narr)
        narr = _arrive(t, arrivals, narr, act, grad, chan)
    end = t
    if h2:
        end = 0.0
        for k in range(p):
            end = max(end, span[1, k] - span[0, k])
    return end, total, count, _co_sending(spans, nspan), skipped


def warm_up() -> None:
    """Load (or compile) every kernel for the argument types :mod:`sfenv.model.pipeline` passes, on tiny inputs."""
    c, hops, w = np.array([1.0, 2.0]), np.array([0.1]), np.array([2, 1], dtype=np.int64)
    replay_zero_bubble(c, hops, hops, 4, w)
    rows = sweep_plan(False, 4, w)
    rows.setflags(write=False)  # pipeline._sweep_plan_rows hands out read-only tables
    sweep_fixed_order(c, hops, hops, 4, rows)
    hop_overlap(c, hops, hops, hops, 4, rows, np.ones((2, 2), dtype=np.bool_))
    rows = zero_bubble_rows(4, w, w - 1)
    rows.setflags(write=False)  # as pipeline._zero_bubble_row_array hands them out
    sweep_zero_bubble(c, hops, hops, 4, rows)
    kinds = np.array([[0, 0, 1, 1], [0, 1, 0, 1]], dtype=np.int64)
    mbs = np.array([[0, 1, 0, 1], [0, 0, 1, 1]], dtype=np.int64)
    kinds.setflags(write=False)  # as hopshare._order_arrays hands them out
    mbs.setflags(write=False)
    one = np.ones(1)
    replay_shared(c, hops, hops, 2, kinds, mbs, np.zeros(1, dtype=np.int64), one, one, one,
                  np.zeros((1, 1), dtype=np.int64), np.array([1.0, 1.0]), np.zeros(2), w, True, 64)
    zb = np.array([[0, 0, 1, 2, 1, 2], [0, 1, 2, 0, 1, 2]], dtype=np.int64)
    zb_mbs = np.array([[0, 1, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1]], dtype=np.int64)
    zb.setflags(write=False)
    zb_mbs.setflags(write=False)
    replay_shared_zero_bubble(c, hops, hops, 2, zb, zb_mbs, False, False, np.zeros(1, dtype=np.int64), one, one, one,
                              np.zeros((1, 1), dtype=np.int64), np.array([1.0, 1.0]), np.zeros(2), w,
                              np.zeros((2, 2), dtype=np.int64), True, 64)


#: the kernels :mod:`sfenv.model.pipeline` calls: numba's compiled dispatchers, or the Python functions above
hop_overlap: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray], np.ndarray]
replay_zero_bubble: Callable[[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray],
                             tuple[float, float, np.ndarray, bool]]
sweep_fixed_order: Callable[[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray], float]
replay_shared: Callable[..., tuple[float, np.ndarray, np.ndarray, np.ndarray, int]]
replay_shared_zero_bubble: Callable[..., tuple[float, np.ndarray, np.ndarray, np.ndarray, int]]
sweep_plan: Callable[[bool, int, np.ndarray], np.ndarray]
sweep_zero_bubble: Callable[[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray], tuple[float, float]]
zero_bubble_rows: Callable[[int, np.ndarray, np.ndarray], np.ndarray]
if AVAILABLE:
    # The helpers the replays call at every event allocate nothing and keep no array past their return (their
    # caller holds every array it hands them), so they are compiled without numba's reference counting
    # (``_nrt=False``, a numba target option): otherwise each call increments and decrements, atomically, the
    # count of every array it is handed, which took half of the zero-bubble replay's time (docs/benchmarks.md).
    # A helper that allocated would fail to compile.
    _no_refcount: dict[str, Any] = {"_nrt": False}  # numba's target option, not in its type stubs
    _bare = njit(cache=True, nogil=True, **_no_refcount)
    _heap_push = _bare(_heap_push)
    _heap_pop = _bare(_heap_pop)
    _next_op = _bare(_next_op)
    _channels = njit(cache=True, nogil=True)(_channels)
    _sweep_start = njit(cache=True, nogil=True)(_sweep_start)
    _zero_bubble_orders = njit(cache=True, nogil=True)(_zero_bubble_orders)
    _links_met = _bare(_links_met)
    _tightest = _bare(_tightest)
    _crosses = _bare(_crosses)
    _fix = _bare(_fix)
    _max_min = _bare(_max_min)
    _start_channels = _bare(_start_channels)
    _advance = _bare(_advance)
    _rate_memo = njit(cache=True, nogil=True)(_rate_memo)
    _least = _bare(_least)
    _start_shared = _bare(_start_shared)
    _start_zero_bubble = _bare(_start_zero_bubble)
    _end_zero_bubble_ops = _bare(_end_zero_bubble_ops)
    _end_ops = _bare(_end_ops)
    _end_transfers = _bare(_end_transfers)
    _arrive = _bare(_arrive)
    _state = _bare(_state)
    _state_tail = _bare(_state_tail)
    _same_state = _bare(_same_state)
    _seek = njit(cache=True, nogil=True)(_seek)
    _skip = _bare(_skip)
    _shift = _bare(_shift)
    _zero_bubble_periods = _bare(_zero_bubble_periods)
    _shift_zero_bubble = _bare(_shift_zero_bubble)
    _co_sending = njit(cache=True, nogil=True)(_co_sending)
    _channel_flows = njit(cache=True, nogil=True)(_channel_flows)
    hop_overlap = njit(cache=True, nogil=True)(_hop_overlap)
    replay_shared = njit(cache=True, nogil=True)(_replay_shared)
    replay_shared_zero_bubble = njit(cache=True, nogil=True)(_replay_shared_zero_bubble)
    replay_zero_bubble = njit(cache=True, nogil=True)(_replay_zero_bubble)
    sweep_fixed_order = njit(cache=True, nogil=True)(_sweep_fixed_order)
    sweep_plan = njit(cache=True, nogil=True)(_sweep_plan)
    sweep_zero_bubble = njit(cache=True, nogil=True)(_sweep_zero_bubble)
    zero_bubble_rows = njit(cache=True, nogil=True)(_zero_bubble_rows)
else:  # pragma: no cover - the Python loops of sfenv.model.pipeline run instead
    hop_overlap = _hop_overlap
    replay_shared = _replay_shared
    replay_shared_zero_bubble = _replay_shared_zero_bubble
    replay_zero_bubble = _replay_zero_bubble
    sweep_fixed_order = _sweep_fixed_order
    sweep_plan = _sweep_plan
    sweep_zero_bubble = _sweep_zero_bubble
    zero_bubble_rows = _zero_bubble_rows
