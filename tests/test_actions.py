"""Actions: what is outside the action space raises; in-space actions, however typed, act alike."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sfenv.env import GeoSchedEnv

N = 4  # max_candidates: actions 0..3 start a candidate, 4 waits


def _env(seed: int = 0) -> GeoSchedEnv:
    env = GeoSchedEnv("spider-8", num_jobs=6, max_candidates=N)
    env.reset(seed=seed)
    return env


def _state(env: GeoSchedEnv) -> tuple:
    sim = env.sim
    assert sim is not None
    return sim.time, list(sim.waiting), sorted(sim.running), sim.finished_count, env.candidates


OUT_OF_SPACE = [
    1.5, 1.0, np.float64(1.0), np.float32(0.0), "1", "wait", True, False, np.bool_(True), None,
    N + 1, -1, 10_000, np.int64(-1), np.uint8(N + 1), np.array(N + 1), np.array(1.0), np.array(True),
    np.array([1]), np.array([[0]]), [1], (1,), 1 + 0j,
]


@pytest.mark.parametrize("action", OUT_OF_SPACE, ids=repr)
def test_out_of_space_action_raises_and_changes_nothing(action):
    env = _env()
    before = _state(env)
    with pytest.raises(ValueError, match="not in the action space"):
        env.step(action)
    assert _state(env) == before
    # the env still works after the refusal
    env.step(env.wait_action)


@pytest.mark.parametrize("action", OUT_OF_SPACE, ids=repr)
def test_refusal_agrees_with_the_discrete_space(action):
    """We refuse what Discrete(N + 1).contains refuses, and booleans too (Discrete reads True as 1)."""
    space = gym.spaces.Discrete(N + 1)
    try:
        inside = space.contains(action)
    except Exception:
        inside = False
    assert not inside or isinstance(action, (bool, np.bool_))


def _typed(a: int) -> list:
    return [a, np.int64(a), np.int32(a), np.uint8(a), np.array(a), np.array(a, dtype=np.int16)]


def test_numpy_integers_and_0d_arrays_act_like_python_ints():
    """Each accepted form gives the same episode as plain ints (SB3 and vector envs pass these)."""
    reference = _env(3)
    others = [_env(3) for _ in _typed(0)[1:]]
    for step in range(40):
        mask = reference.action_masks()
        a = int(np.flatnonzero(mask)[step % int(mask.sum())])  # some valid action, cycling
        obs, r, term, trunc, _ = reference.step(a)
        for env, typed in zip(others, _typed(a)[1:]):
            assert env.action_space.contains(typed)
            o2, r2, t2, _, _ = env.step(typed)
            assert r2 == r and t2 == term
            assert all(np.array_equal(obs[k], o2[k]) for k in obs)
        if term:
            break


def test_masked_in_space_action_is_a_penalised_noop():
    env = _env()
    mask = env.action_masks()
    masked = np.flatnonzero(~mask)
    assert masked.size, "expected an empty candidate slot"
    before = _state(env)
    _, r, _, _, info = env.step(int(masked[0]))
    assert info["invalid_action"] and r == pytest.approx(-env.invalid_action_penalty)
    assert _state(env) == before
    # a valid one is not flagged
    _, _, _, _, info = env.step(env.wait_action)
    assert not info["invalid_action"]


def test_action_masks_before_reset_raises():
    env = GeoSchedEnv("spider-8", num_jobs=4)
    with pytest.raises(RuntimeError, match="reset"):
        env.action_masks()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.wait_action)
    env.reset(seed=0)
    mask = env.action_masks()
    assert mask.dtype == bool and mask.shape == (env.action_space.n,) and mask[env.wait_action]


def test_gym_make_wrappers_pass_the_refusal_through():
    env = gym.make("sfenv/GeoSched-v6", num_jobs=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="not in the action space"):
        env.step(0.0)
    env.step(np.int64(env.unwrapped.wait_action))
    env.close()
