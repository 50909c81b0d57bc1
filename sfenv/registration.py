"""Gymnasium registration of the sfenv environment ids (idempotent)."""

from __future__ import annotations

from importlib import resources

import gymnasium as gym
import yaml

__all__ = ["ENV_IDS", "ENV_KWARGS", "register_envs"]

#: Registered id -> bundled scenario name.
ENV_IDS: dict[str, str] = {
    "sfenv/GeoSched-v0": "spider-8",
    "sfenv/Spider8-v0": "spider-8",
    "sfenv/Spider16-v0": "spider-16",
    "sfenv/Spider32-v0": "spider-32",
    "sfenv/Spider64-v0": "spider-64",
    "sfenv/CEE-v0": "cee",
    "sfenv/Geo8-v0": "geo-8",
    "sfenv/BACE6-v0": "bace-6",
    "sfenv/Spider8Contended-v0": "spider-8-contended",
    "sfenv/Geo8Contended-v0": "geo-8-contended",
    "sfenv/Geo8ContendedCost-v0": "geo-8-contended-cost",
    "sfenv/GeoSchedUnmasked-v0": "spider-8",
}

#: Registered id -> keyword arguments it adds to ``scenario``.  ``GeoSchedUnmasked-v0`` is spider-8
#: for agents that cannot read the action masks (SB3's PPO/A2C/DQN, the RL Zoo): the third masked
#: action in a row acts as wait (``invalid_action_limit=3``), so an episode always moves on.  Tools
#: that build a second env from the id alone (the RL Zoo's evaluation env ignores the
#: hyperparameter file's ``env_kwargs``) get that setting too.
ENV_KWARGS: dict[str, dict] = {
    "sfenv/GeoSchedUnmasked-v0": {"invalid_action_limit": 3},
}


def _max_steps(scenario: str) -> int:
    """Read ``env.max_episode_steps`` from a bundled file without full validation (cheap at import)."""
    data = yaml.safe_load(resources.files("sfenv.scenarios").joinpath(f"{scenario}.yaml").read_text()) or {}
    return int((data.get("env") or {}).get("max_episode_steps", 2000))


def register_envs() -> list[str]:
    """Register every id whose scenario file is bundled; a second call changes nothing.

    :return: the ids registered by sfenv.
    """
    out = []
    for env_id, scenario in ENV_IDS.items():
        if not resources.files("sfenv.scenarios").joinpath(f"{scenario}.yaml").is_file():
            continue
        out.append(env_id)
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point="sfenv.env:GeoSchedEnv",
            max_episode_steps=_max_steps(scenario),
            kwargs={"scenario": scenario, **ENV_KWARGS.get(env_id, {})},
        )
    return out
