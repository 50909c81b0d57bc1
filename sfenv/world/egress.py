"""What clouds bill per byte leaving a region: a price table per cloud and region pair, and a flat default.

Clouds bill data transfer *out* of a region per GB (transfer in is free): between regions of one
cloud at an inter-region price (AWS: 0.02 USD/GB between most regions, 0.08-0.15 from some), to
another cloud at the source cloud's internet egress price (0.09-0.19 USD/GB).  Inside one region
nothing is billed here.

The bundled table (``sfenv/data/egress/egress_usd_per_gb.csv``, :func:`load_egress_table`) holds the
public list prices Skyplane ships (skyplane-project/skyplane, Apache-2.0, commit ``4602d9ce`` of
2024-01-10; AWS's grid as of 2022-12-04, every AWS region; GCP and Azure for the regions of sfenv's
measured grid): :data:`EGRESS_TABLE_SOURCE` and the folder's README say exactly what.  Regions
without a priced cloud region (synthetic scenarios) pay :data:`DEFAULT_USD_PER_GB`.

:func:`egress_price_matrix` turns the regions of a topology into a matrix of USD per byte per
directed region pair, which the simulator charges on every byte a job sends from one region to
another (:mod:`sfenv.model.traffic`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from sfenv.errors import InvalidInput
from sfenv.world.csvread import csv_number, csv_rows
from sfenv.world.limits import MAX_EGRESS_USD_PER_GB

__all__ = [
    "BYTES_PER_GB",
    "DEFAULT_USD_PER_GB",
    "EGRESS_TABLE_PATH",
    "EGRESS_TABLE_SOURCE",
    "CloudSite",
    "EgressTable",
    "egress_price_matrix",
    "load_egress_table",
]

#: bytes per GB in the prices (sfenv's unit, 1e9 bytes)
BYTES_PER_GB = 1e9
#: USD per GB leaving a region that has no priced cloud region: AWS's price between most of its regions
#: (e.g. us-east-1 -> us-west-1, eu-central-1 -> us-east-1 in the bundled table, Skyplane's AWS grid of
#: 2022-12-04, Apache-2.0)
DEFAULT_USD_PER_GB = 0.02
#: the bundled table
EGRESS_TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "egress" / "egress_usd_per_gb.csv"
#: where the bundled table's figures come from
EGRESS_TABLE_SOURCE = (
    "Skyplane (github.com/skyplane-project/skyplane, Apache-2.0), commit 4602d9cec2083142831f7f208b413ca2bf091bd8 "
    "(2024-01-10): skyplane/data/aws_transfer_costs.csv (AWS list prices, unchanged since 2022-12-04) and the "
    "GCP and Azure prices its pricing code gives for gcp:asia-southeast1, gcp:asia-south1, azure:canadacentral "
    "and azure:australiaeast (premium tier); USD per GB"
)
_COLUMNS = ["src_cloud", "src_region", "dst_cloud", "dst_region", "usd_per_gb"]
_ANY = "*"


@dataclass(frozen=True)
class CloudSite:
    """A region of a cloud provider, as a price table names it.

    :param cloud: the provider (``"aws"``, ``"gcp"``, ``"azure"``).
    :param region: the provider's region name (``"us-east-1"``; GCP without the zone: ``"asia-south1"``).
    """

    cloud: str
    region: str

    def __str__(self) -> str:
        return f"{self.cloud}:{self.region}"


class EgressTable:
    """Egress prices in USD/GB per (source cloud region, destination), with the rules of the module docstring.

    :param prices: ``{(src cloud, src region, dst cloud, dst region): USD/GB}``; ``"*"`` as the
        destination cloud and region is the source's internet egress (to any other cloud), ``"*"`` as the
        destination region alone any region of that cloud.
    :param source: where the figures come from (shown in reports and errors).
    """

    def __init__(self, prices: dict[tuple[str, str, str, str], float], source: str):
        self.prices = dict(prices)
        self.source = source
        #: regions with a price row, per cloud
        self.regions: dict[str, set[str]] = {}
        for src_cloud, src_region, _, _ in self.prices:
            self.regions.setdefault(src_cloud, set()).add(src_region)

    def knows(self, site: CloudSite) -> bool:
        """True when the table prices bytes leaving ``site``."""
        return site.region in self.regions.get(site.cloud, ())

    def usd_per_gb(self, src: CloudSite, dst: CloudSite) -> float:
        """USD per GB sent from ``src`` to ``dst``: 0 inside a region, else the table's row (module rules).

        :raises InvalidInput: when ``src`` has no row, or two regions of one cloud have no row of their own.
        """
        if src == dst:
            return 0.0
        if not self.knows(src):
            known = ", ".join(f"{c}:{r}" for c in sorted(self.regions) for r in sorted(self.regions[c])[:3])
            raise InvalidInput(f"no egress price for bytes leaving {src} (the table has e.g. {known}, ...; "
                               f"source: {self.source})")
        p = self.prices
        key = (src.cloud, src.region, dst.cloud, dst.region)
        if key in p:
            return p[key]
        if src.cloud == dst.cloud:
            raise InvalidInput(f"no egress price from {src} to {dst} (same cloud, no row for the pair; "
                               f"source: {self.source})")
        for k in ((src.cloud, src.region, dst.cloud, _ANY), (src.cloud, src.region, _ANY, _ANY)):
            if k in p:
                return p[k]
        raise InvalidInput(f"no egress price from {src} to another cloud ({dst}); source: {self.source}")


def read_egress_table(path: str | Path, source: str) -> EgressTable:
    """An :class:`EgressTable` from a CSV with the columns ``src_cloud,src_region,dst_cloud,dst_region,usd_per_gb``.

    :raises InvalidInput: naming file, line and column of a bad cell, or a pair listed twice.
    """
    prices: dict[tuple[str, str, str, str], float] = {}
    for line, row in csv_rows(path, _COLUMNS, "egress price CSV"):
        key = (row["src_cloud"].strip(), row["src_region"].strip(), row["dst_cloud"].strip(), row["dst_region"].strip())
        if not key[0] or not key[1] or key[0] == _ANY or key[1] == _ANY:
            raise InvalidInput(f"{path}, line {line}: the source cloud and region must be named, got {key[:2]}")
        if key in prices:
            raise InvalidInput(f"{path}, line {line}: {key} is listed twice")
        prices[key] = csv_number(path, line, "usd_per_gb", row["usd_per_gb"], low=0.0,
                                  high=MAX_EGRESS_USD_PER_GB)
    return EgressTable(prices, source)


@lru_cache(maxsize=8)
def load_egress_table(path: str | None = None) -> EgressTable:
    """The bundled table (:data:`EGRESS_TABLE_SOURCE`), or the one at ``path`` (read once per path)."""
    if path is None:
        return read_egress_table(EGRESS_TABLE_PATH, EGRESS_TABLE_SOURCE)
    return read_egress_table(path, str(path))


def egress_price_matrix(
    sites: Sequence[CloudSite | None], table: EgressTable | None, default_usd_per_gb: float,
) -> np.ndarray:
    """USD per *byte* sent from region i to region j of a topology (regions ``sites``, in index order).

    Pairs where both regions name a cloud region the table prices get the table's price (0 when both
    are the same cloud region); every other pair of different regions gets ``default_usd_per_gb``.
    The diagonal is 0 (traffic inside a region is not billed).

    :param sites: each region's cloud region, or None (not priced by the table).
    :param table: the price table, or None to price every pair at the default.
    :param default_usd_per_gb: the flat price, USD/GB (0 turns egress off where it applies).
    """
    n = len(sites)
    out = np.full((n, n), default_usd_per_gb / BYTES_PER_GB)
    for i, a in enumerate(sites):
        out[i, i] = 0.0
        if a is None or table is None:
            continue
        for j, b in enumerate(sites):
            if j != i and b is not None:
                out[i, j] = table.usd_per_gb(a, b) / BYTES_PER_GB
    return out
