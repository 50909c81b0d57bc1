"""Plug-in agents: a user's scheduler named on the command line, or registered by an installed package.

Three ways to add an agent without editing sfenv, each usable wherever a list of agents is
(``sfenv evaluate/benchmark/leaderboard --agents``, :func:`sfenv.agents.registry.resolve_names`,
:func:`sfenv.agents.registry.make_agent`):

- ``module:Class[:kw=v,...]``: ``Class`` from a module Python can import (installed, on
  ``PYTHONPATH``, or in the current folder, which is searched last, as ``python -m`` would);
- ``path/to/file.py:Class[:kw=v,...]``: ``Class`` from a Python file (relative paths from the current
  folder), loaded under a private module name, so the file's ``if __name__ == "__main__"`` block does
  not run and its folder is not added to ``sys.path``;
- ``NAME``: an agent an installed package registers in the entry-point group ``sfenv.agents``
  (:data:`ENTRY_POINT_GROUP`), as Gymnasium's registry and pytest's plug-ins find theirs, e.g. in
  the package's ``pyproject.toml``::

      [project.entry-points."sfenv.agents"]
      my-agent = "my_package.scheduler:MyScheduler"

  A built-in agent or group of the same name wins; ``sfenv agents`` lists the plug-ins and says so.

``Class`` is an agent class: a subclass of :class:`sfenv.agents.base.SchedulerAgent`, or any class
whose instances have the evaluator's interface, ``decide(view) -> Plan | None`` (and optionally
``reset(seed)``, ``replans`` and ``replan(view)``); such an object is wrapped in a
:class:`DuckAgent`.  Keyword values are JSON scalars (``3``, ``0.5``, ``true``, ``"text"``; the
quotes of a string must reach sfenv, so quote the whole spec for the shell:
``'mod:Class:mode="fast"'``); in a comma list of agents, ``kw=v`` items after a plug-in spec are its
keywords (``--agents fifo,mod:Class:a=1,b=2,spinsearch``).

Naming code on the command line (or installing a package) is trusting it: it runs in this process.
Nothing read from a file ever names code to import: ``sfenv validate`` replays action logs, and the
leaderboard and the evaluator resolve only the agents given by the caller, never the agent names
that a results file, an entry or a cached episodes file holds.

Rows and settings: a plug-in's rows are named by its canonical spec (:func:`canonical_spec`: the
module or path as given, the class, the keywords sorted, values as JSON), so runs with other keywords
are other agents and never share rows; the results settings record the spec, the keywords and
a SHA-256 of the module's or file's source (or the entry point's value and its distribution's
version), so an edited scheduler is another agent and its episodes go to another file
(:func:`plugin_settings`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sfenv.agents.base import SchedulerAgent

from sfenv.errors import InvalidInput, MissingFile
from sfenv.interrupts import ctrl_c_deferred, import_module
from sfenv.model.perf import Plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuckAgent",
    "PluginSpec",
    "canonical_spec",
    "entry_point_agents",
    "file_plugins",
    "is_plugin_spec",
    "load_entry_point_class",
    "load_plugin_class",
    "make_entry_point_agent",
    "make_plugin",
    "make_plugin_agent",
    "parse_spec",
    "plugin_settings",
    "resolve_plugin",
    "split_agent_list",
]

#: the entry-point group an installed package registers agents in (``NAME = "module:Class"``)
ENTRY_POINT_GROUP = "sfenv.agents"
#: prefixes of saved policies in agent lists (:mod:`sfenv.app.evaluate`), never plug-in specs
_SAVED_PREFIXES = ("model:", "rllib:")
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class PluginSpec:
    """A parsed ``module:Class[:kw=v,...]`` or ``path.py:Class[:kw=v,...]``.

    :param target: the module's dotted name, or the file's path as given.
    :param class_name: the class's name in it.
    :param kwargs: constructor keywords, parsed from JSON scalars.
    :param is_file: whether ``target`` is a ``.py`` file.
    """

    target: str
    class_name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    is_file: bool = False

    def canonical(self) -> str:
        """``target:Class`` and the keywords sorted, values as JSON: the name of the agent's rows."""
        text = f"{self.target}:{self.class_name}"
        if self.kwargs:
            text += ":" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(self.kwargs.items()))
        return text


def is_plugin_spec(item: str) -> bool:
    """Whether an agent-list item is a ``module:Class`` or ``file.py:Class`` spec (not ``model:``/``rllib:``)."""
    return ":" in item and not item.startswith(_SAVED_PREFIXES)


def split_agent_list(text: str) -> list[str]:
    """Split a comma list of agents; ``kw=v`` items after a plug-in spec are its keywords.

    Commas inside double quotes do not split (``'m:C:label="a,b"'``).  Items are stripped; empty
    ones are kept (the caller decides what an empty list means).
    """
    out: list[str] = []
    for item in _split_unquoted_commas(text):
        if out and _KEYWORD.match(item) and is_plugin_spec(out[-1]):
            head = out[-1]
            out[-1] = f"{head},{item}" if _has_keywords(head) else f"{head}:{item}"
        else:
            out.append(item)
    return out


def _split_unquoted_commas(text: str) -> list[str]:
    """``text`` split at commas outside double quotes, each part stripped."""
    items: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    items.append("".join(current).strip())
    return items


def _has_keywords(spec: str) -> bool:
    rest = spec.split(".py:", 1)[1] if ".py:" in spec else spec.split(":", 1)[1]
    return ":" in rest


def parse_spec(spec: str) -> PluginSpec:
    """Parse ``module:Class[:kw=v,...]`` or ``path.py:Class[:kw=v,...]`` (nothing is imported).

    :raises InvalidInput: naming the spec and what is wrong: no class, a module name that is not
        dotted identifiers, a class name that is not an identifier, or a keyword that is not
        ``name=JSON scalar``.
    """
    if ".py:" in spec:
        path, rest = spec.split(".py:", 1)
        target, is_file = path + ".py", True
    else:
        target, _, rest = spec.partition(":")
        is_file = False
        if not _MODULE.fullmatch(target):
            raise InvalidInput(f"agent {spec!r}: {target!r} is neither a module name (dotted identifiers) nor "
                               "a .py file; give module:Class or path/to/file.py:Class")
    class_name, _, kw_text = rest.partition(":")
    if not _IDENTIFIER.fullmatch(class_name):
        raise InvalidInput(f"agent {spec!r}: {class_name!r} is not a class name; give "
                           f"{target}:ClassName[:keyword=value,...]")
    return PluginSpec(target, class_name, _parse_kwargs(spec, kw_text), is_file)


def _parse_kwargs(spec: str, text: str) -> dict[str, Any]:
    """``kw=v,...`` -> a dict; each value one JSON scalar (int, float, bool or a quoted string)."""
    kwargs: dict[str, Any] = {}
    if not text:
        return kwargs
    for item in _split_unquoted_commas(text):
        name, eq, raw = item.partition("=")
        if not eq or not _IDENTIFIER.fullmatch(name.strip()):
            raise InvalidInput(f"agent {spec!r}: keyword {item!r} is not name=value (e.g. seed=3, "
                               'mode="fast")')
        name = name.strip()
        if name in kwargs:
            raise InvalidInput(f"agent {spec!r}: keyword {name} given twice")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None
            ok = False
        else:
            ok = isinstance(value, (bool, int, float, str)) and not (isinstance(value, float)
                                                                      and value != value)
        if not ok:
            raise InvalidInput(f"agent {spec!r}: keyword {name}={raw} is not a JSON scalar: give a number, "
                               f'true/false or a "quoted string" (quote the whole spec for the shell: '
                               f"'...:{name}=\"{raw}\"')")
        kwargs[name] = value
    return kwargs


def canonical_spec(spec: str) -> str:
    """The canonical form of a plug-in spec (:meth:`PluginSpec.canonical`).

    :raises InvalidInput: as :func:`parse_spec`.
    """
    return parse_spec(spec).canonical()


#: file plug-ins loaded in this process, by resolved path: (module, SHA-256 of the source it ran)
_FILE_MODULES: dict[Path, Any] = {}


def _file_module(path_text: str) -> Any:
    """Run the Python file once under a private module name (not ``__main__``) and return the module."""
    path = Path(path_text)
    if not path.is_file():
        raise MissingFile(f"agent file {path_text}: no such file" if not path.exists()
                          else f"agent file {path_text}: not a file")
    resolved = path.resolve()
    if resolved in _FILE_MODULES:
        return _FILE_MODULES[resolved]
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"sfenv_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:  # pragma: no cover - any .py path gives a spec
        raise InvalidInput(f"agent file {path_text}: Python cannot load it")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling by reference and typing need the module registered
    try:
        with ctrl_c_deferred():  # the file may import a library that swallows a Ctrl-C (PuLP)
            spec.loader.exec_module(module)
    except SyntaxError as e:
        del sys.modules[name]
        raise InvalidInput(f"agent file {path_text}: not valid Python (line {e.lineno}: {e.msg})") from None
    except BaseException:
        del sys.modules[name]
        raise
    _FILE_MODULES[resolved] = module
    return module


def _module(name: str, spec: str) -> Any:
    """Import ``name``; the current folder is searched after ``sys.path`` (as ``python -m`` would find it)."""
    top = name.split(".")[0]
    if importlib.util.find_spec(top) is None and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # last: nothing installed is shadowed
    try:
        return import_module(name)  # Ctrl-C deferred, as for the registered agents
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise InvalidInput(f"agent {spec!r}: no module named {e.name!r} (install it, put it on PYTHONPATH "
                               "or in the current folder, or give path/to/file.py:Class)") from None
        raise InvalidInput(f"agent {spec!r}: importing module {name} failed: {e}") from None


def load_plugin_class(spec: str | PluginSpec) -> type:
    """Import the class a plug-in spec names and check that it is an agent class.

    :raises InvalidInput: for a missing module or class, or a class that is not an agent.
    :raises MissingFile: for a ``.py`` file that does not exist.
    """
    parsed = spec if isinstance(spec, PluginSpec) else parse_spec(spec)
    text = spec if isinstance(spec, str) else parsed.canonical()
    module = _file_module(parsed.target) if parsed.is_file else _module(parsed.target, text)
    where = f"file {parsed.target}" if parsed.is_file else f"module {parsed.target}"
    obj = getattr(module, parsed.class_name, None)
    if obj is None:
        public = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_")
                        and getattr(v, "__module__", None) == module.__name__)
        raise InvalidInput(f"agent {text!r}: {where} has no {parsed.class_name!r}"
                           + (f"; its classes: {', '.join(public)}" if public else ""))
    _check_agent_class(obj, text)
    return obj


def _check_agent_class(obj: Any, text: str) -> None:
    """Raise unless ``obj`` is a SchedulerAgent subclass or a class with a ``decide`` method."""
    if not isinstance(obj, type):
        raise InvalidInput(f"agent {text!r}: {obj!r} is not a class; name an agent class (a SchedulerAgent "
                           "subclass, or a class with a decide(view) method)")
    if issubclass(obj, SchedulerAgent) or callable(getattr(obj, "decide", None)):
        return
    raise InvalidInput(f"agent {text!r}: {obj.__name__} is not an agent: it neither subclasses "
                       "sfenv.agents.base.SchedulerAgent nor has a decide(view) method")


def _check_keywords(cls: type, kwargs: dict[str, Any], text: str) -> None:
    """Raise unless ``cls(**kwargs)`` binds (a class without a readable signature passes)."""
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as e:
        raise InvalidInput(f"agent {text!r}: {cls.__name__} does not take these keywords ({e})") from None
    except ValueError:  # no signature to read (a C type): the call itself judges
        pass


def _construct(cls: type, kwargs: dict[str, Any], text: str) -> Any:
    """``cls(**kwargs)``; a keyword it does not take, or a ValueError/TypeError it raises, is bad input."""
    _check_keywords(cls, kwargs, text)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"agent {text!r}: {cls.__name__}({_kw_text(kwargs)}) refused its arguments: "
                           f"{e}") from None


def _kw_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


class DuckAgent(SchedulerAgent):
    """A :class:`SchedulerAgent` around an object that only has the evaluator's interface.

    ``decide(view)`` is required; ``reset(seed)``, ``replans``/``replan_hourly``/``replan(view)``, ``order(view)`` and
    ``propose(view, job, k)`` are used when the object has them.

    :param inner: the user's agent object.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.replans = bool(getattr(inner, "replans", False))
        self.replan_hourly = self.replans and bool(getattr(inner, "replan_hourly", False))

    def reset(self, seed: int | None = None) -> None:
        """The object's ``reset(seed)``, if it has one."""
        reset = getattr(self.inner, "reset", None)
        if callable(reset):
            reset(seed)

    def decide(self, view: SimView) -> Plan | None:
        """The object's ``decide(view)``."""
        return self.inner.decide(view)

    def replan(self, view: SimView) -> list[Plan]:
        """The object's ``replan(view)``, else none."""
        replan = getattr(self.inner, "replan", None)
        return list(replan(view)) if callable(replan) else []

    def order(self, view: SimView) -> list[JobSpec]:
        """The object's ``order(view)``, else arrival order."""
        order = getattr(self.inner, "order", None)
        return list(order(view)) if callable(order) else view.waiting

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The object's ``propose(view, job, k)``, else none."""
        propose = getattr(self.inner, "propose", None)
        return list(propose(view, job, k)) if callable(propose) else []


def _as_agent(obj: Any) -> SchedulerAgent:
    return obj if isinstance(obj, SchedulerAgent) else DuckAgent(obj)


def make_plugin_agent(spec: str, **kwargs: Any) -> SchedulerAgent:
    """Build the agent of a plug-in spec, named by its canonical spec (:func:`canonical_spec`).

    :param kwargs: more constructor keywords (the spec's own win over none: giving one twice is an error).
    :raises InvalidInput: as :func:`load_plugin_class`, or for keywords the class does not take.
    """
    parsed = parse_spec(spec)
    clash = sorted(set(kwargs) & set(parsed.kwargs))
    if clash:
        raise InvalidInput(f"agent {spec!r}: keyword(s) {', '.join(clash)} given in the spec and by the caller")
    cls = load_plugin_class(parsed)
    agent = _as_agent(_construct(cls, {**parsed.kwargs, **kwargs}, spec))
    agent.name = parsed.canonical()
    return agent


def entry_point_agents() -> dict[str, importlib.metadata.EntryPoint]:
    """The agents installed packages register in :data:`ENTRY_POINT_GROUP`, by name (nothing is imported).

    Two distributions registering one name: the first found on ``sys.path`` is kept, as
    ``importlib.metadata`` orders them.
    """
    out: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep)
    return out


def make_entry_point_agent(name: str, **kwargs: Any) -> SchedulerAgent:
    """Build the agent an installed package registers as ``name`` (named ``name``).

    :raises InvalidInput: if the entry point cannot be loaded or is not an agent class.
    """
    agent = _as_agent(_construct(load_entry_point_class(name), kwargs, name))
    agent.name = name
    return agent


def load_entry_point_class(name: str) -> type:
    """The class the entry point ``name`` of :data:`ENTRY_POINT_GROUP` names, checked to be an agent class.

    :raises InvalidInput: if it is not registered, cannot be imported, or is not an agent class.
    """
    ep = entry_point_agents().get(name)
    if ep is None:
        raise InvalidInput(f"agent {name!r}: no entry point of that name in group {ENTRY_POINT_GROUP}")
    try:
        obj = ep.load()
    except (ImportError, AttributeError) as e:
        raise InvalidInput(f"agent {name!r}: its entry point {ep.value} ({_distribution(ep)}) does not load: "
                           f"{e}") from None
    _check_agent_class(obj, name)
    return obj


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.metadata['Name']}=={dist.version}" if dist is not None else "unknown distribution"


def _source_sha(parsed: PluginSpec) -> str | None:
    """SHA-256 of the plug-in's source file (the file, or the module's file), None if it has none."""
    if parsed.is_file:
        path: str | None = parsed.target
    else:
        found = importlib.util.find_spec(parsed.target)
        path = found.origin if found is not None and found.has_location else None
    if path is None or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def plugin_settings(name: str) -> dict[str, Any]:
    """What defines a plug-in agent's episodes, for a results file's settings (its module was imported already).

    A spec: ``{"plugin": canonical spec, "source": "file"|"module", "source_sha": SHA-256 of its source,
    "kwargs": {...}}``; an entry point: ``{"plugin": name, "source": "entry point", "value":
    "module:Class", "distribution": "name==version"}``.
    """
    if is_plugin_spec(name):
        parsed = parse_spec(name)
        return {"plugin": parsed.canonical(), "source": "file" if parsed.is_file else "module",
                "source_sha": _source_sha(parsed), "kwargs": dict(parsed.kwargs)}
    ep = entry_point_agents()[name]
    return {"plugin": name, "source": "entry point", "value": ep.value, "distribution": _distribution(ep)}


def resolve_plugin(item: str) -> str | None:
    """The agent name of a plug-in spec (canonical) or of an installed entry-point agent, else None.

    The class is imported and checked (and a spec's keywords against its signature) now, so a bad
    spec is reported before anything runs; None means ``item`` is neither (a built-in name, then).

    :raises InvalidInput: for a spec or an entry point that does not give an agent class.
    """
    if is_plugin_spec(item):
        parsed = parse_spec(item)
        _check_keywords(load_plugin_class(parsed), parsed.kwargs, item)
        return parsed.canonical()
    if item in entry_point_agents():
        load_entry_point_class(item)
        return item
    return None


def make_plugin(name: str, **kwargs: Any) -> SchedulerAgent | None:
    """The agent of a plug-in spec or an entry-point name, or None if ``name`` is neither."""
    if is_plugin_spec(name):
        return make_plugin_agent(name, **kwargs)
    if name in entry_point_agents():
        return make_entry_point_agent(name, **kwargs)
    return None


def file_plugins(names: Sequence[object]) -> list[str]:
    """The names of ``names`` that are ``file.py:Class`` plug-ins (a Ray worker cannot import them by name)."""
    return [n for n in names if isinstance(n, str) and is_plugin_spec(n) and parse_spec(n).is_file]
