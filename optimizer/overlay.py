"""Overlays on a copy of a problem: ``--set PATH=VALUE``, ``--set PATH*=FACTOR`` and ``--scale SELECTOR:FACTOR``.

``--set``
    A path is dotted keys with list items picked by id or name:
    ``offerings[cloud-h100-od].price_per_hour``, ``inference[chat].demand_rps``,
    ``finance.discount_rate``. ``*=`` multiplies (a per-period demand mapping is
    scaled in every period). Offerings from the catalogs the problem names are
    addressable by id too: the overlay copies the catalog entry into the
    problem's own offerings (which replace catalog entries of the same id) and
    changes the copy. A path that names nothing is an error.

``--scale``
    ``[TARGET,]KEY=VALUE[,KEY=VALUE...]:FACTOR`` multiplies a field of every
    item the selector matches (docs/whatif.md has the whole grammar):

    - offering targets (``price_per_hour`` by default; ``price`` is the same;
      also ``capex``, ``upfront``, ``electricity_per_kwh``, ``power_kw``,
      ``fixed_per_month``, ``interruptions_per_hour``), filtered by ``id``,
      ``pricing``, ``gpu`` (case-insensitive, aliases), ``provider``,
      ``region``: ``pricing=spot,gpu=H100-SXM:0.7``. File and catalog
      offerings both match (a catalog match is copied into the problem's own
      offerings, as with ``--set``).
    - ``demand``: ``demand_rps`` of every service, or those matching
      ``service=`` (and only in the periods matching ``period=``):
      ``demand:2``, ``demand,service=chat:1.5``, ``demand,period=*-peak:1.2``.

    Values match case-insensitively; ``a|b`` is either; ``*``, ``?`` and ``[..]``
    are globs. A selector that matches nothing is an error naming it.

Every ``--set`` is applied first, in order, then every ``--scale``, in order.
The user's files and the shipped catalog are never modified: the overlays
change a deep copy of the data read from them.
"""

from __future__ import annotations

import copy
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, suggest
from .vocabulary import PRICING_KINDS
from .yamlio import parse_yaml

_SET = re.compile(r"^\s*(?P<path>[^=*]+?)\s*(?P<op>\*?=)\s*(?P<value>.*)$")
_PART = re.compile(r"^(?P<key>[A-Za-z_][\w\-]*)(?:\[(?P<sel>[^\]]+)\])?$")

#: Offering fields a ``--scale`` selector may multiply (``price`` is short for price_per_hour).
OFFERING_TARGETS = ("price_per_hour", "capex", "upfront", "electricity_per_kwh", "power_kw",
                    "fixed_per_month", "interruptions_per_hour")
TARGET_ALIASES = {"price": "price_per_hour", "electricity": "electricity_per_kwh"}
OFFERING_KEYS = ("id", "pricing", "gpu", "provider", "region")
DEMAND_KEYS = ("service", "period")
_GLOB = re.compile(r"[*?\[]")


def parse_path(path: str, field: str = "--set") -> list[tuple[str, str | None]]:
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
            raise InputError("malformed --set path", field=field, value=path,
                             allowed="dotted keys with [id] selectors, e.g. offerings[ID].price_per_hour")
        out.append((m.group("key"), m.group("sel")))
    return out


# ---------------------------------------------------------------------------
# catalog offerings (read once per file version; never written)

_CATALOG_CACHE: dict[tuple[str, int, int], list[dict]] = {}


def _offering_file_entries(path: Path) -> list[dict]:
    from .importers import load_offering_file

    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _CATALOG_CACHE:
        _CATALOG_CACHE[key] = [o.model_dump(exclude_none=True, mode="json") for o in load_offering_file(path)]
    return _CATALOG_CACHE[key]


def catalog_entries(raw: dict, file: str) -> list[dict]:
    """Offerings of every catalog the problem names, as plain dicts (copies), later ids replacing earlier."""
    from . import catalog as cat

    base = Path(file).parent
    out: dict[str, dict] = {}
    entries = raw.get("catalog") or []
    if isinstance(entries, str):
        entries = [entries]
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if str(entry).strip().lower() == "default":
            files = cat.offering_catalog_files("default")
        else:
            p = Path(str(entry))
            files = [p if p.is_absolute() else base / p]
        for f in files:
            if not f.exists():
                raise InputError("catalog file not found", file=file, field=f"catalog[{i}]", value=entry,
                                 allowed="`default` or a path relative to the problem file")
            for o in _offering_file_entries(f):
                out[o["id"]] = o
    return [copy.deepcopy(o) for o in out.values()]


def _catalog_offering(raw: dict, oid: str, file: str) -> dict | None:
    for o in catalog_entries(raw, file):
        if o.get("id") == oid:
            return o
    return None


# ---------------------------------------------------------------------------
# --set


def _select(items: list, sel: str, key: str, spec: str, raw: dict, file: str, field: str) -> dict:
    for it in items:
        if isinstance(it, dict) and sel in (it.get("id"), it.get("name")):
            return it
    if key == "offerings":
        found = _catalog_offering(raw, sel, file)
        if found is not None:
            items.append(found)
            return found
    names = [str(it.get("id", it.get("name"))) for it in items if isinstance(it, dict)]
    raise InputError(f"{field} names no item {sel!r} in {key}", file=file, field=field, value=spec,
                     allowed=", ".join(names[:20]) or "(the list is empty)", suggestion=suggest(sel, names))


def split_set(spec: str, file: str | None = None, field: str = "--set") -> tuple[str, str, str]:
    """``PATH=VALUE`` / ``PATH*=FACTOR`` -> (path, op, value text)."""
    m = _SET.match(spec)
    if not m:
        raise InputError("malformed --set", file=file, field=field, value=spec,
                         allowed="PATH=VALUE or PATH*=FACTOR")
    return m.group("path"), m.group("op"), m.group("value")


def _mapping_field(keys: list[str]) -> bool:
    """Whether the problem file's field at ``keys`` (list selectors skipped) holds a mapping.

    ``--set providers.exclude=[vast]`` creates ``providers`` when the file has
    none, as it does for ``finance`` or ``stability`` of a service.
    """
    from typing import get_args, get_origin

    from pydantic import BaseModel

    from .schema import ProblemFile

    model = ProblemFile
    for n, key in enumerate(keys):
        f = model.model_fields.get(key) if model is not None else None
        if f is None:
            return False
        stack, found = [f.annotation], None
        while stack:
            a = stack.pop()
            if isinstance(a, type) and issubclass(a, BaseModel):
                found = a
            elif get_origin(a) is dict and n == len(keys) - 1:
                return True
            else:
                stack.extend(get_args(a))
        model = found
    return model is not None


def apply_set_value(raw: dict, path_text: str, op: str, value: object, file: str,
                    spec: str | None = None, field: str = "--set") -> dict:
    """Set (``op='='``) or multiply (``op='*='``) the field at ``path_text`` of ``raw`` in place."""
    spec = spec if spec is not None else f"{path_text}{op}{value}"
    try:
        path = parse_path(path_text, field)
    except InputError as e:
        raise InputError(e.message, file=file, field=field, value=spec, allowed=e.allowed) from None
    if value is None:
        raise InputError("--set needs a value", file=file, field=field, value=spec)
    node = raw
    for i, (key, sel) in enumerate(path):
        last = i == len(path) - 1
        if not isinstance(node, dict):
            raise InputError("--set path goes through a value that is not a mapping", file=file,
                             field=field, value=spec)
        if sel is not None:
            items = node.setdefault(key, []) if key == "offerings" else node.get(key)
            if not isinstance(items, list):
                raise InputError(f"{field}: {key!r} is not a list here", file=file, field=field, value=spec,
                                 suggestion=suggest(key, list(node)))
            item = _select(items, sel, key, spec, raw, file, field)
            if last:
                raise InputError("--set must name a field of the item, e.g. [ID].price_per_hour",
                                 file=file, field=field, value=spec)
            node = item
            continue
        if last:
            break
        if key not in node:
            if _mapping_field([k for k, _ in path[:i + 1]]):
                node[key] = {}
            else:
                raise InputError(f"{field} names no field {key!r}", file=file, field=field, value=spec,
                                 allowed=", ".join(map(str, node)), suggestion=suggest(key, list(map(str, node))))
        node = node[key]
    key = path[-1][0]
    if op == "*=":
        if not _is_number(value):
            raise InputError("*= needs a number", file=file, field=field, value=spec)
        if key not in node:
            raise InputError(f"{field} cannot scale {key!r}: it is not set", file=file, field=field, value=spec,
                             allowed=", ".join(map(str, node)), suggestion=suggest(key, list(map(str, node))))
        cur = node[key]
        if isinstance(cur, dict) and all(_is_number(v) for v in cur.values()):
            node[key] = {k: v * value for k, v in cur.items()}
        elif _is_number(cur):
            node[key] = cur * value
        else:
            raise InputError(f"*= cannot scale {cur!r}", file=file, field=field, value=spec)
    else:
        node[key] = value
    return raw


def apply_set(raw: dict, spec: str, file: str, field: str = "--set") -> dict:
    """Apply one ``PATH=VALUE`` or ``PATH*=FACTOR`` to ``raw`` (modified and returned)."""
    path, op, text = split_set(spec, file, field)
    value = parse_yaml(text, f"{field} {spec}") if text.strip() else None
    return apply_set_value(raw, path, op, value, file, spec=spec, field=field)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------------------
# --scale selectors


@dataclass
class Selector:
    """What a ``--scale`` multiplies: ``target`` of the items whose fields match ``filters``."""

    target: str                                   # "demand" or an offering field
    filters: dict[str, list[str]] = field(default_factory=dict)
    text: str = ""

    @property
    def kind(self) -> str:
        return "demand" if self.target == "demand" else "offering"


def parse_selector(text: str, file: str | None = None, field: str = "--scale", spec: str | None = None) -> Selector:
    """``[TARGET,]KEY=VALUE,...`` -> :class:`Selector` (no factor)."""
    spec = spec or text
    terms = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in terms):
        raise InputError("empty selector", file=file, field=field, value=spec,
                         allowed="[TARGET,]KEY=VALUE[,KEY=VALUE...]:FACTOR, e.g. pricing=spot,gpu=H100-SXM:0.7")
    target = "price_per_hour"
    if "=" not in terms[0]:
        word = terms.pop(0).lower()
        word = TARGET_ALIASES.get(word, word)
        targets = ("demand",) + OFFERING_TARGETS
        if word not in targets:
            raise InputError(f"unknown --scale target {word!r}", file=file, field=field, value=spec,
                             allowed=", ".join(targets + tuple(TARGET_ALIASES)), suggestion=suggest(word, targets))
        target = word
    keys = DEMAND_KEYS if target == "demand" else OFFERING_KEYS
    filters: dict[str, list[str]] = {}
    for t in terms:
        k, sep, v = t.partition("=")
        k, v = k.strip().lower(), v.strip()
        if not sep:
            raise InputError(f"selector term {t!r} needs KEY=VALUE", file=file, field=field, value=spec,
                             allowed=", ".join(keys))
        if k == "name" and target == "demand":
            k = "service"
        if k not in keys:
            raise InputError(f"unknown selector key {k!r} for target {target}", file=file, field=field,
                             value=spec, allowed=", ".join(keys), suggestion=suggest(k, keys))
        if not v:
            raise InputError(f"selector key {k!r} needs a value", file=file, field=field, value=spec)
        filters.setdefault(k, []).extend(a.strip() for a in v.split("|") if a.strip())
    if target != "demand" and not filters:
        raise InputError("an offering selector needs at least one KEY=VALUE (id, pricing, gpu, provider, region)",
                         file=file, field=field, value=spec)
    return Selector(target, filters, text.strip())


def split_scale(spec: str, file: str | None = None, field: str = "--scale") -> tuple[str, float]:
    """``SELECTOR:FACTOR`` -> (selector text, factor)."""
    sel, sep, fac = spec.rpartition(":")
    if not sep or not sel.strip():
        raise InputError("malformed --scale", file=file, field=field, value=spec,
                         allowed="SELECTOR:FACTOR, e.g. pricing=spot,gpu=H100-SXM:0.7 or demand,service=chat:1.5")
    factor = _number(fac, file, field, spec)
    return sel, factor


def _number(text: str, file, field, spec) -> float:
    v = parse_yaml(text, f"{field} {spec}") if text.strip() else None
    if not _is_number(v):
        raise InputError("the factor must be a number", file=file, field=field, value=spec)
    if v < 0:
        raise InputError("the factor must not be negative", file=file, field=field, value=spec)
    return v


def _gpu_map(raw: dict, file: str) -> dict[str, str]:
    """GPU names and aliases as load resolves them: the catalog with the file's inline ``gpus:``."""
    from .sizing.hardware import gpu_alias_map, load_gpus

    inline = raw.get("gpus")
    return gpu_alias_map(load_gpus(inline if isinstance(inline, list) else None, file=file))


def _matches(value: object, patterns: list[str]) -> bool:
    if value is None:
        return False
    v = str(value).lower()
    return any(fnmatch.fnmatchcase(v, p.lower()) if _GLOB.search(p) else v == p.lower() for p in patterns)


def _offering_filters(sel: Selector, raw: dict, file, field, spec) -> dict[str, list[str]]:
    """Resolve GPU names (aliases) and pricing kinds in the filters; unknown names are errors."""
    out = dict(sel.filters)
    if "gpu" in out:
        gmap = _gpu_map(raw, file)
        names = []
        for p in out["gpu"]:
            if _GLOB.search(p):
                names.append(p)
                continue
            hit = gmap.get(p.lower())
            if hit is None:
                choices = sorted(set(gmap.values()))
                raise InputError(f"unknown GPU type {p!r} in selector", file=file, field=field, value=spec,
                                 allowed=", ".join(choices), suggestion=suggest(p, choices))
            names.append(hit)
        out["gpu"] = names
    if "pricing" in out:
        kinds = []
        for p in out["pricing"]:
            q = p.lower().replace("-", "_")
            q = "on_demand" if q == "ondemand" else q
            if not _GLOB.search(q) and q not in PRICING_KINDS:
                raise InputError(f"unknown pricing kind {p!r} in selector", file=file, field=field, value=spec,
                                 allowed=", ".join(PRICING_KINDS), suggestion=suggest(q, PRICING_KINDS))
            kinds.append(q)
        out["pricing"] = kinds
    return out


def _no_match(what: str, sel: Selector, pool: list[dict], keys: tuple, file, field, spec,
              key_of=None) -> InputError:
    key_of = key_of or (lambda item, k: item.get(k))
    present = []
    for k in sel.filters:
        if k in keys:
            vals = sorted({str(key_of(it, k)) for it in pool if key_of(it, k) is not None})
            shown = ", ".join(vals[:15]) + (" ..." if len(vals) > 15 else "")
            present.append(f"{k}: {shown or '(none)'}")
    return InputError(f"selector {sel.text!r} matches no {what}", file=file, field=field, value=spec,
                      allowed="; ".join(present) or None)


def _scale_offerings(raw: dict, sel: Selector, factor: float, file: str, field: str, spec: str) -> int:
    filters = _offering_filters(sel, raw, file, field, spec)
    gmap = _gpu_map(raw, file)
    own = raw.get("offerings")
    if own is not None and not isinstance(own, list):
        raise InputError("`offerings` must be a list", file=file, field="offerings")
    own = own or []
    own_ids = {o.get("id") for o in own if isinstance(o, dict)}
    catalog = [o for o in catalog_entries(raw, file) if o.get("id") not in own_ids]

    def key_of(o: dict, k: str):
        v = o.get(k)
        if k == "gpu" and isinstance(v, str):
            return gmap.get(v.lower(), v)
        return v

    def hit(o: dict) -> bool:
        return isinstance(o, dict) and all(_matches(key_of(o, k), pats) for k, pats in filters.items())

    matched = [("file", o) for o in own if hit(o)] + [("catalog", o) for o in catalog if hit(o)]
    if not matched:
        raise _no_match("offering", sel, [o for o in own if isinstance(o, dict)] + catalog, OFFERING_KEYS,
                        file, field, spec, key_of)
    scaled = 0
    for origin, o in matched:
        cur = o.get(sel.target)
        if not _is_number(cur):
            continue  # e.g. owned offerings have no price_per_hour
        o[sel.target] = cur * factor
        if origin == "catalog":
            raw.setdefault("offerings", []).append(o)
        scaled += 1
    if not scaled:
        raise InputError(f"selector {sel.text!r} matches {len(matched)} offering(s), none of which has "
                         f"{sel.target}", file=file, field=field, value=spec,
                         allowed=", ".join(str(o.get('id')) for _, o in matched[:10]))
    return scaled


def _scale_demand(raw: dict, sel: Selector, factor: float, file: str, field: str, spec: str) -> int:
    services = [s for s in raw.get("inference") or [] if isinstance(s, dict)]
    hit = [s for s in services if _matches(s.get("name"), sel.filters["service"])] if "service" in sel.filters \
        else services
    if not hit:
        raise _no_match("inference service", sel, services, ("service",), file, field, spec,
                        lambda s, k: s.get("name"))
    periods = [p.get("name") for p in raw.get("periods") or [] if isinstance(p, dict)]
    if "period" in sel.filters:
        chosen = [p for p in periods if _matches(p, sel.filters["period"])]
        if not chosen:
            raise InputError(f"selector {sel.text!r} matches no period", file=file, field=field, value=spec,
                             allowed=", ".join(map(str, periods[:30])))
    else:
        chosen = None
    for s in hit:
        d = s.get("demand_rps")
        if chosen is None:
            if _is_number(d):
                s["demand_rps"] = d * factor
            elif isinstance(d, dict):
                s["demand_rps"] = {k: v * factor if _is_number(v) else v for k, v in d.items()}
            else:
                raise InputError("cannot scale demand_rps: it is not set or not a number", file=file,
                                 field=f"inference[{s.get('name')}].demand_rps", value=spec)
        else:
            if _is_number(d):
                d = {p: d for p in periods}
            if not isinstance(d, dict):
                raise InputError("cannot scale demand_rps: it is not set or not a number", file=file,
                                 field=f"inference[{s.get('name')}].demand_rps", value=spec)
            s["demand_rps"] = {k: v * factor if (k in chosen and _is_number(v)) else v for k, v in d.items()}
    return len(hit)


def apply_scale_factor(raw: dict, selector: str | Selector, factor: float, file: str,
                       spec: str | None = None, field: str = "--scale") -> int:
    """Multiply the target of every item ``selector`` matches by ``factor`` (in place); returns the count."""
    spec = spec or f"{selector if isinstance(selector, str) else selector.text}:{factor}"
    sel = selector if isinstance(selector, Selector) else parse_selector(selector, file, field, spec)
    if not _is_number(factor) or factor < 0:
        raise InputError("the factor must be a number, not negative", file=file, field=field, value=spec)
    if sel.kind == "demand":
        return _scale_demand(raw, sel, factor, file, field, spec)
    return _scale_offerings(raw, sel, factor, file, field, spec)


def apply_scale(raw: dict, spec: str, file: str, field: str = "--scale") -> dict:
    """Apply one ``SELECTOR:FACTOR`` to ``raw`` (modified and returned)."""
    sel_text, factor = split_scale(spec, file, field)
    sel = parse_selector(sel_text, file, field, spec)
    apply_scale_factor(raw, sel, factor, file, spec=spec, field=field)
    return raw


def apply_sets(raw: object, specs, file: str, scales=(), *, set_field: str = "--set",
               scale_field: str = "--scale") -> dict:
    """Apply every ``--set`` in order, then every ``--scale`` in order, to a deep copy of ``raw``."""
    if not isinstance(raw, dict):
        raise InputError("--set needs a problem file whose top level is a mapping", file=file)
    out = copy.deepcopy(raw)
    for spec in specs:
        apply_set(out, spec, file, field=set_field)
    for spec in scales:
        apply_scale(out, spec, file, field=scale_field)
    return out
