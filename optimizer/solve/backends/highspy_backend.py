"""HiGHS through its official Python API (``highspy``), in process.

The model goes in whole as a column-wise sparse matrix (``passModel``), the
objective constant as the model's offset, so every objective and bound HiGHS
reports includes it. What HiGHS reports is read from its own result objects,
not from its log:

- status from ``getModelStatus``; a plan exists when the primal solution
  status is feasible (also after a time limit);
- the objective and the proven dual bound from ``getInfo``
  (``objective_function_value``, ``mip_dual_bound``);
- the **root bound**: the dual bound HiGHS reports through its MIP
  interrupt callback while the node count is still 0, the last such value
  (the bound after the root node's cuts), once the search has gone past
  the root; a search that ends at the root (solved there, or by its
  presolve) has its final bound as its root bound, and one stopped inside
  the root (a time limit, a target) has none: its last value there could be
  any early bound, below the LP's;
- a start goes in with ``setSolution`` (HiGHS checks it and uses it as its
  first incumbent).

HiGHS prints nothing (``output_flag`` off); its log lines arrive through
the logging callback and are kept in the result. ``threads`` sets HiGHS's
thread count (its scheduler is reset for it).

highspy and OR-Tools each carry a HiGHS library; loaded into one process
they clash, so the OR-Tools back ends (SCIP, CP-SAT) run in a child process
(:mod:`optimizer.solve.backends.isolated`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import numpy as np
import scipy.sparse as sp

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status, assess, clip_to_cutoff, cut_off, cut_off_message


_quiet_lock = threading.Lock()


@contextlib.contextmanager
def _quiet_stdout():
    """fd 1 to /dev/null: HiGHS prints its banner when a solver object is made (it would corrupt JSON)."""
    with _quiet_lock:
        sys.stdout.flush()
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)


def _lp(highspy, a: Arrays):
    """The HighsLp of ``a``: bounds, costs and offset, the matrix column-wise, integrality."""
    lp = highspy.HighsLp()
    lp.num_col_ = int(a.n_vars)
    lp.num_row_ = int(a.n_rows)
    lp.col_cost_ = np.asarray(a.c, dtype=np.float64)
    lp.col_lower_ = np.asarray(a.col_lo, dtype=np.float64)
    lp.col_upper_ = np.asarray(a.col_hi, dtype=np.float64)
    lp.row_lower_ = np.asarray(a.row_lo, dtype=np.float64)
    lp.row_upper_ = np.asarray(a.row_hi, dtype=np.float64)
    lp.offset_ = float(a.c0)
    m = sp.csc_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
    m.sum_duplicates()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = m.indptr.astype(np.int32)
    lp.a_matrix_.index_ = m.indices.astype(np.int32)
    lp.a_matrix_.value_ = m.data.astype(np.float64)
    if a.integer.any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in a.integer.tolist()]
    return lp


def solve_highspy(mip: MIP, time_limit: float | None = None, gap: float = 1e-6, threads: int | None = None,
                  start: np.ndarray | None = None, arrays: Arrays | None = None,
                  target: float | None = None, cutoff: float | None = None, restart: bool = True) -> SolveResult:
    """Solve with HiGHS (highspy); never raises on a solver outcome.

    ``target``: stop as soon as a plan costs at most this much (the caller
    holds a proof that nothing is cheaper, e.g. a relaxation's bound); the
    result is then ``feasible`` with HiGHS's own bound, and the caller
    applies its proof. ``cutoff``: the caller has a plan of this cost
    elsewhere, so only cheaper plans matter: HiGHS prunes every node whose
    bound reaches it from the start (its ``objective_bound``), and stops as
    soon as its global bound does. A plan found at or above the cutoff only
    shows that nothing cheaper than the cutoff exists here; the result then
    carries the cutoff as its bound. A search that proves nothing is below
    the cutoff ends "cut off", with the cutoff as its bound. ``restart``:
    HiGHS's ``mip_allow_restart`` (a restart presolves again and repeats
    the root's cuts once the root has fixed a fifth of the integers).
    """
    import highspy

    t0 = time.perf_counter()
    a = arrays if arrays is not None else mip.arrays()
    with _quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if threads:
        h.resetGlobalScheduler(True)
        h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", float(gap))
    if not restart:
        h.setOptionValue("mip_allow_restart", False)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    h.passModel(_lp(highspy, a))
    mip_model = bool(a.integer.any())
    cut = cutoff is not None and np.isfinite(cutoff) and mip_model
    if cut:
        h.setOptionValue("objective_bound", float(cutoff))
    used_start = ""
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(start, dtype=np.float64)
        sol.value_valid = True
        h.setSolution(sol)
        used_start = "incumbent"

    log: list[str] = []
    root = {"pending": None, "bound": None}  # the last node-0 bound; the root bound once past node 0
    #: set when the callback stops the search because its global bound reached the cutoff: a proof that
    #: nothing here is cheaper, which HiGHS's own status ("interrupted", a dual bound of +inf once every
    #: node is pruned) does not say
    at_cutoff = {"seen": False}

    def on_event(kind, message, data_out, data_in, user_data):
        if kind == highspy.cb.HighsCallbackType.kCallbackLogging:
            log.append(message)
        elif kind == highspy.cb.HighsCallbackType.kCallbackMipInterrupt:
            if data_out.mip_node_count == 0:
                b = float(data_out.mip_dual_bound)
                if np.isfinite(b):
                    root["pending"] = b
            elif root["bound"] is None:
                root["bound"] = root["pending"]
            primal = float(data_out.mip_primal_bound)  # +inf until the first plan
            if target is not None and np.isfinite(primal) and primal <= target:
                data_in.user_interrupt = True
            if cutoff is not None and float(data_out.mip_dual_bound) >= cutoff:
                at_cutoff["seen"] = True
                data_in.user_interrupt = True

    h.setCallback(on_event, None)
    h.startCallback(highspy.cb.HighsCallbackType.kCallbackLogging)
    if mip_model:
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("output_flag", True)  # lines reach the logging callback only
    build = time.perf_counter() - t0

    t1 = time.perf_counter()
    h.run()
    elapsed = time.perf_counter() - t1
    status = h.getModelStatus()
    info = h.getInfo()
    S = highspy.HighsModelStatus
    common = dict(build_seconds=build, solve_seconds=elapsed, log="".join(log), start=used_start,
                  root_bound=root["bound"])
    if status == S.kInfeasible:
        if cut:  # nodes at or above the cutoff were pruned: nothing here costs less than it
            return cut_off("highs", cutoff, **common)
        return SolveResult(Status.INFEASIBLE, "highs", message="infeasible", **common)
    if status == S.kModelEmpty:  # no variables (nothing to buy): the plan is empty, its cost the constant
        return SolveResult(Status.OPTIMAL, "highs", objective=float(a.c0), bound=float(a.c0), gap=0.0,
                           x=np.zeros(a.n_vars), message="optimal (empty model)", **common)
    has_plan = info.primal_solution_status == 2  # kSolutionStatusFeasible
    dual = float(info.mip_dual_bound) if mip_model else None
    bound = dual if dual is not None and np.isfinite(dual) else None
    if cut and at_cutoff["seen"]:
        bound = float(cutoff)  # the search was stopped there: its global bound had reached the cutoff
    elif cut:
        bound = clip_to_cutoff(bound, cutoff)
    if common["root_bound"] is None and mip_model and status == S.kOptimal and info.mip_node_count <= 1:
        common["root_bound"] = bound  # the search ended at its root: the root proved what the search did
    if not has_plan:
        msg = {S.kUnbounded: "unbounded", S.kUnboundedOrInfeasible: "unbounded or infeasible",
               S.kTimeLimit: "no plan within the time limit"}.get(status, f"HiGHS status {h.modelStatusToString(status)}")
        st = Status.TIME_LIMIT if status == S.kTimeLimit else Status.ERROR
        if cutoff is not None and bound is not None and bound >= cutoff:
            msg, st = cut_off_message(cutoff), Status.CUT_OFF
        return SolveResult(st, "highs", message=msg, bound=bound, **common)
    col_value = np.asarray(h.getSolution().col_value, dtype=float)
    reported = float(info.objective_function_value)
    if start is not None and mip_model and abs(float(a.c @ col_value + a.c0) - reported) > 1e-6 * max(1.0, abs(reported)):
        # HiGHS 1.16.0 (highspy) hands back the start it was given, not its own optimum, when MIP presolve
        # solves the whole model (its reported objective is the optimum's): solve again without the start
        left = None if time_limit is None else max(1.0, time_limit - elapsed)
        again = solve_highspy(mip, time_limit=left, gap=gap, threads=threads, start=None, arrays=a, target=target,
                              cutoff=cutoff, restart=restart)
        again.solve_seconds += elapsed
        again.build_seconds += build
        return again
    r = assess(a.c, a.c0, a.integer, col_value, bound, gap,
               completed=status == S.kOptimal, bound_is_objective=not mip_model and status == S.kOptimal)
    if r.error:
        return SolveResult(Status.ERROR, "highs", message=r.error, **common)
    if not mip_model and status == S.kOptimal:  # an LP: its row duals price the rows (optimizer.solve.decompose)
        common["duals"] = np.asarray(h.getSolution().row_dual, dtype=float)
    x, objective, bound, g, proven = r.x, r.objective, r.bound, r.gap, r.proven
    st = Status.OPTIMAL if proven else Status.FEASIBLE
    msg = "optimal" if proven else ("time limit (best plan so far, with its bound)" if status == S.kTimeLimit
                                    else "stopped at the target" if target is not None and objective <= target
                                    else "cut off" if cutoff is not None and bound is not None and bound >= cutoff
                                    else f"HiGHS status {h.modelStatusToString(status)}")
    return SolveResult(st, "highs", objective=objective, bound=bound, gap=g, x=x, message=msg, **common)


class WarmRelaxation:
    """The LP relaxation of one program under changing bounds, each solve started from the last one's basis.

    Strong branching solves one LP many times with a few columns fixed
    differently (the exact split's options: a configuration, a count). Passed
    to HiGHS once, each later solve starts from the basis the previous one
    ended with, and the dual simplex repairs only what the new bounds moved:
    on q3 the split's 66 option LPs take 3–10 times fewer iterations each
    than from scratch (docs/performance.md, "Strong branching from the last
    basis").

    :meth:`solve` takes arrays of the same program (the matrix and costs
    shared, as :meth:`~optimizer.model.mip.Arrays.copy_bounds` makes them)
    with any column and row bounds; arrays of another program are passed
    anew (no warm start, the same answer).
    """

    def __init__(self):
        import highspy

        self._highspy = highspy
        with _quiet_stdout():
            self._h = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        self._a = None

    def _same_program(self, b: Arrays) -> bool:
        a = self._a
        return (a is not None and b.n_rows == a.n_rows and b.n_vars == a.n_vars and b.vals is a.vals
                and b.rows is a.rows and b.cols is a.cols and b.c is a.c and b.c0 == a.c0)

    def solve(self, b: Arrays) -> SolveResult | None:
        """The LP relaxation of ``b``: ``optimal`` with its objective, or ``infeasible``; None for any other
        outcome (the caller solves it from scratch instead)."""
        t0 = time.perf_counter()
        h, hs = self._h, self._highspy
        if not self._same_program(b):
            h.passModel(_lp(hs, b.relaxed()))
            self._a = b.copy_bounds()
        else:
            a = self._a
            for lo, hi, cur_lo, cur_hi, change in ((b.col_lo, b.col_hi, a.col_lo, a.col_hi, h.changeColsBounds),
                                                   (b.row_lo, b.row_hi, a.row_lo, a.row_hi, h.changeRowsBounds)):
                moved = np.flatnonzero((lo != cur_lo) | (hi != cur_hi))
                if len(moved):
                    change(len(moved), moved.astype(np.int32), np.asarray(lo[moved], dtype=np.float64),
                           np.asarray(hi[moved], dtype=np.float64))
                    cur_lo[moved] = lo[moved]
                    cur_hi[moved] = hi[moved]
        h.run()
        status = h.getModelStatus()
        S = hs.HighsModelStatus
        seconds = time.perf_counter() - t0
        if status == S.kOptimal:
            value = float(h.getInfo().objective_function_value)
            return SolveResult(Status.OPTIMAL, "highs", objective=value, bound=value, gap=0.0,
                               solve_seconds=seconds, message="optimal")
        if status == S.kInfeasible:
            return SolveResult(Status.INFEASIBLE, "highs", message="infeasible", solve_seconds=seconds)
        return None
