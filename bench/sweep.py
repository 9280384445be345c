"""Benchmark: the same sweep with 1 and with 2 worker processes (not a timed test).

Runs the real entry point, ``gpuopt sweep PROBLEM --vary SPEC --workers N
--format json``, once per worker count, checks that every run gives the same
points (objective, status, mix), and prints the wall-clock times, the
speed-up and the machine's load average (other processes on the machine
slow the parallel run more than the serial one).

    python bench/sweep.py                      # the whole q3, 100 points, HiGHS, 1 vs 2 workers
    python bench/sweep.py --every-point        # the same, every point solved (~30 min per worker count)
    python bench/sweep.py --problem problems/q3-profiled.yaml --set 'training=[]' --solver cbc
                                               # the lighter sweep of session 1: q3's inference, ~1.7 s per point
    python bench/sweep.py --points 20 --workers 1 2 4
    python bench/sweep.py --threads default    # each solve's default threads instead of one each

docs/performance.md ("Parallel sweeps") reports the numbers.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import header, load  # noqa: E402  (after the path is set)


def run_sweep(args, workers: int) -> tuple[float, float, dict, str]:
    """Wall seconds, CPU seconds of the command and all its (reaped) descendants, the JSON, the command."""
    exe = shutil.which("gpuopt")
    cmd = ([exe] if exe else [sys.executable, "-m", "optimizer"]) + [
        "sweep", str(args.problem), "--vary", args.vary.replace("POINTS", str(args.points)),
        *[a for s in args.set for a in ("--set", s)],
        "--solver", args.solver, "--gap", str(args.gap),
        *(["--threads", args.threads] if args.threads != "default" else []),
        "--workers", str(workers), "--format", "json"] + (["--every-point"] if args.every_point else [])
    t0 = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if r.returncode not in (0, 1):
        sys.exit(f"sweep failed ({r.returncode}): {r.stderr}")
    return wall, cpu, json.loads(r.stdout), " ".join(cmd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default=ROOT / "problems" / "q3.yaml")
    ap.add_argument("--vary", default="offerings[aws-g6-spot].price_per_hour*=0.5:3:POINTS",
                    help="the --vary spec; POINTS is replaced by --points")
    ap.add_argument("--set", action="append", default=[],
                    help="--set overlays for every point (none by default: the whole problem; "
                         "--set 'training=[]' keeps q3's inference only, about 1-2 s per solve)")
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--gap", type=float, default=1e-6)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--threads", default="1",
                    help="--threads of every run (default 1: the runs differ only in their workers); 'default' "
                         "passes none, so each solve takes its default (one worker: the split's leaves on every "
                         "CPU; N workers: the CPUs divided among them, a waiting worker's CPU lent to the solves "
                         "running)")
    ap.add_argument("--every-point", action="store_true",
                    help="solve every point (by default points between two solved ones are settled from them "
                         "when the swept value moves only the objective)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the worker counts this many times, interleaved; the fastest run of each counts")
    args = ap.parse_args()
    args.set = [s for s in args.set if s]

    print("\n".join(header()))
    runs = {}
    for rep in range(args.repeat):
        for w in args.workers:
            wall, cpu, d, cmd = run_sweep(args, w)
            if w not in runs or wall < runs[w][0]:
                runs[w] = (wall, d)
            print(f"workers={w} (run {rep + 1}): {wall:.1f} s wall ({wall / len(d['points']):.2f} s per point), "
                  f"{cpu:.1f} CPU s; load average after {load()}", flush=True)
            if rep == 0:
                print(f"  command: {cmd}", flush=True)
    ref = runs[args.workers[0]][1]
    def digest_of(d):  # objectives to the cent: a settled point's is its plan's cost, a solved one's the solver's
        return [(p["status"], None if p["objective"] is None else round(p["objective"], 2), p["mix"])
                for p in d["points"]]

    digest = digest_of(ref)
    for w, (_, d) in runs.items():
        same = digest_of(d) == digest
        print(f"workers={w}: identical points to workers={args.workers[0]}: {same}")
    base = runs[args.workers[0]][0]
    for w, (wall, _) in runs.items():
        print(f"speed-up with {w} worker(s) (fastest runs): {base / wall:.2f}x")
    settled = sum("without a solve" in (p.get("message") or "") for p in ref["points"])
    print(f"points: {len(ref['points'])} ({len(ref['points']) - settled} solved, {settled} settled from their "
          f"neighbours), break points: {len(ref['break_points'])}")


if __name__ == "__main__":
    main()
