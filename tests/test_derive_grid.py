"""``sfenv.experiments.derive_grid``: measured grids for other regions, and the held-out scenarios made from one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sfenv.experiments.derive_geo8 import derive
from sfenv.experiments.derive_grid import COLUMNS, grid_csv, grid_rows
from sfenv.experiments.derive_price_year import daily_profiles, year_prices

from sfenv.errors import InvalidInput
from sfenv.scenario import load_scenario
from sfenv.world.egress import CloudSite, load_egress_table

ROOT = Path(__file__).resolve().parents[1]
OTHER = ROOT / "docs" / "results" / "learned" / "v2" / "other-regions"
SCENARIOS = ["geo-8-other-contended-heldout", "geo-6-other-contended-heldout-b"]
SHARED_GRID = ROOT.parent / "shared" / "data" / "network" / "skyplane_grid_jan2022_8regions.csv"
GEO8 = ["aws:us-east-1", "aws:us-west-1", "azure:canadacentral", "aws:eu-central-1", "aws:ap-northeast-1",
        "gcp:asia-southeast1-a", "azure:australiaeast", "gcp:asia-south1-a"]
TP_HEAD = ("src_region,src_tier,src_instance_class,dst_region,dst_tier,dst_instance_class,iperf3_connections,"
           "throughput_sent,throughput_received,success")
LAT_HEAD = "src_region,src_tier,src_instance_class,dst_region,dst_tier,dst_instance_class,min_rtt,avg_rtt,max_rtt"


def _sources(tmp_path: Path, extra_tp: list[str] = (), extra_lat: list[str] = (),  # type: ignore[assignment]
             skip: tuple[str, str] | None = None) -> tuple[Path, Path]:
    """Skyplane-format files for regions x, y, z: every directed pair once, plus ``extra`` rows, less ``skip``."""
    tp, lat = [TP_HEAD], [LAT_HEAD]
    for i, (a, b) in enumerate([(a, b) for a in "xyz" for b in "xyz" if a != b]):
        if (a, b) == skip:
            continue
        tp.append(f"c:{a},PREMIUM,vm8,c:{b},PREMIUM,vm8,64,{5e9 + i},{(1 + i) * 1e9 + 12345.6},True")
        lat.append(f"c:{a},PREMIUM,vm1,c:{b},PREMIUM,vm1,{10 + i}.1,{10 + i}.25,{10 + i}.5")
    # rows the cut leaves out: the standard tier, a failed run, a region not asked for, a pair with itself
    tp += ["c:x,STANDARD,vm8,c:y,STANDARD,vm8,64,1e9,1e9,True", "c:x,PREMIUM,vm8,c:y,PREMIUM,vm8,64,1e9,0,False",
           "c:w,PREMIUM,vm8,c:x,PREMIUM,vm8,64,1e9,1e9,True", "c:x,PREMIUM,vm8,c:x,PREMIUM,vm8,64,1e9,1e9,True",
           *extra_tp]
    lat += ["c:x,STANDARD,vm1,c:y,STANDARD,vm1,1,1,1", *extra_lat]
    (tmp_path / "tp.csv").write_text("\n".join(tp) + "\n")
    (tmp_path / "lat.csv").write_text("\n".join(lat) + "\n")
    return tmp_path / "tp.csv", tmp_path / "lat.csv"


def test_the_cut_joins_each_premium_pair_once(tmp_path: Path) -> None:
    rows = grid_rows(*_sources(tmp_path), ["c:z", "c:x", "c:y"])
    assert [(r["src_region"], r["dst_region"]) for r in rows] == [
        ("c:x", "c:y"), ("c:x", "c:z"), ("c:y", "c:x"), ("c:y", "c:z"), ("c:z", "c:x"), ("c:z", "c:y")]
    first = rows[0]
    assert first == {"src_region": "c:x", "dst_region": "c:y", "throughput_gbps": "1.0",
                     "throughput_sent_gbps": "5.0", "rtt_avg_ms": "10.25", "rtt_min_ms": "10.1",
                     "rtt_max_ms": "10.5", "src_vm": "vm8", "dst_vm": "vm8"}
    assert rows[5]["throughput_gbps"] == "6.0" and rows[5]["rtt_avg_ms"] == "15.25"
    assert grid_csv(rows).splitlines()[0] == ",".join(COLUMNS) and len(grid_csv(rows).splitlines()) == 7


@pytest.mark.parametrize(("kwargs", "regions", "message"), [
    ({"skip": ("y", "z")}, ["c:x", "c:y", "c:z"], r"tp.csv: 0 throughput rows for c:y -> c:z .*lines: none"),
    ({"extra_tp": ["c:x,PREMIUM,vm8,c:z,PREMIUM,vm8,64,1e9,2e9,True"]}, ["c:x", "c:z"],
     r"tp.csv: 2 throughput rows for c:x -> c:z \(premium tier, successful; lines: 3, 12\)"),
    ({"extra_lat": ["c:z,PREMIUM,vm1,c:x,PREMIUM,vm1,1,2,3"]}, ["c:x", "c:z"],
     r"lat.csv: 2 latency rows for c:z -> c:x"),
    ({"extra_tp": ["c:x,PREMIUM,vm8,c:w,PREMIUM,vm8,64,1e9,inf,True"],
      "extra_lat": ["c:x,PREMIUM,vm1,c:w,PREMIUM,vm1,1,2,3", "c:w,PREMIUM,vm1,c:x,PREMIUM,vm1,1,2,3"]},
     ["c:x", "c:w"], r"line 12.*throughput_received"),
    ({}, ["c:x"], r"--regions: \['c:x'\]; expected two or more different regions"),
    ({}, ["c:x", "c:x"], r"expected two or more different regions"),
])
def test_a_pair_measured_twice_or_never_is_named(tmp_path: Path, kwargs: dict, regions: list[str],
                                                message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        grid_rows(*_sources(tmp_path, **kwargs), regions)


def test_cli_never_overwrites_unasked(tmp_path: Path) -> None:
    tp, lat = _sources(tmp_path)
    out = tmp_path / "grid.csv"
    cmd = [sys.executable, "-m", "sfenv.experiments.derive_grid", "--throughput", str(tp), "--latency", str(lat),
           "--regions", "c:x,c:y", "--out", str(out)]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0
    assert out.read_text() == grid_csv(grid_rows(tp, lat, ["c:x", "c:y"]))
    out.write_text("mine")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    line = f"sfenv: --out: {out} exists; pass --force to replace it\n"
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line)
    assert out.read_text() == "mine"


@pytest.mark.skipif(not (os.environ.get("SFENV_SKYPLANE") and SHARED_GRID.is_file()),
                    reason="needs Skyplane's throughput.csv and latency.csv in SFENV_SKYPLANE and ../shared/data")
def test_geo8s_regions_give_the_shared_grid_byte_for_byte() -> None:
    source = Path(os.environ["SFENV_SKYPLANE"])
    rows = grid_rows(source / "throughput.csv", source / "latency.csv", GEO8)
    assert grid_csv(rows) == SHARED_GRID.read_text()


def _flat_prices(tmp_path: Path, zones: list[str]) -> Path:
    """A price CSV with the zones' columns (the links do not read prices)."""
    path = tmp_path / "prices.csv"
    path.write_text("datetime_utc," + ",".join(zones) + "\n" + "".join(
        f"2024-01-01T{h:02d}:00:00Z," + ",".join("50" for _ in zones) + "\n" for h in range(24)))
    return path


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_other_regions_scenarios_follow_the_cut(name: str, tmp_path: Path) -> None:
    """Their links are derive_geo8's from the bundled cut; their regions, zones and clouds the zone map's."""
    zone_map = OTHER / "region_zone_map.csv"
    cfg = yaml.safe_load((OTHER.parent / f"{name}.yaml").read_text())
    regions = cfg["topology"]["regions"]
    d = derive(grid=OTHER / "skyplane_grid_jan2022_other8.csv", zone_map=zone_map,
               prices=_flat_prices(tmp_path, sorted({r["zone"] for r in regions} | {"BR-SP", "KR"})))
    names = {r["name"] for r in regions}
    assert cfg["topology"]["links"] == [ln for ln in d["links"] if ln["a"] in names and ln["b"] in names]
    assert len(cfg["topology"]["links"]) == len(names) * (len(names) - 1) // 2  # complete, as the grid is
    assert all(d["zones"][r["name"]] == r["zone"] for r in regions)
    assert all(r["name"] == f"{r['cloud']}-{r['cloud_region']}" + ("-" + r["name"].rsplit("-", 1)[1]
               if r["cloud"] == "gcp" else "") for r in regions)
    assert not names & {n.replace(":", "-") for n in GEO8}  # none of the shared grid's regions
    assert set(cfg["prices"]["profiles"]) == {r["zone"] for r in regions}
    table = load_egress_table()  # every pair priced by the bundled table (no default, no error)
    sites = [CloudSite(r["cloud"], r["cloud_region"]) for r in regions]
    assert all(table.usd_per_gb(a, b) > 0 for a in sites for b in sites if a != b)
    assert load_scenario(str(OTHER.parent / f"{name}.yaml")).topology.num_links == len(cfg["topology"]["links"])


@pytest.mark.skipif(not os.environ.get("SFENV_SUSTAIN_CLUSTER"),
                    reason="needs a sustain-cluster checkout in SFENV_SUSTAIN_CLUSTER")
@pytest.mark.parametrize("name", SCENARIOS)
def test_the_other_regions_profiles_are_2024s(name: str) -> None:
    cfg = yaml.safe_load((OTHER.parent / f"{name}.yaml").read_text())
    zones = tuple(sorted(cfg["prices"]["profiles"]))
    hourly = year_prices(Path(os.environ["SFENV_SUSTAIN_CLUSTER"]), 2024, zones)
    assert cfg["prices"]["profiles"] == daily_profiles(hourly, zones)


@pytest.mark.parametrize(("rows", "message"), [
    (["c-x,c-w,1,10"], r"line 4: column 'dst_region': 'c-w' is not in the zone map"),
    (["c-x,c-y,1,10"], r"line 4: c-x -> c-y is a pair measured twice"),
    (["c-x,c-x,1,10"], r"line 4: c-x -> c-x is a region with itself"),
    (["c-y,c-z,1,10"], r"c-y and c-z are measured one way only"),
    (["c-y,c-z,0,10", "c-z,c-y,1,10"], r"line 4, column .throughput_gbps.: 0 is below"),
])
def test_derive_geo8_names_a_grid_it_cannot_turn_into_links(tmp_path: Path, rows: list[str], message: str) -> None:
    grid = tmp_path / "grid.csv"
    grid.write_text("\n".join(["src_region,dst_region,throughput_gbps,rtt_avg_ms", "c-x,c-y,1,10", "c-y,c-x,2,12",
                               *rows]) + "\n")
    zone_map = tmp_path / "zones.csv"
    zone_map.write_text("cloud_region,grid_zone\nc-x,A\nc-y,B\nc-z,B\n")
    with pytest.raises(InvalidInput, match=message):
        derive(grid=grid, zone_map=zone_map, prices=_flat_prices(tmp_path, ["A", "B"]))
    grid.write_text("src_region,dst_region,throughput_gbps,rtt_avg_ms\nc-x,c-y,1,10\nc-y,c-x,2,12\n")
    d = derive(grid=grid, zone_map=zone_map, prices=_flat_prices(tmp_path, ["A", "B"]))
    assert d["links"] == [{"a": "c-x", "b": "c-y", "bandwidth_gbps": 4.0, "latency_ms": 5.5, "pair_gbps_ab": 1.0,
                           "pair_gbps_ba": 2.0}]
