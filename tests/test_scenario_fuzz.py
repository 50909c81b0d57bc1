"""Random mutations of every bundled scenario end in a clean short run or one clear error, quickly.

Each example takes a bundled scenario as data (its file, or all its fields with the defaults
written out), applies one to three mutations (a number set to an extreme or scaled by one, a key
deleted, a list entry duplicated, a value's type changed) and then either

- the scenario loads, and an env of it (at most 5 jobs) plays up to 20 steps with a simple policy
  (the first candidate, else wait) with every reward, cost and observation finite; or
- loading (or building the env) raises a ``ValueError`` subclass whose message names the source
  and a scenario field, short (values are cut), and no other exception;

within :data:`SECONDS` seconds (an alarm turns a hang into a failure) and without the process
growing past :data:`MAX_RSS_MB`.  Derandomized, so every run tries the same 100 examples.  Random
mutations reach some fields more often than others, so a sweep then sets every number of three
scenarios to each of :data:`SWEEP` in turn.  About 15-25 s in all.
"""

from __future__ import annotations

import copy
import math
import re
import resource
import signal
import sys
import time
from collections.abc import Iterator
from importlib import resources
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sfenv.env import GeoSchedEnv
from sfenv.errors import SfenvError
from sfenv.scenario import Scenario, bundled_scenarios
from sfenv.world.files import load_yaml

#: seconds one example may take (the slowest clean ones take about 2 s on a loaded machine)
SECONDS = 20
#: the process's peak resident size may not pass this (MB); a clean run stays near 300 MB, and the
#: cases that exhausted memory before reached 4-14 GB
MAX_RSS_MB = 3000
#: values a mutation sets: zeros, signs, tiny and huge numbers, non-finite ones, other types
EXTREMES: list[Any] = [0, -1, 1e-300, 1.7, 1e9, 1e300, -1e300, math.nan, math.inf, -math.inf, True, False, "x", "",
                       None, [], {}, 2**63, -(2**63)]
#: factors a mutation scales a number by: extreme ones ...
FACTORS = [0, -1, 1e-300, 1e-9, 1e9, 1e300]
#: ... and mild ones, which keep many values valid (so that many examples run)
MILD = [0.5, 2, 10]
#: the mutations, some more often than others
OPS = ["set", "set", "scale", "scale", "mild", "mild", "mild", "delete", "duplicate", "to_list", "to_str"]
SECTIONS = re.compile(
    r"\b(name|description|topology|prices|workload|dynamics|outages|stragglers|egress|carbon|sim|reward|env)")
#: each bundled scenario's file as data ...
RAW = {name: load_yaml(resources.files("sfenv.scenarios").joinpath(f"{name}.yaml").read_text(), name)
       for name in bundled_scenarios()}
#: ... and with every field written out (defaults too), so that every field can be mutated
FULL = {name: Scenario.from_dict(data, source=name).cfg.model_dump(mode="json") for name, data in RAW.items()}


def _paths(node: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path in ``node`` (sections, entries and leaves), depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _field(path: tuple) -> tuple:
    """The field a path points at: list positions and zone names replaced (``prices.zones.*.base``)."""
    out: list = []
    for key in path:
        out.append("[]" if isinstance(key, int) else "*" if out and out[-1] in ("zones", "profiles") else key)
    return tuple(out)


def _parent(data: Any, path: tuple) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def _mutate(data: dict, path: tuple, op: str, value: Any) -> None:
    """Apply one mutation at ``path`` (see the module docstring)."""
    parent, key = _parent(data, path), path[-1]
    old = parent[key]
    if op == "set":
        parent[key] = value
    elif op in ("scale", "mild"):
        parent[key] = old * value
    elif op == "delete":
        del parent[key]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.append(copy.deepcopy(old))
        else:
            parent[f"{key}_again"] = copy.deepcopy(old)
    elif op == "to_list":
        parent[key] = [old]
    else:  # to_str
        parent[key] = str(old)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict, list]:
    """A bundled scenario's data (its file, or all its fields) with 1-3 mutations, and the mutations.

    A mutation picks a field first (every field equally likely, however many entries a list
    has), then one of its places.
    """
    name = draw(st.sampled_from(sorted(RAW)))
    data = copy.deepcopy(draw(st.sampled_from([RAW, FULL]))[name])
    done = []
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        op = draw(st.sampled_from(OPS))
        by_field: dict[tuple, list[tuple]] = {}
        for p in _paths(data):
            if op not in ("scale", "mild") or _is_number(_parent(data, p)[p[-1]]):
                by_field.setdefault(_field(p), []).append(p)
        if not by_field:
            break
        path = draw(st.sampled_from(by_field[draw(st.sampled_from(sorted(by_field, key=repr)))]))
        value = draw(st.sampled_from(MILD if op == "mild" else FACTORS if op == "scale" else EXTREMES))
        _mutate(data, path, op, value)
        done.append((path, op, value))
    return name, data, done


def _timeout(signum: int, frame: Any) -> None:
    raise TimeoutError(f"an example took more than {SECONDS} s")


def _peak_mb() -> float:
    """The process's peak resident size so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)


def _finite(obs: dict[str, np.ndarray]) -> bool:
    return all(bool(np.all(np.isfinite(v))) for v in obs.values())


def _play(env: GeoSchedEnv) -> None:
    """Up to 20 steps of the first candidate (else wait); every reward, cost and observation finite."""
    obs, info = env.reset(seed=0)
    assert _finite(obs) and math.isfinite(info["cost_usd"])
    for _ in range(20):
        action = 0 if env.action_masks()[0] else env.wait_action
        obs, reward, terminated, _, info = env.step(action)
        assert math.isfinite(reward) and math.isfinite(info["cost_usd"]) and _finite(obs), (reward, info["cost_usd"])
        if terminated:
            break


def _load_and_play(data: dict, source: str) -> str:
    """``"ran"`` or ``"refused"``; raises anything that is neither a clean run nor a clear error."""
    try:
        sc = Scenario.from_dict(data, source=source)
        num_jobs = sc.cfg.workload.num_jobs
        if num_jobs > 5:
            sc = sc.with_overrides(workload={"num_jobs": 5})
        env = GeoSchedEnv(sc)  # building the env is part of loading: its errors count as refusals
    except ValueError as e:
        assert isinstance(e, SfenvError), f"{type(e).__name__}: {e}"  # ScenarioError, InvalidInput: not numpy's
        msg = str(e)
        assert source in msg and SECTIONS.search(msg), msg
        assert len(msg) < 4000 and "Traceback" not in msg, msg
        return "refused"
    _play(env)  # no exception of any kind may come out of an accepted scenario
    return "ran"


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM for the per-example time bound")
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=mutated())
def test_mutated_scenarios_run_cleanly_or_are_refused_clearly(case):
    name, data, mutations = case
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    started = time.perf_counter()
    try:
        _load_and_play(data, f"fuzz:{name}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < SECONDS, mutations
    assert _peak_mb() < MAX_RSS_MB, (_peak_mb(), mutations)


#: values the sweep below gives every number
SWEEP: list[Any] = [0, -1, 1e-300, 1e9, 1e300, math.nan, math.inf, True, "x"]


def _sweep_cases(name: str) -> list[tuple]:
    """(path, value) for every number (or optional number) of ``name``'s full data, in first entries only."""
    data = FULL[name]
    cases = []
    seen = set()
    for path in _paths(data):
        value = _parent(data, path)[path[-1]]
        if (_is_number(value) or value is None) and _field(path) not in seen:  # the first entry of each list or zone
            seen.add(_field(path))
            cases += [(path, v) for v in SWEEP]
    return cases


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM for the per-example time bound")
@pytest.mark.parametrize("name", ["cee", "geo-8", "spider-8-contended"])
def test_every_number_at_every_extreme_runs_cleanly_or_is_refused_clearly(name):
    """The random mutations above pick fields unevenly; this sweeps them all, in three scenarios that
    between them hold every kind of section (cee: link dynamics and time-of-use zones; geo-8: daily
    price profiles; spider-8-contended: a generated topology and a load): each number, and each
    optional one, set to each value of :data:`SWEEP` in turn."""
    previous = signal.signal(signal.SIGALRM, _timeout)
    failures = []
    try:
        for path, value in _sweep_cases(name):
            data = copy.deepcopy(FULL[name])
            _mutate(data, path, "set", value)
            signal.setitimer(signal.ITIMER_REAL, SECONDS)
            try:
                _load_and_play(data, f"fuzz:{name}")
            except Exception as e:  # collected (AssertionError, TimeoutError too): the report lists every case
                failures.append(f"{'.'.join(map(str, path))}={value!r}: {type(e).__name__}: {str(e)[:200]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not failures, "\n".join(failures)
    assert _peak_mb() < MAX_RSS_MB


@pytest.mark.parametrize("name", ["spider-8", "geo-8"])
def test_the_checker_runs_an_unmutated_scenario_and_refuses_a_broken_one(name):
    """Both outcomes of the checker above are reachable (it neither refuses nor accepts everything)."""
    assert _load_and_play(copy.deepcopy(RAW[name]), f"fuzz:{name}") == "ran"
    broken = copy.deepcopy(RAW[name])
    broken["sim"]["horizon_h"] = 1e300
    assert _load_and_play(broken, f"fuzz:{name}") == "refused"
