"""The bound of the periods (or the components) solved apart (optimizer/solve/decompose.py) against workers.

Usage::

    python bench/decompose.py --problem problems/q3.yaml --workers 1,2
    python bench/decompose.py --family standard --scale 1 --workers 1,2 --period-limit 10
    python bench/decompose.py --family standard --scale 1 --workers inline --by component --period-limit 5

For each worker count: the LP bound, the bound of the parts solved apart
at the LP's duals, how many part models were solved to the end, stopped
on ``--period-limit`` (seconds for each part model, whatever the cut)
with their own proven bound, or count their LP's, and the wall-clock
seconds of the part models
(the LP is solved once, before, and timed apart). ``inline`` is this
process, one model after another; ``N`` is a local Dask cluster of N
single-threaded worker processes (``--executor processes`` for a process
pool instead). The machine's load is printed at the start and the end:
compare rows of one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)


def model_of(args):
    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem
    from optimizer.model import presolve

    if args.problem:
        pr = load_problem(args.problem)
    else:
        from bench.generate import problem

        pr = problem(args.scale, args.seed, weeks=args.weeks, family=args.family)
    return presolve.build(pr, build_candidates(pr))


def main(argv: list[str] | None = None) -> int:
    from bench.generate import FAMILIES, WEEKS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default=None, help="a problem file (else a generated one)")
    ap.add_argument("--family", choices=FAMILIES, default="standard")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weeks", type=int, default=WEEKS)
    ap.add_argument("--workers", default="inline,1,2", help="comma-separated: inline, or a number of workers")
    ap.add_argument("--executor", choices=["dask", "processes"], default="dask")
    ap.add_argument("--period-limit", type=float, default=None,
                    help="seconds for each period model (default: none, each solved to --gap)")
    ap.add_argument("--gap", type=float, default=1e-4)
    ap.add_argument("--by", choices=["period", "component"], default="period",
                    help="the cut: one model per period, or per service and training job")
    args = ap.parse_args(argv)

    from optimizer.executors import Dask, Inline, Processes
    from optimizer.solve import decompose

    print(f"# bench/decompose.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print("\n".join(header()))
    t = time.perf_counter()
    model = model_of(args)
    a = model.mip.arrays()
    build = time.perf_counter() - t
    t = time.perf_counter()
    lp, duals = decompose.lp_duals(model, a)  # bench problems have an LP optimum
    lp_s = time.perf_counter() - t
    print(f"# {a.n_vars:,} columns, {a.n_rows:,} rows, {len(model.data.periods)} periods; build {build:.1f} s, "
          f"LP {lp:,.2f} in {lp_s:.1f} s")
    print("| workers | bound | over the LP | period MIPs solved | stopped with their bound | at their LP | seconds |")
    print("|---|---|---|---|---|---|---|")
    for w in [x for x in args.workers.split(",") if x]:
        if w == "inline":
            ex = Inline()
        else:
            ex = Dask(None, int(w)) if args.executor == "dask" else Processes(int(w))
        try:
            t = time.perf_counter()
            pending = decompose.start(model, duals, ex, gap=args.gap, arrays=a, part_limit=args.period_limit,
                                      by=args.by)
            res = pending.collect(None)
            secs = time.perf_counter() - t
        finally:
            ex.close()
        per = res.parts
        solved = int(((per["bound_from"] == "mip") & (per["status"] == "optimal")).sum())
        stopped = int(((per["bound_from"] == "mip") & (per["status"] != "optimal")).sum())
        at_lp = int((per["bound_from"] == "lp").sum())
        over = "-" if res.bound is None else f"{100 * (res.bound - lp) / abs(lp):+.2f} %"
        print(f"| {w} | {res.bound:,.2f} | {over} | {solved} | {stopped} | {at_lp} | {secs:.1f} |", flush=True)
    print(f"# load average at the end {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
