"""What each event does to the simulator: one handler per :class:`~sfenv.sim.events.EventKind`, in :data:`HANDLERS`.

The engine pops ``(time, kind, seq, event)`` and calls ``HANDLERS[kind](sim, event)`` (the handler
table of spark-sched-sim and Vidur).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sfenv.sim.replan as _replan
import sfenv.sim.stragglers as _stragglers
from sfenv.sim.events import Arrival, BandwidthChange, Completion, EventKind, Outage, Recovery, Resume
from sfenv.sim.state import JobState

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["HANDLERS", "finish", "release"]


def on_arrival(sim: Simulator, ev: Arrival) -> None:
    """The job joins the queue."""
    js = sim.jobs[ev.job_id]
    js.status = "waiting"
    sim.in_system += 1
    sim.queue.add(js.spec)


def on_completion(sim: Simulator, ev: Completion) -> None:
    """The job finishes, unless its rates changed since the event was pushed."""
    js = sim.jobs[ev.job_id]
    if js.status == "running" and js.version == ev.version:
        finish(sim, js)


def on_bandwidth(sim: Simulator, ev: BandwidthChange) -> None:
    """A link's capacity factor flips; the next flip is drawn; the jobs on the link get new rates."""
    sim.links.factor[ev.link] = ev.factor
    dyn = sim.dynamics
    assert dyn is not None and sim.rng is not None
    bad = ev.factor < 1.0
    mean = dyn.mean_bad_s if bad else dyn.mean_good_s
    nxt = 1.0 if bad else dyn.low_factor
    sim.push(sim.time + sim.rng.exponential(mean), EventKind.BANDWIDTH, BandwidthChange(ev.link, nxt))
    sim.refresh({2 * ev.link, 2 * ev.link + 1})  # both directions of the link
    sim.links_changed = sim.replanner is not None


def on_outage(sim: Simulator, o: Outage) -> None:
    """The region goes down: every job with GPUs there falls back to its last checkpoint and waits again."""
    r = o.region
    sim.gpus.down[r] = True
    sim.push(sim.time + o.duration, EventKind.RECOVER, Recovery(r))
    for jid in sorted(sim.running):
        js = sim.jobs[jid]
        if r not in js.held:
            continue
        sim.billing.accrue(js, sim.time)
        js.progress = math.floor(js.progress / js.checkpoint_iters) * js.checkpoint_iters
        js.preemptions += 1
        js.status = "waiting"
        release(sim, js)
        js.plan = None
        sim.queue.add(js.spec)


def on_recovery(sim: Simulator, ev: Recovery) -> None:
    """The region is back."""
    sim.gpus.down[ev.region] = False


def on_resume(sim: Simulator, ev: Resume) -> None:
    """A re-plan pause ends (:func:`sfenv.sim.replan.resume`), unless the job was preempted meanwhile."""
    js = sim.jobs[ev.job_id]
    if js.status == "running" and js.version == ev.version:
        _replan.resume(sim, js)


def release(sim: Simulator, js: JobState) -> None:
    """A running job stops: its GPUs, flows and rates go; the jobs that shared its links get new rates."""
    assert js.plan is not None
    js.segments.append(js.open_segment(sim.time))
    sim.gpus.accrue_busy(sim.time)
    sim.gpus.take({r: -n for r, n in js.held.items()})
    js.held = {}
    js.resume_at = math.nan
    js.resume_perf = None
    _stragglers.forget(sim, js.spec.job_id)
    freed = sim.links.stop(js.spec.job_id)
    sim.running.discard(js.spec.job_id)
    js.flows = {}
    sim.billing.fold(sim.time)
    sim.billing.unrate(js)
    js.perf = None
    js.power_zone = None
    js.version += 1
    if freed:
        sim.refresh(freed)


def finish(sim: Simulator, js: JobState) -> None:
    """A job completes all its iterations now."""
    sim.billing.accrue(js, sim.time)
    js.progress = float(js.spec.iterations)
    js.status = "done"
    js.finish = sim.time
    sim.finished_count += 1
    sim.in_system -= 1
    release(sim, js)


#: the handler of each event kind: ``HANDLERS[kind](sim, event)``
HANDLERS: dict[EventKind, Callable[[Simulator, Any], None]] = {
    EventKind.ARRIVAL: on_arrival,
    EventKind.COMPLETE: on_completion,
    EventKind.BANDWIDTH: on_bandwidth,
    EventKind.OUTAGE: on_outage,
    EventKind.RECOVER: on_recovery,
    EventKind.RESUME: on_resume,
    EventKind.STRAGGLER: _stragglers.on_straggler,
    EventKind.STRAGGLER_END: _stragglers.on_straggler_end,
}
