"""``sfenv.experiments.derive_price_year``: other price years made as the shared 2023 file was, and their scenarios."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import yaml
from sfenv.experiments.derive_price_year import daily_profiles, main, pivot_csv, read_zone_year, source_file

from sfenv.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "docs" / "results" / "learned" / "v2"
SHARED_2023 = ROOT.parent / "shared" / "data" / "energy" / "electricity_price_usd_per_mwh_2023.csv"


def _write_zone(source: Path, zone: str, year: int, prices: list[float], minute: int = 0) -> Path:
    """A sustain-cluster-layout file for one zone: its rows at HH:``minute`` UTC, as the source writes them."""
    path = source_file(source, zone, year)
    path.parent.mkdir(parents=True, exist_ok=True)
    start = datetime(year, 1, 1, 0, minute, tzinfo=timezone.utc)
    rows = ["Datetime (UTC),Datetime (Local),Price (USD/MWh)"]
    for h, p in enumerate(prices):
        stamp = start + timedelta(hours=h)
        rows.append(f"{stamp.isoformat(sep=' ')},{stamp.isoformat(sep=' ')},{p!r}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _year(seed: int, hours: int = 8760) -> list[float]:
    """A year of prices with a daily shape: ``10 * hour of the day + seed``, plus a fraction to round."""
    return [10.0 * (h % 24) + seed + 0.12345 for h in range(hours)]


def test_pivot_and_profiles_follow_the_source(tmp_path: Path) -> None:
    _write_zone(tmp_path, "AA", 2023, _year(1))
    _write_zone(tmp_path, "BB", 2023, _year(2), minute=30)  # IN-WE's rows sit at HH:30: floored to HH:00
    text = pivot_csv(tmp_path, 2023, ("AA", "BB"))
    lines = text.splitlines()
    assert lines[0] == "datetime_utc,AA,BB" and len(lines) == 8761
    assert lines[1] == "2023-01-01T00:00:00Z,1.123,2.123" and lines[-1] == "2023-12-31T23:00:00Z,231.123,232.123"
    hourly = np.array([[float(r.split(",")[1 + i]) for r in lines[1:]] for i in range(2)])
    profiles = daily_profiles(hourly, ("AA", "BB"))
    assert profiles["AA"] == [round(10.0 * h + 1.123, 1) for h in range(24)]
    assert profiles["BB"][5] == 52.1


def test_a_leap_year_has_its_extra_day(tmp_path: Path) -> None:
    _write_zone(tmp_path, "AA", 2024, _year(0, 8784))
    assert len(read_zone_year(tmp_path, "AA", 2024)) == 8784
    _write_zone(tmp_path, "BB", 2024, _year(0, 8760))
    with pytest.raises(InvalidInput, match="8760 hourly rows; 2024 has 8784"):
        read_zone_year(tmp_path, "BB", 2024)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda rows: rows[:100] + rows[101:], r"line 101: .*expected the hour 2023-01-05 03:00 UTC"),
    (lambda rows: rows[:50] + [rows[50].replace("+00:00", "+01:00", 1)] + rows[51:], r"line 51: .*is not in UTC"),
    (lambda rows: rows[:7] + ["yesterday,x,1.0"] + rows[8:], r"line 8: .*'yesterday' is not an ISO timestamp"),
    (lambda rows: rows[:9] + [rows[9].rsplit(",", 1)[0] + ",nan"] + rows[10:], r"line 10.*Price \(USD/MWh\)"),
    (lambda rows: rows[:9] + [rows[9].rsplit(",", 1)[0] + ",1e12"] + rows[10:], r"line 10.*Price \(USD/MWh\)"),
    (lambda rows: rows + [rows[-1]], r"line 8762: .*one row per hour of 2023"),
    (lambda rows: [rows[0].replace("Price (USD/MWh)", "Price")] + rows[1:], r"no column 'Price \(USD/MWh\)'"),
])
def test_bad_source_rows_are_named(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = _write_zone(tmp_path, "AA", 2023, _year(0))
    rows = path.read_text().splitlines()
    path.write_text("\n".join(edit(rows)) + "\n")
    with pytest.raises(InvalidInput, match=message):
        read_zone_year(tmp_path, "AA", 2023)


def test_cli_writes_atomically_and_never_overwrites_unasked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sfenv.experiments.derive_price_year import GEO8_ZONES

    for i, zone in enumerate(GEO8_ZONES):
        _write_zone(tmp_path / "src", zone, 2023, _year(i))
    out = tmp_path / "out" / "prices.csv"
    main(["--source", str(tmp_path / "src"), "--year", "2023", "--out", str(out), "--profiles"])
    printed = capsys.readouterr().out
    assert out.read_text() == pivot_csv(tmp_path / "src", 2023)
    assert yaml.safe_load(printed)["profiles"]["SG"][0] == 5.1 and not list(out.parent.glob(".*.tmp"))
    out.write_text("mine")
    for argv, line in [
        (["--out", str(out)], f"sfenv: --out: {out} exists; pass --force to replace it"),
        (["--year", "1999", "--profiles"],
         "sfenv: --year: 1999 is not a year sustain-cluster can hold; expected 2000-2100"),
        ([], "sfenv: nothing to do: give --out PATH, --profiles or both"),
    ]:
        argv = ["--source", str(tmp_path / "src"), "--year", "2023", *argv]
        proc = subprocess.run([sys.executable, "-m", "sfenv.experiments.derive_price_year", *argv],
                              capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line + "\n"), argv
    assert out.read_text() == "mine"
    main(["--source", str(tmp_path / "src"), "--year", "2023", "--out", str(out), "--force"])
    assert out.read_text().startswith("datetime_utc,US-MIDA-PJM,")


@pytest.mark.skipif(not (os.environ.get("SFENV_SUSTAIN_CLUSTER") and SHARED_2023.is_file()),
                    reason="needs a sustain-cluster checkout in SFENV_SUSTAIN_CLUSTER and ../shared/data")
def test_2023_reproduces_the_shared_file_byte_for_byte() -> None:
    source = Path(os.environ["SFENV_SUSTAIN_CLUSTER"])
    assert pivot_csv(source, 2023) == SHARED_2023.read_text()


@pytest.mark.parametrize("year", [2022, 2024])
@pytest.mark.parametrize("base", ["scenarios/geo-8-contended.yaml",
                                  "docs/results/learned/v2/geo-6-contended-heldout.yaml",
                                  "docs/results/learned/v2/geo-5-contended-heldout-b.yaml"])
def test_price_year_scenarios_change_only_their_prices(base: str, year: int) -> None:
    """The held-out price-year scenarios are their base with other profiles: every zone's, nothing else."""
    original = yaml.safe_load((ROOT / base).read_text())
    name = f"{original['name']}-prices-{year}"
    other = yaml.safe_load((HELDOUT / f"{name}.yaml").read_text())
    assert other["name"] == name and other["description"].startswith(original["description"][:-1])
    old, new = original["prices"].pop("profiles"), other["prices"].pop("profiles")
    assert set(old) == set(new) == {r["zone"] for r in original["topology"]["regions"]}
    assert all(len(new[z]) == 24 and new[z] != old[z] for z in old)
    for cfg in (original, other):
        del cfg["name"], cfg["description"]
    assert other == original
