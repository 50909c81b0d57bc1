"""Re-planning a running job: the checks, the re-partition pause and the switch (parts of :class:`Simulator`).

:meth:`Simulator.replan` replaces a running job's plan with another plan for the same job that fits
the GPUs it holds plus free ones (or a subset).  The switch is charged as a modelled *re-partition
pause* (no work is lost): ``pause = replan_restart_s + transfer``, where ``transfer`` moves the
training state of every layer (``replan_state_bytes_per_param`` bytes per parameter: bf16 weights
and fp32 Adam state and master weights; gradients are not needed between iterations) to each region
that holds it under the new plan but did not under the old one, from the old holder with the widest
route now.  Each (source, destination) pair sends its bytes over its route; a directed link carries
the bytes of every pair crossing it at one fair share (its capacity over the transfers other jobs
send at once on it, :data:`~sfenv.model.sharing.BUSY`, plus one), so
``transfer = max over pairs (route latency + max over its links (bytes on the link / share))``.
Re-sharding inside a region (another tensor or data-parallel degree) and rebuilding the pipeline are
covered by the constant ``replan_restart_s``; a change of micro-batch size or schedule alone costs
only that constant.  During the pause the job holds, in every region, the larger of its old and new
GPU counts (old GPUs send, new ones receive), draws idle power on all of them (billed at the zones'
prices) and makes no progress; it puts the new plan's flows on the WAN from the switch, at the
rates predicted for the new plan (standing for the state transfer), and resumes with the new plan at
the end of the pause, when the GPUs only the old plan used are freed.  The moved bytes are billed as
egress when the switch starts, each hop of each pair's route at its direction's price
(:func:`moved_egress_usd`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sfenv.model.perf import Plan, PlanPerf, plan_flows
from sfenv.model.sharing import BUSY
from sfenv.model.traffic import route_hops
from sfenv.sim.events import EventKind, Resume
from sfenv.sim.state import InvalidDecision, JobState
from sfenv.sim.stragglers import forget

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["check_replan", "moved_egress_usd", "replan", "resume", "transfer_s"]


def _holders(p: Plan) -> tuple[list[frozenset[int]], frozenset[int]]:
    """Regions holding each layer of ``p``, and those holding the embeddings (first and last stage)."""
    per_layer: list[frozenset[int]] = []
    for st in p.stages:
        per_layer.extend([frozenset(st.regions)] * st.layers)
    emb = frozenset(p.stages[0].regions) | frozenset(p.stages[-1].regions if len(p.stages) > 1 else ())
    return per_layer, emb


def _state_moves(sim: Simulator, js: JobState, plan: Plan) -> tuple[dict[tuple[int, int], float], np.ndarray] | None:
    """The bytes the switch from ``js.plan`` to ``plan`` moves per (source, destination) region, and the shares.

    :return: ``({(src, dst): bytes}, each link's share now)``, or None when the plans' layers do not
        match or a new region has no route (the module docstring's model).
    """
    old = js.plan
    assert old is not None
    model = js.spec.model
    topo = sim.topo
    old_l, old_e = _holders(old)
    new_l, new_e = _holders(plan)
    if len(old_l) != len(new_l):
        return None
    bpp = sim.config.replan_state_bytes_per_param
    items = [(a, b, model.layer_params * bpp) for a, b in zip(old_l, new_l)]
    items.append((old_e, new_e, model.embedding_params * bpp))
    share = sim.links.directed_capacity_bps / (sim.links.without(js.spec.job_id)[BUSY] + 1.0)

    def route_bw(a: int, b: int) -> float:
        links = topo.directed_route(a, b, topo.route_links[a][b])
        return min(float(share[e]) for e in links) if links else 0.0

    pair_bytes: dict[tuple[int, int], float] = {}
    for src_set, dst_set, nbytes in items:
        if nbytes <= 0.0:
            continue
        for d in sorted(dst_set - src_set):
            src = max(sorted(src_set), key=lambda a: route_bw(a, d))
            if route_bw(src, d) <= 0.0:
                return None  # no route to the new region
            pair_bytes[(src, d)] = pair_bytes.get((src, d), 0.0) + nbytes
    return pair_bytes, share


def moved_egress_usd(sim: Simulator, js: JobState, plan: Plan) -> float:
    """Egress billed for the state the switch from ``js.plan`` to ``plan`` moves (0 if nothing moves).

    Each (source, destination) pair's bytes cross the hops of its route (the widest, as
    :func:`transfer_s` sends them), each hop billed at its direction's price.
    """
    price = sim.billing.egress_usd_per_byte
    if price is None:
        return 0.0
    moves = _state_moves(sim, js, plan)
    if moves is None:
        return 0.0
    topo = sim.topo
    usd = 0.0
    for (a, b), nbytes in moves[0].items():
        for u, v in route_hops(topo, a, topo.route_links[a][b]):
            usd += nbytes * float(price[u, v])
    return usd


def transfer_s(sim: Simulator, js: JobState, plan: Plan) -> float:
    """Time to move the training state the switch from ``js.plan`` to ``plan`` moves (module docstring)."""
    moves = _state_moves(sim, js, plan)
    if moves is None:
        return math.inf
    pair_bytes, share = moves
    topo = sim.topo
    link_bytes = np.zeros(topo.num_directed)
    for (a, b), nbytes in pair_bytes.items():
        for e in topo.directed_route(a, b, topo.route_links[a][b]):
            link_bytes[e] += nbytes
    t = 0.0
    for a, b in pair_bytes:
        links = topo.directed_route(a, b, topo.route_links[a][b])
        t = max(t, float(topo.route_latency_s[a, b]) + max(float(link_bytes[e] * 8.0 / share[e]) for e in links))
    return t


def _check_regions(sim: Simulator, js: JobState, plan: Plan) -> None:
    for r, n in plan.gpus_by_region().items():
        if not 0 <= r < sim.topo.num_regions:
            raise InvalidDecision(f"unknown region {r}")
        if sim.gpus.down[r]:
            raise InvalidDecision(f"region {sim.topo.regions[r].name} is down")
        extra = n - js.held.get(r, 0)
        if extra > sim.gpus.free[r]:
            raise InvalidDecision(f"plan needs {extra} more GPUs in {sim.topo.regions[r].name}, "
                                  f"{sim.gpus.free[r]} free")


def check_replan(sim: Simulator, plan: Plan) -> tuple[PlanPerf, float]:
    """Validate switching running job ``plan.job_id`` to ``plan`` now (:meth:`Simulator.check_replan`)."""
    if not 0 <= plan.job_id < len(sim.jobs):
        raise InvalidDecision(f"unknown job {plan.job_id}")
    js = sim.jobs[plan.job_id]
    if js.status != "running":
        raise InvalidDecision(f"job {plan.job_id} is {js.status}, not running")
    if js.paused:
        raise InvalidDecision(f"job {plan.job_id} is already switching plans (until t={js.resume_at:.0f} s)")
    if js.plan is not None and plan.unrouted() == js.plan.unrouted():  # a re-plan changes more than routes
        raise InvalidDecision(f"job {plan.job_id} already runs this plan")
    _check_regions(sim, js, plan)
    if len(plan.regions) > 1:
        perf = sim.links.evaluate_without(plan, js.spec, plan.job_id)
    else:
        perf = sim.evaluate(plan, js.spec)
    if not perf.feasible:
        raise InvalidDecision(f"infeasible plan for job {plan.job_id}: {perf.reason}")
    pause = sim.config.replan_restart_s + transfer_s(sim, js, plan)
    if not math.isfinite(pause):
        raise InvalidDecision(f"job {plan.job_id}: no route to move its state to the new plan's regions")
    return perf, pause


def replan(sim: Simulator, plan: Plan) -> float:
    """Switch a running job to ``plan`` now, charging the re-partition pause (:meth:`Simulator.replan`)."""
    perf, pause = check_replan(sim, plan)
    js = sim.jobs[plan.job_id]
    # sim.routing "load": the new plan's routes, chosen without the job's old flows, are pinned (as checked)
    plan = sim.links.routed(plan, js.spec, plan.job_id)
    sim.billing.accrue(js, sim.time)
    moved_usd = moved_egress_usd(sim, js, plan)
    if moved_usd:
        sim.billing.charge(js, moved_usd)
    sim.gpus.accrue_busy(sim.time)
    assert js.plan is not None  # the run so far ends here; the pause and the new plan are runs too
    js.segments.append(js.open_segment(sim.time))
    js.start = sim.time
    new = plan.gpus_by_region()
    held = {r: max(js.held.get(r, 0), new.get(r, 0)) for r in sorted(set(js.held) | set(new))}
    sim.gpus.take({r: n - js.held.get(r, 0) for r, n in held.items()})
    js.held = held
    forget(sim, plan.job_id)  # the re-partition leaves the slow GPUs out (sfenv.sim.stragglers)
    changed = sim.links.stop(plan.job_id)
    js.flows = plan_flows(plan, sim.topo, js.spec)
    changed |= sim.links.start(plan.job_id, plan, js.spec, perf, fixed=True)
    js.plan = plan
    js.replans += 1
    js.replan_pause_s += pause
    js.resume_at = sim.time + pause
    js.resume_perf = perf
    js.max_gpus_used = max(js.max_gpus_used, plan.gpus)
    js.max_regions_used = max(js.max_regions_used, len(plan.regions))
    sim.replans += 1
    sc = sim.topo.scalars
    idle = {r: n * sc.idle_w[r] * sc.pue[r] for r, n in held.items() if n > 0}
    sim.set_rates(js, PlanPerf(feasible=True, iter_time=math.inf, power_by_region=idle), complete=False)
    sim.push(js.resume_at, EventKind.RESUME, Resume(plan.job_id, js.version))
    if changed:  # jobs sharing the old or new links get new shares (this job is skipped: paused)
        sim.refresh(changed)
    return pause


def resume(sim: Simulator, js: JobState) -> None:
    """End a re-plan pause: free the GPUs only the old plan used, run the new plan."""
    assert js.plan is not None
    sim.billing.accrue(js, sim.time)
    sim.gpus.accrue_busy(sim.time)
    js.segments.append(js.open_segment(sim.time))  # the pause
    js.start = sim.time
    new = js.plan.gpus_by_region()
    sim.gpus.take({r: new.get(r, 0) - n for r, n in js.held.items()})
    js.held = new
    js.resume_at = math.nan
    js.resume_perf = None
    jid = js.spec.job_id
    wan = sim.links
    wan.release(jid)
    if jid in wan.jobs:  # its rates, and those of the jobs sharing its links, follow the load again
        sim.refresh({int(e) for e in wan.jobs[jid].links})
        return
    perf = wan.evaluate_without(js.plan, js.spec, jid)
    if not perf.feasible:  # pragma: no cover - checked at the switch; shares never change memory
        raise RuntimeError(f"job {jid} cannot resume: {perf.reason}")
    sim.set_rates(js, perf)
