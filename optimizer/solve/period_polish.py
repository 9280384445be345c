"""Fix-and-optimize by period: each period re-solved whole with every other period held at the plan.

A heuristic for large models under a time limit (the solve driver's
fixed-configuration path, docs/performance.md). Given a plan ``x``, the
restriction to period p keeps the columns of period p free (replicas,
routing, units running, training runs and hours, replicas started) and
fixes every other column, of the other periods and without a period
(reservations, servers, configurations), at its value in ``x``; the fixed
columns' share of each row moves to its bounds. What is left is one small
MIP per period, started from the plan, so a period never returns a dearer
plan of its own columns. It catches what the family rounds of
:mod:`optimizer.solve.polish` cannot: a period's replicas, machines and
training placement chosen together and to optimality.

Periods are independent given the rest of the plan, apart from the rows
that link them (training progress, stability sums, replica starts, the
budget). Where they run:

- **one after the other** (inline executor): each period sees the periods
  re-solved before it, so every step is a plan of the whole model;
- **side by side** (local processes or Dask): every period is re-solved
  from the same plan; the new periods are then taken together if the
  combined plan meets every row, else one by one, largest gain first, each
  kept only if the plan still meets every row.

The same restrictions also **re-commit** a plan (:func:`recommit`): its
commitments (reserved units, servers bought: the columns without a period
that every period's capacity rows use) are set to new counts, which the
plan may then break, and each period in turn is re-solved against them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from ..model.mip import Arrays
from ..model.presolve import Model
from .decompose import PeriodSplit, sub_arrays, split_by_period
from .feasibility import objective, violations


@dataclass
class PeriodRestriction:
    """One period's MIP with the rest of the plan fixed, as plain data for an executor."""

    period: str
    columns: np.ndarray
    arrays: Arrays
    start: np.ndarray
    time_limit: float | None


def restriction(split: PeriodSplit, A_csc, p: int, x: np.ndarray, time_limit: float | None) -> PeriodRestriction:
    """Period ``p``'s columns free, every other column fixed at ``x`` (its share of each row moved to the bounds)."""
    a, A = split.arrays, split.A
    cols = np.flatnonzero(split.column_period == p)
    rows = np.unique(A_csc[:, cols].indices)
    rest = x.copy()
    rest[cols] = 0.0
    shift = A[rows] @ rest
    sub = sub_arrays(a, A, rows, cols, a.c[cols])
    sub = dataclasses.replace(sub, row_lo=a.row_lo[rows] - shift, row_hi=a.row_hi[rows] - shift)
    return PeriodRestriction(split.periods[p], cols, sub, x[cols].copy(), time_limit)


def solve_restriction(task: PeriodRestriction) -> dict:
    """Solve one period's restriction (HiGHS), started from the plan; its columns' values if it found a plan."""
    from .backends.highspy_backend import solve_highspy

    t0 = time.perf_counter()
    r = solve_highspy(None, time_limit=task.time_limit, gap=1e-4, arrays=task.arrays, start=task.start)
    return {"period": task.period, "x": r.x if r.status.has_plan else None,
            "objective": r.objective, "status": r.status.value, "seconds": time.perf_counter() - t0}


def polish_periods(model: Model, a: Arrays, x: np.ndarray, time_limit: float, executor=None
                   ) -> tuple[np.ndarray, dict]:
    """One pass of period rounds over the plan ``x`` of ``a`` within ``time_limit`` seconds.

    Returns the best plan (``x`` itself when nothing was cheaper) and a
    record: ``periods``, ``improved`` (periods whose new values were kept),
    ``before``, ``after``, ``seconds``.
    """
    from ..executors import Inline

    t0 = time.perf_counter()
    executor = executor or Inline()
    split = split_by_period(model, a)
    A_csc = split.A.tocsc()
    n = len(split.periods)
    best = np.asarray(x, dtype=float).copy()
    before = objective(a, best)
    kept = 0
    if isinstance(executor, Inline):
        for p in range(n):
            left = time_limit - (time.perf_counter() - t0)
            if left < 0.5:
                break
            r = solve_restriction(restriction(split, A_csc, p, best, max(0.5, left / (n - p))))
            if r["x"] is not None:
                cand = best.copy()
                cand[split.column_period == p] = r["x"]
                if objective(a, cand) < objective(a, best) - 1e-9 and not violations(a, cand, limit=1):
                    best, kept = cand, kept + 1
    else:
        waves = max(1, math.ceil(n / executor.workers))
        each = max(0.5, 0.9 * time_limit / waves)
        tasks = [restriction(split, A_csc, p, best, each) for p in range(n)]
        futures = [executor.submit(solve_restriction, t) for t in tasks]
        found = []
        for p, fut in enumerate(futures):
            try:
                r = fut.result(timeout=max(0.0, time_limit - (time.perf_counter() - t0)))
            except TimeoutError:  # still running there: that period keeps the plan's values
                fut.cancel()
                continue
            if r["x"] is not None:
                gain = float(a.c[tasks[p].columns] @ (best[tasks[p].columns] - r["x"]))
                if gain > 1e-9:
                    found.append((gain, p, r["x"]))
        together = best.copy()
        for _, p, xp in found:
            together[tasks[p].columns] = xp
        if found and not violations(a, together, limit=1):
            best, kept = together, len(found)
        else:  # the periods' changes break a linking row together: take them one at a time
            for _, p, xp in sorted(found, key=lambda t: -t[0]):
                cand = best.copy()
                cand[tasks[p].columns] = xp
                if not violations(a, cand, limit=1):
                    best, kept = cand, kept + 1
    return best, {"periods": n, "improved": kept, "before": before, "after": objective(a, best),
                  "seconds": time.perf_counter() - t0}


def recommit(model: Model, a: Arrays, x: np.ndarray, commitments: dict[str, np.ndarray], time_limit: float
             ) -> tuple[np.ndarray | None, dict]:
    """The plan ``x`` of ``a`` with its commitments set to ``commitments``, every period re-solved against them.

    ``commitments`` maps a family of columns without a period
    (``units-reserved``, ``units-owned-new``) to its new values, one per
    column of the family. With those counts held, the periods are re-solved
    one after the other, each with every other column at the plan's value
    so far: its replicas, units running and training fitted to the new
    commitments. Until every period is, the plan may break rows (a period
    still using reserved units that are gone), so a period's new values are
    kept whenever its restriction has a plan, not only when cheaper; always
    in order, because each period must see the ones before it.

    Returns the new plan, or None when a period's restriction has no plan
    in its share of ``time_limit`` or the result breaks a row of ``a`` (a
    row linking periods); and a record: ``periods``, ``before`` (the cost
    of ``x``), ``after`` (None without a plan), ``seconds``.
    """
    t0 = time.perf_counter()
    mip = model.mip
    new = np.asarray(x, dtype=float).copy()
    for family, values in commitments.items():
        new[mip.variables[family].ids] = values
    split = split_by_period(model, a)
    A_csc = split.A.tocsc()
    n = len(split.periods)
    record = {"periods": n, "before": objective(a, x), "after": None}
    for p in range(n):
        left = time_limit - (time.perf_counter() - t0)
        # no floor under a period's share: a half-done pass is no plan, and the pass must end in its time
        r = solve_restriction(restriction(split, A_csc, p, new, left / (n - p))) if left > 0 else {"x": None}
        if r["x"] is None:
            return None, {**record, "seconds": time.perf_counter() - t0}
        new[split.column_period == p] = r["x"]
    if violations(a, new, limit=1):
        return None, {**record, "seconds": time.perf_counter() - t0}
    return new, {**record, "after": objective(a, new), "seconds": time.perf_counter() - t0}
