"""Reading back the JSON episode rows an experiment wrote (for ``--resume`` or ``--rows``), every failure one line.

An experiment's rows file is a JSON list of objects, one per episode.  :func:`read_rows` reads it
within :data:`MAX_ROWS_BYTES` (:func:`sfenv.world.files.read_json`: a FIFO, a device, deep nesting,
huge integers and bad JSON are one :class:`~sfenv.errors.InvalidInput` naming the file) and checks
that every row holds the fields the experiment goes on to read, with the right JSON types, so that
a list of numbers, an ``{}``, a ``sfenv evaluate`` results file or a hand-edited row is refused
before any work starts instead of failing with a traceback later.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sfenv.errors import InvalidInput
from sfenv.runs.results import MAX_RESULTS_BYTES
from sfenv.world.files import read_json

__all__ = ["INT", "LIST", "MAX_ROWS_BYTES", "NUMBER", "TEXT", "read_rows"]

#: the most bytes read from a rows file (that of ``sfenv evaluate``'s results files)
MAX_ROWS_BYTES = MAX_RESULTS_BYTES
#: field kinds: an integer (not a boolean), a number (not a boolean; NaN allowed), a string, a list
INT, NUMBER, TEXT, LIST = "an integer", "a number", "a string", "a list"


def _is(value: Any, kind: str) -> bool:
    if kind == TEXT:
        return isinstance(value, str)
    if kind == LIST:
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind == INT else isinstance(value, (int, float))


def _json_kind(value: Any) -> str:
    kinds = ((bool, "a boolean"), (dict, "a JSON object"), (list, "a JSON list"), (str, "a string"),
             ((int, float), "a number"))
    return next((name for cls, name in kinds if isinstance(value, cls)), "null")


def read_rows(path: str | Path, what: str, fields: Mapping[str, str], allow_empty: bool = True) -> list[dict[str, Any]]:
    """The rows of a JSON rows file, each checked to hold ``fields`` (name -> :data:`INT`, :data:`NUMBER`, ...).

    :param path: the file.
    :param what: what it holds, for messages (e.g. ``"episode rows file"``).
    :param fields: the fields every row must have and their kinds; other fields are left alone.
    :param allow_empty: accept an empty list.
    :raises InvalidInput: one line naming the file (and the row and field, for a bad row).
    """
    rows = read_json(path, what, MAX_ROWS_BYTES)
    if not isinstance(rows, list):
        raise InvalidInput(f"{path}: expected a {what}: a JSON list of episode rows, got {_json_kind(rows)}")
    if not rows and not allow_empty:
        raise InvalidInput(f"{path}: the {what} holds no episode rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InvalidInput(f"{path}: row {i + 1}: expected a JSON object of an episode, got {_json_kind(row)}")
        for name, kind in fields.items():
            if name not in row:
                raise InvalidInput(f"{path}: row {i + 1}: no {name!r}; not a {what}")
            if not _is(row[name], kind):
                raise InvalidInput(f"{path}: row {i + 1}: {name} {row[name]!r:.40}: expected {kind}")
    return rows
