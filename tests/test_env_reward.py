"""The reward sums to minus total JCT (scaled) when cost and throughput weights are zero."""

from __future__ import annotations

import numpy as np
import pytest
from envs import make


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_return_is_minus_total_jct(seed):
    env = make("sfenv/GeoSched-v6", num_jobs=15, cost_weight=0.0, throughput_weight=0.0, jct_weight=1.0)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        mask = info["action_mask"]
        valid = np.flatnonzero(mask[:-1])
        a = int(valid[0]) if len(valid) and rng.random() < 0.8 else env.unwrapped.wait_action
        obs, r, term, trunc, info = env.step(a)
        total += r
        done = term or trunc
    assert term
    records = env.unwrapped.sim.records()
    assert all(rec.finished for rec in records)
    jct = sum(rec.jct for rec in records)
    assert total == pytest.approx(-jct / (3600.0 * env.unwrapped.K), rel=1e-9)


def test_cost_term_and_info_are_raw():
    env = make("sfenv/GeoSched-v6", num_jobs=10, cost_weight=2.0, jct_weight=0.0)
    obs, info = env.reset(seed=3)
    total, done, step_costs = 0.0, False, 0.0
    while not done:
        obs, r, term, trunc, info = env.step(0 if info["action_mask"][0] else env.unwrapped.wait_action)
        total += r
        step_costs += info["step_cost_usd"]
        done = term or trunc
    report = info["episode_report"]
    assert step_costs == pytest.approx(report["cost_usd"], rel=1e-9)
    assert info["cost_usd"] == pytest.approx(report["cost_usd"], rel=1e-9)
    assert total == pytest.approx(-2.0 * report["cost_usd"], rel=1e-9)
    assert not any(isinstance(v, float) and v != v for v in info.values() if not isinstance(v, np.ndarray))
