"""Shipped reference data: GPU types, model architectures, offerings, defaults.

The catalog is data, not code: tables under ``catalogs/`` whose every number
carries ``source`` and ``date``. This module only finds and reads them; the
stages that use them (sizing, load) give them meaning.

Layout of ``catalogs/``::

    VERSION                 catalog version, named in every result
    gpus.csv                one row per GPU type (name, aliases, specs, source, date)
    models.yaml             model architectures (name, aliases, shape, source, date)
    efficiency.csv          named efficiency factors: name, value, unit, source, date, description
    finance_defaults.csv    finance defaults: name, value, unit, source, date, description
    offerings/*.yaml        offerings in the problem-file schema, plus provider, source, date
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import pandas as pd

from .errors import InputError, unknown_name
from .yamlio import read_yaml

CATALOG_DIR = Path(os.environ.get("GPUOPT_CATALOG_DIR", Path(__file__).resolve().parent.parent / "catalogs"))


def _path(name: str) -> Path:
    path = CATALOG_DIR / name
    if not path.exists():
        raise InputError(
            f"shipped catalog file is missing: {path}",
            allowed="reinstall gpuopt from a full checkout, or set GPUOPT_CATALOG_DIR",
        )
    return path


@functools.cache
def catalog_version() -> str:
    """The version string of the shipped catalog (``catalogs/VERSION``)."""
    path = CATALOG_DIR / "VERSION"
    return path.read_text().strip() if path.exists() else "unversioned"


@functools.cache
def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(_path(name), comment=None, keep_default_na=True)


def gpu_table() -> pd.DataFrame:
    """GPU types, one row each (``catalogs/gpus.csv``). A copy: callers may edit it."""
    return _csv("gpus.csv").copy()


def efficiency_table() -> pd.DataFrame:
    """Named efficiency factors (``catalogs/efficiency.csv``)."""
    return _csv("efficiency.csv").copy()


def fabric_table() -> pd.DataFrame:
    """Default bandwidth per GPU of each fabric kind between units (``catalogs/fabrics.csv``)."""
    return _csv("fabrics.csv").copy()


def rental_price_bands() -> pd.DataFrame:
    """Published on-demand USD per GPU-hour, lowest and highest, per GPU type (``catalogs/rental_price_bands.csv``)."""
    return _csv("rental_price_bands.csv").copy()


def server_price_bands() -> pd.DataFrame:
    """Published server price per GPU, lowest and highest, per GPU type (``catalogs/server_price_bands.csv``)."""
    return _csv("server_price_bands.csv").copy()


def finance_defaults() -> pd.DataFrame:
    """Named finance defaults (``catalogs/finance_defaults.csv``)."""
    return _csv("finance_defaults.csv").copy()


@functools.cache
def _models_raw() -> tuple:
    data = read_yaml(_path("models.yaml"))
    return tuple(data.get("models", []))


def model_entries() -> list[dict]:
    """Model architectures as raw dicts (``catalogs/models.yaml``)."""
    return [dict(m) for m in _models_raw()]


def offering_catalog_files(name: str) -> list[Path]:
    """The files a ``catalog:`` entry of ``default`` stands for."""
    if name.lower() == "default":
        return sorted((CATALOG_DIR / "offerings").glob("*.yaml"))
    raise KeyError(name)


def split_aliases(value):
    """A GPU's or model's aliases as a tuple of names.

    ``aliases`` may be a list (YAML) or one ``;``-separated string (the
    ``gpus.csv`` style, also accepted inline); a blank cell (``None``, NaN)
    is no alias. Names are stripped and blanks dropped. Any other value is
    returned unchanged for the caller's validation to reject.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ()
    if isinstance(value, str):
        value = value.split(";")
    elif not isinstance(value, (list, tuple)):
        return value
    names = (a.strip() if isinstance(a, str) else a for a in value)
    return tuple(a for a in names if a != "")


def alias_map(names: list[str], aliases: list) -> dict[str, str]:
    """Lower-cased name or alias -> canonical name; each ``aliases`` item as :func:`split_aliases` takes it."""
    out: dict[str, str] = {}
    for name, al in zip(names, aliases):
        out[name.lower()] = name
        for a in split_aliases(al):
            out[a.lower()] = name
    return out


def resolve(kind: str, name: str, mapping: dict[str, str], **where) -> str:
    """Canonical name for ``name`` (case-insensitive, aliases welcome), or an InputError."""
    hit = mapping.get(str(name).strip().lower())
    if hit is None:
        raise unknown_name(kind, name, set(mapping.values()), value=name, **where)
    return hit
