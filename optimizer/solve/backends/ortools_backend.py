"""OR-Tools back ends (SCIP, CP-SAT) through ``model_builder``.

Run in a child process (:mod:`optimizer.solve.backends.isolated`): the
OR-Tools library carries its own HiGHS, which clashes with highspy's in one
process. The model is handed over whole: variable bounds, objective and the
sparse matrix go in as numpy arrays (``fill_model_from_sparse_data`` with a
SciPy CSR matrix), then integrality is set on the integer columns.

What each solver reports, and what we do about it (OR-Tools 9.15):

- **SCIP**: bound from the response (SCIP's dual bound); gap as ``limits/gap``;
  the start becomes a SCIP partial solution (a hint).
- **CP-SAT**: only for pure-integer models (no routing or training-hour
  columns): it would otherwise scale continuous columns to integers and solve a
  different problem. Gap and workers as SAT parameters; the start is a hint.

The solver's console output goes to a temporary file (fd 1 is redirected
while it runs), which keeps ``--format json`` clean and gives us the log.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status, assess

_NAMES = {"scip": "scip", "cp-sat": "sat"}


_capture_lock = threading.Lock()
_capture = {"depth": 0, "saved": -1, "fd": -1, "path": ""}


@contextlib.contextmanager
def _capture_stdout():
    """Send file descriptor 1 to a temporary file while a native solver runs; yield a reader.

    Safe from several threads at once (the parallel polish): fd 1 is
    process-wide, so the first caller redirects it, the last one restores
    it, and each caller's log is what the file gained while it ran (its
    own output, interleaved with that of solves running beside it).
    """
    text = {"log": ""}
    with _capture_lock:
        if _capture["depth"] == 0:
            sys.stdout.flush()
            fd, path = tempfile.mkstemp(prefix="gpuopt-solver-", suffix=".log")
            _capture.update(saved=os.dup(1), fd=fd, path=path)
            os.dup2(fd, 1)
        _capture["depth"] += 1
        path = _capture["path"]
        offset = os.fstat(_capture["fd"]).st_size
    try:
        yield text
    finally:
        with _capture_lock:
            sys.stdout.flush()
            try:
                with open(path, errors="replace") as fh:
                    fh.seek(offset)
                    text["log"] = fh.read()
            finally:
                _capture["depth"] -= 1
                if _capture["depth"] == 0:
                    os.dup2(_capture["saved"], 1)
                    os.close(_capture["saved"])
                    os.close(_capture["fd"])
                    os.unlink(path)


def build_model(a: Arrays):
    """A ``model_builder.Model`` holding the arrays (variables, rows, objective, integrality)."""
    from ortools.linear_solver.python import model_builder as mb

    model = mb.Model()
    A = sp.csr_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
    A.sum_duplicates()
    model.helper.fill_model_from_sparse_data(a.col_lo.astype(float), a.col_hi.astype(float), a.c.astype(float),
                                             a.row_lo.astype(float), a.row_hi.astype(float), A)
    for i in np.flatnonzero(a.integer):
        model.helper.set_var_integrality(int(i), True)
    model.helper.set_objective_offset(float(a.c0))
    return model


def _params(backend: str, gap: float, threads: int | None) -> str:
    if backend == "scip":
        return f"limits/gap = {gap:.12g}"
    workers = int(threads) if threads else 2
    return f"relative_gap_limit:{gap:.12g} num_workers:{workers}"


def solve_ortools(mip: MIP, backend: str = "scip", time_limit: float | None = None, gap: float = 1e-6,
                  threads: int | None = None, start: np.ndarray | None = None, arrays: Arrays | None = None) -> SolveResult:
    """Solve with an OR-Tools solver through ``model_builder``; never raises on a solver outcome."""
    from ortools.linear_solver.python import model_builder as mb

    t0 = time.perf_counter()
    a = arrays if arrays is not None else mip.arrays()
    if backend == "cp-sat" and not a.integer.all():
        n = int((~a.integer).sum())
        return SolveResult(Status.ERROR, backend, message=(
            f"cp-sat needs every variable integer; this model has {n} continuous ones (request-bucket "
            "routing or training hours); use highs, scip or cbc"))
    model = build_model(a)
    used_start = ""
    if start is not None:
        h = model.helper
        for i, v in enumerate(start.tolist()):
            h.add_hint(i, float(v))
        used_start = "hint"
    solver = mb.Solver(_NAMES[backend])
    if not solver.solver_is_supported():
        return SolveResult(Status.ERROR, backend, message=f"OR-Tools has no {backend} solver in this build")
    solver.enable_output(True)
    if time_limit is not None:
        solver.set_time_limit_in_seconds(float(time_limit))
    solver.set_solver_specific_parameters(_params(backend, gap, threads))
    build = time.perf_counter() - t0

    t1 = time.perf_counter()
    with _capture_stdout() as out:  # SCIP prints on fd 1; that would corrupt --format json
        status = solver.solve(model)
    elapsed = time.perf_counter() - t1
    log = out["log"]
    S = mb.SolveStatus
    common = dict(build_seconds=build, solve_seconds=elapsed, log=log, start=used_start)
    if status == S.INFEASIBLE:
        return SolveResult(Status.INFEASIBLE, backend, message="infeasible", **common)
    if status not in (S.OPTIMAL, S.FEASIBLE):
        msg = {S.UNBOUNDED: "unbounded", S.ABNORMAL: "abnormal", S.MODEL_INVALID: "model invalid",
               S.INVALID_SOLVER_PARAMETERS: "invalid solver parameters"}.get(status)
        st = Status.ERROR
        if msg is None and time_limit is not None:
            msg, st = "no plan within the time limit", Status.TIME_LIMIT
        elif msg is None:
            msg = f"solver status {status.name}"
        bound = _bound(backend, solver, log, a)  # a proven bound may exist without a plan
        return SolveResult(st, backend, message=msg, bound=bound, **common)
    bound = _bound(backend, solver, log, a)
    r = assess(a.c, a.c0, a.integer, _values(solver, model, a.n_vars), bound, gap, completed=status == S.OPTIMAL,
               bound_is_objective=status == S.OPTIMAL and bound is None and not a.integer.any())
    if r.error:
        return SolveResult(Status.ERROR, backend, message=r.error, **common)
    st = Status.OPTIMAL if r.proven else Status.FEASIBLE
    return SolveResult(st, backend, objective=r.objective, bound=r.bound, gap=r.gap, x=r.x,
                       message="optimal" if r.proven else "time limit (best plan so far, with its bound)", **common)


def _values(solver, model, n: int) -> np.ndarray:
    """Every variable's value, through the public ``Solver.values`` (one call for all of them)."""
    if not n:
        return np.zeros(0)
    return np.asarray(solver.values(model.get_variables()), dtype=float)


def _bound(backend: str, solver, log: str, a: Arrays) -> float | None:
    """The proven lower bound on the objective (constant included), or None if unknown."""
    raw = solver.best_objective_bound
    if raw is None or raw is pd.NA:  # no bound reported (e.g. stopped before the root LP)
        return None
    v = float(raw)
    return v if np.isfinite(v) and abs(v) < 1e19 else None  # SCIP says ±1e20 for "none yet"
