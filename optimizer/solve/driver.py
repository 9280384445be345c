"""The solve driver: how a time limit is spent on one built model.

One place decides it, in this order:

1. the **LP relaxation** (integrality dropped): its optimum is the first
   proven bound (``relaxation_bound``), whatever happens next;
2. an optional **heuristic start** (``start``: a feasible vector from
   :mod:`optimizer.solve.heuristics`), checked against every row;
3. the **back end** (:func:`optimizer.solve.backends.solve`) with every second
   that is left, the start as its first incumbent.

The solver is never skipped: if it finds nothing better than the start,
the start is the plan and the message says so. The time limit is the
whole run's wall clock (docs/performance.md, "Time limit"): the caller
passes the seconds already spent, and :data:`AFTER_SOLVE_PER_BUILD` times
as many are kept for what follows the solve (plan tables and audit).
"""

from __future__ import annotations

import time

import numpy as np

from ..model.presolve import Model
from .backends import BACKENDS, DEFAULT_SOLVER, solve as backend_solve
from .result import SolveResult, Status, relative_gap

#: what follows the solve (plan tables, audit) takes about as long as the build before it
#: (×0.25–×4: 1.0–1.45 times; docs/performance.md); 1.5 keeps the wall clock inside the limit
AFTER_SOLVE_PER_BUILD = 1.5
#: the solver always gets at least this share of the limit, however slow the build
MIN_SOLVER_SHARE = 0.25


def solve_budget(time_limit: float | None, spent: float) -> float | None:
    """Seconds of ``time_limit`` (a wall-clock budget for the whole run) left to the solve.

    ``spent`` seconds went on candidates, presolve and the model build;
    :data:`AFTER_SOLVE_PER_BUILD` times as many are kept for what follows.
    None: no limit.
    """
    if time_limit is None:
        return None
    return max(time_limit - (1.0 + AFTER_SOLVE_PER_BUILD) * spent, MIN_SOLVER_SHARE * time_limit)


def relaxation(model: Model, solver: str = DEFAULT_SOLVER, time_limit: float | None = None) -> SolveResult:
    """The LP relaxation of ``model`` (every integrality dropped), solved by the back end ``solver``.

    CP-SAT solves no LP; HiGHS does it for that back end.
    """
    a = model.mip.arrays()
    a.integer = np.zeros_like(a.integer)
    key = "highs" if solver == "cp-sat" else solver
    return BACKENDS[key](model.mip, time_limit=time_limit, gap=1e-9, threads=None, start=None, arrays=a)


def solve(model: Model, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, gap: float = 1e-6,
          threads: int | None = None, start: np.ndarray | None = None) -> SolveResult:
    """Solve ``model`` within ``time_limit`` seconds of wall clock (see the module docstring).

    Returns the back end's result with ``relaxation_bound`` set; the bound
    reported is never below the relaxation's.
    """
    t0 = time.perf_counter()
    lp = relaxation(model, solver, time_limit)
    lp_bound = lp.objective if lp.status == Status.OPTIMAL else None
    if lp.status == Status.INFEASIBLE:
        result = SolveResult(Status.INFEASIBLE, solver, message="no plan meets every constraint (the relaxation "
                             "is infeasible)", solve_seconds=lp.solve_seconds, build_seconds=lp.build_seconds)
        return result
    left = None if time_limit is None else max(1.0, time_limit - (time.perf_counter() - t0))
    result = backend_solve(model.mip, solver=solver, time_limit=left, gap=gap, threads=threads, start=start)
    result.relaxation_bound = lp_bound
    result.solve_seconds += lp.solve_seconds
    if lp_bound is not None and result.status.has_plan and (result.bound is None or result.bound < lp_bound):
        # a limit hit before the solver's own root LP finished: the relaxation is still a proof
        result.bound = lp_bound
        result.gap = relative_gap(result.objective, lp_bound)
    return result
