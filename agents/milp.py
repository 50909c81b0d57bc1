"""Shared PuLP solver set-up: HiGHS (through highspy) first, bundled CBC as the fallback.

Every solve has a time limit; a solve that stops at the limit returns its best incumbent with
``optimal=False`` (PuLP reports such runs as "Not Solved" or "Optimal" depending on the solver, so
the status is read from the solver where possible).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulp

__all__ = ["SolveResult", "solve", "new_var"]


def new_var(problem: pulp.LpProblem, name: str, **kwargs: object) -> pulp.LpVariable:
    """A variable attached to ``problem`` (PuLP 3.3's non-deprecated form, also PuLP 4's)."""
    if hasattr(problem, "add_variable"):
        return problem.add_variable(name, **kwargs)
    return pulp.LpVariable(name, **kwargs)  # older PuLP


@dataclass(frozen=True)
class SolveResult:
    """Outcome of a MILP solve: PuLP status text, whether optimality is proven, whether a solution exists."""

    status: str
    optimal: bool
    has_solution: bool
    solver: str


#: Optimality gaps.  The solvers' defaults (HiGHS: 1e-4 relative, 1e-6 absolute) would call a
#: solution "optimal" while it loses a tie-break term of 1e-6 (found by a property test), so
#: "optimal" here means optimal to within these.
GAP_REL = 1e-9
GAP_ABS = 1e-10


def _solver(time_limit: float) -> tuple[pulp.LpSolver, str]:
    try:
        s = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=GAP_REL, gapAbs=GAP_ABS)
        if s.available():
            return s, "HiGHS"
    except Exception:  # noqa: BLE001 - any failure to build the HiGHS interface falls back to CBC
        pass
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=GAP_REL, gapAbs=GAP_ABS), "CBC"


def solve(problem: pulp.LpProblem, time_limit: float = 2.0) -> SolveResult:
    """Solve ``problem`` in place under ``time_limit`` seconds, to the gaps ``GAP_REL``/``GAP_ABS``."""
    solver, name = _solver(time_limit)
    problem.solve(solver)
    status = pulp.LpStatus[problem.status]
    sol_status = getattr(problem, "sol_status", None)
    has = status == "Optimal" or sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    optimal = status == "Optimal" and sol_status in (None, pulp.LpSolutionOptimal)
    return SolveResult(status, bool(optimal), bool(has), name)
