"""Ctrl-C around code that must not be cut short, or that cannot take a ``KeyboardInterrupt`` well.

Both context managers act only in the main thread of a process whose Ctrl-C raises
``KeyboardInterrupt`` (Python's default handler); elsewhere (another thread, a program with its own
SIGINT handler, the ``sfenv`` command while it imports) they do nothing.

- :func:`ctrl_c_held` ignores Ctrl-C inside its block: the save that ends an interrupted run.
- :func:`ctrl_c_deferred` holds a Ctrl-C pressed inside its block and raises it when the block ends.
  It is for third-party one-off loads (numba's import and compiled-kernel cache, HiGHS's first
  solver), which do not survive an interrupt raised inside them.  Measured on 2 busy cores, 3 of 140
  Ctrl-Cs pressed in the first seconds of ``sfenv evaluate`` went wrong: one was raised inside an
  llvmlite ``ctypes`` callback, printed as "Exception ignored" and lost (the run went on to its end
  and exited 0); two left the interpreter exiting by SIGINT (code -2) after sfenv had reported the
  interrupt and returned 130.  With the loads deferred, 0 of 250 did.  PuLP imports highspy inside a
  bare ``except:``, so a Ctrl-C pressed while PuLP is first imported was lost too (2 of 40 runs of the
  command-line Ctrl-C tests on busy cores): :func:`import_module` imports the registered agents',
  proposer sets' and plug-ins' modules with Ctrl-C deferred (a plug-in file runs under
  :func:`ctrl_c_deferred`).

In the ``sfenv`` command alone, SIGTERM (``kill PID``) is handled as Ctrl-C is (:func:`sigterm_raises`): it
raises :class:`Terminated`, a ``KeyboardInterrupt``, so the run saves what it finished, removes its lock and
exits 143 with one line; both context managers then hold SIGTERM as they hold Ctrl-C.  A program that imports
sfenv keeps its own SIGTERM handling (Python's default: the process ends at once).
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Any

__all__ = ["Terminated", "ctrl_c_deferred", "ctrl_c_held", "import_module", "sigterm_raises", "terminated"]

#: the SIGTERMs received since :func:`sigterm_raises` (the ``sfenv`` command's); empty in a program that imports sfenv
_received: list[int] = []


class Terminated(KeyboardInterrupt):
    """SIGTERM in the ``sfenv`` command (:func:`sigterm_raises`): a ``KeyboardInterrupt``, so a run saves."""

    def __str__(self) -> str:
        """The message itself."""
        return str(self.args[0]) if self.args else "terminated"


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler of the ``sfenv`` command: note it and raise :class:`Terminated`."""
    _received.append(signum)
    raise Terminated


def sigterm_raises() -> None:
    """From here on SIGTERM raises :class:`Terminated` in the main thread, as Ctrl-C raises ``KeyboardInterrupt``.

    Called by the ``sfenv`` command when it starts (never at import): the run then saves what it finished,
    removes its lock and exits 143 with one line.  Call it from the main thread.
    """
    signal.signal(signal.SIGTERM, _raise_terminated)


def terminated() -> bool:
    """Whether a SIGTERM was received since :func:`sigterm_raises` (the run ends because of it, not of Ctrl-C)."""
    return bool(_received)


def _ctrl_c_raises_here() -> bool:
    """Whether this is the main thread and Ctrl-C raises ``KeyboardInterrupt`` (Python's default handler)."""
    return threading.current_thread() is threading.main_thread() \
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _raising_signals() -> dict[int, Callable[[int, FrameType | None], Any]]:
    """The signals that raise here, with their handlers: SIGINT at Python's default, SIGTERM at the command's.

    Empty outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers: dict[int, Callable[[int, FrameType | None], Any]] = {}
    if _ctrl_c_raises_here():
        handlers[signal.SIGINT] = signal.default_int_handler
    if signal.getsignal(signal.SIGTERM) is _raise_terminated:
        handlers[signal.SIGTERM] = _raise_terminated
    return handlers


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Ignore Ctrl-C (SIGINT) inside the block: for the save that must end a run that is being interrupted.

    SIGTERM too, in the ``sfenv`` command (:func:`sigterm_raises`).
    """
    handlers = _raising_signals()
    for signum in handlers:
        signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Hold a Ctrl-C pressed inside the block; raise ``KeyboardInterrupt`` when the block ends, once.

    An exception the block raises itself propagates unchanged (the held Ctrl-C is then dropped, since
    the block is being left anyway).  In the ``sfenv`` command a SIGTERM is held the same way and raised
    as :class:`Terminated`.
    """
    handlers = _raising_signals()
    if not handlers:
        yield
        return
    pressed: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    for signum in handlers:
        signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    if signal.SIGTERM in pressed:
        _received.append(signal.SIGTERM)
        raise Terminated
    if pressed:
        raise KeyboardInterrupt


def import_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` with Ctrl-C deferred (:func:`ctrl_c_deferred`) until it returns.

    For the modules sfenv imports by name when they are first needed (registered agents, proposer
    sets, plug-ins): they import libraries such as PuLP, which swallows any exception raised while it
    imports highspy, a ``KeyboardInterrupt`` included.
    """
    with ctrl_c_deferred():
        return importlib.import_module(name)
