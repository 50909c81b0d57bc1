"""Cut a measured inter-region grid for any set of regions out of Skyplane's published grid.

Usage: ``python -m sfenv.experiments.derive_grid --throughput throughput.csv --latency latency.csv
--regions aws:us-east-2,gcp:europe-west4-a,... --out grid.csv`` where the two files are Skyplane's
throughput grid (``skyplane/data/throughput.csv`` at commit e31b010b29fae8f6ea47d057df8b84db9b52f0c1:
iperf3 runs of 2022-01-29, 64 connections per VM pair) and ping profile (``profiles/latency.csv`` at
commit 2e3b2c01735054a8053d6a939d69fe43a652d2d0) of skyplane-project/skyplane (Apache-2.0; Jain et
al., NSDI 2023).  It writes the shared data's grid format (``network/skyplane_grid_jan2022_8regions.csv``):
one row per directed pair of two different regions of the list, both ends of the premium network tier,
a successful throughput run, throughput and latency joined on the pair; ``throughput_gbps`` (received)
and ``throughput_sent_gbps`` in Gbit/s to 4 decimals (no trailing zeros), the round trips as the source gives them, the
VM types of the throughput run.  A pair measured more than once or not at all is an error naming it.

The check that it is made as the shared file was: the eight regions of ``geo-8`` give that file byte
for byte (``tests/test_derive_grid.py`` does so when the sources are on the machine).  ``derive_geo8
--grid`` turns such a file into a scenario's links.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs.results import atomic_write_text
from sfenv.world.csvread import csv_number, csv_rows

__all__ = ["COLUMNS", "grid_csv", "grid_rows"]

#: the shared grid file's columns
COLUMNS = ("src_region", "dst_region", "throughput_gbps", "throughput_sent_gbps", "rtt_avg_ms", "rtt_min_ms",
           "rtt_max_ms", "src_vm", "dst_vm")
_PAIR = ["src_region", "src_tier", "dst_region", "dst_tier"]


def _premium_pairs(path: Path, needed: list[str], what: str, regions: set[str],
                   keep: str | None = None) -> dict[tuple[str, str], list[tuple[int, dict[str, str]]]]:
    """The rows of ``path`` between two different regions of ``regions``, both premium tier, by directed pair."""
    pairs: dict[tuple[str, str], list[tuple[int, dict[str, str]]]] = {}
    for line, row in csv_rows(path, _PAIR + needed, what):
        src, dst = row["src_region"], row["dst_region"]
        if src == dst or src not in regions or dst not in regions:
            continue
        if row["src_tier"] == row["dst_tier"] == "PREMIUM" and (keep is None or row[keep] == "True"):
            pairs.setdefault((src, dst), []).append((line, row))
    return pairs


def _one(pairs: dict[tuple[str, str], list[tuple[int, dict[str, str]]]], pair: tuple[str, str], path: Path,
         what: str) -> tuple[int, dict[str, str]]:
    """The single row of ``pair``; none or several raise naming the pair (and the lines)."""
    rows = pairs.get(pair, [])
    if len(rows) != 1:
        lines = ", ".join(str(line) for line, _ in rows) or "none"
        raise InvalidInput(f"{path}: {len(rows)} {what} rows for {pair[0]} -> {pair[1]} (premium tier"
                           f"{', successful' if what == 'throughput' else ''}; lines: {lines}); expected exactly one")
    return rows[0]


def _gbps(bits_per_s: float) -> str:
    """Bit/s as Gbit/s rounded to 4 decimals (NumPy's rounding), trailing zeros dropped, as the shared file has them."""
    return repr(float(np.round(bits_per_s / 1e9, 4)))


def grid_rows(throughput: Path, latency: Path, regions: list[str]) -> list[dict[str, str]]:
    """The grid's rows for ``regions``, sorted by (source, destination), in :data:`COLUMNS`.

    :raises InvalidInput: naming the file: fewer than two regions or a region twice, a missing column,
        a pair measured more than once or not at all, a throughput that is not a finite number.
    """
    if len(regions) < 2 or len(set(regions)) != len(regions):
        raise InvalidInput(f"--regions: {regions}; expected two or more different regions")
    wanted = set(regions)
    runs = _premium_pairs(throughput, ["src_instance_class", "dst_instance_class", "throughput_sent",
                                       "throughput_received", "success"], "Skyplane throughput CSV", wanted, "success")
    pings = _premium_pairs(latency, ["min_rtt", "avg_rtt", "max_rtt"], "Skyplane latency CSV", wanted)
    out = []
    for src, dst in sorted(itertools.permutations(regions, 2)):
        line, run = _one(runs, (src, dst), throughput, "throughput")
        _, ping = _one(pings, (src, dst), latency, "latency")
        received = csv_number(throughput, line, "throughput_received", run["throughput_received"], 0.0, 1e15)
        sent = csv_number(throughput, line, "throughput_sent", run["throughput_sent"], 0.0, 1e15)
        out.append({"src_region": src, "dst_region": dst, "throughput_gbps": _gbps(received),
                    "throughput_sent_gbps": _gbps(sent), "rtt_avg_ms": ping["avg_rtt"],
                    "rtt_min_ms": ping["min_rtt"], "rtt_max_ms": ping["max_rtt"],
                    "src_vm": run["src_instance_class"], "dst_vm": run["dst_instance_class"]})
    return out


def grid_csv(rows: list[dict[str, str]]) -> str:
    """``rows`` as the shared grid CSV's text (the header, then one line per row)."""
    return "\n".join([",".join(COLUMNS)] + [",".join(r[c] for c in COLUMNS) for r in rows]) + "\n"


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring); ``argv`` defaults to ``sys.argv[1:]``."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--throughput", type=Path, required=True, help="Skyplane's throughput grid CSV")
    ap.add_argument("--latency", type=Path, required=True, help="Skyplane's latency (ping) CSV")
    ap.add_argument("--regions", required=True, help="comma list of provider:region names, as Skyplane's")
    ap.add_argument("--out", type=Path, required=True, help="the grid CSV to write")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        raise InvalidInput(f"--out: {args.out} exists; pass --force to replace it")
    rows = grid_rows(args.throughput, args.latency, [r.strip() for r in args.regions.split(",") if r.strip()])
    atomic_write_text(args.out, grid_csv(rows))
    print(f"wrote {len(rows)} directed pairs to {args.out}")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
