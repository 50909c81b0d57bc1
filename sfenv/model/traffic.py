"""Where a plan's cross-region bytes go: per directed region pair and per WAN hop, per iteration (pure functions).

The bytes are those :func:`sfenv.model.perf.evaluate_plan` counts in ``PlanPerf.wan_bytes_per_iter``,
split by direction:

- **pipeline hops**: replica i of stage k sends each of the ``m`` micro-batches' boundary activation
  (``2 b s h`` bytes, bf16) to replica i of stage k+1 (forward, source -> destination), and gets its
  gradient back (backward, destination -> source): per iteration ``m x 2 b s h`` bytes each way per
  replica pair in different regions;
- **data-parallel syncs across regions**: a stage whose replicas span regions runs a ring all-reduce
  of its gradients (``2 P_k`` bytes, the tied embedding included on the first and last stage); each
  ring edge that crosses a region boundary carries ``2 (d-1)/d x 2 P_k`` bytes in the ring's
  direction, region i to region i+1 (two regions: one edge each way).

:func:`pair_bytes_per_iter` gives the bytes per directed (source, destination) pair of regions.
:func:`hop_bytes_per_iter` puts each transfer on the links of its route (the route
:func:`sfenv.model.perf.plan_flows` gives its flow: :meth:`Topology.route_for` of the payload, and
the same links back for the backward direction and a two-region ring; under ``sim.routing: load`` the
plan's pinned :attr:`~sfenv.model.perf.Plan.routes`, each transfer on its own).  A route through other regions
is an overlay relay, as in Skyplane: each of its hops leaves a region and is billed as egress of that
region (Skyplane's planner adds the price of every hop of an overlay path).  :func:`egress_usd_per_iter`
prices the hops with a matrix of USD per byte (:func:`sfenv.world.egress.egress_price_matrix`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from sfenv.model.perf import ACT_BYTES, Plan, plan_wan_transfers
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = ["egress_usd_per_iter", "hop_bytes_per_iter", "pair_bytes_per_iter", "route_hops"]

#: one transfer of an iteration: (source region, destination region, bytes, payload of one message for
#: the route choice, True when it runs back along the route of (destination, source))
_Transfer = tuple[int, int, float, float, bool]


def _stage_param_bytes(plan: Plan, job: JobSpec, k: int) -> float:
    """Gradient bytes of stage ``k``'s all-reduce: ``2 P_k`` (bf16), the tied embedding on the first and last stage."""
    model = job.model
    p = len(plan.stages)
    params = model.layer_params * plan.stages[k].layers
    params += model.embedding_params if k == 0 else 0.0
    params += model.embedding_params if k == p - 1 and p > 1 else 0.0
    return 2.0 * params


def _transfers(plan: Plan, job: JobSpec) -> Iterator[_Transfer]:
    """Every cross-region transfer of one iteration (module docstring), in stage order."""
    stages = plan.stages
    m = plan.num_microbatches(job)
    model = job.model
    act = ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden
    for k in range(len(stages) - 1):
        for (a, b), n in stages[k].hop_pairs(stages[k + 1]).items():
            if a != b:
                yield a, b, act * m * n, act, False  # forward activations
                yield b, a, act * m * n, act, True  # backward gradients, on the same links
    d = plan.dp
    for k, st in enumerate(stages):
        regs = st.regions
        if len(regs) < 2:
            continue
        grad = _stage_param_bytes(plan, job, k)
        per_edge = 2.0 * (d - 1) / d * grad
        route_payload = 2.0 * model.layer_params * st.layers  # the payload plan_flows routes the ring by
        if len(regs) == 2:
            yield regs[0], regs[1], per_edge, route_payload, False
            yield regs[1], regs[0], per_edge, route_payload, True
        else:
            for i in range(len(regs)):
                yield regs[i], regs[(i + 1) % len(regs)], per_edge, route_payload, False


def pair_bytes_per_iter(plan: Plan, job: JobSpec) -> dict[tuple[int, int], float]:
    """Bytes one iteration of ``plan`` sends from region a to region b: ``{(a, b): bytes}`` (a != b).

    Their sum is ``evaluate_plan(...).wan_bytes_per_iter``.  Empty for a plan inside one region.
    """
    out: dict[tuple[int, int], float] = {}
    if len(plan.regions) < 2:
        return out
    for a, b, nbytes, _, _ in _transfers(plan, job):
        out[(a, b)] = out.get((a, b), 0.0) + nbytes
    return out


def route_hops(topo: Topology, src: int, links: tuple[int, ...]) -> list[tuple[int, int]]:
    """The directed region hops ``(from, to)`` of a route of ``links`` starting in region ``src``."""
    hops: list[tuple[int, int]] = []
    cur = src
    for k in links:
        ln = topo.links[k]
        nxt = ln.b if ln.a == cur else ln.a
        hops.append((cur, nxt))
        cur = nxt
    return hops


def hop_bytes_per_iter(plan: Plan, job: JobSpec, topo: Topology) -> dict[tuple[int, int], float]:
    """Bytes one iteration of ``plan`` puts on each directed WAN hop: ``{(u, v): bytes}``, u and v adjacent.

    Each transfer of :func:`pair_bytes_per_iter` counts on every hop of its route (module docstring): a
    relayed transfer counts once per hop.
    """
    out: dict[tuple[int, int], float] = {}
    if len(plan.regions) < 2:
        return out
    pinned = plan.routes  # sim.routing "load": each transfer on the route pinned for it, in the same order
    if pinned and len(pinned) != len(plan_wan_transfers(plan, job)):
        raise ValueError(f"routes: the plan pins {len(pinned)} routes for its "
                         f"{len(plan_wan_transfers(plan, job))} cross-region transfers")
    for i, (a, b, nbytes, payload, back) in enumerate(_transfers(plan, job)):
        if pinned:
            hops = route_hops(topo, a, pinned[i])
        elif back:  # the reverse of the (b, a) route, hop by hop
            hops = [(v, u) for u, v in reversed(route_hops(topo, b, topo.route_for(b, a, payload)[0]))]
        else:
            hops = route_hops(topo, a, topo.route_for(a, b, payload)[0])
        for hop in hops:
            out[hop] = out.get(hop, 0.0) + nbytes
    return out


def egress_usd_per_iter(plan: Plan, job: JobSpec, topo: Topology, usd_per_byte: np.ndarray) -> float:
    """Egress billed per iteration of ``plan``: each hop's bytes times the price of its direction.

    :param usd_per_byte: USD per byte sent from region i to region j (regions x regions).
    """
    if len(plan.regions) < 2:
        return 0.0
    hops = hop_bytes_per_iter(plan, job, topo)
    return float(sum(nbytes * float(usd_per_byte[u, v]) for (u, v), nbytes in hops.items()))
