"""LLM training jobs: model shapes, job specifications and arrival processes.

Arrival processes (all draw from a caller-supplied :class:`numpy.random.Generator`):

- ``poisson``: exponential inter-arrival times at ``rate_per_hour``.
- ``mmpp``: a two-state Markov-modulated Poisson process (bursty): a calm and a burst rate,
  with exponential sojourn times in each state.
- ``trace``: replay of (submit time, GPUs, duration) rows, each mapped to a model size by its
  GPU count and to an iteration count by its duration (see :func:`jobs_from_trace`).

Offered load: :func:`platform_job_rate` is the rate (jobs per hour) at which a platform completes
jobs when every GPU is busy, from each region's GPU count and the GPU-seconds a mean job takes
there; :func:`rate_for_load` turns a target utilisation into a Poisson rate (the scenario's
``workload.load``; :meth:`sfenv.scenario.Scenario.job_capacity_per_hour` says which plan the
GPU-seconds come from).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sfenv.hashing import HashedKey, cached_hash, cached_value, state_without_hash
from sfenv.world.csvread import csv_count, csv_number, csv_rows
from sfenv.world.limits import MAX_GPUS, MAX_TRACE_SECONDS

__all__ = [
    "MODEL_ZOO",
    "JobSpec",
    "ModelSpec",
    "TraceRow",
    "jobs_from_trace",
    "mean_iterations",
    "mmpp_arrivals",
    "mmpp_mean_rate",
    "platform_job_rate",
    "poisson_arrivals",
    "rate_for_load",
    "read_trace_csv",
]


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only transformer.

    :param name: label, e.g. ``"gpt-1.3b"``.
    :param layers: transformer layers L.
    :param hidden: hidden size h.
    :param heads: attention heads (tensor parallelism must divide it).
    :param seq_len: sequence length s in tokens.
    :param vocab: vocabulary size V (tied embedding/LM head of V*h parameters); 0 to ignore.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int = 0

    __hash__ = cached_hash  # model shapes key the plan caches
    __getstate__ = state_without_hash

    @property
    def layer_params(self) -> float:
        """Parameters of one transformer layer, 12*h^2 (attention 4h^2 + MLP 8h^2)."""
        return 12.0 * self.hidden * self.hidden

    @property
    def embedding_params(self) -> float:
        """Parameters of the (tied) embedding / LM head, V*h."""
        return float(self.vocab) * self.hidden

    @property
    def params(self) -> float:
        """Total parameters, 12*L*h^2 + V*h."""
        return self.layers * self.layer_params + self.embedding_params


# A small zoo of GPT-style shapes (GPT-3 paper table 2.1 shapes; Llama-2/3 style for the large ones).
MODEL_ZOO: dict[str, ModelSpec] = {
    m.name: m
    for m in [
        ModelSpec("gpt-350m", 24, 1024, 16, 2048, 50257),
        ModelSpec("gpt-1.3b", 24, 2048, 16, 2048, 50257),
        ModelSpec("gpt-2.7b", 32, 2560, 32, 2048, 50257),
        ModelSpec("gpt-6.7b", 32, 4096, 32, 2048, 50257),
        ModelSpec("gpt-13b", 40, 5120, 40, 2048, 50257),
        ModelSpec("llama-30b", 60, 6656, 52, 2048, 32000),
        ModelSpec("llama-70b", 80, 8192, 64, 4096, 128256),
    ]
}


@dataclass(frozen=True)
class JobSpec:
    """One training job.

    :param job_id: unique id within an episode (its index in arrival order).
    :param model: the model shape.
    :param global_batch: sequences per iteration B.
    :param iterations: iterations to run.
    :param arrival: arrival time in simulated seconds.
    :param min_gpus: fewest GPUs the job accepts.
    :param max_gpus: most GPUs the job can use.
    :param deadline: optional completion deadline (absolute simulated seconds).
    """

    job_id: int
    model: ModelSpec
    global_batch: int
    iterations: int
    arrival: float
    min_gpus: int = 1
    max_gpus: int = 1024
    deadline: float | None = None

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens processed per iteration, B*s."""
        return self.global_batch * self.model.seq_len

    @property
    def total_flops(self) -> float:
        """Training FLOPs of the whole job, 6 * params * tokens."""
        return 6.0 * self.model.params * self.tokens_per_iteration * self.iterations

    @cached_value
    def shape_key(self) -> HashedKey:
        """What plans and their performance depend on (model, global batch, GPU bounds): a hashed key."""
        return HashedKey((self.model, self.global_batch, self.min_gpus, self.max_gpus))

    def with_id(self, job_id: int) -> JobSpec:
        """A copy with another id (itself if the id is already ``job_id``: a spec is immutable)."""
        return self if job_id == self.job_id else replace(self, job_id=job_id)


def poisson_arrivals(rng: np.random.Generator, n: int, rate_per_hour: float, start: float = 0.0) -> np.ndarray:
    """``n`` arrival times (s) of a Poisson process with ``rate_per_hour`` arrivals per hour."""
    gaps = rng.exponential(3600.0 / rate_per_hour, size=n)
    return start + np.cumsum(gaps)


def mmpp_arrivals(
    rng: np.random.Generator,
    n: int,
    calm_rate_per_hour: float,
    burst_rate_per_hour: float,
    mean_calm_h: float,
    mean_burst_h: float,
    start: float = 0.0,
) -> np.ndarray:
    """``n`` arrival times (s) of a two-state Markov-modulated Poisson process (bursty arrivals)."""
    out = np.empty(n)
    t = start
    state = 0
    rates = (calm_rate_per_hour / 3600.0, burst_rate_per_hour / 3600.0)
    sojourn = (mean_calm_h * 3600.0, mean_burst_h * 3600.0)
    end_state = t + rng.exponential(sojourn[state])
    i = 0
    while i < n:
        gap = rng.exponential(1.0 / rates[state])
        if t + gap < end_state:
            t += gap
            out[i] = t
            i += 1
        else:  # memoryless: restart the clock at the state switch
            t = end_state
            state = 1 - state
            end_state = t + rng.exponential(sojourn[state])
    return out


def mmpp_mean_rate(
    calm_rate_per_hour: float, burst_rate_per_hour: float, mean_calm_h: float, mean_burst_h: float
) -> float:
    """Long-run mean arrival rate (per hour) of :func:`mmpp_arrivals`: the rates weighted by time in each state."""
    return (calm_rate_per_hour * mean_calm_h + burst_rate_per_hour * mean_burst_h) / (mean_calm_h + mean_burst_h)


def mean_iterations(low: int, high: int, choices: Sequence[int] | None = None) -> float:
    """Mean iteration count of a job as :meth:`sfenv.scenario.Scenario.make_jobs` draws it.

    The mean of ``choices`` (picked uniformly) when given; otherwise the mean of a log-uniform
    variable on ``[low, high]``, ``(high - low) / ln(high / low)`` (``low`` when they are equal;
    the draw's rounding to an integer is ignored).
    """
    if choices:
        return float(np.mean(choices))
    if high <= low:
        return float(low)
    return (high - low) / math.log(high / low)


def platform_job_rate(gpus: Sequence[float], job_gpu_seconds: Sequence[float]) -> float:
    """Jobs per hour a platform completes when every GPU is busy.

    Region ``r`` with ``gpus[r]`` GPUs, busy all the time with jobs that each take
    ``job_gpu_seconds[r]`` GPU-seconds there (the mean over the job mix), completes
    ``gpus[r] / job_gpu_seconds[r]`` jobs per second; the platform completes the sum.  A busy
    platform shares its GPU time among the regions in proportion to their GPU counts, so this is
    the GPU-count-weighted harmonic mean of the regions' job work turned into a rate.  A region
    whose entry is ``inf`` (it holds none of the jobs) adds nothing.

    :raises ValueError: on mismatched lengths, or if no region can hold the jobs.
    """
    if len(gpus) != len(job_gpu_seconds):
        raise ValueError(f"{len(gpus)} regions but {len(job_gpu_seconds)} job work figures")
    rate = sum(n / s for n, s in zip(gpus, job_gpu_seconds) if math.isfinite(s) and s > 0)
    if rate <= 0:
        raise ValueError("no region can hold the jobs: the platform's job rate is 0")
    return 3600.0 * rate


def rate_for_load(load: float, capacity_per_hour: float) -> float:
    """Poisson arrival rate (per hour) that offers utilisation ``load`` to a platform of ``capacity_per_hour``.

    :param load: target offered utilisation rho (0.9 = 90 % of the GPU time), > 0.
    :param capacity_per_hour: :func:`platform_job_rate` of the platform and job mix.
    :raises ValueError: on a non-positive argument.
    """
    if not load > 0 or not capacity_per_hour > 0:
        raise ValueError(f"load ({load}) and capacity ({capacity_per_hour} jobs/h) must be > 0")
    return load * capacity_per_hour


@dataclass(frozen=True)
class TraceRow:
    """One row of a job trace: submit time (s from trace start), GPUs, duration (s)."""

    submit_s: float
    gpus: int
    duration_s: float


def read_trace_csv(
    path: str | Path,
    submit_col: str = "submit_offset_s",
    gpus_col: str = "num_gpus",
    duration_col: str = "duration_s",
    limit: int | None = None,
) -> list[TraceRow]:
    """Read (submit time, GPUs, duration) rows from a CSV with a header.

    :param path: the file.
    :param submit_col: column of the submit time, s from the trace start (0 to
        :data:`~sfenv.world.limits.MAX_TRACE_SECONDS`).
    :param gpus_col: column of the GPU count (a whole number, 1 to :data:`~sfenv.world.limits.MAX_GPUS`).
    :param duration_col: column of the run time, s (0 to :data:`~sfenv.world.limits.MAX_TRACE_SECONDS`).
    :param limit: read at most this many rows (None: all).
    :return: the rows, in file order.
    :raises sfenv.errors.InvalidInput: (a ``ValueError``) naming the file, and the line and column
        where there is one: a missing or empty file, a missing column, no data rows, a cell that is
        empty, not a finite number, out of range, or (GPUs) not a whole number.
    """
    rows: list[TraceRow] = []
    for line, rec in csv_rows(path, [submit_col, gpus_col, duration_col], "trace CSV"):
        rows.append(TraceRow(csv_number(path, line, submit_col, rec.get(submit_col), 0.0, MAX_TRACE_SECONDS),
                             csv_count(path, line, gpus_col, rec.get(gpus_col), 1, MAX_GPUS),
                             csv_number(path, line, duration_col, rec.get(duration_col), 0.0, MAX_TRACE_SECONDS)))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def jobs_from_trace(
    rows: Sequence[TraceRow],
    size_by_gpus: Sequence[tuple[int, ModelSpec]],
    global_batch: int,
    ref_flops_per_gpu: float,
    mfu: float,
    time_scale: float = 1.0,
    max_iterations: int | None = None,
) -> list[JobSpec]:
    """Map trace rows to LLM jobs.

    A row with ``g`` GPUs gets the model of the largest ``size_by_gpus`` threshold <= g; its
    iterations are chosen so that the job, run on ``g`` reference GPUs at ``mfu``, lasts about its
    recorded duration: ``iters = duration * g * F * mfu / (6 * params * B * s)`` (at least 1).
    ``time_scale`` stretches or compresses submit times (e.g. 0.1 = ten times denser).
    """
    table = sorted(size_by_gpus, key=lambda x: x[0])
    jobs: list[JobSpec] = []
    t0 = rows[0].submit_s if rows else 0.0
    for i, r in enumerate(rows):
        model = table[0][1]
        for thr, m in table:
            if r.gpus >= thr:
                model = m
        flops_per_iter = 6.0 * model.params * global_batch * model.seq_len
        iters = max(1, math.ceil(r.duration_s * r.gpus * ref_flops_per_gpu * mfu / flops_per_iter))
        if max_iterations is not None:
            iters = min(iters, max_iterations)
        jobs.append(
            JobSpec(
                job_id=i,
                model=model,
                global_batch=global_batch,
                iterations=iters,
                arrival=(r.submit_s - t0) * time_scale,
                min_gpus=1,
                max_gpus=max(r.gpus * 8, 8),
            )
        )
    return jobs
