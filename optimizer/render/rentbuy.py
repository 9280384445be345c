"""Outputs of a rent-versus-buy analysis: one JSON object, terminal tables, CSV files, an XLSX workbook.

The analysis (:mod:`optimizer.studies.rentbuy`) computes; this module only
lays its :class:`~optimizer.studies.rentbuy.RentBuy` out, one table each.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from .report import fit_table, wrap_long
from ..solve.backends import version as solver_version
from ..studies.rentbuy import (BREAK_EVEN_COLUMNS, ITEM_COLUMNS, MONTHLY_COLUMNS, SENSITIVITY_COLUMNS,
                               UTILISATION_COLUMNS, YEARLY_COLUMNS, RentBuy)
from ..studies.whatif import GAP_NOTE, gap_text


TABLES = ("summary", "strategies", "strategy_units", "break_even", "utilisation", "cash_flows_monthly",
          "cash_flows_yearly", "cash_flow_items", "sensitivity", "mix_commitments", "mix_ledger")


def summary_row(rb: RentBuy) -> dict:
    pr = rb.problem
    mix = rb.mix
    best = rb.strategies.loc[rb.strategies["best"], "name"]
    return {"problem": pr.name, "currency": pr.currency, "objective_kind": pr.objective,
            "discount_rate": pr.discount_rate, "horizon_hours": pr.horizon_hours,
            "horizon_months": pr.horizon_months, "mix_status": mix.status.value, "mix_objective": mix.objective,
            "mix_total_cost": mix.total_cost, "mix_npv": mix.npv,
            "best_strategy": best.iloc[0] if len(best) else None, "seconds": round(rb.seconds, 3),
            # every solve of the analysis runs on the mix's back end: a timing or a plan cut short by a
            # limit is traced to its version
            "solver": mix.result.solver, "solver_version": solver_version(mix.result.solver),
            "catalog_version": pr.catalog_version}


def tables(rb: RentBuy) -> dict[str, pd.DataFrame]:
    """Every table of the report, by name (empty, with headers, where a part was skipped or had no plan)."""
    mix = rb.mix
    has = mix.status.has_plan
    cf = rb.cash_flows or {}
    return {
        "summary": pd.DataFrame([summary_row(rb)]),
        "strategies": rb.strategies,
        "strategy_units": rb.strategy_units,
        "break_even": rb.break_even if rb.break_even is not None else pd.DataFrame(columns=BREAK_EVEN_COLUMNS),
        "utilisation": rb.utilisation if rb.utilisation is not None else pd.DataFrame(columns=UTILISATION_COLUMNS),
        "cash_flows_monthly": cf.get("monthly", pd.DataFrame(columns=MONTHLY_COLUMNS)),
        "cash_flows_yearly": cf.get("yearly", pd.DataFrame(columns=YEARLY_COLUMNS)),
        "cash_flow_items": cf.get("items", pd.DataFrame(columns=ITEM_COLUMNS)),
        "sensitivity": rb.sensitivity if rb.sensitivity is not None else pd.DataFrame(columns=SENSITIVITY_COLUMNS),
        "mix_commitments": mix.commitments if has else pd.DataFrame(),
        "mix_ledger": mix.ledger if has else pd.DataFrame(),
    }


def to_dict(rb: RentBuy) -> dict:
    """The JSON of ``gpuopt rentbuy --format json``."""
    from ..render.report import records

    t = tables(rb)
    head = {k: v for k, v in summary_row(rb).items()}
    head = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in head.items()}
    return {
        **head,
        "status": rb.mix.status.value,
        "npv": rb.mix.npv,
        "strategies": records(t["strategies"]),
        "strategy_units": records(t["strategy_units"]),
        "break_even": records(t["break_even"]),
        "utilisation": records(t["utilisation"]),
        "cash_flows": {"monthly": records(t["cash_flows_monthly"]), "yearly": records(t["cash_flows_yearly"]),
                       "items": records(t["cash_flow_items"]),
                       "npv": None if rb.cash_flows is None else float(rb.cash_flows["items"]["pv"].sum())},
        "sensitivity": records(t["sensitivity"]),
        "notes": rb.notes,
        # one line per plan of the analysis that failed its audit (empty: every plan passed)
        "audit_failures": rb.audit_failures,
        # the problem's warnings, then the mix plan's (commitments beyond the horizon, assumptions it uses)
        "warnings": rb.problem.warnings + (rb.mix.warnings if rb.mix.status.has_plan else []),
    }


def _money(x, cur: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.0f}" + (f" {cur}" if cur else "")


def _int(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{int(x)}"


def _pct(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return "never" if not math.isfinite(x) else f"{100 * x:.1f} %"


def _show(df: pd.DataFrame, formats: dict[str, Callable] | None = None, keys: int = 1) -> str:
    if df is None or df.empty:
        return "  (none)"
    d = df.copy()
    for c, f in (formats or {}).items():
        if c in d.columns:
            d[c] = [f(v) for v in d[c]]
    return fit_table(d, keys=keys)


def _bar(lo, hi, base, width: float, span: float) -> str:
    if lo is None or hi is None or span <= 0:
        return ""
    left = int(round(max(0.0, base - min(lo, hi)) / span * width))
    right = int(round(max(0.0, max(lo, hi) - base) / span * width))
    return " " * (int(width) - left) + "#" * left + "|" + "#" * right


def to_table(rb: RentBuy) -> str:
    """The terminal report."""
    pr = rb.problem
    cur = pr.currency
    rate = f"{100 * pr.discount_rate:g} %/yr"
    lines = [f"gpuopt rentbuy: {pr.name}   objective: "
             + (f"npv at {rate}" if pr.objective == "npv" else f"cost (NPV reported at {rate})")
             + f"   horizon {pr.horizon_hours:,.0f} h ({pr.horizon_months:.1f} months)   {cur}",
             f"solver     {rb.mix.result.solver} ({solver_version(rb.mix.result.solver)})   "
             f"analysis {rb.seconds:.1f} s"]
    for w in pr.warnings + (rb.mix.warnings if rb.mix.status.has_plan else []):
        lines.append(f"warning  {w}")
    s = rb.strategies
    lines += ["", "Strategies (rent: no new owned units; buy: owned capacity only; mix: the optimum)"]
    stopped = bool((s["status"] == "feasible").any())  # a strategy stopped on the time limit: its gap is shown
    lines.append(_show(s[["name", "status", "objective", *(["gap"] if stopped else []), "total_cost", "npv",
                          "vs_best", "vs_best_pct", "new_owned_units"]],
                       {"objective": _money, "total_cost": _money, "npv": _money, "vs_best": _money,
                        "gap": lambda v: gap_text(None if v is None or pd.isna(v) else v),
                        "vs_best_pct": lambda v: "-" if v is None or pd.isna(v) else f"{v:.1f} %",
                        "new_owned_units": _int}))
    if stopped:
        lines.append(GAP_NOTE)
    best = s[s["best"]]
    if len(best):
        b = best.iloc[0]
        others = [f"{r.name} by {_money(r.vs_best, cur)} ({r.vs_best_pct:.1f} %)" for r in s.itertuples()
                  if not r.best and r.objective is not None and not pd.isna(r.objective)]
        if others:
            lines.append(f"{b['name']} beats " + " and ".join(others))
    for r in s.itertuples():
        lines.append(f"  {r.name}: {r.summary or r.message or r.status}")
    if not rb.mix.status.has_plan:
        lines += ["", *[f"note: {n}" for n in rb.notes]]
        return wrap_long("\n".join(lines) + "\n")

    if rb.break_even is not None and len(rb.break_even):
        be = rb.break_even
        lines += ["", f"Break-even per owned offering ({cur}; capex per unit; utilisation = busy share of owned "
                      "GPU-hours at which owning costs what renting does)"]
        lines.append(_show(be[["offering", "capex_current", "capex", "capex_margin_pct", "outcome",
                               "utilisation", "on_demand_offering", "utilisation_reserved", "reserved_offering",
                               "payback_months", "verdict"]].rename(columns={"capex": "capex_break_even",
                                                                  "capex_margin_pct": "margin_pct"}),
                           {"capex_current": _money, "capex_break_even": _money,
                            "margin_pct": lambda v: "-" if v is None or pd.isna(v) else f"{v:+.1f} %",
                            "utilisation": _pct, "utilisation_reserved": _pct,
                            "payback_months": lambda v: "-" if v is None or pd.isna(v) else f"{v:.1f}"}))
        for r in be.itertuples():
            if isinstance(r.note, str) and r.note:
                lines.append(f"  {r.offering}: {r.note}")
            if isinstance(r.payback_note, str) and r.payback_note:
                lines.append(f"  {r.offering} payback: {r.payback_note}")
    if rb.utilisation is not None and len(rb.utilisation):
        lines += ["", "Break-even utilisation against each rental of the same GPU type "
                      "(straight-line as the objective; annuity: capital recovery at the discount rate)"]
        u = rb.utilisation
        u = u[["owned", "rental", *[c for c in u.columns if c not in ("owned", "rental")]]]
        lines.append(_show(u, {"utilisation": _pct, "utilisation_annuity": _pct}, keys=2))
    if rb.cash_flows is not None:
        lines += ["", f"Cash flows of the mix by year ({cur}; positive = paid out; book value = resale at the "
                      "horizon end; monthly in --format json/csv/xlsx)"]
        lines.append(_show(rb.cash_flows["yearly"], {c: _money for c in YEARLY_COLUMNS[3:]}))
        lines.append(f"NPV of the cash flows at {rate}: "
                     f"{_money(float(rb.cash_flows['items']['pv'].sum()), cur)}")
    if rb.sensitivity is not None and len(rb.sensitivity):
        sens = rb.sensitivity
        f = sens["low_factor"].iloc[0]
        lines += ["", f"Sensitivity of the mix: each input x{f:g} and x{sens['high_factor'].iloc[0]:g} "
                      "(one re-solve each), sorted by swing of the objective"]
        base = float(rb.mix.objective)
        finite = sens["swing"].replace(math.inf, np.nan)
        span = float(np.nanmax(np.abs(np.r_[sens["delta_low"].astype(float), sens["delta_high"].astype(float)])))\
            if finite.notna().any() else 0.0
        d = sens[["parameter", "objective_low", "objective_high", "swing", "owned_units_low", "owned_units_base",
                  "owned_units_high"]].copy()
        d["tornado"] = [_bar(a, b, base, 12, span) for a, b in zip(sens["objective_low"], sens["objective_high"])]
        lines.append(_show(d, {"objective_low": _money, "objective_high": _money, "swing": _money,
                               "owned_units_low": _int, "owned_units_base": _int, "owned_units_high": _int}))
    for n in rb.notes:
        lines.append(f"note: {n}")
    return wrap_long("\n".join(lines) + "\n")


def _refuse_overwrite(paths: list, force: bool, where: str) -> None:
    from ..errors import InputError

    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise InputError(f"would overwrite {len(existing)} existing file(s), e.g. {existing[0]}",
                         field="-o", value=where, allowed="a new path, or --force to overwrite")


def csv_targets(out_dir) -> list:
    from pathlib import Path

    return [Path(out_dir) / f"{name}.csv" for name in TABLES]


def check_output(fmt: str, output, force: bool) -> None:
    """Refuse a bad or existing output path before any solve (InputError, exit 2)."""
    from pathlib import Path

    from ..errors import InputError

    if fmt == "csv":
        out = Path(output)
        if out.exists() and not out.is_dir():
            raise InputError("output path exists and is not a directory", field="-o", value=str(out))
        _refuse_overwrite(csv_targets(out), force, str(out))
    elif fmt == "xlsx":
        out = Path(output)
        if out.suffix.lower() != ".xlsx":
            raise InputError("an XLSX output file must end in .xlsx", field="-o", value=str(out))
        if out.is_dir():
            raise InputError("output path is a directory; give a file name ending in .xlsx", field="-o",
                             value=str(out))
        _refuse_overwrite([out], force, str(out))
    elif fmt == "json" and output:
        _refuse_overwrite([Path(output)], force, str(output))


def write_csv(rb: RentBuy, out_dir, force: bool = False) -> list:
    """One CSV per table in ``out_dir`` (created); refuses to overwrite unless ``force``."""
    from pathlib import Path

    check_output("csv", out_dir, force)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    paths = []
    for (name, df), path in zip(tables(rb).items(), csv_targets(out_dir)):
        df.to_csv(path, index=False)
        paths.append(path)
    return paths


#: workbook column kinds: how a column is formatted and what unit its header names
CURRENCY_COLUMNS = {"capex", "capex_tested_above", "capex_current", "book_value", "rental", "reservation", "upfront",
                    "fixed", "energy", "net_cash_out", "pv", "cumulative_cash", "cumulative_pv", "cash", "objective",
                    "total_cost", "npv", "vs_best", "mix_objective", "mix_total_cost", "mix_npv", "cost",
                    "owed_after_horizon", "capex_spent", "book_value_at_end", "objective_base", "objective_low",
                    "objective_high", "delta_low", "delta_high", "swing", "npv_low", "npv_high", "total_cost_low",
                    "total_cost_high"}
PER_GPU_HOUR_COLUMNS = {"price_per_gpu_hour", "owned_per_gpu_hour_full_use", "on_demand_per_gpu_hour",
                        "reserved_per_gpu_hour"}
#: fractions, shown as percentages
FRACTION_COLUMNS = {"utilisation", "utilisation_annuity", "utilisation_reserved", "utilisation_reserved_annuity",
                    "discount_rate", "gap"}
#: percentages in the JSON (4.5 = 4.5 %): divided by 100 in the workbook so every percentage is one kind
PERCENT_COLUMNS = {"vs_best_pct", "capex_margin_pct"}
MONTH_COLUMNS = {"payback_months", "payback_months_full_use", "months_after_horizon", "horizon_months", "term_months"}
HOUR_COLUMNS = {"horizon_hours", "gpu_hours_used"}


def _unit(col: str, cur: str) -> tuple[str | None, str | None]:
    """(unit for the header, Excel number format) of a column."""
    if col in CURRENCY_COLUMNS:
        return cur, "#,##0.00"
    if col in PER_GPU_HOUR_COLUMNS:
        return f"{cur} per GPU-hour", "#,##0.0000"
    if col in FRACTION_COLUMNS or col in PERCENT_COLUMNS:
        return "%", "0.0%"
    if col in MONTH_COLUMNS:
        return "months", "0.0"
    if col in HOUR_COLUMNS:
        return "hours", "#,##0"
    if col == "discount_factor":
        return None, "0.000000"
    return None, None


def _assumptions(rb: RentBuy) -> pd.DataFrame:
    """Every input the analysis rests on, with its value, unit and source."""
    pr = rb.problem
    rows = [("problem", "currency", pr.currency, "", pr.file),
            ("problem", "objective", pr.objective, "", pr.file),
            ("problem", "discount_rate", pr.discount_rate, "per year", pr.file),
            ("problem", "horizon_months", pr.horizon_months, "months", pr.file),
            ("problem", "catalog_version", pr.catalog_version, "", "catalogs/VERSION")]
    O = pr.offerings
    used = set()
    for plan in rb.plans.values():
        if plan.status.has_plan:
            used |= set(plan.usage["offering"])
    if rb.break_even is not None:
        used |= set(rb.break_even["offering"].dropna())
    if rb.utilisation is not None:
        used |= set(rb.utilisation["rental"].dropna())
    fields = {"price_per_hour": f"{pr.currency} per unit-hour", "upfront": pr.currency, "term_months": "months",
              "capex": f"{pr.currency} per unit", "lifetime_years": "years", "residual_fraction": "fraction",
              "power_kw": "kW per unit, busy", "idle_power_fraction": "fraction", "pue": "ratio",
              "electricity_per_kwh": f"{pr.currency} per kWh", "fixed_per_month": f"{pr.currency} per unit-month",
              "gpus_per_unit": "GPUs", "max_units": "units"}
    for oid in sorted(used & set(O.index)):
        o = O.loc[oid]
        src = o.get("source")
        source = f"{src} ({o.get('date')})" if isinstance(src, str) and src else pr.file
        for f, unit in fields.items():
            v = o.get(f)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                rows.append((oid, f, v, unit, source))
    return pd.DataFrame(rows, columns=["item", "name", "value", "unit", "source"])


def write_xlsx(rb: RentBuy, path, force: bool = False):
    """A workbook for finance: one sheet per table, formatted, with live formulas for the cash flows.

    Every sheet has its header frozen, units in the headers, currency and
    percentage formats (fractions and percentages both as percentages) and
    fitted column widths. On ``cash_flows_monthly`` the present value of each
    month is ``net_cash_out × discount_factor``, the cumulative columns are
    running sums, and a totals row and the NPV are formulas over the flows;
    ``cash_flows_yearly`` sums the monthly sheet per year (``SUMIF``). An
    ``assumptions`` sheet lists every input with its unit and source.
    Refuses to overwrite unless ``force``.
    """
    from pathlib import Path

    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    check_output("xlsx", path, force)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cur = rb.problem.currency
    sheets = dict(tables(rb))
    sheets["assumptions"] = _assumptions(rb)
    with pd.ExcelWriter(path, engine="openpyxl") as xw:
        for name, df in sheets.items():
            df = df.copy()
            for c in PERCENT_COLUMNS & set(df.columns):
                df[c] = pd.to_numeric(df[c], errors="coerce") / 100.0
            df.to_excel(xw, sheet_name=name, index=False)
            ws = xw.sheets[name]
            cols = list(df.columns)
            letter = {c: get_column_letter(i + 1) for i, c in enumerate(cols)}
            n = len(df)
            if name == "cash_flows_monthly" and n:
                _monthly_formulas(ws, letter, n)
            if name == "cash_flows_yearly" and n:
                _yearly_formulas(ws, letter, n, len(sheets["cash_flows_monthly"]))
            for i, c in enumerate(cols, start=1):
                unit, fmt = _unit(c, cur) if name != "assumptions" else (None, None)
                head = ws.cell(row=1, column=i)
                head.value = f"{c} ({unit})" if unit else c
                head.font = Font(bold=True)
                if fmt:
                    for row in ws.iter_rows(min_row=2, max_row=ws.max_row, min_col=i, max_col=i):
                        row[0].number_format = fmt
                width = max([len(str(head.value))] + [len(f"{v:,.2f}") if isinstance(v, float) else len(str(v))
                                                      for v in df[c].head(200)]) if n else len(str(head.value))
                ws.column_dimensions[get_column_letter(i)].width = min(60, width + 2)
            ws.freeze_panes = "A2"
    return path


def _monthly_formulas(ws, letter: dict, n: int) -> None:
    """pv = net_cash_out × discount_factor, running sums, a totals row and the NPV, as formulas."""
    from openpyxl.styles import Font

    L = letter
    last = n + 1
    for r in range(2, last + 1):
        ws[f"{L['pv']}{r}"] = f"={L['net_cash_out']}{r}*{L['discount_factor']}{r}"
        ws[f"{L['cumulative_cash']}{r}"] = (f"={L['net_cash_out']}{r}" if r == 2 else
                                            f"={L['cumulative_cash']}{r - 1}+{L['net_cash_out']}{r}")
        ws[f"{L['cumulative_pv']}{r}"] = (f"={L['pv']}{r}" if r == 2 else
                                          f"={L['cumulative_pv']}{r - 1}+{L['pv']}{r}")
    total = last + 2
    ws[f"A{total}"] = "total"
    ws[f"A{total}"].font = Font(bold=True)
    for c in ("capex", "book_value", "rental", "reservation", "upfront", "fixed", "energy", "net_cash_out", "pv"):
        ws[f"{L[c]}{total}"] = f"=SUM({L[c]}2:{L[c]}{last})"
        ws[f"{L[c]}{total}"].font = Font(bold=True)
    ws[f"A{total + 1}"] = "NPV"
    ws[f"A{total + 1}"].font = Font(bold=True)
    ws[f"{L['pv']}{total + 1}"] = f"=SUMPRODUCT({L['net_cash_out']}2:{L['net_cash_out']}{last},"\
                                  f"{L['discount_factor']}2:{L['discount_factor']}{last})"
    ws[f"{L['pv']}{total + 1}"].font = Font(bold=True)


def _yearly_formulas(ws, letter: dict, n: int, monthly_rows: int) -> None:
    """Each year's flows and present value: SUMIF over the monthly sheet's rows of that year."""
    L = letter
    m_last = monthly_rows + 1
    # monthly sheet columns: month, year, capex, book_value, rental, reservation, upfront, fixed, energy,
    # net_cash_out, discount_factor, pv (MONTHLY_COLUMNS order)
    from openpyxl.utils import get_column_letter

    mcol = {c: get_column_letter(i + 1) for i, c in enumerate(MONTHLY_COLUMNS)}
    for r in range(2, n + 2):
        for c in ("capex", "book_value", "rental", "reservation", "upfront", "fixed", "energy", "net_cash_out", "pv"):
            ws[f"{L[c]}{r}"] = (f"=SUMIF(cash_flows_monthly!${mcol['year']}$2:${mcol['year']}${m_last},"
                                f"{L['year']}{r},cash_flows_monthly!${mcol[c]}$2:${mcol[c]}${m_last})")
        ws[f"{L['cumulative_cash']}{r}"] = (f"={L['net_cash_out']}{r}" if r == 2 else
                                            f"={L['cumulative_cash']}{r - 1}+{L['net_cash_out']}{r}")
        ws[f"{L['cumulative_pv']}{r}"] = (f"={L['pv']}{r}" if r == 2 else
                                          f"={L['cumulative_pv']}{r - 1}+{L['pv']}{r}")
