"""Run an OR-Tools back end in a child process.

The OR-Tools library and highspy each carry a HiGHS; loaded into one process
they clash (undefined or mismatched HiGHS symbols, a crash). The HiGHS back
end (highspy) runs in the main process, so SCIP and CP-SAT run here: the
assembled arrays go to a fresh ``python -m optimizer.solve.backends.isolated``
through a pickle file, and its :class:`SolveResult` comes back the same way.
A child that dies without a result is a solver failure (status ``error``,
with its exit code and the end of its error output), never a crash of
gpuopt. Starting the child costs about a second (Python, NumPy, OR-Tools).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status


def solve_isolated(mip: MIP | None, backend: str, time_limit: float | None = None, gap: float = 1e-6,
                   threads: int | None = None, start: np.ndarray | None = None,
                   arrays: Arrays | None = None) -> SolveResult:
    """Solve with OR-Tools' ``backend`` (``scip`` or ``cp-sat``) in a child process."""
    a = arrays if arrays is not None else mip.arrays()
    tmp = tempfile.mkdtemp(prefix="gpuopt-ortools-")
    inp, out = os.path.join(tmp, "in.pkl"), os.path.join(tmp, "out.pkl")
    try:
        with open(inp, "wb") as f:
            pickle.dump({"backend": backend, "arrays": a, "time_limit": time_limit, "gap": gap,
                         "threads": threads, "start": start}, f, protocol=pickle.HIGHEST_PROTOCOL)
        # the solver stops itself at its limit; a hard stop a little later guards the rest
        wall = None if time_limit is None else float(time_limit) * 1.5 + 30.0
        try:
            proc = subprocess.run([sys.executable, "-m", "optimizer.solve.backends.isolated", inp, out],
                                  capture_output=True, text=True, timeout=wall, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return SolveResult(Status.TIME_LIMIT, backend,
                               message=f"{backend} did not stop within {wall:g} s; killed, no plan")
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr or "").strip().splitlines()[-3:]
            return SolveResult(Status.ERROR, backend, message=f"the {backend} child process failed (exit "
                               f"{proc.returncode}): {' | '.join(tail)}")
        with open(out, "rb") as f:
            return pickle.load(f)
    finally:
        for p in (inp, out):
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(tmp)


def _child(inp: str, out: str) -> None:
    from .ortools_backend import solve_ortools

    with open(inp, "rb") as f:
        job = pickle.load(f)
    result = solve_ortools(None, backend=job["backend"], time_limit=job["time_limit"], gap=job["gap"],
                           threads=job["threads"], start=job["start"], arrays=job["arrays"])
    with open(out, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
