"""Learned policies: train SB3 / sb3-contrib agents on GeoSchedEnv and score saved models.

Algorithms (``ALGOS``):

- ``maskable-ppo``: sb3-contrib MaskablePPO with ``MultiInputPolicy`` on the Dict observation and the
  env's action masks (the recommended learner: invalid actions are never sampled);
- ``ppo``, ``a2c``, ``dqn``: SB3 with ``MlpPolicy`` on the flattened observation
  (``FlattenObservation``); they can pick masked actions, which the env treats as a penalised no-op.

Training uses ``DummyVecEnv`` (on two cores it beats ``SubprocVecEnv`` for an env this cheap, see
the research notes), a ``Monitor`` per env, optional TensorBoard logs and periodic checkpoints, and
saves ``<out>/<algo>-<scenario>-s<seed>.zip`` plus a ``.json`` with what is needed to reload it.
:class:`LearnedPolicy` reloads a model as an SB3 ``PolicyPredictor``; the evaluator
(:mod:`sfenv.agents.evaluate`, :func:`~sfenv.agents.evaluate.evaluate_model`) plays it.  This module
does not import the evaluator.  torch / SB3 are imported lazily: importing this module is cheap,
and without the ``rl`` extra :func:`train` and :class:`LearnedPolicy` raise
:class:`~sfenv.errors.DependencyNotInstalled` naming ``pip install "sfenv[rl]"``.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np

from sfenv.env import GeoSchedEnv
from sfenv.errors import DependencyNotInstalled, InvalidInput, MissingFile
from sfenv.scenario import Scenario, load_scenario

__all__ = ["ALGOS", "AlgoSpec", "make_env_fn", "train", "LearnedPolicy", "ScenarioLike"]

#: what every ``scenario`` argument accepts: a bundled name, a YAML path, a dict or a Scenario
ScenarioLike = str | Path | dict | Scenario


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
        raise InvalidInput(f"unknown algorithm {name!r}; expected one of {sorted(ALGOS)}") from None


def _rl_module(name: str) -> ModuleType:
    """Import a module of the ``rl`` extra, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise DependencyNotInstalled(
            f"{e.name or name} is not installed; learned policies need the rl extra: pip install \"sfenv[rl]\""
        ) from e


def make_env_fn(scenario: ScenarioLike, flatten: bool, env_kwargs: dict | None = None) -> Callable[[], gym.Env]:
    """A factory for ``make_vec_env``: GeoSchedEnv on ``scenario`` (flattened if asked)."""

    def _make() -> gym.Env:
        env: gym.Env = GeoSchedEnv(scenario, **(env_kwargs or {}))
        if flatten:
            env = gym.wrappers.FlattenObservation(env)
        return env

    return _make


def train(
    algo: str = "maskable-ppo",
    scenario: ScenarioLike = "spider-8",
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

    Every argument is checked before anything is written: a bad one raises
    :class:`~sfenv.errors.InvalidInput` (or :class:`~sfenv.scenario.ScenarioError`) and leaves no folder.

    :param algo: one of :data:`ALGOS`.
    :param scenario: the scenario to train on.
    :param total_timesteps: environment steps to train for (> 0).
    :param seed: seeds the algorithm and the envs (>= 0; env ``i`` gets ``seed + i``).
    :param n_envs: parallel envs in a ``DummyVecEnv`` (> 0).
    :param out_dir: folder for the model, its ``.json`` sidecar, TensorBoard logs and checkpoints
        (relative paths resolve against the current folder).
    :param env_kwargs: keyword overrides for :class:`sfenv.env.GeoSchedEnv`.
    :param algo_kwargs: keyword arguments for the SB3 algorithm (e.g. ``n_steps``, ``learning_rate``).
    :param tensorboard: write TensorBoard logs to ``<out_dir>/tb``.
    :param checkpoint_every: save a checkpoint every this many steps (0 = only at the end).
    :param progress_bar: show SB3's progress bar (needs ``tqdm`` and ``rich``).
    :return: the path of the saved ``.zip``.
    :raises DependencyNotInstalled: without the ``rl`` extra.
    """
    spec = _algo(algo)
    for name, value, low in (("total_timesteps", total_timesteps, 1), ("seed", seed, 0), ("n_envs", n_envs, 1),
                             ("checkpoint_every", checkpoint_every, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise InvalidInput(f"train: {name} = {value!r}; expected an integer >= {low}")
    sc = load_scenario(scenario)
    torch = _rl_module("torch")
    cls = getattr(_rl_module(spec.module), spec.cls)
    make_vec_env = _rl_module("stable_baselines3.common.env_util").make_vec_env
    checkpoint_callback = _rl_module("stable_baselines3.common.callbacks").CheckpointCallback
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    vec = make_vec_env(make_env_fn(sc, spec.flatten, env_kwargs), n_envs=n_envs, seed=seed)  # checks env_kwargs
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kwargs = dict(algo_kwargs or {})
    model = cls(spec.policy, vec, seed=seed, verbose=0, tensorboard_log=str(out / "tb") if tensorboard else None,
                **kwargs)
    name = f"{algo}-{sc.name}-s{seed}"
    callbacks = []
    if checkpoint_every > 0:
        callbacks.append(checkpoint_callback(max(1, checkpoint_every // n_envs), str(out / "checkpoints"), name))
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
        path = Path(path)
        if not path.is_file():
            raise MissingFile(
                f"{path}: no such model file (sfenv train writes <out>/<algo>-<scenario>-s<seed>.zip)")
        meta_path = path.with_suffix(".json")
        self.meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        self.algo = algo or self.meta.get("algo")
        if self.algo is None:
            raise InvalidInput(f"{path}: no {meta_path.name} sidecar; pass algo= (one of {sorted(ALGOS)})")
        self.spec = _algo(self.algo)
        cls = getattr(_rl_module(self.spec.module), self.spec.cls)
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

