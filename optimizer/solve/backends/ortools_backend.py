"""OR-Tools back ends (HiGHS, SCIP, CP-SAT) through ``model_builder``, in process.

The model is handed over whole: variable bounds, objective and the sparse
matrix go in as numpy arrays (``fill_model_from_sparse_data`` with a SciPy
CSR matrix; without SciPy, one call per non-zero), then integrality is set
on the integer columns. Nothing is built one Python object at a time.

What each solver reports, and what we do about it (OR-Tools 9.15):

- **HiGHS**: the proto adapter reports ``best_objective_bound`` equal to the
  objective, even after a time limit, so the bound is read from HiGHS's own
  log ("Dual bound" in the solving report), which HiGHS prints with the
  objective offset included. OR-Tools ignores the common relative-gap
  parameter for HiGHS, so the gap goes in as ``mip_rel_gap``. The adapter's
  solution-hint code writes past an empty vector (a segmentation fault), so
  the warm start goes in through HiGHS's own reader instead: a solution file
  in HiGHS's raw format (every column and row activity) named by the
  ``read_solution_file`` option. HiGHS checks it ("MIP start solution is
  feasible") and starts its search with it as the incumbent.
- **SCIP**: bound from the response (SCIP's dual bound); gap as ``limits/gap``;
  the hint becomes a SCIP partial solution.
- **CP-SAT**: only for pure-integer models (no routing or training-hour
  columns): it would otherwise scale continuous columns to integers and solve a
  different problem. Gap and workers as SAT parameters; the start is a hint.

The solver's console output goes to a temporary file (fd 1 is redirected
while it runs), which keeps ``--format json`` clean and gives us the log.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
import time

import numpy as np
import pandas as pd

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status, bound_error, relative_gap

_NAMES = {"highs": "highs", "scip": "scip", "cp-sat": "sat"}
_HIGHS_DUAL = re.compile(r"^\s*Dual bound\s+(\S+)", re.M)
_HIGHS_PRIMAL = re.compile(r"^\s*Primal bound\s+(\S+)", re.M)


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
            try:
                sys.stdout.flush()
            except Exception:  # pragma: no cover
                pass
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
    h = model.helper
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - SciPy is present wherever pandas' optional stack is
        sp = None
    if sp is not None:
        A = sp.csr_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
        A.sum_duplicates()
        h.fill_model_from_sparse_data(a.col_lo.astype(float), a.col_hi.astype(float), a.c.astype(float),
                                      a.row_lo.astype(float), a.row_hi.astype(float), A)
    else:  # pragma: no cover
        h.add_var_array_with_bounds(a.col_lo.astype(float), a.col_hi.astype(float),
                                    np.zeros(a.n_vars, bool), "")
        for i in np.flatnonzero(a.c):
            h.set_var_objective_coefficient(int(i), float(a.c[i]))
        for r in range(a.n_rows):
            h.add_linear_constraint()
            h.set_constraint_lower_bound(r, float(a.row_lo[r]))
            h.set_constraint_upper_bound(r, float(a.row_hi[r]))
        for r, c, v in zip(a.rows.tolist(), a.cols.tolist(), a.vals.tolist()):
            h.safe_add_term_to_constraint(r, c, v)
    for i in np.flatnonzero(a.integer).tolist():
        h.set_var_integrality(i, True)
    h.set_objective_offset(float(a.c0))
    return model


def _params(backend: str, gap: float, threads: int | None) -> str:
    if backend == "highs":
        return f"mip_rel_gap={gap:.12g}"  # HiGHS threads are fixed at its first start; left alone
    if backend == "scip":
        return f"limits/gap = {gap:.12g}"
    workers = int(threads) if threads else 2
    return f"relative_gap_limit:{gap:.12g} num_workers:{workers}"


def solve_ortools(mip: MIP, backend: str = "highs", time_limit: float | None = None, gap: float = 1e-6,
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
    start_path = None
    if start is not None and backend in ("scip", "cp-sat"):
        h = model.helper
        for i, v in enumerate(start.tolist()):
            h.add_hint(i, float(v))
        used_start = "hint"
    elif start is not None and backend == "highs":
        start_path = write_highs_start(a, start)
        used_start = "incumbent"
    elif start is not None:
        used_start = "unused"
    solver = mb.Solver(_NAMES[backend])
    if not solver.solver_is_supported():
        return SolveResult(Status.ERROR, backend, message=f"OR-Tools has no {backend} solver in this build")
    solver.enable_output(True)
    if time_limit is not None:
        solver.set_time_limit_in_seconds(float(time_limit))
    params = _params(backend, gap, threads)
    sol_path = None
    if backend == "highs":
        # OR-Tools reports a time-limited HiGHS run as UNKNOWN and drops its incumbent; HiGHS's own
        # solution file keeps it
        fd, sol_path = tempfile.mkstemp(prefix="gpuopt-highs-", suffix=".sol")
        os.close(fd)
        params += f"\nsolution_file={sol_path}\nwrite_solution_to_file=true"
        if start_path:
            params += f"\nread_solution_file={start_path}"
    solver.set_solver_specific_parameters(params)
    build = time.perf_counter() - t0

    t1 = time.perf_counter()
    try:
        with _capture_stdout() as out:  # HiGHS and SCIP print on fd 1; that would corrupt --format json
            status = solver.solve(model)
        highs = read_highs_solution(sol_path, a.n_vars) if sol_path else None
    finally:
        for path in (sol_path, start_path):
            if path and os.path.exists(path):
                os.unlink(path)
    elapsed = time.perf_counter() - t1
    log = out["log"]
    S = mb.SolveStatus
    if highs is not None:
        status = _highs_status(highs, status, S)
    common = dict(build_seconds=build, solve_seconds=elapsed, log=log, start=used_start)
    if status == S.INFEASIBLE:
        return SolveResult(Status.INFEASIBLE, backend, message="infeasible", **common)
    if status not in (S.OPTIMAL, S.FEASIBLE):
        msg = {S.UNBOUNDED: "unbounded", S.ABNORMAL: "abnormal", S.MODEL_INVALID: "model invalid",
               S.INVALID_SOLVER_PARAMETERS: "invalid solver parameters"}.get(status)
        if msg is None:
            msg = "no plan within the time limit" if time_limit is not None else f"solver status {status.name}"
        bound = _bound(backend, solver, log, a)  # a proven bound may exist without a plan
        return SolveResult(Status.ERROR, backend, message=msg, bound=bound, **common)
    x = highs["x"] if highs is not None and highs["x"] is not None else _values(solver, model, a.n_vars)
    x = np.where(a.integer, np.rint(x), x)
    objective = float(a.c @ x + a.c0)
    bound = _bound(backend, solver, log, a)
    if status == S.OPTIMAL and bound is None:
        bound = objective if not a.integer.any() else None
    bad = bound_error(objective, bound)
    if bad:
        return SolveResult(Status.ERROR, backend, message=bad, **common)
    if bound is not None:
        bound = min(bound, objective)  # within the solver's tolerance only (checked above)
    g = relative_gap(objective, bound)
    proven = status == S.OPTIMAL and g is not None and g <= max(gap, 1e-9) * (1 + 1e-6) + 1e-9
    st = Status.OPTIMAL if proven else Status.FEASIBLE
    return SolveResult(st, backend, objective=objective, bound=bound, gap=g, x=x,
                       message="optimal" if proven else "time limit (best plan so far, with its bound)", **common)


def write_highs_start(a: Arrays, x: np.ndarray) -> str:
    """Write ``x`` as a HiGHS raw solution file (columns ``c<i>``, rows ``r<i>`` with their activity); its path.

    HiGHS reads a start only with every row's activity, and names unnamed
    columns and rows ``c0…`` and ``r0…``, as the model from
    :func:`build_model` is.
    """
    act = a.activity(x)
    fd, path = tempfile.mkstemp(prefix="gpuopt-highs-start-", suffix=".sol")
    with os.fdopen(fd, "w") as fh:
        fh.write("Model status\nUnknown\n\n# Primal solution values\nFeasible\n")
        fh.write(f"Objective {float(a.c @ x + a.c0)!r}\n# Columns {a.n_vars}\n")
        fh.writelines(f"c{i} {v!r}\n" for i, v in enumerate(x.tolist()))
        fh.write(f"# Rows {a.n_rows}\n")
        fh.writelines(f"r{i} {v!r}\n" for i, v in enumerate(act.tolist()))
    return path


def read_highs_solution(path: str, n: int) -> dict | None:
    """HiGHS's solution file: model status, whether the primal values are feasible, the values."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    if not lines or lines[0].strip() != "Model status":
        return None
    out = {"model_status": lines[1].strip() if len(lines) > 1 else "", "feasible": False, "x": None}
    try:
        i = lines.index("# Primal solution values")
    except ValueError:
        return out
    out["feasible"] = i + 1 < len(lines) and lines[i + 1].strip() == "Feasible"
    if not out["feasible"]:
        return out
    j = next((k for k in range(i, min(i + 6, len(lines))) if lines[k].startswith("# Columns")), None)
    if j is None or int(lines[j].split()[-1]) != n:
        return out
    vals = [ln.rsplit(" ", 1)[-1] for ln in lines[j + 1: j + 1 + n]]
    out["x"] = np.array(vals, dtype=float)
    return out


def _highs_status(highs: dict, status, S):
    """The status HiGHS itself reported (OR-Tools turns a time limit with a plan into UNKNOWN)."""
    ms = highs["model_status"].lower()
    if ms == "optimal" and highs["feasible"]:
        return S.OPTIMAL
    if ms == "infeasible":
        return S.INFEASIBLE
    if highs["feasible"] and highs["x"] is not None:
        return S.FEASIBLE
    return status


def _values(solver, model, n: int) -> np.ndarray:
    if not n:
        return np.zeros(0)
    helper = getattr(solver, "_Solver__solve_helper", None)
    if helper is not None and hasattr(helper, "variable_values"):
        return np.asarray(helper.variable_values(), dtype=float)
    return np.asarray(solver.values(model.get_variables()), dtype=float)  # pragma: no cover


def _bound(backend: str, solver, log: str, a: Arrays) -> float | None:
    """The proven lower bound on the objective (constant included), or None if unknown."""
    if backend == "highs":
        if not a.integer.any():
            return None  # an LP solved to optimality: the caller uses the objective
        hit = _HIGHS_DUAL.findall(log)
        if not hit:
            return None
        try:
            v = float(hit[-1])
        except ValueError:
            return None
        return v if np.isfinite(v) else None
    raw = solver.best_objective_bound
    if raw is None or raw is pd.NA:  # no bound reported (e.g. stopped before the root LP)
        return None
    v = float(raw)
    return v if np.isfinite(v) and abs(v) < 1e19 else None  # SCIP says ±1e20 for "none yet"
