"""Both render modes produce output that reflects the state."""

from __future__ import annotations

import numpy as np
from envs import make


def _play(env, steps=15):
    obs, info = env.reset(seed=2)
    for _ in range(steps):
        valid = np.flatnonzero(info["action_mask"])
        obs, r, term, trunc, info = env.step(int(valid[0]))
    return env


def test_rgb_array():
    env = _play(make("sfenv/GeoSched-v6", render_mode="rgb_array"))
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert img.shape[0] >= 300 and img.shape[1] >= 600
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20  # not a blank canvas
    env.close()
    env.close()  # closing twice is allowed


def test_ansi_lists_every_region():
    env = _play(make("sfenv/GeoSched-v6", render_mode="ansi"))
    text = env.render()
    for reg in env.unwrapped.scenario.topology.regions:
        assert reg.name in text
    assert f"running {len(env.unwrapped.sim.running)}" in text
