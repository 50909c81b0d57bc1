"""Shared PuLP solver set-up: HiGHS (through highspy) first, bundled CBC as the fallback.

Every solve has a time limit; a solve that stops at the limit returns its best incumbent with
``optimal=False`` (PuLP reports such runs as "Not Solved" or "Optimal" depending on the solver, so
the status is read from the solver where possible).

The limit is enforced from outside too.  HiGHS does not check its ``time_limit`` everywhere
(ERGO-Code/HiGHS#2226, open; #885, #1501): on one of the ILP baseline's instances (spider-16,
seed 1, 12 jobs) a 2 s solve ran for over an hour, in-process, where nothing can stop it.  So where
the OS can fork, each solve runs in a forked child that sends the solution back through a pipe;
a child still running ``HARD_LIMIT_GRACE_S`` after the time limit is killed and the solve returns
"Not Solved" without a solution (the ILP agent then falls back, and counts it).  HiGHS runs with
one thread: a process forked while HiGHS worker threads exist (after an in-process solve) hangs in
the child, and the MIP search uses one worker anyway.  The fork costs about 25 ms per solve
(measured on spider-8's 12 MILPs per decision: +9 % of the ILP baseline's decision time).
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any

import pulp

__all__ = ["HARD_LIMIT_GRACE_S", "SolveResult", "new_var", "solve"]


def new_var(problem: pulp.LpProblem, name: str, **kwargs: object) -> pulp.LpVariable:
    """A variable attached to ``problem`` (PuLP 3.3's non-deprecated form, also PuLP 4's)."""
    if hasattr(problem, "add_variable"):
        return problem.add_variable(name, **kwargs)
    return pulp.LpVariable(name, **kwargs)  # older PuLP


@dataclass(frozen=True)
class SolveResult:
    """Outcome of a MILP solve: PuLP status text, whether optimality is proven, whether a solution exists.

    ``stopped_by``: ``"nodes"`` when the node limit ended the search (deterministic), ``"time"`` when the
    wall clock did (its outcome depends on the machine's speed and load), else ``""``.
    """

    status: str
    optimal: bool
    has_solution: bool
    solver: str
    stopped_by: str = ""


#: Optimality gaps.  The solvers' defaults (HiGHS: 1e-4 relative, 1e-6 absolute) would call a
#: solution "optimal" while it loses a tie-break term of 1e-6 (found by a property test), so
#: "optimal" here means optimal to within these.
GAP_REL = 1e-9
GAP_ABS = 1e-10


class _HiGHS(pulp.HiGHS):
    """PuLP's HiGHS interface, which also reads a search stopped by the node limit.

    PuLP 3.3 does not map HiGHS's ``kSolutionLimit`` status and raises ``KeyError``; here such a
    search returns its incumbent, if any, not proven optimal.
    """

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        """The PuLP status pair; a node-limited search counts as one stopped by a limit."""
        try:
            return super().findSolutionValues(lp)
        except KeyError:
            if lp.solverModel.getInfo().objective_function_value == float("inf"):
                return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            return pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible


def _solver(time_limit: float, node_limit: int | None) -> tuple[pulp.LpSolver, str]:
    nodes = {} if node_limit is None else {"mip_max_nodes": int(node_limit)}
    try:
        s = _HiGHS(msg=False, timeLimit=time_limit, gapRel=GAP_REL, gapAbs=GAP_ABS, threads=1, **nodes)
        if s.available():
            return s, "HiGHS"
    except Exception:
        pass
    options = [] if node_limit is None else [f"maxNodes {int(node_limit)}"]
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=GAP_REL, gapAbs=GAP_ABS, options=options), "CBC"


def _stopped_by(problem: pulp.LpProblem) -> str:
    """Which limit ended HiGHS's search (see :class:`SolveResult`); ``""`` for CBC or a finished search."""
    model = getattr(problem, "solverModel", None)
    if model is None or not hasattr(model, "getModelStatus"):
        return ""
    name = str(model.getModelStatus())
    return "time" if "TimeLimit" in name else "nodes" if "SolutionLimit" in name else ""


#: seconds a solve may overrun its time limit before its child process is killed
HARD_LIMIT_GRACE_S = 5.0


def _fork_context() -> Any:
    try:
        return multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: solve in-process
        return None


def _solve_in_child(problem: pulp.LpProblem, solver: pulp.LpSolver, conn: Any) -> None:
    try:
        problem.solve(solver)
        values = {v.name: v.varValue for v in problem.variables()}
        conn.send((problem.status, getattr(problem, "sol_status", None), values, _stopped_by(problem)))
    except BaseException as exc:
        conn.send(exc)
    finally:
        conn.close()


def _result(problem: pulp.LpProblem, name: str, stopped_by: str) -> SolveResult:
    status = pulp.LpStatus[problem.status]
    sol_status = getattr(problem, "sol_status", None)
    has = status == "Optimal" or sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    optimal = status == "Optimal" and sol_status in (None, pulp.LpSolutionOptimal) and not stopped_by
    return SolveResult(status, bool(optimal), bool(has), name, stopped_by)


def solve(problem: pulp.LpProblem, time_limit: float = 2.0, grace_s: float = HARD_LIMIT_GRACE_S,
          node_limit: int | None = None) -> SolveResult:
    """Solve ``problem`` in place under ``time_limit`` seconds, to the gaps ``GAP_REL``/``GAP_ABS``.

    Where the OS can fork, the solve runs in a child process that is killed ``grace_s`` after the
    time limit (see the module docstring); a killed solve has status "Not Solved", no solution and
    solver name ``"<solver> (killed)"``.

    :param node_limit: stop the branch and bound after this many nodes (HiGHS ``mip_max_nodes``, CBC
        ``maxNodes``): with one thread a deterministic budget, the same on any machine at any load,
        unlike ``time_limit``, which is then only a safety.
    """
    if node_limit is not None and node_limit < 1:
        raise ValueError(f"node_limit: expected at least 1 or None, got {node_limit}")
    solver, name = _solver(time_limit, node_limit)
    ctx = _fork_context()
    if ctx is None:
        problem.solve(solver)
        return _result(problem, name, _stopped_by(problem))
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_solve_in_child, args=(problem, solver, send), daemon=True)
    child.start()
    send.close()
    try:
        payload = recv.recv() if recv.poll(time_limit + grace_s) else None
    except EOFError:  # the child died without a word
        payload = None
    finally:
        recv.close()
        if payload is None and child.is_alive():
            child.kill()
        child.join()
    if isinstance(payload, BaseException):
        raise payload
    if payload is None:
        return SolveResult("Not Solved", False, False, f"{name} (killed)", "time")
    status, sol_status, values, stopped_by = payload
    problem.status = status
    problem.sol_status = sol_status
    problem.assignVarsVals(values)
    return _result(problem, name, stopped_by)
