"""Model files are data: the weights-only form of a learned policy, and the checks on every file a model names.

An SB3 ``.zip`` is code: loading it cloudpickle-loads the policy class, the spaces and the schedules
stored in its ``data`` entry, and a VecNormalize ``.pkl`` is a pickle; either can run any program
when loaded.  So :func:`sfenv.agents.learned.train` also writes each model it saves (``model``,
``best_model``) in a form that loads no code, two files beside the zip:

- ``<stem>.policy.json`` (the *spec*, at most :data:`MAX_SPEC_BYTES`): the format and its version,
  the sfenv, environment and SB3 versions it was written with, the algorithm, the policy class (one
  of :data:`POLICY_CLASSES`), its keyword arguments as JSON (classes such as ``activation_fn``
  named from :data:`ALLOWED_CLASSES`), the observation and action spaces, the VecNormalize settings
  and counts, the training sidecar (``meta``: env settings, hyperparameters, steps), and the weights
  file's name and SHA-256;
- ``<stem>.policy.npz`` (the *weights*, at most :data:`MAX_WEIGHTS_BYTES`): an uncompressed NumPy
  archive of plain numeric arrays, the policy's ``state_dict`` (``policy/<name>``) and the
  observation statistics (``obs_rms/<key>/mean``, ``.../var``).  Each ``.npy`` header is parsed
  by NumPy's header reader and the bytes are read with :func:`numpy.frombuffer`: object arrays,
  structured dtypes and anything pickled are refused, nothing is unpickled.

:func:`read_policy_files` rebuilds the policy network from the spec (its class and keyword arguments
as SB3's ``load`` would) and loads the weights into it; the observation statistics become an SB3
``VecNormalize`` (without an env), so a policy loaded this way plays exactly the actions the SB3
zip plays (``tests/test_model_files.py``).  Every file is read only if it is a regular file inside
the model's folder (after resolving symlinks) and under its byte cap; anything malformed raises
:class:`~sfenv.errors.InvalidInput` naming the file and the field.

The zip and the pickles stay for what needs them: ``sfenv train --resume`` (the optimiser state)
and models from other trainers (the RL Zoo).  Loading them needs an explicit opt-in
(``trust_code=True``, ``--trust-model-code``); without it they are refused with
:class:`~sfenv.errors.UntrustedCode`.  :func:`sfenv.agents.learned.export_policy` writes the
weights-only form of a zip you trust.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import math
import os
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np

from sfenv.errors import DependencyNotInstalled, InvalidInput, MissingFile, UntrustedCode
from sfenv.runs.results import atomic_path, atomic_write_text

__all__ = [
    "ALLOWED_CLASSES",
    "ENSEMBLE_FORMAT",
    "ENSEMBLE_SUFFIX",
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_ENSEMBLE_MEMBERS",
    "MAX_SIDECAR_BYTES",
    "MAX_SPEC_BYTES",
    "MAX_WEIGHTS_BYTES",
    "POLICY_CLASSES",
    "SPEC_SUFFIX",
    "TRUST_HINT",
    "WEIGHTS_SUFFIX",
    "WeightsOnlyModel",
    "WeightsOnlyPolicy",
    "check_recordable",
    "file_inside",
    "read_ensemble_file",
    "read_json_file",
    "read_policy_files",
    "read_regular_file",
    "refuse_code",
    "rl_module",
    "spec_path_for",
    "write_ensemble_file",
    "write_policy_files",
]

#: the spec file of the weights-only form: ``<stem>.policy.json``
SPEC_SUFFIX = ".policy.json"
#: the weights file of the weights-only form: ``<stem>.policy.npz``
WEIGHTS_SUFFIX = ".policy.npz"
#: the spec's ``format`` field
FORMAT = "sfenv-policy"
#: the spec's ``format_version`` field (this module reads exactly this version)
FORMAT_VERSION = 1
#: the largest spec file read, in bytes (1 MiB)
MAX_SPEC_BYTES = 1 << 20
#: an ensemble of weights-only policies played as one: ``<stem>.ensemble.json`` (:func:`read_ensemble_file`)
ENSEMBLE_SUFFIX = ".ensemble.json"
#: the ensemble file's ``format`` field (its ``format_version`` is :data:`FORMAT_VERSION`)
ENSEMBLE_FORMAT = "sfenv-ensemble"
#: how the members' action probabilities are combined (the only way this version reads)
ENSEMBLE_COMBINE = "mean-probability"
#: the most members an ensemble file may list
MAX_ENSEMBLE_MEMBERS = 16
#: the largest weights file read, in bytes (256 MiB: about 64 million float32 parameters)
MAX_WEIGHTS_BYTES = 256 << 20
#: the largest training sidecar (``model.json``) read, in bytes (1 MiB)
MAX_SIDECAR_BYTES = 1 << 20
#: the most elements a Box space of a spec may have, and the most arrays a weights file may hold
MAX_SPACE_ELEMENTS = 1 << 22
MAX_ARRAYS = 10_000
#: how to opt in, for the messages that refuse code (``{path}``: the file refused)
TRUST_HINT = ("if you trust where it came from, pass --trust-model-code (Python: trust_code=True), or write its "
              "weights-only form once with `sfenv export-model {path} --trust-model-code`")

#: policy classes a spec may name (``module.QualName``); importing these modules runs no code from the file
POLICY_CLASSES = (
    "sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy",
    "sb3_contrib.common.maskable.policies.MaskableMultiInputActorCriticPolicy",
    "stable_baselines3.common.policies.ActorCriticPolicy",
    "stable_baselines3.common.policies.MultiInputActorCriticPolicy",
    "stable_baselines3.dqn.policies.DQNPolicy",
    "stable_baselines3.dqn.policies.MultiInputPolicy",
    "sfenv.agents.set_policy.CandidateSetPolicy",
)
_ACTIVATIONS = ("CELU", "ELU", "GELU", "Hardswish", "Hardtanh", "LeakyReLU", "Mish", "PReLU", "ReLU", "ReLU6",
                "SELU", "SiLU", "Sigmoid", "Softplus", "Tanh")
#: classes a spec's policy keyword arguments may name (activations, optimisers, feature extractors)
ALLOWED_CLASSES = (
    *(f"torch.nn.modules.activation.{name}" for name in _ACTIVATIONS),
    "torch.nn.modules.linear.Identity",
    "torch.optim.adam.Adam",
    "torch.optim.adamw.AdamW",
    "torch.optim.rmsprop.RMSprop",
    "torch.optim.sgd.SGD",
    "stable_baselines3.common.torch_layers.FlattenExtractor",
    "stable_baselines3.common.torch_layers.CombinedExtractor",
    "sfenv.agents.set_policy.CandidateSetExtractor",
)
#: the key that marks a class in the spec's JSON: ``{"$class": "torch.nn.modules.activation.ReLU"}``
_CLASS_KEY = "$class"
#: dtypes a weights array or a Box space may have
_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool")
#: the spec's top-level fields and their JSON types
_SPEC_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": str, "format_version": int, "algo": str, "policy_class": str, "policy_kwargs": dict,
    "observation_space": dict, "action_space": dict, "normalization": (dict, type(None)), "weights": str,
    "weights_sha256": str, "num_timesteps": int, "meta": dict,
}


def rl_module(name: str) -> ModuleType:
    """Import a module of the ``rl`` extra, or say how to install it.

    :raises DependencyNotInstalled: naming ``pip install "sfenv[rl]"``.
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise DependencyNotInstalled(
            f"{e.name or name} is not installed; learned policies need the rl extra: pip install \"sfenv[rl]\""
        ) from e


# ----------------------------------------------------------------------------------------- reading files


def file_inside(folder: Path, name: Any, where: str) -> Path:
    """The file ``name`` names relative to ``folder``, checked to stay inside it (symlinks resolved).

    :param folder: the model's folder.
    :param name: a relative path, as a file field holds it.
    :param where: the file and field, for messages (e.g. ``runs/x/model.json: vecnormalize``).
    :raises InvalidInput: for a name that is not a non-empty string, is absolute, or leads (through
        ``..`` or a symlink) out of ``folder``.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise InvalidInput(f"{where}: expected a file name relative to the model folder, got {name!r}")
    base = folder.resolve()
    if Path(name).is_absolute():
        raise InvalidInput(f"{where}: {name!r} is an absolute path; a model's files must be inside its folder "
                           f"{base}")
    target = (folder / name).resolve()
    if not target.is_relative_to(base):
        raise InvalidInput(f"{where}: {name!r} leads out of the model folder {base} (to {target}); a model's "
                           "files must be inside its folder")
    return target


def read_regular_file(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``.

    The file is opened without blocking and checked on the open descriptor, so a FIFO, a device
    (``/dev/zero``) or a folder is refused at once, and a file that grows while read is refused too.

    :param what: what the file is, for messages (e.g. ``policy spec``).
    :raises MissingFile: if it does not exist.
    :raises InvalidInput: if it is not a regular file, or larger than ``max_bytes``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise MissingFile(f"{path}: no such {what} file") from None
    except OSError as e:
        raise InvalidInput(f"{path}: cannot open the {what} file ({e.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(f"{path}: the {what} is not a regular file")
        raise InvalidInput(f"{path}: the {what} file has {info.st_size:,} bytes; at most {max_bytes:,} are read")
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the {what} file ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise InvalidInput(f"{path}: the {what} file grew past {max_bytes:,} bytes while it was read")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json_file(path: Path, max_bytes: int, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a regular file of at most ``max_bytes``; NaN and Infinity refused).

    :raises MissingFile: if it does not exist.
    :raises InvalidInput: if it is not a regular file, too large, not UTF-8 JSON, or not an object.
    """
    data = read_regular_file(path, max_bytes, what)
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InvalidInput(f"{path}: the {what} is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path}: the {what} must be a JSON object, got {type(value).__name__}")
    return value


def spec_path_for(path: Path) -> Path | None:
    """The spec of the weights-only form that ``path`` names, or None if there is none.

    ``X.policy.json`` is itself; ``X.policy.npz`` and ``X.zip`` (an SB3 zip) give ``X.policy.json``
    if it exists; a folder gives its one ``*.policy.json``.

    :raises InvalidInput: for a folder with none or several.
    """
    name = path.name
    if name.endswith(SPEC_SUFFIX):
        return path
    if path.is_dir():
        found = sorted(path.glob("*" + SPEC_SUFFIX))
        if len(found) != 1:
            listed = ", ".join(p.name for p in found) or "none"
            raise InvalidInput(f"{path}: a model folder must hold exactly one *{SPEC_SUFFIX} (found {listed}); "
                               "name the file")
        return found[0]
    stem = name[: -len(WEIGHTS_SUFFIX)] if name.endswith(WEIGHTS_SUFFIX) else path.stem
    twin = path.with_name(stem + SPEC_SUFFIX)
    return twin if twin.exists() or name.endswith(WEIGHTS_SUFFIX) else None


def read_ensemble_file(path: Path) -> list[Path]:
    """The member specs an ensemble file lists, each checked to be a ``*.policy.json`` inside its folder.

    The file (at most :data:`MAX_SPEC_BYTES`) holds ``{"format": "sfenv-ensemble", "format_version": 1,
    "combine": "mean-probability", "members": ["s0/best_model.policy.json", ...]}``: 2 to
    :data:`MAX_ENSEMBLE_MEMBERS` different member specs, relative to the file's folder.  The members
    themselves are read by :func:`read_policy_files` (:class:`~sfenv.agents.learned.LearnedPolicy`).

    :raises MissingFile: if the file does not exist.
    :raises InvalidInput: naming the file and the field, for anything else.
    """
    data = read_json_file(path, MAX_SPEC_BYTES, "ensemble")
    fields = {"format", "format_version", "combine", "members"}
    if set(data) != fields:
        raise InvalidInput(f"{path}: an ensemble file has exactly the fields {sorted(fields)}, got {sorted(data)[:10]}")
    if data["format"] != ENSEMBLE_FORMAT or data["format_version"] != FORMAT_VERSION:
        raise InvalidInput(f"{path}: format: expected {ENSEMBLE_FORMAT!r} version {FORMAT_VERSION}, got "
                           f"{str(data['format'])[:60]!r} version {str(data['format_version'])[:20]}")
    if data["combine"] != ENSEMBLE_COMBINE:
        raise InvalidInput(f"{path}: combine: expected {ENSEMBLE_COMBINE!r}, got {str(data['combine'])[:60]!r}")
    members = data["members"]
    if not isinstance(members, list) or not 2 <= len(members) <= MAX_ENSEMBLE_MEMBERS:
        raise InvalidInput(f"{path}: members: expected a list of 2 to {MAX_ENSEMBLE_MEMBERS} member specs, got "
                           f"{str(members)[:100]}")
    found: list[Path] = []
    for i, name in enumerate(members):
        member = file_inside(path.parent, name, f"{path}: members[{i}]")
        if not member.name.endswith(SPEC_SUFFIX):
            raise InvalidInput(f"{path}: members[{i}]: {str(name)[:100]!r} is not a weights-only spec (*{SPEC_SUFFIX})")
        if member in found:
            raise InvalidInput(f"{path}: members[{i}]: {str(name)[:100]!r} is listed twice")
        found.append(member)
    return found


def write_ensemble_file(path: Path, members: list[Path], overwrite: bool = False) -> Path:
    """Write an ensemble file listing ``members`` (weights-only specs inside its folder), atomically.

    :param overwrite: replace an existing file (otherwise it is an error).
    :raises InvalidInput: for a name without :data:`ENSEMBLE_SUFFIX`, members outside the folder or not
        specs, fewer than 2 or more than :data:`MAX_ENSEMBLE_MEMBERS`, or an existing file without ``overwrite``.
    """
    if not path.name.endswith(ENSEMBLE_SUFFIX):
        raise InvalidInput(f"{path}: an ensemble file's name ends with {ENSEMBLE_SUFFIX}")
    if path.exists() and not overwrite:
        raise InvalidInput(f"{path}: exists; not overwritten")
    base = path.parent.resolve()
    names = []
    for member in members:
        resolved = Path(member).resolve()
        if not resolved.is_relative_to(base):
            raise InvalidInput(f"{path}: member {member} is not inside the ensemble's folder {base}")
        if not resolved.name.endswith(SPEC_SUFFIX):
            raise InvalidInput(f"{path}: member {member} is not a weights-only spec (*{SPEC_SUFFIX})")
        names.append(resolved.relative_to(base).as_posix())
    if not 2 <= len(set(names)) == len(names) <= MAX_ENSEMBLE_MEMBERS:
        raise InvalidInput(f"{path}: an ensemble has 2 to {MAX_ENSEMBLE_MEMBERS} different members, got {names}")
    record = {"format": ENSEMBLE_FORMAT, "format_version": FORMAT_VERSION, "combine": ENSEMBLE_COMBINE,
              "members": names}
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return path


# ------------------------------------------------------------------------------------------ spaces as JSON


def _number_to_json(value: Any) -> Any:
    """A bound as JSON: an int (booleans as 0 / 1), a finite float, or the strings ``"inf"`` / ``"-inf"``."""
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return int(value)
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if math.isnan(value):
        raise InvalidInput("a space bound is NaN; the weights-only form cannot record it")
    return value


def _bound_to_json(array: np.ndarray) -> Any:
    """A Box bound as JSON: one number when every element is equal, else the nested list."""
    flat = array.reshape(-1)
    if flat.size and bool(np.all(flat == flat[0])):
        return _number_to_json(flat[0])
    return np.vectorize(_number_to_json, otypes=[object])(array).tolist() if array.size else []


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A Box, Discrete, MultiBinary, MultiDiscrete or Dict space as JSON (:func:`space_from_json` reads it).

    :raises InvalidInput: for another kind of space.
    """
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": _bound_to_json(space.low), "high": _bound_to_json(space.high)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": list(np.atleast_1d(space.n).tolist())}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": [[key, space_to_json(sub)] for key, sub in space.spaces.items()]}
    raise InvalidInput(f"the weights-only form records Box, Discrete, MultiBinary, MultiDiscrete and Dict spaces, "
                       f"not {type(space).__name__}")


def _count(value: Any, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"{where}: expected an integer >= {low}, got {value!r}")
    return value


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > 8:
        raise InvalidInput(f"{where}: expected a list of at most 8 sizes, got {value!r}")
    shape = tuple(_count(v, where, 0) for v in value)
    if math.prod(shape) > MAX_SPACE_ELEMENTS:
        raise InvalidInput(f"{where}: {math.prod(shape):,} elements; at most {MAX_SPACE_ELEMENTS:,}")
    return shape


def _bound_from_json(value: Any, shape: tuple[int, ...], dtype: np.dtype, where: str) -> np.ndarray:
    """A Box bound from :func:`_bound_to_json`'s JSON, as an array of ``shape``."""

    def number(v: Any) -> float:
        if isinstance(v, str) and v in ("inf", "-inf"):
            return float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InvalidInput(f"{where}: expected numbers (or \"inf\", \"-inf\"), got {v!r}")
        return v

    if not isinstance(value, list):
        return np.full(shape, number(value), dtype=np.float64).astype(dtype)
    try:
        array = np.vectorize(number, otypes=[np.float64])(np.array(value, dtype=object))
    except ValueError:
        raise InvalidInput(f"{where}: not a regular nested list") from None
    if array.shape != shape:
        raise InvalidInput(f"{where}: shape {list(array.shape)}, expected {list(shape)}")
    return array.astype(dtype)


def space_from_json(data: Any, where: str, depth: int = 0) -> gym.Space:
    """The space :func:`space_to_json` recorded.

    :param where: the file and field, for messages.
    :raises InvalidInput: naming the field for anything malformed.
    """
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise InvalidInput(f"{where}: expected a space object with a type, got {str(data)[:100]}")
    kind = data["type"]
    if kind == "Box":
        shape = _shape(data.get("shape"), f"{where}.shape")
        dtype_name = data.get("dtype")
        if dtype_name not in _DTYPES:
            raise InvalidInput(f"{where}.dtype: expected one of {list(_DTYPES)}, got {dtype_name!r}")
        dtype = np.dtype(dtype_name)
        low = _bound_from_json(data.get("low"), shape, dtype, f"{where}.low")
        high = _bound_from_json(data.get("high"), shape, dtype, f"{where}.high")
        try:
            return gym.spaces.Box(low, high, shape, dtype)
        except (ValueError, TypeError, AssertionError) as e:
            raise InvalidInput(f"{where}: not a valid Box ({e})") from None
    if kind == "Discrete":
        return gym.spaces.Discrete(_count(data.get("n"), f"{where}.n"),
                                   start=_count(data.get("start", 0), f"{where}.start", -(2**62)))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(list(_shape(data.get("n"), f"{where}.n")))
    if kind == "MultiDiscrete":
        nvec = data.get("nvec")
        if not isinstance(nvec, list) or not 0 < len(nvec) <= 4096:
            raise InvalidInput(f"{where}.nvec: expected a list of 1..4096 counts, got {str(nvec)[:100]}")
        return gym.spaces.MultiDiscrete([_count(n, f"{where}.nvec") for n in nvec])
    if kind == "Dict" and depth < 4:
        items = data.get("spaces")
        if not isinstance(items, list) or not 0 < len(items) <= 1024 or not all(
                isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in items):
            raise InvalidInput(f"{where}.spaces: expected a list of 1..1024 [key, space] pairs")
        if len({key for key, _ in items}) != len(items):
            raise InvalidInput(f"{where}.spaces: a key is given twice")
        return gym.spaces.Dict([(key, space_from_json(sub, f"{where}.{key}", depth + 1)) for key, sub in items])
    raise InvalidInput(f"{where}.type: expected Box, Discrete, MultiBinary, MultiDiscrete or Dict (nested at most "
                       f"4 deep), got {kind!r}")


# ----------------------------------------------------------------------------------- keyword arguments as JSON


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import_class(name: str, allowed: tuple[str, ...], where: str) -> type:
    """The class ``name`` (``module.QualName``) if ``allowed`` lists it; nothing else is imported."""
    if name not in allowed:
        raise InvalidInput(f"{where}: class {name!r} is not one the weights-only form may name; allowed: "
                           f"{', '.join(allowed)}")
    module, attr = name.rsplit(".", 1)
    cls = getattr(rl_module(module), attr, None)
    if not isinstance(cls, type):
        raise InvalidInput(f"{where}: {name} is not a class in this installation")
    return cls


def kwargs_to_json(value: Any, where: str) -> Any:
    """Policy keyword arguments as JSON: plain data as is, allowed classes as ``{"$class": name}``.

    :raises InvalidInput: for a class not in :data:`ALLOWED_CLASSES`, or a value that is not plain data.
    """
    if isinstance(value, type):
        name = _class_name(value)
        if name not in ALLOWED_CLASSES:
            raise InvalidInput(f"{where}: class {name} cannot be named in the weights-only form; allowed: "
                               f"{', '.join(ALLOWED_CLASSES)}")
        return {_CLASS_KEY: name}
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise InvalidInput(f"{where}: keys must be strings")
        return {k: kwargs_to_json(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [kwargs_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise InvalidInput(f"{where}: {type(value).__name__} {str(value)[:60]} is not plain data; the weights-only "
                       "form records numbers, strings, lists, mappings and allowed classes")


def kwargs_from_json(value: Any, where: str, depth: int = 0) -> Any:
    """The keyword arguments :func:`kwargs_to_json` recorded (classes imported from :data:`ALLOWED_CLASSES`).

    :raises InvalidInput: for a class not allowed, or nesting deeper than 16.
    """
    if depth > 16:
        raise InvalidInput(f"{where}: nested deeper than 16")
    if isinstance(value, dict):
        if set(value) == {_CLASS_KEY} and isinstance(value[_CLASS_KEY], str):
            return _import_class(value[_CLASS_KEY], ALLOWED_CLASSES, where)
        return {k: kwargs_from_json(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [kwargs_from_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return value


# -------------------------------------------------------------------------------------------- writing


def _normalization_record(vec_normalize: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """VecNormalize's settings and counts as JSON; its observation statistics go into ``arrays``."""
    if vec_normalize is None:
        return None
    record: dict[str, Any] = {
        "norm_obs": bool(vec_normalize.norm_obs), "norm_reward": bool(vec_normalize.norm_reward),
        "clip_obs": float(vec_normalize.clip_obs), "clip_reward": float(vec_normalize.clip_reward),
        "gamma": float(vec_normalize.gamma), "epsilon": float(vec_normalize.epsilon),
        "norm_obs_keys": None if vec_normalize.norm_obs_keys is None else list(vec_normalize.norm_obs_keys),
        "ret_rms": {"mean": float(vec_normalize.ret_rms.mean), "var": float(vec_normalize.ret_rms.var),
                    "count": float(vec_normalize.ret_rms.count)},
        "obs_count": None,
    }
    if vec_normalize.norm_obs:
        stats = vec_normalize.obs_rms
        if isinstance(stats, dict):
            record["obs_count"] = {key: float(rms.count) for key, rms in stats.items()}
            for key, rms in stats.items():
                arrays[f"obs_rms/{key}/mean"], arrays[f"obs_rms/{key}/var"] = rms.mean, rms.var
        else:
            record["obs_count"] = float(stats.count)
            arrays["obs_rms/mean"], arrays["obs_rms/var"] = stats.mean, stats.var
    return record


def check_recordable(policy: Any, policy_kwargs: Mapping[str, Any] | None) -> None:
    """Check that :func:`write_policy_files` can record this policy (its class and keyword arguments as data).

    :raises InvalidInput: naming the class or keyword argument that cannot be recorded.
    """
    policy_class = _class_name(type(policy))
    if policy_class not in POLICY_CLASSES:
        raise InvalidInput(f"policy class {policy_class} cannot be named in the weights-only form; allowed: "
                           f"{', '.join(POLICY_CLASSES)}")
    kwargs_to_json(dict(policy_kwargs or {}), "policy_kwargs")


def write_policy_files(stem: Path, *, algo: str, policy: Any, policy_kwargs: Mapping[str, Any] | None,
                       vec_normalize: Any, meta: Mapping[str, Any], num_timesteps: int) -> Path:
    """Write the weights-only form of a policy: ``<stem>.policy.npz``, then ``<stem>.policy.json``, atomically.

    :param stem: the path without suffix, e.g. ``runs/x/best_model``.
    :param algo: the algorithm (a key of :data:`sfenv.agents.learned.ALGOS`).
    :param policy: the SB3 policy network (``model.policy``).
    :param policy_kwargs: the algorithm's ``policy_kwargs`` (what SB3's ``load`` builds the policy with).
    :param vec_normalize: the training VecNormalize, or None.
    :param meta: the training sidecar (JSON data).
    :return: the spec's path.
    :raises InvalidInput: if the policy class or a keyword argument cannot be recorded as data.
    :raises OSError: if a file cannot be written (then neither is left, nor a temporary).
    """
    import sfenv
    from sfenv.runs.protocol import ENV_VERSION

    check_recordable(policy, policy_kwargs)
    arrays = {f"policy/{name}": tensor.detach().cpu().numpy() for name, tensor in policy.state_dict().items()}
    spec: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "sfenv_version": sfenv.__version__,
        "env_version": ENV_VERSION, "sb3_version": getattr(rl_module("stable_baselines3"), "__version__", None),
        "algo": algo, "policy_class": _class_name(type(policy)),
        "policy_kwargs": kwargs_to_json(dict(policy_kwargs or {}), "policy_kwargs"),
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
        "normalization": _normalization_record(vec_normalize, arrays),
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # stored (uncompressed) .npy members
    weights = stem.with_name(stem.name + WEIGHTS_SUFFIX)
    with atomic_path(weights) as tmp:
        tmp.write_bytes(buffer.getvalue())
    spec.update(weights=weights.name, weights_sha256=hashlib.sha256(buffer.getvalue()).hexdigest(),
                num_timesteps=int(num_timesteps), meta=json.loads(json.dumps(dict(meta))))
    spec_path = stem.with_name(stem.name + SPEC_SUFFIX)
    try:
        atomic_write_text(spec_path, json.dumps(spec, indent=1, allow_nan=False))
    except BaseException:
        weights.unlink(missing_ok=True)  # no weights without their spec
        raise
    return spec_path


# -------------------------------------------------------------------------------------------- reading


def _read_arrays(path: Path, data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed ``.npz`` archive, read without :func:`numpy.load` (so without pickle).

    :raises InvalidInput: for a damaged archive, compressed members, names not ending in ``.npy``,
        object or structured dtypes, or a member whose bytes do not match its header.
    """
    where = f"{path}: the weights file"
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        raise InvalidInput(f"{where} is not an .npz archive ({e})") from None
    if len(members) > MAX_ARRAYS:
        raise InvalidInput(f"{where} holds {len(members):,} members; at most {MAX_ARRAYS:,}")
    arrays: dict[str, np.ndarray] = {}
    for member in members:
        name = member.filename
        if member.compress_type != zipfile.ZIP_STORED or not name.endswith(".npy") or name[:-4] in arrays:
            raise InvalidInput(f"{where}: member {name!r} is compressed, not an .npy array, or given twice")
        arrays[name[:-4]] = _read_npy(archive, member, f"{where}: array {name[:-4]!r}")
    return arrays


def _read_npy(archive: zipfile.ZipFile, member: zipfile.ZipInfo, where: str) -> np.ndarray:
    """One ``.npy`` member: its header parsed by NumPy, its bytes taken as a plain numeric array."""
    fmt = np.lib.format
    try:
        with archive.open(member) as f:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if dtype.hasobject or dtype.fields is not None or dtype.name not in _DTYPES or dtype.byteorder == ">":
                raise ValueError(f"dtype {dtype} (expected a little-endian plain number type)")
            size = math.prod(shape) * dtype.itemsize
            if size > member.file_size:
                raise ValueError(f"its header declares {size:,} bytes, the member holds fewer")
            raw = f.read(size + 1)
    except (ValueError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise InvalidInput(f"{where}: not a readable plain array ({e})") from None
    if len(raw) != size:
        raise InvalidInput(f"{where}: {len(raw):,} data bytes, its header declares {size:,}")
    array = np.frombuffer(raw, dtype=dtype)
    return (array.reshape(shape[::-1]).T if fortran else array.reshape(shape)).copy()


def _check_spec(spec: dict[str, Any], path: Path) -> None:
    """Check the spec's format and the JSON types of its fields."""
    if spec.get("format") != FORMAT:
        raise InvalidInput(f"{path}: format {spec.get('format')!r}; expected {FORMAT!r} (a policy spec of sfenv)")
    if spec.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(f"{path}: format_version {spec.get('format_version')!r}; this sfenv reads "
                           f"{FORMAT_VERSION}")
    for field, kind in _SPEC_FIELDS.items():
        value = spec.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            expected = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))
            raise InvalidInput(f"{path}: {field}: expected {expected}, got {str(value)[:100]}")
    env_kwargs = spec["meta"].get("env_kwargs", {})
    if not isinstance(env_kwargs, dict):
        raise InvalidInput(f"{path}: meta.env_kwargs: expected an object, got {str(env_kwargs)[:100]}")
    _check_env_kwargs(env_kwargs, f"{path}: meta.env_kwargs")


def _check_env_kwargs(env_kwargs: dict[str, Any], where: str) -> None:
    """Env settings from a file: keywords of :class:`~sfenv.env.GeoSchedEnv`, plain values only."""
    import inspect

    from sfenv.env import GeoSchedEnv

    allowed = set(inspect.signature(GeoSchedEnv.__init__).parameters) - {"self", "scenario", "render_mode"}
    for key, value in env_kwargs.items():
        if key not in allowed:
            raise InvalidInput(f"{where}.{key}: not a setting of GeoSchedEnv; expected some of {sorted(allowed)}")
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise InvalidInput(f"{where}.{key}: expected a number, a string or null, got {str(value)[:100]}")


def _vec_normalize(record: dict[str, Any], arrays: dict[str, np.ndarray], space: gym.Space, where: str) -> Any:
    """An SB3 VecNormalize without an env, as unpickling one gives, from the spec's record and the arrays."""
    vec_env = rl_module("stable_baselines3.common.vec_env")
    rms_cls = rl_module("stable_baselines3.common.running_mean_std").RunningMeanStd
    try:
        floats = {k: float(record[k]) for k in ("clip_obs", "clip_reward", "gamma", "epsilon")}
        flags = {k: record[k] for k in ("norm_obs", "norm_reward")}
        ret = record["ret_rms"]
        ret_rms = rms_cls(shape=())
        ret_rms.mean, ret_rms.var, ret_rms.count = np.float64(ret["mean"]), np.float64(ret["var"]), float(ret["count"])
    except (KeyError, TypeError, ValueError):
        raise InvalidInput(f"{where}: expected norm_obs, norm_reward, clip_obs, clip_reward, gamma, epsilon and "
                           "ret_rms {mean, var, count}") from None
    if not all(isinstance(v, bool) for v in flags.values()):
        raise InvalidInput(f"{where}: norm_obs and norm_reward must be true or false")
    keys = record.get("norm_obs_keys")
    state: dict[str, Any] = {**floats, **flags, "ret_rms": ret_rms, "observation_space": space, "training": False,
                             "norm_obs_keys": keys, "num_envs": 1, "render_mode": None, "old_reward": np.array([])}
    if flags["norm_obs"]:
        state["obs_rms"] = _obs_statistics(record.get("obs_count"), keys, arrays, space, where)
        if isinstance(space, gym.spaces.Dict):
            state["obs_spaces"] = space.spaces
    vec_normalize = vec_env.VecNormalize.__new__(vec_env.VecNormalize)
    vec_normalize.__setstate__(state)
    return vec_normalize


def _obs_statistics(counts: Any, keys: Any, arrays: dict[str, np.ndarray], space: gym.Space, where: str) -> Any:
    """The observation RunningMeanStd (one per normalised key of a Dict space) from the weights file."""
    rms_cls = rl_module("stable_baselines3.common.running_mean_std").RunningMeanStd

    def one(prefix: str, count: Any, sub: gym.Space) -> Any:
        mean, var = arrays.get(f"{prefix}mean"), arrays.get(f"{prefix}var")
        if mean is None or var is None or isinstance(count, bool) or not isinstance(count, (int, float)):
            raise InvalidInput(f"{where}: the observation statistics {prefix}mean/var (or their count) are missing")
        if mean.shape != sub.shape or var.shape != sub.shape or mean.dtype != np.float64 or var.dtype != np.float64:
            raise InvalidInput(f"{where}: the statistics {prefix}mean/var must be float64 of shape {sub.shape}")
        rms = rms_cls(shape=sub.shape)
        rms.mean, rms.var, rms.count = mean, var, float(count)
        return rms

    if isinstance(space, gym.spaces.Dict):
        if not isinstance(keys, list) or not isinstance(counts, dict) or set(keys) != set(counts) or not set(
                keys) <= set(space.spaces):
            raise InvalidInput(f"{where}: norm_obs_keys and obs_count must name the same keys of the observation")
        return {key: one(f"obs_rms/{key}/", counts[key], space.spaces[key]) for key in keys}
    if not isinstance(space, gym.spaces.Box) or keys is not None:
        raise InvalidInput(f"{where}: observation statistics need a Box or Dict observation space")
    return one("obs_rms/", counts, space)


class WeightsOnlyModel:
    """What the evaluator plays of an SB3 algorithm, rebuilt from data: its policy, spaces and step count.

    :meth:`predict` is the algorithm's ``predict`` (SB3 passes it on to the policy; MaskablePPO with
    the action masks).  DQN's exploration (``deterministic=False``) is not reproduced: the policy
    plays its greedy action.

    :param policy: the policy network with its weights loaded.
    :param masked: whether the policy takes action masks (MaskablePPO).
    :param num_timesteps: training steps when it was saved.
    """

    def __init__(self, policy: Any, masked: bool, num_timesteps: int):
        self.policy = policy
        self.observation_space = policy.observation_space
        self.action_space = policy.action_space
        self.masked = masked
        self.num_timesteps = num_timesteps

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, Any]:
        """The policy's action for ``observation`` (and the recurrent state, None here)."""
        if self.masked:
            return self.policy.predict(observation, state, episode_start, deterministic, action_masks=action_masks)
        return self.policy.predict(observation, state, episode_start, deterministic)


@dataclass
class WeightsOnlyPolicy:
    """A policy read by :func:`read_policy_files`: the spec, the model, its VecNormalize and the training sidecar."""

    spec: dict[str, Any]
    model: WeightsOnlyModel
    vec_normalize: Any
    meta: dict[str, Any]


def _width_lists(kwargs: dict[str, Any], where: str) -> dict[str, list[Any]]:
    """The layer-size lists of a spec's policy keyword arguments, by field (``net_arch.pi``, ``value_arch`` ...)."""
    lists: dict[str, list[Any]] = {}
    net_arch = kwargs.get("net_arch")
    if isinstance(net_arch, dict):
        for key, value in net_arch.items():
            if not isinstance(value, list):
                raise InvalidInput(f"{where}.net_arch.{key}: expected a list of layer sizes, got {str(value)[:60]}")
            lists[f"net_arch.{key}"] = value
    elif isinstance(net_arch, list):
        lists["net_arch"] = net_arch
    elif net_arch is not None:
        raise InvalidInput(f"{where}.net_arch: expected a list of layer sizes or an object of them, "
                           f"got {str(net_arch)[:60]}")
    if kwargs.get("value_arch") is not None:
        value_arch = kwargs["value_arch"]
        if not isinstance(value_arch, list):
            raise InvalidInput(f"{where}.value_arch: expected a list of layer sizes, got {str(value_arch)[:60]}")
        lists["value_arch"] = value_arch
    extractor = kwargs.get("features_extractor_kwargs")
    for field, value in (("embed_dim", kwargs.get("embed_dim")), ("features_extractor_kwargs.embed_dim",
                         extractor.get("embed_dim") if isinstance(extractor, dict) else None)):
        if value is not None:
            lists[field] = [value, value]  # an attention block holds at least embed_dim x embed_dim weights
    return lists


def _flat_features(space: gym.Space) -> int:
    """The width the default features extractor gives ``space``: flattened, each image of a Dict counted as 1."""
    if not isinstance(space, gym.spaces.Dict):
        return int(gym.spaces.flatdim(space))
    is_image = rl_module("stable_baselines3.common.preprocessing").is_image_space
    return sum(1 if is_image(sub) else int(gym.spaces.flatdim(sub)) for sub in space.spaces.values())


def _check_layer_sizes(kwargs: dict[str, Any], arrays: dict[str, np.ndarray], observation_space: gym.Space,
                       path: Path) -> None:
    """Refuse layer sizes the weights file cannot hold, before the policy is built (its memory is allocated).

    Necessary for a spec written by :func:`write_policy_files`, so they never refuse one: every size is
    a positive integer and a dimension of some ``policy/`` array; there are no more layers than arrays;
    and the weights of consecutive layers (the first fed the flattened observation, unless a
    features extractor is named) fit in the elements the weights file holds.

    :raises InvalidInput: naming the file and the field.
    """
    where = f"{path}: policy_kwargs"
    weights = [a for name, a in arrays.items() if name.startswith("policy/")]
    dims = {d for a in weights for d in a.shape}
    held = sum(int(a.size) for a in weights)
    lists = _width_lists(kwargs, where)
    if sum(len(sizes) for sizes in lists.values()) > len(weights):
        raise InvalidInput(f"{where}: {sum(len(s) for s in lists.values()):,} layers; the weights file holds "
                           f"{len(weights):,} policy arrays (the weights do not fit the policy)")
    flat = _flat_features(observation_space) if "features_extractor_class" not in kwargs else 1
    for field, sizes in lists.items():
        for i, size in enumerate(sizes):
            if isinstance(size, bool) or not isinstance(size, int) or size < 1 or size not in dims:
                raise InvalidInput(f"{where}.{field}[{i}]: {str(size)[:30]} is not a size of any policy array in "
                                   f"the weights file (the weights do not fit the policy)")
        first = flat if field.startswith("net_arch") else 1
        needed = sum(a * b for a, b in zip([first, *sizes], sizes))
        if needed > held:
            raise InvalidInput(f"{where}.{field}: layers of {needed:,} weights; the weights file holds {held:,} "
                               "policy parameters (the weights do not fit the policy)")


def _build_policy(spec: dict[str, Any], path: Path, observation_space: gym.Space, action_space: gym.Space) -> Any:
    """The policy network the spec names, built as SB3's ``load`` builds it (weights not loaded yet)."""
    cls = _import_class(spec["policy_class"], POLICY_CLASSES, f"{path}: policy_class")
    kwargs = kwargs_from_json(spec["policy_kwargs"], f"{path}: policy_kwargs")
    try:
        policy = cls(observation_space, action_space, lambda _: 0.0, **kwargs)
    except (TypeError, ValueError, KeyError, AssertionError, RuntimeError) as e:
        raise InvalidInput(f"{path}: policy_class and policy_kwargs do not build a policy "
                           f"({type(e).__name__}: {str(e)[:200]})") from None
    return policy.to("cpu")


def _load_weights(policy: Any, arrays: dict[str, np.ndarray], path: Path) -> None:
    """Copy ``policy/<name>`` arrays into the policy; names, shapes and dtypes must match exactly."""
    torch = rl_module("torch")
    expected = policy.state_dict()
    given = {name[len("policy/"):]: a for name, a in arrays.items() if name.startswith("policy/")}
    missing, extra = sorted(set(expected) - set(given)), sorted(set(given) - set(expected))
    if missing or extra:
        raise InvalidInput(f"{path}: the weights do not fit the policy the spec describes (missing {missing[:5]}, "
                           f"unexpected {extra[:5]})")
    for name, tensor in expected.items():
        array = given[name]
        want = torch.empty(0, dtype=tensor.dtype).numpy().dtype
        if tuple(array.shape) != tuple(tensor.shape) or array.dtype != want:
            raise InvalidInput(f"{path}: weight {name} is {array.dtype}{list(array.shape)}, the policy needs "
                               f"{want}{list(tensor.shape)}")
    policy.load_state_dict({name: torch.from_numpy(a) for name, a in given.items()}, strict=True)
    policy.set_training_mode(False)


def read_policy_files(spec_path: Path, algos: Mapping[str, Any]) -> WeightsOnlyPolicy:
    """Load the weights-only form whose spec is ``spec_path``; no code from either file runs.

    Checks, in order: the spec is a regular file of at most :data:`MAX_SPEC_BYTES` holding a JSON
    object with every field of the format; the weights file it names is inside the spec's folder
    (symlinks resolved), a regular file of at most :data:`MAX_WEIGHTS_BYTES`, with the SHA-256 the
    spec records; the policy class and every class in its keyword arguments are on the allow-lists;
    the arrays fit the policy exactly.

    :param algos: the algorithms a spec may name, each with ``masked`` (:data:`sfenv.agents.learned.ALGOS`).
    :raises MissingFile: for a missing spec or weights file.
    :raises InvalidInput: naming the file and field, for anything else.
    """
    spec = read_json_file(spec_path, MAX_SPEC_BYTES, "policy spec")
    _check_spec(spec, spec_path)
    if spec["algo"] not in algos:
        raise InvalidInput(f"{spec_path}: algo {spec['algo']!r}; expected one of {sorted(algos)}")
    weights_path = file_inside(spec_path.parent, spec["weights"], f"{spec_path}: weights")
    data = read_regular_file(weights_path, MAX_WEIGHTS_BYTES, "policy weights")
    if hashlib.sha256(data).hexdigest() != spec["weights_sha256"]:
        raise InvalidInput(f"{spec_path}: {weights_path.name} does not have the SHA-256 the spec records "
                           "(weights_sha256); the two files are not a pair")
    arrays = _read_arrays(weights_path, data)
    observation_space = space_from_json(spec["observation_space"], f"{spec_path}: observation_space")
    action_space = space_from_json(spec["action_space"], f"{spec_path}: action_space")
    if not isinstance(action_space, gym.spaces.Discrete):
        raise InvalidInput(f"{spec_path}: action_space: expected Discrete (the env's), got {action_space}")
    _check_layer_sizes(spec["policy_kwargs"], arrays, observation_space, spec_path)
    policy = _build_policy(spec, spec_path, observation_space, action_space)
    _load_weights(policy, arrays, spec_path)
    record = spec["normalization"]
    vec_normalize = None if record is None else _vec_normalize(record, arrays, observation_space,
                                                               f"{spec_path}: normalization")
    model = WeightsOnlyModel(policy, bool(algos[spec["algo"]].masked), spec["num_timesteps"])
    return WeightsOnlyPolicy(spec, model, vec_normalize, spec["meta"])


def refuse_code(path: Path, what: str) -> UntrustedCode:
    """The error that refuses to load ``path`` because loading it runs code (``what`` says why)."""
    return UntrustedCode(f"{path}: refused: {what}, which can run any program; {TRUST_HINT.format(path=path)}")
