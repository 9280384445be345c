"""Benchmark: what one solve spends outside the solver, stage by stage (not a timed test).

A small problem's solve is a few tens of milliseconds; the pipeline around
it (pre-check, model build, plan, audit) is what a rent-versus-buy run or a
sweep of small problems pays 20 or 100 times. For each problem file this
prints the least time of ``--repeat`` runs of each stage (the least, since
other processes on a shared machine only ever add time), and the
machine's load average. ``re-price`` is what a copy of the problem that
changes only prices costs in place of the build (rent versus buy's
sensitivity, a sweep along a price).

    python bench/stages.py                                   # the rent-versus-buy example
    python bench/stages.py problems/q3-profiled.yaml --repeat 3
    python bench/stages.py problems/rent-vs-buy-3y.yaml --set 'finance.discount_rate=0.1'
    python bench/stages.py problems/q3.yaml --set 'catalog=[default]' --time-limit 20 --repeat 2

``after/build``: what follows the solve (plan and audit) over the build, the
ratio the solve driver keeps time for under a time limit
(``optimizer.solve.driver.AFTER_SOLVE_PER_BUILD``).

docs/performance.md ("What a small solve costs besides the solver") reports the numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)


def least(f, repeat: int) -> float:
    """The least wall-clock seconds of ``repeat`` calls of ``f``."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="*", default=[str(ROOT / "problems" / "rent-vs-buy-3y.yaml")])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each stage; the least time is reported")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="PATH=VALUE, as on the command line")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds for each solve (a large problem's plan under a limit); default: to the optimum")
    args = ap.parse_args(argv)

    from optimizer.audit import audit
    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem
    from optimizer.model import presolve
    from optimizer.model.reprice import reprice
    from optimizer.plan import extract
    from optimizer.solve import driver
    from optimizer.studies.precheck import precheck

    print("\n".join(header()))
    print(f"{'problem':<28} {'columns':>8} {'candidates':>10} {'build':>8} {'re-price':>8} {'pre-check':>9} "
          f"{'solve':>8} {'plan':>8} {'audit':>8} {'after/build':>11}   (ms, least of {args.repeat})")
    for path in args.problems:
        problem = load_problem(path, sets=args.sets)
        cands_s = least(lambda: build_candidates(problem), args.repeat)
        cands = build_candidates(problem)
        model = presolve.build(problem, cands)
        build_s = least(lambda: presolve.build(problem, cands), args.repeat)
        # what a problem that differs only in prices costs instead of the build (optimizer/model/reprice.py)
        reprice_s = least(lambda: reprice(model, problem), args.repeat)
        pre_s = least(lambda: precheck(problem, cands, model.data), args.repeat)
        result = driver.solve(model, time_limit=args.time_limit)
        solve_s = least(lambda: driver.solve(model, time_limit=args.time_limit), args.repeat)
        plan = extract(model, result)
        plan_s = least(lambda: extract(model, result), args.repeat)
        audit_s = least(lambda: audit(plan), args.repeat) if plan.status.has_plan else float("nan")
        print(f"{Path(path).name:<28} {model.mip.n_vars:>8} {1000 * cands_s:>10.0f} {1000 * build_s:>8.0f} "
              f"{1000 * reprice_s:>8.0f} {1000 * pre_s:>9.0f} {1000 * solve_s:>8.0f} {1000 * plan_s:>8.0f} "
              f"{1000 * audit_s:>8.0f} {(plan_s + audit_s) / build_s:>11.2f}")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
