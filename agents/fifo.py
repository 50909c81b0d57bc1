"""FIFO first-fit: the simplest baseline.

Serves jobs strictly in arrival order (head-of-line blocking: if the oldest job cannot start, it
waits).  For the head job it takes the first region, in index order, whose free GPUs reach the
job's minimum, and uses up to ``max_gpus`` of them; if no single region is large enough, it chains
regions in index order until the minimum is met (ignoring the topology).  The plan shape comes
from :func:`sfenv.model.planning.fit_plan`.
"""

from __future__ import annotations

from sfenv.agents.base import SchedulerAgent, index_order_plan

from sfenv.model.perf import Plan
from sfenv.model.planning import fit_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = ["FIFOAgent"]


class FIFOAgent(SchedulerAgent):
    """First-come first-served, first-fit placement (see module docstring)."""

    name = "fifo"
    blocking = True

    def decide(self, view: SimView) -> Plan | None:
        """The head job's first-fit plan if it can start now, else None (wait).

        The same decision as :meth:`SchedulerAgent.decide` with ``blocking``, but reads only the
        head of the queue (:meth:`SimView.waiting_head`), not the whole queue, so a decision costs
        O(1) in the queue length.  A subclass that does not block or orders the queue otherwise
        gets the base class's decision.
        """
        if not self.blocking or type(self).order is not SchedulerAgent.order:
            return super().decide(view)
        head = view.waiting_head(1)
        if not head:
            return None
        for plan in self.propose(view, head[0], k=1):
            if view.can_start(plan):
                return plan
        return None

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The first-fit plan for ``job``, if any."""
        free = view.free_gpus
        for r in range(view.topo.num_regions):
            if free[r] >= job.min_gpus:
                res = fit_plan(job, view.topo, [r], [min(int(free[r]), job.max_gpus)], view.evaluate)
                if res is not None:
                    return [res[0]]
        plan = index_order_plan(view, job)
        return [] if plan is None else [plan]
