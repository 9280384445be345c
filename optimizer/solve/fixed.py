"""The fixed-configuration path: a stable plan of a model too large to search whole in its time limit.

Each request class is fixed to the configurations a point uses most (the
plan without stability limits, the configuration relaxation's, the
descent's or the LP relaxation's): a restriction of the stable model, so
every plan it has is a stable plan. Its first plan comes from the guesses
of :func:`first_plans`, side by side; then, where the LP was fast, one cycle
of fix-and-optimize rounds and the back end's search of the restriction,
widened one configuration per class at a time while it proves, or, where it
was not, fix-and-optimize rounds with passes over the periods; then the
whole stable model with what is left. No step starts with less than the
model's least (:func:`optimizer.solve.driver.stage_least`).
Meanwhile the CPU beside searches for a bound (:mod:`optimizer.solve.beside`).
:func:`fixed_configurations` is the path; docs/performance.md measures it
("One path for every large model", "Widening the restriction", "A pass
over the periods after every cycle").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from ..model.presolve import Model
from .backends import first_plan, solve as backend_solve
from .beside import BESIDE_SHARE, HELD_CONFIGURATIONS, Beside, Shared, bound_beside, held_bound
from .feasibility import objective
from .neighbourhood import training_support
from .period_polish import build_by_periods, polish_periods, recommit
from .polish import MIN_IMPROVEMENT, ROUNDS, polish, restrict
from .proofs import BOUND_NAMED, TIME_LIMIT_SAID, apply_decomposition, raise_bound
from .relaxations import Relaxation
from .result import SolveResult, Status, best_root, relative_gap, within_gap
from .split import COMMITMENTS, configuration_use, configurations_fixed

#: under a time limit, the share of the time left that a pass over the periods
#: (:mod:`optimizer.solve.period_polish`) may use: the re-commit before the fix-and-optimize rounds, and the pass
#: after each cycle of them, before the whole stable model gets the rest
PERIOD_SHARE = 0.5

#: on the path that searches the restriction (``search``), the share of the time left after the first plan that one
#: cycle of fix-and-optimize rounds may take before the search starts from its plan (0: none)
SEARCH_ROUNDS_SHARE = 0.25

#: when a first plan is made one period after the other (:func:`build_by_periods`),
#: each period's MIP is solved to this gap: the period rounds improve the plan after (bench ×16: 102.07M in 60 s at
#: 5 %, 101.79M in 360 s at 1 %; docs/performance.md, "The monthly model")
BUILD_GAP = 0.05


def most_used(model: Model, x: np.ndarray, extra: int, then: np.ndarray | None = None) -> np.ndarray:
    """Per ``config-used`` variable: is its configuration among the N + ``extra`` most used for its request class
    (N: the class's limit)?

    Ranked by the traffic each carries in ``x``; configurations ``x`` carries
    equally (none at all, mostly) by their traffic in ``then`` (the LP
    relaxation's point), where given.
    """
    cu = configuration_use(model, x)
    cu = cu.assign(then=0.0 if then is None else configuration_use(model, then)["use"].to_numpy())
    cu = cu.sort_values(["use", "then"], ascending=False, kind="stable")
    cu["rank"] = cu.groupby(["service", "bucket"]).cumcount() + 1
    cu = cu.sort_index()
    return (cu["rank"] <= cu["max_configurations"] + extra).to_numpy()


def _widened(model: Model, a, x: np.ndarray, extra: int, then: np.ndarray | None = None):
    """The stable model restricted, per request class, to the N + ``extra`` configurations the plan ``x`` uses
    most, ties broken by ``then`` (N: the class's limit, whose row stays on), as arrays; None when that is
    every configuration."""
    ids = model.mip.variables["config-used"].ids
    allowed = most_used(model, x, extra=extra, then=then)
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
    :func:`build_by_periods`.

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


def _gpu_of(model: Model) -> dict[str, str]:
    """Each offering's GPU model, for the rounds searched one GPU model at a time
    (:data:`~optimizer.solve.polish.BY_GPU`)."""
    return dict(zip(model.data.offerings["offering"], model.data.offerings["gpu"]))


def _rounds_and_passes(model: Model, a, x: np.ndarray, obj: float, solver: str, deadline: float,
                       threads: int | None, executor, rounds: bool, open_gap, least: float = 1.0
                       ) -> tuple[np.ndarray, float, str]:
    """Improve the stable plan ``x`` (cost ``obj``) of the restriction ``a`` until ``deadline``.

    In cycles: with ``rounds``, one cycle of fix-and-optimize rounds
    (:func:`polish`: units, inference by GPU model, training),
    then one pass over the periods (:func:`polish_periods`,
    on ``executor``), each period re-solved whole with the others held.
    The cycles go on while one lowers the cost by at least
    :data:`MIN_IMPROVEMENT` of it (without
    ``rounds``, the monthly model's path: by anything), the gap is open
    (``open_gap``) and ``least`` seconds are left (a stage's fewest,
    :func:`optimizer.solve.driver.stage_least`). With ``rounds`` a pass gets
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
    gpu_of = _gpu_of(model)
    while True:
        cycle_start = obj
        if rounds:
            x, log = polish(model.mip, a, x, solver, deadline - time.perf_counter(), threads, cycles=1,
                            gpu_of=gpu_of, least=least)
            n_rounds += len({r["round"] for r in log})  # a round searched in parts (by GPU) counts once
            obj = min(obj, objective(a, x))
        left = deadline - time.perf_counter()
        if several and left >= least and open_gap(obj):
            x, rec = polish_periods(model, a, x, PERIOD_SHARE * left if rounds else left, executor)
            passes, kept = passes + 1, kept + rec["improved"]
            obj = min(obj, rec["after"])
        gain = MIN_IMPROVEMENT * max(abs(cycle_start), 1e-9) if rounds else 1e-9
        if obj > cycle_start - gain or deadline - time.perf_counter() < least or not open_gap(obj):
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


def fixed_to_most_used(model: Model, a, x: np.ndarray, lp_x: np.ndarray | None):
    """A copy of the arrays ``a`` with each request class fixed to the N configurations the plan ``x`` uses most
    (ties by their traffic in ``lp_x``), every other configuration off: a restriction of the stable model."""
    return configurations_fixed(model, a, most_used(model, x, extra=0, then=lp_x))


def first_plans(model: Model, fixed, x: np.ndarray | None, lp_x: np.ndarray | None, source: str,
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


def fixed_configurations(model: Model, a, x: np.ndarray | None, solver: str, time_limit: float, gap: float,
                          threads: int | None, bound: float | None, spent: float,
                          source: str = "the plan without stability limits",
                          lp_x: np.ndarray | None = None, executor=None, search: bool = False,
                          root: float | None = None, busy: Beside | None = None,
                          relaxed: Relaxation = Relaxation.LP, duals: np.ndarray | None = None,
                          shared: Shared | None = None, said: Sequence[str] = (),
                          bound_of: str | None = None, least: float = 1.0) -> SolveResult:
    """A stable plan within ``time_limit`` for a model too large to search whole: fix, improve, search.

    1. The stable model with each request class fixed to the N
       configurations ``x`` uses most (a restriction), solved until the back
       end's first plan (HiGHS; the other back ends solve it on). Without
       ``x`` (the LP stopped on the limit) the configurations stay free.
       The guesses: training restricted to where ``x`` places it, to
       where the LP places it, and the configurations alone. HiGHS
       searches them side by side, each with the whole time, and the first
       plan found is taken (:func:`first_plan`);
       with ``threads`` 1, or another back end, they are tried in that
       order, each with an equal share of the time left, the last what
       remains.
    2. That plan improved. With ``search`` (the caller's LP took at most
       :data:`~optimizer.solve.driver.STAGES_MAX_LP_SHARE` of the limit, so the back end can get
       past its root in the time), first by one cycle of fix-and-optimize
       rounds in :data:`SEARCH_ROUNDS_SHARE` of the time left (the back
       end's first incumbent is often far from good, and a search from it
       may not get far in a short limit), then by the back end's own search
       of the restriction, started from the best plan, with every second
       left; and, each time
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
    solved apart at them; :func:`bound_beside`) and the whole stable
    model's own bound from step 3; the restriction's and the rounds' bounds prove
    nothing for the stable model. The root bound reported is the better of
    ``root`` (the model without limits' root) and the whole stable model's
    root, never the restriction's. A bound proven beside is kept as it
    comes (``shared.bound``) and checked against each plan the path finds
    after it: where it proves one within ``gap``, the path starts nothing
    more and the searches beside stop (:meth:`Shared.held`).

    ``said``: what the caller did before (the descent over the
    configurations), named first in the message; ``bound_of``: whose bound
    ``bound`` is, when not that of ``source`` (a descent chooses the
    configurations but proves nothing). ``least``: the fewest seconds a
    step after the first plan is started with
    (:func:`optimizer.solve.driver.stage_least`).
    """
    mip = model.mip
    search = search and x is not None  # without a point nothing is fixed: the final search is that search
    fixed = a.copy_bounds() if x is None else fixed_to_most_used(model, a, x, lp_x)
    # without a point to guide the choice (the LP stopped on the limit): the configurations stay free. Forcing
    # every one on, as before, broke each class's limit whenever it had more candidates than it may use
    t0 = time.perf_counter()

    def open_gap(obj: float | None) -> bool:
        # the caller's bound, or a better one proven beside by now
        return not within_gap(obj, shared.proof(bound), gap)

    steps = list(said)  # what the caller did before, named first in the message
    seconds = spent
    beside = None  # the stable model's own search for a bound, on a CPU of its own (bound_beside)
    # the best plan so far, for the searches beside; and ``answered``, set when one of them has proven it (or the
    # stable model's optimum): the rest stop. ``shared``: the caller's, whose relaxations beside read it too
    shared = Shared() if shared is None else shared
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
        first, how, spent_here = first_plans(model, fixed, x, lp_x, source, relaxed, solver, t0 + time_limit, gap,
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
            beside = (bound_beside(model, a, best_x, solver, BESIDE_SHARE * left, gap, threads,
                                    deadline=t0 + time_limit, duals=duals, lp_x=lp_x, shared=shared)
                      if busy is None else
                      bound_beside(model, a, best_x, solver, left, gap, threads, deadline=t0 + time_limit,
                                    after=busy, shared=shared))
        if search and left >= least and open_gap(best_obj) and SEARCH_ROUNDS_SHARE:
            # the first plan is the back end's first incumbent, often far from good (q3-profiled at 5 s: 412,382);
            # one cycle of fix-and-optimize rounds takes it most of the way in a fraction of a second, where the
            # restriction's search from it stopped at 209,739 (docs/performance.md, "The last second of a short
            # limit")
            t = time.perf_counter()
            rounded, _ = polish(mip, fixed, best_x, solver, SEARCH_ROUNDS_SHARE * left, threads, cycles=1,
                                gpu_of=_gpu_of(model), least=least)
            seconds += time.perf_counter() - t
            cost = objective(a, rounded)
            if cost < best_obj - 1e-9:
                steps.append(f"then a cycle of fix-and-optimize rounds from {best_obj:,.2f}")
                best_x, best_obj = rounded, cost
                shared.take(a, best_x, gap)
            left = time_limit - (time.perf_counter() - t0)
        if search and left >= least and open_gap(best_obj):
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
                if wide is None or left < least:  # every configuration: the whole stable model, below
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
        elif left >= least and open_gap(best_obj):
            if lp_x is not None:
                t = time.perf_counter()
                x_lp, rec = _commit_as_lp(model, fixed, best_x, lp_x, PERIOD_SHARE * left)
                seconds += time.perf_counter() - t
                if x_lp is not None and rec["after"] < best_obj - 1e-9:
                    steps.append(f"then {relaxed.value}'s commitments, rounded up, with every period "
                                 f"re-solved against them, from {best_obj:,.2f}")
                    best_x, best_obj = x_lp, rec["after"]
        left = time_limit - (time.perf_counter() - t0)
        if not search and left >= least and open_gap(best_obj):
            t = time.perf_counter()
            best_x, best_obj, said = _rounds_and_passes(model, fixed, best_x, best_obj, solver, t0 + time_limit,
                                                        threads, executor, whole_fits, open_gap, least)
            seconds += time.perf_counter() - t
            if said:
                steps.append(said)
    else:
        if first.status != Status.INFEASIBLE and time_limit - (time.perf_counter() - t0) < least:
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
    if (whole_fits or best_obj is None) and left >= least and open_gap(best_obj) and not answered.is_set():
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
            raise_bound(whole, bound)
            return whole
        else:
            steps.append("the whole stable model, started from it, found nothing cheaper")
    if not whole_fits and best_obj is not None and open_gap(best_obj):
        steps.append("the whole stable model not searched (its LP relaxation does not solve in the time): "
                     "a heuristic plan")
    elif left < least and best_obj is not None and open_gap(best_obj):
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
        held_bound(result, (relaxed_beside, HELD_CONFIGURATIONS), gap)
    for dec in cuts:  # solved apart on the floors' CPU after its search: the best bound proves, named as such
        apply_decomposition(result, dec, gap, where="on the CPU beside the search")
    return result
