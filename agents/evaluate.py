"""One evaluator for every agent: identical seeded episodes, the same metrics.

Each (agent, seed) pair runs ``scenario.make_simulator(seed)`` to the end with the agent's
``decide``; the wall time of every ``decide`` call is measured here, outside the simulation, so it
never enters simulated results.  Results go to a JSON file written atomically after every pair
(temporary file + ``os.replace``); with ``resume=True`` pairs already in the file are skipped, so an
interrupted sweep continues where it stopped.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sfenv.agents.base import SchedulerAgent
from sfenv.agents.registry import make_agent

from sfenv.scenario import Scenario, load_scenario

__all__ = ["MODEL_PREFIX", "run_episode", "run_policy_episode", "evaluate_agents", "summarise", "format_table",
           "atomic_write_json"]


def run_episode(agent: SchedulerAgent, scenario: Scenario, seed: int) -> dict[str, Any]:
    """Run one seeded episode; returns the episode report plus decision-time statistics."""
    agent.reset(seed)
    sim = scenario.make_simulator(seed)
    times: list[float] = []

    def timed(view):  # noqa: ANN001
        t = time.perf_counter()
        plan = agent.decide(view)
        times.append(time.perf_counter() - t)
        return plan

    report = sim.run(timed)
    records = sim.records()
    row: dict[str, Any] = {"agent": agent.name, "scenario": scenario.name, "seed": seed, **report.to_dict()}
    row["jcts_s"] = [r.jct for r in records if r.finished]
    row["decisions"] = len(times)
    row["decision_time_mean_s"] = float(np.mean(times)) if times else 0.0
    row["decision_time_max_s"] = float(np.max(times)) if times else 0.0
    return row


#: an ``agents`` entry ``"model:PATH"`` is a saved SB3 model (see :mod:`sfenv.agents.learned`)
MODEL_PREFIX = "model:"


def run_policy_episode(policy: Any, scenario: Scenario, seed: int, env_kwargs: dict | None = None) -> dict[str, Any]:
    """Play one seeded episode through the environment with a learned policy's ``predict``.

    The episode is the one :func:`run_episode` plays (``env.reset(seed=s)`` plays
    ``scenario.make_simulator(s)``); the env takes the observation/action settings the model was
    trained with.  A policy that never lets time pass (possible without action masks) is stopped
    after ``max(max_episode_steps, 100 x jobs)`` steps; its unfinished jobs count as such.

    :raises ValueError: if the model's observation space does not match this scenario's.
    """
    from sfenv.agents.learned import make_env_fn

    if env_kwargs is None:  # the settings the model was trained with (its workload size aside)
        env_kwargs = {k: v for k, v in policy.meta.get("env_kwargs", {}).items() if k != "num_jobs"}
    env = make_env_fn(scenario, policy.spec.flatten, env_kwargs)()
    if env.observation_space != policy.model.observation_space:
        env.close()
        raise ValueError(f"{policy.name} was trained on another observation space than scenario "
                         f"{scenario.name!r} gives (trained on {policy.meta.get('scenario', '?')!r})")
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    limit = max(scenario.cfg.env.max_episode_steps, 100 * base.sim.view().num_jobs)  # type: ignore[attr-defined]
    times: list[float] = []
    steps, done = 0, False
    while not done and steps < limit:
        mask = base.action_masks()  # type: ignore[attr-defined]
        t = time.perf_counter()
        action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
        times.append(time.perf_counter() - t)
        obs, _, terminated, truncated, _ = env.step(int(np.asarray(action).item()))
        done = terminated or truncated
        steps += 1
    sim = base.sim  # type: ignore[attr-defined]
    records = sim.records()
    row: dict[str, Any] = {"agent": policy.name, "scenario": scenario.name, "seed": seed, **sim.report().to_dict()}
    row["jcts_s"] = [r.jct for r in records if r.finished]
    row["decisions"] = len(times)
    row["decision_time_mean_s"] = float(np.mean(times)) if times else 0.0
    row["decision_time_max_s"] = float(np.max(times)) if times else 0.0
    row["stopped_early"] = not done
    env.close()
    return row


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=True))
    os.replace(tmp, path)


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
) -> list[dict[str, Any]]:
    """Run every agent on every seed of ``scenario``; returns one row per (agent, seed).

    ``agents`` holds registered names, agent instances, or ``"model:PATH"`` for a saved SB3 model
    (played through the environment by :func:`run_policy_episode`; its rows are named by that
    string).

    :param num_jobs: override the scenario's workload size.
    :param out: JSON file updated atomically after each pair.
    :param resume: skip pairs already in ``out``.
    :param agent_kwargs: constructor keyword arguments per agent name.
    """
    sc = load_scenario(scenario)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    rows: list[dict[str, Any]] = []
    out_path = Path(out) if out else None
    if out_path and resume and out_path.exists():
        rows = json.loads(out_path.read_text())
    done = {(r["agent"], r["scenario"], r["seed"]) for r in rows}
    instances = [_instance(a, agent_kwargs) for a in agents]
    todo = [(a, s) for a in instances for s in seeds if (a.name, sc.name, s) not in done]
    bar = None
    if progress and todo:
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc=f"evaluate {sc.name}", unit="episode")
        except ImportError:
            bar = None
    for agent, seed in todo:
        row = run_episode(agent, sc, seed) if isinstance(agent, SchedulerAgent) else run_policy_episode(agent, sc, seed)
        rows.append(row)
        if out_path:
            atomic_write_json(out_path, rows)
        if on_row:
            on_row(row)
        if bar is not None:
            bar.set_postfix_str(f"{agent.name} seed {seed}")
            bar.update()
    if bar is not None:
        bar.close()
    return rows


def _instance(a: str | SchedulerAgent, agent_kwargs: dict[str, dict] | None) -> Any:
    if isinstance(a, SchedulerAgent):
        return a
    if a.startswith(MODEL_PREFIX):
        from sfenv.agents.learned import LearnedPolicy

        policy = LearnedPolicy(a[len(MODEL_PREFIX):])
        policy.name = a  # rows are keyed by the spec as given (resume finds them again)
        return policy
    return make_agent(a, **(agent_kwargs or {}).get(a, {}))


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per agent (in first-seen order): means over seeds; p95 JCT over all finished jobs of all seeds."""
    order: list[str] = []
    by: dict[str, list[dict]] = {}
    for r in rows:
        if r["agent"] not in by:
            order.append(r["agent"])
        by.setdefault(r["agent"], []).append(r)
    out = []
    for name in order:
        rs = by[name]
        jcts = [j for r in rs for j in r["jcts_s"]]
        out.append({
            "agent": name,
            "seeds": len(rs),
            "mean_jct_h": float(np.mean(jcts)) / 3600 if jcts else math.nan,
            "p95_jct_h": float(np.percentile(jcts, 95)) / 3600 if jcts else math.nan,
            "throughput_tok_s": float(np.mean([r["mean_throughput_tokens_s"] for r in rs])),
            "cost_usd": float(np.mean([r["cost_usd"] for r in rs])),
            "energy_mwh": float(np.mean([r["energy_kwh"] for r in rs])) / 1000,
            "utilisation": float(np.mean([r["utilisation"] for r in rs])),
            "unfinished": float(np.mean([r["unfinished"] for r in rs])),
            "decision_ms_mean": 1000 * float(np.mean([r["decision_time_mean_s"] for r in rs])),
            "decision_ms_max": 1000 * float(np.max([r["decision_time_max_s"] for r in rs])),
        })
    return out


def format_table(summary: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of :func:`summarise` output."""
    cols = [("agent", "", 12), ("seeds", "d", 6), ("mean_jct_h", ".2f", 11), ("p95_jct_h", ".2f", 10),
            ("throughput_tok_s", ".0f", 17), ("cost_usd", ".1f", 10), ("energy_mwh", ".2f", 11),
            ("utilisation", ".2f", 12), ("unfinished", ".1f", 11), ("decision_ms_mean", ".2f", 17),
            ("decision_ms_max", ".1f", 16)]
    lines = ["".join(f"{name:<{w}}" if i == 0 else f"{name:>{w}}" for i, (name, _, w) in enumerate(cols))]
    for row in summary:
        lines.append("".join(
            f"{row[name]:<{w}}" if i == 0 else f"{row[name]:>{w}{fmt}}" for i, (name, fmt, w) in enumerate(cols)
        ))
    return "\n".join(lines)
