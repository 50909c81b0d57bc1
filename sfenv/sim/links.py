"""The WAN's state in one episode: the running jobs' load on each directed link, capacity factors, evaluation memos.

Every running job that spans regions sends flow groups (:func:`sfenv.model.perf.plan_flow_groups`:
pipeline hops each way, ring all-reduce edges) over the directed links of their routes; each adds
to the links' load how often it sends and at what rate (:mod:`sfenv.model.sharing`).  Rates depend
on the others' load and the load on the rates' iteration times: when a job starts, stops, switches
plans or a link's capacity changes, :meth:`LinkState.settle` re-evaluates the running jobs that
share links with the change (transitively) until their iteration times stop moving.

Under ``routing="load"`` (:mod:`sfenv.model.routing`) a plan without pinned routes is routed at the
current load before it is evaluated (:meth:`LinkState.routed`); the simulator starts a job with the
routed plan, so its evaluation, its load here, its flows and its egress bill all follow the same
pinned routes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from sfenv.model.perf import (
    PerfParams,
    Plan,
    PlanPerf,
    evaluate_plan,
    moved_perf,
    plan_flow_groups,
    same_region_figures,
)
from sfenv.model.routing import ROUTING_MODES, route_plan
from sfenv.model.sharing import BUSY, empty_load, load_of
from sfenv.sim.state import EvaluationCache
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = ["MEMO_ENTRIES", "SETTLE_SWEEPS", "SETTLE_TOLERANCE", "JobLoad", "LinkState"]

#: bound on memoised plan evaluations per dict (about 1 kB each)
MEMO_ENTRIES = 20_000
#: most sweeps of :meth:`LinkState.settle` over the jobs it re-evaluates
SETTLE_SWEEPS = 8
#: :meth:`LinkState.settle` stops when no iteration time moved by more than this fraction in a sweep
SETTLE_TOLERANCE = 1e-6


@dataclass
class JobLoad:
    """One running job's traffic on the WAN: what it adds to the load of the directed links it crosses.

    :param plan: the plan its flows come from.
    :param job: the job.
    :param links: directed links crossed (sorted).
    :param load: ``(LOAD_ROWS, len(links))`` its share of :attr:`LinkState.load` on them.
    :param duty: share of the iteration each of its flow groups sends.
    :param perf: its performance under the current load.
    :param fixed: True while its rates are not re-evaluated (a re-plan pause).
    """

    plan: Plan
    job: JobSpec
    links: np.ndarray
    load: np.ndarray
    duty: list[float]
    perf: PlanPerf
    fixed: bool = False


class LinkState:
    """Load and capacity factors of every link, and the plan evaluations that depend on them.

    Single-region plans never depend on the WAN state, so their evaluations are kept (across
    episodes with an :class:`EvaluationCache`); multi-region ones only while the load and capacities
    stay the same.

    :param topo: the topology.
    :param params: performance-model constants.
    :param evaluation_cache: single-region evaluations shared with other episodes (a new one if None).
    :param routing: ``"static"`` or ``"load"`` (:mod:`sfenv.model.routing`): whether :meth:`evaluate`
        routes a cross-region plan at the current load first.
    :raises ValueError: if ``evaluation_cache`` belongs to another topology or other parameters, or
        ``routing`` is unknown.
    """

    def __init__(self, topo: Topology, params: PerfParams, evaluation_cache: EvaluationCache | None = None,
                 routing: str = "static"):
        if routing not in ROUTING_MODES:
            raise ValueError(f"routing: got {routing!r}; expected one of {list(ROUTING_MODES)}")
        self.topo = topo
        self.params = params
        #: ``"static"`` or ``"load"``: see :meth:`routed`
        self.routing = routing
        #: plans routed at the current state (``routing="load"``), cleared with :attr:`memo_wan`
        self.memo_routes: dict[tuple[object, object], Plan] = {}
        #: the running jobs' load on each directed link (rows of :func:`sfenv.model.sharing.empty_load`)
        self.load = empty_load(topo.num_directed)
        #: capacity factor of each link (1.0, or lower while it fluctuates)
        self.factor = np.ones(topo.num_links)
        #: each running job's traffic, by job id (jobs inside one region have none)
        self.jobs: dict[int, JobLoad] = {}
        if evaluation_cache is None:
            evaluation_cache = EvaluationCache(topo, params)
        elif evaluation_cache.topo is not topo or evaluation_cache.params != params:
            raise ValueError("evaluation_cache belongs to another topology or other performance parameters")
        self.memo_local = evaluation_cache.local
        self.memo_wan: dict[tuple[object, object], PlanPerf] = {}
        self.memo_wan_state = b""
        #: per running job slowed by stragglers, each stage's slowdown (:mod:`sfenv.sim.stragglers`)
        self.slowdown: dict[int, tuple[float, ...]] = {}

    @property
    def capacity_bps(self) -> np.ndarray:
        """Current capacity of every link, each way (nominal bandwidth x fluctuation factor)."""
        return self.topo.link_bw_bps * self.factor

    @property
    def directed_capacity_bps(self) -> np.ndarray:
        """Current capacity of every directed link (``2 k``, ``2 k + 1``: link k's)."""
        return np.repeat(self.topo.link_bw_bps * self.factor, 2)

    @property
    def flows(self) -> np.ndarray:
        """Transfers sending at once on each link, expected: the busier way's :data:`~sfenv.model.sharing.BUSY` load.

        A float per link (a new array); 1.0 is one transfer sending all the time.
        """
        busy: np.ndarray = self.load[BUSY].reshape(-1, 2).max(axis=1)
        return busy

    def state_key(self) -> bytes:
        """Everything a cross-region plan's evaluation reads of the WAN state, as bytes (load and factors)."""
        return self.load.tobytes() + self.factor.tobytes()

    def without(self, job_id: int) -> np.ndarray:
        """The load of every running job but ``job_id`` (a new array)."""
        others: np.ndarray = self.load.copy()
        entry = self.jobs.get(job_id)
        if entry is not None:
            others[:, entry.links] -= entry.load
            np.maximum(others, 0.0, out=others)  # rounding: a load is never negative
        return others

    # ------------------------------------------------------------------ running jobs
    def start(self, job_id: int, plan: Plan, job: JobSpec, perf: PlanPerf, fixed: bool = False) -> set[int]:
        """Put a job's traffic at ``perf`` (its evaluation under the current load) on the links.

        :param fixed: keep these rates until :meth:`release` (a re-plan pause: see :mod:`sfenv.sim.replan`).
        :return: the directed links it crosses (empty inside one region).
        """
        self.stop(job_id)
        groups = plan_flow_groups(plan, self.topo, job)
        if not groups:
            return set()
        ids, vals = load_of(groups, perf.flow_rates_bps, perf.flow_levels_bps, perf.flow_duty, perf.iter_time,
                            perf.flow_overlap, self.params.wan_sharing != "v2")
        self.jobs[job_id] = JobLoad(plan, job, ids, vals, list(perf.flow_duty), perf, fixed)
        self._rebuild()
        return {int(e) for e in ids}

    def stop(self, job_id: int) -> set[int]:
        """Take a job's traffic off the links; returns the directed links it crossed."""
        entry = self.jobs.pop(job_id, None)
        if entry is None:
            return set()
        self._rebuild()
        return {int(e) for e in entry.links}

    def release(self, job_id: int) -> None:
        """Let a job's rates follow the load again (the end of a re-plan pause)."""
        entry = self.jobs.get(job_id)
        if entry is not None:
            entry.fixed = False

    def _rebuild(self) -> None:
        """Sum the running jobs' load afresh (in job order: exact zeros where no flow is)."""
        load = self.load
        load[:] = 0.0
        for jid in sorted(self.jobs):
            entry = self.jobs[jid]
            load[:, entry.links] += entry.load

    def affected(self, links: Iterable[int]) -> list[int]:
        """Running jobs whose traffic shares a directed link with ``links``, or with such a job, and so on (sorted)."""
        todo = {int(e) for e in links}
        seen: set[int] = set()
        found: set[int] = set()
        crossing = {jid: {int(e) for e in entry.links} for jid, entry in self.jobs.items()}
        while todo:
            seen |= todo
            new: set[int] = set()
            for jid, own in crossing.items():
                if jid not in found and own & todo:
                    found.add(jid)
                    new |= own
            todo = new - seen
        return sorted(found)

    def settle(self, job_ids: Iterable[int]) -> dict[int, PlanPerf]:
        """Re-evaluate jobs' rates under the current load until their iteration times stop moving.

        Gauss-Seidel sweeps in job order: each job is evaluated against the others' load with its own
        duties (:func:`sfenv.model.perf.evaluate_plan`), and its load is replaced at once; at most
        :data:`SETTLE_SWEEPS` sweeps, fewer once no iteration time moved by :data:`SETTLE_TOLERANCE`.
        Jobs held :attr:`JobLoad.fixed` keep their rates (and load).

        :return: the new performance of each job re-evaluated (by job id).
        """
        ids = [jid for jid in sorted(set(job_ids)) if jid in self.jobs and not self.jobs[jid].fixed]
        cap = self.directed_capacity_bps
        out: dict[int, PlanPerf] = {}
        for _ in range(SETTLE_SWEEPS):
            moved = False
            for jid in ids:
                entry = self.jobs[jid]
                others = self.without(jid)
                perf = evaluate_plan(entry.plan, entry.job, self.topo, self.params, cap, others, entry.duty,
                                     self.slowdown.get(jid))
                if not perf.feasible:  # pragma: no cover - shares never change memory feasibility
                    raise RuntimeError(f"running job {jid} became infeasible: {perf.reason}")
                groups = plan_flow_groups(entry.plan, self.topo, entry.job)
                links, load = load_of(groups, perf.flow_rates_bps, perf.flow_levels_bps, perf.flow_duty, perf.iter_time,
                                      perf.flow_overlap, self.params.wan_sharing != "v2")
                old = entry.perf.iter_time
                if not math.isclose(perf.iter_time, old, rel_tol=SETTLE_TOLERANCE):
                    moved = True
                self.load[:, entry.links] -= entry.load
                entry.links, entry.load, entry.duty, entry.perf = links, load, list(perf.flow_duty), perf
                self.load[:, links] += load
                out[jid] = perf
            if not moved:
                break
        self._rebuild()
        return out

    # ------------------------------------------------------------------ evaluations
    def _wan_memo_current(self) -> None:
        """Clear the cross-region memos when the link state moved since they were filled."""
        state = self.state_key()
        if state != self.memo_wan_state:  # compared, not tracked: callers may edit the arrays
            self.memo_wan.clear()
            self.memo_routes.clear()
            self.memo_wan_state = state

    def routed(self, plan: Plan, job: JobSpec, job_id: int | None = None) -> Plan:
        """``plan`` with its routes pinned at the current load under ``routing="load"``, else ``plan`` itself.

        A plan inside one region or with routes already pinned is returned as it is.  Routes are
        chosen against the load of the running jobs (all but ``job_id``'s: a re-plan's own old
        flows leave) at the current capacities (:func:`sfenv.model.routing.route_plan`); memoised by
        plan and job shape while the link state stays the same (``job_id`` None).
        """
        if self.routing == "static" or plan.routes or len(plan.regions) < 2:
            return plan
        cap = self.directed_capacity_bps
        if job_id is not None:
            return route_plan(plan, job, self.topo, self.params, cap, self.without(job_id))
        self._wan_memo_current()
        key = (plan.shape_key, job.shape_key)
        hit = self.memo_routes.get(key)
        if hit is None:
            if len(self.memo_routes) >= MEMO_ENTRIES:
                self.memo_routes.clear()
            hit = self.memo_routes[key] = route_plan(plan, job, self.topo, self.params, cap, self.load)
        return hit if hit.job_id == plan.job_id else hit.for_job(plan.job_id)

    def evaluate(self, plan: Plan, job: JobSpec) -> PlanPerf:
        """Predict ``plan`` for ``job`` against the running jobs' load (its own traffic added), memoised.

        Under ``routing="load"`` an unrouted cross-region plan is evaluated on the routes
        :meth:`routed` pins for it now.  Results are memoised by plan and job shape (never by job
        id) until the link state changes; the returned object is shared, so treat it as read-only.
        """
        key = (plan.shape_key, job.shape_key)  # the job's shape, never its id; the window included
        if len(plan.regions) > 1:
            self._wan_memo_current()
            memo = self.memo_wan
        else:
            memo = self.memo_local
        perf = memo.get(key)
        if perf is None:
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            perf = evaluate_plan(self.routed(plan, job), job, self.topo, self.params, self.capacity_bps, self.load)
            memo[key] = perf
        return perf

    def evaluate_moved(self, plan: Plan, job: JobSpec, source: Plan, source_perf: PlanPerf) -> PlanPerf:
        """:meth:`evaluate` of ``plan``, all in one region, whose stages are ``source``'s moved from another region.

        ``source_perf`` is ``source``'s evaluation; when the two regions have the same figures
        (:func:`sfenv.model.perf.same_region_figures`) and it is feasible, only the power is recomputed
        (:func:`sfenv.model.perf.moved_perf`: the same values :func:`evaluate_plan` gives), else the plan
        is evaluated.  Memoised as :meth:`evaluate` is (the same memo).
        """
        key = (plan.shape_key, job.shape_key)
        memo = self.memo_local
        perf = memo.get(key)
        if perf is None:
            src, dst = source.stages[0].placement[0][0], plan.stages[0].placement[0][0]
            if (len(plan.regions) != 1 or len(source.regions) != 1 or not source_perf.feasible
                    or not same_region_figures(self.topo, src, dst)):
                return self.evaluate(plan, job)
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            perf = memo[key] = moved_perf(source_perf, plan, self.topo)
        return perf

    def evaluate_running(self, plan: Plan, job: JobSpec, job_id: int) -> PlanPerf:
        """:meth:`evaluate_without` with running job ``job_id``'s straggler slowdowns (not memoised)."""
        return evaluate_plan(plan, job, self.topo, self.params, self.capacity_bps, self.without(job_id), None,
                             self.slowdown.get(job_id))

    def evaluate_without(self, plan: Plan, job: JobSpec, job_id: int) -> PlanPerf:
        """Predict ``plan`` for ``job`` against the load of every running job but ``job_id`` (not memoised).

        Under ``routing="load"`` an unrouted plan is routed against that load first (:meth:`routed`).
        """
        return evaluate_plan(self.routed(plan, job, job_id), job, self.topo, self.params, self.capacity_bps,
                             self.without(job_id))
