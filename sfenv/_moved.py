"""Old module paths of the flat layout (before the layers of 0.2), importable for one more release with a warning.

``import sfenv.perf`` (or ``from sfenv.perf import Plan``) still works: it warns with a
:class:`DeprecationWarning` naming the new path and hands back the module at that path itself (the
same object, so its attributes, private ones and monkeypatching included, are the new module's).
Pickles that name old paths load the same way.  The table is the CHANGELOG's list of moves.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: old module path -> new module path
MOVED: dict[str, str] = {
    **{f"sfenv.{name}": f"sfenv.world.{name}"
       for name in ("hardware", "topology", "generators", "prices", "workload", "csvread")},
    **{f"sfenv.{name}": f"sfenv.model.{name}" for name in ("compute", "perf", "pipeline", "_pipeline_jit", "planning")},
    "sfenv.metrics": "sfenv.sim.metrics",
    "sfenv.proposers": "sfenv.env.proposers",
    "sfenv.render": "sfenv.env.render",
    **{f"sfenv.{name}": f"sfenv.runs.{name}" for name in ("protocol", "results", "replay", "stats", "distributed")},
    **{f"sfenv.{name}": f"sfenv.app.{name}" for name in ("cli", "benchmark", "leaderboard", "plots")},
    "sfenv.agents.evaluate": "sfenv.app.evaluate",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (after a :class:`DeprecationWarning`)."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The module at the new path (imported if need be)."""
        warnings.warn(f"{spec.name} moved to {self.new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the module was run at its new path."""


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED`, nothing else."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec whose loader hands back the new module, for an old path; else None."""
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
