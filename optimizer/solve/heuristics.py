"""Heuristics that find a first plan when the solver finds none in its share of the time.

Only one: **relax-and-fix over time** (:func:`relax_and_fix`), the textbook
heuristic for multi-period planning models. The periods are cut into
windows of consecutive periods. Window by window, in order, a MIP is
solved in which

- the integer variables of the windows already solved are fixed at their
  values,
- those of the current window are integer,
- those of later windows are continuous (the LP relaxation of the future),

and variables without a period (reserved units per term block, owned units,
a job's configuration, a service's configurations) are integer from the
first window on. Each window's MIP is small; the last one's solution is a
feasible point of the whole model, which the driver hands to the solver as
its first incumbent. It proves nothing: its objective is an upper bound.

It fails (returns None) when a window has no plan within its time, or when
fixing the past leaves the future infeasible (the LP of later windows hid
an integer shortfall); the driver then says so in the result message.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..model.presolve import Model
from .backends import solve as backend_solve
from .feasibility import violations

#: periods per window of :func:`relax_and_fix`
WINDOW_PERIODS = 4


def period_of_variables(model: Model) -> np.ndarray:
    """Position of each variable's period in the horizon (−1 for variables without a period)."""
    pos = model.data.periods.set_index("period")["pos"]
    out = np.full(sum(b.size for b in model.mip.variables.values()), -1, dtype=np.int64)
    for b in model.mip.variables.values():
        if b.size and "period" in b.coords.columns:
            out[b.start:b.start + b.size] = b.coords["period"].map(pos).to_numpy(np.int64)
    return out


def relax_and_fix(model: Model, arrays, solver: str, time_limit: float | None, gap: float,
                  threads: int | None, window: int = WINDOW_PERIODS) -> tuple[np.ndarray | None, str]:
    """A feasible point of ``arrays`` by relax-and-fix over windows of ``window`` periods, or None.

    Returns the point and a one-line account (windows solved, or why it
    stopped). ``time_limit`` is split evenly over the windows.
    """
    t0 = time.perf_counter()
    a = arrays
    per = period_of_variables(model)
    n_periods = len(model.data.periods)
    starts = list(range(0, n_periods, window))
    x = None
    fixed = np.zeros(a.n_vars, bool)
    for k, first in enumerate(starts):
        last = first + window - 1
        integer = a.integer & ((per <= last))  # the past (fixed below), this window and the undated
        col_lo, col_hi = a.col_lo.copy(), a.col_hi.copy()
        if x is not None:
            col_lo[fixed] = x[fixed]
            col_hi[fixed] = x[fixed]
        sub = dataclasses.replace(a, integer=integer, col_lo=col_lo, col_hi=col_hi)
        left = None
        if time_limit is not None:
            left = (time_limit - (time.perf_counter() - t0)) / (len(starts) - k)
            if left <= 0.5:
                return None, f"relax-and-fix: out of time at window {k + 1} of {len(starts)}"
        r = backend_solve(model.mip, solver=solver, time_limit=left, gap=max(gap, 1e-4), threads=threads,
                          arrays=sub)
        if not r.status.has_plan:
            return None, f"relax-and-fix: window {k + 1} of {len(starts)} found no plan ({r.message})"
        x = r.x
        fixed = a.integer & (per <= last)
    if x is None or violations(a, x):
        return None, "relax-and-fix: its last point breaks the model"
    return x, f"relax-and-fix over {len(starts)} windows of {window} periods"
