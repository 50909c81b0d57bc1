"""Checked reading of the CSV files a scenario names (price series, job traces).

Every problem is an :class:`sfenv.errors.InvalidInput` (a ``ValueError``) naming the file and,
where there is one, the line and column: a missing file, one that is not a regular file or is too
large (:mod:`sfenv.world.files`), an empty file, a header without the columns needed, a file
without data rows, a row with more cells than the header, a cell that is missing, not a number,
not finite or out of its bounds.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

from sfenv.errors import InvalidInput
from sfenv.world.files import capped_lines, open_text

__all__ = ["csv_count", "csv_number", "csv_rows"]


def csv_rows(path: str | Path, needed: list[str], what: str) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line number, row)`` for each data row of a CSV with a header, after checking the header.

    The file is read within the bounds of :mod:`sfenv.world.files` (a regular file, at most
    :data:`~sfenv.world.files.MAX_CSV_BYTES` bytes and :data:`~sfenv.world.files.MAX_LINE_CHARS`
    characters per line, UTF-8 with or without a BOM).

    :param path: the file.
    :param needed: columns that must be in the header.
    :param what: what the file holds, for messages (e.g. ``"price CSV"``).
    :return: an iterator of (1-based line number in the file, row as a dict).
    :raises InvalidInput: if the file is missing, not a regular file, too large or unreadable,
        empty, lacks a column in ``needed``, has a row longer than the header or has no data row.
    """
    with open_text(path, what) as fh:
        reader = csv.DictReader(capped_lines(fh, path, what))
        try:
            fields = reader.fieldnames
        except (csv.Error, UnicodeDecodeError) as e:
            raise InvalidInput(f"{path}, line 1: not a readable {what} ({e})") from None
        if not fields:
            raise InvalidInput(f"{path}: the {what} is empty; expected a header line and one row per entry")
        missing = [c for c in needed if c not in fields]
        if missing:
            raise InvalidInput(f"{path}, line 1: the {what} has no column {', '.join(map(repr, missing))}; "
                               f"found {list(fields)}")
        count = 0
        try:
            for row in reader:
                count += 1
                extra = row.get(None)  # DictReader's key for the cells past the header
                if extra:
                    raise InvalidInput(f"{path}, line {reader.line_num}: {len(fields) + len(extra)} cells, but the "
                                       f"header has {len(fields)} columns")
                yield reader.line_num, row
        except (csv.Error, UnicodeDecodeError) as e:
            raise InvalidInput(f"{path}, line {reader.line_num + 1}: not a readable {what} ({e})") from None
        if count == 0:
            raise InvalidInput(f"{path}: the {what} has a header but no data rows")


def csv_number(path: str | Path, line: int, column: str, text: str | None, low: float | None = None,
               high: float | None = None) -> float:
    """A CSV cell as a finite float (``>= low`` and ``<= high`` when given).

    :param path: the file, for the message.
    :param line: the cell's line number, for the message.
    :param column: the cell's column, for the message.
    :param text: the cell (None when the row is short).
    :param low: the smallest value allowed, or None.
    :param high: the largest value allowed, or None.
    :return: the value.
    :raises InvalidInput: naming file, line and column when the cell is missing, not a finite number,
        too small or too large.
    """
    where = f"{path}, line {line}, column {column!r}"
    if text is None or not text.strip():
        raise InvalidInput(f"{where}: empty cell; expected a number")
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise InvalidInput(f"{where}: {text!r} is not a finite number")
    if low is not None and value < low:
        raise InvalidInput(f"{where}: {value:g} is below {low:g}")
    if high is not None and value > high:
        raise InvalidInput(f"{where}: {value:g} is above {high:g}")
    return value


def csv_count(path: str | Path, line: int, column: str, text: str | None, low: int, high: int) -> int:
    """A CSV cell as a whole number in ``[low, high]`` (``8`` and ``8.0`` are read; ``1.7`` is refused).

    :raises InvalidInput: naming file, line and column when the cell is not such a number.
    """
    value = csv_number(path, line, column, text, low, high)
    if value != int(value):
        raise InvalidInput(f"{path}, line {line}, column {column!r}: {text!r} is not a whole number")
    return int(value)
