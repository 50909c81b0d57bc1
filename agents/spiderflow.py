"""SpiderFlow (ACL 2026) = SpinSearch (placement) + TPA (parallelisation).

Source: the abstract only [paper]; both parts are our designs built to its description (see
:mod:`sfenv.agents.spinsearch` and :mod:`sfenv.agents.tpa`).  SpinSearch proposes cluster chains along the WAN
graph; each chain gets SpinSearch's own plan (:func:`sfenv.model.planning.fit_plan`), and the chains are
ranked by that plan's modelled iteration time (ties: fewer clusters).  TPA turns the best
``n_chains`` of them into plans with its two-level planner, each completed by the shared
completion step (:func:`sfenv.model.planning.complete_plan`: micro-batch, recomputation, in-flight
window); the completed TPA plan with the lowest modelled iteration time wins [our design].

Parameters
    k_seeds, max_chain: SpinSearch's.  time_limit: TPA's MILP time limit (s; TPA enumerates by default).
    n_chains: chains handed to TPA.  schedule: pipeline schedule.
"""

from __future__ import annotations

from sfenv.agents.base import SchedulerAgent, fill_budget
from sfenv.agents.spinsearch import SpinSearchAgent
from sfenv.agents.tpa import tpa_plan

from sfenv.model.perf import Plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = ["SpiderFlowAgent"]


class SpiderFlowAgent(SchedulerAgent):
    """SpinSearch chains, TPA plans (see the module docstring)."""

    name = "spiderflow"

    def __init__(self, k_seeds: int = 4, max_chain: int = 4, time_limit: float = 2.0, n_chains: int = 2,
                 schedule: str = "1f1b"):
        self.spin = SpinSearchAgent(k_seeds=k_seeds, max_chain=max_chain, schedule=schedule)
        self.time_limit = time_limit
        self.n_chains = n_chains
        self.schedule = schedule
        self.stats: dict = {}

    @property
    def evaluations(self) -> int:
        """Plans evaluated by both levels."""
        return self.spin.evaluations + self.stats.get("evaluations", 0) + self.stats.get("completion_evaluations", 0)

    def reset(self, seed: int | None = None) -> None:
        """Reset the counters."""
        self.spin.reset(seed)
        self.stats = {}

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The SpiderFlow plan for ``job`` now, if any."""
        free = view.free_gpus
        # SpinSearch's chains ranked by the modelled iteration time of its own plan on each
        ranked = self.spin.ranked_chains(view, job)
        best = None
        for chain, _, _ in ranked[: self.n_chains]:
            budget = fill_budget(free, chain, job.max_gpus)
            res = tpa_plan(view, job, chain, budget, self.time_limit, schedule=self.schedule, stats=self.stats)
            if res is not None and (best is None or res[1].iter_time < best[1].iter_time):
                best = res
        return [] if best is None else [best[0]]
