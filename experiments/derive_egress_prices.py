"""Write sfenv's bundled egress price table from Skyplane's public price data.

Usage: ``python -m sfenv.experiments.derive_egress_prices --aws-csv PATH [--out FILE]`` where PATH is
``skyplane/data/aws_transfer_costs.csv`` of the Skyplane repository (skyplane-project/skyplane,
Apache-2.0; the shipped table was made from commit ``4602d9cec2083142831f7f208b413ca2bf091bd8``,
2024-01-10, whose AWS grid is unchanged since commit ``5881d459`` of 2022-12-04, "update transfer
cost grid").  It writes ``sfenv/data/egress/egress_usd_per_gb.csv`` (default ``--out``):

- every AWS row of the source: ``src,dst,cost`` becomes ``aws,src,aws,dst,cost``, and a ``dst`` of
  ``internet`` (egress to another cloud or the internet) becomes ``aws,src,*,*,cost``;
- the GCP and Azure figures of :data:`OTHER_CLOUDS`, for the regions of sfenv's measured grid only:
  Skyplane holds them as rules over continents in its pricing code (its ``GCPPricing`` and
  ``AzureCloudProvider.get_transfer_cost`` at the same commit), and only the resulting prices of
  those regions are listed here, as data.

The table's columns and lookup rules are in :mod:`sfenv.world.egress`; its provenance in
``sfenv/data/egress/README.md``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs.results import atomic_path
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.egress import EGRESS_TABLE_PATH

#: GCP and Azure egress prices (USD/GB) of the measured grid's regions, as Skyplane's pricing code at
#: commit 4602d9ce gives them (premium network tier, first 10 TB a month): rows
#: (source cloud, source region, destination cloud or "*", destination region or "*", USD/GB)
OTHER_CLOUDS: tuple[tuple[str, str, str, str, float], ...] = (
    # GCP, between regions of one continent (asia): 0.05
    ("gcp", "asia-southeast1", "gcp", "asia-south1", 0.05),
    ("gcp", "asia-south1", "gcp", "asia-southeast1", 0.05),
    # GCP to another cloud (premium tier): asia-southeast1 0.19 to any destination; asia-south1 0.12,
    # 0.19 to Australia (AWS ap-southeast-2, Azure australia*)
    ("gcp", "asia-southeast1", "*", "*", 0.19),
    ("gcp", "asia-south1", "aws", "ap-southeast-2", 0.19),
    ("gcp", "asia-south1", "azure", "australiaeast", 0.19),
    ("gcp", "asia-south1", "*", "*", 0.12),
    # Azure between continents: from North America 0.05, from Oceania 0.08
    ("azure", "canadacentral", "azure", "australiaeast", 0.05),
    ("azure", "australiaeast", "azure", "canadacentral", 0.08),
    # Azure to another cloud: from North America 0.0875, from Oceania 0.12
    ("azure", "canadacentral", "*", "*", 0.0875),
    ("azure", "australiaeast", "*", "*", 0.12),
    # The regions of the held-out other-regions scenarios (docs/results/learned/v2/other-regions/), by
    # the same rules.  GCP between continents: 0.15 from or to Australia, else 0.08
    *(("gcp", src, "gcp", dst, 0.15 if "australia" in src + dst else 0.08)
       for src in ("northamerica-northeast2", "europe-west4", "australia-southeast2", "asia-southeast1", "asia-south1")
       for dst in ("northamerica-northeast2", "europe-west4", "australia-southeast2", "asia-southeast1", "asia-south1")
       if src != dst and not (src.startswith("asia") and dst.startswith("asia"))),
    # GCP to another cloud (premium tier): from North America and Europe 0.12, 0.19 to Australia;
    # from Australia 0.19 to any destination
    ("gcp", "northamerica-northeast2", "aws", "ap-southeast-2", 0.19),
    ("gcp", "northamerica-northeast2", "azure", "australiaeast", 0.19),
    ("gcp", "northamerica-northeast2", "*", "*", 0.12),
    ("gcp", "europe-west4", "aws", "ap-southeast-2", 0.19),
    ("gcp", "europe-west4", "azure", "australiaeast", 0.19),
    ("gcp", "europe-west4", "*", "*", 0.12),
    ("gcp", "australia-southeast2", "*", "*", 0.19),
    # Azure between continents: from North America and Europe 0.05, from Asia and Oceania 0.08
    ("azure", "francecentral", "azure", "koreacentral", 0.05),
    ("azure", "francecentral", "azure", "canadacentral", 0.05),
    ("azure", "francecentral", "azure", "australiaeast", 0.05),
    ("azure", "koreacentral", "azure", "francecentral", 0.08),
    ("azure", "koreacentral", "azure", "canadacentral", 0.08),
    ("azure", "koreacentral", "azure", "australiaeast", 0.08),
    ("azure", "canadacentral", "azure", "francecentral", 0.05),
    ("azure", "canadacentral", "azure", "koreacentral", 0.05),
    ("azure", "australiaeast", "azure", "francecentral", 0.08),
    ("azure", "australiaeast", "azure", "koreacentral", 0.08),
    # Azure to another cloud: from Europe 0.0875, from Asia 0.12
    ("azure", "francecentral", "*", "*", 0.0875),
    ("azure", "koreacentral", "*", "*", 0.12),
)


def rows_from(aws_csv: Path) -> list[tuple[str, str, str, str, float]]:
    """The table's rows: the AWS grid of ``aws_csv`` in sfenv's columns, then :data:`OTHER_CLOUDS`.

    :raises InvalidInput: naming the file and line: a missing column, an empty region or a price that is
        not a number from 0 to 10 USD/GB (the file is read within :mod:`sfenv.world.files`' bounds).
    """
    out: list[tuple[str, str, str, str, float]] = []
    for line, row in csv_rows(aws_csv, ["src", "dst", "cost"], "AWS transfer-cost CSV"):
        src, dst = row["src"].strip(), row["dst"].strip()
        if not src or not dst:
            raise InvalidInput(f"{aws_csv}, line {line}: an empty region (src {src!r}, dst {dst!r})")
        cost = csv_number(aws_csv, line, "cost", row["cost"], 0.0, 10.0)
        if dst == "internet":
            out.append(("aws", src, "*", "*", cost))
        else:
            out.append(("aws", src, "aws", dst, cost))
    out.extend(OTHER_CLOUDS)
    return out


def write_table(rows: list[tuple[str, str, str, str, float]], out: Path) -> None:
    """Write ``rows`` with the header ``src_cloud,src_region,dst_cloud,dst_region,usd_per_gb``."""
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as fh:  # a crash leaves the old table whole
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["src_cloud", "src_region", "dst_cloud", "dst_region", "usd_per_gb"])
        for r in rows:
            w.writerow([*r[:4], f"{r[4]:g}"])


def main() -> None:
    """The command line (module docstring)."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--aws-csv", type=Path, required=True, help="Skyplane's skyplane/data/aws_transfer_costs.csv")
    ap.add_argument("--out", type=Path, default=EGRESS_TABLE_PATH, help="the table to write (default: the bundled one)")
    args = ap.parse_args()
    rows = rows_from(args.aws_csv)
    write_table(rows, args.out)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
