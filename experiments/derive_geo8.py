"""Derive the geo-8 scenario's network and price figures from the measured source data.

Usage: ``python -m sfenv.experiments.derive_geo8 --data-dir PATH`` where PATH holds
``network/skyplane_grid_jan2022_8regions.csv``, ``network/region_zone_map.csv`` and
``energy/electricity_price_usd_per_mwh_2023.csv`` (see the data README for their provenance).
It prints YAML fragments (``links`` and ``profiles``) that ``scenarios/geo-8.yaml`` holds verbatim:

- link bandwidth: the smaller of the two directed iperf3 goodputs of a region pair (Skyplane grid,
  Jan 2022, one VM pair each), times ``--gateways`` (default 4) parallel gateway VMs, Gbit/s: the
  capacity the link's flows share;
- per-VM-pair rates ``pair_gbps_ab`` and ``pair_gbps_ba``: the two directed goodputs themselves,
  Gbit/s: one flow (one replica pair of a pipeline hop) runs at most at its direction's rate, as one
  VM pair was measured to;
- link latency: half the mean ping RTT, ms (one-way);
- zone price profile: the mean 2023 price of each UTC hour of the day, USD/MWh.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sfenv.experiments.derive_price_year import daily_profiles

from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.prices import read_price_csv


def region_name(cloud_region: str) -> str:
    """``aws:us-east-1`` -> ``aws-us-east-1`` (scenario names avoid ':')."""
    return cloud_region.replace(":", "-")


def derive(data_dir: Path, gateways: float = 4.0) -> dict:
    """The derived figures: ``{"zones": {region: zone}, "links": [...], "profiles": {zone: [24]}}``."""
    zones: dict[str, str] = {}
    # csv_rows: regular files of bounded size, the columns checked, errors naming file and line
    for _, row in csv_rows(data_dir / "network" / "region_zone_map.csv", ["cloud_region", "grid_zone"],
                           "region-zone map CSV"):
        zones[row["cloud_region"]] = row["grid_zone"]
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    directed: dict[tuple[str, str], float] = {}  # goodput of one VM pair, src -> dst
    grid = data_dir / "network" / "skyplane_grid_jan2022_8regions.csv"
    for line, row in csv_rows(grid, ["src_region", "dst_region", "throughput_gbps", "rtt_avg_ms"], "WAN grid CSV"):
        a, b = sorted((row["src_region"], row["dst_region"]))
        gbps = csv_number(grid, line, "throughput_gbps", row["throughput_gbps"])
        pairs.setdefault((a, b), []).append((gbps, csv_number(grid, line, "rtt_avg_ms", row["rtt_avg_ms"])))
        directed[(row["src_region"], row["dst_region"])] = gbps
    order = list(zones)
    links = []
    for (a, b), vals in sorted(pairs.items(), key=lambda kv: (order.index(kv[0][0]), order.index(kv[0][1]))):
        bw = min(v[0] for v in vals) * gateways
        rtt = float(np.mean([v[1] for v in vals]))
        links.append({"a": region_name(a), "b": region_name(b), "bandwidth_gbps": round(bw, 2),
                      "latency_ms": round(rtt / 2.0, 1), "pair_gbps_ab": round(directed[(a, b)], 2),
                      "pair_gbps_ba": round(directed[(b, a)], 2)})
    series = read_price_csv(data_dir / "energy" / "electricity_price_usd_per_mwh_2023.csv",
                            sorted(set(zones.values())))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="folder with network/ and energy/ CSVs")
    ap.add_argument("--gateways", type=float, default=4.0, help="parallel gateway VMs per region pair")
    args = ap.parse_args()
    print(to_yaml(derive(args.data_dir, args.gateways)))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
