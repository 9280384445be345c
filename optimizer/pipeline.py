"""The whole flow for one problem: candidates -> model -> solve -> plan.

``run`` is what ``gpuopt solve`` and every repeated solve (what-if, sweep,
rent-vs-buy) call. It never raises on a solver outcome: an infeasible or
failed solve is a plan with that status and a reason.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from .audit import audit
from .candidates import Candidates, build_candidates
from .load import Problem
from .model import presolve
from .model.mip import NamedPoint
from .model.reprice import Models
from .plan import Plan, extract
from .solve import driver
from .solve.backends import DEFAULT_SOLVER
from .solve.result import SolveResult, Status
from .studies.diagnose import diagnose
from .studies.precheck import precheck


def _periods_text(periods: list[str]) -> str:
    return periods[0] if len(periods) == 1 else f"{len(periods)} periods ({periods[0]} to {periods[-1]})"


def describe_infeasible_rows(rows: dict) -> list[str]:
    """Readable reasons for constraints that no variable can satisfy, one per workload and kind.

    Rows of one workload that fail for one reason in many periods make one
    line naming the periods' span and the range of what they need.
    """
    out = []
    for block, df in rows.items():
        recs = df.to_dict("records")
        if block in ("inference-demand", "inference-min-replicas"):
            keys = ["service", "bucket"] if block == "inference-demand" else ["service"]
            groups: dict[tuple, list[dict]] = {}
            for r in recs:
                groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
            for key, rs in groups.items():
                periods = [str(r["period"]) for r in rs]
                lo, hi = min(r["rhs"] for r in rs), max(r["rhs"] for r in rs)
                need = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
                if block == "inference-demand":
                    bucket = key[1]
                    out.append(f"inference[{key[0]}]" + (f" bucket {bucket}" if bucket not in (None, "all") else "")
                               + f": demand of {need} rps in {_periods_text(periods)}, but no configuration can "
                                 "serve it on any allowed offering (check regions, spot, GPU types, VRAM and SLOs)")
                else:
                    out.append(f"inference[{key[0]}]: min_replicas {need} in {_periods_text(periods)}, but no "
                               "offering can host a replica")
            continue
        for r in recs:
            if block == "training-select-one":
                out.append(f"training[{r['job']}]: no configuration fits any allowed offering")
            else:
                keys = ", ".join(f"{k}={v}" for k, v in r.items() if k != "rhs")
                out.append(f"{block} [{keys}]: needs {r['rhs']:g} but has no variables")
    return out


def run(
    problem: Problem,
    solver: str = DEFAULT_SOLVER,
    time_limit: float | None = None,
    gap: float = 1e-6,
    threads: int | None = None,
    candidates: Candidates | None = None,
    executor=None,
    known: Sequence[np.ndarray | NamedPoint] = (),
    leaf_bounds=None,
    models: Models | None = None,
) -> Plan:
    """Solve ``problem`` and return its plan (with status, objective, bounds and gap), audited.

    Never raises on a solver outcome: an infeasible or failed solve is a plan
    with that status and a reason. Anything else that goes wrong is a bug
    and propagates (the command line reports it as an internal error).
    ``executor`` (:mod:`optimizer.executors`): where the part models of the
    decomposition bound run (none: no decomposition). ``known``: plans
    already in hand (a sweep's solved neighbours), each used as the search's
    first incumbent only if it meets every row of this problem's model
    (:func:`optimizer.solve.driver.known_plan`): a point of this model's
    columns, or a plan of another model by name
    (:meth:`optimizer.model.mip.MIP.named`, read here by block and
    coordinates); ``leaf_bounds``: bounds of
    the exact split's leaves carried from elsewhere
    (:func:`optimizer.solve.split.exact_split`). ``models``: models built
    before, of the same candidates (:class:`optimizer.model.reprice.Models`);
    a problem that differs from one of them only in prices gets that model
    re-priced instead of built (the same model, in a fraction of the time).
    """
    t0 = time.perf_counter()
    if models is not None:
        if candidates is not None and candidates is not models.candidates:
            raise ValueError("run: candidates and models.candidates differ")
        cands = models.candidates
        model = models.build(problem)
    else:
        cands = candidates or build_candidates(problem)
        model = presolve.build(problem, cands)  # reductions that keep the optimum (docs/performance.md)
    build = time.perf_counter() - t0
    # cheap culprits no solve can fix (docs/diagnosis.md); none depends on a price, so once per structure
    pre = (precheck(problem, cands, model.data) if models is None else
           models.prechecked(problem, lambda: precheck(problem, cands, model.data)))
    if model.mip.infeasible_rows or pre:
        reasons = describe_infeasible_rows(model.mip.infeasible_rows) or [d["message"] for d in pre]
        result = SolveResult(Status.INFEASIBLE, solver, build_seconds=build, message="; ".join(reasons))
    else:
        # the limit is the whole run's: the build is spent, and the plan and audit after the solve need time too
        budget = driver.solve_budget(time_limit, time.perf_counter() - t0)
        known = [model.mip.point_from(k) if isinstance(k, NamedPoint) else k for k in known]
        result = driver.solve(model, solver, budget, gap, threads, executor=executor, known=known,
                               leaf_bounds=leaf_bounds)
        result.build_seconds += build
        if result.status == Status.INFEASIBLE and not result.message.startswith("no plan"):
            result.message = "no plan meets every constraint" + (
                f" (solver: {result.message})" if result.message else "")
    plan = extract(model, result)
    if plan.status.has_plan:  # every constraint and the objective again, from the plan's own rows
        plan.audit = audit(plan)
    if result.status == Status.INFEASIBLE:
        plan.diagnosis = diagnose(problem, cands, solver=solver, time_limit=time_limit, threads=threads, pre=pre)
    wall = time.perf_counter() - t0
    if time_limit is not None and wall > (1.0 + LIMIT_OVERRUN_SAID) * time_limit:
        plan.warnings.append(overrun_warning(wall, time_limit, build))
    return plan


#: a run that ends later than this share past its time limit says so in its plan's warnings (runs whose limit is
#: above what the build and first plan take end within 6 % of it: docs/performance.md, "A time limit kept beside
#: the search", 2026-11-29)
LIMIT_OVERRUN_SAID = 0.1


def overrun_warning(wall: float, time_limit: float, build: float) -> str:
    """The warning of a run that ended ``wall`` seconds after it started, past its ``time_limit``."""
    return (f"time limit: the run took {wall:.1f} s of wall clock, past its limit of {time_limit:g} s "
            f"(the model's build took {build:.1f} s; below what the build, the first plan and its audit take, "
            f"a limit cannot be kept)")
