"""One evaluator for every agent: identical seeded episodes, the same metrics.

Each (agent, seed) pair runs ``make_simulator(scenario, seed)`` to the end with the agent's
``decide``; the wall time of every ``decide`` call is measured here, outside the simulation, so it
never enters simulated results.  Results go to a JSON file with the settings that define it
(:mod:`sfenv.runs.results`), rewritten atomically (temporary file + ``os.replace``) every few seconds as
pairs finish, at the end and on Ctrl-C, under a lock that keeps a second process out; pairs already in
an existing file of the same settings are skipped, so an interrupted sweep continues where it stopped,
and a file of other settings is refused, never mixed into.

Backends: ``backend="serial"`` (the default) plays the pairs one after the other in this process;
``backend="ray"`` plays each (agent, seed) episode as a Ray task (:mod:`sfenv.runs.distributed`, the
``ray`` extra) on a local Ray with ``workers`` CPUs or on the cluster at ``address``.  The rows are
the serial ones (same episodes, same agents freshly reset with the seed; only the wall-clock
decision times differ), saved as episodes finish and returned in the serial order; a worker that
dies is retried.  Saved policies (``model:PATH``, ``rllib:PATH``) are loaded on each worker from
the path, which must exist there (a shared folder on a cluster).

Model files are data: ``model:PATH`` loads the weights-only form (:mod:`sfenv.agents.model_files`);
an SB3 ``.zip`` without it, and an RLlib checkpoint, run code when loaded and are refused unless
``trust_model_code=True`` (``--trust-model-code``).

Rows carry the :class:`sfenv.sim.metrics.EpisodeReport` fields, whose JCT statistics count unfinished
jobs with a censored JCT (episode end minus arrival); :func:`summarise` gives per agent the mean
over seeds with a 95 % Student-t confidence interval, :func:`format_table` prints it and
:func:`write_csv` writes one row per episode.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import gymnasium as gym
import numpy as np

from sfenv.agents.base import SchedulerAgent
from sfenv.agents.deferral import heuristic_actions
from sfenv.agents.learned import LearnedPolicy, absolute_model_spec, make_env_fn, split_model_spec
from sfenv.agents.model_files import ENSEMBLE_SUFFIX, read_ensemble_file, spec_path_for
from sfenv.agents.plugins import entry_point_agents, file_plugins, is_plugin_spec, parse_spec, plugin_settings
from sfenv.agents.registry import AGENTS, REVISIONS, builtin_keywords, is_builtin, make_agent
from sfenv.env import GeoSchedEnv
from sfenv.env.geosched import FLOOR_TESTS
from sfenv.errors import Interrupted, InvalidInput
from sfenv.interrupts import ctrl_c_deferred, ctrl_c_held
from sfenv.model.pipeline import prepare_compiled
from sfenv.runs import protocol, results
from sfenv.runs.progress import progress_bar
from sfenv.runs.replay import ActionRecorder, jct_fields, plan_to_json, scenario_sha, show
from sfenv.runs.results import atomic_path, atomic_write_json  # atomic_write_json: also imported from here
from sfenv.runs.stats import mean_ci  # also imported from here
from sfenv.scenario import Scenario, load_scenario
from sfenv.sim import make_simulator
from sfenv.sim.engine import check_decision
from sfenv.sim.metrics import ADDED_REPORT_FIELDS, EpisodeReport
from sfenv.sim.state import InvalidDecision

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm

    from sfenv.agents.rllib import RLlibPolicy  # imports ray.rllib: only when an rllib:PATH agent is asked for

__all__ = [
    "CI_METRICS",
    "MODEL_PREFIX",
    "RLLIB_PREFIX",
    "agent_settings",
    "atomic_write_json",
    "check_agent_settings",
    "check_metrics",
    "evaluate_agents",
    "evaluate_model",
    "file_differences",
    "format_table",
    "mean_ci",
    "prepare_decisions",
    "quiet_solver_banner",
    "run_episode",
    "run_policy_episode",
    "run_settings",
    "summarise",
    "write_csv",
]


_jct_fields = jct_fields  # the per-job figures of a row (defined with the replay that must reproduce them)


def run_episode(agent: SchedulerAgent, scenario: Scenario, seed: int, record_actions: bool = False) -> dict[str, Any]:
    """Run one seeded episode; returns the episode report plus decision-time statistics.

    :param record_actions: add the episode's action log (``actions``, :mod:`sfenv.runs.replay`) and
        the scenario's hash (``scenario_sha``), so that ``sfenv validate`` can replay it.
    """
    prepare_decisions(agent)  # before the clock runs: one-off loading is no decision's time
    agent.reset(seed)
    sim = make_simulator(scenario, seed)
    times: list[float] = []
    who = f"agent {agent.name!r}: decide(view)"

    def checked(view):  # a wrong return type is one line naming the agent, before the recorder logs it
        return check_decision(agent.decide(view), who)

    recorder = (ActionRecorder(checked, agent.replan if agent.replans else None, agent.replan_hourly)
                if record_actions else None)
    decide = recorder.decide if recorder else checked

    def timed(view):
        t = time.perf_counter()
        plan = decide(view)
        times.append(time.perf_counter() - t)
        return plan

    replan = (recorder.replan if recorder else agent.replan) if agent.replans else None
    try:
        report = sim.run(timed, replan=replan, replan_hourly=agent.replan_hourly)
    except InvalidDecision as e:
        if not (is_plugin_spec(agent.name) or agent.name in entry_point_agents()):
            raise  # a built-in agent's bad decision is sfenv's bug: keep the traceback
        raise InvalidInput(f"agent {agent.name!r} made a decision the simulator cannot carry out (seed {seed}): "
                           f"{e}") from None
    records = sim.records()
    row: dict[str, Any] = {"agent": agent.name, "scenario": scenario.name, "seed": seed, **report.to_dict()}
    row.update(_jct_fields(records, report.makespan_s))
    row.update(_carbon_fields(sim))
    row["decisions"] = len(times)
    row["decision_time_mean_s"] = float(np.mean(times)) if times else 0.0
    row["decision_time_max_s"] = float(np.max(times)) if times else 0.0
    if recorder:
        row["scenario_sha"] = scenario_sha(scenario)
        row["actions"] = recorder.log()
    return row


def _carbon_fields(sim: Any) -> dict[str, Any]:
    """What a result row says of its carbon: the signal (``lca``/``direct``) and the zones on the fallback."""
    carbon = sim.carbon
    if carbon is None:
        return {}
    return {"carbon_signal": carbon.signal, "carbon_fallback_zones": ",".join(carbon.fallback_zones)}


def prepare_decisions(agent: SchedulerAgent | None = None) -> None:
    """Load, before any decision is timed, what would otherwise load inside the first one (cheap when done).

    Decision times are the wall time of ``decide``/``predict`` calls; a one-off cost of the process
    would otherwise be charged to whichever agent happens to decide first (and, in a resumed results
    file, to the first agent of each process).  Once per process this loads the compiled pipeline
    replays (:func:`sfenv.model.pipeline.prepare_compiled`: every kernel for the argument types the
    replays pass; importing numba and reading its on-disk cache takes about 0.5-2.5 s, compiling
    without the cache 5-25 s) and creates HiGHS's first solver instance (:func:`quiet_solver_banner`);
    then it calls ``agent.prepare()`` (:meth:`SchedulerAgent.prepare`: the agent's own one-off imports).
    A Ctrl-C pressed meanwhile is raised when they end (:func:`sfenv.interrupts.ctrl_c_deferred`).
    :func:`run_episode` and :func:`run_policy_episode` call it first, so every process that times
    decisions does (the serial evaluator, each Ray worker, ``sfenv run``, the experiments).
    """
    with ctrl_c_deferred():  # a Ctrl-C inside these third-party loads is raised when they end, not lost
        prepare_compiled()
        quiet_solver_banner()
        if agent is not None:
            agent.prepare()


#: an ``agents`` entry ``"model:PATH"`` is a saved SB3 model (see :mod:`sfenv.agents.learned`)
MODEL_PREFIX = "model:"
#: keyword arguments a ``model:PATH`` agent takes from ``agent_kwargs`` (those of :class:`LearnedPolicy` that
#: change how it is played)
MODEL_PLAY_KWARGS = ("work_conserving", "defer")
#: an ``agents`` entry ``"rllib:PATH"`` is an RLlib PPO checkpoint (see :mod:`sfenv.agents.rllib`)
RLLIB_PREFIX = "rllib:"

#: a saved policy, played through the environment (``model:PATH`` or ``rllib:PATH``)
SavedPolicy: TypeAlias = "LearnedPolicy | RLlibPolicy"
#: what plays an episode: a scheduler agent through the simulator, or a saved policy
Player: TypeAlias = "SchedulerAgent | SavedPolicy"
#: what a Ray worker rebuilds a player from (:func:`_payload`): the agent itself, or a saved policy's spec,
#: its play settings and whether its code is trusted
Payload: TypeAlias = "SchedulerAgent | tuple[str, dict[str, Any], bool]"


def run_policy_episode(policy: SavedPolicy, scenario: Scenario, seed: int, env_kwargs: dict | None = None,
                       record_actions: bool = False) -> dict[str, Any]:
    """Play one seeded episode through the environment with a learned policy's ``predict``.

    The episode is the one :func:`run_episode` plays (``env.reset(seed=s)`` plays
    ``make_simulator(scenario, s)``); the env takes the observation/action settings the model was
    trained with; a model trained before env v1 (its settings name no ``privileged_obs``) whose
    observation space is v0's is played with ``privileged_obs=True`` and its row says so
    (``privileged_obs``).  A policy that never lets time pass (possible without action masks) is stopped
    after ``max(max_episode_steps, 100 x jobs)`` steps, and the rest of its episode is played to the end
    with waits (logged as such), so its row holds the finished episode's metrics, as every row does,
    and says ``stopped_early``.

    :param record_actions: add the episode's action log (the plan each start action named, None
        for a wait; masked actions change nothing and are left out) and ``scenario_sha``.
    :raises InvalidInput: (a ``ValueError``) if the model's observation space does not match this scenario's.
    """
    if env_kwargs is None:  # the settings the model was trained with (its workload size aside)
        env_kwargs = {k: v for k, v in policy.meta.get("env_kwargs", {}).items() if k != "num_jobs"}
    env = make_env_fn(scenario, policy.spec.flatten, env_kwargs)()
    if not _fits(policy, env) and "privileged_obs" not in env_kwargs:
        # a model trained before env v1 (no privileged_obs recorded) saw v0's observation: play it on v0's
        older = make_env_fn(scenario, policy.spec.flatten, {**env_kwargs, "privileged_obs": True})()
        if _fits(policy, older):
            env.close()
            env, env_kwargs = older, {**env_kwargs, "privileged_obs": True}
        else:
            older.close()
    if not _fits(policy, env):
        env.close()
        raise InvalidInput(f"{policy.name} was trained on another observation space than scenario "
                         f"{scenario.name!r} gives (trained on {policy.meta.get('scenario', '?')!r})")
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    assert isinstance(base, GeoSchedEnv)  # make_env_fn of one scenario: a GeoSchedEnv, flattened or not
    sim = base.sim
    assert sim is not None  # made by env.reset
    prepare_decisions()
    # an untimed first call where the policy offers one (``prepare``: a deterministic predict, no state kept):
    # the network's one-off set-up is no decision's; a policy without it (e.g. a test's stateful stub) gets none
    warm_up = getattr(policy, "prepare", None)
    if callable(warm_up):
        warm_up(obs, base.action_masks())
    limit = max(scenario.cfg.env.max_episode_steps, 100 * sim.view().num_jobs)
    # a recipe's deferral to a heuristic (sfenv.agents.deferral)
    defer = policy.play_defer if isinstance(policy, LearnedPolicy) else None
    deferred = 0
    times: list[float] = []
    log: list[dict | None] | None = [] if record_actions else None
    steps, done = 0, False
    while not done and steps < limit:
        mask = base.action_masks()
        t = time.perf_counter()
        if defer is not None and isinstance(policy, LearnedPolicy):
            index, took_heuristic = policy.choose(obs, mask, heuristic_actions(base, defer))
            deferred += took_heuristic
        else:
            action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
            index = int(np.asarray(action).item())
        times.append(time.perf_counter() - t)
        plan = base.candidates[index] if index < base.wait_action and mask[index] else None
        obs, _, terminated, truncated, info = env.step(index)
        if log is not None and (not info["invalid_action"] or info["forced_wait"]):
            log.append(plan_to_json(None if info["forced_wait"] else plan))
        done = terminated or truncated
        steps += 1
    for _ in base.wait_to_end():  # stopped at the step limit: the episode ends as it would with waits
        if log is not None:
            log.append(None)
    records = sim.records()
    report = sim.report()
    row: dict[str, Any] = {"agent": policy.name, "scenario": scenario.name, "seed": seed, **report.to_dict()}
    row.update(_jct_fields(records, report.makespan_s))
    row.update(_carbon_fields(sim))
    if base.privileged_carbon:
        row["privileged_carbon"] = True  # the carbon key held the true future (carbon.forecast.kind: oracle)
    row["decisions"] = len(times)
    row["decision_time_mean_s"] = float(np.mean(times)) if times else 0.0
    row["decision_time_max_s"] = float(np.max(times)) if times else 0.0
    row["stopped_early"] = not done
    row.update(_play_setting_fields(env_kwargs))
    if defer is not None:  # the heuristic's decision replaced the policy's this many times
        row.update(defer_to=",".join(defer.to), defer_margin=defer.row_margin(), deferred=deferred)
    if log is not None:
        row["scenario_sha"] = scenario_sha(scenario)
        row["actions"] = {"decisions": log, "replans": []}
    env.close()
    return row


def _play_setting_fields(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env settings a policy's row names because they change how it plays (absent when off)."""
    fields: dict[str, Any] = {}
    if env_kwargs.get("privileged_obs"):
        fields["privileged_obs"] = True  # played on the v0 observation (see sfenv.env, Version History)
    if env_kwargs.get("work_conserving"):
        fields["work_conserving"] = True  # wait masked while a candidate could start
    for floor in ("min_relative_mfu", "min_spread_speedup"):  # plans across regions left the menu
        if env_kwargs.get(floor) is not None:
            fields[floor] = float(env_kwargs[floor])
    if env_kwargs.get("min_spread_speedup") is not None:
        fields["spread_wait"] = str(env_kwargs.get("spread_wait", "running"))  # the wait it was compared with
    if env_kwargs.get("floor_exempt"):  # decisions those floors never left out
        fields["floor_exempt"] = ",".join(env_kwargs["floor_exempt"])
        skipped = env_kwargs.get("floor_exempt_from")
        if skipped is not None and set(skipped) != set(FLOOR_TESTS):  # only some floors (default: both)
            fields["floor_exempt_from"] = ",".join(skipped)
    return fields


def _fits(policy: SavedPolicy, env: gym.Env) -> bool:
    """Whether ``env``'s observation space is the one ``policy`` was trained on."""
    return env.observation_space in (getattr(policy, "observation_space", None),
                                     getattr(getattr(policy, "model", None), "observation_space", None))


def evaluate_model(
    policy: LearnedPolicy, scenario: str | Path | dict | Scenario, seeds: Sequence[int], env_kwargs: dict | None = None
) -> list[EpisodeReport]:
    """Play one episode per seed through the env; returns the simulator's episode reports.

    ``env_kwargs`` may set ``num_jobs`` (the workload size) and env settings; by default the env
    takes the settings the model was trained with (see :func:`run_policy_episode`).

    :raises InvalidInput: for ``seeds`` that are not a list of distinct integers >= 0
        (:func:`sfenv.runs.protocol.check_seeds`).
    """
    seeds = protocol.check_seeds(seeds)
    sc = load_scenario(scenario)
    kwargs = dict(env_kwargs or {})
    num_jobs = kwargs.pop("num_jobs", None)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    names = [f.name for f in dataclasses.fields(EpisodeReport)]
    reports = []
    for seed in seeds:
        row = run_policy_episode(policy, sc, seed, env_kwargs=kwargs or None)
        reports.append(EpisodeReport(**{name: row[name] for name in names}))
    return reports


def evaluate_agents(
    agents: Sequence[str | SchedulerAgent],
    scenario: str | Path | dict | Scenario,
    seeds: Sequence[int],
    num_jobs: int | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    agent_kwargs: dict[str, dict] | None = None,
    on_row: Callable[[dict], None] | None = None,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    record_actions: bool = False,
    split: str | None = None,
    trust_model_code: bool = False,
) -> list[dict[str, Any]]:
    """Run every agent on every seed of ``scenario``; returns one row per (agent, seed).

    ``agents`` holds registered names, agent instances, ``"model:PATH"`` for a saved SB3 model or
    ``"rllib:PATH"`` for an RLlib checkpoint (played through the environment by
    :func:`run_policy_episode`; their rows are named by that string).

    :param num_jobs: override the scenario's workload size.
    :param out: results file (:mod:`sfenv.runs.results`: the run's settings and its episodes), rewritten
        atomically as pairs finish, at most every few seconds (:class:`~sfenv.runs.results.ResultsWriter`:
        a killed process loses the pairs of the last interval at most), at the end and on Ctrl-C.  This
        process holds its lock (:func:`~sfenv.runs.results.output_lock`) for the whole run, from the read
        of the file on.  An existing file with the same settings is continued: pairs
        already in it are skipped, new agents and seeds are added, and the rows returned are all
        the file's.  One with other settings raises :class:`~sfenv.runs.results.SettingsMismatch`
        naming each difference, and is left as it was.
    :param resume: kept for callers of earlier versions: a file with the same settings is always
        continued (the CLI's ``--resume`` only decides whether another file is refused or written beside it).
    :param overwrite: replace an existing ``out`` instead of continuing it.
    :param progress: a progress bar on stderr (episodes, rate, ETA, the agent and seed just played),
        drawn only when stderr is a terminal (:mod:`sfenv.runs.progress`); nothing of it enters ``out``.
    :param agent_kwargs: constructor keyword arguments per agent name.
    :param on_row: called with each episode's row as it finishes (not with rows already in ``out``).
    :param backend: ``"serial"`` (this process) or ``"ray"`` (one Ray task per episode).
    :param address: with ``backend="ray"``: the Ray cluster to join (default: a local Ray, or the
        one already initialised in this process).
    :param workers: with ``backend="ray"``: episodes in flight (and CPUs of a local Ray).
    :param record_actions: each row gets its episode's action log and the scenario's hash
        (:mod:`sfenv.runs.replay`; what ``sfenv validate`` replays).
    :param split: the protocol split whose first seeds ``seeds`` are (:mod:`sfenv.runs.protocol`;
        checked), or None: explicit seeds.  The settings record the label (``split``: the split or
        ``"explicit seeds"``), the ``protocol`` version and the ``seeds`` (more may be added to a file).
    :param trust_model_code: allow saved policies whose files run code when loaded: an SB3 ``.zip``
        without its weights-only form, an RLlib checkpoint (:mod:`sfenv.agents.model_files`).  Not
        part of the settings: the same files play the same episodes either way.
    :raises UntrustedCode: for such a policy without ``trust_model_code``.
    :raises InvalidInput: for an unknown backend, or ``address``/``workers`` without ``backend="ray"``,
        ``agents`` that are not a non-empty list of names and agent instances, ``agent_kwargs`` that is not
        a dict of dicts or gives a built-in agent a keyword it does not take
        (:func:`sfenv.agents.registry.make_agent`), ``seeds`` that are not a list of
        distinct integers >= 0 (:func:`sfenv.runs.protocol.check_seeds`), or an ``out`` that is not a results file.
    :raises Interrupted: on Ctrl-C, after the episodes finished so far are saved (the count is in the message).
    :raises OutputInUse: (an ``InvalidInput``) if another process is writing ``out``.
    :raises OutputError: (an ``OSError``) if ``out`` cannot be written (a full disk, a folder that is a file);
        the file then holds what its last write saved, and the same call again continues from there.
    """
    from sfenv.runs.distributed import check_backend

    check_backend(backend, address, workers)
    _check_agents(agents, agent_kwargs)
    seeds = protocol.check_seeds(seeds)
    if backend == "ray" and file_plugins(agents):  # a worker unpickles classes by module name
        raise InvalidInput(f"agents {', '.join(file_plugins(agents))}: a file.py:Class plug-in cannot be sent to "
                           "Ray workers; make it an importable module (module:Class) or use --backend serial")
    sc = load_scenario(scenario)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    settings = run_settings(agents, sc, agent_kwargs, seeds=seeds, split=split, record_actions=record_actions)
    out_path = Path(out) if out else None
    with results.output_lock(out_path) if out_path else contextlib.nullcontext():  # held from the read on
        settings, rows = _continued(out_path, settings, overwrite)  # before any agent is built or episode run
        instances = [_instance(a, agent_kwargs, trust_model_code) for a in agents]
        done = {(r["agent"], r["scenario"], r["seed"]) for r in rows}
        todo = [(a, s) for a in instances for s in seeds if (a.name, sc.name, s) not in done]
        writer = results.ResultsWriter(out_path, settings, rows) if out_path else None
        if writer is not None:  # the settings first: an interrupted run leaves a file that says what it holds
            writer.save()
        bar = _progress_bar(len(todo), f"evaluate {sc.name}") if progress and todo else None
        played = _episodes(todo, sc, record_actions, backend, address, workers)
        return _collect(played, todo, rows, writer, on_row, bar)


def _check_agents(agents: Any, agent_kwargs: Any = None) -> None:
    """Refuse bad ``agents`` or ``agent_kwargs``, naming the argument.

    ``agents`` must be a non-empty list of names (``str``) and agent instances, ``agent_kwargs`` None or a
    dict of keyword dicts by agent name (kwargs of agents not in ``agents`` are unused, as before).
    """
    if agent_kwargs is not None and (not isinstance(agent_kwargs, Mapping)
                                     or any(not isinstance(v, Mapping) for v in agent_kwargs.values())):
        raise InvalidInput(f"agent_kwargs: {agent_kwargs!r:.80}; expected a dict of keyword dicts by agent name, "
                           "e.g. {'random': {'seed': 1}}")
    if isinstance(agents, (str, bytes)) or not isinstance(agents, Sequence):
        raise InvalidInput(f"agents: got {type(agents).__name__} {agents!r:.60}; expected a list of agent names "
                           "or instances, e.g. ['fifo']")
    if not agents:
        raise InvalidInput("agents: empty; expected at least one agent name or instance")
    for a in agents:
        if not isinstance(a, (str, SchedulerAgent)):
            raise InvalidInput(f"agents: {a!r:.60} ({type(a).__name__}) is not an agent name or a SchedulerAgent")


def _collect(played: Iterator[tuple[int, dict[str, Any]]], todo: Sequence[tuple[Player, int]],
             rows: list[dict[str, Any]], writer: results.ResultsWriter | None, on_row: Callable[[dict], None] | None,
             bar: tqdm | None) -> list[dict[str, Any]]:
    """Add each episode of ``played`` to ``rows`` (and to the results file through ``writer``) as it finishes.

    The file is rewritten every few seconds (:class:`sfenv.runs.results.ResultsWriter`) and at the end,
    with the rows in the serial order (``todo``'s) whatever order they finished in.

    :return: ``rows``, the new ones added.
    :raises Interrupted: on Ctrl-C, after every episode finished is saved (a second Ctrl-C waits for the save).
    :raises OutputError: if the file cannot be written (a full disk); it then holds the rows of its last write.
    """
    first_new = len(rows)
    order: dict[int, int] = {}  # todo index -> position in rows (completion order)
    try:
        for i, row in played:
            agent, seed = todo[i]
            row["agent"] = agent.name  # a policy loaded on a worker from its resolved path keeps the name given
            order[i] = len(rows)
            if writer is not None:
                writer.add(row)
            else:
                rows.append(row)
            if on_row:
                on_row(row)
            if bar is not None:
                bar.set_postfix_str(f"{agent.name} seed {seed}")
                bar.update()
        if bar is not None:
            bar.close()
        if order != {i: first_new + i for i in order}:  # finished out of order (ray): save in the serial order
            positions = list(range(first_new)) + [order[i] for i in sorted(order)]
            if writer is not None:
                writer.reorder(positions)
            else:
                rows[:] = [rows[k] for k in positions]
        if writer is not None:
            writer.flush()
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        raise _interrupted(writer, len(rows) - first_new) from None
    except results.OutputError as e:
        if bar is not None:
            bar.close()
        if writer is None:  # not the results file's (a callback's)
            raise
        raise results.OutputError(f"{e}; it holds the {writer.saved} episodes of its last write "
                                  f"({len(rows) - writer.saved} run since are not saved); once it can be written, "
                                  "run the same command again to continue", e.errno) from None
    return rows


def _interrupted(writer: results.ResultsWriter | None, run_now: int) -> Interrupted:
    """Ctrl-C: save every episode finished (a second Ctrl-C waits for the save) and say what the file holds."""
    if writer is None:
        return Interrupted(f"interrupted: {run_now} episodes run now (no --out file: nothing was saved)")
    note = ""
    with ctrl_c_held():
        try:
            writer.flush()
        except results.OutputError as e:
            note = f" ({len(writer.rows) - writer.saved} more could not be saved: {e})"
    return Interrupted(f"interrupted: {run_now} episodes run now, {writer.saved} saved in {writer.path}{note}; "
                       "run the same command again to continue")


def _continued(out_path: Path | None, settings: dict[str, Any],
               overwrite: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The settings to write and the rows already saved: those of ``out_path`` if it exists and is continued.

    :param out_path: the results file, or None (no file: nothing saved).
    :param settings: this run's settings (:func:`run_settings`).
    :param overwrite: replace the file: nothing of it is kept.
    :return: ``settings`` with the file's agents and seeds merged in, and the file's rows.
    :raises SettingsMismatch: if the file holds results of other settings (or records none).
    :raises InvalidInput: if it holds a row its settings do not cover, a row twice, or a malformed row.
    """
    if out_path is None or not out_path.exists() or overwrite:
        return settings, []
    saved, rows = results.read_results(out_path)
    diffs = results.differences(saved, settings)
    if diffs or saved is None:  # a file recording no settings always differs
        raise results.SettingsMismatch(out_path, diffs)
    results.check_rows(out_path, saved, rows)  # nothing mixed in, and checked before the file is rewritten
    check_metrics(rows, out_path)
    return results.merge_settings(saved, settings), rows


def _episodes(todo: Sequence[tuple[Player, int]], sc: Scenario, record_actions: bool, backend: str,
              address: str | None, workers: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Play the (agent, seed) pairs of ``todo``; yields (index in ``todo``, row) as episodes finish.

    The serial backend plays them here in order; the ray backend as Ray tasks (:func:`_episode_task`), in
    the order they finish.
    """
    if backend == "serial":
        return ((i, _play(agent, sc, seed, record_actions)) for i, (agent, seed) in enumerate(todo))
    from sfenv.runs.distributed import ray_imap_unordered

    return ray_imap_unordered(_episode_task, [(_payload(agent), seed, record_actions) for agent, seed in todo],
                              (sc,), address=address, workers=workers)


def _progress_bar(total: int, desc: str) -> tqdm:
    """A progress bar over ``total`` episodes on stderr, drawn only on a terminal (:mod:`sfenv.runs.progress`)."""
    return progress_bar(total, desc, unit="episode")


def run_settings(agents: Sequence[str | SchedulerAgent], scenario: Scenario,
                 agent_kwargs: dict[str, dict] | None = None, seeds: Sequence[int] | None = None,
                 split: str | None = None, record_actions: bool = False) -> dict[str, Any]:
    """The settings record of evaluating ``agents`` on ``scenario`` (loaded, its workload size applied).

    See :func:`sfenv.runs.results.make_settings`.  With ``seeds``: also the seeds' label (``split``: a
    protocol split, checked to hold exactly its first seeds, or ``"explicit seeds"``), the
    ``protocol`` version and the ``seeds``; ``record_actions: true`` and the environment version the
    episodes are played on (``env_version``, :data:`sfenv.runs.protocol.ENV_VERSION`) when action logs
    are recorded (an entry, :mod:`sfenv.runs.entry`).

    :raises InvalidInput: if seeds that are not the split's first are labelled with it.
    """
    extra: dict[str, Any] = {}
    if seeds is not None:
        extra.update(protocol.SeedChoice(tuple(seeds), split or protocol.EXPLICIT, scenario.name).record())
    if record_actions:
        extra["record_actions"] = True
        extra["env_version"] = protocol.ENV_VERSION
    return results.make_settings(scenario, {(a if isinstance(a, str) else a.name): agent_settings(a, agent_kwargs)
                                            for a in agents}, **extra)


def file_differences(path: str | Path, settings: dict[str, Any]) -> list[str]:
    """What differs between the settings of the results file ``path`` and ``settings`` (empty: it may be continued).

    :raises InvalidInput: if ``path`` is not a results file.
    """
    return results.differences(results.read_results(path)[0], settings)


def agent_settings(agent: str | SchedulerAgent, agent_kwargs: dict[str, dict] | None = None) -> dict[str, Any]:
    """What defines an agent's episodes, for a results file's settings (:mod:`sfenv.runs.results`).

    A registered name: its constructor keywords, and the revision of its defaults where they changed
    (:data:`sfenv.agents.registry.REVISIONS`); ``model:[ALGO:]PATH``: the hash of the file played
    (another model saved under the same path is another agent): the weights-only spec when there is
    one (it records its weights' SHA-256), an ensemble file with each of its members' specs, else the
    file named; ``rllib:PATH``: the checkpoint's
    absolute path; a plug-in (``module:Class``, ``file.py:Class``, an entry point): its spec, keywords and a
    hash of its source (:func:`sfenv.agents.plugins.plugin_settings`); an agent instance: its class and
    name.  Nothing is loaded or built.

    :raises InvalidInput: for a model folder without exactly one weights-only spec.
    """
    if not isinstance(agent, str):
        return {"class": f"{type(agent).__module__}.{type(agent).__qualname__}"}
    if agent.startswith(MODEL_PREFIX):
        algo, name = split_model_spec(agent[len(MODEL_PREFIX):])
        kwargs = dict((agent_kwargs or {}).get(agent, {}))
        sha: str | None
        if name.endswith(ENSEMBLE_SUFFIX) and Path(name).is_file():  # the ensemble file and every member's spec
            sha = results.files_hash([Path(name), *read_ensemble_file(Path(name))])
        else:
            played = spec_path_for(Path(name)) or Path(name)
            sha = results.file_hash(played) if played.is_file() else None
        return {"algo": algo, "model_sha": sha, **({"kwargs": kwargs} if kwargs else {})}
    if agent.startswith(RLLIB_PREFIX):
        return {"checkpoint": str(Path(agent[len(RLLIB_PREFIX):]).resolve())}
    if agent not in AGENTS and (is_plugin_spec(agent) or agent in entry_point_agents()):
        return plugin_settings(agent)  # the spec, its keywords and a hash of its source (sfenv.agents.plugins)
    revision = {"revision": REVISIONS[agent]} if agent in REVISIONS else {}
    return {"kwargs": dict((agent_kwargs or {}).get(agent, {})), **revision}


def check_agent_settings(name: str, settings: dict[str, Any]) -> str | None:
    """What in an entry's settings of agent ``name`` :func:`agent_settings` would not have written, or None.

    For :func:`sfenv.runs.entry.check_entry` (``sfenv validate``), which has checked the settings' keys and
    JSON types for one kind of agent: a built-in agent's ``kwargs`` are keywords its constructor takes
    (:func:`sfenv.agents.registry.builtin_keywords`; sfenv's own module is imported, only when there are
    keywords) and ``revision`` is only an agent of :data:`~sfenv.agents.registry.REVISIONS`'s; a name that is
    no built-in agent's has no such settings; a saved model's keywords are its play settings
    (:data:`MODEL_PLAY_KWARGS`, each true, false or null); a plug-in's are those its spec names.  Nothing
    a file names is imported.
    """
    kwargs = settings.get("kwargs") or {}
    if name.startswith(MODEL_PREFIX):
        bad = sorted(k for k, v in kwargs.items()
                     if k not in MODEL_PLAY_KWARGS or not (v is None or isinstance(v, bool)))
        return (f"kwargs {', '.join(map(show, bad))}: a saved model is played with "
                f"{' and '.join(MODEL_PLAY_KWARGS)} only (each true, false or null)") if bad else None
    if "plugin" in settings and settings.get("source") != "entry point":
        try:
            named = parse_spec(name).kwargs
        except InvalidInput as exc:
            return str(exc)
        return f"kwargs {kwargs!r:.80} are not those the spec names ({named!r:.80})" if kwargs != named else None
    if "kwargs" not in settings:  # an RLlib checkpoint, an entry point, an agent instance: nothing to compare
        return None
    return _builtin_settings_problem(name, settings)


def _builtin_settings_problem(name: str, settings: dict[str, Any]) -> str | None:
    """What in a built-in agent's settings (``kwargs``, ``revision``) the writer would not have written, or None."""
    if not is_builtin(name):
        return (f"{show(name)} is not a built-in agent, and the writer gives only a built-in agent's settings "
                "kwargs (an entry point's: plugin, source, value, distribution; an agent instance's: class)")
    if "revision" in settings and name not in REVISIONS:
        return f"revision {settings['revision']!r}; only {', '.join(REVISIONS)} record one (agent revisions)"
    if not settings["kwargs"]:
        return None
    try:
        taken = builtin_keywords(name)
    except ImportError as exc:
        return f"its kwargs cannot be checked: its module does not import here ({exc})"
    bad = sorted(set(settings["kwargs"]) - taken)
    if bad:
        return (f"kwargs {', '.join(map(show, bad))}: not a keyword agent {show(name)} takes "
                f"({', '.join(sorted(taken)) or 'none'})")
    return None


def _play(agent: Player, sc: Scenario, seed: int, record_actions: bool = False) -> dict[str, Any]:
    """One episode: a scheduler agent through the simulator, a saved policy through the environment."""
    if isinstance(agent, SchedulerAgent):
        return run_episode(agent, sc, seed, record_actions)
    return run_policy_episode(agent, sc, seed, record_actions=record_actions)


def _payload(agent: Player) -> Payload:
    """What a worker needs to rebuild ``agent``: the instance, or a saved policy's (spec, settings, trusted).

    The spec has an absolute path; ``trusted`` makes the worker refuse or allow code as this process did.
    """
    if isinstance(agent, SchedulerAgent):
        return agent
    trusted = bool(getattr(agent, "trust_code", False))
    if agent.name.startswith(MODEL_PREFIX):  # model:[ALGO:]PATH, and its play settings if any
        spec = MODEL_PREFIX + absolute_model_spec(agent.name[len(MODEL_PREFIX):])
        play_kwargs = agent.play_kwargs if isinstance(agent, _SavedModel) else {}
        return spec, play_kwargs, trusted
    if agent.name.startswith(RLLIB_PREFIX):
        return RLLIB_PREFIX + str(Path(agent.name[len(RLLIB_PREFIX):]).resolve()), {}, trusted
    raise InvalidInput(f"{agent.name}: neither a scheduler agent nor a saved policy spec; the ray backend "
                       "cannot rebuild it on a worker")


#: saved policies loaded on this (worker) process, by spec: each is loaded once, not per episode
_LOADED: dict[str, SavedPolicy] = {}


def _episode_task(sc: Scenario, payload: Payload, seed: int, record_actions: bool = False) -> dict[str, Any]:
    """A Ray task: rebuild the agent from :func:`_payload`'s output and play one episode (:func:`_play`)."""
    quiet_solver_banner()
    if isinstance(payload, tuple):  # a saved policy: (spec, its play settings, trusted)
        spec, kwargs, trusted = payload
        key = json.dumps([spec, kwargs, trusted], sort_keys=True)
        if key not in _LOADED:
            _LOADED[key] = _saved_policy(spec, {spec: kwargs}, trusted)
        agent: Player = _LOADED[key]
    else:
        agent = payload
    return _play(agent, sc, seed, record_actions)


class _SavedModel(LearnedPolicy):
    """A ``model:[ALGO:]PATH`` agent: the saved model, named by the spec as given, with its play settings.

    :param spec: ``model:[ALGO:]PATH``; rows are keyed by it as given (resume finds them again).
    :param play_kwargs: keywords of :class:`LearnedPolicy` that change how it is played
        (:data:`MODEL_PLAY_KWARGS`), kept for a Ray worker to rebuild it alike (:func:`_payload`).
    :param trust_code: allow an SB3 zip without its weights-only form (:class:`LearnedPolicy`).
    """

    def __init__(self, spec: str, play_kwargs: dict[str, Any], trust_code: bool = False) -> None:
        super().__init__(spec[len(MODEL_PREFIX):], trust_code=trust_code, **play_kwargs)
        self.name = spec
        self.play_kwargs = play_kwargs
        self.trust_code = trust_code


def _saved_policy(spec: str, agent_kwargs: dict[str, dict] | None, trust_code: bool = False) -> SavedPolicy:
    """Load the saved policy of ``spec`` (``model:[ALGO:]PATH`` or ``rllib:PATH``), named by ``spec``.

    :param trust_code: allow files that run code when loaded (an SB3 zip without its weights-only
        form, an RLlib checkpoint).
    :raises InvalidInput: for a play setting a saved model does not take.
    :raises UntrustedCode: for files that run code, without ``trust_code``.
    """
    if spec.startswith(MODEL_PREFIX):
        kwargs = dict((agent_kwargs or {}).get(spec, {}))
        unknown = sorted(set(kwargs) - set(MODEL_PLAY_KWARGS))
        if unknown:
            raise InvalidInput(f"{spec}: unknown play setting(s) {unknown}; a saved model takes "
                               f"{list(MODEL_PLAY_KWARGS)}")
        return _SavedModel(spec, kwargs, trust_code)
    from sfenv.agents.rllib import RLlibPolicy  # imports ray.rllib (the ray extra), so only when asked

    rl_policy = RLlibPolicy(spec[len(RLLIB_PREFIX):], trust_code=trust_code)
    rl_policy.name = spec
    return rl_policy


def _instance(a: str | SchedulerAgent, agent_kwargs: dict[str, dict] | None, trust_code: bool = False) -> Player:
    """The player of an ``agents`` entry: the instance given, a saved policy loaded, or a registered agent built.

    :param trust_code: passed to :func:`_saved_policy`.
    """
    if isinstance(a, SchedulerAgent):
        return a
    if a.startswith((MODEL_PREFIX, RLLIB_PREFIX)):
        return _saved_policy(a, agent_kwargs, trust_code)
    return make_agent(a, **(agent_kwargs or {}).get(a, {}))


#: (summary column, row field, scale): the metrics shown as mean ± 95 % CI over seeds
CI_METRICS: tuple[tuple[str, str, float], ...] = (
    ("mean_jct_h", "mean_jct_s", 1 / 3600),
    ("p95_jct_h", "p95_jct_s", 1 / 3600),
    ("cost_usd", "cost_usd", 1.0),
    ("egress_usd", "egress_usd", 1.0),
    ("total_cost_usd", "total_cost_usd", 1.0),
    ("carbon_kg", "carbon_kg", 1.0),
    ("throughput_tok_s", "mean_throughput_tokens_s", 1.0),
    ("unfinished", "unfinished", 1.0),
)


#: row fields :func:`summarise` reads besides :data:`CI_METRICS`
SUMMARY_FIELDS = ("energy_kwh", "utilisation", "decision_time_mean_s", "decision_time_max_s")


def check_metrics(rows: Sequence[Any], source: str | Path,
                  hint: str = "fix or remove the row, or pass --overwrite to replace the file") -> None:
    """Refuse rows :func:`summarise` cannot read: no agent name, a metric missing (unless added later), or not a number.

    NaN is a number here (a metric a row could not measure).  Fields of :data:`ADDED_REPORT_FIELDS` may be
    missing (rows written before they existed).

    :param rows: episode rows, as read from a file.
    :param source: the file, named in the message.
    :param hint: what the message says to do (the default names ``--overwrite``, which ``sfenv plot`` has not).
    :raises InvalidInput: one line naming the file, the row (its number, from 0) and the field.
    """
    fields = [fld for _, fld, _ in CI_METRICS] + list(SUMMARY_FIELDS)
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("agent"), str):
            raise InvalidInput(f"{source}: episode row {i} is not an object naming its agent (text)")
        for fld in fields:
            if fld not in row and fld in ADDED_REPORT_FIELDS:
                continue
            value = row.get(fld)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                what = "missing" if fld not in row else f"{value!r:.80}, not a number"
                raise InvalidInput(f"{source}: episode row {i} ({row.get('agent')!r:.80} seed "
                                   f"{row.get('seed')!r:.40}): {fld} is {what}; {hint}")


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per agent (in first-seen order): mean over seeds and 95 % CI half-width of each episode metric.

    For each ``(column, field, scale)`` of :data:`CI_METRICS` the summary holds ``column`` (the
    mean over the agent's episodes of ``field * scale``) and ``column + "_ci"`` (the half-width of
    the Student-t interval, :func:`sfenv.runs.stats.mean_ci`).  The per-episode JCT figures already count
    unfinished jobs (censored); ``p95_jct_h`` is the mean of the episodes' 95th percentiles.
    ``cost_usd`` is electricity, ``egress_usd`` the bytes sent between regions and ``total_cost_usd``
    both (rows written before egress was billed have neither: NaN).  ``carbon_kg`` is operational
    kgCO2e; ``carbon_signal`` names its signal (the rows' signals, joined by ``/`` if they differ).
    Energy, utilisation and decision times are plain means (decision_ms_max: the maximum).
    """
    order: list[str] = []
    by: dict[str, list[dict]] = {}
    for r in rows:
        if r["agent"] not in by:
            order.append(r["agent"])
        by.setdefault(r["agent"], []).append(r)
    out = []
    for name in order:
        rs = by[name]
        entry: dict[str, Any] = {"agent": name, "seeds": len(rs)}
        for col, fld, scale in CI_METRICS:
            values = [float(r[fld] if fld not in ADDED_REPORT_FIELDS else r.get(fld, math.nan)) * scale for r in rs]
            entry[col], entry[col + "_ci"] = mean_ci(values)
        entry.update({
            "carbon_signal": "/".join(sorted({str(r.get("carbon_signal", "")) for r in rs} - {""})) or "-",
            "energy_mwh": float(np.mean([r["energy_kwh"] for r in rs])) / 1000,
            "utilisation": float(np.mean([r["utilisation"] for r in rs])),
            "decision_ms_mean": 1000 * float(np.mean([r["decision_time_mean_s"] for r in rs])),
            "decision_ms_max": 1000 * float(np.max([r["decision_time_max_s"] for r in rs])),
        })
        out.append(entry)
    return out


def format_table(summary: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of :func:`summarise` output; CI metrics print as ``mean ± half-width``."""
    cols = [("agent", ""), ("seeds", "d"), ("mean_jct_h", ".2f"), ("p95_jct_h", ".2f"), ("cost_usd", ".1f"),
            ("egress_usd", ".1f"), ("total_cost_usd", ".1f"), ("carbon_kg", ".1f"), ("carbon_signal", ""),
            ("throughput_tok_s", ".0f"), ("unfinished", ".1f"), ("energy_mwh", ".2f"), ("utilisation", ".2f"),
            ("decision_ms_mean", ".2f"), ("decision_ms_max", ".1f")]

    def cell(row: dict[str, Any], name: str, fmt: str) -> str:
        text = f"{row[name]:{fmt}}"
        if name + "_ci" in row:
            ci = row[name + "_ci"]
            text += f" ± {ci:{fmt}}" if math.isfinite(ci) else " ± -"
        return text

    body = [[name for name, _ in cols]] + [[cell(row, name, fmt) for name, fmt in cols] for row in summary]
    widths = [max(len(b[i]) for b in body) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths))) for b in body]
    lines.append("mean ± 95 % CI over seeds (Student t); JCT counts unfinished jobs at episode end - arrival; "
                 "cost_usd: electricity, egress_usd: bytes between regions, total_cost_usd: both; "
                 "carbon_kg: operational kgCO2e of the carbon_signal (lca: life-cycle, direct: combustion)")
    return "\n".join(lines)


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Write one CSV row per episode (scalar fields only; per-job lists are left out), atomically.

    Columns are the union of the rows' scalar fields in first-seen order.
    """
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k, v in r.items() if k not in cols and not isinstance(v, (list, tuple, dict)))
    with atomic_path(Path(path)) as tmp, results.open_temporary(tmp, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in cols})


_BANNER_DONE = False


def quiet_solver_banner() -> None:
    """Keep HiGHS's one-time start-up banner off stdout (and off stderr, where error messages go).

    HiGHS (used through PuLP by the ILP and TPA solvers) prints "Running HiGHS ... Copyright"
    from C++ when the process creates its first solver instance, before ``output_flag`` can be
    switched off, so PuLP's ``msg=False`` cannot stop it.  This creates that first instance with
    file descriptor 1 pointed at the null device; later instances print nothing.  A no-op without
    highspy or after the first call.  A Ctrl-C meanwhile is raised when it ends
    (:func:`sfenv.interrupts.ctrl_c_deferred`).
    """
    global _BANNER_DONE
    if _BANNER_DONE:
        return
    _BANNER_DONE = True
    with ctrl_c_deferred():
        try:
            import highspy
        except ImportError:
            return
        sys.stdout.flush()
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
