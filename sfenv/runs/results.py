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

Every file is written atomically (:func:`atomic_path`: a temporary file of this process beside it, then
``os.replace``), so a crash or Ctrl-C mid-write leaves the old file whole and no temporary behind; a write
that fails (a full disk, no permission, a folder that is a file) raises :class:`OutputError` naming the
file.  A results file grows through a :class:`ResultsWriter`: the whole file is rewritten at most every
:data:`SAVE_INTERVAL_S` seconds, or 4 x the time of its last write if longer (:data:`SAVE_COST_FACTOR`), and
when asked (the end of a run, Ctrl-C), so writing costs a bounded share of the run at any size and a
killed process (SIGKILL, power loss) loses at most the episodes of that interval.  One process at a time
writes a file: :func:`output_lock` holds an advisory lock (``fcntl.flock`` on ``.<name>.lock`` beside it)
for the whole run, from the read of what the file holds on; a second writer gets :class:`OutputInUse`.

A folder handed in is data: no name in it is followed out of it.  A temporary is created new
(``O_CREAT | O_EXCL | O_NOFOLLOW``; a name already taken, a planted symbolic link included, is left alone
and the next free name is used), and a lock file that is a symbolic link, a hard link or not a regular
file is refused (:class:`InvalidInput` naming it), never written through nor removed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from glob import escape as glob_escape
from pathlib import Path
from typing import IO, Any

from sfenv.errors import InvalidInput, SfenvError
from sfenv.world.files import parse_json, read_text

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX (Windows): no advisory locks, see output_lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FORMAT",
    "MAX_RESULTS_BYTES",
    "SAVE_COST_FACTOR",
    "SAVE_INTERVAL_S",
    "OutputError",
    "OutputInUse",
    "ResultsWriter",
    "SettingsMismatch",
    "atomic_path",
    "atomic_paths",
    "atomic_write_json",
    "atomic_write_text",
    "cannot_write",
    "check_regular",
    "check_rows",
    "check_writable",
    "differences",
    "file_hash",
    "files_hash",
    "make_folder",
    "make_settings",
    "merge_settings",
    "open_temporary",
    "output_lock",
    "pick_output",
    "read_results",
    "results_document",
    "results_text",
    "scenario_hash",
]

#: the most bytes a results file (or entry) is read up to: 100,000 seeds with action logs fit
MAX_RESULTS_BYTES = 1 << 30
#: the ``format`` tag of a results file
FORMAT = "sfenv-results/1"
#: settings that must be equal for two runs to share a file (agents are compared one by one)
FIXED_KEYS = ("sfenv_version", "scenario", "scenario_sha", "num_jobs")
#: settings a file may gain more of (agents and seeds); every other key must be equal
ADDABLE_KEYS = ("agents", "seeds")
#: a :class:`ResultsWriter` rewrites its file at most every this many seconds ...
SAVE_INTERVAL_S = 2.0
#: ... or every this many times the duration of its last write, if longer: writing a file of any size
#: then takes at most 1 / (1 + 4) = 20 % of the run
SAVE_COST_FACTOR = 4.0
#: how often a waiting :func:`output_lock` tries again (seconds)
LOCK_POLL_S = 0.05
#: ``os.O_NOFOLLOW`` where the system has it (POSIX): open a name, never a symbolic link's target
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: how many names :func:`_create_temporary` tries before it gives up
_TEMPORARY_NAMES = 100


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


class OutputError(SfenvError, OSError):
    """A file or folder could not be written (a full disk, no permission, a folder that is a file): one line naming it.

    An ``OSError`` (its ``errno`` is the cause's), so ``except OSError`` keeps working; the command line
    reports it on one line with exit code 2.

    :param message: the whole message (see :func:`cannot_write`).
    :param code: the ``errno`` of the cause, if any.
    """

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.errno = code

    def __str__(self) -> str:
        """The message itself (not ``OSError``'s ``[Errno N] ...`` form)."""
        return str(self.args[0]) if self.args else ""


class OutputInUse(InvalidInput):
    """Another process holds the lock of an output (:func:`output_lock`): it is writing that file now.

    :param path: the output.
    :param holder: the other process's id, if its lock file says.
    """

    def __init__(self, path: Path, holder: int | None = None):
        self.path = Path(path)
        who = f" (pid {holder})" if holder else ""
        super().__init__(f"{path} is being written by another sfenv process{who}; wait for it to finish, "
                         "or choose another output")


def cannot_write(path: Path | str, error: OSError) -> OutputError:
    """The :class:`OutputError` of ``error`` raised while writing ``path``: ``cannot write PATH: why``.

    A path under a file (``results.json/r.json``) names that file; an :class:`OutputError` passes unchanged.

    :param path: the file (or a text naming the files) being written.
    """
    if isinstance(error, OutputError):
        return error
    reason = error.strerror or str(error)
    if isinstance(path, Path) and error.errno in (errno.EEXIST, errno.ENOTDIR):
        in_the_way = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if in_the_way is not None:
            reason = f"{in_the_way} is a file, not a folder"
    return OutputError(f"cannot write {path}: {reason}", error.errno)


def make_folder(folder: Path, for_path: Path | None = None) -> None:
    """Create ``folder`` and its parents if missing.

    :param for_path: the file to be written there, named in the error (default: the folder).
    :raises OutputError: if it cannot be made (a file is in the way, no permission, a full disk).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise cannot_write(for_path or folder, e) from None


def check_writable(path: Path, folder: bool = False) -> None:
    """Fail now, before any work, if ``path`` can never be written: a file under a file, or of the wrong kind.

    :param folder: ``path`` is a folder to write into (else a file).
    :raises OutputError: naming ``path`` and what is in the way.
    """
    path = Path(path)
    in_the_way = next((p for p in [*([path] if folder else []), *path.parents] if p.exists() and not p.is_dir()),
                      None)
    if in_the_way is not None:
        raise OutputError(f"cannot write {path}: {in_the_way} is a file, not a folder", errno.ENOTDIR)
    if not folder and path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder", errno.EISDIR)


def _temporary(path: Path, n: int = 0) -> Path:
    """The ``n``-th temporary name of this process beside ``path`` (two processes never share one).

    ``.<name>.<pid>.tmp``, then ``.<name>.<pid>-<n>.tmp`` for ``n`` of 1 on.
    """
    return path.with_name(f".{path.name}.{os.getpid()}{f'-{n}' if n else ''}.tmp")


def _create_temporary(path: Path) -> Path:
    """Create a new, empty temporary of this process beside ``path`` (:func:`_temporary`'s first free name).

    Created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: a name that exists (a file, or a symbolic link planted
    there, whose target is never opened) is left as it is and the next name tried.

    :raises OSError: if none can be made (no permission, a full disk, every name taken).
    """
    for n in range(_TEMPORARY_NAMES):
        tmp = _temporary(path, n)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside it (tried {_TEMPORARY_NAMES})", str(path))


def open_temporary(tmp: Path, newline: str | None = None) -> IO[str]:
    """Open for writing (emptied) a temporary that :func:`atomic_path` made, never through a symbolic link.

    :param tmp: the temporary (:func:`atomic_path`'s).
    :param newline: as :func:`open`'s (``""`` for the ``csv`` module).
    :raises OSError: if it is gone or has become a symbolic link (``ELOOP``).
    """
    fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | _NOFOLLOW)
    return open(fd, "w", encoding="utf-8", newline=newline)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; it replaces ``path`` when the block ends without an error.

    The temporary is ``.<name>.<pid>.tmp`` in the same folder (created if missing), so the rename is atomic
    and two processes never write the same temporary; it is created new and empty before the block
    (:func:`_create_temporary`: a name already taken, a symbolic link included, is never opened; the next
    free one is used), so write it with :func:`open_temporary` or by its name.  On any exception (Ctrl-C or
    a full disk mid-write included) it is removed and ``path`` is left as it was.

    :param path: the file to write.
    :raises OutputError: (an ``OSError``) naming ``path`` for an ``OSError`` in the block or the rename.
    """
    with atomic_paths([path]) as (tmp,):
        yield tmp


@contextmanager
def atomic_paths(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Temporaries for a set of files, which replace them all when the block ends without an error.

    As :func:`atomic_path` for each file; the renames come only after every file is written, so a failure
    while writing (a full disk) leaves every file as it was and no temporary behind.

    :param paths: the files to write.
    :raises OutputError: (an ``OSError``) naming the file for an ``OSError`` in the block or a rename.
    """
    paths = [Path(p) for p in paths]
    for path in paths:
        make_folder(path.parent, path)
    tmps: list[Path] = []  # only those this process created: another file of such a name is never removed
    try:
        for path in paths:
            tmps.append(_create_temporary(path))
        yield tmps
        for path, tmp in zip(paths, tmps):
            os.replace(tmp, path)
    except BaseException as e:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise cannot_write(_which(paths, tmps, e), e) from None
        raise


def _which(paths: list[Path], tmps: list[Path], error: OSError) -> Path | str:
    """The file of ``paths`` an ``OSError`` was about (its temporary's or its own name), else all of them."""
    failed = Path(error.filename) if isinstance(error.filename, str) else None
    named = [path for path in paths if failed is not None and (failed == path or _temporary_of(failed, path))]
    if named or len(paths) == 1:
        return (named or paths)[0]
    return ", ".join(str(p) for p in paths)


def _temporary_of(tmp: Path, path: Path) -> bool:
    """Whether ``tmp`` has a name :func:`_temporary` gives ``path`` (of any process)."""
    prefix = f".{path.name}."
    if tmp.parent != path.parent or not tmp.name.startswith(prefix) or not tmp.name.endswith(".tmp"):
        return False
    pid, _, n = tmp.name[len(prefix):-len(".tmp")].partition("-")
    return pid.isdigit() and (not n or n.isdigit())


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_path`), so a crash never leaves half a file.

    :param path: the file to write.
    :param text: its whole content.
    """
    with atomic_path(path) as tmp, open_temporary(tmp) as f:
        f.write(text)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON (indent 1, NaN allowed) to ``path`` atomically (:func:`atomic_write_text`).

    :param path: the file to write.
    :param data: anything :func:`json.dumps` takes.
    """
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=True))


@contextmanager
def output_lock(path: Path, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the advisory lock of the output ``path`` for the block: one sfenv process writes it at a time.

    The lock is ``fcntl.flock`` on ``.<name>.lock`` beside ``path`` (its folder is created if missing),
    which holds the process id and is removed when the block ends; the kernel drops the lock of a process
    that dies, so a killed run never leaves ``path`` locked, and the temporary it may have left mid-write is
    removed here.  Locks are per file: a process takes each
    output's lock once.  Without ``fcntl`` (not POSIX) there is no lock.

    :param path: the output file.
    :param wait_s: how long to wait for another process to release it (0: refuse at once).
    :raises OutputInUse: (an :class:`~sfenv.errors.InvalidInput`) if another process holds it after ``wait_s``.
    :raises OutputError: if the lock file cannot be made (a file in the way, no permission).
    """
    path = Path(path)
    lock = path.with_name(f".{path.name}.lock")
    make_folder(path.parent, path)
    if fcntl is None:  # pragma: no cover - not POSIX
        yield
        return
    deadline = time.monotonic() + wait_s
    while True:
        fd = _lock(path, lock)
        if fd is not None:
            break
        if time.monotonic() >= deadline:
            raise OutputInUse(path, _holder(lock))
        time.sleep(LOCK_POLL_S)
    try:
        _remove_stale_temporaries(path)
        yield
    finally:
        lock.unlink(missing_ok=True)  # still held: a process waiting on this file finds it gone and makes another
        os.close(fd)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries of ``path`` left by processes killed mid-write (call with its lock held).

    A temporary is ``.<name>.<pid>.tmp`` (:func:`atomic_path`); one whose process no longer runs is
    stale.  One of a running process is left alone (a writer that takes no lock, or a reused process id).
    """
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:-len(".tmp")].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)) and _regular_file(tmp):
            tmp.unlink(missing_ok=True)


def _regular_file(path: Path) -> bool:
    """Whether ``path`` itself (not what a symbolic link points to) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _lock(path: Path, lock: Path) -> int | None:
    """The open lock file ``lock`` of ``path``, locked by this process; None while another process holds it.

    :raises InvalidInput: if ``lock`` is a symbolic link, a hard link or not a regular file (it is left as it is).
    """
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP or lock.is_symlink():
                raise _not_a_lock(lock, "a symbolic link") from None
            raise cannot_write(path, e) from None
        kind = _lock_kind(os.fstat(fd))
        if kind:
            os.close(fd)
            raise _not_a_lock(lock, kind)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as e:  # a file system without locks
            os.close(fd)
            raise cannot_write(path, e) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:  # removed by the process that just released it
            same = False
        if same:
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except OSError:  # a full disk: the lock holds all the same, without the process id
                pass
            return fd
        os.close(fd)


def _lock_kind(st: os.stat_result) -> str:
    """What is wrong with an opened lock file: ``""`` for a regular file of one name, else what it is."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return f"a hard link ({st.st_nlink} names)"
    return ""


def _not_a_lock(lock: Path, kind: str) -> InvalidInput:
    """The error for a lock file that sfenv will not write: it names the file and says what it is."""
    return InvalidInput(f"{lock}: the lock file is {kind}; sfenv writes no file through it and leaves it as it "
                        "is; remove it, or choose another output")


def _holder(lock: Path) -> int | None:
    """The process id a lock file holds, if it says (a symbolic link is not read)."""
    try:
        fd = os.open(lock, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        return int(os.read(fd, 32).decode().strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


class ResultsWriter:
    """Keeps a results file up to date with a growing list of episode rows, at a bounded cost.

    :meth:`add` appends a row and rewrites the whole file (atomically: :func:`atomic_path`) when the last
    write is at least :data:`SAVE_INTERVAL_S` seconds old, or ``SAVE_COST_FACTOR`` times its duration if
    that is longer: writing then costs at most ``1 / (1 + SAVE_COST_FACTOR)`` of the run however large the
    file grows, and a process killed outright loses at most the episodes of one interval (the file always
    holds valid JSON with the rows of the last write).  :meth:`flush` writes what is not yet saved (at
    the end of a run, on Ctrl-C).  Each row is encoded once, as one line of the file (:func:`results_text`).

    The caller holds the file's :func:`output_lock`.

    :param path: the results file.
    :param settings: the settings it records.
    :param rows: the rows it holds already; the writer appends to this list.
    :param interval_s: the shortest time between two writes (seconds; default :data:`SAVE_INTERVAL_S`).
    :param cost_factor: the time between two writes is at least this many times the last write's duration
        (default :data:`SAVE_COST_FACTOR`).
    :param clock: the clock the intervals are measured with (seconds).
    """

    def __init__(self, path: Path, settings: Mapping[str, Any], rows: list[dict[str, Any]],
                 interval_s: float | None = None, cost_factor: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.rows = rows
        self.interval_s = SAVE_INTERVAL_S if interval_s is None else interval_s
        self.cost_factor = SAVE_COST_FACTOR if cost_factor is None else cost_factor
        self.clock = clock
        #: rows the file holds (those of the last write)
        self.saved = 0
        #: when the last write ended, and how long it took (seconds of ``clock``)
        self.last_write_end, self.last_write_s = -math.inf, 0.0
        self._settings = json.dumps(dict(settings), allow_nan=True)
        self._lines = [_row_line(row) for row in rows]
        self._unsaved = True  # nothing written yet

    @property
    def next_write_due(self) -> float:
        """When :meth:`add` writes next (``clock`` seconds): the interval after the last write's end."""
        return self.last_write_end + max(self.interval_s, self.cost_factor * self.last_write_s)

    def add(self, row: dict[str, Any]) -> None:
        """Append ``row``, and rewrite the file if the last write is older than the interval.

        :raises OutputError: if the file cannot be written; it then holds the rows of the last write (:attr:`saved`).
        """
        self.rows.append(row)
        self._lines.append(_row_line(row))
        self._unsaved = True
        if self.clock() >= self.next_write_due:
            self.save()

    def reorder(self, positions: Sequence[int]) -> None:
        """Put the rows in the order ``positions`` gives (row ``positions[k]`` becomes row ``k``).

        The file gets the new order at the next write (:meth:`flush`).
        """
        self.rows[:] = [self.rows[i] for i in positions]
        self._lines = [self._lines[i] for i in positions]
        self._unsaved = True

    def flush(self) -> None:
        """Write the file if it lacks rows (or was never written by this writer)."""
        if self._unsaved:
            self.save()

    def save(self) -> None:
        """Rewrite the whole file now (atomically), with the settings and every row.

        :raises OutputError: if it cannot be written; the file is then left as it was.
        """
        start = self.clock()
        count = len(self._lines)
        with atomic_path(self.path) as tmp, open_temporary(tmp) as f:
            f.write(results_text(self._settings, self._lines))
        self.saved, self._unsaved = count, False
        self.last_write_end = self.clock()
        self.last_write_s = self.last_write_end - start


def _row_line(row: Mapping[str, Any]) -> str:
    """One episode row as one line of JSON (NaN allowed, as in every results file)."""
    return json.dumps(row, allow_nan=True)


def results_text(settings_json: str, row_lines: Sequence[str]) -> str:
    """The text of a results file: the settings (given as JSON) and one line per episode row.

    Equal, once parsed, to :func:`results_document` of the same settings and rows.
    """
    episodes = "[\n" + ",\n".join(row_lines) + "\n]" if row_lines else "[]"
    return f'{{"format": {json.dumps(FORMAT)},\n "settings": {settings_json},\n "episodes": {episodes}}}\n'


def scenario_hash(scenario: Any) -> str:
    """The first 16 hex digits of the SHA-256 of a scenario's validated configuration (its identity JSON)."""
    return hashlib.sha256(scenario.cfg.identity_json().encode()).hexdigest()[:16]


def file_hash(path: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of a file's bytes (a saved model's identity)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def files_hash(paths: Sequence[str | Path]) -> str:
    """The first 16 hex digits of the SHA-256 of the files' hashes in order (a model made of several files)."""
    return hashlib.sha256("".join(file_hash(p) for p in paths).encode()).hexdigest()[:16]


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

    The settings' ``agents`` and ``seeds`` are checked to be of their types; a file to be continued is
    then checked row by row against them (:func:`check_rows`).

    :raises InvalidInput: (a ``ValueError``) naming the file if it is not JSON (nested too deeply, a
        huge integer included), not a results file, or its settings' ``agents`` or ``seeds`` are malformed.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        data = parse_json(read_text(path, "results file", MAX_RESULTS_BYTES), path, "results file",
                          hint="; pass --overwrite to replace it, or choose another output")
    except OSError as e:  # a folder, no permission
        raise InvalidInput(f"{path}: cannot read it as a results file ({e.strerror or e}); "
                           "choose another output") from None
    if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("settings"), dict) \
            and _rows_ok(data.get("episodes")):
        problem = _settings_problem(data["settings"])
        if problem is not None:
            raise InvalidInput(f"{path}: {problem}; pass --overwrite to replace the file, or choose another output")
        return data["settings"], data["episodes"]
    if _rows_ok(data):
        return None, data
    raise InvalidInput(f"{path}: not a results file of sfenv (expected {{'format': {FORMAT!r}, 'settings', "
                       "'episodes'}); pass --overwrite to replace it, or choose another output")


def _rows_ok(rows: Any) -> bool:
    return isinstance(rows, list) and all(isinstance(r, dict) and {"agent", "scenario", "seed"} <= set(r)
                                          for r in rows)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _settings_problem(settings: Mapping[str, Any]) -> str | None:
    """What is malformed in a results file's settings (its ``agents`` and ``seeds``), or None."""
    if not isinstance(settings.get("agents", {}), dict):
        return f"settings.agents is {type(settings['agents']).__name__}, not an object of agent settings"
    seeds = settings.get("seeds", [])
    if not isinstance(seeds, list) or not all(_is_int(s) for s in seeds):
        return f"settings.seeds is {seeds!r:.80}, not a list of integers"
    return None


def _row_problem(row: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
    """Why ``row`` does not belong in a file of ``settings`` (a field of a wrong type, other settings), or None."""
    agent, seed, scenario = row["agent"], row["seed"], row["scenario"]
    if not isinstance(agent, str) or not isinstance(scenario, str) or not _is_int(seed):
        return (f"agent {agent!r:.80}, scenario {scenario!r:.80}, seed {seed!r:.80}: expected text, text "
                "and an integer")
    if agent not in (settings.get("agents") or {}):
        return f"agent {agent!r} is not among the file's agents ({', '.join(settings.get('agents') or {}) or 'none'})"
    if "scenario" in settings and scenario != settings["scenario"]:
        return f"scenario {scenario!r} is not the file's ({settings['scenario']!r})"
    if "seeds" in settings and seed not in settings["seeds"]:
        return f"seed {seed} is not among the file's seeds"
    return None


def check_rows(path: str | Path, settings: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse the rows of a results file that its settings do not cover: nothing is mixed into a continued file.

    Each row must name an agent of the settings, their scenario and one of their seeds (text, text, an
    integer), and no (agent, seed) pair may appear twice (it would count twice in every mean).

    :param path: the file, named in the message.
    :param settings: its settings (their ``agents`` must be an object, their ``seeds`` a list of integers).
    :param rows: its episode rows (mappings with ``agent``, ``scenario`` and ``seed``).
    :raises InvalidInput: one line naming the file and the first row at fault (its number, from 0).
    """
    hint = "; fix or remove the row, or pass --overwrite to replace the file"
    problem = _settings_problem(settings)
    if problem is not None:
        raise InvalidInput(f"{path}: {problem}; pass --overwrite to replace the file, or choose another output")
    seen: dict[tuple[str, int], int] = {}
    for i, row in enumerate(rows):
        problem = _row_problem(row, settings)
        if problem is None and (row["agent"], row["seed"]) in seen:
            problem = f"agent {row['agent']!r} seed {row['seed']} is row {seen[row['agent'], row['seed']]} already"
        if problem is not None:
            raise InvalidInput(f"{path}: episode row {i}: {problem}{hint}")
        seen[row["agent"], row["seed"]] = i


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


def check_regular(path: Path, option: str = "output") -> None:
    """Refuse an existing output that is not a regular file (a device, a FIFO, a socket, a folder).

    Writing it (through :func:`atomic_path`'s rename) would put a regular file in the place of a device
    node or a FIFO; a symbolic link to a regular file is a regular file here.

    :param path: the file to be written.
    :param option: what names it, for the message (``--csv``).
    :raises OutputError: naming ``path`` and what it is.
    """
    path = Path(path)
    if (path.exists() or path.is_symlink()) and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file (a device, a FIFO, a socket or a broken link)"
        raise OutputError(f"cannot write {option} {path}: it is {kind}; choose another file", errno.EEXIST)
