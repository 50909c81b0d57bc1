"""SB3 ``PolicyPredictor`` adapter: lets any :class:`~sfenv.agents.base.SchedulerAgent` play through the env.

``agent.bind(env)`` attaches the agent to a :class:`sfenv.env.GeoSchedEnv` (possibly wrapped) or to
an SB3 ``DummyVecEnv`` of them; ``agent.predict(obs, ...)`` then reads each env's simulator view,
asks ``agent.decide(view)`` and maps the plan to the env's action with ``env.action_for(plan)``
(which injects the plan into the candidate list if no proposer offered it).  The observation is
not used: reference agents see the full read-only simulator state, like the papers' schedulers.
``SubprocVecEnv`` is not supported (its envs live in other processes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bind_envs", "predict_actions"]


def bind_envs(env: Any) -> tuple[list[Any], bool]:
    """The unwrapped GeoSchedEnvs behind ``env`` and whether ``env`` is vectorised.

    :raises TypeError: for vector envs whose sub-envs are not reachable in this process.
    """
    envs = getattr(env, "envs", None)
    if envs is not None:  # SB3 DummyVecEnv / gymnasium SyncVectorEnv
        return [e.unwrapped for e in envs], True
    if hasattr(env, "num_envs") and not hasattr(env, "unwrapped"):
        raise TypeError("agents can only be bound to a single env or a DummyVecEnv (not SubprocVecEnv)")
    return [env.unwrapped], False


def _batched(observation: Any) -> bool:
    """True if ``observation`` carries a leading batch axis (SB3 passes VecEnv observations)."""
    if isinstance(observation, dict):
        observation = next(iter(observation.values()), None)
    return observation is not None and np.ndim(observation) > 1


def predict_actions(agent: Any, envs: list[Any], vectorised: bool, observation: Any = None) -> np.ndarray:
    """One action per bound env from ``agent.decide`` on that env's view (batched like ``observation``)."""
    actions = []
    for env in envs:
        if env.sim is None or env.sim.done:
            actions.append(env.wait_action)
            continue
        if agent.replans and env.sim.replanner is None:  # a new episode: install the re-planning hook
            env.sim.set_replanner(agent.replan, hourly=agent.replan_hourly)
        plan = agent.decide(env.view)
        actions.append(env.action_for(plan))
    out = np.asarray(actions, dtype=np.int64)
    return out if vectorised or _batched(observation) else out[0]
