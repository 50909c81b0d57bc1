"""The bounds of the numbers a scenario holds, each with its reason.

A bound is set by physics or by the benchmark protocol, generously enough that no real platform,
market or workload reaches it; beyond it a value is a typo or a unit mistake, or it would make an
episode take unbounded time or memory.  The scenario's pydantic models (:mod:`sfenv.scenario`) and
the CSV readers (:mod:`sfenv.world.prices`, :mod:`sfenv.world.workload`) apply them;
``docs/scenarios.md`` lists them with these reasons.
"""

from __future__ import annotations

__all__ = [
    "MAX_ABS_PRICE",
    "MAX_BANDWIDTH_GBPS",
    "MAX_BATCH",
    "MAX_CARBON_INTENSITY",
    "MAX_CARBON_START_HOUR",
    "MAX_EMBODIED_KG_PER_GPU_HOUR",
    "MAX_EVENTS",
    "MAX_GPUS",
    "MAX_GPUS_PER_SERVER",
    "MAX_HEADS",
    "MAX_HIDDEN",
    "MAX_HORIZON_H",
    "MAX_ITERATIONS",
    "MAX_LATENCY_MS",
    "MAX_LAYERS",
    "MAX_MMPP_SWITCHES",
    "MAX_PRICE_DAYS",
    "MAX_PRICE_NOISE",
    "MAX_RATE_PER_HOUR",
    "MAX_SEQ_LEN",
    "MAX_TRACE_SECONDS",
    "MAX_VOCAB",
    "MAX_WEIGHT",
    "MIN_BANDWIDTH_GBPS",
    "MIN_MEAN_H",
    "MIN_RATE_PER_HOUR",
]

#: Largest ``prices.days`` (ten years of hourly prices per zone).
MAX_PRICE_DAYS = 3660
#: Longest ``sim.horizon_h``: the ten years of :data:`MAX_PRICE_DAYS` (87,840 h).  Every simulated
#: hour is an event (the price changes), so the horizon bounds an episode's length.
MAX_HORIZON_H = 24.0 * MAX_PRICE_DAYS

#: GPUs in one region, and in one job (``gpus``, ``gpus_per_region``, ``min_gpus``, ``max_gpus``, a
#: trace's ``num_gpus``): 1,000,000, five times the largest cluster in operation in 2025 (about
#: 200,000 GPUs).
MAX_GPUS = 1_000_000
#: GPUs per server (``gpus_per_server``): 72, the largest NVLink domain sold (GB200 NVL72); tensor
#: parallelism stays inside it.
MAX_GPUS_PER_SERVER = 72

#: Bandwidths (WAN links, ``intra_bw_gbps``) in Gbit/s, at least 0.001 (1 Mbit/s, slower than any
#: data-centre or WAN link: below, a value is a unit mistake, and 1e-300 made transfer times overflow) ...
MIN_BANDWIDTH_GBPS = 1e-3
#: ... and at most 100,000 (100 Tbit/s, the capacity of a whole submarine cable).
MAX_BANDWIDTH_GBPS = 1e5
#: One-way latencies (links, ``intra_latency_ms``) in ms: at most 1,000, above a geostationary
#: satellite hop (about 280 ms) and half-way round the Earth in fibre (about 100 ms).
MAX_LATENCY_MS = 1000.0

#: Electricity prices (time-of-use ``base`` and ``peak``, daily profiles, price CSV cells) in
#: USD/MWh, between -100,000 and 100,000: every wholesale market's cap is far inside (Australia's NEM
#: AUD 17,500-20,300/MWh, ERCOT USD 5,000, the EU's harmonised EUR 4,000-5,000; floors -500 to -1,000).
MAX_ABS_PRICE = 1e5
#: ``prices.noise``, the standard deviation of the hourly log-normal price factor: at most 1 (a
#: factor of e either way at one sigma; bundled scenarios use 0.05-0.1).  With it and
#: :data:`MAX_ABS_PRICE`, prices stay finite after the noise (a noise of 1e6 overflowed to inf).
MAX_PRICE_NOISE = 1.0
#: Egress prices (``egress.default_usd_per_gb``, egress price CSV cells), USD per GB: at most 100,
#: 500x the dearest list price in the bundled table (0.19 USD/GB; internet egress 0.05-0.15).
MAX_EGRESS_USD_PER_GB = 100.0

#: Arrival rates (``rate_per_hour``, ``burst_rate_per_hour``), jobs per hour: at least 0.0001 (one job
#: in about 14 months; 1e-300 put arrival times at infinity) ...
MIN_RATE_PER_HOUR = 1e-4
#: ... and at most 100,000, the whole largest episode (``MAX_JOBS`` jobs) within an hour: bace-6's
#: 3,600 per hour is already a burst of jobs arriving within seconds.
MAX_RATE_PER_HOUR = 1e5
#: Mean sojourn and duration times in hours (mmpp's calm and burst, link good and bad states,
#: outages): at least 0.01 h (36 s).  Below it, state changes outnumber everything else in an episode.
MIN_MEAN_H = 0.01
#: Most expected state switches of an mmpp arrival process while it draws an episode's jobs
#: (``2 num_jobs / (mean rate x (mean_calm_h + mean_burst_h))``): each is a step of a Python loop
#: (about a microsecond), so a million is about a second.
MAX_MMPP_SWITCHES = 1_000_000
#: Most expected random events per episode over the horizon: outage starts and ends
#: (``2 x regions x rate_per_region_per_day x horizon_h / 24``) plus link-state changes
#: (``2 x dynamic links x horizon_h / (mean_good_h + mean_bad_h)``).  An outage event stops and
#: restarts the jobs it hits, about a millisecond each, so 100,000 keeps an episode within a few
#: minutes at worst (1e6 outages per region per day hung ``sfenv run``).
MAX_EVENTS = 100_000

#: Straggler episodes (``stragglers.rate_per_gpu_per_day``): at most 24 per GPU per day, one per
#: GPU-hour.  FALCON's fail-slows (Wu et al., arXiv 2410.12588, 2024) last tens of seconds to about
#: ten hours; a GPU slowed every hour is a broken GPU, which is an outage's business.  Their number
#: per episode is also held to :data:`MAX_EVENTS` (``2 x GPUs x rate x horizon_h / 24``).
MAX_STRAGGLER_RATE_PER_GPU_PER_DAY = 24.0
#: A straggler's slowdown of the stage it serves (``stragglers.slowdown``): at most 10x.  Beyond it
#: a GPU is as good as failed (the job would fall back to a checkpoint: outages model that); FALCON
#: injects and mitigates slowdowns well inside it.
MAX_STRAGGLER_SLOWDOWN = 10.0

#: Job shapes (custom models): layers at most 1,024 (the deepest published LLMs have about 130) ...
MAX_LAYERS = 1024
#: ... hidden size at most 65,536 (the largest published: 18,432 for PaLM 540B) ...
MAX_HIDDEN = 65_536
#: ... attention heads at most 1,024 (the largest published: 128) ...
MAX_HEADS = 1024
#: ... sequence length at most 1,048,576 tokens (the longest training contexts published, 1M) ...
MAX_SEQ_LEN = 1 << 20
#: ... vocabulary at most 1,048,576 (the largest published: 262,144).
MAX_VOCAB = 1 << 20
#: Global batch in sequences: at most 65,536, 32 times the largest published (2,048 for Llama 3).
MAX_BATCH = 65_536
#: Iterations of a job: at most 100,000,000, 100 times the optimiser steps of the longest published
#: runs (about a million).
MAX_ITERATIONS = 100_000_000
#: Grid carbon intensities (``carbon`` section: constants, profile means, CSV cells), gCO2e/kWh: at
#: most 5,000.  The dirtiest fuel's life-cycle factor is lignite's, about 1,100-1,200 (coal 820 in
#: the IPCC 2014 median set Electricity Maps uses); no grid averages above it.  Never negative.
MAX_CARBON_INTENSITY = 5000.0
#: ``carbon.start_hour``, where in a carbon CSV an episode's hour 0 falls: at most ten years of
#: hours (the :data:`MAX_PRICE_DAYS` of a price series).
MAX_CARBON_START_HOUR = 24 * 3660
#: ``carbon.embodied_kg_per_gpu_hour``, embodied (manufacturing) carbon per GPU-hour held, kg: at
#: most 10, about a thousand times the published estimates for a GPU-hour (tens of grams).
MAX_EMBODIED_KG_PER_GPU_HOUR = 10.0

#: A trace's submit offsets and durations, seconds: at most 1e9 (about 32 years).
MAX_TRACE_SECONDS = 1e9
#: Reward weights, the penalty and model-mix weights: at most 1e6 (weights only rescale; beyond, a
#: reward could overflow).
MAX_WEIGHT = 1e6
