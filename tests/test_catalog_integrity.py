"""The shipped offering catalogs and finance defaults: valid, sourced, dated, covering."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import pandas as pd
import pytest

from optimizer import catalog as cat
from optimizer.errors import InputError
from optimizer.importers import gpu_name_map, load_catalogs, load_offering_file
from optimizer.importers.derive import interruptions_per_hour
from optimizer.schema import Offering
from optimizer.yamlio import read_yaml

FILES = cat.offering_catalog_files("default")
DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
REQUIRED_GPUS = ["H100-SXM", "H200", "A100-80GB", "L40S", "L4", "A10G", "B200"]
CUD = {"aws": "cud_aws", "gcp": "cud_gcp", "azure": "cud_azure"}


@pytest.fixture(scope="module")
def offerings() -> list[Offering]:
    return load_catalogs(["default"])


@pytest.fixture(scope="module")
def finance() -> dict[str, float]:
    t = cat.finance_defaults()
    return dict(zip(t["name"], t["value"].astype(float)))


def test_catalog_files_have_the_documented_layout():
    names = {f.stem for f in FILES}
    assert {"aws", "gcp", "azure", "lambda", "runpod", "nebius", "owned"} <= names
    for f in FILES:
        data = read_yaml(f)
        assert isinstance(data, dict) and set(data) <= {"provider", "source", "date", "notes", "offerings"}
        assert data["provider"] == f.stem
        assert data["offerings"], f
        # every offering carries its own source and date (not only inherited from the header)
        for raw in data["offerings"]:
            assert raw.get("source") and raw.get("date"), (f, raw.get("id"))
            assert raw.get("provider") == f.stem


def test_every_offering_validates_and_names_a_known_gpu(offerings):
    gpus = set(cat.gpu_table()["name"])
    assert all(isinstance(o, Offering) for o in offerings)
    for o in offerings:
        assert o.gpu in gpus, o.id
    # strict loading with GPU names resolved gives the same offerings
    assert len(load_catalogs(["default"], gpu_names=gpu_name_map())) == len(offerings)


def test_ids_unique_and_readable(offerings):
    ids = [o.id for o in offerings]
    assert len(ids) == len(set(ids))
    for o in offerings:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", o.id), o.id
        assert o.id.startswith(f"{o.provider}-")
        suffix = {"on_demand": "-od", "spot": "-spot", "owned": "-dc1"}.get(o.pricing)
        if suffix:
            assert o.id.endswith(suffix), o.id
        else:
            assert o.id.endswith(f"-{o.term_months // 12}y"), o.id


def test_prices_positive_sourced_and_dated(offerings):
    for o in offerings:
        assert o.source and len(o.source) > 20, o.id
        assert o.date is not None and DATE.match(str(o.date)), (o.id, o.date)
        assert "2019" < str(o.date)[:4] <= "2026", (o.id, o.date)
        if o.pricing == "owned":
            for f in ("capex", "lifetime_years", "power_kw", "electricity_per_kwh", "fixed_per_month", "pue",
                      "idle_power_fraction", "residual_fraction"):
                v = getattr(o, f)
                assert v is not None and v > 0, (o.id, f)
        else:
            assert o.price_per_hour is not None and o.price_per_hour > 0, o.id
        # supply: a quota with the sentence saying where it comes from (a default says it is one)
        assert o.max_units is not None and o.quota_source and "(20" in o.quota_source, o.id


def test_size_is_sensible(offerings):
    assert 60 <= len(offerings) <= 150


def test_at_least_five_providers_with_on_demand_and_spot(offerings):
    """Issue 4: on-demand and spot from at least five providers, every offering sourced and dated."""
    by_kind = defaultdict(set)
    for o in offerings:
        by_kind[o.pricing].add(o.provider)
        assert o.source and o.date, o.id
    assert len(by_kind["on_demand"]) >= 5, sorted(by_kind["on_demand"])
    assert len(by_kind["spot"]) >= 5, sorted(by_kind["spot"])
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= by_kind["on_demand"]
    # lambda, nebius and vast publish no spot price in our sources; crusoe's is a research note's
    assert {"aws", "gcp", "azure", "runpod", "crusoe"} <= by_kind["spot"]


def test_crusoe_spot_is_the_sourced_per_gpu_price_with_its_assumptions_stated(offerings):
    (o,) = [o for o in offerings if o.provider == "crusoe"]
    assert (o.gpu, o.pricing, o.gpus_per_unit, o.region) == ("MI300X", "spot", 1, "unspecified")
    assert o.price_per_hour == 1.71 and str(o.date) == "2026-05"
    assert "mi300x_neocloud" in o.source and "Crusoe spot $1.71" in o.source
    shared = cat.finance_defaults()
    band = float(shared.loc[shared["name"] == "spot_interruption_band_monthly", "value"].iloc[0])
    assert o.interruptions_per_hour == pytest.approx(interruptions_per_hour(band), rel=1e-5)  # 6 significant digits
    # what the source does not say is said in notes
    assert "no instance" in o.notes and "region 'unspecified'" in o.notes and "default band" in o.notes


@pytest.mark.parametrize("gpu", REQUIRED_GPUS)
def test_required_gpus_have_on_demand_and_spot(offerings, gpu):
    kinds = {o.pricing for o in offerings if o.gpu == gpu}
    assert {"on_demand", "spot"} <= kinds, (gpu, kinds)


def test_spot_offerings_carry_a_derived_interruption_rate(offerings):
    bands = {0.025, 0.075, 0.15}
    rates = {round(interruptions_per_hour(b), 9) for b in bands}
    for o in offerings:
        if o.pricing == "spot":
            assert o.interruptions_per_hour is not None and o.interruptions_per_hour > 0, o.id
            assert min(abs(o.interruptions_per_hour - r) for r in rates) < 1e-8, o.id
            assert "-ln(1 - " in o.source, o.id


def test_reserved_offerings_derive_from_on_demand_and_documented_discount(offerings, finance):
    by_id = {o.id: o for o in offerings}
    reserved = [o for o in offerings if o.pricing == "reserved"]
    assert {o.provider for o in reserved} == set(CUD)
    terms = defaultdict(set)
    for o in reserved:
        years = o.term_months // 12
        terms[o.provider].add(years)
        od = by_id[o.id.rsplit("-", 1)[0] + "-od"]
        d = finance[f"{CUD[o.provider]}_{years}yr"]
        assert o.price_per_hour == pytest.approx(od.price_per_hour * (1 - d), abs=1e-4), o.id
        assert o.source.startswith("derived: on-demand"), o.id
        assert (o.gpu, o.gpus_per_unit, o.region) == (od.gpu, od.gpus_per_unit, od.region)
        assert o.upfront == 0
    assert all(t == {1, 3} for t in terms.values())


def test_owned_servers_follow_the_finance_defaults(offerings, finance):
    owned = {o.gpu: o for o in offerings if o.pricing == "owned"}
    assert {"H100-SXM", "H200", "A100-80GB", "B200", "MI300X", "L40S", "L4"} <= set(owned)
    for gpu in ("H100-SXM", "H200", "A100-80GB", "B200", "MI300X"):
        assert owned[gpu].gpus_per_unit == 8
    assert owned["L40S"].gpus_per_unit == owned["L4"].gpus_per_unit == 1
    h100 = owned["H100-SXM"]
    node = finance["h100_8gpu_node_price"]
    assert h100.capex == pytest.approx(node / (1 - finance["cluster_interconnect_fraction"])
                                       * (1 + finance["storage_install_misc_fraction"]), abs=1)
    max_kw = finance["dgx_h100_max_power_kw"]
    assert h100.power_kw == pytest.approx(max_kw * finance["server_avg_power_fraction"], abs=1e-3)
    fixed = (finance["colocation_per_kw_month"] * max_kw + finance["maintenance_fraction_per_year"] * node / 12
             + finance["staff_per_gpu_year"] * 8 / 12)
    assert h100.fixed_per_month == pytest.approx(fixed, abs=0.01)
    for o in owned.values():
        assert o.region == "dc1"
        assert "fixed_per_month = colocation" in o.notes and "capex =" in o.notes
        assert o.lifetime_years == finance["lifetime_years"]
        assert o.pue == finance["pue"] and o.electricity_per_kwh == finance["electricity_per_kwh"]
        assert o.idle_power_fraction == finance["idle_power_fraction"]
        assert o.residual_fraction == finance["residual_fraction"]


def test_finance_defaults_table_is_named_sourced_and_dated():
    t = pd.read_csv(cat.CATALOG_DIR / "finance_defaults.csv", dtype=str, keep_default_na=False)
    assert list(t.columns) == ["name", "value", "unit", "source", "date", "description"]
    assert t["name"].is_unique
    for _, r in t.iterrows():
        assert math.isfinite(float(r["value"])), r["name"]
        assert r["source"] and r["description"], r["name"]
        assert DATE.match(r["date"]), (r["name"], r["date"])
    needed = {"discount_rate", "pue", "electricity_per_kwh", "colocation_per_kw_month", "lifetime_years",
              "residual_fraction", "idle_power_fraction", "spot_interruption_band_monthly",
              "cud_aws_1yr", "cud_aws_3yr", "cud_gcp_1yr", "cud_gcp_3yr", "cud_azure_1yr", "cud_azure_3yr"}
    assert needed <= set(t["name"])


def test_loader_errors_name_file_field_and_value(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("offerings:\n  - {id: x, gpu: H100-SXM, gpus_per_unit: 8, region: r, pricing: spot,"
                   " price_per_hour: -3}\n")
    with pytest.raises(InputError) as exc:
        load_offering_file(bad)
    e = exc.value
    assert e.file == str(bad) and e.field == "offerings[x].price_per_hour" and e.value == -3
    bad.write_text("offerings:\n  - {id: x, gpu: H100-SXM, gpus_per_unit: 8, region: r, pricing: spot,"
                   " price_per_hour: 3, capx: 1}\n")
    with pytest.raises(InputError, match="unknown key 'capx'"):
        load_offering_file(bad)
    bad.write_text("offerings:\n  - {id: x, gpu: H1000, gpus_per_unit: 8, region: r, pricing: spot,"
                   " price_per_hour: 3}\n")
    with pytest.raises(InputError) as exc:
        load_offering_file(bad, gpu_names=gpu_name_map())
    assert exc.value.field == "offerings[x].gpu" and exc.value.suggestion == "H200"
    bad.write_text("offerings:\n  - {id: x, gpu: h100, gpus_per_unit: 8, region: r, pricing: on_demand,"
                   " price_per_hour: 3}\n  - {id: x, gpu: L4, gpus_per_unit: 1, region: r, pricing: on_demand,"
                   " price_per_hour: 1}\n")
    with pytest.raises(InputError, match="duplicate offering id"):
        load_offering_file(bad)
    with pytest.raises(InputError, match="file not found"):
        load_offering_file(tmp_path / "missing.yaml")


def test_file_header_defaults_and_alias_resolution(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("provider: acme\nsource: quote 42\ndate: 2026-10-01\nofferings:\n"
                 "  - {id: acme-h100, gpu: h100, gpus_per_unit: 8, region: r1, pricing: on_demand,"
                 " price_per_hour: 20}\n")
    (o,) = load_offering_file(f, gpu_names=gpu_name_map())
    assert (o.provider, o.source, str(o.date), o.gpu) == ("acme", "quote 42", "2026-10-01", "H100-SXM")
    both = load_catalogs(["default", "mine.yaml"], tmp_path)
    assert both[-1].id == "acme-h100"
    dup = tmp_path / "dup.yaml"
    dup.write_text("offerings:\n  - {id: aws-p5.48xlarge-us-east-1-od, gpu: H100-SXM, gpus_per_unit: 8,"
                   " region: us-east-1, pricing: on_demand, price_per_hour: 40}\n")
    with pytest.raises(InputError, match="also defined"):
        load_catalogs(["default", "dup.yaml"], tmp_path)
    replaced = load_catalogs(["default", "dup.yaml"], tmp_path, replace=True)
    assert {o.id: o.price_per_hour for o in replaced}["aws-p5.48xlarge-us-east-1-od"] == 40
