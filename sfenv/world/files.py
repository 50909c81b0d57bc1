"""Bounded reading of the files a user names: scenario YAML, training configs, price and trace CSVs.

A file named in a scenario or on the command line may be anything: a device that never ends
(``/dev/zero``), a FIFO that blocks, a directory, a file of gigabytes, or a small YAML file whose
aliases expand to gigabytes.  Every reader of sfenv goes through this module, which

- opens **regular files only** (without blocking: a FIFO is refused, not waited on) and names the
  kind of anything else;
- reads at most a **byte cap** (:data:`MAX_YAML_BYTES` for YAML, :data:`MAX_CSV_BYTES` for CSV) and
  at most :data:`MAX_LINE_CHARS` characters per CSV line;
- decodes **UTF-8** strictly (a binary file is an error naming the byte offset);
- parses YAML with PyYAML's safe constructor but **refuses aliases** (``*name``: they are how a
  1 KB file expands to gigabytes) and duplicate keys, and **nesting deeper than**
  :data:`MAX_YAML_DEPTH` (PyYAML's composer recurses once per level), before anything is built.

Every problem is an :class:`sfenv.errors.InvalidInput` (a ``ValueError``) on one line, naming the
file and what was expected; callers add the field that named the file.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

from sfenv.errors import InvalidInput

__all__ = [
    "MAX_CSV_BYTES",
    "MAX_LINE_CHARS",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "capped_lines",
    "dump_yaml",
    "load_yaml",
    "names_a_file",
    "open_text",
    "parse_json",
    "read_json",
    "read_text",
    "read_yaml",
]

#: Largest YAML file read (1 MiB).  The largest bundled scenario is 7 KB; an explicit 1,024-region
#: topology with three links per region and a daily price profile per zone is about 0.5 MB.
#: PyYAML builds about 0.5 MB/s of Python objects on a loaded machine (with libyaml's parser), so the
#: cap also bounds the time a load takes to a few seconds.
MAX_YAML_BYTES = 1 << 20
#: Largest CSV file read (1 GiB): ten years of hourly prices for 1,024 zones is about 0.9 GB; the
#: Philly trace week is 0.5 MB.  Rows are read one at a time, so memory grows with what is kept, not
#: with the file.
MAX_CSV_BYTES = 1 << 30
#: Longest CSV line (1 Mi characters): a price row of 1,024 zones is about 10 KB.  A file without
#: line breaks would otherwise be read into memory whole.
MAX_LINE_CHARS = 1 << 20
#: Deepest YAML nesting (64 levels).  A scenario nests 5 levels; PyYAML's composer recurses twice
#: per level, and 20,000 levels of ``[[[...`` overflowed Python's stack (a RecursionError).
MAX_YAML_DEPTH = 64

#: Suffixes that make an argument name a YAML file even without a path separator (see :func:`names_a_file`).
YAML_SUFFIXES = (".yaml", ".yml")


def names_a_file(argument: str, suffixes: tuple[str, ...] = YAML_SUFFIXES) -> bool:
    """Whether an argument that is a bundled name or a file names the file.

    It does when it holds a path separator (``./spider-16``, ``results/my.yaml``) or ends in one of
    ``suffixes`` (any case: ``my.yaml``, ``MY.YML``).  Any other argument is a bundled name, whatever
    the current folder holds: a file or a folder that happens to share a bundled name never shadows
    it (``./NAME`` reads the file).

    :param argument: what the user gave.
    :param suffixes: the suffixes of the files meant (YAML by default).
    """
    separators = {"/", os.sep, *([os.altsep] if os.altsep else [])}
    return any(sep in argument for sep in separators) or argument.casefold().endswith(suffixes)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a non-regular file is, in words (``"a directory"``, ``"a character device"``...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _open_regular(path: str | Path, what: str) -> int:
    """A read-only descriptor of ``path`` after checking that it is a regular file.

    Opened with ``O_NONBLOCK`` (a FIFO then opens at once instead of waiting for a writer) and
    checked with ``fstat`` on the open descriptor, so what is checked is what is read.

    :raises InvalidInput: if it is missing, cannot be opened or is not a regular file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InvalidInput(f"{path}: {_kind(mode)}, not a regular file; expected a {what}")
    return fd


def _too_big(path: str | Path, what: str, max_bytes: int) -> InvalidInput:
    return InvalidInput(f"{path}: larger than {max_bytes:,} bytes, the most a {what} may hold")


def read_text(path: str | Path, what: str, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The text of a regular file of at most ``max_bytes`` bytes, decoded as UTF-8.

    :param path: the file.
    :param what: what it holds, for messages (e.g. ``"scenario file"``).
    :param max_bytes: the most bytes read; a longer file is refused without reading past the cap.
    :raises InvalidInput: naming the file: missing, not a regular file, unreadable, too large, or not UTF-8.
    """
    fd = _open_regular(path, what)
    with os.fdopen(fd, "rb") as fh:
        if os.fstat(fh.fileno()).st_size > max_bytes:
            raise _too_big(path, what, max_bytes)
        data = fh.read(max_bytes + 1)  # the size may be 0 (files in /proc) or grow while read
    if len(data) > max_bytes:
        raise _too_big(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidInput(f"{path}, line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                           f"expected a {what} in UTF-8") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str, source: str | Path, what: str, allow_nan: bool = True, hint: str = "") -> Any:
    """Parse untrusted JSON text; any way it can fail becomes one :class:`InvalidInput` naming ``source``.

    Beyond malformed text (``json.JSONDecodeError``) that covers nesting too deep for Python's stack
    (``[[[...``: a ``RecursionError``), an integer literal longer than Python converts (over 4,300
    digits: a ``ValueError``) and, unless ``allow_nan``, the constants ``NaN`` and ``Infinity``.

    :param text: the JSON text.
    :param source: the file (or other source) it came from, named in the message.
    :param what: what it should hold, for the message (e.g. ``"results file"``).
    :param allow_nan: accept ``NaN``, ``Infinity`` and ``-Infinity`` (results files hold NaN metrics).
    :param hint: appended to the message (e.g. ``"; pass --overwrite to replace it"``).
    :raises InvalidInput: ``SOURCE: not a JSON WHAT (why)HINT``.
    """
    try:
        return json.loads(text) if allow_nan else json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        reason = "nested too deeply"
    except ValueError as e:  # json.JSONDecodeError included; a huge integer literal is a plain ValueError
        reason = str(e)[:200] if "integer string conversion" not in str(e) else \
            f"an integer longer than {sys.get_int_max_str_digits():,} digits"
    raise InvalidInput(f"{source}: not a JSON {what} ({reason}){hint}")


def read_json(path: str | Path, what: str, max_bytes: int, allow_nan: bool = True, hint: str = "") -> Any:
    """:func:`read_text` then :func:`parse_json`: a JSON file read within a size cap, every failure one line.

    :raises InvalidInput: naming the file (see both functions).
    """
    return parse_json(read_text(path, what, max_bytes), path, what, allow_nan=allow_nan, hint=hint)


@contextmanager
def open_text(path: str | Path, what: str, max_bytes: int = MAX_CSV_BYTES) -> Iterator[IO[str]]:
    """A regular file of at most ``max_bytes`` bytes, open for reading as UTF-8 text (a leading BOM skipped).

    Newlines are passed through untranslated (``newline=""``), as the :mod:`csv` module wants.
    Read it with :func:`capped_lines` to bound the length of a line too.

    :raises InvalidInput: naming the file: missing, not a regular file, unreadable or larger than ``max_bytes``.
    """
    fd = _open_regular(path, what)
    with open(fd, encoding="utf-8-sig", newline="") as fh:
        if os.fstat(fd).st_size > max_bytes:
            raise _too_big(path, what, max_bytes)
        yield fh


def capped_lines(fh: IO[str], path: str | Path, what: str, max_chars: int = MAX_LINE_CHARS,
                 max_total: int = MAX_CSV_BYTES) -> Iterator[str]:
    """The lines of ``fh``, each at most ``max_chars`` characters, and at most ``max_total`` in all.

    :raises InvalidInput: naming the file and the line that is too long, or the total reached.
    """
    total = 0
    number = 0
    while True:
        line = fh.readline(max_chars + 1)
        if not line:
            return
        number += 1
        if len(line) > max_chars:
            raise InvalidInput(f"{path}, line {number}: longer than {max_chars:,} characters; expected a {what} "
                               "with one record per line")
        total += len(line)
        if total > max_total:
            raise _too_big(path, what, max_total)
        yield line


# ---------------------------------------------------------------- YAML
class _BoundedComposer(Composer):
    """PyYAML's composer, refusing aliases, duplicate keys and nesting deeper than :data:`MAX_YAML_DEPTH`.

    The checks run on the parser's events, before any node is expanded or any Python object built.
    """

    _depth = 0
    # the parser's methods (the parser is the other base of the loader classes below)
    check_event: Callable[..., bool]
    peek_event: Callable[[], Any]

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """One node, as PyYAML composes it, after the checks (see the class docstring)."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"found the alias *{event.anchor}: aliases are not allowed (they can expand a small "
                "file to gigabytes); write the value out", event.start_mark)
        if self._depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", self.peek_event().start_mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, MappingNode):
            _refuse_duplicate_keys(node)
        return node


def _refuse_duplicate_keys(node: MappingNode) -> None:
    """Refuse a mapping that gives one key twice (PyYAML would keep the last value silently)."""
    seen: set[tuple[str, str]] = set()
    for key, _ in node.value:
        if isinstance(key, ScalarNode):
            ident = (key.tag, key.value)
            if ident in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found the key {key.value!r} twice in one mapping", key.start_mark)
            seen.add(ident)


try:  # libyaml's parser (C) when PyYAML has it: about 5 times faster than the Python one
    from yaml._yaml import CParser

    class _Loader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        """libyaml's parser, the bounded composer, PyYAML's safe constructor and resolver."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            _BoundedComposer.__init__(self)

except ImportError:  # pragma: no cover - PyYAML built without libyaml
    class _Loader(_BoundedComposer, yaml.SafeLoader):  # type: ignore[no-redef]  # the same, all in Python
        """PyYAML's safe loader with the bounded composer."""


class _PyLoader(_BoundedComposer, yaml.SafeLoader):
    """PyYAML's safe loader (all Python) with the bounded composer (used where libyaml is missing, and in tests)."""


def _yaml_problem(e: yaml.YAMLError) -> str:
    """A PyYAML error on one line: ``line L, column C: problem (context)``."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = f" ({e.context})" if e.context and e.problem else ""
        return f"{where}{e.problem or e.context}{context}"
    return " ".join(str(e).split())


def load_yaml(text: str, source: str, loader: type = _Loader) -> Any:
    """Parse one YAML document with the bounds of this module (no aliases, depth at most :data:`MAX_YAML_DEPTH`).

    :param text: the YAML text.
    :param source: where it came from, for messages.
    :param loader: the loader class (tests pass the all-Python one).
    :return: the document as plain Python data (None for an empty one).
    :raises InvalidInput: ``SOURCE: not valid YAML: line L, column C: problem``, on one line.
    """
    try:
        return yaml.load(text, Loader=loader)  # _Loader: SafeConstructor on the C parser, else a SafeLoader subclass
    except yaml.YAMLError as e:
        raise InvalidInput(f"{source}: not valid YAML: {_yaml_problem(e)}") from None


class _NoAliasDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, writing an object met twice out twice (never ``&id001`` / ``*id001``)."""

    def ignore_aliases(self, data: Any) -> bool:
        """Always: :func:`load_yaml` refuses aliases, so what is written here must not hold any."""
        return True


def dump_yaml(data: Any) -> str:
    """``data`` as YAML that :func:`load_yaml` reads back: no aliases, keys in the given order.

    :param data: plain data (mappings, sequences, strings, numbers, booleans, None).
    :return: the YAML text.
    """
    return yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False)


def read_yaml(path: str | Path, what: str, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """:func:`read_text` then :func:`load_yaml`: a YAML file read within the bounds of this module.

    :raises InvalidInput: naming the file (see :func:`read_text` and :func:`load_yaml`).
    """
    return load_yaml(read_text(path, what, max_bytes), str(path))
