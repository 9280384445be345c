"""gpuopt whatif: base vs changed plan (JSON shape, deltas), named scenarios side by side, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from optimizer.cli import main
from test_whatif_toy import toy, write


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def gpuopt(*args) -> subprocess.CompletedProcess:
    exe = shutil.which("gpuopt")
    cmd = [exe] if exe else [sys.executable, "-m", "optimizer"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=300)


def test_whatif_json_shape_and_delta(tmp_path):
    p = write(tmp_path, toy())
    r = gpuopt("whatif", p, "--set", "offerings[res].price_per_hour*=2", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"base", "scenario", "delta"}
    for side in ("base", "scenario"):  # each side is solve's JSON
        assert {"status", "objective", "total_cost", "commitments", "inference", "training", "costs"} <= set(d[side])
    delta = d["delta"]
    assert delta["objective"]["delta"] == pytest.approx(d["scenario"]["objective"] - d["base"]["objective"])
    assert delta["objective"]["delta"] > 0
    by = {r["pricing"]: r for r in delta["by_pricing"]}
    assert sum(r["delta"] for r in by.values()) == pytest.approx(delta["total_cost"]["delta"])
    assert by["reserved"]["scenario"] == 0 and by["reserved"]["base"] > 0  # reservations no longer pay
    units = {u["offering"]: u for u in delta["units"]}
    assert units["res"]["base"] == 1 and units["res"]["scenario"] == 0
    assert {"service", "gpu", "base_peak", "scenario_peak"} <= set(delta["replicas"][0])
    assert sum(r["delta"] for r in delta["by_workload"]) == pytest.approx(delta["total_cost"]["delta"])
    assert d["change"]["set"] == ["offerings[res].price_per_hour*=2"]


def test_whatif_table_shows_what_moved(tmp_path):
    r = cli("whatif", write(tmp_path, toy()), "--scale", "demand,service=small:4")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Cost by pricing kind" in out and "Cost by workload" in out and "Units per offering" in out
    assert "small" in out.split("Inference replicas")[1]


@pytest.mark.parametrize("args", [
    ["--scale", "pricing=owned:2"],
    ["--scale", "demand,service=nope:2"],
    ["--set", "offerings[nope].price_per_hour=3"],
    ["--scenario", "nope"],
])
def test_whatif_bad_overlay_exits_2_naming_it(tmp_path, args):
    r = cli("whatif", write(tmp_path, toy()), *args)
    assert r.exit_code == 2, r.output
    assert "nope" in r.stderr or "pricing=owned" in r.stderr
    assert "Traceback" not in r.stderr


def test_nothing_to_compare_is_a_usage_error(tmp_path):
    r = cli("whatif", write(tmp_path, toy()))
    assert r.exit_code == 2 and "nothing to compare" in r.stderr


SCEN = [
    {"name": "spot-cut", "description": "H100 spot falls 30 %", "scale": ["pricing=spot,gpu=H100-SXM:0.7"]},
    {"name": "double", "scale": "demand:2"},
    {"name": "res-up", "set": ["offerings[res].price_per_hour=95"]},
]


def test_scenarios_side_by_side_from_the_problem_file(tmp_path):
    p = write(tmp_path, toy(scenarios=SCEN))
    r = cli("whatif", p, "--format", "json")
    assert r.exit_code == 0, r.output
    rows = {s["name"]: s for s in json.loads(r.stdout)["scenarios"]}
    assert list(rows) == ["base", "spot-cut", "double", "res-up"]
    base = rows["base"]["objective"]
    assert rows["spot-cut"]["objective"] < base < rows["double"]["objective"]
    assert rows["res-up"]["objective"] >= base
    assert rows["res-up"]["mix"].get("res", 0) == 0 and rows["base"]["mix"]["res"] == 1
    for row in rows.values():
        assert sum(row["by_pricing"].values()) == pytest.approx(row["total_cost"])
    # the table: one row per scenario, cost per pricing kind, the mix
    r = cli("whatif", p)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "on_demand" in lines[1] and "reserved" in lines[1] and "spot" in lines[1] and "mix" in lines[1]
    assert [ln.split()[0] for ln in lines[2:6]] == ["base", "spot-cut", "double", "res-up"]
    assert "H100 spot falls 30 %" in r.stdout
    # one named scenario against the base, in full
    r = cli("whatif", p, "--scenario", "spot-cut", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["scenario"]["objective"] == pytest.approx(rows["spot-cut"]["objective"])
    assert d["change"]["name"] == "spot-cut"


def test_scenario_file_and_errors(tmp_path):
    p = write(tmp_path, toy(scenarios=SCEN[:1]))
    sf = tmp_path / "more.yaml"
    sf.write_text(yaml.safe_dump({"scenarios": SCEN[1:]}))
    r = cli("whatif", p, "--scenarios", sf, "--format", "json")
    assert r.exit_code == 0, r.output
    assert [s["name"] for s in json.loads(r.stdout)["scenarios"]] == ["base", "spot-cut", "double", "res-up"]
    # a duplicate name, a scenario that names nothing, an unknown key: exit 2 naming them
    sf.write_text(yaml.safe_dump(SCEN[:1]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "duplicate scenario name" in r.stderr and "spot-cut" in r.stderr
    sf.write_text(yaml.safe_dump([{"name": "bad", "scale": ["gpu=B200:0.5"]}]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "scenarios[bad].scale" in r.stderr and "gpu=B200" in r.stderr
    sf.write_text(yaml.safe_dump([{"name": "bad", "sett": ["x=1"]}]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "sett" in r.stderr and "Traceback" not in r.stderr


def test_infeasible_scenario_is_reported_with_exit_1(tmp_path):
    p = write(tmp_path, toy())
    r = cli("whatif", p, "--set", "offerings[od].max_units=0", "--set", "offerings[res].max_units=0",
            "--format", "json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["scenario"]["status"] == "infeasible" and d["delta"]["objective"]["delta"] is None
