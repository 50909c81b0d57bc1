"""RLlib PPO with action masks on GeoSchedEnv (the ``ray`` extra): training, checkpoints, a policy.

``sfenv train --algo rllib-ppo`` calls :func:`train_rllib`; ``rllib:PATH`` in ``sfenv evaluate``
plays a saved checkpoint through :class:`RLlibPolicy`, next to SB3 models and the heuristics.

How the masks reach the policy ([code]: RLlib's new API stack example ``action_masking_rl_module``
and its ``ActionMaskingTorchRLModule``; this module re-implements that mechanism for sfenv):

- :class:`MaskedGeoSchedEnv` wraps :class:`sfenv.env.GeoSchedEnv` (with the scenario's step limit,
  as the registered ids have) and returns ``{"observations": <the env's Dict observation flattened
  into one Box>, "action_mask": <action_masks() as float32>}``;
- :class:`MaskedPPOTorchModule` is RLlib's default PPO torch module built on the ``observations``
  sub-space; every forward pass (exploration, inference, training) adds ``log(mask)`` (clamped to
  the smallest float) to the action logits, so a masked action has probability zero and is never
  sampled; the value function reads the observations only.

Our choices: the hyper-parameters default to SB3's PPO defaults (rollout 2,048 steps, minibatch 64,
10 epochs, lr 3e-4, gamma 0.99, GAE lambda 0.95, clip 0.2, two 64-unit tanh layers for policy and
value), so ``rllib-ppo`` and ``maskable-ppo`` differ by library, not by settings; the learner runs in
the driver process (``num_learners=0``, CPU); ``workers`` remote env runners sample (0: the driver
samples).  With ``strict_masks=True`` the env raises :class:`InvalidActionSampled` on a masked
action instead of treating it as a penalised no-op (the tests train that way).

Checkpoints: ``<out>/rllib-ppo-<scenario>-s<seed>/`` is an RLlib algorithm checkpoint
(``Algorithm.save_to_path``) plus ``sfenv.json`` (the scenario's settings, env arguments, steps
done); it is replaced atomically (written next to it, then renamed) every ``checkpoint_every``
steps and at the end.  ``resume=True`` restores it and trains until ``total_timesteps`` in all.

Ray and torch are imported only inside the functions: importing this module is cheap and needs
neither; without the ``ray`` extra they raise :class:`~sfenv.errors.DependencyNotInstalled`.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sfenv.env import GeoSchedEnv
from sfenv.errors import DependencyNotInstalled, InvalidInput, MissingFile, UntrustedCode
from sfenv.scenario import Scenario, load_scenario

__all__ = [
    "ALGO",
    "META_FILE",
    "PPO_DEFAULTS",
    "SPEC",
    "InvalidActionSampled",
    "MaskedGeoSchedEnv",
    "PolicySpec",
    "RLlibPolicy",
    "checkpoint_path",
    "masked_ppo_module_class",
    "train_rllib",
]

#: the algorithm name on the command line (``sfenv train --algo rllib-ppo``)
ALGO = "rllib-ppo"
#: what every ``scenario`` argument accepts: a bundled name, a YAML path, a dict or a Scenario
ScenarioLike = str | Path | dict | Scenario


@dataclass(frozen=True)
class PolicySpec:
    """How the evaluator builds the env for a policy (as :class:`sfenv.agents.learned.AlgoSpec` does)."""

    flatten: bool
    masked: bool


#: an RLlib policy plays on the plain Dict observation, with masks
SPEC = PolicySpec(flatten=False, masked=True)
#: sfenv's sidecar inside a checkpoint folder
META_FILE = "sfenv.json"
#: SB3's PPO defaults, in RLlib's names (see the module docstring)
PPO_DEFAULTS: dict[str, Any] = {"train_batch_size_per_learner": 2048, "minibatch_size": 64, "num_epochs": 10,
                                "lr": 3e-4, "gamma": 0.99, "lambda_": 0.95, "clip_param": 0.2, "entropy_coeff": 0.0,
                                "vf_loss_coeff": 0.5, "grad_clip": 0.5}
#: the module path of the RLlib default policy inside an algorithm checkpoint
_MODULE_DIR = ("learner_group", "learner", "rl_module", "default_policy")


class InvalidActionSampled(RuntimeError):
    """A masked action reached :class:`MaskedGeoSchedEnv` with ``strict_masks`` on (the masking failed)."""


def _ray_module(name: str) -> ModuleType:
    """Import a module of the ``ray`` extra, or say how to install it."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise DependencyNotInstalled(
            f"{e.name or name} is not installed; RLlib training needs the ray extra: pip install \"sfenv[ray]\""
        ) from e


def _dict_space(space: gym.Space) -> spaces.Dict:
    """``space``, a Dict space (the observation space of :class:`~sfenv.env.GeoSchedEnv`).

    :raises TypeError: for another kind of space.
    """
    if not isinstance(space, spaces.Dict):
        raise TypeError(f"expected a Dict observation space, got {space}")
    return space


def _num_actions(space: gym.Space) -> int:
    """The number of actions of a Discrete space (the action space of :class:`~sfenv.env.GeoSchedEnv`).

    :raises TypeError: for another kind of space.
    """
    if not isinstance(space, spaces.Discrete):
        raise TypeError(f"expected a Discrete action space, got {space}")
    return int(space.n)


class MaskedGeoSchedEnv(gym.Wrapper):
    """GeoSchedEnv with RLlib's masked observation: ``{"observations": Box, "action_mask": Box}``.

    :param config: RLlib's ``env_config``: ``scenario`` (a bundled name, a YAML path or a scenario
        settings dict), ``env_kwargs`` (keyword arguments of :class:`~sfenv.env.GeoSchedEnv`) and
        ``strict_masks`` (raise :class:`InvalidActionSampled` on a masked action).
    """

    def __init__(self, config: dict | None = None):
        config = dict(config or {})
        sc = load_scenario(config.get("scenario", "spider-8"))
        geo_env = GeoSchedEnv(sc, **config.get("env_kwargs", {}))
        super().__init__(gym.wrappers.TimeLimit(geo_env, max_episode_steps=sc.cfg.env.max_episode_steps))
        #: the GeoSchedEnv inside the time limit (``self.env.unwrapped``): its action masks
        self.geo_env = geo_env
        self.strict = bool(config.get("strict_masks", False))
        self.inner_space = _dict_space(geo_env.observation_space)
        n = _num_actions(geo_env.action_space)
        self.observation_space = spaces.Dict({
            "observations": spaces.flatten_space(self.inner_space),
            "action_mask": spaces.Box(0.0, 1.0, (n,), np.float32),
        })
        #: masked actions received (only with ``strict_masks`` off; otherwise the first one raises)
        self.invalid_actions = 0

    def _wrap(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"observations": np.asarray(spaces.flatten(self.inner_space, obs), dtype=np.float32),
                "action_mask": self.geo_env.action_masks().astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        """Reset the wrapped env; the observation carries the first action mask."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._wrap(obs), info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Step the wrapped env (a masked action raises with ``strict_masks``, else it is counted)."""
        a = int(np.asarray(action).item())
        if not self.geo_env.action_masks()[a]:
            if self.strict:
                raise InvalidActionSampled(f"masked action {a} sampled (mask {self.geo_env.action_masks()})")
            self.invalid_actions += 1
        obs, reward, terminated, truncated, info = self.env.step(a)
        return self._wrap(obs), float(reward), terminated, truncated, info


_MODULE_CLASS: type | None = None


def masked_ppo_module_class() -> type:
    """The masking PPO torch RLModule class (built on first use, so this module imports without Ray).

    The class is also reachable as ``sfenv.agents.rllib.MaskedPPOTorchModule`` once built, which is
    the name RLlib records in checkpoints (it is built again on import when a checkpoint loads).
    """
    global _MODULE_CLASS
    if _MODULE_CLASS is not None:
        return _MODULE_CLASS
    torch = _ray_module("torch")
    columns = _ray_module("ray.rllib.core.columns").Columns
    # Ray is imported lazily, so its base class is Any to the type checker
    base: Any = _ray_module("ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module").DefaultPPOTorchRLModule
    float_min = _ray_module("ray.rllib.utils.torch_utils").FLOAT_MIN

    def split(batch: dict) -> tuple[Any, dict]:
        """(mask, batch with the plain observations); the batch given is not changed."""
        obs = batch[columns.OBS]
        if isinstance(obs, dict):
            return obs["action_mask"], {**batch, columns.OBS: obs["observations"]}
        return batch["action_mask"], batch

    def masked(out: dict, mask: Any) -> dict:
        out[columns.ACTION_DIST_INPUTS] = out[columns.ACTION_DIST_INPUTS] + torch.clamp(torch.log(mask), min=float_min)
        return out

    class MaskedPPOTorchModule(base):
        """RLlib's default PPO torch module on the ``observations`` sub-space; logits masked by ``action_mask``."""

        def __init__(self, *, observation_space: gym.Space | None = None, **kwargs: Any):
            if not isinstance(observation_space, spaces.Dict) or set(observation_space.spaces) != {
                    "observations", "action_mask"}:
                raise ValueError(f"MaskedPPOTorchModule needs a Dict(observations, action_mask) observation "
                                 f"space (MaskedGeoSchedEnv), got {observation_space}")
            self._with_mask = observation_space
            super().__init__(observation_space=observation_space["observations"], **kwargs)

        def setup(self) -> None:
            """Build the networks on the plain observations, then show the masked space to RLlib."""
            super().setup()
            self.observation_space = self._with_mask

        def _forward(self, batch: dict, **kwargs: Any) -> dict:
            mask, plain = split(batch)
            return masked(super()._forward(plain, **kwargs), mask)

        def _forward_train(self, batch: dict, **kwargs: Any) -> dict:
            mask, plain = split(batch)
            return masked(super()._forward_train(plain, **kwargs), mask)

        def compute_values(self, batch: dict, embeddings: Any = None) -> Any:
            """State values from the plain observations (the mask plays no part)."""
            return super().compute_values(split(batch)[1], embeddings)

    MaskedPPOTorchModule.__module__ = __name__
    MaskedPPOTorchModule.__qualname__ = "MaskedPPOTorchModule"
    _MODULE_CLASS = MaskedPPOTorchModule
    return MaskedPPOTorchModule


def __getattr__(name: str) -> Any:
    """``MaskedPPOTorchModule`` on demand (RLlib checkpoints name the class by this path)."""
    if name == "MaskedPPOTorchModule":
        return masked_ppo_module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checkpoint_path(out_dir: str | Path, scenario_name: str, seed: int) -> Path:
    """``<out_dir>/rllib-ppo-<scenario>-s<seed>``: where :func:`train_rllib` keeps its checkpoint."""
    return Path(out_dir) / f"{ALGO}-{scenario_name}-s{seed}"


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InvalidInput(f"train: {name} = {value!r}; expected an integer >= {low}")


def _save(algo: Any, path: Path, meta: dict) -> None:
    """Replace the checkpoint at ``path`` atomically enough: write beside it, then swap by renames."""
    tmp, old = path.with_name(f".{path.name}.tmp"), path.with_name(f".{path.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(str(tmp.resolve()))
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def train_rllib(
    scenario: ScenarioLike = "spider-8",
    total_timesteps: int = 50_000,
    seed: int = 0,
    workers: int = 0,
    out_dir: str | Path = "runs",
    env_kwargs: dict | None = None,
    algo_kwargs: dict | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
    address: str | None = None,
    strict_masks: bool = False,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    run_dir: str | Path | None = None,
    trust_code: bool = False,
) -> Path:
    """Train RLlib PPO with action masks on ``scenario``; returns the checkpoint folder.

    Every argument is checked before Ray starts or anything is written.

    :param scenario: the scenario to train on.
    :param total_timesteps: environment steps in all (> 0), counting those of a resumed run;
        training stops at the first PPO iteration that reaches it.
    :param seed: RLlib's seed (networks, sampling, env seeds).
    :param workers: remote env runners (>= 0; 0 samples in this process).
    :param out_dir: folder of the checkpoint ``rllib-ppo-<scenario>-s<seed>/``.
    :param env_kwargs: keyword arguments of :class:`~sfenv.env.GeoSchedEnv`.
    :param algo_kwargs: PPO ``training()`` settings over :data:`PPO_DEFAULTS`.
    :param resume: continue from the checkpoint in ``out_dir`` (a missing one starts afresh).
    :param checkpoint_every: also save every this many steps (0: only at the end).
    :param address: a Ray cluster to join (default: a local Ray with ``max(1, workers)`` CPUs).
    :param strict_masks: raise :class:`InvalidActionSampled` if a masked action is ever sampled.
    :param progress: print one line per iteration (steps, steps/s, mean return) to ``log``.
    :param log: where progress lines go (default: stderr).
    :param run_dir: the checkpoint folder (default: :func:`checkpoint_path` under ``out_dir``).
    :param trust_code: with ``resume``: allow restoring the checkpoint, which unpickles it (code; only
        a checkpoint you trust).  Resuming an existing checkpoint without it is refused.
    :return: the checkpoint folder (``rllib:<that path>`` in the evaluator).
    :raises DependencyNotInstalled: without the ``ray`` extra.
    :raises UntrustedCode: for ``resume`` of an existing checkpoint without ``trust_code``.
    """
    for name, value, low in (("total_timesteps", total_timesteps, 1), ("seed", seed, 0), ("workers", workers, 0),
                             ("checkpoint_every", checkpoint_every, 0)):
        _check_int(name, value, low)
    sc = load_scenario(scenario)
    env_config = {"scenario": sc.cfg.model_dump(mode="json"), "env_kwargs": dict(env_kwargs or {}),
                  "strict_masks": strict_masks}
    MaskedGeoSchedEnv(env_config).close()  # bad env arguments fail here, before Ray starts
    settings = {**PPO_DEFAULTS, **(algo_kwargs or {})}
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    from sfenv.runs.distributed import ray_session

    path = Path(run_dir) if run_dir is not None else checkpoint_path(out_dir, sc.name, seed)
    meta_path = path / META_FILE
    done = json.loads(meta_path.read_text())["steps"] if resume and meta_path.is_file() else 0
    if done and trust_code is not True:
        raise UntrustedCode(f"{path}: refused: resuming restores an RLlib checkpoint, which unpickles it and can "
                            "run any program; if the checkpoint is yours, pass --trust-model-code (Python: "
                            "trust_code=True)")
    ppo = _ray_module("ray.rllib.algorithms.ppo")
    rl_module_spec = _ray_module("ray.rllib.core.rl_module.rl_module").RLModuleSpec
    with ray_session(address, None if address else max(1, workers)):
        config = (
            ppo.PPOConfig()
            .environment(env=MaskedGeoSchedEnv, env_config=env_config)
            .framework("torch")
            .env_runners(num_env_runners=workers, num_envs_per_env_runner=1)
            .learners(num_learners=0)
            .training(**settings)
            .rl_module(rl_module_spec=rl_module_spec(
                module_class=masked_ppo_module_class(),
                model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False}))
            .debugging(seed=seed)
            .reporting(metrics_num_episodes_for_smoothing=20)
        )
        if strict_masks:  # a masked action must stop training, not be hidden by an env-runner restart
            config = config.fault_tolerance(restart_failed_env_runners=False, ignore_env_runner_failures=False)
        algo = config.build_algo()
        try:
            if done:
                algo.restore_from_path(str(path.resolve()))
                log(f"train: resumed {path} at {done} steps")
            meta = {"algo": ALGO, "scenario": sc.name, "scenario_cfg": env_config["scenario"], "seed": seed,
                    "env_kwargs": env_config["env_kwargs"], "algo_kwargs": settings, "workers": workers,
                    "steps": done, "total_timesteps": total_timesteps}
            last_saved, t0, start = done, time.perf_counter(), done
            while done < total_timesteps:
                result = algo.train()
                runners = result.get("env_runners", {})
                done += int(runners.get("num_env_steps_sampled", 0))
                if progress:
                    ret = runners.get("episode_return_mean", float("nan"))
                    log(f"train: {done}/{total_timesteps} steps, {(done - start) / (time.perf_counter() - t0):.0f} "
                        f"steps/s, mean episode return {ret:.3f}")
                if checkpoint_every and done - last_saved >= checkpoint_every and done < total_timesteps:
                    _save(algo, path, {**meta, "steps": done})
                    last_saved = done
            _save(algo, path, {**meta, "steps": done})
        finally:
            algo.stop()
    return path


class RLlibPolicy:
    """A checkpoint of :func:`train_rllib` as a ``predict()``-able policy (SB3's PolicyPredictor interface).

    Only the RL module is loaded (torch, CPU); no Ray cluster is started.  ``predict`` takes the
    plain :class:`~sfenv.env.GeoSchedEnv` observation and ``action_masks`` (all actions valid if
    None), so :func:`sfenv.app.evaluate.run_policy_episode` plays it like an SB3 model.

    An RLlib checkpoint is code: ``from_checkpoint`` unpickles the module's class and settings, which
    can run any program.  It is loaded only with ``trust_code=True`` (``--trust-model-code``), else
    :class:`~sfenv.errors.UntrustedCode` is raised before Ray is imported.

    :param path: the checkpoint folder (``<out>/rllib-ppo-<scenario>-s<seed>``).
    :param trust_code: allow loading the checkpoint (only one you trust).
    """

    def __init__(self, path: str | Path, trust_code: bool = False):
        path = Path(path)
        meta_path = path / META_FILE
        if not meta_path.is_file():
            raise MissingFile(f"{path}: not an RLlib checkpoint of sfenv (no {META_FILE}; "
                              "sfenv train --algo rllib-ppo writes <out>/rllib-ppo-<scenario>-s<seed>/)")
        if trust_code is not True:
            raise UntrustedCode(f"{path}: refused: an RLlib checkpoint is code (loading it unpickles the module's "
                                "class and settings, which can run any program); if you trust where it came from, "
                                "pass --trust-model-code (Python: trust_code=True)")
        self.trust_code = True
        self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        self.algo = ALGO
        self.spec = SPEC
        self._torch = _ray_module("torch")
        rl_module = _ray_module("ray.rllib.core.rl_module.rl_module").RLModule
        self._columns = _ray_module("ray.rllib.core.columns").Columns
        masked_ppo_module_class()
        self.module = rl_module.from_checkpoint(str(path.resolve().joinpath(*_MODULE_DIR)))
        self.module.eval()
        env = GeoSchedEnv(load_scenario(self.meta["scenario_cfg"]), **self.meta.get("env_kwargs", {}))
        #: the plain env's observation space (the evaluator checks a scenario against it)
        self.observation_space = _dict_space(env.observation_space)
        self.n_actions = _num_actions(env.action_space)
        env.close()
        self._rng = np.random.default_rng(int(self.meta.get("seed", 0)))
        self.name = f"rllib:{path.name}"

    def action_probabilities(self, observation: dict[str, np.ndarray], action_mask: np.ndarray | None = None
                             ) -> np.ndarray:
        """The policy's action distribution for one observation (masked actions get probability 0)."""
        torch = self._torch
        mask = np.ones(self.n_actions, np.float32) if action_mask is None else np.asarray(action_mask, np.float32)
        flat = np.asarray(spaces.flatten(self.observation_space, observation), dtype=np.float32)
        batch = {self._columns.OBS: {"observations": torch.from_numpy(flat[None]),
                                     "action_mask": torch.from_numpy(mask[None])}}
        with torch.no_grad():
            logits = self.module.forward_inference(batch)[self._columns.ACTION_DIST_INPUTS][0]
            return torch.softmax(logits.double(), dim=-1).numpy()

    def prepare(self, observation: Any, action_masks: np.ndarray | None = None) -> None:
        """One untimed deterministic ``predict`` (no random draw, no state kept): the network's one-off set-up.

        :func:`sfenv.app.evaluate.run_policy_episode` calls it before it times the first decision.
        """
        self.predict(observation, deterministic=True, action_masks=action_masks)

    def predict(
        self,
        observation: dict[str, np.ndarray],
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """The most likely valid action (or one sampled from the masked distribution), and ``state``."""
        p = self.action_probabilities(observation, action_masks)
        a = int(np.argmax(p)) if deterministic else int(self._rng.choice(len(p), p=p / p.sum()))
        return np.asarray(a), state
