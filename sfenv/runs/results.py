"""Result files that say what they hold: the settings that define them, checked before anything is added.

A results file written by :func:`sfenv.app.evaluate.evaluate_agents` (``sfenv evaluate --out``,
and ``episodes.json`` in a ``sfenv benchmark`` folder) is a JSON object::

    {"format": "sfenv-results/1",
     "settings": {"sfenv_version": ..., "scenario": ..., "scenario_sha": ..., "num_jobs": ...,
                  "agents": {name: {...its settings...}}},
     "episodes": [one row per (agent, seed)]}

The settings are what make two episodes comparable: the package version, the scenario (its name and
a hash of its whole validated configuration, so an edited YAML file under the same name is caught),
the workload size, and each agent's settings (constructor keywords; a saved model's file hash).
Seeds and agents may be added to a file (more episodes of the same settings); everything else must
match.  :func:`differences` names what does not, so a caller can refuse (``--resume``) or write
beside the file under a new name (:func:`pick_output`); nothing is ever replaced unless asked
(``overwrite``).  Files of earlier versions (a bare list of rows) record no settings and are never
continued.

Every file is written atomically (:func:`atomic_path`: a temporary file beside it, then ``os.replace``),
so a crash or Ctrl-C mid-write leaves the old file whole and no temporary behind.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sfenv.errors import InvalidInput

__all__ = [
    "FORMAT",
    "SettingsMismatch",
    "atomic_path",
    "atomic_write_json",
    "atomic_write_text",
    "differences",
    "file_hash",
    "make_settings",
    "merge_settings",
    "pick_output",
    "read_results",
    "results_document",
    "scenario_hash",
]

#: the ``format`` tag of a results file
FORMAT = "sfenv-results/1"
#: settings that must be equal for two runs to share a file (agents are compared one by one)
FIXED_KEYS = ("sfenv_version", "scenario", "scenario_sha", "num_jobs")
#: settings a file may gain more of (agents and seeds); every other key must be equal
ADDABLE_KEYS = ("agents", "seeds")


class SettingsMismatch(InvalidInput):
    """An existing results file (or folder) holds results of other settings; :attr:`diffs` names each one.

    :param path: the file or folder.
    :param diffs: one line per setting that differs.
    """

    def __init__(self, path: Path, diffs: list[str]):
        self.path = Path(path)
        self.diffs = list(diffs)
        super().__init__(f"{path} holds results of other settings ({'; '.join(diffs)}); "
                         "choose another output, or --overwrite to replace it")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; it replaces ``path`` when the block ends without an error.

    The temporary is ``.<name>.tmp`` in the same folder (created if missing), so the rename is atomic; on
    any exception (Ctrl-C or a full disk mid-write included) it is removed and ``path`` is left as it was.

    :param path: the file to write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_path`), so a crash never leaves half a file.

    :param path: the file to write.
    :param text: its whole content.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON (indent 1, NaN allowed) to ``path`` atomically (:func:`atomic_write_text`).

    :param path: the file to write.
    :param data: anything :func:`json.dumps` takes.
    """
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=True))


def scenario_hash(scenario: Any) -> str:
    """The first 16 hex digits of the SHA-256 of a scenario's validated configuration (JSON)."""
    return hashlib.sha256(scenario.cfg.model_dump_json().encode()).hexdigest()[:16]


def file_hash(path: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of a file's bytes (a saved model's identity)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def make_settings(scenario: Any, agents: Mapping[str, Mapping[str, Any]], **extra: Any) -> dict[str, Any]:
    """The settings record of a run of ``agents`` (name -> settings) on ``scenario`` (a loaded Scenario).

    :param extra: further settings that define the run (e.g. the seed split), compared like the fixed ones.
    """
    from sfenv import __version__

    return {"sfenv_version": __version__, "scenario": scenario.name, "scenario_sha": scenario_hash(scenario),
            "num_jobs": int(scenario.cfg.workload.num_jobs), **extra,
            "agents": {name: dict(value) for name, value in agents.items()}}


def results_document(settings: Mapping[str, Any], episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON object a results file holds."""
    return {"format": FORMAT, "settings": dict(settings), "episodes": episodes}


def read_results(path: str | Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Read a results file: its settings (None for a file of an earlier version) and its episode rows.

    :raises InvalidInput: (a ``ValueError``) naming the file if it is not JSON, or not a results file.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInput(f"{path}: not a JSON results file ({e}); "
                           "pass --overwrite to replace it, or choose another output") from None
    if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("settings"), dict) \
            and _rows_ok(data.get("episodes")):
        return data["settings"], data["episodes"]
    if _rows_ok(data):
        return None, data
    raise InvalidInput(f"{path}: not a results file of sfenv (expected {{'format': {FORMAT!r}, 'settings', "
                       "'episodes'}); pass --overwrite to replace it, or choose another output")


def _rows_ok(rows: Any) -> bool:
    return isinstance(rows, list) and all(isinstance(r, dict) and {"agent", "scenario", "seed"} <= set(r)
                                          for r in rows)


def differences(saved: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[str]:
    """What differs between a file's settings and a run's, one line each (empty: the run may continue it).

    Agents present in both must have equal settings; agents new to the file are allowed (their
    episodes are comparable: same scenario, workload and seeds).
    """
    if saved is None:
        return ["the file records no settings (an earlier sfenv wrote it)"]
    out = []
    keys = [k for k in dict.fromkeys([*FIXED_KEYS, *saved, *now]) if k not in ADDABLE_KEYS]
    for key in keys:
        if saved.get(key) != now.get(key):
            out.append(f"{key}: {saved.get(key)!r} in the file, {now.get(key)!r} now")
    old_agents, new_agents = saved.get("agents") or {}, now.get("agents") or {}
    for name in sorted(set(old_agents) & set(new_agents)):
        if old_agents[name] != new_agents[name]:
            out.append(f"agent {name}: {old_agents[name]!r} in the file, {new_agents[name]!r} now")
    return out


def merge_settings(saved: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    """``saved`` with the agents and seeds of ``now`` added (call only when :func:`differences` is empty)."""
    merged = {**saved, "agents": {**(saved.get("agents") or {}), **(now.get("agents") or {})}}
    if "seeds" in saved or "seeds" in now:
        merged["seeds"] = sorted({*saved.get("seeds", []), *now.get("seeds", [])})
    return merged


def sibling(path: Path, n: int) -> Path:
    """The ``n``-th name beside ``path``: ``res-2.json`` for ``res.json``, ``spider-8-2`` for a folder."""
    return path.with_name(f"{path.stem}-{n}{path.suffix}") if path.suffix else path.with_name(f"{path.name}-{n}")


def pick_output(path: Path, matches: Callable[[Path], bool]) -> Path:
    """``path`` if it is free or ``matches`` it, else the first free or matching name beside it.

    Running the same command twice therefore finds its own earlier results again, and a run with
    other settings never touches them.
    """
    for n in range(1, 10_000):
        candidate = path if n == 1 else sibling(path, n)
        if not candidate.exists() or matches(candidate):
            return candidate
    raise InvalidInput(f"{path}: no free name beside it (tried {sibling(path, 2).name} .. {sibling(path, 9999).name})")
