"""The layering move (issue 29): every old module path still imports, warns once, and is the new module itself."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

import sfenv  # installs the finder of old paths
from sfenv._moved import MOVED
from sfenv.model.perf import Plan
from sfenv.scenario import load_scenario
from sfenv.sim import Simulator, evaluation_cache_for, make_simulator


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_old_path_warns_and_is_the_new_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new


def test_every_old_module_is_gone_from_the_flat_folder():
    """The old paths are aliases, not files: the layers are the only copies."""
    from pathlib import Path

    root = Path(sfenv.__file__).parent
    for old in MOVED:
        rest = old.split(".")[1:]
        assert not (root.joinpath(*rest[:-1]) / f"{rest[-1]}.py").exists(), old


def test_from_import_of_an_old_path_in_a_fresh_interpreter():
    code = ("import warnings; warnings.simplefilter('error');\n"
            "try:\n    from sfenv.perf import Plan\nexcept DeprecationWarning as w:\n    print('warned', w)\n"
            "warnings.simplefilter('ignore'); from sfenv.perf import Plan; import sfenv.model.perf as m;"
            "print(Plan is m.Plan)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split("\n")[:2] == ["warned sfenv.perf moved to sfenv.model.perf; the old path goes in the "
                                          "next release", "True"]


def test_a_pickle_naming_an_old_path_loads_the_new_class():
    old_global = b"csfenv.perf\nPlan\n."  # protocol 0: the class Plan, found by its old module path
    sys.modules.pop("sfenv.perf", None)
    with pytest.warns(DeprecationWarning):
        assert pickle.loads(old_global) is Plan


def test_unknown_names_are_still_unknown():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sfenv.no_such_module")


def test_deprecated_episode_builders_warn_and_build_the_same_episode():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    with pytest.warns(DeprecationWarning, match="make_simulator"):
        old = sc.make_simulator(3)
    with pytest.warns(DeprecationWarning, match="make_simulator"):
        older = Simulator.from_scenario(sc, 3)
    with pytest.warns(DeprecationWarning, match="evaluation_cache_for"):
        cache = sc.evaluation_cache()
    new = make_simulator(sc, 3, evaluation_cache_for(sc))
    assert type(cache) is type(evaluation_cache_for(sc))
    reports = [s.run(lambda v: None).to_dict() for s in (old, older, new)]
    assert reports[0] == reports[1] == reports[2]
