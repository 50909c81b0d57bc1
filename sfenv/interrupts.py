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
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType

__all__ = ["ctrl_c_deferred", "ctrl_c_held", "import_module"]


def _ctrl_c_raises_here() -> bool:
    """Whether this is the main thread and Ctrl-C raises ``KeyboardInterrupt`` (Python's default handler)."""
    return threading.current_thread() is threading.main_thread() \
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Ignore Ctrl-C (SIGINT) inside the block: for the save that must end a run that is being interrupted."""
    if not _ctrl_c_raises_here():
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Hold a Ctrl-C pressed inside the block; raise ``KeyboardInterrupt`` when the block ends, once.

    An exception the block raises itself propagates unchanged (the held Ctrl-C is then dropped, since
    the block is being left anyway).
    """
    if not _ctrl_c_raises_here():
        yield
        return
    pressed: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
