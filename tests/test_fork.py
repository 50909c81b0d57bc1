"""A simulator's fork (sfenv.sim.lookahead.fork) holds what a plain deepcopy holds, at a fraction of its cost.

``fork`` copies job states field by field and shares the event queue's immutable entries instead of
deep-copying them (issue 34's teachers fork once per scored action).  These tests compare it with
the reference it replaced, ``copy.deepcopy`` with only the immutable parts shared
(``sfenv.experiments.bench_fork.deepcopy_fork``), on states of several kinds, and check that the
copies are independent of the original and play the same futures.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from sfenv.agents.registry import make_agent
from sfenv.experiments import bench_fork

from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.sim.state import JobState

FIELDS = [f.name for f in dataclasses.fields(JobState)]
#: immutable, shared by the original, the fork and the reference alike
SHARED = {"spec", "plan", "perf", "resume_perf"}


def _states(agent: str, decisions: list[int], seed: int = 4, scenario: str = "spider-8-contended"):
    """The simulator after each number of ``decisions`` of ``agent`` (one simulator, played on)."""
    sim = make_simulator(load_scenario(scenario).with_overrides(workload={"num_jobs": 12}), seed)
    decide = make_agent(agent).decide
    done = 0
    for n in decisions:
        sim.run(decide, max_decisions=n - done)
        done = n
        yield sim


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@pytest.mark.parametrize("agent", ["fifo+swf", "spantrain"])
def test_the_fork_holds_what_a_deepcopy_holds_and_shares_nothing_mutable(agent: str) -> None:
    kinds, arrays, sharing = set(), set(), set()
    for sim in _states(agent, [2, 5, 9, 14]):
        twin, reference = sim.fork(), bench_fork.deepcopy_fork(sim)
        assert twin._events == reference._events == sim._events and twin._events is not sim._events
        for entry in twin._events:  # shared with the original: only numbers in immutable tuples
            assert isinstance(entry, tuple) and all(isinstance(x, (int, float)) for x in entry[:3])
            assert isinstance(entry[3], tuple) and all(isinstance(x, (int, float)) for x in entry[3]), entry
        for js, mine, ref in zip(sim.jobs, twin.jobs, reference.jobs):
            kinds.add(js.status)
            arrays |= {name for name in ("power_zone", "f_last", "g_last") if getattr(js, name) is not None}
            assert mine is not js
            for name in FIELDS:
                value, copied, expected = getattr(js, name), getattr(mine, name), getattr(ref, name)
                assert _same(copied, expected) and _same(copied, value), (js.spec.job_id, name)
                if name in SHARED:
                    assert copied is value
                elif isinstance(value, (dict, list, set, np.ndarray)):
                    assert copied is not value, (js.spec.job_id, name)  # the fork's own container
        assert twin.report().to_dict() == reference.report().to_dict() == sim.report().to_dict()
        for jid, entry in sim.links.jobs.items():  # the links' entries hold the same plans as the jobs, as before
            for name, attr in (("plan", "plan"), ("perf", "perf"), ("job", "spec")):
                shared = getattr(entry, name) is getattr(sim.jobs[jid], attr)
                assert (getattr(twin.links.jobs[jid], name) is getattr(twin.jobs[jid], attr)) == shared, (jid, name)
                assert getattr(twin.links.jobs[jid], name) == getattr(entry, name)
            sharing.add(entry.perf is sim.jobs[jid].perf)
    assert {"pending", "running", "done"} <= kinds
    assert (True in sharing) == (agent == "spantrain")  # fifo+swf keeps jobs in one region: no WAN entries
    assert "power_zone" in arrays  # the arrays' copies were compared too


def test_writing_into_the_fork_leaves_the_original_as_it_was() -> None:
    *_, sim = _states("fifo+swf", [9])
    running = next(js for js in sim.jobs if js.status == "running" and js.power_zone is not None)
    before = {name: getattr(running, name) for name in FIELDS}
    before = {k: (v.copy() if isinstance(v, np.ndarray) else type(v)(v) if isinstance(v, (dict, list)) else v)
              for k, v in before.items()}
    twin = sim.fork()
    mine = twin.jobs[running.spec.job_id]
    mine.flows[999] = 1
    mine.held[999] = 1
    mine.segments.append((0.0, 1.0, ()))
    for name in ("power_zone", "f_last", "g_last"):
        if getattr(mine, name) is not None:
            getattr(mine, name)[:] = -1.0
    twin._events.clear()
    assert sim._events
    for name in FIELDS:
        assert _same(getattr(running, name), before[name]), name


@pytest.mark.parametrize("seed", [4, 11])
def test_the_fork_and_the_reference_play_the_same_futures(seed: int) -> None:
    agent = make_agent("spantrain+swf")
    for sim in _states("fifo+swf", [3, 7], seed=seed):
        assert sim.fork().run(agent.decide).to_dict() == bench_fork.deepcopy_fork(sim).run(agent.decide).to_dict()


def test_bench_fork_times_both_copies_on_the_same_states(capsys: pytest.CaptureFixture[str]) -> None:
    row = bench_fork.main(["--steps", "4"])
    assert row["states"] == 4 and row["fork_ms"] > 0 and row["deepcopy_ms"] > 0 and row["checked"] >= 1
    assert row["ratio"] == pytest.approx(row["deepcopy_ms"] / row["fork_ms"])
    assert "deepcopy reference" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_fork.main(["--steps", "0"])


def test_play_is_run_without_its_report() -> None:
    """Rollouts read only the totals, so they play without building a report: the same state as run's."""
    scenario = load_scenario("spider-8-contended").with_overrides(workload={"num_jobs": 8})
    ran, played = make_simulator(scenario, 3), make_simulator(scenario, 3)
    report = ran.run(make_agent("fifo+swf").decide)
    assert played.play(make_agent("fifo+swf").decide) is None
    assert played.report().to_dict() == report.to_dict() and played.totals() == ran.totals()


def test_with_id_keeps_a_spec_that_has_the_id() -> None:
    spec = make_simulator(load_scenario("spider-8"), 0).jobs[2].spec
    assert spec.with_id(spec.job_id) is spec  # immutable: no copy needed
    other = spec.with_id(spec.job_id + 100)
    assert other.job_id == spec.job_id + 100 and dataclasses.replace(other, job_id=spec.job_id) == spec
