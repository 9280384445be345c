"""Proven bounds from a model cut into parts: a Lagrangian relaxation of what links the parts.

The model can be cut two ways, each nearly into independent models:

- **by period** (:func:`split_by_period`): what links the periods are
  training progress (a job's hours over its window), the stability rows (a
  configuration's replicas over the horizon), replica starts (p against
  p − 1), the budget, and the columns without a period (reserved units of a
  term block, servers bought, a job's configuration, a request class's
  configuration);
- **by component** (:func:`split_by_component`): each inference service
  and each training job is a part (its replicas, routing, configurations,
  runs and hours, over the whole horizon), and what links them is the
  capacity they share: the rows of the units of each offering and period
  (capacity, quotas, training fit), the budget, and the units themselves
  (rented, reserved, owned, lanes), which belong to no component.

Either way, a **linking row** has columns of two or more parts and a
**global column** belongs to none. Copy every global column g into each
part k whose own rows use it (g_k, with g_k = g) and price the links: the
linking rows with multipliers y (y ≥ 0 on a ``≥`` row, y ≤ 0 on a ``≤``
row, free on an equality) and each copy equation with a multiplier
μ_{k,g}. What remains falls apart into

- one **part model** per part k: its own columns at cost c − A_Lᵀy (the
  linking rows' prices folded into the costs), the copies g_k at cost
  μ_{k,g}, its own rows, every integrality;
- a **master** over the global columns at cost c_g − A_L,gᵀy − Σ_k μ_{k,g},
  with the rows that hold only global columns;

and the bound is the constant c0 + Σ_L y·rhs plus the master's optimum plus
every part model's optimum. For any such multipliers this is a lower
bound on the model's optimum (every plan of the model is a point of the
relaxation, priced no higher); a part model stopped on its time limit
contributes its own proven bound, or its LP's. This module takes the
multipliers from the LP relaxation's duals, y as they are and μ_{k,g} =
Σ_{rows r of k} A_{r,g}·y_r: with integrality dropped every piece is then
priced as in the LP and the bound equals the LP optimum (LP duality; the
tests check it), and with integrality kept each part model rounds what is
its own, so the bound is at least the LP's and usually above it. Which cut
proves more depends on where the integrality bites: a period model holds
whole units shared by every service of its period (q3: +32 % over the LP;
bench ×1: +0.9 %), a component model holds one configuration of a request
class over the whole horizon and whole replicas (q3: +2.2 %; bench ×1
standard: +2.5 %, in seconds; docs/performance.md, "The components solved
apart").

The part models are independent: they run on an executor
(:mod:`optimizer.executors`: in this process, local processes, or a Dask
cluster) while the driver searches for a plan.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..model.mip import Arrays
from ..model.presolve import Model
from .result import SolveResult, Status


@dataclass
class Split:
    """Which rows and columns belong to which part (see the module docstring)."""

    arrays: Arrays
    A: sp.csr_matrix
    #: what the parts are: ``period`` or ``component``, as messages name them
    kind: str
    parts: list[str]
    column_part: np.ndarray  # position of each column's part, −1 for a global column
    local_rows: list[np.ndarray]  # per part: the rows whose part columns are all in it
    linking_rows: np.ndarray  # rows with columns of two or more parts
    master_rows: np.ndarray  # rows with global columns only
    global_columns: np.ndarray


def _split(a: Arrays, kind: str, parts: list[str], column_part: np.ndarray) -> Split:
    """Classify the rows of ``a`` by the parts their columns lie in (``column_part``: each column's part)."""
    A = sp.csr_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
    A.sum_duplicates()
    coo = A.tocoo()
    tp = column_part[coo.col]
    has = tp >= 0
    lo = np.full(a.n_rows, np.iinfo(np.int64).max)
    hi = np.full(a.n_rows, -1, dtype=np.int64)
    np.minimum.at(lo, coo.row[has], tp[has])
    np.maximum.at(hi, coo.row[has], tp[has])
    local = (hi >= 0) & (lo == hi)
    order = np.argsort(hi, kind="stable")  # the local rows of every part in one pass, not one scan per part
    cuts = np.searchsorted(hi[order], np.arange(len(parts) + 1))
    local_sorted = local[order]
    return Split(
        arrays=a, A=A, kind=kind, parts=parts, column_part=column_part,
        local_rows=[np.sort(order[cuts[k]:cuts[k + 1]][local_sorted[cuts[k]:cuts[k + 1]]])
                    for k in range(len(parts))],
        linking_rows=np.flatnonzero((hi >= 0) & (lo != hi)),
        master_rows=np.flatnonzero(hi < 0),
        global_columns=np.flatnonzero(column_part < 0))


def split_by_period(model: Model, arrays: Arrays | None = None) -> Split:
    """Classify the model's columns by period and its rows by the periods their columns lie in."""
    mip = model.mip
    a = arrays if arrays is not None else mip.arrays()
    P = model.data.periods
    pos = P.set_index("period")["pos"]
    col_p = np.full(a.n_vars, -1, dtype=np.int64)
    for b in mip.variables.values():
        if b.size and "period" in b.coords.columns:
            col_p[b.start:b.start + b.size] = b.coords["period"].map(pos).to_numpy(np.int64)
    return _split(a, "period", P.sort_values("pos")["period"].astype(str).tolist(), col_p)


#: the coordinate that makes a column a component's own: a service's (inference) or a job's (training)
COMPONENT_KEYS = ("service", "job")


def split_by_component(model: Model, arrays: Arrays | None = None) -> Split:
    """Classify the model's columns by component (each service, each training job; the units of no component)
    and its rows by the components their columns lie in.

    A part is named ``service <name>`` or ``job <name>``. A column whose
    block has neither coordinate (the units rented, reserved, owned; the
    training lanes) is global.
    """
    mip = model.mip
    a = arrays if arrays is not None else mip.arrays()
    ids, labels = [], []
    for b in mip.variables.values():
        key = next((k for k in COMPONENT_KEYS if k in b.coords.columns), None)
        if b.size and key is not None:
            ids.append(b.ids)
            labels.append((key + " " + b.coords[key].astype(str)).to_numpy())
    col_k = np.full(a.n_vars, -1, dtype=np.int64)
    if not ids:
        return _split(a, "component", [], col_k)
    codes, names = pd.factorize(np.concatenate(labels))  # parts numbered in order of first appearance
    col_k[np.concatenate(ids)] = codes
    return _split(a, "component", [str(n) for n in names], col_k)


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
class PartTask:
    """One part model, as plain data an executor can ship to another process or machine."""

    part: str
    columns: np.ndarray  # the model's columns, in the order of ``arrays``' columns
    arrays: Arrays
    time_limit: float | None
    gap: float
    #: wall-clock time (``time.time()``) by which the model must have ended, wherever it runs: one that starts
    #: late gets what is left of its limit (before, the last model beside a search could run its whole share
    #: past the caller's limit, and the caller waited for it: bench x16 ended 7 s past its 600)
    deadline: float | None = None
    #: how many models the same worker runs after this one before the deadline: a model gets its share of what is
    #: left, ``(deadline - now) / (later + 1)``, so the time a quick one leaves goes to the slower ones after it
    #: (most component models solve in a few milliseconds; docs/performance.md, "The components solved apart")
    later: int = 0


def solve_part(task: PartTask) -> dict:
    """Solve one part model with HiGHS; its proven bound (the MIP's, else its LP's) and how it ended.

    Runs wherever the executor puts it; HiGHS only (highspy), so no
    OR-Tools library is loaded beside it.
    """
    from .backends.highspy_backend import solve_highspy

    t0 = time.perf_counter()
    limit = task.time_limit
    if task.deadline is not None:
        left = task.deadline - time.time()
        # its share of what is left (90 %, so that the last one ends in time), or all of it for the last
        share = left if task.later == 0 else 0.9 * left / (task.later + 1)
        limit = share if limit is None else min(limit, share)
    if limit is not None and limit < 0.05:  # no time left for its search: its LP still proves
        r = SolveResult(Status.TIME_LIMIT, "highs")
    else:
        r = solve_highspy(None, time_limit=limit, gap=task.gap, arrays=task.arrays)
    bound, how = (r.bound, "mip") if r.bound is not None and np.isfinite(r.bound) else (None, "")
    if r.status == Status.INFEASIBLE:
        how = "infeasible"
    if bound is None and how != "infeasible":  # stopped before a bound, or failed: the LP still proves
        # within what is left before the deadline only: a part whose search stopped before its root LP has a
        # hard LP (bench training-heavy x0.25 at 10 s: one job's took 12-16 s past the deadline, and the
        # caller waited for it); without it the part counts its share of the caller's LP (Pending.collect)
        lp_limit = None if task.deadline is None else task.deadline - time.time()
        if lp_limit is None or lp_limit >= 0.05:
            lp = solve_highspy(None, time_limit=lp_limit, gap=1e-9, arrays=task.arrays.relaxed())
            if lp.status == Status.OPTIMAL:
                bound, how = lp.objective, "lp"
    return {"part": task.part, "bound": bound, "bound_from": how, "status": r.status.value,
            "objective": r.objective, "seconds": time.perf_counter() - t0}


@dataclass
class DecompositionBound:
    """The bound of the parts solved apart, and how each part model ended.

    ``bound`` is None when some part model has no bound at all (an
    unbounded or failed model); ``parts`` has one row per part:
    ``part, bound, bound_from`` (``mip``: its own proven bound, ``lp``: its
    LP relaxation's, ``infeasible``), ``status, seconds``. ``master`` is the
    master's bound (None if it had none: then no bound). ``kind``: what the
    parts are (``period``, ``component``).
    """

    bound: float | None
    parts: pd.DataFrame
    master: float | None
    constant: float
    workers: int
    seconds: float
    kind: str = "period"

    @property
    def complete(self) -> bool:
        """Every part model proved its bound as a MIP (none fell back to its LP)."""
        return bool(len(self.parts)) and bool((self.parts["bound_from"] == "mip").all())


class Pending:
    """Part models handed to an executor; :meth:`collect` sums their bounds."""

    def __init__(self, tasks: list[PartTask], futures: list, constant: float, master: float | None,
                 workers: int, lp_values: list[float] | None = None, kind: str = "period"):
        self.tasks, self.futures = tasks, futures
        self.constant, self.master, self.workers = constant, master, workers
        self.lp_values, self.kind = lp_values, kind
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
                # a model done is read whatever time is left: a Dask future asked with a timeout of 0 raises
                # TimeoutError even when done (bench x1 on 2 workers: every one of 52 finished models was
                # counted at its LP bound)
                row = fut.result() if fut.done() else fut.result(timeout=left)
                if self.lp_values is not None and row["bound"] is None and row["bound_from"] != "infeasible":
                    # ended at the deadline without a bound of its own (no time for its LP): its LP part counts
                    row = {**row, "bound": self.lp_values[i], "bound_from": "lp"}
                elif (self.lp_values is not None and row["bound"] is not None and row["bound_from"] == "mip"
                        and row["bound"] < self.lp_values[i]):
                    # a model stopped before its root LP reports a weak bound of its own (bench x1 with
                    # --workers 2 at 60 s: the sum was -2.4M against an LP of 12.3M); its LP part is a
                    # proof too, and the stronger of the two counts
                    row = {**row, "bound": self.lp_values[i], "bound_from": "lp"}
                rows.append(row)
            # concurrent.futures' and Dask's: the model is still running there; a stopped Inline's: not started
            except TimeoutError:
                fut.cancel()
                if self.lp_values is not None:
                    row = {"part": task.part, "bound": self.lp_values[i], "bound_from": "lp", "objective": None,
                           "seconds": 0.0}
                else:
                    # solved here, to the end: without an LP part to count, this is the part's only proof
                    relaxed = dataclasses.replace(task, arrays=task.arrays.relaxed(), time_limit=None, deadline=None)
                    row = solve_part(relaxed)
                    row["bound_from"] = "lp" if row["bound"] is not None else row["bound_from"]
                row["status"] = "not finished"
                rows.append(row)
        df = pd.DataFrame(rows, columns=["part", "bound", "bound_from", "status", "objective", "seconds"])
        infeasible = (df["bound_from"] == "infeasible").any()
        if infeasible:
            total = math.inf
        elif df["bound"].isna().any() or self.master is None:
            total = None
        else:
            total = self.constant + self.master + float(df["bound"].sum())
        return DecompositionBound(total, df, self.master, self.constant, self.workers,
                                  time.perf_counter() - self.t0, self.kind)


@dataclass
class Prices:
    """Every piece of the Lagrangian relaxation priced (see the module docstring).

    ``constant``: Σ y·rhs of the priced linking rows (the model's constant
    not included); ``cost``: the part columns' costs c − A_Lᵀy; ``mu``:
    per part, the copies' costs μ_{k,g} (zero but at the global columns);
    ``master_cost``: the global columns' costs in the master,
    c_g − A_L,gᵀy − Σ_k μ_{k,g}.
    """

    constant: float
    cost: np.ndarray
    mu: list[np.ndarray]
    master_cost: np.ndarray

    @classmethod
    def of(cls, split: Split, y: np.ndarray, mu: list[np.ndarray]) -> "Prices":
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


def multipliers(split: Split, duals: np.ndarray) -> Prices:
    """Every piece priced at the row multipliers ``duals`` (the LP relaxation's; see the module docstring):
    the linking rows at their own, each copy μ_{k,g} at what part k's rows charge for column g."""
    a, A = split.arrays, split.A
    y = sign_feasible(np.asarray(duals, float), a.row_lo, a.row_hi)
    yL = np.zeros(a.n_rows)
    yL[split.linking_rows] = y[split.linking_rows]
    mu = []
    for rows in split.local_rows:
        yp = np.zeros(a.n_rows)
        yp[rows] = y[rows]
        mu.append(A.T @ yp)  # μ_{k,g} for the global columns; the part's own columns ignore it
    return Prices.of(split, yL, mu)


def part_tasks(split: Split, prices: Prices, time_limit: float | None, gap: float,
               master_limit: float | None = None):
    """The part models at ``prices`` and the rest of the bound (constant and the master's bound, searched here
    for at most ``master_limit`` seconds: a bound however it ends)."""
    from .backends.highspy_backend import solve_highspy

    a, A = split.arrays, split.A
    tasks = []
    for p, rows in enumerate(split.local_rows):
        cols = np.union1d(np.flatnonzero(split.column_part == p), A[rows].indices)
        c = np.where(split.column_part[cols] == p, prices.cost[cols], prices.mu[p][cols])
        tasks.append(PartTask(split.parts[p], cols, sub_arrays(a, A, rows, cols, c), time_limit, gap))
    g = split.global_columns
    master: float | None = 0.0
    if len(g):  # a small MIP (periods: a configuration per job and per class; components: the units), solved here
        r = solve_highspy(None, time_limit=master_limit, gap=1e-9,
                          arrays=sub_arrays(a, A, split.master_rows, g, prices.master_cost[g]))
        master = float(r.bound) if r.bound is not None and np.isfinite(r.bound) else None
    return tasks, a.c0 + prices.constant, master


@dataclass
class Priced:
    """Part models priced elsewhere (:mod:`optimizer.solve.coarse`), with the rest of their bound and each
    part model's LP optimum, which a part not finished in time counts (None: not had, such a part's LP is
    solved when the bound is collected)."""

    tasks: list[PartTask]
    constant: float
    master: float | None
    lp_values: list[float] | None
    kind: str = "period"


def start(model: Model, duals: np.ndarray | None, executor, time_limit: float | None = None, gap: float = 1e-6,
          arrays: Arrays | None = None, part_limit: float | None = None, lp_x: np.ndarray | None = None,
          priced: Priced | None = None, by: str = "period", split: Split | None = None, after: int = 0,
          deadline: float | None = None) -> Pending:
    """Hand the part models at ``duals`` to ``executor``; they run while the caller goes on.

    ``by``: the cut, ``period`` (:func:`split_by_period`) or ``component``
    (:func:`split_by_component`), or the ``split`` made already. ``time_limit``: wall-clock seconds for
    all of them; each model gets, when it starts, its share of what is left
    to the worker that runs it (:attr:`PartTask.later`). ``part_limit``:
    seconds for each instead. ``lp_x``: the LP optimum whose ``duals`` these
    are; a part not finished in time then counts its share of it (its LP
    optimum at these prices, by complementary slackness) instead of solving
    its LP. ``priced``: instead of ``duals``, part models priced elsewhere
    (:mod:`optimizer.solve.coarse`); a part not finished in time counts its
    LP optimum at those prices. ``after``: how many models the caller will
    hand the executor after these, under the same ``deadline`` (wall clock,
    ``time.time()``; default: ``time_limit`` from now), so that each model's
    share counts them (another cut's models queued behind).
    """
    if time_limit is not None and deadline is None:
        deadline = time.time() + time_limit
    lp_values = None
    if priced is None:
        split = split if split is not None else SPLITS[by](model, arrays)
        tasks, constant, master = part_tasks(split, multipliers(split, duals), part_limit, gap,
                                             master_limit=time_limit)
        if lp_x is not None:
            lp_values = [float(t.arrays.c @ lp_x[t.columns]) for t in tasks]
        kind = split.kind
    else:
        tasks = [dataclasses.replace(t, time_limit=part_limit, gap=gap) for t in priced.tasks]
        constant, master, lp_values, kind = priced.constant, priced.master, priced.lp_values, priced.kind
    if deadline is not None and part_limit is None:
        workers, n = max(1, executor.workers), len(tasks) + after
        tasks = [dataclasses.replace(t, deadline=deadline, later=(n - 1 - i) // workers) for i, t in enumerate(tasks)]
    futures = [executor.submit(solve_part, t) for t in tasks]
    return Pending(tasks, futures, constant, master, executor.workers, lp_values, kind)


#: the cuts :func:`start` knows, by name
SPLITS = {"period": split_by_period, "component": split_by_component}
#: the cuts the solve driver hands out, in this order, one queue under one deadline: the component models first,
#: most of which solve in milliseconds and whose bound is the higher on the bench families (bench x1 standard at
#: the LP's duals: +2.5 % over the LP against +0.9 % for the periods), then the period models, the higher where
#: whole units shared by several services hold the gap (q3: +32 % against +2.2 %; docs/performance.md, "The
#: components solved apart")
CUTS = ("component", "period")


def start_cuts(model: Model, duals: np.ndarray | None, executor, time_limit: float | None, gap: float,
               lp_x: np.ndarray | None = None, priced: Sequence[Priced] = ()) -> list[Pending]:
    """Every cut of :data:`CUTS` at ``duals`` (or the models ``priced`` elsewhere, in their order) handed to
    ``executor`` as one queue that ends within ``time_limit`` seconds; one :class:`Pending` per cut."""
    deadline = None if time_limit is None else time.time() + time_limit
    out = []
    if priced:
        for i, p in enumerate(priced):
            out.append(start(model, None, executor, time_limit, gap, priced=p, deadline=deadline,
                             after=sum(len(q.tasks) for q in priced[i + 1:])))
        return out
    a = model.mip.arrays()  # one assembly for both cuts
    splits = [SPLITS[by](model, a) for by in CUTS]
    for i, split in enumerate(splits):
        out.append(start(model, duals, executor, time_limit, gap, lp_x=lp_x, split=split, deadline=deadline,
                         after=sum(len(q.parts) for q in splits[i + 1:])))
    return out


def lp_duals(model: Model, arrays: Arrays | None = None) -> tuple[float, np.ndarray] | None:
    """The LP relaxation's optimum and row duals (HiGHS), or None when HiGHS does not solve it."""
    from .backends.highspy_backend import solve_highspy

    a = arrays if arrays is not None else model.mip.arrays()
    r = solve_highspy(None, gap=1e-9, arrays=a.relaxed())
    if r.status != Status.OPTIMAL or r.duals is None:
        return None
    return r.objective, r.duals


def lagrangian_bound(model: Model, duals: np.ndarray | None = None, executor=None, time_limit: float | None = None,
                     gap: float = 1e-6, by: str = "period") -> DecompositionBound:
    """The bound of the parts (``by`` period or component) solved apart, at ``duals`` (the LP's when None),
    waiting for every part."""
    from ..executors import Inline

    a = model.mip.arrays()
    if duals is None:
        lp = lp_duals(model, a)
        if lp is None:
            raise ValueError("the LP relaxation has no optimum: no multipliers to price the links with")
        duals = lp[1]
    pending = start(model, duals, executor or Inline(), time_limit, gap, arrays=a, by=by)
    return pending.collect(None if time_limit is None else time_limit + 5.0)
