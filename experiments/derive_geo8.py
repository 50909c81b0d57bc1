"""Derive the geo-8 scenario's network and price figures from the measured source data.

Usage: ``python -m sfenv.experiments.derive_geo8 --data-dir PATH`` where PATH holds
``network/skyplane_grid_jan2022_8regions.csv``, ``network/region_zone_map.csv`` and
``energy/electricity_price_usd_per_mwh_2023.csv`` (see the data README for their provenance); ``--grid``,
``--zone-map`` and ``--prices`` name other files of those formats (other regions cut by ``derive_grid``,
another year pivoted by ``derive_price_year``).
It prints YAML fragments (``links`` and ``profiles``) that ``scenarios/geo-8.yaml`` holds verbatim:

- link bandwidth: the smaller of the two directed iperf3 goodputs of a region pair (Skyplane grid,
  Jan 2022, one VM pair each), times ``--gateways`` (default 4) parallel gateway VMs, Gbit/s: the
  capacity the link's flows share;
- per-VM-pair rates ``pair_gbps_ab`` and ``pair_gbps_ba``: the two directed goodputs themselves,
  Gbit/s: one flow (one replica pair of a pipeline hop) runs at most at its direction's rate, as one
  VM pair was measured to;
- link latency: half the mean ping RTT, ms (one-way);
- zone price profile: the mean price of each UTC hour of the day (2023 unless ``--prices``), USD/MWh.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sfenv.experiments.derive_price_year import daily_profiles

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.prices import read_price_csv


def region_name(cloud_region: str) -> str:
    """``aws:us-east-1`` -> ``aws-us-east-1`` (scenario names avoid ':')."""
    return cloud_region.replace(":", "-")


#: parallel gateway VMs a link's capacity counts (our scaling of one VM pair's measured rate)
GATEWAY_VMS = 4.0


def derive(data_dir: Path | None = None, gateways: float = GATEWAY_VMS, *, grid: Path | None = None,
           zone_map: Path | None = None, prices: Path | None = None) -> dict:
    """The derived figures: ``{"zones": {region: zone}, "links": [...], "profiles": {zone: [24]}}``.

    :param data_dir: the shared data folder, where ``grid``, ``zone_map`` and ``prices`` default to its
        ``network/skyplane_grid_jan2022_8regions.csv``, ``network/region_zone_map.csv`` and
        ``energy/electricity_price_usd_per_mwh_2023.csv``.
    :param grid: a grid CSV of the shared format (e.g. one ``derive_grid`` cut for other regions).
    :param zone_map: its regions' grid zones (columns ``cloud_region``, ``grid_zone``).
    :param prices: an hourly price CSV with a column per zone (e.g. ``derive_price_year``'s).
    """
    if data_dir is None and None in (grid, zone_map, prices):
        raise InvalidInput("derive_geo8: give the shared data folder or all of the grid, zone map and price files")
    base = data_dir or Path()
    grid = grid or base / "network" / "skyplane_grid_jan2022_8regions.csv"
    zone_map = zone_map or base / "network" / "region_zone_map.csv"
    prices = prices or base / "energy" / "electricity_price_usd_per_mwh_2023.csv"
    zones: dict[str, str] = {}
    # csv_rows: regular files of bounded size, the columns checked, errors naming file and line
    for _, row in csv_rows(zone_map, ["cloud_region", "grid_zone"], "region-zone map CSV"):
        zones[row["cloud_region"]] = row["grid_zone"]
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    directed: dict[tuple[str, str], float] = {}  # goodput of one VM pair, src -> dst
    for line, row in csv_rows(grid, ["src_region", "dst_region", "throughput_gbps", "rtt_avg_ms"], "WAN grid CSV"):
        src, dst = row["src_region"], row["dst_region"]
        for column, region in (("src_region", src), ("dst_region", dst)):
            if region not in zones:
                raise InvalidInput(f"{grid}, line {line}: column {column!r}: {region!r} is not in the zone map "
                                   f"{zone_map}")
        if src == dst or (src, dst) in directed:
            what = "a region with itself" if src == dst else "a pair measured twice"
            raise InvalidInput(f"{grid}, line {line}: {src} -> {dst} is {what}; expected each directed pair of two "
                               "regions once")
        gbps = csv_number(grid, line, "throughput_gbps", row["throughput_gbps"], 1e-6, 1e6)
        rtt = csv_number(grid, line, "rtt_avg_ms", row["rtt_avg_ms"], 0.0, 1e5)
        pairs.setdefault((min(src, dst), max(src, dst)), []).append((gbps, rtt))
        directed[(src, dst)] = gbps
    for a, b in pairs:
        if (a, b) not in directed or (b, a) not in directed:
            raise InvalidInput(f"{grid}: {a} and {b} are measured one way only; a link needs both directions")
    order = list(zones)
    links = []
    for (a, b), vals in sorted(pairs.items(), key=lambda kv: (order.index(kv[0][0]), order.index(kv[0][1]))):
        bw = min(v[0] for v in vals) * gateways
        rtt = float(np.mean([v[1] for v in vals]))
        links.append({"a": region_name(a), "b": region_name(b), "bandwidth_gbps": round(bw, 2),
                      "latency_ms": round(rtt / 2.0, 1), "pair_gbps_ab": round(directed[(a, b)], 2),
                      "pair_gbps_ba": round(directed[(b, a)], 2)})
    series = read_price_csv(prices, sorted(set(zones.values())))
    profiles = daily_profiles(series.hourly, tuple(series.zones))
    return {"zones": {region_name(k): v for k, v in zones.items()}, "links": links, "profiles": profiles}


def to_yaml(d: dict) -> str:
    """The ``links:`` and ``profiles:`` YAML fragments in the scenario file's layout."""
    lines = ["  links:"]
    for ln in d["links"]:
        lines.append(f"    - {{a: {ln['a']}, b: {ln['b']}, bandwidth_gbps: {ln['bandwidth_gbps']}, "
                     f"latency_ms: {ln['latency_ms']}, pair_gbps_ab: {ln['pair_gbps_ab']}, "
                     f"pair_gbps_ba: {ln['pair_gbps_ba']}}}")
    lines.append("  profiles:")
    for z, p in d["profiles"].items():
        lines.append(f"    {z}: [{', '.join(str(x) for x in p)}]")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring); ``argv`` defaults to ``sys.argv[1:]``."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, help="folder with network/ and energy/ CSVs (the shared data)")
    ap.add_argument("--grid", type=Path, help="a grid CSV instead of the shared one (derive_grid writes them)")
    ap.add_argument("--zone-map", type=Path, help="a region-zone map CSV instead of the shared one")
    ap.add_argument("--prices", type=Path, help="an hourly price CSV instead of the shared 2023 one")
    ap.add_argument("--gateways", type=float, default=GATEWAY_VMS, help="parallel gateway VMs per region pair")
    args = ap.parse_args(argv)
    print(to_yaml(derive(args.data_dir, args.gateways, grid=args.grid, zone_map=args.zone_map, prices=args.prices)))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
