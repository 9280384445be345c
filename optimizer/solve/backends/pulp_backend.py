"""CBC, the solver PuLP bundles, fed an MPS file written straight from the arrays.

PuLP builds a model one Python object per variable and term; writing the
MPS file from the sparse arrays with numpy is much faster (bench/run.py
``--handover`` measures both; docs/performance.md has the numbers). We call
PuLP's own CBC binary with the same options PuLP would pass.

Objective constant: it is **not** written to the file (PuLP does not write it
either), so every objective value and bound CBC prints excludes it; we add
:attr:`Arrays.c0 <optimizer.model.mip.Arrays>` to both. CBC's proven bound is read
from its log ("best possible" of the last search line, or "Lower bound" of
the summary); a search that completed proves the objective itself.

Warm start: the greedy plan is written as a CBC solution file and passed
with ``-mips``. A run that does not finish within ``time_limit`` plus a grace
period is killed, and reported as an error when no plan came out.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time

import numpy as np

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status, assess, clip_to_cutoff, cut_off

_RESULT = re.compile(r"^Result - (.*)$", re.M)
_LOWER = re.compile(r"^Lower bound:\s+(\S+)", re.M)
_OBJ = re.compile(r"^Objective value:\s+(\S+)", re.M)
_BEST_POSSIBLE = re.compile(r"best possible (\S+?)\)")
_COMPLETED = re.compile(r"Search completed - best objective (\S+?),")
_GAP_EXIT = re.compile(r"Exiting as integer gap of (\S+) less than")


def cbc_path() -> str:
    """The CBC binary PuLP bundles (``pulp.apis.coin_api.pulp_cbc_path``), or ``cbc`` on PATH.

    gpuopt writes the MPS file and reads CBC's solution itself, so it needs the
    binary only, not PuLP's solver classes (``PULP_CBC_CMD`` is deprecated in
    PuLP 3.x; ``COIN_CMD`` would look for ``cbc`` on PATH alone).
    """
    import shutil

    from pulp.apis import coin_api

    bundled = coin_api.pulp_cbc_path
    if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("cbc") or bundled  # a missing binary fails in the run: a solver failure, reported


def _fmt(v: np.ndarray) -> np.ndarray:
    return np.char.mod("% .12e", v)  # PuLP's number format (13 significant digits)


def _pad(names: np.ndarray) -> np.ndarray:
    return np.char.ljust(names, 8)  # CBC's MPS reader wants names in 8-character fields, as PuLP writes them


def write_mps(a: Arrays, path: str) -> None:
    """Write ``min c·x s.t. row_lo ≤ A x ≤ row_hi, col bounds, integrality`` (no constant) as MPS."""
    n, m = a.n_vars, a.n_rows
    # rows: type from the bounds; two-sided rows get a range
    lo, hi = a.row_lo, a.row_hi
    eq = lo == hi
    le = ~eq & np.isinf(lo)
    ge = ~eq & ~le & np.isinf(hi)
    rng = ~eq & ~le & ~ge  # both finite: L row with a range
    rtype = np.where(eq, "E", np.where(ge, "G", np.where(le | rng, "L", "N")))
    free = np.isinf(lo) & np.isinf(hi)
    rtype[free] = "N"  # a free row constrains nothing (kept so row ids stay aligned)
    rname = np.char.add("R", np.arange(m).astype(str))
    cname = np.char.add("C", np.arange(n).astype(str))
    out = ["NAME          GPUOPT\nROWS\n N  OBJ\n"]
    if m:
        out.append("".join(np.char.add(np.char.add(np.char.add(" ", rtype), "  "), np.char.add(rname, "\n"))))
    out.append("COLUMNS\n")
    # entries: objective (row -1) and matrix, sorted by column; every column appears at least once
    has = np.zeros(n, bool)
    has[a.cols] = True
    obj_cols = np.flatnonzero((a.c != 0) | ~has)
    cols = np.concatenate([obj_cols, a.cols])
    rows = np.concatenate([np.full(len(obj_cols), -1, np.int64), a.rows])
    vals = np.concatenate([a.c[obj_cols], a.vals])
    order = np.lexsort((rows, cols))
    cols, rows, vals = cols[order], rows[order], vals[order]
    if len(cols):
        row_lbl = _pad(np.where(rows < 0, "OBJ", np.char.add("R", rows.astype(str))))
        lines = np.char.add(np.char.add(np.char.add("    ", _pad(cname[cols])), "  "),
                            np.char.add(np.char.add(row_lbl, "  "), np.char.add(_fmt(vals), "\n")))
    else:
        lines = np.zeros(0, dtype=str)
    # integer markers around runs of integer columns
    col_start = np.searchsorted(cols, np.arange(n + 1))
    integer = a.integer.astype(bool)
    runs = np.flatnonzero(np.diff(np.concatenate([[0], integer.astype(int), [0]])) != 0)
    edges = np.concatenate([[0], runs, [n]])
    edges = np.unique(edges)
    k = 0
    for s, e in zip(edges[:-1], edges[1:]):
        if s == e:
            continue
        seg = "".join(lines[col_start[s]:col_start[e]])
        if integer[s]:
            out.append(f"    MARKER                 'MARKER'                 'INTORG'\n{seg}"
                       "    MARKER                 'MARKER'                 'INTEND'\n")
            k += 1
        else:
            out.append(seg)
    out.append("RHS\n")
    rhs = np.where(eq | ge, lo, np.where(le | rng, hi, 0.0))
    nz = np.flatnonzero((rhs != 0) & ~free)
    if len(nz):
        out.append("".join(np.char.add(np.char.add("    RHS       ", _pad(rname[nz])),
                                       np.char.add("  ", np.char.add(_fmt(rhs[nz]), "\n")))))
    if rng.any():
        out.append("RANGES\n")
        r = np.flatnonzero(rng)
        out.append("".join(np.char.add(np.char.add("    RNG       ", _pad(rname[r])),
                                       np.char.add("  ", np.char.add(_fmt(hi[r] - lo[r]), "\n")))))
    out.append("BOUNDS\n")
    clo, chi = a.col_lo, a.col_hi
    parts = []
    fr = np.isinf(clo) & np.isinf(chi)
    mi = np.isinf(clo) & ~fr
    lo_set = ~np.isinf(clo) & ((clo != 0) | (chi < 0))
    up = ~np.isinf(chi)
    pl = integer & np.isinf(chi) & ~fr
    for mask, kind, val in ((fr, "FR", None), (mi, "MI", None), (lo_set, "LO", clo), (up, "UP", chi),
                            (pl, "PL", None)):
        idx = np.flatnonzero(mask)
        if not len(idx):
            continue
        head = np.char.add(f" {kind} BND       ", _pad(cname[idx]))
        if val is None:
            parts.append("".join(np.char.add(head, "\n")))
        else:
            parts.append("".join(np.char.add(head, np.char.add("  ", np.char.add(_fmt(val[idx]), "\n")))))
    out.extend(parts)
    out.append("ENDATA\n")
    with open(path, "w") as fh:
        fh.writelines(out)


def write_start(x: np.ndarray, path: str) -> None:
    """A CBC solution file (the format ``-mips`` reads) holding the start values."""
    idx = np.arange(len(x))
    body = np.char.add(np.char.add(np.char.add(np.char.mod("%7d C", idx), idx.astype(str)),
                                   np.char.add(" ", _fmt(x))), " 0\n")
    with open(path, "w") as fh:
        fh.write("Stopped on time - objective value 0\n")
        fh.write("".join(body))


def read_solution(path: str, n: int) -> tuple[str, np.ndarray | None]:
    """CBC's status line and the column values (None when the file holds no solution)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return "", None
    lines = text.splitlines()
    if not lines:
        return "", None
    head = lines[0].strip()
    x = np.zeros(n)
    for line in lines[1:]:
        parts = line.replace("**", " ").split()
        if len(parts) < 3:
            continue
        name = parts[1]
        if name.startswith("C"):
            try:
                x[int(name[1:])] = float(parts[2])
            except ValueError:
                continue
    return head, x


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if np.isfinite(v) else None


def parse_bound(log: str) -> float | None:
    """CBC's proven lower bound on the objective *without* the constant, or None."""
    hit = _LOWER.findall(log)
    if hit:
        return _float(hit[-1])
    hit = _BEST_POSSIBLE.findall(log)
    if hit:
        return _float(hit[-1])
    hit = _COMPLETED.findall(log)
    if hit:
        return _float(hit[-1])
    return None


def solve_pulp(mip: MIP, time_limit: float | None = None, gap: float = 1e-6,
               threads: int | None = None, start: np.ndarray | None = None, arrays: Arrays | None = None,
               cutoff: float | None = None) -> SolveResult:
    """Solve with PuLP's bundled CBC; never raises on a solver outcome.

    ``cutoff``: the caller holds a plan of this cost; CBC prunes every node
    that cannot beat it (``-cutoff``, less the constant it never sees). A
    search that finds nothing below it ends "cut off", with the cutoff as
    its bound, never "infeasible" (CBC says "Integer infeasible" then).
    """
    t0 = time.perf_counter()
    a = arrays if arrays is not None else mip.arrays()
    tmp = tempfile.mkdtemp(prefix="gpuopt-cbc-")
    mps, sol, mst = (os.path.join(tmp, f) for f in ("model.mps", "model.sol", "start.mst"))
    try:
        write_mps(a, mps)
        cmd = [cbc_path(), mps]
        if start is not None:
            write_start(start, mst)
            cmd += ["-mips", mst]
        if time_limit is not None:
            cmd += ["-sec", f"{float(time_limit):g}"]
        cmd += ["-timeMode", "elapsed", "-ratio", f"{gap:.12g}", "-allow", "0"]
        cut = cutoff is not None and bool(np.isfinite(cutoff))
        if cut:
            cmd += ["-cutoff", f"{float(cutoff) - a.c0:.17g}"]
        if threads:
            cmd += ["-threads", str(int(threads))]
        cmd += ["-solve", "-printingOptions", "all", "-solution", sol]
        build = time.perf_counter() - t0
        t1 = time.perf_counter()
        # CBC checks its limit between nodes and cut passes; a hard stop a little later guards the rest
        wall = None if time_limit is None else float(time_limit) * 1.2 + 10.0
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=wall, text=True, errors="replace")
            log, killed = proc.stdout, False
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or ""
            log, killed = (out.decode(errors="replace") if isinstance(out, bytes) else out), True
        except OSError as exc:  # the CBC binary could not be started: the solver failed, not gpuopt
            return SolveResult(Status.ERROR, "cbc", message=f"could not run CBC ({cmd[0]}): {exc}",
                               build_seconds=build)
        elapsed = time.perf_counter() - t1
        head, x = read_solution(sol, a.n_vars) if not killed else ("", None)
    finally:
        for f in (mps, sol, mst):
            if os.path.exists(f):
                os.unlink(f)
        os.rmdir(tmp)

    result_line = (_RESULT.findall(log)[-1] if _RESULT.findall(log) else "").strip()
    common = dict(build_seconds=build, solve_seconds=elapsed, log=log,
                  start="hint" if start is not None else "")
    words = head.split()
    first = words[0] if words else ""
    if killed:
        bound = parse_bound(log)
        return SolveResult(Status.TIME_LIMIT, "cbc", message=f"CBC did not stop within {wall:g} s; killed, no plan",
                           bound=None if bound is None else bound + a.c0, **common)
    # the solution file's first word, as PuLP reads it: Optimal | Infeasible | Integer (infeasible) |
    # Unbounded | Stopped ("Stopped on time - objective value X" carries a plan)
    if first in ("Infeasible", "Integer"):
        if cut:  # CBC says "Integer infeasible" when every node at or above the cutoff was pruned
            return cut_off("cbc", cutoff, **common)
        return SolveResult(Status.INFEASIBLE, "cbc", message=result_line or head or "infeasible", **common)
    if first == "Unbounded":
        return SolveResult(Status.ERROR, "cbc", message="unbounded", **common)
    has_plan = x is not None and (first == "Optimal" or (
        first == "Stopped" and len(words) >= 5 and words[4] == "objective"))
    if not has_plan:
        msg = "no plan within the time limit" if first == "Stopped" else (result_line or head or "CBC failed")
        bound = parse_bound(log)
        bound = None if bound is None else bound + a.c0
        if cut:
            bound = clip_to_cutoff(bound, cutoff)
        return SolveResult(Status.TIME_LIMIT if first == "Stopped" else Status.ERROR, "cbc", message=msg, bound=bound,
                           **common)
    completed = first == "Optimal"
    bound = parse_bound(log)
    if bound is not None:
        bound += a.c0  # CBC never saw the constant
    r = assess(a.c, a.c0, a.integer, x, bound, gap, completed=completed,
               bound_is_objective=bound is None and completed)
    if r.error:
        return SolveResult(Status.ERROR, "cbc", message=r.error, **common)
    status = Status.OPTIMAL if r.proven else Status.FEASIBLE
    return SolveResult(status, "cbc", objective=r.objective, bound=r.bound, gap=r.gap, x=r.x,
                       message=result_line or head, **common)
