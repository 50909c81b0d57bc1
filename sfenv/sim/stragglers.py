"""Stragglers: slow GPUs that slow the pipeline stage they serve, appearing and clearing as seeded events.

The model (docs/model.md, "Stragglers"): in each region, straggler episodes start as a Poisson
process of rate ``rate_per_gpu_per_day x the region's GPUs`` and last an exponential time
(:func:`sfenv.sim.episode.draw_stragglers`, drawn up front from their own random stream).  An
episode falls on one GPU of the region (:attr:`sfenv.sim.events.Straggler.where`): on an idle GPU it
does nothing (it is not remembered for a later job); on a running job's GPU it multiplies the compute
time of the stage that GPU serves by the slowdown, as a stage runs at its slowest GPU (synchronous
training: Lin et al., OSDI 2025; Wu et al., FALCON, 2024), until it clears.  The job's rates are
re-evaluated (:func:`sfenv.model.perf.evaluate_plan`'s ``stage_slowdown``; with the jobs sharing its
links when it spans regions) and re-planning agents are called, as after a link change.

Assumptions: a job in a re-plan pause is not hit (it is being re-partitioned); a re-plan or a stop
clears the job's stragglers (the platform knows the slow GPU, as Megatron's and NVIDIA's straggler
detection report it per rank, and a re-partition leaves it out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sfenv.sim.events import EventKind, Straggler, StragglerEnd
from sfenv.sim.state import JobState

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["Stragglers", "on_straggler", "on_straggler_end"]


class Stragglers:
    """The stragglers on running jobs: per job, each straggler's token, stage and slowdown."""

    def __init__(self) -> None:
        #: job id -> {token: (stage, slowdown)}
        self.on_job: dict[int, dict[int, tuple[int, float]]] = {}
        #: straggler episodes that hit a running job so far
        self.hits = 0
        self._next = 0

    def add(self, job_id: int, stage: int, slowdown: float) -> int:
        """Record a straggler on ``job_id``'s ``stage``; returns its token."""
        token = self._next
        self._next += 1
        self.on_job.setdefault(job_id, {})[token] = (stage, slowdown)
        self.hits += 1
        return token

    def factors(self, job_id: int, num_stages: int) -> tuple[float, ...] | None:
        """Each stage's slowdown (its slowest GPU's: the largest factor on it), or None when none is slowed."""
        own = self.on_job.get(job_id)
        if not own:
            return None
        out = [1.0] * num_stages
        for stage, f in own.values():
            out[stage] = max(out[stage], f)
        return tuple(out)


def _gpu_owner(sim: Simulator, region: int, where: float) -> tuple[JobState, int] | None:
    """The running job holding GPU ``floor(where x GPUs)`` of ``region`` and the stage it serves (None: idle)."""
    idx = int(where * int(sim.topo.gpu_counts[region]))
    for jid in sorted(sim.running):
        js = sim.jobs[jid]
        held = js.held.get(region, 0)
        if idx >= held:
            idx -= held
            continue
        if js.paused or js.plan is None:
            return None  # being re-partitioned: not hit
        for k, st in enumerate(js.plan.stages):
            for reg, n in st.placement:
                if reg == region:
                    if idx < n * st.tp:
                        return js, k
                    idx -= n * st.tp
        return None  # pragma: no cover - a running job's held GPUs are its plan's
    return None


def apply(sim: Simulator, js: JobState) -> None:
    """Re-evaluate running job ``js`` with its stragglers' slowdowns (and the jobs sharing its links)."""
    assert js.plan is not None
    jid = js.spec.job_id
    wan = sim.links
    factors = sim.stragglers.factors(jid, len(js.plan.stages))
    if factors is None:
        wan.slowdown.pop(jid, None)
    else:
        wan.slowdown[jid] = factors
    if jid in wan.jobs:
        sim.refresh({int(e) for e in wan.jobs[jid].links})
    else:
        perf = wan.evaluate_running(js.plan, js.spec, jid)
        sim.billing.accrue(js, sim.time)
        sim.set_rates(js, perf)
    sim.links_changed = sim.replanner is not None


def forget(sim: Simulator, job_id: int) -> None:
    """Drop ``job_id``'s stragglers (it stops or re-plans; its rates are set by the caller)."""
    sim.stragglers.on_job.pop(job_id, None)
    sim.links.slowdown.pop(job_id, None)


def on_straggler(sim: Simulator, ev: Straggler) -> None:
    """A GPU of the region turns slow: the job and stage it serves slow down until it clears."""
    hit = _gpu_owner(sim, ev.region, ev.where)
    if hit is None:
        return
    js, stage = hit
    token = sim.stragglers.add(js.spec.job_id, stage, ev.slowdown)
    sim.push(sim.time + ev.duration, EventKind.STRAGGLER_END, StragglerEnd(js.spec.job_id, token))
    apply(sim, js)


def on_straggler_end(sim: Simulator, ev: StragglerEnd) -> None:
    """A straggler clears: its job runs at the rates of its remaining stragglers (if it still has this one)."""
    own = sim.stragglers.on_job.get(ev.job_id)
    if not own or ev.token not in own:
        return  # the job stopped or re-planned since
    del own[ev.token]
    js = sim.jobs[ev.job_id]
    if js.status == "running" and not js.paused:
        apply(sim, js)
