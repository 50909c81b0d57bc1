"""Where do BACE-Pipe's single- and cross-region baselines coincide?  ``lcf`` vs ``cr-lcf``, ``ldf`` vs ``cr-ldf``.

A cross-region baseline takes up to ``K*`` GPUs from regions in its order; the single-region one waits
for its first region in that order that has ``K*`` free (:mod:`sfenv.agents.bace_baselines`).  The two
start the same plan whenever the region ranked first has ``K*`` free GPUs, so their episodes are
identical when that holds at every start.  For each scenario this plays both of each pair on the same
seeded episodes and counts the seeds whose metrics differ, and for each cross-region baseline counts its
starts whose first-ranked region had fewer than ``K*`` free GPUs (the starts where it spans regions),
with the ``K*`` values seen.

Run: ``python -m sfenv.experiments.bace_coincidence [--scenarios all] [--seeds 10]`` (the first test
seeds; spider-64 capped at 12 jobs, as the leaderboard plays it).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from sfenv.agents.bace_baselines import CRLCFAgent, CRLDFAgent
from sfenv.agents.bace_pipe import k_star
from sfenv.agents.registry import make_agent

from sfenv.app.cli import job_count
from sfenv.app.leaderboard import JOB_CAPS
from sfenv.app.script import ScriptParser
from sfenv.runs import protocol
from sfenv.scenario import Scenario, bundled_scenarios, load_scenario
from sfenv.sim import SimView, make_simulator

__all__ = ["PAIRS", "compare", "main", "short_starts"]

#: (single-region, cross-region) baseline pairs
PAIRS: tuple[tuple[str, str], ...] = (("lcf", "cr-lcf"), ("ldf", "cr-ldf"))
#: metrics compared between the two episodes of a seed
METRICS = ("mean_jct_s", "cost_usd", "egress_usd", "makespan_s", "energy_kwh")


def _episode(name: str, sc: Scenario, seed: int) -> dict[str, Any]:
    agent = make_agent(name)
    agent.reset(seed)
    return make_simulator(sc, seed).run(agent.decide).to_dict()


def compare(sc: Scenario, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """Per pair: the seeds whose episodes differ in any of :data:`METRICS`, and both mean JCTs (hours)."""
    out = []
    for single, cross in PAIRS:
        a = [_episode(single, sc, s) for s in seeds]
        b = [_episode(cross, sc, s) for s in seeds]
        differ = [s for s, ra, rb in zip(seeds, a, b) if any(ra[m] != rb[m] for m in METRICS)]
        out.append({"scenario": sc.name, "pair": f"{single} vs {cross}", "seeds": len(seeds), "differ": differ,
                    "jct_h": (sum(r["mean_jct_s"] for r in a) / len(a) / 3600,
                              sum(r["mean_jct_s"] for r in b) / len(b) / 3600)})
    return out


def short_starts(sc: Scenario, seeds: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per cross-region baseline: the K* values of its proposals and how often its first region lacked K*."""
    out = {}
    for cls in (CRLCFAgent, CRLDFAgent):
        kstars: collections.Counter[int] = collections.Counter()
        short = collections.Counter[bool]()
        for seed in seeds:
            agent = cls()
            agent.reset(seed)
            agent.propose = _counting(agent, kstars, short)  # type: ignore[method-assign]
            make_simulator(sc, seed).run(agent.decide)
        out[cls.name] = {"kstar": dict(sorted(kstars.items())), "first_region_short": short[True],
                         "proposals": sum(kstars.values())}
    return out


def _counting(agent: Any, kstars: collections.Counter[int], short: collections.Counter[bool]) -> Any:
    """``agent.propose``, counting each proposal's K* and whether the agent's first region lacked it."""
    base = agent.propose

    def propose(view: SimView, job: Any, k: int = 1) -> Any:
        ks = k_star(view, job, agent._kstar)
        free = view.free_gpus
        avail = [r for r in range(view.topo.num_regions) if free[r] > 0]
        if ks is not None and avail:
            kstars[ks.k] += 1
            short[bool(free[agent.rank(view, avail)[0]] < ks.k)] += 1
        return base(view, job, k)

    return propose


def main(argv: list[str] | None = None) -> None:
    """Print, per scenario, whether each pair coincides and why (the K* its cross-region baseline saw)."""
    p = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="all", help="comma list of bundled scenarios, or all")
    p.add_argument("--seeds", type=int, default=10, help="the first N test seeds")
    p.add_argument("--num-jobs", type=job_count, help="cap on the jobs per episode (default: the leaderboard's caps)")
    args = p.parse_args(argv)
    names = bundled_scenarios() if args.scenarios == "all" else args.scenarios.split(",")
    seeds = protocol.seeds("test", args.seeds)
    for name in names:
        sc = load_scenario(name)
        cap = args.num_jobs or JOB_CAPS.get(name)
        if cap is not None and cap < sc.cfg.workload.num_jobs:
            sc = sc.with_overrides(workload={"num_jobs": cap})
        why = short_starts(sc, seeds[:3])
        for row in compare(sc, seeds):
            cross = row["pair"].split(" vs ")[1]
            print(f"{name} ({sc.cfg.workload.num_jobs} jobs): {row['pair']}: {len(row['differ'])}/{row['seeds']} "
                  f"seeds differ, mean JCT {row['jct_h'][0]:.3f} h vs {row['jct_h'][1]:.3f} h; {cross} on the "
                  f"first {min(3, len(seeds))} seeds: K* {why[cross]['kstar']}, first region short of K* at "
                  f"{why[cross]['first_region_short']} of {why[cross]['proposals']} proposals", flush=True)


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
