"""Gymnasium registration of the sfenv environment ids (idempotent).

The ids carry the environment's version (``-v6``, :data:`sfenv.runs.protocol.ENV_VERSION`).  The
``-v5``, ``-v4``, ``-v3`` and ``-v2`` ids stay registered and play those versions' WAN models
(:data:`VERSION_SIM`: env v5's per-member VM-pair caps and full zero-bubble replays, and before it
the sharing models ``wan_sharing="v4"``, ``"v3"``, ``"v2"``), so that their published results can be
played again; Gymnasium warns that they are out of date.  The ``-v0`` ids
(whose observation held the privileged share of jobs still to arrive) stay registered with that
observation (``privileged_obs=True``) on the current model, so that models trained on it can be
played; they are deprecated.  The ``-v1`` ids are gone with v1's WAN model (Gymnasium's
``DeprecatedEnv`` names ``-v6`` when one is asked for).  Results of different versions are not
comparable (results files record the version and the scenario's hash).
"""

from __future__ import annotations

import functools
from importlib import resources

import gymnasium as gym
import yaml

__all__ = ["DEPRECATED_ENV_IDS", "ENV_IDS", "ENV_KWARGS", "ENV_VERSION", "PREVIOUS_ENV_IDS", "VERSION_SIM",
           "register_envs"]

#: the version suffix of the current ids
ENV_VERSION = "v6"
#: the versions before it whose ids stay registered, each on its own WAN model
PREVIOUS_VERSIONS = ("v5", "v4", "v3", "v2")
#: env v5's WAN settings that env v6 changed (``sim.vm_pair_cap``, ``sim.skip_zero_bubble_periods``)
_V5_SIM = {"vm_pair_cap": "member", "skip_zero_bubble_periods": False}
#: earlier version -> the ``GeoSchedEnv`` arguments (``sim`` settings) that play its WAN model
VERSION_SIM: dict[str, dict] = {version: {"wan_sharing": version, **_V5_SIM}
                                for version in PREVIOUS_VERSIONS}
_NAMES: dict[str, str] = {
    "GeoSched": "spider-8",
    "Spider8": "spider-8",
    "Spider16": "spider-16",
    "Spider32": "spider-32",
    "Spider64": "spider-64",
    "CEE": "cee",
    "Geo8": "geo-8",
    "BACE6": "bace-6",
    "Spider8Contended": "spider-8-contended",
    "Geo8Contended": "geo-8-contended",
    "Geo8ContendedCost": "geo-8-contended-cost",
    "Geo8Carbon": "geo-8-carbon",
    "GeoSchedUnmasked": "spider-8",
}
#: name -> keyword arguments its ids add to ``scenario``.  ``GeoSchedUnmasked`` is spider-8 for agents
#: that cannot read the action masks (SB3's PPO/A2C/DQN, the RL Zoo): the third masked action in a row
#: acts as wait (``invalid_action_limit=3``), so an episode always moves on.  Tools that build a second
#: env from the id alone (the RL Zoo's evaluation env ignores the hyperparameter file's ``env_kwargs``)
#: get that setting too.
_NAME_KWARGS: dict[str, dict] = {"GeoSchedUnmasked": {"invalid_action_limit": 3}}
#: Registered id -> bundled scenario name (the current version).
ENV_IDS: dict[str, str] = {f"sfenv/{name}-{ENV_VERSION}": scenario for name, scenario in _NAMES.items()}
#: names first registered at v2: no model was ever trained on a v0 id of theirs, so they get none
_NEW_IN_V2 = frozenset({"Geo8Carbon"})
#: Env v5's, v4's, v3's and v2's ids (their WAN models, :data:`VERSION_SIM`; observation and actions as
#: v6's) -> scenario.
PREVIOUS_ENV_IDS: dict[str, str] = {f"sfenv/{name}-{version}": scenario
                                    for version in PREVIOUS_VERSIONS for name, scenario in _NAMES.items()}
#: Deprecated ids (v0: the observation holds the privileged share of jobs still to arrive) -> scenario.
DEPRECATED_ENV_IDS: dict[str, str] = {f"sfenv/{name}-v0": scenario for name, scenario in _NAMES.items()
                                      if name not in _NEW_IN_V2}
#: keyword arguments that give each earlier version its behaviour
_VERSION_KWARGS: dict[str, dict] = {"v0": {"privileged_obs": True}, **VERSION_SIM}
#: Registered id (current, previous and deprecated) -> keyword arguments it adds to ``scenario``
ENV_KWARGS: dict[str, dict] = {
    f"sfenv/{name}-{version}": {**kwargs, **_VERSION_KWARGS.get(version, {})}
    for name, kwargs in _NAME_KWARGS.items() for version in (ENV_VERSION, *PREVIOUS_VERSIONS, "v0")
}


@functools.cache
def _max_steps(scenario: str) -> int:
    """Read ``env.max_episode_steps`` from a bundled file without full validation, once per scenario."""
    data = yaml.safe_load(resources.files("sfenv.scenarios").joinpath(f"{scenario}.yaml").read_text()) or {}
    return int((data.get("env") or {}).get("max_episode_steps", 2000))


def register_envs() -> list[str]:
    """Register every id whose scenario file is bundled (current, previous, deprecated); a second call changes nothing.

    :return: the current ids registered by sfenv (the ``-v5`` ... ``-v2`` and ``-v0`` ids are registered
        too but not listed).
    """
    out = []
    for env_id, scenario in {**ENV_IDS, **PREVIOUS_ENV_IDS, **DEPRECATED_ENV_IDS}.items():
        if not resources.files("sfenv.scenarios").joinpath(f"{scenario}.yaml").is_file():
            continue
        if env_id in ENV_IDS:
            out.append(env_id)
        if env_id in gym.registry:
            continue
        version = env_id.rsplit("-", 1)[1]
        gym.register(
            id=env_id,
            entry_point="sfenv.env:GeoSchedEnv",
            max_episode_steps=_max_steps(scenario),
            kwargs={"scenario": scenario, **_VERSION_KWARGS.get(version, {}), **ENV_KWARGS.get(env_id, {})},
        )
    return out
