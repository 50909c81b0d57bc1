"""Scenario files: validated configuration of topology, prices, workload, dynamics and rewards.

A scenario is a YAML file (bundled ones live in the ``scenarios`` package; the format is in
``docs/scenarios.md``).  :func:`load_scenario` accepts a bundled name (``"spider-8"``), a path, or a dict.
Every error is a :class:`ScenarioError` naming the file, the field, the bad value and what was
expected.  A :class:`Scenario` is static: it describes the world and knows nothing of the engine;
:func:`sfenv.sim.make_simulator` reads it and draws one episode (jobs, price noise,
outages, link dynamics) from a seeded generator.
"""

from __future__ import annotations

import math
import re
import warnings
from bisect import bisect_right
from collections.abc import Callable
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from sfenv.errors import InvalidInput, SfenvError, did_you_mean
from sfenv.model.perf import SCHEDULES, PerfParams
from sfenv.model.routing import ROUTING_MODES
from sfenv.model.sharing import VM_PAIR_CAPS, WAN_SHARING
from sfenv.world import limits as lim
from sfenv.world.carbon import (
    BUNDLED_CARBON_CSV,
    DEFAULT_GCO2_PER_KWH,
    PUBLISHED_DAY_AHEAD_MAPE,
    CarbonForecaster,
    CarbonSeries,
    bundled_carbon_csv,
    carbon_profile,
    read_carbon_csv,
)
from sfenv.world.egress import DEFAULT_USD_PER_GB, CloudSite, EgressTable, egress_price_matrix, load_egress_table
from sfenv.world.files import MAX_YAML_BYTES, load_yaml, names_a_file, read_text
from sfenv.world.generators import GeneratedTopology, cloud_topology, spider_topology, waxman_topology
from sfenv.world.hardware import GPU_CATALOGUE, get_gpu
from sfenv.world.prices import PriceSeries, from_daily_profiles, read_price_csv, time_of_use
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import (
    MODEL_ZOO,
    JobSpec,
    ModelSpec,
    TraceRow,
    jobs_from_trace,
    mean_iterations,
    mmpp_arrivals,
    mmpp_mean_rate,
    platform_job_rate,
    poisson_arrivals,
    rate_for_load,
    read_trace_csv,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "MAX_CANDIDATES",
    "MAX_EPISODE_STEPS",
    "MAX_FORECAST_HOURS",
    "MAX_JOBS",
    "MAX_LOAD_FITS",
    "MAX_MIX",
    "MAX_PRICE_DAYS",
    "MAX_QUEUE_WINDOW",
    "MAX_REGIONS",
    "NAME_RULE",
    "SAFE_NAME",
    "Scenario",
    "ScenarioError",
    "bundled_scenarios",
    "known_fields",
    "load_scenario",
]

DEFAULT_SCENARIO = "spider-8"

#: Largest ``workload.num_jobs`` accepted.  A simulated episode holds every job in memory and the
#: evaluators run thousands of episodes; the bundled scenarios use 40-120 jobs, and 100,000 jobs
#: already take minutes per episode.  Beyond it (10**8 jobs grew to 1.1 GB in seconds) a typo is
#: far likelier than an intent, so it is refused up front.
MAX_JOBS = 100_000
#: Largest number of regions (``topology.num_regions`` of a generated topology, or ``regions``
#: listed): 256, about twice every public region of the three largest clouds together.  The bundled
#: scenarios go to 64.  Routes, generators and the observation grow with the square of it, through
#: the links: at 256 regions the cloud generator (every pair linked) loads in about 10 s and an env
#: with ten years of prices holds about 1 GB; at 1,024 the same scenario did not load in 15 minutes,
#: a Waxman one took 4.5 minutes and 3.5 GB (2026-11-28, one core).
MAX_REGIONS = 256
#: Largest ``prices.days`` (ten years of hourly prices per zone; :mod:`sfenv.world.limits` has the
#: bounds of every other number of a scenario, with their reasons).
MAX_PRICE_DAYS = lim.MAX_PRICE_DAYS
#: Largest ``env.max_candidates`` (and the env's ``max_candidates``): 256.  The bundled scenarios and
#: configs use 12-16; the action mask and the candidate block grow with it (100,000 took 9.9 GB).
MAX_CANDIDATES = 256
#: Largest ``env.queue_window``: 256 waiting jobs shown (the bundled scenarios use 6-8); each gets
#: plans from the proposers at every step.
MAX_QUEUE_WINDOW = 256
#: Largest ``env.forecast_hours``: a week (168).  Day-ahead markets publish 24-36 hours ahead, so
#: beyond that a forecast is no longer one a scheduler could get (the bundled scenarios use 6).
MAX_FORECAST_HOURS = 168
#: Largest ``env.max_episode_steps``: 10,000,000, 100 steps for each of :data:`MAX_JOBS` jobs (the
#: bundled scenarios allow 40 per job).
MAX_EPISODE_STEPS = 10_000_000
#: What a name that becomes part of a path (the scenario's ``name``: ``results/NAME/``, run folders)
#: may be: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit (so no ``..``, no
#: separator, no hidden file), at most 100 characters.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: the serialisation context key of :meth:`ScenarioCfg.identity_json` (leaves :data:`_OLD_SIM_DEFAULTS` out)
_IDENTITY = "sfenv_identity"
#: ``sim`` settings of earlier env versions that are no longer the defaults, left out of a scenario's
#: identity so that results recorded under them keep their hash: env v2's sharing model, env v5's
#: full zero-bubble replays and per-member VM-pair caps
_OLD_SIM_DEFAULTS: dict[str, Any] = {"wan_sharing": "v2", "skip_zero_bubble_periods": False, "vm_pair_cap": "member"}
#: Most entries of ``workload.models`` and of ``workload.global_batch`` (16 each; the bundled
#: scenarios use up to 4 and 2).  Deriving a rate from ``workload.load`` fits a plan for every
#: model, batch size and kind of region.
MAX_MIX = 16
#: Most plan fits :attr:`Scenario.job_capacity_per_hour` may take to derive a rate from
#: ``workload.load`` (models x batch sizes x kinds of region, a kind being regions that plan alike
#: on the same budget): 4,096, about 10 s at worst (2 ms a fit).  The bundled scenarios need at most 120 (spider-64).
MAX_LOAD_FITS = 4096


def _not_bool(v: Any) -> Any:
    """Refuse ``True``/``False`` and text where a number is expected.

    Pydantic's lax mode would read the booleans as 1/0 and text such as ``"8"`` or ``"1e3"`` as a
    number: a quoted value in a scenario file is more likely a mistake (a unit or a comma left in,
    ``"100 Gbps"`` is refused either way) than a number, so it is refused with the field's name.
    """
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"expected a number, got the boolean {v}")
    if isinstance(v, (str, bytes)):
        raise ValueError(f"expected a number, got the text {str(v)[:40]!r} (write it without quotes)")
    return v


_NUM = BeforeValidator(_not_bool)
PosFloat = Annotated[float, _NUM, Field(gt=0)]
NonNegFloat = Annotated[float, _NUM, Field(ge=0)]
PosInt = Annotated[int, _NUM, Field(gt=0)]
#: a count of GPUs (in a region, or a job's bounds)
GpuCount = Annotated[int, _NUM, Field(gt=0, le=lim.MAX_GPUS)]
#: a bandwidth in Gbit/s
Bandwidth = Annotated[float, _NUM, Field(ge=lim.MIN_BANDWIDTH_GBPS, le=lim.MAX_BANDWIDTH_GBPS)]
#: a one-way latency in ms
Latency = Annotated[float, _NUM, Field(ge=0, le=lim.MAX_LATENCY_MS)]
#: an electricity price in USD/MWh
Price = Annotated[float, _NUM, Field(ge=-lim.MAX_ABS_PRICE, le=lim.MAX_ABS_PRICE)]
#: a UTC offset in hours
UtcOffset = Annotated[float, _NUM, Field(ge=-12, le=14)]
#: a mean time in hours (a sojourn or a duration)
MeanHours = Annotated[float, _NUM, Field(ge=lim.MIN_MEAN_H, le=lim.MAX_HORIZON_H)]
#: an arrival rate in jobs per hour
Rate = Annotated[float, _NUM, Field(ge=lim.MIN_RATE_PER_HOUR, le=lim.MAX_RATE_PER_HOUR)]
#: a weight (reward terms, the model mix)
Weight = Annotated[float, _NUM, Field(ge=0, le=lim.MAX_WEIGHT)]
#: a number of iterations
Iterations = Annotated[int, _NUM, Field(gt=0, le=lim.MAX_ITERATIONS)]
#: a region, zone or model name: not empty, at most 100 characters
Label = Annotated[str, Field(min_length=1, max_length=100)]


def _choice_cdf(weights: np.ndarray) -> list[float] | None:
    """The cumulative weights with which ``bisect_right(cdf, rng.random())`` draws ``rng.choice(n, p=weights)``.

    :meth:`numpy.random.Generator.choice` with probabilities (and replacement) takes one
    ``rng.random()`` and returns where it falls in ``p.cumsum() / p.cumsum()[-1]`` (``searchsorted``,
    side right), after checking ``p`` on every call; drawing from this list gives the same index
    from the same generator state, without the per-call checks (with them, drawing a spider-64
    episode's jobs took 4.1 ms; without, 1.5 ms).  ``tests/test_env_speed_exact.py`` compares the
    two draw by draw.

    :param weights: probabilities (non-negative, summing to 1).
    :return: the cumulative list, or None for weights ``rng.choice`` would refuse (NaN, negative,
        not summing to 1): callers then call it and let it raise.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not len(w) or not np.all(np.isfinite(w)) or np.any(w < 0) or abs(float(w.sum()) - 1.0) > 1e-12:
        return None
    cdf = w.cumsum()
    cdf /= cdf[-1]
    return cdf.tolist()



@lru_cache(maxsize=8)
def _bundled_carbon_columns(columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Columns of the bundled carbon CSV (package data, never changed), read once per process, read-only.

    Every geo-8 scenario load read the file's 8,760 rows again (about 0.4 s of CPU each).

    :raises sfenv.errors.InvalidInput: as :func:`~sfenv.world.carbon.read_carbon_csv` (not cached).
    """
    cols = read_carbon_csv(bundled_carbon_csv(), columns)
    for v in cols.values():
        v.setflags(write=False)
    return cols

class ScenarioError(SfenvError, ValueError):
    """A scenario file is invalid; the message names file, field, value and expectation.

    :param message: the message.
    :param errors: the same per field, as ``(field path, value, what was expected)``, when known.
    """

    def __init__(self, message: str, errors: list[tuple[str, Any, str]] | None = None):
        super().__init__(message)
        self.errors = list(errors or [])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RegionCfg(_Strict):
    """A region (cluster): see :class:`sfenv.world.topology.Region`."""

    name: Label
    gpu: str
    gpus: GpuCount
    zone: Label
    pue: Annotated[float, _NUM, Field(ge=1.0, le=3.0)] = 1.2
    intra_bw_gbps: Bandwidth = 100.0
    intra_latency_ms: Latency = 0.01
    gpus_per_server: Annotated[int, _NUM, Field(gt=0, le=lim.MAX_GPUS_PER_SERVER)] = 8
    utc_offset_h: UtcOffset = 0.0
    tier: str = "cloud"
    #: the cloud provider hosting the region (``aws``, ``gcp``, ``azure``), or None (not a cloud's region)
    cloud: str | None = None
    #: the provider's name of the region (``us-east-1``; GCP without the zone), priced by ``egress.table``
    cloud_region: str | None = None

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPU_CATALOGUE:
            raise ValueError(f"unknown GPU type {v!r}; expected one of {sorted(GPU_CATALOGUE)}")
        return v

    @model_validator(mode="after")
    def _cloud(self) -> RegionCfg:
        if self.cloud_region is not None and self.cloud is None:
            raise ValueError(f"cloud_region {self.cloud_region!r} needs the region's cloud (e.g. cloud: aws)")
        return self

    def cloud_site(self) -> CloudSite | None:
        """The region's cloud region, when both ``cloud`` and ``cloud_region`` are given."""
        if self.cloud is None or self.cloud_region is None:
            return None
        return CloudSite(self.cloud, self.cloud_region)


class LinkCfg(_Strict):
    """A WAN link between two named regions.

    ``bandwidth_gbps`` is the capacity the link's flows share; ``pair_gbps_ab`` / ``pair_gbps_ba``, where
    given, the measured rate of one VM pair from ``a`` to ``b`` / from ``b`` to ``a``: every flow (one
    replica pair of a pipeline hop, one ring edge) runs at most at it (:class:`sfenv.world.topology.Link`).
    """

    a: str
    b: str
    bandwidth_gbps: Bandwidth
    latency_ms: Latency
    dynamic: bool = False
    pair_gbps_ab: PosFloat | None = None
    pair_gbps_ba: PosFloat | None = None


class TopologyCfg(_Strict):
    """Explicit regions and links, or a generator with its parameters.

    Generators (:mod:`sfenv.world.generators`): ``spider``, ``waxman`` and ``cloud``.
    """

    generator: Literal["explicit", "spider", "waxman", "cloud"] = "explicit"
    regions: list[RegionCfg] = Field(default_factory=list, max_length=MAX_REGIONS)
    links: list[LinkCfg] = Field(default_factory=list, max_length=MAX_REGIONS * (MAX_REGIONS - 1) // 2)
    num_regions: Annotated[int, _NUM, Field(gt=0, le=MAX_REGIONS)] | None = None
    seed: Annotated[int, _NUM, Field(ge=0, le=2**63 - 1)] = 0
    gpu_types: list[str] | None = Field(default=None, max_length=len(GPU_CATALOGUE))
    gpus_per_region: list[GpuCount] | None = Field(default=None, max_length=MAX_REGIONS)

    @model_validator(mode="after")
    def _check(self) -> TopologyCfg:
        if self.generator == "explicit":
            if not self.regions:
                raise ValueError("an explicit topology needs at least one region")
        elif self.num_regions is None:
            raise ValueError(f"generator {self.generator!r} needs num_regions")
        for g in self.gpu_types or []:
            if g not in GPU_CATALOGUE:
                raise ValueError(f"unknown GPU type {g!r} in gpu_types; expected one of {sorted(GPU_CATALOGUE)}")
        return self


class ZoneTOU(_Strict):
    """Time-of-use parameters of one zone, USD/MWh."""

    base: Price
    peak: Price
    utc_offset_h: UtcOffset = 0.0


class PricesCfg(_Strict):
    """Price model: ``time_of_use`` (zones given or generated), ``daily_profile`` or ``csv``."""

    kind: Literal["time_of_use", "daily_profile", "csv"] = "time_of_use"
    days: Annotated[int, _NUM, Field(gt=0, le=MAX_PRICE_DAYS)] = 14
    noise: Annotated[float, _NUM, Field(ge=0, le=lim.MAX_PRICE_NOISE)] = 0.05
    zones: dict[str, ZoneTOU] = Field(default_factory=dict)
    profiles: dict[str, list[Price]] = Field(default_factory=dict)
    path: str | None = None

    @model_validator(mode="after")
    def _check(self) -> PricesCfg:
        for z, p in self.profiles.items():
            if len(p) != 24:
                raise ValueError(f"daily profile of zone {z!r} has {len(p)} values, expected 24")
        if self.kind == "csv" and not self.path:
            raise ValueError("prices.kind 'csv' needs a path")
        return self


class ModelMixCfg(_Strict):
    """A model in the job mix: a zoo name or a full shape, with a sampling weight."""

    name: Label
    weight: Annotated[float, _NUM, Field(gt=0, le=lim.MAX_WEIGHT)] = 1.0
    layers: Annotated[int, _NUM, Field(gt=0, le=lim.MAX_LAYERS)] | None = None
    hidden: Annotated[int, _NUM, Field(gt=0, le=lim.MAX_HIDDEN)] | None = None
    heads: Annotated[int, _NUM, Field(gt=0, le=lim.MAX_HEADS)] | None = None
    seq_len: Annotated[int, _NUM, Field(gt=0, le=lim.MAX_SEQ_LEN)] | None = None
    vocab: Annotated[int, _NUM, Field(ge=0, le=lim.MAX_VOCAB)] = 0

    def spec(self) -> ModelSpec:
        """The model shape."""
        if self.layers is None:
            if self.name not in MODEL_ZOO:
                raise ValueError(f"unknown model {self.name!r}; give a shape or one of {sorted(MODEL_ZOO)}")
            return MODEL_ZOO[self.name]
        if self.hidden is None or self.heads is None or self.seq_len is None:
            raise ValueError(f"model {self.name!r}: a custom shape needs layers, hidden, heads and seq_len")
        return ModelSpec(self.name, self.layers, self.hidden, self.heads, self.seq_len, self.vocab)


#: arrival rate (per hour) when neither ``workload.arrival.rate_per_hour`` nor ``workload.load`` is given
DEFAULT_RATE_PER_HOUR = 2.0


class ArrivalCfg(_Strict):
    """Arrival process: poisson, mmpp (bursty) or trace replay.

    ``rate_per_hour`` is the Poisson rate (mmpp: the calm rate); leave it out to derive a Poisson
    rate from ``workload.load``; with neither, 2 per hour.
    """

    process: Literal["poisson", "mmpp", "trace"] = "poisson"
    rate_per_hour: Rate | None = None
    burst_rate_per_hour: Rate = 12.0
    mean_calm_h: MeanHours = 6.0
    mean_burst_h: MeanHours = 1.0
    path: str | None = None
    time_scale: Annotated[float, _NUM, Field(ge=1e-6, le=1e6)] = 1.0


def _check_mmpp_switches(w: WorkloadCfg) -> None:
    """Refuse an mmpp process that would switch state more than :data:`~sfenv.world.limits.MAX_MMPP_SWITCHES` times.

    Drawing ``num_jobs`` arrivals takes about ``num_jobs / mean rate`` hours of the process, in which
    it switches state twice per ``mean_calm_h + mean_burst_h``; each switch is a step of a loop.
    """
    a = w.arrival
    if a.process != "mmpp":
        return
    calm = DEFAULT_RATE_PER_HOUR if a.rate_per_hour is None else a.rate_per_hour
    mean_rate = mmpp_mean_rate(calm, a.burst_rate_per_hour, a.mean_calm_h, a.mean_burst_h)
    switches = 2.0 * w.num_jobs / (mean_rate * (a.mean_calm_h + a.mean_burst_h))
    if switches > lim.MAX_MMPP_SWITCHES:
        raise ValueError(f"arrival: mmpp switches state about {switches:.3g} times while it draws {w.num_jobs} jobs "
                         f"(rates {calm:g} and {a.burst_rate_per_hour:g} per hour, mean_calm_h {a.mean_calm_h:g}, "
                         f"mean_burst_h {a.mean_burst_h:g}); expected at most {lim.MAX_MMPP_SWITCHES:,}: give longer "
                         "sojourns or higher rates")


class WorkloadCfg(_Strict):
    """Job mix and arrivals.

    Iterations are log-uniform in ``iterations`` unless ``iterations_choices`` lists the values to
    pick from uniformly (e.g. one per dataset size).  ``load`` (a fraction, 0.9 = 90 %) sets the
    Poisson arrival rate to that offered utilisation of the platform's GPU time (see
    :meth:`Scenario.job_capacity_per_hour`); give it or ``arrival.rate_per_hour``, not both.
    """

    num_jobs: Annotated[int, _NUM, Field(gt=0, le=MAX_JOBS)] = 40
    load: Annotated[float, _NUM, Field(gt=0, le=10)] | None = None
    arrival: ArrivalCfg = Field(default_factory=ArrivalCfg)
    models: list[ModelMixCfg] = Field(default_factory=lambda: [ModelMixCfg(name="gpt-1.3b")],
                                      min_length=1, max_length=MAX_MIX)
    global_batch: list[Annotated[int, _NUM, Field(gt=0, le=lim.MAX_BATCH)]] = Field(
        default_factory=lambda: [256], min_length=1, max_length=MAX_MIX)
    iterations: tuple[Iterations, Iterations] = (200, 2000)
    iterations_choices: list[Iterations] | None = Field(default=None, max_length=1024)
    min_gpus: GpuCount = 1
    max_gpus: GpuCount = 256

    @model_validator(mode="after")
    def _check(self) -> WorkloadCfg:
        _check_mmpp_switches(self)
        if self.iterations[0] > self.iterations[1]:
            raise ValueError(f"iterations range {list(self.iterations)} must be [low, high] with low <= high")
        if self.min_gpus > self.max_gpus:
            raise ValueError(f"min_gpus {self.min_gpus} exceeds max_gpus {self.max_gpus}")
        for m in self.models:
            m.spec()
        if self.load is not None:
            if self.arrival.rate_per_hour is not None:
                raise ValueError(f"give either load ({self.load}) or arrival.rate_per_hour "
                                 f"({self.arrival.rate_per_hour}), not both: load derives the rate")
            if self.arrival.process != "poisson":
                raise ValueError(f"load sets a Poisson rate; arrival.process is {self.arrival.process!r} "
                                 f"(give its rates instead, or use process 'poisson')")
        return self


class DynamicsCfg(_Strict):
    """Link bandwidth fluctuation (two-state Markov factor)."""

    links: Literal["none", "flagged", "all"] = "flagged"
    low_factor: Annotated[float, _NUM, Field(ge=0.01, le=1)] = 0.3
    mean_good_h: MeanHours = 4.0
    mean_bad_h: MeanHours = 1.0


class OutageCfg(_Strict):
    """Random region outages: Poisson per region, exponential durations."""

    rate_per_region_per_day: Annotated[float, _NUM, Field(ge=0, le=1440)] = 0.0
    mean_duration_h: MeanHours = 2.0


class StragglerCfg(_Strict):
    """Slow GPUs: per region a Poisson process of straggler episodes, each slowing one GPU for a while.

    Each GPU starts an episode at ``rate_per_gpu_per_day``; an episode lasts an exponential time of
    mean ``mean_duration_h`` and multiplies the compute time of the pipeline stage its GPU serves by
    ``slowdown`` (a stage runs at its slowest GPU).  Off (rate 0) by default: docs/model.md, "Stragglers".
    """

    rate_per_gpu_per_day: Annotated[float, _NUM, Field(ge=0, le=lim.MAX_STRAGGLER_RATE_PER_GPU_PER_DAY)] = 0.0
    slowdown: Annotated[float, _NUM, Field(ge=1, le=lim.MAX_STRAGGLER_SLOWDOWN)] = 1.5
    mean_duration_h: MeanHours = 1.0


class SimCfg(_Strict):
    """Simulator and performance-model settings.

    ``wan_streams`` (parallel TCP connections per WAN transfer, default 16: NCCL's socket transport on
    AWS) and ``tcp_window_mib`` (bytes in flight per connection and round trip, default 3 MiB: half
    of Linux's default 6 MiB ``tcp_rmem`` maximum) bound each transfer to ``streams x window / RTT``
    (:class:`sfenv.model.perf.PerfParams`, :mod:`sfenv.model.sharing`).

    ``routing`` (default ``static``): ``static`` sends each cross-region transfer over the route
    :meth:`sfenv.world.topology.Topology.route_for` picks for its payload at nominal capacities;
    ``load`` picks, when a job starts or re-plans, the best of a few candidate routes at the rates
    it would get given the flows already running, and pins it until the job ends or re-plans
    (:mod:`sfenv.model.routing`); ``adaptive`` picks them so too, and moves a running job to the
    routes best at the load whenever the WAN changes, if its iteration time falls by more than 1 %
    (:mod:`sfenv.sim.reroute`).

    ``wan_sharing`` (default ``v5``): how transfers share the WAN (:attr:`sfenv.model.perf.PerfParams.wan_sharing`):
    ``v5``, env v5's and v6's model: as ``v4``, but such a plan's pipeline time is its replay's own and
    zero-bubble plans are replayed too; ``v4``, env v4's (the ``-v4`` ids play it): as ``v3``, but a
    1F1B or GPipe plan's own hops share their links as a replay of its schedule plays them
    (:mod:`sfenv.model.hopshare`); ``v3``, env v3's (the ``-v3`` ids play it), which sees other jobs'
    bursts come and go and a job's own hops send as a sweep of its schedule has them; or ``v2``, env
    v2's (the ``-v2`` ids play it).  docs/model.md compares them with the flow-level check.

    ``skip_zero_bubble_periods`` (default true since env v6): under ``v5``, replay a zero-bubble plan's
    steady state once and move on by whole periods
    (:attr:`sfenv.model.perf.PerfParams.skip_zero_bubble_periods`): faster with SpanTrain's
    candidates, its times within about 1e-9 of the full replay's; false replays every period, as env
    v5 did (the ``-v5`` ids play it).

    ``vm_pair_cap`` (default ``server`` since env v6): what a link's measured per-VM-pair rate
    (``pair_gbps_ab``/``_ba``) binds: ``server``, the replica pairs of a pipeline hop one server sends
    together share it; ``member`` (env v5's, the ``-v5`` ids play it), each replica pair as if on a VM
    pair of its own (:attr:`sfenv.model.perf.PerfParams.vm_pair_cap`; docs/model.md, "Checked against
    NCCL between two GCP regions").
    """

    horizon_h: Annotated[float, _NUM, Field(gt=0, le=lim.MAX_HORIZON_H)] = 336.0
    checkpoint_interval_s: Annotated[float, _NUM, Field(ge=1, le=lim.MAX_HORIZON_H * 3600)] = 1800.0
    mfu: Annotated[float, _NUM, Field(ge=0.01, le=1)] = 0.4
    dp_overlap: Annotated[float, _NUM, Field(ge=0, le=1)] = 0.5
    memory_headroom: Annotated[float, _NUM, Field(gt=0, le=1)] = 0.9
    wan_streams: PosInt = 16
    tcp_window_mib: PosFloat = 3.0
    schedule: str = "1f1b"
    routing: str = "static"
    wan_sharing: str = "v5"
    skip_zero_bubble_periods: StrictBool = True
    vm_pair_cap: str = "server"

    def perf_params(self) -> PerfParams:
        """The performance-model constants these settings set."""
        return PerfParams(mfu=self.mfu, dp_overlap=self.dp_overlap, memory_headroom=self.memory_headroom,
                          wan_streams=self.wan_streams, tcp_window_bytes=self.tcp_window_mib * 2**20,
                          wan_sharing=self.wan_sharing, skip_zero_bubble_periods=self.skip_zero_bubble_periods,
                          vm_pair_cap=self.vm_pair_cap)

    @field_validator("schedule")
    @classmethod
    def _sched(cls, v: str) -> str:
        if v not in SCHEDULES:
            raise ValueError(f"unknown schedule {v!r}; expected one of {list(SCHEDULES)}")
        return v

    @field_validator("routing", "wan_sharing", "vm_pair_cap")
    @classmethod
    def _one_of(cls, v: str, info: ValidationInfo) -> str:
        options = {"routing": ROUTING_MODES, "wan_sharing": WAN_SHARING, "vm_pair_cap": VM_PAIR_CAPS}[
            str(info.field_name)]
        if v not in options:
            raise ValueError(f"unknown {info.field_name} {v!r}{did_you_mean(v, options)}; expected one of "
                             f"{list(options)}")
        return v


class RewardCfg(_Strict):
    """Reward weights (see :class:`sfenv.env.GeoSchedEnv`).

    ``cost_weight`` weighs each USD of electricity, ``egress_weight`` each USD of egress (bytes sent
    between regions, ``egress`` section); left out, ``egress_weight`` is ``cost_weight`` (a dollar is a
    dollar).
    """

    jct_weight: Weight = 1.0
    cost_weight: Weight = 0.0
    egress_weight: Weight | None = None
    throughput_weight: Weight = 0.0
    invalid_action_penalty: Weight = 0.1
    #: weight per kgCO2e emitted (the ``carbon`` section's signal); 0 leaves the reward as it was
    carbon_weight: Weight = 0.0


class EgressCfg(_Strict):
    """What bytes leaving a region cost (:mod:`sfenv.world.egress`), billed on every cross-region byte.

    ``table``: ``"skyplane"`` (the bundled public list prices of AWS, GCP and Azure), ``"none"``, or
    the path of a CSV in the same format; it prices the pairs of regions that both give ``cloud`` and
    ``cloud_region``.  Every other pair of different regions costs ``default_usd_per_gb`` (AWS's
    0.02 USD/GB between most of its regions; 0 turns egress off there).
    """

    table: str = "skyplane"
    default_usd_per_gb: Annotated[float, _NUM, Field(ge=0, le=lim.MAX_EGRESS_USD_PER_GB)] = DEFAULT_USD_PER_GB


#: a grid carbon intensity in gCO2e/kWh (= kgCO2e/MWh)
Intensity = Annotated[float, _NUM, Field(ge=0, le=lim.MAX_CARBON_INTENSITY)]
#: a fraction in [0, 1]
Fraction = Annotated[float, _NUM, Field(ge=0, le=1)]


class CarbonZoneCfg(_Strict):
    """Carbon intensity of one zone (:mod:`sfenv.world.carbon`).

    ``csv``: the zone's hourly column of ``carbon.path`` (``COLUMN_lca`` or ``COLUMN_direct`` by
    ``carbon.signal``; ``column`` defaults to the zone's name); ``profile``: a synthetic diurnal and
    seasonal curve around ``gco2_per_kwh`` (:func:`sfenv.world.carbon.carbon_profile`, noise seeded per
    episode); ``constant``: ``gco2_per_kwh`` at every hour.
    """

    kind: Literal["csv", "profile", "constant"] = "constant"
    #: csv: the column's zone name in the file (default: the zone's own name)
    column: Label | None = None
    #: constant: the intensity; profile: its mean (gCO2e/kWh, in the scenario's ``carbon.signal``)
    gco2_per_kwh: Intensity = DEFAULT_GCO2_PER_KWH
    #: profile: the day's swing, a fraction of the mean either way
    diurnal_amplitude: Fraction = 0.2
    #: profile: the year's swing, a fraction of the mean either way
    seasonal_amplitude: Fraction = 0.1
    #: profile: local hour of the day's cleanest hour
    clean_hour_local: Annotated[float, _NUM, Field(ge=0, le=24)] = 13.0
    #: profile: the zone's UTC offset, hours
    utc_offset_h: UtcOffset = 0.0
    #: profile: sd of the hourly multiplicative log-normal noise
    noise: Fraction = 0.05


class CarbonForecastCfg(_Strict):
    """How the carbon forecast in the observation is made (:class:`sfenv.world.carbon.CarbonForecaster`).

    ``noisy``: the truth times a seeded error of day-ahead MAPE ``mape_24h`` (published skill);
    ``persistence``: the same hour of the last day seen (causal); ``oracle``: the true future, privileged.
    """

    kind: Literal["noisy", "persistence", "oracle"] = "noisy"
    #: mean absolute percentage error at a 24-hour lead (a fraction; 0.0959: CarbonX / CarbonCast's 13 grids)
    mape_24h: Fraction = PUBLISHED_DAY_AHEAD_MAPE
    #: hours of forecast in the observation (the current hour's intensity comes on top)
    hours: Annotated[int, _NUM, Field(gt=0, le=MAX_FORECAST_HOURS)] = 24


class CarbonCfg(_Strict):
    """Grid carbon intensity per zone (:mod:`sfenv.world.carbon`); leaving the section out keeps the metrics.

    Without the section every zone gets :data:`sfenv.world.carbon.DEFAULT_GCO2_PER_KWH` (reported as
    ``fallback``) and the observation has no ``carbon`` key.  With it, ``zones`` maps zone names to
    a :class:`CarbonZoneCfg`; a region zone not listed gets ``default`` (reported as ``fallback``).
    ``signal`` names the factors of every number (``lca`` life-cycle, ``direct`` combustion only); a
    ``csv`` zone reads that signal's column.  ``path``: ``bundled`` (the 8 zones of 2023,
    ``sfenv/data/carbon``) or a CSV of the same format.  ``start_hour``: the CSV's row of the
    episode's hour 0 (the series then repeats after the file's last row).
    """

    signal: Literal["lca", "direct"] = "lca"
    path: str = BUNDLED_CARBON_CSV
    start_hour: Annotated[int, _NUM, Field(ge=0, le=lim.MAX_CARBON_START_HOUR)] = 0
    zones: dict[Label, CarbonZoneCfg] = Field(default_factory=dict, max_length=MAX_REGIONS)
    default: CarbonZoneCfg = Field(default_factory=CarbonZoneCfg)
    #: embodied (manufacturing) carbon per GPU-hour a job holds, kgCO2e; 0: operational carbon only
    embodied_kg_per_gpu_hour: Annotated[float, _NUM, Field(ge=0, le=lim.MAX_EMBODIED_KG_PER_GPU_HOUR)] = 0.0
    forecast: CarbonForecastCfg = Field(default_factory=CarbonForecastCfg)

    @model_validator(mode="after")
    def _check(self) -> CarbonCfg:
        if self.default.kind == "csv":
            raise ValueError("carbon.default: kind 'csv' has no column to read; expected 'constant' or 'profile'")
        return self


class EnvCfg(_Strict):
    """Environment sizes."""

    max_candidates: Annotated[int, _NUM, Field(gt=0, le=MAX_CANDIDATES)] = 16
    queue_window: Annotated[int, _NUM, Field(gt=0, le=MAX_QUEUE_WINDOW)] = 8
    forecast_hours: Annotated[int, _NUM, Field(gt=0, le=MAX_FORECAST_HOURS)] = 6
    max_episode_steps: Annotated[int, _NUM, Field(gt=0, le=MAX_EPISODE_STEPS)] = 2000


class ScenarioCfg(_Strict):
    """The whole scenario file."""

    name: str
    description: str = ""
    topology: TopologyCfg
    prices: PricesCfg = Field(default_factory=PricesCfg)
    workload: WorkloadCfg = Field(default_factory=WorkloadCfg)
    dynamics: DynamicsCfg = Field(default_factory=lambda: DynamicsCfg(links="none"))
    outages: OutageCfg = Field(default_factory=OutageCfg)
    #: None (the default) is off and leaves the scenario's hash as it was (:meth:`_drop_unset`)
    stragglers: StragglerCfg | None = None
    sim: SimCfg = Field(default_factory=SimCfg)
    reward: RewardCfg = Field(default_factory=RewardCfg)
    env: EnvCfg = Field(default_factory=EnvCfg)
    egress: EgressCfg = Field(default_factory=EgressCfg)
    #: None (the default): every zone gets the fallback intensity, and the scenario's hash is as it was
    carbon: CarbonCfg | None = None

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """Dump without the options scenarios written before them lack, when unset or at their old behaviour.

        ``stragglers`` and ``carbon`` unset, ``reward.carbon_weight`` 0 and ``sim.routing`` static (all
        defaults) are left out, so those scenarios keep their hash.  Env v5's and earlier settings that
        are no longer the defaults are left out of the identity only (:meth:`identity_json`), so a
        scenario played under them keeps the hash it had, and every other dump round-trips them:
        ``sim.wan_sharing`` v2, ``sim.skip_zero_bubble_periods`` false and ``sim.vm_pair_cap`` member.
        """
        data: dict[str, Any] = handler(self)
        for key in ("stragglers", "carbon"):
            if data.get(key, 0) is None:
                del data[key]
        reward = data.get("reward")
        if isinstance(reward, dict) and reward.get("carbon_weight", 1) == 0:
            del reward["carbon_weight"]
        sim = data.get("sim")
        if isinstance(sim, dict) and sim.get("routing") == "static":
            del sim["routing"]
        if isinstance(sim, dict) and (info.context or {}).get(_IDENTITY):
            for key, old in _OLD_SIM_DEFAULTS.items():
                if key in sim and sim[key] == old and type(sim[key]) is type(old):
                    del sim[key]
        return data

    def identity_json(self) -> str:
        """The JSON a scenario's hash is taken of (:func:`sfenv.runs.results.scenario_hash`).

        :meth:`model_dump_json` but without the earlier env versions' ``sim`` settings that are no longer
        the defaults (``sim.wan_sharing`` v2, ``sim.skip_zero_bubble_periods`` false, ``sim.vm_pair_cap``
        member), so that results recorded under them keep their hash; the current defaults are in it.
        """
        return self.model_dump_json(context={_IDENTITY: True})

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not SAFE_NAME.fullmatch(v):
            raise ValueError("expected letters, digits, '.', '_' and '-', starting with a letter or a digit, at "
                             "most 100 characters (the name becomes a folder name, e.g. results/NAME)")
        return v


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds (``RegionCfg`` in ``list[RegionCfg] | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def known_fields(loc: tuple[Any, ...] = ()) -> list[str]:
    """The fields a scenario may give at ``loc`` (``("topology", "regions", 0)``), read from the schema.

    A part of ``loc`` that is no field (a list index, a mapping key such as a zone name) stays at the
    same model.  A section added to :class:`ScenarioCfg` (or to any model under it) is known here
    without further change.

    :param loc: a path as pydantic gives it (``()``: the top level).
    :return: the field names, sorted (empty when ``loc`` leads to no model).
    """
    models: list[type[BaseModel]] = [ScenarioCfg]
    for part in loc:
        inner = [m for model in models if isinstance(part, str) and part in model.model_fields
                 for m in _models_in(model.model_fields[part].annotation)]
        if inner:
            models = inner
        elif isinstance(part, str) and any(part in model.model_fields for model in models):
            return []  # a field of a plain value (a number, a string): nothing below it
    return sorted({name for model in models for name in model.model_fields})


def _unknown_field(loc: tuple[Any, ...]) -> str:
    """Pydantic's "extra inputs are not permitted" in sfenv's words: the closest known field and the list."""
    known = known_fields(tuple(loc[:-1]))
    return f"unknown field{did_you_mean(str(loc[-1]), known)}; known here: {', '.join(known)}"


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``over``, recursing where both hold a mapping (neither is modified)."""
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], val)
        else:
            out[key] = val
    return out


def bundled_scenarios() -> list[str]:
    """Names of the scenarios shipped with sfenv."""
    return sorted(p.name[:-5] for p in resources.files("sfenv.scenarios").iterdir() if p.name.endswith(".yaml"))


class Scenario:
    """A validated scenario.

    :param cfg: the validated configuration.
    :param source: where it came from (file path or name), used in error messages.
    :param base_dir: the folder relative paths of the scenario (``prices.path``, ``workload.arrival.path``,
        ``egress.table``, ``carbon.path``) start from; for a scenario file, the file's folder.  None: the
        current folder.
    :param trust_paths: when False (the default) and ``base_dir`` is set, every such path must stay
        inside ``base_dir`` (absolute paths, ``..`` and symlinks leading out are refused): a scenario
        file is data and reads no file outside its folder.  True for a scenario file you trust.  A
        scenario built in code without ``base_dir`` is the user's own and may name any path.
    """

    def __init__(self, cfg: ScenarioCfg, source: str = "<dict>", base_dir: Path | None = None,
                 trust_paths: bool = False):
        self.cfg = cfg
        self.source = source
        self.base_dir = base_dir
        self.trust_paths = trust_paths
        self._generated: GeneratedTopology | None = None
        _ = self.topology  # validate cross references now
        self._check_event_budget()
        _ = self.price_csv, self.trace_rows  # and read the named CSV files: errors at load, not mid-run
        _ = self.egress_usd_per_byte  # and price every region pair: errors at load
        _ = self.carbon_csv  # and read the carbon columns: errors at load
        if cfg.workload.load is not None:  # and derive the rate (a job shape that fits nowhere is an error)
            _ = self.arrival_rate_per_hour

    @property
    def name(self) -> str:
        """Scenario name."""
        return self.cfg.name

    def _err(self, field: str, value: Any, expected: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {field}: got {value!r}; expected {expected}")

    def _check_event_budget(self) -> None:
        """Refuse outages, link dynamics and stragglers drawing more than :data:`~sfenv.world.limits.MAX_EVENTS` events.

        Over the horizon, a region has about ``rate_per_region_per_day x horizon_h / 24`` outages (a
        start and an end each), a dynamic link changes state twice per ``mean_good_h + mean_bad_h``,
        and a GPU has ``rate_per_gpu_per_day x horizon_h / 24`` straggler episodes (a start and an end each).
        """
        c = self.cfg
        horizon = c.sim.horizon_h
        outages = 2.0 * self.topology.num_regions * c.outages.rate_per_region_per_day * horizon / 24.0
        changes = 2.0 * len(self.dynamic_links) * horizon / (c.dynamics.mean_good_h + c.dynamics.mean_bad_h)
        slow = 0.0 if c.stragglers is None else (
            2.0 * self.topology.total_gpus * c.stragglers.rate_per_gpu_per_day * horizon / 24.0)
        if outages + changes + slow > lim.MAX_EVENTS:
            raise ScenarioError(
                f"{self.source}: outages, dynamics, stragglers: about {outages:,.0f} outage starts and ends, "
                f"{changes:,.0f} link changes and {slow:,.0f} straggler starts and ends expected over "
                f"sim.horizon_h = {horizon:g}; expected at most {lim.MAX_EVENTS:,} in all: lower "
                "outages.rate_per_region_per_day or stragglers.rate_per_gpu_per_day, lengthen "
                "dynamics.mean_good_h and mean_bad_h, or shorten the horizon")

    def _resolve(self, field: str, path: str) -> Path:
        """The file ``path`` names, relative to :attr:`base_dir`; checked to stay inside it unless trusted.

        :raises ScenarioError: naming ``field`` for an absolute path or one that leads (through ``..``
            or a symlink) out of the scenario's folder.
        """
        p = Path(path)
        if self.base_dir is None:
            return p
        if self.trust_paths:
            return p if p.is_absolute() else self.base_dir / p
        folder = f"{self.base_dir.as_posix().rstrip('/')}/"
        if p.is_absolute() or not (self.base_dir / p).resolve().is_relative_to(self.base_dir.resolve()):
            raise ScenarioError(
                f"{self.source}: {field}: {path} leads out of the scenario's folder {folder}; a scenario "
                "file reads files only inside its folder (in Python, load_scenario(..., trust_paths=True) reads a "
                "file you trust as it is)")
        return self.base_dir / p

    def _topology_data(self) -> tuple[list[RegionCfg], list[LinkCfg]]:
        t = self.cfg.topology
        if t.generator == "explicit":
            return list(t.regions), list(t.links)
        kw: dict[str, Any] = {}
        if t.gpu_types:
            kw["gpu_types"] = t.gpu_types
        if t.gpus_per_region:
            kw["gpus_per_region"] = t.gpus_per_region
        assert t.num_regions is not None
        generators: dict[str, Callable[..., GeneratedTopology]] = {
            "spider": spider_topology, "waxman": waxman_topology, "cloud": cloud_topology}
        gen = generators[t.generator]
        self._generated = gen(t.num_regions, t.seed, **kw)
        return [RegionCfg(**r) for r in self._generated.regions], [LinkCfg(**ln) for ln in self._generated.links]

    @cached_property
    def topology(self) -> Topology:
        """The static topology (validated: known regions in links, connected graph)."""
        regions_cfg, links_cfg = self._topology_data()
        self._region_cfgs = tuple(regions_cfg)
        index = {r.name: i for i, r in enumerate(regions_cfg)}
        regions = [
            Region(
                name=r.name, gpu=get_gpu(r.gpu), num_gpus=r.gpus, zone=r.zone, pue=r.pue,
                intra_bw_gbps=r.intra_bw_gbps, intra_latency_ms=r.intra_latency_ms,
                gpus_per_server=r.gpus_per_server, utc_offset_h=r.utc_offset_h, tier=r.tier,
            )
            for r in regions_cfg
        ]
        links = []
        for k, ln in enumerate(links_cfg):
            for end in ("a", "b"):
                name = getattr(ln, end)
                if name not in index:
                    raise self._err(f"topology.links[{k}].{end}", name, f"a region name, one of {sorted(index)}")
            links.append(Link(index[ln.a], index[ln.b], ln.bandwidth_gbps, ln.latency_ms, ln.pair_gbps_ab,
                              ln.pair_gbps_ba))
        self._dynamic_links = tuple(k for k, ln in enumerate(links_cfg) if ln.dynamic)
        try:
            topo = Topology(regions, links)
        except ValueError as e:
            raise self._err("topology", f"{len(regions)} regions, {len(links)} links", f"a valid graph ({e})") from None
        zones_needed = {r.zone for r in regions}
        p = self.cfg.prices
        if p.kind == "daily_profile":
            have = set(p.profiles)
        elif p.kind == "time_of_use":
            have = set(p.zones) | (set(self._generated.zones) if self._generated is not None else set())
        else:  # csv: columns are checked when the file is read
            have = zones_needed
        missing = zones_needed - have
        if missing:
            raise self._err(f"prices.{'profiles' if p.kind == 'daily_profile' else 'zones'}", sorted(have),
                            f"prices for every region zone; missing {sorted(missing)}")
        return topo

    def _read_csv(self, field: str, path: str, read: Any) -> Any:
        """``read(resolved path)``, with its errors as a :class:`ScenarioError` naming ``field`` and the file."""
        resolved = self._resolve(field, path)
        try:
            return read(resolved)
        except ValueError as e:  # InvalidInput from sfenv.world.csvread: file, line and column in the message
            raise ScenarioError(f"{self.source}: {field}: {e}") from None

    @cached_property
    def price_csv(self) -> PriceSeries | None:
        """The price series of ``prices.kind: csv`` (read once, when the scenario is loaded), else None.

        :raises ScenarioError: naming ``prices.path``, the file, line and column of the problem.
        """
        p = self.cfg.prices
        if p.kind != "csv":
            return None
        assert p.path is not None
        zones = sorted({r.zone for r in self.topology.regions})
        return self._read_csv("prices.path", p.path, lambda f: read_price_csv(f, zones))

    @cached_property
    def trace_rows(self) -> list[TraceRow] | None:
        """The first ``workload.num_jobs`` rows of an ``arrival.process: trace`` file (read at load), else None.

        :raises ScenarioError: naming ``workload.arrival.path``, the file, line and column of the problem.
        """
        w = self.cfg.workload
        if w.arrival.process != "trace":
            return None
        if w.arrival.path is None:
            raise self._err("workload.arrival.path", None, "a trace CSV path for process 'trace'")
        return self._read_csv("workload.arrival.path", w.arrival.path,
                              lambda f: read_trace_csv(f, limit=w.num_jobs))

    @cached_property
    def egress_table(self) -> EgressTable | None:
        """The egress price table of ``egress.table`` (None for ``"none"``).

        :raises ScenarioError: naming ``egress.table`` when a named file cannot be read.
        """
        name = self.cfg.egress.table
        if name == "none":
            return None
        if name == "skyplane":
            return load_egress_table()
        return self._read_csv("egress.table", name, lambda f: load_egress_table(str(f)))

    @cached_property
    def egress_usd_per_byte(self) -> np.ndarray:
        """USD per byte sent from region i to region j (regions x regions, read-only; :func:`egress_price_matrix`).

        :raises ScenarioError: naming the region whose cloud region the table does not price.
        """
        _ = self.topology  # sets _region_cfgs
        table = self.egress_table
        sites = [r.cloud_site() for r in self._region_cfgs]
        for i, site in enumerate(sites):
            if site is not None and table is not None and not table.knows(site):
                raise self._err(f"topology.regions[{i}].cloud_region", site.region,
                                f"a region of {site.cloud} in the egress table ({table.source})")
        try:
            out = egress_price_matrix(sites, table, self.cfg.egress.default_usd_per_gb)
        except ValueError as e:
            raise ScenarioError(f"{self.source}: egress: {e}") from None
        out.setflags(write=False)
        return out

    @property
    def carbon_cfg(self) -> CarbonCfg:
        """The ``carbon`` section, or its defaults when the scenario has none (every zone the fallback)."""
        return self.cfg.carbon if self.cfg.carbon is not None else CarbonCfg()

    @cached_property
    def carbon_csv(self) -> dict[str, np.ndarray]:
        """The hourly columns the ``carbon`` section's ``csv`` zones read (read once, at load), by zone.

        Each is rotated so that its row ``carbon.start_hour`` is the episode's hour 0.

        :raises ScenarioError: naming ``carbon.path`` (file, line, column) or ``carbon.zones.Z.column``
            when the file lacks the zone's column.
        """
        c = self.cfg.carbon
        if c is None:
            return {}
        region_zones = {r.zone for r in self.topology.regions}
        wanted = {z: f"{zc.column or z}_{c.signal}" for z, zc in sorted(c.zones.items())
                  if zc.kind == "csv" and z in region_zones}
        if not wanted:
            return {}
        columns = tuple(sorted(set(wanted.values())))
        own = None if c.path == BUNDLED_CARBON_CSV else self._resolve("carbon.path", c.path)
        try:
            if own is None:
                cols = _bundled_carbon_columns(columns)
            else:  # a user's file is read every time: it may change between loads
                cols = read_carbon_csv(own, columns)
        except ValueError as e:
            zone = next((z for z, col in wanted.items() if f"column {col!r}" in str(e)), None)
            field = f"carbon.zones.{zone}.column" if zone is not None else "carbon.path"
            raise ScenarioError(f"{self.source}: {field}: {e}") from None
        out = {}
        for z, col in wanted.items():
            v = cols[col]
            out[z] = np.roll(v, -(c.start_hour % len(v)))
            out[z].setflags(write=False)
        return out

    def make_carbon(self, rng: np.random.Generator | None, zones: list[str] | None = None) -> CarbonSeries:
        """The carbon series for one episode, one row per zone of ``zones`` (default: the region zones, sorted).

        ``csv`` zones get their column (:attr:`carbon_csv`), ``profile`` zones a synthetic curve (noise
        from ``rng``), ``constant`` zones their value; a zone the section does not list gets
        ``carbon.default`` and is reported as ``fallback``.
        """
        c = self.carbon_cfg
        if zones is None:
            zones = sorted({r.zone for r in self.topology.regions})
        series = self.carbon_csv
        hours = max([len(v) for v in series.values()] + [math.ceil(self.cfg.sim.horizon_h) + 1])
        rows, sources = [], {}
        for z in zones:
            zc = c.zones.get(z)
            sources[z] = "fallback" if zc is None else zc.kind
            zc = zc if zc is not None else c.default
            if zc.kind == "csv":
                v = series[z]
                rows.append(np.resize(v, hours))
            elif zc.kind == "profile":
                rows.append(carbon_profile(rng, zc.gco2_per_kwh, hours, diurnal_amplitude=zc.diurnal_amplitude,
                                           seasonal_amplitude=zc.seasonal_amplitude,
                                           clean_hour_local=zc.clean_hour_local, utc_offset_h=zc.utc_offset_h,
                                           start_hour=c.start_hour, noise=zc.noise))
            else:
                rows.append(np.full(hours, zc.gco2_per_kwh))
        return CarbonSeries(zones, np.array(rows).reshape(len(zones), hours), c.signal, sources)

    def make_carbon_forecaster(self, series: CarbonSeries, seed: int) -> CarbonForecaster:
        """The forecaster of the ``carbon.forecast`` settings over ``series`` (errors seeded by ``seed``)."""
        f = self.carbon_cfg.forecast
        return CarbonForecaster(series, f.kind, f.mape_24h, seed)

    # ------------------------------------------------------------ episode sampling
    def make_prices(self, rng: np.random.Generator | None) -> PriceSeries:
        """The price series for one episode (noise drawn from ``rng``)."""
        p = self.cfg.prices
        zones = sorted({r.zone for r in self.topology.regions})
        if p.kind == "csv":
            assert self.price_csv is not None
            return self.price_csv
        if p.kind == "daily_profile":
            return from_daily_profiles(rng, {z: p.profiles[z] for z in zones}, p.days, p.noise)
        zcfg: dict[str, dict] = {z: v.model_dump() for z, v in p.zones.items()}
        if self._generated is not None:
            for z, v in self._generated.zones.items():
                zcfg.setdefault(z, v)
        return time_of_use(
            rng, zones, {z: zcfg[z]["base"] for z in zones}, {z: zcfg[z]["peak"] for z in zones},
            {z: zcfg[z]["utc_offset_h"] for z in zones}, p.days, p.noise,
        )

    def make_jobs(self, rng: np.random.Generator) -> list[JobSpec]:
        """Draw one episode's jobs."""
        w = self.cfg.workload
        a = w.arrival
        models = [m.spec() for m in w.models]
        weights = np.array([m.weight for m in w.models], dtype=float)
        weights /= weights.sum()
        if a.process == "trace":
            rows = self.trace_rows
            assert rows is not None
            table = [(1, models[0])] + [(2 ** (i + 1), m) for i, m in enumerate(models[1:])]
            flops = float(np.median(self.topology.gpu_flops))
            return jobs_from_trace(rows, table, w.global_batch[0], flops, self.cfg.sim.mfu, a.time_scale,
                                   max_iterations=w.iterations[1])
        if a.process == "poisson":
            times = poisson_arrivals(rng, w.num_jobs, self.arrival_rate_per_hour)
        else:
            times = mmpp_arrivals(
                rng, w.num_jobs, self.arrival_rate_per_hour, a.burst_rate_per_hour, a.mean_calm_h, a.mean_burst_h
            )
        lo, hi = w.iterations
        log_lo, log_hi = math.log(lo), math.log(hi)  # (the same values, once rather than per job)
        cdf = _choice_cdf(weights)
        jobs = []
        for i, t in enumerate(times):
            if cdf is None:  # weights rng.choice would refuse: let it say so
                model = models[int(rng.choice(len(models), p=weights))]
            else:
                model = models[bisect_right(cdf, rng.random())]
            batch = int(w.global_batch[int(rng.integers(len(w.global_batch)))])
            if w.iterations_choices:
                iters = int(w.iterations_choices[int(rng.integers(len(w.iterations_choices)))])
            else:
                iters = round(math.exp(rng.uniform(log_lo, log_hi)))
            jobs.append(JobSpec(i, model, batch, iters, float(t), w.min_gpus, w.max_gpus))
        return jobs

    # ------------------------------------------------------------ offered load
    @cached_property
    def job_capacity_per_hour(self) -> float:
        """Jobs per hour the platform completes with every GPU busy, for this scenario's job mix.

        A job's work in region ``r`` is its GPU-seconds on its fastest plan inside ``r`` alone:
        :func:`sfenv.model.planning.fit_plan` on all the region's GPUs up to the job's ``max_gpus``
        (the plan a job gets in an idle region), GPUs x modelled iteration time x mean
        iterations (:func:`sfenv.world.workload.mean_iterations`), under the scenario's performance
        settings; averaged over the model and batch mix.  The platform completes
        :func:`sfenv.world.workload.platform_job_rate` of those jobs.  Regions where a shape does not
        fit are left out for that shape.  Trace workloads have no job mix: NaN.

        Regions that plan alike (:attr:`sfenv.world.topology.Topology.plan_class`) on the same budget
        get the same plan, so each such pair is fitted once per model and batch size.

        :raises ScenarioError: if some job shape fits in no single region, or if deriving the rate
            would take more than :data:`MAX_LOAD_FITS` plan fits.
        """
        from sfenv.model.perf import evaluate_plan
        from sfenv.model.planning import fit_plan

        w, s = self.cfg.workload, self.cfg.sim
        if w.arrival.process == "trace":
            return math.nan
        topo = self.topology
        budgets = [min(region.num_gpus, w.max_gpus) for region in topo.regions]
        kinds = {(topo.plan_class[r], b) for r, b in enumerate(budgets) if b >= w.min_gpus}
        fits_needed = len(w.models) * len(w.global_batch) * len(kinds)
        if fits_needed > MAX_LOAD_FITS:
            raise self._err("workload.load", w.load, f"a platform and job mix that need at most {MAX_LOAD_FITS:,} plan "
                            f"fits to derive the rate (these need {fits_needed:,}: {len(w.models)} models x "
                            f"{len(w.global_batch)} batch sizes x {len(kinds)} kinds of region); give "
                            "arrival.rate_per_hour instead")
        params = s.perf_params()
        weights = np.array([m.weight for m in w.models], dtype=float)
        weights /= weights.sum()
        iters = mean_iterations(w.iterations[0], w.iterations[1], w.iterations_choices)
        work = np.zeros(topo.num_regions)  # mean GPU-seconds of a job per region
        share = np.zeros(topo.num_regions)  # the part of the mix that fits there
        for m, q in zip(w.models, weights):
            fits_somewhere = False
            for batch in w.global_batch:
                job = JobSpec(0, m.spec(), batch, 1, 0.0, w.min_gpus, w.max_gpus)
                p = q / len(w.global_batch)
                fitted: dict[tuple[int, int], tuple[int, float] | None] = {}  # (plan class, budget) -> GPUs, time
                for r, budget in enumerate(budgets):
                    if budget < w.min_gpus:
                        continue
                    key = (topo.plan_class[r], budget)
                    if key not in fitted:
                        res = fit_plan(job, topo, [r], [budget],
                                       lambda plan, j: evaluate_plan(plan, j, topo, params), schedule=s.schedule)
                        fitted[key] = None if res is None else (res[0].gpus, res[1].iter_time)
                    got = fitted[key]
                    if got is not None:
                        work[r] += p * got[0] * got[1] * iters
                        share[r] += p
                        fits_somewhere = True
            if not fits_somewhere:
                raise self._err("workload.models", m.name, "job shapes that fit in one region (to derive a load)")
        mean_work = np.where(share > 0, work / np.maximum(share, 1e-300), math.inf)
        return platform_job_rate(topo.gpu_counts.tolist(), mean_work.tolist())

    @cached_property
    def arrival_rate_per_hour(self) -> float:
        """The Poisson rate (mmpp: calm rate) in jobs per hour: from ``workload.load`` when it is set."""
        w = self.cfg.workload
        if w.load is not None:
            return rate_for_load(w.load, self.job_capacity_per_hour)
        rate = w.arrival.rate_per_hour
        return DEFAULT_RATE_PER_HOUR if rate is None else rate

    @property
    def offered_load(self) -> float:
        """Offered utilisation rho: mean arrival rate over :attr:`job_capacity_per_hour` (NaN for traces)."""
        a = self.cfg.workload.arrival
        if a.process == "trace":
            return math.nan
        rate = self.arrival_rate_per_hour
        if a.process == "mmpp":
            rate = mmpp_mean_rate(rate, a.burst_rate_per_hour, a.mean_calm_h, a.mean_burst_h)
        return rate / self.job_capacity_per_hour

    @property
    def dynamic_links(self) -> tuple[int, ...]:
        """Indices of the links whose bandwidth fluctuates, as the ``dynamics`` section selects them."""
        d = self.cfg.dynamics
        if d.links == "none":
            return ()
        if d.links == "all":
            return tuple(range(self.topology.num_links))
        _ = self.topology  # sets _dynamic_links
        return self._dynamic_links

    def make_simulator(self, rng: np.random.Generator | int | None = None, evaluation_cache: Any = None) -> Any:
        """Deprecated: :func:`sfenv.sim.make_simulator` (``make_simulator(scenario, rng, cache)``)."""
        warnings.warn("Scenario.make_simulator is deprecated; use sfenv.sim.make_simulator(scenario, rng, cache)",
                      DeprecationWarning, stacklevel=2)
        from sfenv.sim import make_simulator  # deprecated shim: an allowed upward import (tests/test_imports.py)

        return make_simulator(self, rng, evaluation_cache)

    def evaluation_cache(self) -> Any:
        """Deprecated: :func:`sfenv.sim.evaluation_cache_for` (``evaluation_cache_for(scenario)``)."""
        warnings.warn("Scenario.evaluation_cache is deprecated; use sfenv.sim.evaluation_cache_for(scenario)",
                      DeprecationWarning, stacklevel=2)
        from sfenv.sim import evaluation_cache_for  # deprecated shim: an allowed upward import (tests/test_imports.py)

        return evaluation_cache_for(self)

    def with_overrides(self, **overrides: Any) -> Scenario:
        """A validated copy with sections updated, e.g. ``workload={"num_jobs": 10}``.

        Nested mappings are deep-merged: ``workload={"arrival": {"rate_per_hour": 5}}`` changes
        the rate and keeps the arrival process and its other fields; lists and scalars replace the
        old value.  Every value is validated as in a scenario file.  ``workload.load`` and
        ``workload.arrival.rate_per_hour`` replace each other: overriding one drops the other.

        :raises ScenarioError: naming the field path, the value and what was expected.
        """
        base = self.cfg.model_dump()
        wo = overrides.get("workload")
        if isinstance(wo, dict):  # the rate comes from one of load and rate_per_hour: the new one wins
            new_rate = isinstance(wo.get("arrival"), dict) and wo["arrival"].get("rate_per_hour") is not None
            if wo.get("load") is not None and not new_rate:
                base["workload"]["arrival"]["rate_per_hour"] = None
            elif new_rate and "load" not in wo:
                base["workload"]["load"] = None
        data = _deep_merge(base, overrides)
        return Scenario.from_dict(data, source=f"{self.source} (with overrides)", base_dir=self.base_dir,
                                  trust_paths=self.trust_paths)

    @classmethod
    def from_dict(cls, data: dict, source: str = "<dict>", base_dir: Path | None = None,
                  trust_paths: bool = False) -> Scenario:
        """Validate a dict; errors name ``source``, the field path, the value and the expectation.

        With ``base_dir``, the files the scenario names must be inside it unless ``trust_paths``
        (see :class:`Scenario`).
        """
        if not isinstance(data, dict):
            raise ScenarioError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
        try:
            cfg = ScenarioCfg.model_validate(data)
        except ValidationError as e:
            lines, fields = [], []
            for err in e.errors():
                val = err.get("input")
                shown = "(missing)" if err["type"] == "missing" else repr(val)
                if len(shown) > 80:
                    shown = shown[:77] + "..."
                if err["type"] == "extra_forbidden":  # its value says nothing; the known names do
                    msg = _unknown_field(err["loc"])
                    lines.append(f"{source}: {_fmt_loc(err['loc'])}: {msg}")
                else:
                    msg = err["msg"]
                    lines.append(f"{source}: {_fmt_loc(err['loc'])}: got {shown}; {msg}")
                fields.append((_fmt_loc(err["loc"]), val, msg))
            head = "invalid scenario: " if len(lines) == 1 else "invalid scenario:\n  "  # one error, one line
            raise ScenarioError(head + "\n  ".join(lines), fields) from None
        return cls(cfg, source, base_dir, trust_paths)

    def __repr__(self) -> str:
        return f"Scenario({self.name!r}, {self.topology!r})"


#: How a scenario argument is read, in the words of the messages and of ``--scenario``'s help.
NAME_RULE = ("an argument with a path separator or a .yaml/.yml suffix is a file (./NAME for a file without the "
             "suffix), any other is a bundled name; a folder is never a scenario")


def load_scenario(spec: str | Path | dict | Scenario, *, trust_paths: bool = False) -> Scenario:
    """Load a scenario from a bundled name, a YAML path, a dict or a :class:`Scenario`.

    A string is a file when it holds a path separator or ends in ``.yaml``/``.yml``
    (:func:`sfenv.world.files.names_a_file`), else the name of a bundled scenario: a file or a folder
    in the current folder that shares a bundled name never shadows it (``"./spider-16"`` reads the
    file).  A :class:`~pathlib.Path` is always a file, and a folder is never a scenario.

    A file is read within the bounds of :mod:`sfenv.world.files`: a regular file (not a device, a
    FIFO or a directory) of at most :data:`~sfenv.world.files.MAX_YAML_BYTES` bytes of UTF-8 YAML,
    without aliases and nested at most :data:`~sfenv.world.files.MAX_YAML_DEPTH` levels.  The files
    a scenario file names (``prices.path``, ``workload.arrival.path``, ``egress.table``,
    ``carbon.path``) must be inside the file's folder or its subfolders, unless ``trust_paths``;
    a dict is the caller's own code and may name any path (relative to the current folder).

    :raises ScenarioError: naming the file (and the field, the value and what was expected), or, for
        an unknown bundled name, the bundled ones and the closest of them.
    """
    if isinstance(spec, Scenario):
        return spec
    if isinstance(spec, dict):
        return Scenario.from_dict(spec)
    if isinstance(spec, str) and not names_a_file(spec):
        return _load_bundled(spec)
    if not isinstance(spec, (str, Path)):
        raise ScenarioError(f"scenario: got {type(spec).__name__}; expected a bundled name, a YAML path, a dict "
                            "or a Scenario")
    return _load_file(Path(spec), trust_paths)


def _load_bundled(name: str) -> Scenario:
    """The bundled scenario ``name``; an unknown name is an error listing the bundled ones."""
    bundled = bundled_scenarios()
    if name not in bundled:
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        here = ""
        if SAFE_NAME.fullmatch(name) and Path(name).is_file():
            here = f"; to read the file {name} in this folder, write ./{name}"
        raise ScenarioError(f"no bundled scenario named {shown}{did_you_mean(name, bundled)}; bundled: "
                            f"{', '.join(bundled)} ({NAME_RULE}){here}")
    source = f"scenarios/{name}.yaml"
    try:
        data = load_yaml(resources.files("sfenv.scenarios").joinpath(f"{name}.yaml").read_text(), source)
    except InvalidInput as e:  # pragma: no cover - a bundled file is valid YAML (tests/test_bundled_scenarios.py)
        raise ScenarioError(str(e)) from None
    return Scenario.from_dict(data, source)


def _load_file(path: Path, trust_paths: bool = False) -> Scenario:
    """The scenario in file ``path`` (see :func:`load_scenario` for the bounds)."""
    try:
        if path.is_dir():
            raise ScenarioError(f"{path}: a folder, not a scenario file; a folder is never a scenario (give a YAML "
                                f"file, or a bundled name: {', '.join(bundled_scenarios())})")
        if not path.exists():
            bundled = bundled_scenarios()
            hint = (f"; the bundled scenario {path.stem} is named without a suffix"
                    if path.stem in bundled and str(path.parent) == "." else "")
            raise ScenarioError(f"{path}: file not found{hint}")
        data = load_yaml(read_text(path, "scenario file", MAX_YAML_BYTES), str(path))
    except InvalidInput as e:  # not a regular file, too large, not UTF-8, not valid YAML: one line, with the file
        raise ScenarioError(str(e)) from None
    except OSError as e:  # e.g. a name too long for the file system
        raise ScenarioError(f"{path}: cannot read the scenario file ({e.strerror or e})") from None
    return Scenario.from_dict(data, str(path), path.parent, trust_paths)
