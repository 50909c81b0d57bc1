"""Learned policies: train SB3 / sb3-contrib agents on GeoSchedEnv (the ``sfenv train`` recipe) and score them.

Algorithms (``ALGOS``):

- ``maskable-ppo``: sb3-contrib MaskablePPO with ``MultiInputPolicy`` on the Dict observation and the
  env's action masks (the recommended learner: invalid actions are never sampled);
- ``ppo``, ``a2c``, ``dqn``: SB3 with ``MlpPolicy`` on the flattened observation
  (``FlattenObservation``); they can pick masked actions, which the env treats as a penalised no-op,
  so the recipe sets ``invalid_action_limit=3`` (the third masked action in a row acts as wait) and an
  unmasked policy cannot stall an episode.

The recipe (:func:`train`), our choices (not from a paper):

- several envs in a ``DummyVecEnv`` (on two cores it beats ``SubprocVecEnv`` for an env this cheap,
  see the research notes), a ``Monitor`` each, env ``i`` seeded ``seed + i``;
- ``VecNormalize`` (``normalize``: ``"all"`` = observations and rewards, ``"reward"``, ``"none"``):
  the reward is minus the job-time in the system, whose scale grows with load; its statistics are
  saved next to every model (``*vecnormalize.pkl``, and in the weights-only form) and
  :class:`LearnedPolicy` applies the observation part at evaluation, so ``model:PATH`` in the
  evaluator plays what was trained;
- tuned defaults (:data:`DEFAULT_HP`): ``gamma`` = 0.999 (episodes are hundreds of decisions and the
  objective is the undiscounted sum of job-time), 512 steps per env and update, batches of 256,
  entropy 0.01, two hidden layers of 128 for policy and value; any SB3 keyword from ``--hp key=value``
  or a YAML file (:func:`load_config`, bundled files in ``sfenv/hyperparams``);
- an evaluation callback on held-out seeds (:mod:`sfenv.agents.callbacks`) that logs mean censored
  JCT, cost and unfinished jobs to TensorBoard and keeps ``best_model.zip``; checkpoints with their
  statistics; ``resume`` continues a run folder's step count; a learning-curve PNG with reference
  agents' levels as lines;
- a run folder per run, ``<out>/<algo>-<scenario>-s<seed>`` (``-2``, ``-3`` ... when taken): a
  model never overwrites another run's;
- training over a distribution of scenarios (:func:`generated_scenarios`, :class:`ScenarioMix`)
  with the topology-independent observation (``obs_mode="compact"``).

Every saved model is also written in a weights-only form that loads no code
(:mod:`sfenv.agents.model_files`: ``<name>.policy.json`` and ``<name>.policy.npz``);
:class:`LearnedPolicy` reloads a model from it as an SB3 ``PolicyPredictor`` (an SB3 zip without
it only with ``trust_code=True``: a zip is pickled, i.e. code); the evaluator
(:mod:`sfenv.app.evaluate`, :func:`~sfenv.app.evaluate.evaluate_model`) plays it.  This module
does not import the evaluator at module level.  torch / SB3 are imported lazily: importing this
module is cheap, and without the ``rl`` extra :func:`train` and :class:`LearnedPolicy` raise
:class:`~sfenv.errors.DependencyNotInstalled` naming ``pip install "sfenv[rl]"``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from sfenv.agents import model_files
from sfenv.agents.deferral import Deferral, check_play_defer, deferred_choice, heuristic_actions, policy_log_probs

from sfenv.env import GeoSchedEnv
from sfenv.errors import InvalidInput, MissingFile, UntrustedCode, did_you_mean
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_text
from sfenv.scenario import Scenario, load_scenario
from sfenv.world.files import dump_yaml, load_yaml, names_a_file, read_yaml

__all__ = [
    "ALGOS",
    "DEFAULT_HP",
    "JOB_MIX_KEYS",
    "MAX_LAYERS",
    "MAX_LAYER_WIDTH",
    "MAX_N_ENVS",
    "PLAY_MODES",
    "POLICIES",
    "RECIPE_DEFAULTS",
    "AlgoSpec",
    "EnsembleModel",
    "LearnedPolicy",
    "ScenarioLike",
    "ScenarioMix",
    "absolute_model_spec",
    "bundled_configs",
    "check_hp",
    "export_policy",
    "generated_platforms",
    "generated_scenarios",
    "load_config",
    "make_env_fn",
    "parse_hp",
    "run_summary",
    "split_model_spec",
    "train",
]

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
    """Import a module of the ``rl`` extra, or say how to install it (:func:`sfenv.agents.model_files.rl_module`)."""
    return model_files.rl_module(name)


#: tuned defaults per algorithm (SB3 keyword arguments); ``n_steps`` is per env
DEFAULT_HP: dict[str, dict[str, Any]] = {
    "maskable-ppo": {"n_steps": 512, "batch_size": 256, "n_epochs": 10, "gamma": 0.999, "gae_lambda": 0.95,
                     "ent_coef": 0.01, "learning_rate": 3e-4, "clip_range": 0.2,
                     "policy_kwargs": {"net_arch": {"pi": [128, 128], "vf": [128, 128]}}},
    "ppo": {"n_steps": 512, "batch_size": 256, "n_epochs": 10, "gamma": 0.999, "gae_lambda": 0.95,
            "ent_coef": 0.01, "learning_rate": 3e-4, "clip_range": 0.2,
            "policy_kwargs": {"net_arch": {"pi": [128, 128], "vf": [128, 128]}}},
    "a2c": {"n_steps": 32, "gamma": 0.999, "gae_lambda": 0.95, "ent_coef": 0.01,
            "policy_kwargs": {"net_arch": {"pi": [128, 128], "vf": [128, 128]}}},
    "dqn": {"gamma": 0.999, "learning_starts": 1000, "buffer_size": 100_000, "exploration_fraction": 0.3,
            "target_update_interval": 1000, "policy_kwargs": {"net_arch": [128, 128]}},
}
#: recipe settings (not SB3 keywords) and their defaults; a YAML config may set any of them and ``hp``
RECIPE_DEFAULTS: dict[str, Any] = {
    "algo": "maskable-ppo", "scenario": "spider-8", "eval_scenario": None, "steps": 200_000, "seed": 0,
    "n_envs": 4, "normalize": "all", "env_kwargs": {}, "hp": {}, "eval_every": None,
    "eval_seeds": protocol.seeds("validation", 5), "baselines": ["fifo", "spinsearch"],
    "checkpoint_every": 0, "pretrain": None, "policy": "default", "play": "as-trained", "play_env": {},
    "play_defer": None,
}
#: how a recipe's model is played, named once (``play:``) and used everywhere it is played: by the
#: evaluation that keeps the best model, by the run's summary, and (recorded in the model's metadata)
#: by ``sfenv evaluate``, :class:`LearnedPolicy` and ``learned_vs_heuristics``.  ``as-trained``: in
#: the env the model was trained in; ``work-conserving``: with the env's ``work_conserving=True``
#: (wait masked while a candidate can start)
PLAY_MODES = ("as-trained", "work-conserving")
#: env settings a recipe may add for play only (``play_env:``), used as ``play`` is: by the evaluations
#: that keep the best model and (recorded in ``meta["play_env"]``) wherever the model is played; its
#: training envs do not have them.  Only settings that leave the spaces as they are:
#: ``min_relative_mfu``, ``min_spread_speedup``, ``spread_wait``, ``floor_exempt`` and ``floor_exempt_from``
#: (:class:`~sfenv.env.GeoSchedEnv`: WAN-bound plans, and plans across regions that finish no sooner than
#: waiting for one region, leave the menu, except the named heuristics' decisions, for the floors named)
PLAY_ENV_KEYS = ("min_relative_mfu", "min_spread_speedup", "spread_wait", "floor_exempt", "floor_exempt_from")


def check_play_env(play_env: Any, where: str) -> dict[str, Any]:
    """``play_env`` as a dict of :data:`PLAY_ENV_KEYS` settings with plain values.

    :raises InvalidInput: naming ``where`` and the field, for anything else.
    """
    if play_env is None:
        return {}
    if not isinstance(play_env, dict):
        raise InvalidInput(f"{where}: play_env: expected a mapping of {list(PLAY_ENV_KEYS)}, got {str(play_env)[:100]}")
    from sfenv.env.geosched import FLOOR_TESTS, SPREAD_WAITS

    for key, value in play_env.items():
        if key not in PLAY_ENV_KEYS:
            raise InvalidInput(f"{where}: play_env.{key}: not a play setting; expected some of {list(PLAY_ENV_KEYS)}")
        if key == "spread_wait":
            if value not in SPREAD_WAITS:
                raise InvalidInput(f"{where}: play_env.spread_wait: expected one of {list(SPREAD_WAITS)}, "
                                   f"got {str(value)[:100]}")
        elif key == "floor_exempt_from":
            if not isinstance(value, list) or not value or not all(name in FLOOR_TESTS for name in value):
                raise InvalidInput(f"{where}: play_env.floor_exempt_from: expected a non-empty list of some of "
                                   f"{list(FLOOR_TESTS)}, got {str(value)[:100]}")
        elif key == "floor_exempt":
            if not isinstance(value, list) or len(value) > 16 or not all(
                    isinstance(name, str) and 0 < len(name) <= 64 for name in value):
                raise InvalidInput(f"{where}: play_env.floor_exempt: expected a list of agent names "
                                   f"(e.g. [spantrain+swf]), got {str(value)[:100]}")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InvalidInput(f"{where}: play_env.{key}: expected a number or null, got {str(value)[:100]}")
    return dict(play_env)


def check_eval_seeds(eval_seeds: Any, where: str) -> list[int]:
    """``eval_seeds`` as a list of 1 to :data:`MAX_EVAL_SEEDS` different integers >= 0.

    A seed given as ``10000.9``, ``true`` or ``"10000"`` is refused, not turned into another one.

    :raises InvalidInput: naming ``where`` and the first bad seed.
    """
    if isinstance(eval_seeds, np.ndarray):
        eval_seeds = eval_seeds.tolist()
    if isinstance(eval_seeds, (str, bytes, Mapping)) or not isinstance(eval_seeds, Sequence):
        raise InvalidInput(f"{where}: eval_seeds = {str(eval_seeds)[:100]}; expected a list of seeds (integers >= 0)")
    if not 0 < len(eval_seeds) <= MAX_EVAL_SEEDS:
        raise InvalidInput(f"{where}: eval_seeds holds {len(eval_seeds):,} seeds; expected 1 to {MAX_EVAL_SEEDS:,}")
    seen: set[int] = set()
    for i, seed in enumerate(eval_seeds):
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InvalidInput(f"{where}: eval_seeds[{i}] = {repr(seed)[:40]}; expected an integer >= 0")
        if int(seed) in seen:
            raise InvalidInput(f"{where}: eval_seeds[{i}] = {int(seed)} is listed twice; each seed is one episode")
        seen.add(int(seed))
    return [int(seed) for seed in eval_seeds]


def check_env_kwargs(env_kwargs: Any, where: str) -> dict[str, Any]:
    """``env_kwargs`` (None or a mapping) as a dict of :class:`~sfenv.env.GeoSchedEnv` keyword arguments.

    Its values are checked by the env itself (:func:`train` builds one before anything is written).

    :raises InvalidInput: naming ``where`` and the key, for a key that is not an argument of the env or one
        of :data:`NOT_ENV_KWARGS`.
    """
    if env_kwargs is None:
        return {}
    if not isinstance(env_kwargs, Mapping):
        raise InvalidInput(f"{where}: env_kwargs = {str(env_kwargs)[:100]}; expected a mapping of GeoSchedEnv "
                           "arguments")
    params = inspect.signature(GeoSchedEnv).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):  # a wrapped constructor: the env checks
        return dict(env_kwargs)
    allowed = [p.name for p in params if p.name not in NOT_ENV_KWARGS]
    for key in env_kwargs:
        if key not in allowed:
            why = "set by the run, not by env_kwargs" if key in NOT_ENV_KWARGS else \
                f"not an argument of GeoSchedEnv{did_you_mean(str(key), allowed)}"
            raise InvalidInput(f"{where}: env_kwargs.{str(key)[:60]}: {why}; expected some of {allowed}")
    return dict(env_kwargs)


NORMALIZE = ("all", "reward", "none")
#: policy networks a recipe may name (``policy:``), for ``maskable-ppo``: ``default`` is SB3's
#: ``MultiInputPolicy`` (an MLP over the flattened observation); ``candidate-set`` is
#: :class:`sfenv.agents.set_policy.CandidateSetPolicy` (one scorer shared by the candidate slots)
POLICIES: dict[str, tuple[str, str] | None] = {
    "default": None,
    "candidate-set": ("sfenv.agents.set_policy", "CandidateSetPolicy"),
}
#: environment steps between evaluations when ``eval_every`` is None: a tenth of the run, at least this
MIN_EVAL_EVERY = 2048
#: the most parallel envs of a run (``n_envs``, ``--n-envs``): each holds a simulator in this process
MAX_N_ENVS = 256
#: the widest layer and the most layers per list a recipe's ``policy_kwargs.net_arch`` (or ``value_arch``)
#: may give: a 4096 x 4096 layer is 16.8 million weights
MAX_LAYER_WIDTH = 4096
MAX_LAYERS = 16
#: the most evaluation seeds a run may list (``eval_seeds``), as ``--eval-seeds``
MAX_EVAL_SEEDS = 100_000
#: the most scenarios ``scenario: {generate: {count: N}}`` makes (each gets an env of its own)
MAX_GENERATED = 1024
#: the :class:`~sfenv.env.GeoSchedEnv` arguments a run's ``env_kwargs`` may not give: the run gives the scenario,
#: and nothing is rendered while training
NOT_ENV_KWARGS = ("scenario", "render_mode")


def bundled_configs() -> list[str]:
    """Names of the bundled ``sfenv train`` YAML configs (``sfenv/hyperparams/train-*.yml``)."""
    from importlib import resources

    folder = resources.files("sfenv").joinpath("hyperparams")
    return sorted(f.name[len("train-"):-len(".yml")] for f in folder.iterdir()
                  if f.name.startswith("train-") and f.name.endswith(".yml"))


def load_config(spec: str | Path) -> dict[str, Any]:
    """Read a ``sfenv train`` YAML config: a bundled name (``sfenv/hyperparams/train-NAME.yml``) or a path.

    As for scenarios (:func:`sfenv.world.files.names_a_file`), a string with a path separator or a
    ``.yml``/``.yaml`` suffix is a file and any other is a bundled name; a :class:`~pathlib.Path` is a file.

    Keys: those of :data:`RECIPE_DEFAULTS` (``steps``, ``n_envs``, ``normalize``, ``env_kwargs``,
    ``eval_seeds``, ``play``: one of :data:`PLAY_MODES` ...) and ``hp``, a mapping of SB3 keyword
    arguments; ``scenario`` may be a list, or
    ``{generate: {...}}`` (the arguments of :func:`generated_scenarios`).

    :raises MissingFile: no such file or bundled name.
    :raises InvalidInput: not a mapping, or an unknown key.
    """
    from importlib import resources

    if isinstance(spec, str) and not names_a_file(spec):  # a bare name is bundled, whatever the folder holds
        names = bundled_configs()
        if spec not in names:
            raise MissingFile(f"no bundled config named {spec!r}{did_you_mean(spec, names)} (bundled: "
                              f"{', '.join(names)}; a file needs a path separator or a .yml/.yaml suffix)")
        bundled = resources.files("sfenv").joinpath("hyperparams").joinpath(f"train-{spec}.yml")
        data = load_yaml(bundled.read_text(), f"config {spec}") or {}
    else:  # a regular file within the bounds of sfenv.world.files (no aliases, at most 1 MiB)
        path = Path(spec)
        if not path.exists():
            raise MissingFile(f"no config file {spec}")
        data = read_yaml(path, "training config (YAML)") or {}
    if not isinstance(data, dict):
        raise InvalidInput(f"config {spec}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - set(RECIPE_DEFAULTS))
    if unknown:
        hint = did_you_mean(unknown[0], RECIPE_DEFAULTS) if len(unknown) == 1 else ""
        raise InvalidInput(f"config {spec}: unknown keys {unknown}{hint}; expected some of {sorted(RECIPE_DEFAULTS)}")
    if "play" in data and data["play"] not in PLAY_MODES:
        raise InvalidInput(f"config {spec}: play = {data['play']!r}; expected one of {list(PLAY_MODES)}")
    for key in ("env_kwargs", "hp"):  # merged with the command line's before train() sees them
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise InvalidInput(f"config {spec}: {key} = {str(data[key])[:100]}; expected a mapping")
    if "env_kwargs" in data:
        check_env_kwargs(data["env_kwargs"], f"config {spec}")
    if "eval_seeds" in data:
        data["eval_seeds"] = check_eval_seeds(data["eval_seeds"], f"config {spec}")
    if "play_env" in data:
        data["play_env"] = check_play_env(data["play_env"], f"config {spec}")
    if data.get("play_defer") is not None:
        deferral = check_play_defer(data["play_defer"], f"config {spec}")
        data["play_defer"] = None if deferral is None else deferral.record()
    return data


def parse_hp(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["key=value", ...]`` as SB3 keyword arguments; values are YAML (``0.99``, ``[64, 64]``, ``true``).

    A dotted key sets a nested entry: ``policy_kwargs.net_arch=[64,64]``.

    :raises InvalidInput: an item without ``=`` or with a value that is not valid YAML.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--hp {item!r}: expected key=value, e.g. gamma=0.999")
        try:
            value = load_yaml(text, f"--hp {item!r}")
        except InvalidInput:
            raise InvalidInput(f"--hp {item!r}: the value is not valid YAML") from None
        *parents, leaf = key.strip().split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidInput(f"--hp {item!r}: {part} is set twice, as a value and as a mapping")
        node[leaf] = value
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def generated_scenarios(
    count: int,
    seed: int = 0,
    base: ScenarioLike = "spider-8",
    num_regions: tuple[int, ...] = (6, 8, 10, 12, 16),
    generators: tuple[str, ...] = ("spider", "waxman"),
    load: tuple[float, float] = (0.5, 0.95),
    price_noise: tuple[float, float] = (0.02, 0.15),
    num_jobs: int | None = None,
    job_mixes: Sequence[Mapping[str, Any]] | None = None,
) -> list[Scenario]:
    """A distribution of training scenarios: generated topologies, offered loads, price noise and job mixes.

    Scenario ``i`` is ``base`` with a ``generators[...]`` topology of ``num_regions[...]`` regions
    (topology seed drawn), time-of-use prices with noise drawn in ``price_noise`` and a Poisson
    workload at offered load ``workload.load`` drawn in ``load``; everything is drawn from
    ``numpy.random.default_rng(seed)``, so the list is reproducible.

    :param count: scenarios to make (> 0).
    :param num_jobs: jobs per episode (None: the base scenario's).
    :param job_mixes: job mixes to draw from, one per scenario (None: the base scenario's): each a
        mapping of some of :data:`JOB_MIX_KEYS` (``{models: [{name: gpt-350m, weight: 2}],
        global_batch: [128, 256]}``) that replaces those keys of the base's ``workload``.  Mixes
        are drawn from a generator of their own (``default_rng([seed, 1])``), so the topologies,
        loads and prices are those of the same call without ``job_mixes``.
    :raises InvalidInput: for a count below 1 or a job mix that is not such a mapping (naming it).
    """
    if count < 1:
        raise InvalidInput(f"generated_scenarios: count = {count!r}; expected an integer >= 1")
    mixes = _checked_job_mixes(job_mixes)
    rng = np.random.default_rng(seed)
    mix_rng = np.random.default_rng([seed, 1])  # its own stream: the other draws stay as without mixes
    sc = load_scenario(base)
    out = []
    for i in range(count):
        regions = int(num_regions[int(rng.integers(len(num_regions)))])
        gen = str(generators[int(rng.integers(len(generators)))])
        workload: dict[str, Any] = {"load": float(round(rng.uniform(*load), 3)),
                                    "arrival": {"process": "poisson", "rate_per_hour": None}}
        if num_jobs is not None:
            workload["num_jobs"] = int(num_jobs)
        data = sc.cfg.model_dump()
        data["name"] = f"gen{i}-{gen}{regions}"
        data["topology"] = {"generator": gen, "num_regions": regions, "seed": int(rng.integers(1, 2**31))}
        data["prices"] = {"kind": "time_of_use", "days": int(data.get("prices", {}).get("days", 14) or 14),
                          "noise": float(round(rng.uniform(*price_noise), 3))}
        if mixes:
            k = int(mix_rng.integers(len(mixes)))
            workload.update(mixes[k])
            data["name"] += f"-mix{k}"
        data["workload"] = _merge(data["workload"], workload)
        out.append(Scenario.from_dict(data, source=f"generated_scenarios[{i}]", base_dir=sc.base_dir))
    return out


#: the ``workload`` keys a job mix of :func:`generated_scenarios` may set
JOB_MIX_KEYS = ("models", "global_batch", "iterations", "iterations_choices", "min_gpus", "max_gpus")


def _checked_job_mixes(job_mixes: Any) -> list[dict[str, Any]]:
    """``job_mixes`` as a list of mappings of :data:`JOB_MIX_KEYS` (their values are checked with the scenario)."""
    if job_mixes is None:
        return []
    if not isinstance(job_mixes, (list, tuple)) or not 0 < len(job_mixes) <= 64:
        raise InvalidInput(f"generated_scenarios: job_mixes: expected a list of 1 to 64 mappings, got "
                           f"{str(job_mixes)[:100]}")
    for k, mix in enumerate(job_mixes):
        if not isinstance(mix, Mapping) or not mix or not set(mix) <= set(JOB_MIX_KEYS):
            raise InvalidInput(f"generated_scenarios: job_mixes[{k}]: expected a mapping of some of "
                               f"{list(JOB_MIX_KEYS)}, got {str(mix)[:100]}")
    return [dict(mix) for mix in job_mixes]


def generated_platforms(split: str, count: int, num_jobs: int | None = None,
                        family: str = "generated") -> list[Scenario]:
    """The first ``count`` generated platforms of a protocol split (:mod:`sfenv.runs.protocol`).

    :func:`generated_scenarios` over :data:`sfenv.runs.protocol.GENERATED_FAMILY` with the split's
    first generator seed (:data:`sfenv.runs.protocol.GENERATOR_SEEDS`): train on ``"train"``, report
    on ``"test"``.

    :param num_jobs: jobs per episode (None: the family's).
    :param family: ``generated`` (the protocol's family) or ``cloud`` (cloud-like WANs only,
        :data:`sfenv.runs.protocol.CLOUD_FAMILY`, generator seed offset by
        :data:`sfenv.runs.protocol.CLOUD_SEED_OFFSET`).
    :raises InvalidInput: for an unknown split or family.
    """
    if split not in protocol.SPLITS:
        raise InvalidInput(f"generated_platforms: split {split!r}; expected one of {', '.join(protocol.SPLITS)}")
    families = {"generated": (protocol.GENERATED_FAMILY, 0),
                "cloud": (protocol.CLOUD_FAMILY, protocol.CLOUD_SEED_OFFSET)}
    if family not in families:
        raise InvalidInput(f"generated_platforms: family {family!r}; expected one of {', '.join(families)}")
    kwargs, offset = families[family]
    kwargs = {**kwargs, **({} if num_jobs is None else {"num_jobs": num_jobs})}
    return generated_scenarios(count, seed=protocol.GENERATOR_SEEDS[split][0] + offset, **kwargs)


class ScenarioMix(gym.Env):
    """One env over several scenarios: each ``reset`` draws a scenario, then plays its episode.

    Every scenario gets its own :class:`~sfenv.env.GeoSchedEnv` with the same ``env_kwargs``; their
    observation and action spaces must be equal (use ``obs_mode="compact"`` and fixed
    ``max_candidates`` / ``queue_window`` / ``forecast_hours`` across topologies).  The scenario and
    the episode seed are drawn from ``self.np_random``.  ``action_masks``, ``scenario``, ``sim`` and
    ``view`` are the current scenario's.

    :param scenarios: the scenarios (at least one).
    :param env_kwargs: keyword arguments for every :class:`~sfenv.env.GeoSchedEnv`.
    :raises InvalidInput: if two scenarios give different spaces.
    """

    metadata = GeoSchedEnv.metadata

    def __init__(self, scenarios: Sequence[ScenarioLike], env_kwargs: dict | None = None,
                 render_mode: str | None = None):
        if not scenarios:
            raise InvalidInput("ScenarioMix needs at least one scenario")
        self.envs = [GeoSchedEnv(s, render_mode=render_mode, **(env_kwargs or {})) for s in scenarios]
        first = self.envs[0]
        for e in self.envs[1:]:
            if e.observation_space != first.observation_space or e.action_space != first.action_space:
                raise InvalidInput(f"ScenarioMix: {e.scenario.name!r} gives other spaces than {first.scenario.name!r}; "
                                   "use obs_mode='compact' and the same max_candidates/queue_window/forecast_hours")
        self.observation_space = first.observation_space
        self.action_space = first.action_space
        self.render_mode = render_mode
        self.current = first

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Draw a scenario and an episode seed, and reset that scenario's env."""
        super().reset(seed=seed)
        self.current = self.envs[int(self.np_random.integers(len(self.envs)))]
        obs, info = self.current.reset(seed=int(self.np_random.integers(2**31)), options=options)
        info["scenario"] = self.current.scenario.name
        return obs, info

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        """Step the current scenario's env."""
        return self.current.step(action)

    def action_masks(self) -> np.ndarray:
        """The current scenario's valid actions."""
        return self.current.action_masks()

    @property
    def scenario(self) -> Scenario:
        """The current scenario."""
        return self.current.scenario

    @property
    def sim(self) -> Any:
        """The current scenario's simulator."""
        return self.current.sim

    @property
    def view(self) -> Any:
        """The current scenario's simulator view."""
        return self.current.view

    def render(self) -> Any:
        """Render the current scenario's env."""
        return self.current.render()

    def close(self) -> None:
        """Close every scenario's env."""
        for e in self.envs:
            e.close()


def make_env_fn(
    scenario: ScenarioLike | list[ScenarioLike] | list[Scenario], flatten: bool, env_kwargs: dict | None = None
) -> Callable[[], gym.Env]:
    """A ``make_vec_env`` factory: GeoSchedEnv on ``scenario`` (a list: :class:`ScenarioMix`), flattened if asked."""

    def _make() -> gym.Env:
        if isinstance(scenario, list):
            env: gym.Env = ScenarioMix(scenario, env_kwargs)
        else:
            env = GeoSchedEnv(scenario, **(env_kwargs or {}))
        if flatten:
            env = gym.wrappers.FlattenObservation(env)
        return env

    return _make


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low
            or (high is not None and value > high)):
        expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high:,}"
        raise InvalidInput(f"train: {name} = {value!r}; expected {expected}")


def _check_finite(value: Any, where: str, depth: int = 0) -> None:
    """Refuse NaN and infinite numbers anywhere in a hyperparameter (they fail every range check silently)."""
    if depth > 16:
        raise InvalidInput(f"hp {where}: nested deeper than 16")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, f"{where}[{i}]", depth + 1)
    elif isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise InvalidInput(f"hp {where}={value!r}: expected a finite number")


def _check_layers(policy_kwargs: dict[str, Any]) -> None:
    """Check each layer list of ``policy_kwargs`` (``net_arch``, its ``pi``/``vf``/``qf``, ``value_arch``).

    Each must be at most :data:`MAX_LAYERS` integers from 1 to :data:`MAX_LAYER_WIDTH`.
    """
    net_arch = policy_kwargs.get("net_arch")
    lists = ({f"net_arch.{k}": v for k, v in net_arch.items()} if isinstance(net_arch, dict)
             else {"net_arch": net_arch} if net_arch is not None else {})
    if policy_kwargs.get("value_arch") is not None:
        lists["value_arch"] = policy_kwargs["value_arch"]
    for field, sizes in lists.items():
        if not isinstance(sizes, (list, tuple)) or len(sizes) > MAX_LAYERS or not all(
                isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_LAYER_WIDTH for n in sizes):
            raise InvalidInput(f"hp policy_kwargs.{field}={sizes!r}: expected a list of at most {MAX_LAYERS} "
                               f"layer sizes, integers from 1 to {MAX_LAYER_WIDTH}")


#: SB3 keywords that ``train`` sets itself: a hyperparameter may not set them
_SET_BY_TRAIN = {"policy": "--algo", "env": "--scenario", "seed": "--seed", "verbose": None,
                 "tensorboard_log": "--no-tensorboard", "device": None, "_init_setup_model": None}


#: ranges of common SB3 keywords that SB3 itself does not check (a zero batch fails deep in torch)
_HP_RANGES: dict[str, tuple[float, float | None, str]] = {
    "n_steps": (1, None, ">= 1"), "batch_size": (1, None, ">= 1"), "n_epochs": (1, None, ">= 1"),
    "buffer_size": (1, None, ">= 1"), "gamma": (0.0, 1.0, "in [0, 1]"), "gae_lambda": (0.0, 1.0, "in [0, 1]"),
    "learning_rate": (1e-300, None, "> 0"), "ent_coef": (0.0, None, ">= 0"), "vf_coef": (0.0, None, ">= 0"),
    "clip_range": (1e-300, None, "> 0"),
}


def _fits(value: Any, annotation: Any) -> bool:
    """Whether a YAML value can be ``annotation`` (int for float, not bool for numbers); unknown kinds pass."""
    import types
    import typing

    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_fits(value, arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation) or annotation
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (bool, str, dict, list, tuple):
        return isinstance(value, origin)
    if origin is Callable or getattr(origin, "__module__", "") == "collections.abc":
        return callable(value)
    return True  # a type, a device ...: SB3 checks it


def policy_class(algo: str, policy: str = "default") -> Any:
    """The SB3 policy of a recipe: the algorithm's policy name, or the class :data:`POLICIES` names.

    :param algo: one of :data:`ALGOS`.
    :param policy: a key of :data:`POLICIES`.
    :raises InvalidInput: for an unknown policy, or ``candidate-set`` with an algorithm other than
        ``maskable-ppo``.
    """
    spec = _algo(algo)
    if policy not in POLICIES:
        raise InvalidInput(f"policy {policy!r}: expected one of {sorted(POLICIES)}")
    target = POLICIES[policy]
    if target is None:
        return spec.policy
    if algo != "maskable-ppo":
        raise InvalidInput(f"policy {policy!r}: needs algo maskable-ppo (its logits are per candidate and masked), "
                           f"not {algo}")
    return getattr(_rl_module(target[0]), target[1])


def _policy_parameters(policy_cls: Any) -> set[str]:
    """Keyword parameters of ``policy_cls`` (and of its base when it takes ``**kwargs``), minus the spaces."""
    params: set[str] = set()
    for klass in policy_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        sig = inspect.signature(init).parameters
        params |= {n for n, p in sig.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in sig.values()):
            break
    return params - set(getattr(policy_cls, "FIXED_KWARGS", ())) - {"self", "observation_space", "action_space",
                                                                     "lr_schedule"}


def check_hp(algo: str, hp: dict[str, Any], policy: str = "default") -> None:
    """Check SB3 keyword arguments against the algorithm's constructor, before anything runs.

    Keys must be parameters of the algorithm class's ``__init__`` (:func:`inspect.signature`), other
    than those :func:`train` sets itself; values must fit the parameter's annotation (e.g. a number
    for ``gamma``; an integer counts as a float); ``policy_kwargs`` keys must be parameters of the
    policy class.  Needs the ``rl`` extra.

    :param algo: one of :data:`ALGOS`.
    :param hp: the keyword arguments.
    :param policy: the recipe's policy (a key of :data:`POLICIES`).
    :raises InvalidInput: naming the key, the value and what was expected.
    """
    spec = _algo(algo)
    chosen = policy_class(algo, policy)
    cls = getattr(_rl_module(spec.module), spec.cls)
    params = inspect.signature(cls.__init__).parameters
    allowed = sorted(n for n in params if n not in _SET_BY_TRAIN and n != "self")
    for key, value in hp.items():
        _check_finite(value, key)
        if key in _SET_BY_TRAIN:
            option = _SET_BY_TRAIN[key]
            raise InvalidInput(f"hp {key!r}: set by sfenv train itself" + (f" (use {option})" if option else ""))
        if key not in params:
            import difflib

            close = difflib.get_close_matches(key, allowed, n=1)
            raise InvalidInput(f"hp {key!r}: not a parameter of {spec.cls}" + (f" (did you mean {close[0]!r}?)"
                               if close else "") + f"; expected one of {allowed}")
        annotation = params[key].annotation
        if not _fits(value, annotation):
            raise InvalidInput(f"hp {key}={value!r}: expected {getattr(annotation, '__name__', annotation)} "
                               f"for {spec.cls}'s {key} (default {params[key].default!r})")
        low, high, text = _HP_RANGES.get(key, (None, None, ""))
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and ((low is not None and value < low) or (high is not None and value > high)):
            raise InvalidInput(f"hp {key}={value!r}: expected a value {text}")
    policy_kwargs = hp.get("policy_kwargs") or {}
    policy_cls = cls.policy_aliases.get(chosen) if isinstance(chosen, str) else chosen
    if isinstance(policy_kwargs, dict):
        _check_layers(policy_kwargs)
    if policy_cls is not None and isinstance(policy_kwargs, dict):
        policy_params = _policy_parameters(policy_cls)
        for key in policy_kwargs:
            if key not in policy_params:
                raise InvalidInput(f"hp policy_kwargs.{key}: not a parameter of {policy_cls.__name__}; expected one "
                                   f"of {sorted(policy_params)}")


def _new_run_dir(out: Path, name: str) -> Path:
    """``out/name``, or ``out/name-2``, ``-3`` ... if taken; created here (exclusive, so two runs never share one)."""
    out.mkdir(parents=True, exist_ok=True)
    for i in range(1, 10_000):
        run = out / (name if i == 1 else f"{name}-{i}")
        try:
            run.mkdir()
        except FileExistsError:
            continue
        return run
    raise InvalidInput(f"{out}: too many runs named {name}")  # pragma: no cover


def _save(model: Any, run: Path, prefix: str, meta: dict) -> Path:
    """Save ``model`` as ``run/<prefix>.zip`` with its VecNormalize statistics and a ``.json`` sidecar, atomically.

    Its weights-only form (``<prefix>.policy.json`` and ``.policy.npz``, :mod:`sfenv.agents.model_files`),
    which ``model:PATH`` loads without running code, is written before the sidecar.
    """
    path = run / f"{prefix}.zip"
    tmp = run / f".{prefix}.tmp.zip"
    model.save(str(tmp))
    os.replace(tmp, path)  # a crash never leaves a half-written model
    vn = model.get_vec_normalize_env()
    stats = None
    if vn is not None:
        stats = f"{prefix}_vecnormalize.pkl"
        vn.save(str(run / f".{stats}.tmp"))
        os.replace(run / f".{stats}.tmp", run / stats)
    side = {**meta, "num_timesteps": int(model.num_timesteps), "vecnormalize": stats}
    model_files.write_policy_files(run / prefix, algo=meta["algo"], policy=model.policy,
                                   policy_kwargs=model.policy_kwargs, vec_normalize=vn, meta=side,
                                   num_timesteps=int(model.num_timesteps))
    atomic_write_text(run / f"{prefix}.json", json.dumps(side, indent=2))
    return path


def _latest(run: Path) -> tuple[Path, Path | None, int]:
    """The newest saved state of a run folder: (model, VecNormalize statistics or None, its step count)."""
    found: list[tuple[int, Path, Path | None]] = []
    final = run / "model.json"
    if final.is_file():
        meta = model_files.read_json_file(final, model_files.MAX_SIDECAR_BYTES, "model sidecar")
        stats = (model_files.file_inside(run, meta["vecnormalize"], f"{final}: vecnormalize")
                 if meta.get("vecnormalize") else None)
        found.append((int(meta.get("num_timesteps", 0)), run / "model.zip", stats))
    for ck in (run / "checkpoints").glob("model_*_steps.zip"):
        steps = int(ck.stem.split("_")[1])
        stats = ck.with_name(f"model_vecnormalize_{steps}_steps.pkl")
        found.append((steps, ck, stats if stats.is_file() else None))
    if not found:
        raise MissingFile(f"{run}: nothing to resume (no model.zip and no checkpoints/model_*_steps.zip)")
    steps, path, stats = max(found, key=lambda f: f[0])
    return path, stats, steps


def _check_score_temperature(pre_cfg: dict[str, Any]) -> None:
    """``pretrain.score_temperature``: None, or a number in (0, 1] with a look-ahead expert (whose rollouts score)."""
    temperature = pre_cfg["score_temperature"]
    if temperature is None:
        return
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0.0 < temperature <= 1.0:
        raise InvalidInput(f"train: pretrain.score_temperature = {temperature!r}; expected a number in (0, 1] or null")
    if not str(pre_cfg["expert"]).startswith("lookahead:"):
        raise InvalidInput("train: pretrain.score_temperature needs a look-ahead expert (lookahead:...), whose "
                           f"rollouts score the actions; expert is {pre_cfg['expert']!r}")


def _pretrain_settings(pretrain: dict | None, algo: str, env_kwargs: dict | None) -> dict[str, Any] | None:
    """The behaviour-cloning settings of :func:`train`, checked (None: no cloning).

    :raises InvalidInput: unknown keys, another algorithm than maskable-ppo, candidates that do not
        record the expert's decision, a bad look-ahead expert, a count below 1 or a bad
        ``score_temperature``.
    """
    if pretrain is None:
        return None
    from sfenv.agents.imitation import PRETRAIN_DEFAULTS

    if not isinstance(pretrain, dict) or set(pretrain) - set(PRETRAIN_DEFAULTS):
        raise InvalidInput(f"train: pretrain = {pretrain!r}; expected a mapping with keys among "
                           f"{sorted(PRETRAIN_DEFAULTS)}")
    if algo != "maskable-ppo":
        raise InvalidInput(f"train: pretrain needs algo maskable-ppo, not {algo!r}")
    from sfenv.env.proposers import PROPOSER_SETS

    recording = [name for name in PROPOSER_SETS if name != "default"]  # the sets with decision proposers
    sets = (env_kwargs or {}).get("proposers")
    if sets not in recording:
        raise InvalidInput("train: pretrain imitates a heuristic whose decisions the env's candidates record; "
                           f"set env_kwargs proposers: best (or one of {', '.join(recording)})")
    pre_cfg = {**PRETRAIN_DEFAULTS, **pretrain}
    for name in ("steps", "rounds", "epochs", "batch_size"):
        _check_int(f"pretrain.{name}", pre_cfg[name], 1)
    _check_score_temperature(pre_cfg)
    if str(pre_cfg["expert"]).startswith("lookahead:"):
        from sfenv.agents.imitation import parse_lookahead

        try:
            lookahead = parse_lookahead(str(pre_cfg["expert"]))
        except ValueError as exc:
            raise InvalidInput(f"train: pretrain.{exc}") from None
        bases = str(lookahead["base"]).split("|")
        from sfenv.agents.registry import make_agent

        for name in bases:  # each rollout heuristic exists (found here, not at the first decision)
            try:
                make_agent(name)
            except (InvalidInput, ValueError, KeyError) as exc:
                raise InvalidInput(f"train: pretrain.expert {pre_cfg['expert']!r}: rollout heuristic {name!r}: "
                                   f"{str(exc)[:200]}") from None
        needs = bases[0] if lookahead["max_waiting"] is not None else None
    else:
        needs = None if pre_cfg["expert"] is None else str(pre_cfg["expert"])
    if needs is not None:  # the expert answers with this heuristic's recorded decision
        from sfenv.env.proposers import DecisionRecorder, named_proposers

        recorded = {q.name for q in named_proposers(sets) if isinstance(q, DecisionRecorder)}
        if needs not in recorded:
            raise InvalidInput(f"train: pretrain.expert {pre_cfg['expert']!r} needs the decision of {needs!r}, "
                               f"which proposers {sets!r} do not record (they record {sorted(recorded)})")
    return pre_cfg


def train(
    algo: str = "maskable-ppo",
    scenario: ScenarioLike | list[ScenarioLike] = "spider-8",
    total_timesteps: int = 200_000,
    seed: int = 0,
    n_envs: int = 4,
    out_dir: str | Path = "runs",
    env_kwargs: dict | None = None,
    algo_kwargs: dict | None = None,
    tensorboard: bool = True,
    checkpoint_every: int = 0,
    progress_bar: bool = False,
    normalize: str = "all",
    eval_every: int | None = None,
    eval_seeds: list[int] | tuple[int, ...] | None = None,
    eval_scenario: ScenarioLike | None = None,
    baselines: list[str] | tuple[str, ...] = ("fifo", "spinsearch"),
    resume: str | Path | None = None,
    plot: bool = True,
    pretrain: dict | None = None,
    log: Callable[[str], None] | None = None,
    policy: str = "default",
    trust_code: bool = False,
    play: str = "as-trained",
    play_env: dict[str, Any] | None = None,
    play_defer: dict[str, Any] | None = None,
) -> Path:
    """Train ``algo`` with the recipe of this module; returns the final model's path, ``<run>/model.zip``.

    A run folder ``<out_dir>/<algo>-<scenario>-s<seed>`` (``-2`` ... if taken) receives
    ``model.zip`` / ``model.json`` / ``model_vecnormalize.pkl`` and the weights-only form
    ``model.policy.json`` / ``model.policy.npz`` (what ``model:PATH`` loads, :mod:`sfenv.agents.model_files`),
    the best model by held-out evaluation (``best_model.*``), ``config.yml`` (every setting),
    ``eval.json`` (the evaluation history), ``levels.json`` (reference agents on the evaluation
    seeds), ``learning_curve.png``, ``checkpoints/`` and ``tb/`` (TensorBoard).  Every argument is
    checked before anything is written: a bad one raises :class:`~sfenv.errors.InvalidInput` (or
    :class:`~sfenv.scenario.ScenarioError`) and leaves no folder.

    :param algo: one of :data:`ALGOS`.
    :param scenario: the scenario to train on, or a list of them (a :class:`ScenarioMix`; needs
        ``env_kwargs={"obs_mode": "compact"}``).
    :param total_timesteps: environment steps of the whole run (> 0); with ``resume`` the run
        continues from its saved step count up to this total.
    :param seed: seeds the algorithm and the envs (>= 0; env ``i`` gets ``seed + i``).
    :param n_envs: parallel envs in a ``DummyVecEnv`` (> 0).
    :param out_dir: folder for run folders (relative paths resolve against the current folder).
    :param env_kwargs: keyword overrides for :class:`sfenv.env.GeoSchedEnv` (unmasked algorithms get
        ``invalid_action_limit=3`` unless set).
    :param algo_kwargs: SB3 keyword arguments, merged over :data:`DEFAULT_HP` (nested dicts merged).
    :param tensorboard: write TensorBoard logs to ``<run>/tb``.
    :param checkpoint_every: save a checkpoint every this many steps (0 = none; the final model is always saved).
    :param progress_bar: progress bars on stderr, drawn only when it is a terminal: the training steps
        with rate, elapsed time, ETA and the last evaluation (:class:`sfenv.agents.callbacks.StepsProgress`),
        and each behaviour-cloning collection.
    :param normalize: ``"all"`` (VecNormalize on observations and rewards), ``"reward"`` or ``"none"``.
    :param eval_every: steps between evaluations on ``eval_seeds`` (None: a tenth of the run, at least
        :data:`MIN_EVAL_EVERY`; 0: only at the end).
    :param eval_seeds: held-out episode seeds (default: the first 5 of the protocol's validation
        split, 10000..10004, :mod:`sfenv.runs.protocol`); test seeds are refused (a model is selected on them).
    :param eval_scenario: the evaluation scenario (default: the training scenario, the first of a list).
    :param baselines: reference agents whose levels on the evaluation seeds the learning curve shows.
    :param resume: a run folder to continue (its ``config.yml`` gives the settings; the arguments
        above except ``total_timesteps``, ``progress_bar`` and ``plot`` are ignored).
    :param plot: write ``learning_curve.png`` (runs the baselines on the evaluation seeds once).
    :param pretrain: a behaviour-cloning warm start before PPO (:mod:`sfenv.agents.imitation`):
        None for none, else a mapping over :data:`~sfenv.agents.imitation.PRETRAIN_DEFAULTS`
        (``{}`` takes them all).  Needs ``maskable-ppo`` and ``env_kwargs={"proposers": "best"}``;
        its rounds go to ``<run>/pretrain.json`` and the cloned policy is evaluated first.
    :param log: called with progress lines (the run folder, cloning and DAgger rounds, each
        evaluation, the reference agents' levels); None: silent.  :func:`run_summary` gives the
        result in one line.
    :param policy: the policy network, a key of :data:`POLICIES` (``candidate-set`` needs
        ``maskable-ppo`` and ``obs_mode="compact"``; :data:`DEFAULT_HP`'s ``net_arch`` does not apply to it).
    :param trust_code: with ``resume``: allow loading the run's SB3 zip and pickled VecNormalize
        statistics (which runs code from them; only for a run folder you trust).  Without it a
        resume is refused.
    :param play: how the model is played, one of :data:`PLAY_MODES`: the held-out evaluations that
        keep the best model play it so, and the saved models record it (``meta["play"]``), so
        :class:`LearnedPolicy` (``sfenv evaluate``) plays it the same way unless told otherwise.
    :param play_env: env settings of :data:`PLAY_ENV_KEYS` the model is played with and not trained
        with (``{"min_relative_mfu": 0.7}``): the evaluations that keep the best model have them, and
        the saved models record them (``meta["play_env"]``) for :class:`LearnedPolicy`.
    :param play_defer: ``{"to": NAME or [NAME, ...], "margin": NATS}``: the model is played taking the
        recorded decision ``NAME`` (of several, the one it ranks highest) unless its own greedy action
        is more than ``NATS`` more log-probable (``NATS`` may map each name to its own margin;
        :mod:`sfenv.agents.deferral`); the evaluations that
        keep the best model play it so and the saved models record it (``meta["play_defer"]``).
        Needs a policy with action probabilities and each ``NAME`` among the env's recorded
        decisions (``proposers="best+spantrain"``).
    :return: the path of ``<run>/model.zip``.
    :raises DependencyNotInstalled: without the ``rl`` extra.
    :raises InvalidInput: (among others) for evaluation seeds in the protocol's test split.
    :raises UntrustedCode: for ``resume`` without ``trust_code``.
    """
    if resume is not None:
        run = Path(resume)
        cfg = _run_config(run, trust_code)
        algo, seed, n_envs, normalize = cfg["algo"], cfg["seed"], cfg["n_envs"], cfg["normalize"]
        scenario = cfg["scenario"]
        env_kwargs, algo_kwargs = cfg["env_kwargs"], cfg["hp"]
        eval_every, eval_seeds, eval_scenario = cfg["eval_every"], cfg["eval_seeds"], cfg["eval_scenario"]
        baselines, checkpoint_every, tensorboard = cfg["baselines"], cfg["checkpoint_every"], cfg["tensorboard"]
        pretrain = None  # a resumed run continues PPO
        policy = cfg.get("policy", "default")
        play = cfg.get("play", "as-trained")  # a run folder written before the play mode was recorded
        play_env = cfg.get("play_env")
        play_defer = cfg.get("play_defer")
    play_env = check_play_env(play_env, "train")
    if play not in PLAY_MODES:
        raise InvalidInput(f"train: play = {play!r}; expected one of {list(PLAY_MODES)}")
    spec = _algo(algo)
    chosen_policy = policy_class(algo, policy)
    pre_cfg = _pretrain_settings(pretrain, algo, env_kwargs)
    seeds = _checked_settings(total_timesteps, seed, n_envs, checkpoint_every, eval_every, normalize, eval_seeds)
    baselines = _checked_baselines(baselines)
    scenario, train_sc, first, eval_sc = _train_scenarios(scenario, eval_scenario)
    kw_env = _env_settings(env_kwargs, spec.masked, first)
    hp = _hyperparameters(algo, policy, algo_kwargs, n_envs, kw_env)
    env_fn = make_env_fn(train_sc, spec.flatten, kw_env)
    env_fn().close()  # checks env_kwargs (ScenarioError) and the mix's spaces before anything is written
    eval_kw = {k: v for k, v in kw_env.items() if k != "num_jobs"}
    if play == "work-conserving":  # the best model is kept by the play it is reported with
        eval_kw["work_conserving"] = True
    eval_kw.update(play_env)
    eval_run_sc = eval_sc.with_overrides(workload={"num_jobs": kw_env["num_jobs"]}) if "num_jobs" in kw_env else eval_sc
    eval_fn = make_env_fn(eval_run_sc, spec.flatten, eval_kw)
    deferral = _checked_deferral(play_defer, algo, eval_fn)
    # played before training (and before a new run folder): an agent's error costs no training
    levels = _reference_levels(baselines, eval_run_sc, seeds, log) if plot and not (
        resume is not None and (run / "levels.json").is_file()) else None
    torch = _rl_module("torch")
    cls = getattr(_rl_module(spec.module), spec.cls)
    make_vec_env = _rl_module("stable_baselines3.common.env_util").make_vec_env
    vec_normalize = _rl_module("stable_baselines3.common.vec_env").VecNormalize
    sb3_callbacks = _rl_module("stable_baselines3.common.callbacks")
    from sfenv.agents.callbacks import make_eval_callback, make_progress_callback, plot_learning_curve

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    sc_name = "mix" if isinstance(train_sc, list) else first.name
    done = 0
    if resume is not None:
        model_path, stats_path, done = _latest(run)
    vec = make_vec_env(env_fn, n_envs=n_envs, seed=seed + done)
    if resume is not None and stats_path is not None:
        vec = vec_normalize.load(str(stats_path), vec)
    elif resume is None and normalize != "none":
        vec = vec_normalize(vec, norm_obs=normalize == "all", norm_reward=True, gamma=float(hp.get("gamma", 0.99)))
    if resume is None:
        try:  # a copy: SB3 writes into policy_kwargs (A2C adds its optimiser class), hp stays plain data
            model = cls(chosen_policy, vec, seed=seed, verbose=0, device="cpu", **copy.deepcopy(hp))
        except (TypeError, ValueError, AssertionError) as exc:  # before the run folder: nothing is written
            raise InvalidInput(f"train: {spec.cls} refused the hyperparameters {hp}: {exc}") from None
        model_files.check_recordable(model.policy, model.policy_kwargs)  # every save writes the weights-only form
        run = _new_run_dir(Path(out_dir), f"{algo}-{sc_name}-s{seed}")
        cfg = {"algo": algo, "scenario": _describe_scenario(scenario, train_sc), "eval_scenario": eval_sc.name
               if eval_scenario is None or isinstance(eval_scenario, str) else eval_sc.cfg.model_dump(),
               "seed": seed, "n_envs": n_envs, "normalize": normalize, "env_kwargs": kw_env, "hp": hp,
               "eval_every": eval_every, "eval_seeds": seeds, "baselines": list(baselines),
               "checkpoint_every": checkpoint_every, "tensorboard": tensorboard, "pretrain": pre_cfg, "policy": policy,
               "play": play, "play_env": play_env, "play_defer": None if deferral is None else deferral.record()}
        (run / "config.yml").write_text(dump_yaml(cfg))  # no aliases: read_yaml refuses them
        model.tensorboard_log = str(run / "tb") if tensorboard else None
    else:
        model = cls.load(str(model_path), env=vec, device="cpu",
                         tensorboard_log=str(run / "tb") if tensorboard else None)
    meta = {"algo": algo, "scenario": sc_name, "eval_scenario": eval_sc.name, "seed": seed,
            "total_timesteps": total_timesteps, "env_kwargs": kw_env, "algo_kwargs": hp, "normalize": normalize,
            "policy": policy, "play": play, "play_env": play_env}
    if deferral is not None:  # absent when off: models saved before play_defer hash as they did
        meta["play_defer"] = deferral.record()
    history = _eval_history(run, done) if resume is not None else []
    every = eval_every if eval_every is not None else max(MIN_EVAL_EVERY, total_timesteps // 10)
    if log is not None:
        log(_start_line(run, algo, sc_name, total_timesteps - done, pre_cfg, len(seeds), eval_sc.name, play,
                        play_env, deferral))
    if pre_cfg is not None:
        from sfenv.agents.imitation import pretrain as behaviour_clone

        records = behaviour_clone(model, vec, seed=seed, **pre_cfg, log=log, progress=progress_bar)
        atomic_write_text(run / "pretrain.json", json.dumps(records, indent=1))
        meta["pretrain"] = records
    evaluator = make_eval_callback(eval_fn, seeds, every or 10**12, run, spec.masked,
                                   lambda m, prefix: _save(m, run, prefix, meta), history,
                                   evaluate_first=pre_cfg is not None, log=log, defer=deferral)
    callbacks = [evaluator]
    if checkpoint_every > 0:
        callbacks.append(sb3_callbacks.CheckpointCallback(max(1, checkpoint_every // n_envs), str(run / "checkpoints"),
                                                          "model", save_vecnormalize=True))
    remaining = total_timesteps - done
    if remaining > 0:
        callbacks.append(make_progress_callback(remaining, evaluator.history, progress_bar))  # after the evaluator
        model.learn(total_timesteps=remaining, callback=callbacks, tb_log_name="train",
                    reset_num_timesteps=resume is None)
    path = _save(model, run, "model", meta)
    if plot:
        plot_learning_curve(evaluator.history, _kept_levels(run, levels), run / "learning_curve.png",
                            f"{algo} on {sc_name}, evaluated on {eval_sc.name} seeds {seeds[0]}..{seeds[-1]}")
    vec.close()
    evaluator.env.close()
    return path


def _checked_deferral(play_defer: Any, algo: str, eval_fn: Callable[[], gym.Env]) -> Deferral | None:
    """A recipe's ``play_defer``, checked against its algorithm and its evaluation env (which it closes).

    :raises InvalidInput: for a malformed setting, DQN (no action probabilities) or a heuristic that
        is not a recorded decision of the evaluation env.
    """
    deferral = check_play_defer(play_defer, "train")
    probe = eval_fn()
    try:
        if deferral is not None:
            if algo == "dqn":
                raise InvalidInput("train: play_defer needs a policy with action probabilities "
                                   "(maskable-ppo, ppo, a2c), not dqn")
            heuristic_actions(probe, deferral)
    finally:
        probe.close()
    return deferral


def _run_config(run: Path, trust_code: bool = False) -> dict[str, Any]:
    """The settings of the run folder ``run`` (its ``config.yml``), for :func:`train`'s ``resume``.

    :param trust_code: whether the caller allows loading the run's SB3 zip and pickles.
    :raises MissingFile: when ``run`` has no ``config.yml``.
    :raises UntrustedCode: without ``trust_code`` (a resume loads pickles).
    """
    if not (run / "config.yml").is_file():
        raise MissingFile(f"{run}: not a run folder of sfenv train (no config.yml)")
    if trust_code is not True:
        raise UntrustedCode(f"{run}: refused: resuming loads the run's SB3 .zip and VecNormalize .pkl, which are "
                            "pickles and can run any program; if the run folder is yours, pass --trust-model-code "
                            "(Python: trust_code=True)")
    return read_yaml(run / "config.yml", "run configuration (config.yml)")


def _hyperparameters(algo: str, policy: str, algo_kwargs: dict | None, n_envs: int, kw_env: dict[str, Any]
                     ) -> dict[str, Any]:
    """The SB3 keyword arguments of :func:`train`: ``algo_kwargs`` over :data:`DEFAULT_HP`, checked.

    A policy other than ``default`` drops the defaults' ``policy_kwargs`` (the default MLP's layer
    sizes); the batch is at most a rollout (``n_steps`` x ``n_envs``).

    :raises InvalidInput: for ``candidate-set`` without the compact observation, or a bad keyword
        (:func:`check_hp`).
    """
    if policy == "candidate-set" and kw_env.get("obs_mode") != "compact":
        raise InvalidInput("policy 'candidate-set': needs env_kwargs obs_mode 'compact' (its scorer reads the "
                           f"compact candidate features), got obs_mode {kw_env.get('obs_mode', 'full')!r}")
    if algo_kwargs is not None and not isinstance(algo_kwargs, Mapping):
        raise InvalidInput(f"train: hp = {str(algo_kwargs)[:100]}; expected a mapping of SB3 keyword arguments")
    defaults = copy.deepcopy(DEFAULT_HP[algo])
    if policy != "default":  # the default MLP's layer sizes are not this policy's parameters
        defaults.pop("policy_kwargs", None)
    hp = _merge(defaults, copy.deepcopy(dict(algo_kwargs or {})))
    check_hp(algo, hp, policy)
    if "batch_size" in hp and "n_steps" in hp:
        hp["batch_size"] = min(int(hp["batch_size"]), int(hp["n_steps"]) * n_envs)
    return hp


def _eval_history(run: Path, done: int) -> list[dict[str, Any]]:
    """The evaluations of a resumed run folder up to its ``done`` steps (``eval.json``; none without it)."""
    if not (run / "eval.json").is_file():
        return []
    return [h for h in json.loads((run / "eval.json").read_text()) if h["timesteps"] <= done]


def _checked_settings(total_timesteps: int, seed: int, n_envs: int, checkpoint_every: int, eval_every: int | None,
                      normalize: str, eval_seeds: Sequence[int] | None) -> list[int]:
    """Check :func:`train`'s counts and ``normalize``; return the evaluation seeds (default: validation 10000..10004).

    :raises InvalidInput: naming the setting.
    """
    for name, value, low in (("total_timesteps", total_timesteps, 1), ("seed", seed, 0),
                             ("checkpoint_every", checkpoint_every, 0)):
        _check_int(name, value, low)
    _check_int("n_envs", n_envs, 1, MAX_N_ENVS)
    if eval_every is not None:
        _check_int("eval_every", eval_every, 0)
    if normalize not in NORMALIZE:
        raise InvalidInput(f"train: normalize = {normalize!r}; expected one of {list(NORMALIZE)}")
    seeds = protocol.seeds("validation", 5) if eval_seeds is None else check_eval_seeds(eval_seeds, "train")
    protocol.check_training_config({"eval_seeds": seeds}, "train")  # never select a model on the test split
    return seeds


def _train_scenarios(scenario: Any, eval_scenario: ScenarioLike | None
                     ) -> tuple[Any, Scenario | list[Scenario], Scenario, Scenario]:
    """Load :func:`train`'s scenarios.

    :return: the scenario setting (``{generate: ...}`` expanded), the training scenario or list, the
        first of them, and the evaluation scenario (by default that first one).
    """
    if isinstance(scenario, dict) and "generate" in scenario:
        scenario = list(generated_scenarios(**_checked_generate(scenario["generate"])))
    if isinstance(scenario, list) and not scenario:
        raise InvalidInput("train: scenario is an empty list; expected a scenario or a list of them")
    train_sc: Scenario | list[Scenario] = (
        [load_scenario(s) for s in scenario] if isinstance(scenario, list) else load_scenario(scenario)
    )
    first = train_sc[0] if isinstance(train_sc, list) else train_sc
    eval_sc = load_scenario(eval_scenario) if eval_scenario is not None else first
    return scenario, train_sc, first, eval_sc


def _checked_generate(generate: Any) -> dict[str, Any]:
    """``scenario: {generate: {...}}`` as :func:`generated_scenarios`' keyword arguments, checked.

    :raises InvalidInput: for a value that is not a mapping of its arguments (``count`` given), a ``count`` that
        is not an integer from 1 to :data:`MAX_GENERATED` or a ``seed`` that is not an integer >= 0.
    """
    where = "train: scenario.generate"
    if not isinstance(generate, Mapping):
        raise InvalidInput(f"{where} = {str(generate)[:100]}; expected a mapping of generated_scenarios' arguments")
    try:
        inspect.signature(generated_scenarios).bind(**generate)
    except TypeError as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    for key, low, high in (("count", 1, MAX_GENERATED), ("seed", 0, None)):
        value = generate.get(key, 0 if key == "seed" else None)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or (
                high is not None and value > high):
            bound = f"from {low} to {high:,}" if high is not None else f">= {low}"
            raise InvalidInput(f"{where}.{key} = {repr(value)[:40]}; expected an integer {bound}")
    return dict(generate)


def _env_settings(env_kwargs: dict | None, masked: bool, first: Scenario) -> dict[str, Any]:
    """The env keyword arguments :func:`train` uses and records.

    Unmasked algorithms get ``invalid_action_limit=3`` unless set; the observation sizes are
    recorded, so the model is evaluated with the spaces it was trained on.
    """
    kw_env = check_env_kwargs(env_kwargs, "train")
    if not masked:
        kw_env.setdefault("invalid_action_limit", 3)
    for key, value in (("max_candidates", first.cfg.env.max_candidates), ("queue_window", first.cfg.env.queue_window),
                       ("forecast_hours", first.cfg.env.forecast_hours)):
        kw_env.setdefault(key, value)
    kw_env.setdefault("privileged_obs", False)  # recorded: the model saw env v1's observation (sfenv.env)
    return kw_env


def _start_line(run: Path, algo: str, scenario: str, steps: int, pre_cfg: dict | None, seeds: int,
                eval_scenario: str, play: str = "as-trained", play_env: dict | None = None,
                deferral: Deferral | None = None) -> str:
    """The first progress line of a run: its folder and what it will do."""
    from sfenv.agents.callbacks import played_as

    cloning = f" after behaviour cloning of {pre_cfg['expert']}" if pre_cfg is not None else ""
    played = played_as(play, play_env, deferral)
    return (f"run folder {run}: {algo} on {scenario}, {steps:,} steps{cloning}; evaluations on {seeds} "
            f"held-out seeds of {eval_scenario}{played}")


def _checked_baselines(baselines: Sequence[str]) -> list[str]:
    """The reference agents of the learning curve, resolved and constructed now (before anything is written).

    Groups expand (:func:`sfenv.agents.registry.resolve_names`); an empty list draws no levels.

    :raises InvalidInput: for a saved policy (``model:``/``rllib:``) or an agent whose constructor fails.
    :raises UnknownName: for a name that is not an agent.
    """
    from sfenv.agents.registry import make_agent, resolve_names

    if isinstance(baselines, str) or not all(isinstance(b, str) for b in baselines):
        raise InvalidInput(f"train: baselines = {baselines!r}; expected a list of agent names")
    if not baselines:
        return []
    names = resolve_names(list(baselines))
    for name in names:
        if name.startswith(("model:", "rllib:")):
            raise InvalidInput(f"train: baselines: {name} is a saved policy; the levels are reference agents")
        make_agent(name)  # a plug-in's constructor error surfaces now, not after training
    return names


def _kept_levels(run: Path, levels: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float]]:
    """Write ``levels`` to the run's ``levels.json``; None: read the file a resumed run kept."""
    path = run / "levels.json"
    if levels is None:
        return json.loads(path.read_text())
    path.write_text(json.dumps(levels, indent=1))
    return levels


def _reference_levels(baselines: Sequence[str], scenario: Scenario, seeds: list[int],
                      log: Callable[[str], None] | None) -> dict[str, dict[str, float]]:
    """The reference agents' levels on the evaluation seeds (the run's ``levels.json``)."""
    from sfenv.agents.callbacks import heuristic_levels

    if log is not None and baselines:
        log(f"scoring the reference agents {', '.join(baselines)} on the {len(seeds)} evaluation seeds")
    return heuristic_levels(baselines, scenario, seeds)


def run_summary(run: str | Path) -> str:
    """The result of a ``train`` run folder in one line (:func:`sfenv.agents.callbacks.training_summary`).

    Reads ``eval.json``, ``config.yml`` (the evaluation seeds) and ``levels.json`` (absent with
    ``plot=False``: then no comparison).

    :param run: the run folder.
    :return: e.g. ``best model (step 8,192): mean JCT 2.01 h on seeds 10000..10015; fifo 2.64 h
        (0.76x), best heuristic spantrain+swf 2.09 h (0.96x)``.
    """
    from sfenv.agents.callbacks import training_summary

    run = Path(run)
    history = json.loads((run / "eval.json").read_text()) if (run / "eval.json").is_file() else []
    levels = json.loads((run / "levels.json").read_text()) if (run / "levels.json").is_file() else {}
    cfg = read_yaml(run / "config.yml", "run configuration (config.yml)") or {}
    return training_summary(history, levels, cfg.get("eval_seeds") or [0], play=cfg.get("play", "as-trained"),
                            play_env=cfg.get("play_env"), deferral=cfg.get("play_defer"))


def _describe_scenario(given: Any, loaded: Scenario | list[Scenario]) -> Any:
    """What ``config.yml`` records for the training scenario: a name, or the full data of each scenario."""
    if isinstance(given, str) and not isinstance(loaded, list) and not names_a_file(given):
        return given
    if isinstance(loaded, list):
        return [s.cfg.model_dump() for s in loaded]
    return loaded.cfg.model_dump()


def split_model_spec(text: str) -> tuple[str | None, str]:
    """``"ppo:runs/x.zip"`` -> ``("ppo", "runs/x.zip")``; a text without an algorithm prefix -> ``(None, text)``.

    :param text: what follows ``model:`` in an agents list.
    :return: the algorithm (one of :data:`ALGOS`) or None, and the path.
    """
    head, sep, rest = text.partition(":")
    if sep and head in ALGOS and rest:
        return head, rest
    return None, text


def absolute_model_spec(text: str) -> str:
    """``[ALGO:]PATH`` with the path made absolute (for a worker in another folder)."""
    algo, path = split_model_spec(text)
    return (f"{algo}:" if algo else "") + str(Path(path).resolve())


class LearnedPolicy:
    """A saved policy as a PolicyPredictor (``predict`` with optional ``action_masks``).

    By default only the weights-only form is loaded (:mod:`sfenv.agents.model_files`: a
    ``.policy.json`` spec and its ``.policy.npz`` weights, which load no code): ``path`` may name
    the spec, the weights, a folder holding one spec, or an SB3 ``.zip`` whose ``<stem>.policy.json``
    is beside it (``sfenv train`` writes both).  :attr:`model` is then a
    :class:`~sfenv.agents.model_files.WeightsOnlyModel` (the policy network, its spaces, its step
    count and ``predict``).

    A zip with that twin is never opened, whatever ``trust_code`` says.  An SB3 ``.zip`` without
    that twin is code (its ``data`` entry is cloudpickled, and VecNormalize statistics are a
    ``.pkl``): it is loaded only with ``trust_code=True``, and :attr:`model` is then the SB3
    algorithm; otherwise :class:`~sfenv.errors.UntrustedCode` says why and how to opt in.  Either
    way, files a sidecar names must be inside the model's folder.

    If the model was trained under ``VecNormalize``, ``predict`` normalises observations with the
    saved statistics first, as training did; :attr:`normalize_obs` is that function (None without
    observation statistics).

    A model saved by another SB3 trainer (e.g. the RL Zoo) has no sidecar: name its algorithm
    (``algo="ppo"``, or ``"ppo:PATH"`` as ``path``, i.e. ``model:ppo:PATH`` in the evaluator).  Its
    observation is flattened only if the model's space is not the env's Dict; VecNormalize
    statistics are taken from the one ``*/vecnormalize.pkl`` beside it (the Zoo's layout), and an
    unmasked model plays with ``invalid_action_limit=3``, as :func:`train` and the Zoo file train it.

    :param path: the model: a ``.policy.json`` (or its ``.policy.npz``, or their folder), or an SB3
        ``.zip``; a zip's ``.json`` sidecar (written by :func:`train`) gives the algorithm, otherwise
        pass ``algo`` or write ``ALGO:PATH``.
    :param algo: the algorithm, one of :data:`ALGOS` (default: the spec's or sidecar's, or the ``ALGO:`` prefix).
    :param work_conserving: True: play it in an env with ``work_conserving=True`` (wait masked while a
        candidate can start; :class:`~sfenv.env.GeoSchedEnv`); False: in the env it was trained in;
        None: as its recipe's play mode says (``meta["play"]``, one of :data:`PLAY_MODES`, written by
        :func:`train`; a model without it is played as trained).  :attr:`play` is the mode chosen.
        Only masked algorithms read the mask.
    :param trust_code: allow loading an SB3 ``.zip`` and pickled VecNormalize statistics when no
        weights-only form is there (this runs code from those files: only for files you trust).
    :param defer: None or True: play the recipe's deferral to a heuristic if it has one
        (``meta["play_defer"]``, :attr:`play_defer`; :mod:`sfenv.agents.deferral`); False: never defer.
        A player that can read the env (the evaluator, the keep-best evaluations) calls :meth:`choose`
        with the heuristic's action; :meth:`predict` alone never defers.
    :raises UntrustedCode: for a zip without its weights-only twin and ``trust_code=False``.
    :raises MissingFile: for a missing model file.
    :raises InvalidInput: for a malformed file, naming it and the field.
    """

    def __init__(self, path: str | Path, algo: str | None = None, work_conserving: bool | None = None,
                 trust_code: bool = False, defer: bool | None = None):
        if work_conserving is not None and not isinstance(work_conserving, bool):
            raise InvalidInput(f"LearnedPolicy: invalid argument work_conserving={work_conserving!r}: "
                               "expected True, False or None")
        if not isinstance(trust_code, bool):
            raise InvalidInput(f"LearnedPolicy: invalid argument trust_code={trust_code!r}: expected True or False")
        if defer is not None and not isinstance(defer, bool):
            raise InvalidInput(f"LearnedPolicy: invalid argument defer={defer!r}: expected True, False or None")
        if algo is None:
            algo, path = split_model_spec(str(path))
        path = Path(path)
        self.algo = ""
        self.meta: dict[str, Any] = {}
        self.model: Any = None  # the weights-only model, or the SB3 algorithm of a trusted zip
        self.spec = _algo("maskable-ppo")  # the algorithm's settings, set by the loader
        self.vec_normalize: Any = None
        #: an ensemble's members (:meth:`_load_ensemble`); empty for one policy
        self.members: list[LearnedPolicy] = []
        #: the weights-only spec this policy was loaded from; None for an SB3 zip loaded with ``trust_code``
        #: or an ensemble
        self.spec_path = None if path.name.endswith(model_files.ENSEMBLE_SUFFIX) else model_files.spec_path_for(path)
        if path.name.endswith(model_files.ENSEMBLE_SUFFIX):
            self._load_ensemble(path, algo, work_conserving, defer)
        elif self.spec_path is not None:
            self._load_weights_only(self.spec_path, algo)
        elif not path.exists():
            raise MissingFile(f"{path}: no such model file (sfenv train writes <out>/<run>/model.zip with "
                              f"model{model_files.SPEC_SUFFIX}, and best_model.*)")
        elif not trust_code:
            raise model_files.refuse_code(path, f"no weights-only form ({path.stem}{model_files.SPEC_SUFFIX}) is "
                                                "beside it, and an SB3 .zip is code: loading it unpickles objects")
        else:
            self._load_sb3_zip(path, algo)
        recorded = self.meta.get("play", "as-trained")
        if recorded not in PLAY_MODES:
            raise InvalidInput(f"{path}: meta.play = {recorded!r}; expected one of {list(PLAY_MODES)}")
        if work_conserving is None and recorded == "work-conserving":
            work_conserving = True
        if work_conserving is not None:
            self.meta = {**self.meta, "env_kwargs": {**self.meta.get("env_kwargs", {}),
                                                     "work_conserving": work_conserving}}
        play_env = check_play_env(self.meta.get("play_env"), f"{path}: meta")
        if play_env:  # the recipe's play settings (PLAY_ENV_KEYS), which its training envs did not have
            self.meta = {**self.meta, "env_kwargs": {**self.meta.get("env_kwargs", {}), **play_env}}
        #: the recipe's deferral to a heuristic (``meta["play_defer"]``); None: the policy always chooses alone
        self.play_defer: Deferral | None = (None if defer is False else
                                            check_play_defer(self.meta.get("play_defer"), f"{path}: meta"))
        if self.play_defer is not None and self.algo == "dqn":
            raise InvalidInput(f"{path}: meta.play_defer needs a policy with action probabilities; dqn has none")
        #: how this policy is played: ``work-conserving`` or ``as-trained`` (:data:`PLAY_MODES`)
        self.play = "work-conserving" if self.meta.get("env_kwargs", {}).get("work_conserving") else "as-trained"
        self.name = f"model:{path.name}"
        self.normalize_obs: Callable[[Any], Any] | None = None
        if self.vec_normalize is not None and self.vec_normalize.norm_obs:
            self.normalize_obs = self.vec_normalize.normalize_obs

    def _load_ensemble(self, path: Path, algo: str | None, work_conserving: bool | None, defer: bool | None) -> None:
        """Load an ensemble file's members (:func:`sfenv.agents.model_files.read_ensemble_file`), checked alike.

        Every member must be the same algorithm, with action probabilities, on the same spaces, and
        recorded with the same play settings (``play``, ``play_env``, ``play_defer``, ``env_kwargs``): the
        ensemble is played as they say, and a member that says otherwise is an error, not a guess.
        """
        self.members = [LearnedPolicy(member, algo, work_conserving=work_conserving, defer=defer)
                        for member in model_files.read_ensemble_file(path)]
        first = self.members[0]
        if first.algo == "dqn":
            raise InvalidInput(f"{path}: an ensemble averages action probabilities; dqn has none")
        for member in self.members[1:]:
            for field in ("play", "play_env", "play_defer", "env_kwargs"):
                if member.meta.get(field) != first.meta.get(field):
                    raise InvalidInput(f"{path}: members disagree on {field}: {member.spec_path} records "
                                       f"{str(member.meta.get(field))[:200]}, {first.spec_path} "
                                       f"{str(first.meta.get(field))[:200]}")
            if member.algo != first.algo or member.model.observation_space != first.model.observation_space \
                    or member.model.action_space != first.model.action_space:
                raise InvalidInput(f"{path}: members disagree on the algorithm or the spaces: {member.spec_path} "
                                   f"and {first.spec_path}")
        self.algo = first.algo
        self.spec = first.spec
        self.model = EnsembleModel(self.members)
        self.meta = {**first.meta, "ensemble": {"members": [str(m.spec_path) for m in self.members],
                                                 "combine": "mean-probability"}}

    def log_probs(self, observation: Any, action_masks: np.ndarray | None) -> np.ndarray:
        """The log-probability of each action (masked ones very low) on the raw observation.

        One policy: its own, on the observation normalised by its statistics.  An ensemble: the log of
        the mean of its members' probabilities (deep ensembles: Lakshminarayanan, Pritzel and Blundell,
        NeurIPS 2017), each member on the observation normalised by its own statistics.

        :raises InvalidInput: for a policy without action probabilities (DQN).
        """
        if self.members:
            return self.model.log_probs(observation, action_masks)
        if self.normalize_obs is not None:
            observation = self.normalize_obs(observation)
        return policy_log_probs(self.model.policy, observation, action_masks if self.spec.masked else None)

    def _load_weights_only(self, spec_path: Path, algo: str | None) -> None:
        """Load the weights-only form (:func:`sfenv.agents.model_files.read_policy_files`)."""
        loaded = model_files.read_policy_files(spec_path, ALGOS)
        if algo is not None and algo != loaded.spec["algo"]:
            raise InvalidInput(f"{spec_path}: a {loaded.spec['algo']} policy, not {algo}; drop the ALGO: prefix")
        self.algo = loaded.spec["algo"]
        self.meta = loaded.meta
        self.model = loaded.model
        self.vec_normalize = loaded.vec_normalize
        self.spec = dataclasses.replace(_algo(self.algo), flatten=not isinstance(self.model.observation_space,
                                                                                 gym.spaces.Dict))

    def _load_sb3_zip(self, path: Path, algo: str | None) -> None:
        """Load an SB3 zip and its pickled VecNormalize statistics (code: the caller opted in)."""
        meta_path = path.with_suffix(".json")
        self.meta = (model_files.read_json_file(meta_path, model_files.MAX_SIDECAR_BYTES, "model sidecar")
                     if meta_path.exists() else {})
        chosen = algo or self.meta.get("algo")
        if chosen is None:
            raise InvalidInput(f"{path}: no {meta_path.name} sidecar (sfenv train writes one); name the algorithm: "
                               f"model:ALGO:{path} with ALGO one of {sorted(ALGOS)}, e.g. model:ppo:{path}")
        self.algo = str(chosen)
        spec = _algo(self.algo)
        if not path.is_file():
            raise InvalidInput(f"{path}: the model is not a regular file")
        cls = getattr(_rl_module(spec.module), spec.cls)
        try:
            self.model = cls.load(str(path), device="cpu")
        except (KeyError, ValueError, AssertionError, RuntimeError, TypeError, AttributeError) as exc:
            raise InvalidInput(f"{path}: cannot be loaded as {spec.cls} ({type(exc).__name__}: {exc}); "
                               f"is it a {self.algo} model? Name its algorithm as model:ALGO:PATH") from None
        # sfenv train flattens for ppo/a2c/dqn; a model trained on the Dict observation (the Zoo's) is not
        self.spec = dataclasses.replace(spec, flatten=not isinstance(self.model.observation_space, gym.spaces.Dict))
        if not meta_path.exists():  # trained outside sfenv train: the settings it most likely had
            self.meta = {"algo": self.algo, "env_kwargs": {} if spec.masked else {"invalid_action_limit": 3}}
            found = sorted(path.parent.glob("*/vecnormalize.pkl"))
            if len(found) == 1:
                self.meta["vecnormalize"] = str(found[0].relative_to(path.parent))
        stats = self.meta.get("vecnormalize")
        if stats:
            self.vec_normalize = _pickled_vec_normalize(
                model_files.file_inside(path.parent, stats, f"{meta_path}: vecnormalize"), meta_path.name)

    def prepare(self, observation: Any, action_masks: np.ndarray | None = None) -> None:
        """One untimed deterministic ``predict`` (no random draw, no state kept): the network's one-off set-up.

        :func:`sfenv.app.evaluate.run_policy_episode` calls it before it times the first decision.
        """
        self.predict(observation, deterministic=True, action_masks=action_masks)

    def choose(self, observation: Any, action_masks: np.ndarray | None,
               baseline: int | Sequence[int | None] | None) -> tuple[int, bool]:
        """The action to play with the recipe's deferral, and whether it is a heuristic's in place of the policy's.

        :param baseline: the actions of the heuristics :attr:`play_defer` names on this step's menu
            (:func:`sfenv.agents.deferral.heuristic_actions`; None for one that offers none).
        :raises InvalidInput: if this policy has no deferral (:attr:`play_defer` is None).
        """
        if self.play_defer is None:
            raise InvalidInput(f"{self.name}: choose() plays a recipe's play_defer; this model has none (use predict)")
        masks = action_masks if self.spec.masked else None
        return deferred_choice(self.log_probs(observation, masks), masks, baseline, self.play_defer.margin)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """SB3 ``predict`` on the normalised observation; masks go to maskable models, others ignore them.

        An ensemble plays the action most probable under its members' mean probabilities
        (``deterministic=False``: one drawn from them, by torch's generator as SB3's ``predict`` draws).
        """
        if self.members:
            return self.model.predict(observation, state, episode_start, deterministic, action_masks=action_masks)
        if self.normalize_obs is not None:
            observation = self.normalize_obs(observation)
        if self.spec.masked:
            return self.model.predict(observation, state, episode_start, deterministic, action_masks=action_masks)
        return self.model.predict(observation, state, episode_start, deterministic)


class EnsembleModel:
    """What the evaluator plays of an ensemble (:attr:`LearnedPolicy.members`): its spaces and ``predict``.

    :param members: the loaded member policies (same algorithm and spaces, checked by :class:`LearnedPolicy`).
    """

    def __init__(self, members: Sequence[LearnedPolicy]):
        self.members = list(members)
        self.observation_space = self.members[0].model.observation_space
        self.action_space = self.members[0].model.action_space
        self.masked = self.members[0].spec.masked
        self.num_timesteps = int(sum(int(getattr(m.model, "num_timesteps", 0)) for m in self.members))

    def log_probs(self, observation: Any, action_masks: np.ndarray | None) -> np.ndarray:
        """The log of the members' mean probability of each action (:meth:`LearnedPolicy.log_probs`)."""
        each = np.stack([member.log_probs(observation, action_masks) for member in self.members])
        top = each.max(axis=0)
        return np.asarray(top + np.log(np.exp(each - top).mean(axis=0)), dtype=np.float64)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, Any]:
        """The most probable action under the mean probabilities, or one drawn from them; SB3's return shape."""
        import torch

        log_probs = self.log_probs(observation, action_masks if self.masked else None)
        if deterministic:
            action = int(np.argmax(log_probs))
        else:
            probs = torch.as_tensor(np.exp(log_probs - log_probs.max()))
            action = int(torch.multinomial(probs / probs.sum(), 1).item())
        return np.asarray(action), state


def _pickled_vec_normalize(stats_path: Path, named_by: str) -> Any:
    """Unpickle VecNormalize statistics (code: only for a model loaded with ``trust_code``), checked.

    :raises MissingFile: if the file is missing.
    :raises InvalidInput: if it is not a regular file, or not VecNormalize statistics.
    """
    import pickle

    if not stats_path.exists():
        raise MissingFile(f"{stats_path}: the VecNormalize statistics {named_by} names are missing")
    data = model_files.read_regular_file(stats_path, model_files.MAX_WEIGHTS_BYTES, "VecNormalize statistics")
    vec_normalize_cls = _rl_module("stable_baselines3.common.vec_env").VecNormalize
    try:
        loaded = pickle.loads(data)  # VecNormalize without its venv: normalize_obs needs none
    except Exception as exc:  # any failure of a pickle is a bad file, reported in one line
        raise InvalidInput(f"{stats_path}: not readable VecNormalize statistics ({type(exc).__name__}: "
                           f"{str(exc)[:200]})") from None
    if not isinstance(loaded, vec_normalize_cls):
        raise InvalidInput(f"{stats_path}: holds a {type(loaded).__name__}, not VecNormalize statistics")
    loaded.training = False
    return loaded


def export_policy(path: str | Path, algo: str | None = None, trust_code: bool = False) -> Path:
    """Write the weights-only form of an SB3 zip you trust beside it: ``<stem>.policy.json`` and ``.policy.npz``.

    Loading the zip runs code from it (and from its pickled VecNormalize statistics), hence
    ``trust_code``; what is written loads none (:mod:`sfenv.agents.model_files`) and plays the same
    actions.  The sidecar (or, for another trainer's zip, the settings :class:`LearnedPolicy`
    assumes) is recorded as the spec's ``meta``.

    :param path: the SB3 ``.zip`` (``ALGO:PATH`` names the algorithm of a zip without a sidecar).
    :param algo: the algorithm, if neither the sidecar nor ``path`` names it.
    :param trust_code: must be True: you vouch for the zip.
    :return: the spec's path.
    :raises UntrustedCode: without ``trust_code``.
    :raises InvalidInput: for a path that is not an SB3 zip, a weights-only form already there, or
        files that cannot be written.
    """
    if algo is None:
        algo, path = split_model_spec(str(path))
    path = Path(path)
    if not trust_code:
        raise model_files.refuse_code(path, "exporting loads the SB3 .zip, and an SB3 .zip is code: loading it "
                                            "unpickles objects")
    if path.name.endswith((model_files.SPEC_SUFFIX, model_files.WEIGHTS_SUFFIX)) or path.suffix != ".zip":
        raise InvalidInput(f"{path}: expected an SB3 .zip to export")
    twin = path.with_name(path.stem + model_files.SPEC_SUFFIX)
    if twin.exists():
        raise InvalidInput(f"{twin}: already there; remove it to export {path.name} again")
    policy = LearnedPolicy(path, algo, trust_code=True)
    try:
        return model_files.write_policy_files(
            path.with_suffix(""), algo=policy.algo, policy=policy.model.policy,
            policy_kwargs=policy.model.policy_kwargs, vec_normalize=policy.vec_normalize, meta=policy.meta,
            num_timesteps=int(policy.model.num_timesteps))
    except OSError as e:
        raise InvalidInput(f"{path}: cannot write its weights-only form beside it ({e.strerror or e}); nothing "
                           "was left half-written") from None
