"""SB3 / sb3-contrib smoke runs: training starts, masks flow, evaluators score agents via predict()."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import sfenv  # noqa: F401
from sfenv.sim import make_simulator

torch.set_num_threads(1)


def test_maskable_ppo_smoke():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env("sfenv/GeoSched-v6", n_envs=1, seed=0, env_kwargs={"num_jobs": 12})
    model = MaskablePPO("MultiInputPolicy", vec, n_steps=512, batch_size=128, n_epochs=2, seed=0, verbose=0)
    model.learn(2048)
    assert model.num_timesteps >= 2048
    obs = vec.reset()
    masks = get_action_masks(vec)
    for _ in range(50):
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        assert masks[0][action[0]]  # masked prediction never picks an invalid action
        obs, _, _, _ = vec.step(action)
        masks = get_action_masks(vec)


def test_ppo_on_flattened_obs_smoke():
    from stable_baselines3 import PPO

    env = gym.wrappers.FlattenObservation(gym.make("sfenv/GeoSched-v6", num_jobs=12))
    assert len(env.observation_space.shape) == 1
    model = PPO("MlpPolicy", env, n_steps=512, batch_size=128, n_epochs=2, seed=0, verbose=0)
    model.learn(1024)
    assert model.num_timesteps >= 1024


@pytest.mark.parametrize("masking", [True, False])
def test_evaluate_policy_scores_fifo(masking):
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from sfenv.agents.fifo import FIFOAgent
    from stable_baselines3.common.env_util import make_vec_env

    from sfenv.scenario import load_scenario

    vec = make_vec_env("sfenv/GeoSched-v6", n_envs=1, seed=5, env_kwargs={"num_jobs": 10})
    agent = FIFOAgent().bind(vec)
    rewards, lengths = evaluate_policy(agent, vec, n_eval_episodes=1, use_masking=masking, warn=False,
                                       return_episode_rewards=True)
    # the episode's return is minus its total JCT (scaled), as a direct simulator run of seed 5 gives
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 10})
    sim = make_simulator(sc, 5)
    sim.run(FIFOAgent().decide)
    k = vec.envs[0].unwrapped.K
    assert rewards[0] == pytest.approx(-sum(r.jct for r in sim.records()) / (3600.0 * k), rel=1e-6)
    assert lengths[0] >= 10


def test_learned_policy_train_and_evaluate(tmp_path):
    from sfenv.agents.learned import LearnedPolicy, train

    from sfenv.app.evaluate import evaluate_model

    path = train("maskable-ppo", "spider-8", total_timesteps=512, seed=0, out_dir=tmp_path, tensorboard=False,
                 env_kwargs={"num_jobs": 6}, algo_kwargs={"n_steps": 256, "batch_size": 64, "n_epochs": 1})
    assert path.exists() and path.with_suffix(".json").exists()
    policy = LearnedPolicy(path)
    reports = evaluate_model(policy, "spider-8", seeds=[0, 1], env_kwargs={"num_jobs": 6})
    assert len(reports) == 2 and all(r.jobs == 6 for r in reports)


def test_evaluator_scores_a_saved_model_next_to_heuristics(tmp_path, capsys):
    from sfenv.agents.learned import LearnedPolicy, train

    from sfenv.app.cli import main
    from sfenv.app.evaluate import evaluate_agents, evaluate_model

    path = train("maskable-ppo", "spider-8", total_timesteps=256, seed=0, out_dir=tmp_path, tensorboard=False,
                 env_kwargs={"num_jobs": 5}, algo_kwargs={"n_steps": 128, "batch_size": 64, "n_epochs": 1})
    spec = f"model:{path}"
    out = tmp_path / "rows.json"
    rows = evaluate_agents(["fifo", spec], "spider-8", seeds=[0, 1], num_jobs=5, out=out, progress=False)
    assert sorted((r["agent"], r["seed"]) for r in rows) == sorted((a, s) for a in ("fifo", spec) for s in (0, 1))
    model_rows = [r for r in rows if r["agent"] == spec]
    # the same seeded episodes as the env plays them (evaluate_model), and the same metrics as heuristics
    reports = evaluate_model(LearnedPolicy(path), "spider-8", seeds=[0, 1], env_kwargs={"num_jobs": 5})
    for row, rep in zip(model_rows, reports):
        assert row["mean_jct_s"] == rep.mean_jct_s and row["jobs"] == 5 and row["decisions"] > 0
        assert not row["stopped_early"]
    assert set(model_rows[0]) >= set(rows[0])
    # the command line takes it too, resumes from the file, and rejects a missing model clearly
    assert main(["evaluate", "--agents", f"fifo,{spec}", "--seeds", "2", "--seed", "0", "--num-jobs", "5",
                 "--out", str(out), "--resume", "--quiet"]) == 0
    assert spec in capsys.readouterr().out
    assert main(["evaluate", "--agents", "model:nope.zip", "--seeds", "1", "--quiet"]) == 2
    assert "no such model file" in capsys.readouterr().err
    assert main(["evaluate", "--agents", spec, "--scenario", "spider-16", "--seeds", "1", "--num-jobs", "3",
                 "--quiet"]) == 2
    assert "observation space" in capsys.readouterr().err
