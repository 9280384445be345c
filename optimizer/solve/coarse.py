"""The monthly model: prices and a guide for a model whose LP relaxation does not solve in the time, and the
choices of the exact split.

A model of a year in weekly periods (bench ×16: about a million columns)
has an LP relaxation that takes longer than the whole time limit (891 s
here), and the solve driver starts from that LP: its point guides the
heuristics, its duals price the periods solved apart, its optimum is the
first bound. The same problem with the periods of each calendar month
merged into one (:func:`merge_periods`) is four times smaller and its LP
solves some seventy times faster (bench ×16: 12.6 s; docs/performance.md,
"The monthly model"). Its solution stands in for the LP's three uses:

- **prices** for the periods solved apart (:func:`prices`). The periods of
  the weekly model are linked by a few rows (training progress, the
  stability sums, replica starts, the budget) and by the columns without a
  period (reserved units, servers bought, configurations), which
  :mod:`optimizer.solve.decompose` prices instead of imposing. *Any*
  multipliers of the right sign give a valid lower bound there, so prices
  read off the monthly LP are as much a proof as the weekly LP's own: a
  linking row takes the dual of the same row of the monthly model, and a
  column without a period is priced in each week at its monthly price
  shared by the week's hours. Only the bound's strength depends on how
  close they are to the weekly LP's duals (bench ×1 standard, at the
  period LPs: 12,110,700 against the weekly LP's 12,269,374, −1.3 %);
- the **bound**: the periods' LP relaxations at those prices, summed
  with the rest of the Lagrangian (:func:`priced_periods`);
- the **guide** (:func:`point`): the monthly LP's point spread over the
  weeks (what a month holds, each of its weeks holds; the hours a month
  runs, its weeks share by their hours). It chooses the configurations to
  fix and where training runs, as the LP's point does.

Without a time limit the monthly model without stability limits, searched
to the guide's gap, and, where a month's periods differ in length, the
model with each month's periods of one length merged (:func:`guides`), also
stand in for the weekly one where the exact split needs only its choices:
which class to branch on, and which options to try first.

The monthly model is not a relaxation of the weekly one (its demand is the
month's mean, hour-weighted, where the weekly model serves every week's),
and nothing here needs it to be: its optimum is never reported as a bound.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..load import Problem
from ..model.presolve import CUTS, Model, build
from ..schema import Period
from . import decompose
from .backends import solve as backend_solve, solve_relaxation
from .result import SolveResult, Status

#: row blocks whose rows hold hours or a job's progress, not quantities held through a period: a row of the
#: weekly model takes its monthly twin's dual as it is. Every other linking row sums quantities held through
#: each period (replicas, traffic), so its monthly dual prices a month of them and is shared out per week
PER_HOUR_ROWS = frozenset({"training-progress", "budget"})


def merge_periods(problem: Problem, by_length: bool = False) -> tuple[Problem, pd.Series] | None:
    """The problem with each run of consecutive periods of one calendar month merged into one period.

    A merged period has the hours of its periods and, per service, their
    demand averaged by hours. With ``by_length``, the periods of one month
    that last as many hours are merged instead, in order of their first
    one: a month's peak periods apart from its off-peak ones, where they
    differ in length (q3: 60 h and 108 h a week). Returns the merged problem
    and, per period of ``problem`` (its index), the name of the merged
    period it went into; or None when nothing merges (with ``by_length``,
    also when every month's periods last alike: it would merge as the
    monthly model does).
    """
    if not mergeable(problem):
        return None
    P = problem.periods.reset_index()
    runs = (P["month"] != P["month"].shift()).cumsum().to_numpy() - 1
    group = pd.MultiIndex.from_arrays([P["month"], P["hours"]]).factorize()[0] if by_length else runs
    if by_length and len(set(group)) in (len(P), len(set(runs))):
        return None
    P["group"] = group
    names, periods = {}, []
    for g, rows in P.groupby("group", sort=True):  # (numbered in order of their first period either way)
        first, last = rows["name"].iloc[0], rows["name"].iloc[-1]
        names[g] = first if first == last else f"{first}..{last}"
        periods.append(Period(name=names[g], hours=float(rows["hours"].sum()), month=int(rows["month"].iloc[0])))
    into = pd.Series([names[g] for g in group], index=P["name"].to_numpy(), name="merged")
    hours = problem.periods["hours"]
    services = []
    for s in problem.services:
        if isinstance(s.demand_rps, dict):
            weighted = pd.Series({p: s.demand_rps.get(p, 0.0) * h for p, h in hours.items()})
            mean = weighted.groupby(into).sum() / hours.groupby(into).sum()
            s = s.model_copy(update={"demand_rps": {str(k): float(v) for k, v in mean.items()}})
        services.append(s)
    table = pd.DataFrame([(q.name, q.hours, q.month) for q in periods],
                         columns=["name", "hours", "month"]).set_index("name")
    merged = dataclasses.replace(problem, spec=problem.spec.model_copy(update={"periods": periods}),
                                 periods=table, services=services)
    return merged, into


@dataclass
class Monthly:
    """The monthly model of a weekly one and its LP relaxation (:func:`solve`)."""

    model: Model
    #: per period of the weekly model, the monthly period it is part of
    into: pd.Series
    lp: SolveResult


def solve(model: Model, solver: str, time_limit: float | None, threads: int | None,
          cuts=CUTS) -> Monthly | None:
    """Build the monthly model of ``model`` (with the valid inequalities ``cuts``, as the solve driver's models
    have them) and solve its LP relaxation (HiGHS for CP-SAT, as for the LP).

    None when the model has nothing to merge, or when that LP has no
    optimum with duals in ``time_limit``.
    """
    from .relaxations import lift  # the same rows lifted as in the LP relaxation

    merged = merged_model(model, cuts=cuts)
    if merged is None:
        return None
    monthly, into = merged
    lp = solve_relaxation(monthly.mip, lift(monthly.mip, monthly.mip.arrays()), solver, time_limit, threads)
    if lp.status != Status.OPTIMAL or lp.duals is None or lp.x is None:
        return None
    return Monthly(monthly, into, lp)


def merged_model(model: Model, by_length: bool = False, cuts=CUTS) -> tuple[Model, pd.Series] | None:
    """The model of ``model``'s problem with its periods merged (:func:`merge_periods`), built with the valid
    inequalities ``cuts``, and per period its merged period; None when nothing merges."""
    merged = merge_periods(model.problem, by_length)
    if merged is None:
        return None
    problem, into = merged
    return build(problem, model.candidates, cuts=cuts), into


def _keys(frame: pd.DataFrame, into: pd.Series | None) -> pd.DataFrame:
    """Coordinates as strings, the period replaced by its monthly period when ``into`` is given."""
    out = frame.astype(str)
    if into is not None and "period" in out.columns:
        out["period"] = out["period"].map(into)
    return out


def _twins(weekly: pd.DataFrame, monthly: pd.DataFrame, into: pd.Series | None) -> np.ndarray:
    """Position in ``monthly`` of each row of ``weekly`` with the same coordinates (−1: none)."""
    left = _keys(weekly, into)
    right = _keys(monthly, None)
    keys = list(left.columns)
    if not keys:  # a block of one row without coordinates (the budget): its twin is the monthly block's row
        return np.arange(len(left)) if len(left) == len(right) else np.full(len(left), -1, dtype=np.int64)
    right = right.assign(_at=np.arange(len(right)))
    at = left.merge(right, on=keys, how="left")["_at"]
    return at.fillna(-1).to_numpy(np.int64)


def point(model: Model, monthly: Monthly) -> np.ndarray:
    """The monthly LP's point spread over the weekly model's columns (:func:`spread`)."""
    return spread(model, monthly.model, monthly.into, monthly.lp.x)


def spread(model: Model, merged: Model, into: pd.Series, xm: np.ndarray) -> np.ndarray:
    """A point ``xm`` of the monthly model ``merged`` spread over the weekly model's columns.

    A column with a period takes the value of its twin in the month (the
    replicas, units and runs a month holds, each of its weeks holds), but
    ``training-hours``, which the weeks share by their hours; a column
    without a period takes its twin's value. Clipped to the weekly
    column's bounds; a column without a twin is 0. ``into``: per weekly
    period, its monthly period.
    """
    x = np.zeros(model.mip.n_vars)
    hours = model.problem.periods["hours"]
    merged_hours = merged.problem.periods["hours"]
    for name, block in model.mip.variables.items():
        twin = merged.mip.variables.get(name)
        if twin is None or not block.size:
            continue
        at = _twins(block.coords, twin.coords, into)
        v = np.where(at >= 0, xm[twin.start + np.maximum(at, 0)], 0.0)
        if name == "training-hours":
            p = block.coords["period"].astype(str)
            v = v * (p.map(hours).to_numpy() / p.map(into).map(merged_hours).to_numpy())
        x[block.ids] = np.clip(v, block.lower, block.upper)
    return x


#: the monthly models :func:`guides` searches, as a result's message names them: by month, then by month and length
GUIDES = {False: "the monthly model without limits",
          True: "the model without limits with each month's periods of one length merged"}


def guides(model: Model, solver: str, gap: float, threads: int | None,
           enough: Callable[[], bool] = lambda: False) -> Iterator[tuple[np.ndarray, float, str]]:
    """The monthly models without stability limits, each searched to ``gap``: their plans spread over the
    periods, each with the seconds it took (its build's included) and its name (:data:`GUIDES`), coarsest first.

    Each stands in for the weekly model without limits where that model's
    plan only chooses what the exact split branches on and tries first:
    which request classes break their limit of one configuration, the
    configuration each uses most, each commitment's count
    (:func:`optimizer.solve.split.exact_split`). The monthly model
    (:func:`merge_periods`) comes first; then, where a month's periods
    differ in length, the model with each month's periods of one length
    merged (``by_length``), whose peaks are not averaged away. Each is a
    fraction of the weekly model (q3: 332 and 641 columns against 2,685;
    q3-profiled's monthly plan fits one configuration a class, its plan by
    length breaks chat's limit as the weekly one does; docs/performance.md,
    "The monthly model chooses where the split branches"). Their plans are
    no weekly plans and their optima no bounds: only the choices are read
    off them. Nothing where no two periods share a month; a model whose
    search ends without a plan gives nothing. ``enough()``, asked before each
    model's build and before its search, ends the models early (the weekly
    guide, searched beside, has its plan already).
    """
    from .relaxations import lift, without_limits  # (relaxations imports this module)

    for by_length in (False, True):
        if enough():
            return
        t0 = time.perf_counter()
        merged = merged_model(model, by_length)
        if merged is None:
            continue
        coarser, into = merged
        if enough():
            return
        mip = coarser.mip
        result = backend_solve(mip, solver=solver, gap=gap, threads=threads,
                               arrays=without_limits(mip, lift(mip, mip.arrays())))
        if result.status.has_plan:
            yield spread(model, coarser, into, result.x), time.perf_counter() - t0, GUIDES[by_length]


def prices(model: Model, split: decompose.Split, monthly: Monthly) -> decompose.Prices:
    """Lagrangian prices of the weekly model's links, read off the monthly LP's duals.

    - A linking row without a period of its own (training progress, a
      stability sum, the budget) takes its multiplier from
      :func:`row_duals`. A linking row with a period (replica starts, p
      against p − 1) is not priced.
    - A column without a period (reserved units, servers, a configuration)
      is priced in week w of month m at μ_{m,g}·h_w/h_m, μ_{m,g} being what
      the month's rows charge for it at the monthly duals.

    Multipliers of any value are valid where their signs are (the module
    docstring of :mod:`optimizer.solve.decompose`): these give a lower
    bound whatever the monthly model's error.
    """
    a = split.arrays
    mm = monthly.model
    ma = mm.mip.arrays()
    msplit = decompose.split_by_period(mm, ma)
    # the linking rows without a period of their own, at their monthly twins' duals (:func:`row_duals`)
    priced = np.zeros(a.n_rows, bool)
    priced[split.linking_rows] = True
    for block in model.mip.constraints.values():
        if block.size and "period" in block.coords.columns:
            priced[block.ids] = False
    y = np.where(priced, decompose.sign_feasible(row_duals(model, monthly), a.row_lo, a.row_hi), 0.0)
    # what each month's rows charge for the columns without a period, at the monthly duals
    mu_month = decompose.multipliers(msplit, monthly.lp.duals).mu
    g = split.global_columns
    twin_of = np.full(a.n_vars, -1, dtype=np.int64)
    for name, block in model.mip.variables.items():
        twin = mm.mip.variables.get(name)
        if twin is None or not block.size or "period" in block.coords.columns:
            continue
        at = _twins(block.coords, twin.coords, None)
        twin_of[block.ids] = np.where(at >= 0, twin.start + at, -1)
    hours = model.problem.periods["hours"]
    merged_hours = mm.problem.periods["hours"]
    position = {name: i for i, name in enumerate(msplit.parts)}
    has = twin_of[g] >= 0
    mu = []
    for period in split.parts:
        month = monthly.into[period]
        m = np.zeros(a.n_vars)
        m[g[has]] = mu_month[position[month]][twin_of[g[has]]] * (hours[period] / merged_hours[month])
        mu.append(m)
    return decompose.Prices.of(split, y, mu)


def row_duals(model: Model, monthly: Monthly) -> np.ndarray:
    """A multiplier for every row of the weekly model, read off its monthly twin's dual.

    A row of week w in month m takes its twin's dual times h_w/h_m (the
    twin prices a month of what the row holds, the week holds it for h_w of
    those hours); a row without a period takes it times the ratio of the
    numbers of periods where its terms are quantities held through a
    period (a month of a replica is priced, a week of it about a quarter as
    much), and the rows of :data:`PER_HOUR_ROWS` take it as it is. A row
    without a twin gets 0. Any multipliers of the right sign give a valid
    bound; these are what
    :func:`optimizer.solve.decompose.multipliers` prices a cut at where the
    weekly LP's duals are not had (the component cut; bench ×1 standard:
    12,533,332 at these against 12,578,454 at the weekly LP's duals).
    """
    mm = monthly.model
    y_month = np.asarray(monthly.lp.duals, float)
    hours = model.problem.periods["hours"]
    merged_hours = mm.problem.periods["hours"]
    ratio = len(mm.data.periods) / len(model.data.periods)
    y = np.zeros(model.mip.n_rows)
    for name, block in model.mip.constraints.items():
        twin = mm.mip.constraints.get(name)
        if twin is None or not block.size:
            continue
        at = _twins(block.coords, twin.coords, monthly.into)
        if name in PER_HOUR_ROWS:
            factor = np.ones(block.size)
        elif "period" in block.coords.columns:
            period = block.coords["period"].astype(str)
            factor = (period.map(hours) / period.map(monthly.into).map(merged_hours)).to_numpy(float)
        else:
            factor = np.full(block.size, ratio)
        has = at >= 0
        y[block.ids[has]] = y_month[twin.start + at[has]] * factor[has]
    return y


def priced_components(model: Model, monthly: Monthly) -> decompose.Priced | None:
    """The weekly model's component models (:func:`optimizer.solve.decompose.split_by_component`) priced at
    :func:`row_duals`, without their LP optima (a component not finished in time solves its LP where the
    bound is collected). None when the master has no bound."""
    split = decompose.split_by_component(model)
    tasks, constant, master = decompose.part_tasks(split, decompose.multipliers(split, row_duals(model, monthly)),
                                                   None, 1e-9)
    if master is None:
        return None
    return decompose.Priced(tasks, constant, master, None, kind="component")


def priced_periods(model: Model, monthly: Monthly) -> tuple[float | None, decompose.Priced | None]:
    """The weekly model's period models at the monthly prices (:func:`prices`), and the Lagrangian bound
    with each period model's LP relaxation.

    The bound is a lower bound on the weekly model's optimum (a relaxation
    of the Lagrangian relaxation); the period models, with each one's LP
    optimum, are what the periods solved apart start from
    (:func:`optimizer.solve.decompose.start`). (None, None) when a period
    LP or the master has no optimum.
    """
    from .backends.highspy_backend import solve_highspy

    split = decompose.split_by_period(model)
    tasks, constant, master = decompose.part_tasks(split, prices(model, split, monthly), None, 1e-9)
    values = []
    for task in tasks:
        r = solve_highspy(None, gap=1e-9, arrays=task.arrays.relaxed())
        if r.status != Status.OPTIMAL:
            return None, None
        values.append(float(r.objective))
    if master is None:
        return None, None
    return constant + master + float(sum(values)), decompose.Priced(tasks, constant, master, values)


def mergeable(problem: Problem) -> bool:
    """Has the problem two consecutive periods in one calendar month (a monthly model smaller than it)?"""
    month = problem.periods["month"].to_numpy()
    return bool(len(month) > 1 and (month[1:] == month[:-1]).any())
