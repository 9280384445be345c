"""Benchmark: how much the exact split's leaf searches depend on the back end's seed (not a timed test).

A change to the split (the order of its leaves, when a proof starts, what
runs beside what) moves a solve by less than one leaf's search moves from
one seed to the next: the seed changes the path of HiGHS's search, not its
optimum. This solves a problem once, keeps every leaf search the split
hands out (its arrays, gap, cutoff, start, heuristics), then searches the
chosen ones again, each alone on one HiGHS thread, on seeds 0 (HiGHS's
default) to ``--seeds`` − 1, and prints the seconds, status, plan and
bound of each::

    python bench/seeds.py problems/q3.yaml                  # every leaf search, seeds 0-3
    python bench/seeds.py problems/q3.yaml --leaves 0,6 --seeds 6

docs/performance.md ("Proofs on a free worker; the first leaf raced")
reports the numbers.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header  # noqa: E402  (after the path is set)


def leaf_searches(problem_file: Path) -> tuple[float, list]:
    """The problem's optimum and every leaf search its split handed out, in order (HiGHS, default threads)."""
    from optimizer.api import load_problem, solve
    from optimizer.solve import split

    tasks, lock, real = [], threading.Lock(), split.solve_leaf

    def kept(task):
        with lock:
            tasks.append(task)
        return real(task)

    split.solve_leaf = kept
    try:
        plan = solve(load_problem(problem_file))
    finally:
        split.solve_leaf = real
    return plan.result.objective, tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--seeds", type=int, default=4, help="seeds 0 to N-1 (default 4)")
    ap.add_argument("--leaves", default="", help="the leaf searches to repeat, by their order (default: all)")
    args = ap.parse_args()
    from optimizer.solve import split
    from optimizer.solve.backends import solve as backend_solve

    print("\n".join(header()))
    optimum, tasks = leaf_searches(args.problem)
    print(f"{args.problem}: optimum {optimum:,.2f}, {len(tasks)} leaf searches")
    chosen = [int(i) for i in args.leaves.split(",")] if args.leaves else range(len(tasks))
    for i in chosen:
        t = tasks[i]
        what = (f"leaf search {i}: gap {t.gap:g}, cutoff "
                + ("none" if t.cutoff is None else f"{t.cutoff:,.2f}") + (", from its plan" if t.start is not None
                                                                          else ""))
        print(what)
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            r = backend_solve(None, solver=t.solver, time_limit=t.time_limit, gap=t.gap, threads=1, arrays=t.arrays,
                              start=t.start, cutoff=t.cutoff, restart=split.LEAF_RESTARTS, heuristics=t.heuristics,
                              seed=seed)
            seconds = time.perf_counter() - t0
            plan = "no plan" if r.objective is None else f"{r.objective:,.2f}"
            bound = "-" if r.bound is None else f"{r.bound:,.2f}"
            print(f"  seed {seed}: {seconds:6.2f} s  {r.status.value:<10} plan {plan:>14}  bound {bound:>14}")


if __name__ == "__main__":
    main()
