"""Benchmark of a design not built: the second monthly guide model built in a forked worker.

The solve driver's guides (:func:`optimizer.solve.coarse.guides`) build the
monthly model, search it, then build the model with each month's periods of
one length merged and search that; on q3-profiled the two builds (about 0.5
s of pandas each) lie on the solve's critical path. Here the second build
runs in a pool worker (:class:`optimizer.executors.Processes`, forked by the
fork server) while the first is built and searched in this process: the
driver's ``coarse.merged_model`` is replaced, for the worker runs only, by
one that hands the by-length build to the worker when the monthly one is
asked for. The pool is started and warmed before the first solve (the
command line would have to start it while it imports and loads). Runs
alternate with the driver as it is, in one process::

    python bench/guide_worker.py problems/q3-profiled.yaml --pairs 6

Prints each run's seconds of solve and the medians, and how long each
worker run waited for the worker's model. docs/performance.md ("The second
guide built in a forked worker, measured and not built") reports the
numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)


def build_by_length(args):
    """In the worker: the by-length merged model of ``problem`` (what ``coarse.merged_model(m, True)`` gives)."""
    from optimizer.model.presolve import build
    from optimizer.solve import coarse

    problem, cands, cuts = args
    merged = coarse.merge_periods(problem, True)
    if merged is None:
        return None
    p, into = merged
    return build(p, cands, cuts=cuts), into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("problem")
    ap.add_argument("--pairs", type=int, default=6, help="runs of each kind, alternated (default 6)")
    args = ap.parse_args()

    from optimizer import executors
    from optimizer.load import load_problem
    from optimizer.pipeline import run
    from optimizer.solve import coarse

    print("\n".join(header()))
    real = coarse.merged_model
    pool = executors.Processes(1)
    pool.submit(abs, -1).result()  # the fork server started and its worker forked before any solve
    pending, waits = {}, []

    def in_worker(model, by_length=False, cuts=coarse.CUTS):
        if not by_length:
            pending["by length"] = pool.submit(build_by_length, (model.problem, model.candidates, cuts))
            return real(model, False, cuts)
        fut = pending.pop("by length", None)
        if fut is None:
            return real(model, True, cuts)
        t = time.perf_counter()
        out = fut.result()
        waits.append(time.perf_counter() - t)
        return out

    seconds: dict[str, list[float]] = {"here": [], "worker": []}
    try:
        for _ in range(args.pairs):
            for mode, merged in (("here", real), ("worker", in_worker)):
                coarse.merged_model = merged
                plan = run(load_problem(args.problem))
                seconds[mode].append(plan.result.solve_seconds)
                print(f"{mode:6s} {plan.status.value} {plan.objective:,.2f} in {plan.result.solve_seconds:.2f} s",
                      flush=True)
    finally:
        coarse.merged_model = real
        pool.close()
    for mode, v in seconds.items():
        print(f"{mode:6s} median {statistics.median(v):.2f} s: {', '.join(f'{x:.2f}' for x in v)}")
    print("waited for the worker's model: " + ", ".join(f"{w:.2f}" for w in waits) + " s")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
