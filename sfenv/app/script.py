"""The command-line exit of the experiment scripts (``python -m sfenv.experiments.claims`` and the others).

They end as the ``sfenv`` command does.

Bad input gives one ``sfenv: ...`` line on stderr and exit code 2: any
:class:`sfenv.errors.SfenvError` (a missing file, an output another process is writing, an unknown
name, a value out of range) and a file that cannot be opened (missing, a folder, no permission; the
message names it).  Ctrl-C gives one ``sfenv: interrupted`` line and exit code 130; SIGTERM (``kill``,
``timeout``, a batch system or a container stopping), where it was at its default, is handled as Ctrl-C
is (a script that saves on Ctrl-C saves) and gives one ``sfenv: terminated`` line and exit code 143.  Output piped
into ``head`` and the like, which stop reading, ends the script quietly with exit code 1.  Any other
exception is a bug and keeps its traceback.  A bad command line (an unknown option, a value argparse
refuses, the script's own ``ap.error(...)``) is one ``sfenv: <script>: <message>`` line and exit code 2
too, from :class:`ScriptParser`, the scripts' argument parser.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from sfenv.errors import Interrupted, SfenvError, did_you_mean
from sfenv.interrupts import sigterm_raises, terminated

__all__ = ["ScriptParser", "run_script", "stdout_closed", "with_choice_hint"]

#: argparse's message for a value outside ``choices`` (the choices quoted or not, by Python version)
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<known>[^)]*)\)")


def with_choice_hint(message: str) -> str:
    """Argparse's error ``message`` with the closest valid choice after an invalid one, as Python 3.14's argparse does.

    ``argument --split: invalid choice: 'tset' (choose from ...)`` becomes ``... invalid choice: 'tset' (did you
    mean 'test'?) (choose from ...)`` (:func:`sfenv.errors.did_you_mean`); any other message is returned as is.
    """
    choice = _INVALID_CHOICE.search(message)
    if choice is None:
        return message
    known = [c.strip().strip("'\"") for c in choice["known"].split(",")]
    given = f"invalid choice: '{choice['given']}'"
    return message.replace(given, given + did_you_mean(choice["given"], known), 1)


class ScriptParser(argparse.ArgumentParser):
    """The experiment scripts' argument parser: an error is one ``sfenv: <script>: <message>`` line and exit code 2.

    As ``sfenv``'s own parser, without its ``--help`` hint line: argparse's messages (an unknown option, a
    missing or refused value; an invalid choice gets ``(did you mean ...)``, :func:`with_choice_hint`) and the
    script's own ``parser.error(...)`` calls.  ``--help`` is argparse's.

    :param script: the script's short name (``claims``) or its file (pass ``__file__``); by default the name
        of ``prog``.  A sub-command's parser (``add_subparsers``) is named ``<script> <command>``.
    """

    def __init__(self, *args: Any, script: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if script is None:  # prog: "claims.py", or Python 3.14's "python -m sfenv.experiments.claims"
            script = Path(self.prog.split()[-1]).name.removesuffix(".py").rpartition(".")[2]
        self.script = Path(script).name.removesuffix(".py")
        self.register("action", "parsers", functools.partial(_Subcommands, script=self.script))

    def error(self, message: str) -> NoReturn:
        """Print ``sfenv: <script>: <message>`` on stderr and exit with code 2 (argparse's convention)."""
        self.exit(2, f"sfenv: {self.script}: {with_choice_hint(message)}\n")


class _Subcommands(argparse._SubParsersAction):
    """``ScriptParser.add_subparsers``' action: a command's parser is named ``<script> <command>`` in its errors."""

    def __init__(self, *args: Any, script: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.script = script

    def add_parser(self, name: str, **kwargs: Any) -> ScriptParser:
        """Add command ``name``'s parser, named ``<script> <name>`` in its errors."""
        kwargs.setdefault("script", f"{self.script} {name}")
        return super().add_parser(name, **kwargs)


def run_script(main: Callable[[], object]) -> int:
    """Run a script's ``main()`` and return its exit code: ``main``'s if it returns an int, else 0; 2 for bad input.

    Use as ``raise SystemExit(run_script(main))`` under ``if __name__ == "__main__":``.
    """
    takes_sigterm = threading.current_thread() is threading.main_thread() \
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if takes_sigterm:
        sigterm_raises()
    try:
        return _exit_code(main)
    finally:
        if takes_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _exit_code(main: Callable[[], object]) -> int:
    """:func:`run_script`'s body: ``main()``'s exit code, or the one its exception maps to."""
    try:
        code = main()
    except SfenvError as e:
        print(f"sfenv: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as e:
        if e.filename is None:  # not about a file a user named: a bug, keep the traceback
            raise
        print(f"sfenv: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        if terminated():
            print(f"sfenv: terminated (SIGTERM){f': {e}' if isinstance(e, Interrupted) else ''}", file=sys.stderr)
            return 143
        print(f"sfenv: {e if isinstance(e, Interrupted) else 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like, which stopped reading
        return stdout_closed()
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def stdout_closed() -> int:
    """Point standard output at the null device after its reader went away; the exit code to return (1).

    Python flushes standard output at exit; without this, a closed pipe raises a second error there.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1
