"""Topology and supply of the shipped catalog, and the catalog build from its shipped sources.

The expected figures are the providers' published ones, divided by hand:
p5.48xlarge has 3,200 Gbit/s of EFA for 8 H100 = 400 per GPU; p4d.24xlarge
400 Gbit/s for 8 A100 = 50 per GPU; ND H100 v5 3.2 Tbit/s InfiniBand for 8
GPUs = 400 per GPU; ND A100 v4 1.6 Tbit/s = 200 per GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.importers import load_default_catalog
from optimizer.importers.topology import Rule, annotate, first_rule
from optimizer.schema import Offering
from conftest import gpuopt_here

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def catalog():
    return {o.id: o for o in load_default_catalog()}


@pytest.mark.parametrize("oid, fabric, gbps", [
    ("aws-p5.48xlarge-us-east-1-od", "efa", 3200 / 8),
    ("aws-p4d.24xlarge-us-east-1-od", "efa", 400 / 8),
    ("azure-standard-nd96isr-h100-v5-eastus2-od", "infiniband", 3200 / 8),
    ("azure-standard-nd96amsr-a100-v4-eastus2-od", "infiniband", 1600 / 8),
    ("gcp-a3-ultragpu-8g-us-central1-od", "roce", 3200 / 8),
])
def test_cluster_instances_carry_their_published_fabric(catalog, oid, fabric, gbps):
    o = catalog[oid]
    assert o.fabric == fabric and o.fabric_gbps_per_gpu == pytest.approx(gbps)
    assert o.unit_link in ("nvlink", "xgmi") and "topology:" in o.notes


def test_single_gpu_machines_and_rented_boxes_without_a_fabric_are_never_joined(catalog):
    for o in catalog.values():
        if o.gpus_per_unit == 1:
            assert o.fabric == "none", o.id
        if o.provider in ("vast", "lambda", "runpod", "crusoe"):
            # marketplace hosts and single VMs: their listings sell no fabric between machines
            assert o.fabric == "none", o.id


def test_every_catalog_offering_states_its_supply_and_where_it_comes_from(catalog):
    for o in catalog.values():
        assert o.max_units is not None and o.max_units >= 1, o.id
        assert o.quota_source, o.id
    # a marketplace listing is one host machine
    assert {o.max_units for o in catalog.values() if o.provider == "vast"} == {1}


def test_annotation_fills_only_what_an_offering_leaves_empty():
    rules = [Rule("aws", "p5.*", "*", {"unit_link": "nvlink", "fabric": "efa", "fabric_gbps_per_gpu": 400.0,
                                       "max_cluster_units": None}, "page A", "2026-11-24")]
    quotas = [Rule("aws", "*", "*", {"max_units": 8}, "default: eight", "2026-11-24")]
    mine = Offering(id="x", provider="aws", gpu="H100-SXM", gpus_per_unit=8, region="r", pricing="on_demand",
                    instance_type="p5.48xlarge", price_per_hour=55.04, fabric="ethernet", max_units=3)
    kept = annotate(mine, rules, quotas)
    assert kept.fabric == "ethernet" and kept.fabric_gbps_per_gpu is None and kept.max_units == 3
    bare = mine.model_copy(update={"fabric": None, "max_units": None})
    filled = annotate(bare, rules, quotas)
    assert (filled.fabric, filled.fabric_gbps_per_gpu, filled.max_units) == ("efa", 400.0, 8)
    assert filled.quota_source == "default: eight (2026-11-24)" and "page A" in filled.notes


def test_the_first_matching_rule_wins_and_id_is_matched_without_an_instance_type():
    rules = [Rule("owned", "owned-*-1x-*", "*", {"fabric": "none"}, "one card", "d"),
             Rule("owned", "*", "*", {"fabric": "infiniband"}, "hall", "d")]
    def server(oid, n):
        return Offering(id=oid, provider="owned", gpu="L4", gpus_per_unit=n, region="dc", pricing="owned",
                        capex=1.0, lifetime_years=3, power_kw=1.0, electricity_per_kwh=0.1)
    assert first_rule(server("owned-l4-1x-dc1", 1), rules).source == "one card"
    assert first_rule(server("owned-l4-8x-dc1", 8), rules).source == "hall"
    assert first_rule(server("owned-l4-8x-dc1", 8).model_copy(update={"provider": "aws"}), rules) is None


def test_the_catalog_build_from_the_shipped_sources_reproduces_the_shipped_catalog(tmp_path):
    # a fresh clone can rebuild catalogs/offerings from catalogs/sources, byte for byte
    subprocess.run([sys.executable, "-m", "optimizer.importers.build_default", "--out", str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)
    shipped = sorted((ROOT / "catalogs" / "offerings").glob("*.yaml"))
    assert [p.name for p in shipped] == sorted(p.name for p in tmp_path.glob("*.yaml"))
    for p in shipped:
        assert (tmp_path / p.name).read_text() == p.read_text(), p.name


def test_catalog_offerings_shows_fabric_and_supply():
    r = gpuopt_here("catalog", "offerings", "--provider", "vast", "--format", "json", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows and all(r["max_units"] == 1 and r["quota"] == "default" and r["fabric"] == "none" for r in rows)
    r = gpuopt_here("catalog", "offerings", "--provider", "aws", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    table = r.stdout
    head = table.splitlines()[0].split()
    assert {"fabric", "fabric_gbps_per_gpu", "max_units", "quota"} <= set(head)


def test_buying_from_the_catalog_warns_where_a_figure_is_an_assumption():
    # catalogs/finance_defaults.csv marks the MI300X node price as an assumption (no primary source)
    from optimizer.load import load_problem

    bought = load_problem(ROOT / "problems" / "q3.yaml", sets=["catalog=[default]", "allow.buy=true"])
    mi = [w for w in bought.warnings if "owned-mi300x-8x-dc1" in w]
    assert len(mi) == 1 and "capex" in mi[0] and "assumption" in mi[0]
    rented = load_problem(ROOT / "problems" / "q3.yaml", sets=["catalog=[default]"])
    assert not [w for w in rented.warnings if "owned-mi300x-8x-dc1" in w and "assumption" in w]


def test_a_plan_names_the_assumptions_that_decide_it(tmp_path):
    # the toy's optimum (test_whatif_toy: 22,500) uses the on-demand unit in p1 and the one spot unit its
    # quota allows; mark the on-demand price and the spot quota as assumptions
    import copy

    from test_whatif_toy import TOY, write

    from optimizer import solve

    data = copy.deepcopy(TOY)
    od = next(o for o in data["offerings"] if o["id"] == "od")
    od["assumed"] = ["price_per_hour"]
    spot = next(o for o in data["offerings"] if o["id"] == "spot")
    spot["quota_source"] = "default (assumption): one unit as a planning baseline"
    plan = solve(write(tmp_path, data))
    assert plan.objective == pytest.approx(22_500) and plan.audit == []
    od_w = [w for w in plan.warnings if w.startswith("od:")]
    spot_w = [w for w in plan.warnings if w.startswith("spot:")]
    assert len(od_w) == 1 and "price_per_hour is an assumption" in od_w[0]
    assert len(spot_w) == 1 and "all 1 units its quota allows" in spot_w[0]
    # the unused L4 offering carries an assumption too: it decides nothing, so no warning
    l4 = next(o for o in data["offerings"] if o["id"] == "l4")
    l4["assumed"] = ["price_per_hour"]
    plan = solve(write(tmp_path, data, "toy2.yaml"))
    assert plan.audit == []
    assert not plan.usage["offering"].eq("l4").any()  # small's replica sits in the reserved unit
    assert not any(w.startswith("l4:") for w in plan.warnings)
