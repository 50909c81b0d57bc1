"""The command-line exit of the experiment scripts (``python -m sfenv.experiments.claims`` and the others).

They end as the ``sfenv`` command does.

Bad input gives one ``sfenv: ...`` line on stderr and exit code 2: any
:class:`sfenv.errors.SfenvError` (a missing file, an output another process is writing, an unknown
name, a value out of range) and a file that cannot be opened (missing, a folder, no permission; the
message names it).  Ctrl-C gives one ``sfenv: interrupted`` line and exit code 130; SIGTERM (``kill``,
``timeout``, a batch system or a container stopping), where it was at its default, is handled as Ctrl-C
is (a script that saves on Ctrl-C saves) and gives one ``sfenv: terminated`` line and exit code 143.  Output piped
into ``head`` and the like, which stop reading, ends the script quietly with exit code 1.  Any other
exception is a bug and keeps its traceback.  Argparse's own errors already exit 2 with their usage
line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from sfenv.errors import Interrupted, SfenvError
from sfenv.interrupts import sigterm_raises, terminated

__all__ = ["run_script", "stdout_closed"]


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
