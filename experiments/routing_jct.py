"""What load-aware routing changes: mean JCT per agent under ``sim.routing`` ``static``, ``load`` and ``adaptive``.

For each agent and validation seed of a bundled scenario, plays the episode once per routing mode
(the scenario with ``sim.routing`` overridden; nothing else differs), and prints per agent the mean
JCT and its spread over seeds, how many jobs ran across regions under ``load``, how many of those
ran on routes other than the static ones (their final plan's pinned :attr:`sfenv.model.perf.Plan.routes`
against :meth:`sfenv.world.topology.Topology.route_for`'s), and under ``adaptive`` how often a running
job moved to other routes (:mod:`sfenv.sim.reroute`).

Run: ``python -m sfenv.experiments.routing_jct [--scenario spider-16] [--agents spinsearch,bace-pipe]
[--seeds 3]``.  docs/model.md ("Load-aware routing") gives the figures it printed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from sfenv.agents.registry import make_agent

from sfenv.app.script import ScriptParser
from sfenv.model.perf import plan_routes
from sfenv.runs import protocol
from sfenv.scenario import Scenario, load_scenario
from sfenv.sim import make_simulator

__all__ = ["main", "play"]


def play(agent_name: str, scenario: Scenario, seed: int) -> dict[str, Any]:
    """One episode: mean JCT (h), jobs run across regions, of those the ones off the static routes, and moves."""
    agent = make_agent(agent_name)
    agent.reset(seed)
    sim = make_simulator(scenario, seed)
    report = sim.run(agent.decide, replan=agent.replan if agent.replans else None)
    moves = sim.reroutes
    crossing = rerouted = 0
    for js in sim.jobs:
        plan = js.plan
        if plan is None or len(plan.regions) < 2:
            continue
        crossing += 1
        if plan.routes and plan.routes != plan_routes(plan.unrouted(), sim.topo, js.spec):
            rerouted += 1
    return {"jct_h": report.mean_jct_s / 3600.0, "crossing": crossing, "rerouted": rerouted, "moves": moves}


def main(argv: Sequence[str] | None = None) -> None:
    """Play every agent and seed under both routing modes and print the table."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="spider-16", help="a bundled scenario")
    ap.add_argument("--agents", default="spinsearch,bace-pipe", help="comma list of reference agents")
    ap.add_argument("--seeds", type=int, default=3, help="the first N validation seeds")
    args = ap.parse_args(argv)
    base = load_scenario(args.scenario)
    seeds = protocol.seeds("validation", args.seeds, base.name)
    modes = {mode: base.with_overrides(sim={"routing": mode}) for mode in ("static", "load", "adaptive")}
    t0 = time.perf_counter()
    print(f"scenario {base.name}, validation seeds {seeds}")
    print(f"{'agent':<12} {'static JCT h':>14} {'load JCT h':>14} {'load/static':>12} {'crossing':>9} {'rerouted':>9} "
          f"{'adaptive JCT h':>15} {'adaptive/load':>14} {'moves':>6}")
    for name in args.agents.split(","):
        rows = {mode: [play(name, sc, s) for s in seeds] for mode, sc in modes.items()}
        st = np.array([r["jct_h"] for r in rows["static"]])
        ld = np.array([r["jct_h"] for r in rows["load"]])
        ad = np.array([r["jct_h"] for r in rows["adaptive"]])
        crossing = sum(r["crossing"] for r in rows["load"])
        rerouted = sum(r["rerouted"] for r in rows["load"])
        moves = sum(r["moves"] for r in rows["adaptive"])
        print(f"{name:<12} {st.mean():8.3f} ±{st.std():5.3f} {ld.mean():8.3f} ±{ld.std():5.3f} "
              f"{ld.mean() / st.mean():12.3f} {crossing:9d} {rerouted:9d} {ad.mean():8.3f} ±{ad.std():5.3f} "
              f"{ad.mean() / ld.mean():14.3f} {moves:6d}")
        print(f"{'':<12} per seed static {np.round(st, 3).tolist()} load {np.round(ld, 3).tolist()} "
              f"adaptive {np.round(ad, 3).tolist()}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
