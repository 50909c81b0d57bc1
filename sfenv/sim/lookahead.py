"""Look-ahead support: a simulator's independent copy, and a future redrawn on it (parts of :class:`Simulator`)."""

from __future__ import annotations

import copy
import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sfenv.sim.events import Arrival, EventKind
from sfenv.sim.state import JobState
from sfenv.world.workload import JobSpec

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["fork", "resample_future"]


def fork(sim: Simulator) -> Simulator:
    """An independent copy of the current state, for look-ahead (what-if rollouts).

    Stepping the copy never changes ``sim``.  Immutable parts (topology, prices, settings, job
    specs, plans and their predicted performance, egress prices, the queued events' entries) and the
    single-region evaluation memo and the egress memo (valid in any state) are shared, not copied;
    the WAN memos (evaluations, routed plans) start empty.  Job states are copied field by field
    (:func:`_job_copy`), the rest by ``copy.deepcopy``.  The copy draws from a copy of the random
    generator, so it sees the same link changes.
    """
    links = sim.links
    memo: dict[int, object] = {id(sim.topo): sim.topo, id(sim.prices): sim.prices, id(sim.config): sim.config,
                               id(sim.params): sim.params, id(links.memo_local): links.memo_local,
                               id(links.memo_wan): {}, id(links.memo_routes): {}, id(sim.replanner): sim.replanner,
                               id(sim.billing.egress_memo): sim.billing.egress_memo}
    if sim.billing.egress_usd_per_byte is not None:
        memo[id(sim.billing.egress_usd_per_byte)] = sim.billing.egress_usd_per_byte
    for shared in (sim.carbon, sim.carbon_forecaster):  # immutable series; forecasts are a pure function of the hour
        if shared is not None:
            memo[id(shared)] = shared
    for js in sim.jobs:
        memo[id(js)] = _job_copy(js)
        for obj in (js.spec, js.plan, js.perf, js.resume_perf):  # also held by the links' entries, shared there too
            if obj is not None:
                memo[id(obj)] = obj
    memo[id(sim._events)] = list(sim._events)  # its entries are tuples of numbers and immutable named tuples
    twin = copy.deepcopy(sim, memo)
    twin.links.memo_wan_state = b""
    twin.gpus.forget()  # its free-GPU array is a (writable) copy: rebuilt read-only on first use
    return twin


def _job_copy(js: JobState) -> JobState:
    """What ``copy.deepcopy`` gives of a job's state in :func:`fork`, at a tenth of its cost.

    Its spec, plans and predicted performance are immutable and shared; its GPUs, flows and closed
    runs are new containers of immutable items; its price and carbon integrals and power per zone
    are copied (the simulator replaces them rather than writing into them, but a copy is what deepcopy
    gives).  The other fields are numbers and strings.
    """
    twin = object.__new__(JobState)  # a plain dataclass: its fields are its __dict__ (what copy.copy copies)
    twin.__dict__.update(js.__dict__)
    twin.flows = dict(js.flows)
    twin.held = dict(js.held)
    twin.segments = list(js.segments)
    for name in ("power_zone", "f_last", "g_last"):
        array = getattr(js, name)
        if array is not None:
            setattr(twin, name, array.copy())
    return twin


def resample_future(sim: Simulator, jobs: Sequence[JobSpec], rng: np.random.Generator | None = None) -> None:
    """Replace what has not happened yet by a draw: for look-ahead that knows only the present.

    The jobs that have not arrived become ``jobs`` (one per such job, in arrival order, none
    arriving before now; their ids are reassigned); with ``rng``, link changes not yet drawn come
    from it instead of the episode's generator.  Use it on a :func:`fork`: the fork then plays one
    possible future rather than the episode's own.  Scheduled outages are kept.

    :raises ValueError: if ``jobs`` does not hold one spec per pending job, or one arrives in the past.
    """
    pending = [js.spec.job_id for js in sim.jobs if js.status == "pending"]
    if len(jobs) != len(pending):
        raise ValueError(f"{len(pending)} jobs have not arrived; got {len(jobs)} to replace them")
    if any(j.arrival < sim.time for j in jobs):
        raise ValueError(f"a replacement job arrives before now ({sim.time:.1f} s)")
    gone = set(pending)
    queue = sim._events  # the engine's own heap: this module is one of its parts
    queue[:] = [ev for ev in queue if not (isinstance(ev[3], Arrival) and ev[3].job_id in gone)]
    heapq.heapify(queue)
    for jid, spec in zip(pending, sorted(jobs, key=lambda j: j.arrival)):
        sim.jobs[jid].spec = spec.with_id(jid)
        sim.push(spec.arrival, EventKind.ARRIVAL, Arrival(jid))
    if rng is not None:
        sim.rng = rng
