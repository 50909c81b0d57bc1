"""Regions, WAN links and routes: the inter-cluster topology as a networkx graph.

Regions (GPU clusters) are the nodes and WAN links the edges.  Routes between regions that are not
adjacent follow graph paths.  For every ordered pair two candidate routes are precomputed: the
*widest* path (largest bottleneck bandwidth, ties broken by lowest latency; a lexicographic
Dijkstra) and the *fastest* path (lowest latency).  A transfer of a given payload takes the
candidate with the smaller ``latency + payload / bottleneck bandwidth`` at nominal capacities
(:meth:`Topology.route_for`): a pipeline hop's small activation takes the direct 70 ms link rather
than a 310 ms detour of wider links, a large gradient the wide detour.  A hop's bandwidth is the
bottleneck of its route, shared with other jobs' flows on the same links (see :mod:`sfenv.sim`).
``route_links`` / ``route_latency_s`` / ``route_bw_bps`` keep the widest routes.  These are the
static routes; under ``sim.routing: load`` a job's transfers take routes chosen at the current rates
when it starts (:mod:`sfenv.model.routing`), which may leave both candidates.

Links are full duplex: each direction has the link's capacity to itself.  *Directed links* number
the directions: ``2 k`` is link k from its ``a`` end to its ``b`` end, ``2 k + 1`` the other way
(:meth:`Topology.directed_route` turns a route into them); per-direction state (flows and their
load, :mod:`sfenv.model.sharing`) is indexed by them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from sfenv.world.hardware import GPUSpec

__all__ = ["Link", "Region", "Scalars", "Topology"]


@dataclass(frozen=True)
class Scalars:
    """Plain-Python copies of per-region figures for fast scalar access in hot loops."""

    flops: list[float]
    memory: list[float]
    intra_bw: list[float]
    intra_latency: list[float]
    route_latency: list[list[float]]
    gpus_per_server: list[int]
    tp_bw: list[float]
    gpu: list[GPUSpec]
    idle_w: list[float]
    tdp_w: list[float]
    pue: list[float]


@dataclass(frozen=True)
class Region:
    """One GPU cluster in one region.

    :param name: unique region name.
    :param gpu: the GPU model (one type per region).
    :param num_gpus: GPUs in the cluster.
    :param zone: electricity price zone.
    :param pue: power usage effectiveness (facility power / IT power), >= 1.
    :param intra_bw_gbps: per-GPU network bandwidth inside the region, Gbit/s: each GPU's own NIC (as on
        DGX-class servers).  A pipeline hop inside the region uses one; a data-parallel ring across
        servers uses the NICs of its members in a server, and inside one server the GPU link instead
        (docs/model.md, "Data-parallel rings across servers").
    :param intra_latency_ms: latency inside the region, ms.
    :param gpus_per_server: GPUs per server; tensor parallelism stays inside one server, and a stage's
        GPUs are taken as packed into servers (tensor ranks first, then data-parallel ranks).
    :param utc_offset_h: the region's UTC offset in hours (time of day in observations).
    :param tier: free-form label (e.g. ``"cloud"``, ``"edge"``, ``"end"``).
    """

    name: str
    gpu: GPUSpec
    num_gpus: int
    zone: str
    pue: float = 1.2
    intra_bw_gbps: float = 100.0
    intra_latency_ms: float = 0.01
    gpus_per_server: int = 8
    utc_offset_h: float = 0.0
    tier: str = "cloud"


@dataclass(frozen=True)
class Link:
    """An undirected, full-duplex WAN link between regions ``a`` and ``b`` (indices).

    :param bandwidth_gbps: capacity per direction, Gbit/s, shared by the flows on the link.
    :param latency_ms: one-way latency, ms.
    :param pair_gbps_ab: the rate of one flow from ``a`` to ``b``, Gbit/s, when it is measured per VM
        pair (the Skyplane grid's iperf3 goodput between one VM in each region): every flow in that
        direction runs at most at this rate, whatever its share of ``bandwidth_gbps``.  None: no cap.
    :param pair_gbps_ba: the same from ``b`` to ``a``.
    """

    a: int
    b: int
    bandwidth_gbps: float
    latency_ms: float
    pair_gbps_ab: float | None = None
    pair_gbps_ba: float | None = None


class Topology:
    """Regions, links and precomputed static routes.

    :param regions: the regions, indexed by position.
    :param links: the WAN links (``a``/``b`` are region indices).
    :raises ValueError: on duplicate names, self-loops, duplicate links or a disconnected graph.
    """

    def __init__(self, regions: Sequence[Region], links: Sequence[Link]):
        self.regions: tuple[Region, ...] = tuple(regions)
        self.links: tuple[Link, ...] = tuple(links)
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate region names in {names}")
        self.index: dict[str, int] = {n: i for i, n in enumerate(names)}
        c = len(self.regions)
        g: nx.Graph[int] = nx.Graph()
        for i, r in enumerate(self.regions):
            g.add_node(i, name=r.name, gpu=r.gpu.name, num_gpus=r.num_gpus, zone=r.zone)
        for k, ln in enumerate(self.links):
            if ln.a == ln.b:
                raise ValueError(f"link {k} connects region {names[ln.a]!r} to itself")
            if g.has_edge(ln.a, ln.b):
                raise ValueError(f"duplicate link between {names[ln.a]!r} and {names[ln.b]!r}")
            g.add_edge(ln.a, ln.b, link=k, bandwidth_gbps=ln.bandwidth_gbps, latency_ms=ln.latency_ms)
        if c > 1 and not nx.is_connected(g):
            parts = [sorted(names[i] for i in comp) for comp in nx.connected_components(g)]
            raise ValueError(f"topology is disconnected; components: {parts}")
        self.graph: nx.Graph = g
        self.num_regions = c
        self.num_links = len(self.links)
        self.link_bw_bps = np.array([ln.bandwidth_gbps * 1e9 for ln in self.links], dtype=float)
        self.link_latency_s = np.array([ln.latency_ms * 1e-3 for ln in self.links], dtype=float)
        #: directions of the links (``2 k``: link k from ``a`` to ``b``, ``2 k + 1``: back)
        self.num_directed = 2 * self.num_links
        #: capacity of each directed link, bit/s (each direction has its link's full bandwidth)
        self.directed_bw_bps = np.repeat(self.link_bw_bps, 2)
        self.gpu_counts = np.array([r.num_gpus for r in self.regions], dtype=np.int64)
        self.gpu_flops = np.array([r.gpu.flops for r in self.regions], dtype=float)
        self.gpu_memory = np.array([r.gpu.memory_bytes for r in self.regions], dtype=float)
        self.intra_bw_bps = np.array([r.intra_bw_gbps * 1e9 for r in self.regions], dtype=float)
        self.intra_latency_s = np.array([r.intra_latency_ms * 1e-3 for r in self.regions], dtype=float)
        #: the most one flow can carry from region i to adjacent region j, bit/s (per VM pair where a link
        #: gives it, :attr:`Link.pair_gbps_ab`; inf elsewhere)
        self.pair_cap_bps = np.full((c, c), np.inf)
        for ln in self.links:
            if ln.pair_gbps_ab is not None:
                self.pair_cap_bps[ln.a, ln.b] = ln.pair_gbps_ab * 1e9
            if ln.pair_gbps_ba is not None:
                self.pair_cap_bps[ln.b, ln.a] = ln.pair_gbps_ba * 1e9
        #: True when some link caps its flows per VM pair (:meth:`flow_cap_bps`)
        self.has_pair_caps = bool(np.isfinite(self.pair_cap_bps).any())
        #: the same per directed link (``2 k``: link k from ``a`` to ``b``, ``2 k + 1``: back): the most one
        #: transfer's member (a VM pair) carries over that direction, bit/s
        self.directed_pair_cap_bps = np.array(
            [cap for ln in self.links for cap in (self.pair_cap_bps[ln.a, ln.b], self.pair_cap_bps[ln.b, ln.a])],
            dtype=float)
        self._cap_memo: dict[tuple[int, tuple[int, ...], bool], float] = {}
        self._compute_routes()
        self._fast_links = self._fastest_routes()
        self._route_memo: dict[tuple[int, int, float], tuple[tuple[int, ...], float, float]] = {}
        self._directed_memo: dict[tuple[int, int, tuple[int, ...]], tuple[int, ...]] = {}
        self._among_memo: dict[tuple[int, ...], np.ndarray] = {}
        #: per region, the first region that plans alike (equal GPU, GPUs per server, GPU link and
        #: intra-region bandwidth and latency): a single-region plan found for one fits the other
        self.plan_class: list[int] = []
        first: dict[tuple, int] = {}
        for i, r in enumerate(self.regions):
            figures = (r.gpu.flops, r.gpu.memory_bytes, r.gpu.link_bps, r.gpu.hbm_gbs, r.gpu.kernels,
                       r.gpus_per_server, r.intra_bw_gbps,
                       r.intra_latency_ms)
            self.plan_class.append(first.setdefault(figures, i))
        self.scalars = Scalars(
            flops=self.gpu_flops.tolist(),
            memory=self.gpu_memory.tolist(),
            intra_bw=self.intra_bw_bps.tolist(),
            intra_latency=self.intra_latency_s.tolist(),
            route_latency=self.route_latency_s.tolist(),
            gpus_per_server=[r.gpus_per_server for r in self.regions],
            tp_bw=[r.gpu.link_bps for r in self.regions],
            gpu=[r.gpu for r in self.regions],
            idle_w=[r.gpu.idle_w for r in self.regions],
            tdp_w=[r.gpu.tdp_w for r in self.regions],
            pue=[r.pue for r in self.regions],
        )

    # ------------------------------------------------------------------ routes
    def _compute_routes(self) -> None:
        c = self.num_regions
        self.route_links: list[list[tuple[int, ...]]] = [[() for _ in range(c)] for _ in range(c)]
        self.route_paths: list[list[tuple[int, ...]]] = [[(i,) for _ in range(c)] for i in range(c)]
        self.route_bw_bps = np.zeros((c, c))
        self.route_latency_s = np.zeros((c, c))
        adj: list[list[tuple[int, int]]] = [[] for _ in range(c)]
        for k, ln in enumerate(self.links):
            adj[ln.a].append((ln.b, k))
            adj[ln.b].append((ln.a, k))
        for src in range(c):
            # Lexicographic Dijkstra: maximise bottleneck bandwidth, then minimise latency.
            best: dict[int, tuple[float, float]] = {src: (-np.inf, 0.0)}
            prev: dict[int, tuple[int, int]] = {}
            heap: list[tuple[float, float, int]] = [(-np.inf, 0.0, src)]
            done = set()
            while heap:
                nbw, lat, u = heapq.heappop(heap)
                if u in done:
                    continue
                done.add(u)
                for v, k in adj[u]:
                    cand = (max(nbw, -self.link_bw_bps[k]), lat + self.link_latency_s[k])
                    if v not in best or cand < best[v]:
                        best[v] = cand
                        prev[v] = (u, k)
                        heapq.heappush(heap, (cand[0], cand[1], v))
            for dst in range(c):
                if dst == src:
                    self.route_bw_bps[src, dst] = self.intra_bw_bps[src]
                    self.route_latency_s[src, dst] = self.intra_latency_s[src]
                    continue
                links: list[int] = []
                path = [dst]
                v = dst
                while v != src:
                    u, k = prev[v]
                    links.append(k)
                    path.append(u)
                    v = u
                self.route_links[src][dst] = tuple(reversed(links))
                self.route_paths[src][dst] = tuple(reversed(path))
                self.route_bw_bps[src, dst] = -best[dst][0]
                self.route_latency_s[src, dst] = best[dst][1]

    def _fastest_routes(self) -> list[list[tuple[int, ...]]]:
        """Lowest-latency route (link indices) for every ordered pair (Dijkstra on latency)."""
        c = self.num_regions
        out: list[list[tuple[int, ...]]] = [[() for _ in range(c)] for _ in range(c)]
        adj: list[list[tuple[int, int]]] = [[] for _ in range(c)]
        for k, ln in enumerate(self.links):
            adj[ln.a].append((ln.b, k))
            adj[ln.b].append((ln.a, k))
        lat = self.link_latency_s
        for src in range(c):
            dist = {src: 0.0}
            prev: dict[int, tuple[int, int]] = {}
            heap = [(0.0, src)]
            done: set[int] = set()
            while heap:
                d, u = heapq.heappop(heap)
                if u in done:
                    continue
                done.add(u)
                for v, k in adj[u]:
                    nd = d + float(lat[k])
                    if v not in dist or nd < dist[v]:
                        dist[v] = nd
                        prev[v] = (u, k)
                        heapq.heappush(heap, (nd, v))
            for dst in range(c):
                if dst == src:
                    continue
                links: list[int] = []
                v = dst
                while v != src:
                    u, k = prev[v]
                    links.append(k)
                    v = u
                out[src][dst] = tuple(reversed(links))
        return out

    def route_for(self, a: int, b: int, nbytes: float) -> tuple[tuple[int, ...], float, float]:
        """The route a transfer of ``nbytes`` from ``a`` to ``b`` takes, with its latency and bandwidth.

        Of the widest and the fastest (lowest-latency) route, the one with the smaller
        ``latency + 8 nbytes / bottleneck bandwidth`` at nominal capacities (at most one flow's
        per-VM-pair rate each way, :meth:`flow_cap_bps`, where links give it); memoised per payload.

        :return: ``(link indices, latency in s, bottleneck bandwidth in bit/s)``; no links when a == b.
        """
        key = (a, b, nbytes)
        hit = self._route_memo.get(key)
        if hit is not None:
            return hit
        res: tuple[tuple[int, ...], float, float]
        if a == b:
            res = ((), float(self.intra_latency_s[a]), float(self.intra_bw_bps[a]))
        else:
            best = None
            for links in (self.route_links[a][b], self._fast_links[a][b]):
                lat = float(sum(self.link_latency_s[k] for k in links))
                bw = float(min(self.link_bw_bps[k] for k in links))
                if self.has_pair_caps:
                    bw = min(bw, self.flow_cap_bps(a, links, both_ways=True))
                t = lat + 8.0 * nbytes / bw
                if best is None or t < best[0] - 1e-12:
                    best = (t, (links, lat, bw))
            assert best is not None
            res = best[1]
        if len(self._route_memo) < 1 << 16:
            self._route_memo[key] = res
        return res

    def directed_route(self, a: int, b: int, links: Sequence[int]) -> tuple[int, ...]:
        """The directed links (``2 k`` or ``2 k + 1``) of a route from ``a`` to ``b`` over ``links``, in order.

        :param links: link indices of a route that starts at ``a`` (e.g. :meth:`route_for`'s).
        :raises ValueError: if ``links`` is not a path from ``a`` to ``b``.
        """
        key = (a, b, links if isinstance(links, tuple) else tuple(links))
        hit = self._directed_memo.get(key)
        if hit is not None:
            return hit
        out: list[int] = []
        at = a
        for k in key[2]:
            ln = self.links[k]
            if ln.a == at:
                out.append(2 * k)
                at = ln.b
            elif ln.b == at:
                out.append(2 * k + 1)
                at = ln.a
            else:
                raise ValueError(f"link {k} does not leave region {at} on the route from {a} to {b}")
        if at != b:
            raise ValueError(f"the route from {a} over links {key[2]} ends at {at}, not {b}")
        res = tuple(out)
        if len(self._directed_memo) < 1 << 16:
            self._directed_memo[key] = res
        return res

    def flow_cap_bps(self, src: int, links: tuple[int, ...], both_ways: bool = False) -> float:
        """The most one flow from region ``src`` along ``links`` can carry, bit/s: its hops' smallest VM-pair rate.

        A route through other regions is relayed hop by hop, one VM pair per hop, so its rate is its
        slowest hop's.  inf when no hop has a per-pair rate (:attr:`Link.pair_gbps_ab`).

        :param both_ways: also the way back (the same links from the other end): a pipeline hop sends
            activations one way and their gradients the other, at one modelled transfer time.
        """
        key = (src, links, both_ways)
        hit = self._cap_memo.get(key)
        if hit is not None:
            return hit
        cap = self.pair_cap_bps
        out = np.inf
        cur = src
        for k in links:
            ln = self.links[k]
            nxt = ln.b if ln.a == cur else ln.a
            out = min(out, float(cap[cur, nxt]), float(cap[nxt, cur]) if both_ways else np.inf)
            cur = nxt
        if len(self._cap_memo) < 1 << 16:
            self._cap_memo[key] = float(out)
        return float(out)

    def links_among(self, regions: Iterable[int]) -> np.ndarray:
        """Every link a transfer between two of ``regions`` can take (either route of :meth:`route_for`, either way).

        A plan whose stages sit in ``regions`` reads the link state (flows, capacities) on these
        links only: its pipeline hops and all-reduce rings run between its regions, and the route
        of each is one of those two, chosen at nominal capacities.  Plan memos key on the state of
        these links instead of the whole network's (an exact key: a change elsewhere cannot change
        the plan's modelled performance) under static routing; under ``sim.routing: load`` a route may
        leave them, and memos key on the whole state (:meth:`sfenv.sim.view.SimView.link_state_among`).
        Memoised per set of regions.

        :param regions: region indices (order and repeats do not change the result).
        :return: sorted link indices (an integer array, treat as read-only).
        """
        key = regions if isinstance(regions, tuple) else tuple(regions)  # as given: no sort on a hit
        hit = self._among_memo.get(key)
        if hit is None:
            links: set[int] = set()
            for a in key:
                for b in key:
                    if a != b:
                        links.update(self.route_links[a][b])
                        links.update(self._fast_links[a][b])
            hit = np.array(sorted(links), dtype=np.intp)
            if len(self._among_memo) >= 1 << 14:
                self._among_memo.clear()
            self._among_memo[key] = hit
        return hit

    def route(self, a: int, b: int) -> tuple[int, ...]:
        """Link indices on the static route from region ``a`` to region ``b`` (empty if a == b)."""
        return self.route_links[a][b]

    def path(self, a: int, b: int) -> tuple[int, ...]:
        """Region indices on the static route from ``a`` to ``b``, both ends included."""
        return self.route_paths[a][b]

    def neighbors(self, a: int) -> list[int]:
        """Regions adjacent to ``a`` in the WAN graph."""
        return sorted(self.graph.neighbors(a))

    def link_between(self, a: int, b: int) -> int | None:
        """Index of the direct link between ``a`` and ``b``, or None."""
        data = self.graph.get_edge_data(a, b)
        return None if data is None else int(data["link"])

    @property
    def region_names(self) -> list[str]:
        """Region names in index order."""
        return [r.name for r in self.regions]

    @property
    def total_gpus(self) -> int:
        """GPUs over all regions."""
        return int(self.gpu_counts.sum())

    def __repr__(self) -> str:
        return f"Topology({self.num_regions} regions, {self.num_links} links, {self.total_gpus} GPUs)"
