"""`gpuopt validate` (every error at once, warnings) and `gpuopt schema`, through the real CLI group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import write_problem
from optimizer.cli import main
from optimizer.validate import validate_file
from optimizer.yamlio import read_yaml

ROOT = Path(__file__).resolve().parent.parent


def od(id="od", gpu="H100-SXM", region="r1", price=80.0, **extra):
    return {"id": id, "gpu": gpu, "gpus_per_unit": 8, "region": region, "pricing": "on_demand",
            "price_per_hour": price, **extra}


def svc(name="chat", demand=10.0, **extra):
    return {"name": name, "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
            "demand_rps": demand, "profiles": [{"gpu": "H100-SXM", "gpus": 2, "rps": 1.0}], **extra}


P3 = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1},
      {"name": "p3", "hours": 100, "month": 2}]
GOOD = {"periods": P3, "offerings": [od()], "inference": [svc()]}


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_valid_file_exits_0(tmp_path):
    r = invoke("validate", str(write_problem(tmp_path, GOOD)))
    assert r.exit_code == 0 and "valid" in r.stdout and "error" not in r.stdout
    r = invoke("validate", str(write_problem(tmp_path, GOOD)), "--format", "json")
    assert json.loads(r.stdout) == {"file": str(tmp_path / "problem.yaml"), "valid": True, "errors": [],
                                    "warnings": []}


def test_every_error_at_once(tmp_path):
    # load stops at the schema stage; validate sets broken items aside and finds the name errors too
    data = {
        "periods": P3 + [{"name": "p4", "hours": float("nan"), "month": 3}],
        "offerings": [od(price=-3), od(id="typo", gpu="H100-SXN"), od(id="inf", price=float("inf"))],
        "inference": [svc(), svc(), svc(name="m", model="llama-3.1-70")],
        "training": [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "start_month": 2,
                      "deadline_month": 1}],
    }
    path = write_problem(tmp_path, data)
    r = invoke("validate", str(path), "--format", "json")
    assert r.exit_code == 2
    out = json.loads(r.stdout)
    fields = {e["field"] for e in out["errors"]}
    assert {"periods[p4].hours", "offerings[od].price_per_hour", "offerings[inf].price_per_hour",
            "offerings[typo].gpu", "inference[chat]", "inference[m].model", "training[ft]"} <= fields
    typo = next(e for e in out["errors"] if e["field"] == "offerings[typo].gpu")
    assert typo["suggestion"] == "H100-SXM" and typo["value"] == "H100-SXN" and typo["file"] == str(path)
    assert all(e["text"].startswith(str(path)) for e in out["errors"])
    # the table form says the same, one line per error, and a count
    r = invoke("validate", str(path))
    assert r.exit_code == 2 and r.stdout.count("error: ") == len(out["errors"])
    assert f"{len(out['errors'])} errors" in r.stdout


def test_errors_of_candidates_for_every_workload(tmp_path):
    # two services with a profile precision they do not allow: both named, not just the first
    bad = {"gpu": "H100-SXM", "gpus": 2, "rps": 1.0, "precision": "fp8"}
    data = {"periods": P3, "offerings": [od()],
            "inference": [svc(name="a", profiles=[dict(bad)]), svc(name="b", profiles=[dict(bad)])]}
    v = validate_file(write_problem(tmp_path, data))
    assert {e.field for e in v.errors} == {"inference[a].profiles[0].precision", "inference[b].profiles[0].precision"}


@pytest.mark.parametrize("text, needle", [
    ("", "empty"), ("- 1\n", "mapping"), ("a: [1, 2\n", "YAML syntax error"), ("periods: 3\n", "periods"),
])
def test_unreadable_files_are_errors_not_tracebacks(tmp_path, text, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    r = invoke("validate", str(p), "--format", "json")
    assert r.exit_code == 2
    assert needle in json.dumps(json.loads(r.stdout)["errors"])


def test_missing_file(tmp_path):
    r = invoke("validate", str(tmp_path / "nope.yaml"))
    assert r.exit_code == 2 and "not found" in r.stdout


def test_warnings(tmp_path):
    data = {
        "periods": P3,
        "offerings": [od(), od(id="t4", gpu="T4"),
                      {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
                       "price_per_hour": 50, "term_months": 36}],
        "inference": [svc(demand={"p1": 3}), svc(name="idle", demand=0),
                      svc(name="far", demand=1, regions=["r2"])],
    }
    data["offerings"].append(od(id="r2-t4", gpu="T4", region="r2"))
    r = invoke("validate", str(write_problem(tmp_path, data)), "--format", "json")
    assert r.exit_code == 0, r.stdout  # warnings never fail validation
    w = json.loads(r.stdout)["warnings"]
    kinds = {x["kind"] for x in w}
    assert {"term", "missing-demand", "no-demand", "unused-offering", "region"} <= kinds
    unused = {x["field"] for x in w if x["kind"] == "unused-offering"}
    assert unused == {"offerings[t4]", "offerings[r2-t4]"}
    assert any("p2, p3" in x["message"] for x in w if x["kind"] == "missing-demand")
    region = next(x for x in w if x["kind"] == "region")
    assert "inference[far]" in region["message"] and "T4" in region["message"]


def test_idle_periods(tmp_path):
    data = {"periods": P3, "offerings": [od()], "inference": [svc(demand={"p1": 1, "p2": 0, "p3": 0})]}
    w = validate_file(write_problem(tmp_path, data)).warnings
    assert [x["kind"] for x in w] == ["idle-period"] and "p2, p3" in w[0]["message"]


def test_examples_validate():
    for f in ("q3.yaml", "q3-profiled.yaml", "rent-vs-buy-3y.yaml"):
        p = ROOT / "problems" / f
        if p.exists():
            v = validate_file(p)
            assert v.valid, [e.render() for e in v.errors]


# --- schema ------------------------------------------------------------------------------------


def test_schema_prints_the_problem_file_schema():
    r = invoke("schema")
    assert r.exit_code == 0
    s = json.loads(r.stdout)
    assert s["$schema"].startswith("https://json-schema.org/")
    assert {"periods", "offerings", "inference", "training", "constraints", "finance"} <= set(s["properties"])
    assert s["additionalProperties"] is False  # unknown keys are errors in the editor too
    assert "periods" in s["required"]


def test_schema_accepts_the_example_and_rejects_a_typo():
    jsonschema = pytest.importorskip("jsonschema")
    s = json.loads(invoke("schema").stdout)
    # an editor sees YAML dates as text: round-trip through JSON the way it would
    data = json.loads(json.dumps(read_yaml(ROOT / "problems" / "q3.yaml"), default=str))
    jsonschema.validate(data, s)
    data["offerings"][0]["prce_per_hour"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, s)


def test_schema_output_file_never_overwritten_without_force(tmp_path):
    out = tmp_path / "gpuopt.schema.json"
    assert invoke("schema", "-o", str(out)).exit_code == 0
    first = out.read_text()
    assert json.loads(first)["title"]
    out.write_text("mine")
    r = CliRunner().invoke(main, ["schema", "-o", str(out)])
    assert r.exit_code == 2 and "overwrite" in r.stderr and out.read_text() == "mine"
    assert invoke("schema", "-o", str(out), "--force").exit_code == 0 and out.read_text() == first
