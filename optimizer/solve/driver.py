"""The solve driver: how a time limit is spent on one built model.

One place decides it, in this order:

1. the **LP relaxation** (integrality dropped): its optimum is the first
   proven bound (``relaxation_bound``), whatever happens next;
2. for a model with stability limits (``config-used``), the **stable fleet
   in stages** (:func:`solve_stable`): the model without the limits first
   (a relaxation: its bound is a proof for the stable model too); where that
   plan puts a request class limited to one configuration on several, one
   stable solve per configuration of that class (an exact split, branches
   pruned by their LP bound and cut off at the best plan); otherwise the
   model restricted to the configurations that plan uses most, and only if
   that restriction cannot match the relaxation's bound the whole model,
   warm-started from it;
3. otherwise the **back end** (:func:`optimizer.solve.backends.solve`) with
   every second that is left;
4. with an executor (``--workers``, ``--executor dask``), the **periods
   solved apart** (:mod:`optimizer.solve.decompose`) on it, after the
   search, in :data:`DECOMPOSITION_SHARE` of the time: their bound proves
   where it is the best.

Under a time limit, when the model without stability limits cannot be
solved to optimality in its share (a large model), or its plan puts a
class limited to one configuration on several and no exact split can take
it (more than :data:`~optimizer.solve.split.MAX_SPLIT` candidates), no
exact stable search follows: the configurations are fixed to those that
plan (or, without a plan, the LP relaxation) uses most and the back end
finds a first plan of that restriction. A model whose classes limited to
one configuration are all too wide for the split does not solve the model
without limits at all: the configuration relaxation
(:func:`configuration_relaxation`), started from the choice a descent over
the configurations one class at a time reaches
(:mod:`optimizer.solve.descent`), gives the bound and the configurations
to fix instead. The back end's own search of the restriction improves it
when the LP was cheap next to the limit, and each time that search proves
its restriction's optimum within the time, the restriction is widened by
one more configuration per class to choose from (the limits on) and
searched again from the best plan. Meanwhile, on a second CPU, the stable
model itself, with its configuration floors, is searched for a bound
(:func:`_bound_beside`; where the configuration relaxations already run
there, after them); once that search proves the stable optimum, the
restriction's searches stop. When the LP was not cheap, the plan is first
re-committed to the LP's commitments rounded up
(:func:`optimizer.solve.period_polish.recommit`), then improved by cycles
of fix-and-optimize rounds (:mod:`optimizer.solve.polish`; the inference
round one GPU model at a time), each followed by a pass over the periods
(:mod:`optimizer.solve.period_polish`). The time left goes to the whole
stable model started from the best plan; the result is reported with the
best proven bound and a message naming each step.

The time limit is the whole run's wall clock (docs/performance.md): the caller passes the seconds already spent, and
:data:`AFTER_SOLVE_PER_BUILD` times as many are kept for what follows the
solve (plan tables and audit).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import re
import threading
import time
from collections.abc import Sequence

import numpy as np

from ..executors import Inline, Lending, Threads, cpus, loan
from ..model.presolve import Model
from ..model.strengthen import config_floor
from . import coarse, decompose
from .descent import NAME as DESCENT, Descent, choose_configurations
from .backends import (DEFAULT_SOLVER, first_plan, one_thread, settle_background, solve as backend_solve,
                       solve_relaxation)
from .feasibility import objective, violations
from .neighbourhood import training_support
from .period_polish import build_by_periods, polish_periods, recommit
from .polish import MIN_IMPROVEMENT, ROUNDS, UNIT_FAMILIES, polish, restrict
from .result import SolveResult, Status, best_root, bound_error, relative_gap, within_gap
from .split import (COMMITMENTS, configuration_use, configurations_fixed, exact_split, over_one,
                    too_wide_to_split, warm)

#: what follows the solve (plan tables, audit) takes about as long as the build before it
#: (×0.25–×4: 1.0–1.45 times; docs/performance.md); 1.5 keeps the wall clock inside the limit
AFTER_SOLVE_PER_BUILD = 1.5
#: the solver always gets at least this share of the limit, however slow the build
MIN_SOLVER_SHARE = 0.25
#: under a time limit, the share of what is left that each stage of :func:`solve_stable` may use
#: before the next starts (the last stage gets the rest); stage 1 is the model without stability limits, or the
#: configuration relaxation
STAGE_SHARE = {"first": 0.5, "restricted": 0.5}
#: stage 2 of :func:`solve_stable` keeps, per request class, the N most used configurations and this many
#: more, for the solver to choose from (the most used alone can be the wrong choice when the plan
#: without limits mixes them)
EXTRA_CANDIDATES = 1
#: the plan without stability limits is first solved to this gap (or the requested one, if larger): it guides
#: the split (which class breaks its limit, which commitment counts first) and the split's leaves prove; only
#: when no split follows is it solved on to the requested gap (measured against other values: docs/performance.md)
GUIDE_GAP = 0.1
#: under a time limit, the exact split follows the model without stability limits (its guide) only when the time
#: left is at least this many times what the guide took. After the guide the split solves its options' LPs, then
#: searches its first leaf, a stable model of the guide's size, whole before any plan exists to cut off at: on bench
#: standard x0.25 (guide 21-22 s) the LPs took 18 s and the first leaf 77 s to its guide gap, 4.5 times the guide in
#: all; 5 leaves a margin for the guide's own variation. With less room the first leaf found no plan (at 90 s:
#: before, no plan at all, 18 s past the limit; with 3 times, the plan held before the split, 25.2M against a bound
#: of 2.61M); the configurations the guide uses most are fixed and searched instead (2.80M; docs/performance.md,
#: "A split with no time for its first leaf")
SPLIT_ROOM = 5.0
#: under a time limit, a model too large to prove (the fixed-configuration path) has the stable model with its
#: configuration floors searched for a bound on a second CPU, beside the searches of its restrictions
#: (:func:`_bound_beside`)
BOUND_BESIDE = True
#: the share of the time left that the search for a bound gets: its bound comes in the first seconds (the root of the
#: stable model with its floors), and past them the second CPU's memory bandwidth is worth more to the searches
#: of the restrictions (q3 + default catalog at 120 s: 74,264.56 with a quarter, 76,050.81 with half, 76,462.24
#: with all; docs/performance.md, "Configuration floors")
BESIDE_SHARE = 0.25
#: on the configuration relaxation's path, the share of that relaxation's time that the descent over the
#: configurations (:mod:`optimizer.solve.descent`) may take first; its point starts the relaxation, which gets the
#: rest (q3 + default catalog at 60 s on a slow machine: the relaxation alone chose configurations whose plans
#: cost 92,180 or more; docs/performance.md, "Configurations chosen one class at a time")
DESCENT_SHARE = 0.5
#: on the heuristics' path (:func:`heuristics_only`), the share of the time limit that the descent over the
#: configurations may take before the configurations it chose are fixed (in place of those the LP relaxation uses
#: most); bench x0.25 at 90 s on a slow machine: standard 2,840,825 -> 2,785,209, training-heavy 3,896,235 ->
#: 3,822,047 (docs/performance.md, "Configurations chosen one class at a time")
HEURISTICS_DESCENT_SHARE = 0.25
#: on the fixed-configuration path, the CPU of the floors' search goes on, once that search has had its share, with
#: the configuration relaxation (:func:`configuration_relaxation`) until the time limit, for its bound, and with the
#: parts solved apart below (:data:`CUTS_AFTER_FLOORS`) only if it is proven before (bench x0.25 at 90 s: standard
#: 2,565,954 -> 2,605,429, training-heavy 3,444,101 -> 3,543,758; docs/performance.md, "The configuration
#: relaxation beside the fixed path")
CONFIGURATIONS_AFTER_FLOORS = True
#: on the fixed-configuration path with the LP's duals at hand, the CPU of the floors' search goes on, once that
#: search has had its share and the configuration relaxation after it is proven, with the components and the periods
#: solved apart at those duals, until the time limit (:func:`_bound_beside`; bench x1 standard at 600 s:
#: docs/performance.md, "The components solved apart on every heuristic path")
CUTS_AFTER_FLOORS = True
#: while the configuration relaxation guides (:func:`solve_stable`), the same relaxation with whole units is solved
#: beside it on the CPU it leaves idle, for its bound (q3 + default catalog at 60 s: bound 61,146 -> 62,862), and
#: when that one is proven with time left, the model without stability limits after it (:func:`_relaxations_beside`;
#: docs/performance.md, "The configuration relaxation" and "Which integrality holds the gap")
UNITS_BESIDE = True
#: the gap a relaxation beside is solved to once more, with a cutoff at the bound that proves the path's plan
#: (:func:`_for_the_plan`): at the user's gap HiGHS would prune the nodes within it of its best point too,
#: below the cutoff when that point lies within the gap above it, and end short of the proof again
PROOF_GAP = 1e-6
#: the exact split's leaves run side by side on threads of this process (HiGHS; one thread per CPU the solve may
#: use, one HiGHS thread each) when the caller gives no executor (:func:`_leaf_threads`)
LEAF_THREADS = True
#: under a time limit, the share of the time left that a pass over the periods
#: (:mod:`optimizer.solve.period_polish`) may use: the re-commit before the fix-and-optimize rounds, and the pass
#: after each cycle of them, before the whole stable model gets the rest
PERIOD_SHARE = 0.5
#: under a time limit and with an executor, the share of the time after the LP kept for the components and periods
#: solved apart (:mod:`optimizer.solve.decompose`), after the search (not on the monthly model's path, where they
#: run beside the search)
DECOMPOSITION_SHARE = 0.2
#: under a time limit, on a model whose LP relaxation took too long for the stages (:data:`STAGES_MAX_LP_SHARE`),
#: the components and the periods are solved apart (:mod:`optimizer.solve.decompose`, at the LP's duals) on the CPU
#: the heuristics leave idle, beside them, for a bound (bench ×1 standard at 60 s: docs/performance.md, "The
#: periods solved apart beside the heuristics", "The components solved apart")
PARTS_BESIDE = True
#: under a time limit, the stages of :func:`solve_stable` run only when the LP relaxation took at most this
#: share of the limit (q3: 0.2 s of 60, and the stages prove its optimum; bench ×1: 9.7 s of 57, and the
#: model without limits gave a bound 0.45 % above the LP's in 24 s, no usable plan; docs/performance.md)
STAGES_MAX_LP_SHARE = 0.05
#: under a time limit, a model the exact split could take (:func:`optimizer.solve.split.too_wide_to_split` is
#: false) is guided by its model without stability limits only when the LP relaxation took at most this share of
#: the limit. That model gets half the time (:data:`STAGE_SHARE`) and needs about 40 times the LP's seconds to
#: reach its guide gap on q3 (2.09 s against 0.05 s), so half the limit must hold some 50 LPs. Past it the model
#: without limits stops on its limit with a bound below the components' and its half of the time is lost (bench
#: x1 at 600 s, LP 10-17 s: standard 8.43 % -> 7.02 %, training-heavy 18.67 % -> 9.09 % on the heuristics'
#: path; docs/performance.md, "The components solved apart on every heuristic path")
GUIDE_MAX_LP_SHARE = 0.01
#: under a time limit, on a model with two periods or more in one calendar month, the share of the limit the LP
#: relaxation may take; past it the monthly model's LP stands in for it (:mod:`optimizer.solve.coarse`: its point
#: guides, its prices bound; bench ×16: the LP alone takes 891 s, the monthly one 12.6 s; docs/performance.md,
#: "The monthly model"). A quarter keeps bench ×1's LP (8.8 s, 2026-11-27, load 1.0–1.3) on its own path at a
#: 60-s limit, where its bound and duals beat the monthly ones (by 1.3 % on standard); on a machine busy enough to
#: nearly double that time, the monthly model takes over
LP_MAX_SHARE = 0.25
#: when a first plan is made one period after the other (:func:`~optimizer.solve.period_polish.build_by_periods`),
#: each period's MIP is solved to this gap: the period rounds improve the plan after (bench ×16: 102.07M in 60 s at
#: 5 %, 101.79M in 360 s at 1 %; docs/performance.md, "The monthly model")
BUILD_GAP = 0.05


class Relaxation(enum.Enum):
    """The relaxation whose point guides the heuristics, and whose bound stands, as named in messages.

    ``LP``: the LP relaxation. ``MONTHLY``: the monthly model's LP standing in
    for it, when the LP relaxation does not solve in its share of the limit
    (:data:`LP_MAX_SHARE`); then no stage before the heuristics is tried and
    the first plan is made one period after the other.
    """

    LP = "the LP relaxation"
    MONTHLY = "the monthly model's LP"

    @property
    def bound_name(self) -> str:
        """Whose bound proves: the LP relaxation's own; for the monthly model's LP, the periods' LP relaxations
        at its prices (its own optimum is no bound)."""
        if self is Relaxation.MONTHLY:
            return "the periods' LP relaxations at the monthly model's prices"
        return self.value


def lp_took_too_long(time_limit: float | None, lp_seconds: float) -> bool:
    """Did the LP relaxation take more than :data:`STAGES_MAX_LP_SHARE` of the limit (``time_limit``: the
    seconds left after it)? Then no MIP of the model's size is solved in a share of the limit, and the heuristics
    of :func:`_fixed_configurations` make the plan, on one CPU."""
    return time_limit is not None and lp_seconds > STAGES_MAX_LP_SHARE * (time_limit + lp_seconds)


def heuristics_only(model: Model, time_limit: float | None, lp_seconds: float,
                    relaxed: Relaxation = Relaxation.LP) -> bool:
    """Does the heuristics' path (:func:`_fixed_configurations` from the LP's point, the parts solved apart
    beside) make the plan of the stable ``model``, with no stage before it?

    Under a time limit (``time_limit``: the seconds left after the LP), when
    the monthly model's LP stands in for the LP relaxation, when the LP took
    too long for any stage (:func:`lp_took_too_long`), or when the exact
    split could take the model but the LP took more than
    :data:`GUIDE_MAX_LP_SHARE` of the limit, too long for the model without
    stability limits that would guide the split. A model no split can take
    keeps the configuration relaxation's path below :data:`STAGES_MAX_LP_SHARE`.
    """
    if time_limit is None:
        return False
    # the LP stopped on its share (the monthly model's stands in) took too long by definition, however little of
    # the limit that share was
    if relaxed is Relaxation.MONTHLY or lp_took_too_long(time_limit, lp_seconds):
        return True
    return lp_seconds > GUIDE_MAX_LP_SHARE * (time_limit + lp_seconds) and not too_wide_to_split(model)


def solve_budget(time_limit: float | None, spent: float) -> float | None:
    """Seconds of ``time_limit`` (a wall-clock budget for the whole run) left to the solve.

    ``spent`` seconds went on candidates, presolve and the model build;
    :data:`AFTER_SOLVE_PER_BUILD` times as many are kept for what follows.
    None: no limit.
    """
    if time_limit is None:
        return None
    return max(time_limit - (1.0 + AFTER_SOLVE_PER_BUILD) * spent, MIN_SOLVER_SHARE * time_limit)


#: row families left out of the driver's LP relaxation: the training lanes' rows. Their LP is the
#: capacity rows' again (a fractional lane is any share of the pool), so they moved no LP bound measured
#: (q3, bench x1 standard: 12,269,374.07 either way) while they cost bench x1's LP 42.6 s against 32.4 s.
#: The model without stability limits leaves them out too when there is no time limit (:func:`solve_stable`)
LP_LEAVES_OUT = ("training-lanes-hours", "training-lanes-fit", "training-lanes-quota")


def relaxation(model: Model, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
               threads: int | None = None) -> SolveResult:
    """The LP relaxation of ``model``, solved by the back end ``solver``: its bound, guide and duals.

    Every integrality is dropped and the rows of :data:`LP_LEAVES_OUT` are
    lifted (their bounds made infinite). Fewer rows give a relaxation of the
    LP relaxation: its optimum is still a lower bound on every plan, and
    its point and duals guide the search as before (a lifted row's dual is
    0). CP-SAT solves no LP; HiGHS does it for that back end, with its
    parallel dual simplex on ``threads`` threads (default: every CPU this
    process may use), since nothing else runs while it does.
    """
    mip = model.mip
    if threads is None:
        threads = cpus()
    return solve_relaxation(mip, lift(mip, mip.arrays()), solver, time_limit, threads)


def configuration_relaxation(model: Model, a, solver: str, time_limit: float | None, gap: float,
                             threads: int | None, whole: Sequence[str] = ("config-used",),
                             stop: threading.Event | None = None, cutoff: float | None = None,
                             enough=None, start: np.ndarray | None = None) -> SolveResult:
    """The stable model with its configuration floors and every integrality but ``config-used``'s dropped
    (and that of the other variable blocks named in ``whole``).

    A relaxation of the stable model: the floors
    (:func:`optimizer.model.strengthen.config_floor`) hold for every stable
    plan, and fewer variables are integer. So its bound proves for the
    stable model, and each request class in its optimum sits on whole
    configurations (at most its limit of them), each carrying the class's
    whole replicas, while replicas, units and training may be fractional.
    That point chooses the configurations to fix on a model too large to
    search whole better than the plan without stability limits, which
    spreads a class over several to round its replicas (q3 with the default
    catalog: its bound 61,978 at the root, against 45,828 for the LP and
    about 56,500 for the model without limits in the same time; the
    restriction to its choice costs 75,302.23 at best, to the other's
    77,357.96 or 84,048.89; docs/performance.md, "The configuration
    relaxation").

    With the units held whole too (``whole`` adding
    :data:`~optimizer.solve.polish.UNIT_FAMILIES`) it is slower to solve
    and its bound higher (q3 with the default catalog after 29 s: 62,862
    against 61,146; ×4 demand: 258,213 against 244,668): the solve driver
    runs that one beside it on a CPU of its own for its bound
    (:data:`UNITS_BESIDE`).

    CP-SAT takes no continuous column; HiGHS solves it for that back end,
    as it does the LP relaxation. ``stop``, ``cutoff`` and ``enough``: the
    back end's (a caller that solves it beside its own search stops it once
    it has its answer, or once its bound has done what it can). ``start``: a
    point of the relaxation to start from (the descent's,
    :mod:`optimizer.solve.descent`).
    """
    mip = model.mip
    floors = a.with_rows(config_floor(mip, model.data, model.vars))
    integer = np.zeros_like(floors.integer)
    for name in whole:
        if name in mip.variables:
            ids = mip.variables[name].ids
            integer[ids] = floors.integer[ids]
    return backend_solve(mip, solver="highs" if solver == "cp-sat" else solver, time_limit=time_limit, gap=gap,
                         threads=threads, arrays=dataclasses.replace(floors, integer=integer), stop=stop,
                         cutoff=cutoff, enough=enough, start=start)


def without_limits(mip, a):
    """A copy of the arrays ``a`` of ``mip`` without its stability limits: a relaxation of the stable model.

    Every ``config-used`` fixed to 1 and each class's limit row (at most N
    configurations) lifted. Every stable plan, its ``config-used`` set to 1,
    is a plan of it at the same cost. (The rows that hold only under the
    limit, :func:`optimizer.model.strengthen.config_floor`, are never in
    ``a``: they are added where the stable model's bound is searched for.)
    """
    free = a.copy_bounds()
    ids = mip.variables["config-used"].ids
    free.col_lo[ids] = 1.0
    free.col_hi[ids] = 1.0
    free.row_hi[mip.constraints["stability-configurations"].ids] = float(len(ids))  # Σ c ≤ every one: no limit
    return free


def lift(mip, a):
    """A copy of the arrays ``a`` of ``mip`` with the rows of :data:`LP_LEAVES_OUT` lifted (bounds made infinite).

    Fewer rows: a relaxation of whatever ``a`` is, for the LP and for the
    model without stability limits (:func:`solve_stable`).
    """
    a = a.copy_bounds()
    for name in LP_LEAVES_OUT:
        if name in mip.constraints:
            rows = mip.constraints[name].ids
            a.row_lo[rows] = -np.inf
            a.row_hi[rows] = np.inf
    return a


def solve(model: Model, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, gap: float = 1e-6,
          threads: int | None = None, start: np.ndarray | None = None, executor=None,
          known: Sequence[np.ndarray] = (), leaf_bounds=None) -> SolveResult:
    """Solve ``model`` within ``time_limit`` seconds of wall clock (see the module docstring).

    Returns the back end's result with ``relaxation_bound`` set; the bound
    reported is never below the relaxation's. ``known``: plans the caller
    already has (a sweep's solved neighbours); the cheapest that meets every
    row of ``model`` (:func:`known_plan`) is the search's first incumbent,
    so what costs more is cut off from the start, and the result is never
    dearer than it. ``leaf_bounds``: bounds of the exact split's leaves
    carried from elsewhere (:func:`optimizer.solve.split.exact_split`). With an ``executor``
    (:mod:`optimizer.executors`), the component and period models of
    :mod:`optimizer.solve.decompose` run on it at the LP's duals after the
    search, in :data:`DECOMPOSITION_SHARE` of the time (on the monthly
    model's path: at its prices, beside the search, for all of its time),
    and the best of their bounds (``decomposition_bound``) proves where it
    is the best.
    """
    t0 = time.perf_counter()
    if executor is not None and executor.workers > 1:
        for _ in range(executor.workers):
            executor.submit(warm, None)
    # a model with weeks in a month has a monthly model to stand in for its LP: the LP gets a share of the limit
    capped = time_limit is not None and coarse.mergeable(model.problem)
    lp = relaxation(model, solver, LP_MAX_SHARE * time_limit if capped else time_limit, threads)
    relaxed, priced = Relaxation.LP, ()
    if capped and lp.status == Status.TIME_LIMIT:
        monthly = _monthly(model, solver, time_limit - (time.perf_counter() - t0), threads)
        if monthly is not None:
            monthly[0].solve_seconds += lp.solve_seconds
            (lp, priced), relaxed = monthly, Relaxation.MONTHLY
    lp_bound = lp.objective if lp.status == Status.OPTIMAL else None
    if lp.status == Status.INFEASIBLE:
        result = SolveResult(Status.INFEASIBLE, solver, message="no plan meets every constraint (the relaxation "
                             "is infeasible)", solve_seconds=lp.solve_seconds, build_seconds=lp.build_seconds)
        return result
    left = None if time_limit is None else max(1.0, time_limit - (time.perf_counter() - t0))
    apart = executor is not None and lp_bound is not None and len(model.data.periods) > 1
    # on the monthly path the parts take the workers for the whole search, which runs in this process: its
    # passes over the periods gain little there (bench x16: 0.3 % in 250 s) and gave the same plan without
    # workers, while the component models raise the bound with every second they get (docs/performance.md,
    # "The components solved apart")
    workers_beside = apart and relaxed is Relaxation.MONTHLY and left is not None
    if apart and not workers_beside and left is not None:
        # the periods are solved apart after the search, in their own share: on this machine's cores they
        # would slow the search down, and on shared workers the period rounds would queue behind them
        left = max(1.0, (1.0 - DECOMPOSITION_SHARE) * left)
    incumbent = known_plan(model.mip.arrays(), known, solver) if len(known) else None
    stable = start is None and "config-used" in model.mip.variables
    too_long = stable and heuristics_only(model, left, lp.solve_seconds, relaxed)
    beside = (_parts_beside(model, lp, solver, left, gap, threads, priced)
              if not apart and lp_bound is not None and too_long else None)
    where = "on the CPU beside the search"
    if workers_beside:
        beside = None, decompose.start_cuts(model, None, executor, left, gap, priced=priced)
        where = f"on {executor.workers} worker{'s' if executor.workers > 1 else ''} beside the search"
        executor = None  # the search's own rounds stay in this process
    try:
        if stable:
            result = solve_stable(model, solver, left, gap, threads, guide=lp.x, lp_seconds=lp.solve_seconds,
                                  executor=executor, incumbent=incumbent, leaf_bounds=leaf_bounds,
                                  lp_bound=lp_bound, relaxed=relaxed, duals=lp.duals)
        else:
            if start is None and incumbent is not None:
                start = incumbent.x
            result = backend_solve(model.mip, solver=solver, time_limit=left, gap=gap, threads=threads,
                                   start=start)
    except BaseException:
        # the part models not started beside are dropped; the running one ends on its limit
        if beside is not None and beside[0] is not None:
            beside[0].close()
        raise
    if incumbent is not None and (not result.status.has_plan or result.objective > incumbent.objective + 1e-9):
        # the search ended on its limit with nothing better (or without a plan): the known plan, with its bound
        result = _keep_known(incumbent, result, gap)
    result.relaxation_bound = lp_bound
    result.solve_seconds += lp.solve_seconds
    # a limit hit before the solver's own root LP finished, or a search that proved less than the LP: the
    # relaxation is still a proof, and where it meets the plan's cost the plan is optimal
    if _raise_bound(result, lp_bound) and result.status == Status.FEASIBLE \
            and within_gap(result.objective, result.bound, gap):
        result.status = Status.OPTIMAL
        result.message = (f"optimal: the bound of {relaxed.bound_name} meets the plan's cost "
                          f"(the search: {result.message})")
    # a first plan returned at its target leaves HiGHS ending its current stage in the background (within the
    # limit it was given): the solve is over when that run is
    settle_background()
    if apart and not workers_beside:
        _solve_apart(model, lp, executor, None if time_limit is None else time_limit - (time.perf_counter() - t0),
                     gap, result, priced)
    if beside is not None:
        pool, pendings = beside
        try:
            # each part model was given its share of the time the search had: at most one is still running
            for pending in pendings:
                _apply_decomposition(result, pending.collect(max(0.0, time_limit - (time.perf_counter() - t0))),
                                     gap, where=where)
        finally:
            if pool is not None:
                pool.close()
    return result


def _monthly(model: Model, solver: str, seconds: float, threads: int | None
             ) -> tuple[SolveResult, tuple[decompose.Priced, ...]] | None:
    """The monthly model's LP standing in for the LP relaxation of ``model`` (:mod:`optimizer.solve.coarse`).

    A result like the LP relaxation's: its ``x`` the monthly point spread
    over the periods (the guide), its objective and bound the Lagrangian
    bound of the periods' LP relaxations at the monthly prices (a proof),
    no duals; and the component and period models at those prices, for the
    parts solved apart (components first). None when the monthly model's
    LP or that bound is not had (then nothing stands in).
    """
    t0 = time.perf_counter()
    monthly = coarse.solve(model, solver, seconds, threads)
    if monthly is None:
        return None
    bound, periods = coarse.priced_periods(model, monthly)
    if bound is None:
        return None
    components = coarse.priced_components(model, monthly)
    result = SolveResult(Status.OPTIMAL, solver, objective=bound, bound=bound, x=coarse.point(model, monthly),
                         solve_seconds=time.perf_counter() - t0,
                         message=f"{Relaxation.MONTHLY.value} ({monthly.model.mip.n_vars:,} columns, "
                                 f"{len(monthly.model.data.periods)} periods)")
    return result, tuple(p for p in (components, periods) if p is not None)


def _parts_beside(model: Model, lp: SolveResult, solver: str, seconds: float, gap: float,
                  threads: int | None, priced: Sequence[decompose.Priced] = ()):
    """The components, then the periods, solved apart at the LP's duals (or the monthly model's ``priced``
    models; :func:`optimizer.solve.decompose.start_cuts`) on a thread of their own for ``seconds``, while the
    heuristics of :func:`_fixed_configurations` run on the other CPU: (the pool, one pending cut each), or None.

    HiGHS searches the heuristics' MIPs on one CPU, so the second is idle
    for all of their time (bench ×1 standard: about 45 s of 60). Their
    bound, a Lagrangian one at the LP's duals, is never below the LP's and
    proves where it is the best (docs/performance.md, "The periods solved
    apart", "The periods solved apart beside the heuristics" and "The
    components solved apart"). Only with HiGHS, on a machine of two CPUs or
    more, not when the caller asked for one thread, and for a model of
    several periods whose LP gave duals (:data:`PARTS_BESIDE`).
    """
    if not PARTS_BESIDE or (lp.duals is None and not priced) or len(model.data.periods) < 2:
        return None
    pool = _beside_pool(solver, threads)
    if pool is None:
        return None
    return pool, decompose.start_cuts(model, lp.duals, pool, seconds, gap, lp_x=lp.x, priced=priced)


def known_plan(a, known: Sequence[np.ndarray], solver: str) -> SolveResult | None:
    """The cheapest of the plans ``known`` that is a feasible point of the arrays ``a``, as a result; or None.

    Each is checked on ``a`` itself (every row, bound and integrality,
    :func:`~optimizer.solve.feasibility.violations`): a plan from another
    model (a neighbouring point of a sweep) is used only where it is a plan
    of this one.
    """
    plans = [np.asarray(x, float) for x in known]
    priced = [(objective(a, x), x) for x in plans if not violations(a, x)]
    if not priced:
        return None
    cost, x = min(priced, key=lambda p: p[0])
    return SolveResult(Status.FEASIBLE, solver, objective=cost, x=x.copy(), message=f"a known plan ({cost:,.2f})")


def _keep_known(incumbent: SolveResult, result: SolveResult, gap: float) -> SolveResult:
    """The known plan with the search's proven bound (the search found nothing cheaper in its time)."""
    return _held_with_bound(incumbent, result, gap, "the known plan, the search found nothing cheaper")


def _held_with_bound(held: SolveResult, result: SolveResult, gap: float, said: str,
                     seconds: float = 0.0) -> SolveResult:
    """The plan ``held`` (made before ``result``'s search, which found nothing cheaper) with that search's proven
    bound, clipped to the plan's cost, and its times and root bound; ``said``: how the message names the plan,
    ``seconds``: the solver's time spent on ``held``."""
    bound = None if result.bound is None else min(result.bound, held.objective)
    proven = within_gap(held.objective, bound, gap)
    return dataclasses.replace(
        held, status=Status.OPTIMAL if proven else Status.FEASIBLE, bound=bound,
        gap=relative_gap(held.objective, bound),
        x=held.x.copy(), solve_seconds=result.solve_seconds + seconds, build_seconds=result.build_seconds,
        root_bound=result.root_bound,
        message=f"{'optimal' if proven else 'time limit'}: {said} ({result.message})")


def _solve_apart(model: Model, lp: SolveResult, executor, seconds: float | None, gap: float,
                 result: SolveResult, priced: Sequence[decompose.Priced] = ()) -> None:
    """The components and the periods solved apart at the LP's duals (or the monthly model's ``priced`` models)
    on ``executor`` within ``seconds``; ``result`` takes the best bound."""
    duals = lp.duals
    if duals is None and not priced:  # a back end that reports no duals: HiGHS solves the LP again for them
        again = decompose.lp_duals(model)
        duals = None if again is None else again[1]
    if duals is None and not priced:
        result.message += "; the periods were not solved apart: HiGHS gave no LP duals to price the links with"
        return
    t = time.perf_counter()
    for pending in decompose.start_cuts(model, duals, executor, seconds, gap, lp_x=lp.x, priced=priced):
        wait = None if seconds is None else max(0.0, seconds - (time.perf_counter() - t))
        _apply_decomposition(result, pending.collect(wait), gap)


#: the clause by which a heuristic path's message names the source of its bound (:func:`_fixed_configurations`);
#: a better bound found later (:func:`_apply_decomposition`) takes its place, so the message names one source
BOUND_NAMED = " (the bound is {})"
#: how the message of a plan returned on the time limit starts
TIME_LIMIT_SAID = "time limit: "
#: that clause in a message, whatever source it names (derived from it, so the two cannot drift apart)
_BOUND_NAMED = re.compile(re.escape(BOUND_NAMED).replace(re.escape("{}"), "[^()]*"))


def _apply_decomposition(result: SolveResult, dec: decompose.DecompositionBound, gap: float,
                         where: str | None = None) -> None:
    """Record the part models' bound and prove with it where it is the best (the message says so, and
    ``where`` they ran: by default on the executor's workers). Of several decompositions (by component, by
    period), ``decomposition_bound`` keeps the best."""
    n = len(dec.parts)
    fell_back = int((dec.parts["bound_from"] != "mip").sum())
    where = where or f"on {dec.workers} worker{'s' if dec.workers > 1 else ''}"
    how = (f"{n} {dec.kind} model{'' if n == 1 else 's'} {where}"
           + (f", {fell_back} of them at their LP bound (not proven above it in time)" if fell_back else ""))
    what = f"the {dec.kind}s solved apart"
    if dec.bound is None or not np.isfinite(dec.bound):
        result.message += f"; {what} gave no bound ({how})"
        return
    if result.status.has_plan and bound_error(result.objective, dec.bound):
        # above a plan's cost: round-off in a part model, never a proof
        result.message += f"; {what} gave {dec.bound:,.2f}, above the plan: not used ({how})"
        return
    if result.decomposition_bound is None or dec.bound > result.decomposition_bound:
        result.decomposition_bound = dec.bound
    if _raise_bound(result, dec.bound):
        result.message = _BOUND_NAMED.sub("", result.message) + f"; the bound is {what} ({how})"
        _proven_if_within(result, gap)


def _proven_if_within(result: SolveResult, gap: float) -> None:
    """A plan whose gap a bound found after its search closed is optimal: its status says so, and so does the
    start of its message (``time limit: ...`` becomes ``optimal: ...``)."""
    if not within_gap(result.objective, result.bound, gap) or result.status != Status.FEASIBLE:
        return
    result.status = Status.OPTIMAL
    if result.message.startswith(TIME_LIMIT_SAID):
        result.message = "optimal: " + result.message[len(TIME_LIMIT_SAID):]


def _share(left: float | None, spent: float, share: float) -> float | None:
    if left is None:
        return None
    return max(1.0, share * (left - spent))


def solve_stable(model: Model, solver: str, time_limit: float | None, gap: float, threads: int | None,
                 guide: np.ndarray | None = None, lp_seconds: float = 0.0, executor=None,
                 incumbent: SolveResult | None = None, leaf_bounds=None,
                 lp_bound: float | None = None, relaxed: Relaxation = Relaxation.LP,
                 duals: np.ndarray | None = None) -> SolveResult:
    """Solve a model with stability limits in up to three stages (see the module docstring).

    1. *Unlimited*: every ``config-used`` fixed to 1 and the limit rows
       lifted, and, without a time limit, the training lanes' rows too
       (:func:`lift`): a relaxation of the stable model. Its bound B is a
       lower bound on the stable optimum.
    1b. *Split*: if that plan breaks a limit of one configuration, one
       stable solve per configuration of the class it breaks most
       (:func:`optimizer.solve.split.exact_split`, with each commitment's count too); the cheapest is the optimum.
       Stages 2 and 3 are for the other cases (limits above one, many
       candidates).
    2. *Restricted*: the stable model with, per service and request class,
       only the N configurations that carry most of stage 1's traffic. A
       restriction: its plan is a stable plan. If it costs at most B·(1 +
       gap), it is proven optimal with bound B.
    3. *Whole*: the stable model, started from stage 2's plan, with the
       time left; its bound is the better of its own and B.

    Every bound proven on the way stands: stage 1 solved on to the
    requested gap keeps the guide's bound when its own run, stopped on its
    limit, proves less.

    ``duals``: the LP relaxation's row duals (``guide`` is its point). On
    the fixed-configuration path with a search, the components and the
    periods are solved apart at them on the CPU beside, after the floors'
    search (:func:`_bound_beside`).

    ``incumbent`` (a stable plan the caller has, :func:`known_plan`) starts
    stage 1 (with every configuration allowed) and is the split's first best
    plan; its choices are the split's first options.

    Under a time limit the split follows stage 1 only when the time left
    is at least :data:`SPLIT_ROOM` times what stage 1 took (its option LPs
    and its first leaf, searched whole, need about that); otherwise the
    configurations are fixed as below. Before the split a stable plan is
    held (:func:`_first_plans` of the configurations stage 1 uses most),
    and returned with the split's bound when no leaf finds a cheaper one
    in the time (:func:`_kept_if_cheaper`).

    Under a time limit, if stage 1 stops on the limit (a large model), the
    configurations are fixed instead (:func:`_fixed_configurations`):
    those stage 1's plan uses most, or, without a plan, those of the LP
    relaxation ``guide``. So too when stage 1's plan puts a class limited
    to one configuration on several and no split follows: stages 2 and 3
    would first solve the model without limits on to the requested gap,
    whose plan is not stable, and leave the stable model the rest (q3 with
    the default catalog at 150 s: 77,964.77, gap 27.4 %, against 77,495.74,
    21.7 % on the fixed path). Stages 2 and 3 remain for a solve without a
    limit, and for a stage-1 plan within its limits or over limits above
    one only (q3 with two configurations a class is proven that way in the
    time). When every class limited to one configuration is too wide for
    the split, stage 1 is the configuration relaxation
    (:func:`configuration_relaxation`) instead, whose point chooses the
    configurations to fix and whose bound proves. When the LP relaxation
    alone took more than :data:`STAGES_MAX_LP_SHARE` of the time limit
    (``lp_seconds``), or did not solve at all and the monthly model's LP
    stands in for it (``relaxed``), stage 1 is skipped: a MIP of the same
    size cannot be solved in its share, and its bound adds little to the
    LP's (bench ×1: 0.45 % in 24 s). So too, for a model the split could
    take, past :data:`GUIDE_MAX_LP_SHARE` (:func:`heuristics_only`). Then
    the configurations fixed are those the descent over the configurations
    (:mod:`optimizer.solve.descent`), from those the LP relaxation uses
    most, reaches in :data:`HEURISTICS_DESCENT_SHARE` of the limit.

    On q3 the plan without limits puts the chat service on three
    configurations; the split proves the stable optimum in about 95 s where
    stages 2 and 3 had not after 12 minutes (docs/performance.md).
    """
    t0 = time.perf_counter()
    mip = model.mip
    a = mip.arrays()
    if heuristics_only(model, time_limit, lp_seconds, relaxed):
        # no stage before the heuristics: the configurations to fix come from the descent from the LP's choice,
        # in a share of the limit, where the LP relaxation itself guides (the monthly model's point is a point of
        # another model)
        descent = _descent(model, a, guide, HEURISTICS_DESCENT_SHARE * time_limit) \
            if relaxed is Relaxation.LP else None
        x, source, spent, said = ((guide, relaxed.value, 0.0, []) if descent is None else
                                  (descent.x, DESCENT, descent.seconds, [_descent_said(descent)]))
        return _fixed_configurations(model, a, x, solver, time_limit if descent is None else
                                     max(1.0, time_limit - spent), gap, threads, None, spent, source=source,
                                     lp_x=guide, executor=executor, relaxed=relaxed, said=said,
                                     bound_of=relaxed.value)
    if time_limit is not None and too_wide_to_split(model):
        # no class the exact split can take: the plan without limits would only choose the configurations to
        # fix, and the configuration relaxation, whose floors hold for the classes limited to one
        # configuration, chooses better and proves more. A model whose limits are all above one has no such
        # class and keeps the model without limits: without floors the relaxation is little more than the LP,
        # and stages 2 and 3 prove a model of q3's size in the time (q3 with two configurations a class at
        # 60 s: proven optimal in 50 s that way, a 4.5 % gap left through the relaxation; docs/performance.md,
        # "The configuration relaxation")
        share = _share(time_limit, 0.0, STAGE_SHARE["first"])
        # the same relaxation with whole units, on the CPU the first leaves idle, for its bound only (its point
        # chooses worse configurations: 71,790 where the first's is 61,978 on q3 + default catalog), and the
        # model without limits after it if it is proven early. They run until the time limit, while the
        # configurations are fixed and searched, and the best bound is taken at the end
        shared = _Shared()  # the path's best plan, which the relaxations beside may prove
        held = _relaxations_beside(model, a, solver, t0 + time_limit, gap, threads, shared)
        # the relaxation's branch and bound over the choices finds good ones slowly: a descent over them, one
        # class at a time, hands it a good point to start from
        descent = _descent(model, a, guide, DESCENT_SHARE * share)
        first = configuration_relaxation(model, a, solver,
                                         share if descent is None else max(1.0, share - descent.seconds), gap,
                                         threads, start=None if descent is None else descent.x)
        said = []
        if descent is not None:
            first.solve_seconds += descent.seconds
            said.append(f"the configuration relaxation started from {_descent_said(descent)}")
        if first.status == Status.INFEASIBLE:
            if held is not None:
                held.result()
            first.message = ("no plan meets every constraint with each request class on at most its limit of "
                             "configurations (the configuration relaxation is infeasible)")
            return first
        left = max(1.0, time_limit - (time.perf_counter() - t0))
        # the point that chooses the configurations to fix: the relaxation's, else the descent's, else the LP's
        x, source = ((first.x, "the configuration relaxation") if first.status.has_plan else
                     (descent.x, DESCENT) if descent is not None else
                     (guide, "the LP relaxation"))
        result = _fixed_configurations(model, a, x, solver, left, gap, threads, first.bound, first.solve_seconds,
                                       source=source,
                                       lp_x=guide, executor=executor, search=True, root=first.root_bound,
                                       busy=held, duals=duals, shared=shared, said=said,
                                       bound_of="the configuration relaxation")
        if held is not None:
            # a proven plan needs no more bound: the relaxations stop; otherwise they run to the limit
            _held_bound(result, held.result(stop=result.status == Status.OPTIMAL), gap)
        return result
    ids = mip.variables["config-used"].ids

    carried = {} if leaf_bounds is None else dict(leaf_bounds(a))
    classes = {key[0][0] for key in carried}
    if incumbent is not None and len(classes) == 1:
        # between two solved points whose splits chose the same class: split on it again, started from their
        # bounds, without the model without limits (its plan would only choose the class; the LP relaxation's
        # bound stands in for its bound). Keeping the class along the line is what lets the bounds carry.
        split = _split(model, a, SolveResult(Status.FEASIBLE, solver, bound=lp_bound), solver,
                       None if time_limit is None else time_limit - (time.perf_counter() - t0),
                       gap, threads, incumbent, executor, carried, classes=sorted(classes))
        if split is not None:
            return split
    # the model without the limits; without a time limit, without the lanes' rows too: both relax the stable
    # model, and its plan only chooses the class to split on (q3: 6.6-7.8 s -> 4.4-4.5 s, the same class and
    # leaves). Under a limit its plan may instead place the training of the fixed-configuration path, which
    # must then fit the lanes (q3 + default catalog at 60 s: 84,124 with them, 105,589 without;
    # docs/performance.md)
    free = without_limits(mip, lift(mip, a) if time_limit is None else a)
    guide_gap = max(gap, GUIDE_GAP)
    known_x = None
    if incumbent is not None:  # a stable plan is a plan of the model without limits, with every configuration on
        known_x = incumbent.x.copy()
        known_x[ids] = 1.0
    first = backend_solve(mip, solver=solver, time_limit=_share(time_limit, 0.0, STAGE_SHARE["first"]),
                          gap=guide_gap, threads=threads, arrays=free, start=known_x)
    if first.status == Status.INFEASIBLE:
        first.message = "no plan meets every constraint, even without the stability limits"
        return first
    if time_limit is None and not first.status.has_plan:
        return first  # the back end failed without a limit to blame (e.g. CP-SAT refusing the model)
    if time_limit is not None and first.status != Status.OPTIMAL:
        left = max(1.0, time_limit - (time.perf_counter() - t0))
        x = first.x if first.status.has_plan else guide
        return _fixed_configurations(model, a, x, solver, left, gap, threads, first.bound, first.solve_seconds,
                                     source="the plan without stability limits" if first.status.has_plan
                                     else "the LP relaxation", lp_x=guide, executor=executor, search=True,
                                     root=first.root_bound, duals=duals)
    breaks = first.status.has_plan and not over_one(configuration_use(model, first.x)).empty
    fallback = None
    if time_limit is not None and breaks:
        if time_limit - (time.perf_counter() - t0) < SPLIT_ROOM * first.solve_seconds:
            # too little time left for the split to reach its first plan: the configurations the plan without
            # limits uses most are fixed and searched instead, as when that plan came too late for a split
            return _fixed_configurations(model, a, first.x, solver,
                                         max(1.0, time_limit - (time.perf_counter() - t0)), gap, threads,
                                         first.bound, first.solve_seconds,
                                         source="the plan without stability limits", lp_x=guide, executor=executor,
                                         search=True, root=first.root_bound, duals=duals)
        # a stable plan in hand before the split, returned if no leaf finds a cheaper one in the time; searched
        # for at most the guide's time (a restriction's first plan comes far sooner: x0.25 0.2 s, against 20 s)
        fallback = _first_plans(model, _fixed_to_most_used(model, a, first.x, guide), first.x, guide,
                                "the plan without stability limits", relaxed, solver,
                                min(t0 + time_limit, time.perf_counter() + max(1.0, first.solve_seconds)), gap,
                                threads)
    split = _split(model, a, first, solver,
                   None if time_limit is None else time_limit - (time.perf_counter() - t0),
                   gap, threads, incumbent, executor, carried, first_gap=guide_gap)
    if split is not None:
        return split if fallback is None else _kept_if_cheaper(split, *fallback, gap)
    if time_limit is not None and breaks:
        # the plan puts a class limited to one configuration on several and no split took it (it has more than
        # MAX_SPLIT candidates): the same path as a model whose stage 1 stopped on the limit. A plan over limits
        # above one keeps stages 2 and 3, which prove a model of q3's size in the time (docs/performance.md,
        # "One path for every large model")
        left = max(1.0, time_limit - (time.perf_counter() - t0))
        return _fixed_configurations(model, a, first.x, solver, left, gap, threads, first.bound,
                                     first.solve_seconds, source="the plan without stability limits",
                                     lp_x=guide, executor=executor, search=True, root=first.root_bound,
                                     duals=duals)
    if guide_gap > gap and first.status.has_plan:
        # no split: the plan without limits must prove by itself (stages 2 and 3 aim at its bound), so it
        # is solved on to the requested gap, from the guide
        again = backend_solve(mip, solver=solver, gap=gap, threads=threads, arrays=free, start=first.x,
                              time_limit=_share(time_limit, time.perf_counter() - t0, STAGE_SHARE["first"]))
        again.solve_seconds += first.solve_seconds
        # each run's bound is a proof: the better one stands, whichever plan is kept (a run stopped on its
        # limit may report less than the guide proved before it)
        proven = max((b for b in (first.bound, again.bound) if b is not None), default=None)
        root = best_root([first.root_bound, again.root_bound], proven)
        if again.status.has_plan:
            first = again
        first.bound, first.root_bound = proven, root
        first.gap = relative_gap(first.objective, proven)
    bound = first.bound

    keep = _most_used(model, first.x)
    restricted = a.copy_bounds()
    restricted.col_hi[ids[~keep]] = 0.0
    target = None if bound is None else bound + gap * max(abs(bound), 1e-9)
    second = backend_solve(mip, solver=solver, gap=gap, threads=threads, arrays=restricted, target=target,
                           time_limit=_share(time_limit, time.perf_counter() - t0, STAGE_SHARE["restricted"]))
    if second.status.has_plan and violations(a, second.x):  # a restriction of the model: cannot happen
        raise AssertionError("a plan of the restricted stable model breaks the stable model")
    if second.status.has_plan and within_gap(second.objective, bound, gap):
        # the proof is the model without limits' bound: the restriction's own bound (and root) prove nothing
        # for the stable model, whose optimum may lie outside the restriction, below them
        second.status = Status.OPTIMAL
        second.bound = min(bound, second.objective)
        second.root_bound = first.root_bound
        second.gap = relative_gap(second.objective, second.bound)
        second.message = "optimal: the stable plan costs what the plan without stability limits costs"
        second.solve_seconds += first.solve_seconds
        return second
    left = None if time_limit is None else max(1.0, time_limit - (time.perf_counter() - t0))
    start = second.x if second.status.has_plan else None
    if incumbent is not None and (start is None or incumbent.objective < second.objective):
        start = incumbent.x
    whole = backend_solve(mip, solver=solver, time_limit=left, gap=gap, threads=threads, target=target,
                          start=start)
    whole.solve_seconds += first.solve_seconds + second.solve_seconds
    if _raise_bound(whole, bound) and within_gap(whole.objective, whole.bound, gap):
        whole.status = Status.OPTIMAL
        whole.message = "optimal: the stable plan meets the bound of the plan without stability limits"
    return whole


def _descent(model: Model, a, guide: np.ndarray | None, seconds: float) -> Descent | None:
    """The descent over the configurations (:mod:`optimizer.solve.descent`) from those the point ``guide`` uses
    most, for ``seconds``; None without a point or a share of time (``seconds`` 0), or when the start has no LP."""
    if guide is None or not seconds:
        return None
    return choose_configurations(model, a, _most_used(model, guide, extra=0), configuration_use(model, guide),
                                 seconds)


def _descent_said(descent: Descent) -> str:
    """How a message names the descent over the configurations and what it reached."""
    return (f"{DESCENT} ({descent.value:,.2f} after {descent.lps} LPs and "
            f"{descent.changes} change{'' if descent.changes == 1 else 's'}, {descent.seconds:.1f} s"
            f"{'' if descent.local else ', stopped on its share of the time'})")


def _split(model: Model, a, first: SolveResult, solver: str, time_limit: float | None, gap: float,
           threads: int | None, incumbent: SolveResult | None, executor, carried, **kw) -> SolveResult | None:
    """:func:`~optimizer.solve.split.exact_split`, its leaves side by side on this process's threads when the
    caller gave no executor (:func:`_leaf_threads`)."""
    with _leaf_threads(solver, threads, executor) as (pool, leaf_threads):
        return exact_split(model, a, first, solver, time_limit, gap, leaf_threads, incumbent, pool, carried, **kw)


def _kept_if_cheaper(split: SolveResult, held: SolveResult, how: str, seconds: float, gap: float) -> SolveResult:
    """The split's result, or, where its leaves found no plan in the time or only dearer ones, the stable plan
    ``held`` (the first plan of the configurations the plan without limits uses most, made before the split,
    :func:`_first_plans`; ``how``: the guess that gave it, ``seconds``: its solver's time) with the split's
    bound, which proves for every stable plan."""
    if not held.status.has_plan or (split.status.has_plan and split.objective <= held.objective):
        return split
    found = "found no plan" if not split.status.has_plan else f"found {split.objective:,.2f} at best"
    return _held_with_bound(held, split, gap,
                            f"the split's leaves {found} in the time, so the plan is the first of the "
                            "configurations the plan without stability limits uses most" + (f", {how}" if how else ""),
                            seconds)


@contextlib.contextmanager
def _leaf_threads(solver: str, threads: int | None, executor):
    """Where the exact split's leaves run, and on how many solver threads each: (executor, threads).

    The caller's ``executor`` when it gave one. Otherwise, for HiGHS, a pool
    of as many threads of this process as ``threads`` (default: every CPU
    the process may use), each leaf searched on one HiGHS thread: HiGHS's
    search of a leaf keeps one core busy, so on two cores two leaves proceed
    at once (docs/performance.md, "The split's leaves on this machine's
    cores"). In a worker of a pool that shares the CPUs (:func:`optimizer.executors.loan`), a
    :class:`~optimizer.executors.Lending` pool instead: the worker's share of
    the CPUs, and those of workers waiting for work. With one CPU (or
    ``threads`` 1), or another back end, no pool: the leaves run one after
    the other as before.
    """
    lender = loan()
    if executor is None and solver == "highs" and LEAF_THREADS and lender is not None and cpus() > 1:
        # a worker of a pool that shares the machine's CPUs (a sweep, a what-if, rent versus buy): the leaves
        # run on its share and on the CPUs of workers waiting for work (docs/performance.md, "CPUs lent")
        pool = Lending(lender, cpus(), initializer=one_thread)
    else:
        n = cpus() if threads is None else threads
        if executor is not None or solver != "highs" or n < 2 or not LEAF_THREADS:
            yield executor, threads
            return
        pool = Threads(n, initializer=one_thread)
    try:
        yield pool, 1
    finally:
        pool.close()


def _raise_bound(result: SolveResult, bound: float | None) -> bool:
    """Raise ``result``'s bound to ``bound`` (a relaxation's proof) where that is higher; the gap follows.

    True when it did. The bound is clipped to the plan's objective, as a
    back end clips its own (the relaxation's optimum lies below every plan).
    """
    if not result.status.has_plan or bound is None or (result.bound is not None and result.bound >= bound):
        return False
    result.bound = min(bound, result.objective)
    result.gap = relative_gap(result.objective, result.bound)
    return True


def _most_used(model: Model, x: np.ndarray, extra: int | None = None, then: np.ndarray | None = None) -> np.ndarray:
    """Per ``config-used`` variable: is its configuration among the N most used for its request class?

    Ranked by the traffic each carries in ``x``; configurations ``x`` carries
    equally (none at all, mostly) by their traffic in ``then`` (the LP
    relaxation's point), where given.
    """
    cu = configuration_use(model, x)
    cu = cu.assign(then=0.0 if then is None else configuration_use(model, then)["use"].to_numpy())
    cu = cu.sort_values(["use", "then"], ascending=False, kind="stable")
    cu["rank"] = cu.groupby(["service", "bucket"]).cumcount() + 1
    cu = cu.sort_index()
    extra = EXTRA_CANDIDATES if extra is None else extra
    return (cu["rank"] <= cu["max_configurations"] + extra).to_numpy()


@dataclasses.dataclass
class _Shared:
    """What the fixed-configuration path and the searches beside it share across threads: the path's best plan so
    far (``x``, replaced whole, never changed in place), ``answered``, set when a search, on either side, has
    proven it (the others stop), and ``bound``, the best bound on the stable model that a search beside has
    proven so far (a plan the path finds later may be proven by it: :meth:`held`)."""

    x: np.ndarray | None = None
    answered: threading.Event = dataclasses.field(default_factory=threading.Event)
    bound: float | None = None
    #: (the plan, its cost), for the last plan costed: a relaxation's callback asks at every interrupt point
    _costed: tuple = (None, None)

    def cost(self, a) -> float | None:
        """The cost of the path's best plan so far (objective of ``a``), or None before it has one."""
        x = self.x
        if x is None:
            return None
        held, cost = self._costed
        if held is not x:
            cost = objective(a, x)
            self._costed = (x, cost)
        return cost

    def proven_by(self, a, bound: float | None, gap: float) -> bool:
        """Does ``bound`` (a relaxation's, proven) prove the path's best plan within ``gap``? If so, say so
        (``answered``). A bound above the plan's cost beyond the solvers' tolerance proves nothing. The bound
        is kept (``bound``, the best so far) for the plans the path finds after it."""
        cost = self.cost(a)
        if bound is None or not np.isfinite(bound) or (cost is not None and bound_error(cost, bound)):
            return False
        if self.bound is None or bound > self.bound:
            self.bound = bound
        if cost is None or not within_gap(cost, bound, gap):
            return False
        self.answered.set()
        return True

    def held(self, a, gap: float) -> bool:
        """Does the best bound proven beside so far prove the path's best plan (a new one) within ``gap``? If
        so, ``answered`` is set: the path starts no more searches, and those beside stop."""
        return self.proven_by(a, self.bound, gap)

    def take(self, a, x: np.ndarray, gap: float) -> bool:
        """The path's new best plan ``x``, shared, and checked against the best bound proven beside (:meth:`held`)."""
        self.x = x
        return self.held(a, gap)

    def proof(self, bound: float | None) -> float | None:
        """The better of ``bound`` (the caller's) and the best bound proven beside so far; None if neither."""
        known = [b for b in (bound, self.bound) if b is not None]
        return max(known) if known else None

    def needed(self, a, gap: float) -> float | None:
        """The least bound that proves the path's best plan within ``gap`` (its cost less ``gap`` of it), or
        None before it has a plan."""
        cost = self.cost(a)
        return None if cost is None else cost - gap * max(abs(cost), 1e-9)


@dataclasses.dataclass
class _Beside:
    """A search running on a thread of its own; :meth:`result` waits for it, frees the thread and returns what
    the search returned."""

    pool: Threads
    future: object
    #: set when the caller asks for the result: what runs beside starts nothing more (a run that watches it)
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    def result(self, stop: bool = True):
        """What the search returned, once it has; with ``stop`` (the caller has its answer) it is told to stop
        first, else it runs on to its own end."""
        if stop:
            self.stop.set()
        try:
            return self.future.result()
        finally:
            self.pool.close()

    def done(self) -> bool:
        return self.future.done()

    @classmethod
    def start(cls, solver: str, threads: int | None, run, stop: threading.Event | None = None) -> _Beside | None:
        """``run()`` (a solve) on a thread of its own (:func:`_beside_pool`), or None where nothing may run
        beside the caller's solve. ``stop``: the event ``run`` watches, set when the caller asks for its result."""
        pool = _beside_pool(solver, threads)
        if pool is None:
            return None
        return cls(pool, pool.submit(lambda _: run(), None), stop if stop is not None else threading.Event())

    @classmethod
    def after(cls, other: _Beside, run, stop: threading.Event) -> _Beside:
        """``run()`` on ``other``'s thread once ``other``'s own search has ended: the CPU it leaves is taken up
        without a third thread. Asking for this result first waits for ``other``'s."""
        return cls(other.pool, other.pool.submit(lambda _: run(), None), stop)


def _beside_pool(solver: str, threads: int | None) -> Threads | None:
    """A thread of its own for a search beside the caller's, whose HiGHS runs on one thread; None where
    nothing may run beside: another back end, a machine of one CPU, or one thread asked for."""
    if solver != "highs" or threads == 1 or cpus() < 2:
        return None
    return Threads(1, initializer=one_thread)


#: the relaxations :func:`_relaxations_beside` solves, as the message names them when their bound proves
HELD_UNITS = "the configuration relaxation with whole units, solved beside"
HELD_FREE = "the model without stability limits, solved beside"
#: the relaxation :func:`_bound_beside` solves after the floors' search, as the message names it
HELD_CONFIGURATIONS = "the configuration relaxation, solved beside"


def _held_bound(result: SolveResult, beside: tuple[SolveResult, str], gap: float) -> None:
    """Prove ``result`` with the bound of a relaxation solved beside (``beside``: its result and its name,
    from :func:`_relaxations_beside`) where that is the best; the message and the root bound say so."""
    held, said = beside
    if not result.status.has_plan:
        return
    if held.status == Status.INFEASIBLE:  # a relaxation of a model with a plan: numerical trouble, said so
        result.message += f"; {said}, reported no plan where one exists: its result is not used"
        return
    if held.bound is None:
        return
    if bound_error(result.objective, held.bound):  # above a plan's cost: round-off, never a proof
        return
    raised = _raise_bound(result, held.bound)
    result.root_bound = best_root([result.root_bound, held.root_bound], result.bound)
    if raised:
        result.message = _BOUND_NAMED.sub("", result.message) + BOUND_NAMED.format(said)
        _proven_if_within(result, gap)


def _for_the_plan(shared: _Shared, a, gap: float, deadline: float, stop: threading.Event, solve) -> SolveResult:
    """A relaxation of the stable model solved beside the path for its bound, and for the plan ``shared`` holds.

    ``solve(time_limit, gap, cutoff, enough)`` solves it (the back end's
    parameters). First to ``gap``, stopped as soon as its bound proves the
    path's plan within ``gap`` (``enough``, read at HiGHS's interrupt
    points; ``shared.answered`` is then set and the path's searches stop).
    When it ends within ``gap`` of its own optimum but short of that proof,
    and its best point does not rule the proof out (it costs at least the
    bound needed, :meth:`_Shared.needed`), it is solved once more with a
    cutoff there: every node whose bound reaches it is pruned. Ending cut
    off, nothing in the relaxation lies below that bound, which proves the
    plan; a point found below it shows that it cannot prove the plan held
    then, and that solve stops. That solve runs to :data:`PROOF_GAP`: at
    ``gap`` HiGHS would also prune the nodes within ``gap`` of its best
    point, below the cutoff once that point lies within ``gap`` above it,
    and end short of the proof again. The result is the first solve's with
    the better bound (and the cheaper point) of the two, and both solves'
    time; where that bound proves the plan, ``shared.answered`` is set
    whether or not HiGHS's callback ran. Solved to ``gap`` alone, the relaxation could stop just short of
    the proof (docs/performance.md, "Relaxations solved for the plan they
    may prove").
    """
    def proves(best: float, bound: float) -> bool:
        return shared.proven_by(a, bound, gap)

    def cannot(best: float, bound: float) -> bool:  # a point below the bound needed: so is the optimum
        need = shared.needed(a, gap)
        return proves(best, bound) or (need is not None and best < need)

    first = solve(deadline - time.perf_counter(), gap, None, proves)
    if shared.proven_by(a, first.bound, gap):  # the callback may not have run (a model solved at its root)
        return first
    need = shared.needed(a, gap)
    if first.status != Status.OPTIMAL or stop.is_set() or need is None or first.bound is None \
            or first.bound >= need or first.objective < need or deadline - time.perf_counter() < 1.0:
        return first
    second = solve(deadline - time.perf_counter(), min(gap, PROOF_GAP), need, cannot)
    if second.bound is None or second.bound <= first.bound:
        return dataclasses.replace(first, solve_seconds=first.solve_seconds + second.solve_seconds)
    shared.proven_by(a, second.bound, gap)
    cheapest = first.objective if not second.status.has_plan else min(first.objective, second.objective)
    return dataclasses.replace(first, bound=min(second.bound, cheapest), objective=cheapest,
                               gap=relative_gap(cheapest, second.bound),
                               solve_seconds=first.solve_seconds + second.solve_seconds)


def _relaxations_beside(model: Model, a, solver: str, deadline: float, gap: float,
                        threads: int | None, shared: _Shared | None = None) -> _Beside | None:
    """Relaxations of the stable model solved one after the other on a CPU of their own, for their bounds, or
    None: HiGHS solves the configuration relaxation on one thread, so the second CPU is free while it runs.
    HiGHS only, on a machine of two CPUs or more, and not when the caller asked for one thread
    (:data:`UNITS_BESIDE`). Its result is (the result with the best bound, that relaxation's name).

    1. The configuration relaxation with whole units (:func:`configuration_relaxation`), until ``deadline``
       (a ``time.perf_counter()`` value: the end of the caller's time limit). It sees each class's choice of
       one configuration and the rounding of the units. It gets the whole time, not the first relaxation's
       share: its bound still rises after that, and the searches of the restrictions on the other CPU did
       not lose by it (q3 + default catalog: 62,699 -> 62,999 at 58 s, 62,999 -> 63,103 at 118 s, the same
       plans; docs/performance.md, "Which integrality holds the gap").
    2. When that one is proven before the deadline and cannot prove the path's plan, the model without
       stability limits (:func:`without_limits`) follows until the deadline. That model lets a class use
       several configurations but keeps every other integrality, among them the training's whole clusters
       on whole units, which the configuration relaxation spreads: where those hold the gap it proves more
       (bench catalog-wide ×0.25: 37,917 in 30 s, against 36,297 for the configuration relaxations, proven
       in 5 s; docs/performance.md, "Which integrality holds the gap").

    When that one is proven too, the thread is free before the deadline: the fixed-configuration path queues
    the search of the stable model itself behind these (:func:`_bound_beside` with ``after``). Both stop once
    the caller's plan is proven (``_Beside.result()``, or the event set directly); a caller whose plan is not
    proven lets them run to the deadline (``result(stop=False)``), as their bound is then what it waits for.

    ``shared``: the fixed-configuration path's best plan. Each relaxation is solved for it
    (:func:`_for_the_plan`): it stops as soon as its bound proves that plan within ``gap`` (it then says so,
    ``shared.answered``: the path's searches stop, and nothing more runs here), and one that ends just short
    of that proof is solved once more with a cutoff at the bound the proof needs.
    """
    if not UNITS_BESIDE:
        return None

    stop = threading.Event()  # set once the caller's plan is proven: a bound can no longer change it
    shared = _Shared() if shared is None else shared

    def units(seconds, to_gap, cutoff, enough):
        return configuration_relaxation(model, a, solver, max(1.0, seconds), to_gap, 1,
                                        whole=("config-used",) + UNIT_FAMILIES, stop=stop, cutoff=cutoff,
                                        enough=enough)

    def free(seconds, to_gap, cutoff, enough):
        return backend_solve(model.mip, solver=solver, time_limit=max(1.0, seconds), gap=to_gap, threads=1,
                             arrays=without_limits(model.mip, a), stop=stop, cutoff=cutoff, enough=enough)

    def run():
        held = _for_the_plan(shared, a, gap, deadline, stop, units)
        if shared.answered.is_set() or held.status != Status.OPTIMAL \
                or deadline - time.perf_counter() < 1.0 or stop.is_set():
            return held, HELD_UNITS
        other = _for_the_plan(shared, a, gap, deadline, stop, free)
        if other.status == Status.INFEASIBLE or (other.bound is not None and other.bound > held.bound):
            return other, HELD_FREE
        return held, HELD_UNITS

    return _Beside.start(solver, threads, run, stop)


def _bound_beside(model: Model, a, x: np.ndarray, solver: str, time_limit: float, gap: float,
                  threads: int | None, deadline: float | None = None, duals: np.ndarray | None = None,
                  lp_x: np.ndarray | None = None, after: _Beside | None = None,
                  shared: _Shared | None = None) -> _Beside | None:
    """Bounds for the fixed-configuration path, searched on a CPU of its own, one after the other, or None.

    1. The stable model with its configuration floors
       (:func:`optimizer.model.strengthen.config_floor`) searched from the
       plan ``x`` for ``time_limit`` seconds (the caller gives it
       :data:`BESIDE_SHARE` of its time). The path's own searches are of
       restrictions (their bounds prove nothing for the stable model) and
       run on one CPU: the second searches the stable model itself, whose
       bound is a proof, and the floors raise that bound where the model
       without stability limits cannot reach (q3 with the default catalog
       at 60 s: 56,505 → 59,663; docs/performance.md, "Configuration
       floors").
    2. Then the configuration relaxation (:func:`configuration_relaxation`:
       the floors, only the configurations whole) until ``deadline``, for
       its bound (:data:`CONFIGURATIONS_AFTER_FLOORS`). It sees each class
       on one configuration and the floors, which the floors' search of the
       whole stable model does not get past its root in the time (bench
       x0.25 at 90 s: standard 2,565,954 -> 2,605,429).
    3. Then, only if that relaxation is proven before ``deadline``, given
       the LP relaxation's ``duals`` (and its point ``lp_x``),
       the components and the periods solved apart at those duals
       (:func:`optimizer.solve.decompose.start_cuts`) until ``deadline`` (a
       ``time.perf_counter()`` value: the end of the caller's limit), on the
       same CPU, which the floors' search would otherwise leave idle for
       the rest of the time (:data:`CUTS_AFTER_FLOORS`). Their bound
       (each service and training job whole over the horizon, each period's
       units whole) is at least the LP's; where the LP is fast enough for
       this path but the model too large to prove, it is the best bound had
       (bench ×1 standard at 600 s: docs/performance.md, "The components
       solved apart on every heuristic path").

    ``after``: the relaxations the caller already runs on the second CPU
    (:func:`_relaxations_beside`, a model no class of which the split can
    take). The floors' search then waits for them on their thread and,
    once they end before ``deadline``, starts from the caller's best plan
    then (``shared.x``, else ``x``) with all the time left until
    ``deadline``; steps 2 and 3 are left out, as that path has solved the
    configuration relaxation already. Before, that CPU idled once the
    relaxations were proven, and nothing could prove the path's plan
    (docs/performance.md, "The stable model searched after the relaxations
    beside").

    ``shared``: the caller's best plan and its ``answered`` event, set when
    the floors' search ends proven (its plan within ``gap`` of its bound:
    the stable model's optimum), or when the configuration relaxation's
    bound proves the caller's plan (it is solved for that plan,
    :func:`_for_the_plan`), so that the caller stops its own searches,
    which can no longer find a cheaper plan or a better proof; what would
    follow here is not started.

    The result is (the floors' search or None when it was not started,
    one :class:`~optimizer.solve.decompose.DecompositionBound` per cut
    solved, the configuration relaxation's result or None); of the
    relaxation only the bound is used (its point is no stable plan).
    HiGHS only, on a machine of two CPUs or more, and not when the caller
    asked for one thread (:data:`BOUND_BESIDE`).
    """
    if not BOUND_BESIDE or time_limit < 1.0 or (after is not None and deadline is None):
        return None
    shared = _Shared(x=x) if shared is None else shared
    floors = a.with_rows(config_floor(model.mip, model.data, model.vars))
    cuts = (CUTS_AFTER_FLOORS and duals is not None and deadline is not None
            and len(model.data.periods) > 1)

    stop = threading.Event()

    def proven(searched: SolveResult) -> bool:
        # a search stopped on its share still proved its bound (the stable model's, with valid rows): kept for
        # the path's plan, now or later (docs/performance.md, "A bound proven beside proves the plans that come
        # after it")
        if searched.status.has_plan:
            shared.proven_by(a, searched.bound, gap)
        if searched.status == Status.OPTIMAL:
            shared.answered.set()
        return searched.status == Status.OPTIMAL

    def queued():
        # on the relaxations' thread, after them: the time they left, from the best plan the caller has by then
        left = deadline - time.perf_counter()
        if stop.is_set() or left < 1.0 or shared.answered.is_set():
            return None, [], None
        start = shared.x if shared.x is not None else x
        searched = backend_solve(model.mip, solver=solver, time_limit=left, gap=gap, threads=1, start=start,
                                 arrays=floors, stop=stop)
        proven(searched)
        return searched, [], None

    if after is not None:
        return _Beside.after(after, queued, stop)

    def run():
        # both searches stop once the caller has its plan and asks for this result (``stop``): their bounds so
        # far are what it can use, and it does not wait for the time limit
        searched = backend_solve(model.mip, solver=solver, time_limit=time_limit, gap=gap, threads=1, start=x,
                                 arrays=floors, stop=stop)
        if proven(searched):  # the stable model's optimum: nothing after it can raise the bound
            return searched, [], None
        relaxed = None
        if CONFIGURATIONS_AFTER_FLOORS and deadline is not None and deadline - time.perf_counter() >= 1.0 \
                and not stop.is_set():
            # until the deadline; the cuts follow only if it is proven before. With half the time (the cuts the
            # other half) it proved less, and the cuts nothing more (bench x0.25 at 90 s: standard 2,589,039
            # against 2,605,429, training-heavy 3,442,161 against 3,543,758)
            relaxed = _for_the_plan(shared, a, gap, deadline, stop, lambda seconds, to_gap, cutoff, enough:
                                    configuration_relaxation(model, a, solver, max(1.0, seconds), to_gap, 1,
                                                             stop=stop, cutoff=cutoff, enough=enough))
            if shared.answered.is_set():  # the path's plan proven: its searches stop, no cuts
                return searched, [], relaxed
        if not cuts or deadline - time.perf_counter() < 1.0 or stop.is_set():
            return searched, [], relaxed
        left = deadline - time.perf_counter()
        # in this thread, one model after the other, each with its share of what is left until the deadline;
        # once the caller has its plan (it asks for this result) no model starts, and those not started count
        # their part of the LP
        pendings = decompose.start_cuts(model, duals, Inline(stop), left, gap, lp_x=lp_x)
        return searched, [pending.collect(0.0) for pending in pendings], relaxed

    return _Beside.start(solver, threads, run, stop)


def _widened(model: Model, a, x: np.ndarray, extra: int, then: np.ndarray | None = None):
    """The stable model restricted, per request class, to the N + ``extra`` configurations the plan ``x`` uses
    most, ties broken by ``then`` (N: the class's limit, whose row stays on), as arrays; None when that is
    every configuration."""
    ids = model.mip.variables["config-used"].ids
    allowed = _most_used(model, x, extra=extra, then=then)
    if allowed.all():
        return None
    wide = a.copy_bounds()
    wide.col_hi[ids[~allowed]] = 0.0
    return wide


def _rounded_up_commitments(mip, a, x: np.ndarray) -> dict[str, np.ndarray]:
    """Per commitment family of the model (reserved units, servers bought), ``x``'s counts rounded up, within
    the bounds of ``a``."""
    counts = {}
    for family in COMMITMENTS:
        if family in mip.variables and mip.variables[family].size:
            ids = mip.variables[family].ids
            # an LP count within 1e-6 above an integer is that integer (the LP's own tolerance), not one more
            counts[family] = np.clip(np.ceil(x[ids] - 1e-6), a.col_lo[ids], a.col_hi[ids])
    return counts


def _commit_as_lp(model: Model, a, x: np.ndarray, lp_x: np.ndarray, time_limit: float):
    """The plan ``x`` re-committed to the LP relaxation's commitments rounded up, and :func:`recommit`'s record.

    A first plan of a large model holds the commitments its back end's first
    incumbent happened to take (bench ×1 standard: 317 reserved units where
    the LP holds 142), and no round that keeps either the replicas or the
    commitments fixed can move both. Rounded up, the LP's counts hold at
    least the capacity its optimum used in every term block; the periods
    then fill around them (each period's MIP to
    :data:`~optimizer.solve.period_polish.RECOMMIT_GAP`: the passes over the
    periods after the rounds solve each again to a tight gap), and the
    units round that follows gives back what no period uses
    (docs/performance.md). The plan is None where
    :func:`recommit` found none; (None, {}) when the counts are those of
    ``x`` already.
    """
    mip = model.mip
    counts = _rounded_up_commitments(mip, a, lp_x)
    if not counts or all(np.array_equal(v, np.round(x[mip.variables[f].ids])) for f, v in counts.items()):
        return None, {}
    return recommit(model, a, x, counts, time_limit)


def _choices_made_whole(model: Model, fixed, x: np.ndarray) -> np.ndarray:
    """The point ``x`` of a relaxation with its choices without a period made whole, for
    :func:`~optimizer.solve.period_polish.build_by_periods`.

    Within the bounds of ``fixed`` (so the configurations as it fixes
    them); each job on the configuration ``x`` gives most of it, its hours
    and runs there divided by that share (so that its periods do the whole
    job, each its part as in ``x``; within the columns' bounds), the
    others' 0; the commitments rounded up (as :func:`_commit_as_lp` does).
    The replicas and traffic of ``x`` stay as they are: the build solves
    each period's afresh, and a period's rows see only the periods before
    it.
    """
    mip = model.mip
    y = np.clip(np.asarray(x, dtype=float), fixed.col_lo, fixed.col_hi)
    sel = mip.variables.get("training-select")
    if sel is not None and sel.size:
        z = sel.coords.assign(z=y[sel.ids], id=sel.ids)
        best = z.loc[z.groupby("job")["z"].idxmax()]
        share = best.set_index(["job", "config"])["z"].clip(lower=1e-9)
        y[sel.ids] = 0.0
        y[best["id"].to_numpy()] = 1.0
        for name in ("training-run", "training-hours"):
            block = mip.variables.get(name)
            if block is None or not block.size:
                continue
            f = block.coords[["job", "config"]].merge(share.rename("share").reset_index(), on=["job", "config"],
                                                      how="left")["share"].to_numpy()
            v = np.where(np.isnan(f), 0.0, y[block.ids] / np.where(np.isnan(f), 1.0, f))
            y[block.ids] = np.clip(v, fixed.col_lo[block.ids], fixed.col_hi[block.ids])
    for family, counts in _rounded_up_commitments(mip, fixed, y).items():
        y[mip.variables[family].ids] = counts
    return y


def _rounds_and_passes(model: Model, a, x: np.ndarray, obj: float, solver: str, deadline: float,
                       threads: int | None, executor, rounds: bool, open_gap) -> tuple[np.ndarray, float, str]:
    """Improve the stable plan ``x`` (cost ``obj``) of the restriction ``a`` until ``deadline``.

    In cycles: with ``rounds``, one cycle of fix-and-optimize rounds
    (:func:`~optimizer.solve.polish.polish`: units, inference by GPU model, training),
    then one pass over the periods (:func:`~optimizer.solve.period_polish.polish_periods`,
    on ``executor``), each period re-solved whole with the others held.
    The cycles go on while one lowers the cost by at least
    :data:`~optimizer.solve.polish.MIN_IMPROVEMENT` of it (without
    ``rounds``, the monthly model's path: by anything), the gap is open
    (``open_gap``) and a second is left. With ``rounds`` a pass gets
    :data:`PERIOD_SHARE` of the time left (the whole stable model follows);
    without, all of it, since nothing after it gets anywhere.

    Why a pass after every cycle, not one at the end: a training round
    moves clusters over the whole horizon, and what that leaves in each
    period (replicas, machines, clusters beside them) a period's MIP
    re-solves to its optimum in seconds, where the next cycle of rounds
    gains little (bench ×1 training-heavy at 600 s: the pass after the
    first cycle 16.49M -> 16.19M in 83 s; at the end, after 12 rounds in
    510 s, it had 4.5 s; docs/performance.md, "A pass over the periods
    after every cycle").

    Returns the plan, its cost and the words for the solve's message (''
    when nothing was cheaper).
    """
    start, n_rounds, passes, kept = obj, 0, 0, 0
    several = len(model.data.periods) > 1
    gpu_of = dict(zip(model.data.offerings["offering"], model.data.offerings["gpu"]))
    while True:
        cycle_start = obj
        if rounds:
            x, log = polish(model.mip, a, x, solver, deadline - time.perf_counter(), threads, cycles=1,
                            gpu_of=gpu_of)
            n_rounds += len({r["round"] for r in log})  # a round searched in parts (by GPU) counts once
            obj = min(obj, objective(a, x))
        left = deadline - time.perf_counter()
        if several and left >= 1.0 and open_gap(obj):
            x, rec = polish_periods(model, a, x, PERIOD_SHARE * left if rounds else left, executor)
            passes, kept = passes + 1, kept + rec["improved"]
            obj = min(obj, rec["after"])
        least = MIN_IMPROVEMENT * max(abs(cycle_start), 1e-9) if rounds else 1e-9
        if obj > cycle_start - least or deadline - time.perf_counter() < 1.0 or not open_gap(obj):
            break
    if obj >= start - 1e-9:
        return x, obj, ""
    if not rounds:
        return x, obj, (f"then period by period from {start:,.2f} ({kept} of {len(model.data.periods)} periods "
                        f"cheaper" + (f" in {passes} passes)" if passes > 1 else ")"))
    said = f"improved by fix-and-optimize from {start:,.2f} ({n_rounds} rounds"
    if passes:
        found = f"{kept} period{'s' if kept != 1 else ''} re-solved cheaper" if kept else "none cheaper"
        said += f"; after each cycle a pass over the periods: {found} in {passes} pass{'es' if passes > 1 else ''}"
    return x, obj, said + ")"


def _fixed_to_most_used(model: Model, a, x: np.ndarray, lp_x: np.ndarray | None):
    """A copy of the arrays ``a`` with each request class fixed to the N configurations the plan ``x`` uses most
    (ties by their traffic in ``lp_x``), every other configuration off: a restriction of the stable model."""
    return configurations_fixed(model, a, _most_used(model, x, extra=0, then=lp_x))


def _first_plans(model: Model, fixed, x: np.ndarray | None, lp_x: np.ndarray | None, source: str,
                 relaxed: Relaxation, solver: str, deadline: float, gap: float, threads: int | None
                 ) -> tuple[SolveResult, str, float]:
    """The first plan of the restriction ``fixed`` (the configurations fixed), by the guesses nearest to what is
    known first: (the result, which guess gave it, the solver's seconds in all).

    The guesses: training as ``x`` (the plan of ``source``) places it,
    training where ``lp_x`` (the point of ``relaxed``) places it, then the
    configurations alone; each a restriction of ``fixed``, so any plan is a
    stable plan. HiGHS searches them side by side, each until ``deadline``
    (a ``time.perf_counter()`` value), and the first plan found is taken;
    with ``threads`` 1, or another back end, they are tried in that order,
    each with an equal share of the time left, the last what remains.
    """
    mip = model.mip
    tries = []
    if x is not None and x is not lp_x:
        tries.append((f"training as {source} places it", restrict(mip, fixed, x, ROUNDS["inference"])))
    near = training_support(mip, fixed, lp_x)
    if near is not None:
        tries.append((f"training placed where {relaxed.value} places it", near))
    tries.append(("", fixed))
    if solver == "highs" and len(tries) > 1 and threads != 1:
        # the guesses side by side, each with all the time, the first plan found taken: a restriction that
        # holds no plan near the guide must not take the time the wider ones need (bench x1 training-heavy:
        # training where the LP runs hours found nothing in 16.5 s, the configurations alone a plan in 3.5 s;
        # standard: the other way round). Not when the caller asked for one thread: that is one core
        # (docs/performance.md, "First plans as soon as they are found")
        i, first = first_plan([arrays for _, arrays in tries], max(1.0, deadline - time.perf_counter()), gap,
                              threads)
        return first, tries[i][0] if i is not None else "", first.solve_seconds
    first, how, seconds = None, "", 0.0
    for i, (how, arrays) in enumerate(tries):
        left = deadline - time.perf_counter()
        if first is not None and left < 1.0:
            break
        # each guess an equal share of what is left, the last all of it (the back ends that cannot search
        # them side by side)
        first = backend_solve(mip, solver=solver, time_limit=max(1.0, left / (len(tries) - i)), gap=gap,
                              threads=threads, arrays=arrays, target=np.inf)  # to the first plan: the rounds improve it
        seconds += first.solve_seconds
        if first.status.has_plan:
            break
    return first, how, seconds


def _fixed_configurations(model: Model, a, x: np.ndarray | None, solver: str, time_limit: float, gap: float,
                          threads: int | None, bound: float | None, spent: float,
                          source: str = "the plan without stability limits",
                          lp_x: np.ndarray | None = None, executor=None, search: bool = False,
                          root: float | None = None, busy: _Beside | None = None,
                          relaxed: Relaxation = Relaxation.LP, duals: np.ndarray | None = None,
                          shared: _Shared | None = None, said: Sequence[str] = (),
                          bound_of: str | None = None) -> SolveResult:
    """A stable plan within ``time_limit`` for a model too large to search whole: fix, improve, search.

    1. The stable model with each request class fixed to the N
       configurations ``x`` uses most (a restriction), solved until the back
       end's first plan (HiGHS; the other back ends solve it on). Without
       ``x`` (the LP stopped on the limit) the configurations stay free.
       The guesses: training restricted to where ``x`` places it, to
       where the LP places it, and the configurations alone. HiGHS
       searches them side by side, each with the whole time, and the first
       plan found is taken (:func:`~optimizer.solve.backends.first_plan`);
       with ``threads`` 1, or another back end, they are tried in that
       order, each with an equal share of the time left, the last what
       remains.
    2. That plan improved. With ``search`` (the caller's LP took at most
       :data:`STAGES_MAX_LP_SHARE` of the limit, so the back end can get
       past its root in the time), by the back end's own search of the
       restriction, started from it, with every second left; and, each time
       a search proves its restriction's optimum before the limit, by the
       search of a wider one (:func:`_widened`: per class the N + k
       configurations ``x`` uses most, k = 1, 2, ..., the limit of N on),
       started from the best plan, with every second left. A wider
       restriction holds every plan of the narrower one, so its optimum is
       never dearer; the widest, every configuration, is the whole stable
       model of step 3. Otherwise
       first re-committed, given ``lp_x``, to the LP relaxation's
       commitments rounded up with every period re-solved against them
       (:func:`_commit_as_lp`, :data:`PERIOD_SHARE` of the time left), then by
       cycles of fix-and-optimize rounds (:mod:`optimizer.solve.polish`),
       each followed by a pass over the periods
       (:mod:`optimizer.solve.period_polish`, on ``executor`` when one is
       given, :data:`PERIOD_SHARE` of the time left), until a cycle gains
       little (:func:`_rounds_and_passes`).
    3. The whole stable model, started from the best plan, with what is left
       (with ``search``: only when the restriction's search ended before the
       limit).

    Every plan here is a stable plan. The bound reported is the best of
    ``bound`` (the model without stability limits, or the configuration
    relaxation; the driver raises it to the LP relaxation's where that is
    higher), the searches beside (with ``search``: the stable model with its
    floors, then, given the LP's ``duals``, the components and the periods
    solved apart at them; :func:`_bound_beside`) and the whole stable
    model's own bound from step 3; the restriction's and the rounds' bounds prove
    nothing for the stable model. The root bound reported is the better of
    ``root`` (the model without limits' root) and the whole stable model's
    root, never the restriction's. A bound proven beside is kept as it
    comes (``shared.bound``) and checked against each plan the path finds
    after it: where it proves one within ``gap``, the path starts nothing
    more and the searches beside stop (:meth:`_Shared.held`).

    ``said``: what the caller did before (the descent over the
    configurations), named first in the message; ``bound_of``: whose bound
    ``bound`` is, when not that of ``source`` (a descent chooses the
    configurations but proves nothing).
    """
    mip = model.mip
    search = search and x is not None  # without a point nothing is fixed: the final search is that search
    fixed = a.copy_bounds() if x is None else _fixed_to_most_used(model, a, x, lp_x)
    # without a point to guide the choice (the LP stopped on the limit): the configurations stay free. Forcing
    # every one on, as before, broke each class's limit whenever it had more candidates than it may use
    t0 = time.perf_counter()

    def open_gap(obj: float | None) -> bool:
        # the caller's bound, or a better one proven beside by now
        return not within_gap(obj, shared.proof(bound), gap)

    steps = list(said)  # what the caller did before, named first in the message
    seconds = spent
    beside = None  # the stable model's own search for a bound, on a CPU of its own (_bound_beside)
    # the best plan so far, for the searches beside; and ``answered``, set when one of them has proven it (or the
    # stable model's optimum): the rest stop. ``shared``: the caller's, whose relaxations beside read it too
    shared = _Shared() if shared is None else shared
    answered = shared.answered
    first, how = None, ""
    # the LP relaxation did not solve in its share: no search of the whole model (first plans, fix-and-optimize
    # rounds, the final search) gets past its root LP in the time either (bench x16: HiGHS's first plan not in
    # 400 s, 220 s of rounds for 0.07 %, 61 s of final search for nothing; docs/performance.md, "The monthly
    # model"). The first plan is made one period after the other from the monthly point; where a period has
    # no plan in its share, the searches below follow
    whole_fits = relaxed is not Relaxation.MONTHLY
    if not whole_fits and x is not None and len(model.data.periods) > 1:
        t = time.perf_counter()
        built, rec = build_by_periods(model, fixed, _choices_made_whole(model, fixed, x), PERIOD_SHARE * time_limit,
                                      gap=BUILD_GAP)
        seconds += time.perf_counter() - t
        if built is not None:
            first = SolveResult(Status.FEASIBLE, solver, objective=rec["after"], x=built)
            how = f"the periods solved one after the other from {relaxed.value}'s point"
    if first is None:
        first, how, spent_here = _first_plans(model, fixed, x, lp_x, source, relaxed, solver, t0 + time_limit, gap,
                                              threads)
        seconds += spent_here
    if first.status.has_plan:
        best_x, best_obj = first.x, first.objective
        shared.take(a, best_x, gap)
        steps.append((f"configurations fixed to those {source} uses most" if x is not None
                      else "no point to fix configurations from: the whole stable model to its first plan")
                     + (", " + how if how else ""))
        left = time_limit - (time.perf_counter() - t0)
        if search and open_gap(best_obj):
            # one search beside at a time: where the caller's relaxations run on the second CPU (``busy``), the
            # floors' search follows them there, from the best plan by then (``shared.x``, read when it starts)
            beside = (_bound_beside(model, a, best_x, solver, BESIDE_SHARE * left, gap, threads,
                                    deadline=t0 + time_limit, duals=duals, lp_x=lp_x, shared=shared)
                      if busy is None else
                      _bound_beside(model, a, best_x, solver, left, gap, threads, deadline=t0 + time_limit,
                                    after=busy, shared=shared))
        if search and left >= 1.0 and open_gap(best_obj):
            # the restriction is small enough for the back end's search, whose heuristics work from its own
            # LP; the rounds only ever move one family at a time (q3 + default catalog at 60 s: 77,534
            # against 84,124 after the rounds; docs/performance.md). Its bound proves nothing for the
            # stable model: only its plan is kept. It stops once the search beside has proven the stable
            # model's optimum (``answered``)
            inside = backend_solve(mip, solver=solver, time_limit=left, gap=gap, threads=threads, start=best_x,
                                   arrays=fixed, stop=answered)
            seconds += inside.solve_seconds
            if inside.status.has_plan and inside.objective < best_obj - 1e-9:
                steps.append(f"then searched with those configurations fixed, from {best_obj:,.2f}")
                best_x, best_obj = inside.x, inside.objective
                shared.take(a, best_x, gap)  # a bound proven beside while this search ran may prove its plan
            # the restriction proven: the choice of configurations was the guess, so the next search may choose
            # among more of them (q3 + default catalog: 77,357.96 proven for the most used, 74,215.70 with one
            # more per class; docs/performance.md, "Widening the restriction")
            proven, extra = inside.status == Status.OPTIMAL, 0
            while proven and open_gap(best_obj) and not answered.is_set():
                extra += 1
                left = time_limit - (time.perf_counter() - t0)
                wide = _widened(model, a, x, extra, then=lp_x)
                if wide is None or left < 1.0:  # every configuration: the whole stable model, below
                    break
                widened = backend_solve(mip, solver=solver, time_limit=left, gap=gap, threads=threads,
                                        start=best_x, arrays=wide, stop=answered)
                seconds += widened.solve_seconds
                if widened.status.has_plan and widened.objective < best_obj - 1e-9:
                    steps.append(f"then searched with {extra} more configuration{'s' if extra > 1 else ''} "
                                 f"per class to choose from, from {best_obj:,.2f}")
                    best_x, best_obj = widened.x, widened.objective
                    shared.take(a, best_x, gap)
                proven = widened.status == Status.OPTIMAL
        elif left >= 1.0 and open_gap(best_obj):
            if lp_x is not None:
                t = time.perf_counter()
                x_lp, rec = _commit_as_lp(model, fixed, best_x, lp_x, PERIOD_SHARE * left)
                seconds += time.perf_counter() - t
                if x_lp is not None and rec["after"] < best_obj - 1e-9:
                    steps.append(f"then {relaxed.value}'s commitments, rounded up, with every period "
                                 f"re-solved against them, from {best_obj:,.2f}")
                    best_x, best_obj = x_lp, rec["after"]
        left = time_limit - (time.perf_counter() - t0)
        if not search and left >= 1.0 and open_gap(best_obj):
            t = time.perf_counter()
            best_x, best_obj, said = _rounds_and_passes(model, fixed, best_x, best_obj, solver, t0 + time_limit,
                                                        threads, executor, whole_fits, open_gap)
            seconds += time.perf_counter() - t
            if said:
                steps.append(said)
    else:
        if first.status != Status.INFEASIBLE and time_limit - (time.perf_counter() - t0) < 1.0:
            # no plan and no time: the restriction's bounds prove nothing for the stable model, the caller's do
            return dataclasses.replace(first, solve_seconds=seconds, bound=bound, root_bound=root, gap=None)
        # the fixed choice was a guess (often the LP's): its infeasibility says nothing of the problem's
        best_x, best_obj = None, None
        steps.append(f"the configurations {source} uses most admit no plan" if x is not None
                     else "the stable model gave no first plan")
    left = time_limit - (time.perf_counter() - t0)
    result = None
    proof = bound  # the whole stable model's own bound is a proof too
    roots = [root]  # root bounds of relaxations of the stable model, or of the model itself
    # the caller raised ``bound`` to the LP relaxation's where that was higher; named once where they are one
    # whose bound ``bound`` is: the point's own (``source``) unless the caller names another (a descent chooses
    # but proves nothing)
    named = source if bound_of is None else bound_of
    proof_from = f"that of {relaxed.bound_name if named == relaxed.value else named}"
    if named != relaxed.value:
        proof_from += (", or the LP relaxation's" if relaxed is Relaxation.LP
                       else f", or that of {relaxed.bound_name}")
    # where the whole model is out of reach, the passes over the periods had its time; without a plan it is
    # still the last resort
    if (whole_fits or best_obj is None) and left >= 1.0 and open_gap(best_obj) and not answered.is_set():
        whole = backend_solve(mip, solver=solver, time_limit=left, gap=gap, threads=threads, start=best_x,
                              arrays=a, stop=answered)
        seconds += whole.solve_seconds
        roots.append(whole.root_bound)
        if whole.bound is not None and whole.status.has_plan and (proof is None or whole.bound > proof):
            proof, proof_from = whole.bound, "the whole stable model's search"
        if whole.status.has_plan and (best_obj is None or whole.objective < best_obj - 1e-9):
            result = whole
            started = f"{best_obj:,.2f}" if best_obj is not None else "no plan"
            steps.append(f"the whole stable model, started from {started}, found {whole.objective:,.2f}")
        elif best_obj is None:
            whole.solve_seconds = seconds
            _raise_bound(whole, bound)
            return whole
        else:
            steps.append("the whole stable model, started from it, found nothing cheaper")
    if not whole_fits and best_obj is not None and open_gap(best_obj):
        steps.append("the whole stable model not searched (its LP relaxation does not solve in the time): "
                     "a heuristic plan")
    elif left < 1.0 and best_obj is not None and open_gap(best_obj):
        steps.append("no time was left to search the whole stable model, with other configurations"
                     if search else "no time was left to search the whole stable model: a heuristic plan")
    cuts = []
    floors = None
    cost = best_obj if result is None else result.objective
    if busy is not None and (answered.is_set() or within_gap(cost, proof, gap)):
        # the plan is proven: the caller's relaxations beside stop too (and the floors' search queued behind them
        # does not start), instead of running to the limit while this path waits for them
        if beside is not None:
            beside.stop.set()
        busy.stop.set()
    if beside is not None:
        floors, cuts, relaxed_beside = beside.result()
    if floors is not None:
        roots.append(floors.root_bound)
        if floors.bound is not None and floors.status.has_plan and (proof is None or floors.bound > proof):
            proof, proof_from = floors.bound, "the stable model's search with its configuration floors"
        closed = " and proved it" if floors.status == Status.OPTIMAL else ""
        if floors.status.has_plan and floors.objective < cost - 1e-9:
            steps.append(f"the stable model with its configuration floors, searched beside, found "
                         f"{floors.objective:,.2f}{closed}")
            result = floors
        elif closed:
            steps.append("the stable model with its configuration floors, searched beside from the best plan, "
                         "proved it")
        elif proof == floors.bound and within_gap(cost, proof, gap):
            steps.append("proven by the bound of the stable model's search with its configuration floors, "
                         "beside")
    if result is None:
        if best_x is None:
            return SolveResult(Status.TIME_LIMIT, solver, solve_seconds=seconds,
                               message="no stable plan within the time limit")
        result = SolveResult(Status.FEASIBLE, solver, objective=best_obj, x=best_x)
    result.solve_seconds = seconds
    result.bound = None if proof is None else min(proof, result.objective)
    result.gap = relative_gap(result.objective, result.bound)
    result.root_bound = best_root(roots, result.bound)
    proven = within_gap(result.objective, result.bound, gap)
    result.status = Status.OPTIMAL if proven else Status.FEASIBLE
    result.message = (("optimal: " if proven else TIME_LIMIT_SAID) + "; ".join(steps) +
                      ("" if proven else BOUND_NAMED.format(proof_from)))
    if beside is not None and relaxed_beside is not None:  # a relaxation's bound; its point is no stable plan
        _held_bound(result, (relaxed_beside, HELD_CONFIGURATIONS), gap)
    for dec in cuts:  # solved apart on the floors' CPU after its search: the best bound proves, named as such
        _apply_decomposition(result, dec, gap, where="on the CPU beside the search")
    return result
