"""Stage 4: solver back ends behind one interface and one result type.

``solve(mip, solver=...)`` hands the assembled arrays of a
:class:`~optimizer.mip.MIP` to a back end and returns a
:class:`~optimizer.backends.result.SolveResult`. Back ends never raise on a
solver outcome (infeasible, time limit); they report it in the status.
"""

from __future__ import annotations

from ..errors import InputError
from ..mip import MIP
from .result import SolveResult, Status, relative_gap

DEFAULT_SOLVER = "cbc"


def _pulp(mip, **kw):
    from .pulp_backend import solve_pulp

    return solve_pulp(mip, **kw)


def _ortools(name):
    def run(mip, **kw):
        from .ortools_backend import solve_ortools

        return solve_ortools(mip, backend=name, **kw)

    return run


BACKENDS = {
    "cbc": _pulp,
    "highs": _ortools("highs"),
    "scip": _ortools("scip"),
    "ortools-cbc": _ortools("cbc"),
    "cp-sat": _ortools("cp-sat"),
}


def solve(
    mip: MIP,
    solver: str = DEFAULT_SOLVER,
    time_limit: float | None = None,
    gap: float = 1e-6,
    threads: int | None = None,
) -> SolveResult:
    """Solve ``mip`` with the named back end (see :data:`BACKENDS`)."""
    key = solver.lower()
    if key not in BACKENDS:
        from ..errors import unknown_name

        raise unknown_name("solver", solver, BACKENDS, field="--solver", value=solver)
    if time_limit is not None and time_limit <= 0:
        raise InputError("time limit must be positive", field="--time-limit", value=time_limit)
    return BACKENDS[key](mip, time_limit=time_limit, gap=gap, threads=threads)


__all__ = ["solve", "SolveResult", "Status", "relative_gap", "BACKENDS", "DEFAULT_SOLVER"]
