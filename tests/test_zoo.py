"""RL Baselines3 Zoo trains on sfenv with the bundled hyperparameter file (the zoo extra)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest
import yaml

from sfenv.errors import UntrustedCode
from sfenv.hyperparams import path as hyperparams_path
from sfenv.runs.results import read_results

ZOO = hyperparams_path("zoo-ppo.yml")


def test_zoo_file_matches_sfenv_train_defaults():
    from sfenv.agents.learned import DEFAULT_HP

    hp = yaml.safe_load(ZOO.read_text())
    entry = hp["sfenv/GeoSchedUnmasked-v6"]
    assert hp["default"] == entry == hp["sfenv/GeoSched-v6"]
    for key in ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef", "learning_rate", "clip_range"):
        assert entry[key] == DEFAULT_HP["ppo"][key], key
    assert eval(entry["policy_kwargs"]) == DEFAULT_HP["ppo"]["policy_kwargs"]  # the Zoo evaluates this string
    assert entry["env_kwargs"]["invalid_action_limit"] >= 1  # unmasked PPO cannot stall an episode


def test_zoo_train_command_runs(tmp_path):
    pytest.importorskip("rl_zoo3")
    steps = 4096
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "sfenv/GeoSched-v6",
           "--gym-packages", "sfenv", "-conf", str(ZOO), "-n", str(steps), "--seed", "0", "--eval-freq", "-1",
           "--num-threads", "1", "-f", "logs", "--env-kwargs", "num_jobs:8", "invalid_action_limit:3"]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "logs" / "ppo" / "sfenv-GeoSched-v6_1"
    assert (run / "sfenv-GeoSched-v6.zip").is_file()
    assert (run / "sfenv-GeoSched-v6" / "vecnormalize.pkl").is_file()  # normalize: from the file
    from stable_baselines3 import PPO

    model = PPO.load(run / "sfenv-GeoSched-v6.zip", device="cpu")
    assert model.num_timesteps >= steps and model.gamma == 0.999 and model.n_steps == 512
    # episodes end (8 jobs each): the monitors hold finished episodes with their lengths
    episodes = []
    for f in run.glob("*.monitor.csv"):
        with open(f) as fh:
            next(fh)  # the JSON header line
            episodes += list(csv.DictReader(fh))
    assert len(episodes) >= 4 and all(int(e["l"]) > 0 for e in episodes)


def _zoo_train(folder, *extra: str) -> subprocess.CompletedProcess:
    """The README's Zoo command, shrunk: 256 steps, an evaluation every 128, one episode each."""
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "sfenv/GeoSchedUnmasked-v6",
           "--gym-packages", "sfenv", "-conf", str(ZOO), "-n", "256", "--eval-freq", "128", "--eval-episodes", "1",
           "--seed", "0", "--num-threads", "1", "-f", "logs",
           "-params", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:1", *extra]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory):
    """A tiny Zoo run on the id meant for it, with no env kwargs on the command line (as the README shows it)."""
    pytest.importorskip("rl_zoo3")
    folder = tmp_path_factory.mktemp("zoo")
    proc = _zoo_train(folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "logs" / "ppo" / "sfenv-GeoSchedUnmasked-v6_1"


def test_zoo_evaluation_episodes_end(zoo_run):
    """The Zoo builds its evaluation env from the id alone (not the file's env_kwargs): the id's own
    defaults must end episodes, else every evaluation runs to the time limit and returns ~-200."""
    import gymnasium as gym
    import numpy as np

    limit = gym.spec("sfenv/GeoSchedUnmasked-v6").max_episode_steps
    evaluations = np.load(zoo_run / "evaluations.npz")
    lengths = evaluations["ep_lengths"].ravel()
    assert len(lengths) == 2  # at 128 and 256 steps
    assert (lengths < limit).all(), lengths  # terminated: every job ran, not truncated at the limit
    assert (run_best := zoo_run / "best_model.zip").is_file(), run_best


def test_sfenv_evaluate_scores_a_zoo_model(zoo_run, tmp_path, capsys):
    """``model:ppo:PATH`` plays a Zoo model (Dict observation, its VecNormalize statistics) in the CLI table."""

    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.cli import main

    best = zoo_run / "best_model.zip"
    with pytest.raises(UntrustedCode, match="SB3 .zip is code"):  # no weights-only form beside it
        LearnedPolicy(f"ppo:{best}")
    policy = LearnedPolicy(f"ppo:{best}", trust_code=True)
    assert policy.spec.flatten is False and policy.normalize_obs is not None  # the Zoo's vecnormalize.pkl
    assert policy.meta["env_kwargs"] == {"invalid_action_limit": 3}
    out = tmp_path / "r.json"
    spec = f"model:ppo:{best}"
    assert main(["evaluate", "--agents", f"fifo,{spec}", "--seeds", "1", "--num-jobs", "6", "--quiet",
                 "--out", str(out), "--trust-model-code"]) == 0
    table = capsys.readouterr().out
    assert spec in table
    rows = {r["agent"]: r for r in read_results(out)[1]}
    assert read_results(out)[0]["agents"][spec]["algo"] == "ppo"  # the settings name the model and its algorithm
    assert rows[spec]["jobs"] == 6 and not rows[spec]["stopped_early"]
    # without the algorithm: one line saying how to name it
    trusted = ["--seeds", "1", "--num-jobs", "6", "--quiet", "--trust-model-code"]
    assert main(["evaluate", "--agents", f"model:{best}", *trusted]) == 2
    assert "model:ppo:" in capsys.readouterr().err
    assert main(["evaluate", "--agents", f"model:dqn:{best}", *trusted]) == 2
    assert "cannot be loaded as DQN" in capsys.readouterr().err


def test_model_spec_keeps_its_algorithm_when_made_absolute(tmp_path, monkeypatch):
    """A Ray worker gets ``model:ppo:/abs/path`` (the algorithm is not lost with the folder)."""
    from sfenv.agents.learned import absolute_model_spec, split_model_spec

    monkeypatch.chdir(tmp_path)
    assert split_model_spec("ppo:logs/x.zip") == ("ppo", "logs/x.zip")
    assert split_model_spec("runs/x.zip") == (None, "runs/x.zip")
    assert split_model_spec("odd:x.zip") == (None, "odd:x.zip")
    assert absolute_model_spec("ppo:logs/x.zip") == f"ppo:{tmp_path.resolve() / 'logs' / 'x.zip'}"
    assert absolute_model_spec("runs/x.zip") == str(tmp_path.resolve() / "runs" / "x.zip")
