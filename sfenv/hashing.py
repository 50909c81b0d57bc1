"""Cached hashes for frozen dataclasses that serve as dictionary keys on hot paths.

A frozen dataclass recomputes its field-tuple hash on every call; plans, stages and model shapes
are hashed many times per environment step.  :func:`cached_hash` computes the same value once and
keeps it in the instance; :func:`state_without_hash` drops it from pickles, because a hash that
involves a string differs between processes.  Use both in the class body (an inherited
``__hash__`` would be replaced by the dataclass decorator)::

    @dataclass(frozen=True)
    class Key:
        name: str
        __hash__ = cached_hash
        __getstate__ = state_without_hash
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any, Generic, TypeVar

__all__ = ["HashedKey", "cached_hash", "cached_value", "state_without_hash"]

_GETTERS: dict[type, Callable[[Any], tuple]] = {}


def cached_hash(self: Any) -> int:
    """The dataclass hash (over the fields that take part in comparison), computed once."""
    h = self.__dict__.get("_hash")
    if h is None:
        cls = type(self)
        get = _GETTERS.get(cls)
        if get is None:
            names = [f.name for f in fields(self) if f.compare]
            # attrgetter builds the tuple in C (a single name would give the bare value: wrap it)
            if len(names) > 1:
                get = attrgetter(*names)
            else:
                get = lambda obj, _n=names[0]: (getattr(obj, _n),)  # noqa: E731
            _GETTERS[cls] = get
        h = hash(get(self))
        object.__setattr__(self, "_hash", h)
    return h


def state_without_hash(self: Any) -> dict[str, Any]:
    """Pickle state: the instance's attributes without the cached hash."""
    state = dict(self.__dict__)
    state.pop("_hash", None)
    return state


class HashedKey(tuple):
    """A tuple that computes its hash once (a tuple rehashes every element on every lookup).

    Dictionary keys built from many hashable parts (a plan's stages, a job's shape) are looked up
    many times per environment step; the cached value is dropped from pickles (see the module
    docstring).
    """

    def __hash__(self) -> int:
        h = self.__dict__.get("h")
        if h is None:
            h = self.__dict__["h"] = tuple.__hash__(self)
        return h

    def __reduce__(self) -> tuple[type, tuple[tuple]]:
        return HashedKey, (tuple(self),)


_T = TypeVar("_T")


class cached_value(Generic[_T]):
    """:class:`functools.cached_property` without its lock: the value is computed on first access and kept.

    Plans, evaluations and job specs are created by the thousand per environment step and most of
    their derived values are read once or twice; Python 3.11's ``cached_property`` takes a lock on
    every first access, which costs more than the values themselves.  The computed value is stored
    in the instance's ``__dict__`` under the attribute's name (so later reads never reach this
    descriptor, and frozen dataclasses work); two threads racing on a first access both compute
    the same value (the functions decorated are pure).
    """

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value
