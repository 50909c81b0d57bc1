"""Per-job records and the episode report."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["JobRecord", "EpisodeReport"]


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job.  Times in simulated seconds; ``finish`` is NaN if unfinished."""

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


@dataclass(frozen=True)
class EpisodeReport:
    """Aggregate metrics of one episode (all simulated quantities, never wall-clock)."""

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

    @classmethod
    def from_records(
        cls, records: list[JobRecord], makespan: float, busy_gpu_s: float, total_gpus: int
    ) -> EpisodeReport:
        """Aggregate job records; ``busy_gpu_s`` is the integral of allocated GPUs over time."""
        done = [r for r in records if r.finished]
        jcts = np.array([r.jct for r in done]) if done else np.array([np.nan])
        waits = np.array([r.wait for r in records if not math.isnan(r.first_start)])
        tput = [r.tokens / (r.finish - r.first_start) for r in done if r.finish > r.first_start]
        return cls(
            jobs=len(records),
            finished=len(done),
            unfinished=len(records) - len(done),
            mean_jct_s=float(np.mean(jcts)),
            p95_jct_s=float(np.percentile(jcts, 95)) if done else math.nan,
            mean_wait_s=float(np.mean(waits)) if waits.size else math.nan,
            makespan_s=float(makespan),
            mean_throughput_tokens_s=float(np.mean(tput)) if tput else 0.0,
            total_tokens=float(sum(r.tokens for r in records)),
            energy_kwh=float(sum(r.energy_j for r in records) / 3.6e6),
            cost_usd=float(sum(r.cost_usd for r in records)),
            wan_tb=float(sum(r.wan_bytes for r in records) / 1e12),
            utilisation=float(busy_gpu_s / (total_gpus * makespan)) if makespan > 0 and total_gpus else 0.0,
            preemptions=int(sum(r.preemptions for r in records)),
        )

    def to_dict(self) -> dict[str, float]:
        """Plain dict (JSON-friendly)."""
        return asdict(self)
