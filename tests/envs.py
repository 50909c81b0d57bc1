"""Shared helpers for the environment tests."""

from __future__ import annotations

import gymnasium as gym

import sfenv
from sfenv.registration import ENV_IDS

#: every id sfenv registered (one per bundled scenario file)
REGISTERED = sfenv.register_envs()
#: small episodes keep the checkers quick
SMALL = {"num_jobs": 8}


def make(env_id: str, **kw) -> gym.Env:
    return gym.make(env_id, **{**SMALL, **kw})


assert set(REGISTERED) <= set(ENV_IDS)
