"""Shared helpers for the environment tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import sfenv
from sfenv.registration import ENV_IDS
from sfenv.scenario import bundled_scenarios

#: every id sfenv registered (one per bundled scenario file)
REGISTERED = sfenv.register_envs()
#: bundled scenario -> the bundled scenario it copies but for its carbon months and reward weights (same
#: platform, prices, job mix and env settings: tests/test_carbon_scenario.py checks it).  The default
#: run's per-scenario sweeps (every agent, random rollouts, DDP) play the original only: geo-8-carbon's
#: would have added about 2 CPU minutes to a run at its 15-minute budget.  The env checkers, the episode
#: identity and the slow sweep at default budgets play every id.
VARIANT_OF = {"geo-8-carbon": "geo-8-contended-cost"}
#: the bundled scenarios the default run's per-scenario sweeps play
SWEPT_SCENARIOS = [name for name in bundled_scenarios() if name not in VARIANT_OF]
#: the registered ids the default run's per-id sweeps play
SWEPT = [env_id for env_id in REGISTERED if ENV_IDS[env_id] not in VARIANT_OF]
#: small episodes keep the checkers quick
SMALL = {"num_jobs": 8}


def make(env_id: str, **kw) -> gym.Env:
    return gym.make(env_id, **{**SMALL, **kw})


assert set(REGISTERED) <= set(ENV_IDS)


def same_values(a: Any, b: Any) -> bool:
    """Equal, arrays compared element by element and dtype (observations and ``info`` hold arrays)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return bool(a == b)


def play_masked(env: Any, seed: int, steps: int, actions: list[int] | None = None,
                before_step: Any = None) -> tuple[list[tuple], list[int]]:
    """``steps`` steps from ``reset(seed)``, the next episodes from seeds ``seed + 1``, ...: masked random actions.

    :param actions: the actions to play (default: drawn from the masks with a generator seeded ``seed``).
    :param before_step: called with the env before every reset and step.
    :return: per reset ``(obs, info)`` and per step ``(obs, reward, terminated, truncated, info)``, and the actions.
    """
    rng = np.random.default_rng(seed)
    if before_step:
        before_step(env)
    obs, info = env.reset(seed=seed)
    out: list[tuple] = [(obs, info)]
    played: list[int] = []
    for t in range(steps):
        action = actions[t] if actions is not None else int(rng.choice(np.flatnonzero(info["action_mask"])))
        if before_step:
            before_step(env)
        obs, reward, term, trunc, info = env.step(action)
        out.append((obs, reward, term, trunc, info))
        played.append(action)
        if term or trunc:
            seed += 1
            if before_step:
                before_step(env)
            obs, info = env.reset(seed=seed)
            out.append((obs, info))
    return out, played
