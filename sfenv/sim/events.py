"""Typed events of the simulator, in their processing order at equal times, and the random processes that make them.

Every event on the queue is ``(time, kind, sequence number, payload)``: at equal times events run in
:class:`EventKind` order, then in the order they were pushed.  Each kind has one payload type and one
handler in the engine's table (:data:`sfenv.sim.engine.HANDLERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

__all__ = [
    "Arrival",
    "BandwidthChange",
    "Completion",
    "Event",
    "EventKind",
    "LinkDynamics",
    "Outage",
    "Recovery",
    "Resume",
    "Straggler",
    "StragglerEnd",
]


class EventKind(IntEnum):
    """Event kinds; at equal times they are processed in this order (completions first, re-plan resumes last)."""

    COMPLETE = 0
    RECOVER = 1
    OUTAGE = 2
    BANDWIDTH = 3
    ARRIVAL = 4
    RESUME = 5
    STRAGGLER = 6
    STRAGGLER_END = 7


class Arrival(NamedTuple):
    """Job ``job_id`` arrives and joins the queue."""

    job_id: int


class Completion(NamedTuple):
    """Job ``job_id`` finishes, if it still runs the plan of rate ``version`` (else the event is stale)."""

    job_id: int
    version: int


class BandwidthChange(NamedTuple):
    """Link ``link``'s capacity factor becomes ``factor`` (:class:`LinkDynamics`)."""

    link: int
    factor: float


class Recovery(NamedTuple):
    """Region ``region`` comes back from an outage."""

    region: int


class Resume(NamedTuple):
    """Job ``job_id``'s re-plan pause ends, if its rate ``version`` is still the pause's."""

    job_id: int
    version: int


class StragglerEnd(NamedTuple):
    """Straggler ``token`` on job ``job_id`` clears (if the job still has it: a re-plan or a stop clears it first)."""

    job_id: int
    token: int


@dataclass(frozen=True)
class Straggler:
    """One GPU of region ``region`` is slow by ``slowdown`` during [start, start + duration) (seconds).

    ``where`` in [0, 1) picks the GPU: number ``floor(where x region's GPUs)`` in the order of the
    running jobs (by id), each job's GPUs there in its stages' order; past the busy ones it is idle.
    """

    region: int
    start: float
    duration: float
    where: float
    slowdown: float


@dataclass(frozen=True)
class Outage:
    """Region ``region`` is down during [start, start + duration) (seconds)."""

    region: int
    start: float
    duration: float


#: any event payload
Event = Arrival | Completion | BandwidthChange | Outage | Recovery | Resume | Straggler | StragglerEnd


@dataclass(frozen=True)
class LinkDynamics:
    """A two-state Markov bandwidth factor on some links.

    Each dynamic link alternates between ``1.0`` and ``low_factor`` (e.g. 0.3); sojourn times are
    exponential with means ``mean_good_s`` and ``mean_bad_s``.
    """

    links: tuple[int, ...]
    low_factor: float = 0.3
    mean_good_s: float = 4 * 3600.0
    mean_bad_s: float = 3600.0
