"""OR-Tools back ends (HiGHS, SCIP, CBC, CP-SAT) through ``pywraplp``, in process.

Rows are handed over one at a time from the CSR-ordered arrays. CP-SAT needs
integer data, so continuous variables make it scale coefficients internally;
it is offered for pure-integer models and small problems.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np

from ..mip import MIP
from .result import SolveResult, Status, relative_gap

@contextlib.contextmanager
def _quiet_stdout():
    """Send file descriptor 1 to /dev/null while a native solver runs."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


_IDS = {"highs": "HIGHS", "scip": "SCIP", "cbc": "CBC", "cp-sat": "CP_SAT"}


def solve_ortools(mip: MIP, backend: str = "highs", time_limit: float | None = None, gap: float = 1e-6,
                  threads: int | None = None) -> SolveResult:
    """Solve with an OR-Tools MIP solver; never raises on a solver outcome."""
    from ortools.linear_solver import pywraplp

    name = f"ortools-{backend}" if backend == "cbc" else backend
    t0 = time.perf_counter()
    solver = pywraplp.Solver.CreateSolver(_IDS[backend])
    if solver is None:
        return SolveResult(Status.ERROR, name, message=f"OR-Tools has no {_IDS[backend]} solver in this build")
    solver.SuppressOutput()
    a = mip.arrays()
    inf = solver.infinity()
    xs = [solver.IntVar(lo if np.isfinite(lo) else -inf, hi if np.isfinite(hi) else inf, "")
          if integ else solver.NumVar(lo if np.isfinite(lo) else -inf, hi if np.isfinite(hi) else inf, "")
          for lo, hi, integ in zip(a.col_lo, a.col_hi, a.integer)]
    order = np.argsort(a.rows, kind="stable")
    rows, cols, vals = a.rows[order], a.cols[order], a.vals[order]
    cuts = np.searchsorted(rows, np.arange(a.n_rows + 1))
    for r in range(a.n_rows):
        lo, hi = a.row_lo[r], a.row_hi[r]
        ct = solver.Constraint(lo if np.isfinite(lo) else -inf, hi if np.isfinite(hi) else inf)
        for c, v in zip(cols[cuts[r]:cuts[r + 1]], vals[cuts[r]:cuts[r + 1]]):
            ct.SetCoefficient(xs[c], float(v))
    obj = solver.Objective()
    for i in np.flatnonzero(a.c):
        obj.SetCoefficient(xs[i], float(a.c[i]))
    obj.SetOffset(float(a.c0))
    obj.SetMinimization()
    build = time.perf_counter() - t0
    if time_limit is not None:
        solver.SetTimeLimit(int(time_limit * 1000))
    if threads:
        solver.SetNumThreads(int(threads))
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, gap)
    t1 = time.perf_counter()
    with _quiet_stdout():  # HiGHS prints a banner on fd 1 that would corrupt --format json
        code = solver.Solve(params)
    elapsed = time.perf_counter() - t1
    if code == pywraplp.Solver.INFEASIBLE:
        return SolveResult(Status.INFEASIBLE, name, build_seconds=build, solve_seconds=elapsed,
                           message="infeasible")
    if code not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return SolveResult(Status.ERROR, name, build_seconds=build, solve_seconds=elapsed,
                           message={pywraplp.Solver.UNBOUNDED: "unbounded", pywraplp.Solver.ABNORMAL: "abnormal",
                                    pywraplp.Solver.NOT_SOLVED: "no plan within the limit"}.get(code, f"code {code}"))
    x = np.array([v.solution_value() for v in xs], dtype=float)
    objective = float(a.c @ x + a.c0)
    bound = obj.BestBound() if a.integer.any() else objective
    if code == pywraplp.Solver.OPTIMAL:
        bound = min(bound, objective) if np.isfinite(bound) else objective
    status = Status.OPTIMAL if code == pywraplp.Solver.OPTIMAL else Status.FEASIBLE
    return SolveResult(status, name, objective=objective, bound=float(bound) if np.isfinite(bound) else None,
                       gap=relative_gap(objective, bound if np.isfinite(bound) else None), build_seconds=build,
                       solve_seconds=elapsed, x=x, message="optimal" if status == Status.OPTIMAL else "time limit")
