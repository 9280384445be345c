"""Searches for a bound on the CPU beside the solve driver's own search.

HiGHS searches a model on one core, so on a machine of two CPUs or more
the second is free while the driver's heuristics or restrictions run on the
first. It searches there, one after the other, on a thread of its own
(:class:`Beside`), for a bound that proves the driver's plan:

- :func:`relaxations_beside`: the configuration relaxation with whole units,
  then the model without stability limits, while the configuration
  relaxation guides a model no class of which the exact split can take;
- :func:`bound_beside`: the stable model with its configuration floors
  searched from the driver's plan, then the configuration relaxation, then
  the components and periods solved apart at the LP's duals.

:class:`Shared` is what the two sides share: the driver's best plan, the
best bound proven beside, and the event that stops every search once one
of them has proven the plan. Each relaxation is solved for the plan held
(:func:`_for_the_plan`). HiGHS only, and never where the caller asked for
one thread. docs/performance.md measures each step ("Configuration floors",
"The configuration relaxation", "Which integrality holds the gap",
"Relaxations solved for the plan they may prove").
"""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from ..executors import Inline, Threads, cpus
from ..model.presolve import Model
from ..model.strengthen import config_floor
from . import decompose
from .backends import one_thread, solve as backend_solve
from .feasibility import objective
from .polish import UNIT_FAMILIES
from .proofs import BOUND_NAMED, BOUND_NAMED_RE, proven_if_within, raise_bound
from .relaxations import configuration_relaxation, without_limits
from .result import SolveResult, Status, best_root, bound_error, relative_gap, within_gap

#: under a time limit, a model too large to prove (the fixed-configuration path) has the stable model with its
#: configuration floors searched for a bound on a second CPU, beside the searches of its restrictions
#: (:func:`bound_beside`)
BOUND_BESIDE = True

#: the share of the time left that the search for a bound gets: its bound comes in the first seconds (the root of the
#: stable model with its floors), and past them the second CPU's memory bandwidth is worth more to the searches
#: of the restrictions (q3 + default catalog at 120 s: 74,264.56 with a quarter, 76,050.81 with half, 76,462.24
#: with all; docs/performance.md, "Configuration floors")
BESIDE_SHARE = 0.25

#: on the fixed-configuration path, the CPU of the floors' search goes on, once that search has had its share, with
#: the configuration relaxation (:func:`configuration_relaxation`) until the time limit, for its bound, and with the
#: parts solved apart below (:data:`CUTS_AFTER_FLOORS`) only if it is proven before (bench x0.25 at 90 s: standard
#: 2,565,954 -> 2,605,429, training-heavy 3,444,101 -> 3,543,758; docs/performance.md, "The configuration
#: relaxation beside the fixed path")
CONFIGURATIONS_AFTER_FLOORS = True

#: on the fixed-configuration path with the LP's duals at hand, the CPU of the floors' search goes on, once that
#: search has had its share and the configuration relaxation after it is proven, with the components and the periods
#: solved apart at those duals, until the time limit (:func:`bound_beside`; bench x1 standard at 600 s:
#: docs/performance.md, "The components solved apart on every heuristic path")
CUTS_AFTER_FLOORS = True

#: while the configuration relaxation guides (:func:`~optimizer.solve.driver.solve_stable`), the same relaxation
#: with whole units is solved beside it on the CPU it leaves idle, for its bound (q3 + default catalog at 60 s:
#: bound 61,146 -> 62,862), and when that one is proven with time left, the model without stability limits after
#: it (:func:`relaxations_beside`; docs/performance.md, "The configuration relaxation" and "Which integrality holds
#: the gap")
UNITS_BESIDE = True

#: the gap a relaxation beside is solved to once more, with a cutoff at the bound that proves the path's plan
#: (:func:`_for_the_plan`): at the user's gap HiGHS would prune the nodes within it of its best point too,
#: below the cutoff when that point lies within the gap above it, and end short of the proof again
PROOF_GAP = 1e-6


@dataclasses.dataclass
class Shared:
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
class Beside:
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
    def start(cls, solver: str, threads: int | None, run, stop: threading.Event | None = None) -> Beside | None:
        """``run()`` (a solve) on a thread of its own (:func:`beside_pool`), or None where nothing may run
        beside the caller's solve. ``stop``: the event ``run`` watches, set when the caller asks for its result."""
        pool = beside_pool(solver, threads)
        if pool is None:
            return None
        return cls(pool, pool.submit(lambda _: run(), None), stop if stop is not None else threading.Event())

    @classmethod
    def after(cls, other: Beside, run, stop: threading.Event) -> Beside:
        """``run()`` on ``other``'s thread once ``other``'s own search has ended: the CPU it leaves is taken up
        without a third thread. Asking for this result first waits for ``other``'s."""
        return cls(other.pool, other.pool.submit(lambda _: run(), None), stop)


def beside_pool(solver: str, threads: int | None) -> Threads | None:
    """A thread of its own for a search beside the caller's, whose HiGHS runs on one thread; None where
    nothing may run beside: another back end, a machine of one CPU, or one thread asked for."""
    if solver != "highs" or threads == 1 or cpus() < 2:
        return None
    return Threads(1, initializer=one_thread)

#: the relaxations :func:`relaxations_beside` solves, as the message names them when their bound proves
HELD_UNITS = "the configuration relaxation with whole units, solved beside"

HELD_FREE = "the model without stability limits, solved beside"

#: the relaxation :func:`bound_beside` solves after the floors' search, as the message names it
HELD_CONFIGURATIONS = "the configuration relaxation, solved beside"


def held_bound(result: SolveResult, beside: tuple[SolveResult, str], gap: float) -> None:
    """Prove ``result`` with the bound of a relaxation solved beside (``beside``: its result and its name,
    from :func:`relaxations_beside`) where that is the best; the message and the root bound say so."""
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
    raised = raise_bound(result, held.bound)
    result.root_bound = best_root([result.root_bound, held.root_bound], result.bound)
    if raised:
        result.message = BOUND_NAMED_RE.sub("", result.message) + BOUND_NAMED.format(said)
        proven_if_within(result, gap)


def _for_the_plan(shared: Shared, a, gap: float, deadline: float, stop: threading.Event, solve) -> SolveResult:
    """A relaxation of the stable model solved beside the path for its bound, and for the plan ``shared`` holds.

    ``solve(time_limit, gap, cutoff, enough)`` solves it (the back end's
    parameters). First to ``gap``, stopped as soon as its bound proves the
    path's plan within ``gap`` (``enough``, read at HiGHS's interrupt
    points; ``shared.answered`` is then set and the path's searches stop).
    When it ends within ``gap`` of its own optimum but short of that proof,
    and its best point does not rule the proof out (it costs at least the
    bound needed, :meth:`Shared.needed`), it is solved once more with a
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


def relaxations_beside(model: Model, a, solver: str, deadline: float, gap: float,
                        threads: int | None, shared: Shared | None = None) -> Beside | None:
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
    the search of the stable model itself behind these (:func:`bound_beside` with ``after``). Both stop once
    the caller's plan is proven (``Beside.result()``, or the event set directly); a caller whose plan is not
    proven lets them run to the deadline (``result(stop=False)``), as their bound is then what it waits for.

    ``shared``: the fixed-configuration path's best plan. Each relaxation is solved for it
    (:func:`_for_the_plan`): it stops as soon as its bound proves that plan within ``gap`` (it then says so,
    ``shared.answered``: the path's searches stop, and nothing more runs here), and one that ends just short
    of that proof is solved once more with a cutoff at the bound the proof needs.
    """
    if not UNITS_BESIDE:
        return None

    stop = threading.Event()  # set once the caller's plan is proven: a bound can no longer change it
    shared = Shared() if shared is None else shared

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

    return Beside.start(solver, threads, run, stop)


def bound_beside(model: Model, a, x: np.ndarray, solver: str, time_limit: float, gap: float,
                  threads: int | None, deadline: float | None = None, duals: np.ndarray | None = None,
                  lp_x: np.ndarray | None = None, after: Beside | None = None,
                  shared: Shared | None = None) -> Beside | None:
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
    (:func:`relaxations_beside`, a model no class of which the split can
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
    shared = Shared(x=x) if shared is None else shared
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
        return Beside.after(after, queued, stop)

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

    return Beside.start(solver, threads, run, stop)
