"""Per-job records and the episode report.

**Censoring.**  A job still unfinished when the episode ends has no completion time; leaving it
out would let a scheduler that starves a job look fast.  Every JCT mean and percentile here
counts such a job with a *censored* JCT: the episode's end minus its arrival (a lower bound on
its true JCT).  The episode's end is ``makespan_s``: the horizon when the simulator stops with
work left, or an earlier time when a caller stops the episode early (an env truncation).  Jobs
that had not arrived by then are left out of JCT and wait statistics (they never entered the
system); all unfinished jobs, arrived or not, are counted in ``unfinished``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["ADDED_REPORT_FIELDS", "EpisodeReport", "JobRecord", "Segment"]

#: :class:`EpisodeReport` fields added after results files were first written (egress billing): a row
#: without them comes from an older sfenv, and readers take them as unknown (NaN), not as an error
ADDED_REPORT_FIELDS: tuple[str, ...] = ("egress_usd", "total_cost_usd", "carbon_kg", "embodied_kg")

#: one run of a job: (start s, end s, ((region, GPUs), ...)); a job has one per start (preemptions add runs)
Segment = tuple[float, float, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job.  Times in simulated seconds; ``finish`` is NaN if unfinished.

    ``segments`` holds the job's runs, each ``(start, end, ((region, gpus), ...))``; a run still
    going when the record was taken ends at that time.  ``cost_usd`` is the job's electricity
    cost, ``egress_usd`` what its bytes between regions were billed (pipeline activations and
    gradients, data-parallel syncs across regions, state moved by re-plans; :mod:`sfenv.sim.billing`),
    ``total_cost_usd`` their sum.  ``wan_bytes`` counts the training traffic between regions
    (each byte once, whatever its route; state moves not included).
    """

    job_id: int
    model: str
    arrival: float
    first_start: float
    finish: float
    iterations: int
    gpus: int
    regions: int
    energy_j: float
    cost_usd: float
    wan_bytes: float
    preemptions: int
    tokens: float
    segments: tuple[Segment, ...] = ()
    egress_usd: float = 0.0
    #: operational kgCO2e: the job's power integrated against the hourly carbon intensity of its
    #: zones (the scenario's ``carbon.signal``), as ``cost_usd`` integrates it against prices
    carbon_kg: float = 0.0

    def gpu_hours(self) -> float:
        """GPU-hours the job held: its runs' GPUs x their lengths (re-plan pauses included)."""
        return sum((end - start) * sum(n for _, n in held) for start, end, held in self.segments) / 3600.0

    @property
    def total_cost_usd(self) -> float:
        """The job's whole bill: electricity (``cost_usd``) plus egress (``egress_usd``), USD."""
        return self.cost_usd + self.egress_usd

    @property
    def finished(self) -> bool:
        """True if the job completed."""
        return not math.isnan(self.finish)

    @property
    def jct(self) -> float:
        """Job completion time, finish - arrival (NaN if unfinished)."""
        return self.finish - self.arrival

    @property
    def wait(self) -> float:
        """Time from arrival to first start (NaN if never started)."""
        return self.first_start - self.arrival

    def arrived_by(self, end: float) -> bool:
        """True if the job had entered the system before ``end`` (finished jobs always had)."""
        return self.finished or self.arrival < end

    def censored_jct(self, end: float) -> float:
        """JCT, or ``end - arrival`` for a job unfinished at ``end`` (a lower bound on its JCT).

        :param end: the episode's end (its ``makespan_s``).
        """
        return self.jct if self.finished else end - self.arrival

    def censored_wait(self, end: float) -> float:
        """Wait before the first start, or ``end - arrival`` for a job never started by ``end``."""
        return self.wait if not math.isnan(self.first_start) else end - self.arrival

    def throughput(self, end: float) -> float:
        """Tokens per second of run time: tokens done / (finish or ``end`` - first start).

        Counts the partial work of an unfinished job; 0 for a job that never started (it got no
        service).  Run time includes any downtime after a preemption.
        """
        if math.isnan(self.first_start):
            return 0.0
        stop = self.finish if self.finished else end
        return self.tokens / (stop - self.first_start) if stop > self.first_start else math.nan


@dataclass(frozen=True)
class EpisodeReport:
    """Aggregate metrics of one episode (all simulated quantities, never wall-clock).

    JCT and wait statistics count unfinished jobs with censored values (see the module
    docstring): ``mean_jct_s``, ``p95_jct_s`` and ``mean_wait_s`` are over every job that
    arrived; ``mean_jct_finished_s`` is the mean over finished jobs only (the optimistic figure,
    for reference); ``censored`` is the number of arrived jobs whose JCT is censored.
    ``mean_throughput_tokens_s`` is the mean per-job throughput of the arrived jobs (partial
    work of unfinished jobs, 0 for jobs never started); cost, energy, tokens and WAN bytes sum
    every job's work, finished or not.

    **Costs.**  ``cost_usd`` is the electricity cost (the name it had before egress was billed, kept
    so that older readers and results files keep their meaning); ``egress_usd`` what the clouds bill
    for bytes sent between regions; ``total_cost_usd`` the whole bill, their sum.  Reports written
    before egress was billed have neither (NaN when such a row is read back).

    **Carbon.**  ``carbon_kg`` is the operational kgCO2e of every job (the scenario's ``carbon.signal``,
    life-cycle or direct; :mod:`sfenv.world.carbon`), ``embodied_kg`` the embodied carbon of the GPUs
    they held (``carbon.embodied_kg_per_gpu_hour`` x GPU-hours; 0 unless set).  NaN in older rows.
    """

    jobs: int
    finished: int
    unfinished: int
    mean_jct_s: float
    p95_jct_s: float
    mean_wait_s: float
    makespan_s: float
    mean_throughput_tokens_s: float
    total_tokens: float
    energy_kwh: float
    cost_usd: float
    wan_tb: float
    utilisation: float
    preemptions: int
    censored: int = 0
    mean_jct_finished_s: float = math.nan
    egress_usd: float = math.nan
    total_cost_usd: float = math.nan
    carbon_kg: float = math.nan
    embodied_kg: float = math.nan

    @classmethod
    def from_records(
        cls, records: list[JobRecord], makespan: float, busy_gpu_s: float, total_gpus: int,
        embodied_kg_per_gpu_hour: float = 0.0,
    ) -> EpisodeReport:
        """Aggregate job records; ``busy_gpu_s`` is the integral of allocated GPUs over time.

        :param makespan: the episode's end (simulated s); unfinished jobs are censored there.
        :param embodied_kg_per_gpu_hour: embodied kgCO2e per GPU-hour held (``embodied_kg``).
        """
        end = float(makespan)
        done = [r for r in records if r.finished]
        arrived = [r for r in records if r.arrived_by(end)]
        jcts = np.array([r.censored_jct(end) for r in arrived])
        waits = np.array([r.censored_wait(end) for r in arrived])
        tput = np.array([r.throughput(end) for r in arrived])
        tput = tput[~np.isnan(tput)]
        cost = float(sum(r.cost_usd for r in records))
        egress = float(sum(r.egress_usd for r in records))
        return cls(
            jobs=len(records),
            finished=len(done),
            unfinished=len(records) - len(done),
            mean_jct_s=float(np.mean(jcts)) if jcts.size else math.nan,
            p95_jct_s=float(np.percentile(jcts, 95)) if jcts.size else math.nan,
            mean_wait_s=float(np.mean(waits)) if waits.size else math.nan,
            makespan_s=end,
            mean_throughput_tokens_s=float(np.mean(tput)) if tput.size else 0.0,
            total_tokens=float(sum(r.tokens for r in records)),
            energy_kwh=float(sum(r.energy_j for r in records) / 3.6e6),
            cost_usd=cost,
            wan_tb=float(sum(r.wan_bytes for r in records) / 1e12),
            utilisation=float(busy_gpu_s / (total_gpus * makespan)) if makespan > 0 and total_gpus else 0.0,
            preemptions=int(sum(r.preemptions for r in records)),
            censored=len(arrived) - len(done),
            mean_jct_finished_s=float(np.mean([r.jct for r in done])) if done else math.nan,
            egress_usd=egress,
            total_cost_usd=cost + egress,
            carbon_kg=float(sum(r.carbon_kg for r in records)),
            embodied_kg=float(embodied_kg_per_gpu_hour * sum(r.gpu_hours() for r in records)),
        )

    def to_dict(self) -> dict[str, float]:
        """Plain dict (JSON-friendly)."""
        return asdict(self)
