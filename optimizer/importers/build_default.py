"""Rebuild the shipped offering catalog (``catalogs/offerings/*.yaml``) from its sources.

A maintainer tool, not used at run time::

    python -m optimizer.importers.build_default [--data catalogs/sources] [--out catalogs/offerings]

``--data`` (default ``catalogs/sources``, shipped) holds the data the catalog is
sourced from: ``skypilot-catalog/<cloud>/vms.csv`` (SkyPilot price snapshots,
provenance in ``skypilot-catalog/SOURCES.md``) and ``finance_defaults.csv``
(research notes' price figures). Derived numbers (reserved prices, spot
interruption rates, owned capex and fixed costs) use the named defaults in
``catalogs/finance_defaults.csv``; every derivation is written into the
offering's ``source`` or ``notes`` and documented in ``docs/catalog.md``.
Topology and supply come last, from ``catalogs/topology.csv`` and
``catalogs/quotas.csv`` (:mod:`optimizer.importers.topology`).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from .. import catalog as _catalog
from ..schema import Offering
from .derive import interruptions_per_hour, sig, owned_capex, owned_fixed_per_month, reserved_price
from .offerings import dump_offering_file, gpu_name_map
from .skypilot import import_skypilot
from .check import check
from .topology import annotate, quota_rules, topology_rules

# --- SkyPilot snapshots: provenance (SOURCES.md) and observation dates -------------------------
# date = when the price was observed. SOURCES.md dates the GCP/Azure mirror (2026-05-20); for the
# other files it names only the index commit, so the date is the month the copy was taken into
# catalogs/sources (2026-11), an upper bound, unless a dated source shows the same prices.
SNAPSHOTS = {
    "aws": ("skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv (index commit 00148f2a, partial GPU "
            "subset)", "2026-11",
            "snapshot undated in SOURCES.md; p5/p4d/p4de prices equal the datareceipts us-east-1 list "
            "retrieved 2026-11-09 (finance_defaults.csv aws_p5_ondemand, aws_p4d_ondemand)"),
    "gcp": ("anycloud-sh/catalog mirror of SkyPilot's gcp/vms.csv (commit 62ff0a98, 2026-05-20)",
            "2026-05-20", "GPU row price + host VM row price in the same zone"),
    "azure": ("anycloud-sh/catalog mirror of SkyPilot's azure/vms.csv (commit 62ff0a98, 2026-05-20)",
              "2026-05-20", None),
    "lambda": ("skypilot-org/skypilot-catalog catalogs/v8/lambda/vms.csv (index commit 0f407038)",
               "2026-09",
               "same price in all 17 Lambda regions; prices equal lambda.ai/pricing as observed "
               "2026-09 (silybench-data; finance_defaults.csv lambda_h100_sxm_ondemand, lambda_b200_ondemand)"),
    "runpod": ("skypilot-org/skypilot-catalog catalogs/v7/runpod/vms.csv (index commit 0727c2bd)", "2026-11",
               "secure cloud; snapshot undated in SOURCES.md (v7 schema, may predate 2026); finance_notes.md "
               "lists RunPod H100 SXM $2.69 community / $3.49-3.99 secure per GPU-hour (2026-09/11)"),
    "vast": ("skypilot-org/skypilot-catalog catalogs/v8/vast/vms.csv (index commit 01b8cdda)", "2026-11",
             "Vast.ai marketplace snapshot (one host's asking price; capacity not guaranteed); "
             "snapshot undated in SOURCES.md"),
}

# (instance type, region) picked per provider; reserved=True adds 1- and 3-year commitments.
PICKS = {
    "aws": [("p5.48xlarge", "us-east-1", True), ("p5.4xlarge", "us-east-1", False),
            ("p5en.48xlarge", "us-east-1", True), ("p6-b200.48xlarge", "us-east-1", True),
            ("p4de.24xlarge", "us-east-1", True), ("p4d.24xlarge", "us-east-1", False),
            ("g6e.xlarge", "us-east-1", True), ("g6e.12xlarge", "us-east-1", False),
            ("g6.xlarge", "us-east-1", True), ("g6.12xlarge", "us-east-1", False),
            ("g5.xlarge", "us-east-1", True)],
    "gcp": [("a3-highgpu-8g", "us-central1", True), ("a3-highgpu-1g", "us-central1", False),
            ("a3-ultragpu-8g", "us-central1", True), ("a4-highgpu-8g", "us-central1", True),
            ("a2-ultragpu-8g", "us-central1", True), ("a2-ultragpu-1g", "us-central1", False),
            ("g2-standard-4", "us-central1", True), ("n1-highmem-8+1xT4", "us-central1", False)],
    "azure": [("Standard_ND96isr_H100_v5", "eastus2", True), ("Standard_ND96isr_H200_v5", "eastus2", True),
              ("Standard_ND96amsr_A100_v4", "eastus2", True), ("Standard_NC24ads_A100_v4", "eastus2", False),
              ("Standard_NC40ads_H100_v5", "eastus2", False), ("Standard_ND96isr_MI300X_v5", "eastus2", True),
              ("Standard_NC4as_T4_v3", "eastus2", False), ("Standard_NV36ads_A10_v5", "eastus2", False)],
    "lambda": [("gpu_8x_h100_sxm5", "us-east-1", False), ("gpu_1x_h100_sxm5", "us-east-1", False),
               ("gpu_1x_h100_pcie", "us-east-1", False), ("gpu_8x_b200_sxm6", "us-east-1", False),
               ("gpu_8x_a100_80gb_sxm4", "us-east-1", False), ("gpu_8x_a100", "us-east-1", False),
               ("gpu_1x_a10", "us-east-1", False), ("gpu_1x_gh200", "us-east-1", False)],
    "runpod": [("8x_H100-SXM_SECURE", "US", False), ("1x_H100-SXM_SECURE", "US", False),
               ("8x_H200-SXM_SECURE", "US", False), ("1x_H200-SXM_SECURE", "US", False),
               ("8x_B200_SECURE", "US", False), ("1x_A100-80GB-SXM_SECURE", "US", False),
               ("1x_A100-80GB_SECURE", "US", False),
               ("1x_L4_SECURE", "US", False), ("1x_RTX4090_SECURE", "US", False),
               ("8x_MI300X_SECURE", "US", False)],
    # Vast: the cheapest region of each instance type (marketplace hosts)
    "vast": [("8x-H100_SXM-32-65536", None, False), ("8x-H200-32-65536", None, False),
             ("1x-RTX_4090-32-65536", None, False), ("1x-RTX_5090-32-65536", None, False)],
}

# Monthly interruption band per instance family where one is published, else the default.
SPOT_BANDS = {
    ("aws", "p5.48xlarge"): (0.15, "p5 10-20% band (thundercompute, May 2025 [W]), midpoint"),
    ("aws", "p5en.48xlarge"): (0.15, "p5 family 10-20% band (thundercompute, May 2025 [W]), midpoint"),
    ("aws", "p4d.24xlarge"): (0.075, "p4d 5-10% band (thundercompute, May 2025 [W]), midpoint"),
    ("aws", "p4de.24xlarge"): (0.075, "p4d family 5-10% band (thundercompute, May 2025 [W]), midpoint"),
    ("aws", "g6.xlarge"): (0.025, "L4 <5% band (thundercompute, May 2025 [W]), midpoint"),
    ("aws", "g6.12xlarge"): (0.025, "L4 <5% band (thundercompute, May 2025 [W]), midpoint"),
}

CUD = {"aws": "cud_aws", "gcp": "cud_gcp", "azure": "cud_azure"}

# Nebius: per-GPU prices from nebius.com/prices (2026-09) via silybench-data, as carried in the
# catalogs/sources/finance_defaults.csv row nebius_h100 (value and notes). (gpu, gpus, $/GPU-h, label)
NEBIUS = [("H100-SXM", 8, 3.85, "h100"), ("H200", 8, 4.50, "h200"), ("B200", 8, 7.15, "b200"),
          ("L40S", 1, 1.55, "l40s")]

# Crusoe: the one spot price among the neocloud MI300X prices carried in the
# catalogs/sources/finance_defaults.csv row mi300x_neocloud ("Crusoe spot $1.71", USD per GPU-hour, 2026-05).
# The source names no instance shape and no region: the unit is one GPU (the source's own unit)
# and the region is "unspecified". (gpu, gpus, $/GPU-h, label, text that must be in the row's source)
CRUSOE_SPOT = ("MI300X", 1, 1.71, "mi300x", "Crusoe spot $1.71")

# Owned servers: (id stem, gpu, gpus, node price key or card key, max power source)
OWNED = [
    ("h100-sxm-8x", "H100-SXM", 8, "h100_8gpu_node_price", "dgx_h100_max_power_kw"),
    ("h200-8x", "H200", 8, "h200_8gpu_node_price", "dgx_h100_max_power_kw"),
    ("a100-80gb-8x", "A100-80GB", 8, "a100_8gpu_node_price", "dgx_a100_max_power_kw"),
    ("b200-8x", "B200", 8, "b200_8gpu_node_price", "dgx_b200_max_power_kw"),
    ("mi300x-8x", "MI300X", 8, "mi300x_8gpu_node_price", "gpu_tdp_mi300x_w"),
    ("l40s-1x", "L40S", 1, "l40s_card_price", "gpu_tdp_l40s_w"),
    ("l4-1x", "L4", 1, "l4_card_price", "gpu_tdp_l4_w"),
]


def _defaults() -> dict[str, tuple[float, str, str]]:
    table = _catalog.finance_defaults()
    return {r["name"]: (float(r["value"]), str(r["source"]), str(r["date"])) for _, r in table.iterrows()}


def _source_figures(data: Path) -> dict[str, dict[str, str]]:
    with open(data / "finance_defaults.csv", newline="", encoding="utf-8") as f:
        return {r["item"]: r for r in csv.DictReader(f)}


def _r(x: float, nd: int = 4) -> float:
    return float(round(x, nd))


def build(data: Path, skypilot: Path | None = None, date: str | None = None,
          skipped: list[str] | None = None) -> dict[str, list[Offering]]:
    """All shipped offerings, per provider file name.

    ``skypilot`` (a directory of ``<cloud>/vms.csv``, e.g. a fresh SkyPilot
    catalog) replaces the shipped snapshot of every cloud it has, with
    ``date`` as the observation date; a picked instance type missing from a
    fresh file is named in ``skipped`` and left out. From the shipped
    sources a missing pick is an error.
    """
    fin = _defaults()
    figures = _source_figures(data)
    aliases = gpu_name_map()
    known = set(aliases.values())
    out: dict[str, list[Offering]] = {}

    for provider, picks in PICKS.items():
        fresh = skypilot is not None and (skypilot / provider / "vms.csv").exists()
        if fresh:
            path = skypilot / provider / "vms.csv"
            origin, snap_date, note = f"SkyPilot catalog {path}", date, None
            rel = f"{path} (a SkyPilot vms.csv, prices observed {date})"
        else:
            origin, snap_date, note = SNAPSHOTS[provider]
            path = data / "skypilot-catalog" / provider / "vms.csv"
            rel = f"catalogs/sources/skypilot-catalog/{provider}/vms.csv = {origin}"
        offs, _ = import_skypilot(path, provider, date=snap_date, aliases=aliases, known_gpus=known)
        by_key: dict[tuple[str, str, str], Offering] = {}
        for o in offs:
            by_key[(o.instance_type, o.region, o.pricing)] = o
        chosen: list[Offering] = []
        for inst, region, reserve in picks:
            if region is None:  # cheapest region of this instance type
                cands = [o for o in offs if o.instance_type == inst and o.pricing == "on_demand"]
                if not cands:
                    if fresh and skipped is not None:
                        skipped.append(f"{provider}: {inst} is not in {path}")
                        continue
                    raise SystemExit(f"{provider}: {inst} not in {path}")
                region = min(cands, key=lambda o: o.price_per_hour).region
            od = by_key.get((inst, region, "on_demand"))
            if od is None:
                if fresh and skipped is not None:
                    skipped.append(f"{provider}: no on-demand price for {inst} in {region} in {path}")
                    continue
                raise SystemExit(f"{provider}: no on-demand price for {inst} in {region} ({path})")
            od.source = f"{rel}; on-demand Price (cheapest in region)"
            od.notes = "; ".join(p for p in (od.notes, note) if p)
            chosen.append(od)
            sp = by_key.get((inst, region, "spot"))
            if sp is not None:
                band, why = SPOT_BANDS.get((provider, inst), (
                    fin["spot_interruption_band_monthly"][0],
                    "default band (catalogs/finance_defaults.csv spot_interruption_band_monthly)"))
                sp.interruptions_per_hour = sig(interruptions_per_hour(band))
                sp.source = (f"{rel}; SpotPrice (median over zones); interruptions_per_hour derived: "
                             f"-ln(1 - {band:g}) / 730, {why}")
                sp.notes = "; ".join(p for p in (sp.notes.split("; interruptions_per_hour")[0], note) if p)
                chosen.append(sp)
            if reserve:
                for years, term in ((1, 12), (3, 36)):
                    key = f"{CUD[provider]}_{years}yr"
                    d, dsrc, ddate = fin[key]
                    price = _r(reserved_price(od.price_per_hour, d))
                    chosen.append(Offering(
                        id=od.id.removesuffix("-od") + f"-{years}y", provider=provider, gpu=od.gpu,
                        gpus_per_unit=od.gpus_per_unit, region=region, pricing="reserved",
                        instance_type=inst, price_per_hour=price, upfront=0.0, term_months=term,
                        source=(f"derived: on-demand {od.price_per_hour:g} x (1 - {d:g}) = {price:g}, "
                                f"d = {key} from catalogs/finance_defaults.csv ({dsrc}); on-demand from {rel}"),
                        date=od.date,
                        notes=(f"{years}-year commitment, no upfront, billed every hour of the term; "
                               f"discount dated {ddate}, on-demand price dated {od.date}"),
                    ))
        out[provider] = chosen

    # Nebius (no SkyPilot snapshot here): finance_defaults.csv nebius_h100 row.
    row = figures["nebius_h100"]
    neb: list[Offering] = []
    for gpu, n, per_gpu, label in NEBIUS:
        neb.append(Offering(
            id=f"nebius-{label}-{n}x-eu-north1-od", provider="nebius", gpu=gpu, gpus_per_unit=n,
            region="eu-north1", pricing="on_demand", price_per_hour=_r(per_gpu * n),
            source=(f"catalogs/sources/finance_defaults.csv nebius_h100 ({row['source']}; notes: {row['notes']}); "
                    f"{per_gpu:g} USD/GPU-hour x {n} GPUs"),
            date="2026-09",
            notes=("per-GPU list price times GPUs per VM; region eu-north1 (Finland) assumed: the source "
                   "gives one price list, not per-region prices"),
        ))
    out["nebius"] = neb

    # Crusoe (no SkyPilot snapshot): the Crusoe spot price in finance_defaults.csv mi300x_neocloud.
    row = figures["mi300x_neocloud"]
    gpu, n, per_gpu, label, quoted = CRUSOE_SPOT
    if quoted not in row["source"]:
        raise SystemExit(f"finance_defaults.csv mi300x_neocloud no longer quotes {quoted!r}: {row['source']!r}")
    band = fin["spot_interruption_band_monthly"][0]
    out["crusoe"] = [Offering(
        id=f"crusoe-{label}-{n}x-unspecified-spot", provider="crusoe", gpu=gpu, gpus_per_unit=n,
        region="unspecified", pricing="spot", price_per_hour=_r(per_gpu * n),
        interruptions_per_hour=sig(interruptions_per_hour(band)),
        source=(f"catalogs/sources/finance_defaults.csv mi300x_neocloud ({row['source']}; notes: {row['notes']}); "
                f"{per_gpu:g} USD/GPU-hour x {n} GPU; interruptions_per_hour derived: -ln(1 - {band:g}) / 730, "
                "default band (catalogs/finance_defaults.csv spot_interruption_band_monthly)"),
        date="2026-05",
        notes=("weak secondary source [W], a research note quoting a per-GPU-hour spot price; it names no "
               "instance shape, so the unit is one GPU, the source's own unit (assumed rentable singly: if "
               f"Crusoe rents MI300X only as 8-GPU VMs, set gpus_per_unit 8 and price_per_hour "
               f"{per_gpu * 8:g}); region 'unspecified': the source names none; no published Crusoe "
               "interruption band, so the default band, per unit (a training gang of N GPUs spans N units)"),
    )]

    # Owned servers
    v = {k: x[0] for k, x in fin.items()}
    owned: list[Offering] = []
    for stem, gpu, n, price_key, power_key in OWNED:
        base_price, psrc, pdate = fin[price_key]
        if n == 8:
            node_price = base_price
            capex = owned_capex(node_price, v["cluster_interconnect_fraction"], v["storage_install_misc_fraction"])
            capex_txt = (f"capex = node price {node_price:,.0f} / (1 - cluster_interconnect_fraction "
                         f"{v['cluster_interconnect_fraction']:g}) x (1 + storage_install_misc_fraction "
                         f"{v['storage_install_misc_fraction']:g}) = {capex:,.0f}")
        else:
            node_price = base_price * v["server_cost_over_gpu_cost"]
            capex = owned_capex(node_price, 0.0, v["storage_install_misc_fraction"])
            capex_txt = (f"capex = card price {base_price:,.0f} x server_cost_over_gpu_cost "
                         f"{v['server_cost_over_gpu_cost']:g} = server {node_price:,.0f}, x (1 + "
                         f"storage_install_misc_fraction {v['storage_install_misc_fraction']:g}) = {capex:,.0f}; "
                         "no scale-out fabric for a single-card inference server")
        if power_key.endswith("_kw"):
            max_kw = v[power_key]
            kw_txt = f"max {max_kw:g} kW ({power_key})"
        else:
            max_kw = v[power_key] / 1000.0 * n * v["chip_to_server_power"]
            kw_txt = (f"max = {n} x {v[power_key]:g} W ({power_key}) x chip_to_server_power "
                      f"{v['chip_to_server_power']:g} = {max_kw:.3f} kW")
        power_kw = max_kw * v["server_avg_power_fraction"]
        colo = v["colocation_per_kw_month"] * max_kw
        maint = v["maintenance_fraction_per_year"] * node_price / 12.0
        staff = v["staff_per_gpu_year"] * n / 12.0
        fixed = owned_fixed_per_month(max_kw, v["colocation_per_kw_month"], node_price,
                                      v["maintenance_fraction_per_year"], n, v["staff_per_gpu_year"])
        assert abs(fixed - (colo + maint + staff)) < 1e-6
        # a field is flagged as assumed when the default it mostly rests on is marked as an assumption
        # in catalogs/finance_defaults.csv (the loader warns when allow.buy enables such an offering)
        rests_on = {"capex": price_key, "fixed_per_month": "maintenance_fraction_per_year",
                    "idle_power_fraction": "idle_power_fraction"}
        assumed = [f for f, key in rests_on.items() if fin[key][1].lower().startswith("assumption")]
        owned.append(Offering(
            assumed=assumed or None,
            id=f"owned-{stem}-dc1", provider="owned", gpu=gpu, gpus_per_unit=n, region="dc1",
            pricing="owned", capex=_r(capex, 0), lifetime_years=v["lifetime_years"],
            residual_fraction=v["residual_fraction"], power_kw=_r(power_kw, 3),
            idle_power_fraction=v["idle_power_fraction"], pue=v["pue"],
            electricity_per_kwh=v["electricity_per_kwh"], fixed_per_month=_r(fixed, 2),
            source=(f"derived from catalogs/finance_defaults.csv: {price_key} ({psrc}); power {power_key}; "
                    "lifetime_years, residual_fraction, idle_power_fraction, pue, electricity_per_kwh, "
                    "colocation_per_kw_month, maintenance_fraction_per_year, staff_per_gpu_year"),
            date=pdate,
            notes=(f"{capex_txt}. power_kw = {kw_txt} x server_avg_power_fraction "
                   f"{v['server_avg_power_fraction']:g} = {power_kw:.3f} kW busy. fixed_per_month = colocation "
                   f"{v['colocation_per_kw_month']:g} USD/kW-month x {max_kw:.3f} kW contracted (= {colo:,.2f}) "
                   f"+ maintenance {v['maintenance_fraction_per_year']:g} x server {node_price:,.0f} / 12 "
                   f"(= {maint:,.2f}) + staff {v['staff_per_gpu_year']:g} USD/GPU-year x {n} / 12 "
                   f"(= {staff:,.2f}) = {fixed:,.2f}. Region dc1 is a placeholder: set region, "
                   "existing_units and max_units for your site in the problem file"),
        ))
    out["owned"] = owned
    return out


HEADERS = {
    "crusoe": ("crusoe offerings: a spot price per GPU per hour (one unit = one GPU: the source names no\n"
               "instance shape) from a research note; region unspecified.\n"
               "Every offering carries its source and the date its price was observed.\n"
               "Generated by: python -m optimizer.importers.build_default (see docs/catalog.md)."),
    "owned": ("Owned GPU servers (buy): capex, lifetime, power and fixed costs per server.\n"
              "Every number is derived from catalogs/finance_defaults.csv; the arithmetic is in each notes.\n"
              "Region dc1 is a placeholder: copy an offering into your problem file to set your site.\n"
              "Generated by: python -m optimizer.importers.build_default (see docs/catalog.md)."),
}


def build_checked(data: Path, skypilot: Path | None = None, date: str | None = None,
                  skipped: list[str] | None = None) -> tuple[dict[str, list[Offering]], dict[str, str]]:
    """:func:`build`, then topology and supply, then the catalog check.

    Returns the offerings per provider file and what the check left out
    (offering id -> the rule's message): a price a buyer would reject
    (``catalogs/check_rules.csv``) is dropped, and the file says which and why.
    """
    files = build(data, skypilot=skypilot, date=date, skipped=skipped)
    topo, quotas = topology_rules(), quota_rules()  # catalogs/topology.csv, catalogs/quotas.csv
    files = {p: [annotate(o, topo, quotas) for o in offs] for p, offs in files.items()}
    bad = check([o for offs in files.values() for o in offs])
    price_rules = bad[bad["rule"].isin(["spot-fraction", "reserved-below-on-demand", "price-band"])]
    dropped = dict(zip(price_rules["offering"], price_rules["message"]))
    return {p: [o for o in offs if o.id not in dropped] for p, offs in files.items()}, dropped


def write_files(files: dict[str, list[Offering]], dropped: dict[str, str], out: Path) -> list[Path]:
    """One offering file per provider in ``out``, with its header (what the check left out included)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for provider, offs in files.items():
        header = HEADERS.get(provider, (
            f"{provider} offerings: on-demand and spot prices per unit (instance) per hour"
            + (", reserved 1-/3-year derived from the commitment discount" if provider in CUD else "")
            + ".\nEvery offering carries its source and the date its price was observed.\n"
            "Generated by: python -m optimizer.importers.build_default (see docs/catalog.md)."))
        gone = [f"  {oid}: {why}" for oid, why in dropped.items() if oid.startswith(f"{provider}-")]
        if gone:
            header += ("\nLeft out by the catalog check (gpuopt catalog check; catalogs/check_rules.csv):\n"
                       + "\n".join(gone))
        dump_offering_file(out / f"{provider}.yaml", offs, provider=provider, header=header)
        written.append(out / f"{provider}.yaml")
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=_catalog.CATALOG_DIR / "sources",
                    help="source data directory (default: catalogs/sources)")
    ap.add_argument("--out", type=Path, default=_catalog.CATALOG_DIR / "offerings")
    args = ap.parse_args(argv)
    files, dropped = build_checked(args.data)
    for path in write_files(files, dropped, args.out):
        print(f"{path.stem}: {len(files[path.stem])} offerings -> {path}")


if __name__ == "__main__":
    main()
