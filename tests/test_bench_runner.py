"""The benchmark runner's row for one run, on a tiny generated problem (``--weeks`` reaches the generator)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import run as bench_run  # noqa: E402


def test_one_run_row_has_the_weeks_asked_for_and_an_audited_plan():
    # the smallest generated scale: what is checked is the row, not the solve
    row = bench_run.one(0.02, "highs", 20.0, 0, 0.01, None, True, weeks=3)
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
    child = [cmd for cmd in seen if "--one" in cmd]  # not the report header's git calls
    assert child and child[0][child[0].index("--weeks") + 1] == "4"


def test_the_report_opens_with_the_load_commit_and_the_solvers_versions(monkeypatch, capsys):
    # Every benchmark report says what its timings ran on. The versions it prints are those the solvers
    # themselves report once imported (HiGHS through highspy, PuLP's own), not only the metadata it reads.
    import highspy
    import pulp

    class Done:
        stdout, stderr, returncode = "", "stop", 1

    monkeypatch.setattr(bench_run.subprocess, "run", lambda cmd, **kw: Done())
    bench_run.main(["--scales", "0.05", "--solvers", "highs"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("# ") and "CPUs, load average at start" in lines[1]
    said = lines[2]
    assert f"highspy {highspy.Highs().version()}" in said and f"PuLP {pulp.__version__}" in said
    assert said.startswith("# commit ") and "python 3." in said


def test_outside_a_checkout_the_commit_is_unknown(monkeypatch):
    from bench import machine

    def no_git(*args, **kw):
        raise FileNotFoundError("git")

    monkeypatch.setattr(machine.subprocess, "run", no_git)
    assert machine.commit() == "unknown"


def test_the_catalog_wide_family_refuses_the_shape_flags_it_would_ignore(tmp_path, capsys):
    # catalog-wide is problems/q3.yaml against the default catalog: its own periods, regions and objective. A
    # --weeks (or --seed, --regions, --objective) given with it was silently ignored; now it is an error that
    # names the flag (argparse's exit 2), and nothing is written
    from bench import generate

    out = tmp_path / "p.yaml"
    with pytest.raises(SystemExit) as e:
        generate.main(["--family", "catalog-wide", "--weeks", "3", "-o", str(out)])
    said = capsys.readouterr().err
    assert e.value.code == 2 and "--weeks cannot be given with --family catalog-wide" in said and not out.exists()
    with pytest.raises(SystemExit) as e:
        generate.main(["--family", "catalog-wide", "--seed", "1", "--regions", "1", "-o", str(out)])
    assert e.value.code == 2 and "--seed, --regions cannot be given" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        bench_run.main(["--family", "catalog-wide", "--weeks", "3", "--scales", "0.05"])
    assert e.value.code == 2 and "--weeks cannot be given with --family catalog-wide" in capsys.readouterr().err
    # without them it writes q3's periods, and the standard family still takes --weeks
    assert generate.main(["--family", "catalog-wide", "--scale", "0.5", "-o", str(out)]) == 0
    assert "26 periods" in capsys.readouterr().out
    assert generate.main(["--weeks", "3", "--scale", "0.05", "-o", str(out)]) == 0
    assert "3 periods" in capsys.readouterr().out
