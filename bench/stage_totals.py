"""Benchmark: the wall time each pipeline stage takes over a whole pytest run (not a timed test).

The test suite solves hundreds of small problems, where the solver takes
milliseconds and the stages around it (load, candidates, pre-check, model
build, re-price, plan, audit) take most of the time. This file is a pytest
plugin that times each stage's outermost calls in every test process, and,
run as a script, adds up what the processes wrote::

    PYTHONPATH=bench python -m pytest -q -n 2 -p stage_totals     # writes one JSON per test process
    python bench/stage_totals.py                                   # the totals, largest first

The files go to ``$GPUOPT_STAGE_TOTALS`` (default: ``gpuopt-stage-totals``
in the system's temporary directory); the script reads the same place or
the directory given. A stage called from inside another (a model built
inside a pipeline run) counts in both; a stage called from inside itself
counts once. docs/performance.md reports the numbers.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import sys
import tempfile
import threading
import time

#: (module, function, label) of every stage timed
STAGES = [("optimizer.load", "load_problem", "load"),
          ("optimizer.candidates", "build_candidates", "candidates"),
          ("optimizer.studies.precheck", "precheck", "precheck"),
          ("optimizer.model.presolve", "build", "build"),
          ("optimizer.model.reprice", "reprice", "re-price"),
          ("optimizer.solve.driver", "solve", "solve (driver)"),
          ("optimizer.plan", "extract", "plan"),
          ("optimizer.audit", "audit", "audit"),
          ("optimizer.pipeline", "run", "pipeline run")]

_totals: dict[str, list] = {}
_lock = threading.Lock()
_depth = threading.local()


def _folder() -> str:
    return os.environ.get("GPUOPT_STAGE_TOTALS", os.path.join(tempfile.gettempdir(), "gpuopt-stage-totals"))


def _timed(f, label: str):
    def timed(*args, **kwargs):
        depth = getattr(_depth, label, 0)
        setattr(_depth, label, depth + 1)
        start = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            setattr(_depth, label, depth)
            if depth == 0:  # only the outermost call of a stage counts
                with _lock:
                    total = _totals.setdefault(label, [0.0, 0])
                    total[0] += time.perf_counter() - start
                    total[1] += 1
    return timed


def pytest_configure(config) -> None:
    """Wrap every stage, wherever a module holds it by name (``from .plan import extract`` too).

    The run's first process (xdist's controller, or the only one) removes the files an earlier run left,
    which the totals would otherwise add in (a run with more workers leaves files this one never rewrites).
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        for stale in glob.glob(os.path.join(_folder(), "stages-*.json")):
            os.remove(stale)
    for module in ("optimizer.api", "optimizer.cli"):  # every module that may hold a stage by name
        importlib.import_module(module)
    wrapped = {}
    for module, name, label in STAGES:
        f = getattr(importlib.import_module(module), name)
        wrapped[id(f)] = _timed(f, label)
    for modname, mod in list(sys.modules.items()):
        if modname.startswith("optimizer") and mod is not None:
            for attr, value in list(vars(mod).items()):
                if callable(value) and id(value) in wrapped:
                    setattr(mod, attr, wrapped[id(value)])


def pytest_sessionfinish(session) -> None:
    if not _totals:  # xdist's controller runs no test: no file, so the count of test processes is right
        return
    os.makedirs(_folder(), exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(_folder(), f"stages-{worker}.json"), "w") as fh:
        json.dump(_totals, fh)


def main(folder: str) -> None:
    files = glob.glob(os.path.join(folder, "stages-*.json"))
    if not files:
        sys.exit(f"no stage totals in {folder}: run pytest with -p stage_totals first")
    totals: dict[str, list] = {}
    for path in files:
        with open(path) as fh:
            for label, (seconds, calls) in json.load(fh).items():
                t = totals.setdefault(label, [0.0, 0])
                t[0] += seconds
                t[1] += calls
    print(f"{'stage':16s} {'seconds':>8s} {'calls':>6s} {'ms a call':>10s}   ({len(files)} test processes)")
    for label, (seconds, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"{label:16s} {seconds:8.1f} {calls:6d} {1000 * seconds / max(calls, 1):10.1f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else _folder())
