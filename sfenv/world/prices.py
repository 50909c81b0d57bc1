"""Electricity prices per zone, in USD/MWh, piecewise constant per hour.

A :class:`PriceSeries` holds one hourly series per zone over a finite horizon and repeats it
periodically beyond.  Costs are integrated *exactly* over the hourly steps: a job drawing
``P`` watts from ``t0`` to ``t1`` in zone ``z`` costs ``P * (F_z(t1) - F_z(t0)) / 3.6e9`` USD,
where ``F_z`` is the running integral of the price (USD/MWh x s).

Generators: :func:`time_of_use` (a synthetic day curve shifted by each zone's UTC offset, with
multiplicative noise) and :func:`from_daily_profiles` (24 measured hourly means per zone, tiled
over days, optionally with noise).  :func:`read_price_csv` loads an hourly CSV.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from sfenv.errors import InvalidInput
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.limits import MAX_ABS_PRICE, MAX_PRICE_DAYS
from sfenv.world.portable import portable_exp

__all__ = ["JOULES_PER_MWH", "PriceSeries", "from_daily_profiles", "read_price_csv", "time_of_use"]

JOULES_PER_MWH = 3.6e9


class PriceSeries:
    """Hourly prices per zone, USD/MWh; hour ``h`` covers simulated seconds [3600h, 3600(h+1)).

    :param zones: zone names, one per row of ``hourly``.
    :param hourly: array (zones x hours) in USD/MWh; repeats after its last hour.
    """

    def __init__(self, zones: Sequence[str], hourly: np.ndarray):
        hourly = np.asarray(hourly, dtype=float)
        if hourly.ndim != 2 or hourly.shape[0] != len(zones) or hourly.shape[1] < 1:
            raise ValueError(f"hourly prices must be (zones={len(zones)}, hours>=1), got {hourly.shape}")
        if not np.all(np.isfinite(hourly)):
            raise ValueError("hourly prices must be finite")
        self.zones = list(zones)
        self.zone_index = {z: i for i, z in enumerate(self.zones)}
        self.hourly = hourly
        self.hours = hourly.shape[1]
        # cum[:, h] = integral of price over [0, 3600 h) in USD/MWh * s
        self._cum = np.concatenate([np.zeros((len(zones), 1)), np.cumsum(hourly * 3600.0, axis=1)], axis=1)
        self._period_total = self._cum[:, -1]
        #: per hour since 0: ``(F at the hour's start, the hour's prices)`` (:meth:`cumulative`'s first
        #: two terms summed as it sums them, and a contiguous copy of the price column)
        self._hour_terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _split(self, t: float) -> tuple[int, int, float]:
        hour = int(t // 3600.0)
        periods, h = divmod(hour, self.hours)
        return periods, h, t - hour * 3600.0

    def prices_at(self, t: float) -> np.ndarray:
        """Price of every zone at time ``t`` (USD/MWh)."""
        _, h, _ = self._split(t)
        return self.hourly[:, h]

    def cumulative(self, t: float) -> np.ndarray:
        """Running integral F(t) of every zone's price, USD/MWh x s.

        ``periods * total + cum[h] + frac * price[h]``, the first two terms remembered per hour
        (the same additions in the same order: simulators ask for many times within each hour).
        """
        hour = int(t // 3600.0)
        terms = self._hour_terms.get(hour)
        if terms is None:
            periods, h = divmod(hour, self.hours)
            terms = self._hour_terms[hour] = (periods * self._period_total + self._cum[:, h], self.hourly[:, h].copy())
        return terms[0] + (t - hour * 3600.0) * terms[1]

    def integral(self, zone: int, t0: float, t1: float) -> float:
        """Exact integral of zone ``zone``'s price over [t0, t1], USD/MWh x s."""
        return float(self.cumulative(t1)[zone] - self.cumulative(t0)[zone])

    def forecast(self, t: float, hours: int) -> np.ndarray:
        """Prices of the current and next ``hours - 1`` hours, array (zones x hours)."""
        _, h, _ = self._split(t)
        idx = (h + np.arange(hours)) % self.hours
        return self.hourly[:, idx]

    def next_change(self, t: float) -> float:
        """Start time of the next hour after ``t``."""
        return (int(t // 3600.0) + 1) * 3600.0

    @property
    def max_price(self) -> float:
        """Largest price in the series."""
        return float(self.hourly.max())


def _tou_curve(local_hours: np.ndarray) -> np.ndarray:
    """A unit time-of-use shape: low at night, a morning shoulder and an evening peak (0..1)."""
    morning = portable_exp(-0.5 * ((local_hours - 9.0) / 2.5) ** 2)
    evening = portable_exp(-0.5 * ((local_hours - 19.0) / 2.0) ** 2)
    return np.clip(0.6 * morning + 1.0 * evening, 0.0, 1.0)


@lru_cache(maxsize=256)
def _tou_shape(utc_offset_h: float, days: int) -> np.ndarray:
    """:func:`_tou_curve` of each UTC hour of ``days`` days in a zone ``utc_offset_h`` ahead (memoised, read-only).

    A pure function of the offset and the days, the same for every episode (and for zones sharing
    an offset); only the noise :func:`time_of_use` multiplies it by is drawn per episode.
    """
    hours = np.arange(24 * days, dtype=float)
    shape = _tou_curve((hours + utc_offset_h) % 24.0)
    shape.setflags(write=False)
    return shape


def time_of_use(
    rng: np.random.Generator | None,
    zones: Sequence[str],
    base: Mapping[str, float],
    peak: Mapping[str, float],
    utc_offset_h: Mapping[str, float],
    days: int,
    noise: float = 0.0,
) -> PriceSeries:
    """Synthetic time-of-use prices: ``base + (peak - base) * shape(local hour)`` x noise.

    :param noise: standard deviation of a multiplicative log-normal factor per hour (0 = none).
    """
    if not zones:
        return PriceSeries(zones, np.array([]))  # which says what is wrong
    # all zones at once: row z is ``base + (peak - base) * shape`` as written per zone, and the noise
    # of all zones in one draw is the zones' draws one after another (the generator fills in order)
    lows = np.array([float(base[z]) for z in zones]).reshape(-1, 1)
    spans = np.array([peak[z] - base[z] for z in zones], dtype=float).reshape(-1, 1)
    shapes = np.array([_tou_shape(utc_offset_h.get(z, 0.0), days) for z in zones]).reshape(len(zones), 24 * days)
    curves = lows + spans * shapes
    if noise > 0 and rng is not None:
        curves = curves * rng.lognormal(0.0, noise, size=curves.shape)
    return PriceSeries(zones, curves)


def from_daily_profiles(
    rng: np.random.Generator | None,
    profiles: Mapping[str, Sequence[float]],
    days: int,
    noise: float = 0.0,
) -> PriceSeries:
    """Tile 24 hourly (UTC) values per zone over ``days`` days, with optional multiplicative noise."""
    zones = list(profiles)
    rows = []
    for z in zones:
        p = np.asarray(profiles[z], dtype=float)
        if p.shape != (24,):
            raise ValueError(f"daily profile of zone {z!r} must have 24 values, got {p.shape[0]}")
        row = np.tile(p, days)
        if noise > 0 and rng is not None:
            row = row * rng.lognormal(0.0, noise, size=row.shape)
        rows.append(row)
    return PriceSeries(zones, np.array(rows))


def read_price_csv(path: str | Path, zones: Sequence[str] | None = None, time_col: str = "datetime_utc") -> PriceSeries:
    """Load an hourly price CSV (one column per zone, USD/MWh) into a :class:`PriceSeries`.

    :param path: the file: a header line, then one row per hour, at most ten years of them
        (:data:`~sfenv.world.limits.MAX_PRICE_DAYS` days).
    :param zones: the zone columns to read (default: every column but ``time_col``).
    :param time_col: the timestamp column, not read.
    :return: the series, one row per zone.
    :raises sfenv.errors.InvalidInput: (a ``ValueError``) naming the file, and the line and column
        where there is one: a missing or empty file, a missing zone column, no data rows, too many
        rows, a cell that is empty, not a finite number or beyond
        :data:`~sfenv.world.limits.MAX_ABS_PRICE` either way.
    """
    cols: list[array[float]] | None = None  # 8 bytes a price (a list of floats takes 32)
    use: list[str] = list(zones) if zones is not None else []
    hours = 0
    for line, rec in csv_rows(path, use, "price CSV"):
        if cols is None:
            if zones is None:
                use = [f for f in rec if f is not None and f != time_col]
            cols = [array("d") for _ in use]
        hours += 1
        if hours > 24 * MAX_PRICE_DAYS:
            raise InvalidInput(f"{path}, line {line}: more than {24 * MAX_PRICE_DAYS:,} hourly rows "
                               f"({MAX_PRICE_DAYS} days), the most a price CSV may hold")
        for i, z in enumerate(use):
            cols[i].append(csv_number(path, line, z, rec.get(z), -MAX_ABS_PRICE, MAX_ABS_PRICE))
    assert cols is not None  # csv_rows raises when there is no data row
    return PriceSeries(use, np.array(cols))
