"""Sweeps: solve a problem over a grid of one or two varied values, serially or in parallel.

A dimension is ``--vary 'PATH=START:STOP:STEPS'`` (set the field to each
value), ``--vary 'PATH*=START:STOP:STEPS'`` (multiply it by each factor),
``PATH=V1,V2,...`` (a list), or ``--vary-scale 'SELECTOR:START:STOP:STEPS'``
(a ``--scale`` selector with each factor). The grid is the product of the
dimensions, the first one outermost; points are numbered in that order and
results are always reported in it, however they were computed.

Execution: :func:`run_tasks` solves independent *tasks* (plain data: the
problem's YAML data already changed for that point, the file name it came
from, solver options) in this process, in a pool of processes
(``concurrent.futures.ProcessPoolExecutor``, :func:`optimizer.executors.process_context`) or on a Dask cluster
(``dask.distributed``). Each task returns :func:`optimizer.studies.whatif.summary`
of its plan, so every executor gives the same numbers.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..executors import make_executor, share_cpus
from ..model.mip import NamedPoint
from ..solve.backends import DEFAULT_SOLVER, version as solver_version
from ..overlay import Selector, apply_scale_factor, apply_set_value, parse_path, parse_selector, split_set
from ..yamlio import parse_yaml

_RANGE = re.compile(r"^\s*([^:,]+):([^:,]+):([^:,]+)\s*$")


# ---------------------------------------------------------------------------
# dimensions


@dataclass
class Dimension:
    """One varied quantity and its values."""

    spec: str
    kind: str                  # "set" or "scale"
    target: str                # the --set path or the selector text
    op: str                    # "=" or "*=" (a scale is always a factor)
    values: list
    selector: Selector | None = None

    @property
    def label(self) -> str:
        if self.kind == "scale":
            return f"scale({self.target})"
        return self.target + ("*" if self.op == "*=" else "")

    def apply(self, raw: dict, value, file: str) -> None:
        if self.kind == "scale":
            apply_scale_factor(raw, self.selector, value, file, spec=f"{self.target}:{value}", field="--vary-scale")
        else:
            apply_set_value(raw, self.target, self.op, value, file, spec=f"{self.target}{self.op}{value}",
                            field="--vary")

    def as_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "target": self.target, "op": self.op, "values": self.values}


def _num(text: str, spec: str, field: str):
    v = parse_yaml(text.strip(), f"{field} {spec}")
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise InputError(f"{text.strip()!r} is not a number", field=field, value=spec,
                         allowed="START:STOP:STEPS with numbers, e.g. 0.5:1.5:11")
    return v


def linspace(start, stop, steps: int) -> list:
    """``steps`` evenly spaced values from ``start`` to ``stop``; integers when all of them are."""
    if steps == 1:
        return [start]
    if all(isinstance(v, int) for v in (start, stop)) and (stop - start) % (steps - 1) == 0:
        d = (stop - start) // (steps - 1)
        return [start + i * d for i in range(steps)]
    return [float(f"{start + (stop - start) * i / (steps - 1):.12g}") for i in range(steps)]


def _values(text: str, spec: str, field: str, numeric: bool) -> list:
    m = _RANGE.match(text)
    if m:
        start, stop = _num(m.group(1), spec, field), _num(m.group(2), spec, field)
        steps = _num(m.group(3), spec, field)
        if not isinstance(steps, int) or steps < 1:
            raise InputError("STEPS must be a whole number of at least 1", field=field, value=spec,
                             allowed="START:STOP:STEPS, e.g. 0.5:1.5:11 (11 values)")
        return linspace(start, stop, steps)
    if ":" in text:
        raise InputError("expected START:STOP:STEPS (three numbers) or V1,V2,...", field=field, value=spec,
                         allowed="e.g. 0.5:1.5:11 or 10,20,40")
    items = [t for t in text.split(",")]
    if any(not t.strip() for t in items):
        raise InputError("empty value in the list", field=field, value=spec,
                         allowed="START:STOP:STEPS or V1,V2,...")
    vals = [_num(t, spec, field) if numeric else parse_yaml(t.strip(), f"{field} {spec}") for t in items]
    return vals


def parse_vary(spec: str) -> Dimension:
    """``PATH=START:STOP:STEPS``, ``PATH*=START:STOP:STEPS`` or ``PATH[*]=V1,V2,...``."""
    path, op, text = split_set(spec, field="--vary")
    if not text.strip():
        raise InputError("--vary needs values", field="--vary", value=spec, allowed="PATH=START:STOP:STEPS")
    parse_path(path, "--vary")
    values = _values(text, spec, "--vary", numeric=op == "*=")
    return Dimension(spec, "set", path.strip(), op, values)


def parse_vary_scale(spec: str) -> Dimension:
    """``SELECTOR:START:STOP:STEPS`` or ``SELECTOR:V1,V2,...`` (factors)."""
    parts = spec.rsplit(":", 3)
    if len(parts) == 4 and _RANGE.match(":".join(parts[1:])):
        sel_text, text = parts[0], ":".join(parts[1:])
    else:
        sel_text, _, text = spec.rpartition(":")
    if not sel_text.strip() or not text.strip():
        raise InputError("malformed --vary-scale", field="--vary-scale", value=spec,
                         allowed="SELECTOR:START:STOP:STEPS, e.g. pricing=spot,gpu=H100-SXM:0.5:1.5:11")
    sel = parse_selector(sel_text, field="--vary-scale", spec=spec)
    values = _values(text, spec, "--vary-scale", numeric=True)
    if any(v < 0 for v in values):
        raise InputError("factors must not be negative", field="--vary-scale", value=spec)
    return Dimension(spec, "scale", sel.text, "*=", values, sel)


def grid(dims: list[Dimension]) -> list[tuple]:
    """Every combination of values, the first dimension outermost."""
    return list(itertools.product(*[d.values for d in dims]))


def point_label(dims: list[Dimension], values: tuple) -> str:
    return ", ".join(f"{d.label}={v}" for d, v in zip(dims, values))


def point_raw(base_raw: dict, file: str, dims: list[Dimension], values: tuple) -> dict:
    """``base_raw`` (already changed by --set/--scale) with this point's values applied, as a copy."""
    raw = copy.deepcopy(base_raw)
    for d, v in zip(dims, values):
        d.apply(raw, v, file)
    return raw


# ---------------------------------------------------------------------------
# tasks and executors


def make_task(index: int, raw: dict, file: str, solver: str, time_limit, gap, threads) -> dict:
    """A task is plain data: a worker needs no access to the user's files."""
    return {"index": index, "raw": raw, "file": file, "solver": solver, "time_limit": time_limit,
            "gap": gap, "threads": threads}


def solve_task(task: dict) -> dict:
    """Build and solve one task's problem; return its summary (or the input error, as text).

    A task with ``t`` (its value along a line of the grid) also returns its
    :class:`~optimizer.studies.parametric.Anchor` (``anchor``: None when its
    plan is not proven optimal). A task with ``left`` and ``right`` anchors
    (its solved neighbours) and ``settle`` is first settled from them
    (:func:`optimizer.studies.parametric.settle`) and solved only if it
    cannot be (``settled`` says which); a task solved with anchors or
    ``known`` plans (the others solved on its line) starts its search from
    the cheapest of them that is a plan of its own model
    (:func:`optimizer.solve.driver.known_plan`), and with both
    anchors the bounds their splits proved, carried to its own
    (:func:`optimizer.studies.parametric.leaf_bounds`); a task with
    ``split_like`` (a line's far end: the keys of its first end's split)
    splits on the class that split did (:func:`optimizer.studies.parametric.split_like`). A point whose
    problem differs from one met before in this process only in prices gets
    that one's model re-priced (:func:`optimizer.model.reprice.models_of_structure`).
    """
    from ..model.reprice import models_of_structure
    from ..pipeline import run
    from .whatif import build, summary

    try:
        problem = build(task["raw"], task["file"])
    except InputError as e:
        return {"index": task["index"], "input_error": e.render()}
    if task.get("settle"):
        out = _settle_task(task, problem)
        if out is not None:
            return out
    known = [np.asarray(task[side]["x"], float) for side in ("left", "right") if task.get(side) is not None]
    # a plan of another model comes by name (NamedPoint: a scenario side by side handed the base's plan)
    known += [x if isinstance(x, NamedPoint) else np.asarray(x, float) for x in task.get("known", ())]
    carried = None
    if task.get("left") is not None and task.get("right") is not None and task.get("t") is not None:
        from .parametric import Anchor, leaf_bounds

        left, right = Anchor(**task["left"]), Anchor(**task["right"])
        carried = partial(leaf_bounds, t=task["t"], left=left, right=right)
    elif task.get("split_like"):  # a line's far end: split on the class its first end split on
        from .parametric import split_like

        carried = partial(split_like, keys=task["split_like"])
    plan = run(problem, solver=task["solver"], time_limit=task["time_limit"], gap=task["gap"],
               threads=task["threads"], known=known, leaf_bounds=carried, models=models_of_structure(problem))
    out = {"index": task["index"], **summary(plan)}
    if task.get("point"):  # the plan by name, for another model to start from (Plan.point; None without one),
        # and its cost in the model's own objective (what plan.beating compares)
        out["point"] = plan.point()
        out["point_cost"] = plan.result.objective if plan.status.has_plan else None
    if task.get("t") is not None:
        from .parametric import anchor

        a = anchor(task["index"], task["t"], plan.result, plan.mip.arrays()) if plan.mip is not None else None
        out.update(anchor=None if a is None else a.as_dict(), settled=False)
    return out


def _settle_task(task: dict, problem) -> dict | None:
    """The point's summary with its plan proven from the task's two anchors, or None (then it is solved)."""
    from ..audit import audit
    from ..model.reprice import models_of_structure
    from ..plan import extract
    from .parametric import Anchor, settle
    from .whatif import summary

    # the point's own model: built, or re-priced from a point of the same structure solved in this process
    model = models_of_structure(problem).build(problem)
    if model.mip.infeasible_rows:
        return None
    left, right = Anchor(**task["left"]), Anchor(**task["right"])
    result = settle(model.mip.arrays(), task["t"], left, right, task["gap"], task["solver"])
    if result is None:
        return None
    plan = extract(model, result)
    plan.audit = audit(plan)
    if plan.audit:  # the checks passed but the plan's own rows disagree: solve the point instead
        return None
    return {"index": task["index"], **summary(plan), "anchor": None, "settled": True}


class Progress:
    """``[#####.....] 37/100  12 s left`` on stderr, only when stderr is a terminal."""

    def __init__(self, total: int, stream=None, enabled: bool | None = None, label: str = "solving"):
        self.total, self.done, self.label = total, 0, label
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)()) and total > 1
        self.enabled = enabled
        self.t0 = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        el = time.monotonic() - self.t0
        left = el / self.done * (self.total - self.done) if self.done else 0.0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                          f"  {el:5.0f} s, ~{left:.0f} s left ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def run_tasks(tasks: list[dict], workers: int = 1, executor: str = "local", scheduler: str | None = None,
              progress: Progress | None = None, lend: bool = False) -> list[dict]:
    """Solve every task; results in task order. ``executor``: ``local`` (processes when
    ``workers > 1``) or ``dask`` (``scheduler`` address, or a local Dask cluster of ``workers``)
    (:func:`optimizer.executors.make_executor`; ``lend``: the local processes share the CPUs)."""
    progress = progress or Progress(len(tasks), enabled=False)
    results: dict[int, dict] = {}
    # no more local processes than tasks (one task runs in this process)
    pool = make_executor(executor, workers if executor == "dask" else min(workers, len(tasks)), scheduler, lend)
    try:
        for res in _run(pool, tasks, progress):
            results[res["index"]] = res
    finally:
        pool.close()
        progress.close()
    return [results[t["index"]] for t in tasks]


def _run(pool, tasks: list[dict], progress: Progress):
    """Each task's result from ``pool``, in task order (an input error at a point raises it)."""
    futures = [pool.submit(solve_task, t) for t in tasks]
    for fut in futures:
        yield _checked(fut.result(), progress)


def _checked(res: dict, progress: Progress) -> dict:
    """A task's result, counted on ``progress``; an input error at its point is raised."""
    if "input_error" in res:
        raise InputError(f"point {res['index']}: {res['input_error']}")
    progress.update()
    return res


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def run_lines(dims: list[Dimension], tasks: list[dict], gap: float, workers: int = 1, executor: str = "local",
              scheduler: str | None = None, progress: Progress | None = None, lend: bool = False) -> list[dict]:
    """Every task's result, solving as few as the grid's lines allow (:mod:`optimizer.studies.parametric`).

    A line is the points that differ only in the last dimension (the whole
    grid for one dimension); its value there is t. Each line's two ends are
    solved first, the far one handed the first one's plan; then, for each
    stretch between two solved points, either
    every point inside is predicted settled by the two
    (:func:`~optimizer.studies.parametric.predict`) and is sent to be
    settled (each checked on its own model, solved if that fails), or the
    point where the two plans' costs cross (:func:`_probe_points`) is solved,
    starting from the cheapest plan solved on the line
    (a first incumbent: what costs more is cut off). When a line's two ends differ in
    anything but the objective, the rest of the line is solved at once.
    Lines along a non-numeric dimension are solved point by point. The
    order of the work, and how idle workers are kept busy:
    :func:`_search_lines`. ``lend``: as for :func:`run_tasks`.
    """
    progress = progress or Progress(len(tasks), enabled=False)
    last = dims[-1]
    size = len(last.values)
    if size < 3 or not all(_numeric(v) for v in last.values):
        return run_tasks(tasks, workers=workers, executor=executor, scheduler=scheduler, progress=progress,
                         lend=lend)
    lines = [list(range(start, start + size)) for start in range(0, len(tasks), size)]
    tvalue = {t["index"]: float(last.values[t["index"] % size]) for t in tasks}
    pool = make_executor(executor, workers, scheduler, lend)  # one pool for the whole search
    try:
        results = _search_lines(lines, {t["index"]: t for t in tasks}, tvalue, gap, pool, pool.workers, progress)
    finally:
        pool.close()
        progress.close()
    return [results[t["index"]] for t in tasks]


#: how often :func:`_search_lines` looks for finished solves, in seconds
POLL_SECONDS = 0.05


def _search_lines(lines, by_index, tvalue, gap, pool, workers: int, progress: Progress,
                  sleep=time.sleep) -> dict[int, dict]:
    """Solve and settle the points of ``lines`` on ``pool``; every point's result by index.

    Asynchronous: whenever a solve finishes, the stretches are looked at
    again (:func:`_next_tasks`) and new work is submitted, so no worker
    waits for another's solve to end. Settling and whole-line work is
    submitted as soon as it is known; solves inside stretches only while
    fewer than ``workers`` tasks run: longest stretch first, each at the
    point its two ends leave least proven (:func:`_probe_points`). A line's
    far end waits for its first end's plan, however many workers there
    are; with more than one, the two points either side of a crossing are
    solved side by side. A stretch with an end still being solved gets no
    solve (a guess at its middle was nearly always a solve its ends would
    have settled: q3's 100-point sweep made 14 solves with two workers
    where one worker made 4). Every solve is handed every plan solved on
    its line so far.
    """
    from .parametric import Anchor

    results: dict[int, dict] = {}
    anchors: dict[int, Anchor | None] = {}
    flying: dict[int, object] = {}

    line_of = {k: line for line in lines for k in line}

    def submit(k: int, left=None, right=None, settle: bool = False) -> None:
        task = {**by_index[k], "t": tvalue[k]}
        if left is not None or right is not None:
            task.update(left=None if left is None else left.as_dict(),
                        right=None if right is None else right.as_dict(), settle=settle)
        if not settle:  # every plan solved on the line is a plan here too (the model is the same along it)
            task["known"] = [a.x for m in line_of[k] if (a := anchors.get(m)) is not None
                             and a is not left and a is not right]
        if k == line_of[k][-1] and left is None and right is None:
            # the far end splits on the class its first end's proof split on, without the model without limits
            # (q3's far end: 106.8 s -> 47.8 s on one thread; docs/performance.md, "The far end of a sweep split
            # as its first end")
            first = anchors.get(line_of[k][0])
            if first is not None and first.leaf_bounds:
                task["split_like"] = list(first.leaf_bounds)
        flying[k] = pool.submit(solve_task, task)

    def schedule() -> None:
        while new := _next_tasks(lines, tvalue, results, anchors, flying, gap, workers - len(flying)):
            for spec in new:
                submit(*spec)

    for line in lines:  # each line's first end; its far end once that is solved
        submit(line[0])
    schedule()
    while flying:
        finished = [k for k, f in flying.items() if f.done()]
        if not finished:
            sleep(POLL_SECONDS)
            continue
        for k in finished:
            res = _checked(flying.pop(k).result(), progress)
            a = res.pop("anchor", None)
            results[k] = res
            if not res.get("settled"):
                anchors[k] = None if a is None else Anchor(**a)
        schedule()
    return results


def _next_tasks(lines, tvalue, results, anchors, flying, gap, free: int) -> list[tuple]:
    """What to submit now: (index, left anchor, right anchor, settle) per task.

    A line's far end comes first, on a free worker, once its first end is
    solved, handed its plan (the line's other plans are handed to every
    solve: the model is the same along it). Per line, the
    points solved or being solved cut it into stretches. A stretch between
    two solved points whose every point inside is predicted settled gives a
    settle task per point (always). Any other stretch between two solved
    points with points left inside gets solves (:func:`_probe_points`),
    longer stretches first, at most ``free`` in all.
    """
    from .parametric import predict

    required, probes = [], []
    # a line's far end once its first end is solved, handed its plan, however many workers are free: q3's far end
    # (3x the L4 spot price) took 105 s handed the first end's plan and 202 s from nothing beside it, and from
    # nothing its split chose another class than the first end's, so the two points at the crossing found no
    # bounds to carry and took 250 and 171 s against 37 and 49 s (docs/performance.md, "The far end of a sweep
    # waits for its first end"). Without --threads, a local worker left idle lends its CPU to that solve meanwhile
    far = [(line[-1],) for line in lines if line[0] in anchors and line[-1] not in anchors
           and line[-1] not in flying and line[-1] not in results]
    if far and free > 0:
        return far[:free]
    for line in lines:
        ends = (line[0], line[-1])
        if all(e in anchors for e in ends) and (anchors[ends[0]] is None or anchors[ends[1]] is None
                                                or anchors[ends[0]].shape != anchors[ends[1]].shape):
            required += [(k,) for k in line if k not in results and k not in flying]
            continue
        marks = [k for k in line if k in anchors or k in flying]
        for i, j in zip(marks, marks[1:]):
            if all(k in results or k in flying for k in range(i + 1, j)):
                continue
            left = next((anchors[k] for k in reversed(marks) if k <= i and anchors.get(k) is not None), None)
            right = next((anchors[k] for k in marks if k >= j and anchors.get(k) is not None), None)
            certain = i in anchors and j in anchors
            if certain and anchors[i] is not None and anchors[j] is not None:
                inside = [k for k in range(i + 1, j) if k not in results]
                guess = [predict(tvalue[k], left, right) for k in inside]
                if all(g is not None and (g[0] - g[1]) <= gap * max(abs(g[0]), 1e-9) + 1e-9 for g in guess):
                    required += [(k, left, right, True) for k in inside]
                    continue
            if certain:  # a stretch with an end still being solved waits for it (a guess there was wasted)
                probes.append((-(j - i), i, j, left, right))
    probes.sort(key=lambda p: p[:2])
    out = []
    for _, i, j, left, right in probes:
        if len(out) >= free:
            break
        open_points = [k for k in range(i + 1, j) if k not in results and k not in flying]
        out += [(k, left, right) for k in _probe_points(open_points, i, j, tvalue, left, right)[:free - len(out)]]
    return required + out


def _probe_points(open_points: list[int], i: int, j: int, tvalue: dict, left, right) -> list[int]:
    """Where to solve inside the stretch (i, j): the open point the two anchors leave least proven, and
    the point on the other side of the crossing next to it.

    Between two solved points the optimum is concave and at most the cheaper
    of their plans, U(t), and at least the interpolation of their bounds,
    L(t) (:func:`~optimizer.studies.parametric.predict`). Where two plans'
    cost lines cross, U − L is largest at the crossing: the plan changes
    there, so that is where a solve settles the most. A solve on each side
    of a crossing settles the stretch when no third plan is cheaper (the
    breakpoint search of Eisner and Severance, on the grid), where halving
    the stretch takes about log2 of its points. The second point, for a
    second worker, is the neighbour on the other side of the crossing
    (where the other plan is the cheaper of the two), when it is open.
    Without two anchors, or where U − L ties, the midpoint (nearest first)
    alone.
    """
    def mid(k: int) -> int:
        return abs(2 * k - i - j)

    if left is None or right is None:
        return [min(open_points, key=mid)]
    from .parametric import plan_costs, predict

    guess = {k: predict(tvalue[k], left, right) for k in open_points}
    if not all(g is not None for g in guess.values()):
        return [min(open_points, key=mid)]
    scale = max(1.0, max(abs(g[0]) for g in guess.values()))
    # rounded so that equal gaps up to the last bits tie, and the midpoint decides
    unproven = {k: round((g[0] - g[1]) / scale, 9) for k, g in guess.items()}
    first = min(open_points, key=lambda k: (-unproven[k], mid(k)))

    def left_plan_cheaper(k: int) -> bool:
        u_left, u_right = plan_costs(tvalue[k], left, right)
        return u_left <= u_right

    # the neighbour across the crossing of the two plans' cost lines, if it is open
    across = [k for k in (first + 1, first - 1) if k in unproven and left_plan_cheaper(k) != left_plan_cheaper(first)]
    return [first] + across[:1]


# ---------------------------------------------------------------------------
# results


def points(dims: list[Dimension], combos: list[tuple], results: list[dict]) -> list[dict]:
    """JSON points: index, values (by dimension label), status, objective, total cost, costs, mix."""
    out = []
    for i, (vals, res) in enumerate(zip(combos, results)):
        r = {k: v for k, v in res.items() if k != "index"}
        out.append({"index": i, "values": {d.label: v for d, v in zip(dims, vals)}, **r})
    return out


def _coords(dims: list[Dimension], i: int) -> tuple:
    sizes = [len(d.values) for d in dims]
    out = []
    for s in reversed(sizes):
        out.append(i % s)
        i //= s
    return tuple(reversed(out))


def break_points(dims: list[Dimension], pts: list[dict]) -> list[dict]:
    """Adjacent points (along each dimension) whose status or mix differ, and what changed."""
    sizes = [len(d.values) for d in dims]
    index = {_coords(dims, p["index"]): p for p in pts}
    out = []
    for k, d in enumerate(dims):
        for c, a in index.items():
            if c[k] + 1 >= sizes[k]:
                continue
            nc = c[:k] + (c[k] + 1,) + c[k + 1:]
            b = index[nc]
            if a["status"] == b["status"] and a["mix"] == b["mix"]:
                continue
            changes = {o: [a["mix"].get(o, 0), b["mix"].get(o, 0)]
                       for o in sorted(set(a["mix"]) | set(b["mix"])) if a["mix"].get(o, 0) != b["mix"].get(o, 0)}
            out.append({"dimension": d.label, "from_index": a["index"], "to_index": b["index"],
                        "from": a["values"], "to": b["values"],
                        "status": [a["status"], b["status"]], "changes": changes})
    return sorted(out, key=lambda r: (r["from_index"], r["dimension"]))


def break_text(bp: dict) -> str:
    dim = bp["dimension"]
    fixed = ", ".join(f"{k}={v}" for k, v in bp["from"].items() if k != dim)
    head = f"{dim}: {bp['from'][dim]} -> {bp['to'][dim]}" + (f" (at {fixed})" if fixed else "")
    parts = [f"{o} {a}->{b}" for o, (a, b) in bp["changes"].items()]
    if bp["status"][0] != bp["status"][1]:
        parts.insert(0, f"status {bp['status'][0]}->{bp['status'][1]}")
    return f"{head}: " + ", ".join(parts)


def points_frame(dims: list[Dimension], pts: list[dict], units: bool = True) -> pd.DataFrame:
    """One row per point: the values, status, objective (with its proven gap where some point stopped on a time
    limit), total cost, cost per pricing kind, mix."""
    from .whatif import gap_text, mix_text, pricing_kinds_in

    kinds = pricing_kinds_in(pts)
    offerings = sorted({o for p in pts for o in p["mix"]})
    stopped = any(p["status"] == "feasible" for p in pts)
    rows = []
    for p in pts:
        row = {"index": p["index"], **p["values"], "status": p["status"], "objective": p["objective"]}
        if stopped:
            row["gap"] = gap_text(p.get("gap"))
        row["total_cost"] = p["total_cost"]
        for k in kinds:
            row[f"cost_{k}"] = p["by_pricing"].get(k, 0.0) if p["objective"] is not None else None
        row["mix"] = mix_text(p["mix"])
        if units:
            for o in offerings:
                row[f"units:{o}"] = p["mix"].get(o, 0)
        rows.append(row)
    return pd.DataFrame(rows)


def render_table(dims: list[Dimension], pts: list[dict], bps: list[dict], currency: str, header: str) -> str:
    df = points_frame(dims, pts, units=False).drop(columns=["index"])
    from ..render.report import fit_table, wrap_long
    from .whatif import GAP_NOTE, audit_section

    lines = [header, fit_table(df, keys=len(dims)), ""]
    if "gap" in df.columns:
        lines += [GAP_NOTE, ""]
    if bps:
        lines.append(f"Break points (where the mix changes): {len(bps)}")
        lines += ["  " + break_text(b) for b in bps]
    else:
        lines.append("Break points: none (the same mix at every point)")
    bad = [p for p in pts if p["objective"] is None]
    if bad:
        lines += ["", f"{len(bad)} point(s) without a plan, e.g. point {bad[0]['index']}: "
                      f"{bad[0]['status']}: {bad[0]['message']}"]
    lines += audit_section((f"point {p['index']}", p["audit"]) for p in pts)
    return wrap_long("\n".join(lines) + "\n")


def output_paths(out_dir: str | None, plot: str | None) -> list[Path]:
    paths = []
    if out_dir:
        paths += [Path(out_dir) / "points.csv", Path(out_dir) / "break_points.csv"]
    if plot:
        paths.append(Path(plot))
    return paths


def check_outputs(out_dir: str | None, plot: str | None, force: bool) -> None:
    """Refuse (before any solving) to overwrite an existing output file without ``force``."""
    if out_dir and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise InputError("output path exists and is not a directory", field="-o", value=out_dir)
    if plot:
        if not plot.lower().endswith(".png"):
            raise InputError("the plot is written as PNG", field="--plot", value=plot, allowed="FILE.png")
        if not Path(plot).parent.exists():
            raise InputError("the plot's directory does not exist", field="--plot", value=plot)
    existing = [str(p) for p in output_paths(out_dir, plot) if p.exists()]
    if existing and not force:
        raise InputError(f"would overwrite {len(existing)} existing file(s), e.g. {existing[0]}",
                         field="--plot" if plot and Path(existing[0]) == Path(plot) else "-o", value=existing[0],
                         allowed="a new path, or --force to overwrite")


def write_csv(dims: list[Dimension], pts: list[dict], bps: list[dict], out_dir: str) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p1, p2 = out / "points.csv", out / "break_points.csv"
    points_frame(dims, pts).to_csv(p1, index=False)
    rows = [{"dimension": b["dimension"], "from_index": b["from_index"], "to_index": b["to_index"],
             **{f"from:{k}": v for k, v in b["from"].items()}, **{f"to:{k}": v for k, v in b["to"].items()},
             "status_from": b["status"][0], "status_to": b["status"][1],
             "changes": "; ".join(f"{o} {a}->{c}" for o, (a, c) in b["changes"].items())} for b in bps]
    pd.DataFrame(rows, columns=None if rows else ["dimension", "from_index", "to_index", "changes"]).to_csv(
        p2, index=False)
    return [p1, p2]


def plot(dims: list[Dimension], pts: list[dict], bps: list[dict], path: str, currency: str, title: str) -> None:
    """One dimension: objective and units per offering against the value, break points dashed.
    Two dimensions: a heat map of the objective, mix changes marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if len(dims) == 1:
        d = dims[0]
        numeric = all(_numeric(v) for v in d.values)
        xs = list(d.values) if numeric else list(range(len(d.values)))
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        ys = [p["objective"] if p["objective"] is not None else np.nan for p in pts]
        ax1.plot(xs, ys, "o-", color="tab:blue")
        ax1.set_ylabel(f"objective ({currency})")
        ax1.set_title(title, fontsize=10)
        ax1.grid(alpha=0.3)
        offerings = sorted({o for p in pts for o in p["mix"]})
        # equal lines must not hide each other: each offering its own dash and marker, nudged by a hair
        styles, marks = ["-", "--", "-.", ":"], ["o", "s", "^", "v", "D", "x", "+"]
        for k, o in enumerate(offerings):
            nudge = 0.04 * (k - (len(offerings) - 1) / 2)
            ax2.step(xs, [p["mix"].get(o, 0) + nudge for p in pts], where="mid", label=o,
                     linestyle=styles[k % len(styles)], marker=marks[k % len(marks)], markersize=3)
        ax2.set_ylabel("machines in use\n(held or rented, most in any period)")
        ax2.set_xlabel(d.label)
        ax2.grid(alpha=0.3)
        if offerings:  # beside the plot, never over the lines
            ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        for b in bps:
            xa, xb = xs[_coords(dims, b["from_index"])[0]], xs[_coords(dims, b["to_index"])[0]]
            for ax in (ax1, ax2):
                ax.axvline((xa + xb) / 2, ls="--", color="grey", lw=0.8)
        if not numeric:
            ax2.set_xticks(xs, [str(v) for v in d.values])
    else:
        d1, d2 = dims
        z = np.full((len(d1.values), len(d2.values)), np.nan)
        for p in pts:
            i, j = _coords(dims, p["index"])
            if p["objective"] is not None:
                z[i, j] = p["objective"]
        fig, ax = plt.subplots(figsize=(8, 6))
        im = ax.imshow(z, origin="lower", aspect="auto", cmap="viridis")
        fig.colorbar(im, ax=ax, label=f"objective ({currency})")
        ax.set_yticks(range(len(d1.values)), [f"{v:g}" if isinstance(v, float) else str(v) for v in d1.values])
        ax.set_xticks(range(len(d2.values)), [f"{v:g}" if isinstance(v, float) else str(v) for v in d2.values],
                      rotation=45)
        ax.set_ylabel(d1.label)
        ax.set_xlabel(d2.label)
        ax.set_title(title + "\n(white lines: the mix changes)", fontsize=10)
        for b in bps:
            (i1, j1), (i2, j2) = _coords(dims, b["from_index"]), _coords(dims, b["to_index"])
            if i1 == i2:  # along d2: vertical segment between columns
                ax.plot([(j1 + j2) / 2] * 2, [i1 - 0.5, i1 + 0.5], color="white", lw=1.5)
            else:
                ax.plot([j1 - 0.5, j1 + 0.5], [(i1 + i2) / 2] * 2, color="white", lw=1.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)



@dataclass
class Sweep:
    """A solved sweep: every point's summary and the break points between them.

    ``points`` holds one dict per grid point (:func:`points`); :meth:`frame`
    gives them as a DataFrame, one row per point.
    """

    problem: str
    currency: str
    objective_kind: str
    dimensions: list
    sets: list
    scales: list
    solver: str
    executor: str
    workers: int
    seconds: float
    points: list
    break_points: list

    def frame(self) -> pd.DataFrame:
        """One row per point: the varied values, status, objective, bound and gap (the mix as text)."""
        return pd.DataFrame([{k: (v if not isinstance(v, (dict, list)) else json.dumps(v)) for k, v in p.items()}
                             for p in self.points])

    def to_dict(self) -> dict:
        """The JSON of ``gpuopt sweep --format json``."""
        return {"problem": self.problem, "currency": self.currency, "objective_kind": self.objective_kind,
                "dimensions": [d.as_dict() for d in self.dimensions], "set": list(self.sets),
                "scale": list(self.scales), "solver": self.solver, "solver_version": solver_version(self.solver),
                "executor": self.executor,
                "workers": self.workers, "seconds": round(self.seconds, 3), "points": self.points,
                "break_points": self.break_points}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def run_sweep(problem: str | Path, dims: list, *, sets=(), scales=(), solver: str = DEFAULT_SOLVER,
              time_limit: float | None = None, gap: float = 1e-6, threads: int | None = None, workers: int = 1,
              executor: str = "local", scheduler: str | None = None, progress: bool = False,
              every_point: bool = False) -> Sweep:
    """Solve the problem file at every point of the grid of ``dims`` (:func:`parse_vary`, :func:`parse_vary_scale`).

    Along each line of the grid (the last dimension), the points between
    two solved ones are settled without a solve where the swept value moves
    only the objective (:func:`run_lines`, :mod:`optimizer.studies.parametric`);
    ``every_point`` solves each point instead.

    With ``workers`` > 1 on this machine (processes, or a local Dask
    cluster) and no ``threads``, each solve gets the machine's CPUs divided
    by the workers, and a worker waiting for work lends its CPU to the
    solves still running (:func:`optimizer.executors.share_cpus`).

    Every point's overlays are applied before any solve, so a bad path or
    selector is an :class:`~optimizer.errors.InputError` at once, naming
    the point.
    """
    from ..load import parse_problem_file
    from .whatif import build, overlay, read_raw

    file = str(problem)
    raw = read_raw(problem)
    base_raw = overlay(raw, file, sets, scales)
    combos = grid(dims)
    threads, lend = share_cpus(threads, workers, executor, scheduler)
    tasks = []
    currency, name, objective_kind = None, None, None
    for i, vals in enumerate(combos):
        try:
            r = point_raw(base_raw, file, dims, vals)
            if i == 0:
                pr = build(r, file)
                currency, name, objective_kind = pr.currency, pr.name, pr.objective
            else:
                parse_problem_file(r, file)
        except InputError as e:
            raise InputError(f"sweep point {i} ({point_label(dims, vals)}): {e.render()}") from None
        tasks.append(make_task(i, r, file, solver, time_limit, gap, threads))
    t0 = time.perf_counter()
    bar = Progress(len(tasks), label="sweep", enabled=None if progress else False)
    if every_point:
        results = run_tasks(tasks, workers=workers, executor=executor, scheduler=scheduler, progress=bar,
                            lend=lend)
    else:
        results = run_lines(dims, tasks, gap, workers=workers, executor=executor, scheduler=scheduler,
                            progress=bar, lend=lend)
    seconds = time.perf_counter() - t0
    pts = points(dims, combos, results)
    return Sweep(name, currency, objective_kind, list(dims), list(sets), list(scales), solver, executor, workers,
                 seconds, pts, break_points(dims, pts))
