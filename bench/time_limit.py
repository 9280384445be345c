"""Benchmark: does a run end on its time limit? (not a timed test).

For each problem and each limit, the problem is loaded, then
``pipeline.run(problem, time_limit=LIMIT)`` is timed: the wall clock from
the build to the audited plan, which ``--time-limit`` promises to keep.
Prints the wall clock, its ratio to the limit, the plan's cost, bound and
gap, and the machine's load before and after.

    python bench/time_limit.py problems/q3.yaml --limits 2,5,10
    python bench/generate.py --scale 0.25 --family training-heavy -o /tmp/th.yaml
    python bench/time_limit.py /tmp/th.yaml --limits 10,30 --repeat 2

docs/performance.md ("A time limit kept beside the search") reports the numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--limits", default="10", help="comma-separated seconds")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each problem and limit")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="PATH=VALUE, as on the command line")
    args = ap.parse_args(argv)

    from optimizer.load import load_problem
    from optimizer.pipeline import run

    print("\n".join(header()))
    print(f"{'problem':<28} {'limit':>6} {'wall':>7} {'ratio':>6} {'status':>9} {'objective':>14} "
          f"{'bound':>14} {'gap %':>7}")
    for path in args.problems:
        problem = load_problem(path, sets=args.sets)
        for limit in [float(x) for x in args.limits.split(",")]:
            for _ in range(args.repeat):
                t = time.perf_counter()
                plan = run(problem, time_limit=limit)
                wall = time.perf_counter() - t
                r = plan.result
                money = (lambda v: "-" if v is None else f"{v:,.0f}")
                print(f"{Path(path).name:<28} {limit:>6g} {wall:>7.2f} {wall / limit:>6.2f} {plan.status.value:>9} "
                      f"{money(plan.objective):>14} {money(r.bound):>14} "
                      f"{'-' if r.gap is None else f'{100 * r.gap:.2f}':>7}", flush=True)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
