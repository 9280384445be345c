"""Benchmark: model size, build and solve time, objective, bound, gap and memory per scale and back end.

Usage::

    python bench/run.py --scales 0.25,0.5,1,2,4 --solvers highs,scip,cbc,cp-sat \\
        --time-limit 60 --seed 0 [--gap 0.01] [--threads N] [--no-presolve] [--json FILE] \\
        [--weeks 26]
    python bench/run.py --family training-heavy --scales 1 --solvers highs --time-limit 60
    python bench/run.py --handover --scales 1      # model hand-over only: PuLP objects vs MPS vs model_builder

Each (scale, back end) runs in its own process (``--one`` is the child's
entry point), so peak memory (``ru_maxrss`` of the process and of the CBC
process it starts) belongs to that run alone, and a solver crash cannot take
the table down. The problem comes from :mod:`bench.generate` (in memory, no
YAML), then runs the same path as ``gpuopt solve``: candidates, presolve,
``build_model``, bounds, LP relaxation, solve, plan, audit.

Columns: ``vars``/``int``/``rows``/``nnz`` of the model handed to the solver
(after presolve), ``build`` = candidates + presolve + ``build_model`` +
bounds (seconds), ``handover`` = arrays to the back end's model
or MPS file, ``solve`` = the solver's wall clock, ``total`` = the whole run,
``gap`` = (objective − bound) ÷ objective, ``LP bound`` = the LP
relaxation's optimum (how tight the formulation is: its ratio to the
objective), ``mem`` = peak resident MB,
``audit`` = violations :func:`optimizer.audit.audit` finds in the plan.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import FAMILIES, WEEKS, problem  # noqa: E402  (after the path is set)
from bench.machine import header  # noqa: E402


def one(scale: float, solver: str, time_limit: float, seed: int, gap: float, threads: int | None,
        presolve_on: bool, weeks: int = WEEKS, family: str = "standard", workers: int = 1,
        executor: str = "local", scheduler: str | None = None, cuts: bool = True) -> dict:
    """One benchmark run in this process (the path of ``gpuopt solve``); returns its row."""
    from optimizer.audit import audit
    from optimizer.candidates import build_candidates
    from optimizer.executors import solve_executor
    from optimizer.model import presolve
    from optimizer.plan import extract
    from optimizer.solve import driver

    t0 = time.perf_counter()
    pr = problem(scale, seed, weeks=weeks, family=family)
    cands = build_candidates(pr)
    t1 = time.perf_counter()
    model = presolve.build(pr, cands, enabled=presolve_on, **({} if cuts else {"cuts": ()}))
    t2 = time.perf_counter()
    budget = driver.solve_budget(time_limit, t2 - t0)  # as the pipeline does: the limit is the run's wall
    st = model.mip.stats()
    row = {"family": family, "scale": scale, "solver": solver, "seed": seed, "weeks": weeks,
           "time_limit": time_limit,
           "gap_target": gap,
           "vars": st["variables"], "int": st["integer_variables"], "rows": st["constraints"],
           "nnz": st["nonzeros"], "services": len(pr.services), "jobs": len(pr.jobs),
           "offerings": len(pr.offerings), "periods": len(pr.periods),
           "candidates_s": t1 - t0, "model_s": t2 - t1, "build_s": t2 - t0, "presolve": model.summary()}
    with solve_executor(executor, workers, scheduler) as pool:
        res = driver.solve(model, solver, budget, gap, threads, executor=pool)
    t4 = time.perf_counter()
    plan = extract(model, res)
    t_audit = time.perf_counter()
    violations = audit(plan) if res.status.has_plan else []
    t5 = time.perf_counter()
    row.update({"status": res.status.value, "objective": res.objective, "bound": res.bound, "gap": res.gap,
                "relaxation_bound": res.relaxation_bound, "root_bound": res.root_bound,
                "decomposition_bound": res.decomposition_bound, "workers": workers, "executor": executor,
                "handover_s": res.build_seconds,
                "solve_s": res.solve_seconds, "extract_audit_s": t5 - t4, "audit_s": t5 - t_audit, "total_s": t5 - t0,
                "audit_violations": len(violations), "audit_first": violations[:3],
                "message": res.message})
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    row["mem_mb"] = max(me, kids)
    return row


def handover(scale: float, seed: int) -> dict:
    """Seconds to hand the ×scale model to each back end (no solve)."""
    import tempfile

    import numpy as np
    import pulp

    from optimizer.model import presolve
    from optimizer.solve.backends.ortools_backend import build_model as mb_build
    from optimizer.solve.backends.pulp_backend import write_mps
    from optimizer.candidates import build_candidates

    pr = problem(scale, seed)
    model = presolve.build(pr, build_candidates(pr))
    t = time.perf_counter()
    a = model.mip.arrays()
    out = {"scale": scale, "nnz": int(len(a.vals)), "arrays_s": time.perf_counter() - t}
    t = time.perf_counter()
    mb_build(a)
    out["model_builder_s"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        write_mps(a, os.path.join(d, "m.mps"))
        out["mps_direct_s"] = time.perf_counter() - t
        # PuLP objects, built as fast as PuLP allows: one LpAffineExpression per row from a dict
        t = time.perf_counter()
        prob = pulp.LpProblem("x", pulp.LpMinimize)
        xs = [pulp.LpVariable(f"x{i}", lowBound=None if np.isinf(lo) else float(lo),
                              upBound=None if np.isinf(hi) else float(hi),
                              cat=pulp.LpInteger if it else pulp.LpContinuous)
              for i, (lo, hi, it) in enumerate(zip(a.col_lo, a.col_hi, a.integer))]
        prob += pulp.LpAffineExpression({xs[i]: float(a.c[i]) for i in np.flatnonzero(a.c)})
        order = np.argsort(a.rows, kind="stable")
        rows, cols, vals = a.rows[order], a.cols[order], a.vals[order]
        cuts = np.searchsorted(rows, np.arange(a.n_rows + 1))
        for r in range(a.n_rows):
            e = pulp.LpAffineExpression({xs[c]: v for c, v in zip(cols[cuts[r]:cuts[r + 1]].tolist(),
                                                                   vals[cuts[r]:cuts[r + 1]].tolist())})
            lo, hi = a.row_lo[r], a.row_hi[r]
            if lo == hi:
                prob.addConstraint(pulp.LpConstraint(e, pulp.LpConstraintEQ, f"r{r}", float(lo)))
            elif np.isinf(hi):
                prob.addConstraint(pulp.LpConstraint(e, pulp.LpConstraintGE, f"r{r}", float(lo)))
            else:
                prob.addConstraint(pulp.LpConstraint(e, pulp.LpConstraintLE, f"r{r}", float(hi)))
        out["pulp_objects_s"] = time.perf_counter() - t
        t = time.perf_counter()
        prob.writeMPS(os.path.join(d, "p.mps"))
        out["pulp_writemps_s"] = time.perf_counter() - t
    return out


def _fmt(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="0.25,0.5,1,2,4")
    ap.add_argument("--solvers", default="highs,scip,cbc,cp-sat")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-presolve", action="store_true")
    ap.add_argument("--no-cuts", action="store_true", help="build without the valid inequalities (A/B)")
    ap.add_argument("--weeks", type=int, default=None,
                    help=f"weekly periods (default {WEEKS}, the reference size; not with --family catalog-wide)")
    ap.add_argument("--family", choices=FAMILIES, default="standard",
                    help="standard: the reference mix; training-heavy: jobs of 32-256 GPUs in 1-2 month windows; "
                    "catalog-wide: q3 against the whole default catalog, demand x scale")
    ap.add_argument("--workers", type=int, default=1,
                    help="> 1: also solve the periods apart on this many workers for a bound (gpuopt solve --workers)")
    ap.add_argument("--executor", choices=["local", "dask"], default="local")
    ap.add_argument("--scheduler", default=None, help="a Dask scheduler's address, with --executor dask")
    ap.add_argument("--json", default=None, help="also write every row to this JSON-lines file")
    ap.add_argument("--handover", action="store_true", help="time the model hand-over only")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.family == "catalog-wide" and args.weeks is not None:
        ap.error("--weeks cannot be given with --family catalog-wide, which is problems/q3.yaml against the "
                 "default catalog (its own periods); allowed with it: --scales and the solve's flags")
    weeks = WEEKS if args.weeks is None else args.weeks
    scales = [float(s) for s in args.scales.split(",") if s]
    solvers = [s for s in args.solvers.split(",") if s]

    if args.one:
        row = one(scales[0], solvers[0], args.time_limit, args.seed, args.gap, args.threads,
                  not args.no_presolve, weeks, args.family, args.workers, args.executor, args.scheduler,
                  not args.no_cuts)
        print("ROW " + json.dumps(row, default=float))
        return 0
    if args.handover:
        for s in scales:
            print(json.dumps(handover(s, args.seed)))
        return 0

    print(f"# bench/run.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print("\n".join(header()))
    head = ["scale", "solver", "vars", "int", "rows", "nnz", "build", "handover", "solve", "total", "status",
            "objective", "bound", "gap%", "LP bound", "solved apart", "mem MB", "audit"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    out = open(args.json, "a") if args.json else None
    for s in scales:
        for solver in solvers:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--scales", str(s), "--solvers", solver,
                   "--time-limit", str(args.time_limit), "--seed", str(args.seed), "--gap", str(args.gap),
                   "--family", args.family]
            if args.family != "catalog-wide":
                cmd += ["--weeks", str(weeks)]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            cmd += ["--workers", str(args.workers), "--executor", args.executor]
            if args.scheduler:
                cmd += ["--scheduler", args.scheduler]
            if args.no_presolve:
                cmd.append("--no-presolve")
            if args.no_cuts:
                cmd.append("--no-cuts")
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
            if not rows:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
                print(f"| {s:g} | {solver} | crashed after {time.perf_counter() - t:.0f} s: {tail[0][:120]} |")
                continue
            r = rows[0]
            if out:
                out.write(json.dumps(r, default=float) + "\n")
                out.flush()
            gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}"
            print("| " + " | ".join([
                f"{s:g}", solver, str(r["vars"]), str(r["int"]), str(r["rows"]), str(r["nnz"]),
                _fmt(r["build_s"]), _fmt(r["handover_s"]), _fmt(r["solve_s"]), _fmt(r["total_s"]), r["status"],
                _fmt(r["objective"], 0), _fmt(r["bound"], 0), gap, _fmt(r["relaxation_bound"], 0),
                _fmt(r.get("decomposition_bound"), 0),
                f"{r['mem_mb']:.0f}", str(r["audit_violations"])]) + " |", flush=True)
            if r["status"] in ("error", "infeasible"):
                print(f"|   | {solver}: {r['message'][:150]} |")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
