"""How much do decisions matter in each scenario?  The spread between the best and the worst heuristic and random.

For every scenario (default: every bundled one), every agent plays the same seeded episodes; the
table gives per scenario its offered load (:attr:`sfenv.scenario.Scenario.offered_load`), the
best agent by mean JCT (the bar a learned policy must beat), the worst heuristic, random, and
the spreads ``worst / best - 1`` and ``random / best - 1``.  JCT is the episode's mean JCT with
unfinished jobs censored at the episode's end (:class:`sfenv.sim.metrics.EpisodeReport`), averaged
over seeds.  A scenario where random is within a few percent of the best says little about a
scheduler.

Episodes are played as :func:`sfenv.app.evaluate.run_episode` plays them (``agent.reset(seed)``,
``make_simulator(scenario, seed)``, ``agent.decide`` at every decision point, the agent's
re-planning hook), without the evaluator's timing.  Rows go to a JSON file written atomically
after each episode; ``--resume`` skips the episodes already there.

Run: ``python -m sfenv.experiments.scenario_spread [--scenarios all] [--agents spread] [--split validation --seeds 5]
[--out spread.json] [--resume] [--quick]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sfenv.agents.registry import make_agent, resolve_names
from sfenv.experiments.rows import INT, NUMBER, TEXT, read_rows

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_json
from sfenv.scenario import Scenario, bundled_scenarios, load_scenario
from sfenv.sim import make_simulator

__all__ = ["ROW_FIELDS", "SPREAD_AGENTS", "format_markdown", "main", "play", "run_spread", "spread_table"]

#: agents compared by default: the simple baselines, the papers' fast agents and the ordering baselines
#: (ILP, genetic, TPA and SpiderFlow are left out: minutes per episode on the large scenarios)
SPREAD_AGENTS: tuple[str, ...] = (
    "random", "fifo", "cheapest", "lcf", "ldf", "cr-lcf", "cr-ldf", "bace-pipe", "spantrain", "ddp", "spinsearch",
    "fifo+swf", "fifo+fgf", "fifo+bace", "spinsearch+swf", "spinsearch+fgf", "spinsearch+bace", "spantrain+swf",
    "fastest", "fastest+swf",
)


#: the fields of a row :func:`run_spread` and :func:`spread_table` read, and their kinds
ROW_FIELDS = {"scenario": TEXT, "agent": TEXT, "seed": INT, "mean_jct_s": NUMBER, "cost_usd": NUMBER,
              "unfinished": NUMBER, "jobs": INT, "offered_load": NUMBER}


def play(agent_name: str, scenario: Scenario, seed: int) -> dict[str, Any]:
    """One seeded episode of ``agent_name`` on ``scenario``: the episode report as a dict, with names."""
    agent = make_agent(agent_name)
    agent.reset(seed)
    sim = make_simulator(scenario, seed)
    report = sim.run(agent.decide, replan=agent.replan if agent.replans else None, replan_hourly=agent.replan_hourly)
    return {"scenario": scenario.name, "agent": agent_name, "seed": seed, **report.to_dict()}


def run_spread(
    scenarios: Sequence[str | Scenario],
    agents: Sequence[str],
    seeds: Sequence[int],
    out: str | Path | None = None,
    resume: bool = False,
    num_jobs: int | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Play every agent on every seed of every scenario; one row per episode.

    :param num_jobs: override each scenario's workload size (e.g. for a quick run).
    :param out: JSON file of the rows, written atomically after each episode.
    :param resume: skip the (scenario, agent, seed) episodes already in ``out``.
    """
    path = Path(out) if out else None
    rows: list[dict[str, Any]] = []
    if path and resume and path.exists():
        rows = read_rows(path, "scenario_spread rows file", ROW_FIELDS)
    done = {(r["scenario"], r["agent"], r["seed"]) for r in rows}
    for spec in scenarios:
        sc = load_scenario(spec)
        if num_jobs is not None:
            sc = sc.with_overrides(workload={"num_jobs": num_jobs})
        for name in agents:
            for seed in seeds:
                if (sc.name, name, seed) in done:
                    continue
                row = play(name, sc, seed)
                row["offered_load"] = sc.offered_load
                rows.append(row)
                if path:
                    atomic_write_json(path, rows)
            if progress:
                jct = np.mean([r["mean_jct_s"] for r in rows if r["scenario"] == sc.name and r["agent"] == name])
                print(f"{sc.name:<22} {name:<18} mean JCT {jct / 3600:7.2f} h", flush=True)
    return rows


def spread_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario (first-seen order): best agent, worst heuristic, random and the spreads.

    Each agent's figure is its mean over seeds of the episode's censored mean JCT (hours); only
    seeds every agent of the scenario played are used, so the means are paired.  ``worst`` is the
    worst agent other than ``random``.  ``spread_worst`` is ``worst / best - 1``,
    ``spread_random`` is ``random / best - 1`` (NaN without a random row).
    """
    out = []
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        rs = [r for r in rows if r["scenario"] == sc]
        agents = list(dict.fromkeys(r["agent"] for r in rs))
        seeds = set.intersection(*({r["seed"] for r in rs if r["agent"] == a} for a in agents))
        jct = {a: float(np.mean([r["mean_jct_s"] for r in rs if r["agent"] == a and r["seed"] in seeds])) / 3600
               for a in agents}
        cost = {a: float(np.mean([r["cost_usd"] for r in rs if r["agent"] == a and r["seed"] in seeds]))
                for a in agents}
        unfinished = {a: float(np.mean([r["unfinished"] for r in rs if r["agent"] == a and r["seed"] in seeds]))
                      for a in agents}
        best = min(agents, key=lambda a: (jct[a], a))
        heur = [a for a in agents if a != "random"] or agents
        worst = max(heur, key=lambda a: (jct[a], a))
        rand = jct.get("random", math.nan)
        out.append({
            "scenario": sc,
            "offered_load": float(rs[0].get("offered_load", math.nan)),
            "jobs": int(rs[0]["jobs"]),
            "seeds": len(seeds),
            "best": best,
            "best_jct_h": jct[best],
            "best_cost_usd": cost[best],
            "best_unfinished": unfinished[best],
            "worst": worst,
            "worst_jct_h": jct[worst],
            "random_jct_h": rand,
            "spread_worst": jct[worst] / jct[best] - 1,
            "spread_random": rand / jct[best] - 1,
            "jct_h": jct,
        })
    return out


def format_markdown(table: Sequence[dict[str, Any]]) -> str:
    """The spread table in Markdown (JCT in hours, spreads in %)."""
    lines = [
        "| scenario | rho | jobs | seeds | best (the bar) | JCT h | worst heuristic | JCT h | random JCT h "
        "| worst/best | random/best |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table:
        lines.append(
            f"| {t['scenario']} | {t['offered_load']:.2f} | {t['jobs']} | {t['seeds']} | {t['best']} "
            f"| {t['best_jct_h']:.2f} | {t['worst']} | {t['worst_jct_h']:.2f} | {t['random_jct_h']:.2f} "
            f"| {100 * t['spread_worst']:+.1f} % | {100 * t['spread_random']:+.1f} % |"
        )
    return "\n".join(lines)


def _seeds(text: str) -> list[int]:
    """``"0-4"`` or ``"0,3,7"`` as a list of seeds."""
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",") if s.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    ap = ScriptParser(script=__file__,
                      description="spread between the best and the worst heuristic and random, per scenario")
    ap.add_argument("--scenarios", default="all", help="comma list of scenarios (names or paths), or 'all' bundled")
    ap.add_argument("--agents", default="spread", help="comma list of agents or groups; 'spread' = SPREAD_AGENTS")
    ap.add_argument("--split", choices=protocol.SPLITS, default=None,
                    help="the protocol's seed split (sfenv.runs.protocol; default: validation, as the spread guides "
                         "scenario design, unless --seed-list is given)")
    ap.add_argument("--seeds", type=int, default=5, metavar="N", help="number of seeds of the split")
    ap.add_argument("--seed-list", default=None,
                    help="explicit seeds instead of a split, e.g. 0-4 or 0,3,7 (labelled 'explicit seeds'; not with "
                         "--split)")
    ap.add_argument("--num-jobs", type=int, default=None, help="override every scenario's number of jobs")
    ap.add_argument("--out", default=None, help="JSON file of the episode rows (written after each episode)")
    ap.add_argument("--resume", action="store_true", help="skip episodes already in --out")
    ap.add_argument("--quick", action="store_true", help="smoke run: spider-8, 12 jobs, 2 seeds, 4 agents")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds = 2
    try:
        explicit = None if args.seed_list is None else _seeds(args.seed_list)
        choice = protocol.resolve_seeds(args.split, args.seeds, explicit, default_split="validation")
    except (InvalidInput, ValueError) as exc:
        ap.error(str(exc))
    if args.quick:
        scenarios: list[str] = ["spider-8"]
        agents = ["random", "fifo", "spinsearch", "fifo+swf"]
        num_jobs = 12
    else:
        scenarios = bundled_scenarios() if args.scenarios == "all" else args.scenarios.split(",")
        agents = list(SPREAD_AGENTS) if args.agents == "spread" else resolve_names(args.agents)
        num_jobs = args.num_jobs
    print(choice.describe())
    rows = run_spread(scenarios, agents, list(choice.seeds), args.out, args.resume, num_jobs)
    print(format_markdown(spread_table(rows)))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
