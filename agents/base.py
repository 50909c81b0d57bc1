"""The interface every scheduling agent shares.

A reference agent reads the simulator's read-only :class:`~sfenv.sim.SimView` and either proposes
ranked plans for a job (:meth:`SchedulerAgent.propose`) or makes the whole decision
(:meth:`SchedulerAgent.decide`: a plan to start now, or None to wait).  Through
:class:`~sfenv.agents.policy.AgentPolicy` every agent also exposes SB3's ``predict`` so it plays
through :class:`sfenv.env.GeoSchedEnv` and ``evaluate_policy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sfenv.env.proposers import Proposer
from sfenv.model.perf import Plan
from sfenv.model.planning import fit_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = ["SchedulerAgent", "best_single_region_plan", "fill_budget", "index_order_chain", "index_order_plan"]


class SchedulerAgent(Proposer):
    """Base class: order the queue, propose plans per job, start the first that fits.

    An agent is also a candidate :class:`~sfenv.env.proposers.Proposer` (:meth:`candidates`), reset by
    the env at every episode when it is one of the env's proposers.

    Subclasses override :meth:`order` and :meth:`propose`; ``blocking=True`` makes the agent
    wait whenever the first job in its order cannot start (strict FIFO head-of-line blocking).

    :param name: the agent's registry name.
    """

    name = "base"
    blocking = False
    #: True if :meth:`replan` proposes plan switches: the evaluator and :meth:`predict` then install
    #: it as the simulator's re-planning hook (:meth:`sfenv.sim.Simulator.set_replanner`)
    replans = False
    #: True if :meth:`replan` wants to be called at every hour boundary while a job runs too, not only
    #: after link capacity changes (``Simulator.set_replanner(..., hourly=True)``; carbon-elastic scaling)
    replan_hourly = False
    _bound: tuple[list[Any], bool] | None = None

    def bind(self, env: Any) -> SchedulerAgent:
        """Attach to a GeoSchedEnv (or a DummyVecEnv of them) so :meth:`predict` can act; returns self."""
        from sfenv.agents.policy import bind_envs

        self._bound = bind_envs(env)
        return self

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """SB3 ``PolicyPredictor.predict``: the action(s) for the bound env(s) (see :mod:`sfenv.agents.policy`).

        The observation and masks are not needed: the agent reads the bound env's simulator view.
        """
        from sfenv.agents.policy import predict_actions

        if self._bound is None:
            raise RuntimeError(f"{type(self).__name__}.predict needs bind(env) first")
        return predict_actions(self, *self._bound, observation), state

    def reset(self, seed: int | None = None) -> None:
        """Forget per-episode state (called at the start of every episode)."""

    def prepare(self) -> None:
        """Load now, once per process, whatever the first decision would otherwise load (default: nothing).

        The evaluator calls it before it starts timing decisions (:func:`sfenv.app.evaluate.prepare_decisions`),
        so a one-off cost such as importing a solver library is not counted as decision time.  It must not
        change what the agent decides: no random draws, no per-episode state.
        """

    def order(self, view: SimView) -> list[JobSpec]:
        """Waiting jobs in the order the agent wants to serve them (default: arrival)."""
        return view.waiting

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """Up to ``k`` plans for ``job``, best first, that could start now."""
        raise NotImplementedError

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """Up to ``k`` startable plans over the queue (the env's candidate-proposer protocol).

        Default: the agent's own decision first, then its proposals for each job in its order.
        """
        out: list[Plan] = []
        first = self.decide(view)
        if first is not None:
            out.append(first)
        for job in self.order(view):
            if len(out) >= k:
                break
            for plan in self.propose(view, job, k=1):
                if plan not in out and view.can_start(plan):
                    out.append(plan)
        return out[:k]

    def replan(self, view: SimView) -> list[Plan]:
        """Plans to switch running jobs to, called after link capacity changes (and hourly with ``replan_hourly``).

        Default: none.
        """
        return []

    def decide(self, view: SimView) -> Plan | None:
        """A plan to start now, or None to wait."""
        for job in self.order(view):
            for plan in self.propose(view, job, k=1):
                if view.can_start(plan):
                    return plan
            if self.blocking:
                return None
        return None


def best_single_region_plan(view: SimView, job: JobSpec, region: int, gpus: int | None = None):
    """Best plan for ``job`` inside one region with at most ``gpus`` (default: all free, capped)."""
    free = int(view.free_gpus[region])
    budget = min(free, job.max_gpus) if gpus is None else min(gpus, free)
    if budget < job.min_gpus:
        return None
    return fit_plan(job, view.topo, [region], [budget], view.evaluate)


def fill_budget(free: Sequence[int] | np.ndarray, chain: Sequence[int], max_gpus: int) -> list[int]:
    """GPUs taken from each region of ``chain`` in turn: all free ones until ``max_gpus`` is reached."""
    budget, total = [], 0
    for r in chain:
        take = min(int(free[r]), max_gpus - total)
        budget.append(take)
        total += take
    return budget


def index_order_plan(view: SimView, job: JobSpec) -> Plan | None:
    """FIFO's fallback when no region alone can hold ``job``: :func:`index_order_chain`, then ``fit_plan``."""
    spread = index_order_chain(view.free_gpus, job)
    if spread is None:
        return None
    res = fit_plan(job, view.topo, spread[0], spread[1], view.evaluate)
    return None if res is None else res[0]


def index_order_chain(free: Sequence[int] | np.ndarray, job: JobSpec) -> tuple[list[int], list[int]] | None:
    """Regions with free GPUs in index order until the job's minimum is met (topology ignored)."""
    chain, budget, total = [], [], 0
    for r in range(len(free)):
        if free[r] > 0 and total < job.min_gpus:
            take = min(int(free[r]), job.max_gpus - total)
            chain.append(r)
            budget.append(take)
            total += take
    return (chain, budget) if total >= job.min_gpus else None

