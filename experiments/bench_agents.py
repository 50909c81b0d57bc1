"""Decision-time benchmark: every scheduler on the same decision points of spider-8/16/32/64.

For each scenario one FIFO-driven episode (seed 0) supplies the decision points: at each of the
first ``--points`` points every agent's ``decide(view)`` is timed (its plan is not applied), then
FIFO's decision moves the episode on, so all agents see identical states.  Prints mean and max
milliseconds per decision and the ratios ILP/SpinSearch and genetic/SpinSearch (and against the
full SpiderFlow agent, SpinSearch + TPA) at each size (the
SpiderFlow abstract claims a 20-90x lower scheduling overhead than ILP- and genetic-based
schedulers).  Ratios, not absolute times, are what compares across machines.

Run: ``python -m sfenv.experiments.bench_agents [--points 5] [--agents spinsearch,ilp,genetic]
[--out results/bench_agents.json]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sfenv.agents.evaluate import atomic_write_json
from sfenv.agents.fifo import FIFOAgent
from sfenv.agents.registry import make_agent, resolve_names

from sfenv.scenario import load_scenario

SCENARIOS = ("spider-8", "spider-16", "spider-32", "spider-64")
DEFAULT_AGENTS = "spinsearch,tpa,spiderflow,bace-pipe,spantrain,ilp,genetic,fifo"


def decision_times(scenario: str, names: list[str], points: int, num_jobs: int, seed: int = 0) -> dict:
    """Seconds per ``decide`` call for each agent, at the first ``points`` decision points."""
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": num_jobs})
    sim = sc.make_simulator(seed)
    view = sim.view()
    agents = {n: make_agent(n) for n in names}
    for a in agents.values():
        a.reset(seed)
    fifo = FIFOAgent()
    times: dict[str, list[float]] = {n: [] for n in names}
    planned: dict[str, int] = {n: 0 for n in names}
    while not sim.done and len(times[names[0]]) < points:
        for n, a in agents.items():
            t = time.perf_counter()
            plan = a.decide(view)
            times[n].append(time.perf_counter() - t)
            planned[n] += plan is not None
        plan = fifo.decide(view)
        if plan is None:
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()
    return {"scenario": scenario, "regions": sim.topo.num_regions, "points": len(times[names[0]]),
            "mean_s": {n: sum(v) / len(v) for n, v in times.items() if v},
            "max_s": {n: max(v) for n, v in times.items() if v}, "planned": planned}


def format_rows(rows: list[dict], names: list[str]) -> str:
    """A text table: mean (max) ms per decision, then the overhead ratios against SpinSearch."""
    head = f"{'agent':<12}" + "".join(f"{r['scenario']:>22}" for r in rows)
    lines = [head, "-" * len(head)]
    for n in names:
        cells = "".join(f"{1e3 * r['mean_s'][n]:>12.1f} ({1e3 * r['max_s'][n]:>7.1f})" for r in rows)
        lines.append(f"{n:<12}{cells}")
    for ref, short in (("spinsearch", "spin"), ("spiderflow", "sf")):
        for other in ("ilp", "genetic"):
            if other in names and ref in names:
                cells = "".join(f"{r['mean_s'][other] / r['mean_s'][ref]:>21.1f}x" for r in rows)
                lines.append(f"{other + '/' + short:<12}{cells}")
    return "\n".join(lines)


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description="sfenv agent decision-time benchmark")
    ap.add_argument("--points", type=int, default=5, help="decision points per scenario")
    ap.add_argument("--jobs", type=int, default=20, help="jobs in the driving episode")
    ap.add_argument("--agents", default=DEFAULT_AGENTS)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON (atomically)")
    args = ap.parse_args()
    names = resolve_names(args.agents)
    rows = []
    for sc in args.scenarios.split(","):
        rows.append(decision_times(sc, names, args.points, args.jobs))
        print(f"{sc}: done ({rows[-1]['points']} decision points)", flush=True)
    print("mean (max) ms per decision on identical decision points")
    print(format_rows(rows, names))
    if args.out is not None:
        atomic_write_json(args.out, rows)


if __name__ == "__main__":
    main()
