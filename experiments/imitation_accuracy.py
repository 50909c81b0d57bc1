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

import json
import math
import os
import stat
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sfenv.app.script import ScriptParser
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


#: the most bytes a states file may hold, and the most its arrays may declare (their sizes once decompressed)
MAX_STATES_BYTES = 2 << 30
#: the most arrays a states file may hold
MAX_STATES_ARRAYS = 1000
#: the arrays a states file must hold (beside at least one ``obs_<key>``)
STATES_ARRAYS = ("mask", "act", "scenario")


def _npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The (shape, Fortran order, dtype) of an ``.npy`` stream, its data not read."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        return fmt.read_array_header_1_0(f)
    if version == (2, 0):
        return fmt.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy version {version}")


def _open_archive(path: Path) -> zipfile.ZipFile:
    """``path`` opened as a zip archive after checking it is a regular file of at most :data:`MAX_STATES_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the states file ({e.strerror or e})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATES_BYTES:
        os.close(fd)
        raise InvalidInput(f"{path}: not a regular file of at most {MAX_STATES_BYTES:,} bytes; expected a states "
                           "file (.npz) written by 'collect'")
    fh = os.fdopen(fd, "rb")
    try:
        return zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as e:
        fh.close()
        raise InvalidInput(f"{path}: not an .npz archive ({e}); expected a states file written by 'collect'") from None


def _read_states(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a states file, without pickle, refused before reading if they declare too many bytes.

    Every member's ``.npy`` header is read first; the declared sizes (shape x item size) must add up to at
    most :data:`MAX_STATES_BYTES`, so a small compressed file cannot expand to gigabytes in memory.

    :raises InvalidInput: one line naming the file (and the array): unreadable, not an ``.npz`` archive,
        too large, an object array, or a damaged member.
    """
    with _open_archive(path) as archive:
        try:
            members = archive.infolist()
            if len(members) > MAX_STATES_ARRAYS:
                raise ValueError(f"{len(members):,} members; at most {MAX_STATES_ARRAYS:,}")
            total = 0
            for member in members:
                if not member.filename.endswith(".npy"):
                    raise ValueError(f"member {member.filename!r:.60} is not an .npy array")
                with archive.open(member) as f:
                    shape, _, dtype = _npy_header(f)
                if dtype.hasobject:
                    raise ValueError(f"array {member.filename[:-4]!r:.60} holds Python objects (pickled data)")
                total += math.prod(shape) * dtype.itemsize
                if total > MAX_STATES_BYTES:
                    raise ValueError(f"its arrays declare more than {MAX_STATES_BYTES:,} bytes uncompressed")
            arrays = {}
            for member in members:
                with archive.open(member) as f:
                    arrays[member.filename[:-4]] = np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error, NotImplementedError) as e:
            raise InvalidInput(f"{path}: not a readable states file ({str(e)[:200]})") from None
    return arrays


def _load(path: Path) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """A states file's observations (by key), masks, actions and scenario names, checked.

    :raises InvalidInput: one line naming the file: see :func:`_read_states`, or an array missing,
        or arrays whose numbers of states differ.
    """
    data = _read_states(path)
    obs = {k[4:]: v for k, v in data.items() if k.startswith("obs_")}
    for key in (*STATES_ARRAYS, *([] if obs else ["obs_<key>"])):
        if key not in data:
            raise InvalidInput(f"{path}: no array {key!r}; expected a states file written by 'collect'")
    counts = {k: v.shape[0] if v.ndim else None for k, v in data.items() if k in STATES_ARRAYS or k.startswith("obs_")}
    if len(set(counts.values())) != 1 or None in counts.values():
        raise InvalidInput(f"{path}: the arrays hold different numbers of states ({counts}); expected one per state")
    return obs, data["mask"], data["act"], data["scenario"]


def fit(train_path: Path, validation_path: Path, policy: str = "default", epochs: int = 10, width: int = 128,
        embed_dim: int = 64, learning_rate: float = 1e-3, seed: int = 0) -> dict[str, Any]:
    """Fit a policy to the training states; accuracy on them and per validation group.

    :param policy: ``default`` (SB3's ``MultiInputPolicy`` with two hidden layers of ``width``, on
        observations standardised with the training states' statistics, as VecNormalize does) or
        ``candidate-set`` (:class:`sfenv.agents.set_policy.CandidateSetPolicy`, raw observations).
    :raises InvalidInput: for a states file that is not one (see :func:`_load`), before any work.
    """
    train_obs, train_masks, train_actions, _ = _load(train_path)
    val_obs, val_masks, val_actions, val_names = _load(validation_path)
    import torch
    from sb3_contrib import MaskablePPO
    from sfenv.agents.imitation import Demonstrations, fit_policy
    from stable_baselines3.common.utils import obs_as_tensor

    from sfenv.env import GeoSchedEnv

    torch.manual_seed(seed)
    torch.set_num_threads(1)
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
    p = ScriptParser(script=__file__, description="offline accuracy of a policy network imitating the teacher")
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
