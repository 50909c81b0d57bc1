"""The discrete-event simulator: the single source of truth for sfenv.

It knows nothing of Gymnasium, torch or plotting.  Events: job arrival, job completion, price
change (the hour boundary, only while jobs wait), link bandwidth change, region outage and
recovery.  State: free GPUs per region, WAN flows per link, running jobs with their progress, the
waiting queue.

**Decisions.**  :meth:`Simulator.advance` runs events until a *decision point*: a job waits and
the free GPUs could hold the smallest waiting job.  The caller then either starts a job with
:meth:`Simulator.schedule` (the simulator stays at the same time and may ask again) or calls
:meth:`Simulator.wait`, which runs at least one more event.  Agents read the state through a
read-only :class:`SimView`.

**Link sharing.**  Every pipeline hop (and cross-region all-reduce ring edge) between regions is a
flow on each link of its static route; a flow gets ``capacity / flows`` of every link it crosses
(equal share), and its bandwidth is the minimum over its route.  Whenever flows or capacities
change, the running jobs' iteration times, completion events and power are recomputed.

**Costs.**  A running job draws constant power per region between changes; its cost is the exact
integral of each zone's hourly price over that time (:class:`sfenv.prices.PriceSeries`).

**Outages.**  An outage preempts every job with GPUs in the region: the job loses the iterations
done since its last checkpoint, frees its GPUs and returns to the queue; the region offers no
GPUs until it recovers.  No job is lost.

**Re-planning.**  :meth:`Simulator.replan` replaces a running job's plan with another plan for the
same job that fits the GPUs it holds plus free ones (or a subset).  The switch is charged as a
modelled *re-partition pause* (no work is lost):
``pause = replan_restart_s + transfer``, where ``transfer`` moves the training state of every
layer (``replan_state_bytes_per_param`` bytes per parameter: bf16 weights and fp32 Adam state and
master weights; gradients are not needed between iterations) to each region that holds it under
the new plan but did not under the old one, from the old holder with the widest route now.  Each
(source, destination) pair sends its bytes over its route; a link carries the bytes of every pair
crossing it at one fair share (its capacity over the flows of other jobs plus one), so
``transfer = max over pairs (route latency + max over its links (bytes on the link / share))``.
Re-sharding inside a region (another tensor or data-parallel degree) and rebuilding the pipeline
are covered by the constant ``replan_restart_s``; a change of micro-batch size or schedule alone
costs only that constant.  During the pause the job holds, in every region, the larger of its old
and new GPU counts (old GPUs send, new ones receive), draws idle power on all of them (billed at
the zones' prices) and makes no progress; it puts the new plan's flows on the WAN from the switch
(standing for the state transfer) and resumes with the new plan at the end of the pause, when the
GPUs only the old plan used are freed.  Agents re-plan through a hook: ``Simulator.replanner``
(set with ``run(decide, replan=...)``) is called with the view after every link capacity change
and returns plans to switch to (see :meth:`Simulator.set_replanner`); without a hook nothing is
ever re-planned and the simulator costs nothing more.
"""

from __future__ import annotations

import copy
import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sfenv.metrics import EpisodeReport, JobRecord
from sfenv.perf import PerfParams, Plan, PlanPerf, evaluate_plan, moved_perf, plan_flows, same_region_figures
from sfenv.prices import JOULES_PER_MWH, PriceSeries
from sfenv.topology import Topology
from sfenv.workload import JobSpec

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.scenario import Scenario

__all__ = [
    "Simulator",
    "EvaluationCache",
    "SimView",
    "SimConfig",
    "InvalidDecision",
    "LinkDynamics",
    "Outage",
    "JobState",
    "RunningInfo",
    "sim_config_for",
    "link_dynamics_for",
    "draw_outages",
    "evaluation_cache_for",
]

_MEMO_ENTRIES = 20_000  # bound on memoised plan evaluations per dict (about 1 kB each)

# event kinds, in processing order at equal times
EV_COMPLETE, EV_RECOVER, EV_OUTAGE, EV_BANDWIDTH, EV_ARRIVAL, EV_RESUME = range(6)


class InvalidDecision(ValueError):
    """A decision the simulator cannot carry out (unknown job, busy GPUs, infeasible plan)."""


@dataclass(frozen=True)
class Outage:
    """Region ``region`` is down during [start, start + duration) (seconds)."""

    region: int
    start: float
    duration: float


@dataclass(frozen=True)
class LinkDynamics:
    """A two-state Markov bandwidth factor on some links.

    Each dynamic link alternates between ``1.0`` and ``low_factor`` (e.g. 0.3); sojourn times are
    exponential with means ``mean_good_s`` and ``mean_bad_s``.
    """

    links: tuple[int, ...]
    low_factor: float = 0.3
    mean_good_s: float = 4 * 3600.0
    mean_bad_s: float = 3600.0


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings.

    :param horizon_s: the episode ends at this time; unfinished jobs are reported.
    :param checkpoint_interval_s: jobs checkpoint this often (simulated run time); an outage
        loses at most this much work.
    :param perf: performance model constants.
    :param replan_restart_s: fixed part of a re-plan pause, s (stop at an iteration boundary,
        rebuild communicators and the pipeline, re-shard inside regions; our assumption, of the
        order of a framework restart from a checkpoint held in memory).
    :param replan_state_bytes_per_param: training state moved per parameter when a re-plan moves
        a layer to another region, bytes (2 bf16 weights + 12 fp32 master weights and Adam
        moments; gradients are not needed between iterations).
    """

    horizon_s: float = 14 * 86400.0
    checkpoint_interval_s: float = 1800.0
    perf: PerfParams = field(default_factory=PerfParams)
    replan_restart_s: float = 60.0
    replan_state_bytes_per_param: float = 14.0


@dataclass
class JobState:
    """Mutable state of one job inside the simulator."""

    spec: JobSpec
    status: str = "pending"  # pending -> waiting -> running -> done (running -> waiting on outage)
    plan: Plan | None = None
    perf: PlanPerf | None = None
    flows: dict[int, int] = field(default_factory=dict)
    progress: float = 0.0
    checkpoint_iters: float = 1.0
    first_start: float = math.nan
    start: float = math.nan
    finish: float = math.nan
    last_update: float = 0.0
    energy_j: float = 0.0
    cost_usd: float = 0.0
    wan_bytes: float = 0.0
    preemptions: int = 0
    version: int = 0
    max_gpus_used: int = 0
    max_regions_used: int = 0
    segments: list = field(default_factory=list)  # closed runs (start, end, ((region, gpus), ...))
    power_zone: np.ndarray | None = None  # watts per price zone
    f_last: np.ndarray | None = None  # price integral F(last_update) per zone
    held: dict[int, int] = field(default_factory=dict)  # GPUs held per region (plan's, or more in a re-plan pause)
    resume_at: float = math.nan  # end of a re-plan pause (NaN when not paused)
    resume_perf: PlanPerf | None = None  # the new plan's predicted performance at the switch
    replans: int = 0
    replan_pause_s: float = 0.0  # total time spent in re-plan pauses

    @property
    def paused(self) -> bool:
        """True during a re-plan pause."""
        return not math.isnan(self.resume_at)


@dataclass(frozen=True)
class RunningInfo:
    """Read-only summary of a running job for agents.

    During a re-plan pause ``plan`` is the new plan, ``iter_time`` its predicted iteration time,
    ``throughput`` 0, ``remaining_s`` includes the rest of the pause and ``paused_until`` is the
    pause's end (NaN otherwise).
    """

    job: JobSpec
    plan: Plan
    iter_time: float
    throughput: float
    progress: float
    remaining_s: float
    power_w: float
    paused_until: float = math.nan


class EvaluationCache:
    """Memoised evaluations of single-region plans, shareable between episodes.

    Such a plan's performance depends only on the plan, the job's shape, the topology and the
    performance parameters, never on the WAN state, so one cache serves every simulator built on
    the same ``topo`` and ``params`` (the simulator checks).
    """

    def __init__(self, topo: Topology, params: PerfParams):
        self.topo = topo
        self.params = params
        self.local: dict[tuple, PlanPerf] = {}


class Simulator:
    """Discrete-event simulation of regions, WAN links, jobs and prices.

    :param topo: the topology.
    :param prices: hourly prices; zone names must cover every region's zone.
    :param jobs: the episode's jobs (ids must be 0..n-1 in arrival order).
    :param config: simulator settings.
    :param outages: region outages.
    :param dynamics: link bandwidth fluctuation (needs ``rng``).
    :param rng: generator for stochastic dynamics (seeded by the caller).
    :param evaluation_cache: plan evaluations to share with other simulators of the same
        topology and performance parameters (e.g. the episodes of one environment).
    """

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        rng: np.random.Generator | int | None = None,
        evaluation_cache: EvaluationCache | None = None,
    ) -> Simulator:
        """One episode of ``scenario``; all randomness comes from ``rng`` (or a generator seeded by it).

        The generator is split with ``rng.spawn(4)`` into independent streams for the jobs, the
        price noise, the outages and the link dynamics.

        :param scenario: the world description (:class:`sfenv.scenario.Scenario`).
        :param rng: a generator, or a seed for one.
        :param evaluation_cache: from :func:`evaluation_cache_for`, to share plan evaluations
            between the episodes of this scenario.
        :return: the simulator at time 0, before the first event.
        """
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        job_rng, price_rng, outage_rng, dyn_rng = rng.spawn(4)
        return cls(
            scenario.topology,
            scenario.make_prices(price_rng),
            scenario.make_jobs(job_rng),
            sim_config_for(scenario),
            outages=draw_outages(scenario, outage_rng),
            dynamics=link_dynamics_for(scenario),
            rng=dyn_rng,
            evaluation_cache=evaluation_cache,
        )

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
    ):
        self.topo = topo
        self.prices = prices
        self.config = config or SimConfig()
        self.params = self.config.perf
        for r in topo.regions:
            if r.zone not in prices.zone_index:
                raise ValueError(f"region {r.name!r} uses price zone {r.zone!r}, prices have {prices.zones}")
        self.region_zone = np.array([prices.zone_index[r.zone] for r in topo.regions])
        for i, j in enumerate(jobs):
            if j.job_id != i:
                raise ValueError(f"job ids must be 0..n-1 in order; position {i} has id {j.job_id}")
        self.jobs = [JobState(spec=j) for j in jobs]
        self.time = 0.0
        self.free = topo.gpu_counts.copy()
        self.down = np.zeros(topo.num_regions, dtype=bool)
        # free GPUs outside outages and their total, for the last (free, down) state seen: compared,
        # never tracked (decision-point tests, proposers and the observation ask many times per step)
        self._free_state: tuple[bytes, bytes] | None = None
        self._free_now: tuple[np.ndarray, int] = (_ro(np.zeros(0, dtype=self.free.dtype)), 0)
        self.link_flows = np.zeros(topo.num_links)
        self.link_factor = np.ones(topo.num_links)
        # evaluate() results: single-region plans never depend on the WAN state, so they are
        # kept (across episodes with an EvaluationCache); multi-region ones only while link
        # flows and capacities stay the same
        if evaluation_cache is None:
            evaluation_cache = EvaluationCache(topo, self.params)
        elif evaluation_cache.topo is not topo or evaluation_cache.params != self.params:
            raise ValueError("evaluation_cache belongs to another topology or other performance parameters")
        self._memo_local = evaluation_cache.local
        self._memo_wan: dict[tuple, PlanPerf] = {}
        self._memo_wan_state = b""
        # the queue: ids in ascending order (= arrival order), with their specs in step (so a view
        # reads the queue without an O(queue) rebuild) and a count of waiting jobs per min_gpus
        # (so a decision-point test costs O(distinct minimums), not O(queue))
        self.waiting: list[int] = []
        self._waiting_specs: list[JobSpec] = []
        self._waiting_min: dict[int, int] = {}
        self.running: set[int] = set()
        self.finished_count = 0
        self.busy_gpu_s = 0.0
        self.job_seconds = 0.0  # integral over time of the number of jobs in the system
        self._in_system = 0
        # platform-wide accounts for totals(): cost (USD), energy (J), tokens up to _glob_t, and
        # the summed rates of the running jobs (watts per price zone, watts, tokens/s)
        self._glob = [0.0, 0.0, 0.0]
        self._glob_t = 0.0
        self._glob_f: np.ndarray | None = None  # F(_glob_t), filled on demand
        self._cum_t, self._cum_f = 0.0, prices.cumulative(0.0)
        self._rate_pz = np.zeros(len(prices.zones))
        self._rate_w = 0.0
        self._rate_tok = 0.0
        self._n_rated = 0
        self._busy_gpus = 0
        self._last_busy_t = 0.0
        self._events: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self.events_processed = 0
        self.decisions = 0
        self._ended = False
        self.dynamics = dynamics
        self.rng = rng
        self.replanner: Callable[[SimView], Iterable[Plan]] | None = None
        self.replans = 0
        self._links_changed = False
        for j in jobs:
            self._push(j.arrival, EV_ARRIVAL, j.job_id)
        for o in outages or []:
            self._push(o.start, EV_OUTAGE, o)
        if dynamics is not None:
            if rng is None:
                raise ValueError("link dynamics need an rng")
            for k in dynamics.links:
                self._push(rng.exponential(dynamics.mean_good_s), EV_BANDWIDTH, (k, dynamics.low_factor))
        self.advance()

    # ------------------------------------------------------------ event queue
    def _push(self, t: float, kind: int, data: object) -> None:
        heapq.heappush(self._events, (t, kind, self._seq, data))
        self._seq += 1

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Current capacity of every link (nominal bandwidth x fluctuation factor)."""
        return self.topo.link_bw_bps * self.link_factor

    @property
    def done(self) -> bool:
        """True when every job finished, or the horizon or a dead end was reached (the clock is then at the horizon)."""
        return self._ended

    @property
    def throughput_tokens_s(self) -> float:
        """Predicted tokens/s of the jobs with a plan (the platform-wide rate, kept up to date per change)."""
        return self._rate_tok

    # ------------------------------------------------------------ accounting
    def _cumulative(self, t: float) -> np.ndarray:
        """``prices.cumulative(t)``, remembered for the last ``t`` asked (many callers per event)."""
        if t != self._cum_t:
            self._cum_t, self._cum_f = t, self.prices.cumulative(t)
        return self._cum_f

    def _accrue(self, js: JobState, now: float) -> None:
        dt = now - js.last_update
        if dt > 0 and js.perf is not None:
            iters = dt / js.perf.iter_time
            js.progress += iters
            energy = js.perf.power_w * dt
            js.energy_j += energy
            js.wan_bytes += js.perf.wan_bytes_per_iter * iters
            assert js.power_zone is not None
            f0 = js.f_last if js.f_last is not None else self._cumulative(js.last_update)
            f1 = self._cumulative(now)
            js.f_last = f1
            js.cost_usd += float(np.dot(js.power_zone, f1 - f0)) / JOULES_PER_MWH
        elif dt != 0:
            js.f_last = None  # F(last_update) is stale; with dt == 0 it stays valid
        js.last_update = now

    def _accrue_busy(self, now: float) -> None:
        self.busy_gpu_s += self._busy_gpus * (now - self._last_busy_t)
        self._last_busy_t = now

    def _fold(self) -> None:
        """Bring the platform-wide accounts up to now (before the running jobs' rates change)."""
        t = self.time
        if t == self._glob_t:
            return
        if self._n_rated:
            f1 = self._cumulative(t)
            f0 = self._glob_f if self._glob_f is not None else self._cumulative(self._glob_t)
            dt = t - self._glob_t
            g = self._glob
            g[0] += float(np.dot(self._rate_pz, f1 - f0)) / JOULES_PER_MWH
            g[1] += self._rate_w * dt
            g[2] += self._rate_tok * dt
            self._glob_f = f1
        else:
            self._glob_f = None
        self._glob_t = t

    def _unrate(self, js: JobState) -> None:
        """Remove a job's rates from the platform-wide sums (call :meth:`_fold` first)."""
        if js.perf is None or js.power_zone is None:
            return
        self._n_rated -= 1
        if self._n_rated == 0:  # exact zeros, so rounding never accumulates across idle periods
            self._rate_pz[:] = 0.0
            self._rate_w = self._rate_tok = 0.0
        else:
            self._rate_pz -= js.power_zone
            self._rate_w -= js.perf.power_w
            self._rate_tok -= js.spec.tokens_per_iteration / js.perf.iter_time

    def _set_perf(self, js: JobState, perf: PlanPerf, complete: bool = True) -> None:
        self._fold()
        self._unrate(js)
        js.perf = perf
        pz = np.zeros(len(self.prices.zones))
        for r, w in perf.power_by_region.items():
            pz[self.region_zone[r]] += w
        js.power_zone = pz
        self._n_rated += 1
        self._rate_pz += pz
        self._rate_w += perf.power_w
        self._rate_tok += js.spec.tokens_per_iteration / perf.iter_time
        js.version += 1
        if complete:
            remaining = max(0.0, js.spec.iterations - js.progress) * perf.iter_time
            self._push(self.time + remaining, EV_COMPLETE, (js.spec.job_id, js.version))

    def _refresh(self, links: set[int] | None, known: tuple[int, PlanPerf] | None = None) -> None:
        """Recompute rates of running jobs that use any of ``links`` (all if None).

        ``known = (job id, perf)`` gives one job's performance under the current state, already
        computed by the caller.
        """
        cap = self.link_capacity_bps
        for jid in sorted(self.running):
            js = self.jobs[jid]
            if (links is not None and not (links & js.flows.keys())) or js.paused:
                continue  # a paused job's rates are set when it resumes
            self._accrue(js, self.time)
            assert js.plan is not None
            if known is not None and known[0] == jid:
                perf = known[1]
            else:
                perf = evaluate_plan(
                    js.plan, js.spec, self.topo, self.params, cap, self.link_flows, include_own_flows=False
                )
            if not perf.feasible:  # pragma: no cover - shares never change memory feasibility
                raise RuntimeError(f"running job {jid} became infeasible: {perf.reason}")
            self._set_perf(js, perf)

    # ------------------------------------------------------------ decisions
    def evaluate(self, plan: Plan, job: JobSpec | None = None) -> PlanPerf:
        """Predict ``plan`` under the current link state (its own flows added).

        Results are memoised by plan and job shape (never by job id) until the link state
        changes; the returned object is shared, so treat it as read-only.
        """
        job = job or self.jobs[plan.job_id].spec
        key = (plan.shape_key, job.shape_key)  # the job's shape, never its id; the window included
        if len(plan.regions) > 1:
            state = self.link_flows.tobytes() + self.link_factor.tobytes()
            if state != self._memo_wan_state:  # compared, not tracked: callers may edit the arrays
                self._memo_wan.clear()
                self._memo_wan_state = state
            memo = self._memo_wan
        else:
            memo = self._memo_local
        perf = memo.get(key)
        if perf is None:
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            perf = evaluate_plan(plan, job, self.topo, self.params, self.link_capacity_bps, self.link_flows)
            memo[key] = perf
        return perf

    def evaluate_moved(self, plan: Plan, job: JobSpec, source: Plan, source_perf: PlanPerf) -> PlanPerf:
        """:meth:`evaluate` of ``plan``, all in one region, whose stages are ``source``'s moved from another region.

        ``source_perf`` is ``source``'s evaluation; when the two regions have the same figures
        (:func:`sfenv.perf.same_region_figures`) and it is feasible, only the power is recomputed
        (:func:`sfenv.perf.moved_perf`: the same values :func:`evaluate_plan` gives), else the plan
        is evaluated.  Memoised as :meth:`evaluate` is (the same memo).
        """
        key = (plan.shape_key, job.shape_key)
        memo = self._memo_local
        perf = memo.get(key)
        if perf is None:
            src, dst = source.stages[0].placement[0][0], plan.stages[0].placement[0][0]
            if (len(plan.regions) != 1 or len(source.regions) != 1 or not source_perf.feasible
                    or not same_region_figures(self.topo, src, dst)):
                return self.evaluate(plan, job)
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            perf = memo[key] = moved_perf(source_perf, plan, self.topo)
        return perf

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
            if self.down[r]:
                raise InvalidDecision(f"region {self.topo.regions[r].name} is down")
            if n > self.free[r]:
                raise InvalidDecision(f"plan needs {n} GPUs in {self.topo.regions[r].name}, {self.free[r]} free")
        perf = self.evaluate(plan, js.spec)
        if not perf.feasible:
            raise InvalidDecision(f"infeasible plan for job {plan.job_id}: {perf.reason}")
        return perf

    def schedule(self, plan: Plan) -> PlanPerf:
        """Start a waiting job with ``plan`` now; returns the plan's performance.

        :raises InvalidDecision: if the plan cannot start (the state is left unchanged).
        """
        checked = self.check(plan)
        js = self.jobs[plan.job_id]
        self._accrue_busy(self.time)
        held = plan.gpus_by_region()  # a new dict: the job's own
        for r, n in held.items():
            self.free[r] -= n
            self._busy_gpus += n
        js.held = held
        js.flows = plan_flows(plan, self.topo, js.spec)
        for k, n in js.flows.items():
            self.link_flows[k] += n
        self._dequeue(plan.job_id)
        js.status = "running"
        js.plan = plan
        js.start = self.time
        if math.isnan(js.first_start):
            js.first_start = self.time
        js.last_update = self.time
        js.f_last = None  # F(last_update) of an earlier run (before a preemption) is stale
        js.max_gpus_used = max(js.max_gpus_used, plan.gpus)
        js.max_regions_used = max(js.max_regions_used, len(plan.regions))
        self.running.add(plan.job_id)
        self.decisions += 1
        # jobs sharing these links slow down; the refresh also sets this job's own rates, which
        # ``check`` already computed (with its own flows added: exactly the state now)
        if js.flows:
            self._refresh(set(js.flows), known=(plan.job_id, checked))
        if js.perf is None:  # no WAN flows: nobody else is affected
            self._set_perf(js, checked)
        assert js.perf is not None
        js.checkpoint_iters = max(1.0, self.config.checkpoint_interval_s / js.perf.iter_time)
        return js.perf

    # ------------------------------------------------------------ re-planning
    def set_replanner(self, replanner: Callable[[SimView], Iterable[Plan]] | None) -> None:
        """Install (or remove, with None) the re-planning hook.

        After every event time at which a link capacity changed (rates already recomputed), the
        simulator calls ``replanner(view)`` and switches each running job named by a returned plan
        to that plan with :meth:`replan` (in the order returned).  A plan that cannot be applied
        raises :class:`InvalidDecision`, as a bad decision does.
        """
        self.replanner = replanner

    def _transfer_s(self, js: JobState, plan: Plan) -> float:
        """Time to move the training state the switch from ``js.plan`` to ``plan`` moves (see module docstring)."""
        old = js.plan
        assert old is not None
        model = js.spec.model
        topo = self.topo

        def holders(p: Plan) -> tuple[list[frozenset[int]], frozenset[int]]:
            per_layer: list[frozenset[int]] = []
            for st in p.stages:
                per_layer.extend([frozenset(st.regions)] * st.layers)
            emb = frozenset(p.stages[0].regions) | frozenset(p.stages[-1].regions if len(p.stages) > 1 else ())
            return per_layer, emb

        old_l, old_e = holders(old)
        new_l, new_e = holders(plan)
        if len(old_l) != len(new_l):
            return math.inf
        bpp = self.config.replan_state_bytes_per_param
        items = [(a, b, model.layer_params * bpp) for a, b in zip(old_l, new_l)]
        items.append((old_e, new_e, model.embedding_params * bpp))
        cap = self.link_capacity_bps
        others = self.link_flows.copy()
        for k, n in js.flows.items():
            others[k] -= n
        share = cap / (others + 1.0)

        def route_bw(a: int, b: int) -> float:
            links = topo.route_links[a][b]
            return min(float(share[k]) for k in links) if links else 0.0

        pair_bytes: dict[tuple[int, int], float] = {}
        for src_set, dst_set, nbytes in items:
            if nbytes <= 0.0:
                continue
            for d in sorted(dst_set - src_set):
                src = max(sorted(src_set), key=lambda a: route_bw(a, d))
                if route_bw(src, d) <= 0.0:
                    return math.inf  # no route to the new region
                pair_bytes[(src, d)] = pair_bytes.get((src, d), 0.0) + nbytes
        link_bytes = np.zeros(topo.num_links)
        for (a, b), nbytes in pair_bytes.items():
            for k in topo.route_links[a][b]:
                link_bytes[k] += nbytes
        t = 0.0
        for a, b in pair_bytes:
            links = topo.route_links[a][b]
            t = max(t, float(topo.route_latency_s[a, b]) + max(float(link_bytes[k] * 8.0 / share[k]) for k in links))
        return t

    def check_replan(self, plan: Plan) -> tuple[PlanPerf, float]:
        """Validate switching running job ``plan.job_id`` to ``plan`` now.

        :return: the new plan's predicted performance once running (the job's old flows replaced
            by the new plan's) and the switch pause in seconds.
        :raises InvalidDecision: naming what is wrong (the state is never changed).
        """
        if not 0 <= plan.job_id < len(self.jobs):
            raise InvalidDecision(f"unknown job {plan.job_id}")
        js = self.jobs[plan.job_id]
        if js.status != "running":
            raise InvalidDecision(f"job {plan.job_id} is {js.status}, not running")
        if js.paused:
            raise InvalidDecision(f"job {plan.job_id} is already switching plans (until t={js.resume_at:.0f} s)")
        if plan == js.plan:
            raise InvalidDecision(f"job {plan.job_id} already runs this plan")
        for r, n in plan.gpus_by_region().items():
            if not 0 <= r < self.topo.num_regions:
                raise InvalidDecision(f"unknown region {r}")
            if self.down[r]:
                raise InvalidDecision(f"region {self.topo.regions[r].name} is down")
            extra = n - js.held.get(r, 0)
            if extra > self.free[r]:
                raise InvalidDecision(f"plan needs {extra} more GPUs in {self.topo.regions[r].name}, "
                                      f"{self.free[r]} free")
        if len(plan.regions) > 1:
            others = self.link_flows.copy()
            for k, n in js.flows.items():
                others[k] -= n
            perf = evaluate_plan(plan, js.spec, self.topo, self.params, self.link_capacity_bps, others)
        else:
            perf = self.evaluate(plan, js.spec)
        if not perf.feasible:
            raise InvalidDecision(f"infeasible plan for job {plan.job_id}: {perf.reason}")
        pause = self.config.replan_restart_s + self._transfer_s(js, plan)
        if not math.isfinite(pause):
            raise InvalidDecision(f"job {plan.job_id}: no route to move its state to the new plan's regions")
        return perf, pause

    def replan(self, plan: Plan) -> float:
        """Switch a running job to ``plan`` now, charging the re-partition pause; returns the pause (s).

        See the module docstring for the model.  The job holds the larger of its old and new GPU
        counts per region, draws idle power and makes no progress until the pause ends.

        :raises InvalidDecision: if the switch is not possible (the state is left unchanged).
        """
        perf, pause = self.check_replan(plan)
        js = self.jobs[plan.job_id]
        self._accrue(js, self.time)
        self._accrue_busy(self.time)
        assert js.plan is not None  # the run so far ends here; the pause and the new plan are runs too
        js.segments.append((js.start, self.time, tuple(sorted(js.held.items()))))
        js.start = self.time
        new = plan.gpus_by_region()
        held = {r: max(js.held.get(r, 0), new.get(r, 0)) for r in sorted(set(js.held) | set(new))}
        for r, n in held.items():
            delta = n - js.held.get(r, 0)
            self.free[r] -= delta
            self._busy_gpus += delta
        js.held = held
        changed = set(js.flows)
        for k, n in js.flows.items():
            self.link_flows[k] -= n
        js.flows = plan_flows(plan, self.topo, js.spec)
        for k, n in js.flows.items():
            self.link_flows[k] += n
        changed |= set(js.flows)
        js.plan = plan
        js.replans += 1
        js.replan_pause_s += pause
        js.resume_at = self.time + pause
        js.resume_perf = perf
        js.max_gpus_used = max(js.max_gpus_used, plan.gpus)
        js.max_regions_used = max(js.max_regions_used, len(plan.regions))
        self.replans += 1
        sc = self.topo.scalars
        idle = {r: n * sc.idle_w[r] * sc.pue[r] for r, n in held.items() if n > 0}
        self._set_perf(js, PlanPerf(feasible=True, iter_time=math.inf, power_by_region=idle), complete=False)
        self._push(js.resume_at, EV_RESUME, (plan.job_id, js.version))
        if changed:  # jobs sharing the old or new links get new shares (this job is skipped: paused)
            self._refresh(changed)
        return pause

    def _resume(self, js: JobState) -> None:
        """End a re-plan pause: free the GPUs only the old plan used, run the new plan."""
        assert js.plan is not None
        self._accrue(js, self.time)
        self._accrue_busy(self.time)
        js.segments.append((js.start, self.time, tuple(sorted(js.held.items()))))  # the pause
        js.start = self.time
        new = js.plan.gpus_by_region()
        for r, n in js.held.items():
            extra = n - new.get(r, 0)
            self.free[r] += extra
            self._busy_gpus -= extra
        js.held = new
        js.resume_at = math.nan
        js.resume_perf = None
        perf = evaluate_plan(js.plan, js.spec, self.topo, self.params, self.link_capacity_bps, self.link_flows,
                             include_own_flows=False)
        if not perf.feasible:  # pragma: no cover - checked at the switch; shares never change memory
            raise RuntimeError(f"job {js.spec.job_id} cannot resume: {perf.reason}")
        self._set_perf(js, perf)

    def _call_replanner(self) -> None:
        assert self.replanner is not None
        for plan in list(self.replanner(self.view())):
            self.replan(plan)

    def wait(self) -> None:
        """Let time pass: run at least one event, then continue to the next decision point."""
        self._run_next_time()
        self.advance()

    def free_gpus_now(self) -> tuple[np.ndarray, int]:
        """Free GPUs per region (0 in regions that are down, read-only) and their total.

        The same objects while ``free`` and ``down`` hold the same values (compared on every call).
        """
        free_bytes, down_bytes = self.free.tobytes(), self.down.tobytes()
        seen = self._free_state  # None in an unpickled or forked copy (see __setstate__)
        if seen is None or free_bytes != seen[0] or down_bytes != seen[1]:
            free = _ro(np.where(self.down, 0, self.free))
            self._free_now = (free, int(free.sum()))
            self._free_state = (free_bytes, down_bytes)
        return self._free_now

    def is_decision_point(self) -> bool:
        """True if a job waits and the free GPUs could hold the smallest waiting job."""
        if not self.waiting:
            return False
        return self.free_gpus_now()[1] >= min(self._waiting_min)

    def _enqueue(self, jid: int) -> None:
        """Put job ``jid`` in the queue at its place in id (= arrival) order."""
        i = bisect_left(self.waiting, jid)
        self.waiting.insert(i, jid)
        spec = self.jobs[jid].spec
        self._waiting_specs.insert(i, spec)
        self._waiting_min[spec.min_gpus] = self._waiting_min.get(spec.min_gpus, 0) + 1

    def _dequeue(self, jid: int) -> None:
        """Take job ``jid`` out of the queue."""
        i = bisect_left(self.waiting, jid)
        if i == len(self.waiting) or self.waiting[i] != jid:
            raise ValueError(f"job {jid} is not in the queue")
        del self.waiting[i]
        spec = self._waiting_specs.pop(i)
        n = self._waiting_min[spec.min_gpus] - 1
        if n:
            self._waiting_min[spec.min_gpus] = n
        else:
            del self._waiting_min[spec.min_gpus]

    def advance(self) -> None:
        """Run events until a decision point or the end of the episode."""
        while not self._ended and not self.is_decision_point():
            self._run_next_time()

    def _next_time(self) -> float:
        t = self._events[0][0] if self._events else math.inf
        if self.waiting:  # wake waiting agents when prices change
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
        self.job_seconds += self._in_system * (t - self.time)
        self.time = t
        while self._events and self._events[0][0] <= t:
            _, kind, _, data = heapq.heappop(self._events)
            self.events_processed += 1
            self._handle(kind, data)
        if self._links_changed:
            self._links_changed = False
            self._call_replanner()
        if self.finished_count == len(self.jobs):
            self._end(self.time)

    def _handle(self, kind: int, data: object) -> None:
        if kind == EV_ARRIVAL:
            jid = int(data)  # type: ignore[arg-type]
            self.jobs[jid].status = "waiting"
            self._in_system += 1
            self._enqueue(jid)
        elif kind == EV_COMPLETE:
            jid, version = data  # type: ignore[misc]
            js = self.jobs[jid]
            if js.status == "running" and js.version == version:
                self._finish(js)
        elif kind == EV_BANDWIDTH:
            k, factor = data  # type: ignore[misc]
            self.link_factor[k] = factor
            dyn = self.dynamics
            assert dyn is not None and self.rng is not None
            bad = factor < 1.0
            mean = dyn.mean_bad_s if bad else dyn.mean_good_s
            nxt = 1.0 if bad else dyn.low_factor
            self._push(self.time + self.rng.exponential(mean), EV_BANDWIDTH, (k, nxt))
            self._refresh({k})
            self._links_changed = self.replanner is not None
        elif kind == EV_OUTAGE:
            o: Outage = data  # type: ignore[assignment]
            self._outage(o)
        elif kind == EV_RECOVER:
            r = int(data)  # type: ignore[arg-type]
            self.down[r] = False
        elif kind == EV_RESUME:
            jid, version = data  # type: ignore[misc]
            js = self.jobs[jid]
            if js.status == "running" and js.version == version:
                self._resume(js)

    def _release(self, js: JobState) -> None:
        assert js.plan is not None
        js.segments.append((js.start, self.time, tuple(sorted(js.held.items()))))
        self._accrue_busy(self.time)
        for r, n in js.held.items():
            self.free[r] += n
            self._busy_gpus -= n
        js.held = {}
        js.resume_at = math.nan
        js.resume_perf = None
        for k, n in js.flows.items():
            self.link_flows[k] -= n
        self.running.discard(js.spec.job_id)
        freed = set(js.flows)
        js.flows = {}
        self._fold()
        self._unrate(js)
        js.perf = None
        js.power_zone = None
        js.version += 1
        if freed:
            self._refresh(freed)

    def _finish(self, js: JobState) -> None:
        self._accrue(js, self.time)
        js.progress = float(js.spec.iterations)
        js.status = "done"
        js.finish = self.time
        self.finished_count += 1
        self._in_system -= 1
        self._release(js)

    def _outage(self, o: Outage) -> None:
        r = o.region
        self.down[r] = True
        self._push(self.time + o.duration, EV_RECOVER, r)
        for jid in sorted(self.running):
            js = self.jobs[jid]
            if r not in js.held:
                continue
            self._accrue(js, self.time)
            js.progress = math.floor(js.progress / js.checkpoint_iters) * js.checkpoint_iters
            js.preemptions += 1
            js.status = "waiting"
            self._release(js)
            js.plan = None
            self._enqueue(jid)

    def _end(self, t: float) -> None:
        t = max(self.time, t)
        self.job_seconds += self._in_system * (t - self.time)
        self.time = t
        for jid in sorted(self.running):
            self._accrue(self.jobs[jid], self.time)
        self._accrue_busy(self.time)
        self._ended = True

    # ------------------------------------------------------------ results
    def totals(self) -> tuple[float, float, float]:
        """Cost (USD), energy (J) and tokens accrued so far by all jobs, up to now (no state change).

        Tokens count work done, including work later lost to an outage.  Computed from
        platform-wide rates in O(zones), not per job; equal to the sum of the job records up to
        rounding.
        """
        cost, energy, tokens = self._glob
        dt = self.time - self._glob_t
        if not self._n_rated or dt == 0:
            return cost, energy, tokens
        if self._glob_f is None:  # fill the cache of F(_glob_t): a value, not a state change
            self._glob_f = self._cumulative(self._glob_t)
        f_now = self._cumulative(self.time)
        cost += float(np.dot(self._rate_pz, f_now - self._glob_f)) / JOULES_PER_MWH
        return cost, energy + self._rate_w * dt, tokens + self._rate_tok * dt

    def records(self) -> list[JobRecord]:
        """One record per job (unfinished jobs have NaN finish)."""
        out = []
        for js in self.jobs:
            segments = tuple(js.segments)
            if js.status == "running" and js.plan is not None:  # the open run, up to now
                segments += ((js.start, self.time, tuple(sorted(js.held.items()))),)
            out.append(
                JobRecord(
                    job_id=js.spec.job_id,
                    model=js.spec.model.name,
                    arrival=js.spec.arrival,
                    first_start=js.first_start,
                    finish=js.finish,
                    iterations=js.spec.iterations,
                    gpus=js.max_gpus_used,
                    regions=js.max_regions_used,
                    energy_j=js.energy_j,
                    cost_usd=js.cost_usd,
                    wan_bytes=js.wan_bytes,
                    preemptions=js.preemptions,
                    tokens=js.progress * js.spec.tokens_per_iteration,
                    segments=segments,
                )
            )
        return out

    def report(self) -> EpisodeReport:
        """Aggregate metrics so far."""
        return EpisodeReport.from_records(self.records(), self.time, self.busy_gpu_s, self.topo.total_gpus)

    def view(self) -> SimView:
        """A read-only view for agents."""
        return SimView(self)

    def __setstate__(self, state: dict) -> None:
        """Unpickled or deep-copied: the free-GPU array comes back writable; it is rebuilt read-only on first use."""
        self.__dict__.update(state)
        self._free_state = None

    def fork(self) -> Simulator:
        """An independent copy of the current state, for look-ahead (what-if rollouts).

        Stepping the copy never changes this simulator.  Immutable parts (topology, prices,
        settings, job specs, plans and their predicted performance) and the single-region
        evaluation memo (valid in any state) are shared, not copied; the WAN memo starts empty.
        The copy draws from a copy of the random generator, so it sees the same link changes.
        """
        memo: dict[int, object] = {id(self.topo): self.topo, id(self.prices): self.prices, id(self.config): self.config,
                                   id(self.params): self.params, id(self._memo_local): self._memo_local,
                                   id(self._memo_wan): {}, id(self.replanner): self.replanner}
        for js in self.jobs:
            memo[id(js.spec)] = js.spec
            for obj in (js.plan, js.perf, js.resume_perf):
                if obj is not None:
                    memo[id(obj)] = obj
        twin = copy.deepcopy(self, memo)
        twin._memo_wan_state = b""
        twin._free_state = None  # its free-GPU array is a (writable) copy: rebuilt read-only on first use
        return twin

    def resample_future(self, jobs: Sequence[JobSpec], rng: np.random.Generator | None = None) -> None:
        """Replace what has not happened yet by a draw: for look-ahead that knows only the present.

        The jobs that have not arrived become ``jobs`` (one per such job, in arrival order, none
        arriving before now; their ids are reassigned); with ``rng``, link changes not yet drawn
        come from it instead of the episode's generator.  Use it on a :meth:`fork`: the fork then
        plays one possible future rather than the episode's own.  Scheduled outages are kept.

        :raises ValueError: if ``jobs`` does not hold one spec per pending job, or one arrives in the past.
        """
        pending = [js.spec.job_id for js in self.jobs if js.status == "pending"]
        if len(jobs) != len(pending):
            raise ValueError(f"{len(pending)} jobs have not arrived; got {len(jobs)} to replace them")
        if any(j.arrival < self.time for j in jobs):
            raise ValueError(f"a replacement job arrives before now ({self.time:.1f} s)")
        gone = set(pending)
        self._events = [ev for ev in self._events if not (ev[1] == EV_ARRIVAL and ev[3] in gone)]
        heapq.heapify(self._events)
        for jid, spec in zip(pending, sorted(jobs, key=lambda j: j.arrival)):
            self.jobs[jid].spec = spec.with_id(jid)
            self._push(spec.arrival, EV_ARRIVAL, jid)
        if rng is not None:
            self.rng = rng

    def run(
        self,
        decide: Callable[[SimView], Plan | None],
        max_decisions: int = 10_000_000,
        replan: Callable[[SimView], Iterable[Plan]] | None = None,
    ) -> EpisodeReport:
        """Run to the end, asking ``decide(view)`` at every decision point (None = wait).

        :param replan: optional re-planning hook, installed with :meth:`set_replanner`.
        :raises InvalidDecision: if ``decide`` returns a plan that cannot start (or ``replan`` one
            that cannot be switched to).
        """
        if replan is not None:
            self.set_replanner(replan)
        view = self.view()
        n = 0
        while not self.done and n < max_decisions:
            plan = decide(view)
            n += 1
            if plan is None:
                self.wait()
            else:
                self.schedule(plan)
                self.advance()
        return self.report()


def _ro(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.setflags(write=False)
    return a


class SimView:
    """Read-only view of a :class:`Simulator` for agents.

    Arrays it returns are read-only; ``evaluate`` predicts a plan without changing anything.
    """

    def __init__(self, sim: Simulator):
        self._sim = sim

    @property
    def time(self) -> float:
        """Simulated time, s."""
        return self._sim.time

    @property
    def topo(self) -> Topology:
        """The topology (static)."""
        return self._sim.topo

    @property
    def params(self) -> PerfParams:
        """Performance model constants."""
        return self._sim.params

    @property
    def free_gpus(self) -> np.ndarray:
        """Free GPUs per region (0 for regions that are down); the same read-only array while they do not change."""
        return self._sim.free_gpus_now()[0]

    @property
    def down(self) -> np.ndarray:
        """True for regions in an outage."""
        return _ro(self._sim.down)

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Current link capacities (bandwidth x fluctuation)."""
        return _ro(self._sim.link_capacity_bps)

    @property
    def link_flows(self) -> np.ndarray:
        """Flows currently on each link."""
        return _ro(self._sim.link_flows)

    def link_state_among(self, regions: Iterable[int]) -> tuple[bytes, bytes]:
        """Flows and capacity factors of the links a plan on ``regions`` can use (:meth:`Topology.links_among`).

        Everything of the link state that :meth:`evaluate` reads for such a plan (capacities are
        the topology's fixed bandwidths times these factors), as bytes: a key for plan memos.
        """
        links = self.topo.links_among(regions)
        return self._sim.link_flows[links].tobytes(), self._sim.link_factor[links].tobytes()

    @property
    def waiting(self) -> list[JobSpec]:
        """Waiting jobs in arrival order (a new list: O(queue) to copy; see :meth:`waiting_head`)."""
        return list(self._sim._waiting_specs)

    def waiting_head(self, n: int) -> list[JobSpec]:
        """The first ``n`` waiting jobs in arrival order (``waiting[:n]`` without copying the whole queue)."""
        return self._sim._waiting_specs[:n]

    @property
    def num_waiting(self) -> int:
        """Number of waiting jobs."""
        return len(self._sim.waiting)

    def waiting_progress(self, job_id: int) -> float:
        """Iterations already done by a waiting job (non-zero after a preemption)."""
        return self._sim.jobs[job_id].progress

    @property
    def running(self) -> list[RunningInfo]:
        """Running jobs, by id."""
        out = []
        now = self._sim.time
        for jid in sorted(self._sim.running):
            js = self._sim.jobs[jid]
            assert js.perf is not None and js.plan is not None
            if js.paused:
                assert js.resume_perf is not None
                it = js.resume_perf.iter_time
                left = max(0.0, js.spec.iterations - js.progress) * it + js.resume_at - now
                out.append(RunningInfo(js.spec, js.plan, it, 0.0, js.progress, left, js.perf.power_w, js.resume_at))
                continue
            prog = js.progress + (now - js.last_update) / js.perf.iter_time
            out.append(
                RunningInfo(js.spec, js.plan, js.perf.iter_time, js.perf.throughput, prog,
                            max(0.0, js.spec.iterations - prog) * js.perf.iter_time, js.perf.power_w)
            )
        return out

    def prices_now(self) -> np.ndarray:
        """Price per region now, USD/MWh."""
        return self._sim.prices.prices_at(self._sim.time)[self._sim.region_zone]

    def price_forecast(self, hours: int) -> np.ndarray:
        """Price per region for the current and next hours, array (regions x hours)."""
        return self._sim.prices.forecast(self._sim.time, hours)[self._sim.region_zone]

    def evaluate(self, plan: Plan, job: JobSpec | None = None) -> PlanPerf:
        """Predict a plan under the current link state (its own flows added)."""
        return self._sim.evaluate(plan, job)

    def evaluate_moved(self, plan: Plan, job: JobSpec, source: Plan, source_perf: PlanPerf) -> PlanPerf:
        """:meth:`evaluate` of ``plan``, ``source``'s stages moved elsewhere (:meth:`Simulator.evaluate_moved`)."""
        return self._sim.evaluate_moved(plan, job, source, source_perf)

    def evaluate_replan(self, plan: Plan) -> tuple[PlanPerf, float]:
        """Predicted performance of switching a running job to ``plan`` now, and the pause (s).

        :raises InvalidDecision: if :meth:`Simulator.replan` would refuse the switch.
        """
        return self._sim.check_replan(plan)

    def gpus_held(self, job_id: int) -> dict[int, int]:
        """GPUs a running job holds per region (empty for jobs not running)."""
        return dict(self._sim.jobs[job_id].held)

    def can_start(self, plan: Plan) -> bool:
        """True if :meth:`Simulator.schedule` would accept ``plan`` now."""
        try:
            self._sim.check(plan)
        except InvalidDecision:
            return False
        return True

    def job(self, job_id: int) -> JobSpec:
        """Spec of any job of the episode."""
        return self._sim.jobs[job_id].spec

    @property
    def num_jobs(self) -> int:
        """Jobs in the episode."""
        return len(self._sim.jobs)

    @property
    def pending_arrivals(self) -> int:
        """Jobs that have not arrived yet."""
        sim = self._sim
        return len(sim.jobs) - sim.finished_count - sim._in_system


# ---------------------------------------------------------------- reading a scenario
# The scenario describes the world; these functions turn it into the engine's settings and draw
# an episode's random parts.  sfenv.scenario does not import this module (see Simulator.from_scenario).


def sim_config_for(scenario: Scenario) -> SimConfig:
    """The simulator settings of ``scenario`` (its ``sim`` section)."""
    s = scenario.cfg.sim
    return SimConfig(
        horizon_s=s.horizon_h * 3600.0,
        checkpoint_interval_s=s.checkpoint_interval_s,
        perf=PerfParams(mfu=s.mfu, dp_overlap=s.dp_overlap, memory_headroom=s.memory_headroom),
    )


def link_dynamics_for(scenario: Scenario) -> LinkDynamics | None:
    """The link fluctuation model of ``scenario`` (its ``dynamics`` section), or None."""
    links = scenario.dynamic_links
    if not links:
        return None
    d = scenario.cfg.dynamics
    return LinkDynamics(links, d.low_factor, d.mean_good_h * 3600.0, d.mean_bad_h * 3600.0)


def draw_outages(scenario: Scenario, rng: np.random.Generator) -> list[Outage]:
    """Region outages over the horizon: Poisson per region, exponential durations (``outages`` section)."""
    o = scenario.cfg.outages
    out: list[Outage] = []
    if o.rate_per_region_per_day <= 0:
        return out
    horizon = scenario.cfg.sim.horizon_h * 3600.0
    for r in range(scenario.topology.num_regions):
        t = 0.0
        while True:
            t += rng.exponential(86400.0 / o.rate_per_region_per_day)
            if t >= horizon:
                break
            dur = rng.exponential(o.mean_duration_h * 3600.0)
            out.append(Outage(r, t, dur))
            t += dur
    return sorted(out, key=lambda x: (x.start, x.region))


def evaluation_cache_for(scenario: Scenario) -> EvaluationCache:
    """A plan-evaluation cache shared by the simulators of ``scenario`` (see :meth:`Simulator.from_scenario`)."""
    return EvaluationCache(scenario.topology, sim_config_for(scenario).perf)
