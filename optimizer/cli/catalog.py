"""``gpuopt catalog ...``: list and show GPUs, models and offerings; import price catalogs.

* ``gpuopt catalog gpus [--gpu G] [--format table|json|csv]``
* ``gpuopt catalog models [--model M] [--format ...]``
* ``gpuopt catalog offerings [--gpu G] [--provider P] [--pricing K] [--region R]
  [--catalog default|FILE] [--format ...]``
* ``gpuopt catalog show ID`` (an offering id, a GPU type or a model name)
* ``gpuopt catalog import skypilot PATH --provider NAME -o OUT.yaml [--force]``

Filters are repeatable and take comma-separated lists; names match
case-insensitively (GPU and model aliases too). An unknown name is an input
error (exit 2) with the nearest valid name.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sys
from pathlib import Path

import click

from ..errors import InputError, suggest, unknown_name
from ..importers.derive import DEFAULT_INTERRUPTION_BAND
from ..vocabulary import PRICING_KINDS

# the catalogs (pandas, pydantic) are imported by the command that reads them, not by ``gpuopt --help``

FORMATS = click.Choice(["table", "json", "csv"], case_sensitive=False)

# Columns shown in the offerings table (JSON and CSV carry every field).
OFFERING_TABLE = ["id", "provider", "gpu", "gpus_per_unit", "region", "pricing", "price_per_hour",
                  "price_per_gpu_hour", "capex", "term_months", "fabric", "fabric_gbps_per_gpu",
                  "max_cluster_units", "max_units", "quota", "date"]
OFFERING_KEYS = ["id", "provider", "gpu", "gpus_per_unit", "region", "pricing", "instance_type",
                 "price_per_hour", "price_per_gpu_hour"]
GPU_TABLE = ["name", "vram_gb", "mem_bw_tbs", "bf16_dense_tflops", "fp8_dense_tflops", "tdp_w", "aliases"]
MODEL_TABLE = ["name", "layers", "hidden_size", "heads", "kv_heads", "ffn_size", "experts", "max_context",
               "aliases"]

PRICING_ALIASES = {k: k for k in PRICING_KINDS}
PRICING_ALIASES.update({"on-demand": "on_demand", "ondemand": "on_demand", "od": "on_demand",
                        "reserve": "reserved", "commit": "reserved", "buy": "owned"})


# --- helpers -----------------------------------------------------------------------------------

def _split(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(p.strip() for p in str(v).split(",") if p.strip())
    return out


def _clean(value):
    """JSON-safe scalar: NaN -> None, dates -> ISO, numpy -> python."""
    if value is None:
        return None
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _emit(rows: list[dict], fmt: str, table_cols: list[str], empty: str) -> None:
    import pandas as pd

    fmt = fmt.lower()
    rows = [{k: _clean(v) for k, v in r.items()} for r in rows]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if fmt == "csv":
        cols: list[str] = []
        for r in rows:
            cols.extend(k for k in r if k not in cols)
        flat = [{k: (";".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()} for r in rows]
        click.echo(pd.DataFrame(flat, columns=cols).to_csv(index=False), nl=False)
        return
    if not rows:
        click.echo(empty)
        return
    cols = [c for c in table_cols if any(r.get(c) is not None for r in rows)]
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    for c in cols:
        df[c] = df[c].map(_cell)
    click.echo(df.to_string(index=False))


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return ";".join(map(str, v))
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    if isinstance(v, float):
        return f"{v:,.4f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    text = str(v)
    return text if len(text) <= 48 else text[:45] + "..."


def _resolve_many(kind: str, values: list[str], mapping: dict[str, str], option: str) -> set[str]:
    out = set()
    for v in values:
        hit = mapping.get(v.strip().lower())
        if hit is None:
            raise unknown_name(kind, v, set(mapping.values()), field=option, value=v)
        out.add(hit)
    return out


def _gpu_map() -> dict[str, str]:
    from ..importers import gpu_name_map

    return gpu_name_map()


def _model_map() -> dict[str, str]:
    from .. import catalog as _catalog

    models = _catalog.model_entries()
    return _catalog.alias_map([m["name"] for m in models], [m.get("aliases") for m in models])


def _gpu_rows() -> list[dict]:
    from .. import catalog as _catalog

    table = _catalog.gpu_table()
    rows = []
    for rec in table.to_dict(orient="records"):
        rec = {k: _clean(v) for k, v in rec.items()}
        rec["aliases"] = list(_catalog.split_aliases(rec.get("aliases")))
        rows.append(rec)
    return rows


def _model_rows() -> list[dict]:
    from .. import catalog as _catalog

    rows = []
    for m in _catalog.model_entries():
        rec = {k: _clean(v) for k, v in m.items()}
        rows.append(rec)
    return rows


def _offering_rows(catalogs: tuple[str, ...]) -> list[dict]:
    from ..importers import load_catalogs, offering_row

    # as in a problem file: a later catalog's offering replaces an earlier one with the same id
    offs = load_catalogs(_split(catalogs) or ["default"], Path.cwd(), gpu_names=_gpu_map(), replace=True)
    rows = []
    for off in offs:
        row = offering_row(off)
        row.setdefault("price_per_hour", None)
        row["price_per_gpu_hour"] = (round(off.price_per_hour / off.gpus_per_unit, 6)
                                     if off.price_per_hour is not None else None)
        # where the supply figure comes from, in one word for the table (quota_source has the sentence)
        if off.quota_source is not None:
            row["quota"] = "default" if off.quota_source.lower().startswith("default") else "stated"
        ordered = {k: row.get(k) for k in OFFERING_KEYS}
        ordered.update({k: v for k, v in row.items() if k not in ordered})
        rows.append(ordered)
    return rows


def _match_names(kind: str, values: list[str], present: list[str], option: str) -> set[str]:
    lowered = {p.lower(): p for p in present if p}
    out = set()
    for v in values:
        if v.lower() not in lowered:
            raise InputError(f"no offering has {kind} {v!r}", field=option, value=v,
                             allowed=", ".join(sorted(set(lowered.values()))[:40]),
                             suggestion=suggest(v, lowered.values()))
        out.add(lowered[v.lower()])
    return out


# --- commands ----------------------------------------------------------------------------------

@click.group()
def catalog() -> None:
    """List and show GPUs, models and offerings; import price catalogs."""


@catalog.command("gpus")
@click.option("--gpu", "gpus", multiple=True, help="Only these GPU types (names or aliases; repeatable).")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
def gpus_cmd(gpus: tuple[str, ...], fmt: str) -> None:
    """GPU types of the shipped catalog (catalogs/gpus.csv)."""
    rows = _gpu_rows()
    wanted = _split(gpus)
    if wanted:
        keep = _resolve_many("GPU type", wanted, _gpu_map(), "--gpu")
        rows = [r for r in rows if r["name"] in keep]
    _emit(rows, fmt, GPU_TABLE, "no GPU types match")


@catalog.command("models")
@click.option("--model", "models", multiple=True, help="Only these models (names or aliases; repeatable).")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
def models_cmd(models: tuple[str, ...], fmt: str) -> None:
    """Model architectures of the shipped catalog (catalogs/models.yaml)."""
    rows = _model_rows()
    wanted = _split(models)
    if wanted:
        keep = _resolve_many("model", wanted, _model_map(), "--model")
        rows = [r for r in rows if r["name"] in keep]
    _emit(rows, fmt, MODEL_TABLE, "no models match")


@catalog.command("offerings")
@click.option("--gpu", "gpus", multiple=True, help="GPU types (names or aliases; repeatable, comma lists).")
@click.option("--provider", "providers", multiple=True, help="Providers (repeatable).")
@click.option("--pricing", "pricings", multiple=True,
              help="on_demand | spot | reserved | owned (repeatable).")
@click.option("--region", "regions", multiple=True, help="Regions (repeatable).")
@click.option("--catalog", "catalogs", multiple=True,
              help="Offering catalogs: 'default' (shipped) and/or YAML files. Default: default.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
def offerings_cmd(gpus, providers, pricings, regions, catalogs, fmt) -> None:
    """Offerings (rent, reserve, buy): price per unit-hour, or capex for owned."""
    rows = _offering_rows(catalogs)
    if _split(gpus):
        keep = _resolve_many("GPU type", _split(gpus), _gpu_map(), "--gpu")
        rows = [r for r in rows if r["gpu"] in keep]
    if _split(pricings):
        keep = _resolve_many("pricing", _split(pricings), PRICING_ALIASES, "--pricing")
        rows = [r for r in rows if r["pricing"] in keep]
    all_rows = _offering_rows(catalogs) if (providers or regions) else rows
    if _split(providers):
        keep = _match_names("provider", _split(providers), [r.get("provider") for r in all_rows], "--provider")
        rows = [r for r in rows if r.get("provider") in keep]
    if _split(regions):
        keep = _match_names("region", _split(regions), [r.get("region") for r in all_rows], "--region")
        rows = [r for r in rows if r.get("region") in keep]
    _emit(rows, fmt, OFFERING_TABLE, "no offerings match")


@catalog.command("check")
@click.option("--catalog", "catalogs", multiple=True,
              help="Offering catalogs to check: 'default' (shipped) and/or YAML files. Default: default.")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
def check_cmd(catalogs, fmt) -> None:
    """Check offerings against the rules a buyer would apply (catalogs/check_rules.csv); exit 1 on a violation."""
    from ..importers import load_catalogs
    from ..importers.check import check

    offs = load_catalogs(_split(catalogs) or ["default"], Path.cwd(), gpu_names=_gpu_map(), replace=True)
    bad = check(offs)
    if fmt.lower() == "json":
        click.echo(json.dumps({"offerings": len(offs), "violations": bad.to_dict("records")}, indent=2))
    elif fmt.lower() == "csv":
        click.echo(bad.to_csv(index=False), nl=False)
    elif bad.empty:
        click.echo(f"{len(offs)} offerings: every rule holds")
    else:
        click.echo(f"{len(bad)} violation(s) in {bad['offering'].nunique()} of {len(offs)} offerings:")
        click.echo(bad[["rule", "offering", "message"]].to_string(index=False))
    if not bad.empty:
        sys.exit(1)


@catalog.command("refresh")
@click.option("--skypilot", "skypilot", required=True, type=click.Path(file_okay=False, exists=True),
              help="A directory of <cloud>/vms.csv (SkyPilot's catalog layout: aws, gcp, azure, lambda, runpod, vast).")
@click.option("-o", "--output", "out", type=click.Path(file_okay=False), default=None,
              help="Offering directory to compare with and write (default: the shipped catalogs/offerings).")
@click.option("--date", default=None, help="When the prices were observed (default: today).")
@click.option("--threshold", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="Report prices that moved by more than this share.")
@click.option("--dry-run", is_flag=True, help="Print the diff only; write nothing.")
@click.option("--force", is_flag=True, help="Write over the existing offering files.")
def refresh_cmd(skypilot, out, date, threshold, dry_run, force) -> None:
    """Rebuild the rented offerings from fresh SkyPilot price files; print what changed, then write."""
    from .. import catalog as _catalog
    from ..importers.refresh import refresh, write

    if date is not None and not _DATE_RE.match(date):
        raise InputError("date must be YYYY-MM-DD or YYYY-MM", field="--date", value=date)
    target = Path(out) if out else _catalog.CATALOG_DIR / "offerings"
    result = refresh(Path(skypilot), target, date=date, threshold=threshold)
    d = result.diff
    click.echo(f"{(d['change'] == 'added').sum()} added, {(d['change'] == 'removed').sum()} removed, "
               f"{(d['change'] == 'price moved').sum()} prices moved by more than {threshold:.0%}")
    if len(d):
        click.echo(d.to_string(index=False, na_rep="-"))
    for line in result.skipped:
        click.echo(f"skipped: {line}", err=True)
    for oid, why in result.dropped.items():
        click.echo(f"left out by the catalog check: {oid}: {why}", err=True)
    if dry_run:
        return
    existing = sorted(target.glob("*.yaml")) if target.exists() else []
    if existing and not force:
        raise InputError(f"would overwrite {len(existing)} offering file(s), e.g. {existing[0]}", field="--output",
                         value=str(target), allowed="--dry-run to see the diff, --force to write")
    for path in write(result, target):
        click.echo(f"wrote {path}", err=True)


@catalog.command("show")
@click.argument("name")
@click.option("--catalog", "catalogs", multiple=True,
              help="Offering catalogs to search: 'default' and/or YAML files. Default: default.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"], case_sensitive=False), default="table",
              show_default=True)
def show_cmd(name: str, catalogs, fmt: str) -> None:
    """Show one offering (by id), GPU type or model (by name or alias)."""
    key = name.strip().lower()
    found: dict | None = None
    kind = ""
    offerings = _offering_rows(catalogs)
    for r in offerings:
        if r["id"].lower() == key:
            found, kind = r, "offering"
            break
    if found is None:
        gmap = _gpu_map()
        if key in gmap:
            found = next(r for r in _gpu_rows() if r["name"] == gmap[key])
            kind = "gpu"
    if found is None:
        mmap = _model_map()
        if key in mmap:
            found = next(r for r in _model_rows() if r["name"] == mmap[key])
            kind = "model"
    if found is None:
        choices = [r["id"] for r in offerings] + list(set(_gpu_map().values())) + list(set(_model_map().values()))
        raise InputError(f"no offering, GPU type or model named {name!r}", field="NAME", value=name,
                         allowed="an offering id (gpuopt catalog offerings), a GPU type or a model",
                         suggestion=suggest(name, choices))
    record = {"kind": kind, **{k: _clean(v) for k, v in found.items() if v is not None}}
    if fmt.lower() == "json":
        click.echo(json.dumps(record, indent=2))
        return
    width = max(len(k) for k in record)
    for k, v in record.items():
        if isinstance(v, list):
            v = ", ".join(map(str, v))
        click.echo(f"{k.ljust(width)}  {v}")


@catalog.group("import")
def import_group() -> None:
    """Import a foreign price catalog as a gpuopt offering file."""


_DATE_RE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


@import_group.command("skypilot")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--provider", required=True, help="Cloud the vms.csv describes (aws, gcp, azure, lambda, ...).")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="Offering file to write (YAML).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--date", "date", default=None,
              help="When the prices were observed (YYYY-MM-DD or YYYY-MM). Default: the file's modification date.")
@click.option("--gpu", "gpus", multiple=True, help="Keep only these GPU types (repeatable).")
@click.option("--region", "regions", multiple=True, help="Keep only these regions (repeatable).")
@click.option("--no-spot", is_flag=True, help="Write on-demand offerings only.")
@click.option("--spot-zone", type=click.Choice(["median", "cheapest"]), default="median", show_default=True,
              help="Which zone's spot price a region gets: the middle one, or the cheapest (often an outlier).")
@click.option("--interruption-band", type=float, default=DEFAULT_INTERRUPTION_BAND, show_default=True,
              help="Monthly spot interruption band p; spot offerings get -ln(1-p)/730 interruptions per hour.")
def import_skypilot_cmd(path, provider, output, force, date, gpus, regions, no_spot, spot_zone,
                        interruption_band) -> None:
    """Import a SkyPilot vms.csv (any cloud; columns read by name) into OUTPUT.

    One on-demand and one spot offering per instance type and region (the
    middle zone's spot price), with the fabric and supply of catalogs/topology.csv and
    catalogs/quotas.csv where a rule matches. Accelerators that are not gpuopt GPU types, fractional GPU
    counts and placeholder prices are reported on stderr, not imported.
    """
    from ..importers.offerings import dump_offering_file, load_offering_file
    from ..importers.skypilot import import_skypilot
    from ..importers.topology import annotate, quota_rules, topology_rules

    out = Path(output)
    if out.exists() and not force:
        raise InputError("output file already exists; pass --force to overwrite it", file=str(out),
                         field="--output")
    if date is not None and not _DATE_RE.match(date):
        raise InputError("date must be YYYY-MM-DD or YYYY-MM", field="--date", value=date)
    if not 0 <= interruption_band < 1:
        raise InputError("the monthly interruption band must be in [0, 1)", field="--interruption-band",
                         value=interruption_band)
    gmap = _gpu_map()
    keep_gpus = _resolve_many("GPU type", _split(gpus), gmap, "--gpu") if _split(gpus) else None
    keep_regions = {r.lower() for r in _split(regions)} or None
    offerings, report = import_skypilot(
        path, provider, date=date, gpus=keep_gpus, regions=keep_regions, spot=not no_spot,
        aliases=gmap, known_gpus=set(gmap.values()), interruption_band=interruption_band, spot_zone=spot_zone)
    # topology and supply from catalogs/topology.csv and quotas.csv, as for the shipped catalog
    topo, quotas = topology_rules(), quota_rules()
    offerings = [annotate(o, topo, quotas) for o in offerings]
    unmatched = sorted({o.instance_type or o.id for o in offerings if o.fabric is None})
    for line in report.lines():
        click.echo(line, err=True)
    if unmatched:
        click.echo(f"no topology rule for {len(unmatched)} instance type(s) (treated as stand-alone machines, "
                   f"never joined into a cluster): {', '.join(unmatched[:10])}", err=True)
    if not offerings:
        raise InputError("nothing to import: no row maps to a gpuopt GPU type with a price", file=str(path))
    used_date = offerings[0].date
    header = (f"Imported by gpuopt from the SkyPilot catalog {path} (provider {provider}).\n"
              f"Prices per unit (instance) per hour, observed {used_date}; spot interruptions_per_hour = "
              f"-ln(1 - {interruption_band:g})/730.\n"
              "Use it in a problem file with  catalog: [default, <this file>]")
    out.parent.mkdir(parents=True, exist_ok=True)
    dump_offering_file(out, offerings, provider=provider, header=header)
    load_offering_file(out)  # the file must read back
    click.echo(f"wrote {len(offerings)} offerings to {out}", err=True)
    sys.stderr.flush()
