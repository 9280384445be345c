"""``gpuopt catalog ...`` through click's CliRunner on optimizer.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from optimizer.cli import main
from optimizer.importers import load_offering_file

FIX = Path(__file__).parent / "fixtures" / "skypilot"


@pytest.fixture
def cli():
    runner = CliRunner()

    def _run(*args, ok=True):
        result = runner.invoke(main, ["catalog", *args])
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        return result

    return _run


def rows(result):
    return json.loads(result.stdout)


def test_gpus_json_fields(cli):
    data = rows(cli("gpus", "--format", "json"))
    names = {r["name"] for r in data}
    assert {"H100-SXM", "B200", "MI300X", "L4"} <= names
    for r in data:
        assert {"name", "vram_gb", "source"} <= set(r)
        assert isinstance(r["aliases"], list)
    one = rows(cli("gpus", "--gpu", "h100", "--format", "json"))
    assert [r["name"] for r in one] == ["H100-SXM"]


def test_models_json_and_alias_filter(cli):
    data = rows(cli("models", "--format", "json"))
    assert "llama-3.1-70b" in {r["name"] for r in data}
    assert all("name" in r for r in data)
    one = rows(cli("models", "--model", "LLAMA-3.1-70B", "--format", "json"))
    assert [r["name"] for r in one] == ["llama-3.1-70b"]


def test_offerings_json_fields(cli):
    data = rows(cli("offerings", "--format", "json"))
    assert len(data) >= 60
    for r in data:
        assert {"id", "provider", "gpu", "gpus_per_unit", "region", "pricing", "price_per_hour",
                "source", "date"} <= set(r)
        if r["pricing"] == "owned":
            assert r["price_per_hour"] is None
            assert {"capex", "lifetime_years", "power_kw", "fixed_per_month", "pue"} <= set(r)
        else:
            assert r["price_per_hour"] > 0
            assert r["price_per_gpu_hour"] == pytest.approx(r["price_per_hour"] / r["gpus_per_unit"], rel=1e-5)


def test_offering_filters(cli):
    data = rows(cli("offerings", "--gpu", "h100", "--pricing", "spot", "--format", "json"))
    assert data and all(r["gpu"] == "H100-SXM" and r["pricing"] == "spot" for r in data)
    data = rows(cli("offerings", "--provider", "AWS", "--region", "US-EAST-1", "--format", "json"))
    assert data and all(r["provider"] == "aws" and r["region"] == "us-east-1" for r in data)
    data = rows(cli("offerings", "--pricing", "on-demand", "--pricing", "reserved", "--gpu", "B200,L4",
                    "--format", "json"))
    assert {r["pricing"] for r in data} == {"on_demand", "reserved"}
    assert {r["gpu"] for r in data} == {"B200", "L4"}
    owned = rows(cli("offerings", "--pricing", "owned", "--format", "json"))
    assert {r["provider"] for r in owned} == {"owned"}


def test_offerings_table_and_csv(cli):
    out = cli("offerings", "--gpu", "A10G").stdout
    assert "aws-g5.xlarge-us-east-1-od" in out and "price_per_hour" in out
    csv_text = cli("offerings", "--gpu", "A10G", "--format", "csv").stdout
    header = csv_text.splitlines()[0].split(",")
    assert header[:6] == ["id", "provider", "gpu", "gpus_per_unit", "region", "pricing"]
    assert len(csv_text.splitlines()) == 1 + 4   # od, spot, 1y, 3y


@pytest.mark.parametrize("args, needle", [
    (("offerings", "--gpu", "H1000"), "did you mean 'H200'"),
    (("offerings", "--pricing", "spott"), "did you mean 'spot'"),
    (("offerings", "--provider", "awz"), "did you mean 'aws'"),
    (("offerings", "--region", "us-east-9"), "region"),
    (("gpus", "--gpu", "A100-80"), "unknown GPU type"),
    (("models", "--model", "llama-3.1-7b"), "unknown model"),
    (("show", "aws-p5.48xlarge-us-east-1-0d"), "did you mean 'aws-p5.48xlarge-us-east-1-od'"),
])
def test_unknown_names_exit_2_without_traceback(cli, args, needle):
    result = cli(*args, ok=False)
    assert result.exit_code == 2
    assert needle in result.stderr
    assert "Traceback" not in result.output and "Traceback" not in result.stderr


def test_show_offering_gpu_and_model(cli):
    rec = json.loads(cli("show", "aws-p5.48xlarge-us-east-1-od", "--format", "json").stdout)
    assert rec["kind"] == "offering" and rec["gpu"] == "H100-SXM" and rec["price_per_hour"] == 55.04
    rec = json.loads(cli("show", "h100", "--format", "json").stdout)
    assert rec["kind"] == "gpu" and rec["name"] == "H100-SXM"
    rec = json.loads(cli("show", "Llama-3.1-8B", "--format", "json").stdout)
    assert rec["kind"] == "model" and rec["name"] == "llama-3.1-8b"
    text = cli("show", "owned-h100-sxm-8x-dc1").stdout
    assert "capex" in text and "fixed_per_month" in text


def test_import_skypilot_writes_a_loadable_catalog(cli, tmp_path):
    out = tmp_path / "imported.yaml"
    result = cli("import", "skypilot", str(FIX / "aws_zones.csv"), "--provider", "aws", "-o", str(out),
                 "--date", "2026-11-01")
    assert "wrote" in result.stderr
    offs = load_offering_file(out)
    assert {o.pricing for o in offs} == {"on_demand", "spot"}
    assert all(o.date == "2026-11-01" and "aws_zones.csv" in o.source and "aws" in o.source for o in offs)
    # it lists together with the shipped catalog; a later file's offering replaces the same id
    data = rows(cli("offerings", "--catalog", "default", "--catalog", str(out), "--region", "ca-central-1",
                    "--format", "json"))
    assert [r["id"] for r in data] == ["aws-p5.48xlarge-ca-central-1-od"]
    both = {r["id"]: r for r in rows(cli("offerings", "--catalog", "default", "--catalog", str(out),
                                         "--format", "json"))}
    assert both["aws-p5.48xlarge-us-east-1-od"]["date"] == "2026-11-01"
    assert "aws-p5.48xlarge-us-east-1-1y" in both and "owned-h100-sxm-8x-dc1" in both


def test_import_reports_unknown_accelerators_on_stderr(cli, tmp_path):
    out = tmp_path / "l.yaml"
    result = cli("import", "skypilot", str(FIX / "unknown_accelerators.csv"), "--provider", "lambda",
                 "-o", str(out))
    assert "UNKNOWN" in result.stderr and "A6000: 2" in result.stderr and "V100: 1" in result.stderr
    assert result.stdout == ""


def test_import_refuses_to_overwrite_without_force(cli, tmp_path):
    out = tmp_path / "gcp.yaml"
    out.write_text("keep me\n")
    result = cli("import", "skypilot", str(FIX / "gcp_attachable.csv"), "--provider", "gcp", "-o", str(out),
                 ok=False)
    assert result.exit_code == 2
    assert str(out) in result.stderr and "--force" in result.stderr
    assert out.read_text() == "keep me\n"
    cli("import", "skypilot", str(FIX / "gcp_attachable.csv"), "--provider", "gcp", "-o", str(out), "--force")
    data = yaml.safe_load(out.read_text())
    assert data["provider"] == "gcp" and data["offerings"]


def test_import_filters_and_bad_input(cli, tmp_path):
    out = tmp_path / "f.yaml"
    cli("import", "skypilot", str(FIX / "aws_zones.csv"), "--provider", "aws", "-o", str(out),
        "--gpu", "h100", "--region", "us-east-1", "--no-spot")
    offs = load_offering_file(out)
    assert [o.id for o in offs] == ["aws-p5.48xlarge-us-east-1-od"]
    for args in (("--date", "last week"), ("--gpu", "H1000"), ("--interruption-band", "1.5")):
        result = cli("import", "skypilot", str(FIX / "aws_zones.csv"), "--provider", "aws",
                     "-o", str(tmp_path / "g.yaml"), *args, ok=False)
        assert result.exit_code == 2 and "Traceback" not in result.stderr
    result = cli("import", "skypilot", str(FIX / "missing_price_column.csv"), "--provider", "x",
                 "-o", str(tmp_path / "h.yaml"), ok=False)
    assert result.exit_code == 2 and "missing column 'Price'" in result.stderr
    result = cli("import", "skypilot", str(tmp_path / "nope.csv"), "--provider", "x",
                 "-o", str(tmp_path / "h.yaml"), ok=False)
    assert result.exit_code == 2 and "file not found" in result.stderr
