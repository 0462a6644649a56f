"""The solver plumbing shared by every MILP in ptplan (the planner's and the reserve purchase):
solver choice, variables, one status mapping, HiGHS's banner kept off stdout.

PuLP is imported here and by the two formulations that build models with it
(:mod:`ptplan.planner.search.milp`, :mod:`ptplan.reservations.milp`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator

import pulp

from ptplan.core.errors import InputError

SOLVERS = ("highs", "cbc")


def var(prob: pulp.LpProblem, name: str, low: float | None = None, up: float | None = None,
         cat: str = pulp.LpContinuous) -> pulp.LpVariable:
    """A variable attached to ``prob`` (PuLP ≥ 3.3 API; plain constructor before it)."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound=low, upBound=up, cat=cat)
    return pulp.LpVariable(name, lowBound=low, upBound=up, cat=cat)


def check_solver(name: str) -> None:
    """Reject an unknown or unavailable solver before any work is done."""
    _solver(name, 1.0, 1e-6)


def _solver(name: str, time_limit: float, gap: float) -> pulp.LpSolver:
    if name == "highs":
        solver = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=gap, threads=1)
        if not solver.available():
            raise InputError("--solver highs: highspy is not installed; pip install highspy "
                             "or use --solver cbc")
        return solver
    if name == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=gap)
        if not solver.available():
            raise InputError("--solver cbc: the CBC binary is not available; use --solver highs")
        return solver
    raise InputError(f"--solver: unknown solver {name!r}; use highs or cbc")


@contextlib.contextmanager
def _stdout_silenced() -> Iterator[None]:
    """HiGHS prints a banner from C++ straight to file descriptor 1 whenever a solver object is
    created, whatever ``msg`` says; plans are written to stdout, so fd 1 is parked on devnull
    for the duration of the solve."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 (embedded interpreters): nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def run(prob: pulp.LpProblem, solver: str, time_limit: float, gap: float) -> str:
    """Solve ``prob`` in place; the status as one word: optimal | time_limit (a solution, not
    proven optimal) | infeasible | error. The one mapping of PuLP's statuses in ptplan."""
    try:
        with warnings.catch_warnings(), _stdout_silenced():
            warnings.simplefilter("ignore")
            prob.solve(_solver(solver, time_limit, gap))
    except pulp.PulpSolverError as exc:  # pragma: no cover - solver crash
        return "error" if "infeasible" not in str(exc).lower() else "infeasible"
    status = pulp.LpStatus.get(prob.status, "Undefined")
    if status == "Optimal":
        # a time-limited solve can say "Optimal": sol_status 2 = feasible, not proven
        return "time_limit" if prob.sol_status == 2 else "optimal"
    if status == "Infeasible":
        return "infeasible"
    if status == "Not Solved" and prob.sol_status == 2:
        return "time_limit"
    return "error"


def mip_gap(prob: pulp.LpProblem, solver: str) -> float:
    """HiGHS's relative MIP gap of the last solve (0 for CBC, which does not report it)."""
    if solver != "highs":
        return 0.0
    highs = getattr(prob, "solverModel", None)
    if highs is None:
        return 0.0
    try:
        info = highs.getInfo()
        return float(max(0.0, info.mip_gap)) if info.mip_gap < 1e30 else 0.0
    except Exception:  # pragma: no cover - older highspy
        return 0.0
