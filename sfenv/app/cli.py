"""The ``sfenv`` command line: benchmark, plot, run, evaluate, train, leaderboard, validate, list scenarios and agents.

Paths on the command line (``--scenario FILE``, ``--out``, ``--csv``, ``--out-dir``) resolve
against the current folder, and results are written there by default.  Every number is checked
where it enters (argparse types below).  Bad input, i.e. any :class:`sfenv.errors.SfenvError`
(scenario errors, unknown names, missing files, a missing ``rl`` extra) or an argparse error,
exits with code 2 and a one-line ``sfenv: ...`` message on stderr, before anything is written; so
do an output another sfenv process is writing (:class:`sfenv.runs.results.OutputInUse`) and an output
that cannot be written (:class:`sfenv.runs.results.OutputError`: a full disk, a folder that is a file,
no permission; what was saved before stays whole).  Ctrl-C at any point from sfenv's first import on
gives one ``sfenv: interrupted`` line and exit code 130.  Earlier, while Python itself starts (its
``site`` module, before any sfenv code runs: 26-59 ms measured on a loaded machine with an editable
install, most of it setuptools' editable finder), Ctrl-C is Python's own to report.  Any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import NoReturn, TypeAlias

import sfenv
from sfenv import interrupts
from sfenv.agents.learned import ALGOS
from sfenv.agents.registry import AGENTS, GROUPS, available_agents, describe
from sfenv.app.script import stdout_closed, with_choice_hint
from sfenv.errors import Interrupted, InvalidInput, MissingFile, SfenvError
from sfenv.runs import log_stderr, protocol
from sfenv.scenario import DEFAULT_SCENARIO, NAME_RULE, bundled_scenarios, load_scenario

__all__ = ["build_parser", "env_count", "job_count", "main", "non_negative_int", "positive_int", "seed_count"]

#: largest ``--seeds``: more episodes per agent than any study here needs (the evaluators hold one row each)
MAX_SEEDS = 100_000


def positive_int(text: str) -> int:
    """Argparse type: an integer > 0 (else argparse exits 2 naming the option)."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """Argparse type: an integer >= 0 (e.g. a seed)."""
    return _int_at_least(text, 0)


def job_count(text: str) -> int:
    """Argparse type: jobs per episode, 1 .. :data:`sfenv.scenario.MAX_JOBS`."""
    from sfenv.scenario import MAX_JOBS

    return _int_at_least(text, 1, MAX_JOBS)


def env_count(text: str) -> int:
    """Argparse type: parallel envs of a run, 1 .. :data:`sfenv.agents.learned.MAX_N_ENVS`."""
    from sfenv.agents.learned import MAX_N_ENVS

    return _int_at_least(text, 1, MAX_N_ENVS)


def seed_count(text: str) -> int:
    """Argparse type: a number of seeds, 1 .. :data:`MAX_SEEDS`."""
    return _int_at_least(text, 1, MAX_SEEDS)


def _int_at_least(text: str, low: int, high: int | None = None) -> int:
    expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high:,}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless the default is None/False or already shown."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "%(default)" in text or not action.option_strings or default is None or default is False \
                or default == argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors read ``sfenv: <command>: <message>`` and point to ``--help``."""

    def error(self, message: str) -> NoReturn:
        """Print the error and a hint, exit with code 2 (argparse's convention).

        An invalid choice gets the closest valid one (``did you mean``), as Python 3.14's argparse does.
        """
        where = self.prog.removeprefix("sfenv").strip()
        message = with_choice_hint(message)
        self.exit(2, f"sfenv: {where + ': ' if where else ''}{message}\nsee `{self.prog} --help`\n")


def _scenario_help() -> str:
    return (f"a bundled scenario ({', '.join(bundled_scenarios())}) or a YAML file (relative paths from the current "
            f"folder): {NAME_RULE}")


def _agents_help() -> str:
    return (f"comma list of agents ({', '.join(AGENTS)}), a group ({', '.join(GROUPS)}) or 'all'; "
            "model:PATH adds a model saved by sfenv train (its weights-only form, which loads no code), "
            "model:ALGO:PATH one from another SB3 trainer (e.g. model:ppo:logs/ppo/<run>/best_model.zip from the "
            "RL Zoo, with --trust-model-code); your own scheduler as module:Class[:kw=v,...] or "
            "path/to/file.py:Class[:kw=v,...] (values are JSON: 3, 0.5, true, \"text\"), or a NAME an installed "
            "package registers (entry points sfenv.agents); `sfenv agents` describes them")


def _cmd_run(args: argparse.Namespace) -> int:
    from sfenv.agents.registry import make_agent
    from sfenv.app.evaluate import quiet_solver_banner, run_episode

    sc = load_scenario(args.scenario)
    if args.num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": args.num_jobs})
    agent = make_agent(args.agent)
    quiet_solver_banner()  # after the input checks: an error message comes first on stderr
    row = run_episode(agent, sc, args.seed)
    print(f"scenario {sc.name}  agent {args.agent}  seed {args.seed}")
    print(f"  jobs finished        {row['finished']}/{row['jobs']}")
    print(f"  mean JCT             {row['mean_jct_s'] / 3600:.2f} h   (p95 {row['p95_jct_s'] / 3600:.2f} h)")
    print(f"  mean throughput      {row['mean_throughput_tokens_s']:.0f} tokens/s per job")
    print(f"  electricity cost     {row['cost_usd']:.2f} USD   energy {row['energy_kwh']:.1f} kWh")
    print(f"  egress cost          {row['egress_usd']:.2f} USD   (bytes between regions; {row['wan_tb']:.2f} TB)  "
          f"total {row['total_cost_usd']:.2f} USD")
    print(f"  GPU utilisation      {row['utilisation']:.2f}   makespan {row['makespan_s'] / 3600:.1f} h")
    print(f"  decision time        mean {1000 * row['decision_time_mean_s']:.2f} ms, "
          f"max {1000 * row['decision_time_max_s']:.1f} ms (wall clock, outside the simulation)")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    _resume_or_overwrite(args)
    from sfenv.agents.registry import resolve_names
    from sfenv.app.evaluate import (
        evaluate_agents,
        file_differences,
        format_table,
        quiet_solver_banner,
        run_settings,
        summarise,
        write_csv,
    )
    from sfenv.runs.results import SettingsMismatch, check_writable, pick_output

    names = resolve_names(args.agents)
    sc = load_scenario(args.scenario)
    if args.num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": args.num_jobs})
    choice = _seed_choice(args, sc.name)
    seeds = list(choice.seeds)
    backend = _backend(args)
    mode = "work-conserving" if args.work_conserving else args.play
    if args.work_conserving and args.play not in (None, "work-conserving"):
        raise InvalidInput(f"--work-conserving and --play {args.play}: give one of them")
    play = ({n: {"work_conserving": mode == "work-conserving"} for n in names if n.startswith("model:")}
            if mode is not None else None)
    if mode is not None and not play:
        option = "--work-conserving" if args.work_conserving else f"--play {mode}"
        raise InvalidInput(f"{option} plays saved models (model:PATH) {mode}; --agents names none")
    for path in (args.out, args.csv):  # a folder, or a path under a file: said now, not after the run
        if path is not None:
            check_writable(path)
    _not_an_input([("--out", args.out), ("--csv", args.csv)], args.scenario)
    out = args.out
    if out is not None and out.exists() and not args.overwrite:  # never mixed into, never replaced unasked
        settings = run_settings(names, sc, play, seeds=seeds, split=choice.split, record_actions=args.record_actions)
        diffs = file_differences(out, settings)
        if diffs and args.resume:
            raise SettingsMismatch(out, diffs)
        if diffs:
            out = pick_output(out, lambda p: not file_differences(p, settings))
            print(f"sfenv: {args.out} holds results of other settings ({'; '.join(diffs)}); writing to {out} "
                  "(--overwrite replaces it instead)", file=sys.stderr)
    if args.csv is not None:
        _check_csv(args.csv, [args.out, out], args.overwrite)
    quiet_solver_banner()
    ran: list[dict] = []
    rows = evaluate_agents(names, sc, seeds, out=out, progress=not args.quiet, overwrite=args.overwrite,
                           on_row=ran.append, record_actions=args.record_actions, split=choice.split,
                           agent_kwargs=play, trust_model_code=args.trust_model_code, **backend)
    summary = summarise([r for r in rows if r["agent"] in names and r["seed"] in seeds])
    print(f"scenario {sc.name}, {choice.describe()}")
    print(format_table(summary))
    if out:
        note = "" if ran else " (complete: every episode was already there)"
        print(f"results: {out}, {len(rows)} episodes, {len(ran)} run now{note}")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"episodes (CSV): {args.csv}")
    return 0


def _resume_or_overwrite(args: argparse.Namespace) -> None:
    """Refuse ``--resume`` with ``--overwrite``: continuing a file and replacing it are two different asks."""
    if args.resume and args.overwrite:
        raise InvalidInput("--resume continues the results there, --overwrite replaces them: give one of them")


def _not_an_input(outputs: list[tuple[str, Path | None]], scenario: str) -> None:
    """Refuse an output (``--out``, ``--csv``) that is the scenario file read as input, even with ``--overwrite``."""
    given = Path(scenario)
    if not given.is_file():
        return
    for option, path in outputs:
        if path is not None and path.exists() and path.samefile(given):
            raise InvalidInput(f"{option} {path} is the --scenario file; the run never writes over its input")


def _check_csv(csv: Path, outs: list[Path | None], overwrite: bool) -> None:
    """Refuse a ``--csv`` file that would replace something unasked: before any episode is run.

    Refused: a path that is not a regular file (a device, a FIFO), the ``--out`` file itself (also through
    a link), and an existing file without ``--overwrite``.

    :raises OutputError: for a path that is not a regular file.
    :raises InvalidInput: for the other two.
    """
    from sfenv.runs.results import check_regular

    check_regular(csv, "--csv")
    for out in outs:
        if out is not None and (csv.resolve() == out.resolve()
                                or (csv.exists() and out.exists() and csv.samefile(out))):
            raise InvalidInput(f"--csv {csv} is the --out results file {out}; give the CSV another name")
    if csv.exists() and not overwrite:
        raise InvalidInput(f"--csv {csv} exists; choose another file, or --overwrite to replace it "
                           "(and --out)")


def _seed_choice(args: argparse.Namespace, scenario: str | None) -> protocol.SeedChoice:
    """The seeds of ``--split``/``--seeds``/``--seed``, checked (:mod:`sfenv.runs.protocol`).

    ``--seed S --seeds N`` are the explicit seeds S..S+N-1.
    """
    explicit = None if args.seed is None else list(range(args.seed, args.seed + args.seeds))
    return protocol.resolve_seeds(args.split, args.seeds, explicit, scenario)


def _add_split_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split", choices=protocol.SPLITS,
                   help="the benchmark protocol's seed split (sfenv.runs.protocol): the first --seeds seeds of it "
                        "(default: test, unless --seed is given)")


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    _resume_or_overwrite(args)
    from sfenv.app.leaderboard import format_ranking, run_leaderboard
    from sfenv.runs.replay import Rejected
    from sfenv.runs.results import check_writable

    check_writable(args.out_dir, folder=True)  # a file in the way: said now, not after a scenario's episodes
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()] if args.scenarios is not None else None
    if scenarios == []:  # "--scenarios ," or "": naming none is not asking for all of them
        raise InvalidInput(f"--scenarios {args.scenarios!r}: no scenario named; give a comma list, or leave the "
                           "option out for every bundled scenario")
    try:
        res = run_leaderboard(args.out_dir, scenarios, args.agents, args.seeds, num_jobs=args.num_jobs,
                              resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
                              trust_model_code=args.trust_model_code, **_backend(args))
    except Rejected as e:  # an episode it would rank does not replay (an edited episodes file)
        print(f"sfenv: leaderboard: REJECTED {e}", file=sys.stderr)
        return 1
    settings = res["settings"]
    print(f"leaderboard: {len(settings['scenarios'])} scenarios x {len(settings['agents'])} agents, "
          f"the first {settings['seeds_per_scenario']} test seeds of each (protocol {settings['protocol']})")
    for name, cap in sorted(settings["caps"].items()):
        print(f"  {name}: capped at {cap} jobs per episode")
    print(format_ranking(res["rows"]))
    print("files:")
    for f in res["files"]:
        print(f"  {f}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    """Judge a leaderboard entry as a whole and replay every episode (``--replay-only``: only replay)."""
    from sfenv.app.evaluate import check_agent_settings
    from sfenv.runs.entry import check_entry
    from sfenv.runs.replay import Rejected, check_split_label, entry_rows, validate_rows

    if args.replay_only and args.split is not None:
        raise InvalidInput("--split names the split an entry must claim; --replay-only judges no entry")
    from sfenv.runs.results import MAX_RESULTS_BYTES
    from sfenv.world.files import read_json

    if not args.file.exists():
        raise MissingFile(f"no entry file {args.file}")
    # a regular file under the cap only (/dev/zero there used to be read until memory ran out)
    data = read_json(args.file, "results file", MAX_RESULTS_BYTES)
    try:
        if args.replay_only:
            rows, claim = entry_rows(data, str(args.file)), None
            check_split_label(data.get("settings") if isinstance(data, dict) else None, rows)
        else:
            claim, rows = check_entry(data, str(args.file), split=args.split or "test",
                                      check_agent=check_agent_settings)
        n = validate_rows(rows, args.scenario)
    except Rejected as e:
        print(f"sfenv: validate: REJECTED {args.file}: {e}", file=sys.stderr)
        return 1
    if claim is None:
        print(f"replayed: {n} episodes of {args.file}, each to its end, every metric reproduced (--replay-only: "
              "not judged as an entry; its agents, seeds, split and settings are unchecked)")
    else:
        print(f"valid entry {args.file}: {claim.describe()}; {n} episodes replayed to their end, "
              "every metric reproduced")
    return 0


def _cmd_benchmark(args: argparse.Namespace) -> int:
    _resume_or_overwrite(args)
    import time

    from sfenv.app.benchmark import run_benchmark
    from sfenv.app.evaluate import format_table
    from sfenv.runs.results import check_writable

    t0 = time.perf_counter()
    if args.out_dir is not None:
        check_writable(args.out_dir, folder=True)
    choice = _seed_choice(args, None)
    res = run_benchmark(args.agents, args.scenario, args.seeds, choice.seeds[0], split=choice.split,
                        num_jobs=args.num_jobs,
                        out_dir=args.out_dir, resume=args.resume, progress=not args.quiet, plots=not args.no_plots,
                        overwrite=args.overwrite, trust_model_code=args.trust_model_code, **_backend(args))
    meta = res["meta"]
    print(f"benchmark: scenario {meta['scenario']}, {meta['num_jobs']} jobs, {choice.describe()} "
          f"({res['ran']} episodes run now)")
    print(format_table(res["summary"]))
    print("files:")
    for f in res["files"]:
        print(f"  {f}")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from sfenv.app.benchmark import write_plots

    if not args.file.is_file():
        raise MissingFile(f"no results file {args.file}")
    if args.out_dir is not None:
        from sfenv.runs.results import check_writable

        check_writable(args.out_dir, folder=True)  # a file in the way: one line, before any plot is drawn
    for f in write_plots(args.file, args.out_dir):
        print(f)
    return 0


def _backend(args: argparse.Namespace) -> dict:
    """The ``--backend/--address/--workers`` options as evaluator keywords, checked (and Ray imported) first."""
    from sfenv.runs.distributed import check_backend, import_ray

    check_backend(args.backend, args.address, args.workers)
    if args.backend == "ray":
        import_ray()  # a missing extra is reported before anything is written
    return {"backend": args.backend, "address": args.address, "workers": args.workers}


def _add_backend_options(p: argparse.ArgumentParser) -> None:
    from sfenv.runs.distributed import BACKENDS

    p.add_argument("--backend", default="serial", choices=BACKENDS,
                   help="serial: episodes one after the other here; ray: one Ray task per episode "
                        "(needs the ray extra: pip install \"sfenv[ray]\")")
    p.add_argument("--address", metavar="ADDR",
                   help="with --backend ray: join this Ray cluster (e.g. auto, or HEAD_IP:6379 of `ray start --head`) "
                        "instead of starting a local Ray")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="with --backend ray: episodes run at once, and CPUs of the local Ray (default: all CPUs)")


def _cmd_train_rllib(args: argparse.Namespace) -> int:
    """``sfenv train --algo rllib-ppo``: RLlib PPO with action masks (:func:`sfenv.agents.rllib.train_rllib`)."""
    import json

    from sfenv.agents.rllib import META_FILE, train_rllib
    from sfenv.runs.distributed import import_ray

    workers = 0 if args.workers is None else args.workers
    env_kwargs = {k: v for k, v in (("num_jobs", args.num_jobs), ("obs_mode", getattr(args, "obs_mode", None)))
                  if v is not None}
    common = {"workers": workers, "address": args.address, "progress": not args.quiet,
              "checkpoint_every": getattr(args, "checkpoint_every", None) or 0}
    if args.resume is not None:
        meta_path = Path(args.resume) / META_FILE
        if not meta_path.is_file():
            raise MissingFile(f"{args.resume}: not an rllib-ppo run folder (no {META_FILE})")
        meta = json.loads(meta_path.read_text())
        import_ray()
        path = train_rllib(meta["scenario_cfg"], args.steps or meta["total_timesteps"], meta["seed"],
                           env_kwargs=meta["env_kwargs"], algo_kwargs=meta["algo_kwargs"], resume=True,
                           run_dir=args.resume, trust_code=args.trust_model_code, **common)
    else:
        import_ray()
        path = train_rllib(args.scenario or DEFAULT_SCENARIO, args.steps or 50_000, args.seed or 0,
                           out_dir=args.out, env_kwargs=env_kwargs, **common)
    print(f"saved {path} (evaluate it as rllib:{path})")
    return 0


#: ``sfenv train --config none``: no config file, the built-in defaults (PPO from scratch, 200,000 steps)
NO_CONFIG = "none"
#: the config of a bare ``sfenv train`` (maskable-ppo): a first run of a few minutes that beats FIFO
DEFAULT_TRAIN_CONFIG = "quick"


def _default_config(algo: str | None) -> str:
    """The config ``sfenv train`` uses without ``--config``: ``quick`` for maskable-ppo, none for the others."""
    return DEFAULT_TRAIN_CONFIG if algo in (None, "maskable-ppo") else NO_CONFIG


def _is_rllib_run(args: argparse.Namespace) -> bool:
    from sfenv.agents.rllib import ALGO, META_FILE

    return args.algo == ALGO or (args.resume is not None and (Path(args.resume) / META_FILE).is_file())


def _cmd_train(args: argparse.Namespace) -> int:
    if args.trust_model_code and args.resume is None:
        raise InvalidInput("--trust-model-code applies to --resume (a new run loads no model file)")
    if args.resume is None:
        from sfenv.runs.results import check_writable

        check_writable(args.out, folder=True)  # a file in the way: one line now, not a traceback after the set-up
    if _is_rllib_run(args):
        return _cmd_train_rllib(args)
    if args.workers is not None or args.address is not None:
        raise InvalidInput("--workers and --address apply to --algo rllib-ppo only (SB3 algorithms: --n-envs)")
    from sfenv.agents.learned import RECIPE_DEFAULTS, load_config, parse_hp, run_summary, train

    log = None if args.quiet else log_stderr  # training progress on stderr (stdout keeps the result lines)
    if args.resume is not None:
        path = train(total_timesteps=args.steps or RECIPE_DEFAULTS["steps"], resume=args.resume,
                     progress_bar=not args.quiet, plot=not args.no_plot, log=log, trust_code=args.trust_model_code)
        print(f"saved {path} (best: {path.with_name('best_model.zip')})")
        print(run_summary(path.parent))
        return 0
    cfg = dict(RECIPE_DEFAULTS)
    config = args.config if args.config is not None else _default_config(args.algo)
    if config != NO_CONFIG:
        cfg.update(load_config(config))
    cli = {"algo": args.algo, "scenario": args.scenario, "eval_scenario": args.eval_scenario, "steps": args.steps,
           "seed": args.seed, "n_envs": args.n_envs, "normalize": args.normalize, "eval_every": args.eval_every,
           "checkpoint_every": args.checkpoint_every}
    cfg.update({k: v for k, v in cli.items() if v is not None})
    if args.eval_seeds is not None or args.eval_split is not None:
        from sfenv.runs import protocol

        if args.eval_split == "test":
            raise InvalidInput("--eval-split test: the evaluation selects the model, and nothing is chosen on the "
                               "test split (sfenv.runs.protocol); use validation")
        cfg["eval_seeds"] = protocol.seeds(args.eval_split or "validation", args.eval_seeds or len(cfg["eval_seeds"]))
    if args.baselines is not None:
        from sfenv.agents.plugins import split_agent_list

        cfg["baselines"] = [b.strip() for b in split_agent_list(args.baselines) if b.strip()]
        if not cfg["baselines"]:
            raise InvalidInput(f"--baselines {args.baselines!r}: no agent named; give a comma list such as "
                               "fifo,spinsearch")
    env_kwargs = dict(cfg["env_kwargs"] or {})
    if args.num_jobs is not None:
        env_kwargs["num_jobs"] = args.num_jobs
    if args.obs_mode is not None:
        env_kwargs["obs_mode"] = args.obs_mode
    hp = {**(cfg["hp"] or {}), **parse_hp(args.hp or [])}
    pretrain = cfg.get("pretrain")
    if args.pretrain_steps is not None:
        pretrain = None if args.pretrain_steps == 0 else {**(pretrain or {}), "steps": args.pretrain_steps}
    if pretrain is not None:
        env_kwargs.setdefault("proposers", "best")
    path = train(cfg["algo"], cfg["scenario"], cfg["steps"], cfg["seed"], cfg["n_envs"], args.out,
                 env_kwargs=env_kwargs, algo_kwargs=hp, tensorboard=not args.no_tensorboard,
                 checkpoint_every=cfg["checkpoint_every"], progress_bar=not args.quiet, normalize=cfg["normalize"],
                 eval_every=cfg["eval_every"], eval_seeds=cfg["eval_seeds"], eval_scenario=cfg["eval_scenario"],
                 baselines=cfg["baselines"], plot=not args.no_plot, pretrain=pretrain, log=log,
                 policy=cfg["policy"], play=cfg["play"], play_env=cfg["play_env"],
                 play_defer=cfg["play_defer"])
    print(f"saved {path} (best: {path.with_name('best_model.zip')})")
    print(run_summary(path.parent))
    return 0


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from sfenv.registration import ENV_IDS

    rows = []
    for name in bundled_scenarios():
        sc = load_scenario(name)
        topo = sc.topology
        ids = ", ".join(i for i, s in ENV_IDS.items() if s == name) or "-"
        rows.append((name, ids, f"{topo.num_regions} regions, {topo.num_links} links, {topo.total_gpus} GPUs",
                     sc.cfg.description))
    header = ("SCENARIO", "GYM IDS", "TOPOLOGY", "DESCRIPTION")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3])
    return 0


def _cmd_agents(args: argparse.Namespace) -> int:
    avail = set(available_agents())
    for name in AGENTS:
        print(f"{name:<11} {describe(name) if name in avail else '(not installed)'}")
    for g, names in GROUPS.items():
        print(f"group {g}: {', '.join(names)}")
    from sfenv.agents.bace_baselines import WHEN_IDENTICAL

    print(f"note: {WHEN_IDENTICAL} (docs/agents.md)")
    print("model:PATH  a policy saved by `sfenv train`, loaded from its weights-only form (PATH.policy.json and "
          ".policy.npz beside the .zip), which runs no code (evaluate, benchmark and leaderboard)")
    print(f"model:ALGO:PATH  an SB3 model saved elsewhere, e.g. by the RL Zoo, with its algorithm ALGO "
          f"({', '.join(ALGOS)}): model:ppo:logs/ppo/sfenv-GeoSchedUnmasked-v6_1/best_model.zip; an SB3 .zip is "
          "code, so it needs --trust-model-code (or `sfenv export-model PATH --trust-model-code` once)")
    print("rllib:PATH  an RLlib PPO checkpoint saved by `sfenv train --algo rllib-ppo` (needs the ray extra and "
          "--trust-model-code: a checkpoint is code)")
    _print_plugins()
    return 0


def _print_plugins() -> None:
    """The plug-in forms of ``--agents`` and the agents installed packages register (``sfenv agents``)."""
    from sfenv.agents.plugins import ENTRY_POINT_GROUP, entry_point_agents

    print("module:Class[:kw=v,...]  your scheduler class from an importable module (or the current folder), "
          "built with keywords whose values are JSON (3, 0.5, true, \"text\"); rows are named by the spec")
    print("path/to/file.py:Class[:kw=v,...]  the same from a Python file (its __main__ block does not run)")
    installed = entry_point_agents()
    if not installed:
        print(f"(no installed package registers agents in the entry-point group {ENTRY_POINT_GROUP})")
    for name, ep in installed.items():
        note = " (shadowed by the built-in of that name)" if name in AGENTS or name in GROUPS else ""
        print(f"{name:<11} plug-in {ep.value} from entry point group {ENTRY_POINT_GROUP}{note}")


#: the sub-commands' parsers are added to this (``build_parser``'s ``add_subparsers``)
_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


def _command(sub: _Commands, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` (``summary`` in the command list, ``description`` atop its help)."""
    return sub.add_parser(name, help=summary, description=description or summary, formatter_class=_HelpFormatter)


def _add_benchmark(sub: _Commands) -> None:
    """``sfenv benchmark``: the main job (:func:`_cmd_benchmark`)."""
    b = _command(sub, "benchmark", "the main job: score the default agents over seeds, save CSV/JSON and plots",
                 "Run agents on the same seeded episodes; print mean ± 95 % CI over seeds; write "
                 "episodes.csv/.json, benchmark.json and PNGs to ./results/<scenario>/.")
    b.add_argument("--agents", default="default", metavar="LIST", help=_agents_help())
    b.add_argument("--scenario", default=DEFAULT_SCENARIO, metavar="NAME|FILE", help=_scenario_help())
    b.add_argument("--seeds", type=seed_count, default=10, metavar="N", help="number of seeds (1..100,000)")
    _add_split_option(b)
    b.add_argument("--seed", type=non_negative_int, metavar="S",
                   help="explicit seeds S..S+N-1 instead of a split (>= 0; labelled 'explicit seeds')")
    b.add_argument("--num-jobs", type=job_count, metavar="N",
                   help="jobs per episode (1..100,000; default: the scenario's workload.num_jobs)")
    b.add_argument("--out-dir", type=Path, metavar="DIR",
                   help="results folder (default: results/<scenario> under the current folder)")
    b.add_argument("--resume", action="store_true",
                   help="continue the results folder, refusing it if it holds other settings (without --resume "
                        "a folder of the same settings is continued too, one of other settings is left alone "
                        "and the results go beside it, e.g. results/spider-8-2)")
    b.add_argument("--overwrite", action="store_true", help="replace the results files in the folder")
    b.add_argument("--no-plots", action="store_true", help="write CSV/JSON only")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_option(b)
    _add_backend_options(b)
    b.set_defaults(fn=_cmd_benchmark)


def _add_plot(sub: _Commands) -> None:
    """``sfenv plot``: redraw the PNGs of saved results (:func:`_cmd_plot`)."""
    pl = _command(sub, "plot", "redraw the PNGs from saved results (benchmark.json or evaluate --out JSON)")
    pl.add_argument("file", type=Path, help="benchmark.json, or an evaluate --out results list (no timeline)")
    pl.add_argument("--out-dir", type=Path, metavar="DIR", help="where the PNGs go (default: the file's folder)")
    pl.set_defaults(fn=_cmd_plot)


def _add_run(sub: _Commands) -> None:
    """``sfenv run``: one episode with one agent (:func:`_cmd_run`)."""
    r = _command(sub, "run", "simulate one episode with one agent and print its metrics")
    r.add_argument("--scenario", default=DEFAULT_SCENARIO, metavar="NAME|FILE", help=_scenario_help())
    r.add_argument("--agent", default="fifo", choices=list(AGENTS), metavar="NAME",
                   help=f"the agent, one of: {', '.join(AGENTS)} (`sfenv agents` describes them)")
    r.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                   help="episode seed (>= 0): the same seed gives the same jobs, prices and outages")
    r.add_argument("--num-jobs", type=job_count, metavar="N",
                   help="jobs in the episode (1..100,000; default: the scenario's workload.num_jobs)")
    r.set_defaults(fn=_cmd_run)


def _add_evaluate(sub: _Commands) -> None:
    """``sfenv evaluate``: agents on the same seeded episodes (:func:`_cmd_evaluate`)."""
    e = _command(sub, "evaluate", "score agents on the same seeded episodes and print a table")
    e.add_argument("--agents", default="default", metavar="LIST", help=_agents_help())
    e.add_argument("--scenario", default=DEFAULT_SCENARIO, metavar="NAME|FILE", help=_scenario_help())
    e.add_argument("--seeds", type=seed_count, default=3, metavar="N", help="number of seeds (1..100,000)")
    _add_split_option(e)
    e.add_argument("--seed", type=non_negative_int, metavar="S",
                   help="explicit seeds S..S+N-1 instead of a split (>= 0; labelled 'explicit seeds')")
    e.add_argument("--record-actions", action="store_true",
                   help="record each episode's action log, the scenario's hash and the env version in --out, "
                        "making it an entry `sfenv validate` can judge and replay (an entry holds the first "
                        f"{protocol.MIN_ENTRY_SEEDS} or more seeds of the test split)")
    e.add_argument("--num-jobs", type=job_count, metavar="N",
                   help="jobs per episode (1..100,000; default: the scenario's workload.num_jobs)")
    e.add_argument("--play", choices=("as-trained", "work-conserving"), default=None, metavar="MODE",
                   help="how to play every model:PATH agent: as-trained (the env it was trained in) or "
                        "work-conserving (wait masked while a candidate can start, the env's work_conserving); "
                        "recorded in --out's settings (default: the play mode its recipe recorded, play: in "
                        "the training config; as trained if none)")
    e.add_argument("--work-conserving", action="store_true", help="the same as --play work-conserving")
    e.add_argument("--out", type=Path, metavar="FILE",
                   help="JSON results file, rewritten atomically every few seconds as episodes finish, at the end "
                        "and on Ctrl-C; one sfenv process writes it at a time (default: none)")
    e.add_argument("--resume", action="store_true",
                   help="continue --out, refusing it if it holds other settings (scenario, its hash, job count, "
                        "agents' settings, version); without --resume a file of the same settings is continued "
                        "too, one of other settings is left alone and the results go beside it (FILE-2.json)")
    e.add_argument("--overwrite", action="store_true", help="replace --out instead of continuing it")
    e.add_argument("--csv", type=Path, metavar="FILE", help="also write one CSV row per episode to this file")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_option(e)
    _add_backend_options(e)
    e.set_defaults(fn=_cmd_evaluate)


def _add_train(sub: _Commands) -> None:
    """``sfenv train``: train a policy (:func:`_cmd_train`)."""
    t = _command(sub, "train", "train an SB3 policy (needs the rl extra: pip install \"sfenv[rl]\")",
                 "Train an SB3 / sb3-contrib policy with sfenv's recipe (VecNormalize, tuned defaults, several envs, "
                 "evaluation on held-out seeds that keeps the best model). Each run gets its own folder "
                 "<out>/<algo>-<scenario>-s<seed>[-N] with model.zip, best_model.zip (+ .json sidecars, "
                 "VecNormalize statistics and each model's weights-only form .policy.json/.policy.npz, which "
                 "model:PATH loads without running code), config.yml, eval.json, learning_curve.png, checkpoints/ "
                 "and tb/ (TensorBoard). Settings: built-in defaults < --config file (default: quick) < options given "
                 "here. Progress goes to stderr; the last line compares the best model's held-out mean JCT with "
                 "FIFO's and the best heuristic's. Needs the rl extra: pip install \"sfenv[rl]\".")
    _add_train_run_options(t)
    _add_train_eval_options(t)
    _add_train_output_options(t)
    t.set_defaults(fn=_cmd_train)


def _add_train_run_options(t: argparse.ArgumentParser) -> None:
    """``sfenv train``'s options of what is trained: config, algorithm, scenario, steps, env and hyperparameters."""
    t.add_argument("--config", metavar="NAME|FILE",
                   help="YAML settings (keys: algo, scenario, steps, n_envs, normalize, env_kwargs, hp, eval_seeds, "
                        "...): a file (with a path separator or a .yml/.yaml suffix), or a bundled name under "
                        "sfenv/hyperparams/train-NAME.yml; 'none': the "
                        "built-in defaults (PPO from scratch on spider-8, 200000 steps) (default: quick, a few "
                        "minutes: clone a look-ahead expert on spider-8-contended, then PPO; with --algo other "
                        "than maskable-ppo: none)")
    t.add_argument("--algo", choices=[*ALGOS, "rllib-ppo"],
                   help="algorithm (default: maskable-ppo): maskable-ppo (action masks, Dict observation) or "
                        "ppo/a2c/dqn (flattened observation, no masks); rllib-ppo: RLlib PPO with action masks "
                        "(ray extra; --workers env runners, --address, --resume RUN_DIR)")
    t.add_argument("--scenario", metavar="NAME|FILE", help=_scenario_help() + f" (default: {DEFAULT_SCENARIO})")
    t.add_argument("--steps", type=positive_int, metavar="N",
                   help="environment steps of the run (> 0; default: the config's, 2048 for quick, 200000 with "
                        "--config none); with --resume the total to reach")
    t.add_argument("--seed", type=non_negative_int, metavar="S",
                   help="seed of the algorithm and the envs (>= 0; default: 0)")
    t.add_argument("--n-envs", type=env_count, metavar="N",
                   help="parallel envs (1..256, sfenv.agents.learned.MAX_N_ENVS; default: 4)")
    t.add_argument("--num-jobs", type=job_count, metavar="N",
                   help="jobs per episode (1..100,000; default: the scenario's workload.num_jobs)")
    t.add_argument("--obs-mode", choices=["full", "compact"],
                   help="observation: full (per region and link) or compact (size independent of the topology, "
                        "so the policy runs on other platforms) (default: full)")
    t.add_argument("--normalize", choices=["all", "reward", "none"],
                   help="VecNormalize on observations and rewards, rewards only, or none (default: all); "
                        "the statistics are saved with the model and applied at evaluation")
    t.add_argument("--hp", action="append", metavar="KEY=VALUE",
                   help="an SB3 hyperparameter, repeatable, YAML values (e.g. --hp gamma=0.999 "
                        "--hp policy_kwargs.net_arch=[64,64]); over the config's hp and the tuned defaults")


def _add_train_eval_options(t: argparse.ArgumentParser) -> None:
    """``sfenv train``'s options of the held-out evaluations that select the best model, and the baselines."""
    t.add_argument("--eval-every", type=non_negative_int, metavar="N",
                   help="steps between evaluations on held-out seeds (0: at the end only; default: a tenth of "
                        "the run, at least 2048)")
    t.add_argument("--eval-seeds", type=seed_count, metavar="N",
                   help="held-out evaluation episodes: the first N seeds of --eval-split (> 0; default: 5)")
    t.add_argument("--eval-split", choices=["validation", "train", "test"],
                   help="protocol split of the evaluation seeds that select the best model (sfenv.runs.protocol; "
                        "default: validation; never test)")
    t.add_argument("--eval-scenario", metavar="NAME|FILE",
                   help="scenario of the evaluations (default: the training scenario)")
    t.add_argument("--baselines", metavar="LIST",
                   help="comma list of agents drawn as levels on the learning curve (default: fifo,spinsearch)")


def _add_train_output_options(t: argparse.ArgumentParser) -> None:
    """``sfenv train``'s options of warm start, checkpoints, resuming, outputs, progress and RLlib's Ray."""
    t.add_argument("--pretrain-steps", type=non_negative_int, metavar="N",
                   help="behaviour-cloning warm start from fastest+swf before PPO: N expert steps per "
                        "round (0: none; default: the config's pretrain, else none); needs maskable-ppo, and "
                        "sets the env's proposers to best")
    t.add_argument("--checkpoint-every", type=non_negative_int, metavar="N",
                   help="save a checkpoint every N steps (0: none; default: 0)")
    t.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue a run folder from its newest model or checkpoint up to --steps in total "
                        "(its config.yml gives every other setting); needs --trust-model-code, since it loads "
                        "the run's SB3 .zip and VecNormalize .pkl (pickles)")
    t.add_argument("--trust-model-code", action="store_true",
                   help="with --resume: allow loading the run's pickled files (they can run any program; only "
                        "a run folder you trust)")
    t.add_argument("--out", type=Path, default=Path("runs"), metavar="DIR",
                   help="folder for the run folders (relative to the current folder)")
    t.add_argument("--no-tensorboard", action="store_true", help="do not write TensorBoard logs")
    t.add_argument("--no-plot", action="store_true",
                   help="no learning_curve.png (and no baseline episodes for its levels)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--workers", type=non_negative_int, metavar="N",
                   help="rllib-ppo only: remote Ray env runners (0: sample in this process; default: 0)")
    t.add_argument("--address", metavar="ADDR", help="rllib-ppo only: the Ray cluster to join (default: a local Ray)")


def _add_trust_option(p: argparse.ArgumentParser) -> None:
    """The ``--trust-model-code`` option of the commands that play saved policies."""
    p.add_argument("--trust-model-code", action="store_true",
                   help="allow saved policies whose files run code when loaded: an SB3 .zip without its "
                        "weights-only form (PATH.policy.json/.npz), its VecNormalize .pkl, an RLlib checkpoint "
                        "(pickles: they can run any program; only for files you trust)")


def _add_export_model(sub: _Commands) -> None:
    """``sfenv export-model``: the weights-only form of an SB3 zip (:func:`_cmd_export_model`)."""
    x = _command(sub, "export-model", "write the weights-only form of an SB3 .zip you trust (loads no code)",
                 "Load an SB3 .zip (and its sidecar and VecNormalize statistics) and write its weights-only form "
                 "beside it: for NAME.zip, NAME.policy.json (architecture, spaces, settings) and NAME.policy.npz "
                 "(weights and normalisation statistics). model:NAME.zip then loads that form, which runs no code "
                 "and plays the same actions. Loading the .zip runs code from it, hence --trust-model-code. sfenv "
                 "train writes this form itself.")
    x.add_argument("path", metavar="[ALGO:]PATH",
                   help="the SB3 .zip; ALGO:PATH names the algorithm of a zip without a sidecar "
                        "(e.g. ppo:best_model.zip)")
    x.add_argument("--trust-model-code", action="store_true",
                   help="required: you trust the .zip and its pickles (loading them can run any program)")
    x.set_defaults(fn=_cmd_export_model)


def _cmd_export_model(args: argparse.Namespace) -> int:
    from sfenv.agents.learned import export_policy

    spec = export_policy(args.path, trust_code=args.trust_model_code)
    weights = spec.with_name(spec.name.removesuffix(".json") + ".npz")
    print(f"wrote {spec} and {weights} (model:{spec} loads them without running code)")
    return 0


def _add_leaderboard(sub: _Commands) -> None:
    """``sfenv leaderboard``: every agent on the test split of each bundled scenario (:func:`_cmd_leaderboard`)."""
    lb = _command(sub, "leaderboard", "every reference agent on the test split of each bundled scenario, ranked",
                  "Play agents on the first --seeds test seeds (sfenv.runs.protocol) of each bundled scenario "
                  "(spider-64 capped at 12 jobs, as the claims are) and write leaderboard.md, .csv, .html and "
                  ".json to --out-dir. Episodes are saved with their action logs as they finish; --resume continues "
                  "an interrupted run. Every episode ranked, those of earlier runs included, is replayed and must "
                  "reproduce its metrics: an edited episodes file is refused (exit 1, naming the file and row; "
                  "--overwrite plays its episodes again).")
    lb.add_argument("--agents", default="default", metavar="LIST",
                    help=_agents_help() + "; rllib:PATH adds an RLlib checkpoint")
    lb.add_argument("--scenarios", metavar="LIST", help="comma list of bundled scenarios (default: all bundled)")
    lb.add_argument("--seeds", type=seed_count, default=10, metavar="N", help="test seeds per scenario (1..100,000)")
    lb.add_argument("--num-jobs", type=job_count, metavar="N", help="cap on the jobs per episode of every scenario")
    lb.add_argument("--out-dir", type=Path, default=Path("leaderboard"), metavar="DIR", help="output folder")
    lb.add_argument("--resume", action="store_true",
                    help="continue the episodes already in --out-dir (they are continued anyway when their settings "
                         "match; with --resume, other settings are refused)")
    lb.add_argument("--overwrite", action="store_true", help="replace the episodes already in --out-dir")
    lb.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_trust_option(lb)
    _add_backend_options(lb)
    lb.set_defaults(fn=_cmd_leaderboard)


def _add_validate(sub: _Commands) -> None:
    """``sfenv validate``: replay a submitted entry (:func:`_cmd_validate`)."""
    v = _command(sub, "validate", "judge a submitted leaderboard entry and replay every episode",
                 "Check that the file is a whole leaderboard entry (its settings, each agent's and each row's only "
                 "the keys sfenv evaluate writes, of their JSON types; one episode per agent and seed; "
                 f"every agent on the same first N >= {protocol.MIN_ENTRY_SEEDS} seeds of the test split; every "
                 "episode on the settings' scenario, hash and job count; this env version), then replay each "
                 "episode's recorded actions (sfenv evaluate --record-actions) to the episode's end and compare "
                 "every metric. Exit 0 if all holds (the line says what was validated), 1 (naming the first "
                 "problem) if not, 2 for unreadable input. A replay shows that the metrics follow from the "
                 "actions, not who chose them (docs/protocol.md).")
    v.add_argument("file", type=Path, help="the entry: a results file written with sfenv evaluate --record-actions")
    v.add_argument("--scenario", metavar="NAME|FILE",
                   help="the scenario file the entry was played on, given by you (default: each row's scenario, "
                        "as a bundled name only; a path in the file is never read)")
    v.add_argument("--split", choices=protocol.SPLITS,
                   help="the split the entry must claim (default: test, the leaderboard's)")
    v.add_argument("--replay-only", action="store_true",
                   help="only replay each row (to its episode's end) and compare its metrics; do not judge the "
                        "file as an entry (any seeds, split or settings, fewer seeds)")
    v.set_defaults(fn=_cmd_validate)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = _Parser(prog="sfenv", description="Geo-distributed LLM training scheduling testbed. "
                "Paths are relative to the current folder; results are written there.",
                formatter_class=_HelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for add in (_add_benchmark, _add_plot, _add_run, _add_evaluate, _add_train, _add_export_model, _add_leaderboard,
                _add_validate):
        add(sub)
    scenarios = _command(sub, "scenarios", "list the bundled scenarios (name, topology, description)")
    scenarios.set_defaults(fn=_cmd_scenarios)
    _command(sub, "agents", "list the agents with one line each, and the groups").set_defaults(fn=_cmd_agents)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for invalid input, with a message and no traceback).

    Only sfenv's own errors (:class:`sfenv.errors.SfenvError`: bad input, an output another process is
    writing, an output that cannot be written such as a full disk) and argparse's count as invalid input;
    any other exception propagates with its traceback, since it is a bug.  Ctrl-C at any point, from the
    command's first import on (see ``sfenv/__init__.py``), gives one ``sfenv: interrupted ...`` line and
    exit code 130; SIGTERM (``kill PID``) in the ``sfenv`` command is handled the same way, with one
    ``sfenv: terminated (SIGTERM) ...`` line and exit code 143 (128 + 15).
    """
    try:
        _ctrl_c_raises()
        return _run(argv)
    except SfenvError as e:
        print(f"sfenv: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C: one line (what was saved, how to go on), the shell's code 130
        said = str(e) if isinstance(e, Interrupted) else "interrupted"
        if interrupts.terminated():  # SIGTERM, handled as Ctrl-C: the same line, the shell's code 143
            print(f"sfenv: terminated (SIGTERM){said.removeprefix('interrupted')}", file=sys.stderr)
            return 128 + int(signal.SIGTERM)
        print(f"sfenv: {said}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like, which stopped reading
        return stdout_closed()


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its command; argparse's exits (``--help``, a usage error) return their code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2, message already printed)
        return int(e.code or 0)
    return int(args.fn(args))


def _ctrl_c_raises() -> None:
    """From here on Ctrl-C raises ``KeyboardInterrupt`` (the one-line exit of the start-up ends).

    The sfenv command (console script or ``python -m sfenv``) starts with a SIGINT handler that prints one
    line and exits 130 while it imports (``sfenv/__init__.py``); the runs need ``KeyboardInterrupt`` back,
    to save what they finished.  Its SIGTERM handler of the start-up likewise gives way to one that raises
    :class:`sfenv.interrupts.Terminated` (a ``KeyboardInterrupt``: :func:`sfenv.interrupts.sigterm_raises`).
    A no-op anywhere else (tests and programs calling :func:`main`).
    """
    if signal.getsignal(signal.SIGINT) is sfenv._interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is sfenv._terminated_while_starting:
        interrupts.sigterm_raises()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
