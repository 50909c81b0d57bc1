"""Gymnasium's end-of-episode flags: ``terminated`` when every job finished, ``truncated`` when the clock was cut.

The simulator ends an episode at the scenario's horizon (or at a dead end, where it moves the clock to the
horizon) with jobs still in the system; that is a time limit outside the state, so a learner must bootstrap
there (``truncated``), not treat it as the MDP's end (``terminated``).
"""

from __future__ import annotations

import numpy as np
from envs import make


def test_all_jobs_finished_is_terminated():
    env = make("sfenv/GeoSched-v6", num_jobs=4)
    obs, info = env.reset(seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert (terminated, truncated) == (True, False)
    assert info["episode_report"]["unfinished"] == 0


def test_horizon_with_jobs_left_is_truncated_with_a_report():
    env = make("sfenv/GeoSched-v6", num_jobs=3)
    obs, info = env.reset(seed=0)
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):  # wait always: no job ever starts, the horizon ends the episode
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.wait_action)
        steps += 1
        assert np.isfinite(reward)
    assert steps < env.spec.max_episode_steps  # the simulator's horizon, not TimeLimit's step limit
    assert (terminated, truncated) == (False, True)
    assert info["time_s"] == env.unwrapped.scenario.cfg.sim.horizon_h * 3600.0
    assert info["episode_report"]["unfinished"] == 3
    assert env.observation_space.contains(obs)
