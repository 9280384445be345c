"""The solve driver: how a time limit is spent on one built model.

One place decides it, in this order:

1. the **LP relaxation** (integrality dropped): its optimum is the first
   proven bound (``relaxation_bound``), whatever happens next;
2. for a model with stability limits (``config-used``), the **stable fleet
   in stages** (:func:`solve_stable`): the model without the limits first
   (a relaxation: its bound is a proof for the stable model too); where that
   plan puts a request class limited to one configuration on several, one
   stable solve per configuration of that class (an exact split, branches
   pruned by their LP bound and cut off at the best plan; without a time
   limit, where a monthly model without limits already breaks such a
   class, its plan chooses in place of the weekly one); otherwise the
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
(:func:`~optimizer.solve.beside.bound_beside`; where the configuration relaxations already run
there, after them); once that search proves the stable optimum, the
restriction's searches stop. When the LP was not cheap, the plan is first
re-committed to the LP's commitments rounded up
(:func:`optimizer.solve.period_polish.recommit`), then improved by cycles
of fix-and-optimize rounds (:mod:`optimizer.solve.polish`; the inference
round one GPU model at a time), each followed by a pass over the periods
(:mod:`optimizer.solve.period_polish`). The time left goes to the whole
stable model started from the best plan; the result is reported with the
best proven bound and a message naming each step.

This module decides the order and the shares of time; the parts live apart:
:mod:`optimizer.solve.relaxations` (the LP relaxation, the model without
stability limits, the configuration relaxation),
:mod:`optimizer.solve.split` (the exact split and its leaves),
:mod:`optimizer.solve.fixed` (the fixed-configuration path),
:mod:`optimizer.solve.beside` (the searches for a bound on the second CPU)
and :mod:`optimizer.solve.proofs` (a bound found elsewhere applied to a
result and named in its message).

The time limit is the whole run's wall clock (docs/performance.md): the caller passes the seconds already spent, and
:data:`AFTER_SOLVE_PER_BUILD` times as many are kept for what follows the
solve (plan tables and audit).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence

import numpy as np

from ..executors import Lending, Threads, cpus, loan
from ..model.presolve import Model
from . import coarse, decompose
from .backends import DEFAULT_SOLVER, one_thread, settle_background, solve as backend_solve
from .beside import Beside, Shared, beside_pool, held_bound, relaxations_beside
from .descent import NAME as DESCENT, Descent, choose_configurations
from .feasibility import objective, objective_floor, violations, within_bounds
from .fixed import first_plans, fixed_configurations, fixed_to_most_used, most_used
from .proofs import apply_decomposition, held_with_bound, raise_bound
from .relaxations import Relaxation, configuration_relaxation, lift, relaxation, without_limits
from .result import SolveResult, Status, best_root, relative_gap, within_gap
from .split import configuration_choices, configuration_use, exact_split, over_one, too_wide_to_split, warm

#: what follows the solve (plan tables, audit) over what went before it (candidates, build, pre-check): 0.1-0.5
#: since the plan's tables were made in NumPy (`python bench/stages.py ... --time-limit 20` on the shipped
#: examples, q3 with the default catalog and bench x0.25: docs/performance.md, "A time limit kept beside the
#: search"); 0.6 keeps the wall clock inside the limit (it was 1.5 when the plan and audit took 1.0-1.45 times
#: the build, and left a third of a 10 s limit unused)
AFTER_SOLVE_PER_BUILD = 0.6
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
#: on the configuration relaxation's path, the share of that relaxation's time that the descent over the
#: configurations (:mod:`optimizer.solve.descent`) may take first; its point starts the relaxation, which gets the
#: rest (q3 + default catalog at 60 s on a slow machine: the relaxation alone chose configurations whose plans
#: cost 92,180 or more; docs/performance.md, "Configurations chosen one class at a time")
DESCENT_SHARE = 0.5
#: on the heuristics' path (:func:`heuristics_only`), the share of the time limit that the descent over the
#: configurations may take before the configurations it chose are fixed (in place of those the LP relaxation uses
#: most); bench x0.25 at 90 s on a slow machine: standard 2,840,825 -> 2,785,209, training-heavy 3,896,235 ->
#: 3,822,047 (docs/performance.md, "Configurations chosen one class at a time"). The same share of the time left
#: where the model without stability limits stopped short of its gap, the descent then starting from the
#: configurations that model's plan uses most (q3 at 8 s: 332,875 -> 100,850; "The last second of a short limit")
HEURISTICS_DESCENT_SHARE = 0.25
#: the exact split's leaves run side by side on threads of this process (HiGHS; one thread per CPU the solve may
#: use, one HiGHS thread each) when the caller gives no executor (:func:`_leaf_threads`)
LEAF_THREADS = True
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
#: a step of the fixed-configuration path after its first plan (the re-commit, a round, a pass over the periods, a
#: search) starts only with at least this many times the LP relaxation's seconds left, and never needs more than a
#: second or less than a tenth (:func:`stage_least`)
STAGE_LPS = 2.0


def stage_least(lp_seconds: float, solver: str = DEFAULT_SOLVER) -> float:
    """The fewest seconds a step of the fixed-configuration path is started with: :data:`STAGE_LPS` times what the
    model's LP relaxation took, at most one second; one second for a back end other than HiGHS.

    A step solves a restriction of the model, whose LP is no larger than the
    whole model's, so a step given less than that time ends in the solver's
    set-up. Until 2026-11-29 every step needed a whole second, which on q3
    (LP 0.05–0.1 s) left a 2-s run on its first plan with 0.8 s unused
    (605,363 against the 100,850 a cycle of rounds reaches in 0.13 s;
    docs/performance.md, "The last second of a short limit"). On a large
    model (bench ×1: LP 9 s) the second stays. The floor of a tenth of a
    second is a choice, not a measurement of the set-up: HiGHS solves a
    10-column model whole in 2.6 ms, and the floor only keeps a step from
    being started with a few milliseconds left. The other back ends keep
    the second: on q3 at 3, 5 and 8 s, twice each (13:42–13:45, load
    0.9–1.7), the scaled least gave CBC the same plans (none at 3 s,
    107,416 at 5 and 8 s) and SCIP the same or a dearer one (108,773
    against 98,601 once at 5 s).
    """
    if solver != "highs":
        return 1.0
    return min(1.0, max(0.1, STAGE_LPS * lp_seconds))


def lp_took_too_long(time_limit: float | None, lp_seconds: float) -> bool:
    """Did the LP relaxation take more than :data:`STAGES_MAX_LP_SHARE` of the limit (``time_limit``: the
    seconds left after it)? Then no MIP of the model's size is solved in a share of the limit, and the heuristics
    of :func:`fixed_configurations` make the plan, on one CPU."""
    return time_limit is not None and lp_seconds > STAGES_MAX_LP_SHARE * (time_limit + lp_seconds)


def heuristics_only(model: Model, time_limit: float | None, lp_seconds: float,
                    relaxed: Relaxation = Relaxation.LP) -> bool:
    """Does the heuristics' path (:func:`fixed_configurations` from the LP's point, the parts solved apart
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
    if raise_bound(result, lp_bound) and result.status == Status.FEASIBLE \
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
                apply_decomposition(result, pending.collect(max(0.0, time_limit - (time.perf_counter() - t0))),
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
    bound of the periods' LP relaxations at the monthly prices (a proof;
    never below :func:`~optimizer.solve.feasibility.objective_floor`), no
    duals; and the component and period models at those prices, for the
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
    # at prices read off another model the Lagrangian can prove less than the columns' bounds alone (q3: -116,936
    # against its objective's constant, 32,355): a relaxation's bound below that floor is reported as the floor
    bound = max(bound, objective_floor(model.mip.arrays()))
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
    heuristics of :func:`fixed_configurations` run on the other CPU: (the pool, one pending cut each), or None.

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
    pool = beside_pool(solver, threads)
    if pool is None:
        return None
    return pool, decompose.start_cuts(model, lp.duals, pool, seconds, gap, lp_x=lp.x, priced=priced)


def known_plan(a, known: Sequence[np.ndarray], solver: str) -> SolveResult | None:
    """The cheapest of the plans ``known`` that is a feasible point of the arrays ``a``, as a result; or None.

    Each is checked on ``a`` itself (every row, bound and integrality,
    :func:`violations`): a plan from another model (a neighbouring point of
    a sweep, the base of a what-if) is used only where it is a plan of this
    one, and one of another number of columns never is. A plan that breaks
    only this model's column bounds is read with each column clipped to
    them, and used if that point meets every row
    (:func:`optimizer.solve.feasibility.within_bounds`).
    """
    plans = [within_bounds(a, np.asarray(x, float)) for x in known]
    priced = [(objective(a, x), x) for x in plans if x is not None]
    if not priced:
        return None
    cost, x = min(priced, key=lambda p: p[0])
    return SolveResult(Status.FEASIBLE, solver, objective=cost, x=x.copy(), message=f"a known plan ({cost:,.2f})")


def _keep_known(incumbent: SolveResult, result: SolveResult, gap: float) -> SolveResult:
    """The known plan with the search's proven bound (the search found nothing cheaper in its time)."""
    return held_with_bound(incumbent, result, gap, "the known plan, the search found nothing cheaper")


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
        apply_decomposition(result, pending.collect(wait), gap)


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
       Without a time limit the monthly models without limits are searched
       first (:func:`optimizer.solve.coarse.guides`: by month, then by month
       and period length), stage 1 beside them on the second CPU; where one's
       plan already breaks a limit the split can take, that plan chooses and
       stage 1 is stopped (q3: 0.5 s against about 4 s, the same class and
       first options).
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
    search (:func:`~optimizer.solve.beside.bound_beside`).

    ``incumbent`` (a stable plan the caller has, :func:`known_plan`) is the
    split's first best plan, and its choices are the split's first options;
    it does not start stage 1, whose plan must choose the class to split on
    by itself (started from a stable plan within its gap, it stops on that
    plan, which breaks no limit). Stage 3 starts from it when it is the
    cheaper.

    Under a time limit the split follows stage 1 only when the time left
    is at least :data:`SPLIT_ROOM` times what stage 1 took (its option LPs
    and its first leaf, searched whole, need about that); otherwise the
    configurations are fixed as below. Before the split a stable plan is
    held (:func:`first_plans` of the configurations stage 1 uses most),
    and returned with the split's bound when no leaf finds a cheaper one
    in the time (:func:`_kept_if_cheaper`).

    Under a time limit, if stage 1 stops on the limit (a large model), the
    configurations are fixed instead (:func:`fixed_configurations`):
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
    least = stage_least(lp_seconds, solver)
    if heuristics_only(model, time_limit, lp_seconds, relaxed):
        return _from_the_lp(model, a, guide, solver, time_limit, gap, threads, executor, relaxed, least)
    if time_limit is not None and too_wide_to_split(model):
        return _from_the_configuration_relaxation(model, a, guide, solver, time_limit, gap, threads, executor,
                                                  duals, t0, least)
    ids = mip.variables["config-used"].ids

    carried = {} if leaf_bounds is None else dict(leaf_bounds(a))
    classes = {key[0][0] for key in carried}
    if incumbent is not None and len(classes) == 1:
        # between two solved points whose splits chose the same class (or beside one, a line's far end, whose
        # bounds are -inf: they hold at its own price only): split on it again, started from their bounds,
        # without the model without limits (its plan would only choose the class; the LP relaxation's bound
        # stands in for its bound). Keeping the class along the line is what lets the bounds carry.
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
    # the guide: the model without limits to guide_gap, its plan choosing where the split branches. Never started
    # from ``incumbent``: a stable plan is within the guide's gap of its optimum often enough (a what-if's base
    # plan), and then the guide stops on it at once, a plan that breaks no limit, so it chooses no class, or a
    # worse one, and the proof falls to the stages or a slow split (q3 handed its own optimum: 122.3 s against
    # 15.7 s; docs/performance.md, "A known plan no longer starts the guide")
    weekly = None
    if time_limit is None and coarse.mergeable(model.problem):
        # the monthly model's plan without limits chooses instead where it breaks a limit the split can take, in a
        # fraction of the time (q3: 0.5 s against 4 s, the same class and first options; docs/performance.md,
        # "The monthly model chooses where the split branches"); the weekly guide runs beside it meanwhile, for
        # where it does not. Under a limit the weekly guide's time also sizes the split's first leaf
        # (SPLIT_ROOM), so it alone guides there
        stop = threading.Event()
        weekly = Beside.start(solver, threads, lambda: backend_solve(
            mip, solver=solver, gap=guide_gap, threads=threads, arrays=free, stop=stop), stop)
        try:
            point = _monthly_point(model, solver, guide_gap, threads, weekly)
        except BaseException:  # (an interrupt, or a fault of ours) the guide beside stops too; the error goes on
            if weekly is not None:
                weekly.stop.set()
            raise
        if point is not None:
            if weekly is not None:
                weekly.result(stop=True)  # its CPU goes to the split's leaves
                weekly = None
            split = _split(model, a, SolveResult(Status.FEASIBLE, solver, solve_seconds=point[1]), solver, None,
                           gap, threads, incumbent, executor, carried, first_gap=guide_gap, guide=point[0],
                           guide_name=point[2])
            if split is not None:
                return split
            # (an option's LP the back end could not settle: the weekly guide, stopped, runs after all, below)
    first = (weekly.result(stop=False) if weekly is not None else
             backend_solve(mip, solver=solver, time_limit=_share(time_limit, 0.0, STAGE_SHARE["first"]),
                           gap=guide_gap, threads=threads, arrays=free))
    if first.status == Status.INFEASIBLE:
        first.message = "no plan meets every constraint, even without the stability limits"
        return first
    if time_limit is None and not first.status.has_plan:
        return first  # the back end failed without a limit to blame (e.g. CP-SAT refusing the model)
    if time_limit is not None and first.status != Status.OPTIMAL:
        left = max(1.0, time_limit - (time.perf_counter() - t0))
        x = first.x if first.status.has_plan else guide
        source = "the plan without stability limits" if first.status.has_plan else "the LP relaxation"
        # its plan only starts the descent, whose configurations are fixed; the bound stays this model's
        descent = _descent(model, a, x, HEURISTICS_DESCENT_SHARE * left)
        if descent is not None:
            said = [f"{_descent_said(descent)}, from the configurations {source} uses most"]
            x, source, bound_of = descent.x, DESCENT, "the plan without stability limits"
            left = max(1.0, time_limit - (time.perf_counter() - t0))
        else:
            said, bound_of = [], None
        return fixed_configurations(model, a, x, solver, left, gap, threads, first.bound,
                                     first.solve_seconds + (0.0 if descent is None else descent.seconds),
                                     source=source, lp_x=guide, executor=executor, search=True,
                                     root=first.root_bound, duals=duals, least=least, said=said, bound_of=bound_of)
    breaks = first.status.has_plan and not over_one(configuration_use(model, first.x)).empty
    fallback = None
    if time_limit is not None and breaks:
        if time_limit - (time.perf_counter() - t0) < SPLIT_ROOM * first.solve_seconds:
            # too little time left for the split to reach its first plan: the configurations the plan without
            # limits uses most are fixed and searched instead, as when that plan came too late for a split
            return fixed_configurations(model, a, first.x, solver,
                                         max(1.0, time_limit - (time.perf_counter() - t0)), gap, threads,
                                         first.bound, first.solve_seconds,
                                         source="the plan without stability limits", lp_x=guide, executor=executor,
                                         search=True, root=first.root_bound, duals=duals, least=least)
        # a stable plan in hand before the split, returned if no leaf finds a cheaper one in the time; searched
        # for at most the guide's time (a restriction's first plan comes far sooner: x0.25 0.2 s, against 20 s)
        fallback = first_plans(model, fixed_to_most_used(model, a, first.x, guide), first.x, guide,
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
        return fixed_configurations(model, a, first.x, solver, left, gap, threads, first.bound,
                                     first.solve_seconds, source="the plan without stability limits",
                                     lp_x=guide, executor=executor, search=True, root=first.root_bound,
                                     duals=duals, least=least)
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

    keep = most_used(model, first.x, EXTRA_CANDIDATES)
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
    if raise_bound(whole, bound) and within_gap(whole.objective, whole.bound, gap):
        whole.status = Status.OPTIMAL
        whole.message = "optimal: the stable plan meets the bound of the plan without stability limits"
    return whole


def _from_the_lp(model: Model, a, guide: np.ndarray | None, solver: str, time_limit: float, gap: float,
                 threads: int | None, executor, relaxed: Relaxation, least: float = 1.0) -> SolveResult:
    """The heuristics' path (:func:`heuristics_only`): no stage before the fixed-configuration path, whose
    configurations come from the descent over the configurations from the LP relaxation's choice (``guide``), in
    :data:`HEURISTICS_DESCENT_SHARE` of ``time_limit``; from the monthly model's point itself where that stands
    in for the LP (a point of another model, which no descent of this one starts from)."""
    descent = _descent(model, a, guide, HEURISTICS_DESCENT_SHARE * time_limit) \
        if relaxed is Relaxation.LP else None
    x, source, spent, said = ((guide, relaxed.value, 0.0, []) if descent is None else
                              (descent.x, DESCENT, descent.seconds, [_descent_said(descent)]))
    return fixed_configurations(model, a, x, solver, time_limit if descent is None else
                                 max(1.0, time_limit - spent), gap, threads, None, spent, source=source,
                                 lp_x=guide, executor=executor, relaxed=relaxed, said=said,
                                 bound_of=relaxed.value, least=least)


def _from_the_configuration_relaxation(model: Model, a, guide: np.ndarray | None, solver: str, time_limit: float,
                                       gap: float, threads: int | None, executor, duals: np.ndarray | None,
                                       t0: float, least: float = 1.0) -> SolveResult:
    """A model no class of which the exact split can take, under a time limit: the configuration relaxation
    (started from the descent's point) chooses the configurations to fix and gives the bound, the same relaxation
    with whole units (then the model without limits) runs beside for a better bound, and the fixed-configuration
    path makes the plan. ``t0``: when the caller's time limit started."""
    # the plan without limits would only choose the configurations to fix, and the configuration relaxation,
    # whose floors hold for the classes limited to one configuration, chooses better and proves more. A model
    # whose limits are all above one has no such class and keeps the model without limits: without floors the
    # relaxation is little more than the LP, and stages 2 and 3 prove a model of q3's size in the time (q3 with
    # two configurations a class at 60 s: proven optimal in 50 s that way, a 4.5 % gap left through the
    # relaxation; docs/performance.md, "The configuration relaxation")
    share = _share(time_limit, 0.0, STAGE_SHARE["first"])
    # the same relaxation with whole units, on the CPU the first leaves idle, for its bound only (its point
    # chooses worse configurations: 71,790 where the first's is 61,978 on q3 + default catalog), and the
    # model without limits after it if it is proven early. They run until the time limit, while the
    # configurations are fixed and searched, and the best bound is taken at the end
    shared = Shared()  # the path's best plan, which the relaxations beside may prove
    held = relaxations_beside(model, a, solver, t0 + time_limit, gap, threads, shared)
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
    result = fixed_configurations(model, a, x, solver, left, gap, threads, first.bound, first.solve_seconds,
                                   source=source,
                                   lp_x=guide, executor=executor, search=True, root=first.root_bound,
                                   busy=held, duals=duals, shared=shared, said=said,
                                   bound_of="the configuration relaxation", least=least)
    if held is not None:
        # a proven plan needs no more bound: the relaxations stop; otherwise they run to the limit
        held_bound(result, held.result(stop=result.status == Status.OPTIMAL), gap)
    return result


def _descent(model: Model, a, guide: np.ndarray | None, seconds: float) -> Descent | None:
    """The descent over the configurations (:mod:`optimizer.solve.descent`) from those the point ``guide`` uses
    most, for ``seconds``; None without a point or a share of time (``seconds`` 0), or when the start has no LP."""
    if guide is None or not seconds:
        return None
    return choose_configurations(model, a, most_used(model, guide, extra=0), configuration_use(model, guide),
                                 seconds)


def _descent_said(descent: Descent) -> str:
    """How a message names the descent over the configurations and what it reached."""
    return (f"{DESCENT} ({descent.value:,.2f} after {descent.lps} LPs and "
            f"{descent.changes} change{'' if descent.changes == 1 else 's'}, {descent.seconds:.1f} s"
            f"{'' if descent.local else ', stopped on its share of the time'})")


def _split(model: Model, a, first: SolveResult, solver: str, time_limit: float | None, gap: float,
           threads: int | None, incumbent: SolveResult | None, executor, carried, **kw) -> SolveResult | None:
    """:func:`exact_split`, its leaves side by side on this process's threads when the
    caller gave no executor (:func:`_leaf_threads`)."""
    with _leaf_threads(solver, threads, executor) as (pool, leaf_threads):
        return exact_split(model, a, first, solver, time_limit, gap, leaf_threads, incumbent, pool, carried, **kw)


def _monthly_point(model: Model, solver: str, guide_gap: float, threads: int | None, weekly: Beside | None
                   ) -> tuple[np.ndarray, float, str] | None:
    """The first monthly model's plan without stability limits (spread over the periods) that puts a request
    class the exact split can take on more configurations than it may use, the seconds spent on the monthly
    models up to it, and that model's name; None when none does, or when the weekly guide searched beside
    (``weekly``) ends first (a small model: its plan is then at hand).

    (:func:`optimizer.solve.coarse.guides`.) The split then branches where
    that plan says and tries its options first, in place of the weekly
    model's plan, and proves by its leaves alone: a monthly optimum is no
    bound.
    """
    spent = 0.0
    enough = (lambda: False) if weekly is None else weekly.done
    for point, seconds, name in coarse.guides(model, solver, guide_gap, threads, enough):
        spent += seconds
        if configuration_choices(model, point):
            return point, spent, name
    return None


def _kept_if_cheaper(split: SolveResult, held: SolveResult, how: str, seconds: float, gap: float) -> SolveResult:
    """The split's result, or, where its leaves found no plan in the time or only dearer ones, the stable plan
    ``held`` (the first plan of the configurations the plan without limits uses most, made before the split,
    :func:`first_plans`; ``how``: the guess that gave it, ``seconds``: its solver's time) with the split's
    bound, which proves for every stable plan."""
    if not held.status.has_plan or (split.status.has_plan and split.objective <= held.objective):
        return split
    found = "found no plan" if not split.status.has_plan else f"found {split.objective:,.2f} at best"
    return held_with_bound(held, split, gap,
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

