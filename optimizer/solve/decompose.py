"""A proven bound from the periods solved apart: a Lagrangian relaxation of what links them.

The model is nearly a set of per-period models. What links the periods:

- **linking rows**, whose columns lie in two or more periods: training
  progress (a job's hours over its window), the stability rows (a
  configuration's replicas over the horizon), replica starts (p against
  p − 1) and the budget;
- **global columns**, which have no period: reserved units of a term
  block, servers bought, a job's configuration, a request class's
  configuration. They appear in the rows of every period they serve (the
  capacity of the period's units, a run only on the chosen configuration).

Copy every global column g into each period p whose rows use it (g_p, with
g_p = g) and price the links: the linking rows with multipliers y (y ≥ 0 on
a ``≥`` row, y ≤ 0 on a ``≤`` row, free on an equality) and each copy
equation with a multiplier μ_{p,g}. What remains falls apart into

- one **period model** per period p: its own columns at cost c − A_Lᵀy (the
  linking rows' prices folded into the costs), the copies g_p at cost
  μ_{p,g}, its own rows, every integrality;
- a **master** over the global columns at cost c_g − A_L,gᵀy − Σ_p μ_{p,g},
  with the rows that hold only global columns (one configuration per job,
  at most N configurations per request class);

and the bound is the constant c0 + Σ_L y·rhs plus the master's optimum plus
every period model's optimum. For any such multipliers this is a lower
bound on the model's optimum (every plan of the model is a point of the
relaxation, priced no higher); a period model stopped on its time limit
contributes its own proven bound, or its LP's. This module takes the
multipliers from the LP relaxation's duals, y as they are and μ_{p,g} =
Σ_{rows r of p} A_{r,g}·y_r: with integrality dropped every piece is then
priced as in the LP and the bound equals the LP optimum (LP duality; the
tests check it), and with integrality kept each period model rounds its own
units, replicas and clusters, so the bound is at least the LP's and
usually above it (q3: +32 %; bench ×1: +1.1 %; docs/performance.md).

The period models are independent: they run on an executor
(:mod:`optimizer.executors`: in this process, local processes, or a Dask
cluster) while the driver searches for a plan.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..model.mip import Arrays
from ..model.presolve import Model
from .result import SolveResult, Status


@dataclass
class PeriodSplit:
    """Which rows and columns belong to which period (see the module docstring)."""

    arrays: Arrays
    A: sp.csr_matrix
    periods: list[str]
    column_period: np.ndarray  # position of each column's period, −1 for a global column
    local_rows: list[np.ndarray]  # per period: the rows whose period columns are all in it
    linking_rows: np.ndarray  # rows with columns of two or more periods
    master_rows: np.ndarray  # rows with global columns only
    global_columns: np.ndarray


def split_by_period(model: Model, arrays: Arrays | None = None) -> PeriodSplit:
    """Classify the model's columns by period and its rows by the periods their columns lie in."""
    mip = model.mip
    a = arrays if arrays is not None else mip.arrays()
    P = model.data.periods
    pos = P.set_index("period")["pos"]
    col_p = np.full(a.n_vars, -1, dtype=np.int64)
    for b in mip.variables.values():
        if b.size and "period" in b.coords.columns:
            col_p[b.start:b.start + b.size] = b.coords["period"].map(pos).to_numpy(np.int64)
    A = sp.csr_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
    A.sum_duplicates()
    coo = A.tocoo()
    tp = col_p[coo.col]
    has = tp >= 0
    lo = np.full(a.n_rows, np.iinfo(np.int64).max)
    hi = np.full(a.n_rows, -1, dtype=np.int64)
    np.minimum.at(lo, coo.row[has], tp[has])
    np.maximum.at(hi, coo.row[has], tp[has])
    local = (hi >= 0) & (lo == hi)
    n = len(P)
    return PeriodSplit(
        arrays=a, A=A, periods=P.sort_values("pos")["period"].astype(str).tolist(), column_period=col_p,
        local_rows=[np.flatnonzero(local & (hi == p)) for p in range(n)],
        linking_rows=np.flatnonzero((hi >= 0) & (lo != hi)),
        master_rows=np.flatnonzero(hi < 0),
        global_columns=np.flatnonzero(col_p < 0))


def sign_feasible(y: np.ndarray, row_lo: np.ndarray, row_hi: np.ndarray) -> np.ndarray:
    """Row multipliers that price each row only in the direction it binds.

    With reduced costs c − Aᵀy (HiGHS's convention), y_r > 0 prices a row
    at its lower bound and y_r < 0 at its upper bound; a sign whose bound is
    infinite is set to 0 (a solver's round-off, never a price).
    """
    y = np.where((y > 0) & ~np.isfinite(row_lo), 0.0, y)
    return np.where((y < 0) & ~np.isfinite(row_hi), 0.0, y)


def _rhs(y: np.ndarray, row_lo: np.ndarray, row_hi: np.ndarray) -> np.ndarray:
    """The bound each priced row is priced at (its lower bound where y > 0, its upper where y < 0)."""
    return np.where(y > 0, np.where(np.isfinite(row_lo), row_lo, 0.0),
                    np.where(y < 0, np.where(np.isfinite(row_hi), row_hi, 0.0), 0.0))


def sub_arrays(a: Arrays, A: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray, cost: np.ndarray) -> Arrays:
    """The program of ``rows`` × ``cols`` of ``a`` with objective ``cost`` (no constant)."""
    S = A[rows][:, cols].tocoo()
    return Arrays(n_vars=len(cols), n_rows=len(rows), rows=S.row.astype(np.int64), cols=S.col.astype(np.int64),
                  vals=S.data.astype(float), row_lo=a.row_lo[rows], row_hi=a.row_hi[rows], col_lo=a.col_lo[cols],
                  col_hi=a.col_hi[cols], integer=a.integer[cols], c=np.asarray(cost, float), c0=0.0,
                  var_names=[], row_names=[])


@dataclass
class PeriodTask:
    """One period model, as plain data an executor can ship to another process or machine."""

    period: str
    columns: np.ndarray  # the model's columns, in the order of ``arrays``' columns
    arrays: Arrays
    time_limit: float | None
    gap: float
    #: wall-clock time (``time.time()``) by which the model must have ended, wherever it runs: one that starts
    #: late gets what is left of its limit (before, the last model beside a search could run its whole share
    #: past the caller's limit, and the caller waited for it: bench x16 ended 7 s past its 600)
    deadline: float | None = None


def solve_period(task: PeriodTask) -> dict:
    """Solve one period model with HiGHS; its proven bound (the MIP's, else its LP's) and how it ended.

    Runs wherever the executor puts it; HiGHS only (highspy), so no
    OR-Tools library is loaded beside it.
    """
    from .backends.highspy_backend import solve_highspy

    t0 = time.perf_counter()
    limit = task.time_limit
    if task.deadline is not None:
        left = task.deadline - time.time()
        limit = left if limit is None else min(limit, left)
    if limit is not None and limit < 0.05:  # no time left for its search: its LP still proves
        r = SolveResult(Status.TIME_LIMIT, "highs")
    else:
        r = solve_highspy(None, time_limit=limit, gap=task.gap, arrays=task.arrays)
    bound, how = (r.bound, "mip") if r.bound is not None and np.isfinite(r.bound) else (None, "")
    if r.status == Status.INFEASIBLE:
        how = "infeasible"
    if bound is None and how != "infeasible":  # stopped before a bound, or failed: the LP still proves
        lp = solve_highspy(None, gap=1e-9, arrays=task.arrays.relaxed())
        if lp.status == Status.OPTIMAL:
            bound, how = lp.objective, "lp"
    return {"period": task.period, "bound": bound, "bound_from": how, "status": r.status.value,
            "objective": r.objective, "seconds": time.perf_counter() - t0}


@dataclass
class DecompositionBound:
    """The bound of the periods solved apart, and how each period model ended.

    ``bound`` is None when some period model has no bound at all (an
    unbounded or failed model); ``periods`` has one row per period:
    ``period, bound, bound_from`` (``mip``: its own proven bound, ``lp``: its
    LP relaxation's, ``infeasible``), ``status, seconds``. ``master`` is the
    master's optimum (None if it did not solve: then no bound).
    """

    bound: float | None
    periods: pd.DataFrame
    master: float | None
    constant: float
    workers: int
    seconds: float

    @property
    def complete(self) -> bool:
        """Every period model proved its bound as a MIP (none fell back to its LP)."""
        return bool(len(self.periods)) and bool((self.periods["bound_from"] == "mip").all())


class Pending:
    """Period models handed to an executor; :meth:`collect` sums their bounds."""

    def __init__(self, tasks: list[PeriodTask], futures: list, constant: float, master: float | None,
                 workers: int, lp_values: list[float] | None = None):
        self.tasks, self.futures = tasks, futures
        self.constant, self.master, self.workers = constant, master, workers
        self.lp_values = lp_values
        self.t0 = time.perf_counter()

    def collect(self, timeout: float | None = None) -> DecompositionBound:
        """Wait up to ``timeout`` seconds in all; a period model not done by then counts its LP bound.

        With ``lp_values`` (each period's part of the LP optimum whose duals
        price the links: its LP optimum at those prices, by complementary
        slackness), a period counts the better of its own bound and that part,
        so the sum is never below the LP's optimum.
        """
        deadline = None if timeout is None else time.perf_counter() + timeout
        rows = []
        for i, (task, fut) in enumerate(zip(self.tasks, self.futures)):
            left = None if deadline is None else max(0.0, deadline - time.perf_counter())
            try:
                row = fut.result(timeout=left)
                if (self.lp_values is not None and row["bound"] is not None and row["bound_from"] == "mip"
                        and row["bound"] < self.lp_values[i]):
                    # a model stopped before its root LP reports a weak bound of its own (bench x1 with
                    # --workers 2 at 60 s: the sum was -2.4M against an LP of 12.3M); its LP part is a
                    # proof too, and the stronger of the two counts
                    row = {**row, "bound": self.lp_values[i], "bound_from": "lp"}
                rows.append(row)
            except TimeoutError:  # concurrent.futures' and Dask's: the model is still running there
                fut.cancel()
                if self.lp_values is not None:
                    row = {"period": task.period, "bound": self.lp_values[i], "bound_from": "lp", "objective": None,
                           "seconds": 0.0}
                else:
                    relaxed = dataclasses.replace(task, arrays=task.arrays.relaxed(), time_limit=None)
                    row = solve_period(relaxed)
                    row["bound_from"] = "lp" if row["bound"] is not None else row["bound_from"]
                row["status"] = "not finished"
                rows.append(row)
        df = pd.DataFrame(rows, columns=["period", "bound", "bound_from", "status", "objective", "seconds"])
        infeasible = (df["bound_from"] == "infeasible").any()
        if infeasible:
            total = math.inf
        elif df["bound"].isna().any() or self.master is None:
            total = None
        else:
            total = self.constant + self.master + float(df["bound"].sum())
        return DecompositionBound(total, df, self.master, self.constant, self.workers,
                                  time.perf_counter() - self.t0)


@dataclass
class Prices:
    """Every piece of the Lagrangian relaxation priced (see the module docstring).

    ``constant``: Σ y·rhs of the priced linking rows (the model's constant
    not included); ``cost``: the period columns' costs c − A_Lᵀy; ``mu``:
    per period, the copies' costs μ_{p,g} (zero but at the global columns);
    ``master_cost``: the global columns' costs in the master,
    c_g − A_L,gᵀy − Σ_p μ_{p,g}.
    """

    constant: float
    cost: np.ndarray
    mu: list[np.ndarray]
    master_cost: np.ndarray

    @classmethod
    def of(cls, split: PeriodSplit, y: np.ndarray, mu: list[np.ndarray]) -> "Prices":
        """The pieces' costs at linking-row multipliers ``y`` (of the right sign, zero off the linking rows)
        and copy prices ``mu``."""
        a, A = split.arrays, split.A
        constant = float(y @ _rhs(y, a.row_lo, a.row_hi))
        cost = a.c - A.T @ y
        g = split.global_columns
        master_cost = cost.copy()
        for m in mu:
            master_cost[g] -= m[g]
        return cls(constant, cost, mu, master_cost)


def multipliers(split: PeriodSplit, duals: np.ndarray) -> Prices:
    """Every piece priced at the row multipliers ``duals`` (the LP relaxation's; see the module docstring):
    the linking rows at their own, each copy μ_{p,g} at what period p's rows charge for column g."""
    a, A = split.arrays, split.A
    y = sign_feasible(np.asarray(duals, float), a.row_lo, a.row_hi)
    yL = np.zeros(a.n_rows)
    yL[split.linking_rows] = y[split.linking_rows]
    mu = []
    for rows in split.local_rows:
        yp = np.zeros(a.n_rows)
        yp[rows] = y[rows]
        mu.append(A.T @ yp)  # μ_{p,g} for the global columns; the period's own columns ignore it
    return Prices.of(split, yL, mu)


def period_tasks(split: PeriodSplit, prices: Prices, time_limit: float | None, gap: float):
    """The period models at ``prices`` and the rest of the bound (constant and master optimum)."""
    from .backends.highspy_backend import solve_highspy

    a, A = split.arrays, split.A
    tasks = []
    for p, rows in enumerate(split.local_rows):
        cols = np.union1d(np.flatnonzero(split.column_period == p), A[rows].indices)
        c = np.where(split.column_period[cols] == p, prices.cost[cols], prices.mu[p][cols])
        tasks.append(PeriodTask(split.periods[p], cols, sub_arrays(a, A, rows, cols, c), time_limit, gap))
    g = split.global_columns
    master: float | None = 0.0
    if len(g):  # a small MIP (one configuration per job and per request class): solved here
        r = solve_highspy(None, gap=1e-9, arrays=sub_arrays(a, A, split.master_rows, g, prices.master_cost[g]))
        master = float(r.bound) if r.status.has_plan and r.bound is not None else None
    return tasks, a.c0 + prices.constant, master


@dataclass
class Priced:
    """Period models priced elsewhere (:mod:`optimizer.solve.coarse`), with the rest of their bound and each
    period model's LP optimum, which a period not finished in time counts."""

    tasks: list[PeriodTask]
    constant: float
    master: float | None
    lp_values: list[float]


def start(model: Model, duals: np.ndarray | None, executor, time_limit: float | None = None, gap: float = 1e-6,
          arrays: Arrays | None = None, period_limit: float | None = None, lp_x: np.ndarray | None = None,
          priced: Priced | None = None) -> Pending:
    """Hand the period models at ``duals`` to ``executor``; they run while the caller goes on.

    ``time_limit``: wall-clock seconds for all of them; each gets its share
    of the executor's workers (``time_limit`` ÷ ⌈periods ÷ workers⌉, 90 % of
    it, so the last ones end in time). ``period_limit``: seconds for each
    instead. ``lp_x``: the LP optimum whose ``duals`` these are; a period
    not finished in time then counts its part of it (its LP optimum at
    these prices, by complementary slackness) instead of solving its LP.
    ``priced``: instead of ``duals``, period models priced elsewhere
    (:mod:`optimizer.solve.coarse`); a period not finished in time counts
    its LP optimum at those prices.
    """
    n = len(model.data.periods) if priced is None else len(priced.tasks)
    waves = max(1, math.ceil(n / max(1, executor.workers)))
    each = period_limit if period_limit is not None else (
        None if time_limit is None else max(0.2, 0.9 * time_limit / waves))
    lp_values = None
    if priced is None:
        split = split_by_period(model, arrays)
        tasks, constant, master = period_tasks(split, multipliers(split, duals), each, gap)
        if lp_x is not None:
            lp_values = [float(t.arrays.c @ lp_x[t.columns]) for t in tasks]
    else:
        tasks = [dataclasses.replace(t, time_limit=each, gap=gap) for t in priced.tasks]
        constant, master, lp_values = priced.constant, priced.master, list(priced.lp_values)
    if time_limit is not None and period_limit is None:
        deadline = time.time() + time_limit
        tasks = [dataclasses.replace(t, deadline=deadline) for t in tasks]
    futures = [executor.submit(solve_period, t) for t in tasks]
    return Pending(tasks, futures, constant, master, executor.workers, lp_values)


def lp_duals(model: Model, arrays: Arrays | None = None) -> tuple[float, np.ndarray] | None:
    """The LP relaxation's optimum and row duals (HiGHS), or None when HiGHS does not solve it."""
    from .backends.highspy_backend import solve_highspy

    a = arrays if arrays is not None else model.mip.arrays()
    r = solve_highspy(None, gap=1e-9, arrays=a.relaxed())
    if r.status != Status.OPTIMAL or r.duals is None:
        return None
    return r.objective, r.duals


def period_bound(model: Model, duals: np.ndarray | None = None, executor=None, time_limit: float | None = None,
                 gap: float = 1e-6) -> DecompositionBound:
    """The bound of the periods solved apart, at ``duals`` (the LP's when None), waiting for every period."""
    from ..executors import Inline

    a = model.mip.arrays()
    if duals is None:
        lp = lp_duals(model, a)
        if lp is None:
            raise ValueError("the LP relaxation has no optimum: no multipliers to price the links with")
        duals = lp[1]
    pending = start(model, duals, executor or Inline(), time_limit, gap, arrays=a)
    return pending.collect(None if time_limit is None else time_limit + 5.0)
