"""Gymnasium's and SB3's env checkers on every registered id, unwrapped and via gym.make."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from envs import REGISTERED, make
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import sfenv
from sfenv.env import GeoSchedEnv


def test_registered_ids_cover_every_bundled_scenario():
    from sfenv.registration import ENV_IDS
    from sfenv.scenario import bundled_scenarios

    assert "sfenv/GeoSched-v6" in REGISTERED
    assert {ENV_IDS[i] for i in REGISTERED} == set(bundled_scenarios())
    for env_id in REGISTERED:
        assert gym.spec(env_id).max_episode_steps > 0


def test_registration_is_idempotent():
    before = dict(gym.registry)
    assert sfenv.register_envs() == REGISTERED
    import importlib

    importlib.reload(sfenv)
    assert set(gym.registry) == set(before)


@pytest.mark.parametrize("env_id", REGISTERED)
def test_gymnasium_checker(env_id):
    env = make(env_id)
    # No warning is filtered: the checker must pass silently on the unwrapped env.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", REGISTERED)
def test_sb3_checker(env_id):
    env = make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(env.unwrapped, warn=True)
        sb3_check_env(env, warn=True)  # through gym.make's wrappers
    env.close()


def test_gym_make_default_and_async_vector():
    env = gym.make("sfenv/GeoSched-v6")
    assert isinstance(env.unwrapped, GeoSchedEnv)
    assert env.unwrapped.scenario.name == "spider-8"
    vec = gym.make_vec("sfenv/GeoSched-v6", num_envs=2, vectorization_mode="async", num_jobs=6)
    obs, info = vec.reset(seed=0)
    assert obs["regions"].shape[0] == 2
    obs, rew, term, trunc, info = vec.step(vec.action_space.sample())
    assert rew.shape == (2,)
    vec.close()


def test_invalid_actions_are_penalised_noops():
    env = make("sfenv/GeoSched-v6")
    obs, info = env.reset(seed=0)
    t0 = env.unwrapped.sim.time
    waiting = list(env.unwrapped.sim.waiting)
    masked = [a for a in range(env.action_space.n) if not info["action_mask"][a]]
    assert masked, "expected empty candidate slots"
    obs, r, term, trunc, info = env.step(masked[0])  # in the space but masked: a penalised no-op
    assert info["invalid_action"] and r == pytest.approx(-env.unwrapped.invalid_action_penalty)
    assert env.unwrapped.sim.time == t0 and env.unwrapped.sim.waiting == waiting
    for a in (10_000, -1):  # outside the space: refused, as Gymnasium's envs do (see tests/test_actions.py)
        with pytest.raises(ValueError, match="not in the action space"):
            env.step(a)
        assert env.unwrapped.sim.time == t0 and env.unwrapped.sim.waiting == waiting
