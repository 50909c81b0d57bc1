"""Cut the NCCL send/recv rates measured between two GCP regions out of Sailor's network profile.

Usage: ``python -m sfenv.experiments.derive_nccl_wan --profile multizone_bandwidths.json --out rates.csv``
where the profile is ``sailor/providers/multizone_bandwidths.json`` of eth-easl/sailor (commit
``cf2c8e3``; the file last changed in ``1f17247e35d39f913f7d60c3ad63938cf61405ae``, 2025-07-27; MIT
licence; Strati et al., "Sailor: Automating Distributed Training over Dynamic, Heterogeneous, and
Geo-distributed Clusters", SOSP 2025).  Sailor measured it with ``sailor/profiling/networking``:
PyTorch's ``send``/``recv`` over NCCL between one VM in each zone, every GPU of the sending VM to
its peer on the other at once, for a range of message sizes.  Per source zone, GPU type and GPUs per
VM and per destination zone, GPU type and count, the profile holds a quadratic fit of the bandwidth
(GB/s) in log2 of the message size (MB) and the largest bandwidth measured (bytes/s, the sum over
the VM's GPUs).

It writes one row per directed pair of zones **in two different regions**, with the same GPU type
and count on both sides: ``src_zone,dst_zone,gpu,pairs,peak_gbps``, ``pairs`` the GPUs sending at
once, ``peak_gbps`` the largest rate measured in Gbit/s (10^9 bit/s) to 3 decimals.  The fitted curve
is not kept: over the sizes measured (64 KiB to 1 GiB, 50 sends each) its peak is 0.67-1.03 of the
largest measured rate on these pairs (median 0.83), a smoothing of the same points; the largest is
what the source measured.  ``sfenv/data/measured/nccl_sendrecv_gcp_sailor.csv`` was written so;
:func:`sfenv.experiments.validate_model.nccl_transport` reads it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs.results import atomic_write_text
from sfenv.world.files import read_json

#: the columns written, in order
COLUMNS = ("src_zone", "dst_zone", "gpu", "pairs", "peak_gbps")
#: the most bytes read from a profile (the source file is 90 kB)
MAX_PROFILE_BYTES = 8 * 2**20


def region(zone: str) -> str:
    """The region of a GCP zone: ``us-central1-a`` -> ``us-central1``."""
    return zone.rsplit("-", 1)[0]


def _entry(path: Path, keys: tuple[str, ...], value: Any) -> float:
    """The largest measured rate (bytes/s) of one profile entry ``[[coefficients], peak]``."""
    where = " -> ".join(keys)
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)):
        raise InvalidInput(f"{path}: {where}: expected [[fit coefficients], largest bytes/s], got {value!r:.80}")
    peak = value[1]
    if isinstance(peak, bool) or not isinstance(peak, (int, float)) or not math.isfinite(peak) or peak <= 0:
        raise InvalidInput(f"{path}: {where}: the largest rate {peak!r:.40} is not a positive number of bytes/s")
    return float(peak)


def _level(path: Path, keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        where = " -> ".join(keys) or "the top level"
        raise InvalidInput(f"{path}: {where}: expected a JSON object, got {type(value).__name__}")
    return value


def rates(path: Path) -> list[dict[str, str]]:
    """The rows of :data:`COLUMNS` for ``path``'s pairs of zones in two different regions, sorted.

    :raises InvalidInput: naming the file and the entry, when it is not a profile of Sailor's layout.
    """
    profile = read_json(path, "network profile", MAX_PROFILE_BYTES)
    rows = []
    for src, by_gpu in _level(path, (), profile).items():
        for gpu, by_count in _level(path, (src,), by_gpu).items():
            for count, by_dst in _level(path, (src, gpu), by_count).items():
                for dst, dst_gpus in _level(path, (src, gpu, count), by_dst).items():
                    if region(dst) == region(src):
                        continue
                    dst_counts = _level(path, (src, gpu, count, dst), dst_gpus).get(gpu, {})
                    entry = _level(path, (src, gpu, count, dst, gpu), dst_counts).get(count)
                    if entry is None:
                        continue
                    peak = _entry(path, (src, gpu, count, dst, gpu, count), entry)
                    if not count.isdigit() or int(count) < 1:
                        raise InvalidInput(f"{path}: {src} -> {gpu}: GPUs per VM {count!r} is not a positive integer")
                    rows.append({"src_zone": src, "dst_zone": dst, "gpu": gpu, "pairs": str(int(count)),
                                 "peak_gbps": f"{peak * 8 / 1e9:.3f}"})
    return sorted(rows, key=lambda r: (r["gpu"], int(r["pairs"]), r["src_zone"], r["dst_zone"]))


def rates_csv(rows: list[dict[str, str]]) -> str:
    """The CSV text of :func:`rates`'s rows."""
    return "\n".join([",".join(COLUMNS), *(",".join(r[c] for c in COLUMNS) for r in rows)]) + "\n"


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring); ``argv`` defaults to ``sys.argv[1:]``."""
    ap = ScriptParser(script=__file__, description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profile", type=Path, required=True, help="Sailor's sailor/providers/multizone_bandwidths.json")
    ap.add_argument("--out", type=Path, required=True, help="the CSV to write")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        raise InvalidInput(f"--out: {args.out} exists; pass --force to replace it")
    rows = rates(args.profile)
    if not rows:
        raise InvalidInput(f"{args.profile}: no pair of zones in two different regions with the same GPUs")
    atomic_write_text(args.out, rates_csv(rows))
    print(f"wrote {len(rows)} directed pairs to {args.out}")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
