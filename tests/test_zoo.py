"""RL Baselines3 Zoo trains on sfenv with the bundled hyperparameter file (the zoo extra)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest
import yaml

from sfenv.hyperparams import path as hyperparams_path

ZOO = hyperparams_path("zoo-ppo.yml")


def test_zoo_file_matches_sfenv_train_defaults():
    from sfenv.agents.learned import DEFAULT_HP

    hp = yaml.safe_load(ZOO.read_text())
    entry = hp["sfenv/GeoSched-v1"]
    assert hp["default"] == entry
    for key in ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef", "learning_rate", "clip_range"):
        assert entry[key] == DEFAULT_HP["ppo"][key], key
    assert eval(entry["policy_kwargs"]) == DEFAULT_HP["ppo"]["policy_kwargs"]  # the Zoo evaluates this string
    assert entry["env_kwargs"]["invalid_action_limit"] >= 1  # unmasked PPO cannot stall an episode


def test_zoo_train_command_runs(tmp_path):
    pytest.importorskip("rl_zoo3")
    steps = 4096
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "sfenv/GeoSched-v1",
           "--gym-packages", "sfenv", "-conf", str(ZOO), "-n", str(steps), "--seed", "0", "--eval-freq", "-1",
           "--num-threads", "1", "-f", "logs", "--env-kwargs", "num_jobs:8", "invalid_action_limit:3"]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "logs" / "ppo" / "sfenv-GeoSched-v1_1"
    assert (run / "sfenv-GeoSched-v1.zip").is_file()
    assert (run / "sfenv-GeoSched-v1" / "vecnormalize.pkl").is_file()  # normalize: from the file
    from stable_baselines3 import PPO

    model = PPO.load(run / "sfenv-GeoSched-v1.zip", device="cpu")
    assert model.num_timesteps >= steps and model.gamma == 0.999 and model.n_steps == 512
    # episodes end (8 jobs each): the monitors hold finished episodes with their lengths
    episodes = []
    for f in run.glob("*.monitor.csv"):
        with open(f) as fh:
            next(fh)  # the JSON header line
            episodes += list(csv.DictReader(fh))
    assert len(episodes) >= 4 and all(int(e["l"]) > 0 for e in episodes)
