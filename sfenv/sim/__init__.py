"""The simulator layer: the discrete-event engine, its parts, the read-only view and episode assembly.

Layer ``sim`` (see docs/architecture.md): imports ``world``, ``model`` and :mod:`sfenv.scenario`
below it, never ``env``, ``runs``, agents or ``app``.  What agents and tests use is re-exported here:

- :class:`Simulator` (:mod:`sfenv.sim.engine`), with its parts :class:`~sfenv.sim.gpus.GpuPool`,
  :class:`~sfenv.sim.queue.WaitingQueue`, :class:`~sfenv.sim.links.LinkState` and
  :class:`~sfenv.sim.billing.Billing`, and re-planning in :mod:`sfenv.sim.replan`;
- typed events and their handlers (:mod:`sfenv.sim.events`, :mod:`sfenv.sim.handlers`);
- :class:`SimView` and :class:`RunningInfo` (:mod:`sfenv.sim.view`), what agents read;
- :func:`make_simulator` (:mod:`sfenv.sim.episode`), the one function that builds an episode;
- :class:`EpisodeReport` and :class:`JobRecord` (:mod:`sfenv.sim.metrics`).
"""

from sfenv.sim.engine import Simulator
from sfenv.sim.episode import draw_outages, evaluation_cache_for, link_dynamics_for, make_simulator, sim_config_for
from sfenv.sim.events import EventKind, LinkDynamics, Outage
from sfenv.sim.metrics import EpisodeReport, JobRecord
from sfenv.sim.state import EvaluationCache, InvalidDecision, JobState, SimConfig
from sfenv.sim.view import RunningInfo, SimView

__all__ = [
    "EpisodeReport",
    "EvaluationCache",
    "EventKind",
    "InvalidDecision",
    "JobRecord",
    "JobState",
    "LinkDynamics",
    "Outage",
    "RunningInfo",
    "SimConfig",
    "SimView",
    "Simulator",
    "draw_outages",
    "evaluation_cache_for",
    "link_dynamics_for",
    "make_simulator",
    "sim_config_for",
]
