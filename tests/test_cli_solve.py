"""`gpuopt solve`: output contracts, exit codes, bad input.

The JSON contract and a missing file go through the real entry point (a new
process); the other cases run the same command in this process
(``conftest.gpuopt_here``), without a new interpreter's start-up each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import gpuopt_here

ROOT = Path(__file__).resolve().parent.parent

BASE = {
    "name": "cli-toy",
    "periods": [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}],
    "offerings": [
        {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 80},
        {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
         "price_per_hour": 50, "term_months": 12},
    ],
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
                   "demand_rps": {"p1": 10, "p2": 3},
                   "profiles": [{"gpu": "H100-SXM", "gpus": 2, "rps": 1.0}]}],
}


def gpuopt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("gpuopt")
    cmd = [exe] if exe else [sys.executable, "-m", "optimizer"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


def write(tmp_path: Path, data, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


def test_json_contract(tmp_path):
    r = gpuopt("solve", str(write(tmp_path, BASE)), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("status", "objective", "total_cost", "currency", "gap", "solver", "solve_seconds",
                "commitments", "inference", "training", "costs"):
        assert key in d
    assert d["status"] == "optimal" and d["objective"] == pytest.approx(26_000)
    assert d["total_cost"] == pytest.approx(sum(r["cost"] for r in d["costs"]["by_pricing"]))
    assert {"offering", "pricing", "units", "new_units"} <= set(d["commitments"][0])
    assert {"service", "period", "offering", "gpu", "replicas", "gpus", "rps"} <= set(d["inference"][0])
    assert d["catalog_version"]
    assert d["audit"] == []  # every solve is audited; nothing found


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_the_plan_names_the_version_of_its_solver(tmp_path, solver):
    # The version printed is the one the solver's own library reports once imported (highspy's Highs for
    # HiGHS; PuLP's for the CBC it bundles), not only the metadata the report reads; in the JSON, the CSV
    # summary and the table.
    if solver == "highs":
        import highspy

        expected = f"highspy {highspy.Highs().version()}"
    else:
        import pulp

        expected = f"PuLP {pulp.__version__}"
    p = write(tmp_path, BASE)
    d = json.loads(gpuopt_here("solve", str(p), "--solver", solver, "--format", "json").stdout)
    assert d["solver"] == solver and d["solver_version"] == expected
    assert d["audit"] == []  # the plan behind it passes its audit
    r = gpuopt_here("solve", str(p), "--solver", solver, "--format", "csv", "-o", str(tmp_path / "csv"))
    assert r.returncode == 0, r.stderr
    summary = (tmp_path / "csv" / "summary.csv").read_text()
    assert "solver_version" in summary.splitlines()[0] and expected in summary
    table = gpuopt_here("solve", str(p), "--solver", solver).stdout
    assert f"solver     {solver} ({expected})" in table


def test_table_is_default(tmp_path):
    r = gpuopt_here("solve", str(write(tmp_path, BASE)))
    assert r.returncode == 0, r.stderr
    assert "status     optimal" in r.stdout and "Costs by pricing kind" in r.stdout
    assert "audit      passed" in r.stdout


def test_a_failed_audit_is_reported_not_hidden(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from optimizer import pipeline
    from optimizer.cli import main

    monkeypatch.setattr(pipeline, "audit", lambda plan: ["capacity od/p1: 9 inference GPUs > 1 units × 8"])
    path = str(write(tmp_path, BASE))
    table = CliRunner().invoke(main, ["solve", path])
    assert table.exit_code == 4  # a plan that fails its audit is a bug in gpuopt
    assert "audit      FAILED, 1 violation(s)" in table.output and "capacity od/p1: 9 inference GPUs" in table.output
    js = CliRunner().invoke(main, ["solve", path, "--format", "json", "--allow-audit-failure"])
    assert js.exit_code == 0
    assert json.loads(js.stdout)["audit"] == ["capacity od/p1: 9 inference GPUs > 1 units × 8"]
    assert "warning: the plan failed its audit (1 violations)" in js.stderr

    def crash(plan):
        raise KeyError("h100")

    monkeypatch.setattr(pipeline, "audit", crash)
    table = CliRunner().invoke(main, ["solve", path])
    # our own bug: exit 4, named as one, the traceback in a file and not on the terminal
    assert table.exit_code == 4
    assert "internal error, please report: KeyError: 'h100'" in table.stderr
    assert "Traceback" not in table.output
    trace = Path(table.stderr.split("the traceback is in ")[1].strip())
    assert "raise KeyError" in trace.read_text()
    trace.unlink()


def test_csv_writes_tables_and_never_overwrites(tmp_path):
    p = write(tmp_path, BASE)
    out = tmp_path / "out"
    r = gpuopt_here("solve", str(p), "--format", "csv", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "inference.csv").exists() and (out / "by_pricing.csv").exists()
    before = (out / "summary.csv").read_text()
    r = gpuopt_here("solve", str(p), "--format", "csv", "-o", str(out), "--set", "offerings[od].price_per_hour=1")
    assert r.returncode == 2 and "overwrite" in r.stderr and "Traceback" not in r.stderr
    assert (out / "summary.csv").read_text() == before
    r = gpuopt_here("solve", str(p), "--format", "csv", "-o", str(out), "--force")
    assert r.returncode == 0
    # -o with another format would write nothing: refused before any solve, naming what it is for
    for fmt in ("table", "json"):
        r = gpuopt_here("solve", str(p), "--format", fmt, "-o", str(tmp_path / "elsewhere"))
        assert r.returncode == 2 and "-o DIR is for --format csv" in r.stderr
        assert not (tmp_path / "elsewhere").exists()


def test_infeasible_exits_1_with_reason(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["offerings"][0]["max_units"] = 1
    data["offerings"][1]["max_units"] = 1
    r = gpuopt_here("solve", str(write(tmp_path, data)), "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["status"] == "infeasible"
    # demand that no allowed offering can serve is named with its service and period
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["inference"][0]["profiles"][0]["gpus"] = 16  # a replica wider than any unit
    r = gpuopt_here("solve", str(write(tmp_path, data)))  # the table says why, once, on stdout
    assert r.returncode == 1 and "inference[chat]" in r.stdout and "p1" in r.stdout
    assert r.stdout.count("demand of") == 1  # one line for the service, not one per period
    r = gpuopt_here("solve", str(write(tmp_path, data)), "--format", "json")  # JSON on stdout, the reason on stderr
    assert r.returncode == 1 and "inference[chat]" in r.stderr


def test_set_changes_a_copy_only(tmp_path):
    p = write(tmp_path, BASE)
    text = p.read_text()
    r = gpuopt_here("solve", str(p), "--format", "json", "--set", "offerings[res].price_per_hour*=2")
    assert r.returncode == 0
    # reservations at 100 $/h no longer pay: 3 units in p1 + 1 in p2, all on demand = 32,000
    assert json.loads(r.stdout)["objective"] == pytest.approx(32_000)
    assert p.read_text() == text
    r = gpuopt_here("solve", str(p), "--set", "offerings[nope].price_per_hour=1")
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("solver", ["highs", "scip"])
def test_solvers_via_cli(tmp_path, solver):
    r = gpuopt_here("solve", str(write(tmp_path, BASE)), "--format", "json", "--solver", solver)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)  # no solver banner may leak into stdout
    assert d["objective"] == pytest.approx(26_000) and d["solver"] == solver


# the shipped example through the real entry point: tests/test_api.py (the API's JSON equals the command's)


# --- bad input: exit 2, a message naming file, field and value; never a traceback -----

def _bad(tmp_path, text: str) -> subprocess.CompletedProcess:
    """``gpuopt solve`` on a bad file, in process (a process per case cost 1.2-1.6 s of start-up each; the real
    entry point is tested by test_missing_file and test_json_contract)."""
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    r = gpuopt_here("solve", p)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "bad.yaml" in r.stderr
    return r


def _dump(mutate) -> str:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    mutate(data)
    return yaml.safe_dump(data, sort_keys=False)


def test_missing_file(tmp_path):
    r = gpuopt("solve", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "not found" in r.stderr and "Traceback" not in r.stderr


def test_empty_file(tmp_path):
    assert "empty" in _bad(tmp_path, "").stderr


def test_yaml_syntax_error_names_the_line(tmp_path):
    assert "line 3" in _bad(tmp_path, "name: x\nperiods:\n  - {name: p1, hours: 1\n").stderr


def test_top_level_must_be_a_mapping(tmp_path):
    assert "mapping" in _bad(tmp_path, "- 1\n- 2\n").stderr


def test_wrong_type(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"][0].update(price_per_hour="cheap")))
    assert "offerings[od].price_per_hour" in r.stderr and "cheap" in r.stderr


def test_negative_number(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"][0].update(price_per_hour=-3)))
    assert "offerings[od].price_per_hour" in r.stderr and "-3" in r.stderr


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_nan_and_infinity(tmp_path, value):
    text = _dump(lambda d: None).replace("price_per_hour: 80", f"price_per_hour: {value}")
    r = _bad(tmp_path, text)
    assert "finite" in r.stderr and "price_per_hour" in r.stderr


def test_demand_for_undefined_period(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["inference"][0]["demand_rps"].update({"p3": 1})))
    assert "inference[chat].demand_rps.p3" in r.stderr and "unknown period" in r.stderr


def test_duplicate_ids(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"].append(dict(d["offerings"][0]))))
    assert "duplicate" in r.stderr and "offerings[od]" in r.stderr


def test_unknown_gpu_suggests(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"][0].update(gpu="H100-SXN")))
    assert "offerings[od].gpu" in r.stderr and "H100-SXN" in r.stderr and "did you mean 'H100-SXM'" in r.stderr


def test_unknown_pricing_kind_suggests(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"][0].update(pricing="ondemand")))
    assert "offerings[od].pricing" in r.stderr and "did you mean 'on_demand'" in r.stderr


def test_unknown_key_suggests(tmp_path):
    def typo(d):
        d["offerings"][0]["prce_per_hour"] = d["offerings"][0].pop("price_per_hour")

    r = _bad(tmp_path, _dump(typo))
    assert "prce_per_hour" in r.stderr and "did you mean 'price_per_hour'" in r.stderr


def test_unknown_model_suggests(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["inference"][0].update(model="llama-3.1-70")))
    assert "inference[chat].model" in r.stderr and "did you mean" in r.stderr


def test_field_of_another_pricing_kind(tmp_path):
    r = _bad(tmp_path, _dump(lambda d: d["offerings"][0].update(capex=100)))
    assert "capex" in r.stderr and "owned" in r.stderr


def test_python_tag_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    r = _bad(tmp_path, f"name: !!python/object/apply:os.system ['touch {marker}']\nperiods: []\n")
    assert not marker.exists()
    assert "line 1" in r.stderr


def test_alias_bomb_is_refused_fast(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi"))
    r = _bad(tmp_path, bomb)
    assert "aliases" in r.stderr


def test_several_errors_reported_at_once(tmp_path):
    def two(d):
        d["offerings"][0]["price_per_hour"] = -1
        d["periods"][0]["hours"] = "many"

    r = _bad(tmp_path, _dump(two))
    assert "price_per_hour" in r.stderr and "periods[p1].hours" in r.stderr


def test_scale_selector_on_solve(tmp_path):
    # --scale 'pricing=reserved:2' doubles the reservation price: as with --set, 32,000 all on demand
    p = write(tmp_path, BASE)
    r = gpuopt_here("solve", str(p), "--format", "json", "--scale", "pricing=reserved:2")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["objective"] == pytest.approx(32_000)
    r = gpuopt_here("solve", str(p), "--scale", "gpu=B200:0.5")
    assert r.returncode == 2 and "B200" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("step, limit, said", [(1.0, 1.0, True), (0.001, 60.0, False)])
def test_a_run_past_its_time_limit_says_so_in_its_warnings(tmp_path, monkeypatch, step, limit, said):
    # The pipeline's clock is made to advance `step` seconds at each reading; a run reads it at its start, after
    # the build, before the solve and at its end: with 1 s a reading the run takes 3 s of that clock, past a
    # limit of 1 s by more than a tenth, and its plan says so (in the JSON's warnings too); with 1 ms a reading
    # it takes 3 ms of a 60 s limit, and says nothing. No reading of the real clock decides it.
    import types

    from conftest import assert_audited
    from optimizer import pipeline
    from optimizer.load import load_problem

    now = [0.0]

    def perf_counter():
        now[0] += step
        return now[0]

    monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(perf_counter=perf_counter))
    plan = pipeline.run(load_problem(write(tmp_path, BASE)), time_limit=limit)
    assert_audited(plan)
    said_here = [w for w in plan.warnings if w.startswith("time limit:")]
    if said:
        assert said_here == ["time limit: the run took 3.0 s of wall clock, past its limit of 1 s (the model's "
                             "build took 1.0 s; below what the build, the first plan and its audit take, a limit "
                             "cannot be kept)"]
        assert said_here[0] in plan.to_dict()["warnings"]
    else:
        assert said_here == []
