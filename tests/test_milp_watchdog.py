"""The MILP helper enforces its time limit from outside the solver (HiGHS does not always stop)."""

import time

import pulp
import pytest
from sfenv.agents import milp

from sfenv.sim import make_simulator


def _knapsack() -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    prob = pulp.LpProblem("knap", pulp.LpMaximize)
    xs = [milp.new_var(prob, f"x{i}", cat="Binary") for i in range(4)]
    prob += pulp.lpSum(v * x for v, x in zip((5, 4, 3, 2), xs))
    prob += pulp.lpSum(w * x for w, x in zip((4, 3, 2, 1), xs)) <= 6
    return prob, xs


def test_solution_comes_back_from_the_child():
    prob, xs = _knapsack()
    res = milp.solve(prob, time_limit=5.0)
    assert res.optimal and res.has_solution and res.status == "Optimal"
    assert [round(x.value()) for x in xs] == [0, 1, 1, 1]  # 4 + 3 + 2 = 9 with weight 6
    assert pulp.value(prob.objective) == pytest.approx(9.0)


@pytest.mark.skipif(milp._fork_context() is None, reason="the watchdog needs fork")
def test_a_solver_that_ignores_its_time_limit_is_killed(monkeypatch):
    prob, xs = _knapsack()
    monkeypatch.setattr(pulp.LpProblem, "solve", lambda self, solver=None: time.sleep(60))  # a hung solver
    t0 = time.monotonic()
    res = milp.solve(prob, time_limit=0.2, grace_s=0.3)
    assert time.monotonic() - t0 < 10.0
    assert not res.has_solution and not res.optimal and res.status == "Not Solved"
    assert res.solver.endswith("(killed)")
    assert all(x.value() is None for x in xs)


def test_an_error_in_the_child_is_raised_in_the_caller(monkeypatch):
    prob, _ = _knapsack()

    def broken(self, solver=None):
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(pulp.LpProblem, "solve", broken)
    with pytest.raises(RuntimeError, match="solver exploded"):
        milp.solve(prob, time_limit=1.0)


@pytest.mark.skipif(milp._fork_context() is None, reason="the watchdog needs fork")
def test_a_forked_solve_after_an_in_process_one_does_not_hang(monkeypatch):
    """HiGHS worker threads left in the parent by an in-process solve must not hang the forked child."""
    from sfenv.agents.ilp import MICRO_BATCHES, TP_DEGREES, build_instance, solve_instance

    from sfenv.scenario import load_scenario

    view = make_simulator(load_scenario("spider-8"), 0).view()
    job = view.waiting[0]
    instances = [build_instance(view, job, d, None, MICRO_BATCHES[0], TP_DEGREES) for d in (1, 2)]
    with monkeypatch.context() as m:
        m.setattr(milp, "_fork_context", lambda: None)
        assert solve_instance(instances[0], 2.0) is not None  # in-process: HiGHS starts its threads here
    calls = []
    real = milp.solve
    monkeypatch.setattr("sfenv.agents.ilp.solve",
                        lambda p, t, node_limit=None: calls.append(real(p, t, grace_s=3.0, node_limit=node_limit))
                        or calls[-1])
    assert solve_instance(instances[1], 2.0) is not None
    assert not calls[0].solver.endswith("(killed)")


def _market_split(seed: int = 0, rows: int = 4, cols: int = 30) -> pulp.LpProblem:
    """A market-split instance (Cornuejols & Dawande 1999): small, and hard for branch and bound."""
    import numpy as np

    a = np.random.default_rng(seed).integers(0, 100, size=(rows, cols))
    prob = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = [milp.new_var(prob, f"x{j}", cat="Binary") for j in range(cols)]
    over = [milp.new_var(prob, f"over{i}", lowBound=0) for i in range(rows)]
    under = [milp.new_var(prob, f"under{i}", lowBound=0) for i in range(rows)]
    prob += pulp.lpSum(over) + pulp.lpSum(under)
    for i in range(rows):
        prob += pulp.lpSum(int(a[i, j]) * x[j] for j in range(cols)) + over[i] - under[i] == int(a[i].sum() // 2)
    return prob


def test_a_node_limit_stops_the_search_deterministically_with_its_incumbent():
    """The node budget (HiGHS ``mip_max_nodes``, which PuLP 3.3 cannot read back) ends a hard search with an
    incumbent, not proven optimal, said so; the same budget gives the same answer whatever the time limit."""
    results = []
    for time_limit in (20.0, 60.0):
        prob = _market_split()
        res = milp.solve(prob, time_limit=time_limit, node_limit=10)
        assert res.has_solution and not res.optimal and res.stopped_by == "nodes"
        results.append((pulp.value(prob.objective), [v.value() for v in prob.variables()]))
    assert results[0] == results[1]
    prob, _ = _knapsack()
    done = milp.solve(prob, time_limit=5.0, node_limit=10)
    assert done.optimal and done.stopped_by == ""  # a search that finishes within the budget is not "stopped"
    with pytest.raises(ValueError, match="node_limit"):
        milp.solve(prob, node_limit=0)


def test_a_search_the_wall_clock_stops_says_so():
    prob = _market_split()
    res = milp.solve(prob, time_limit=0.3)
    assert not res.optimal and res.stopped_by == "time"
