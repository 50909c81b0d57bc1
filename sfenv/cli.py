"""The ``sfenv`` command line: benchmark, plot, run, evaluate, train, and list scenarios and agents."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sfenv.scenario import DEFAULT_SCENARIO, ScenarioError, bundled_scenarios, load_scenario

__all__ = ["main"]


def _cmd_run(args: argparse.Namespace) -> int:
    from sfenv.agents.evaluate import quiet_solver_banner, run_episode
    from sfenv.agents.registry import make_agent

    quiet_solver_banner()
    sc = load_scenario(args.scenario)
    if args.num_jobs:
        sc = sc.with_overrides(workload={"num_jobs": args.num_jobs})
    row = run_episode(make_agent(args.agent), sc, args.seed)
    print(f"scenario {sc.name}  agent {args.agent}  seed {args.seed}")
    print(f"  jobs finished        {row['finished']}/{row['jobs']}")
    print(f"  mean JCT             {row['mean_jct_s'] / 3600:.2f} h   (p95 {row['p95_jct_s'] / 3600:.2f} h)")
    print(f"  mean throughput      {row['mean_throughput_tokens_s']:.0f} tokens/s per job")
    print(f"  electricity cost     {row['cost_usd']:.2f} USD   energy {row['energy_kwh']:.1f} kWh")
    print(f"  GPU utilisation      {row['utilisation']:.2f}   makespan {row['makespan_s'] / 3600:.1f} h")
    print(f"  decision time        mean {1000 * row['decision_time_mean_s']:.2f} ms, "
          f"max {1000 * row['decision_time_max_s']:.1f} ms (wall clock, outside the simulation)")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from sfenv.agents.evaluate import evaluate_agents, format_table, quiet_solver_banner, summarise, write_csv
    from sfenv.agents.registry import resolve_names

    names = resolve_names(args.agents)
    quiet_solver_banner()
    rows = evaluate_agents(names, args.scenario, list(range(args.seed, args.seed + args.seeds)),
                           num_jobs=args.num_jobs, out=args.out, resume=args.resume, progress=not args.quiet)
    summary = summarise([r for r in rows if r["agent"] in names])
    print(f"scenario {load_scenario(args.scenario).name}, seeds {args.seed}..{args.seed + args.seeds - 1}")
    print(format_table(summary))
    if args.out:
        print(f"results: {args.out}")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"episodes (CSV): {args.csv}")
    return 0


def _cmd_benchmark(args: argparse.Namespace) -> int:
    import time

    from sfenv.agents.evaluate import format_table
    from sfenv.benchmark import run_benchmark

    t0 = time.perf_counter()
    res = run_benchmark(args.agents, args.scenario, args.seeds, args.seed, num_jobs=args.num_jobs,
                        out_dir=args.out_dir, resume=args.resume, progress=not args.quiet, plots=not args.no_plots)
    meta = res["meta"]
    seeds = meta["seeds"]
    print(f"benchmark: scenario {meta['scenario']}, {meta['num_jobs']} jobs, seeds {seeds[0]}..{seeds[-1]} "
          f"({res['ran']} episodes run now)")
    print(format_table(res["summary"]))
    print("files:")
    for f in res["files"]:
        print(f"  {f}")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from sfenv.benchmark import write_plots

    if not args.file.is_file():
        raise FileNotFoundError(f"no results file {args.file}")
    for f in write_plots(args.file, args.out_dir):
        print(f)
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from sfenv.agents.learned import train

    path = train(args.algo, args.scenario, args.steps, args.seed, args.n_envs, args.out,
                 env_kwargs={"num_jobs": args.num_jobs} if args.num_jobs else None,
                 tensorboard=not args.no_tensorboard, progress_bar=not args.quiet)
    print(f"saved {path}")
    return 0


def _cmd_scenarios(args: argparse.Namespace) -> int:
    for name in bundled_scenarios():
        sc = load_scenario(name)
        print(f"{name:<10} {sc.topology!r:<46} {sc.cfg.description}")
    return 0


def _cmd_agents(args: argparse.Namespace) -> int:
    from sfenv.agents.registry import AGENTS, GROUPS, available_agents

    avail = set(available_agents())
    for name, path in AGENTS.items():
        print(f"{name:<11} {path:<40} {'' if name in avail else '(not installed)'}")
    for g, names in GROUPS.items():
        print(f"group {g}: {', '.join(names)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="sfenv", description="Geo-distributed LLM training scheduling testbed")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("benchmark", help="the main job: score the default agents over seeds, save CSV/JSON and plots",
                       description="Run agents on the same seeded episodes; print mean ± 95 %% CI over seeds; write "
                                   "episodes.csv/.json, benchmark.json and PNGs to ./results/<scenario>/.")
    b.add_argument("--agents", default="default",
                   help="comma list, a group (default, bace) or 'all'; model:PATH adds a saved SB3 model "
                        "(default: %(default)s)")
    b.add_argument("--scenario", default=DEFAULT_SCENARIO, help="bundled name or YAML path (default: %(default)s)")
    b.add_argument("--seeds", type=int, default=10, help="number of seeds (default: %(default)s)")
    b.add_argument("--seed", type=int, default=0, help="first seed (default: %(default)s)")
    b.add_argument("--num-jobs", type=int, help="override the scenario's number of jobs")
    b.add_argument("--out-dir", type=Path,
                   help="results folder (default: results/<scenario> under the current directory)")
    b.add_argument("--resume", action="store_true", help="skip episodes already in the results folder")
    b.add_argument("--no-plots", action="store_true", help="write CSV/JSON only")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(fn=_cmd_benchmark)
    pl = sub.add_parser("plot", help="redraw the PNGs from saved results (benchmark.json or evaluate --out JSON)")
    pl.add_argument("file", type=Path, help="benchmark.json, or an evaluate --out results list (no timeline)")
    pl.add_argument("--out-dir", type=Path, help="where the PNGs go (default: the file's folder)")
    pl.set_defaults(fn=_cmd_plot)
    r = sub.add_parser("run", help="simulate one episode with one agent and print its metrics")
    r.add_argument("--scenario", default=DEFAULT_SCENARIO)
    r.add_argument("--agent", default="fifo")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--num-jobs", type=int)
    r.set_defaults(fn=_cmd_run)
    e = sub.add_parser("evaluate", help="score agents on the same seeded episodes")
    e.add_argument("--agents", default="default",
                   help="comma list, a group (default, bace) or 'all'; model:PATH adds a saved SB3 model")
    e.add_argument("--scenario", default=DEFAULT_SCENARIO)
    e.add_argument("--seeds", type=int, default=3, help="number of seeds")
    e.add_argument("--seed", type=int, default=0, help="first seed")
    e.add_argument("--num-jobs", type=int)
    e.add_argument("--out", type=Path, help="JSON results file (written atomically after each episode)")
    e.add_argument("--resume", action="store_true", help="skip episodes already in --out")
    e.add_argument("--csv", type=Path, help="also write one CSV row per episode to this file")
    e.add_argument("--quiet", action="store_true")
    e.set_defaults(fn=_cmd_evaluate)
    t = sub.add_parser("train", help="train an SB3 policy (needs the rl extra)")
    t.add_argument("--algo", default="maskable-ppo")
    t.add_argument("--scenario", default=DEFAULT_SCENARIO)
    t.add_argument("--steps", type=int, default=50_000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--n-envs", type=int, default=1)
    t.add_argument("--num-jobs", type=int)
    t.add_argument("--out", type=Path, default=Path("runs"))
    t.add_argument("--no-tensorboard", action="store_true")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(fn=_cmd_train)
    sub.add_parser("scenarios", help="list bundled scenarios").set_defaults(fn=_cmd_scenarios)
    sub.add_parser("agents", help="list agents").set_defaults(fn=_cmd_agents)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for invalid input, with a message and no traceback)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ScenarioError as e:
        print(f"sfenv: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"sfenv: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as e:  # e.g. a model file that is missing or does not fit
        print(f"sfenv: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
