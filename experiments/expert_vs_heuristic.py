"""A distillation expert played online vs a heuristic: how much a student could gain by imitating it.

Plays an expert of :func:`sfenv.agents.imitation.expert_action` (default: the state-only rollout
``lookahead:fastest+swf:present:proposed`` of config ``contended-rollout``) through the
env on the seeds of a protocol split (:mod:`sfenv.runs.protocol`; default: the first 20 of validation,
as this experiment chooses recipes), and the heuristic on the same seeds, and prints the ratio of mean JCT (censored,
unfinished jobs counted) with its paired bootstrap 95 % CI.  A student cloned from the expert
rarely beats it, so this ratio bounds what the ``contended-rollout`` recipe can reach.  Results go
to ``<out>/expert_vs_heuristic.json``, written atomically.

Run (about 2 minutes on 2 cores)::

    python -m sfenv.experiments.expert_vs_heuristic --scenario spider-8-contended --seeds 20 --out results/expert

``--first-seed S`` plays explicit seeds ``S..S+N-1`` instead, labelled "explicit seeds" (never with ``--split``).
``--min-relative-mfu F`` plays the expert in an env with that floor on its menu (the env's
``min_relative_mfu``): ``--expert spantrain+swf --min-relative-mfu 0.7`` is ``spantrain+swf`` that
waits where its decision is a plan the floor leaves out, the floor's own effect on a heuristic.
``--min-spread-speedup X`` likewise plays it with the env's ``min_spread_speedup`` (plans across regions
that do not finish X times sooner than waiting for one region leave the menu).
``--env-version v5`` plays both under an earlier env version's WAN settings
(:data:`sfenv.registration.VERSION_SIM`), as ``claims --env-version`` does: ``docs/results/headroom/v5``
is played again by this code with it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sfenv.agents.imitation import expert_action
from sfenv.agents.registry import make_agent

from sfenv.app.evaluate import run_episode
from sfenv.app.script import ScriptParser
from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import PROPOSER_SETS
from sfenv.registration import ENV_VERSION, PREVIOUS_VERSIONS, VERSION_SIM
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_json, scenario_hash
from sfenv.runs.stats import paired_ratio
from sfenv.scenario import Scenario, load_scenario


def versioned_scenario(scenario: str, env_version: str = ENV_VERSION) -> Scenario:
    """``scenario`` loaded with the WAN settings of ``env_version`` (:data:`~sfenv.registration.VERSION_SIM`).

    :raises ValueError: for a version that is neither the current one nor one of :data:`PREVIOUS_VERSIONS`.
    """
    if env_version != ENV_VERSION and env_version not in VERSION_SIM:
        raise ValueError(f"env version {env_version!r}: expected one of {', '.join((ENV_VERSION, *PREVIOUS_VERSIONS))}")
    sc = load_scenario(scenario)
    return sc if env_version == ENV_VERSION else sc.with_overrides(sim=dict(VERSION_SIM[env_version]))


def play_expert(expert: str, scenario: str | Scenario, seed: int, proposers: str = "best+spantrain",
                num_jobs: int | None = None, min_relative_mfu: float | None = None,
                min_spread_speedup: float | None = None, spread_wait: str = "running") -> dict:
    """One episode with ``expert`` choosing every action; the episode report as a dict.

    :param min_relative_mfu: the env's floor on its menu (None: none).
    :param min_spread_speedup: the env's test of spread plans against waiting for one region (None: none).
    :param spread_wait: the wait that test counts (the env's ``spread_wait``).
    """
    env = GeoSchedEnv(scenario, num_jobs=num_jobs, proposers=proposers, min_relative_mfu=min_relative_mfu,
                      min_spread_speedup=min_spread_speedup, spread_wait=spread_wait)
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(expert_action(env, expert))
        done = term or trunc
    assert env.sim is not None  # made by env.reset
    report = env.sim.report().to_dict()
    env.close()
    return report


def main(argv: list[str] | None = None) -> dict:
    """Play the expert and the heuristic on the seeds, print and save the comparison."""
    p = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    p.add_argument("--expert", default="lookahead:fastest+swf:present:proposed")
    p.add_argument("--scenario", default="spider-8-contended")
    p.add_argument("--heuristic", default="fastest+swf",
                   help="the base to beat (default: the best heuristic on spider-8-contended's validation seeds)")
    p.add_argument("--proposers", default="best+spantrain", choices=PROPOSER_SETS,
                   help="the env's candidate set (records the decisions)")
    protocol.add_seed_arguments(p, default_n=20, default_split="validation")
    p.add_argument("--num-jobs", type=int, default=None)
    p.add_argument("--min-relative-mfu", type=float, default=None, metavar="F",
                   help="the env's floor on its menu (GeoSchedEnv min_relative_mfu; default: none)")
    p.add_argument("--min-spread-speedup", type=float, default=None, metavar="X",
                   help="plans across regions must finish X times sooner than waiting for one region "
                        "(GeoSchedEnv min_spread_speedup; default: no such test)")
    p.add_argument("--spread-wait", default="running", choices=("running", "queue"),
                   help="the wait --min-spread-speedup counts (GeoSchedEnv spread_wait; default: running)")
    versions = (ENV_VERSION, *PREVIOUS_VERSIONS)
    p.add_argument("--env-version", default=ENV_VERSION, choices=versions,
                   help=f"the env version whose WAN settings both play under (default {ENV_VERSION})")
    p.add_argument("--out", type=Path, default=Path("results/expert"))
    args = p.parse_args(argv)
    choice = protocol.seed_choice_from_args(args, args.scenario, default_split="validation", parser=p)
    if args.num_jobs is not None and args.num_jobs < 1:
        p.error(f"argument --num-jobs: expected an integer >= 1, got {args.num_jobs}")
    seeds = list(choice.seeds)
    print(choice.describe() + ("" if args.env_version == ENV_VERSION else f"; env {args.env_version}'s WAN settings"))
    played = versioned_scenario(args.scenario, args.env_version)
    try:  # a malformed expert, or one the proposers do not record, fails here rather than mid-run
        probe = GeoSchedEnv(played, num_jobs=args.num_jobs, proposers=args.proposers,
                            min_relative_mfu=args.min_relative_mfu, min_spread_speedup=args.min_spread_speedup,
                            spread_wait=args.spread_wait)
        probe.reset(seed=seeds[0])
        expert_action(probe, args.expert)
        probe.close()
    except ValueError as exc:
        named = next((arg for arg in ("min_relative_mfu", "min_spread_speedup") if arg in str(exc)), "expert")
        p.error(f"argument --{named.replace('_', '-')}: {exc}")
    sc = played
    if args.num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": args.num_jobs})
    rows = []
    for s in seeds:
        mine = play_expert(args.expert, played, s, args.proposers, args.num_jobs, args.min_relative_mfu,
                           args.min_spread_speedup, args.spread_wait)
        theirs = run_episode(make_agent(args.heuristic), sc, s)
        rows.append({"seed": s, "expert_jct_h": mine["mean_jct_s"] / 3600, "expert_unfinished": mine["unfinished"],
                     "heuristic_jct_h": theirs["mean_jct_s"] / 3600, "heuristic_unfinished": theirs["unfinished"]})
        r = rows[-1]
        print(f"seed {s}: expert {r['expert_jct_h']:.3f} h, {args.heuristic} {r['heuristic_jct_h']:.3f} h", flush=True)
    a = np.array([r["expert_jct_h"] for r in rows])
    b = np.array([r["heuristic_jct_h"] for r in rows])
    ratio = list(paired_ratio(a, b))
    print(f"{args.expert} / {args.heuristic} on {args.scenario}: mean JCT {a.mean():.3f} h vs {b.mean():.3f} h, "
          f"ratio {ratio[0]:.3f} [95 % CI {ratio[1]:.3f}, {ratio[2]:.3f}]")
    result = {"expert": args.expert, "heuristic": args.heuristic, "scenario": args.scenario,
              "proposers": args.proposers, "env_version": args.env_version, "num_jobs": args.num_jobs,
              "min_relative_mfu": args.min_relative_mfu,
              "min_spread_speedup": args.min_spread_speedup, "spread_wait": args.spread_wait, **choice.record(),
              "wan_sharing": sc.cfg.sim.wan_sharing, "vm_pair_cap": sc.cfg.sim.vm_pair_cap,
              "skip_zero_bubble_periods": sc.cfg.sim.skip_zero_bubble_periods, "scenario_sha": scenario_hash(sc),
              "ratio": ratio,
              "interval": "paired bootstrap 95 % BCa over seeds (sfenv.runs.stats.paired_ratio)", "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "expert_vs_heuristic.json", result)
    return result


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
