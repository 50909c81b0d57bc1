"""Building one episode's simulator from a scenario: settings, random streams, outages and link dynamics.

The scenario (:mod:`sfenv.scenario`) describes the world; :func:`make_simulator` turns it into an
engine at time 0.  It is the one place an episode is assembled, and the one path of its seeding.
"""

from __future__ import annotations

import numbers

import numpy as np

from sfenv.errors import InvalidInput
from sfenv.scenario import Scenario
from sfenv.sim.engine import Simulator
from sfenv.sim.events import LinkDynamics, Outage, Straggler
from sfenv.sim.state import EvaluationCache, SimConfig

__all__ = [
    "draw_outages",
    "draw_stragglers",
    "evaluation_cache_for",
    "link_dynamics_for",
    "make_simulator",
    "sim_config_for",
]


def make_simulator(
    scenario: Scenario,
    rng: np.random.Generator | int | None = None,
    evaluation_cache: EvaluationCache | None = None,
) -> Simulator:
    """One episode of ``scenario``; all randomness comes from ``rng`` (or a generator seeded by it).

    The generator is split with ``rng.spawn(4)`` into independent streams for the jobs, the
    price noise, the outages and the link dynamics; with stragglers on (the ``stragglers``
    section), a fifth spawned stream draws them (off, nothing more is spawned: episodes stay as they were).
    Carbon (:meth:`sfenv.scenario.Scenario.make_carbon`: profile noise, then the forecast errors'
    seed) draws from a child spawned from the price stream, which leaves that stream's draws and
    ``rng``'s later spawns as they were.

    :param scenario: the world description (:class:`sfenv.scenario.Scenario`).
    :param rng: a generator, or a seed for one.
    :param evaluation_cache: from :func:`evaluation_cache_for`, to share plan evaluations
        between the episodes of this scenario.
    :return: the simulator at time 0, before the first event.
    :raises InvalidInput: for a ``scenario`` that is not a :class:`~sfenv.scenario.Scenario` (a name or a
        path: load it with :func:`sfenv.scenario.load_scenario`), or an ``rng`` that is a bool, a float,
        a text or a negative integer.
    """
    if not isinstance(scenario, Scenario):
        raise InvalidInput(f"make_simulator: scenario is a {type(scenario).__name__} ({scenario!r:.60}); expected "
                           "a Scenario (sfenv.scenario.load_scenario(name, path or dict))")
    if not isinstance(rng, np.random.Generator):
        if isinstance(rng, (bool, np.bool_, float, str, bytes)) or (isinstance(rng, numbers.Integral) and rng < 0):
            raise InvalidInput(f"make_simulator: rng = {rng!r:.60}; expected a numpy Generator, a seed "
                               "(an integer >= 0) or None")
        rng = np.random.default_rng(rng)
    job_rng, price_rng, outage_rng, dyn_rng = rng.spawn(4)
    stragglers = None
    if scenario.cfg.stragglers is not None and scenario.cfg.stragglers.rate_per_gpu_per_day > 0:
        stragglers = draw_stragglers(scenario, rng.spawn(1)[0])
    carbon_rng = price_rng.spawn(1)[0]  # before the prices are drawn: spawning does not move a stream
    prices = scenario.make_prices(price_rng)
    carbon = scenario.make_carbon(carbon_rng, prices.zones)
    forecaster = scenario.make_carbon_forecaster(carbon, int(carbon_rng.integers(2**63 - 1)))
    return Simulator(
        scenario.topology,
        prices,
        scenario.make_jobs(job_rng),
        sim_config_for(scenario),
        outages=draw_outages(scenario, outage_rng),
        dynamics=link_dynamics_for(scenario),
        rng=dyn_rng,
        evaluation_cache=evaluation_cache,
        egress_usd_per_byte=scenario.egress_usd_per_byte,
        stragglers=stragglers,
        carbon=carbon,
        carbon_forecaster=forecaster,
        embodied_kg_per_gpu_hour=scenario.carbon_cfg.embodied_kg_per_gpu_hour,
    )


def sim_config_for(scenario: Scenario) -> SimConfig:
    """The simulator settings of ``scenario`` (its ``sim`` section)."""
    s = scenario.cfg.sim
    return SimConfig(
        horizon_s=s.horizon_h * 3600.0,
        checkpoint_interval_s=s.checkpoint_interval_s,
        perf=s.perf_params(),
        routing=s.routing,
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


def draw_stragglers(scenario: Scenario, rng: np.random.Generator) -> list[Straggler]:
    """Straggler episodes over the horizon: Poisson per region (``rate_per_gpu_per_day x GPUs``), exponential lengths.

    Each draws its start gap, its duration and which GPU it falls on (``where``, uniform in [0, 1)),
    region by region (``stragglers`` section; none when it is off).
    """
    s = scenario.cfg.stragglers
    out: list[Straggler] = []
    if s is None or s.rate_per_gpu_per_day <= 0:
        return out
    horizon = scenario.cfg.sim.horizon_h * 3600.0
    for r, gpus in enumerate(scenario.topology.gpu_counts.tolist()):
        if gpus <= 0:
            continue
        gap = 86400.0 / (s.rate_per_gpu_per_day * gpus)
        t = 0.0
        while True:
            t += rng.exponential(gap)
            if t >= horizon:
                break
            out.append(Straggler(r, t, rng.exponential(s.mean_duration_h * 3600.0), float(rng.random()), s.slowdown))
    return sorted(out, key=lambda x: (x.start, x.region))


def evaluation_cache_for(scenario: Scenario) -> EvaluationCache:
    """A plan-evaluation cache shared by the simulators of ``scenario`` (see :func:`make_simulator`)."""
    return EvaluationCache(scenario.topology, sim_config_for(scenario).perf)
