"""Relaxations of a built model that the solve driver solves for bounds and guides.

Each drops integrality or rows of the model (or of its stable form), so
its optimum is a lower bound on every plan:

- the **LP relaxation** (:func:`relaxation`): every integrality dropped and
  the training lanes' rows lifted (:data:`LP_LEAVES_OUT`);
- the **model without stability limits** (:func:`without_limits`): every
  ``config-used`` fixed to 1 and each class's limit row lifted;
- the **configuration relaxation** (:func:`configuration_relaxation`): the
  stable model with its configuration floors, integer only in
  ``config-used`` (and in the blocks named, e.g. the units).

:class:`Relaxation` names which one guides the heuristics of a run and
whose bound stands, in the result's message. docs/formulation.md states
why each is a relaxation; docs/performance.md measures them.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections.abc import Sequence

import numpy as np

from ..executors import cpus
from ..model.presolve import Model
from ..model.strengthen import config_floor
from .backends import DEFAULT_SOLVER, solve as backend_solve, solve_relaxation
from .result import SolveResult

#: row families left out of the driver's LP relaxation: the training lanes' rows. Their LP is the
#: capacity rows' again (a fractional lane is any share of the pool), so they moved no LP bound measured
#: (q3, bench x1 standard: 12,269,374.07 either way) while they cost bench x1's LP 42.6 s against 32.4 s.
#: The model without stability limits leaves them out too when there is no time limit
#: (:func:`~optimizer.solve.driver.solve_stable`)
LP_LEAVES_OUT = ("training-lanes-hours", "training-lanes-fit", "training-lanes-quota")


class Relaxation(enum.Enum):
    """The relaxation whose point guides the heuristics, and whose bound stands, as named in messages.

    ``LP``: the LP relaxation. ``MONTHLY``: the monthly model's LP standing in
    for it, when the LP relaxation does not solve in its share of the limit
    (:data:`~optimizer.solve.driver.LP_MAX_SHARE`); then no stage before the heuristics is tried and
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
    (:data:`~optimizer.solve.beside.UNITS_BESIDE`).

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
    model without stability limits (:func:`~optimizer.solve.driver.solve_stable`).
    """
    a = a.copy_bounds()
    for name in LP_LEAVES_OUT:
        if name in mip.constraints:
            rows = mip.constraints[name].ids
            a.row_lo[rows] = -np.inf
            a.row_hi[rows] = np.inf
    return a
