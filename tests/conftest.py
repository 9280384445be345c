"""Shared helpers: write a problem, solve it, audit the plan (every test plan is audited)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from optimizer.load import load_problem
from optimizer.pipeline import run


def write_problem(tmp_path: Path, data: dict | str, name: str = "problem.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


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
    else:
        assert plan.audit is None


@pytest.fixture
def solve(tmp_path):
    def _solve(data, **kw):
        return solve_data(tmp_path, data, **kw)

    return _solve
