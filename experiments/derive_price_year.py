"""Pivot one year of sustain-cluster's hourly electricity prices into sfenv's price CSV, and its daily profiles.

Usage: ``python -m sfenv.experiments.derive_price_year --source DIR --year 2024 --out prices-2024.csv``
where DIR is a checkout of ``HewlettPackard/sustain-cluster`` (MIT; the files
``data/electricity_prices/standardized/<ZONE>/<YEAR>/<ZONE>_electricity_prices_<YEAR>.csv``, columns
``Datetime (UTC)`` and ``Price (USD/MWh)``, UTC, converted to USD at fixed rates by the source).  It writes
the format of the shared ``energy/electricity_price_usd_per_mwh_2023.csv`` (``datetime_utc``, then one
column per zone, USD/MWh rounded to 0.001), made as that file was (the data README): one row per hour,
rows at HH:30 (IN-WE) floored to HH:00, nothing filled.  ``--profiles`` also prints each zone's mean price
per UTC hour of the day, the ``prices.profiles`` of the geo-8 scenarios (as ``derive_geo8`` does for 2023).
``--zones`` names other zone folders of the source (default: geo-8's eight).

The check that it is made as the shared file was: ``--year 2023`` reproduces that file value for value
(``tests/test_derive_price_year.py`` does so when both are on the machine).  The source is data: each
file is read within :mod:`sfenv.world.files`' bounds, every timestamp must be the next hour, every price a
finite number within :data:`sfenv.world.limits.MAX_ABS_PRICE`; the output is written atomically and an
existing file is replaced only with ``--force``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs.results import atomic_write_text
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.limits import MAX_ABS_PRICE

__all__ = ["GEO8_ZONES", "daily_profiles", "pivot_csv", "read_zone_year", "source_file", "year_prices"]

#: the grid zones of the geo-8 scenarios, in the shared price CSV's column order
GEO8_ZONES = ("US-MIDA-PJM", "US-CAL-CISO", "CA-ON", "DE-LU", "JP-TK", "SG", "AU-NSW", "IN-WE")
TIME_COLUMN = "Datetime (UTC)"
PRICE_COLUMN = "Price (USD/MWh)"


def source_file(source: Path, zone: str, year: int) -> Path:
    """The sustain-cluster file of one zone and year under the checkout ``source``."""
    folder = source / "data" / "electricity_prices" / "standardized" / zone / str(year)
    return folder / f"{zone}_electricity_prices_{year}.csv"


def _hour(path: Path, line: int, text: str) -> datetime:
    """The UTC hour a row's timestamp falls in (HH:30 floored to HH:00); an unreadable one raises naming the line."""
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{path}, line {line}: column {TIME_COLUMN!r}: {text!r} is not an ISO timestamp") from None
    if stamp.tzinfo is None or stamp.utcoffset() != timedelta(0):
        raise InvalidInput(f"{path}, line {line}: column {TIME_COLUMN!r}: {text!r} is not in UTC (+00:00)")
    return stamp.replace(minute=0, second=0, microsecond=0)


def read_zone_year(source: Path, zone: str, year: int) -> np.ndarray:
    """One zone's hourly prices of ``year`` (USD/MWh), one per hour from 1 January 00:00 UTC, none missing.

    :raises InvalidInput: naming the file and line: a missing file or column, a timestamp that is not the
        next UTC hour of the year, a price that is not a finite number within ``MAX_ABS_PRICE``, or
        fewer rows than the year has hours.
    """
    path = source_file(source, zone, year)
    start = datetime(year, 1, 1, tzinfo=timezone.utc)
    hours = (datetime(year + 1, 1, 1, tzinfo=timezone.utc) - start) // timedelta(hours=1)
    prices: list[float] = []
    for line, row in csv_rows(path, [TIME_COLUMN, PRICE_COLUMN], "sustain-cluster price CSV"):
        expected = start + timedelta(hours=len(prices))
        if len(prices) >= hours or _hour(path, line, row[TIME_COLUMN]) != expected:
            raise InvalidInput(f"{path}, line {line}: column {TIME_COLUMN!r}: {row[TIME_COLUMN]!r}; expected the "
                               f"hour {expected:%Y-%m-%d %H:00} UTC (one row per hour of {year}, none missing)")
        prices.append(csv_number(path, line, PRICE_COLUMN, row[PRICE_COLUMN], -MAX_ABS_PRICE, MAX_ABS_PRICE))
    if len(prices) != hours:
        raise InvalidInput(f"{path}: {len(prices)} hourly rows; {year} has {hours}")
    return np.array(prices)


def year_prices(source: Path, year: int, zones: tuple[str, ...] = GEO8_ZONES) -> np.ndarray:
    """The zones' hourly prices of ``year`` (zones x hours, USD/MWh) rounded to 0.001 as the shared file's are.

    NumPy's rounding (``np.round``), which reproduces the shared 2023 file; Python's ``round`` differs in
    the last digit of a few hundred cells.
    """
    return np.round(np.array([read_zone_year(source, z, year) for z in zones]), 3)


def pivot_csv(source: Path, year: int, zones: tuple[str, ...] = GEO8_ZONES) -> str:
    """The price CSV of ``year``: ``datetime_utc`` and one column per zone, USD/MWh rounded to 0.001."""
    prices = year_prices(source, year, zones)
    start = datetime(year, 1, 1, tzinfo=timezone.utc)
    lines = ["datetime_utc," + ",".join(zones)]
    for h in range(prices.shape[1]):
        cells = ",".join(repr(float(x)) for x in prices[:, h])
        lines.append(f"{start + timedelta(hours=h):%Y-%m-%dT%H:%M:%SZ},{cells}")
    return "\n".join(lines) + "\n"


def daily_profiles(hourly: np.ndarray, zones: tuple[str, ...]) -> dict[str, list[float]]:
    """Each zone's mean price per UTC hour of the day over whole days (``hourly``: zones x hours), 0.1 USD/MWh."""
    days = hourly.shape[1] // 24
    return {z: [round(float(x), 1) for x in hourly[i, : days * 24].reshape(days, 24).mean(axis=0)]
            for i, z in enumerate(zones)}


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring); ``argv`` defaults to ``sys.argv[1:]``."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, required=True, help="a checkout of HewlettPackard/sustain-cluster")
    ap.add_argument("--year", type=int, required=True, help="the price year, e.g. 2022 or 2024")
    ap.add_argument("--out", type=Path, help="write the pivoted CSV here")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--profiles", action="store_true", help="print the zones' daily profiles as YAML")
    ap.add_argument("--zones", default=",".join(GEO8_ZONES),
                    help="comma list of the source's zone folders (default: the eight of geo-8)")
    args = ap.parse_args(argv)
    zones = tuple(z.strip() for z in args.zones.split(",") if z.strip())
    if not zones or len(set(zones)) != len(zones) or any("/" in z or z.startswith(".") for z in zones):
        raise InvalidInput(f"--zones: {args.zones!r}; expected different zone names such as US-MIDA-PJM,DE-LU")
    if not 2000 <= args.year <= 2100:
        raise InvalidInput(f"--year: {args.year} is not a year sustain-cluster can hold; expected 2000-2100")
    if args.out is None and not args.profiles:
        raise InvalidInput("nothing to do: give --out PATH, --profiles or both")
    if args.out is not None and args.out.exists() and not args.force:
        raise InvalidInput(f"--out: {args.out} exists; pass --force to replace it")
    if args.out is not None:
        atomic_write_text(args.out, pivot_csv(args.source, args.year, zones))
    if args.profiles:
        print("  profiles:")
        for zone, profile in sorted(daily_profiles(year_prices(args.source, args.year, zones), zones).items()):
            print(f"    {zone}: [{', '.join(str(x) for x in profile)}]")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
