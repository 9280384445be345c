"""``--set PATH=VALUE`` and ``--set PATH*=FACTOR``: overlays on a copy of a problem.

A path is dotted keys with list items picked by id or name:
``offerings[cloud-h100-od].price_per_hour``, ``inference[chat].demand_rps``,
``finance.discount_rate``. ``*=`` multiplies (a per-period demand mapping is
scaled in every period). Offerings from the catalogs the problem names are
addressable by id too: the overlay copies the catalog entry into the
problem's own offerings (which replace catalog entries of the same id) and
changes the copy. A path that names nothing is an error. The user's files
and the shipped catalog are never modified.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

from .errors import InputError, suggest
from .yamlio import parse_yaml

_SET = re.compile(r"^\s*(?P<path>[^=*]+?)\s*(?P<op>\*?=)\s*(?P<value>.*)$")
_PART = re.compile(r"^(?P<key>[A-Za-z_][\w\-]*)(?:\[(?P<sel>[^\]]+)\])?$")


def parse_path(path: str) -> list[tuple[str, str | None]]:
    """``a.b[x].c`` -> [(a, None), (b, x), (c, None)]. Dots inside [] are kept."""
    parts, buf, depth = [], "", 0
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "." and depth == 0:
            parts.append(buf)
            buf = ""
        else:
            buf += ch
    parts.append(buf)
    out = []
    for p in parts:
        m = _PART.match(p.strip())
        if not m:
            raise InputError("malformed --set path", field="--set", value=path,
                             allowed="dotted keys with [id] selectors, e.g. offerings[ID].price_per_hour")
        out.append((m.group("key"), m.group("sel")))
    return out


def _catalog_offering(raw: dict, oid: str, file: str) -> dict | None:
    from . import catalog as cat
    from .importers import load_offering_file

    base = Path(file).parent
    for entry in raw.get("catalog") or []:
        files = cat.offering_catalog_files("default") if str(entry).lower() == "default" else [base / entry]
        for f in files:
            if not f.exists():
                continue
            for o in load_offering_file(f):
                if o.id == oid:
                    return o.model_dump(exclude_none=True, mode="json")
    return None


def _select(items: list, sel: str, key: str, spec: str, raw: dict, file: str) -> dict:
    for it in items:
        if isinstance(it, dict) and sel in (it.get("id"), it.get("name")):
            return it
    if key == "offerings":
        found = _catalog_offering(raw, sel, file)
        if found is not None:
            items.append(found)
            return found
    names = [str(it.get("id", it.get("name"))) for it in items if isinstance(it, dict)]
    raise InputError(f"--set names no item {sel!r} in {key}", file=file, field="--set", value=spec,
                     allowed=", ".join(names[:20]) or "(the list is empty)", suggestion=suggest(sel, names))


def apply_set(raw: dict, spec: str, file: str) -> dict:
    """Apply one ``PATH=VALUE`` or ``PATH*=FACTOR`` to ``raw`` (modified and returned)."""
    m = _SET.match(spec)
    if not m:
        raise InputError("malformed --set", file=file, field="--set", value=spec,
                         allowed="PATH=VALUE or PATH*=FACTOR")
    path = parse_path(m.group("path"))
    value = parse_yaml(m.group("value"), f"--set {spec}") if m.group("value").strip() else None
    if value is None:
        raise InputError("--set needs a value", file=file, field="--set", value=spec)
    node = raw
    for i, (key, sel) in enumerate(path):
        last = i == len(path) - 1
        if not isinstance(node, dict):
            raise InputError("--set path goes through a value that is not a mapping", file=file,
                             field="--set", value=spec)
        if sel is not None:
            items = node.setdefault(key, []) if key == "offerings" else node.get(key)
            if not isinstance(items, list):
                raise InputError(f"--set: {key!r} is not a list here", file=file, field="--set", value=spec,
                                 suggestion=suggest(key, list(node)))
            item = _select(items, sel, key, spec, raw, file)
            if last:
                raise InputError("--set must name a field of the item, e.g. [ID].price_per_hour",
                                 file=file, field="--set", value=spec)
            node = item
            continue
        if last:
            break
        if key not in node:
            if key in ("constraints", "finance", "efficiency"):
                node[key] = {}
            else:
                raise InputError(f"--set names no field {key!r}", file=file, field="--set", value=spec,
                                 allowed=", ".join(map(str, node)), suggestion=suggest(key, list(map(str, node))))
        node = node[key]
    key = path[-1][0]
    if m.group("op") == "*=":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InputError("*= needs a number", file=file, field="--set", value=spec)
        if key not in node:
            raise InputError(f"--set cannot scale {key!r}: it is not set", file=file, field="--set", value=spec,
                             allowed=", ".join(map(str, node)), suggestion=suggest(key, list(map(str, node))))
        cur = node[key]
        if isinstance(cur, dict):
            node[key] = {k: v * value for k, v in cur.items()}
        elif isinstance(cur, (int, float)) and not isinstance(cur, bool):
            node[key] = cur * value
        else:
            raise InputError(f"*= cannot scale {cur!r}", file=file, field="--set", value=spec)
    else:
        node[key] = value
    return raw


def apply_sets(raw: object, specs, file: str) -> dict:
    """Apply every ``--set`` in order to a deep copy of ``raw``."""
    if not isinstance(raw, dict):
        raise InputError("--set needs a problem file whose top level is a mapping", file=file)
    out = copy.deepcopy(raw)
    for spec in specs:
        apply_set(out, spec, file)
    return out
