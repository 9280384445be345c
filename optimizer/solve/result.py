"""One result type for every solver back end."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Status(str, enum.Enum):
    """What the solver proved.

    ``optimal``: a plan proven optimal within the requested gap. ``feasible``:
    a plan, with a bound, but optimality not proven (time limit).
    ``infeasible``: no plan exists. ``time-limit``: the time limit came
    before any plan; the bound, if any, is what the search proved by then
    (more time may well find a plan). ``cut-off``: a search told to look only
    below a cutoff (a plan held elsewhere) proved nothing here is cheaper; no
    plan, the cutoff is its bound. Only the solve driver and the exact split
    ask for that, and neither passes it on. ``error``: the solver failed
    (unbounded, a numerical failure, a crash): more time would not help.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time-limit"
    CUT_OFF = "cut-off"
    ERROR = "error"

    @property
    def has_plan(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass
class SolveResult:
    """Outcome of one solve, whatever the back end.

    Attributes
    ----------
    objective
        Objective value of the plan found (constant included), or None.
    bound
        Best proven lower bound on the objective, or None if unknown.
    gap
        Relative gap (objective − bound) ÷ max(|objective|, 1e-9); 0 when optimal.
    x
        Variable values, indexed by the MIP's global variable ids.
    build_seconds, solve_seconds
        Wall-clock seconds to hand the model to the back end (and, once the
        pipeline adds it, to build the MIP) and to solve it.
    start_objective
        Objective of the warm start (greedy plan) when one was computed.
    start
        How the warm start was used: ``hint`` (handed to the solver),
        ``incumbent`` (HiGHS read it as its first incumbent),
        ``kept`` (the solver found nothing better, so the plan *is* the start),
        ``unused`` (the back end takes none), or empty.
    relaxation_bound, root_bound
        Where the proof comes from: the LP relaxation's optimum, and the
        bound after the root node's cuts; ``bound`` is the final one.
    """

    status: Status
    solver: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    x: np.ndarray | None = None
    message: str = ""
    log: str = field(default="", repr=False)
    start_objective: float | None = None
    start: str = ""
    #: the LP relaxation's optimum (constant included): the weakest proven bound, set by the driver
    relaxation_bound: float | None = None
    #: the back end's dual bound when its root node finished (before any branching), if it reports one
    root_bound: float | None = None
    #: the best bound of the model cut into parts solved apart (components or periods,
    #: :mod:`optimizer.solve.decompose`), when the driver ran it
    decomposition_bound: float | None = None
    #: an LP's row duals (reduced costs c − Aᵀy), where the back end solved an LP to optimality and reports them
    duals: np.ndarray | None = field(default=None, repr=False)
    #: where the exact split proved the optimum (:mod:`optimizer.solve.split`): a proven lower bound per leaf
    #: and per subtree pruned by its LP, keyed by the choices made ((choice, option), ...)
    leaf_bounds: dict | None = field(default=None, repr=False)


def cut_off_message(cutoff: float) -> str:
    """What a search under a cutoff says when it proves nothing here is cheaper than the plan held elsewhere."""
    return f"cut off: nothing here costs less than {cutoff:,.2f}"


def cut_off(solver: str, cutoff: float, **common) -> SolveResult:
    """The result of a search that pruned every node at or above ``cutoff``: no plan, the cutoff as its bound.

    Never ``infeasible``: the model may well have plans, only none cheaper
    than the cutoff.
    """
    return SolveResult(Status.CUT_OFF, solver, message=cut_off_message(cutoff), bound=float(cutoff), **common)


def clip_to_cutoff(bound: float | None, cutoff: float) -> float | None:
    """A search's bound under a cutoff: the nodes pruned at the cutoff prove only that much.

    A search that reports no bound (stopped on its time limit before its
    root LP) proves nothing, cutoff or not: the result is None, never the
    cutoff, which only a finished search (every node pruned) proves.
    """
    return None if bound is None else min(bound, float(cutoff))


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """(objective − bound) / |objective|, never below 0; None where either is unknown."""
    if objective is None or bound is None:
        return None
    return max(0.0, objective - bound) / max(abs(objective), 1e-9)


#: what a gap may exceed the one asked for by and still count as within it (the division's round-off)
GAP_SLACK = 1e-12


def within_gap(objective: float | None, bound: float | None, gap: float) -> bool:
    """Does ``bound`` prove ``objective`` within the relative ``gap`` (:func:`relative_gap`)? False where either
    is unknown, or where the plan's cost is not finite (no plan yet)."""
    if objective is None or not np.isfinite(objective):
        return False
    g = relative_gap(objective, bound)
    return g is not None and g <= gap + GAP_SLACK


#: a bound may exceed the objective by this relative amount (solver tolerances) before it is an error
BOUND_TOLERANCE = 1e-6


def best_root(roots, bound: float | None) -> float | None:
    """The root bound to report: the highest of ``roots`` (root bounds each valid for the whole model; None or
    infinite where unknown), never above the final ``bound``; None when none is known."""
    known = [r for r in roots if r is not None and np.isfinite(r)]
    if not known:
        return None
    return max(known) if bound is None else min(max(known), bound)


def bound_error(objective: float, bound: float | None) -> str | None:
    """A message if ``bound`` lies above ``objective`` beyond :data:`BOUND_TOLERANCE`, else None.

    A lower bound above the plan it bounds is impossible: a solver bug or a
    numerical failure, never a proof of optimality.
    """
    if bound is None or bound <= objective + BOUND_TOLERANCE * max(1.0, abs(objective)):
        return None
    return (f"the solver reported a bound {bound:.6g} above its own plan's objective {objective:.6g}: "
            "a numerical failure, not a proof")


@dataclass
class Assessed:
    """A back end's solution as every back end reports it (:func:`assess`)."""

    x: np.ndarray
    objective: float
    bound: float | None
    gap: float | None
    proven: bool
    error: str | None = None


def assess(c: np.ndarray, c0: float, integer: np.ndarray, x: np.ndarray, bound: float | None, gap: float,
           completed: bool, bound_is_objective: bool = False) -> Assessed:
    """Round the integer variables of ``x``, price it, and judge the bound.

    ``bound_is_objective``: the back end solved to optimality without a
    separate bound (an LP), so the objective is the bound. A bound above the
    objective beyond tolerance is an ``error`` (:func:`bound_error`); one
    within it is clipped to the objective. ``proven`` when the back end
    ``completed`` and the gap is within ``gap``.
    """
    x = np.where(integer, np.rint(x), x)
    objective = float(c @ x + c0)
    if bound_is_objective:
        bound = objective
    bad = bound_error(objective, bound)
    if bad:
        return Assessed(x, objective, bound, None, False, bad)
    if bound is not None:
        bound = min(bound, objective)  # within the solver's tolerance only (checked above)
    g = relative_gap(objective, bound)
    proven = completed and g is not None and g <= max(gap, 1e-9) * (1 + 1e-6) + 1e-9
    return Assessed(x, objective, bound, g, proven)
