"""The benchmark runner's row for one run, on a tiny generated problem (``--weeks`` reaches the generator)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import run as bench_run  # noqa: E402


def test_one_run_row_has_the_weeks_asked_for_and_an_audited_plan():
    row = bench_run.one(0.05, "highs", 20.0, 0, 0.01, None, True, weeks=3)
    assert row["weeks"] == 3 and row["periods"] == 3
    assert row["status"] in ("optimal", "feasible")
    assert row["audit_violations"] == 0
    # the gap the row reports is the one its objective and bound give
    assert row["objective"] >= row["bound"] - 1e-6
    assert abs(row["gap"] - (row["objective"] - row["bound"]) / abs(row["objective"])) < 1e-9
    # the LP relaxation is a weaker bound than the solver's final one
    assert row["relaxation_bound"] <= row["bound"] + 1e-6 * abs(row["bound"])


def test_main_passes_weeks_to_the_child(monkeypatch, capsys):
    seen = []

    class Done:
        stdout, stderr, returncode = "", "stop", 1

    monkeypatch.setattr(bench_run.subprocess, "run", lambda cmd, **kw: seen.append(cmd) or Done())
    bench_run.main(["--scales", "0.05", "--solvers", "highs", "--weeks", "4"])
    assert seen and seen[0][seen[0].index("--weeks") + 1] == "4"
