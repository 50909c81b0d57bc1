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

- :class:`CarbonElasticAgent` (``carbon-elastic``), elastic: scales a running job's data-parallel
  width up in clean hours and down in dirty ones (CarbonScaler, Hanafy et al., SIGMETRICS'24).  It
  asks the simulator to call its re-planning hook at every hour boundary (``replan_hourly``,
  :meth:`sfenv.sim.Simulator.set_replanner`); every switch pays the simulator's modelled re-partition
  pause (and egress for moved state, none here since a job stays in its region).  See its docstring
  for what follows CarbonScaler and what we chose.

Expected carbon beyond the forecast horizon uses the forecast's mean (our choice).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np
from sfenv.agents.base import SchedulerAgent

from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.planning import fit_plan
from sfenv.sim import InvalidDecision, SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "CarbonDeferralAgent",
    "CarbonElasticAgent",
    "ForecastCarbonAgent",
    "LowestCarbonAgent",
    "SpatioTemporalCarbonAgent",
    "expected_kg",
    "greedy_widths",
]


#: relative saving below which a later start or another region does not count as cleaner (rounding of the
#: hour-by-hour sums, about 1e-16, not a saving)
SAVING_TOLERANCE = 1e-9
#: memoised fits kept by the elastic agent (then all are dropped)
_MEMO_ENTRIES = 30_000


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


def greedy_widths(rates: Sequence[float], powers_w: Sequence[float], slots: Sequence[tuple[float, float]],
                  work: float) -> list[int]:
    """CarbonScaler's greedy allocation: a width level per time slot that does ``work`` at least marginal carbon.

    Every slot starts at level 0 (the narrowest); then, while the work done falls short, the slot whose
    next level adds the most work per extra kgCO2e, ``(rate[l+1] - rate[l]) / ((power[l+1] - power[l])
    x intensity)``, goes up one level (ties: the earlier slot).  This is the marginal-capacity-per-carbon
    rule of Hanafy et al. (SIGMETRICS'24, section 4), with levels instead of servers.

    :param rates: work per second at each level (iterations/s), increasing.
    :param powers_w: facility power at each level (W).
    :param slots: ``(length_s, intensity_g_per_kwh)`` per slot, in time order.
    :param work: the work to do by the end of the last slot (iterations).
    :return: the level per slot; every slot at the top level when even that does not do ``work``.
    """
    if len(rates) != len(powers_w) or not rates:
        raise ValueError(f"rates and powers_w: expected equal non-empty lengths, got {len(rates)} and {len(powers_w)}")
    levels = [0] * len(slots)
    done = sum(rates[0] * length for length, _ in slots)
    top = len(rates) - 1

    def ratio(i: int, lvl: int) -> float:
        length, intensity = slots[i]
        extra_kg = (powers_w[lvl + 1] - powers_w[lvl]) * length * intensity / 3.6e9
        extra_work = (rates[lvl + 1] - rates[lvl]) * length
        return math.inf if extra_kg <= 0.0 else extra_work / extra_kg

    heap = [(-ratio(i, 0), i) for i in range(len(slots))] if top > 0 else []
    heapq.heapify(heap)
    while done < work and heap:
        _, i = heapq.heappop(heap)
        lvl = levels[i]
        done += (rates[lvl + 1] - rates[lvl]) * slots[i][0]
        levels[i] = lvl + 1
        if lvl + 1 < top:
            heapq.heappush(heap, (-ratio(i, lvl + 1), i))
    return levels


class CarbonElasticAgent(_CarbonPlacement):
    """Elastic scaling of running jobs with the hourly carbon forecast (CarbonScaler's idea).

    Source: Hanafy et al., "CarbonScaler: Leveraging Cloud Workload Elasticity for Optimizing
    Carbon-Efficiency", SIGMETRICS'24.

    Follows the source
        - A job's scale changes hour by hour with the grid's carbon intensity: wider in clean hours,
          narrower in dirty ones, so that it still completes by a completion time the user allows.
        - The allocation is CarbonScaler's greedy (:func:`greedy_widths`): the hours and widths are
          chosen by the marginal work per unit of carbon of one more step of width, from the
          job's marginal capacity curve (here the performance model's iteration time per width) and
          the forecast over the time left; the schedule is recomputed as time passes and forecasts
          are re-issued (their carbon "AutoScaler" re-plans on forecast updates).

    Our design
        - Placement: the region the job runs fastest in now (as ``fastest`` and ``carbon-defer``, so
          that the saving comes from scaling, not from the region), at the width the greedy gives
          for the current hour.  Jobs stay in one region; a job never scales below its
          ``min_gpus`` (CarbonScaler may suspend a job, 0 servers; suspension is ``carbon-defer``'s).
        - Widths ("levels"): the plans :func:`sfenv.model.planning.fit_plan` (the menu every agent
          shares) gives on budgets ``min_gpus x 2^k`` and the largest budget, keeping only those
          strictly faster than the narrower ones; the largest budget is ``max_gpus`` capped by the
          GPUs the job holds plus the region's free ones, or only those it holds while a waiting job
          could start in the region's free GPUs (waiting jobs come first).
        - Completion time: ``arrival + slack_h + the job's run at its widest`` (``max_gpus`` capped by
          the region's size), the same slack as the temporal agents'; past it, or when even the
          widest plan cannot meet it, the job runs at its widest.
        - Slots: the rest of the current hour, then whole hours to the completion time; hours past
          the forecast take its mean.  Work is iterations left.
        - Switch: at each hour boundary (``replan_hourly``), to the current slot's width when it differs
          from the job's and the simulator's modelled pause (:meth:`sfenv.sim.SimView.evaluate_replan`)
          is at most ``max_pause_share`` of the job's remaining run at its current width (a switch
          near the end does not pay for its pause); a paused job is left alone.
        - Memoisation (speed only, decisions unchanged): a single-region fit depends on the job's
          shape, the region and the budget, not on the link state, so fits are remembered under
          that key for the topology and performance parameters they were computed with.

    :param slack_h: hours a job may finish later than at its widest from arrival (0: always widest).
    :param horizon_h: hours of forecast read.
    :param max_pause_share: largest re-partition pause accepted for a switch, as a share of the job's
        remaining run at its current width.
    """

    name = "carbon-elastic"
    replans = True
    replan_hourly = True

    def __init__(self, slack_h: float = 6.0, horizon_h: int = 24, max_pause_share: float = 0.1):
        if not 0 <= slack_h <= 168:
            raise ValueError(f"slack_h {slack_h!r}: expected 0..168 hours")
        if not 0 < horizon_h <= 168:
            raise ValueError(f"horizon_h {horizon_h!r}: expected 1..168 hours")
        if not 0 <= max_pause_share <= 1:
            raise ValueError(f"max_pause_share {max_pause_share!r}: expected 0..1")
        self.slack_h = float(slack_h)
        self.horizon_h = int(horizon_h)
        self.max_pause_share = float(max_pause_share)
        self.switches = 0
        self._fits_memo: dict[tuple, tuple[Plan, PlanPerf] | None] = {}
        self._memo_context: tuple[object, object] | None = None

    def reset(self, seed: int | None = None) -> None:
        """Reset the switch counter."""
        self.switches = 0

    def _fit(self, view: SimView, job: JobSpec, region: int, budget: int) -> tuple[Plan, PlanPerf] | None:
        """``fit_plan`` of ``job`` on ``budget`` GPUs of ``region``, memoised (see the class docstring)."""
        context = self._memo_context
        if context is None or context[0] is not view.topo or context[1] != view.params \
                or len(self._fits_memo) > _MEMO_ENTRIES:
            self._fits_memo.clear()
            self._memo_context = (view.topo, view.params)
        key = (job.shape_key, region, budget)
        if key not in self._fits_memo:
            self._fits_memo[key] = fit_plan(job, view.topo, [region], [budget], view.evaluate)
        res = self._fits_memo[key]
        return None if res is None else (res[0].for_job(job.job_id), res[1])

    def levels(self, view: SimView, job: JobSpec, region: int, cap: int) -> list[tuple[Plan, PlanPerf]]:
        """The widths a job may run at in ``region`` with at most ``cap`` GPUs, narrowest first, each faster."""
        budgets: list[int] = []
        b = job.min_gpus
        while b < cap:
            budgets.append(b)
            b *= 2
        budgets.append(cap)
        out: list[tuple[Plan, PlanPerf]] = []
        for budget in budgets:
            res = self._fit(view, job, region, budget)
            if res is None or not res[1].feasible:
                continue
            if not out or (res[1].iter_time < out[-1][1].iter_time and res[0].gpus > out[-1][0].gpus):
                out.append(res)
        return out

    def deadline_s(self, view: SimView, job: JobSpec, region: int) -> float:
        """The completion time allowed: arrival + slack + the run at the widest plan the region can hold."""
        widest = min(job.max_gpus, int(view.topo.regions[region].num_gpus))
        res = self._fit(view, job, region, widest) if widest >= job.min_gpus else None
        if res is None:
            return job.arrival + self.slack_h * 3600.0
        return job.arrival + self.slack_h * 3600.0 + job.iterations * res[1].iter_time

    def choose(self, view: SimView, job: JobSpec, region: int, levels: list[tuple[Plan, PlanPerf]],
               work: float) -> tuple[Plan, PlanPerf]:
        """The level for the current hour by :func:`greedy_widths` over the forecast to the completion time."""
        now = view.time
        end = self.deadline_s(view, job, region)
        top = levels[-1]
        if len(levels) == 1 or end <= now or work * top[1].iter_time >= end - now:
            return top
        row = view.carbon_forecast(self.horizon_h)[region]
        mean = float(np.mean(row))
        slots: list[tuple[float, float]] = []
        t, k = now, 0
        while t < end:
            nxt = min(end, (math.floor(t / 3600.0) + 1) * 3600.0)
            slots.append((nxt - t, float(row[k]) if k < len(row) else mean))
            t, k = nxt, k + 1
        chosen = greedy_widths([1.0 / p.iter_time for _, p in levels], [p.power_w for _, p in levels], slots, work)
        return levels[chosen[0]]

    def _cap(self, view: SimView, job: JobSpec, region: int, held: int, taken: int = 0) -> int:
        free = int(view.free_gpus[region]) - taken
        if any(w.min_gpus <= free for w in view.waiting):
            free = 0  # a waiting job could start here: leave it the free GPUs
        return min(job.max_gpus, held + free)

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The job's plan in its fastest region now, at the width the greedy gives for this hour."""
        fits = self._fits(view, job)
        if not fits:
            return []
        region = min(fits, key=lambda f: (f[2].iter_time, f[0]))[0]
        cap = min(int(view.free_gpus[region]), job.max_gpus)
        levels = self.levels(view, job, region, cap)
        if not levels:
            return []
        work = max(0.0, job.iterations - view.waiting_progress(job.job_id))
        return [self.choose(view, job, region, levels, work)[0]]

    def replan(self, view: SimView) -> list[Plan]:
        """Switches to this hour's width for every running single-region job whose width should change."""
        out: list[Plan] = []
        taken: dict[int, int] = {}  # free GPUs this call's earlier switches take, per region
        for info in view.running:
            if not math.isnan(info.paused_until) or len(info.plan.regions) != 1:
                continue
            job, region = info.job, info.plan.regions[0]
            levels = self.levels(view, job, region, self._cap(view, job, region, info.plan.gpus, taken.get(region, 0)))
            if not levels:
                continue
            plan = self.choose(view, job, region, levels, max(0.0, job.iterations - info.progress))[0]
            if plan == info.plan or plan.gpus == info.plan.gpus:
                continue
            try:
                _, pause = view.evaluate_replan(plan)
            except InvalidDecision:
                continue
            if pause <= self.max_pause_share * info.remaining_s:
                out.append(plan)
                taken[region] = taken.get(region, 0) + max(0, plan.gpus - info.plan.gpus)
                self.switches += 1
        return out
