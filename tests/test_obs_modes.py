"""obs_mode='compact': a topology-independent observation; both checkers; a policy trained on 8 regions runs on 16;
training over a distribution of scenarios (ScenarioMix, generated_scenarios)."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from envs import make
from gymnasium.utils.env_checker import check_env as gym_check_env

from sfenv.env import COMPACT_CAND_FEATURES, PLATFORM_FEATURES, GeoSchedEnv

FIXED = {"obs_mode": "compact", "max_candidates": 16, "queue_window": 8, "forecast_hours": 6}
IDS = ["sfenv/GeoSched-v6", "sfenv/Spider16-v6", "sfenv/Geo8-v6", "sfenv/CEE-v6", "sfenv/BACE6-v6"]


@pytest.mark.parametrize("env_id", IDS)
def test_checkers_pass_on_the_compact_observation(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = make(env_id, **FIXED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped)
        sb3_check_env(env.unwrapped, warn=True)
        sb3_check_env(env, warn=True)
    env.close()


def test_compact_size_does_not_depend_on_the_topology():
    spaces = {i: make(i, **FIXED).observation_space for i in IDS}
    first = spaces[IDS[0]]
    assert all(s == first for s in spaces.values())
    assert first["candidates"].shape == (16 * COMPACT_CAND_FEATURES,)
    assert first["platform"].shape == (PLATFORM_FEATURES + 6,)
    # the full observation does depend on it: 8 and 16 regions differ
    full8, full16 = make("sfenv/GeoSched-v6").observation_space, make("sfenv/Spider16-v6").observation_space
    assert full8 != full16


def test_compact_features_say_what_the_docstring_says():
    env = GeoSchedEnv("spider-8", num_jobs=12, obs_mode="compact")
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=1)
    checked = 0
    for _ in range(60):
        sim, view = env.sim, env.view
        cands = obs["candidates"].reshape(env.N, COMPACT_CAND_FEATURES)
        mask = env.action_masks()
        runtimes = {}
        for i, plan in enumerate(env.candidates):
            perf = view.evaluate(plan)
            js = sim.jobs[plan.job_id]
            rt = (js.spec.iterations - js.progress) * perf.iter_time
            runtimes[i] = (plan.job_id, rt)
            assert cands[i, 0] == float(mask[i])
            lo, hi = 60.0, 30 * 86400.0
            assert cands[i, 10] == pytest.approx(min(1, max(0, math.log(rt / lo) / math.log(hi / lo))), abs=1e-5)
            assert cands[i, 11] == pytest.approx(min(1.0, plan.gpus / view.free_gpus.sum()), abs=1e-6)
            assert cands[i, 5] == pytest.approx(min(1.0, len(plan.regions) / 8), abs=1e-6)
            checked += 1
        if runtimes:
            fastest = {}
            for job, rt in runtimes.values():
                fastest[job] = min(rt, fastest.get(job, math.inf))
            shortest_job = min(fastest, key=fastest.get)
            for i, (job, rt) in runtimes.items():
                assert cands[i, 13] == pytest.approx(fastest[job] / rt, abs=1e-5)
                assert (cands[i, 14] == pytest.approx(1.0)) == (fastest[job] == fastest[shortest_job])
        assert not cands[len(env.candidates):].any()  # empty slots are zeros
        plat = obs["platform"]
        free = view.free_gpus
        gpus = env.scenario.topology.gpu_counts
        assert plat[0] == pytest.approx(free.sum() / gpus.sum(), abs=1e-6)
        assert plat[4] == pytest.approx((free / gpus).min(), abs=1e-6) and plat[8] == pytest.approx(
            (free / gpus).max(), abs=1e-6)
        assert plat[10] == pytest.approx(min(1, view.prices_now().mean() / 300), abs=1e-5)
        valid = np.flatnonzero(mask)
        obs, _, term, _, _ = env.step(int(rng.choice(valid)))
        if term:
            break
    assert checked > 10


def test_a_policy_trained_on_8_regions_runs_on_16(tmp_path):
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import LearnedPolicy, train

    from sfenv.app.evaluate import evaluate_agents, evaluate_model

    path = train("maskable-ppo", "spider-8", total_timesteps=128, n_envs=1, out_dir=tmp_path, tensorboard=False,
                 env_kwargs={"num_jobs": 4, "obs_mode": "compact"}, eval_every=0, eval_seeds=[1], plot=False,
                 algo_kwargs={"n_steps": 128, "batch_size": 64, "n_epochs": 1})
    policy = LearnedPolicy(path)
    reports = evaluate_model(policy, "spider-16", seeds=[0], env_kwargs={"num_jobs": 4})
    assert reports[0].jobs == 4 and reports[0].finished + reports[0].unfinished == 4
    rows = evaluate_agents([f"model:{path}"], "spider-16", seeds=[1], num_jobs=4, progress=False)
    assert rows[0]["scenario"] == "spider-16" and not rows[0]["stopped_early"]
    # the same on the full observation is refused: its size follows the topology
    full = train("maskable-ppo", "spider-8", total_timesteps=64, n_envs=1, out_dir=tmp_path, tensorboard=False,
                 env_kwargs={"num_jobs": 4}, eval_every=0, eval_seeds=[1], plot=False,
                 algo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1})
    with pytest.raises(ValueError, match="observation space"):
        evaluate_model(LearnedPolicy(full), "spider-16", seeds=[0], env_kwargs={"num_jobs": 4})


def test_training_over_a_distribution_of_scenarios():
    from sfenv.agents.learned import ScenarioMix, generated_scenarios

    scs = generated_scenarios(6, seed=3, num_jobs=5)
    again = generated_scenarios(6, seed=3, num_jobs=5)
    assert [s.cfg.model_dump() for s in scs] == [s.cfg.model_dump() for s in again]
    assert len({s.topology.num_regions for s in scs}) > 1 and len({s.cfg.workload.load for s in scs}) > 1
    assert all(s.cfg.workload.num_jobs == 5 for s in scs)
    mix = ScenarioMix(scs, FIXED)
    names = []
    for ep in range(12):
        obs, info = mix.reset(seed=ep)
        assert mix.observation_space.contains(obs)
        names.append(info["scenario"])
        assert mix.scenario.name == info["scenario"] and len(mix.sim.jobs) == 5
    assert len(set(names)) > 2
    mix.reset(seed=4)
    first = (mix.scenario.name, mix.sim.time)
    mix.reset(seed=4)
    assert (mix.scenario.name, mix.sim.time) == first  # seeded
    with pytest.raises(ValueError, match="other spaces"):
        ScenarioMix(["spider-8", "spider-16"], {"obs_mode": "full"})  # full: sizes follow the topology
    # through gym's vector API too
    vec = gym.vector.SyncVectorEnv([lambda: ScenarioMix(scs, FIXED) for _ in range(2)])
    obs, _ = vec.reset(seed=0)
    assert obs["candidates"].shape == (2, 16 * COMPACT_CAND_FEATURES)
    vec.close()
