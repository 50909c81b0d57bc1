"""The Python API under misuse: a wrong seed, agent list or scenario is one InvalidInput naming the argument.

Before these checks ``evaluate_agents(..., seeds=[True])`` played seed 1 and recorded ``true``,
``seeds=[2.5]`` failed deep in NumPy after the settings were written, ``run_benchmark(first_seed=-1)``
wrote ``benchmark.json`` before failing there, and ``make_simulator("spider-8", 0)`` was an AttributeError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sfenv.agents.registry import make_agent

from sfenv.app.benchmark import run_benchmark
from sfenv.app.evaluate import evaluate_agents
from sfenv.app.leaderboard import run_leaderboard
from sfenv.errors import InvalidInput, UnknownName
from sfenv.runs.protocol import check_seeds
from sfenv.runs.stats import iqm_interval, mean_ci, paired_ratio
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.world.hardware import get_gpu


@pytest.mark.parametrize("seeds", [[True], [2.5], "12", 3, None, [-1], [0, 0], [float("nan")], ["1"]])
def test_evaluate_agents_refuses_bad_seeds_before_writing(tmp_path: Path, seeds: Any) -> None:
    out = tmp_path / "r.json"
    with pytest.raises(InvalidInput, match="^seeds: "):
        evaluate_agents(["fifo"], "spider-8", seeds, num_jobs=3, out=out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("agents", [[None], [3], "fifo", None, []])
def test_evaluate_agents_refuses_bad_agents(agents: Any) -> None:
    with pytest.raises(InvalidInput, match="^agents: "):
        evaluate_agents(agents, "spider-8", [0], num_jobs=3, progress=False)


def test_check_seeds_keeps_valid_seeds_as_given() -> None:
    assert check_seeds(range(3)) == [0, 1, 2]
    kept = check_seeds(np.array([4, 5]))
    assert kept == [4, 5] and all(isinstance(s, np.integer) for s in kept)
    assert check_seeds((7,)) == [7]


@pytest.mark.parametrize(("field", "value"), [("seeds", True), ("seeds", 2.5), ("seeds", "2"), ("seeds", None),
                                              ("first_seed", -1), ("first_seed", True), ("first_seed", 1.5)])
def test_run_benchmark_refuses_bad_counts_before_writing(tmp_path: Path, field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"seeds": 1, "first_seed": 0, field: value}
    with pytest.raises(InvalidInput, match=f"^{field} must be an integer"):
        run_benchmark("fifo", "spider-8", num_jobs=3, out_dir=tmp_path / "b", progress=False, plots=False,
                      log=lambda _m: None, **kwargs)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("scenario", ["spider-8", None, {"name": "x"}])
def test_make_simulator_refuses_a_scenario_that_is_not_one(scenario: Any) -> None:
    with pytest.raises(InvalidInput, match="make_simulator: scenario is a"):
        make_simulator(scenario, 0)


@pytest.mark.parametrize("rng", [True, 2.5, "3", -1, float("nan"), np.bool_(True)])
def test_make_simulator_refuses_a_seed_that_is_not_one(rng: Any) -> None:
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 3})
    with pytest.raises(InvalidInput, match="make_simulator: rng = "):
        make_simulator(sc, rng)


def test_make_simulator_takes_the_seeds_it_took() -> None:
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 3})
    first = make_simulator(sc, 3)
    assert make_simulator(sc, np.int64(3)).time == first.time
    assert make_simulator(sc, np.random.default_rng(3)).time == first.time
    assert make_simulator(sc, None).time >= 0


BAD_LEADERBOARD = [({"scenarios": []}, "scenarios"), ({"scenarios": "spider-8"}, "scenarios"),
                   ({"scenarios": [3]}, "scenario"), ({"seeds": None}, "seeds"), ({"seeds": True}, "seeds"),
                   ({"num_jobs": "3"}, "num_jobs"), ({"num_jobs": True}, "num_jobs"), ({"agents": [3]}, "agents"),
                   ({"agents": None}, "agents")]


@pytest.mark.parametrize(("kwargs", "field"), BAD_LEADERBOARD)
def test_run_leaderboard_refuses_bad_arguments_before_playing(tmp_path: Path, kwargs: dict[str, Any],
                                                              field: str) -> None:
    """``scenarios=[]`` played every bundled scenario (the CLI refuses naming none); the others were TypeErrors."""
    args: dict[str, Any] = {"scenarios": ["spider-8"], "agents": "fifo", "seeds": 1, "num_jobs": 3, **kwargs}
    with pytest.raises(InvalidInput, match=field):
        run_leaderboard(tmp_path / "lb", progress=False, log=lambda _m: None, **args)
    assert not (tmp_path / "lb").exists()


@pytest.mark.parametrize("level", [95, 2, 0, 1, -0.5, float("nan"), True, "0.95"])
def test_confidence_levels_outside_0_1_are_refused(level: Any) -> None:
    """``level=95`` (a percentage) gave a NaN half-width from ``mean_ci`` and a zero-width bootstrap interval."""
    for call in (lambda: mean_ci([1.0, 2.0, 3.0], level=level), lambda: paired_ratio([1, 2, 3], [1, 2, 4], level=level),
                 lambda: iqm_interval([1, 2, 3, 4], level=level)):
        with pytest.raises(InvalidInput, match="^level = "):
            call()


def test_valid_levels_keep_their_intervals() -> None:
    mean, half = mean_ci([1.0, 2.0, 3.0], level=0.9)
    assert mean == 2.0 and 0 < half < mean_ci([1.0, 2.0, 3.0])[1]
    assert paired_ratio([1, 2, 3], [1, 2, 4], level=np.float64(0.5))[0] == pytest.approx(6 / 7)


BAD_AGENTS = [("fifo", {"bogus": 1}, "agent 'fifo': no keyword argument 'bogus'"),
              ("spinsearch+swf", {"zzz": 1}, "no keyword argument 'zzz'"), (None, {}, "make_agent: name = None"),
              (["fifo"], {}, "make_agent: name = ")]


@pytest.mark.parametrize(("name", "kwargs", "match"), BAD_AGENTS)
def test_make_agent_refuses_a_keyword_or_name_it_cannot_take(name: Any, kwargs: dict[str, Any], match: str) -> None:
    """These were TypeErrors (``FIFOAgent() takes no arguments``, ``unhashable type: 'list'``)."""
    with pytest.raises(InvalidInput, match=match):
        make_agent(name, **kwargs)


def test_make_agent_keeps_the_keywords_it_takes() -> None:
    assert make_agent("random", seed=1).name == "random"
    assert make_agent("spinsearch+swf", blocking=True).name == "spinsearch+swf"


@pytest.mark.parametrize("agent_kwargs", [3, {"fifo": 3}, {"fifo": {"bogus": 1}}])
def test_evaluate_agents_refuses_bad_agent_kwargs(tmp_path: Path, agent_kwargs: Any) -> None:
    out = tmp_path / "r.json"
    with pytest.raises(InvalidInput, match="agent_kwargs|no keyword argument 'bogus'"):
        evaluate_agents(["fifo"], "spider-8", [0], num_jobs=3, out=out, progress=False, agent_kwargs=agent_kwargs)
    assert not out.exists()


@pytest.mark.parametrize("name", ["a100", None, ["A100-40GB"]])
def test_get_gpu_names_an_unknown_type_as_unknown_name(name: Any) -> None:
    """A plain ``KeyError`` (the CLI's sign of a bug), or a ``TypeError`` for a list, before."""
    with pytest.raises(UnknownName, match="unknown GPU type"):
        get_gpu(name)
