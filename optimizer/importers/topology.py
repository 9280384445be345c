"""Cluster topology and supply for catalog offerings, from two sourced tables.

Price catalogs (SkyPilot's included) say what an instance costs, not how its
GPUs connect or how many of it one can rent. Two tables in ``catalogs/`` carry
that, one row per rule, each with its source and date:

``topology.csv``
    ``provider, match, unit_link, fabric, fabric_gbps_per_gpu,
    max_cluster_units, source, date``: how the GPUs of one unit connect
    (``unit_link``: nvlink, xgmi, pcie) and how units connect to each other
    (``fabric``: infiniband, efa, roce, ethernet, none) with the bandwidth
    per GPU. ``max_cluster_units`` left empty means the cluster is bounded
    by the offering's supply (``max_units``) only.
``quotas.csv``
    ``provider, pricing, match, max_units, quota_source, date``: the most
    units one may plan on, from the provider where it publishes one, else a
    stated default per kind of listing (a marketplace listing is one host).

``match`` is a shell-style pattern (``fnmatch``, case-sensitive) tried on the
offering's ``instance_type``, or on its ``id`` when it has none (owned
servers, per-GPU price lists). The first row of the offering's provider
that matches wins, so specific rows come before a provider's ``*``.

:func:`annotate` fills only the fields an offering leaves empty: a number
the catalog build took from a better source is never overwritten. The
catalog build (:mod:`optimizer.importers.build_default`) calls it before
writing ``catalogs/offerings/*.yaml``; ``python -m
optimizer.importers.topology FILE...`` applies it to offering files that
exist (a maintainer tool: it rewrites the files it is given and says so).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
from dataclasses import dataclass
from pathlib import Path

from .. import catalog as _catalog
from ..schema import Offering

TOPOLOGY_FIELDS = ("unit_link", "fabric", "fabric_gbps_per_gpu", "max_cluster_units")


@dataclass(frozen=True)
class Rule:
    """One row of ``topology.csv`` or ``quotas.csv``."""

    provider: str
    match: str
    pricing: str
    values: dict
    source: str
    date: str

    def applies(self, off: Offering) -> bool:
        if self.provider != (off.provider or ""):
            return False
        if self.pricing not in ("*", off.pricing):
            return False
        return fnmatch.fnmatchcase(off.instance_type or off.id, self.match)


def _read(name: str) -> list[dict[str, str]]:
    with open(_catalog.CATALOG_DIR / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _number(text: str, kind=float):
    return kind(text) if text.strip() else None


def topology_rules() -> list[Rule]:
    """The rows of ``catalogs/topology.csv`` in file order."""
    out = []
    for r in _read("topology.csv"):
        values = {"unit_link": r["unit_link"] or None, "fabric": r["fabric"] or None,
                  "fabric_gbps_per_gpu": _number(r["fabric_gbps_per_gpu"]),
                  "max_cluster_units": _number(r["max_cluster_units"], int)}
        out.append(Rule(r["provider"], r["match"], "*", values, r["source"], r["date"]))
    return out


def quota_rules() -> list[Rule]:
    """The rows of ``catalogs/quotas.csv`` in file order."""
    return [Rule(r["provider"], r["match"], r["pricing"], {"max_units": int(r["max_units"])},
                 r["quota_source"], r["date"]) for r in _read("quotas.csv")]


def first_rule(off: Offering, rules: list[Rule]) -> Rule | None:
    """The first rule that applies to ``off`` (provider, pricing, pattern), or None."""
    return next((r for r in rules if r.applies(off)), None)


def annotate(off: Offering, topology: list[Rule] | None = None, quotas: list[Rule] | None = None) -> Offering:
    """A copy of ``off`` with its empty topology and supply fields filled from the tables.

    Topology: when ``off`` names no ``fabric``, the matching topology row
    sets ``unit_link``, ``fabric``, ``fabric_gbps_per_gpu`` and
    ``max_cluster_units`` together (one source for the four), and its source
    is appended to ``notes``. Supply: when ``off`` has no ``max_units``, the
    matching quota row sets it and ``quota_source``. An offering no row
    matches is returned unchanged: the loader then treats it as a machine
    without a fabric and without a stated quota.
    """
    topology = topology_rules() if topology is None else topology
    quotas = quota_rules() if quotas is None else quotas
    update: dict = {}
    notes = [off.notes] if off.notes else []
    if off.fabric is None:
        rule = first_rule(off, topology)
        if rule is not None:
            update.update({k: v for k, v in rule.values.items() if getattr(off, k) is None})
            notes.append(f"topology: {rule.source} ({rule.date})")
    if off.max_units is None:
        rule = first_rule(off, quotas)
        if rule is not None:
            update["max_units"] = rule.values["max_units"]
            update["quota_source"] = f"{rule.source} ({rule.date})"
    if not update:
        return off
    update["notes"] = "; ".join(notes) if notes else None
    return Offering(**{**off.model_dump(exclude_none=True), **update})


def _header(path: Path) -> str | None:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines) or None


def main(argv: list[str] | None = None) -> None:
    from ..yamlio import read_yaml
    from .offerings import dump_offering_file, load_offering_file

    ap = argparse.ArgumentParser(description="Fill topology and quota fields of offering files from "
                                 "catalogs/topology.csv and catalogs/quotas.csv (rewrites the files given).")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    topo, quotas = topology_rules(), quota_rules()
    for path in args.files:
        doc = read_yaml(path)
        provider = doc.get("provider") if isinstance(doc, dict) else None
        offs = [annotate(o, topo, quotas) for o in load_offering_file(path)]
        dump_offering_file(path, offs, provider=provider, header=_header(path))
        print(f"{path}: {len(offs)} offerings annotated (rewritten)")


if __name__ == "__main__":
    main()
