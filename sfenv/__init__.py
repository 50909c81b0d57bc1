"""sfenv: a Gymnasium testbed for scheduling LLM training across geo-distributed GPU clusters.

Importing ``sfenv`` registers the environment ids (``sfenv/GeoSched-v6`` and one per bundled
scenario) and imports neither torch, Stable-Baselines3 nor matplotlib.  In the ``sfenv`` command
alone (not in a program that imports sfenv), Ctrl-C while it starts prints one line and exits 130, and
SIGTERM one line and exits 143.
"""

import os as _os
import signal as _signal
import sys as _sys
from itertools import pairwise as _pairwise


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while the ``sfenv`` command starts (its imports, before ``main`` runs): one line and exit 130."""
    _sys.stderr.write("sfenv: interrupted while starting; nothing was run or written\n")
    _sys.stderr.flush()
    _os._exit(130)


def _terminated_while_starting(signum: int, frame: object) -> None:
    """SIGTERM while the ``sfenv`` command starts (before ``main`` runs): one line and exit 143 (128 + 15)."""
    _sys.stderr.write("sfenv: terminated while starting; nothing was run or written\n")
    _sys.stderr.flush()
    _os._exit(143)


def _is_the_sfenv_command() -> bool:
    """Whether this process is the ``sfenv`` command (its console script, or ``python -m sfenv``)."""
    script = _os.path.basename(_sys.argv[0]) if _sys.argv else ""
    flags = list(getattr(_sys, "orig_argv", []))
    as_module = any(a == "-m" and b in ("sfenv", "sfenv.app.cli") for a, b in _pairwise(flags))
    return as_module or script in ("sfenv", "sfenv.exe", "sfenv-script.py")


# First of all, before the imports of a second or more: Ctrl-C while the command starts gives one line, not a
# traceback from deep inside an import (sfenv.app.cli.main gives Ctrl-C back to Python when it starts).
# A program that imports sfenv keeps its own Ctrl-C handling.  SIGTERM (`kill PID`) likewise, when at its default.
if _is_the_sfenv_command():
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)
    if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
        _signal.signal(_signal.SIGTERM, _terminated_while_starting)

from sfenv import _moved  # noqa: E402
from sfenv.registration import register_envs  # noqa: E402

__version__ = "0.1.0"
__all__ = ["__version__", "register_envs"]

_moved.install()  # old module paths (sfenv.perf, sfenv.sim's neighbours, ...) warn and still import
register_envs()
