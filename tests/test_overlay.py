"""--set / --scale overlays: grammar, selectors over file and catalog offerings, errors, files untouched."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from click.testing import CliRunner

from optimizer import catalog as cat
from optimizer.cli import main
from optimizer.errors import InputError
from optimizer.load import load_problem
from optimizer.overlay import apply_sets, catalog_entries, parse_selector
from optimizer.pipeline import run
from optimizer.render.report import plan_dict
from test_whatif_toy import TOY, toy, write

F = "toy.yaml"


def prices(raw: dict) -> dict:
    return {o["id"]: o.get("price_per_hour") for o in raw["offerings"]}


def test_set_and_factor_on_a_copy():
    out = apply_sets(TOY, ["offerings[od].price_per_hour=90", "offerings[res].price_per_hour*=2",
                           "inference[chat].demand_rps*=1.5"], F)
    assert prices(out)["od"] == 90 and prices(out)["res"] == 100
    assert out["inference"][0]["demand_rps"] == {"p1": 15, "p2": 4.5}
    assert prices(TOY)["od"] == 80 and TOY["inference"][0]["demand_rps"] == {"p1": 10, "p2": 3}


def test_scale_offerings_by_selector():
    out = apply_sets(TOY, [], F, scales=["pricing=spot,gpu=h100:0.5"])  # GPU alias, case-insensitive
    assert prices(out) == {"od": 80, "res": 50, "spot": 22.5, "l4": 1.2}
    out = apply_sets(TOY, [], F, scales=["gpu=H100-SXM,pricing=on_demand|reserved:2"])
    assert prices(out) == {"od": 160, "res": 100, "spot": 45, "l4": 1.2}
    out = apply_sets(TOY, [], F, scales=["region=r*,id=l4:0.5"])  # globs
    assert prices(out)["l4"] == 0.6
    # --set first, then --scale
    out = apply_sets(TOY, ["offerings[l4].price_per_hour=2"], F, scales=["id=l4:3"])
    assert prices(out)["l4"] == 6


def test_scale_demand_all_one_service_and_some_periods():
    out = apply_sets(TOY, [], F, scales=["demand:2"])
    assert [s["demand_rps"] for s in out["inference"]] == [{"p1": 20, "p2": 6}, 8]
    out = apply_sets(TOY, [], F, scales=["demand,service=chat:1.5"])
    assert [s["demand_rps"] for s in out["inference"]] == [{"p1": 15, "p2": 4.5}, 4]
    out = apply_sets(TOY, [], F, scales=["demand,period=p2:3"])
    assert [s["demand_rps"] for s in out["inference"]] == [{"p1": 10, "p2": 9}, {"p1": 4, "p2": 12}]


@pytest.mark.parametrize("spec, words", [
    ("pricing=spot,gpu=L4:0.7", ["pricing=spot,gpu=L4", "matches no offering"]),
    ("id=nope:2", ["id=nope", "matches no offering"]),
    ("demand,service=chatt:2", ["demand,service=chatt", "matches no inference service", "chat"]),
    ("demand,period=p9:2", ["demand,period=p9", "matches no period"]),
    ("pricing=spt:2", ["spt", "did you mean 'spot'"]),
    ("gpu=H100X:2", ["H100X", "unknown GPU type"]),
    ("colour=red:2", ["colour", "unknown selector key"]),
    ("pricing=spot", ["malformed --scale"]),
    ("pricing=spot:-1", ["must not be negative"]),
    ("capex,pricing=spot:2", ["none of which has capex"]),
])
def test_selector_errors_name_the_selector(spec, words):
    with pytest.raises(InputError) as e:
        apply_sets(TOY, [], F, scales=[spec])
    text = e.value.render()
    for w in words:
        assert w in text, text


def test_parse_selector_targets():
    assert parse_selector("price,pricing=spot").target == "price_per_hour"
    assert parse_selector("electricity,pricing=owned").target == "electricity_per_kwh"
    assert parse_selector("demand").filters == {}
    with pytest.raises(InputError):
        parse_selector("pricing=spot,,gpu=L4")


def test_catalog_offerings_match_selectors_and_set_paths(tmp_path):
    """A selector reaches catalog offerings; the catalog files are read, never written."""
    cat_files = cat.offering_catalog_files("default")
    before = {str(f): (f.stat().st_mtime_ns, f.read_bytes()) for f in cat_files}
    raw = toy(catalog=["default"])
    out = apply_sets(raw, [], F, scales=["pricing=spot,gpu=H100-SXM,provider=aws:0.5"])
    added = [o for o in out["offerings"] if o["id"] not in prices(TOY)]
    assert added and all(o["provider"] == "aws" and o["pricing"] == "spot" for o in added)
    orig = {o["id"]: o for o in catalog_entries(raw, F)}
    for o in added:
        assert o["price_per_hour"] == pytest.approx(orig[o["id"]]["price_per_hour"] * 0.5)
    assert prices(out)["spot"] == 45  # the file's spot offering is not aws
    oid = added[0]["id"]
    out = apply_sets(raw, [f"offerings[{oid}].price_per_hour=1.5"], F)
    assert prices(out)[oid] == 1.5
    assert {str(f): (f.stat().st_mtime_ns, f.read_bytes()) for f in cat_files} == before


def test_set_gives_the_same_plan_as_editing_the_file(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    edited = toy()
    edited["offerings"][1]["price_per_hour"] = 70
    edited["inference"][1]["demand_rps"] = 9
    p_edit = write(b, edited)
    p_orig = write(a, TOY)
    via_set = run(load_problem(p_orig, sets=["offerings[res].price_per_hour=70", "inference[small].demand_rps=9"]))
    via_file = run(load_problem(p_edit))
    keep = ("status", "objective", "total_cost", "commitments", "inference", "routing", "training", "costs")
    da, db = plan_dict(via_set), plan_dict(via_file)
    assert {k: da[k] for k in keep} == {k: db[k] for k in keep}
    # and a --scale equals the edit it stands for
    via_scale = run(load_problem(p_orig, sets=["offerings[res].price_per_hour=70"],
                                 scales=["demand,service=small:2.25"]))
    assert plan_dict(via_scale)["objective"] == pytest.approx(db["objective"])


def test_cli_overlays_never_touch_user_files(tmp_path):
    """whatif and sweep with --set/--scale: the problem, scenario and catalog files keep their bytes and mtimes."""
    user_cat = tmp_path / "mine.yaml"
    user_cat.write_text(yaml.safe_dump({"offerings": [
        {"id": "mine-h100", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 79}]}))
    p = write(tmp_path, toy(catalog=["mine.yaml"], scenarios=[{"name": "cheap", "scale": ["id=mine-h100:0.5"]}]))
    files = [p, user_cat] + cat.offering_catalog_files("default")
    before = {str(f): (f.stat().st_mtime_ns, f.read_bytes()) for f in files}
    r = CliRunner().invoke(main, ["whatif", str(p), "--scale", "pricing=on_demand,gpu=H100-SXM:0.5",
                                  "--set", "offerings[mine-h100].max_units=2", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["scenario"]["objective"] < d["base"]["objective"]
    r = CliRunner().invoke(main, ["sweep", str(p), "--vary", "offerings[mine-h100].price_per_hour*=0.5,1",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["whatif", str(p)])
    assert r.exit_code == 0, r.output
    assert {str(f): (f.stat().st_mtime_ns, f.read_bytes()) for f in files} == before
    assert sorted(os.listdir(tmp_path)) == ["mine.yaml", "toy.yaml"]
