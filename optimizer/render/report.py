"""Stage 6: outputs of a plan: terminal tables, one JSON object, CSV files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..plan import Plan
from ..solve.backends import version as solver_version


def _num(x):
    if x is None:
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    return x


def records(df: pd.DataFrame) -> list[dict]:
    """Rows as plain JSON-able dicts (NaN becomes null)."""
    if df is None or df.empty:
        return []
    out = []
    for rec in df.to_dict("records"):
        out.append({k: (None if (isinstance(v, float) and not math.isfinite(v)) else _num(v)) for k, v in rec.items()})
    return out


#: version of the JSON layout (docs/json-format.md)
FORMAT_VERSION = "3"


def plan_dict(plan: Plan) -> dict:
    """The JSON of ``gpuopt solve --format json`` (docs/json-format.md lists every key).

    ``format_version`` changes whenever a key is removed or changes meaning.
    """
    r = plan.result
    pr = plan.problem
    has = plan.status.has_plan
    return {
        "format_version": FORMAT_VERSION,
        "problem": pr.name,
        "status": r.status.value,
        "message": r.message,
        "objective_kind": pr.objective,
        "objective": _num(plan.objective),
        "total_cost": _num(plan.total_cost),
        "npv": _num(plan.npv),
        "currency": pr.currency,
        "bound": _num(r.bound),
        "relaxation_bound": _num(r.relaxation_bound),
        "root_bound": _num(r.root_bound),
        "decomposition_bound": _num(r.decomposition_bound),
        "gap": _num(r.gap),
        "solver": r.solver,
        "solver_version": solver_version(r.solver),
        "solve_seconds": round(r.solve_seconds, 4),
        "build_seconds": round(r.build_seconds, 4),
        "catalog_version": pr.catalog_version,
        "horizon_hours": pr.horizon_hours,
        "periods": [{"period": str(k), "month": int(v["month"]), "hours": float(v["hours"])}
                    for k, v in pr.periods.iterrows()],
        "commitments": records(plan.commitments) if has else [],
        "inference": records(plan.inference) if has else [],
        "routing": records(plan.routing) if has else [],
        "training": records(plan.training) if has else [],
        "training_summary": records(plan.training_summary) if has else [],
        "timetable": records(plan.timetable) if has else [],
        "starts": records(plan.starts) if has else [],
        "usage": records(plan.usage) if has else [],
        "after_horizon": plan.after_horizon() if has else None,
        "costs": {
            "by_pricing": records(plan.by_pricing()) if has else [],
            "by_workload": records(plan.by_workload()) if has else [],
            "ledger": records(plan.ledger) if has else [],
        },
        "model": {k: v for k, v in plan.stats.items() if k != "blocks"},
        "overridden": pr.overridden,
        "warnings": pr.warnings + plan.warnings,
        "excluded_offerings": records(pr.excluded),
        "audit": plan.audit,
        "diagnosis": list(plan.diagnosis or []),
    }


def to_json(plan: Plan) -> str:
    return json.dumps(plan_dict(plan), indent=2)


def _money(x: float | None, cur: str) -> str:
    return "-" if x is None else f"{x:,.2f} {cur}"


def _table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    if df.empty:
        return "  (none)"
    return df.to_string(index=False, float_format=lambda v: floatfmt.format(v), na_rep="-")


#: the terminal report fits this many columns unless ``wide`` (a period grid is then summarised)
WIDTH = 100


def _wrap(label: str, text: str, width: int = WIDTH) -> list[str]:
    """``label`` then ``text``, wrapped to ``width`` with continuation lines indented under the text."""
    import textwrap

    pad = " " * len(label)
    return textwrap.wrap(text, width=width, initial_indent=label, subsequent_indent=pad,
                         break_long_words=False, break_on_hyphens=False) or [label.rstrip()]


def fit_table(df: pd.DataFrame, width: int = WIDTH, keys: int = 1, float_format=lambda v: f"{v:,.2f}") -> str:
    """``df`` as text no wider than ``width``: columns that do not fit go to further blocks.

    Each block repeats the first ``keys`` columns (what a row is), so every
    block reads on its own. A single column wider than ``width`` stays whole.
    """
    if df.empty:
        return "  (none)"
    text = df.to_string(index=False, float_format=float_format, na_rep="-")
    if max(map(len, text.splitlines())) <= width:
        return text
    key_cols, rest = list(df.columns[:keys]), list(df.columns[keys:])
    widths = {c: len(df[[c]].to_string(index=False, float_format=float_format, na_rep="-").splitlines()[0]) + 1
              for c in df.columns}
    base = sum(widths[c] for c in key_cols)
    blocks, cur = [], []
    for c in rest:
        if cur and base + sum(widths[x] for x in cur) + widths[c] > width:
            blocks.append(cur)
            cur = []
        cur.append(c)
    if cur:
        blocks.append(cur)
    return "\n\n".join(df[key_cols + b].to_string(index=False, float_format=float_format, na_rep="-")
                       for b in blocks)


def wrap_long(text: str, width: int = WIDTH) -> str:
    """Every line longer than ``width`` wrapped, continuation lines indented under its text."""
    import textwrap

    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip())
        out += textwrap.wrap(line.strip(), width=width, initial_indent=" " * lead,
                             subsequent_indent=" " * (lead + 2), break_long_words=False, break_on_hyphens=False)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def grouped(messages: list[str]) -> list[str]:
    """Messages in first-seen order, each once, with ``(×N)`` where it was repeated."""
    counts: dict[str, int] = {}
    for m in messages:
        counts[m] = counts.get(m, 0) + 1
    return [m if n == 1 else f"{m} (x{n})" for m, n in counts.items()]


def series_summary(pv: pd.DataFrame, periods: list[str], fmt=lambda v: f"{v:g}") -> pd.DataFrame:
    """Each row of a period grid as min, typical (median), max and where it changes.

    ``changes`` counts the periods whose value differs from the period before
    and names the first two of them.
    """
    vals = pv.to_numpy(dtype=float)
    out = pv.index.to_frame(index=False)
    out["min"] = [fmt(v) for v in vals.min(axis=1)]
    out["typical"] = [fmt(v) for v in np.median(vals, axis=1)]
    out["max"] = [fmt(v) for v in vals.max(axis=1)]
    changes = []
    for row in vals:
        at = [periods[i] for i in range(1, len(row)) if abs(row[i] - row[i - 1]) > 1e-9]
        changes.append("none" if not at else f"{len(at)}: " + ", ".join(at[:2]) + (", ..." if len(at) > 2 else ""))
    out["changes"] = changes
    return out


def to_table(plan: Plan, wide: bool = False) -> str:
    """A readable terminal report, at most :data:`WIDTH` columns wide unless ``wide``.

    With ``wide`` the per-period tables are full grids (one column per
    period); otherwise each row is summarised (:func:`series_summary`).
    """
    r = plan.result
    pr = plan.problem
    cur = pr.currency
    lines = [
        f"gpuopt plan: {pr.name}   (catalog {pr.catalog_version})",
    ]
    if r.message and not r.status.has_plan:
        lines += _wrap(f"status     {r.status.value}: ", r.message, WIDTH if not wide else 10**6)
    else:
        lines.append(f"status     {r.status.value}")
    if plan.status.has_plan:
        gap = "-" if r.gap is None else f"{100 * r.gap:.4f} %"
        lines += [
            f"objective  {_money(plan.objective, cur)}  ({pr.objective}"
            + (f", discount rate {pr.discount_rate:g}" if pr.objective == "npv" else "") + ")",
            f"total cost {_money(plan.total_cost, cur)} over {pr.horizon_hours:,.0f} h"
            f" ({pr.horizon_months:.1f} months)",
            f"bound      {_money(r.bound, cur)}   gap {gap}   (relaxation {_money(r.relaxation_bound, cur)}, "
            f"root {_money(r.root_bound, cur)}"
            + (f", solved apart {_money(r.decomposition_bound, cur)}" if r.decomposition_bound is not None else "")
            + ")",
        ]
    lines.append(f"solver     {r.solver} ({solver_version(r.solver)})   build {r.build_seconds:.2f} s   "
                 f"solve {r.solve_seconds:.2f} s")
    lines.append(f"model      {plan.stats.get('variables', 0):,} variables, {plan.stats.get('integer_variables', 0):,} "
                 f"integer, {plan.stats.get('constraints', 0):,} rows")
    if plan.audit == []:
        lines.append("audit      passed: every constraint and the cost recomputed from the plan's rows")
    elif plan.audit:
        lines.append(f"audit      FAILED, {len(plan.audit)} violation(s): the plan disagrees with the model; "
                     "please report it")
        for v in plan.audit[:20]:
            lines += _wrap("           - ", v, WIDTH if not wide else 10**6)
    for w in grouped(pr.warnings + plan.warnings):
        lines += _wrap("warning    ", w, WIDTH if not wide else 10**6)
    if pr.overridden:
        lines.append(f"overrides  {len(pr.overridden)} catalog offering(s) replaced: "
                     + ", ".join(o["id"] for o in pr.overridden[:10]))
    diagnosis = plan.diagnosis or []
    if diagnosis:
        lines += ["", "Why there is no plan (docs/diagnosis.md)"]
        for m in grouped([f"{d['kind']}: {d['message']}" for d in diagnosis]):
            lines += _wrap("  - ", m, WIDTH if not wide else 10**6)
    if not plan.status.has_plan:
        return "\n".join(lines) + "\n"

    periods = list(pr.periods.index)
    com = plan.commitments.copy()
    lines += ["", "Commitments (reserved and owned units)"]
    if wide or not len(com):
        cols = ["offering", "pricing", "gpu", "region", "units", "new_units", "existing_units", "gpus",
                "months_after_horizon", "owed_after_horizon", "capex_spent", "book_value_at_end"]
        lines.append(_table(com[cols] if len(com) else com, "{:,.1f}"))
    else:
        def after(r) -> str:
            if not r.months_after_horizon or not np.isfinite(r.months_after_horizon) or r.months_after_horizon <= 0:
                return "-"
            if r.pricing == "reserved":
                return f"{r.months_after_horizon:.1f} mo, {r.owed_after_horizon:,.0f} owed"
            return f"{r.months_after_horizon:.1f} mo, {r.book_value_at_end:,.0f} book value"
        short = pd.DataFrame({
            "offering": com["offering"], "pricing": com["pricing"],
            "units": [f"{u:g}" + (f" ({n:g} new)" if pd.notna(n) and n > 0 else "")
                      for u, n in zip(com["units"], com["new_units"])],
            "gpus": com["gpus"], "from month": com["start_month"],
            "after the horizon": [after(r) for r in com.itertuples()]})
        lines.append(_table(short))
    ah = plan.after_horizon()
    lines += _wrap("  after the horizon: ", f"{_money(ah['owed_after_horizon'], cur)} still owed on reservations; "
                   f"{_money(ah['capex_spent'], cur)} spent on servers, {_money(ah['book_value_at_end'], cur)} "
                   "of it not yet depreciated", WIDTH if not wide else 10**6)

    lines += ["", "Inference replicas per period" + ("" if wide else " (over the periods; --wide: every period)")]
    inf = plan.inference
    if len(inf):
        pv = inf.pivot_table(index=["service", "offering", "config"], columns="period", values="replicas",
                             aggfunc="sum", fill_value=0)
        pv = pv.reindex(columns=periods, fill_value=0)
        lines.append(pv.reset_index().to_string(index=False) if wide else
                     series_summary(pv, periods).to_string(index=False))
    else:
        lines.append("  (none)")

    if len(plan.routing):
        lines += ["", "Request routing (rps per bucket and configuration)"]
        rt = plan.routing.pivot_table(index=["service", "bucket", "config", "offering"], columns="period",
                                      values="rps", aggfunc="sum", fill_value=0.0)
        rt = rt.reindex(columns=periods, fill_value=0.0)
        lines.append(rt.reset_index().to_string(index=False, float_format=lambda v: f"{v:,.2f}") if wide else
                     series_summary(rt, periods, lambda v: f"{v:,.2f}").to_string(index=False))

    lines += ["", "Training schedule (cluster hours per period)"]
    lines.append(_table(plan.training[["job", "period", "offering", "mode", "config", "gpus", "hours", "progress"]]
                        if len(plan.training) else plan.training, "{:,.1f}"))
    if len(plan.timetable):
        lines += ["", "Training timetable (hours from the period's start; a lane is a share of the pool for "
                  "the period)"]
        tt = plan.timetable.assign(lane=[f"{n} ({w} {'GPUs' if m == 'shared' else 'units'})" for n, w, m in
                                         zip(plan.timetable["lane"], plan.timetable["lane_size"],
                                             plan.timetable["mode"])])
        lines.append(_table(tt[["period", "offering", "lane", "job", "start_hour", "end_hour"]].rename(
            columns={"start_hour": "from", "end_hour": "to"}), "{:,.1f}"))
    if len(plan.training_summary):
        lines += ["", "Training jobs"]
        ts = plan.training_summary
        if not wide:  # the configuration names the GPU type and precision
            ts = ts.drop(columns=[c for c in ("gpu", "precision") if c in ts.columns])
        lines.append(_table(ts, "{:,.1f}"))

    lines += ["", f"Costs by pricing kind ({cur})"]
    bp = plan.by_pricing()
    bp = pd.concat([bp, pd.DataFrame([{"pricing": "total", "cost": bp["cost"].sum(), "pv": bp["pv"].sum()}])])
    lines.append(_table(bp.rename(columns={"pv": "present_value"})))
    lines += ["", f"Costs by workload ({cur}; shared capacity split by GPU-hours, unused capacity is (idle))"]
    lines.append(_table(plan.by_workload().rename(columns={"pv": "present_value"})))
    return "\n".join(lines) + "\n"


CSV_TABLES = ("commitments", "inference", "routing", "training", "training_summary", "timetable", "starts", "usage",
              "ledger",
              "by_pricing", "by_workload", "summary")


def write_csv(plan: Plan, out_dir: str | Path, force: bool = False) -> list[Path]:
    """One CSV per table in ``out_dir``; refuses to overwrite files unless ``force``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError("output path exists and is not a directory", field="-o", value=str(out))
    targets = {name: out / f"{name}.csv" for name in CSV_TABLES}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing and not force:
        raise InputError(f"would overwrite {len(existing)} existing file(s), e.g. {existing[0]}",
                         field="-o", value=str(out), allowed="a new directory, or --force to overwrite")
    out.mkdir(parents=True, exist_ok=True)
    d = plan_dict(plan)
    summary = pd.DataFrame([{k: d[k] for k in ("problem", "status", "objective_kind", "objective", "total_cost",
                                                  "npv", "currency", "bound", "gap", "solver", "solver_version",
                                                  "solve_seconds", "catalog_version")}])
    frames = {
        "commitments": plan.commitments, "inference": plan.inference, "routing": plan.routing,
        "training": plan.training, "training_summary": plan.training_summary, "timetable": plan.timetable,
        "starts": plan.starts, "usage": plan.usage,
        "ledger": plan.ledger, "summary": summary,
        "by_pricing": plan.by_pricing() if plan.status.has_plan else pd.DataFrame(),
        "by_workload": plan.by_workload() if plan.status.has_plan else pd.DataFrame(),
    }
    for name, path in targets.items():
        frames[name].to_csv(path, index=False)
    return list(targets.values())
