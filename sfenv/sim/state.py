"""The simulator's settings and the mutable state of one job (shared by the engine and its parts)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sfenv.errors import did_you_mean
from sfenv.model.perf import PerfParams, Plan, PlanPerf
from sfenv.model.routing import ROUTING_MODES
from sfenv.sim.metrics import JobRecord
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = ["EvaluationCache", "InvalidDecision", "JobState", "Segment", "SimConfig"]

#: a closed run of a job: (start, end, ((region, GPUs held), ...))
Segment = tuple[float, float, tuple[tuple[int, int], ...]]


class InvalidDecision(ValueError):
    """A decision the simulator cannot carry out (unknown job, busy GPUs, infeasible plan)."""


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings.

    :param horizon_s: the episode ends at this time; unfinished jobs are reported.
    :param checkpoint_interval_s: jobs checkpoint this often (simulated run time); an outage
        loses at most this much work.
    :param perf: performance model constants.
    :param replan_restart_s: fixed part of a re-plan pause, s (stop at an iteration boundary,
        rebuild communicators and the pipeline, re-shard inside regions; our assumption, of the
        order of a framework restart from a checkpoint held in memory).
    :param replan_state_bytes_per_param: training state moved per parameter when a re-plan moves
        a layer to another region, bytes (2 bf16 weights + 12 fp32 master weights and Adam
        moments; gradients are not needed between iterations).
    :param routing: ``"static"`` (each transfer on :meth:`Topology.route_for`'s route), ``"load"``
        (routes chosen at the current rates when a job starts or re-plans, then pinned:
        :mod:`sfenv.model.routing`) or ``"adaptive"`` (as ``load``, and running jobs move to better
        routes whenever the WAN changes: :mod:`sfenv.sim.reroute`).
    """

    horizon_s: float = 14 * 86400.0
    checkpoint_interval_s: float = 1800.0
    perf: PerfParams = field(default_factory=PerfParams)
    replan_restart_s: float = 60.0
    replan_state_bytes_per_param: float = 14.0
    routing: str = "static"

    def __post_init__(self) -> None:
        if self.routing not in ROUTING_MODES:
            raise ValueError(f"routing: unknown routing {self.routing!r}{did_you_mean(self.routing, ROUTING_MODES)}; "
                             f"expected one of {list(ROUTING_MODES)}")


@dataclass
class JobState:
    """Mutable state of one job inside the simulator."""

    spec: JobSpec
    status: str = "pending"  # pending -> waiting -> running -> done (running -> waiting on outage)
    plan: Plan | None = None
    perf: PlanPerf | None = None
    flows: dict[int, int] = field(default_factory=dict)
    progress: float = 0.0
    checkpoint_iters: float = 1.0
    first_start: float = math.nan
    start: float = math.nan
    finish: float = math.nan
    last_update: float = 0.0
    energy_j: float = 0.0
    cost_usd: float = 0.0  # electricity
    wan_bytes: float = 0.0
    egress_usd: float = 0.0  # bytes sent between regions, billed (sfenv.sim.billing)
    egress_usd_per_iter: float = 0.0  # of the current plan (0 while no plan runs)
    preemptions: int = 0
    version: int = 0
    max_gpus_used: int = 0
    max_regions_used: int = 0
    segments: list[Segment] = field(default_factory=list)  # closed runs
    power_zone: np.ndarray | None = None  # watts per price zone
    f_last: np.ndarray | None = None  # price integral F(last_update) per zone
    carbon_kg: float = 0.0  # operational kgCO2e (sfenv.sim.billing)
    g_last: np.ndarray | None = None  # carbon integral G(last_update) per zone
    held: dict[int, int] = field(default_factory=dict)  # GPUs held per region (plan's, or more in a re-plan pause)
    resume_at: float = math.nan  # end of a re-plan pause (NaN when not paused)
    resume_perf: PlanPerf | None = None  # the new plan's predicted performance at the switch
    replans: int = 0
    replan_pause_s: float = 0.0  # total time spent in re-plan pauses

    @property
    def paused(self) -> bool:
        """True during a re-plan pause."""
        return not math.isnan(self.resume_at)

    def open_segment(self, now: float) -> Segment:
        """The run since :attr:`start` up to ``now``, with the GPUs held now."""
        return (self.start, now, tuple(sorted(self.held.items())))

    def record(self, now: float) -> JobRecord:
        """The job's record at time ``now`` (an open run counts up to ``now``; unfinished: NaN finish)."""
        segments = tuple(self.segments)
        if self.status == "running" and self.plan is not None:  # the open run, up to now
            segments += (self.open_segment(now),)
        return JobRecord(
            job_id=self.spec.job_id,
            model=self.spec.model.name,
            arrival=self.spec.arrival,
            first_start=self.first_start,
            finish=self.finish,
            iterations=self.spec.iterations,
            gpus=self.max_gpus_used,
            regions=self.max_regions_used,
            energy_j=self.energy_j,
            cost_usd=self.cost_usd,
            wan_bytes=self.wan_bytes,
            preemptions=self.preemptions,
            tokens=self.progress * self.spec.tokens_per_iteration,
            segments=segments,
            egress_usd=self.egress_usd,
            carbon_kg=self.carbon_kg,
        )


class EvaluationCache:
    """Memoised evaluations of single-region plans, shareable between episodes.

    Such a plan's performance depends only on the plan, the job's shape, the topology and the
    performance parameters, never on the WAN state, so one cache serves every simulator built on
    the same ``topo`` and ``params`` (the simulator checks).
    """

    def __init__(self, topo: Topology, params: PerfParams):
        self.topo = topo
        self.params = params
        self.local: dict[tuple[object, object], PlanPerf] = {}
