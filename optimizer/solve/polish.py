"""Fix-and-optimize: improve a plan by re-solving one family of decisions with the others fixed.

A heuristic, used by the solve driver only under a time limit on a model
too large to search whole in that time (docs/performance.md). Given a plan
``x`` of a model, each **round** fixes every integer variable outside a
chosen set of families at its value in ``x`` and lets the back end solve
what is left (the free families and every continuous variable: routed
traffic, training hours, replicas started). The plan ``x`` is a feasible
point of that restriction and is handed over as its start, so a round never
returns a dearer plan; whatever it finds is a plan of the whole model.

The rounds, in order (``ROUNDS``):

``units``
    only the units held (running, reserved, bought) are free: with the
    replicas and training placements fixed, the cheapest units that hold
    them. The back ends' first incumbents on large models rent far more
    units than their replicas need (training-heavy bench ×1: 6,436 units
    running against the relaxation's 1,850); this round alone takes that
    plan from 63.3M to 34.4M in 0.2 s.
``inference``
    replicas and units free, training fixed: where each service runs
    around the training clusters as placed.
``training``
    training configurations, clusters, their lanes and units free, replicas fixed:
    where each job runs around the inference as placed.

Rounds repeat while a cycle improves the plan by at least
:data:`MIN_IMPROVEMENT` and time is left (the solve driver asks for one
cycle at a time and passes over the periods between them). Nothing here
proves anything: the result keeps the caller's bound.
"""

from __future__ import annotations

import time

import numpy as np

from ..model.mip import Arrays, MIP
from .backends import solve as backend_solve
from .feasibility import objective as plan_objective
from .result import SolveResult

#: integer families held as units: free in every round
UNIT_FAMILIES = ("units-running", "units-reserved", "units-owned-new")
#: per round: the integer families left free besides the units
ROUNDS = {
    "units": (),
    "inference": ("inference-replicas",),
    "training": ("training-select", "training-run", "training-lanes"),
}
#: a cycle of rounds that improves the plan by less than this share ends the polish
MIN_IMPROVEMENT = 1e-3
#: each round may use at most this share of the time left (the rounds after it need some)
ROUND_SHARE = 0.4


def restrict(mip: MIP, a: Arrays, x: np.ndarray, free: tuple[str, ...]) -> Arrays:
    """``a`` with every integer variable outside the families ``free`` (and the units) fixed at ``x``.

    Integer values are rounded (a back end's plan is integral within its
    tolerance); continuous variables keep their bounds.
    """
    import dataclasses

    keep = set(free) | set(UNIT_FAMILIES)
    lo, hi = a.col_lo.copy(), a.col_hi.copy()
    integer = a.integer.astype(bool)
    for name, block in mip.variables.items():
        if name in keep:
            continue
        ids = block.ids[integer[block.ids]]
        v = np.clip(np.round(x[ids]), lo[ids], hi[ids])
        lo[ids] = v
        hi[ids] = v
    return dataclasses.replace(a, col_lo=lo, col_hi=hi)


def polish(mip: MIP, a: Arrays, x: np.ndarray, solver: str, time_limit: float, threads: int | None = None,
           gap: float = 1e-4, cycles: int | None = None) -> tuple[np.ndarray, list[dict]]:
    """Improve the plan ``x`` of ``a`` by rounds of fix-and-optimize within ``time_limit`` seconds.

    At most ``cycles`` cycles of :data:`ROUNDS` (None: until a cycle gains
    less than :data:`MIN_IMPROVEMENT`). Returns the best plan found (``x``
    itself if nothing was better) and one record per round: ``round``, ``seconds``, ``before``, ``after`` (its
    objective, constant included) and the back end's ``status``.
    """
    t0 = time.perf_counter()
    best = np.asarray(x, dtype=float)
    best_obj = plan_objective(a, best)
    log: list[dict] = []
    done = 0
    while True:
        cycle_start = best_obj
        for name, free in ROUNDS.items():
            left = time_limit - (time.perf_counter() - t0)
            if left < 1.0:
                return best, log
            t = time.perf_counter()
            r: SolveResult = backend_solve(mip, solver=solver, time_limit=max(1.0, ROUND_SHARE * left), gap=gap,
                                           threads=threads, start=best, arrays=restrict(mip, a, best, free))
            log.append({"round": name, "seconds": time.perf_counter() - t, "before": best_obj,
                        "after": r.objective if r.status.has_plan else None, "status": r.status.value})
            if r.status.has_plan and r.objective < best_obj:
                best, best_obj = r.x, r.objective
        done += 1
        if best_obj > cycle_start - MIN_IMPROVEMENT * max(abs(cycle_start), 1e-9) or done == cycles:
            return best, log
