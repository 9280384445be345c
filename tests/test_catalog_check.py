"""`gpuopt catalog check`: each rule fires just outside its threshold and stays quiet just inside.

The thresholds are catalogs/check_rules.csv's: spot between 10 % (AWS and
Azure publish discounts up to 90 %) and 100 % of on-demand, at most 60 % on
GCP; a reservation below on-demand; an owned server's busy power per GPU at
most 1.82 × the GPU's TDP (700 W for an H100 SXM: 1,274 W per GPU, 10.192 kW
for 8) and at least 0.5 × (350 W, 2.8 kW for 8).

The price bands are given here (an H100 SXM rents on-demand for 2 to 10 USD
per GPU-hour, its server costs 30,000 to 40,000 per GPU) so the limits can be
worked by hand with the file's factors: a price may halve or double in a year
(drift 2), spot may be 10 % to 100 % of on-demand, a reservation up to 72 %
off, and an owned server's capex may be 1.358 times its server price (its
share of the fabric and installation).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from optimizer.importers import load_default_catalog
from optimizer.importers.check import check
from optimizer.schema import Offering
from conftest import gpuopt_here

ROOT = Path(__file__).resolve().parent.parent


def off(id, pricing="on_demand", price=100.0, provider="aws", **kw) -> Offering:
    base = dict(id=id, provider=provider, gpu="H100-SXM", gpus_per_unit=8, region="r1", pricing=pricing,
                instance_type="p5.48xlarge", source="a quote", date="2026-11", max_units=4, quota_source="stated")
    if pricing == "owned":
        base.update(capex=300_000.0, lifetime_years=4, power_kw=8.0, electricity_per_kwh=0.1)
    else:
        base["price_per_hour"] = price
    base.update(kw)
    return Offering(**base)


def rules_of(offerings) -> list[tuple[str, str]]:
    found = check(offerings, tdp_w={"H100-SXM": 700.0})
    return sorted(zip(found["rule"], found["offering"]))


def test_the_shipped_catalog_passes_every_rule():
    assert check(load_default_catalog()).empty
    r = gpuopt_here("catalog", "check", cwd=ROOT)
    assert r.returncode == 0 and "every rule holds" in r.stdout


@pytest.mark.parametrize("provider, spot, fires", [
    ("aws", 9.99, True), ("aws", 10.0, False),      # at least 10 % of on-demand 100
    ("aws", 100.0, True), ("aws", 99.9, False),     # below on-demand
    ("gcp", 60.0, True), ("gcp", 59.9, False),      # below 60 % on GCP
])
def test_spot_fraction(provider, spot, fires):
    pair = [off("x-od", provider=provider), off("x-spot", "spot", spot, provider=provider)]
    assert (("spot-fraction", "x-spot") in rules_of(pair)) is fires


@pytest.mark.parametrize("price, upfront, fires", [
    (100.0, 0.0, True), (99.9, 0.0, False),
    (90.0, 87_600.0, True),    # 90 + 87,600 / (12 × 730) = 100
    (90.0, 87_000.0, False),   # 90 + 87,000 / 8,760 = 99.93
])
def test_reserved_below_on_demand(price, upfront, fires):
    pair = [off("x-od"), off("x-1y", "reserved", price, upfront=upfront, term_months=12)]
    assert (("reserved-below-on-demand", "x-1y") in rules_of(pair)) is fires


@pytest.mark.parametrize("kw, fires", [(10.2, True), (10.19, False)])
def test_owned_power(kw, fires):
    server = off("srv", "owned", instance_type=None, power_kw=kw)
    assert (("owned-power", "srv") in rules_of([server])) is fires


BANDS = dict(rental_bands={"H100-SXM": (2.0, 10.0)}, server_bands={"H100-SXM": (30_000.0, 40_000.0)})


def band_rules(offering) -> list[str]:
    found = check([offering], tdp_w={"H100-SXM": 700.0}, **BANDS)
    return sorted(found["rule"])


@pytest.mark.parametrize("pricing, unit_price, upfront, fires", [
    ("on_demand", 160.0, 0.0, False), ("on_demand", 160.08, 0.0, True),  # at most 10 × 2 per GPU, × 8 GPUs
    ("on_demand", 8.0, 0.0, False), ("on_demand", 7.99, 0.0, True),      # at least 2 / 2 per GPU
    ("spot", 0.8, 0.0, False), ("spot", 0.79, 0.0, True),                # at least 2 × 0.10 / 2 = 0.1 per GPU
    ("spot", 160.0, 0.0, False), ("spot", 160.08, 0.0, True),            # at most 10 × 1.0 × 2 per GPU
    ("reserved", 2.24, 0.0, False), ("reserved", 2.23, 0.0, True),       # at least 2 × 0.28 / 2 = 0.28 per GPU
    ("reserved", 2.0, 2102.4, False),                                    # (2 + 2,102.4 / 8,760) / 8 = 0.28
    ("reserved", 2.0, 2100.0, True),
])
def test_price_band(pricing, unit_price, upfront, fires):
    o = off("x", pricing, unit_price, upfront=upfront or None, term_months=12 if pricing == "reserved" else None)
    assert ("price-band" in band_rules(o)) is fires


def test_a_gpu_type_without_a_band_is_named():
    assert band_rules(off("x", gpu="L4")) == ["price-band-missing"]


def test_the_shipped_bands_catch_an_instance_price_read_as_a_gpu_price():
    # AWS p5.48xlarge on-demand is 98.32 USD per instance-hour; recorded as one GPU's price it is 8 times too high
    good = off("p5-od", price=98.32)
    wrong = off("p5-as-gpu", price=98.32 * 8)
    found = check([good, wrong])
    assert list(zip(found["rule"], found["offering"])) == [("price-band", "p5-as-gpu")]


@pytest.mark.parametrize("capex, fires", [
    (434_560.0, False), (434_600.0, True),   # at most 40,000 × 1.358 = 54,320 per GPU, × 8
    (240_000.0, False), (239_999.0, True),   # at least 30,000 per GPU
])
def test_owned_capex(capex, fires):
    server = off("srv", "owned", instance_type=None, capex=capex)
    assert ("owned-capex" in band_rules(server)) is fires


@pytest.mark.parametrize("kw, fires", [(2.8, False), (2.79, True)])
def test_owned_power_floor(kw, fires):
    server = off("srv", "owned", instance_type=None, power_kw=kw)
    assert ("owned-power" in band_rules(server)) is fires


def test_every_band_has_a_source_and_a_date():
    for name in ("rental_price_bands.csv", "server_price_bands.csv"):
        with open(ROOT / "catalogs" / name, newline="") as f:
            rows = list(csv.DictReader(f))
        assert rows and all(r["source"] and r["date"] and 0 < float(r["low"]) <= float(r["high"]) for r in rows)


def test_source_and_supply():
    assert ("sourced", "a") in rules_of([off("a", source=None)])
    assert ("supply", "b") in rules_of([off("b", max_units=None)])
    assert ("supply", "c") in rules_of([off("c", quota_source=None)])
    assert rules_of([off("d")]) == []


def test_the_command_exits_1_and_names_the_offending_rows(tmp_path):
    path = tmp_path / "mine.yaml"
    rows = [o.model_dump(exclude_none=True) for o in (off("mine-od"), off("mine-spot", "spot", 5.0))]
    path.write_text(yaml.safe_dump({"offerings": rows}))
    r = gpuopt_here("catalog", "check", "--catalog", path, "--format", "json", cwd=ROOT)
    assert r.returncode == 1
    v = json.loads(r.stdout)["violations"]
    assert [(x["rule"], x["offering"]) for x in v] == [("spot-fraction", "mine-spot")]


def test_spot_is_the_middle_zones_price_not_the_cheapest_outlier():
    # p4d.24xlarge in us-east-1: four zones; the cheapest (2.47) is an outlier, the middle one is taken
    with open(ROOT / "catalogs" / "sources" / "skypilot-catalog" / "aws" / "vms.csv", newline="") as f:
        quotes = sorted(float(r["SpotPrice"]) for r in csv.DictReader(f)
                        if r["InstanceType"] == "p4d.24xlarge" and r["Region"] == "us-east-1" and r["SpotPrice"])
    assert len(quotes) == 4 and quotes[0] < 3 < quotes[1]
    shipped = {o.id: o for o in load_default_catalog()}["aws-p4d.24xlarge-us-east-1-spot"]
    assert shipped.price_per_hour == pytest.approx(quotes[2], abs=1e-4)


def test_gcp_spot_prices_the_check_rejects_are_left_out_and_named():
    ids = {o.id for o in load_default_catalog()}
    assert "gcp-a3-highgpu-8g-us-central1-spot" not in ids and "gcp-a3-highgpu-8g-us-central1-od" in ids
    header = (ROOT / "catalogs" / "offerings" / "gcp.yaml").read_text().split("provider:")[0]
    assert "gcp-a3-highgpu-8g-us-central1-spot: spot is 83% of on-demand" in header
