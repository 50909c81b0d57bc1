"""Random rollouts on every registered id but variants (``envs.VARIANT_OF``): no exception, obs in space,
finite rewards, mask never empty."""

from __future__ import annotations

import numpy as np
import pytest
from envs import SWEPT, make


def _random_rollout(env_id: str, steps: int, masked: bool, seed: int = 0) -> int:
    env = make(env_id, num_jobs=30)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    episodes = 0
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        assert mask.dtype == bool and mask.any() and mask[-1]
        assert np.array_equal(mask, info["action_mask"])
        a = int(rng.choice(np.flatnonzero(mask))) if masked else int(rng.integers(env.action_space.n))
        obs, r, term, trunc, info = env.step(a)
        assert env.observation_space.contains(obs)
        assert np.isfinite(r)
        if term or trunc:
            episodes += 1
            obs, info = env.reset()
    env.close()
    return episodes


#: random steps per id: 20,000 on the default id, 5,000 (several 30-job episodes each) on the others, which
#: share its code (24 runs of 20,000 took about 4 of the default run's 33 CPU minutes)
LONG_ROLLOUT_STEPS = 20_000
ROLLOUT_STEPS = 5_000


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("env_id", SWEPT)
def test_random_rollout(env_id, masked):
    steps = LONG_ROLLOUT_STEPS if env_id == "sfenv/GeoSched-v6" else ROLLOUT_STEPS
    assert _random_rollout(env_id, steps, masked) > 0


def test_info_throughput_is_the_sum_over_running_jobs():
    env = make("sfenv/Spider8-v6", num_jobs=30)
    rng = np.random.default_rng(1)
    _, info = env.reset(seed=1)
    seen = 0
    done = False
    while not done:
        sim = env.unwrapped.sim
        expected = sum(sim.jobs[j].perf.throughput for j in sim.running if sim.jobs[j].perf)
        assert info["throughput_tokens_s"] == pytest.approx(expected, rel=1e-9, abs=1e-9)
        seen += expected > 0
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        _, _, term, trunc, info = env.step(a)
        done = term or trunc
    assert seen > 10 and info["throughput_tokens_s"] == 0.0  # exactly zero once every job is done
