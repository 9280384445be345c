"""The whole flow for one problem: candidates -> model -> solve -> plan.

``run`` is what ``gpuopt solve`` and every repeated solve (what-if, sweep,
rent-vs-buy) call. It never raises on a solver outcome: an infeasible or
failed solve is a plan with that status and a reason.
"""

from __future__ import annotations

import time

from .audit import audit
from .solve.backends import DEFAULT_SOLVER, SolveResult, Status
from .candidates import Candidates, build_candidates
from .studies.diagnose import diagnose, precheck
from .errors import InputError
from .model import presolve
from .load import Problem
from .plan import Plan, extract


def describe_infeasible_rows(rows: dict) -> list[str]:
    """Readable reasons for constraints that no variable can satisfy."""
    out = []
    for block, df in rows.items():
        for r in df.to_dict("records"):
            if block == "inference-demand":
                out.append(
                    f"inference[{r['service']}] period {r['period']}: demand of {r['rhs']:g} rps"
                    + (f" (bucket {r['bucket']})" if r.get("bucket") not in (None, "all") else "")
                    + " but no configuration can serve it on any allowed offering "
                      "(check regions, spot, GPU types, VRAM and SLOs)")
            elif block == "inference-min-replicas":
                out.append(f"inference[{r['service']}] period {r['period']}: min_replicas {r['rhs']:g} "
                           "but no offering can host a replica")
            elif block == "training-select-one":
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
) -> Plan:
    """Solve ``problem`` and return its plan (with status, objective, bound and gap)."""
    t0 = time.perf_counter()
    cands = candidates or build_candidates(problem)
    model = presolve.build(problem, cands)  # reductions that keep the optimum (docs/performance.md)
    mip, tables = model.mip, model.tables
    build = time.perf_counter() - t0
    pre = precheck(problem, cands, tables)  # cheap culprits no solve can fix (docs/diagnosis.md)
    if mip.infeasible_rows or pre:
        reasons = describe_infeasible_rows(mip.infeasible_rows) or [d["message"] for d in pre]
        result = SolveResult(Status.INFEASIBLE, solver, build_seconds=build, message="; ".join(reasons))
    else:
        try:
            # the limit is the whole run's: the build is spent, and the plan and audit after the solve need time too
            budget = presolve.solve_budget(time_limit, time.perf_counter() - t0)
            x0 = model.start(budget, threads)  # the cheaper of a greedy and an LP-rounded plan (backends.warmstart)
            result = model.solve_from(x0, solver, budget, gap, threads)
        except InputError:
            raise
        except Exception as exc:  # a crashing back end is a failed solve (exit 3), never a traceback
            result = SolveResult(Status.ERROR, solver, message=f"the solver failed: {type(exc).__name__}: {exc}")
        result.build_seconds += build
        if result.status == Status.INFEASIBLE and not result.message.startswith("no plan"):
            result.message = "no plan meets every constraint" + (
                f" (solver: {result.message})" if result.message else "")
    plan = extract(*model.restore(result), result)  # merged offerings mapped back to real ids
    if plan.status.has_plan:  # every constraint and the objective again, from the plan's own rows
        try:
            plan.audit = audit(plan)
        except Exception as exc:  # a bug in the audit is reported with the plan, never a traceback
            plan.audit = [f"the audit itself failed: {type(exc).__name__}: {exc}"]
    if result.status == Status.INFEASIBLE:
        plan.diagnosis = diagnose(problem, cands, solver=solver, time_limit=time_limit, threads=threads, pre=pre)
    return plan
