"""How well can a policy network imitate the teacher?  Offline accuracy on held-out states.

A learned policy distilled from a teacher can only be as good as its imitation.  This experiment
separates the two: it records teacher-labelled states once (the teacher acting, as in the first
cloning round of :mod:`sfenv.agents.imitation`), then fits a policy network to the training
states and reports how often its most probable action is the teacher's on states of the
validation split, per group of scenarios.  Architectures and epochs are compared here in minutes,
without training or playing a policy.

Two steps::

    python -m sfenv.experiments.imitation_accuracy collect --split train --states 16000 --out train.npz
    python -m sfenv.experiments.imitation_accuracy collect --split validation --states 3000 --out validation.npz
    python -m sfenv.experiments.imitation_accuracy fit --train train.npz --validation validation.npz \
        --policy candidate-set --epochs 25

``collect --split train`` plays the ``generalise-rollout`` recipe's training platforms (16 generated
from train generator seed 7) and ``spider-8-contended`` on train episode seeds 0, 1, ...;
``--split validation`` plays ``spider-16``, ``spider-8-contended`` and the protocol's first 4
generated validation platforms on validation seeds 10000, 10001, ... (round robin over the scenarios,
whole episodes, until ``--states`` states).  The env is the recipe's (compact observation,
``best+spantrain`` proposers).  ``fit`` prints one JSON line: the variant, the training accuracy
and the accuracy per validation group (``spider-8-contended``, ``generated``, ``spider-16``).
Files are written atomically; an existing ``--out`` is refused unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sfenv.errors import InvalidInput
from sfenv.runs.results import atomic_path
from sfenv.scenario import Scenario, load_scenario

TEACHER = "lookahead:fastest+swf:present:proposed"
ENV_KWARGS: dict[str, Any] = {"obs_mode": "compact", "proposers": "best+spantrain", "max_candidates": 16,
                              "queue_window": 8, "forecast_hours": 6}
GROUPS = ("spider-8-contended", "generated", "spider-16")


def _scenarios(split: str) -> list[Scenario]:
    """The scenarios a split's states come from (see the module docstring)."""
    from sfenv.agents.learned import generated_platforms, generated_scenarios, load_config

    if split == "train":
        generate = load_config("generalise-rollout")["scenario"]["generate"]
        return [*generated_scenarios(**generate), load_scenario("spider-8-contended")]
    return [load_scenario("spider-16"), load_scenario("spider-8-contended"), *generated_platforms("validation", 4)]


def _episodes(split: str) -> Iterator[tuple[Scenario, int]]:
    """(scenario, episode seed) round robin over the split's scenarios, seeds from the protocol's split."""
    from sfenv.runs import protocol

    scenarios = _scenarios(split)
    for seed in protocol.SEED_RANGES[split]:
        for scenario in scenarios:
            yield scenario, seed


def group_of(name: str) -> str:
    """The validation group of a scenario name (generated platforms are named ``gen<i>-...``)."""
    return "generated" if name.startswith("gen") else name


def collect(split: str, states: int, num_jobs: int | None = None, log: Any = None) -> dict[str, np.ndarray]:
    """Teacher-labelled states of ``split``: observations (``obs_<key>``), masks, actions, scenario names, seeds."""
    from sfenv.agents.imitation import expert_action

    from sfenv.env import GeoSchedEnv

    obs_store: dict[str, list[np.ndarray]] = {}
    masks, actions, names, seeds = [], [], [], []
    started = time.perf_counter()
    for scenario, seed in _episodes(split):
        env = GeoSchedEnv(scenario=scenario, num_jobs=num_jobs, **ENV_KWARGS)
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = int(expert_action(env, TEACHER))
            for key, value in obs.items():
                obs_store.setdefault(key, []).append(np.asarray(value, dtype=np.float32).copy())
            masks.append(env.action_masks().copy())
            actions.append(action)
            names.append(scenario.name)
            seeds.append(seed)
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        if log is not None:
            log(f"{scenario.name} seed {seed}: {len(actions)} states ({time.perf_counter() - started:.0f} s)")
        if len(actions) >= states:
            break
    return {**{f"obs_{k}": np.stack(v) for k, v in obs_store.items()}, "mask": np.stack(masks),
            "act": np.asarray(actions), "scenario": np.asarray(names), "seed": np.asarray(seeds)}


def _load(path: Path) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    data = np.load(path)
    return ({k[4:]: data[k] for k in data.files if k.startswith("obs_")}, data["mask"], data["act"],
            data["scenario"])


def fit(train_path: Path, validation_path: Path, policy: str = "default", epochs: int = 10, width: int = 128,
        embed_dim: int = 64, learning_rate: float = 1e-3, seed: int = 0) -> dict[str, Any]:
    """Fit a policy to the training states; accuracy on them and per validation group.

    :param policy: ``default`` (SB3's ``MultiInputPolicy`` with two hidden layers of ``width``, on
        observations standardised with the training states' statistics, as VecNormalize does) or
        ``candidate-set`` (:class:`sfenv.agents.set_policy.CandidateSetPolicy`, raw observations).
    """
    import torch
    from sb3_contrib import MaskablePPO
    from sfenv.agents.imitation import Demonstrations, fit_policy
    from stable_baselines3.common.utils import obs_as_tensor

    from sfenv.env import GeoSchedEnv

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    train_obs, train_masks, train_actions, _ = _load(train_path)
    val_obs, val_masks, val_actions, val_names = _load(validation_path)
    env = GeoSchedEnv(scenario="spider-8-contended", num_jobs=4, **{**ENV_KWARGS, "proposers": "default"})
    normalize = None
    if policy == "default":
        model = MaskablePPO("MultiInputPolicy", env, device="cpu", seed=seed,
                            policy_kwargs={"net_arch": {"pi": [width, width], "vf": [width, width]}})
        mean = {k: v.mean(axis=0) for k, v in train_obs.items()}
        std = {k: np.sqrt(v.var(axis=0) + 1e-8) for k, v in train_obs.items()}

        def normalize(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {k: np.clip((v - mean[k]) / std[k], -10.0, 10.0) for k, v in obs.items()}
    elif policy == "candidate-set":
        from sfenv.agents.set_policy import CandidateSetPolicy

        model = MaskablePPO(CandidateSetPolicy, env, device="cpu", seed=seed, policy_kwargs={"embed_dim": embed_dim})
    else:
        raise InvalidInput(f"policy {policy!r}: expected 'default' or 'candidate-set'")
    n = len(train_actions)
    demos = Demonstrations(train_obs, train_masks, train_actions, np.full(n, np.nan), np.zeros(n), np.zeros(n, bool),
                           1.0)
    stats = fit_policy(model, demos, normalize, epochs=epochs, batch_size=256, learning_rate=learning_rate,
                       vf_coef=0.0, seed=seed, label_smoothing=0.05)
    obs = normalize(val_obs) if normalize is not None else val_obs
    with torch.no_grad():
        dist = model.policy.get_distribution(
            obs_as_tensor({k: v.astype(np.float32) for k, v in obs.items()}, torch.device("cpu")),
            action_masks=val_masks)
        categorical = dist.distribution
        assert isinstance(categorical, torch.distributions.Categorical)  # one discrete action: MaskableCategorical
        predicted = categorical.probs.argmax(dim=1).numpy()
    groups = np.asarray([group_of(str(name)) for name in val_names])
    out: dict[str, Any] = {"policy": policy, "epochs": epochs, "learning_rate": learning_rate,
                           **({"width": width} if policy == "default" else {"embed_dim": embed_dim}),
                           "train_states": n, "train_accuracy": round(stats["accuracy"], 3)}
    for group in GROUPS:
        sel = groups == group
        if sel.any():
            out[f"{group}_accuracy"] = round(float((predicted[sel] == val_actions[sel]).mean()), 3)
            out[f"{group}_states"] = int(sel.sum())
    return out


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` atomically (:func:`sfenv.runs.results.atomic_path`)."""
    # numpy's stubs let a ** mapping fill savez's allow_pickle: bool too, which no array is; the names are array names
    savez: Callable[..., None] = np.savez_compressed
    with atomic_path(path) as tmp, tmp.open("wb") as f:
        savez(f, **arrays)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``collect`` or ``fit`` (see the module docstring)."""
    p = argparse.ArgumentParser(description="offline accuracy of a policy network imitating the teacher")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="record teacher-labelled states")
    c.add_argument("--split", choices=("train", "validation"), required=True)
    c.add_argument("--states", type=int, default=16000, help="stop after the episode that reaches this many states")
    c.add_argument("--num-jobs", type=int, default=None, help="jobs per episode (default: each scenario's)")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    f = sub.add_parser("fit", help="fit a policy to training states; accuracy on validation states")
    f.add_argument("--train", type=Path, required=True)
    f.add_argument("--validation", type=Path, required=True)
    f.add_argument("--policy", choices=("default", "candidate-set"), default="default")
    f.add_argument("--epochs", type=int, default=10)
    f.add_argument("--width", type=int, default=128, help="hidden layer width of the default policy")
    f.add_argument("--embed-dim", type=int, default=64, help="embedding width of the candidate-set policy")
    f.add_argument("--learning-rate", type=float, default=1e-3)
    args = p.parse_args(argv)
    if args.command == "collect":
        if args.states < 1:
            p.error(f"argument --states: expected an integer >= 1, got {args.states}")
        if args.out.exists() and not args.overwrite:
            p.error(f"argument --out: {args.out} exists; pass --overwrite to replace it")
        data = collect(args.split, args.states, args.num_jobs, log=lambda line: print(line, flush=True))
        _save_npz(args.out, data)
        print(f"saved {args.out}: {len(data['act'])} states")
        return 0
    for path in (args.train, args.validation):
        if not path.is_file():
            p.error(f"no such file {path} (write it with the collect command)")
    if args.epochs < 1:
        p.error(f"argument --epochs: expected an integer >= 1, got {args.epochs}")
    print(json.dumps(fit(args.train, args.validation, args.policy, args.epochs, args.width, args.embed_dim,
                         args.learning_rate)))
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
