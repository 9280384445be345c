"""Stage 1: read a problem file, merge catalogs, validate, and build a :class:`Problem`.

Everything that can be wrong with the input is found here and raised as an
:class:`~optimizer.errors.InputError` naming the file, the field, the value and
what is allowed. Later stages may assume a consistent problem.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import ValidationError

from . import catalog as cat
from .errors import InputError, InputErrors, suggest, unknown_name
from .schema import (
    InferenceService,
    Offering,
    ProblemFile,
    TrainingJob,
)
from .importers import load_offering_file
from .sizing.architecture import load_models, model_alias_map
from .sizing.hardware import gpu_alias_map, load_gpus
from .vocabulary import HOURS_PER_MONTH
from .yamlio import read_yaml

#: configurations a service may use over the horizon (``stability.max_configurations``) and currency
#: per replica started (``stability.replica_start_cost``); the choice, and what it costs on the
#: examples, are in docs/formulation.md ("Stable fleets")
DEFAULT_MAX_CONFIGURATIONS = 1
DEFAULT_REPLICA_START_COST = 0.0


@dataclass
class Problem:
    """A validated problem: the user's file merged with the catalogs it names.

    Attributes
    ----------
    periods
        One row per period: ``name`` (index), ``hours``, ``month``.
    offerings
        One row per offering (index ``id``), every field of
        :class:`~optimizer.schema.Offering` with kind defaults filled in.
    services, jobs
        Inference services and training jobs, with names resolved to catalog names.
    """

    file: str
    spec: ProblemFile
    periods: pd.DataFrame
    offerings: pd.DataFrame
    services: list[InferenceService]
    jobs: list[TrainingJob]
    overridden: list[dict] = field(default_factory=list)
    catalog_version: str = ""
    warnings: list[str] = field(default_factory=list)
    #: offerings the catalogs or the file define that this problem does not consider: id, reason
    excluded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["id", "reason"]))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def currency(self) -> str:
        return self.spec.currency

    @property
    def horizon_hours(self) -> float:
        return float(self.periods["hours"].sum())

    @property
    def horizon_months(self) -> float:
        return self.horizon_hours / HOURS_PER_MONTH

    @property
    def objective(self) -> str:
        return self.spec.finance.objective

    @property
    def discount_rate(self) -> float:
        return self.spec.finance.discount_rate

    @property
    def budget(self) -> float | None:
        return self.spec.constraints.budget

    @property
    def last_month(self) -> int:
        """The horizon's last calendar month (its last period may span several)."""
        P = self.periods
        return int(max(P["month"].max(), np.ceil(P["month"] + P["hours"] / HOURS_PER_MONTH - 1e-9).max() - 1))

    def stability(self, service: InferenceService) -> tuple[int, float]:
        """``(max_configurations, replica_start_cost)`` of a service: its own keys over the problem's.

        Defaults: :data:`DEFAULT_MAX_CONFIGURATIONS` and
        :data:`DEFAULT_REPLICA_START_COST`.
        """
        own = service.stability
        top = self.spec.stability
        n = (own.max_configurations if own and own.max_configurations is not None
             else top.max_configurations if top.max_configurations is not None else DEFAULT_MAX_CONFIGURATIONS)
        c = (own.replica_start_cost if own and own.replica_start_cost is not None
             else top.replica_start_cost if top.replica_start_cost is not None else DEFAULT_REPLICA_START_COST)
        return int(n), float(c)

    def demand(self) -> pd.DataFrame:
        """Demand per service, bucket and period: columns service, bucket, period, rps."""
        rows = []
        for s in self.services:
            for b in s.buckets:
                for p in self.periods.index:
                    d = s.demand_rps if not isinstance(s.demand_rps, dict) else s.demand_rps.get(p, 0.0)
                    rows.append((s.name, b.name, p, float(d) * b.share))
        return pd.DataFrame(rows, columns=["service", "bucket", "period", "rps"])


# ---------------------------------------------------------------------------
# pydantic errors -> InputError


def _item_label(raw: object, loc: tuple) -> str:
    """Render a pydantic location as ``offerings[cloud-h100-od].price_per_hour``."""
    parts: list[str] = []
    node = raw
    for key in loc:
        if isinstance(key, int):
            label = str(key)
            item = node[key] if isinstance(node, list) and key < len(node) else None
            if isinstance(item, dict):
                for k in ("id", "name"):
                    if isinstance(item.get(k), str):
                        label = item[k]
                        break
            if parts:
                parts[-1] += f"[{label}]"
            else:
                parts.append(f"[{label}]")
            node = item
        else:
            # pydantic puts union/literal branch names into loc; skip those not in the data
            if isinstance(node, dict) and key not in node and parts and key in (
                "float", "int", "str", "bool", "dict[str,float]", "list[...]", "function-after[_pow2(), int]"
            ):
                continue
            parts.append(str(key))
            node = node.get(key) if isinstance(node, dict) else None
    return ".".join(parts)


def _is_branch_tag(k: object) -> bool:
    return isinstance(k, str) and (
        k in ("float", "int", "str", "bool", "list", "dict") or "[" in k or "(" in k
        or k.startswith("function-") or k.startswith("constrained-"))


def _data_loc(raw: object, loc: tuple) -> tuple:
    """``loc`` without pydantic's union branch tags (``float``, ``dict[str,float]``); a key the
    data really has is kept even when it looks like a tag (a top-level key ``(`` crashed here)."""
    out, node = [], raw
    for k in loc:
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        elif _is_branch_tag(k):
            continue
        else:
            node = None
        out.append(k)
    return tuple(out)


def _lookup(raw: object, loc: tuple) -> object:
    node = raw
    for key in loc:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return None
    return node


def _model_for(loc: tuple):
    """The pydantic model class that owns the last key of ``loc`` (for unknown-key hints)."""
    from . import schema as sc

    model = sc.ProblemFile
    for key in loc[:-1]:
        if isinstance(key, int) or model is None:
            continue
        f = model.model_fields.get(key)
        if f is None:
            return None
        ann = f.annotation
        model = None
        for cand in _annotation_models(ann):
            model = cand
            break
    return model


def _annotation_models(ann) -> list:
    from typing import get_args

    from pydantic import BaseModel

    out = []
    stack = [ann]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            out.append(a)
        else:
            stack.extend(get_args(a))
    return out


def validation_to_input_error(exc: ValidationError, raw: object, file: str) -> InputError:
    """Turn every pydantic error into a readable InputError (several at once)."""
    errors: list[InputError] = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = tuple(err["loc"])
        # drop union branch tags such as 'float' / 'dict[str,...]' that are not data keys
        data_loc = _data_loc(raw, loc)
        fieldname = _item_label(raw, data_loc)
        kind = err["type"]
        value = _lookup(raw, data_loc) if kind != "missing" else None
        if kind == "extra_forbidden":
            owner = _model_for(data_loc)
            allowed = sorted(owner.model_fields) if owner else []
            key = str(data_loc[-1]) if data_loc else str(loc[-1])
            e = InputError(
                f"unknown key {key!r}",
                file=file,
                field=fieldname,
                allowed=", ".join(allowed) if allowed else None,
                suggestion=suggest(key, allowed) if allowed else None,
            )
        elif kind == "missing":
            e = InputError("required field is missing", file=file, field=fieldname)
        elif kind == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",") if c.strip()]
            e = InputError(
                "value is not allowed",
                file=file,
                field=fieldname,
                value=value,
                allowed=", ".join(choices),
                suggestion=suggest(str(value), choices) if isinstance(value, str) else None,
            )
        elif kind in ("finite_number",):
            e = InputError("must be a finite number (not NaN or infinity)", file=file, field=fieldname, value=value)
        else:
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            e = InputError(msg[0].lower() + msg[1:] if msg else kind, file=file, field=fieldname, value=value)
        key = e.render()
        if key not in seen:
            seen.add(key)
            errors.append(e)
    return errors[0] if len(errors) == 1 else InputErrors(errors)


def parse_problem_file(raw: object, file: str) -> ProblemFile:
    """Validate raw YAML data against the problem-file schema."""
    if raw is None:
        raise InputError("file is empty; a problem needs at least `periods`", file=file)
    if not isinstance(raw, dict):
        raise InputError(
            f"the top level must be a mapping of keys (name, periods, offerings, ...), "
            f"not a {type(raw).__name__}",
            file=file,
        )
    _check_numbers(raw, file)
    try:
        return ProblemFile.model_validate(raw)
    except ValidationError as exc:
        raise validation_to_input_error(exc, raw, file) from None


def _check_numbers(node: object, file: str, path: str = "") -> None:
    """Reject NaN and infinite numbers anywhere (YAML's .nan / .inf)."""
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError("must be a finite number (not NaN or infinity)", file=file, field=path or None, value=node)
    if isinstance(node, dict):
        for k, v in node.items():
            if not isinstance(k, str):
                raise InputError(f"keys must be text, got {k!r}", file=file, field=path or None)
            _check_numbers(v, file, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = i
            if isinstance(v, dict):
                label = v.get("id", v.get("name", i))
            _check_numbers(v, file, f"{path}[{label}]")


# ---------------------------------------------------------------------------
# catalogs


def _catalog_offerings(spec: ProblemFile, base: Path, file: str) -> tuple[list[Offering], list[str]]:
    offerings: list[Offering] = []
    origins: list[str] = []
    for i, entry in enumerate(spec.catalog):
        if entry.lower() == "default":
            files = cat.offering_catalog_files("default")
        else:
            p = Path(entry)
            p = p if p.is_absolute() else base / p
            if not p.exists():
                raise InputError(
                    "catalog file not found",
                    file=file,
                    field=f"catalog[{i}]",
                    value=entry,
                    allowed="`default` or a path relative to the problem file",
                    suggestion="default" if suggest(entry, ["default"]) else None,
                )
            files = [p]
        for f in files:
            got = load_offering_file(f)
            offerings.extend(got)
            origins.extend([str(f)] * len(got))
    return offerings, origins


# ---------------------------------------------------------------------------
# names


def _name_maps(spec: ProblemFile, file: str, err) -> tuple[dict | None, dict | None]:
    """GPU and model name maps (lower-cased name or alias -> canonical name): the sizing
    catalogs with the file's inline ``gpus:``/``models:`` applied. A bad inline entry is
    reported through ``err`` and leaves its map ``None``."""
    gpu_map = model_map = None
    try:
        gpu_map = gpu_alias_map(load_gpus(spec.gpus, file=file))
    except InputError as e:
        err(e)
    try:
        model_map = model_alias_map(load_models(spec.models, file=file))
    except InputError as e:
        err(e)
    return gpu_map, model_map


def _duplicates(names: list[str]) -> list[str]:
    seen, dup = set(), []
    for n in names:
        if n in seen and n not in dup:
            dup.append(n)
        seen.add(n)
    return dup


def _resolve_profile_gpus(profiles: list, where: str, gpu_map: dict[str, str], err) -> list:
    """Profiles with canonical GPU names; an unknown name is reported through ``err``."""
    out = []
    for k, pr in enumerate(profiles):
        try:
            out.append(pr.model_copy(update={"gpu": cat.resolve(
                "GPU type", pr.gpu, gpu_map, field=f"{where}.profiles[{k}].gpu")}))
        except InputError as e:
            err(e)
    return out


def build_problem(spec: ProblemFile, file: str, base: Path) -> Problem:
    """Merge catalogs into the validated spec, resolve names and check references."""
    errors: list[InputError] = []

    def err(e: InputError) -> None:
        errors.append(e.with_file(file))

    for section, names in (
        ("periods", [p.name for p in spec.periods]),
        ("offerings", [o.id for o in spec.offerings]),
        ("inference", [s.name for s in spec.inference]),
        ("training", [j.name for j in spec.training]),
    ):
        for d in _duplicates(names):
            err(InputError("duplicate name; names must be unique", field=f"{section}[{d}]", value=d))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

    if not spec.inference and not spec.training:
        raise InputError("the problem has no workloads; add `inference:` services or `training:` jobs", file=file)

    gpu_map, model_map = _name_maps(spec, file, err)
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

    # catalogs first, then the file's own offerings; a later id replaces an earlier one
    cat_offerings, origins = _catalog_offerings(spec, base, file)
    merged: dict[str, Offering] = {}
    origin_of: dict[str, str] = {}
    overridden: list[dict] = []
    for o, origin in list(zip(cat_offerings, origins)) + [(o, file) for o in spec.offerings]:
        if o.id in merged:
            overridden.append({"id": o.id, "replaced": origin_of[o.id], "by": origin})
        merged[o.id] = o
        origin_of[o.id] = origin

    if not merged:
        raise InputError(
            "no offerings: add `offerings:` or `catalog: [default]`", file=file, field="offerings"
        )

    offerings = []
    for oid, o in merged.items():
        where = {"field": f"offerings[{oid}].gpu"} if origin_of[oid] == file else {
            "field": f"offerings[{oid}].gpu", "file": origin_of[oid]}
        try:
            gpu = cat.resolve("GPU type", o.gpu, gpu_map, **where)
        except InputError as e:
            err(e)
            continue
        offerings.append(o.model_copy(update={"gpu": gpu}))

    period_names = [p.name for p in spec.periods]
    regions = sorted({o.region for o in offerings})

    services = []
    for s in spec.inference:
        updates: dict = {}
        try:
            updates["model"] = cat.resolve("model", s.model, model_map, field=f"inference[{s.name}].model")
        except InputError as e:
            err(e)
        if isinstance(s.demand_rps, dict):
            for p in s.demand_rps:
                if p not in period_names:
                    err(unknown_name("period", p, period_names, field=f"inference[{s.name}].demand_rps.{p}", value=p))
        for r in s.regions or []:
            if r not in regions:
                err(unknown_name("region", r, regions, field=f"inference[{s.name}].regions", value=r))
        if s.profiles:
            updates["profiles"] = _resolve_profile_gpus(s.profiles, f"inference[{s.name}]", gpu_map, err)
        services.append(s.model_copy(update=updates))

    jobs = []
    # the horizon ends where its last period does: a period of 8760 h at month 24 covers months 24..35
    last_month = max(math.ceil(p.month + p.hours / HOURS_PER_MONTH - 1e-9) - 1 for p in spec.periods)
    last_month = max(last_month, max(p.month for p in spec.periods))
    for j in spec.training:
        updates = {}
        try:
            updates["model"] = cat.resolve("model", j.model, model_map, field=f"training[{j.name}].model")
        except InputError as e:
            err(e)
        for r in j.regions or []:
            if r not in regions:
                err(unknown_name("region", r, regions, field=f"training[{j.name}].regions", value=r))
        months = {p.month for p in spec.periods}
        for key in ("start_month", "deadline_month"):
            if getattr(j, key) > last_month:
                err(InputError(
                    f"month {getattr(j, key)} lies after the horizon, which ends with month {last_month}",
                    field=f"training[{j.name}].{key}", value=getattr(j, key),
                    allowed=f"a month of the horizon, 0..{last_month}"))
        if j.deadline_month <= last_month and not any(j.start_month <= m <= j.deadline_month for m in months):
            err(InputError(
                f"no period lies in the job's window of months {j.start_month}..{j.deadline_month}",
                field=f"training[{j.name}].deadline_month", value=j.deadline_month,
                allowed=f"months of the periods: {sorted(months)}"))
        if j.profiles:
            updates["profiles"] = _resolve_profile_gpus(j.profiles, f"training[{j.name}]", gpu_map, err)
        jobs.append(j.model_copy(update=updates))

    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)

    periods = pd.DataFrame(
        [(p.name, float(p.hours), int(p.month)) for p in spec.periods], columns=["name", "hours", "month"]
    ).set_index("name")
    off = pd.DataFrame([o.model_dump() for o in offerings]).set_index("id")
    # an id a named catalog defines is the catalog's offering, even when the file or --set changed it
    catalog_ids = {o.id for o in cat_offerings}
    off["from_catalog"] = off.index.isin(list(catalog_ids))
    off = _fill_offering_defaults(off)

    horizon_months = periods["hours"].sum() / HOURS_PER_MONTH
    _check_providers(spec, off, file)
    reasons = _exclusions(spec, off, horizon_months)
    excluded = pd.DataFrame({"id": list(reasons), "reason": list(reasons.values())}, columns=["id", "reason"])
    warnings = _assumption_warnings(spec, off[~off.index.isin(list(reasons))])
    off = off[~off.index.isin(list(reasons))]
    if off.empty:
        raise InputError(
            f"every offering is ruled out ({len(reasons)}): " + "; ".join(
                f"{i}: {r}" for i, r in list(reasons.items())[:3]) + ("; ..." if len(reasons) > 3 else ""),
            file=file, field="allow / providers",
            allowed="keep at least one offering: allow.buy, allow.reserved_terms_months, providers.include")
    return Problem(
        file=file,
        spec=spec,
        periods=periods,
        offerings=off,
        services=services,
        jobs=jobs,
        overridden=overridden,
        catalog_version=cat.catalog_version(),
        warnings=warnings,
        excluded=excluded,
    )


def _provider_of(off: pd.DataFrame) -> pd.Series:
    """Each offering's provider, lower-cased; None where it names none."""
    return pd.Series([p.lower() if isinstance(p, str) else None for p in off["provider"]], index=off.index,
                     dtype=object)


def provider_allowed(providers, provider: str | None) -> bool:
    """Whether an offering of ``provider`` passes a ``providers: {include, exclude}`` choice.

    Offerings that name no provider (a file's own definitions) always pass.
    """
    if providers is None or provider is None:
        return True
    p = provider.lower()
    if providers.include is not None and p not in {n.lower() for n in providers.include}:
        return False
    return p not in {n.lower() for n in providers.exclude}


def _check_providers(spec: ProblemFile, off: pd.DataFrame, file: str) -> None:
    """Every provider name in a ``providers:`` choice names some offering's provider."""
    known = sorted({p for p in _provider_of(off) if isinstance(p, str)})
    choices = [("providers", spec.providers)]
    choices += [(f"inference[{s.name}].providers", s.providers) for s in spec.inference]
    choices += [(f"training[{j.name}].providers", j.providers) for j in spec.training]
    errors = []
    for where, ch in choices:
        if ch is None:
            continue
        for key in ("include", "exclude"):
            for name in getattr(ch, key) or []:
                if name.lower() not in known:
                    errors.append(unknown_name("provider", name, known, field=f"{where}.{key}", value=name,
                                               file=file))
    if errors:
        raise errors[0] if len(errors) == 1 else InputErrors(errors)


def _exclusions(spec: ProblemFile, off: pd.DataFrame, horizon_months: float) -> dict[str, str]:
    """Offerings this problem does not consider, with the reason and the key that would enable them.

    Catalog owned offerings need ``allow.buy``; catalog reservations whose
    term outlasts the horizon need their term in ``allow.reserved_terms_months``;
    ``providers`` keeps or drops offerings by provider.
    """
    out: dict[str, str] = {}
    terms = set(spec.allow.reserved_terms_months)
    prov = _provider_of(off)
    for oid, row in off.iterrows():
        if row["from_catalog"] and row["pricing"] == "owned" and not spec.allow.buy:
            out[oid] = "a catalog server to buy; buying is off (allow.buy: true enables it)"
        elif (row["from_catalog"] and row["pricing"] == "reserved" and row["term_months"] > horizon_months + 1e-9
              and int(row["term_months"]) not in terms):
            out[oid] = (f"a catalog reservation of {int(row['term_months'])} months outlasts the "
                        f"{horizon_months:.1f}-month horizon (allow.reserved_terms_months: "
                        f"[{int(row['term_months'])}] enables it)")
        elif not provider_allowed(spec.providers, prov[oid]):
            out[oid] = f"provider {row['provider']} is not allowed by providers"
    return out


def _assumption_warnings(spec: ProblemFile, off: pd.DataFrame) -> list[str]:
    """A warning for each catalog option the problem enabled whose numbers are assumptions."""
    out = []
    enabled = off["from_catalog"] & ((off["pricing"] == "owned") | (off["pricing"] == "reserved"))
    for oid, row in off[enabled].iterrows():
        assumed = row.get("assumed")
        if isinstance(assumed, list) and assumed and (row["pricing"] == "owned" or int(row["term_months"]) in set(
                spec.allow.reserved_terms_months)):
            out.append(f"offerings[{oid}]: enabled by allow, and its {', '.join(assumed)} "
                       f"{'is an assumption' if len(assumed) == 1 else 'are assumptions'} (no primary source)")
    return out


# Defaults for absent kind-specific fields (docs/problem-format.md lists them).
OFFERING_DEFAULTS = {
    "upfront": 0.0,
    "term_months": 12,
    "residual_fraction": 0.0,
    "idle_power_fraction": 0.0,
    "pue": 1.0,
    "fixed_per_month": 0.0,
    "existing_units": 0,
}


def _finance_default(name: str) -> float:
    t = cat.finance_defaults()
    return float(t.loc[t["name"] == name, "value"].iloc[0])


def _fill_offering_defaults(off: pd.DataFrame) -> pd.DataFrame:
    """Kind defaults, and the topology defaults (docs/problem-format.md, "Offerings").

    An offering that names no fabric has none: a training cluster never spans
    two of its units. A named fabric without a bandwidth gets the fabric's
    default (``catalogs/fabrics.csv``). Rented offerings bill whole units
    unless they say ``billing: per_gpu``.
    """
    off = off.copy()
    off["fabric"] = off["fabric"].where(off["fabric"].notna(), "none")
    fab = cat.fabric_table().set_index("name")["gbps_per_gpu"]
    named = (off["fabric"] != "none") & off["fabric_gbps_per_gpu"].isna()
    off["fabric_gbps_per_gpu"] = off["fabric_gbps_per_gpu"].astype(float)
    off.loc[named, "fabric_gbps_per_gpu"] = off.loc[named, "fabric"].map(fab).astype(float)
    off["max_cluster_units"] = off["max_cluster_units"].astype(float)
    off.loc[off["fabric"] == "none", "max_cluster_units"] = 1.0
    rented = off["pricing"].isin(["on_demand", "spot"])
    off["billing"] = off["billing"].where(off["billing"].notna() | ~rented, "per_unit")
    # a spot offering without a measured rate gets the catalog's (finance_defaults.csv)
    spot = (off["pricing"] == "spot") & off["interruptions_per_hour"].isna()
    off["interruptions_per_hour"] = off["interruptions_per_hour"].astype(float)
    if spot.any():
        off.loc[spot, "interruptions_per_hour"] = _finance_default("spot_interruptions_per_hour")
    for col, default in OFFERING_DEFAULTS.items():
        kind = "reserved" if col in ("upfront", "term_months") else "owned"
        mask = (off["pricing"] == kind) & off[col].isna()
        off[col] = off[col].astype(float)
        off.loc[mask, col] = float(default)
    return off


def load_problem(path: str | Path, sets: list[str] | tuple[str, ...] = (),
                 scales: list[str] | tuple[str, ...] = ()) -> Problem:
    """Read, overlay (``--set``), validate and merge a problem file.

    Parameters
    ----------
    path
        The problem YAML file.
    sets
        ``PATH=VALUE`` / ``PATH*=FACTOR`` overlays applied to a copy of the data.
    scales
        ``SELECTOR:FACTOR`` overlays (``--scale``), applied after ``sets``.
    """
    path = Path(path)
    file = str(path)
    raw = read_yaml(path)
    if sets or scales:
        from .overlay import apply_sets

        raw = apply_sets(copy.deepcopy(raw), sets, file, scales=scales)
    spec = parse_problem_file(raw, file)
    return build_problem(spec, file, path.parent)
