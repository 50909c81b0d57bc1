"""Statistics of Skyplane's published inter-region grid behind ``sfenv.world.generators.cloud_topology``.

Reads Skyplane's throughput grid (``skyplane/data/throughput.csv`` at commit
e31b010b29fae8f6ea47d057df8b84db9b52f0c1) and ping profile (``profiles/latency.csv`` at commit
2e3b2c01735054a8053d6a939d69fe43a652d2d0) of skyplane-project/skyplane (Apache-2.0; Jain et al.,
NSDI 2023), keeps premium-tier pairs of two different regions that succeeded, leaves out the pairs
among the eight regions of sfenv's measured grid (``geo-8``: its pairs are a held-out platform),
and prints the median goodput within one cloud and across clouds, the standard deviation of
ln(goodput) and the round-trip percentiles.  Only these statistics enter the generator, no pair.

    python -m sfenv.experiments.derive_cloud_wan --throughput throughput.csv --latency latency.csv
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.world.csvread import csv_number, csv_rows

#: the regions of sfenv's measured grid (shared data README; scenarios/geo-8.yaml)
GEO8_REGIONS = frozenset({
    "aws:us-east-1", "aws:us-west-1", "azure:canadacentral", "aws:eu-central-1", "aws:ap-northeast-1",
    "gcp:asia-southeast1-a", "azure:australiaeast", "gcp:asia-south1-a"})


def _kept(row: dict[str, str]) -> bool:
    """A premium-tier pair of two regions, not both of the measured grid."""
    src, dst = row["src_region"], row["dst_region"]
    return (row["src_tier"] == row["dst_tier"] == "PREMIUM" and src != dst
            and not (src in GEO8_REGIONS and dst in GEO8_REGIONS))


def goodput_statistics(path: Path) -> dict[str, float]:
    """Median goodput (Gbit/s) within one cloud and across clouds, and the log-standard deviation."""
    needed = ["src_region", "dst_region", "src_tier", "dst_tier", "throughput_received"]
    rows, bits = [], []
    for line, r in csv_rows(path, needed, "Skyplane throughput CSV"):  # bounded; a bad cell names its line
        if _kept(r) and r.get("success", "True") == "True":
            rows.append(r)
            bits.append(csv_number(path, line, "throughput_received", r["throughput_received"], 1.0, 1e15))
    if not rows:
        raise InvalidInput(f"{path}: no premium-tier pair of two regions (expected Skyplane's throughput.csv)")
    gbps = np.array(bits) / 1e9
    same = np.array([r["src_region"].split(":")[0] == r["dst_region"].split(":")[0] for r in rows])
    return {"pairs": float(len(rows)), "median_gbps_same_cloud": float(np.median(gbps[same])),
            "median_gbps_cross_cloud": float(np.median(gbps[~same])),
            "sigma_log": float(np.log(gbps).std(ddof=1)),
            "p5_gbps": float(np.percentile(gbps, 5)), "p95_gbps": float(np.percentile(gbps, 95))}


def rtt_statistics(path: Path) -> dict[str, float]:
    """Median and 10th/90th percentile of the mean round trip, ms."""
    needed = ["src_region", "dst_region", "src_tier", "dst_tier", "avg_rtt"]
    rtt = np.array([csv_number(path, line, "avg_rtt", r["avg_rtt"], 0.0, 1e6)
                    for line, r in csv_rows(path, needed, "Skyplane latency CSV") if _kept(r) and r["avg_rtt"]])
    if not len(rtt):
        raise InvalidInput(f"{path}: no premium-tier pair of two regions (expected Skyplane's latency.csv)")
    return {"pairs": float(len(rtt)), "median_rtt_ms": float(np.median(rtt)),
            "p10_rtt_ms": float(np.percentile(rtt, 10)), "p90_rtt_ms": float(np.percentile(rtt, 90))}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Print and return the statistics."""
    p = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    p.add_argument("--throughput", type=Path, required=True, help="Skyplane's throughput.csv")
    p.add_argument("--latency", type=Path, required=True, help="Skyplane's latency.csv")
    args = p.parse_args(argv)
    out = {"goodput": goodput_statistics(args.throughput), "rtt": rtt_statistics(args.latency)}
    for part, stats in out.items():
        print(part, ", ".join(f"{k} {v:.3g}" for k, v in stats.items()))
    return out


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
