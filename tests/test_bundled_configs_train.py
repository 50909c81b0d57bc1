"""Every bundled ``sfenv train`` config trains, as a user runs it, in a smoke version of a few hundred steps.

Only sizes are cut (steps, episodes' job counts, expert labels, evaluation seeds); the algorithm, the
scenario(s), the env settings, the expert and the pretraining rounds are the config's own.  A config that
cannot start (as the look-ahead configs could not at f0d081c) fails here, in the default run.
"""

from __future__ import annotations

import json

import pytest
import yaml

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import torch
from sfenv.agents.learned import bundled_configs, load_config

from sfenv.app.cli import main

torch.set_num_threads(1)

#: every bundled config, by name: a new config must be added here (the test below checks the list is complete)
CONFIGS = ["carbon-rollout", "contended", "contended-clone", "contended-distill", "contended-rollout", "generalise",
           "generalise-queue1", "generalise-rollout", "quick"]
SMOKE = ["--steps", "256", "--n-envs", "2", "--num-jobs", "5", "--eval-seeds", "1", "--eval-every", "0",
         "--hp", "n_steps=64", "--hp", "batch_size=64", "--hp", "n_epochs=1", "--quiet", "--no-plot",
         "--no-tensorboard"]

#: configs whose steps cost more (carbon-rollout: two carbon heuristics fit a plan per region at every
#: step to propose their decisions) play a smaller smoke: the same code paths, fewer steps and jobs
SMALLER = {"carbon-rollout": ["--steps", "32", "--n-envs", "1", "--num-jobs", "3", "--hp", "n_steps=32",
                              "--hp", "batch_size=32"]}
PRETRAIN_STEPS = {"carbon-rollout": "8"}


def test_the_smoke_list_names_every_bundled_config():
    assert sorted(CONFIGS) == bundled_configs()


@pytest.mark.parametrize("name", CONFIGS)
def test_bundled_config_trains_a_smoke_run(name, tmp_path, capsys):
    cfg = load_config(name)
    extra = ["--pretrain-steps", PRETRAIN_STEPS.get(name, "40")] if cfg.get("pretrain") else []
    assert main(["train", "--config", name, "--out", str(tmp_path), *SMOKE, *SMALLER.get(name, []), *extra]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for f in ("model.zip", "best_model.zip", "config.yml", "eval.json"):
        assert (run / f).is_file(), f
    saved = yaml.safe_load((run / "config.yml").read_text())
    assert saved["algo"] == cfg["algo"]
    jobs = SMALLER.get(name, SMOKE)
    assert saved["env_kwargs"]["num_jobs"] == int(jobs[jobs.index("--num-jobs") + 1])
    for key, value in (cfg.get("env_kwargs") or {}).items():
        if key != "num_jobs":  # the smoke run cuts the job count
            assert saved["env_kwargs"][key] == value, key  # the config's env settings reach the env
    if cfg.get("pretrain"):
        assert saved["pretrain"]["expert"] == cfg["pretrain"].get("expert", saved["pretrain"]["expert"])
        rounds = json.loads((run / "pretrain.json").read_text())
        assert len(rounds) == cfg["pretrain"].get("rounds", 2)
    history = json.loads((run / "eval.json").read_text())
    assert history and all(h["unfinished"] >= 0 for h in history)
    assert "saved" in capsys.readouterr().out
