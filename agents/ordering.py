"""Ordering baselines: any placement agent's plans, served in a chosen queue order.

Under load, mean JCT is won by the order in which waiting jobs are served as much as by where
they run: a reference agent's placement combined with a queue order makes the baselines a learned
policy must beat.  Registered as ``PLACEMENT+ORDER`` (``spinsearch+swf``, ``fifo+swf``,
``bace-pipe+fgf``...): any registered agent as the placement, one of :data:`ORDERS` as the order.

Orders (ties always go to the earlier arrival, then the lower job id)
    - ``fifo``: arrival order.
    - ``swf``: shortest work first: the job's remaining training FLOPs,
      ``6 * params * tokens per iteration * (iterations - iterations done)`` (done > 0 after a
      preemption).  A size-based order: the classic way to cut mean completion time
      (shortest-remaining-processing-time is optimal for mean JCT on one server).
    - ``fgf``: fewest GPUs first: the job's GPU demand, ``max(min_gpus, m)`` with ``m`` the fewest
      GPUs whose memory holds its weights and optimizer state (16 bytes per parameter) on the
      platform's largest-memory GPU at the scenario's memory headroom.  Where every job asks for
      the same ``min_gpus`` and fits in it (spider-8, geo-8), this is arrival order.
    - ``bace``: BACE-Pipe's dynamic priority ``P_j = (1 - a)(1 - I_j) + a (1 - D_j)``, highest
      first, computed by :meth:`sfenv.agents.bace_pipe.BACEPipeAgent.priorities` (see that module
      for what follows the source [summary] and what is ours).

Our design
    - The combined agent serves jobs in its order and starts the first plan the placement agent
      proposes (:meth:`~sfenv.agents.base.SchedulerAgent.propose`) that can start now; a job it
      cannot place is skipped (backfilling, ``blocking=False``), so ``spinsearch+fifo`` decides as
      ``spinsearch`` does.  ``blocking=True`` waits instead whenever the first job in the order
      cannot start (strict head-of-line blocking, as ``fifo`` does alone).
    - The placement agent's own :meth:`~sfenv.agents.base.SchedulerAgent.decide` and ``order`` are
      not used (a placement that orders the queue itself, such as BACE-Pipe, keeps only its plans);
      its re-planning hook is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from sfenv.agents.base import SchedulerAgent, fill_budget, index_order_chain

from sfenv.env.proposers import DecisionRecorder
from sfenv.errors import UnknownName, did_you_mean
from sfenv.model.perf import Plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "ORDERS",
    "DecisionProposer",
    "FirstFitProposer",
    "OrderedAgent",
    "SpinSearchProposer",
    "gpu_demand",
    "order_jobs",
    "ordered_class",
    "remaining_work",
]

#: order name -> one line
ORDERS: dict[str, str] = {
    "fifo": "arrival order",
    "swf": "shortest remaining work (training FLOPs) first",
    "fgf": "fewest GPUs first (min GPUs, or the memory minimum on the largest-memory GPU)",
    "bace": "BACE-Pipe's dynamic priority (compute intensity and bandwidth demand)",
}


def remaining_work(view: SimView, job: JobSpec) -> float:
    """Training FLOPs ``job`` still needs: ``6 * params * tokens per iteration * iterations left``."""
    left = max(0.0, job.iterations - view.waiting_progress(job.job_id))
    return 6.0 * job.model.params * job.tokens_per_iteration * left


def gpu_demand(view: SimView, job: JobSpec) -> int:
    """GPUs ``job`` asks for: ``max(min_gpus, fewest GPUs of the largest memory that hold its state)``."""
    mem = max(r.gpu.memory_bytes for r in view.topo.regions) * view.params.memory_headroom
    return max(job.min_gpus, math.ceil(16.0 * job.model.params / mem))


def _arrival(job: JobSpec) -> tuple[float, int]:
    return (job.arrival, job.job_id)


def order_jobs(view: SimView, order: str, bace: Any = None) -> list[JobSpec]:
    """The waiting jobs of ``view`` in queue order ``order`` (one of :data:`ORDERS`).

    :param bace: the :class:`~sfenv.agents.bace_pipe.BACEPipeAgent` whose priorities the ``bace``
        order uses (its ``K*`` cache is kept across calls); a fresh one if None.
    :raises UnknownName: for an unknown order.
    """
    jobs = sorted(view.waiting, key=_arrival)
    if order == "fifo" or len(jobs) < 2:
        if order not in ORDERS:
            raise UnknownName(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
        return jobs
    key: Callable[[JobSpec], Any]
    if order == "swf":
        key = lambda j: (remaining_work(view, j), *_arrival(j))  # noqa: E731
    elif order == "fgf":
        key = lambda j: (gpu_demand(view, j), *_arrival(j))  # noqa: E731
    elif order == "bace":
        if bace is None:
            from sfenv.agents.bace_pipe import BACEPipeAgent

            bace = BACEPipeAgent()
        prio = bace.priorities(view)
        key = lambda j: (-prio[j.job_id], *_arrival(j))  # noqa: E731
    else:
        raise UnknownName(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
    return sorted(jobs, key=key)


class OrderedAgent(SchedulerAgent):
    """A placement agent's plans served in a queue order (see the module docstring).

    Build one by name with ``make_agent("spinsearch+swf")`` (:mod:`sfenv.agents.registry`).

    :param placement: the placement agent.
    :param order: the queue order, one of :data:`ORDERS`.
    :param blocking: wait when the first job in the order cannot start (default: skip it).
    :raises UnknownName: for an unknown order.
    """

    def __init__(self, placement: SchedulerAgent, order: str = "swf", blocking: bool = False):
        if order not in ORDERS:
            raise UnknownName(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
        self.placement = placement
        self.order_name = order
        self.blocking = blocking
        self.replans = placement.replans
        self.replan_hourly = placement.replan_hourly
        self.name = f"{placement.name}+{order}"
        self._bace: Any = None
        if order == "bace":
            from sfenv.agents.bace_pipe import BACEPipeAgent

            self._bace = placement if isinstance(placement, BACEPipeAgent) else BACEPipeAgent()

    def reset(self, seed: int | None = None) -> None:
        """Reset the placement agent."""
        self.placement.reset(seed)

    def order(self, view: SimView) -> list[JobSpec]:
        """The waiting jobs in this agent's queue order."""
        return order_jobs(view, self.order_name, self._bace)

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The placement agent's plans for ``job``."""
        return self.placement.propose(view, job, k)

    def replan(self, view: SimView) -> list[Plan]:
        """The placement agent's plan switches."""
        return self.placement.replan(view)


def ordered_class(placement_cls: type[SchedulerAgent], placement: str, order: str) -> type[SchedulerAgent]:
    """The agent class of the registry name ``PLACEMENT+ORDER``: ``placement_cls`` served in ``order``.

    Its constructor takes ``blocking`` and the placement's own keyword arguments.

    :param placement_cls: the placement agent's class.
    :param placement: its registry name.
    :param order: one of :data:`ORDERS`.
    :raises UnknownName: for an unknown order.
    """
    if order not in ORDERS:
        raise UnknownName(f"unknown queue order {order!r}{did_you_mean(order, ORDERS)} in {placement}+{order}; "
                          f"known: {', '.join(ORDERS)}")

    class _Ordered(OrderedAgent):
        __doc__ = f"{placement} placement, queue order {order}: {ORDERS[order]}"

        def __init__(self, blocking: bool = False, **placement_kwargs: Any):
            agent = placement_cls(**placement_kwargs)
            agent.name = placement
            super().__init__(agent, order, blocking)

    _Ordered.__name__ = _Ordered.__qualname__ = f"Ordered_{placement}_{order}".replace("-", "_")
    return _Ordered


_MEMO_ENTRIES = 20_000  # plans a proposer remembers per state (then all are dropped)


class _PlanMemo:
    """A proposer's plans per job shape and platform state (free GPUs, link flows and capacities).

    The plans of :class:`SpinSearchProposer` and :class:`FirstFitProposer` are functions of exactly
    these (and of the topology and perf model, whose change empties the memo); jobs keep their
    place in the queue over many steps, in which the state often does not change (a wait for the
    next arrival), so a step asks again for the plans it had.  A hit gives the plan rebound to the
    asking job and puts its performance in the plan cache's ``recent`` (as a fit would).
    """

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self._store: dict[tuple, tuple[Plan, Any] | None] = {}
        self._context: tuple[Any, Any] | None = None
        self._last_state: tuple[bytes, bytes, bytes] | None = None

    def key(self, view: SimView, job: JobSpec) -> tuple:
        """The memo key of ``job`` in ``view``'s state (the memo is emptied when the platform changes)."""
        context = self._context
        if context is None or context[0] is not view.topo or context[1] != view.params or \
                len(self._store) >= _MEMO_ENTRIES:
            self._store.clear()
            self._context = (view.topo, view.params)
        state = (view.free_gpus.tobytes(), view.link_state_key(), view.link_capacity_bps.tobytes())
        if state == self._last_state:  # one object per state, shared by the keys of its jobs (memory)
            state = self._last_state
        self._last_state = state
        return (job.shape_key, state)

    def get(self, key: tuple, job: JobSpec) -> Plan | Literal[False] | None:
        """The remembered plan for ``job`` (None: no plan), or False when ``key`` is not remembered."""
        hit: tuple[Plan, Any] | Literal[False] | None = self._store.get(key, False)
        if hit is None or hit is False:
            return hit
        plan, perf = hit
        plan = plan.for_job(job.job_id)
        self.cache.recent[plan] = perf
        return plan

    def put(self, key: tuple, plan: Plan | None) -> None:
        """Remember ``plan`` (its performance from the plan cache's ``recent``) under ``key``."""
        self._store[key] = None if plan is None else (plan, self.cache.recent.get(plan))


class _MemoisedPlans(DecisionRecorder):
    """Proposers whose ``plan`` is :meth:`_plan`'s answer, remembered per job shape and platform state.

    The memo is :class:`_PlanMemo` in ``self._memo``; ``self.memo = False`` computes at every call.
    """

    memo: bool
    _memo: _PlanMemo

    def plan(self, view: SimView, job: JobSpec) -> Plan | None:
        """The proposer's plan for ``job`` now, or None (remembered per job shape and state)."""
        if not self.memo:
            return self._plan(view, job)
        key = self._memo.key(view, job)
        hit = self._memo.get(key, job)
        if hit is not False:
            return hit
        plan = self._plan(view, job)
        self._memo.put(key, plan)
        return plan

    def _plan(self, view: SimView, job: JobSpec) -> Plan | None:
        """The plan computed afresh (the subclass's search)."""
        raise NotImplementedError


class SpinSearchProposer(_MemoisedPlans):
    """Candidate proposer: the plans ``spinsearch+ORDER`` would choose (see :mod:`sfenv.env.proposers`).

    First the combined agent's decision (the first job in ``order`` whose SpinSearch plan can
    start now), then SpinSearch's plan for each of the first ``jobs`` waiting jobs (the env's queue
    window, arrival order).  The plans are SpinSearch's own: its chains
    (:meth:`~sfenv.agents.spinsearch.SpinSearchAgent.chains`), each filled as it fills them and
    ranked as it ranks them (modelled iteration time, then fewer clusters, then the earlier
    chain), but every :func:`~sfenv.model.planning.fit_plan` goes through the environment's
    :class:`~sfenv.env.proposers.PlanCache`, which makes it cheap enough to run at every step.
    ``tests/test_proposers_best.py`` checks along rollouts that the agent's decision is always
    among the candidates.

    :param cache: the environment's plan cache.
    :param order: queue order of the decision, one of :data:`ORDERS`.
    :param jobs: waiting jobs (arrival order) that get a plan besides the decision.
    :param k_seeds: SpinSearch's chain seeds.
    :param max_chain: SpinSearch's longest chain.
    :param memo: remember plans per job shape and platform state (:class:`_PlanMemo`; False: recompute).
    """

    def __init__(self, cache: Any, order: str = "swf", jobs: int = 8, k_seeds: int = 4, max_chain: int = 4,
                 memo: bool = True):
        from sfenv.agents.spinsearch import SpinSearchAgent

        if order not in ORDERS:
            raise UnknownName(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
        #: the agent whose decision this proposer records (registry name)
        self.name = f"spinsearch+{order}"
        self.cache = cache
        self.order = order
        self.jobs = jobs
        self.agent = SpinSearchAgent(k_seeds=k_seeds, max_chain=max_chain)
        #: remember plans per job shape and platform state (False: compute them at every call)
        self.memo = memo
        self._memo = _PlanMemo(cache)
        #: the combined agent's decision at the last :meth:`candidates` call (None: it would wait)
        self.decision: Plan | None = None
        self._bace: Any = None
        if order == "bace":
            from sfenv.agents.bace_pipe import BACEPipeAgent

            self._bace = BACEPipeAgent()

    def reset(self) -> None:
        """Nothing to forget between episodes (the plan cache is the environment's)."""

    def _plan(self, view: SimView, job: JobSpec) -> Plan | None:
        free = view.free_gpus
        best: tuple[tuple[float, int, int], Plan] | None = None
        for i, chain in enumerate(self.agent.chains(view, job)):
            budget = fill_budget(free, chain, job.max_gpus)
            if min(budget) < 1:
                continue
            res = self.cache.fit(view, job, chain, budget)
            if res is not None:
                key = (res[1].iter_time, len(chain), i)
                if best is None or key < best[0]:
                    best = (key, res[0])
        return None if best is None else best[1]

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """The decision of ``spinsearch+ORDER``, then SpinSearch's plans for the queue window.

        The decision is also kept as :attr:`decision` (None: the agent would wait), the expert
        action of :mod:`sfenv.agents.imitation`.
        """
        out: list[Plan] = []
        plans: dict[int, Plan | None] = {}
        self.decision = None
        for job in order_jobs(view, self.order, self._bace):
            p = plans[job.job_id] = self.plan(view, job)
            if p is not None and view.can_start(p):
                out.append(p)
                self.decision = p
                break
        for job in view.waiting[: self.jobs]:
            if len(out) >= k:
                break
            p = plans[job.job_id] if job.job_id in plans else self.plan(view, job)
            if p is not None and p not in out and view.can_start(p):
                out.append(p)
        return out[:k]


class FirstFitProposer(_MemoisedPlans):
    """Candidate proposer: the decision of ``PLACEMENT+ORDER`` for FIFO's or Fastest's single-region fit.

    The first job in ``order`` whose plan can start now, placed as
    :meth:`sfenv.agents.fifo.FIFOAgent.propose` (``placement="fifo"``: the first region, in index
    order, with the job's minimum free) or :meth:`sfenv.agents.simple.FastestRegionAgent.propose`
    (``"fastest"``: the region where the job's plan has the shortest iteration time) places it,
    using up to ``max_gpus`` of the region's free GPUs, else regions chained in index order; every
    :func:`~sfenv.model.planning.fit_plan` goes through the environment's plan cache.  It records the
    decision as :attr:`decision` (None: the agent would wait) and proposes only that plan.

    :param cache: the environment's plan cache.
    :param order: queue order, one of :data:`ORDERS`.
    :param placement: ``"fifo"`` or ``"fastest"``.
    :param memo: remember plans per job shape and platform state (:class:`_PlanMemo`; False: recompute).
    """

    PLACEMENTS = ("fifo", "fastest")

    def __init__(self, cache: Any, order: str = "swf", placement: str = "fifo", memo: bool = True):
        if order not in ORDERS:
            raise UnknownName(f"unknown queue order {order!r}; known: {', '.join(ORDERS)}")
        if placement not in self.PLACEMENTS:
            raise UnknownName(f"unknown placement {placement!r}; known: {', '.join(self.PLACEMENTS)}")
        self.name = f"{placement}+{order}"
        self.cache = cache
        self.order = order
        self.fastest = placement == "fastest"
        #: remember plans per job shape and platform state (False: compute them at every call)
        self.memo = memo
        self._memo = _PlanMemo(cache)
        self.decision: Plan | None = None
        self._bace: Any = None

    def reset(self) -> None:
        """Nothing to forget between episodes (the plan cache is the environment's)."""

    def _plan(self, view: SimView, job: JobSpec) -> Plan | None:
        free = view.free_gpus
        best: tuple[float, Plan] | None = None
        for r in range(view.topo.num_regions):
            if free[r] >= job.min_gpus:
                res = self.cache.fit(view, job, (r,), (min(int(free[r]), job.max_gpus),))
                if res is not None:
                    if not self.fastest:
                        return res[0]
                    if best is None or res[1].iter_time < best[0]:
                        best = (res[1].iter_time, res[0])
        if best is not None:
            return best[1]
        spread = index_order_chain(free, job)
        if spread is not None:
            res = self.cache.fit(view, job, spread[0], spread[1])
            if res is not None:
                return res[0]
        return None

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """The decision of ``PLACEMENT+ORDER`` (at most one plan)."""
        self.decision = None
        if k < 1:
            return []
        for job in order_jobs(view, self.order, self._bace):
            p = self.plan(view, job)
            if p is not None and view.can_start(p):
                self.decision = p
                return [p]
        return []


class DecisionProposer(DecisionRecorder):
    """Candidate proposer: the decision of any registered agent (e.g. ``spantrain+swf``), recorded.

    Asks the agent to decide at every step and proposes that plan alone; :attr:`decision` holds it
    (None: the agent would wait), as for :class:`FirstFitProposer`.  Only the decision is taken: an
    agent that also re-plans running jobs (SpanTrain's adapter) does not re-plan through the env,
    so a policy that always picks this candidate plays the agent without its re-plans.

    :param agent: the agent (e.g. ``make_agent("spantrain+swf")``); the proposer takes its name.
    """

    def __init__(self, agent: SchedulerAgent):
        self.name = agent.name
        self.agent = agent
        self.decision: Plan | None = None

    def reset(self) -> None:
        """Reset the agent for a new episode."""
        self.agent.reset()
        self.decision = None

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """The agent's decision (at most one plan)."""
        self.decision = self.agent.decide(view) if k >= 1 else None
        return [] if self.decision is None else [self.decision]

