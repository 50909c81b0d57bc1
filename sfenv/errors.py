"""sfenv's own error classes: bad input a user can fix, as opposed to bugs.

Every class derives from :class:`SfenvError` and from the built-in exception a caller would expect
(``ValueError``, ``KeyError``, ``FileNotFoundError``, ``ImportError``), so ``except ValueError``
keeps working.  The command line reports exactly these (exit code 2, one message, no traceback);
anything else is a bug and keeps its traceback.  Like Gymnasium's ``gymnasium.error``, messages
say what was given, what was expected and, where it helps, what to do.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["DependencyNotInstalled", "Interrupted", "InvalidInput", "MissingFile", "SfenvError", "UnknownName",
           "UntrustedCode", "did_you_mean"]


class SfenvError(Exception):
    """Base class: bad input or a missing optional dependency, never an internal bug."""


class InvalidInput(SfenvError, ValueError):
    """An argument has a value out of its range or of the wrong kind."""


class UntrustedCode(InvalidInput):
    """A file that runs code when loaded (a pickle, an SB3 ``.zip``), refused without an explicit opt-in.

    The message says why and how to opt in (``--trust-model-code``, ``trust_code=True``), or how to get
    a form that loads no code.
    """


class UnknownName(SfenvError, KeyError):
    """A name (agent, algorithm, group) that is not registered; the message lists the known ones."""

    def __str__(self) -> str:
        """The message itself (``KeyError`` would show its repr, in quotes)."""
        return str(self.args[0]) if self.args else ""


class MissingFile(SfenvError, FileNotFoundError):
    """A file the user named does not exist."""


class DependencyNotInstalled(SfenvError, ImportError):
    """An optional extra is not installed; the message names the ``pip install`` command."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run whose finished work is saved; the message says how much and how to continue.

    A ``KeyboardInterrupt``, so code that lets Ctrl-C through keeps doing so; the command line prints
    the message on one line and exits with code 130.
    """

    def __str__(self) -> str:
        """The message itself."""
        return str(self.args[0]) if self.args else "interrupted"


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the known name closest to ``given``, or ``""`` when none is close.

    Closeness is :func:`difflib.get_close_matches`'s (ratio >= 0.6), compared without case, so
    ``FIFO`` finds ``fifo``.

    :param given: the name that is not known.
    :param known: the names that are.
    :return: the hint, to append to a message (empty when no name is close, or ``given`` is not a string).
    """
    if not isinstance(given, str):
        return ""
    by_folded: dict[str, str] = {}
    for name in known:
        by_folded.setdefault(name.casefold(), name)
    close = difflib.get_close_matches(given.casefold(), list(by_folded), n=1)
    return f" (did you mean {by_folded[close[0]]!r}?)" if close else ""
