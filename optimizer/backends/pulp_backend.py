"""PuLP with its bundled CBC.

PuLP builds a model one Python object at a time, so rows are grouped from the
sparse arrays once (CSR order) and each becomes one ``LpAffineExpression``.
CBC's proven bound and gap are read from its log, which PuLP does not expose.
"""

from __future__ import annotations

import os
import re
import tempfile
import time

import numpy as np
import pulp

from ..mip import MIP
from .result import SolveResult, Status, relative_gap

_RESULT = re.compile(r"^Result - (.*)$", re.M)
_OBJ = re.compile(r"^Objective value:\s+(\S+)", re.M)
_BOUND = re.compile(r"^Lower bound:\s+(\S+)", re.M)


def _num(pattern: re.Pattern, text: str) -> float | None:
    hit = pattern.search(text)
    if not hit:
        return None
    try:
        return float(hit.group(1))
    except ValueError:
        return None


def solve_pulp(mip: MIP, time_limit: float | None = None, gap: float = 1e-6,
               threads: int | None = None) -> SolveResult:
    """Solve with PuLP's CBC; never raises on a solver outcome."""
    t0 = time.perf_counter()
    a = mip.arrays()
    prob = pulp.LpProblem("gpuopt", pulp.LpMinimize)
    xs = [
        pulp.LpVariable(f"x{i}", lowBound=None if np.isinf(lo) else float(lo),
                        upBound=None if np.isinf(hi) else float(hi),
                        cat=pulp.LpInteger if integ else pulp.LpContinuous)
        for i, (lo, hi, integ) in enumerate(zip(a.col_lo, a.col_hi, a.integer))
    ]
    nz = np.flatnonzero(a.c)
    prob += pulp.LpAffineExpression([(xs[i], float(a.c[i])) for i in nz]) + a.c0
    order = np.argsort(a.rows, kind="stable")
    rows, cols, vals = a.rows[order], a.cols[order], a.vals[order]
    cuts = np.searchsorted(rows, np.arange(a.n_rows + 1))
    for r in range(a.n_rows):
        lo, hi = a.row_lo[r], a.row_hi[r]
        expr = pulp.LpAffineExpression(
            [(xs[c], float(v)) for c, v in zip(cols[cuts[r]:cuts[r + 1]], vals[cuts[r]:cuts[r + 1]])])
        name = f"r{r}"
        if lo == hi:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, name, float(lo))
        else:
            if not np.isinf(lo):
                prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, name if np.isinf(hi) else name + "lo", float(lo))
            if not np.isinf(hi):
                prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, name, float(hi))
    build = time.perf_counter() - t0

    fd, log_path = tempfile.mkstemp(prefix="gpuopt-cbc-", suffix=".log")
    os.close(fd)
    opts = dict(msg=False, gapRel=gap, logPath=log_path)
    if time_limit is not None:
        opts["timeLimit"] = float(time_limit)
    if threads:
        opts["threads"] = int(threads)
    t1 = time.perf_counter()
    try:
        prob.solve(pulp.PULP_CBC_CMD(**opts))
    except pulp.PulpSolverError as exc:
        return SolveResult(Status.ERROR, "cbc", build_seconds=build,
                           solve_seconds=time.perf_counter() - t1, message=str(exc))
    finally:
        try:
            with open(log_path) as fh:
                log = fh.read()
        except OSError:
            log = ""
        os.unlink(log_path)
    elapsed = time.perf_counter() - t1

    result_line = (_RESULT.search(log).group(1) if _RESULT.search(log) else "").strip()
    status_code = prob.status
    sol = prob.sol_status
    if status_code == pulp.LpStatusInfeasible or "infeasible" in result_line.lower():
        return SolveResult(Status.INFEASIBLE, "cbc", build_seconds=build, solve_seconds=elapsed,
                           message=result_line or "infeasible", log=log)
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return SolveResult(Status.ERROR, "cbc", build_seconds=build, solve_seconds=elapsed,
                           message=result_line or pulp.LpStatus.get(status_code, "unknown"), log=log)
    x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs], dtype=float)
    objective = float(a.c @ x + a.c0)
    proven = sol == pulp.LpSolutionOptimal and "stopped" not in result_line.lower()
    bound = _num(_BOUND, log)
    if bound is not None:
        bound += 0.0  # CBC's bound includes the objective constant PuLP passed
    if proven:
        bound = objective if bound is None else min(bound, objective)
    g = relative_gap(objective, bound)
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    return SolveResult(status, "cbc", objective=objective, bound=bound, gap=g, build_seconds=build,
                       solve_seconds=elapsed, x=x, message=result_line, log=log)
