"""Shared helpers: write a problem, solve it, audit the plan (every test plan is audited)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from optimizer.load import load_problem
from optimizer.pipeline import run


def pytest_configure(config):
    # one build per distinct model input in each test process (tests/build_memo.py says why and how)
    import build_memo

    build_memo.install()


def write_problem(tmp_path: Path, data: dict | str, name: str = "problem.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def gpuopt_here(*args, cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    """``gpuopt ARGS`` run in this process by click's test runner: its exit code, stdout and stderr.

    The same command code as the installed entry point, without the second
    or so a new interpreter spends importing; the entry point itself (the
    console script, ``python -m optimizer``) is exercised by the tests that
    start a real process. An exception the command let escape is raised
    here, never turned into an exit code.
    """
    from click.testing import CliRunner

    from optimizer.cli import main

    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(["gpuopt", *map(str, args)], r.exit_code, r.stdout, r.stderr)


def solve_data(tmp_path: Path, data: dict | str, solver: str = "cbc", sets=(), **kw):
    """Solve a problem given as data; assert the audit finds nothing wrong."""
    path = write_problem(tmp_path, data)
    problem = load_problem(path, sets=sets)
    plan = run(problem, solver=solver, **kw)
    assert_audited(plan)
    return plan


def assert_audited(plan) -> None:
    """The pipeline audited the plan (``run`` audits every plan it returns) and found nothing wrong."""
    if plan.status.has_plan:
        assert plan.audit == [], plan.audit
        assert_bounds_in_order(plan.result, plan.objective)
    else:
        assert plan.audit is None


def assert_bounds_in_order(result, objective: float) -> None:
    """Where the proof comes from, in order: the LP relaxation's and the root's bounds are at most the final
    bound, and the final bound at most the plan's cost (each to a relative 1e-6: solver tolerances)."""
    def at_most(lo, hi, what):
        if lo is not None and hi is not None:
            assert lo <= hi + 1e-6 * max(1.0, abs(hi)), f"{what}: {lo} > {hi}"

    at_most(result.bound, objective, "bound above the plan's cost")
    at_most(result.relaxation_bound, result.bound, "relaxation bound above the final bound")
    at_most(result.root_bound, result.bound, "root bound above the final bound")


@pytest.fixture
def solve(tmp_path):
    def _solve(data, **kw):
        return solve_data(tmp_path, data, **kw)

    return _solve


@pytest.fixture(scope="session")
def optimum(tmp_path_factory, worker_id):
    """The proven optimum of a built model (HiGHS to a relative gap of 1e-9), computed once per test run.

    Several tests check a bound against the optimum of the same generated
    model (4-10 s of HiGHS each for seeds 0, 2 and 4; seed 1, 16-20 s, is
    left out of the suite for that reason). It is kept in a
    file named by a digest of the model's arrays, in a folder the run's
    workers share (pytest-xdist) and no other run sees: a model that
    changes in any coefficient or bound is solved anew.
    """
    from optimizer.solve.backends import Status, solve as backend_solve

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent  # the run's own folder, above each worker's
    folder = shared / "optima"
    folder.mkdir(exist_ok=True)

    def _optimum(model) -> float:
        a = model.mip.arrays()
        digest = hashlib.sha256()
        for part in (a.c, a.rows, a.cols, a.vals, a.col_lo, a.col_hi, a.row_lo, a.row_hi, a.integer):
            digest.update(part.tobytes())
        digest.update(repr(a.c0).encode())
        path = folder / f"{digest.hexdigest()}.json"
        if path.exists():
            return json.loads(path.read_text())
        whole = backend_solve(model.mip, "highs", gap=1e-9)
        assert whole.status == Status.OPTIMAL
        part = path.with_suffix(f".{os.getpid()}")  # written whole, then renamed: a reader never sees half
        part.write_text(json.dumps(whole.objective))
        os.replace(part, path)
        return whole.objective

    return _optimum


def patch_driver(monkeypatch, name: str, value) -> None:
    """Set ``name`` to ``value`` in every module of the solve driver that looks it up.

    The driver and the parts it calls (the relaxations, the fixed-configuration path, the searches beside, the
    proofs) each read the names they use (``backend_solve``, ``cpus``, ``time``, ...) from their own globals, so a
    spy must sit in all of them to see every call the driver makes. A name none of them has is an error, as with
    ``monkeypatch.setattr``.
    """
    from optimizer.solve import beside, driver, fixed, proofs, relaxations

    holders = [m for m in (driver, relaxations, fixed, beside, proofs) if hasattr(m, name)]
    if not holders:
        raise AttributeError(f"no module of the solve driver has {name!r}")
    for module in holders:
        monkeypatch.setattr(module, name, value)
