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
    around the training clusters as placed. Given the GPU model of each
    offering, searched in parts, one per GPU model (:data:`BY_GPU`).
``training``
    training configurations, clusters, their lanes and units free, replicas fixed:
    where each job runs around the inference as placed.

Rounds repeat while a cycle improves the plan by at least
:data:`MIN_IMPROVEMENT` and time is left (the solve driver asks for one
cycle at a time and passes over the periods between them). Nothing here
proves anything: the result keeps the caller's bound.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

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
#: the rounds searched in parts, one per GPU model the plan spends on, the most first, each with the round's time in
#: proportion to that spend: the round's families and the units free only on the offerings of that GPU, every
#: other integer held (the continuous variables stay free). A part is a fraction of the round's model, in which
#: HiGHS finds its first improvement within seconds, where the whole round's root takes longer than its share
#: (bench ×1 standard's 60-s plan: the inference round 9.5 s for nothing; by GPU, 2.5 s a part, -2.0 % in
#: 14.5 s; docs/performance.md, "The inference round by GPU")
BY_GPU = ("inference",)
#: a cycle of rounds that improves the plan by less than this share ends the polish
MIN_IMPROVEMENT = 1e-3
#: each round may use at most this share of the time left (the rounds after it need some)
ROUND_SHARE = 0.4


def held_at(a: Arrays, x: np.ndarray, ids: np.ndarray) -> Arrays:
    """``a`` with the integer columns ``ids`` fixed at ``x``, rounded (a back end's plan is integral within its
    tolerance) and kept within their bounds."""
    lo, hi = a.col_lo.copy(), a.col_hi.copy()
    v = np.clip(np.round(x[ids]), lo[ids], hi[ids])
    lo[ids] = v
    hi[ids] = v
    return dataclasses.replace(a, col_lo=lo, col_hi=hi)


def restrict(mip: MIP, a: Arrays, x: np.ndarray, free: tuple[str, ...]) -> Arrays:
    """``a`` with every integer variable outside the families ``free`` (and the units) fixed at ``x``.

    Integer values are rounded (a back end's plan is integral within its
    tolerance); continuous variables keep their bounds.
    """
    keep = set(free) | set(UNIT_FAMILIES)
    integer = a.integer.astype(bool)
    ids = [block.ids[integer[block.ids]] for name, block in mip.variables.items() if name not in keep]
    return held_at(a, x, np.concatenate(ids) if ids else np.array([], dtype=int))


def gpu_part(mip: MIP, a: Arrays, gpu_of: Mapping[str, str], gpu: str, x: np.ndarray, free: tuple[str, ...]
             ) -> Arrays:
    """``a`` (a round's restriction around ``x``) with the columns of ``free`` and of the units held at ``x``
    wherever their offering's GPU model (``gpu_of``: offering -> GPU) is not ``gpu``."""
    other = []
    for name in set(free) | set(UNIT_FAMILIES):
        block = mip.variables.get(name)
        if block is None or not block.size or "offering" not in block.coords:
            continue
        other.append(np.asarray(block.ids)[(block.coords["offering"].map(gpu_of) != gpu).to_numpy()])
    return held_at(a, x, np.concatenate(other) if other else np.array([], dtype=int))


def gpus_by_spend(mip: MIP, a: Arrays, gpu_of: Mapping[str, str], x: np.ndarray) -> list[tuple[str, float]]:
    """The GPU models the plan ``x`` spends on, with what it spends on their units, the most first.

    A GPU model whose units cost the plan nothing is left out: a part can
    only move that GPU's replicas between that GPU's offerings (a replica
    needs units of its configuration's GPU), so there it has nothing to
    save.
    """
    spend: dict[str, float] = {}
    for name in UNIT_FAMILIES:
        block = mip.variables.get(name)
        if block is None or not block.size:
            continue
        ids = np.asarray(block.ids)
        cost = pd.Series(a.c[ids] * x[ids]).groupby(block.coords["offering"].map(gpu_of).to_numpy()).sum()
        for g, v in cost.items():
            spend[g] = spend.get(g, 0.0) + float(v)
    return sorted(((g, v) for g, v in spend.items() if v > 0), key=lambda gv: -gv[1])


def polish(mip: MIP, a: Arrays, x: np.ndarray, solver: str, time_limit: float, threads: int | None = None,
           gap: float = 1e-4, cycles: int | None = None, gpu_of: Mapping[str, str] | None = None,
           least: float = 1.0) -> tuple[np.ndarray, list[dict]]:
    """Improve the plan ``x`` of ``a`` by rounds of fix-and-optimize within ``time_limit`` seconds.

    At most ``cycles`` cycles of :data:`ROUNDS` (None: until a cycle gains
    less than :data:`MIN_IMPROVEMENT`). Each round may take
    :data:`ROUND_SHARE` of the time left. With ``gpu_of`` (each offering's
    GPU model), the rounds of :data:`BY_GPU` are searched one part per GPU
    model the plan spends on (:func:`gpu_part`), most spent on first, each
    with the round's time left in proportion to its spend. Returns the best plan found
    (``x`` itself if nothing was better) and one record per round or part:
    ``round``, ``part`` (the GPU model, or None), ``seconds``, ``before``,
    ``after`` (its objective, constant included) and the back end's
    ``status``. ``least``: the fewest seconds a round or part is started
    with (:func:`optimizer.solve.driver.stage_least`: a second on a large
    model, less on a small one).
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
            if left < least:
                return best, log
            round_end = time.perf_counter() + max(least, ROUND_SHARE * left)
            parts = gpus_by_spend(mip, a, gpu_of, best) if gpu_of is not None and name in BY_GPU else [(None, 1.0)]
            for i, (gpu, spend) in enumerate(parts):
                now = time.perf_counter()
                # past the first part, the round ends when less than ``least`` is left: the parts left are those
                # least spent on
                if i and min(round_end - now, time_limit - (now - t0)) < least:
                    break
                # the round's time left, shared among the parts left in proportion to what the plan spends on each
                share = min((round_end - now) * spend / sum(v for _, v in parts[i:]), time_limit - (now - t0))
                arrays = restrict(mip, a, best, free)
                if gpu is not None:
                    arrays = gpu_part(mip, arrays, gpu_of, gpu, best, free)
                t = time.perf_counter()
                r: SolveResult = backend_solve(mip, solver=solver, time_limit=max(least, share), gap=gap,
                                               threads=threads, start=best, arrays=arrays)
                log.append({"round": name, "part": gpu, "seconds": time.perf_counter() - t, "before": best_obj,
                            "after": r.objective if r.status.has_plan else None, "status": r.status.value})
                if r.status.has_plan and r.objective < best_obj:
                    best, best_obj = r.x, r.objective
        done += 1
        if best_obj > cycle_start - MIN_IMPROVEMENT * max(abs(cycle_start), 1e-9) or done == cycles:
            return best, log
