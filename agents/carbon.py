"""Carbon-aware agents (issue 33 §2): spatial, temporal and spatio-temporal shifting of training jobs.

All four serve jobs in arrival order with backfilling (a job that cannot start, or chooses to wait,
is skipped, not waited on), use the plan menu every agent shares (:func:`sfenv.model.planning.fit_plan`
on one region's free GPUs, up to the job's ``max_gpus``) and read carbon only through
:meth:`sfenv.sim.SimView.carbon_forecast`: the intensity now and the forecast issued now (the
scenario's ``carbon.forecast``: noisy, persistence or the privileged oracle).  Ordering variants
come from the registry (``lowest-carbon+swf`` and so on, :mod:`sfenv.agents.ordering`).

- :class:`LowestCarbonAgent` (``lowest-carbon``), spatial, intensity now: the region of lowest
  intensity this hour among those that fit.  Follows the greedy "greenest region" policy whose
  upper bound Sukprasert et al. (EuroSys'24) study; carbon-agnostic otherwise.
- :class:`ForecastCarbonAgent` (``forecast-carbon``), spatial, over the run: the region of least
  *expected carbon* over the job's expected run (the plan's facility power x forecast intensity
  integrated over its predicted run time).  Our design.
- :class:`CarbonDeferralAgent` (``carbon-defer``), temporal, Wait-AWhile style (Wiesner et al.,
  Middleware'21, non-interruptible strategy: start when the forecast mean intensity over the job's
  run is lowest within the allowed window): the job's region is the one it runs fastest in now
  (carbon-agnostic placement, so only time shifts); it starts now unless a start within its slack
  (``slack_h`` after arrival, a job has no deadline in sfenv: the slack is the agent's parameter)
  has a lower expected carbon; then it waits and is reconsidered at the next event (the simulator
  wakes waiting agents at every hour).  Follows the source: choose the start in a window by forecast;
  our choice: the window is the slack, and capacity later is assumed, not reserved.
- :class:`SpatioTemporalCarbonAgent` (``carbon-st``): the best (region, start hour) pair within the
  slack by expected carbon ("the best window and location before the deadline", carbon-aware-sdk
  issues #154/#167); it starts now only if the best pair starts now, in that region.

Expected carbon beyond the forecast horizon uses the forecast's mean (our choice).  **Elastic
scaling** (CarbonScaler, Hanafy et al., SIGMETRICS'24) is not provided: sfenv's re-planning hook
(:meth:`sfenv.sim.Simulator.set_replanner`) is called only after link capacity changes, not at
hourly carbon changes, so a running job's width cannot follow the intensity without changing the
simulator's re-planning triggers.
"""

from __future__ import annotations

import math

import numpy as np
from sfenv.agents.base import SchedulerAgent

from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.planning import fit_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "CarbonDeferralAgent",
    "ForecastCarbonAgent",
    "LowestCarbonAgent",
    "SpatioTemporalCarbonAgent",
    "expected_kg",
]


#: relative saving below which a later start or another region does not count as cleaner (rounding of the
#: hour-by-hour sums, about 1e-16, not a saving)
SAVING_TOLERANCE = 1e-9


def expected_kg(row: np.ndarray, now: float, delay_s: float, run_s: float, power_w: float) -> float:
    """Expected kgCO2e of drawing ``power_w`` for ``run_s`` seconds starting ``delay_s`` from ``now``.

    :param row: one region's intensities (gCO2e/kWh): the current hour's, then the forecast per hour.
    :param now: the simulated time the forecast was issued at (its hour is ``row[0]``'s).
    :return: ``power x integral of the intensity over the run / 3.6e9``; hours past the forecast take
        its mean.  Infinite for an infinite run.
    """
    if not math.isfinite(run_s):
        return math.inf
    start = now - math.floor(now / 3600.0) * 3600.0 + delay_s  # seconds from the start of row[0]'s hour
    end = start + run_s
    n = len(row)
    covered = min(end, n * 3600.0)
    total = 0.0
    if covered > start:
        cum = np.concatenate([[0.0], np.cumsum(row) * 3600.0])

        def integral(x: float) -> float:
            k = min(int(x // 3600.0), n - 1)
            return float(cum[k] + (x - k * 3600.0) * row[k])

        total = integral(covered) - integral(start)
    if end > max(start, n * 3600.0):
        total += (end - max(start, n * 3600.0)) * float(np.mean(row))
    return power_w * total / 3.6e9


class _CarbonPlacement(SchedulerAgent):
    """Shared parts: single-region fits on the free GPUs, and their predicted remaining run."""

    #: hours of forecast read (the scenario's forecast is issued for any horizon)
    horizon_h = 24

    def _fits(self, view: SimView, job: JobSpec) -> list[tuple[int, Plan, PlanPerf]]:
        free = view.free_gpus
        out = []
        for r in range(len(free)):
            if view.down[r] or free[r] < job.min_gpus:
                continue
            res = fit_plan(job, view.topo, [r], [min(int(free[r]), job.max_gpus)], view.evaluate)
            if res is not None:
                out.append((r, res[0], res[1]))
        return out

    @staticmethod
    def _run_s(view: SimView, job: JobSpec, perf: PlanPerf) -> float:
        left = max(0.0, job.iterations - view.waiting_progress(job.job_id))
        return left * perf.iter_time


class LowestCarbonAgent(_CarbonPlacement):
    """The fitting region of lowest carbon intensity now (see the module docstring)."""

    name = "lowest-carbon"

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """Plans in the regions that can hold ``job`` now, lowest intensity first (ties: region index)."""
        now = view.carbon_now()
        ranked = sorted(self._fits(view, job), key=lambda f: (float(now[f[0]]), f[0]))
        return [plan for _, plan, _ in ranked[:k]]


class ForecastCarbonAgent(_CarbonPlacement):
    """The fitting region of least expected carbon over the job's predicted run (see the module docstring).

    :param horizon_h: hours of forecast read (beyond them, the forecast's mean).
    """

    name = "forecast-carbon"

    def __init__(self, horizon_h: int = 24):
        if not 0 < horizon_h <= 168:
            raise ValueError(f"horizon_h {horizon_h!r}: expected 1..168 hours")
        self.horizon_h = int(horizon_h)

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """Plans in the regions that can hold ``job`` now, least expected carbon first."""
        rows = view.carbon_forecast(self.horizon_h)
        ranked = sorted(
            ((expected_kg(rows[r], view.time, 0.0, self._run_s(view, job, perf), perf.power_w), r, plan)
             for r, plan, perf in self._fits(view, job)),
            key=lambda x: (x[0], x[1]))
        return [plan for _, _, plan in ranked[:k]]


class CarbonDeferralAgent(_CarbonPlacement):
    """Wait-AWhile-style deferral within a slack, in the region the job runs fastest now (module docstring).

    :param slack_h: hours after its arrival a job may still be started late to save carbon (0: never defer).
    :param horizon_h: hours of forecast read.
    """

    name = "carbon-defer"
    #: regions considered per job: only the fastest (temporal shifting alone)
    spatial = False

    def __init__(self, slack_h: float = 6.0, horizon_h: int = 24):
        if not 0 <= slack_h <= 168:
            raise ValueError(f"slack_h {slack_h!r}: expected 0..168 hours")
        if not 0 < horizon_h <= 168:
            raise ValueError(f"horizon_h {horizon_h!r}: expected 1..168 hours")
        self.slack_h = float(slack_h)
        self.horizon_h = int(horizon_h)

    def _options(self, view: SimView, job: JobSpec) -> list[tuple[int, Plan, PlanPerf]]:
        fits = self._fits(view, job)
        if self.spatial or not fits:
            return fits
        return [min(fits, key=lambda f: (f[2].iter_time, f[0]))]

    def best_start(self, view: SimView, job: JobSpec) -> tuple[float, Plan | None]:
        """The delay (s) and the plan of least expected carbon within the job's slack; ``(0, plan)`` starts now.

        Delays are whole hours to the next hour boundaries within the slack left (the forecast is hourly);
        a plan of None means no region can hold the job now.
        """
        options = self._options(view, job)
        if not options:
            return 0.0, None
        rows = view.carbon_forecast(self.horizon_h)
        now = view.time
        slack_left = job.arrival + self.slack_h * 3600.0 - now
        to_next = math.floor(now / 3600.0) * 3600.0 + 3600.0 - now
        delays = [0.0] + [to_next + 3600.0 * i for i in range(self.horizon_h) if to_next + 3600.0 * i <= slack_left]
        best_kg, best_delay, best_plan = math.inf, 0.0, options[0][1]
        for r, plan, perf in options:  # regions in index order
            run = self._run_s(view, job, perf)
            for d in delays:  # sooner first
                kg = expected_kg(rows[r], now, d, run, perf.power_w)
                # strictly less beyond rounding (ties: sooner, then the lower region index)
                if kg < best_kg * (1.0 - SAVING_TOLERANCE):
                    best_kg, best_delay, best_plan = kg, d, plan
        return best_delay, best_plan

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The job's plan if its best start is now, else nothing (it waits for a cleaner hour)."""
        delay, plan = self.best_start(view, job)
        return [plan] if plan is not None and delay == 0.0 else []


class SpatioTemporalCarbonAgent(CarbonDeferralAgent):
    """The best region and start hour within the slack, by expected carbon (see the module docstring)."""

    name = "carbon-st"
    spatial = True
