"""The discrete-event simulator: the single source of truth for sfenv.

It knows nothing of Gymnasium, torch or plotting.  Events (:mod:`sfenv.sim.events`): job arrival,
job completion, link bandwidth change, region outage and recovery, the end of a re-plan pause; and
the price change at each hour boundary, only while jobs wait.  State: free GPUs per region (here),
the waiting queue (:mod:`sfenv.sim.queue`), WAN load per directed link (:mod:`sfenv.sim.links`), running
jobs with their progress and bills (:mod:`sfenv.sim.billing`).

**Decisions.**  :meth:`Simulator.advance` runs events until a *decision point*: a job waits and
the free GPUs could hold the smallest waiting job.  The caller then either starts a job with
:meth:`Simulator.schedule` (the simulator stays at the same time and may ask again) or calls
:meth:`Simulator.wait`, which runs at least one more event.  Agents read the state through a
read-only :class:`~sfenv.sim.view.SimView`.

**Link sharing.**  Every pipeline hop (each way) and cross-region all-reduce ring edge between
regions is a flow group on the directed links of its route (links are full duplex); transfers share
a link max-min fairly while they send, and each flow sends only part of the time
(:mod:`sfenv.model.sharing`).  Whenever a job starts, stops or switches plans, or a capacity
changes, the running jobs that share links with the change get new rates
(:meth:`sfenv.sim.links.LinkState.settle`), and their iteration times, completion events and
power are recomputed.

**Costs.**  A running job draws constant power per region between changes; its cost is the exact
integral of each zone's hourly price over that time (:class:`sfenv.world.prices.PriceSeries`).  The
bytes it sends between regions are billed as egress, per byte at the price of each direction
(:mod:`sfenv.sim.billing`).

**Outages.**  An outage preempts every job with GPUs in the region: the job loses the iterations
done since its last checkpoint, frees its GPUs and returns to the queue; the region offers no
GPUs until it recovers.  No job is lost.

**Re-planning.**  :meth:`Simulator.replan` switches a running job to another plan, charging a
modelled re-partition pause (:mod:`sfenv.sim.replan` gives the model).  Agents re-plan through a
hook: ``Simulator.replanner`` (set with ``run(decide, replan=...)``) is called with the view after
every link capacity change and returns plans to switch to (see :meth:`Simulator.set_replanner`);
a hook installed with ``hourly=True`` (an agent's ``replan_hourly``) is also called at every hour
boundary while a job runs, when intensities and prices change (the simulator then stops at each such
hour).  Without a hook nothing is ever re-planned, and without ``hourly`` no hour boundary is added:
the simulator costs nothing more.

An episode of a scenario is built by :func:`sfenv.sim.episode.make_simulator`.
"""

from __future__ import annotations

import heapq
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

import sfenv.sim.lookahead as _lookahead
import sfenv.sim.replan as _replan
import sfenv.sim.reroute as _reroute
from sfenv.errors import InvalidInput
from sfenv.model.perf import PerfParams, Plan, PlanPerf, plan_flows
from sfenv.sim.billing import Billing
from sfenv.sim.events import Arrival, BandwidthChange, Completion, Event, EventKind, LinkDynamics, Outage, Straggler
from sfenv.sim.gpus import GpuPool
from sfenv.sim.handlers import HANDLERS
from sfenv.sim.links import LinkState
from sfenv.sim.metrics import EpisodeReport, JobRecord
from sfenv.sim.queue import WaitingQueue
from sfenv.sim.state import EvaluationCache, InvalidDecision, JobState, SimConfig
from sfenv.sim.stragglers import Stragglers
from sfenv.sim.view import SimView
from sfenv.world.carbon import CarbonForecaster, CarbonSeries
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.scenario import Scenario

__all__ = ["Decide", "Replanner", "Simulator"]

#: a decision rule: the plan to start now, or None to wait
Decide = Callable[[SimView], Plan | None]
#: a re-planning hook: plans to switch running jobs to
Replanner = Callable[[SimView], Iterable[Plan]]


class Simulator:
    """Discrete-event simulation of regions, WAN links, jobs and prices.

    The engine keeps the clock and the event queue and carries out decisions; it owns its parts:
    the :attr:`gpus` (free per region, regions down), the waiting :attr:`queue`, the WAN's
    :attr:`links` (flows, capacities, evaluation memos) and the :attr:`billing` (energy, cost,
    platform-wide totals).  Events are handled by :data:`sfenv.sim.handlers.HANDLERS`, re-planning
    is :mod:`sfenv.sim.replan` and look-ahead :mod:`sfenv.sim.lookahead`.

    :param topo: the topology.
    :param prices: hourly prices; zone names must cover every region's zone.
    :param jobs: the episode's jobs (ids must be 0..n-1 in arrival order).
    :param config: simulator settings.
    :param outages: region outages.
    :param dynamics: link bandwidth fluctuation (needs ``rng``).
    :param rng: generator for stochastic dynamics (seeded by the caller).
    :param evaluation_cache: plan evaluations to share with other simulators of the same
        topology and performance parameters (e.g. the episodes of one environment).
    :param egress_usd_per_byte: USD per byte sent from region i to region j (regions x regions,
        :attr:`sfenv.scenario.Scenario.egress_usd_per_byte`); None: egress is not billed.
    :param stragglers: straggler episodes (:mod:`sfenv.sim.stragglers`); None: no GPU is ever slow.
    """

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        rng: np.random.Generator | int | None = None,
        evaluation_cache: EvaluationCache | None = None,
    ) -> Simulator:
        """Deprecated: :func:`sfenv.sim.make_simulator` (the one function that builds an episode)."""
        warnings.warn("Simulator.from_scenario is deprecated; use sfenv.sim.make_simulator(scenario, rng, cache)",
                      DeprecationWarning, stacklevel=2)
        from sfenv.sim.episode import make_simulator  # deprecated shim: the one upward import (tests/test_imports.py)

        return make_simulator(scenario, rng, evaluation_cache)

    def __init__(
        self,
        topo: Topology,
        prices: PriceSeries,
        jobs: list[JobSpec],
        config: SimConfig | None = None,
        outages: list[Outage] | None = None,
        dynamics: LinkDynamics | None = None,
        rng: np.random.Generator | None = None,
        evaluation_cache: EvaluationCache | None = None,
        egress_usd_per_byte: np.ndarray | None = None,
        stragglers: list[Straggler] | None = None,
        carbon: CarbonSeries | None = None,
        carbon_forecaster: CarbonForecaster | None = None,
        embodied_kg_per_gpu_hour: float = 0.0,
    ):
        self.topo = topo
        self.prices = prices
        self.config = config or SimConfig()
        self.params: PerfParams = self.config.perf
        for r in topo.regions:
            if r.zone not in prices.zone_index:
                raise ValueError(f"region {r.name!r} uses price zone {r.zone!r}, prices have {prices.zones}")
        self.region_zone = np.array([prices.zone_index[r.zone] for r in topo.regions])
        for i, j in enumerate(jobs):
            if j.job_id != i:
                raise ValueError(f"job ids must be 0..n-1 in order; position {i} has id {j.job_id}")
        self.jobs = [JobState(spec=j) for j in jobs]
        self.time = 0.0
        #: the GPUs: free per region, regions down, busy GPU-seconds
        self.gpus = GpuPool(topo.gpu_counts)
        #: the WAN: flows, capacity factors and the plan evaluations that depend on them
        self.links = LinkState(topo, self.params, evaluation_cache, self.config.routing)
        #: the waiting jobs
        self.queue = WaitingQueue()
        #: the bills: per job and platform-wide
        self.billing = Billing(prices, self.region_zone, topo, egress_usd_per_byte, carbon)
        #: hourly carbon intensity per price zone (None: carbon is not counted)
        self.carbon = carbon
        #: the carbon forecasts agents and the observation read (None: no forecasts)
        self.carbon_forecaster = carbon_forecaster
        #: embodied kgCO2e per GPU-hour held (the report's ``embodied_kg``)
        self.embodied_kg_per_gpu_hour = embodied_kg_per_gpu_hour
        self.running: set[int] = set()
        self.finished_count = 0
        self.job_seconds = 0.0  # integral over time of the number of jobs in the system
        #: jobs arrived and not finished
        self.in_system = 0
        self._events: list[tuple[float, EventKind, int, Event]] = []
        self._seq = 0
        self.events_processed = 0
        self.decisions = 0
        self._ended = False
        self.dynamics = dynamics
        self.rng = rng
        self.replanner: Replanner | None = None
        #: call the re-planning hook at every hour boundary while a job runs too (:meth:`set_replanner`)
        self.replan_hourly = False
        self.replans = 0
        #: running jobs moved to other routes (``sim.routing: adaptive``, :mod:`sfenv.sim.reroute`)
        self.reroutes = 0
        self.links_changed = False  # a link capacity or a straggler changed rates at this event time (re-plan after it)
        #: the stragglers on running jobs (:mod:`sfenv.sim.stragglers`)
        self.stragglers = Stragglers()
        for j in jobs:
            self.push(j.arrival, EventKind.ARRIVAL, Arrival(j.job_id))
        for o in outages or []:
            self.push(o.start, EventKind.OUTAGE, o)
        for st in stragglers or []:
            self.push(st.start, EventKind.STRAGGLER, st)
        if dynamics is not None:
            if rng is None:
                raise ValueError("link dynamics need an rng")
            for k in dynamics.links:
                self.push(rng.exponential(dynamics.mean_good_s), EventKind.BANDWIDTH,
                          BandwidthChange(k, dynamics.low_factor))
        self.advance()

    # ------------------------------------------------------------ state read by agents and tests
    @property
    def free(self) -> np.ndarray:
        """Free GPUs per region, also in regions that are down (the live array)."""
        return self.gpus.free

    @property
    def down(self) -> np.ndarray:
        """True for regions in an outage (the live array)."""
        return self.gpus.down

    @property
    def busy_gpu_s(self) -> float:
        """Integral over time of the busy GPUs so far."""
        return self.gpus.busy_gpu_s

    @property
    def waiting(self) -> list[int]:
        """Ids of the waiting jobs in arrival order (the queue's own list: read, do not edit)."""
        return self.queue.ids

    @property
    def link_flows(self) -> np.ndarray:
        """Transfers sending at once on each link, expected (its busier direction; a new array: ``links.flows``)."""
        return self.links.flows

    @property
    def link_factor(self) -> np.ndarray:
        """Capacity factor of each link (the live array)."""
        return self.links.factor

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Current capacity of every link (nominal bandwidth x fluctuation factor)."""
        return self.links.capacity_bps

    @property
    def done(self) -> bool:
        """True when every job finished, or the horizon or a dead end was reached (the clock is then at the horizon)."""
        return self._ended

    @property
    def throughput_tokens_s(self) -> float:
        """Predicted tokens/s of the jobs with a plan (the platform-wide rate, kept up to date per change)."""
        return self.billing.rate_tokens

    # ------------------------------------------------------------ events and rates
    def push(self, t: float, kind: EventKind, event: Event) -> None:
        """Put ``event`` of ``kind`` on the queue at time ``t``."""
        heapq.heappush(self._events, (t, kind, self._seq, event))
        self._seq += 1

    def set_rates(self, js: JobState, perf: PlanPerf, complete: bool = True) -> None:
        """Run job ``js`` at ``perf`` from now (and, with ``complete``, schedule its completion)."""
        billing = self.billing
        billing.fold(self.time)
        billing.unrate(js)
        billing.rate(js, perf)
        js.version += 1
        if complete:
            remaining = max(0.0, js.spec.iterations - js.progress) * perf.iter_time
            self.push(self.time + remaining, EventKind.COMPLETE, Completion(js.spec.job_id, js.version))

    def refresh(self, links: Iterable[int] | None) -> None:
        """Recompute rates of running jobs whose traffic shares directed links with ``links`` (all if None).

        The jobs crossing them, and the jobs sharing links with those, and so on, are settled together
        (:meth:`sfenv.sim.links.LinkState.settle`); a paused job keeps its rates until it resumes.  Under
        ``sim.routing: adaptive`` those jobs are first offered the routes best at the load now
        (:func:`sfenv.sim.reroute.reroute`).
        """
        wan = self.links
        ids = sorted(wan.jobs) if links is None else wan.affected(links)
        if wan.routing == "adaptive":  # the jobs offered better routes first (sfenv.sim.reroute)
            ids = _reroute.reroute(self, ids)
        for jid, perf in sorted(wan.settle(ids).items()):
            js = self.jobs[jid]
            self.billing.accrue(js, self.time)
            self.set_rates(js, perf)

    # ------------------------------------------------------------ decisions
    def evaluate(self, plan: Plan, job: JobSpec | None = None) -> PlanPerf:
        """Predict ``plan`` under the current link state (its own flows added).

        Results are memoised by plan and job shape (never by job id) until the link state
        changes; the returned object is shared, so treat it as read-only.
        """
        return self.links.evaluate(plan, job or self.jobs[plan.job_id].spec)

    def evaluate_moved(self, plan: Plan, job: JobSpec, source: Plan, source_perf: PlanPerf) -> PlanPerf:
        """:meth:`evaluate` of ``plan``, all in one region, whose stages are ``source``'s moved from another region.

        See :meth:`sfenv.sim.links.LinkState.evaluate_moved`.
        """
        return self.links.evaluate_moved(plan, job, source, source_perf)

    def check(self, plan: Plan) -> PlanPerf:
        """Validate ``plan`` for starting now; return its predicted performance.

        :raises InvalidDecision: naming what is wrong.
        """
        if not 0 <= plan.job_id < len(self.jobs):
            raise InvalidDecision(f"unknown job {plan.job_id}")
        js = self.jobs[plan.job_id]
        if js.status != "waiting":
            raise InvalidDecision(f"job {plan.job_id} is {js.status}, not waiting")
        for r, n in plan.gpus_by_region().items():
            if not 0 <= r < self.topo.num_regions:
                raise InvalidDecision(f"unknown region {r}")
            if self.gpus.down[r]:
                raise InvalidDecision(f"region {self.topo.regions[r].name} is down")
            if n > self.gpus.free[r]:
                raise InvalidDecision(f"plan needs {n} GPUs in {self.topo.regions[r].name}, {self.gpus.free[r]} free")
        perf = self.links.evaluate(plan, js.spec)
        if not perf.feasible:
            raise InvalidDecision(f"infeasible plan for job {plan.job_id}: {perf.reason}")
        return perf

    def schedule(self, plan: Plan) -> PlanPerf:
        """Start a waiting job with ``plan`` now; returns the plan's performance.

        :raises InvalidDecision: if the plan cannot start (the state is left unchanged).
        """
        checked = self.check(plan)
        js = self.jobs[plan.job_id]
        # sim.routing "load": the routes checked (chosen at the load now) are pinned in the plan the job runs
        plan = self.links.routed(plan, js.spec)
        self.gpus.accrue_busy(self.time)
        held = plan.gpus_by_region()  # a new dict: the job's own
        self.gpus.take(held)
        js.held = held
        js.flows = plan_flows(plan, self.topo, js.spec)
        touched = self.links.start(plan.job_id, plan, js.spec, checked)
        self.queue.remove(plan.job_id)
        js.status = "running"
        js.plan = plan
        js.start = self.time
        if math.isnan(js.first_start):
            js.first_start = self.time
        js.last_update = self.time
        js.f_last = None  # F(last_update) of an earlier run (before a preemption) is stale
        js.g_last = None  # and so is G(last_update), the carbon integral
        js.max_gpus_used = max(js.max_gpus_used, plan.gpus)
        js.max_regions_used = max(js.max_regions_used, len(plan.regions))
        self.running.add(plan.job_id)
        self.decisions += 1
        # jobs sharing these links slow down, and their new rates change this job's: the refresh
        # settles them all, this job included
        if touched:
            self.refresh(touched)
        if js.perf is None:  # no WAN flows: nobody else is affected
            self.set_rates(js, checked)
        assert js.perf is not None
        js.checkpoint_iters = max(1.0, self.config.checkpoint_interval_s / js.perf.iter_time)
        return js.perf

    # ------------------------------------------------------------ re-planning (sfenv.sim.replan)
    def set_replanner(self, replanner: Replanner | None, hourly: bool = False) -> None:
        """Install (or remove, with None) the re-planning hook.

        After every event time at which a link capacity changed (rates already recomputed), the
        simulator calls ``replanner(view)`` and switches each running job named by a returned plan
        to that plan with :meth:`replan` (in the order returned).  A plan that cannot be applied
        raises :class:`InvalidDecision`, as a bad decision does.

        :param hourly: also call the hook at every hour boundary at which a job runs (after that
            time's events), so that a running job can follow hourly carbon intensities and prices
            (:class:`sfenv.agents.carbon.CarbonElasticAgent`); the simulator then stops at every hour
            while jobs run.  False (the default) adds no stop and no call.
        """
        self.replanner = replanner
        self.replan_hourly = bool(hourly) and replanner is not None

    def check_replan(self, plan: Plan) -> tuple[PlanPerf, float]:
        """Validate switching running job ``plan.job_id`` to ``plan`` now.

        :return: the new plan's predicted performance once running (the job's old flows replaced
            by the new plan's) and the switch pause in seconds.
        :raises InvalidDecision: naming what is wrong (the state is never changed).
        """
        return _replan.check_replan(self, plan)

    def replan(self, plan: Plan) -> float:
        """Switch a running job to ``plan`` now, charging the re-partition pause; returns the pause (s).

        See :mod:`sfenv.sim.replan` for the model.  The job holds the larger of its old and new GPU
        counts per region, draws idle power and makes no progress until the pause ends.

        :raises InvalidDecision: if the switch is not possible (the state is left unchanged).
        """
        return _replan.replan(self, plan)

    # ------------------------------------------------------------ time
    def wait(self) -> None:
        """Let time pass: run at least one event, then continue to the next decision point."""
        self._run_next_time()
        self.advance()

    def free_gpus_now(self) -> tuple[np.ndarray, int]:
        """Free GPUs per region (0 in regions that are down, read-only) and their total (:meth:`GpuPool.free_now`)."""
        return self.gpus.free_now()

    def is_decision_point(self) -> bool:
        """True if a job waits and the free GPUs could hold the smallest waiting job."""
        if not self.queue.ids:
            return False
        return self.gpus.free_now()[1] >= min(self.queue.min_counts)  # the smallest need (inline: a hot test)

    def advance(self) -> None:
        """Run events until a decision point or the end of the episode."""
        while not self._ended and not self.is_decision_point():
            self._run_next_time()

    def _next_time(self) -> float:
        t = self._events[0][0] if self._events else math.inf
        if self.queue.ids or (self.replan_hourly and self.running):
            # wake waiting agents when prices change, and an hourly re-planner while jobs run
            t = min(t, self.prices.next_change(self.time))
        return t

    def _run_next_time(self) -> None:
        if self._ended:
            return
        if self.finished_count == len(self.jobs):
            self._end(self.time)
            return
        t = self._next_time()
        if t == math.inf or t >= self.config.horizon_s:
            # nothing left to happen (a dead end: jobs wait, nothing runs, nothing arrives) or the
            # horizon: either way the unfinished jobs stay in the system to the horizon, so job-time
            # and censored JCTs count them there (ending at the dead end would make starving cheap)
            self._end(self.config.horizon_s)
            return
        self.job_seconds += self.in_system * (t - self.time)
        self.time = t
        while self._events and self._events[0][0] <= t:
            _, kind, _, event = heapq.heappop(self._events)
            self.events_processed += 1
            HANDLERS[kind](self, event)
        if self.links_changed or (self.replan_hourly and self.running and t % 3600.0 == 0.0):
            self.links_changed = False
            assert self.replanner is not None
            for plan in list(self.replanner(self.view())):
                self.replan(plan)
        if self.finished_count == len(self.jobs):
            self._end(self.time)

    def _end(self, t: float) -> None:
        t = max(self.time, t)
        self.job_seconds += self.in_system * (t - self.time)
        self.time = t
        for jid in sorted(self.running):
            self.billing.accrue(self.jobs[jid], self.time)
        self.gpus.accrue_busy(self.time)
        self._ended = True

    # ------------------------------------------------------------ results
    def totals(self) -> tuple[float, float, float]:
        """Cost (USD), energy (J) and tokens accrued so far by all jobs, up to now (no state change).

        Tokens count work done, including work later lost to an outage.  Computed from
        platform-wide rates in O(zones), not per job; equal to the sum of the job records up to
        rounding.
        """
        return self.billing.totals(self.time)

    def egress_usd(self) -> float:
        """Egress (USD) billed so far to all jobs, up to now (no state change): their ``egress_usd`` summed.

        Computed from platform-wide rates, as :meth:`totals`; equal to the sum of the job records up to rounding.
        """
        return self.billing.egress_total(self.time)

    def carbon_kg(self) -> float:
        """Operational kgCO2e emitted so far by all jobs, up to now (no state change; 0 without carbon).

        Computed from platform-wide rates, as :meth:`totals`; equal to the sum of the job records up to rounding.
        """
        return self.billing.carbon_total(self.time)

    def records(self) -> list[JobRecord]:
        """One record per job (unfinished jobs have NaN finish)."""
        return [js.record(self.time) for js in self.jobs]

    def report(self) -> EpisodeReport:
        """Aggregate metrics so far."""
        return EpisodeReport.from_records(self.records(), self.time, self.gpus.busy_gpu_s, self.topo.total_gpus,
                                          self.embodied_kg_per_gpu_hour)

    def view(self) -> SimView:
        """A read-only view for agents."""
        return SimView(self)

    def fork(self) -> Simulator:
        """An independent copy of the current state, for look-ahead: :func:`sfenv.sim.lookahead.fork`."""
        return _lookahead.fork(self)

    def resample_future(self, jobs: Sequence[JobSpec], rng: np.random.Generator | None = None) -> None:
        """Replace what has not happened yet by a draw (:func:`sfenv.sim.lookahead.resample_future`).

        :raises ValueError: if ``jobs`` does not hold one spec per pending job, or one arrives in the past.
        """
        _lookahead.resample_future(self, jobs, rng)

    def run(self, decide: Decide, max_decisions: int = 10_000_000, replan: Replanner | None = None,
            replan_hourly: bool = False) -> EpisodeReport:
        """Run to the end, asking ``decide(view)`` at every decision point (None = wait); the report.

        :param replan: optional re-planning hook, installed with :meth:`set_replanner`.
        :param replan_hourly: call ``replan`` at every hour boundary while a job runs too
            (:meth:`set_replanner`'s ``hourly``).
        :raises InvalidDecision: if ``decide`` returns a plan that cannot start (or ``replan`` one
            that cannot be switched to).
        """
        self.play(decide, max_decisions, replan, replan_hourly)
        return self.report()

    def play(self, decide: Decide, max_decisions: int = 10_000_000, replan: Replanner | None = None,
             replan_hourly: bool = False) -> None:
        """:meth:`run` without its report, for a rollout that reads only the totals.

        A report builds a record per job: about 40 % of a state-only teacher's look-ahead time on
        spider-8-contended went into reports nobody read (``bench_fork``).

        :raises InvalidDecision: as :meth:`run`.
        :raises InvalidInput: when ``decide`` returns something else than a :class:`Plan` or None
            (:func:`check_decision`).
        """
        if replan is not None:
            self.set_replanner(replan, hourly=replan_hourly)
        view = self.view()
        n = 0
        while not self.done and n < max_decisions:
            plan = check_decision(decide(view))
            n += 1
            if plan is None:
                self.wait()
            else:
                self.schedule(plan)
                self.advance()


def check_decision(value: object, who: str = "decide(view)") -> Plan | None:
    """``value`` if it is a decision (a :class:`~sfenv.model.perf.Plan`, or None to wait), else an error.

    :param value: what an agent's ``decide(view)`` returned.
    :param who: the decider, for the message (e.g. ``agent 'my.py:C': decide(view)``).
    :raises InvalidInput: naming ``who``, the value (its repr, cut to 80 characters) and its type.
    """
    if value is None or isinstance(value, Plan):
        return value
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise InvalidInput(f"{who} returned {shown} (a {type(value).__name__}); expected a Plan "
                       "(sfenv.model.perf.Plan) to start, or None to wait")
