"""Run an OR-Tools back end in a child process, kept for the solves after it.

The OR-Tools library and highspy each carry a HiGHS; loaded into one process
they clash (undefined or mismatched HiGHS symbols, a crash). The HiGHS back
end (highspy) runs in the main process, so SCIP and CP-SAT run in a child,
``python -m optimizer.solve.backends.isolated``: the assembled arrays go to
it as a pickle on its standard input, and its :class:`SolveResult` comes back
as a pickle on a pipe of its own.

Starting a child (Python, pandas, NumPy, OR-Tools) costs far more than a
leaf of the exact split on a small model takes to solve (docs/performance.md,
"OR-Tools children kept between solves"). So a child serves one solve after
another until this process ends: an idle child is handed the next solve, and a new one
is started only when every child is busy (solves side by side from several
threads each get their own). A process forked from this one starts its own
children; it never talks to this one's.

What can go wrong, and what the caller sees:

- the child dies without a result (a crash in the solver, killed from
  outside): a solver failure, status ``error``, with its exit code and the
  end of its error output; the next solve starts a new child;
- the solver does not stop at its time limit: the child is killed
  ``1.5 × limit + 30`` s after the solve was handed in, status
  ``time-limit``, no plan;
- our own code raises in the child: the same exception type is not
  rebuilt; a :class:`RuntimeError` naming the child's exception in one line
  is raised here, as an internal error, never reported as the solver's
  failure, caused by a :class:`ChildTraceback` that holds the child's
  traceback (the command line writes it to the internal error's file, not
  to the terminal).
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import traceback

import numpy as np

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status


class ChildTraceback(Exception):
    """The traceback of an exception raised in the child, as its text: the cause of the parent's error."""


class _Child:
    """One child process serving solves: its pipes, and a file for its error output."""

    def __init__(self) -> None:
        # error output to a file, not a pipe: a pipe nobody reads would fill and stall the child
        self.stderr = tempfile.TemporaryFile(prefix="gpuopt-ortools-", suffix=".err")
        self.proc = subprocess.Popen([sys.executable, "-m", "optimizer.solve.backends.isolated"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def solve(self, job: dict, wall: float | None) -> tuple[str, object]:
        """Hand ``job`` in and wait for its answer: ``("result", SolveResult)``, ``("raised", traceback)``,
        ``("died", message)`` or ``("killed", None)`` when ``wall`` seconds passed first."""
        timer = None
        killed = threading.Event()
        if wall is not None:
            def kill():
                killed.set()
                self.proc.kill()
            timer = threading.Timer(wall, kill)
            timer.daemon = True
            timer.start()
        try:
            try:
                pickle.dump(job, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.proc.stdin.flush()
                return pickle.load(self.proc.stdout)
            except (BrokenPipeError, EOFError, pickle.UnpicklingError):
                pass  # the child is gone: say how below
        finally:
            if timer is not None:
                timer.cancel()
        if killed.is_set():
            self.proc.wait()  # killed: reap it, so that it is known to be gone when this returns
            return "killed", None
        code = self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        return "died", f"exit {code}: {' | '.join(tail)}"

    def close(self) -> None:
        """End the child: its standard input closes, and it exits after the solve it is on."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.stderr.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.close()


class _Pool:
    """The idle children of this process, each taken by one solve at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Child] = []

    def take(self) -> _Child:
        """An idle child that is still alive, or a new one."""
        with self.lock:
            while self.idle:
                child = self.idle.pop()
                if child.proc.poll() is None:
                    return child
                child.close()  # ended while idle (killed from outside): not a failure of any solve
        return _Child()

    def give_back(self, child: _Child) -> None:
        if child.proc.poll() is not None:  # its answer came, and then it ended (the hard stop, just late)
            child.close()
            return
        with self.lock:
            self.idle.append(child)

    def close(self) -> None:
        """End every idle child (at exit; a busy one ends when its solve returns and this process is gone).

        Only this process's own children are here: a forked process gets a pool of its own (:func:`_forked`).
        """
        with self.lock:
            children, self.idle = self.idle, []
        for child in children:
            child.close()


_POOL = _Pool()


def _forked() -> None:
    # a forked process shares the parent's pipes to its children: it must neither use nor close them
    global _POOL
    _POOL = _Pool()


os.register_at_fork(after_in_child=_forked)
atexit.register(lambda: _POOL.close())


def solve_isolated(mip: MIP | None, backend: str, time_limit: float | None = None, gap: float = 1e-6,
                   threads: int | None = None, start: np.ndarray | None = None,
                   arrays: Arrays | None = None) -> SolveResult:
    """Solve with OR-Tools' ``backend`` (``scip`` or ``cp-sat``) in a child process (see the module's text)."""
    a = arrays if arrays is not None else mip.arrays()
    job = {"backend": backend, "arrays": a, "time_limit": time_limit, "gap": gap, "threads": threads,
           "start": start}
    # the solver stops itself at its limit; a hard stop a little later guards the rest
    wall = None if time_limit is None else float(time_limit) * 1.5 + 30.0
    pool = _POOL
    child = pool.take()
    kind, answer = child.solve(job, wall)
    if kind == "result":
        pool.give_back(child)
        return answer
    if kind == "raised":
        pool.give_back(child)  # the child caught it and serves on
        last = answer.strip().splitlines()[-1]  # "ExceptionType: message"
        raise RuntimeError(f"internal error in the {backend} child process: {last}") from ChildTraceback(answer)
    child.kill()
    if kind == "killed":
        return SolveResult(Status.TIME_LIMIT, backend,
                           message=f"{backend} did not stop within {wall:g} s; killed, no plan")
    return SolveResult(Status.ERROR, backend, message=f"the {backend} child process failed ({answer})")


def _serve() -> None:
    """The child's loop: read a job from standard input, solve it, write the answer; end at end of input.

    The answers go out on a copy of file descriptor 1, and fd 1 itself is
    pointed at the error output, so nothing a solver prints can corrupt them
    (the back end also captures fd 1 while a solver runs, for its log).
    """
    from .ortools_backend import solve_ortools

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        try:
            job = pickle.load(inp)
        except EOFError:
            return
        try:
            answer = ("result", solve_ortools(None, backend=job["backend"], time_limit=job["time_limit"],
                                              gap=job["gap"], threads=job["threads"], start=job["start"],
                                              arrays=job["arrays"]))
        except Exception:  # our bug, not the solver's: the parent raises it with this traceback
            answer = ("raised", traceback.format_exc())
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


if __name__ == "__main__":
    _serve()
