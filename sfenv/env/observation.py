"""Observation encoders of :class:`~sfenv.env.GeoSchedEnv`: one class per ``obs_mode``.

As HighwayEnv's observation types, an encoder gives the environment's observation space
(:meth:`FullObservation.space`) and encodes its current state (:meth:`FullObservation.observe`);
:func:`observation_encoder` builds the one an ``obs_mode`` names.  The features and their scales
are tabled in the environment's class docstring (Observation Space).  :class:`CompactObservation`
builds on the full observation: it derives its topology-independent features from the full one's
arrays.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import numpy as np
from gymnasium import spaces

from sfenv.model.perf import PlanPerf
from sfenv.world.portable import portable_dot, portable_vecmat

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.env.geosched import GeoSchedEnv
    from sfenv.sim import Simulator

__all__ = [
    "CAND_FEATURES",
    "CARBON_SCALE",
    "COMPACT_CAND_FEATURES",
    "COMPACT_CARBON_FEATURES",
    "GLOBAL_FEATURES",
    "JOB_FEATURES",
    "LINK_FEATURES",
    "OBS_MODES",
    "PLATFORM_FEATURES",
    "PRIVILEGED_GLOBAL_FEATURES",
    "REGION_FEATURES",
    "CompactObservation",
    "FullObservation",
    "ObservationEncoder",
    "observation_encoder",
]

REGION_FEATURES = 7  # + forecast window
LINK_FEATURES = 3
JOB_FEATURES = 8
CAND_FEATURES = 10
GLOBAL_FEATURES = 5
#: with ``privileged_obs=True`` the ``time`` block holds one more entry, the share of the episode's jobs
#: still to arrive (information a real scheduler does not have; the v0 ids' observation)
PRIVILEGED_GLOBAL_FEATURES = 6
#: compact observation (``obs_mode="compact"``): per-candidate features, and the platform summary size is
#: ``PLATFORM_FEATURES + H``; neither depends on the number of regions or links
COMPACT_CAND_FEATURES = 15
PLATFORM_FEATURES = 18
OBS_MODES = ("full", "compact")
_REGIONS_SCALE = 8.0  # regions a compact candidate uses, mapped to 1.0 at 8 (clipped)
_PRICE_SCALE = 300.0  # USD/MWh mapped to 1.0
_TFLOPS_SCALE = 1000.0
_MEM_SCALE = 141e9
_BW_SCALE = 100e9
_LAT_SCALE = 0.3
_WAIT_SCALE = 86400.0
_ITER_SCALE = 10_000.0
#: gCO2e/kWh mapped to 1.0 in the ``carbon`` key (the bundled 2023 series peak at 790)
CARBON_SCALE = 1000.0
#: compact ``carbon`` key: intensity now (min, GPU-weighted mean, max over regions), then the forecast
COMPACT_CARBON_FEATURES = 3
#: a candidate's cost rate (electricity plus egress, USD/h) mapped to 1.0, on ``log(1 + USD/h)``: electricity
#: of a plan is cents to a few hundred USD/h, its egress up to thousands (a 10 Gbit/s hop sending all the
#: time is 4,500 GB/h, 90 USD/h at 0.02 USD/GB, 855 at 0.19): a linear scale would clip every WAN plan
_COST_H_SCALE = 1e5
_LOG_COST_DIV = math.log1p(_COST_H_SCALE)
#: bound on the entries of :attr:`FullObservation._perf_features` (cleared when reached)
_PERF_FEATURE_ENTRIES = 4096

#: an hour's prices: ``(price now per region, [price now, forecast for the next H hours] per region / 300)``
_Forecast = tuple[list[float], np.ndarray]
#: the forecast of no hour (the base array is rebuilt on the next observation)
_NO_FORECAST: _Forecast = ([], np.zeros((0, 0)))


def _log_scale(x: float, lo: float, hi: float) -> float:
    """Map x in [lo, hi] to [0, 1] on a log scale (clipped)."""
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return math.log(x / lo) / math.log(hi / lo)


def _perf_features(perf: PlanPerf) -> tuple[float, float, float, float, float]:
    """A candidate's observation features that depend on its evaluation only.

    :param perf: the candidate's (feasible) evaluation.
    :return: scaled iteration time, throughput and bottleneck bandwidth, the memory headroom and the
        stall-free flag, as the candidate rows of the observation hold them (before clipping).
    """
    return (
        _log_scale(perf.iter_time, 0.01, _ITER_SCALE),
        _log_scale(perf.throughput, 1e2, 1e8),
        _log_scale(perf.bottleneck_bw_bps, 1e7, 1e12),
        perf.memory_headroom,
        1.0 if perf.stall_free else 0.0,
    )


class _EvaluationFigures:
    """A candidate row's figures read from one (shared, read-only) evaluation.

    :param perf: the evaluation (kept, so that its ``id`` is not reused while the entry lives).
    """

    __slots__ = ("cost", "features", "perf", "prices")

    def __init__(self, perf: PlanPerf) -> None:
        self.perf = perf
        #: :func:`_perf_features` of :attr:`perf`
        self.features = _perf_features(perf)
        #: the prices :attr:`cost` is for (None: not computed yet)
        self.prices: list[float] | None = None
        #: the electricity cost per hour at :attr:`prices` (USD/h)
        self.cost = 0.0


class ObservationEncoder(Protocol):
    """What :class:`~sfenv.env.GeoSchedEnv` asks of the encoder of its ``obs_mode``."""

    def space(self) -> spaces.Dict:
        """The observation space."""
        ...

    def new_episode(self, sim: Simulator) -> None:
        """Take in the episode ``sim`` plays (called at every reset, before the first observation)."""
        ...

    def observe(self) -> dict[str, np.ndarray]:
        """The observation of the environment's current state (an element of :meth:`space`)."""
        ...


def _box(n: int) -> spaces.Box:
    """A 1-D ``Box(0, 1, float32)`` of ``n`` entries."""
    return spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)


class FullObservation:
    """``obs_mode="full"``: per-region, per-link, queue, candidate and time features (one flat buffer).

    Every observation is a fresh buffer of float32, copied from a base array that holds the static
    region and link features, this hour's prices and the current link figures (rebuilt when those
    change); the per-step features are written into it, it is clipped to [0, 1] once and handed
    out as one view per key.  The encoder reads the environment's current state (its simulator,
    candidates and mask).

    :param env: the environment observed (its sizes, topology and ``privileged_obs`` are read once).
    """

    def __init__(self, env: GeoSchedEnv) -> None:
        self.env = env
        self.num_regions, self.num_links = env.num_regions, env.num_links
        self.max_candidates, self.queue_window, self.forecast_hours = (env.max_candidates, env.queue_window,
                                                                       env.forecast_hours)
        self.privileged_obs = env.privileged_obs
        topo = env.scenario.topology
        #: hours of carbon forecast in the ``carbon`` key (0: no key, ``carbon_obs`` is off)
        self.carbon_hours = env.scenario.carbon_cfg.forecast.hours if env.carbon_obs else 0
        #: region -> its zone's row in the episode's carbon series
        self._region_zone = np.array([sorted({r.zone for r in topo.regions}).index(r.zone) for r in topo.regions])
        gpus = topo.gpu_counts.astype(np.float64)
        self._gpu_weights = gpus / max(1.0, float(gpus.sum()))
        full = self._full_space()
        #: where each key's entries lie in the flat buffer
        self._obs_slices: dict[str, slice] = {}
        start = 0
        for key, space in full.spaces.items():
            size = spaces.flatdim(space)
            self._obs_slices[key] = slice(start, start + size)
            start += size
        self._gpu_div = np.maximum(1, topo.gpu_counts)
        #: per region: GPUs (/1024), peak TFLOP/s, GPU memory and PUE - 1, scaled
        self._static_regions = np.array(
            [
                [min(1.0, r.num_gpus / 1024), r.gpu.tflops / _TFLOPS_SCALE, r.gpu.memory_bytes / _MEM_SCALE,
                 min(1.0, r.pue - 1.0)]
                for r in topo.regions
            ],
            dtype=np.float32,
        )
        link_static = np.array([[min(1.0, lat / _LAT_SCALE)] for lat in topo.link_latency_s],
                               dtype=np.float32).reshape(-1, 1)
        #: the buffer's static features (regions' and links' figures), zeros elsewhere
        self._template = np.zeros(start, dtype=np.float32)
        self._regions_of(self._template)[:, 1:5] = self._static_regions
        if self.num_links:
            self._template[self._obs_slices["links"]].reshape(self.num_links, LINK_FEATURES)[:, 2:3] = link_static
        #: the observation's array before per-step features: the template with this hour's prices and the
        #: current link figures (rebuilt when the forecast object or the link state changes)
        self._base = self._template
        #: the forecast :attr:`_base` holds (:data:`_NO_FORECAST`: none, rebuilt on the next observation)
        self._base_forecast = _NO_FORECAST
        #: per link: scaled capacity and flow share, for the link state :attr:`_link_key`
        self._link_dyn = np.zeros((self.num_links, 2))
        self._link_key = b""
        #: ``id(perf) -> its figures``: the candidate rows' figures per (shared, read-only) evaluation,
        #: kept while the plan caches hand it out
        self._perf_features: dict[int, _EvaluationFigures] = {}
        #: this episode's hourly prices, per hour since its start
        self._forecast: dict[int, _Forecast] = {}
        #: per job of the episode: static queue features, arrival time and iterations
        self._job_rows: list[tuple[float, ...]] = []
        self._job_arrival: list[float] = []
        self._job_iters: list[float] = []

    def _full_space(self) -> spaces.Dict:
        """The full observation's space (the layout of the buffer every encoder builds)."""
        return spaces.Dict(
            {
                "regions": _box(self.num_regions * (REGION_FEATURES + self.forecast_hours)),
                "links": _box(max(1, self.num_links) * LINK_FEATURES),
                "queue": _box(self.queue_window * JOB_FEATURES),
                "candidates": _box(self.max_candidates * CAND_FEATURES),
                "time": _box(PRIVILEGED_GLOBAL_FEATURES if self.privileged_obs else GLOBAL_FEATURES),
            }
        )

    def space(self) -> spaces.Dict:
        """The observation space: a ``Dict`` of 1-D ``Box(0, 1, float32)`` (see the environment's docstring)."""
        return self._with_carbon(self._full_space(), self.num_regions * (1 + self.carbon_hours))

    def _with_carbon(self, space: spaces.Dict, size: int) -> spaces.Dict:
        """``space`` with the ``carbon`` key of ``size`` entries added, when the env's ``carbon_obs`` is on."""
        if not self.carbon_hours:
            return space
        return spaces.Dict({**space.spaces, "carbon": _box(size)})

    def _carbon_rows(self) -> np.ndarray:
        """Per region: the intensity now and the forecast issued now for the next hours (gCO2e/kWh), C x (1 + H_c).

        What :class:`sfenv.world.carbon.CarbonForecaster` issued at the current hour (the scenario's
        ``carbon.forecast``): nothing measured after now unless the forecast is the (privileged) oracle.
        """
        sim = self.env.sim
        assert sim is not None and sim.carbon_forecaster is not None
        return sim.carbon_forecaster.issued(sim.time, self.carbon_hours)[self._region_zone]

    def _carbon_obs(self) -> np.ndarray:
        """The ``carbon`` key of the full observation: :meth:`_carbon_rows` / :data:`CARBON_SCALE`, clipped."""
        return np.clip(self._carbon_rows().reshape(-1) / CARBON_SCALE, 0.0, 1.0).astype(np.float32)

    def _regions_of(self, buf: np.ndarray) -> np.ndarray:
        """The regions block of a buffer as a ``C x (7 + H)`` view."""
        return buf[self._obs_slices["regions"]].reshape(self.num_regions, REGION_FEATURES + self.forecast_hours)

    def new_episode(self, sim: Simulator) -> None:
        """Per-job static queue features of the episode ``sim`` plays, computed once per episode.

        :param sim: the episode's simulator (at its start).
        """
        specs = [js.spec for js in sim.jobs]
        # per job: present, log-scaled parameters (once per model size), GPU bounds, log-scaled
        # iterations, global batch: Python floats, as the float64 table they were first read from held them
        scaled_params: dict[float, float] = {}
        rows: list[tuple[float, ...]] = []
        for j in specs:
            params = float(j.model.params)
            scaled = scaled_params.get(params)
            if scaled is None:
                scaled = scaled_params[params] = _log_scale(params, 1e8, 1e12)
            rows.append((1.0, scaled, j.min_gpus / 1024, j.max_gpus / 1024, _log_scale(float(j.iterations), 1, 1e6),
                         j.global_batch / 1024))
        self._job_rows = rows
        self._job_arrival = [j.arrival for j in specs]
        self._job_iters = [float(j.iterations) for j in specs]
        self._forecast = {}
        self._link_key = b""
        self._base_forecast = _NO_FORECAST  # rebuilt on the episode's first step

    def observe(self) -> dict[str, np.ndarray]:
        """The observation of the environment's current state (one view of a fresh buffer per key)."""
        env = self.env
        sim, view = env.sim, env._view
        assert sim is not None and view is not None
        C, N, K, H = self.num_regions, self.max_candidates, self.queue_window, self.forecast_hours
        sl = self._obs_slices
        # price now and forecast (cached per hour); links: capacity and flow share (recomputed only
        # when the link state changed): both written into a base array rebuilt when either changes
        hour_key = int(sim.time // 3600.0)
        fc = self._forecast.get(hour_key)
        if fc is None:
            raw = view.price_forecast(H)
            fc = (raw[:, 0].tolist(), np.hstack([raw[:, :1], raw]) / _PRICE_SCALE)
            self._forecast[hour_key] = fc
        key = sim.link_flows.tobytes() + sim.link_factor.tobytes() if self.num_links else b""
        if fc is not self._base_forecast or key != self._link_key:
            self._rebuild_base(sim, fc, key)
        # one fresh array per step (static, price and link features already in place), views per key, one clip
        buf = self._base.copy()
        # regions: free fraction, (static), outage, (prices)
        reg = buf[sl["regions"]].reshape(C, REGION_FEATURES + H)
        reg[:, 0] = view.free_gpus / self._gpu_div  # free GPUs, 0 where the region is down
        reg[:, 5] = sim.down
        # queue: static rows plus time waited and progress
        ids = sim.waiting[:K]
        if ids:
            queue = self._queue_rows(sim, ids)
            buf[sl["queue"]][: len(queue)] = queue
        # candidates
        if env._candidates:
            slot = {j: i for i, j in enumerate(ids)}
            prices = fc[0]
            mask = env._mask
            cand_rows: list[float] = []  # row after row, flat
            idx: list[int] = []
            features = self._perf_features
            if len(features) >= _PERF_FEATURE_ENTRIES:
                features.clear()
            for i, plan in enumerate(env._candidates):
                perf = env._perf(i)
                if not perf.feasible:
                    continue
                # the features read from ``perf`` (and this hour's prices), per evaluation object: the
                # plan caches hand the same shared, read-only PlanPerf to a candidate step after step
                known = features.get(id(perf))
                if known is None or known.perf is not perf:
                    known = features[id(perf)] = _EvaluationFigures(perf)
                if known.prices is not prices:  # the electricity cost per hour: for this hour's prices
                    cost_h = sum(w * prices[r] for r, w in perf.power_by_region.items()) / 3.6e9 * 3600.0
                    known.prices, known.cost = prices, cost_h
                cost_h = known.cost
                if len(plan.regions) > 1:  # plus the egress the simulator bills per hour on this plan
                    cost_h += view.plan_egress_usd_per_iter(plan) / perf.iter_time * 3600.0
                f = known.features
                idx.append(i)
                cand_rows += (
                    1.0 if mask[i] else 0.0,
                    slot.get(plan.job_id, K) / K,
                    f[0],
                    f[1],
                    math.log1p(cost_h) / _LOG_COST_DIV,
                    len(plan.regions) / C,
                    plan.gpus / 1024,
                    f[2],
                    f[3],
                    f[4],
                )
            if cand_rows:
                if len(idx) == idx[-1] + 1:  # the usual case: rows 0..n-1
                    buf[sl["candidates"]][: len(cand_rows)] = cand_rows
                else:
                    rows = np.reshape(cand_rows, (len(idx), CAND_FEATURES))
                    buf[sl["candidates"]].reshape(N, CAND_FEATURES)[idx] = rows
        hour = (sim.time / 3600.0) % 24.0
        clock = ((math.sin(2 * math.pi * hour / 24) + 1) / 2, (math.cos(2 * math.pi * hour / 24) + 1) / 2,
                 len(sim.running) / K, len(sim.waiting) / K)
        invalid_flag = 1.0 if env._last_invalid else 0.0
        if self.privileged_obs:  # v0's layout: the share of jobs still to arrive before the flag
            buf[sl["time"]] = (*clock, view.pending_arrivals / max(1, len(sim.jobs)), invalid_flag)
        else:
            buf[sl["time"]] = (*clock, invalid_flag)
        np.minimum(buf, 1.0, out=buf)
        np.maximum(buf, 0.0, out=buf)
        out = {k: buf[v] for k, v in sl.items()}
        if self.carbon_hours and type(self) is FullObservation:
            out["carbon"] = self._carbon_obs()
        return out

    def _queue_rows(self, sim: Simulator, ids: list[int]) -> list[float]:
        """The queue features of waiting jobs ``ids``, row after row in one flat list.

        Each row: the job's static features (:meth:`new_episode`), the time it has waited and its
        progress.  (NumPy converts a flat list faster than rows of tuples.)

        :param sim: the environment's simulator.
        :param ids: the job ids, in queue order.
        """
        jobs, now, arrival, iters, rows = sim.jobs, sim.time, self._job_arrival, self._job_iters, self._job_rows
        queue: list[float] = []
        for j in ids:
            queue += rows[j]
            queue.append((now - arrival[j]) / _WAIT_SCALE)
            queue.append(jobs[j].progress / iters[j])
        return queue

    def _rebuild_base(self, sim: Simulator, forecast: _Forecast, link_key: bytes) -> None:
        """Rebuild :attr:`_base`: the template with this hour's prices and the current link figures.

        :param sim: the environment's simulator.
        :param forecast: this hour's ``(prices now, scaled price forecast)`` (:attr:`_forecast` entry).
        :param link_key: the link flows' and capacity factors' bytes (the link figures are recomputed
            when they differ from the last ones seen).
        """
        base = self._template.copy()
        self._regions_of(base)[:, 6:] = forecast[1]
        if self.num_links:
            if link_key != self._link_key:
                flows = sim.link_flows
                self._link_dyn = np.stack([sim.link_capacity_bps / _BW_SCALE, flows / (flows + 1.0)], axis=1)
                self._link_key = link_key
            base[self._obs_slices["links"]].reshape(self.num_links, LINK_FEATURES)[:, :2] = self._link_dyn
        self._base, self._base_forecast = base, forecast


class CompactObservation(FullObservation):
    """``obs_mode="compact"``: candidate, queue, platform and time features whose sizes do not depend on the topology.

    Derived from the full observation (built as :class:`FullObservation` builds it, then summarised):
    the candidate rows gain five features, the region and link blocks become the platform summary.

    :param env: the environment observed.
    """

    def space(self) -> spaces.Dict:
        """The observation space: ``candidates``, ``queue``, ``platform`` and ``time`` (see the env's docstring)."""
        return self._with_carbon(spaces.Dict(
            {
                "candidates": _box(self.max_candidates * COMPACT_CAND_FEATURES),
                "queue": _box(self.queue_window * JOB_FEATURES),
                "platform": _box(PLATFORM_FEATURES + self.forecast_hours),
                "time": _box(PRIVILEGED_GLOBAL_FEATURES if self.privileged_obs else GLOBAL_FEATURES),
            }
        ), COMPACT_CARBON_FEATURES + self.carbon_hours)

    def _carbon_obs(self) -> np.ndarray:
        """The compact ``carbon`` key: intensity now (min, GPU-weighted mean, max), then the GPU-weighted forecast."""
        rows = self._carbon_rows()
        now = rows[:, 0]
        out = np.concatenate([[now.min(), portable_dot(self._gpu_weights, now), now.max()],
                              portable_vecmat(self._gpu_weights, rows[:, 1:])])
        return np.clip(out / CARBON_SCALE, 0.0, 1.0).astype(np.float32)

    def observe(self) -> dict[str, np.ndarray]:
        """The topology-independent observation of the environment's current state."""
        full = FullObservation.observe(self)
        env = self.env
        sim = env.sim
        assert sim is not None
        C, N, H = self.num_regions, self.max_candidates, self.forecast_hours
        # the full observation's prices: now and the next H hours per region (USD/MWh / 300, unclipped), C x (1 + H)
        forecast = self._base_forecast[1]
        free = np.where(sim.down, 0, sim.free).astype(np.float64)
        gpus = env.scenario.topology.gpu_counts.astype(np.float64)
        total_free = float(free.sum())
        cands = np.zeros((N, COMPACT_CAND_FEATURES), dtype=np.float32)
        cands[:, :CAND_FEATURES] = full["candidates"].reshape(N, CAND_FEATURES)
        runtimes: dict[int, float] = {}
        rows: list[tuple[int, int, float]] = []
        for i, plan in enumerate(env._candidates):
            perf = env._perf(i)
            if not perf.feasible:
                continue
            js = sim.jobs[plan.job_id]
            remaining = max(0.0, float(js.spec.iterations) - js.progress)
            rt = remaining * perf.iter_time
            rows.append((i, plan.job_id, rt))
            runtimes[plan.job_id] = min(rt, runtimes.get(plan.job_id, math.inf))
            cands[i, 5] = len(plan.regions) / _REGIONS_SCALE
            cands[i, 10] = _log_scale(rt, 60.0, 30 * 86400.0)
            cands[i, 11] = plan.gpus / total_free if total_free > 0 else 1.0
            cands[i, 12] = (sim.time - self._job_arrival[plan.job_id]) / _WAIT_SCALE
        if rows:
            shortest = min(runtimes.values())
            for i, job, rt in rows:
                best = runtimes[job]
                cands[i, 13] = best / rt if rt > 0 else 1.0
                cands[i, 14] = shortest / best if best > 0 else 1.0
        reg = full["regions"].reshape(C, REGION_FEATURES + H)
        ranked = np.sort(reg[:, 0])  # quartiles by linear interpolation, as np.quantile (which is slower)
        qs = np.interp((0.0, 0.25, 0.5, 0.75, 1.0), np.linspace(0.0, 1.0, C), ranked)
        prices = forecast[:, 0]
        weights = gpus / max(1.0, float(gpus.sum()))
        links = full["links"].reshape(-1, LINK_FEATURES)[: max(1, self.num_links)]
        platform = np.empty(PLATFORM_FEATURES + H, dtype=np.float32)
        platform[:PLATFORM_FEATURES] = (
            total_free / max(1.0, float(gpus.sum())),
            _log_scale(float(gpus.sum()), 1.0, 65536.0),
            _log_scale(float(C), 1.0, 256.0),
            float(np.mean(sim.down)) if C else 0.0,
            *qs,
            float(prices.min()), float(prices.mean()), float(prices.max()),
            float(links[:, 0].mean()), float(links[:, 0].min()), float(links[:, 1].mean()), float(links[:, 2].mean()),
            _log_scale(float(self.num_links), 1.0, 4096.0),
            portable_dot(weights, self._static_regions[:, 1]),
        )
        platform[PLATFORM_FEATURES:] = portable_vecmat(weights, forecast[:, 1:])
        np.clip(cands, 0.0, 1.0, out=cands)
        np.clip(platform, 0.0, 1.0, out=platform)
        out = {"candidates": cands.reshape(-1), "queue": full["queue"], "platform": platform, "time": full["time"]}
        if self.carbon_hours:
            out["carbon"] = self._carbon_obs()
        return out


#: the encoder class of each ``obs_mode`` (:data:`OBS_MODES`)
_ENCODERS: dict[str, type[FullObservation]] = {"full": FullObservation, "compact": CompactObservation}


def observation_encoder(env: GeoSchedEnv, obs_mode: str) -> ObservationEncoder:
    """The observation encoder of ``obs_mode`` for ``env`` (HighwayEnv's ``observation_factory``).

    :param env: the environment to observe (its sizes and scenario set).
    :param obs_mode: one of :data:`OBS_MODES`.
    :raises ValueError: for another mode.
    """
    encoder = _ENCODERS.get(obs_mode)
    if encoder is None:
        raise ValueError(f"obs_mode={obs_mode!r}: expected one of {list(OBS_MODES)}")
    return encoder(env)
