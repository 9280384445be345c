"""A plan that fails its audit is a bug in gpuopt: every command that solves says so and exits 4.

``gpuopt solve`` has said so since the audit existed (tests/test_cli_solve.py).
These tests hold the same for the commands that solve many plans: what-if
(one change, and scenarios side by side), sweep and rent versus buy. The
audit is replaced by one that fails exactly the plans of a problem whose
on-demand offering ``od`` costs more than a set price (100 an hour), so
each test knows by construction which rows must be named and which must not.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optimizer import audit as audit_module
from optimizer import pipeline
from optimizer.cli import main
from conftest import write_problem
from test_rentbuy import TINY
from test_whatif_toy import toy, write

VIOLATION = "capacity od/p1: 99 inference GPUs > 1 units × 8"


def _dear_od(O) -> bool:
    return "od" in O.index and float(O.at["od", "price_per_hour"]) > 100


def _failing(real, fails: dict):
    """The real audit, plus one violation for a plan of a problem whose offerings meet ``fails["when"]``."""
    def audit(plan) -> list[str]:
        bad = plan.status.has_plan and fails["when"](plan.problem.offerings)
        return real(plan) + ([VIOLATION] if bad else [])
    return audit


@pytest.fixture
def failing_audit(monkeypatch):
    """Which problems' plans fail their audit: ``when(offerings)`` (default: ``od`` above 100 an hour; a test may
    change it)."""
    fails = {"when": _dear_od}
    fake = _failing(audit_module.audit, fails)
    monkeypatch.setattr(pipeline, "audit", fake)
    monkeypatch.setattr(audit_module, "audit", fake)  # the sweep's settled points import it where they use it
    return fails


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_one_change_names_the_side_that_failed(tmp_path, failing_audit):
    p = write(tmp_path, toy())
    r = cli("whatif", p, "--set", "offerings[od].price_per_hour=200")
    assert r.exit_code == 4, r.output
    audit_row = next(line for line in r.stdout.splitlines() if line.startswith("audit"))
    assert audit_row.split() == ["audit", "passed", "FAILED", "(1)"]
    # the failures under the heading every table of several plans ends with
    failed = r.stdout.split("Audit FAILED (a bug in gpuopt")[1].splitlines()[1:]
    assert failed[0] == f"  scenario: 1 violation(s); first: {VIOLATION}"
    assert not any(line.strip().startswith("base:") for line in failed)
    assert "internal error, please report: a plan failed its audit: scenario: 1 violation(s)" in r.stderr
    assert "base:" not in r.stderr
    # the JSON carries each side's audit as solve's does
    js = cli("whatif", p, "--set", "offerings[od].price_per_hour=200", "--format", "json")
    assert js.exit_code == 4
    d = json.loads(js.stdout)
    assert d["base"]["audit"] == [] and d["scenario"]["audit"] == [VIOLATION]


def test_a_price_the_audit_passes_exits_0(tmp_path, failing_audit):
    r = cli("whatif", write(tmp_path, toy()), "--set", "offerings[od].price_per_hour=90")
    assert r.exit_code == 0, r.output
    assert next(line for line in r.stdout.splitlines() if line.startswith("audit")).split() == \
        ["audit", "passed", "passed"]


def test_scenarios_side_by_side_name_the_failed_row(tmp_path, failing_audit):
    data = toy(scenarios=[{"name": "dear-od", "set": ["offerings[od].price_per_hour=200"]},
                          {"name": "cheap-od", "set": ["offerings[od].price_per_hour=70"]}])
    p = write(tmp_path, data)
    table = cli("whatif", p)
    assert table.exit_code == 4, table.output
    failed = table.stdout.split("Audit FAILED")[1].strip().splitlines()[1:]
    assert failed == [f"  dear-od: 1 violation(s); first: {VIOLATION}"]
    assert "dear-od: 1 violation(s)" in table.stderr and "cheap-od" not in table.stderr
    js = cli("whatif", p, "--format", "json")
    assert js.exit_code == 4
    rows = {r["name"]: r["audit"] for r in json.loads(js.stdout)["scenarios"]}
    assert rows == {"base": [], "dear-od": [VIOLATION], "cheap-od": []}


def test_scenarios_side_by_side_all_passing_exit_0(tmp_path, failing_audit):
    data = toy(scenarios=[{"name": "cheap-od", "set": ["offerings[od].price_per_hour=70"]}])
    r = cli("whatif", write(tmp_path, data))
    assert r.exit_code == 0, r.output
    assert "Audit FAILED" not in r.stdout


def test_sweep_names_the_points_that_failed(tmp_path, failing_audit):
    # points 0 and 1 (od at 80 and 90) pass; point 2 (od at 150) fails
    r = cli("sweep", write(tmp_path, toy()), "--vary", "offerings[od].price_per_hour=80,90,150", "--format", "json")
    assert r.exit_code == 4, r.output
    pts = json.loads(r.stdout)["points"]
    assert [p["audit"] for p in pts] == [[], [], [VIOLATION]]
    assert "point 2: 1 violation(s)" in r.stderr and "point 1:" not in r.stderr
    table = cli("sweep", write(tmp_path, toy()), "--vary", "offerings[od].price_per_hour=80,90,150")
    assert table.exit_code == 4
    assert f"  point 2: 1 violation(s); first: {VIOLATION}" in table.stdout.split("Audit FAILED")[1]


def test_rentbuy_exits_4_when_a_strategy_fails(tmp_path, failing_audit):
    # the rent strategy is the copy without new owned units (TINY's own: at most 0 of them); its plan fails,
    # the buy strategy has no plan (one owned GPU for 2-3 rps), the mix passes
    failing_audit["when"] = lambda O: "own" in O.index and float(O.at["own", "max_units"]) == 0
    p = write_problem(tmp_path, TINY)
    r = cli("rentbuy", p, "--no-break-even", "--no-sensitivity", "--format", "json")
    assert r.exit_code == 4, r.output
    d = json.loads(r.stdout)
    assert d["status"] == "optimal"
    assert d["audit_failures"] == [f"failed plan 1: 1 violation(s); first: {VIOLATION}"]
    assert any("1 plan(s) failed their audit, a bug in gpuopt" in n for n in d["notes"])
    assert "internal error, please report: a plan failed its audit: failed plan 1" in r.stderr
    from optimizer.render.html import report_html  # the report of the saved JSON says it at the top

    assert "Audit FAILED (a bug in gpuopt: these plans disagree with their model): failed plan 1" in report_html(d)
    # the default rule (od above 100 an hour) fails none of TINY's plans: exit 0, nothing listed
    failing_audit["when"] = _dear_od
    r = cli("rentbuy", p, "--no-break-even", "--no-sensitivity", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["audit_failures"] == []
