"""Re-routing running jobs (``sim.routing: adaptive``): a part of :class:`~sfenv.sim.engine.Simulator`.

Under ``sim.routing: load`` a job's cross-region transfers take the routes best at the load when it
starts (or re-plans) and keep them (:mod:`sfenv.model.routing`).  Under ``adaptive`` they are chosen
so at the start too, and **whenever the WAN changes** (a job starts, stops or switches plans, a link's
capacity changes) every running job across regions is offered the routes
:func:`~sfenv.model.routing.route_plan` picks for it against the other jobs' load at that moment (not
only those on the links that changed: a link that widens or empties may draw a job from another
route).  It
moves to them when its modelled iteration time there is shorter than on its current routes, both
evaluated against the same load, by more than :data:`REROUTE_MIN_GAIN`: a hysteresis of our choice so
that a job does not swap between routes of about equal worth at every event.  A move costs no time
and no bytes: only the transfers' paths change (the pipeline and the training state stay where they
are; TCP connections to a relay are opened afresh, which we do not charge).  The job's flows, its load
on the links, its egress bill (from the move on, each hop of its new routes at its direction's price;
the bytes before it at the old routes' prices) and its iteration time follow its new routes; a job in
a re-plan pause keeps its routes until it resumes.

This is traffic engineering at the granularity of the simulator's events, as a WAN controller that
re-routes flows when utilisation changes (B4, Jain et al., SIGCOMM 2013; SWAN, Hong et al., SIGCOMM
2013) would, but per job and without splitting a transfer over several paths.  Jobs are offered new
routes one by one in job order, each against the others' load as it stands after the earlier moves,
once per change; their rates are then settled together (:meth:`sfenv.sim.links.LinkState.settle`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sfenv.model.perf import evaluate_plan, plan_flows
from sfenv.model.routing import route_plan

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["REROUTE_MIN_GAIN", "reroute"]

#: a running job moves to new routes only if its iteration time falls by more than this fraction (our choice)
REROUTE_MIN_GAIN = 0.01


def reroute(sim: Simulator, job_ids: list[int]) -> list[int]:
    """Move running jobs to better routes (module docstring); return the jobs to settle.

    :param job_ids: the jobs a change of the WAN touched (sorted), settled whatever moves.
    :return: ``job_ids`` and, when a job moved, every running job sharing a directed link with its old
        or new routes (and so on, :meth:`sfenv.sim.links.LinkState.affected`), sorted.
    """
    wan = sim.links
    touched: set[int] = set()
    for jid in sorted(wan.jobs):
        entry = wan.jobs[jid]
        if entry.fixed or len(entry.plan.regions) < 2:
            continue
        cap = wan.directed_capacity_bps
        others = wan.without(jid)
        offered = route_plan(entry.plan.unrouted(), entry.job, sim.topo, sim.params, cap, others)
        if offered.routes == entry.plan.routes:
            continue
        slowdown = wan.slowdown.get(jid)
        now = evaluate_plan(entry.plan, entry.job, sim.topo, sim.params, cap, others, None, slowdown)
        new = evaluate_plan(offered, entry.job, sim.topo, sim.params, cap, others, None, slowdown)
        if not new.feasible or new.iter_time >= now.iter_time * (1.0 - REROUTE_MIN_GAIN):
            continue
        touched |= {int(e) for e in entry.links}
        touched |= wan.start(jid, offered, entry.job, new)
        js = sim.jobs[jid]
        js.plan = offered
        js.flows = plan_flows(offered, sim.topo, js.spec)
        sim.reroutes += 1
    if not touched:
        return job_ids
    return sorted(set(job_ids) | set(wan.affected(touched)))
