"""Offering catalog files: read, validate, resolve and write.

An offering file is YAML::

    provider: aws                  # optional defaults for every offering below
    source: "..."
    date: "2026-11"
    offerings:
      - {id: aws-p5.48xlarge-us-east-1-od, gpu: H100-SXM, gpus_per_unit: 8, ...}

Every entry must be a valid :class:`optimizer.schema.Offering`. ``provider``,
``source`` and ``date`` given at the top of the file are inherited by the
offerings that do not set them. A bare list of offerings is accepted too.

The problem loader calls :func:`load_offering_file` for each path of a
``catalog:`` list and :func:`load_catalogs` for the whole list (``default`` is
the shipped ``catalogs/offerings/*.yaml``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError

from .. import catalog as _catalog
from ..errors import InputError, unknown_name
from ..schema import Offering
from ..yamlio import read_yaml

FILE_KEYS = ("provider", "source", "date", "notes", "offerings")
INHERITED = ("provider", "source", "date")


def _field_path(prefix: str, loc: tuple) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _validation_error(exc: ValidationError, file: str, prefix: str, raw: Mapping) -> InputError:
    """The first pydantic error of ``exc`` as an InputError naming file, field and value."""
    err = exc.errors()[0]
    loc = tuple(p for p in err.get("loc", ()) if p not in ("function-after",))
    msg = err.get("msg", "invalid value")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    value = err.get("input")
    if isinstance(value, Mapping):  # a model-level error: no single value to show
        value = None
    field = _field_path(prefix, loc)
    if err.get("type") == "extra_forbidden":
        allowed = ", ".join(Offering.model_fields)
        return InputError(f"unknown key {loc[-1]!r}", file=file, field=field, allowed=allowed,
                          suggestion=_suggest_key(str(loc[-1])))
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''} in this offering)"
    return InputError(msg, file=file, field=field, value=value)


def _suggest_key(key: str) -> str | None:
    from ..errors import suggest

    return suggest(key, Offering.model_fields)


def parse_offerings(data: object, file: str,
                    gpu_names: Mapping[str, str] | None = None) -> list[Offering]:
    """Validate already-parsed offering-file data (see the module docstring)."""
    defaults: dict = {}
    if isinstance(data, list):
        entries = data
    elif isinstance(data, Mapping):
        unknown = [k for k in data if k not in FILE_KEYS]
        if unknown:
            from ..errors import suggest

            raise InputError(f"unknown top-level key {unknown[0]!r}", file=file, field=str(unknown[0]),
                             allowed=", ".join(FILE_KEYS), suggestion=suggest(str(unknown[0]), FILE_KEYS))
        if "offerings" not in data:
            raise InputError("no 'offerings' list", file=file, field="offerings",
                             allowed="a list of offerings")
        entries = data["offerings"]
        defaults = {k: data[k] for k in INHERITED if data.get(k) is not None}
    else:
        raise InputError("an offering file must be a mapping with an 'offerings' list (or a list)",
                         file=file, value=type(data).__name__)
    if not isinstance(entries, list):
        raise InputError("'offerings' must be a list", file=file, field="offerings",
                         value=type(entries).__name__)
    out: list[Offering] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(entries):
        prefix = f"offerings[{i}]"
        if not isinstance(raw, Mapping):
            raise InputError("each offering must be a mapping of fields", file=file, field=prefix,
                             value=raw)
        if isinstance(raw.get("id"), str):
            prefix = f"offerings[{raw['id']}]"
        merged = {**defaults, **raw}
        try:
            off = Offering.model_validate(merged)
        except ValidationError as exc:
            raise _validation_error(exc, file, prefix, merged) from None
        if off.id in seen:
            raise InputError(f"duplicate offering id (also entry {seen[off.id]})", file=file,
                             field=f"offerings[{i}].id", value=off.id)
        seen[off.id] = i
        if gpu_names is not None:
            canonical = gpu_names.get(off.gpu.strip().lower())
            if canonical is None:
                raise unknown_name("GPU type", off.gpu, set(gpu_names.values()), file=file,
                                   field=f"{prefix}.gpu", value=off.gpu)
            off.gpu = canonical
        out.append(off)
    return out


def load_offering_file(path: str | Path, *, gpu_names: Mapping[str, str] | None = None) -> list[Offering]:
    """Read one offering catalog file and return its offerings, validated.

    ``gpu_names`` (lower-cased name or alias -> canonical name, e.g.
    :func:`gpu_name_map`) resolves ``gpu`` fields case-insensitively and
    rejects unknown GPU types; without it GPU names are kept as written.
    Raises :class:`~optimizer.errors.InputError` naming the file, the field
    (``offerings[ID].field``) and the value.
    """
    path = Path(path)
    return parse_offerings(read_yaml(path), str(path), gpu_names)


def gpu_name_map() -> dict[str, str]:
    """Lower-cased GPU name or alias -> canonical name, from ``catalogs/gpus.csv``."""
    table = _catalog.gpu_table()
    aliases = table["aliases"] if "aliases" in table else [None] * len(table)
    return _catalog.alias_map(list(table["name"]), list(aliases))


def catalog_paths(entries: Iterable[str], base_dir: str | Path | None = None) -> list[Path]:
    """Files named by a ``catalog:`` list: ``default`` or paths relative to ``base_dir``."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    out: list[Path] = []
    for entry in entries:
        if str(entry).strip().lower() == "default":
            files = _catalog.offering_catalog_files("default")
            if not files:
                raise InputError("the shipped offering catalog is empty",
                                 file=str(_catalog.CATALOG_DIR / "offerings"))
            out.extend(files)
        else:
            p = Path(entry)
            out.append(p if p.is_absolute() else base / p)
    return out


def load_catalogs(entries: Iterable[str], base_dir: str | Path | None = None, *,
                  gpu_names: Mapping[str, str] | None = None, replace: bool = False) -> list[Offering]:
    """All offerings of a ``catalog:`` list, in order.

    An id defined in two files is an error, unless ``replace`` is true: then
    the later file's offering replaces the earlier one (in the earlier place).
    A missing file is an InputError naming it.
    """
    out: dict[str, Offering] = {}
    where: dict[str, str] = {}
    for path in catalog_paths(entries, base_dir):
        for off in load_offering_file(path, gpu_names=gpu_names):
            if off.id in where and not replace:
                raise InputError(f"offering id is also defined in {where[off.id]}", file=str(path),
                                 field=f"offerings[{off.id}].id", value=off.id)
            where[off.id] = str(path)
            out[off.id] = off
    return list(out.values())


def load_default_catalog(*, gpu_names: Mapping[str, str] | None = None) -> list[Offering]:
    """The shipped offerings (``catalogs/offerings/*.yaml``)."""
    return load_catalogs(["default"], gpu_names=gpu_names)


def offering_row(off: Offering) -> dict:
    """An offering as a flat dict for tables and JSON (dates as ISO strings, unset fields dropped)."""
    row = off.model_dump(exclude_none=True)
    if isinstance(row.get("date"), (_dt.date, _dt.datetime)):
        row["date"] = row["date"].isoformat()
    return row


class _Dumper(yaml.SafeDumper):
    """Safe dumper; PyYAML quotes strings that would read back as dates or numbers."""


_ORDER = ("id", "provider", "gpu", "gpus_per_unit", "region", "pricing", "instance_type",
          "price_per_hour", "interruptions_per_hour", "upfront", "term_months", "capex",
          "lifetime_years", "residual_fraction", "power_kw", "idle_power_fraction", "pue",
          "electricity_per_kwh", "fixed_per_month", "existing_units", "billing", "unit_link", "fabric",
          "fabric_gbps_per_gpu", "max_cluster_units", "max_units", "quota_source", "source", "date",
          "notes", "assumed")


def dump_offering_file(path: str | Path, offerings: list[Offering], *, provider: str | None = None,
                       source: str | None = None, date: str | None = None,
                       header: str | None = None) -> None:
    """Write offerings as an offering file (the format :func:`load_offering_file` reads)."""
    rows = []
    for off in offerings:
        row = offering_row(off)
        # the usual order first; a field the order does not know yet is written too, never dropped
        rows.append({k: row[k] for k in (*_ORDER, *sorted(set(row) - set(_ORDER))) if k in row})
    doc: dict = {}
    if provider is not None:
        doc["provider"] = provider
    if source is not None:
        doc["source"] = source
    if date is not None:
        doc["date"] = str(date)
    doc["offerings"] = rows
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    if header:
        text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + text
    Path(path).write_text(text, encoding="utf-8")
