"""Refresh the shipped catalog from fresh SkyPilot price files (``gpuopt catalog refresh``).

The release procedure (docs/catalog.md): point it at a directory of
``<cloud>/vms.csv`` (SkyPilot's catalog layout), read the diff, then write.
Rented offerings of every cloud the directory has are rebuilt from it
(reserved prices re-derived from the documented discounts); every other
offering (Nebius, Crusoe, owned servers, clouds the directory lacks) is kept
as the shipped sources give it. Topology, quotas and the catalog check apply
as in the build; the catalog version is bumped when the shipped catalog is
written.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import catalog as _catalog
from ..schema import Offering
from .build_default import build_checked, write_files
from .offerings import load_offering_file

DIFF_COLUMNS = ["change", "offering", "field", "old", "new", "relative"]


@dataclass
class Refresh:
    """A rebuilt catalog and how it differs from the one in place."""

    files: dict[str, list[Offering]]
    dropped: dict[str, str]
    skipped: list[str] = field(default_factory=list)
    diff: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DIFF_COLUMNS))


def _price(o: Offering) -> tuple[str, float | None]:
    return ("capex", o.capex) if o.pricing == "owned" else ("price_per_hour", o.price_per_hour)


def diff(old: dict[str, Offering], new: dict[str, Offering], threshold: float) -> pd.DataFrame:
    """Offerings added and removed, and prices moved by more than ``threshold`` (relative)."""
    rows = []
    for oid in sorted(set(new) - set(old)):
        f, v = _price(new[oid])
        rows.append(("added", oid, f, None, v, None))
    for oid in sorted(set(old) - set(new)):
        f, v = _price(old[oid])
        rows.append(("removed", oid, f, v, None, None))
    for oid in sorted(set(old) & set(new)):
        f, a = _price(old[oid])
        _, b = _price(new[oid])
        if a and b is not None and abs(b / a - 1.0) > threshold:
            rows.append(("price moved", oid, f, a, b, round(b / a - 1.0, 4)))
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def refresh(skypilot: Path, out: Path, date: str | None = None, threshold: float = 0.05) -> Refresh:
    """Rebuild from ``skypilot`` and compare with the offering files in ``out`` (nothing is written)."""
    date = date or _dt.date.today().isoformat()
    skipped: list[str] = []
    files, dropped = build_checked(_catalog.CATALOG_DIR / "sources", skypilot=skypilot, date=date, skipped=skipped)
    old: dict[str, Offering] = {}
    for path in sorted(out.glob("*.yaml")):
        old.update({o.id: o for o in load_offering_file(path)})
    new = {o.id: o for offs in files.values() for o in offs}
    return Refresh(files, dropped, skipped, diff(old, new, threshold))


def next_version(current: str, today: _dt.date | None = None) -> str:
    """``YYYY.MM.N``: N + 1 within the month of ``today``, else 1."""
    today = today or _dt.date.today()
    stem = f"{today.year}.{today.month:02d}"
    parts = current.strip().split(".")
    if len(parts) == 3 and f"{parts[0]}.{int(parts[1]):02d}" == stem and parts[2].isdigit():
        return f"{stem}.{int(parts[2]) + 1}"
    return f"{stem}.1"


def write(result: Refresh, out: Path) -> list[Path]:
    """Write the refreshed files; bump ``catalogs/VERSION`` when ``out`` is the shipped catalog."""
    paths = write_files(result.files, result.dropped, out)
    shipped = (_catalog.CATALOG_DIR / "offerings").resolve()
    if out.resolve() == shipped:
        version = _catalog.CATALOG_DIR / "VERSION"
        version.write_text(next_version(version.read_text()) + "\n")
        paths.append(version)
    return paths
