"""Topology generators: SpiderFlow-like geo platforms, Waxman random graphs and cloud-like WANs.

All generators are deterministic given their ``seed`` (a topology is part of a scenario's
identity, so it does not change from episode to episode).

``spider``: our design, since SpiderFlow's abstract gives no platform details.  Regions sit in
3-5 "continents" on a 20,000 x 10,000 km plane; inside a continent each region links to its
nearest neighbours over fast links, and a few long-haul links join the continents.  The graph is
connected and, beyond 4 regions, never complete, so routes have several hops.  One-way latency
is ``2 ms + distance / (100 km/ms)`` (fibre at ~200 km/ms with a route inflation of 2).  Each
region is its own price zone with a time-of-use curve in its local time (UTC offset from its
longitude).

``cloud``: our design, a WAN that looks like measured inter-cloud networks.  Regions sit in 3-6
"continents" of the same plane (spread 1,500 km around each centre, wider than spider's, as cloud
regions of one continent are farther apart than one provider's sites) and belong to a cloud drawn
among ``clouds``.  Clouds peer everywhere, so every pair of regions has a direct link (a complete
graph, as the measured grid of ``geo-8``).  Each direction of a pair has its own VM-pair goodput
drawn from a log-normal distribution whose median and log-spread are the *statistics* of Skyplane's
published inter-region grid (skyplane-project/skyplane, ``skyplane/data/throughput.csv`` at commit
e31b010b, iperf3 runs of 2022-01-29, 64 TCP connections, premium tier; Jain et al., NSDI 2023;
Apache-2.0): over its 3,910 directed pairs of 63 regions, leaving out the pairs among the eight
regions of sfenv's measured grid, the median goodput is 4.71 Gbit/s between regions of one cloud
and 4.22 Gbit/s across clouds, with a standard deviation of ln(goodput) of 0.50-0.52 (0.502 across
clouds, 0.514 within one, 0.516 over all; the generator takes 0.51) and 5th-95th percentiles of
2.1-12.4 Gbit/s: a heavy right tail.  ``python -m sfenv.experiments.derive_cloud_wan`` computes these
figures from the two files.  No pair of the grid is copied.  As in ``geo-8``, a
link's shared capacity is the smaller directed goodput times 4 parallel gateway VMs, and the
directed goodputs are its ``pair_gbps_ab``/``pair_gbps_ba`` (one flow's ceiling).  Latency follows
the spider rule from the distance on the plane: round trips of about 5-400 ms, median near 120 ms
over 40 platforms of 12 regions (the grid's ping profile, ``profiles/latency.csv`` at commit
2e3b2c01, has a median round trip of 154 ms and 10th-90th percentiles 31-259 ms).  Regions name
their ``cloud`` but no ``cloud_region``, so egress is priced at the scenario's
``egress.default_usd_per_gb`` (docs/scenarios.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

__all__ = ["GeneratedTopology", "cloud_topology", "spider_topology", "waxman_topology"]


@dataclass
class GeneratedTopology:
    """Plain data for regions, links and per-zone time-of-use prices."""

    regions: list[dict]
    links: list[dict]
    zones: dict[str, dict]


def _latency_ms(d_km: float) -> float:
    return round(2.0 + d_km / 100.0, 2)


def _regions_and_zones(
    rng: np.random.Generator, pos: np.ndarray, gpu_types: Sequence[str], gpus_per_region: Sequence[int], prefix: str
) -> tuple[list[dict], dict[str, dict]]:
    regions, zones = [], {}
    for i, (x, _) in enumerate(pos):
        name = f"{prefix}{i:02d}"
        offset = float(round((x / 20000.0) * 24.0 - 12.0))
        base = float(round(rng.uniform(25.0, 90.0), 1))
        zones[name] = {"base": base, "peak": float(round(base * rng.uniform(1.5, 2.6), 1)), "utc_offset_h": offset}
        regions.append(
            {
                "name": name,
                "gpu": str(gpu_types[int(rng.integers(len(gpu_types)))]),
                "gpus": int(gpus_per_region[int(rng.integers(len(gpus_per_region)))]),
                "zone": name,
                "pue": float(round(rng.uniform(1.1, 1.5), 2)),
                "intra_bw_gbps": 100.0,
                "utc_offset_h": offset,
            }
        )
    return regions, zones


def spider_topology(
    num_regions: int,
    seed: int,
    gpu_types: Sequence[str] = ("A100-80GB", "H100-SXM", "V100", "L40S", "A6000"),
    gpus_per_region: Sequence[int] = (16, 32, 64, 128),
    intra_continent_gbps: Sequence[float] = (5.0, 10.0, 25.0),
    long_haul_gbps: Sequence[float] = (1.0, 2.0, 5.0),
    neighbours: int = 2,
) -> GeneratedTopology:
    """A SpiderFlow-like platform of ``num_regions`` clusters (see module docstring)."""
    if num_regions < 2:
        raise ValueError("spider topology needs at least 2 regions")
    rng = np.random.default_rng(seed)
    n_cont = int(min(max(3, num_regions // 8), 5, num_regions))
    centres = np.column_stack([rng.uniform(1500, 18500, n_cont), rng.uniform(1500, 8500, n_cont)])
    cont = np.array([i % n_cont for i in range(num_regions)])
    pos = centres[cont] + rng.normal(0.0, 700.0, size=(num_regions, 2))
    dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    g: nx.Graph[int] = nx.Graph()
    g.add_nodes_from(range(num_regions))
    for c in range(n_cont):
        members = np.flatnonzero(cont == c)
        for i in members:
            others = [j for j in members if j != i]
            for j in sorted(others, key=lambda j: dist[i, j])[:neighbours]:
                g.add_edge(int(i), int(j), kind="intra")
    # join continents: a minimum spanning tree over continents plus one extra chord per continent
    comps = [np.flatnonzero(cont == c) for c in range(n_cont)]
    cg: nx.Graph[int] = nx.Graph()
    for a in range(n_cont):
        for b in range(a + 1, n_cont):
            i, j = min(((i, j) for i in comps[a] for j in comps[b]), key=lambda e: dist[e])
            cg.add_edge(a, b, weight=float(dist[i, j]), pair=(int(i), int(j)))
    chosen = set(nx.minimum_spanning_tree(cg).edges())
    extra = sorted(cg.edges(data=True), key=lambda e: e[2]["weight"])
    for a, b, _ in extra:
        if len(chosen) >= n_cont - 1 + max(1, n_cont // 2):
            break
        chosen.add((a, b))
    for a, b in chosen:
        i, j = cg.edges[a, b]["pair"]
        g.add_edge(i, j, kind="long")
    # any leftover disconnection (tiny continents) joins by nearest pair
    while not nx.is_connected(g):
        parts = list(nx.connected_components(g))
        first, rest = list(parts[0]), [v for p in parts[1:] for v in p]
        u, w = min(((u, w) for u in first for w in rest), key=lambda e: dist[e])
        g.add_edge(u, w, kind="long")
    regions, zones = _regions_and_zones(rng, pos, gpu_types, gpus_per_region, "c")
    links = []
    for u, w, data in sorted(g.edges(data=True)):
        choices = intra_continent_gbps if data["kind"] == "intra" else long_haul_gbps
        links.append(
            {
                "a": regions[u]["name"],
                "b": regions[w]["name"],
                "bandwidth_gbps": float(choices[int(rng.integers(len(choices)))]),
                "latency_ms": _latency_ms(float(dist[u, w])),
            }
        )
    return GeneratedTopology(regions, links, zones)


def waxman_topology(
    num_regions: int,
    seed: int,
    beta: float = 0.6,
    alpha: float = 0.25,
    gpu_types: Sequence[str] = ("A100-80GB", "V100", "L40S"),
    gpus_per_region: Sequence[int] = (16, 32, 64),
    bandwidth_gbps: Sequence[float] = (1.0, 2.5, 5.0, 10.0),
) -> GeneratedTopology:
    """A connected Waxman random graph (networkx) on a 20,000 x 10,000 km plane."""
    rng = np.random.default_rng(seed)
    g = nx.waxman_graph(num_regions, beta=beta, alpha=alpha, seed=int(rng.integers(2**31)))
    pos = np.array([[g.nodes[i]["pos"][0] * 20000.0, g.nodes[i]["pos"][1] * 10000.0] for i in range(num_regions)])
    dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    while not nx.is_connected(g):
        parts = list(nx.connected_components(g))
        first, rest = list(parts[0]), [v for p in parts[1:] for v in p]
        i, j = min(((i, j) for i in first for j in rest), key=lambda e: dist[e])
        g.add_edge(i, j)
    regions, zones = _regions_and_zones(rng, pos, gpu_types, gpus_per_region, "w")
    links = [
        {
            "a": regions[i]["name"],
            "b": regions[j]["name"],
            "bandwidth_gbps": float(bandwidth_gbps[int(rng.integers(len(bandwidth_gbps)))]),
            "latency_ms": _latency_ms(float(dist[i, j])),
        }
        for i, j in sorted(g.edges())
    ]
    return GeneratedTopology(regions, links, zones)


def _check_cloud_arguments(num_regions: int, clouds: Sequence[str], median_gbps_same_cloud: float,
                           median_gbps_cross_cloud: float, sigma_log: float, gateways: int) -> None:
    if num_regions < 2:
        raise ValueError(f"cloud topology: num_regions = {num_regions!r}; expected at least 2")
    if not clouds:
        raise ValueError("cloud topology: clouds is empty; expected at least one cloud name (e.g. aws)")
    for field, value in (("median_gbps_same_cloud", median_gbps_same_cloud),
                         ("median_gbps_cross_cloud", median_gbps_cross_cloud)):
        if not value > 0:
            raise ValueError(f"cloud topology: {field} = {value!r}; expected a bandwidth > 0 Gbit/s")
    if not sigma_log >= 0:
        raise ValueError(f"cloud topology: sigma_log = {sigma_log!r}; expected a spread >= 0")
    if gateways < 1:
        raise ValueError(f"cloud topology: gateways = {gateways!r}; expected an integer >= 1")


def cloud_topology(
    num_regions: int,
    seed: int,
    gpu_types: Sequence[str] = ("A100-80GB", "H100-SXM", "V100", "L40S", "A6000"),
    gpus_per_region: Sequence[int] = (16, 32, 64, 128),
    clouds: Sequence[str] = ("aws", "gcp", "azure"),
    median_gbps_same_cloud: float = 4.71,
    median_gbps_cross_cloud: float = 4.22,
    sigma_log: float = 0.51,
    gateways: int = 4,
) -> GeneratedTopology:
    """A cloud-like platform of ``num_regions`` regions, every pair linked (see module docstring).

    :param clouds: the clouds a region's ``cloud`` is drawn from (uniformly).
    :param median_gbps_same_cloud: median VM-pair goodput between two regions of one cloud, Gbit/s.
    :param median_gbps_cross_cloud: the same across clouds, Gbit/s.
    :param sigma_log: standard deviation of the natural log of a directed goodput.
    :param gateways: parallel gateway VMs a link's shared capacity counts (the smaller goodput times it).
    :raises ValueError: naming the argument that is out of range.
    """
    _check_cloud_arguments(num_regions, clouds, median_gbps_same_cloud, median_gbps_cross_cloud, sigma_log, gateways)
    rng = np.random.default_rng(seed)
    n_cont = int(min(max(3, num_regions // 3), 6, num_regions))
    centres = np.column_stack([rng.uniform(1500, 18500, n_cont), rng.uniform(1500, 8500, n_cont)])
    cont = np.array([i % n_cont for i in range(num_regions)])
    pos = centres[cont] + rng.normal(0.0, 1500.0, size=(num_regions, 2))
    pos = np.clip(pos, 0.0, [20000.0, 10000.0])  # on the plane (UTC offsets -12..12)
    dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    regions, zones = _regions_and_zones(rng, pos, gpu_types, gpus_per_region, "k")
    for region in regions:
        region["cloud"] = str(clouds[int(rng.integers(len(clouds)))])
    links = []
    for u in range(num_regions):
        for w in range(u + 1, num_regions):
            same = regions[u]["cloud"] == regions[w]["cloud"]
            median = median_gbps_same_cloud if same else median_gbps_cross_cloud
            ab, ba = (float(round(median * math.exp(sigma_log * float(z)), 2)) for z in rng.standard_normal(2))
            ab, ba = max(ab, 0.01), max(ba, 0.01)
            links.append(
                {
                    "a": regions[u]["name"],
                    "b": regions[w]["name"],
                    "bandwidth_gbps": float(round(min(ab, ba) * gateways, 2)),
                    "latency_ms": _latency_ms(float(dist[u, w])),
                    "pair_gbps_ab": ab,
                    "pair_gbps_ba": ba,
                }
            )
    return GeneratedTopology(regions, links, zones)
