"""Load-aware routing (``sim.routing: load``): each cross-region transfer takes its best route at the current rates.

Under the default ``sim.routing: static`` a transfer takes the route
:meth:`sfenv.world.topology.Topology.route_for` picks for its payload at *nominal* capacities (the
widest or the lowest-latency path).  Under ``load``, when a job starts (or re-plans) each of its
cross-region transfers (:func:`sfenv.model.perf.plan_wan_transfers`: a pipeline hop's replica pairs
each way, a ring edge at a region boundary) takes, of a few candidate routes, the one on which one
of its messages arrives first *at the rates it would get now*:
``latency + bits / rate``, the rate being what :func:`sfenv.model.sharing.group_rates` gives the
transfer's flow group against the running jobs' load (duty-weighted sharing, the TCP window over
the round trip, the VM-pair caps of its links) and the plan's own groups routed before it (in
:func:`~sfenv.model.perf.plan_wan_transfers` order; only its co-active groups count, as in the
fast path's first pass).  The routes are then pinned in the plan (:attr:`sfenv.model.perf.Plan.routes`)
and kept until the job ends or re-plans: running flows are never re-routed mid-transfer.  Under
``adaptive`` every running job across regions is offered them again whenever the WAN changes
(:mod:`sfenv.sim.reroute`).

**Candidates** (:func:`candidate_routes`): the static route for the payload, the widest path, and
the :data:`ROUTE_CANDIDATES` lowest-latency loop-free paths (Yen's k shortest paths, Yen,
Management Science 17(11), 1971, as :func:`networkx.shortest_simple_paths` implements it, with the
links' one-way latency as weight).  Latency rather than hop count because a WAN hop's cost is its
latency: two short hops through a relay region can arrive before one long link, and a transfer's
time is ``latency + bits / rate``; the widest path is added so that a large payload keeps the
wide detour the static rule would give it.  So ``load`` never has fewer routes to choose from than
``static``, and with no other traffic it differs from ``static`` only where the transport and
VM-pair bounds (which the nominal rule ignores) change the ranking.  This follows the load-adaptive
path selection of overlay transfer planners (Skyplane, Jain et al., NSDI 2023, picks overlay paths
by measured throughput) at the granularity of one job start; unlike Skyplane's planner it solves
no LP over all paths at once and splits no transfer over several paths.
"""

from __future__ import annotations

import itertools
import weakref

import networkx as nx
import numpy as np

from sfenv.model.perf import PerfParams, Plan, flow_group_on, plan_wan_transfers
from sfenv.model.sharing import FlowGroup, group_rates
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = ["ROUTE_CANDIDATES", "ROUTING_MODES", "candidate_routes", "route_plan"]

#: the values of ``sim.routing``: the static routes; routes chosen at the current rates when a job starts;
#: and those re-chosen for running jobs whenever the WAN changes (:mod:`sfenv.sim.reroute`)
ROUTING_MODES = ("static", "load", "adaptive")
#: lowest-latency loop-free paths considered per pair of regions (besides the widest path)
ROUTE_CANDIDATES = 3

#: per topology, the candidate routes of each ordered pair of regions (a topology never changes)
_CANDIDATES: weakref.WeakKeyDictionary[Topology, dict[tuple[int, int, int], tuple[tuple[int, ...], ...]]] = \
    weakref.WeakKeyDictionary()


def candidate_routes(topo: Topology, a: int, b: int, k: int = ROUTE_CANDIDATES) -> tuple[tuple[int, ...], ...]:
    """The routes (link indices) a transfer from ``a`` to ``b`` may take under load-aware routing.

    The widest path (:attr:`Topology.route_links`), then the ``k`` lowest-latency loop-free paths
    (Yen's algorithm), without repeats; memoised per topology.

    :raises ValueError: if ``a == b`` or ``k < 1``.
    """
    if a == b:
        raise ValueError(f"candidate_routes: regions a and b are both {a}; a route joins two regions")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    memo = _CANDIDATES.get(topo)
    if memo is None:
        memo = _CANDIDATES[topo] = {}
    key = (a, b, k)
    hit = memo.get(key)
    if hit is not None:
        return hit
    graph = topo.graph  # edges carry their link index and one-way latency (ms)
    found: list[tuple[int, ...]] = [topo.route_links[a][b]]
    for path in itertools.islice(nx.shortest_simple_paths(graph, a, b, weight="latency_ms"), k):
        links = tuple(int(graph.edges[u, v]["link"]) for u, v in itertools.pairwise(path))
        if links not in found:
            found.append(links)
    res = tuple(found)
    memo[key] = res
    return res


def route_plan(
    plan: Plan, job: JobSpec, topo: Topology, params: PerfParams, capacity_bps: np.ndarray, load: np.ndarray,
    k: int = ROUTE_CANDIDATES,
) -> Plan:
    """``plan`` with a route pinned for each cross-region transfer, chosen at the current rates (module docstring).

    A plan inside one region, or one that already pins its routes, is returned as it is.  Ties go to
    the static route, then to the earlier candidate.

    :param capacity_bps: the current capacity of every directed link, bit/s.
    :param load: the other running jobs' load (:func:`sfenv.model.sharing.empty_load` layout); for a
        re-plan, without the job's own.
    :param k: lowest-latency paths considered per transfer (:func:`candidate_routes`).
    """
    if plan.routes or len(plan.regions) < 2:
        return plan
    member_cap = topo.directed_pair_cap_bps if topo.has_pair_caps else None
    chosen: list[FlowGroup] = []
    routes: list[tuple[int, ...]] = []
    for tr in plan_wan_transfers(plan, job):
        a, b, payload = tr[0], tr[1], tr[4]
        static = topo.route_for(a, b, payload)[0]
        best: tuple[float, tuple[int, ...], FlowGroup] | None = None
        for links in (static, *candidate_routes(topo, a, b, k)):
            if best is not None and links == static:
                continue  # the static route is tried first (it wins ties)
            group = flow_group_on(plan, job, topo, tr, links)
            rates, _ = group_rates([*chosen, group], capacity_bps, load, None, params.wan_streams,
                                   params.tcp_window_bytes, member_cap, per_server=params.vm_pair_cap == "server")
            arrival = group.latency_s + group.bits / rates[-1]
            if best is None or arrival < best[0] * (1.0 - 1e-9):
                best = (arrival, links, group)
        assert best is not None
        routes.append(best[1])
        chosen.append(best[2])
    return plan.with_routes(routes)
