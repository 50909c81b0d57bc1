"""Learned policies: train SB3 / sb3-contrib agents on GeoSchedEnv and score saved models.

Algorithms (``ALGOS``):

- ``maskable-ppo``: sb3-contrib MaskablePPO with ``MultiInputPolicy`` on the Dict observation and the
  env's action masks (the recommended learner: invalid actions are never sampled);
- ``ppo``, ``a2c``, ``dqn``: SB3 with ``MlpPolicy`` on the flattened observation
  (``FlattenObservation``); they can pick masked actions, which the env treats as a penalised no-op.

Training uses ``DummyVecEnv`` (on two cores it beats ``SubprocVecEnv`` for an env this cheap, see
the research notes), a ``Monitor`` per env, optional TensorBoard logs and periodic checkpoints, and
saves ``<out>/<algo>-<scenario>-s<seed>.zip`` plus a ``.json`` with what is needed to reload it.
:class:`LearnedPolicy` reloads a model as an SB3 ``PolicyPredictor`` for the evaluator.
torch / SB3 are imported lazily: importing this module is cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ALGOS", "AlgoSpec", "make_env_fn", "train", "LearnedPolicy", "evaluate_model"]


@dataclass(frozen=True)
class AlgoSpec:
    """How to build one algorithm: import path, policy name, whether obs are flattened, masked."""

    module: str
    cls: str
    policy: str
    flatten: bool
    masked: bool


ALGOS: dict[str, AlgoSpec] = {
    "maskable-ppo": AlgoSpec("sb3_contrib", "MaskablePPO", "MultiInputPolicy", False, True),
    "ppo": AlgoSpec("stable_baselines3", "PPO", "MlpPolicy", True, False),
    "a2c": AlgoSpec("stable_baselines3", "A2C", "MlpPolicy", True, False),
    "dqn": AlgoSpec("stable_baselines3", "DQN", "MlpPolicy", True, False),
}


def _algo(name: str) -> AlgoSpec:
    try:
        return ALGOS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; expected one of {sorted(ALGOS)}") from None


def make_env_fn(scenario: Any, flatten: bool, env_kwargs: dict | None = None) -> Callable[[], gym.Env]:
    """A factory for ``make_vec_env``: GeoSchedEnv on ``scenario`` (flattened if asked)."""
    from sfenv.env import GeoSchedEnv

    def _make() -> gym.Env:
        env: gym.Env = GeoSchedEnv(scenario, **(env_kwargs or {}))
        if flatten:
            env = gym.wrappers.FlattenObservation(env)
        return env

    return _make


def train(
    algo: str = "maskable-ppo",
    scenario: Any = "spider-8",
    total_timesteps: int = 50_000,
    seed: int = 0,
    n_envs: int = 1,
    out_dir: str | Path = "runs",
    env_kwargs: dict | None = None,
    algo_kwargs: dict | None = None,
    tensorboard: bool = True,
    checkpoint_every: int = 0,
    progress_bar: bool = False,
) -> Path:
    """Train ``algo`` on ``scenario`` and save the model; returns the ``.zip`` path.

    :param n_envs: parallel envs in a ``DummyVecEnv``.
    :param env_kwargs: keyword overrides for :class:`sfenv.env.GeoSchedEnv`.
    :param algo_kwargs: keyword arguments for the SB3 algorithm (e.g. ``n_steps``, ``learning_rate``).
    :param tensorboard: write TensorBoard logs to ``<out_dir>/tb``.
    :param checkpoint_every: save a checkpoint every this many steps (0 = only at the end).
    """
    import importlib

    import torch
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env

    from sfenv.scenario import load_scenario

    spec = _algo(algo)
    sc = load_scenario(scenario)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    vec = make_vec_env(make_env_fn(sc, spec.flatten, env_kwargs), n_envs=n_envs, seed=seed)
    cls = getattr(importlib.import_module(spec.module), spec.cls)
    kwargs = dict(algo_kwargs or {})
    model = cls(spec.policy, vec, seed=seed, verbose=0, tensorboard_log=str(out / "tb") if tensorboard else None,
                **kwargs)
    name = f"{algo}-{sc.name}-s{seed}"
    callbacks = []
    if checkpoint_every > 0:
        callbacks.append(CheckpointCallback(max(1, checkpoint_every // n_envs), str(out / "checkpoints"), name))
    model.learn(total_timesteps=total_timesteps, callback=callbacks or None, tb_log_name=name,
                progress_bar=progress_bar)
    path = out / f"{name}.zip"
    tmp = out / f".{name}.tmp.zip"
    model.save(str(tmp))
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written model
    meta = {"algo": algo, "scenario": sc.name, "seed": seed, "total_timesteps": total_timesteps,
            "env_kwargs": env_kwargs or {}, "algo_kwargs": kwargs}
    tmp_meta = out / f".{name}.json.tmp"
    tmp_meta.write_text(json.dumps(meta, indent=2))
    os.replace(tmp_meta, out / f"{name}.json")
    vec.close()
    return path


class LearnedPolicy:
    """A saved SB3 model as a PolicyPredictor (``predict`` with optional ``action_masks``).

    :param path: the model ``.zip``; its ``.json`` sidecar (written by :func:`train`) gives the
        algorithm, otherwise pass ``algo``.
    """

    def __init__(self, path: str | Path, algo: str | None = None):
        import importlib

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: no such model file (sfenv train writes <out>/<algo>-<scenario>-s<seed>.zip)")
        meta_path = path.with_suffix(".json")
        self.meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        self.algo = algo or self.meta.get("algo")
        if self.algo is None:
            raise ValueError(f"{path}: no {meta_path.name} sidecar; pass algo= (one of {sorted(ALGOS)})")
        self.spec = _algo(self.algo)
        cls = getattr(importlib.import_module(self.spec.module), self.spec.cls)
        self.model = cls.load(str(path), device="cpu")
        self.name = f"model:{path.name}"

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """SB3 ``predict``; masks are passed to maskable models and ignored by the others."""
        if self.spec.masked:
            return self.model.predict(observation, state, episode_start, deterministic, action_masks=action_masks)
        return self.model.predict(observation, state, episode_start, deterministic)


def evaluate_model(policy: LearnedPolicy, scenario: Any, seeds: list[int], env_kwargs: dict | None = None) -> list:
    """Play one episode per seed through the env; returns the simulator's episode reports.

    ``env_kwargs`` may set ``num_jobs`` (the workload size) and env settings; by default the env
    takes the settings the model was trained with (see :func:`sfenv.agents.evaluate.run_policy_episode`).
    """
    from dataclasses import fields

    from sfenv.agents.evaluate import run_policy_episode

    from sfenv.metrics import EpisodeReport
    from sfenv.scenario import load_scenario

    sc = load_scenario(scenario)
    kwargs = dict(env_kwargs or {})
    num_jobs = kwargs.pop("num_jobs", None)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    reports = []
    for seed in seeds:
        row = run_policy_episode(policy, sc, seed, env_kwargs=kwargs or None)
        reports.append(EpisodeReport(**{f.name: row[f.name] for f in fields(EpisodeReport)}))
    return reports
