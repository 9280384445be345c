"""Warm starts: a feasible plan built without the MIP solver.

Two heuristics share one dispatcher:

``greedy_start``
    Rented capacity first, cheapest per rps: every training job gets the
    rented configuration and offering with the lowest cost per unit of progress
    whose cluster fits, its hours laid over the earliest periods of its window;
    then, for every service and period, each request bucket's demand goes to
    the (configuration, offering) pairs with the lowest marginal cost per rps
    that still have room (existing owned units first, they are already paid
    for), replicas rounded up, ``min_replicas`` topped up, units running =
    ⌈GPUs ÷ G⌉. Nothing is reserved or bought.
``lp_start``
    The LP relaxation decides: reserved and new owned units are its values
    rounded to the nearest integer, each job takes the configuration the LP
    weights most and the LP's placements of it (as far as they fit), each
    service keeps ⌊LP replicas⌋ where the LP put them (routing scaled with
    them); what is left of demand, progress or floors is dispatched as in
    the greedy, committed capacity first.

Either vector is checked against every row and bound of the model; if it
fails there is no start. Both read the labelled variable tables
``build_model`` returns, so they follow the formulation's names, not its row
layout.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..model.formulation import RENTED
from ..model.mip import MIP, Arrays

TOL = 1e-6
#: reserved and new owned units: what the commitment MIP keeps integral and the polish keeps fixed
COMMITMENTS = ("units-reserved", "units-owned-new")


def check_start(a: Arrays, x: np.ndarray, tol: float = 1e-6) -> list[str]:
    """Rows and bounds ``x`` violates (empty when it is a feasible point of the arrays ``a``)."""
    bad = []
    if x.shape != (a.n_vars,):
        return [f"start has {x.shape} values for {a.n_vars} variables"]
    if (x < a.col_lo - tol).any() or (x > a.col_hi + tol).any():
        i = int(np.flatnonzero((x < a.col_lo - tol) | (x > a.col_hi + tol))[0])
        bad.append(f"bound of {a.var_names[i]}: {x[i]} not in [{a.col_lo[i]}, {a.col_hi[i]}]")
    frac = a.integer & (np.abs(x - np.rint(x)) > tol)
    if frac.any():
        bad.append(f"{int(frac.sum())} integer variables are fractional")
    ax = a.activity(x)
    # relative to the row's size: its right-hand side and the magnitude of its terms
    scale = 1.0 + np.bincount(a.rows, weights=np.abs(a.vals * x[a.cols]), minlength=a.n_rows) + np.abs(
        np.where(np.isfinite(a.row_lo), a.row_lo, 0)) + np.abs(np.where(np.isfinite(a.row_hi), a.row_hi, 0))
    viol = (ax < a.row_lo - tol * scale) | (ax > a.row_hi + tol * scale)
    for r in np.flatnonzero(viol)[:5]:
        bad.append(f"row {a.row_names[r]}: {ax[r]:g} not in [{a.row_lo[r]:g}, {a.row_hi[r]:g}]")
    return bad


def start_objective(a: Arrays, x: np.ndarray) -> float:
    return float(a.c @ x + a.c0)


def greedy_start(mip: MIP, T, vt: dict, arrays: Arrays | None = None) -> np.ndarray | None:
    """A feasible point of ``mip`` built greedily, or None."""
    a = arrays if arrays is not None else mip.arrays()
    return _checked(a, lambda: _Dispatch(mip, T, vt, None).run())


def lp_start(mip: MIP, T, vt: dict, arrays: Arrays | None = None,
             time_limit: float | None = None, info: dict | None = None,
             commit_time: float | None = 0.0) -> np.ndarray | None:
    """A feasible point of ``mip`` rounded and repaired from its LP relaxation, or None.

    The commitments are rounded up and to the nearest unit, and the cheaper
    repaired plan is kept. With ``commit_time`` (seconds; None: no limit
    but :data:`COMMIT_LP_TIMES` times the LP's seconds, at least 1 s; 0: skip), the
    :func:`commitment_mip` then chooses whole commitments against the LP
    of everything else, and the plan repaired from its solution is
    preferred (docs/performance.md: on ×0.25, seeds 0–2 polish to 0.8–7 %
    less than the rounded plan, seed 3 to the same).

    ``info["lp_bound"]`` receives the LP optimum (a proven lower bound on the MIP) when the LP solved,
    ``info["commit_bound"]`` the commitment MIP's bound (a relaxation too, and at least as high).
    """
    a = arrays if arrays is not None else mip.arrays()
    t = time.perf_counter()
    guide = solve_lp(a, time_limit)
    lp_s = time.perf_counter() - t
    if info is not None:
        info["lp_seconds"] = lp_s
    if guide is None:
        return None
    if info is not None:
        info["lp_bound"] = float(a.c @ guide + a.c0)
        info["guide"] = guide
    best = None
    # commitments rounded up or to the nearest unit; training placed before the rest of inference, or
    # (only if neither worked) after it
    for round_up, last in ((True, False), (False, False), (True, True)):
        if last and best is not None:
            break
        x = _checked(a, lambda: _Dispatch(mip, T, vt, guide, round_up, last).run())
        if x is not None and (best is None or start_objective(a, x) < start_objective(a, best)):
            best = x
    limit = max(1.0, COMMIT_LP_TIMES * lp_s) if commit_time is None else commit_time
    if best is None or limit <= 0 or limit < COMMIT_MIN_LP_TIMES * lp_s:
        return best
    gx, bound = commitment_mip(mip, a, best, limit)
    if info is not None and bound is not None:
        info["commit_bound"] = bound
    if gx is None:
        return best
    x = _checked(a, lambda: _Dispatch(mip, T, vt, gx, True, False).run())
    if x is None:
        return best
    if info is not None:
        info["guide"] = gx
    return x


#: without a time limit the commitment MIP gets this many times the LP's seconds
COMMIT_LP_TIMES = 40.0
#: it is not started with less than this many times the LP's seconds (it would not get past its root)
COMMIT_MIN_LP_TIMES = 10.0


def commitment_mip(mip: MIP, a: Arrays, x0: np.ndarray,
                   time_limit: float | None) -> tuple[np.ndarray | None, float | None]:
    """Whole reserved and owned units against the LP of everything else: (its solution, its bound).

    The model with every integrality dropped except that of
    :data:`COMMITMENTS`: few integer columns, so HiGHS branches on the
    commitments alone. Rounding the LP's commitments up buys idle units
    (0.21 of a reserved H100 node becomes a whole one) and rounding to the
    nearest loses capacity; this picks whole units at the least cost of
    serving everything else fractionally. ``x0`` (a feasible plan) is its
    first incumbent. Its bound is a relaxation of the full MIP, so it is a
    proven lower bound, at least the LP's.
    """
    from .backends.ortools_backend import solve_ortools

    keep = np.zeros(a.n_vars, bool)
    for name in COMMITMENTS:
        b = mip.variables.get(name)
        if b is not None:
            keep[b.start:b.start + b.size] = True
    if not (a.integer & keep).any():
        return None, None
    res = solve_ortools(None, backend="highs", time_limit=time_limit, gap=1e-4,
                        arrays=dataclasses.replace(a, integer=a.integer & keep), start=x0)
    if res.x is None or not res.status.has_plan:
        return None, res.bound
    return res.x, res.bound


def best_start(mip: MIP, T, vt: dict, time_limit: float | None = None, info: dict | None = None,
               arrays: Arrays | None = None, commit_time: float | None = 0.0) -> np.ndarray | None:
    """:func:`lp_start` (its LP within ``time_limit``), or :func:`greedy_start` if that fails.

    The LP-rounded plan is far better than the greedy one on every generated
    problem (docs/performance.md); :meth:`optimizer.model.presolve.Model.start`
    then hands it to :func:`polish`.
    """
    a = arrays if arrays is not None else mip.arrays()
    if not a.integer.any():
        return None  # an LP: the solver needs no start
    x = lp_start(mip, T, vt, a, time_limit, info, commit_time)
    return x if x is not None else greedy_start(mip, T, vt, a)


#: periods the polish solves at once (one HiGHS per thread; HiGHS releases the GIL)
POLISH_WORKERS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

#: blocks a polish keeps fixed: commitments and each job's configuration (what links the periods); a job's
#: clusters and hours stay free, each period keeping the progress it makes now (see :func:`polish`)
FIXED_IN_POLISH = COMMITMENTS + ("training-select",)


def polish(mip: MIP, x0: np.ndarray, time_limit: float | None = None, arrays: Arrays | None = None,
           gap: float = 0.005, guide: np.ndarray | None = None, workers: int | None = None) -> np.ndarray:
    """Fix-and-optimize: with commitments and job configurations fixed at ``x0``, re-solve each period alone.

    What is left (replicas, routing, units running, where and how long
    each training cluster runs) has one period per column. A row that then
    touches one period belongs to that period's MIP. An equality row that
    touches several (a job's progress over its window) is split: each
    period's part is held at what it is in ``x0``, so a period may move a
    job's hours to other offerings but not to other periods. Any other row
    across periods stops the polish (``x0`` is returned). The model then
    splits into one small MIP per period; each is solved by HiGHS (``gap``, an equal
    share of ``time_limit``, ``workers`` (default :data:`POLISH_WORKERS`)
    periods at a time, the period's current plan as its first incumbent)
    and kept where it is cheaper. With ``guide`` (the LP relaxation's
    values), a period is first solved in the neighbourhood of
    the LP and the current plan (integer columns zero in both stay zero, as
    in RINS), which is a far smaller MIP, and then whole with what is left
    of its share. Returns the improved point (``x0`` itself if nothing
    improved or the model does not split).
    """
    a = arrays if arrays is not None else mip.arrays()
    fixed = np.zeros(a.n_vars, bool)
    per = np.full(a.n_vars, -1, dtype=np.int64)
    labels: dict = {}
    for name, b in mip.variables.items():
        sl = slice(b.start, b.start + b.size)
        if name in FIXED_IN_POLISH:
            fixed[sl] = True
        elif b.size:
            if "period" not in b.coords.columns:
                return x0
            per[sl] = [labels.setdefault(p, len(labels)) for p in b.coords["period"]]
    free = ~fixed
    if not free.any():
        return x0
    # the period of each row's free columns; rows across periods must be equalities, split per period
    rp = np.full(a.n_rows, -1, dtype=np.int64)
    fc = free[a.cols]
    r, c = a.rows[fc], per[a.cols[fc]]
    rp[r] = c
    across = np.zeros(a.n_rows, bool)
    across[r[rp[r] != c]] = True
    if (across & (a.row_lo != a.row_hi)).any():
        return x0
    rp[across] = -1
    split_r, split_c = r[across[r]], c[across[r]]
    x = x0.copy()
    t_end = None if time_limit is None else time.perf_counter() + time_limit
    order = np.argsort(per, kind="stable")
    col_cuts = np.searchsorted(per[order], np.arange(len(labels) + 1))
    periods = []  # (columns, the period's own MIP): built once, solved in every pass
    for k in range(len(labels)):
        cols = order[col_cuts[k]:col_cuts[k + 1]]
        cols = cols[free[cols]]
        if len(cols):
            mine = rp == k
            mine[split_r[split_c == k]] = True  # whole split rows: the other periods' part is held fixed
            periods.append((cols, _period_mip(a, x, cols, np.flatnonzero(mine), mine[a.rows])))
    # passes while time is left and the last one paid (a pass resumes the neighbourhood searches that hit
    # their share of the limit); without a limit, one pass
    while True:
        before = float(a.c @ x)
        _polish_pass(x, periods, t_end, gap, guide, workers or POLISH_WORKERS)
        if t_end is None or t_end - time.perf_counter() < 0.05 * len(periods) or \
                float(a.c @ x) > before - 1e-4 * abs(before):
            break
    return x if not check_start(a, x) else x0


def _polish_pass(x: np.ndarray, periods: list, t_end: float | None, gap: float, guide: np.ndarray | None,
                 workers: int) -> None:
    """Improve every period once, ``workers`` periods at a time (in place).

    Periods share no column, so the threads write disjoint parts of ``x``;
    HiGHS runs without the GIL, so two workers do twice the work on two
    cores. Each period gets an equal share of what is left of the time
    per worker.
    """
    workers = max(1, min(workers, len(periods)))
    lock = threading.Lock()
    todo = iter(range(len(periods)))

    def work(_: int = 0) -> None:
        while True:
            with lock:
                i = next(todo, None)
                if i is None:
                    return
                left = None
                if t_end is not None:
                    now_left = t_end - time.perf_counter()
                    left = min(now_left, now_left * workers / (len(periods) - i))
            if left is not None and left < 0.05:
                return
            cols, sub = periods[i]
            _improve_period(x, cols, sub, left, gap, guide)

    if workers == 1:
        work()
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="gpuopt-polish") as pool:
        list(pool.map(work, range(workers)))  # re-raises a worker's exception here


def _period_mip(a: Arrays, x: np.ndarray, cols: np.ndarray, rows: np.ndarray, in_rows: np.ndarray) -> Arrays:
    """The MIP of one period: its free columns ``cols`` and its ``rows`` (``in_rows``: the non-zeros in them),
    the fixed columns moved to the bounds."""
    colmask = np.zeros(a.n_vars, bool)
    colmask[cols] = True
    inside = in_rows & colmask[a.cols]
    outside = in_rows & ~colmask[a.cols]
    const = np.bincount(a.rows[outside], weights=a.vals[outside] * x[a.cols[outside]], minlength=a.n_rows)
    rmap = np.full(a.n_rows, -1, dtype=np.int64)
    rmap[rows] = np.arange(len(rows))
    cmap = np.full(a.n_vars, -1, dtype=np.int64)
    cmap[cols] = np.arange(len(cols))
    return Arrays(n_vars=len(cols), n_rows=len(rows), rows=rmap[a.rows[inside]], cols=cmap[a.cols[inside]],
                  vals=a.vals[inside], row_lo=a.row_lo[rows] - const[rows], row_hi=a.row_hi[rows] - const[rows],
                  col_lo=a.col_lo[cols], col_hi=a.col_hi[cols], integer=a.integer[cols], c=a.c[cols], c0=0.0,
                  var_names=[], row_names=[])


def _improve_period(x: np.ndarray, cols: np.ndarray, sub: Arrays, left: float | None, gap: float,
                    guide: np.ndarray | None) -> None:
    """Re-solve one period (``sub``) from its current plan ``x[cols]``; keep what is cheaper, in place."""
    from .backends.ortools_backend import solve_ortools

    def attempt(arrays: Arrays, limit: float | None) -> None:
        # the period's current plan goes in as HiGHS's first incumbent: without it a short limit often
        # ends before HiGHS finds any plan of its own
        res = solve_ortools(None, backend="highs", time_limit=limit, gap=gap, arrays=arrays, start=x[cols])
        if res.x is not None and res.objective is not None and res.objective < float(sub.c @ x[cols]) - 1e-6:
            x[cols] = res.x

    t0 = time.perf_counter()
    if guide is not None:
        near = sub.col_hi.copy()
        near[sub.integer & (guide[cols] < 1e-6) & (x[cols] < 0.5)] = 0.0
        attempt(dataclasses.replace(sub, col_hi=near), None if left is None else 0.5 * left)
    rest = None if left is None else left - (time.perf_counter() - t0)
    if rest is None or rest > 0.2:
        attempt(sub, rest)


def _checked(a: Arrays, build) -> np.ndarray | None:
    try:
        x = build()
    except (_NoStart, KeyError, ValueError):
        return None
    if x is None:
        return None
    x = np.clip(x, a.col_lo, a.col_hi)
    x = np.where(a.integer, np.rint(x), x)
    if check_start(a, x):
        return None
    return x


def solve_lp(a: Arrays, time_limit: float | None = None) -> np.ndarray | None:
    """Values of the LP relaxation (HiGHS through OR-Tools), or None."""
    from ortools.linear_solver.python import model_builder as mb

    from .backends.ortools_backend import _capture_stdout, build_model

    model = build_model(dataclasses.replace(a, integer=np.zeros_like(a.integer)))
    solver = mb.Solver("highs")
    if time_limit is not None:
        solver.set_time_limit_in_seconds(max(0.1, float(time_limit)))
    with _capture_stdout():
        status = solver.solve(model)
    if status != mb.SolveStatus.OPTIMAL:
        return None
    helper = solver._Solver__solve_helper
    return np.asarray(helper.variable_values(), dtype=float)


class _NoStart(Exception):
    pass


class _Dispatch:
    """Places training and inference on capacity, committed first, then rented."""


    def __init__(self, mip: MIP, T, vt: dict, guide: np.ndarray | None, round_up: bool = False,
                 training_last: bool = False):
        self.mip, self.T, self.vt, self.guide = mip, T, vt, guide
        self.round_up, self.training_last = round_up, training_last
        self.x = np.zeros(mip.n_vars)
        O = T.offerings.set_index("offering")
        self.O = O
        self.G = O["G"].astype(float).to_dict()
        self.pricing = O["pricing"].to_dict()
        self.cap = O["max_units"].astype(float).fillna(np.inf).to_dict()
        self.price = O["price"].astype(float).to_dict()
        e = (O["energy_per_gpu_hour"].fillna(0) * (1 - O["idle_power_fraction"].fillna(0))).astype(float)
        self.busy_energy = e.to_dict()
        self.hours = T.periods.set_index("period")["hours"].astype(float).to_dict()
        self.order = {p: i for i, p in enumerate(T.periods["period"])}
        self.train_gpus = defaultdict(float)  # average training GPUs per (offering, period)
        self.cluster = defaultdict(float)  # largest cluster per (offering, period)
        self.used = defaultdict(float)  # inference GPUs per (offering, period)
        self.held = {}  # committed units per (offering, period): reserved block or existing + new owned
        self.held_var, self.var_periods, self.upper = {}, defaultdict(list), None

    # -- capacity -------------------------------------------------------------
    def committed(self, o) -> bool:
        return self.pricing[o] in ("reserved", "owned")

    def free_inference_gpus(self, o, p) -> float:
        """GPUs inference may still take on (o, p)."""
        G = self.G[o]
        if self.committed(o):
            total = G * self.held.get((o, p), 0.0)
            return min(total - self.train_gpus[(o, p)], total - self.cluster[(o, p)]) - self.used[(o, p)]
        U = self.cap[o]
        if not np.isfinite(U):
            return np.inf
        units = math.floor(min(U - self.train_gpus[(o, p)] / G, U - self.cluster[(o, p)] / G) + 1e-9)
        return units * G - self.used[(o, p)]

    def training_fits(self, o, p, n: float, hours: float) -> float:
        """Hours (≤ ``hours``) a cluster of n GPUs can run on (o, p) beside what is placed."""
        G, hp = self.G[o], self.hours[p]
        if self.committed(o):
            total = G * self.held.get((o, p), 0.0)
            if n + self.used[(o, p)] > total + 1e-9:
                return 0.0
            room = total - self.used[(o, p)] - self.train_gpus[(o, p)]
        else:
            U = self.cap[o]
            if not np.isfinite(U):
                return hours
            if n + G * math.ceil(self.used[(o, p)] / G - 1e-9) > G * U + 1e-9:
                return 0.0
            room = G * U - G * math.ceil(self.used[(o, p)] / G - 1e-9) - self.train_gpus[(o, p)]
        return max(0.0, min(hours, room * hp / n))

    # -- the plan ---------------------------------------------------------------
    def run(self) -> np.ndarray:
        # the LP's replicas first: a training cluster must then fit beside them (the LP's fractional
        # run variables make its cluster-fit rows weak, so its training placements are the ones to move)
        self.commit()
        self.inference_prepare()
        if self.guide is not None:
            self.inference_guided()
        if not self.training_last:
            self.training()
        self.inference_rest()
        if self.training_last:  # training takes what inference left (it may run in any region)
            self.training()
        self.units()
        return self.x

    def commit(self) -> None:
        vt, x, g = self.vt, self.x, self.guide
        held = vt.get("units-held")
        if held is None:
            return
        if g is not None:
            for name in ("units-reserved", "units-owned"):
                tab = vt.get(name)
                if tab is not None and len(tab):
                    v = tab["var"].to_numpy(np.int64)
                    x[v] = np.ceil(g[v] - 1e-6) if self.round_up else np.floor(g[v] + 0.5)
        self.held_var = {}  # (offering, period) -> the variable holding its units
        self.var_periods = defaultdict(list)  # that variable -> the (offering, period) it covers
        for o, p, v, e in zip(held["offering"], held["period"], held["var"], held["existing"]):
            self.held[(o, p)] = float(e) + float(x[v])
            self.held_var[(o, p)] = int(v)
            self.var_periods[int(v)].append((o, p))
        self.upper = self.mip.arrays().col_hi if self.var_periods else None

    def commit_one_more(self, rows, p) -> bool:
        """Reserve or buy one more unit on the cheapest committed option among ``rows`` (quotas allowing)."""
        best, best_cost = None, np.inf
        for r in rows:
            o = r.offering
            if not self.committed(o) or (o, p) not in self.held_var:
                continue
            v = self.held_var[(o, p)]
            if self.x[v] + 1 > self.upper[v] + 1e-9 or r.gpus > self.G[o]:
                continue
            # price of the unit per GPU-hour it covers, as a tie-breaker between offerings
            cost = self.price.get(o, 0.0) if self.pricing[o] == "reserved" else 0.0
            if cost < best_cost:
                best, best_cost = v, cost
        if best is None:
            return False
        self.x[best] += 1
        for key in self.var_periods[best]:
            self.held[key] += 1
        return True

    def training(self) -> None:
        vt, x, g = self.vt, self.x, self.guide
        hrs = vt.get("training-hours")
        if hrs is None or not len(hrs):
            return
        sel = vt["training-select"]
        runv = vt["training-run"].set_index(["job", "config", "offering", "period"])["var"]
        selv = sel.set_index(["job", "config"])["var"]
        need = sel.set_index(["job", "config"])["hours"]
        h = hrs.copy()
        h["cost"] = np.where(h["pricing"].isin(RENTED),
                             h["gpus"] / h["G"] * h["offering"].map(self.price), 0.0) / h["progress"]
        for job, jg in h.groupby("job", sort=False):
            configs = list(jg["config"].unique())
            if g is not None:
                configs.sort(key=lambda c: -g[selv[(job, c)]])
            else:
                cheapest = jg[jg["pricing"].isin(RENTED)].groupby("config")["cost"].min()
                configs = [c for c in cheapest.sort_values().index]
            for c in configs:
                rows = jg[jg["config"] == c]
                placed = self._place_job(rows, float(need[(job, c)]))
                if placed is None:
                    continue
                for r, t in placed:
                    x[r.var] += t
                    x[runv[(job, c, r.offering, r.period)]] = 1.0
                    self.train_gpus[(r.offering, r.period)] += r.gpus * t / self.hours[r.period]
                    self.cluster[(r.offering, r.period)] = max(self.cluster[(r.offering, r.period)], r.gpus)
                x[selv[(job, c)]] = 1.0
                # the progress row is an equality: make it exact
                v = rows["var"].to_numpy(np.int64)
                done = float((x[v] * rows["progress"].to_numpy()).sum())
                if done > 0:
                    x[v] *= float(need[(job, c)]) / done
                break
            else:
                raise _NoStart(f"training {job}")

    def _place_job(self, rows: pd.DataFrame, need: float):
        """[(row, hours)] covering ``need`` progress hours, or None."""
        g = self.guide
        left = need
        per_period = defaultdict(float)  # a job's hours in a period, over all offerings
        out = []

        def take(r, t_want):
            nonlocal left
            t = min(t_want, self.hours[r.period] - per_period[r.period], left / r.progress)
            t = self.training_fits(r.offering, r.period, r.gpus, t)
            if t <= TOL:
                return
            out.append((r, t))
            per_period[r.period] += t
            left -= t * r.progress
            # reserve the room now so the next placement of this job sees it
            self.train_gpus[(r.offering, r.period)] += r.gpus * t / self.hours[r.period]
            self.cluster[(r.offering, r.period)] = max(self.cluster[(r.offering, r.period)], r.gpus)

        saved = (dict(self.train_gpus), dict(self.cluster))
        if g is not None:
            guided = rows.assign(t=g[rows["var"].to_numpy(np.int64)])
            sel_w = max(1e-9, float(guided["t"].mul(guided["progress"]).sum()) / need)
            for r in guided[guided["t"] > TOL].sort_values("t", ascending=False).itertuples():
                if left <= TOL:
                    break
                take(r, r.t / min(1.0, sel_w) if sel_w < 1 else r.t)
        ranked = rows.sort_values(["cost", "period"], key=lambda s: s.map(self.order) if s.name == "period" else s)
        for r in ranked.itertuples():
            if left <= TOL:
                break
            take(r, self.hours[r.period])
        # undo the provisional room; the caller books the final placement
        self.train_gpus = defaultdict(float, saved[0])
        self.cluster = defaultdict(float, saved[1])
        if left > 1e-6 * max(1.0, need):
            return None
        return out

    def inference_prepare(self) -> None:
        vt, x, g, T = self.vt, self.x, self.guide, self.T
        rep = vt["inference-replicas"]
        routing = vt.get("inference-routing")
        multi = set(T.multi_bucket)
        route_var = {}
        if routing is not None and len(routing):
            route_var = {k: v for k, v in zip(zip(routing["service"], routing["bucket"], routing["config"],
                                                  routing["offering"], routing["period"]), routing["var"])}
        opts = rep.merge(T.rps, on=["service", "config"])
        own = opts["pricing"] == "owned"
        per_rep_cost = np.where(opts["pricing"].isin(RENTED),
                                opts["offering"].map(self.price) * opts["gpus"] / opts["G"],
                                np.where(own, opts["gpus"] * opts["offering"].map(self.busy_energy), 0.0))
        opts["cost"] = per_rep_cost / opts["rps"]
        # committed capacity before rented at equal cost per rps
        opts["rank"] = np.where(opts["pricing"].isin(RENTED), 1, 0)
        opts = opts.sort_values(["service", "period", "bucket", "rank", "cost"])
        by_sp = {k: grp for k, grp in opts.groupby(["service", "period"], sort=False)}
        demand = T.demand
        dem = {k: dict(zip(grp["bucket"], grp["rps"])) for k, grp in demand.groupby(["service", "period"])}
        minr = (T.min_replicas.set_index(["service", "period"])["min_replicas"].to_dict()
                if len(T.min_replicas) else {})
        keys = sorted(set(dem) | set(minr), key=lambda k: (str(k[0]), self.order.get(k[1], 0)))
        # one pass over the whole table (a pass per group cost 5 s of pandas overhead at ×1)
        infos: dict = defaultdict(dict)
        for r in opts.drop_duplicates(["service", "period", "config", "offering"]).itertuples():
            infos[(r.service, r.period)][(r.config, r.offering)] = r
        rpss: dict = defaultdict(dict)
        for s, p, k, o, b, v in zip(opts["service"], opts["period"], opts["config"], opts["offering"],
                                    opts["bucket"], opts["rps"]):
            rpss[(s, p)][(k, o, b)] = v
        state = {}
        for s, p in keys:
            grp = by_sp.get((s, p))
            if grp is None:
                raise _NoStart(f"{s}/{p}: no option")
            state[(s, p)] = (grp, dict(dem.get((s, p), {})), defaultdict(int), defaultdict(float),
                             infos[(s, p)], rpss[(s, p)])
        self.keys, self.state, self.route_var, self.multi = keys, state, route_var, multi
        self.dem, self.minr = dem, minr

    def add_replicas(self, st, p, k, o, n) -> int:
        _grp, _left, reps, _tu, info, _rps = st
        r = info[(k, o)]
        free = self.free_inference_gpus(o, p)
        n = int(min(n, math.floor(free / r.gpus + 1e-9))) if np.isfinite(free) else int(n)
        if n > 0:
            reps[(k, o)] += n
            self.used[(o, p)] += n * r.gpus
        return max(n, 0)

    def inference_guided(self) -> None:
        """Pass 1, every service: the LP's own replicas, rounded down, with their share of its routing."""
        g, x, multi, route_var, state, add_replicas = (self.guide, self.x, self.multi, self.route_var, self.state,
                                                       self.add_replicas)
        for s, p in self.keys:
            st = state[(s, p)]
            _grp, left, reps, time_used, info, rps = st
            for (k, o), r in info.items():
                want = math.floor(g[r.var] + 1e-6)
                if want <= 0:
                    continue
                got = add_replicas(st, p, k, o, want)
                if got <= 0:
                    continue
                share = got / max(g[r.var], 1e-9)
                if s in multi:
                    for b in list(left):
                        v = route_var.get((s, b, k, o, p))
                        if v is None:
                            continue
                        q = min(left[b], g[v] * share)
                        if q > TOL:
                            x[v] += q
                            left[b] -= q
                            time_used[(k, o)] += q / rps[(k, o, b)]
                elif left:
                    b = next(iter(left))
                    q = min(left[b], got * rps[(k, o, b)])
                    left[b] -= q
                    time_used[(k, o)] += q / rps[(k, o, b)]
    def inference_rest(self) -> None:
        """Pass 2: what is left of demand and floors, cheapest first (committed capacity before rented)."""
        x, multi, route_var, state, add_replicas = self.x, self.multi, self.route_var, self.state, self.add_replicas
        dem, minr = self.dem, self.minr
        for s, p in self.keys:
            st = state[(s, p)]
            grp, left, reps, time_used, info, rps = st
            for b in list(left):
                rows = list(grp[grp["bucket"] == b].itertuples())
                while left[b] > TOL:
                    best, best_key = None, None
                    for r in rows:
                        k, o = r.config, r.offering
                        spare = reps[(k, o)] - time_used[(k, o)]
                        if spare > TOL:
                            key = (0.0, r.cost)
                        else:
                            free = self.free_inference_gpus(o, p)
                            if free < r.gpus - 1e-9:
                                continue
                            if self.committed(o):
                                key = (r.cost, r.cost)
                            else:
                                G = self.G[o]
                                open_spare = math.ceil(self.used[(o, p)] / G - 1e-9) * G - self.used[(o, p)]
                                key = (0.0 if open_spare >= r.gpus else r.cost, r.cost)
                        if best_key is None or key < best_key:
                            best, best_key = r, key
                    if best is None:
                        if self.commit_one_more(rows, p):  # out of rented room: reserve or buy a unit
                            continue
                        break
                    k, o = best.config, best.offering
                    spare = reps[(k, o)] - time_used[(k, o)]
                    if spare <= TOL:
                        need_n = math.ceil(left[b] / best.rps - 1e-9)
                        if self.committed(o):
                            chunk = need_n
                        else:
                            G = self.G[o]
                            open_spare = math.ceil(self.used[(o, p)] / G - 1e-9) * G - self.used[(o, p)]
                            per_unit = max(1, int(G // best.gpus))
                            chunk = (int(open_spare // best.gpus) if open_spare >= best.gpus else per_unit)
                            chunk = min(need_n, chunk)
                        if add_replicas(st, p, k, o, max(1, chunk)) <= 0:
                            rows = [r for r in rows if r is not best]
                            continue
                        spare = reps[(k, o)] - time_used[(k, o)]
                    q = min(left[b], spare * best.rps)
                    time_used[(k, o)] += q / best.rps
                    left[b] -= q
                    if s in multi:
                        x[route_var[(s, b, k, o, p)]] += q
                if left[b] > 1e-6 * max(1.0, dem[(s, p)][b]):
                    raise _NoStart(f"{s}/{b}/{p}: demand left")
            short = int(minr.get((s, p), 0)) - sum(reps.values())
            for (k, o) in (info if short > 0 else ()):
                short -= add_replicas(st, p, k, o, short)
                if short <= 0:
                    break
            if short > 0:
                raise _NoStart(f"{s}/{p}: min_replicas")
            for (k, o), n in reps.items():
                x[info[(k, o)].var] = n

    def units(self) -> None:
        run = self.vt.get("units-running")
        if run is None:
            return
        for o, p, v in zip(run["offering"], run["period"], run["var"]):
            gpus = self.used[(o, p)]
            if gpus > 0:
                self.x[v] = math.ceil(gpus / self.G[o] - 1e-9)


__all__ = ["greedy_start", "lp_start", "best_start", "commitment_mip", "polish", "check_start", "start_objective",
           "solve_lp"]
