"""``gpuopt validate``: every input error at once, and warnings about what looks wrong.

:func:`optimizer.load.load_problem` stops at the first stage that fails
(YAML, schema, names, candidates). Validation runs the same stages and keeps
going where it can: a schema error in one offering, service or job drops
that item and the rest is checked further; duplicate names keep the first
item; candidates are built workload by workload when the whole fails.

Warnings do not stop a solve, but usually mean a mistake: offerings of the
file nothing can use, reserved terms longer than the horizon, periods with
no demand and no training, services with no demand at all, periods missing
from a ``demand_rps`` mapping (they count as 0), and everything the solver
pre-checks would call infeasible (:func:`optimizer.studies.precheck.precheck`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from .errors import InputError, InputErrors

LIST_SECTIONS = ("periods", "offerings", "inference", "training")


@dataclass
class Validation:
    """What ``validate`` found: errors (InputError) and warnings (dicts with kind, field, message)."""

    file: str
    errors: list[InputError] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.errors

    def add(self, exc: InputError) -> None:
        """Record an error (or every error of an InputErrors), once each."""
        items = exc.errors if isinstance(exc, InputErrors) else [exc]
        seen = {e.render() for e in self.errors}
        for e in items:
            e = e.with_file(self.file)
            if e.render() not in seen:
                seen.add(e.render())
                self.errors.append(e)

    def warn(self, kind: str, message: str, field: str | None = None) -> None:
        if not any(w["message"] == message for w in self.warnings):
            self.warnings.append({"kind": kind, "field": field, "message": message})

    def to_dict(self) -> dict:
        return {"file": self.file, "valid": self.valid,
                "errors": [error_dict(e) for e in self.errors], "warnings": list(self.warnings)}


def error_dict(e: InputError) -> dict:
    value = e.value
    if not (value is None or isinstance(value, (str, int, bool)) or
            (isinstance(value, float) and math.isfinite(value))):
        value = repr(value)
    return {"file": e.file, "field": e.field, "message": e.message, "value": value, "allowed": e.allowed,
            "suggestion": e.suggestion, "text": e.render()}


def _finite_errors(node: object, file: str, path: str = "") -> list[InputError]:
    """Every NaN / infinite number and non-text key (load stops at the first)."""
    out: list[InputError] = []
    if isinstance(node, float) and not math.isfinite(node):
        out.append(InputError("must be a finite number (not NaN or infinity)", file=file, field=path or None,
                              value=node))
    elif isinstance(node, dict):
        for k, v in node.items():
            if not isinstance(k, str):
                out.append(InputError(f"keys must be text, got {k!r}", file=file, field=path or None))
                continue
            out += _finite_errors(v, file, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = i
            if isinstance(v, dict):
                label = v.get("id", v.get("name", i))
            out += _finite_errors(v, file, f"{path}[{label}]")
    return out


def _schema_stage(raw: dict, file: str, report: Validation):
    """Validate against the schema; drop list items with errors and go on. Returns (spec, dropped)."""
    from .load import validation_to_input_error
    from .schema import ProblemFile

    dropped: dict[str, set[int]] = {s: set() for s in LIST_SECTIONS}
    data = raw
    for _ in range(3):
        try:
            return ProblemFile.model_validate(data), dropped
        except ValidationError as exc:
            report.add(validation_to_input_error(exc, data, file))
            bad: dict[str, set[int]] = {s: set() for s in LIST_SECTIONS}
            for err in exc.errors():
                loc = tuple(err["loc"])
                if len(loc) >= 2 and loc[0] in LIST_SECTIONS and isinstance(loc[1], int):
                    bad[loc[0]].add(loc[1])
                else:
                    return None, dropped  # an error outside list items: nothing sound to go on with
            data = dict(data)
            for section, idx in bad.items():
                if idx:
                    items = data.get(section)
                    data[section] = [it for i, it in enumerate(items) if i not in idx]
                    dropped[section] |= {_label(items[i], i) for i in idx}
    return None, dropped


def _label(item: object, i: int) -> str:
    if isinstance(item, dict):
        for k in ("id", "name"):
            if isinstance(item.get(k), str):
                return item[k]
    return str(i)


def _dedupe(spec, report: Validation):
    """Report duplicate names; keep the first of each."""
    updates = {}
    for section, key in (("periods", "name"), ("offerings", "id"), ("inference", "name"), ("training", "name")):
        items = getattr(spec, section)
        seen, keep, dups = set(), [], []
        for it in items:
            name = getattr(it, key)
            if name in seen:
                if name not in dups:
                    dups.append(name)
                continue
            seen.add(name)
            keep.append(it)
        for d in dups:
            report.add(InputError("duplicate name; names must be unique", field=f"{section}[{d}]", value=d))
        if dups:
            updates[section] = keep
    return spec.model_copy(update=updates) if updates else spec


def _build_stage(spec, file: str, base: Path, report: Validation, dropped: dict):
    from .load import build_problem

    try:
        return build_problem(spec, file, base)
    except InputError as exc:
        items = exc.errors if isinstance(exc, InputErrors) else [exc]
        keep = []
        for e in items:
            # errors that only exist because invalid items were set aside
            if dropped["offerings"] and ("no offerings" in e.message or "unknown region" in e.message):
                continue
            if (dropped["inference"] or dropped["training"]) and "no workloads" in e.message:
                continue
            if dropped["periods"] and ("unknown period" in e.message or "no period lies" in e.message):
                continue
            keep.append(e)
        if keep:
            report.add(InputErrors(keep) if len(keep) > 1 else keep[0])
        return None


def _candidate_stage(problem, report: Validation):
    from .candidates import build_candidates

    try:
        return build_candidates(problem)
    except InputError as first:
        # find every workload's error: one workload at a time
        found = False
        for s in problem.services:
            try:
                build_candidates(dataclasses.replace(problem, services=[s], jobs=[]))
            except InputError as e:
                report.add(e)
                found = True
        for j in problem.jobs:
            try:
                build_candidates(dataclasses.replace(problem, services=[], jobs=[j]))
            except InputError as e:
                report.add(e)
                found = True
        if not found:
            report.add(first)
        return None


def validate_data(raw: object, file: str, base: Path | None = None) -> Validation:
    """Validate problem data already read from ``file``."""
    from .load import parse_problem_file

    report = Validation(file=file)
    base = base if base is not None else Path(file).parent
    if not isinstance(raw, dict):
        try:
            parse_problem_file(raw, file)
        except InputError as e:
            report.add(e)
        return report
    for e in _finite_errors(raw, file):
        report.add(e)
    if any("keys must be text" in e.message for e in report.errors):
        return report
    spec, dropped = _schema_stage(raw, file, report)
    if spec is None:
        return report
    spec = _dedupe(spec, report)
    problem = _build_stage(spec, file, base, report, dropped)
    if problem is None:
        return report
    cands = _candidate_stage(problem, report)
    if report.errors or cands is None:
        return report
    _warnings(problem, cands, report)
    return report


def validate_file(path: str | Path) -> Validation:
    """Read and validate a problem file; never raises on bad input."""
    from .yamlio import read_yaml

    path = Path(path)
    try:
        raw = read_yaml(path)
    except InputError as e:
        report = Validation(file=str(path))
        report.add(e)
        return report
    return validate_data(copy.deepcopy(raw), str(path), path.parent)


# ---------------------------------------------------------------------------
# warnings


def _warnings(problem, cands, report: Validation) -> None:
    from .studies.precheck import precheck
    from .model.formulation import prepare

    for w in problem.warnings:
        report.warn("load", w, field=w.split(":", 1)[0] if w.startswith("offerings[") else None)
    # reserved terms that outlast the horizon: the plan will report what they still owe after it, and
    # finance.commitments says whether the objective counts it
    end = problem.last_month + 1
    O = problem.offerings
    long = O[(O["pricing"] == "reserved") & (O["term_months"] > end + 1e-9)]
    mode = problem.spec.finance.commitments
    counted = "counts the whole term" if mode == "full" else "counts only the horizon's months"
    for oid, row in long[~long["from_catalog"]].iterrows():
        report.warn("term", f"offerings[{oid}]: a reserved term of {int(row['term_months'])} months outlasts the "
                    f"{end}-month horizon; the objective {counted} (finance.commitments: {mode}) and the plan "
                    "reports what is owed after it", field=f"offerings[{oid}]")
    cat = long[long["from_catalog"]]
    if len(cat):
        report.warn("term", f"{len(cat)} catalog reservations enabled by allow.reserved_terms_months outlast the "
                    f"{end}-month horizon; the objective {counted} (finance.commitments: {mode})")
    T = prepare(problem, cands)
    periods = list(problem.periods.index)

    # demand_rps mappings that leave periods out (they count as 0 rps) -- often a typo or a forgotten period
    for s in problem.services:
        if isinstance(s.demand_rps, dict):
            missing = [p for p in periods if p not in s.demand_rps]
            if missing and len(missing) < len(periods):
                shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
                report.warn("missing-demand", f"inference[{s.name}].demand_rps: no value for period(s) {shown}; "
                                              "they count as 0 rps", field=f"inference[{s.name}].demand_rps")
    demand = problem.demand()
    per_service = demand.groupby("service")["rps"].sum()
    for s in problem.services:
        if per_service.get(s.name, 0.0) <= 0 and s.min_replicas == 0:
            report.warn("no-demand", f"inference[{s.name}]: no demand in any period and no min_replicas; "
                                     "the plan will give it nothing", field=f"inference[{s.name}].demand_rps")

    # periods where nothing runs
    busy = set(demand.loc[demand["rps"] > 0, "period"])
    busy |= {p for s in problem.services if s.min_replicas > 0 for p in periods}
    months = problem.periods["month"]
    for j in problem.jobs:
        busy |= set(months[(months >= j.start_month) & (months <= j.deadline_month)].index)
    idle = [p for p in periods if p not in busy]
    if idle and len(idle) < len(periods):
        shown = ", ".join(idle[:8]) + (" ..." if len(idle) > 8 else "")
        report.warn("idle-period", f"periods {shown}: zero demand for every service and no training window; "
                                   "nothing runs in them (reserved and owned units are still paid)",
                    field="periods")

    # the file's own offerings that no workload can use
    usable = set(T.inference_options["offering"]) | set(T.training_options["offering"])
    O = problem.offerings
    for o in problem.spec.offerings:
        if o.id in O.index and o.id not in usable:
            row = O.loc[o.id]
            report.warn("unused-offering",
                        f"offerings[{o.id}] ({row['gpu']}, region {row['region']}, {row['pricing']}): no service or "
                        "job can use it (GPU type, region, replica or cluster size, spot or quota rules)",
                        field=f"offerings[{o.id}]")

    # what the solve would call infeasible before any solver runs
    for d in precheck(problem, cands, T):
        report.warn(d["kind"], f"a solve will find no plan: {d['message']}", field=None)


def render(report: Validation) -> str:
    """The table-format text of a validation."""
    lines = [f"error: {e.render()}" for e in report.errors]
    lines += [f"warning: {w['message']}" for w in report.warnings]
    n_e, n_w = len(report.errors), len(report.warnings)
    plural = (lambda n, w: f"{n} {w}{'' if n == 1 else 's'}")
    if report.valid:
        lines.append(f"{report.file}: valid" + (f" ({plural(n_w, 'warning')})" if n_w else ""))
    else:
        lines.append(f"{report.file}: {plural(n_e, 'error')}" + (f", {plural(n_w, 'warning')}" if n_w else ""))
    return "\n".join(lines)
