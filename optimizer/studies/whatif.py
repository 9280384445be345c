"""What-if: a problem changed by overlays, solved beside the base, and what moved.

A *change* is a list of ``--set`` strings and a list of ``--scale`` strings
(:mod:`optimizer.overlay`). :func:`compare` puts two plans side by side: the
cost delta by pricing kind and by workload, units per offering, inference
replicas per service and GPU type, and training placement. Named scenarios
(a ``scenarios:`` section of the problem file, or a scenario file) are
changes with a name; :func:`summary` is the one-row digest each of them
gets in the side-by-side table and each sweep point gets.

docs/whatif.md describes the grammar and the outputs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from ..errors import InputError
from ..load import Problem, build_problem, parse_problem_file, validation_to_input_error
from ..overlay import apply_sets
from ..plan import Plan
from ..schema import Scenario
from ..solve.result import Status
from ..vocabulary import PAY_PER_HOUR, PRICING_KINDS
from ..yamlio import read_yaml

#: Values closer than this are the same (cost deltas, hours).
TOL = 1e-6


# ---------------------------------------------------------------------------
# problems from data


def read_raw(path: str | Path) -> dict:
    """The problem file's data (read once; overlays change copies of it)."""
    raw = read_yaml(Path(path))
    if not isinstance(raw, dict):
        parse_problem_file(raw, str(path))  # raises the loader's own message
    return raw


def overlay(raw: dict, file: str, sets=(), scales=(), set_field: str = "--set",
            scale_field: str = "--scale") -> dict:
    """A copy of ``raw`` with ``sets`` then ``scales`` applied (``raw`` itself when there are none)."""
    if not sets and not scales:
        return raw
    return apply_sets(raw, list(sets), file, scales=list(scales), set_field=set_field, scale_field=scale_field)


def build(raw: dict, file: str) -> Problem:
    """Validate and merge problem data read from ``file`` (catalog paths are relative to it)."""
    spec = parse_problem_file(raw, file)
    return build_problem(spec, file, Path(file).parent)


# ---------------------------------------------------------------------------
# digests of a plan


def _f(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def units_in_use(plan: Plan) -> dict[str, int]:
    """Units per offering: committed units (reserved, owned), else the most running in any period.

    Rented units count inference replicas' units plus each training cluster's
    units (cluster GPUs ÷ GPUs per unit, rounded up) in the periods it runs.
    """
    if not plan.status.has_plan:
        return {}
    O = plan.problem.offerings
    per: dict[tuple[str, str], float] = {}
    u = plan.usage
    if len(u):
        for o, p, n in zip(u["offering"], u["period"], u["units"]):
            per[(o, p)] = per.get((o, p), 0.0) + float(n)
    t = plan.training
    if len(t):
        for o, p, pricing, g in zip(t["offering"], t["period"], t["pricing"], t["gpus"]):
            if pricing in PAY_PER_HOUR:
                per[(o, p)] = per.get((o, p), 0.0) + math.ceil(float(g) / float(O.at[o, "gpus_per_unit"]))
    out: dict[str, int] = {}
    for (o, _), n in per.items():
        out[o] = max(out.get(o, 0), int(round(n)))
    return {o: n for o, n in sorted(out.items()) if n > 0}


def mix_text(mix: dict[str, int]) -> str:
    """``{"a": 2, "b": 1}`` -> ``a×2 b×1``."""
    return " ".join(f"{o}×{n}" for o, n in mix.items()) or "-"


def cost_by_pricing(plan: Plan) -> dict[str, float]:
    if not plan.status.has_plan:
        return {}
    bp = plan.by_pricing()
    return {str(k): float(v) for k, v in zip(bp["pricing"], bp["cost"])}


def summary(plan: Plan) -> dict:
    """One plan in a row: status, objective, its proven bound and gap, total cost, cost by pricing kind, the chosen
    mix, its audit.

    ``bound`` and ``gap`` are the solve's (``gpuopt solve``'s JSON): the
    objective is at most ``gap`` (relative) above the cheapest plan there
    is, so a row stopped on a time limit says how far it may be from the
    optimum. ``audit`` lists the plan's violations (empty when it passed; a
    plan that fails its audit is a bug in gpuopt, and the commands exit 4
    on it).
    """
    r = plan.result
    return {
        "status": r.status.value,
        "message": r.message or "",
        "objective": _f(plan.objective),
        "bound": _f(r.bound),
        "gap": _f(r.gap),
        "total_cost": _f(plan.total_cost),
        "by_pricing": cost_by_pricing(plan),
        "mix": units_in_use(plan),
        "solve_seconds": round(float(r.solve_seconds), 4),
        "audit": list(plan.audit or []),
    }


def replicas(plan: Plan) -> pd.DataFrame:
    """Replicas per service and GPU type: the peak over periods and the hour-weighted average."""
    cols = ["service", "gpu", "peak", "average"]
    if not plan.status.has_plan or plan.inference.empty:
        return pd.DataFrame(columns=cols)
    P = plan.problem.periods
    g = plan.inference.groupby(["service", "gpu", "period"], as_index=False)["replicas"].sum()
    g["rh"] = g["replicas"] * g["period"].map(P["hours"])
    out = g.groupby(["service", "gpu"], as_index=False).agg(peak=("replicas", "max"), rh=("rh", "sum"))
    out["average"] = out["rh"] / float(P["hours"].sum())
    return out[cols]


def placement(plan: Plan) -> pd.DataFrame:
    """Training cluster hours per job, offering and cluster size."""
    cols = ["job", "offering", "gpu", "gpus", "hours"]
    if not plan.status.has_plan or plan.training.empty:
        return pd.DataFrame(columns=cols)
    return plan.training.groupby(["job", "offering", "gpu", "gpus"], as_index=False)["hours"].sum()[cols]


# ---------------------------------------------------------------------------
# comparison


def _delta(a, b):
    return None if a is None or b is None else b - a


def _side(base: dict, new: dict, key: str) -> list[dict]:
    names = list(dict.fromkeys(list(base) + list(new)))
    return [{key: n, "base": base.get(n, 0.0), "scenario": new.get(n, 0.0),
             "delta": new.get(n, 0.0) - base.get(n, 0.0)} for n in names]


def compare(base: Plan, new: Plan) -> dict:
    """What changed from ``base`` to ``new``: costs, and what moved (changed rows only)."""
    both = base.status.has_plan and new.status.has_plan
    out: dict = {
        "status": {"base": base.status.value, "scenario": new.status.value},
        "objective": {"base": _f(base.objective), "scenario": _f(new.objective),
                      "delta": _delta(_f(base.objective), _f(new.objective))},
        "total_cost": {"base": _f(base.total_cost), "scenario": _f(new.total_cost),
                       "delta": _delta(_f(base.total_cost), _f(new.total_cost))},
        "by_pricing": [], "by_workload": [], "units": [], "replicas": [], "training": [],
    }
    if not both:
        return out
    bp = _side(cost_by_pricing(base), cost_by_pricing(new), "pricing")
    order = {k: i for i, k in enumerate(PRICING_KINDS)}
    out["by_pricing"] = sorted(bp, key=lambda r: order.get(r["pricing"], 99))

    def wl(p: Plan) -> dict:
        w = p.by_workload()
        return {str(k): float(v) for k, v in zip(w["workload"], w["cost"])}

    out["by_workload"] = _side(wl(base), wl(new), "workload")

    O = pd.concat([base.problem.offerings, new.problem.offerings])
    O = O[~O.index.duplicated(keep="last")]
    ub, un = units_in_use(base), units_in_use(new)
    for o in sorted(set(ub) | set(un)):
        a, b = ub.get(o, 0), un.get(o, 0)
        if a != b:
            out["units"].append({"offering": o, "pricing": str(O.at[o, "pricing"]), "gpu": str(O.at[o, "gpu"]),
                                 "base": a, "scenario": b, "delta": b - a})

    rb, rn = replicas(base), replicas(new)
    m = rb.merge(rn, on=["service", "gpu"], how="outer", suffixes=("_base", "_scenario")).fillna(0)
    for r in m.sort_values(["service", "gpu"]).itertuples(index=False):
        if abs(r.peak_base - r.peak_scenario) > TOL or abs(r.average_base - r.average_scenario) > 1e-3:
            out["replicas"].append({"service": r.service, "gpu": r.gpu,
                                    "base_peak": int(r.peak_base), "scenario_peak": int(r.peak_scenario),
                                    "base_average": round(float(r.average_base), 4),
                                    "scenario_average": round(float(r.average_scenario), 4)})

    tb, tn = placement(base), placement(new)
    m = tb.merge(tn, on=["job", "offering", "gpu", "gpus"], how="outer", suffixes=("_base", "_scenario")).fillna(0)
    for r in m.sort_values(["job", "offering", "gpus"]).itertuples(index=False):
        if abs(r.hours_base - r.hours_scenario) > 1e-4:
            out["training"].append({"job": r.job, "offering": r.offering, "gpu": r.gpu, "gpus": int(r.gpus),
                                    "base_hours": round(float(r.hours_base), 4),
                                    "scenario_hours": round(float(r.hours_scenario), 4),
                                    "delta_hours": round(float(r.hours_scenario - r.hours_base), 4)})
    return out


@dataclass
class WhatIf:
    """One change compared with the base: both plans and what moved (:func:`compare`)."""

    change: Change
    base: Plan
    scenario: Plan

    @property
    def delta(self) -> dict:
        return compare(self.base, self.scenario)

    def to_dict(self) -> dict:
        """The JSON of ``gpuopt whatif --set ... --format json``."""
        from ..render.report import plan_dict

        ch = self.change
        return {"base": plan_dict(self.base), "scenario": plan_dict(self.scenario), "delta": self.delta,
                "change": {"name": ch.name, "description": ch.description, "set": ch.sets, "scale": ch.scales}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def solve_change(change: Change, base: Problem, scenario: Problem, **opts) -> WhatIf:
    """Solve ``base`` and ``scenario`` (``opts``: :func:`optimizer.pipeline.run`'s) and compare them.

    A scenario that changes only prices gets the base's model re-priced
    instead of built again (:func:`optimizer.model.reprice.models_of_structure`;
    the same model to the bit). Whatever the change, the two searches share
    their plans, so that a delta never comes from one side's search stopping
    early. A plan of one side is read in the other's model by block and
    coordinates (:meth:`optimizer.plan.Plan.point`), and used only where it
    meets every row of that model:

    - the scenario starts from the base's plan, so its plan never costs more
      than the base's plan at the scenario's inputs, wherever that is a plan
      of the scenario (a price changed, an offering added or given more supply,
      less demand: a plan past the scenario's replica bounds, which are
      derived from the demand, is read with those columns clipped to them,
      :func:`optimizer.solve.feasibility.within_bounds`);
    - where the scenario's plan is a plan of the base's model that costs
      less than the base's plan by more than the gap (possible only when
      the base's search stopped on its time limit), the base is searched
      again from it, a third solve.

    Without a time limit both sides are proven within the gap and neither
    hand-over changes a result (docs/whatif.md).
    """
    from ..model.reprice import models_of_structure
    from ..pipeline import run

    gap = opts.get("gap", 1e-6)
    base_models, scenario_models = models_of_structure(base), models_of_structure(scenario)
    before = run(base, models=base_models, **opts)
    ours = before.point()
    after = run(scenario, models=scenario_models, **opts, known=[] if ours is None else [ours])
    theirs = after.point()
    if theirs is not None and before.beating([theirs], gap):
        before = run(base, models=base_models, **opts, known=[theirs])
    return WhatIf(change, before, after)


def _money(x) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _signed(x) -> str:
    return "-" if x is None else f"{_zero(x):+,.2f}"


def _zero(x: float) -> float:
    """Rounding noise (below half a cent) prints as 0, not -0.00."""
    return 0.0 if abs(x) < 5e-3 else x


def _frame(rows: list[dict], cols: list[str] | None = None) -> str:
    if not rows:
        return "  (nothing moved)"
    df = pd.DataFrame(rows)
    if cols:
        df = df[cols]
    for c in ("delta", "delta_hours"):
        if c in df:
            df[c] = [f"{v:+,d}" if isinstance(v, int) else f"{_zero(v):+,.2f}" for v in df[c].tolist()]
    return df.to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def _gap_word(plan: Plan) -> str:
    return gap_text(_f(plan.result.gap) if plan.status.has_plan else None)


def _audit_word(plan: Plan) -> str:
    if plan.audit:
        return f"FAILED ({len(plan.audit)})"
    return "passed" if plan.audit == [] and plan.status.has_plan else "-"


def render_compare(delta: dict, base: Plan, new: Plan, title: str) -> str:
    """The comparison as readable text."""
    cur = base.problem.currency
    o = delta["objective"]
    pct = ""
    if o["delta"] is not None and o["base"]:
        pct = f" ({100 * _zero(o['delta']) / o['base']:+.1f} %)"
    lines = [
        f"what if: {title}",
        f"{'':<12}{'base':>18}{'scenario':>18}{'delta':>18}",
        f"{'status':<12}{base.status.value:>18}{new.status.value:>18}",
        f"{'audit':<12}{_audit_word(base):>18}{_audit_word(new):>18}",
        f"{'gap':<12}{_gap_word(base):>18}{_gap_word(new):>18}",
        f"{'objective':<12}{_money(o['base']):>18}{_money(o['scenario']):>18}{_signed(o['delta']):>18}{pct}"
        f"   ({base.problem.objective}, {cur})",
        f"{'total cost':<12}{_money(delta['total_cost']['base']):>18}{_money(delta['total_cost']['scenario']):>18}"
        f"{_signed(delta['total_cost']['delta']):>18}",
    ]
    for p, label in ((base, "base"), (new, "scenario")):
        if not p.status.has_plan:
            lines.append(f"{label}: {p.status.value}: {p.result.message}")
    lines += audit_section([("base", base.audit), ("scenario", new.audit)])  # as every table of several plans
    if Status.FEASIBLE in (base.status, new.status):
        lines.append(GAP_NOTE)
    if not (base.status.has_plan and new.status.has_plan):
        return "\n".join(lines) + "\n"
    lines += ["", f"Cost by pricing kind ({cur})", _frame(delta["by_pricing"])]
    lines += ["", f"Cost by workload ({cur})", _frame(delta["by_workload"])]
    lines += ["", "Units per offering (reserved/owned: committed; rented: most running in a period)",
              _frame(delta["units"])]
    lines += ["", "Inference replicas per service and GPU type (peak over periods; hour-weighted average)",
              _frame(delta["replicas"])]
    lines += ["", "Training placement (cluster hours per job and offering)", _frame(delta["training"])]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# named scenarios


@dataclass
class Change:
    """A named set of overlays."""

    name: str
    sets: list[str] = field(default_factory=list)
    scales: list[str] = field(default_factory=list)
    description: str | None = None

    @property
    def title(self) -> str:
        parts = [f"--set {s}" for s in self.sets] + [f"--scale {s}" for s in self.scales]
        return " ".join(parts) or "(no change)"


def _scenario_list(data: object, file: str, where: str) -> list[Scenario]:
    if isinstance(data, dict) and set(data) == {"scenarios"}:
        data = data["scenarios"]
    if not isinstance(data, list):
        raise InputError("a scenario file holds a list of scenarios (or `scenarios:` with one)", file=file,
                         field=where, allowed="[{name: ..., set: [PATH=VALUE, ...], scale: [SELECTOR:FACTOR, ...]}]")
    out = []
    for i, item in enumerate(data):
        label = item.get("name", i) if isinstance(item, dict) else i
        try:
            out.append(Scenario.model_validate(item))
        except ValidationError as exc:
            raise validation_to_input_error(exc, {"scenarios": data}, file) from None
        if not out[-1].set and not out[-1].scale:
            raise InputError("a scenario needs at least one `set:` or `scale:` entry", file=file,
                             field=f"{where}[{label}]")
    return out


def scenarios(raw: dict, file: str, scenario_file: str | None = None) -> list[Change]:
    """The problem's own scenarios, then those of ``scenario_file``; names must be unique."""
    found: list[tuple[Scenario, str]] = []
    if raw.get("scenarios"):
        found += [(s, file) for s in _scenario_list(raw["scenarios"], file, "scenarios")]
    if scenario_file:
        data = read_yaml(Path(scenario_file))
        found += [(s, scenario_file) for s in _scenario_list(data, scenario_file, "scenarios")]
    seen: dict[str, str] = {}
    out = []
    for s, f in found:
        if s.name in seen or s.name == "base":
            raise InputError("duplicate scenario name" if s.name != "base" else "`base` names the unchanged problem",
                             file=f, field=f"scenarios[{s.name}]", value=s.name,
                             allowed="unique names" + (f" (also in {seen[s.name]})" if s.name in seen else ""))
        seen[s.name] = f
        out.append(Change(s.name, list(s.set), list(s.scale), s.description))
    return out


def scenario_raw(raw: dict, file: str, ch: Change) -> dict:
    """``raw`` changed by scenario ``ch``; errors name the scenario."""
    return overlay(raw, file, ch.sets, ch.scales, set_field=f"scenarios[{ch.name}].set",
                   scale_field=f"scenarios[{ch.name}].scale")


def side_by_side_rows(results: list[tuple[Change, dict]]) -> list[dict]:
    """JSON rows of the side-by-side table."""
    return [{"name": ch.name, "description": ch.description, "set": ch.sets, "scale": ch.scales, **res}
            for ch, res in results]


def pricing_kinds_in(rows: list[dict]) -> list[str]:
    """The pricing kinds some row's plan pays (its ``by_pricing``), in the vocabulary's order."""
    return [k for k in PRICING_KINDS if any(k in (r.get("by_pricing") or {}) for r in rows)]


def scenario_records(rows: list[dict]) -> list[dict]:
    """The side-by-side table, one record per :func:`summary` row: name, status, objective, gap (as the tables
    show it), total cost, the cost of each pricing kind some row pays (None without a plan), the mix as text.
    The terminal table and the HTML page both show these."""
    kinds = pricing_kinds_in(rows)
    out = []
    for r in rows:
        rec = {"name": r["name"], "status": r["status"], "objective": r["objective"], "gap": gap_text(r.get("gap")),
               "total_cost": r["total_cost"]}
        rec.update({k: r["by_pricing"].get(k, 0.0) if r["objective"] is not None else None for k in kinds})
        rec["mix"] = mix_text(r["mix"])
        out.append(rec)
    return out


def render_side_by_side(rows: list[dict], currency: str) -> str:
    df = pd.DataFrame(scenario_records(rows))
    lines = [f"Scenarios side by side ({currency}; mix = units per offering)",
             df.to_string(index=False, float_format=lambda v: f"{v:,.2f}", na_rep="-")]
    if any(r["status"] == "feasible" for r in rows):
        lines += ["", GAP_NOTE]
    notes = [f"  {r['name']}: {r['description']}" for r in rows if r.get("description")]
    if notes:
        lines += ["", "Descriptions"] + notes
    bad = [f"  {r['name']}: {r['status']}: {r['message']}" for r in rows if r["objective"] is None]
    if bad:
        lines += ["", "No plan"] + bad
    lines += audit_section((r["name"], r["audit"]) for r in rows)
    return "\n".join(lines) + "\n"


#: under a table with rows stopped on a time limit
GAP_NOTE = ("A plan `feasible` stopped on the time limit: its objective is at most its gap above the cheapest plan "
            "there is, so a difference between two plans smaller than their gaps may not be real.")


def gap_text(gap: float | None) -> str:
    """A proven gap as the tables show it: ``0.00 %`` proven optimal (within the gap asked for), ``-`` no plan."""
    return "-" if gap is None else f"{100 * gap:.2f} %"


def audit_failures(named) -> list[str]:
    """One line per plan that failed its audit: its name, how many violations, the first.

    ``named``: pairs of a name and a plan's violations (a list, empty or None when it passed).
    """
    return [f"{name}: {len(v)} violation(s); first: {v[0]}" for name, v in named if v]


#: above the plans that failed their audit, in every table and page that lists several plans
AUDIT_HEADING = "Audit FAILED (a bug in gpuopt: these plans disagree with their model)"


def audit_section(named) -> list[str]:
    """The lines a terminal table ends with when some of its plans failed their audit (:func:`audit_failures`
    of ``named``), after a blank line; none when every plan passed."""
    failed = audit_failures(named)
    return ["", AUDIT_HEADING, *(f"  {line}" for line in failed)] if failed else []


# ---------------------------------------------------------------------------
# scenarios side by side


@dataclass
class SideBySide:
    """The base and every named scenario, one :func:`summary` row each (``gpuopt whatif P`` with scenarios)."""

    problem: str
    currency: str
    catalog_version: str | None
    rows: list[dict]

    def frame(self) -> pd.DataFrame:
        """One row per scenario, the base first: name, status, objective, bound, gap, total cost, the cost per
        pricing kind (``cost_<kind>``), the mix as text and the number of audit violations."""
        kinds = pricing_kinds_in(self.rows)
        out = []
        for r in self.rows:
            rec = {k: r[k] for k in ("name", "status", "objective", "bound", "gap", "total_cost")}
            rec.update({f"cost_{k}": r["by_pricing"].get(k, 0.0) if r["objective"] is not None else None
                        for k in kinds})
            rec.update(mix=mix_text(r["mix"]), audit_violations=len(r["audit"]))
            out.append(rec)
        return pd.DataFrame(out)

    def to_dict(self) -> dict:
        """The JSON of ``gpuopt whatif P --format json`` with scenarios."""
        return {"problem": self.problem, "currency": self.currency, "catalog_version": self.catalog_version,
                "scenarios": self.rows}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def solve_scenarios(raw: dict, file: str, named: list[Change], solver: str, time_limit: float | None, gap: float,
                    threads: int | None, workers: int = 1, executor: str = "local",
                    scheduler: str | None = None) -> SideBySide:
    """Solve the base (``raw``, read from ``file``) and every scenario of ``named``, side by side on ``workers``.

    Every scenario is built before any solve, so a bad one is an
    :class:`~optimizer.errors.InputError` naming it. Without a time limit
    every side is proven within ``gap`` and all run at once; with one,
    :func:`_handed_over` shares the sides' plans.
    """
    from ..executors import share_cpus
    from .sweep import Progress, make_task, run_tasks

    changes = [Change("base", description=None)] + list(named)
    raws = [raw] + [scenario_raw(raw, file, ch) for ch in named]
    built = []
    for ch, r in zip(changes, raws):
        try:
            built.append(build(r, file))
        except InputError as e:
            if ch.name == "base":
                raise
            raise InputError(f"scenario {ch.name!r}: {e.render()}") from None
    base = built[0]
    threads, lend = share_cpus(threads, workers, executor, scheduler)
    tasks = [make_task(i, r, file, solver=solver, time_limit=time_limit, gap=gap, threads=threads)
             for i, r in enumerate(raws)]
    if time_limit is None:  # every side proven within the gap: nothing to hand over, all side by side
        results = run_tasks(tasks, workers=workers, executor=executor, scheduler=scheduler,
                            progress=Progress(len(tasks), label="scenarios"), lend=lend)
    else:
        results = _handed_over(tasks, base, gap, workers, executor, scheduler, lend)
    rows = side_by_side_rows([(ch, {k: v for k, v in res.items() if k != "index"})
                              for ch, res in zip(changes, results)])
    return SideBySide(raw.get("name", "problem"), base.currency, base.catalog_version, rows)


def _handed_over(tasks, base_problem: Problem, gap, workers, executor, scheduler, lend) -> list[dict]:
    """The base, then the scenarios side by side from its plan; the base again from theirs where one beats it.

    Under a time limit a search may stop above a plan another side holds,
    and the table would then show a saving or a cost that no scenario
    makes. So, as for a single what-if (:func:`solve_change`), each
    scenario starts from the base's plan, read in its model by name (used
    where it meets every row there), and the base is searched again from
    the scenarios' plans, with its own, where one of them is a plan of the
    base's model that costs less than the base's by more than the gap.
    """
    from ..model.reprice import models_of_structure
    from ..plan import beating
    from .sweep import Progress, run_tasks

    def solved(ts: list[dict], label: str) -> list[dict]:
        return run_tasks([{**t, "point": True} for t in ts], workers=workers, executor=executor,
                         scheduler=scheduler, progress=Progress(len(ts), label=label), lend=lend)

    def point(res: dict):
        res.pop("point_cost")
        return res.pop("point")

    (base,) = solved(tasks[:1], "base")
    cost, ours = base["point_cost"], point(base)
    rest = solved([{**t, "known": [ours]} if ours is not None else t for t in tasks[1:]], "scenarios")
    theirs = [p for p in (point(r) for r in rest) if p is not None]
    if theirs:
        model = models_of_structure(base_problem).build(base_problem)
        if beating(theirs, model.mip, cost, gap):
            (base,) = solved([{**tasks[0], "known": ([ours] if ours is not None else []) + theirs}], "base again")
            point(base)
    return [base] + rest
