"""Stage 4: solver back ends behind one interface and one result type.

``solve(mip, solver=...)`` hands the assembled arrays of a
:class:`~optimizer.model.mip.MIP` to a back end and returns a
:class:`~optimizer.solve.result.SolveResult`. Back ends never raise on a
solver outcome (infeasible, time limit); they report it in the status.

Back ends (docs/performance.md compares them):

``highs``
    HiGHS through its official Python API (highspy), in process. Default.
``scip``
    OR-Tools' SCIP, in a child process (OR-Tools' HiGHS clashes with
    highspy's); takes the warm start as a hint.
``cbc``
    The CBC binary PuLP bundles, fed an MPS file written from the arrays;
    takes the warm start (``-mips``).
``cp-sat``
    OR-Tools' CP-SAT, for pure-integer models only (no request buckets, no
    training), in a child process; takes the warm start as a hint.

A warm start (a feasible vector, e.g. a heuristic plan)
is handed to the back ends that take one. Whatever the back end, the plan
returned is never worse than the start: when the solver finds nothing better
within its limits, the start is the plan (status ``feasible``, with the
solver's bound, ``result.start == "kept"``).
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...model.mip import MIP, Arrays
from ...vocabulary import DEFAULT_SOLVER
from ..result import SolveResult, Status, relative_gap


def _cbc(mip, **kw):
    from .pulp_backend import solve_pulp

    return solve_pulp(mip, **kw)


def _highs(mip, **kw):
    from .highspy_backend import solve_highspy

    return solve_highspy(mip, **kw)


def _ortools(name):
    def run(mip, **kw):
        from .isolated import solve_isolated

        return solve_isolated(mip, backend=name, **kw)

    return run


#: per back end: the installed distribution that carries its solver (the solver's version is that distribution's:
#: highspy 1.16.0 is HiGHS 1.16.0; SCIP and CP-SAT are those OR-Tools ships; CBC the binary PuLP bundles)
CARRIED_BY = {"highs": "highspy", "scip": "ortools", "cp-sat": "ortools", "cbc": "PuLP"}


def version(solver: str) -> str:
    """The distribution and version that carries the back end ``solver``, e.g. ``highspy 1.16.0``.

    Read from the installed metadata, without importing it (highspy and
    OR-Tools must not meet in one process). A plan's timing and, where the
    search stopped on a limit, the plan itself depend on it (HiGHS 1.15.1
    took 3 to 4 times as long as 1.16.0 on q3; docs/performance.md).
    """
    from importlib import metadata

    name = CARRIED_BY[backend_key(solver)]
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return f"{name} (not installed)"


BACKENDS = {
    "highs": _highs,
    "scip": _ortools("scip"),
    "cbc": _cbc,
    "cp-sat": _ortools("cp-sat"),
}  # keyed by vocabulary.SOLVERS, in its order (tests/test_cli_light.py)


def backend_key(solver: str) -> str:
    """The key of :data:`BACKENDS` for the back end named ``solver`` (in any case). An unknown name is the
    caller's error, raised as such with the names allowed and the nearest one, wherever a back end is looked
    up (a solve, an LP relaxation, a plan's solver version)."""
    key = solver.lower()
    if key not in BACKENDS:
        from ...errors import unknown_name

        raise unknown_name("solver", solver, BACKENDS, field="--solver", value=solver)
    return key


def solve(
    mip: MIP,
    solver: str = DEFAULT_SOLVER,
    time_limit: float | None = None,
    gap: float = 1e-6,
    threads: int | None = None,
    start: np.ndarray | None = None,
    arrays: Arrays | None = None,
    target: float | None = None,
    cutoff: float | None = None,
    restart: bool = True,
    heuristics: bool = True,
    stop=None,
    enough=None,
    seed: int = 0,
) -> SolveResult:
    """Solve ``mip`` with the named back end (see :data:`BACKENDS`).

    Parameters
    ----------
    time_limit
        Wall-clock seconds for the solver; the best plan so far comes back as
        ``feasible`` with its proven bound, or ``time-limit`` if there is none.
    gap
        Relative gap at which the solver may stop and call the plan optimal.
    threads
        Solver threads where the back end has a setting for it (CBC, CP-SAT).
    start
        A feasible point of ``mip`` (checked here; ignored if it is not).
    arrays
        The assembled model to solve instead of ``mip.arrays()`` (the same
        variables and rows with other bounds: a relaxation or a restriction).
    target
        Stop at the first plan that costs at most this (back ends that can:
        HiGHS); the caller holds the proof that nothing is cheaper.
    cutoff
        Prune whatever cannot cost less than this (back ends that can:
        HiGHS, CBC; SCIP and CP-SAT solve on); the caller holds such a plan.
        A search that finds nothing below it ends with status ``cut-off``, the
        message "cut off" and the cutoff as its bound.
    restart
        Whether the back end may restart its search from the root when the
        root has fixed many integer columns (HiGHS's ``mip_allow_restart``;
        the others ignore it). The exact split's leaves search without
        (:data:`optimizer.solve.split.LEAF_RESTARTS`).
    heuristics
        False: the back end runs none of its primal heuristics (HiGHS; the
        others ignore it), for a search whose job is to prove a bound; it
        still finds the plans its tree reaches.
    stop
        A :class:`threading.Event` the caller sets when it no longer needs
        the run (HiGHS; the others run to their limit): the search stops at
        its next interrupt point and ends as on its time limit.
    enough
        A function of (the cost of the best plan so far, +inf before one;
        the proven bound) that says when the run has served its caller
        (HiGHS; the others run to their limit): checked at each interrupt
        point, True stops the run as ``stop`` does. For a search run for its
        bound, whose caller knows what bound it needs (a relaxation that
        may prove the caller's plan).
    seed
        The back end's random seed (HiGHS; the others ignore it): 0 is its
        default. Another seed takes the search along another path to the
        same optimum, in a time that may differ by a factor of two or more.
    """
    key = backend_key(solver)
    _check_time_limit(time_limit)
    a = arrays if arrays is not None else mip.arrays()
    start_obj = None
    if start is not None:
        from ..feasibility import objective as start_objective, violations as check_start

        start = np.asarray(start, dtype=float)
        if check_start(a, start):
            start = None
        else:
            start_obj = start_objective(a, start)
    extra = {}
    if key == "highs":
        extra = {k: v for k, v in (("target", target), ("cutoff", cutoff)) if v is not None}
        if not restart:
            extra["restart"] = False
        if not heuristics:
            extra["heuristics"] = False
        if stop is not None:
            extra["stop"] = stop
        if enough is not None:
            extra["enough"] = enough
        if seed:
            extra["seed"] = seed
    elif key == "cbc" and cutoff is not None:
        extra = {"cutoff": cutoff}
    result = BACKENDS[key](mip, time_limit=time_limit, gap=gap, threads=threads, start=start, arrays=a, **extra)
    result.start_objective = start_obj
    _check_plan(result, a, key)
    if start is not None and result.solve_seconds > 0:  # not when the back end refused the model
        _keep_better(result, start, start_obj, gap)
    return result


def first_plan(arrays: list[Arrays], time_limit: float | None, gap: float,
               threads: int | None = None) -> tuple[int | None, SolveResult]:
    """The first plan of any of several restrictions of one model, searched side by side with HiGHS.

    Each restriction gets a HiGHS run of its own, in a thread, with the whole
    ``time_limit``, stopped at its first plan; the first plan found stops the
    others (:func:`optimizer.solve.backends.highspy_backend.first_plan`).
    Returns the index of the restriction that gave it and its result, which
    is checked against every row, bound and integrality as :func:`solve`
    checks; (None, a result without a plan) when no run found one.
    """
    from .highspy_backend import first_plan as highs_first_plan

    _check_time_limit(time_limit)
    i, result = highs_first_plan(arrays, time_limit, gap, threads)
    if i is not None:
        _check_plan(result, arrays[i], "highs")
    return i, result


def _check_time_limit(time_limit: float | None) -> None:
    """A time limit is positive seconds, or None (no limit); anything else is the caller's input error."""
    if time_limit is not None and time_limit <= 0:
        raise InputError("time limit must be positive", field="--time-limit", value=time_limit)


def _check_plan(result: SolveResult, a: Arrays, key: str) -> None:
    """Every plan a back end returns is checked against every row, bound and integrality of ``a`` first; one
    that breaks any is the back end's numerical failure (status ``error``, no plan)."""
    if not result.status.has_plan:
        return
    from ..feasibility import violations

    bad = violations(a, result.x)
    if bad:
        result.status = Status.ERROR
        result.message = f"{key}'s solution breaks the model ({bad[0]}): a numerical failure of the solver"
        result.x = None
        result.objective = None


def _keep_better(result: SolveResult, start: np.ndarray, start_obj: float, gap: float) -> None:
    """Return the start as the plan when the solver found none, or a worse one."""
    if result.status == Status.INFEASIBLE:
        return  # the start is feasible, so this cannot be; leave the solver's word visible
    worse = result.status.has_plan and result.objective is not None and result.objective > start_obj * (1 + 1e-9) + 1e-9
    if result.status.has_plan and not worse:
        return
    bound = result.bound
    if bound is not None:
        bound = min(bound, start_obj)
    g = relative_gap(start_obj, bound)
    proven = g is not None and g <= max(gap, 1e-9) * (1 + 1e-6) + 1e-9
    had = result.message
    result.status = Status.OPTIMAL if proven else Status.FEASIBLE
    result.x = start.copy()
    result.objective = start_obj
    result.bound = bound
    result.gap = g
    result.start = "kept"
    result.message = f"the warm start is the best plan found ({had})" if had else "the warm start is the best plan found"


__all__ = ["solve", "SolveResult", "Status", "relative_gap", "BACKENDS", "DEFAULT_SOLVER"]


def solve_relaxation(mip: MIP | None, a: Arrays, solver: str, time_limit: float | None = None,
                     threads: int | None = None) -> SolveResult:
    """The LP relaxation of the arrays ``a`` (integrality dropped) with the back end ``solver``.

    CP-SAT solves no LP; HiGHS does it for that back end. ``threads`` (2 or
    more): HiGHS solves it with its parallel dual simplex on that many
    threads (bench ×1: 1.5× faster on two; docs/performance.md); the other
    back ends solve it as before, with their own thread setting.
    """
    key = backend_key(solver)
    key = "highs" if key == "cp-sat" else key
    extra = {"lp_threads": threads} if key == "highs" and threads is not None and threads >= 2 else {}
    return BACKENDS[key](mip, time_limit=time_limit, gap=1e-9, threads=None, start=None, arrays=a.relaxed(),
                         **extra)


def settle_background() -> None:
    """Wait for the back end's runs still ending in the background (HiGHS runs that returned a plan at their
    ``target`` before their current stage ended); a no-op when HiGHS was never loaded."""
    import sys

    module = sys.modules.get(__name__ + ".highspy_backend")
    if module is not None:
        module.settle_background()


def one_thread() -> None:
    """Initializer of a new worker thread whose HiGHS runs each use one thread
    (:func:`~optimizer.solve.backends.highspy_backend.fresh_thread`)."""
    from .highspy_backend import fresh_thread

    fresh_thread(1)


def warm_relaxations():
    """A HiGHS LP solver for many relaxations of one program under changing bounds, each started from the last
    one's basis (:class:`~optimizer.solve.backends.highspy_backend.WarmRelaxation`): strong branching."""
    from .highspy_backend import WarmRelaxation

    return WarmRelaxation()
