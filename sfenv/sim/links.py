"""The WAN's state in one episode: flows and capacity factors per link, and plan evaluations memoised against them.

Every pipeline hop (and cross-region all-reduce ring edge) between regions is a flow on each link of
its static route; a flow gets ``capacity / flows`` of every link it crosses (equal share), and its
bandwidth is the minimum over its route (:func:`sfenv.model.perf.evaluate_plan` computes the shares).
"""

from __future__ import annotations

import numpy as np

from sfenv.model.perf import PerfParams, Plan, PlanPerf, evaluate_plan, moved_perf, same_region_figures
from sfenv.sim.state import EvaluationCache
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

__all__ = ["MEMO_ENTRIES", "LinkState"]

#: bound on memoised plan evaluations per dict (about 1 kB each)
MEMO_ENTRIES = 20_000


class LinkState:
    """Flows and capacity factors of every link, and the plan evaluations that depend on them.

    Single-region plans never depend on the WAN state, so their evaluations are kept (across
    episodes with an :class:`EvaluationCache`); multi-region ones only while link flows and
    capacities stay the same.

    :param topo: the topology.
    :param params: performance-model constants.
    :param evaluation_cache: single-region evaluations shared with other episodes (a new one if None).
    :raises ValueError: if ``evaluation_cache`` belongs to another topology or other parameters.
    """

    def __init__(self, topo: Topology, params: PerfParams, evaluation_cache: EvaluationCache | None = None):
        self.topo = topo
        self.params = params
        #: flows currently on each link
        self.flows = np.zeros(topo.num_links)
        #: capacity factor of each link (1.0, or lower while it fluctuates)
        self.factor = np.ones(topo.num_links)
        if evaluation_cache is None:
            evaluation_cache = EvaluationCache(topo, params)
        elif evaluation_cache.topo is not topo or evaluation_cache.params != params:
            raise ValueError("evaluation_cache belongs to another topology or other performance parameters")
        self.memo_local = evaluation_cache.local
        self.memo_wan: dict[tuple[object, object], PlanPerf] = {}
        self.memo_wan_state = b""

    @property
    def capacity_bps(self) -> np.ndarray:
        """Current capacity of every link (nominal bandwidth x fluctuation factor)."""
        return self.topo.link_bw_bps * self.factor

    def add(self, flows: dict[int, int]) -> None:
        """Put a job's flows (link -> count) on the links."""
        for k, n in flows.items():
            self.flows[k] += n

    def remove(self, flows: dict[int, int]) -> None:
        """Take a job's flows off the links."""
        for k, n in flows.items():
            self.flows[k] -= n

    def without(self, flows: dict[int, int]) -> np.ndarray:
        """A copy of the link flows less a job's own."""
        others: np.ndarray = self.flows.copy()
        for k, n in flows.items():
            others[k] -= n
        return others

    def evaluate(self, plan: Plan, job: JobSpec) -> PlanPerf:
        """Predict ``plan`` for ``job`` under the current link state (its own flows added), memoised.

        Results are memoised by plan and job shape (never by job id) until the link state
        changes; the returned object is shared, so treat it as read-only.
        """
        key = (plan.shape_key, job.shape_key)  # the job's shape, never its id; the window included
        if len(plan.regions) > 1:
            state = self.flows.tobytes() + self.factor.tobytes()
            if state != self.memo_wan_state:  # compared, not tracked: callers may edit the arrays
                self.memo_wan.clear()
                self.memo_wan_state = state
            memo = self.memo_wan
        else:
            memo = self.memo_local
        perf = memo.get(key)
        if perf is None:
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            perf = evaluate_plan(plan, job, self.topo, self.params, self.capacity_bps, self.flows)
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

    def running_perf(self, plan: Plan, job: JobSpec, capacity_bps: np.ndarray | None = None) -> PlanPerf:
        """``plan``'s performance now for a job whose flows are already on the links (not memoised).

        :param capacity_bps: :attr:`capacity_bps`, when the caller has it at hand.
        """
        cap = self.capacity_bps if capacity_bps is None else capacity_bps
        return evaluate_plan(plan, job, self.topo, self.params, cap, self.flows, include_own_flows=False)
