"""The read-only view agents get of a running :class:`~sfenv.sim.engine.Simulator`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sfenv.model.perf import PerfParams, Plan, PlanPerf
from sfenv.sim.state import InvalidDecision
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim.engine import Simulator

__all__ = ["RunningInfo", "SimView", "read_only"]


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


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``."""
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
        return self._sim.gpus.free_now()[0]

    @property
    def down(self) -> np.ndarray:
        """True for regions in an outage."""
        return read_only(self._sim.down)

    @property
    def link_capacity_bps(self) -> np.ndarray:
        """Current link capacities (bandwidth x fluctuation)."""
        return read_only(self._sim.links.capacity_bps)

    @property
    def link_flows(self) -> np.ndarray:
        """Transfers sending at once on each link, expected: its busier direction (:attr:`LinkState.flows`).

        A float per link: a flow that sends a fifth of the time counts 0.2.
        """
        return read_only(self._sim.links.flows)

    @property
    def link_load(self) -> np.ndarray:
        """The running jobs' load on each directed link (the rows of :func:`sfenv.model.sharing.empty_load`)."""
        return read_only(self._sim.links.load)

    def share_bps(self, a: int, b: int) -> float:
        """The rate one more transfer from region ``a`` to ``b`` would get now on the widest route while it sends.

        The smallest over the route's directed links of ``capacity / (transfers sending at once + 1)``
        (:mod:`sfenv.model.sharing`'s share of a burst); the intra-region bandwidth when ``a == b``.
        """
        topo = self.topo
        if a == b:
            return float(topo.intra_bw_bps[a])
        wan = self._sim.links
        busy = wan.load[0]
        cap = topo.link_bw_bps
        factor = wan.factor
        return min(float(cap[e >> 1] * factor[e >> 1]) / (float(busy[e]) + 1.0)
                   for e in topo.directed_route(a, b, topo.route_links[a][b]))

    def link_state_key(self) -> bytes:
        """The whole WAN state a cross-region plan's evaluation may read, as bytes: a key for plan memos."""
        return self._sim.links.state_key()

    def link_state_among(self, regions: Iterable[int]) -> tuple[bytes, bytes]:
        """Load and capacity factors of the links a plan on ``regions`` can use (:meth:`Topology.links_among`).

        Under ``sim.routing: load`` a plan's routes may cross any link, so this is the whole WAN state.

        Everything of the link state that :meth:`evaluate` reads for such a plan (the load of both
        directions of each link; capacities are the topology's fixed bandwidths times these
        factors), as bytes: a key for plan memos.
        """
        links_now = self._sim.links
        if links_now.routing != "static":  # routes at the current load may cross any link: the whole state
            return links_now.load.tobytes(), links_now.factor.tobytes()
        links = self.topo.links_among(regions)
        directed = np.stack([2 * links, 2 * links + 1], axis=1).ravel()
        return links_now.load[:, directed].tobytes(), links_now.factor[links].tobytes()

    @property
    def waiting(self) -> list[JobSpec]:
        """Waiting jobs in arrival order (a new list: O(queue) to copy; see :meth:`waiting_head`)."""
        return list(self._sim.queue.specs)

    def waiting_head(self, n: int) -> list[JobSpec]:
        """The first ``n`` waiting jobs in arrival order (``waiting[:n]`` without copying the whole queue)."""
        return self._sim.queue.specs[:n]

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
        prices: np.ndarray = self._sim.prices.prices_at(self._sim.time)[self._sim.region_zone]
        return prices

    def price_forecast(self, hours: int) -> np.ndarray:
        """Price per region for the current and next hours, array (regions x hours)."""
        forecast: np.ndarray = self._sim.prices.forecast(self._sim.time, hours)[self._sim.region_zone]
        return forecast

    def carbon_forecast(self, hours: int) -> np.ndarray:
        """Carbon intensity per region now and the forecast issued now for the next ``hours`` hours, gCO2e/kWh.

        Array (regions x (1 + hours)), column 0 the current hour's (measured) intensity; the forecast is
        the scenario's ``carbon.forecast`` kind (:class:`sfenv.world.carbon.CarbonForecaster`), as the
        observation's ``carbon`` key shows it.  Without carbon: zeros.
        """
        sim = self._sim
        if sim.carbon_forecaster is None:
            return np.zeros((self.topo.num_regions, 1 + hours))
        out: np.ndarray = sim.carbon_forecaster.issued(sim.time, hours)[sim.region_zone]
        return out

    def carbon_now(self) -> np.ndarray:
        """Carbon intensity per region in the current hour, gCO2e/kWh (zeros without carbon)."""
        return self.carbon_forecast(0)[:, 0]

    @property
    def egress_usd_per_byte(self) -> np.ndarray | None:
        """USD per byte sent from region i to region j (regions x regions, read-only), or None when egress is free."""
        price = self._sim.billing.egress_usd_per_byte
        return None if price is None else read_only(price)

    def plan_egress_usd_per_iter(self, plan: Plan, job: JobSpec | None = None) -> float:
        """Egress the simulator bills per iteration of ``plan`` (0 inside one region; :mod:`sfenv.model.traffic`).

        Multiply by the iterations left for a job's egress bill on the plan; it does not depend on the
        link state (bytes and prices are fixed by the plan, the job and the routes), except under
        ``sim.routing: load``, where an unrouted plan is billed on the routes it would be pinned to now.
        """
        sim = self._sim
        spec = job or sim.jobs[plan.job_id].spec
        return sim.billing.plan_egress_usd_per_iter(sim.links.routed(plan, spec), spec)

    def evaluate(self, plan: Plan, job: JobSpec | None = None) -> PlanPerf:
        """Predict a plan under the current link state (its own flows added)."""
        sim = self._sim  # straight to the memo (:meth:`Simulator.evaluate`): proposers ask often
        return sim.links.evaluate(plan, job or sim.jobs[plan.job_id].spec)

    def evaluate_moved(self, plan: Plan, job: JobSpec, source: Plan, source_perf: PlanPerf) -> PlanPerf:
        """:meth:`evaluate` of ``plan``, ``source``'s stages moved elsewhere (:meth:`Simulator.evaluate_moved`)."""
        return self._sim.links.evaluate_moved(plan, job, source, source_perf)

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
        return len(sim.jobs) - sim.finished_count - sim.in_system
