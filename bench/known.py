"""Benchmark: a solve handed a plan against the same solve from nothing (not a timed test).

What-if hands the base's plan to the scenario, rent versus buy and the
sweep hand plans from one solve to the next. A plan in hand should never
make a solve slower. For each problem this solves it from nothing, then
again handed its own optimum (the hardest case for the hand-over: nothing
cheaper exists, so every leaf of the split must prove the known plan's
cost), each in a fresh process so that neither re-uses the other's model,
``--repeat`` times interleaved, and prints the solve seconds, the status
and the objective of each run.

    python bench/known.py                                 # q3 and q3-profiled, HiGHS, default threads
    python bench/known.py --problems problems/q3.yaml --repeat 3

docs/performance.md ("A known plan no longer starts the guide") reports the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)

#: run in a child process: solve the problem, then (``known``) solve a fresh copy handed that plan by name
CHILD = """
import json, sys
from optimizer.api import load_problem, solve
problem_file, known = sys.argv[1], sys.argv[2] == "known"
plan = solve(load_problem(problem_file))
if known:
    plan = solve(load_problem(problem_file), known=[plan])
print(json.dumps({"status": plan.status.value, "objective": plan.result.objective,
                  "solve_seconds": plan.result.solve_seconds, "message": plan.result.message}))
"""


def one(problem: Path, known: bool) -> dict:
    """The last solve's status, objective, solve seconds and message, from a child process."""
    r = subprocess.run([sys.executable, "-c", CHILD, str(problem), "known" if known else "nothing"],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{problem}: the child failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", type=Path,
                    default=[ROOT / "problems" / "q3.yaml", ROOT / "problems" / "q3-profiled.yaml"])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print("\n".join(header()))
    for problem in args.problems:
        for rep in range(args.repeat):
            for known in (False, True):
                d = one(problem, known)
                cost = "no plan" if d["objective"] is None else f"{d['objective']:,.2f}"
                print(f"{problem.name} {'handed its optimum' if known else 'from nothing':19s} run {rep + 1}: "
                      f"{d['status']} {cost} in {d['solve_seconds']:.1f} s of solve; "
                      f"load {load()}", flush=True)


if __name__ == "__main__":
    main()
