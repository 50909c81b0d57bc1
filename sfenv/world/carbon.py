"""Grid carbon intensity per zone, in gCO2e/kWh, piecewise constant per hour, and its forecasts.

A :class:`CarbonSeries` is a :class:`~sfenv.world.prices.PriceSeries` of intensities: the same hourly
steps, the same periodic repetition and the same exact integral.  gCO2e/kWh is kgCO2e/MWh, so a job
drawing ``P`` watts from ``t0`` to ``t1`` in zone ``z`` emits ``P * (G_z(t1) - G_z(t0)) / 3.6e9`` kg,
with ``G_z`` the running integral of the intensity: electricity cost's formula with intensity for
price (:class:`sfenv.sim.billing.Billing` integrates both).

Every series names its **signal**: ``lca`` (life-cycle, Electricity Maps' headline figure, IPCC 2014
factors) or ``direct`` (combustion only), and the **source** of each zone's row: ``csv`` (a measured
hourly series), ``profile`` (synthetic diurnal and seasonal shape), ``constant``, or ``fallback`` (the
zone has no series of its own and got the scenario's default).

**Forecasts** (:class:`CarbonForecaster`) are issued at the start of each hour for the next ``H``
hours; three kinds:

- ``noisy`` (default): the true intensity times a seeded log-normal error that grows with the lead
  time as a random walk in log space, sized so that the mean absolute percentage error at a 24-hour
  lead is ``mape_24h`` (published day-ahead skill: 9.6 % averaged over 13 benchmark grids for
  CarbonX, comparable to CarbonCast; Maji et al. 2022, arXiv 2510.01521).  The shape (a random
  walk, errors correlated across lead hours) is our choice.  Like the forecast-error studies it
  follows (Wiesner et al., Middleware'21, add error to the actual series), it is built from the true
  future: it stands for a forecaster of that skill, not a model of the grid.
- ``persistence``: strictly causal, reading nothing after the issue hour: the forecast for hour
  ``h + k`` is the intensity of the same hour of the last day already seen (``h + k - 24 ceil(k/24)``).
- ``oracle``: the true future.  **Privileged**: no scheduler has it; results with it are bounds.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from sfenv.errors import InvalidInput
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.limits import MAX_CARBON_INTENSITY, MAX_PRICE_DAYS
from sfenv.world.portable import portable_dot, portable_exp
from sfenv.world.prices import JOULES_PER_MWH, PriceSeries

__all__ = [
    "BUNDLED_CARBON_CSV",
    "CARBON_SIGNALS",
    "DEFAULT_GCO2_PER_KWH",
    "FORECAST_KINDS",
    "PUBLISHED_DAY_AHEAD_MAPE",
    "CarbonForecaster",
    "CarbonSeries",
    "bundled_carbon_csv",
    "carbon_profile",
    "read_carbon_csv",
]

#: the signals a carbon series may carry: life-cycle (``lca``) or direct-combustion (``direct``) factors
CARBON_SIGNALS = ("lca", "direct")
#: the name of the bundled 2023 series (``carbon.path``'s default): 8 zones, hourly, both signals
BUNDLED_CARBON_CSV = "bundled"
#: the fallback intensity of a zone without a series, gCO2e/kWh: the world's power sector in 2023,
#: 481 g (Ember, Global Electricity Review 2024, as charted by Statista 943137; Ember's factors are
#: life-cycle ones, Our World in Data's "lifecycle carbon intensity of electricity" is the same series)
DEFAULT_GCO2_PER_KWH = 481.0
#: forecast kinds of :class:`CarbonForecaster`
FORECAST_KINDS = ("noisy", "persistence", "oracle")
#: day-ahead mean absolute percentage error of published carbon-intensity forecasts: 9.59 %, the
#: mean over CarbonCast's 13 benchmark grids (CarbonX, arXiv 2510.01521, "comparable with the
#: current state-of-the-art"; EnsembleCI reports about 20 % lower errors than CarbonCast on 11 grids)
PUBLISHED_DAY_AHEAD_MAPE = 0.0959


def bundled_carbon_csv() -> Path:
    """The bundled hourly 2023 carbon CSV (``sfenv/data/carbon``; provenance in its README)."""
    return Path(str(resources.files("sfenv").joinpath("data/carbon/carbon_intensity_gco2_per_kwh_2023.csv")))


class CarbonSeries(PriceSeries):
    """Hourly carbon intensity per zone, gCO2e/kWh; hour ``h`` covers simulated seconds [3600h, 3600(h+1)).

    :param zones: zone names, one per row of ``hourly``.
    :param hourly: array (zones x hours), gCO2e/kWh, not negative; repeats after its last hour.
    :param signal: ``"lca"`` or ``"direct"`` (:data:`CARBON_SIGNALS`), named wherever carbon is shown.
    :param sources: per zone, where its row comes from: ``csv``, ``profile``, ``constant`` or ``fallback``.
    :raises ValueError: for a negative intensity or an unknown signal.
    """

    def __init__(self, zones: Sequence[str], hourly: np.ndarray, signal: str = "lca",
                 sources: Mapping[str, str] | None = None):
        super().__init__(zones, hourly)
        if np.any(self.hourly < 0):
            raise ValueError("carbon intensities must not be negative")
        if signal not in CARBON_SIGNALS:
            raise ValueError(f"carbon signal {signal!r}: expected one of {list(CARBON_SIGNALS)}")
        self.signal = signal
        #: per zone, where its intensities come from (``csv``, ``profile``, ``constant``, ``fallback``)
        self.sources = {z: (sources or {}).get(z, "constant") for z in self.zones}

    @property
    def fallback_zones(self) -> list[str]:
        """Zones without a series of their own (they got the scenario's default)."""
        return [z for z in self.zones if self.sources[z] == "fallback"]

    def kg(self, zone_watts: np.ndarray, t0: float, t1: float) -> float:
        """Exact kgCO2e of drawing ``zone_watts`` (watts per zone, constant) over [t0, t1]."""
        return portable_dot(zone_watts, self.cumulative(t1) - self.cumulative(t0)) / JOULES_PER_MWH

    def hour_values(self, hours: np.ndarray) -> np.ndarray:
        """Intensities of absolute hours ``hours`` (zones x len(hours)), the series repeated periodically."""
        return self.hourly[:, np.asarray(hours) % self.hours]


def read_carbon_csv(path: str | Path, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Load columns of an hourly carbon CSV (a header line, one row per hour, gCO2e/kWh).

    :param path: the file (for example :func:`bundled_carbon_csv`), at most ten years of hourly rows.
    :param columns: the columns to read, e.g. ``"DE-LU_lca"``.
    :return: one array per column.
    :raises sfenv.errors.InvalidInput: (a ``ValueError``) naming the file, and the line and column where
        there is one: a missing column, no data rows, too many rows, a cell that is empty, not a number,
        negative or above :data:`~sfenv.world.limits.MAX_CARBON_INTENSITY`.
    """
    cols = [array("d") for _ in columns]
    hours = 0
    for line, rec in csv_rows(path, list(columns), "carbon CSV"):
        hours += 1
        if hours > 24 * MAX_PRICE_DAYS:
            raise InvalidInput(f"{path}, line {line}: more than {24 * MAX_PRICE_DAYS:,} hourly rows, the most a "
                               "carbon CSV may hold")
        for i, c in enumerate(columns):
            cols[i].append(csv_number(path, line, c, rec.get(c), 0.0, MAX_CARBON_INTENSITY))
    return {c: np.array(v) for c, v in zip(columns, cols)}


def carbon_profile(rng: np.random.Generator | None, mean: float, hours: int, *, diurnal_amplitude: float = 0.2,
                   seasonal_amplitude: float = 0.1, clean_hour_local: float = 13.0, utc_offset_h: float = 0.0,
                   start_hour: int = 0, noise: float = 0.0) -> np.ndarray:
    """A synthetic hourly intensity: ``mean x (1 - a_d cos(day phase)) x (1 + a_s cos(year phase))`` x noise.

    The day's minimum falls at ``clean_hour_local`` (local time: midday for a solar-rich grid), the
    year's maximum at the series' hour 0 plus ``start_hour`` counted from 1 January (winter in the
    north).  Our shape, a smooth stand-in where no measured series exists; the measured 2023 series
    (:func:`bundled_carbon_csv`) show both cycles, of very different sizes per zone.

    :param rng: draws the multiplicative log-normal noise (sd ``noise`` per hour); None: no noise.
    :param mean: gCO2e/kWh around which the shape moves.
    :param hours: length of the series.
    :return: the hourly intensities (never negative).
    """
    abs_hours = np.arange(start_hour, start_hour + hours, dtype=float)
    local = (abs_hours + utc_offset_h) % 24.0
    day = 1.0 - diurnal_amplitude * np.cos(2.0 * math.pi * (local - clean_hour_local) / 24.0)
    year = 1.0 + seasonal_amplitude * np.cos(2.0 * math.pi * abs_hours / (24.0 * 365.0))
    values = mean * day * year
    if noise > 0 and rng is not None:
        values = values * rng.lognormal(0.0, noise, size=values.shape)
    return np.clip(values, 0.0, MAX_CARBON_INTENSITY)


class CarbonForecaster:
    """Forecasts of a :class:`CarbonSeries` issued at the start of each hour (see the module docstring).

    :param series: the true intensities.
    :param kind: ``"noisy"``, ``"persistence"`` or ``"oracle"`` (:data:`FORECAST_KINDS`).
    :param mape_24h: ``noisy``: mean absolute percentage error at a 24-hour lead (0.0959 by default).
    :param seed: ``noisy``: seeds the errors; the forecast issued at hour ``h`` draws from a generator
        seeded by ``(seed, h)``, so it is the same whenever and however often it is asked for.
    """

    #: most issued forecasts remembered (cleared when full)
    MEMO = 512

    def __init__(self, series: CarbonSeries, kind: str = "noisy", mape_24h: float = PUBLISHED_DAY_AHEAD_MAPE,
                 seed: int = 0):
        if kind not in FORECAST_KINDS:
            raise ValueError(f"carbon forecast kind {kind!r}: expected one of {list(FORECAST_KINDS)}")
        if not 0.0 <= mape_24h <= 1.0:
            raise ValueError(f"carbon forecast mape_24h {mape_24h!r}: expected a fraction in [0, 1]")
        self.series = series
        self.kind = kind
        #: True for the oracle (the true future): a privileged input
        self.privileged = kind == "oracle"
        self.seed = int(seed)
        # E|N(0, s)| = s sqrt(2/pi): the 24-hour lead's log-error sd, spread over 24 hourly steps
        self._step_sd = mape_24h * math.sqrt(math.pi / 2.0) / math.sqrt(24.0)
        self._memo: dict[tuple[int, int], np.ndarray] = {}

    def issued(self, t: float, hours: int) -> np.ndarray:
        """The intensity now and the forecast for the next ``hours`` hours, as issued at ``t``'s hour.

        :return: array (zones x (1 + hours)): column 0 the current hour's intensity (measured, known),
            column ``k`` the forecast for the hour ``k`` hours on (read-only).
        """
        h = int(t // 3600.0)
        key = (h, hours)
        out = self._memo.get(key)
        if out is None:
            out = self._issue(h, hours)
            out.setflags(write=False)
            if len(self._memo) >= self.MEMO:
                self._memo.clear()
            self._memo[key] = out
        return out

    def _issue(self, h: int, hours: int) -> np.ndarray:
        s = self.series
        leads = np.arange(1, hours + 1)
        if self.kind == "persistence":
            seen = h + leads - 24 * np.ceil(leads / 24.0).astype(int)
            return np.concatenate([s.hour_values(np.array([h])), s.hour_values(np.maximum(seen, 0))], axis=1)
        truth = s.hour_values(np.arange(h, h + hours + 1))
        if self.kind == "oracle" or self._step_sd == 0.0:
            return truth.copy()
        steps = np.random.default_rng([self.seed, h]).standard_normal((len(s.zones), hours))
        errors = portable_exp(self._step_sd * np.cumsum(steps, axis=1))
        return np.concatenate([truth[:, :1], truth[:, 1:] * errors], axis=1)
