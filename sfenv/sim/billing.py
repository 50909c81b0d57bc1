"""Energy, cost and egress accounting: each job's bills and the platform-wide totals.

**Electricity.**  A running job draws constant power per price zone between changes of its rates;
its cost is the exact integral of each zone's price over that time
(:meth:`sfenv.world.prices.PriceSeries.cumulative`).

**Carbon.**  The same power, over the same times, integrated against each zone's hourly carbon
intensity instead of its price (:class:`sfenv.world.carbon.CarbonSeries`, gCO2e/kWh = kg/MWh):
kgCO2e of the scenario's signal, exact across hour boundaries, idle GPUs held in a re-plan pause
included, nothing while a job is stopped by an outage (as its cost).

**Egress.**  Every byte a job sends from one region to another is billed at the price of its
direction (:func:`sfenv.model.traffic.egress_usd_per_iter`: pipeline activations forward, their
gradients backward, data-parallel rings across regions; each hop of a relayed route), per
iteration as the iterations accrue; the training state a re-plan moves between regions is billed
when the switch starts (:meth:`Billing.charge`, :mod:`sfenv.sim.replan`).

The platform-wide totals are kept from the summed rates of the running jobs, so reading them costs
O(zones), not O(jobs).
"""

from __future__ import annotations

import numpy as np

from sfenv.hashing import HashedKey
from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.traffic import egress_usd_per_iter
from sfenv.sim.state import JobState
from sfenv.world.carbon import CarbonSeries
from sfenv.world.portable import portable_dot
from sfenv.world.prices import JOULES_PER_MWH, PriceSeries
from sfenv.world.topology import Topology
from sfenv.world.workload import JobSpec, ModelSpec

__all__ = ["Billing"]

#: most plans whose egress per iteration :class:`Billing` remembers (cleared when full)
EGRESS_MEMO_SIZE = 1 << 14


class Billing:
    """The bills of one episode: per job (:meth:`accrue`) and platform-wide (:meth:`totals`, :meth:`egress_total`).

    :param prices: the episode's hourly prices.
    :param region_zone: price-zone index of every region.
    :param topo: the topology (routes of the bytes sent between regions); needed with ``egress_usd_per_byte``.
    :param egress_usd_per_byte: USD per byte sent from region i to region j
        (:attr:`sfenv.scenario.Scenario.egress_usd_per_byte`); None or all zero: no egress is billed.
    :param carbon: the episode's hourly carbon intensities, one row per price zone in the prices'
        order; None: no carbon is counted (every ``carbon_kg`` stays 0).
    """

    def __init__(self, prices: PriceSeries, region_zone: np.ndarray, topo: Topology | None = None,
                 egress_usd_per_byte: np.ndarray | None = None, carbon: CarbonSeries | None = None):
        if carbon is not None and carbon.zones != prices.zones:
            raise ValueError(f"carbon zones {carbon.zones} must be the price zones {prices.zones}, in order")
        self.prices = prices
        #: the hourly carbon intensities (None: carbon is not counted)
        self.carbon = carbon
        self._carbon = 0.0  # platform-wide operational kgCO2e up to ``_glob_t``
        self._glob_g: np.ndarray | None = None  # G(_glob_t), the carbon integral, filled on demand
        self._cum_gt, self._cum_g = 0.0, carbon.cumulative(0.0) if carbon is not None else np.zeros(0)
        self.region_zone = region_zone
        self.topo = topo
        #: USD per byte from region i to region j, or None when no egress is billed
        self.egress_usd_per_byte = (egress_usd_per_byte if egress_usd_per_byte is not None and topo is not None
                                    and bool(np.any(egress_usd_per_byte > 0)) else None)
        #: egress USD per iteration of the plans billed so far, by plan shape and job shape (shareable)
        self.egress_memo: dict[tuple[HashedKey, ModelSpec, int], float] = {}
        self._egress = 0.0  # platform-wide egress (USD) up to ``_glob_t``, state moves included
        self._rate_egress = 0.0  # summed egress rates of the running jobs, USD/s
        # platform-wide accounts: cost (USD), energy (J), tokens up to ``_glob_t``, and the summed rates
        # of the running jobs (watts per price zone, watts, tokens/s)
        self._glob = [0.0, 0.0, 0.0]
        self._glob_t = 0.0
        self._glob_f: np.ndarray | None = None  # F(_glob_t), filled on demand
        self._cum_t, self._cum_f = 0.0, prices.cumulative(0.0)
        self._rate_pz = np.zeros(len(prices.zones))
        self._rate_w = 0.0
        #: predicted tokens/s of the jobs with a plan (the platform-wide rate)
        self.rate_tokens = 0.0
        self._n_rated = 0

    def cumulative(self, t: float) -> np.ndarray:
        """``prices.cumulative(t)``, remembered for the last ``t`` asked (many callers per event)."""
        if t != self._cum_t:
            self._cum_t, self._cum_f = t, self.prices.cumulative(t)
        return self._cum_f

    def carbon_cumulative(self, t: float) -> np.ndarray:
        """``carbon.cumulative(t)``, remembered for the last ``t`` asked (needs :attr:`carbon`)."""
        if t != self._cum_gt:
            assert self.carbon is not None
            self._cum_gt, self._cum_g = t, self.carbon.cumulative(t)
        return self._cum_g

    def plan_egress_usd_per_iter(self, plan: Plan, job: JobSpec) -> float:
        """Egress billed per iteration of ``plan`` for ``job`` (0 inside one region or with no egress prices)."""
        price = self.egress_usd_per_byte
        if price is None or len(plan.regions) < 2:
            return 0.0
        key = (plan.shape_key, job.model, job.global_batch)
        usd = self.egress_memo.get(key)
        if usd is None:
            assert self.topo is not None
            usd = egress_usd_per_iter(plan, job, self.topo, price)
            if len(self.egress_memo) >= EGRESS_MEMO_SIZE:
                self.egress_memo.clear()
            self.egress_memo[key] = usd
        return usd

    def charge(self, js: JobState, usd: float) -> None:
        """Bill job ``js`` a lump of egress now (the state a re-plan moves between regions)."""
        js.egress_usd += usd
        self._egress += usd

    def accrue(self, js: JobState, now: float) -> None:
        """Bring job ``js``'s progress, energy, WAN bytes, egress and cost up to ``now`` at its current rates."""
        dt = now - js.last_update
        if dt > 0 and js.perf is not None:
            iters = dt / js.perf.iter_time
            js.progress += iters
            energy = js.perf.power_w * dt
            js.energy_j += energy
            js.wan_bytes += js.perf.wan_bytes_per_iter * iters
            js.egress_usd += js.egress_usd_per_iter * iters
            assert js.power_zone is not None
            f0 = js.f_last if js.f_last is not None else self.cumulative(js.last_update)
            f1 = self.cumulative(now)
            js.f_last = f1
            js.cost_usd += portable_dot(js.power_zone, f1 - f0) / JOULES_PER_MWH
            if self.carbon is not None:
                g0 = js.g_last if js.g_last is not None else self.carbon_cumulative(js.last_update)
                g1 = self.carbon_cumulative(now)
                js.g_last = g1
                js.carbon_kg += portable_dot(js.power_zone, g1 - g0) / JOULES_PER_MWH
        elif dt != 0:
            js.f_last = None  # F(last_update) is stale; with dt == 0 it stays valid
            js.g_last = None
        js.last_update = now

    def fold(self, t: float) -> None:
        """Bring the platform-wide accounts up to ``t`` (before the running jobs' rates change)."""
        if t == self._glob_t:
            return
        if self._n_rated:
            f1 = self.cumulative(t)
            f0 = self._glob_f if self._glob_f is not None else self.cumulative(self._glob_t)
            dt = t - self._glob_t
            g = self._glob
            g[0] += portable_dot(self._rate_pz, f1 - f0) / JOULES_PER_MWH
            g[1] += self._rate_w * dt
            g[2] += self.rate_tokens * dt
            self._egress += self._rate_egress * dt
            self._glob_f = f1
            if self.carbon is not None:
                g1 = self.carbon_cumulative(t)
                g0 = self._glob_g if self._glob_g is not None else self.carbon_cumulative(self._glob_t)
                self._carbon += portable_dot(self._rate_pz, g1 - g0) / JOULES_PER_MWH
                self._glob_g = g1
        else:
            self._glob_f = None
            self._glob_g = None
        self._glob_t = t

    def unrate(self, js: JobState) -> None:
        """Remove a job's rates from the platform-wide sums (call :meth:`fold` first)."""
        if js.perf is None or js.power_zone is None:
            return
        self._n_rated -= 1
        if self._n_rated == 0:  # exact zeros, so rounding never accumulates across idle periods
            self._rate_pz[:] = 0.0
            self._rate_w = self.rate_tokens = self._rate_egress = 0.0
        else:
            self._rate_pz -= js.power_zone
            self._rate_w -= js.perf.power_w
            self.rate_tokens -= js.spec.tokens_per_iteration / js.perf.iter_time
            if js.egress_usd_per_iter:
                self._rate_egress -= js.egress_usd_per_iter / js.perf.iter_time
        js.egress_usd_per_iter = 0.0

    def rate(self, js: JobState, perf: PlanPerf) -> None:
        """Give job ``js`` the rates of ``perf`` (call :meth:`fold` and :meth:`unrate` first)."""
        js.perf = perf
        pz = np.zeros(len(self.prices.zones))
        for r, w in perf.power_by_region.items():
            pz[self.region_zone[r]] += w
        js.power_zone = pz
        self._n_rated += 1
        self._rate_pz += pz
        self._rate_w += perf.power_w
        self.rate_tokens += js.spec.tokens_per_iteration / perf.iter_time
        egress = self.plan_egress_usd_per_iter(js.plan, js.spec) if js.plan is not None else 0.0
        js.egress_usd_per_iter = egress
        if egress:
            self._rate_egress += egress / perf.iter_time

    def totals(self, now: float) -> tuple[float, float, float]:
        """Cost (USD), energy (J) and tokens accrued by all jobs up to ``now`` (no state change)."""
        cost, energy, tokens = self._glob
        dt = now - self._glob_t
        if not self._n_rated or dt == 0:
            return cost, energy, tokens
        if self._glob_f is None:  # fill the cache of F(_glob_t): a value, not a state change
            self._glob_f = self.cumulative(self._glob_t)
        f_now = self.cumulative(now)
        cost += portable_dot(self._rate_pz, f_now - self._glob_f) / JOULES_PER_MWH
        return cost, energy + self._rate_w * dt, tokens + self.rate_tokens * dt

    def egress_total(self, now: float) -> float:
        """Egress (USD) billed to all jobs up to ``now``, state moves included (no state change)."""
        dt = now - self._glob_t
        if not self._n_rated or dt == 0:
            return self._egress
        return self._egress + self._rate_egress * dt

    def carbon_total(self, now: float) -> float:
        """Operational kgCO2e emitted by all jobs up to ``now`` (no state change; 0 without :attr:`carbon`)."""
        if self.carbon is None:
            return 0.0
        dt = now - self._glob_t
        if not self._n_rated or dt == 0:
            return self._carbon
        g0 = self._glob_g if self._glob_g is not None else self.carbon.cumulative(self._glob_t)
        return self._carbon + portable_dot(self._rate_pz, self.carbon_cumulative(now) - g0) / JOULES_PER_MWH
