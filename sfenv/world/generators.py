"""Topology generators: SpiderFlow-like geo platforms and Waxman random graphs.

All generators are deterministic given their ``seed`` (a topology is part of a scenario's
identity, so it does not change from episode to episode).

``spider``: our design, since SpiderFlow's abstract gives no platform details.  Regions sit in
3-5 "continents" on a 20,000 x 10,000 km plane; inside a continent each region links to its
nearest neighbours over fast links, and a few long-haul links join the continents.  The graph is
connected and, beyond 4 regions, never complete, so routes have several hops.  One-way latency
is ``2 ms + distance / (100 km/ms)`` (fibre at ~200 km/ms with a route inflation of 2).  Each
region is its own price zone with a time-of-use curve in its local time (UTC offset from its
longitude).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

__all__ = ["GeneratedTopology", "spider_topology", "waxman_topology"]


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
