"""Learned policy vs the best heuristic (issue 11 targets): train with the sfenv recipe, test on unseen seeds.

Trains MaskablePPO with ``sfenv train``'s recipe (default config ``contended``: compact observation,
VecNormalize, 4 envs, evaluation on seeds 10000..10004 that keeps the best model) on the training
scenario (``spider-8-contended`` when bundled, else ``spider-8``), then plays the best model and
every reference agent on the seeds of a protocol split (:mod:`sfenv.runs.protocol`: ``--split``, by
default the first 20 of ``test``; ``--first-seed S`` plays explicit seeds ``S..S+N-1`` instead,
labelled "explicit seeds") and reports per agent the censored mean
JCT (unfinished jobs counted), cost and unfinished jobs, and the learned policy's ratio of mean JCT
to the best heuristic's (lowest mean over the seeds, ordering baselines included) with a paired
bootstrap 95 % CI over seeds (:func:`sfenv.runs.stats.paired_ratio`, BCa).  Beside JCT it reports, per
agent, what the schedule costs and moves: electricity (``cost_usd``), egress (``egress_usd``, bytes
billed between regions), their sum (``total_cost_usd``) and the TB sent between regions (``wan_tb``),
each with the learned policy's paired ratio to the best heuristic's (None where that heuristic's
mean is 0, e.g. one that moves nothing across regions), and operational carbon (``carbon_kg``).
Against the heuristic best by the reward's objective, and the best carbon-aware one (the ``carbon``
group, any ordering) by that objective, it gives the ratios of the objective, JCT, cost and carbon
apart (``vs_best_objective``, ``vs_best_carbon_aware``).  Results go to
``<out>/learned_vs_heuristics.json``.  ``--unseen NAMES`` tests the model on other scenarios too
(``--unseen-reward``: with the training scenario's reward weights);
``--unseen-generated N`` on the first N generated platforms of the protocol's test split (platforms
no training config may use), pooled over (platform, seed) pairs with one best heuristic for the family.
The model is played in its recipe's play mode (the config's ``play:``, recorded in the model's
metadata, :data:`sfenv.agents.learned.PLAY_MODES`), the mode its best model was kept by;
``--play as-trained`` or ``--play work-conserving`` (``--work-conserving``: wait masked while a
candidate can start, :class:`sfenv.env.GeoSchedEnv`'s ``work_conserving``) plays it otherwise, and
the results record the mode played (``play``).

Run (about 30 minutes at the default 150k steps on 2 cores)::

    python -m sfenv.experiments.learned_vs_heuristics --out results/learned
    python -m sfenv.experiments.learned_vs_heuristics --steps 20000 --seeds 5 --out /tmp/quick   # a quick look
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sfenv.agents.learned import PLAY_MODES, LearnedPolicy, load_config, train

from sfenv.app.evaluate import evaluate_agents
from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_json
from sfenv.runs.stats import paired_ratio
from sfenv.scenario import Scenario, bundled_scenarios, load_scenario

HEURISTICS = ("fifo", "random", "spinsearch", "bace-pipe", "cr-ldf", "fastest", "fifo+swf", "fastest+swf",
              "spinsearch+swf", "spinsearch+fgf", "spinsearch+bace", "spantrain+swf")


def default_scenario() -> str:
    """``spider-8-contended`` when bundled, else ``spider-8``."""
    return "spider-8-contended" if "spider-8-contended" in bundled_scenarios() else "spider-8"


def paired_bootstrap_ratio(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Ratio ``mean(a) / mean(b)`` and its paired bootstrap 95 % interval over seeds.

    (:func:`sfenv.runs.stats.paired_ratio`.)

    :param a: per-seed values of the learned policy.
    :param b: per-seed values of the reference, same seeds in the same order.
    """
    return paired_ratio(a, b)


def reference_agents(text: str) -> list[str]:
    """The ``--heuristics`` names (comma list, repeats dropped), each checked by making the agent.

    An agent whose optional dependency is missing (an ``ImportError``) is left out with a note on
    stderr, as the default list may name one.

    :raises InvalidInput: for a name that is not an agent, or when no agent is left to compare with.
    """
    from sfenv.agents.registry import make_agent

    from sfenv.errors import UnknownName

    heuristics = []
    for h in dict.fromkeys(h.strip() for h in text.split(",") if h.strip()):
        try:
            make_agent(h)
        except UnknownName as e:
            raise InvalidInput(f"--heuristics: {e}") from None
        except ImportError as e:
            print(f"note: --heuristics: leaving out {h} ({e})", file=sys.stderr)
            continue
        heuristics.append(h)
    if not heuristics:
        raise InvalidInput(f"--heuristics {text!r:.80}: no reference agent to compare the model with")
    return heuristics


def main(argv: list[str] | None = None) -> dict:
    """Train, test and print the comparison; returns the results written to JSON."""
    p = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    p.add_argument("--config", default="contended", help="sfenv train config (bundled name or YAML file)")
    p.add_argument("--scenario", default=None,
                   help="training and test scenario (default: spider-8-contended or spider-8)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the config's)")
    protocol.add_seed_arguments(p, default_n=20, default_split="test")
    p.add_argument("--model", type=Path, default=None,
                   help="skip training: test this model (a .zip with its weights-only form beside it, as sfenv train "
                        "saves it, or that form's .policy.json)")
    p.add_argument("--unseen", default="",
                   help="comma list of scenarios the model never trained on, to test it there too (against FIFO "
                        "and the best heuristic; needs a compact-observation model)")
    p.add_argument("--unseen-reward", action="store_true",
                   help="play the --unseen scenarios with the training scenario's reward weights (e.g. its carbon "
                        "weight on a scenario without one); results are keyed 'NAME (reward of SCENARIO)'")
    p.add_argument("--unseen-generated", type=int, default=0, metavar="N",
                   help="also test on the first N generated platforms of the protocol's split (the seeds' "
                        "split: validation platforms with --split validation, else test platforms; "
                        "sfenv.agents.learned.generated_platforms), each on the same seeds, pooled")
    p.add_argument("--unseen-cloud", type=int, default=0, metavar="N",
                   help="also test on the first N cloud-like generated platforms of the protocol's split (as "
                        "--unseen-generated, family 'cloud': sfenv.runs.protocol.CLOUD_FAMILY), pooled")
    p.add_argument("--heuristics", default=",".join(HEURISTICS), help="comma list of reference agents to compare with")
    p.add_argument("--num-jobs", type=int, default=None, help="jobs per test episode (default: the scenario's)")
    p.add_argument("--play", choices=PLAY_MODES, default=None,
                   help="how to play the model (default: its recipe's play mode, recorded in the model; as trained "
                        "if none): as-trained, or work-conserving (wait masked while a candidate can start)")
    p.add_argument("--work-conserving", action="store_true", help="the same as --play work-conserving")
    p.add_argument("--episodes", type=Path, default=None, metavar="DIR",
                   help="save each scenario's episodes in DIR/<scenario>.json and continue a file of the same "
                        "settings: the heuristics are played once for several models (default: not saved)")
    p.add_argument("--out", type=Path, default=Path("results/learned"))
    args = p.parse_args(argv)
    choice = protocol.seed_choice_from_args(args, parser=p)
    for flag in ("unseen_generated", "unseen_cloud"):
        if getattr(args, flag) < 0:
            p.error(f"argument --{flag.replace('_', '-')}: expected an integer >= 0, got {getattr(args, flag)}")
    if args.work_conserving and args.play not in (None, "work-conserving"):
        p.error(f"--work-conserving and --play {args.play}: give one of them")
    if args.model is not None and not args.model.is_file():
        p.error(f"argument --model: no such model file {args.model} (sfenv train writes <out>/<run>/best_model.zip)")
    heuristics = reference_agents(args.heuristics)  # before training: an unknown name is refused at once
    cfg = load_config(args.config)
    scenario = args.scenario or default_scenario()
    t0 = time.perf_counter()
    train_s: float | None = None  # not measured here for a model trained elsewhere (--model)
    if args.model is None:
        final = train(cfg.get("algo", "maskable-ppo"), scenario, args.steps or cfg.get("steps", 150_000),
                      cfg.get("seed", 0), cfg.get("n_envs", 4), args.out / "runs", env_kwargs=cfg.get("env_kwargs"),
                      algo_kwargs=cfg.get("hp"), normalize=cfg.get("normalize", "all"),
                      baselines=cfg.get("baselines", ["fifo", "spinsearch"]), pretrain=cfg.get("pretrain"),
                      eval_seeds=cfg.get("eval_seeds"), eval_every=cfg.get("eval_every"),
                      policy=cfg.get("policy", "default"), play=cfg.get("play", "as-trained"),
                      play_env=cfg.get("play_env"))
        model = final.with_name("best_model.zip")
        train_s = time.perf_counter() - t0
    else:
        model = args.model
    seeds = list(choice.seeds)
    spec = f"model:{model}"
    mode = "work-conserving" if args.work_conserving else args.play
    play = {} if mode is None else {"work_conserving": mode == "work-conserving"}
    seed_split = choice.split
    saved: dict[str, Any] = {"episodes": args.episodes, "split": seed_split}
    loaded = LearnedPolicy(model, work_conserving=play.get("work_conserving"))
    played = loaded.play  # asked for, else recorded
    play_env = loaded.meta.get("play_env") or {}  # the recipe's play settings (e.g. the menu's floor), recorded
    result = {"scenario": scenario, **choice.record(), "model": str(model), "train_wall_s": train_s,
              "play": played, "work_conserving": played == "work-conserving", "play_env": play_env,
              "play_defer": None if loaded.play_defer is None else loaded.play_defer.record(),
              **compare(spec, heuristics, scenario, seeds, args.num_jobs, play=play, **saved)}
    floor = "".join(f", {key} {value}" for key, value in sorted(play_env.items()) if value is not None)
    if loaded.play_defer is not None:
        floor += f", {loaded.play_defer.describe()}"
    trained = "a model trained elsewhere" if train_s is None else f"training {train_s / 60:.1f} min"
    print(f"scenario {scenario}, {choice.describe()}, {trained}, the model played {played}"
          + (" (its recipe's play mode)" if mode is None else " (--play)") + floor)
    report(spec, result)
    result["unseen"] = {}
    for other in [s.strip() for s in args.unseen.split(",") if s.strip()]:
        target: Any = other
        saved_here = saved
        if args.unseen_reward:
            reward = load_scenario(scenario).cfg.reward.model_dump(exclude_none=True)
            target, other = load_scenario(other).with_overrides(reward=reward), f"{other} (reward of {scenario})"
            if args.episodes is not None:  # its episodes are not the scenario's own: a folder of their own
                saved_here = {**saved, "episodes": args.episodes / f"reward-of-{load_scenario(scenario).name}"}
        res = result["unseen"][other] = compare(spec, heuristics, target, seeds, args.num_jobs, play=play,
                                                **saved_here)
        print(f"unseen scenario {other}, {choice.describe()}")
        report(spec, res)
    platform_split = "validation" if choice.split == "validation" else "test"
    for key, family, count in (("unseen_generated", "generated", args.unseen_generated),
                               ("unseen_cloud", "cloud", args.unseen_cloud)):
        if not count:
            continue
        result[key] = compare_generated(spec, heuristics, count, seeds, args.num_jobs, split=platform_split,
                                        play=play, episodes=args.episodes, seed_split=saved["split"], family=family)
        print(f"unseen {'cloud-like ' if family == 'cloud' else ''}generated platforms ({platform_split} split, "
              f"{count}), {choice.describe()} on each")
        report(spec, result[key])
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "learned_vs_heuristics.json", result)
    return result


def compare(spec: str, heuristics: list[str], scenario: Any, seeds: list[int], num_jobs: int | None = None,
            rows_out: bool = False, play: dict | None = None, episodes: Path | None = None,
            split: str | None = None) -> dict:
    """Play ``spec`` (a ``model:PATH``) and ``heuristics`` on ``seeds``; per-agent means and the model's ratios.

    Ratios of mean JCT (censored) to the best heuristic's and to FIFO's, of cost to the cheapest
    heuristic's and to the best one's, and of the reward's objective (:func:`episode_objective`)
    to the heuristic best by that objective, each with its paired bootstrap 95 % interval over seeds.

    :param scenario: a bundled name or a :class:`~sfenv.scenario.Scenario`.
    :param rows_out: also return the episode rows (key ``rows``).
    :param play: how to play the model (``agent_kwargs`` of ``spec``, e.g. ``{"work_conserving": True}``).
    :param episodes: a folder for the episodes: each scenario's are saved in ``<episodes>/<scenario name>.json``
        (:func:`sfenv.app.evaluate.evaluate_agents`' results file), and a file of the same settings is
        continued, so the heuristics' episodes are played once for several models (same seeds, split and
        workload size; the file records them and refuses others).
    :param split: the protocol split ``seeds`` are the first of (recorded in the results file), or None.
    """
    out = None
    if episodes is not None:
        name = scenario.name if isinstance(scenario, Scenario) else load_scenario(scenario).name
        episodes.mkdir(parents=True, exist_ok=True)
        out = episodes / f"{name}.json"
    rows = evaluate_agents([spec, *heuristics], scenario, seeds, num_jobs=num_jobs, progress=True,
                           agent_kwargs={spec: play} if play else None, out=out, split=split)
    rows = [r for r in rows if r["agent"] in {spec, *heuristics} and r["seed"] in set(seeds)]
    res = _ratios(spec, heuristics, rows, list(seeds), {s: scenario for s in seeds}, num_jobs)
    if rows_out:
        res["rows"] = rows
    return res


#: (summary key, row field, scale): what is reported per agent beside unfinished jobs, each the mean over
#: the pairs; the cost and traffic figures also get the learned policy's ratio to the best heuristic
#: (``<key>_ratio_to_best``; ``cost_usd``'s is ``cost_ratio_to_best``)
METRICS: tuple[tuple[str, str, float], ...] = (
    ("mean_jct_h", "mean_jct_s", 1 / 3600),  # censored: unfinished jobs counted
    ("mean_wait_h", "mean_wait_s", 1 / 3600),  # of it, waiting to start (censored too); the rest runs
    ("cost_usd", "cost_usd", 1.0),  # electricity
    ("egress_usd", "egress_usd", 1.0),  # bytes billed between regions
    ("total_cost_usd", "total_cost_usd", 1.0),  # electricity + egress
    ("wan_tb", "wan_tb", 1.0),  # TB sent between regions
    ("carbon_kg", "carbon_kg", 1.0),  # operational kgCO2e (the scenario's carbon signal)
)


def _ratio_or_none(a: np.ndarray, b: np.ndarray) -> list[float] | None:
    """:func:`paired_bootstrap_ratio` of ``a`` to ``b``, or None when ``mean(b)`` is 0 (the ratio is undefined)."""
    return None if float(np.mean(b)) == 0.0 else list(paired_bootstrap_ratio(a, b))


def _ratios(spec: str, heuristics: list[str], rows: list[dict], pairs: list[Any], scenario_of: dict[Any, Any],
            num_jobs: int | None) -> dict:
    """The figures of :func:`compare` from episode rows; ``pairs`` are the row keys (``seed``) paired across agents."""
    by: dict[str, dict[Any, dict]] = {}
    for r in rows:
        by.setdefault(r["agent"], {})[r["seed"]] = r
    seeds = pairs
    values = {key: {a: np.array([by[a][s][field] * scale for s in seeds]) for a in by}
              for key, field, scale in METRICS}
    jct, cost = values["mean_jct_h"], values["cost_usd"]
    objective = {a: np.array([episode_objective(by[a][s], scenario_of[s], num_jobs) for s in seeds]) for a in by}
    best = min(heuristics, key=lambda h: jct[h].mean())
    cheapest = min(heuristics, key=lambda h: cost[h].mean())
    best_obj = min(heuristics, key=lambda h: objective[h].mean())
    summary = {a: {**{key: float(values[key][a].mean()) for key, _, _ in METRICS},
                   "objective": float(objective[a].mean()),
                   "unfinished": float(np.mean([by[a][s]["unfinished"] for s in seeds]))} for a in by}
    values["objective"] = objective
    carbon_aware = [h for h in heuristics if is_carbon_aware(h)]
    best_ca = min(carbon_aware, key=lambda h: objective[h].mean()) if carbon_aware else None
    return {"best_heuristic": best, "ratio_to_best": list(paired_bootstrap_ratio(jct[spec], jct[best])),
            "ratio_to_fifo": list(paired_bootstrap_ratio(jct[spec], jct["fifo"])) if "fifo" in jct else None,
            "cheapest_heuristic": cheapest,
            "cost_ratio_to_cheapest": list(paired_bootstrap_ratio(cost[spec], cost[cheapest])),
            "cost_ratio_to_best": list(paired_bootstrap_ratio(cost[spec], cost[best])),
            **{f"{key}_ratio_to_best": _ratio_or_none(values[key][spec], values[key][best])
               for key in ("egress_usd", "total_cost_usd", "wan_tb")},
            "best_objective_heuristic": best_obj,
            "objective_ratio_to_best": list(paired_bootstrap_ratio(objective[spec], objective[best_obj])),
            "vs_best_objective": _ratios_to(spec, best_obj, values),
            "best_carbon_aware_heuristic": best_ca,
            "vs_best_carbon_aware": None if best_ca is None else _ratios_to(spec, best_ca, values),
            "summary": summary}


#: what :func:`_ratios_to` compares: the reward's objective, then JCT, cost and carbon apart
COMPARED = ("objective", "mean_jct_h", "cost_usd", "total_cost_usd", "carbon_kg")


def is_carbon_aware(name: str) -> bool:
    """Whether the agent ``name`` (``PLACEMENT`` or ``PLACEMENT+ORDER``) places or times jobs by carbon."""
    from sfenv.agents.registry import GROUPS

    return name.split("+", 1)[0] in GROUPS["carbon"]


def _ratios_to(spec: str, reference: str, values: dict[str, dict[str, np.ndarray]]) -> dict[str, list[float] | None]:
    """The learned policy's paired ratios to ``reference`` per figure of :data:`COMPARED` (None: reference's mean 0)."""
    return {key: _ratio_or_none(values[key][spec], values[key][reference]) for key in COMPARED}


def compare_generated(spec: str, heuristics: list[str], count: int, seeds: list[int],
                      num_jobs: int | None = None, split: str = "test", play: dict | None = None,
                      episodes: Path | None = None, seed_split: str | None = None, family: str = "generated") -> dict:
    """:func:`compare` pooled over the first ``count`` generated platforms of a protocol split (``test``: report).

    Every agent plays every platform on ``seeds``; the pairs are (platform, seed), and the best
    heuristic is the one with the lowest mean JCT over all pairs (one heuristic for the family, as
    a user would have to pick one without knowing the platform).  ``per_platform`` holds each
    platform's own comparison (its own best heuristic).

    :param episodes: as :func:`compare`'s (one results file per platform).
    :param seed_split: the protocol split ``seeds`` are the first of (recorded in those files), or None.
    :param family: the platforms' family, ``generated`` or ``cloud`` (:func:`sfenv.agents.learned.generated_platforms`).
    """
    from sfenv.agents.learned import generated_platforms

    platforms = generated_platforms(split, count, num_jobs=num_jobs, family=family)
    per = {sc.name: compare(spec, heuristics, sc, seeds, num_jobs, rows_out=True, play=play, episodes=episodes,
                            split=seed_split) for sc in platforms}
    pooled_rows = [dict(r, seed=(i, r["seed"])) for i, res in enumerate(per.values()) for r in res.pop("rows")]
    pairs = [(i, s) for i in range(len(platforms)) for s in seeds]
    pooled = _ratios(spec, heuristics, pooled_rows, pairs, {(i, s): platforms[i] for i, s in pairs}, num_jobs)
    pooled["platforms"] = [sc.name for sc in platforms]
    pooled["per_platform"] = per
    return pooled


def episode_objective(row: dict, scenario: Any, num_jobs: int | None = None) -> float:
    """What the scenario's reward minimises over an episode: minus its undiscounted return, penalties aside.

    ``jct_weight * sum(JCT) / (3600 K) + cost_weight * cost + egress_weight * egress
    - throughput_weight * tokens / 1e9 + carbon_weight * carbon_kg`` (:class:`sfenv.env.GeoSchedEnv`'s
    reward; the sum of censored JCTs is the episode's job-time; ``egress_weight`` is ``cost_weight``
    where the scenario gives none; a row written before egress or carbon was billed counts none).
    With a cost weight this is the fair single figure: JCT and cost ratios alone can each favour a
    policy that trades one for the other.
    """
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    w = sc.cfg.reward
    job_h = float(np.sum(row["jcts_s"])) / 3600.0
    egress_weight = w.cost_weight if w.egress_weight is None else w.egress_weight
    return (w.jct_weight * job_h / sc.cfg.env.queue_window + w.cost_weight * row["cost_usd"]
            + egress_weight * row.get("egress_usd", 0.0) - w.throughput_weight * row["total_tokens"] / 1e9
            + w.carbon_weight * row.get("carbon_kg", 0.0))


def report(spec: str, res: dict) -> None:
    """Print one comparison of :func:`compare`: per agent JCT (and its wait), costs, cross-region TB; the ratios."""
    print(f"  {'agent':<40} {'JCT h':>7} {'wait h':>7} {'elec. USD':>10} {'egress USD':>11} {'total USD':>10} "
          f"{'WAN TB':>8} {'kg CO2e':>8} {'objective':>9} {'unfinished':>10}")
    for a, s in sorted(res["summary"].items(), key=lambda kv: kv[1]["mean_jct_h"]):
        print(f"  {a:<40} {s['mean_jct_h']:7.3f} {s.get('mean_wait_h', math.nan):7.3f} {s['cost_usd']:10.1f} "
              f"{s['egress_usd']:11.1f} {s['total_cost_usd']:10.1f} {s['wan_tb']:8.2f} "
              f"{s.get('carbon_kg', math.nan):8.1f} {s.get('objective', math.nan):9.2f} {s['unfinished']:10.2f}")
    best = res["best_heuristic"]
    r, lo, hi = res["ratio_to_best"]
    print(f"learned / best heuristic ({best}): JCT {r:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")
    if res["ratio_to_fifo"] is not None:
        r, lo, hi = res["ratio_to_fifo"]
        print(f"learned / fifo: JCT {r:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")
    for label, key, field in (("electricity cost", "cost_ratio_to_best", "cost_usd"),
                              ("egress cost", "egress_usd_ratio_to_best", "egress_usd"),
                              ("total cost", "total_cost_usd_ratio_to_best", "total_cost_usd"),
                              ("cross-region TB", "wan_tb_ratio_to_best", "wan_tb")):
        if res[key] is None:
            print(f"learned / {best}: {label}: {best} has none; the learned policy {res['summary'][spec][field]:.2f} "
                  "per episode")
        else:
            r, lo, hi = res[key]
            print(f"learned / {best}: {label} {r:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")
    r, lo, hi = res["objective_ratio_to_best"]
    print(f"learned / best heuristic by the reward's objective ({res['best_objective_heuristic']}): "
          f"{r:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")
    for label, ref, key in (("best by objective", res["best_objective_heuristic"], "vs_best_objective"),
                            ("best carbon-aware by objective", res["best_carbon_aware_heuristic"],
                             "vs_best_carbon_aware")):
        if res[key] is None:
            continue
        parts = [f"{k} " + ("-" if v is None else f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]") for k, v in res[key].items()]
        print(f"learned / {label} ({ref}): " + "; ".join(parts))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
