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
from .decompose import Split, sub_arrays, split_by_period
from .feasibility import objective, violations

#: the relative gap each period's MIP is solved to in a pass over the periods (:func:`polish_periods`): a pass
#: is where a period's replicas, machines and training are chosen together to their optimum
PERIOD_GAP = 1e-4
#: the relative gap each period's MIP is solved to in a re-commit (:func:`recommit`). A re-commit only fits the
#: plan to new commitments; the pass over the periods after every cycle of rounds solves each period again to
#: :data:`PERIOD_GAP`. Solved to :data:`PERIOD_GAP`, a period runs to its share of the time without proving
#: (bench x1 at 60 s: 23 s for the re-commit, against 8-10 s at 5 %, for a plan 0.3 % dearer; at 600 s 197 s
#: against 10 s. The time goes to the rounds and passes; the final plans are within run-to-run variation but
#: for standard at 600 s, 6.78 % against 7.01 %; docs/performance.md, "The re-commit to a gap", 2026-11-28)
RECOMMIT_GAP = 0.05


@dataclass
class PeriodRestriction:
    """One period's MIP with the rest of the plan fixed, as plain data for an executor."""

    period: str
    columns: np.ndarray
    arrays: Arrays
    start: np.ndarray
    time_limit: float | None
    rows: np.ndarray | None = None  # the model's rows the restriction keeps, in its order
    gap: float = PERIOD_GAP  # the relative gap the period's MIP is solved to


def restriction(split: Split, A_csc, p: int, x: np.ndarray, time_limit: float | None,
                gap: float = PERIOD_GAP) -> PeriodRestriction:
    """Period ``p``'s columns free, every other column fixed at ``x`` (its share of each row moved to the bounds),
    to be solved to the relative ``gap``."""
    a, A = split.arrays, split.A
    cols = np.flatnonzero(split.column_part == p)
    rows = np.unique(A_csc[:, cols].indices)
    rest = x.copy()
    rest[cols] = 0.0
    shift = A[rows] @ rest
    sub = sub_arrays(a, A, rows, cols, a.c[cols])
    sub = dataclasses.replace(sub, row_lo=a.row_lo[rows] - shift, row_hi=a.row_hi[rows] - shift)
    return PeriodRestriction(split.parts[p], cols, sub, x[cols].copy(), time_limit, rows, gap)


def solve_restriction(task: PeriodRestriction) -> dict:
    """Solve one period's restriction (HiGHS) to its gap, started from the plan; its columns' values if it found a
    plan."""
    from .backends.highspy_backend import solve_highspy

    t0 = time.perf_counter()
    r = solve_highspy(None, time_limit=task.time_limit, gap=task.gap, arrays=task.arrays, start=task.start)
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
    n = len(split.parts)
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
                cand[split.column_part == p] = r["x"]
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


def recommit(model: Model, a: Arrays, x: np.ndarray, commitments: dict[str, np.ndarray], time_limit: float,
             gap: float = RECOMMIT_GAP) -> tuple[np.ndarray | None, dict]:
    """The plan ``x`` of ``a`` with its commitments set to ``commitments``, every period re-solved against them.

    ``commitments`` maps a family of columns without a period
    (``units-reserved``, ``units-owned-new``) to its new values, one per
    column of the family. With those counts held, the periods are re-solved
    one after the other, each with every other column at the plan's value
    so far: its replicas, units running and training fitted to the new
    commitments. Until every period is, the plan may break rows (a period
    still using reserved units that are gone), so a period's new values are
    kept whenever its restriction has a plan, not only when cheaper; always
    in order, because each period must see the ones before it. Each
    period's MIP is solved to the relative ``gap`` (:data:`RECOMMIT_GAP`),
    or until its share of ``time_limit``.

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
    n = len(split.parts)
    record = {"periods": n, "before": objective(a, x), "after": None}
    for p in range(n):
        left = time_limit - (time.perf_counter() - t0)
        # no floor under a period's share: a half-done pass is no plan, and the pass must end in its time
        r = solve_restriction(restriction(split, A_csc, p, new, left / (n - p), gap)) if left > 0 else {"x": None}
        if r["x"] is None:
            return None, {**record, "seconds": time.perf_counter() - t0}
        new[split.column_part == p] = r["x"]
    if violations(a, new, limit=1):
        return None, {**record, "seconds": time.perf_counter() - t0}
    return new, {**record, "after": objective(a, new), "seconds": time.perf_counter() - t0}


def build_by_periods(model: Model, a: Arrays, x: np.ndarray, time_limit: float, gap: float = 0.01
                     ) -> tuple[np.ndarray | None, dict]:
    """A plan of ``a`` made one period after the other from ``x``, a point that is no plan yet.

    For a model too large for any search of the whole (its LP relaxation
    alone takes longer than the time limit): ``x`` is a relaxation's point
    whose choices without a period are made whole (the configurations, each
    job's configuration, the commitments rounded up) and whose other columns
    are fractional. Period by period, in order, the period's MIP is solved
    with every other column fixed (:func:`restriction`), to ``gap`` within
    its share of the time. A row linking periods sees the periods before at
    their new values and not the periods after, which are solved in turn
    (at ``x``'s values, a month's mean spread over its weeks, a falling
    month's last weeks would hold more replicas than the stability sums
    leave them), but for one side of one family:

    A job's progress over the periods (``training-progress``, one row per
    job and configuration, Σ rate·hours = chosen). A period does at least
    what the periods after it leave undone at ``x``'s values (at most what
    its most productive placement can do, :func:`_most_progress`) and at
    most what the job still needs; where that lower side has no plan, the
    period is solved again without it and the periods after make the
    difference up. The last period of the job's window has both sides
    equal: the job ends there.

    After each period, what costs nothing there is cut back to what its
    plan needs, since the stability sums over the horizon would otherwise
    lack it later: its traffic to its demand (:func:`_routed_to_demand`)
    and its replicas to the fewest (:func:`_fewest_replicas`).

    Returns the plan, or None when a period has no plan in its share of the
    time (or the whole breaks a row); and a record: ``periods``,
    ``relaxed`` (periods solved again without the lower side), ``after``
    (the plan's cost, None without a plan), ``seconds``.
    """
    from .backends.highspy_backend import solve_highspy

    t0 = time.perf_counter()
    new = np.asarray(x, dtype=float).copy()
    split = split_by_period(model, a)
    A_csc = split.A.tocsc()
    n = len(split.parts)
    progress = np.zeros(a.n_rows, bool)
    block = model.mip.constraints.get("training-progress")
    if block is not None:
        progress[block.ids] = True
    record = {"periods": n, "relaxed": 0, "after": None}
    for p in range(n):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            return None, {**record, "seconds": time.perf_counter() - t0}
        task = restriction(split, A_csc, p, new, left / (n - p), gap)
        sub = task.arrays
        here = progress[task.rows]
        # the periods after this one count only on the lower side of the progress rows (see the docstring)
        after = split.A[task.rows] @ np.where(split.column_part > p, new, 0.0)
        lo = np.where(here, np.minimum(sub.row_lo, _most_progress(sub)), sub.row_lo + after)
        sub = dataclasses.replace(sub, row_lo=lo, row_hi=sub.row_hi + after)
        r = solve_highspy(None, time_limit=task.time_limit, gap=gap, arrays=sub)
        if not r.status.has_plan and here.any() and time_limit - (time.perf_counter() - t0) > 0:
            lo = sub.row_lo.copy()
            lo[here] = -np.inf  # the periods after make up what this one cannot do
            record["relaxed"] += 1
            r = solve_highspy(None, time_limit=max(0.5, task.time_limit - r.solve_seconds), gap=gap,
                              arrays=dataclasses.replace(sub, row_lo=lo))
        if not r.status.has_plan:
            return None, {**record, "seconds": time.perf_counter() - t0}
        new[task.columns] = r.x
        _routed_to_demand(model, split, p, new)
        _fewest_replicas(model, task, sub, new)
    if violations(a, new, limit=1):
        return None, {**record, "seconds": time.perf_counter() - t0}
    return new, {**record, "after": objective(a, new), "seconds": time.perf_counter() - t0}


def _most_progress(sub: Arrays) -> np.ndarray:
    """Per row of ``sub``, the most its one most productive column can add: max over its columns of
    coefficient × upper bound (for a progress row, the job's hours in one placement at most the period's);
    what a period can do of a job whatever the periods before left it."""
    gain = np.where(sub.vals > 0, sub.vals * sub.col_hi[sub.cols], 0.0)
    most = np.zeros(sub.n_rows)
    np.maximum.at(most, sub.rows, gain)
    return most


def _fewest_replicas(model: Model, task: PeriodRestriction, sub: Arrays, x: np.ndarray) -> None:
    """The period's replicas cut to the fewest its plan needs (every other column held), in ``x``.

    Replicas cost nothing of their own (their units do), so a period's MIP
    may hold more than its traffic needs in units it pays for anyway; but
    the stability rows cap each configuration's replicas summed over the
    horizon, and what one period holds too many, a later one lacks (bench
    ×1: the 21st week had no plan). A MIP of the period's replicas alone,
    counting replicas, every other column at its value, finds the fewest;
    the plan's cost does not change.
    """
    from .backends.highspy_backend import solve_highspy

    block = model.mip.variables.get("inference-replicas")
    if block is None or not block.size:
        return
    mine = np.isin(task.columns, block.ids)
    if not mine.any():
        return
    held = x[task.columns]
    lo = np.where(mine, sub.col_lo, held)  # never more replicas than the plan has: the plan itself is a solution
    r = solve_highspy(None, gap=1e-9, time_limit=task.time_limit,
                      arrays=dataclasses.replace(sub, col_lo=lo, col_hi=held, c=mine.astype(float)))
    if r.status.has_plan:
        x[task.columns[mine]] = np.round(r.x[mine])


def _routed_to_demand(model: Model, split, p: int, x: np.ndarray) -> None:
    """Cut the traffic period ``p`` routes beyond its demand back to it, in ``x``.

    Routed traffic costs nothing, so a period's MIP may route more than its
    demand asks; but the stability rows cap each configuration's traffic
    summed over the horizon at the class's demand, and what one period
    routes too much, a later one lacks (bench ×1: the fourth week had no
    plan). Each demand row's routing is scaled down to the demand, which
    every other row allows (a configuration's traffic over its replicas'
    capacity only falls).
    """
    demand = model.mip.constraints.get("inference-demand")
    routing = model.mip.variables.get("inference-routing")
    if demand is None or routing is None or not routing.size:
        return
    a, A = split.arrays, split.A
    is_routing = np.zeros(a.n_vars, bool)
    is_routing[routing.ids] = True
    rows = demand.ids
    sub = A[rows]
    coo = sub.tocoo()
    mine = is_routing[coo.col] & (split.column_part[coo.col] == p)
    if not mine.any():
        return
    routed = np.zeros(len(rows))
    np.add.at(routed, coo.row[mine], coo.data[mine] * x[coo.col[mine]])
    need = a.row_lo[rows]
    over = (routed > need + 1e-9) & np.isfinite(need)
    factor = np.where(over, need / np.where(routed > 0, routed, 1.0), 1.0)
    cols, rws = coo.col[mine], coo.row[mine]
    x[cols] = x[cols] * factor[rws]
