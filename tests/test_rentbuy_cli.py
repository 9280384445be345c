"""`gpuopt rentbuy`: JSON, CSV and XLSX outputs, refusal to overwrite, exit codes, and the 3-year example.

Output tests run the command in process (click's runner) so that every plan it
solves is audited (the ``audited`` fixture of test_rentbuy); exit codes for bad
input also go through the real entry point.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from test_rentbuy import MIX_NPV, SOLVER, TINY, audited  # noqa: F401 (fixture)

from conftest import gpuopt_here, write_problem
from optimizer.render import rentbuy as rb_render
from optimizer.studies import rentbuy as rb
from optimizer.cli import main
from optimizer.load import load_problem

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "problems" / "rent-vs-buy-3y.yaml"


def invoke(*args):
    return CliRunner().invoke(main, ["rentbuy", *map(str, args), "--solver", SOLVER])


def test_json_contract(tmp_path, audited):
    r = invoke(write_problem(tmp_path, TINY), "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for key in ("strategies", "break_even", "cash_flows", "sensitivity", "utilisation", "npv", "currency"):
        assert key in d
    s = {row["name"]: row for row in d["strategies"]}
    assert set(s) == {"rent", "buy", "mix"}
    for row in d["strategies"]:
        assert {"name", "status", "objective", "total_cost", "npv"} <= set(row)
    assert s["mix"]["objective"] == pytest.approx(MIX_NPV) and s["mix"]["npv"] == pytest.approx(MIX_NPV)
    # the back end and its version, as the library itself reports it once imported
    import highspy

    assert d["solver"] == SOLVER and d["solver_version"] == f"highspy {highspy.Highs().version()}"
    be = d["break_even"][0]
    assert {"offering", "capex", "utilisation", "payback_months"} <= set(be)
    assert be["offering"] == "own" and be["capex"] == pytest.approx(58_484, rel=0.006)
    assert set(d["cash_flows"]) >= {"monthly", "yearly"}
    assert sum(r["pv"] for r in d["cash_flows"]["monthly"]) == pytest.approx(MIX_NPV)
    # buy: one owned unit cannot serve 2 rps -> infeasible, reported, and not the exit code (the mix is)
    assert s["buy"]["status"] == "infeasible" and s["buy"]["objective"] is None
    # rent: res 1 each year + od 1 (year 1) and 2 (year 2): 9,260 + 8,418.18 + 17,520 + 2 × 15,927.27
    assert s["rent"]["vs_best"] == pytest.approx(9_260 + 9_260 / 1.1 + 17_520 + 2 * 17_520 / 1.1 - MIX_NPV)
    # sensitivity: one row per parameter, sorted by swing
    assert len(d["sensitivity"]) == len(rb.PARAMETERS)
    swings = [r["swing"] for r in d["sensitivity"]]
    assert swings == sorted(swings, reverse=True)
    t = {r["parameter"]: r for r in d["sensitivity"]}
    # demand × 0.8 = 1.6 and 2.4 rps -> still 2 and 3 replicas: nothing moves;
    # × 1.2 = 2.4 and 3.6 rps -> 3 and 4 replicas: one more od unit each year, 17,520 + 15,927.27
    assert t["demand"]["objective_low"] == pytest.approx(MIX_NPV)
    assert t["demand"]["objective_high"] == pytest.approx(MIX_NPV + 17_520 + 17_520 / 1.1)
    # electricity × 1.2: energy PV (876 + 876/1.1) × 0.2 more
    assert t["electricity price"]["delta_high"] == pytest.approx(0.2 * (876 + 876 / 1.1))
    # capex × 1.2 = 12,000, still below break-even: capital grows by 2,000 × (1 − 0.6/1.21); still 1 unit
    assert t["capex"]["delta_high"] == pytest.approx(2_000 * (1 - 0.6 / 1.21))
    assert t["capex"]["owned_units_high"] == 1


def test_csv_one_file_per_table_and_refuses_to_overwrite(tmp_path, audited):
    p = write_problem(tmp_path, TINY)
    out = tmp_path / "out"
    r = invoke(p, "--format", "csv", "-o", out, "--no-sensitivity", "--no-break-even")
    assert r.exit_code == 0, r.output
    assert sorted(f.stem for f in out.glob("*.csv")) == sorted(rb_render.TABLES)
    monthly = pd.read_csv(out / "cash_flows_monthly.csv")
    assert monthly["pv"].sum() == pytest.approx(MIX_NPV)
    strategies = pd.read_csv(out / "strategies.csv")
    assert list(strategies["name"]) == ["rent", "buy", "mix"]
    n = len(audited)
    again = invoke(p, "--format", "csv", "-o", out, "--no-sensitivity", "--no-break-even")
    assert again.exit_code == 2 and "--force" in again.output
    assert len(audited) == n  # refused before any solve
    forced = invoke(p, "--format", "csv", "-o", out, "--no-sensitivity", "--no-break-even", "--force")
    assert forced.exit_code == 0, forced.output


def test_xlsx_one_sheet_per_table_and_refuses_to_overwrite(tmp_path, audited):
    p = write_problem(tmp_path, TINY)
    book = tmp_path / "rentbuy.xlsx"
    r = invoke(p, "--format", "xlsx", "-o", book, "--no-sensitivity", "--no-break-even")
    assert r.exit_code == 0, r.output
    sheets = pd.read_excel(book, sheet_name=None)
    assert list(sheets) == [*rb_render.TABLES, "assumptions"]
    assert sheets["break_even"]["outcome"].tolist() == ["not computed"]
    before = book.stat().st_mtime_ns
    again = invoke(p, "--format", "xlsx", "-o", book)
    assert again.exit_code == 2 and "overwrite" in again.output
    assert book.stat().st_mtime_ns == before
    bad = invoke(p, "--format", "xlsx", "-o", tmp_path / "rentbuy.csv")
    assert bad.exit_code == 2 and ".xlsx" in bad.output


def test_the_workbook_is_formatted_for_finance_and_its_formulas_give_gpuopts_numbers(tmp_path, audited):
    import openpyxl
    from pycel import ExcelCompiler

    p = write_problem(tmp_path, TINY)
    book = tmp_path / "rentbuy.xlsx"
    assert invoke(p, "--format", "xlsx", "-o", book, "--no-sensitivity").exit_code == 0
    result = rb.analyse(load_problem(p), solver=SOLVER, do_sensitivity=False)
    wb = openpyxl.load_workbook(book)
    for ws in wb.worksheets:
        assert ws.freeze_panes == "A2" and ws["A1"].font.bold, ws.title
    head = {c.value: c.column_letter for c in wb["cash_flows_monthly"][1]}
    assert "net_cash_out (USD)" in head and "pv (USD)" in head and "discount_factor" in head
    monthly = wb["cash_flows_monthly"]
    assert monthly[f"{head['capex (USD)']}2"].number_format == "#,##0.00"
    assert str(monthly[f"{head['pv (USD)']}2"].value).startswith("=")  # a live formula, not a number
    util = wb["break_even"]
    uh = {c.value: c.column_letter for c in util[1]}
    assert util[f"{uh['utilisation (%)']}2"].number_format == "0.0%"
    strat = wb["strategies"]
    sh = {c.value: c.column_letter for c in strat[1]}
    # vs_best_pct is a percentage in JSON (4.5 = 4.5 %) and a fraction shown as a percentage here
    mix_row = next(r for r in range(2, strat.max_row + 1) if strat[f"A{r}"].value == "rent")
    expect = result.strategies.set_index("name").at["rent", "vs_best_pct"]
    got = strat[f"{sh['vs_best_pct (%)']}{mix_row}"]
    assert got.number_format == "0.0%" and got.value == pytest.approx(expect / 100)
    # the formulas, evaluated, give gpuopt's numbers: NPV and each year's net cash out (21,336, 28,856,
    # -6,000 by hand in test_rentbuy)
    xl = ExcelCompiler(filename=str(book))
    npv_cell = f"cash_flows_monthly!{head['pv (USD)']}{monthly.max_row}"
    assert monthly[f"A{monthly.max_row}"].value == "NPV"
    assert xl.evaluate(npv_cell) == pytest.approx(MIX_NPV)
    yearly = wb["cash_flows_yearly"]
    yh = {c.value: c.column_letter for c in yearly[1]}
    years = [xl.evaluate(f"cash_flows_yearly!{yh['net_cash_out (USD)']}{r}") for r in range(2, yearly.max_row + 1)]
    assert years == pytest.approx([21_336, 28_856, -6_000])
    assumptions = pd.read_excel(book, sheet_name="assumptions")
    capex = assumptions[(assumptions["item"] == "own") & (assumptions["name"] == "capex")]
    assert capex["value"].tolist() == [10_000] and capex["unit"].iloc[0] == "USD per unit"


def test_set_option_and_infeasible_mix_exit_code(tmp_path, audited):
    # --set reaches the problem: on demand capped at 0 units and demand 5 rps > own 1 + res 1 -> infeasible mix
    data = copy.deepcopy(TINY)
    data["offerings"][2]["max_units"] = 0
    p = write_problem(tmp_path, data)
    r = invoke(p, "--format", "json", "--no-sensitivity", "--no-break-even",
               "--set", "inference[chat].demand_rps=5")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert {row["name"]: row["status"] for row in d["strategies"]}["mix"] == "infeasible"
    assert d["cash_flows"]["monthly"] == [] and d["break_even"] == []


def test_bad_input_through_the_entry_point(tmp_path):
    exe = shutil.which("gpuopt")
    cmd = [exe] if exe else [sys.executable, "-m", "optimizer"]
    p = write_problem(tmp_path, TINY)
    (tmp_path / "x.xlsx").write_text("not a workbook")
    for k, args in enumerate((["--format", "xlsx", "-o", str(tmp_path / "x.xlsx")],  # exists, no --force
                              ["--format", "csv"],  # no -o
                              ["--set", "offerings[nope].capex=1"])):  # names nothing
        # the first through a new process, the others in this one (the same command, without the start-up)
        r = (subprocess.run(cmd + ["rentbuy", str(p), *args], capture_output=True, text=True, timeout=120) if k == 0
             else gpuopt_here("rentbuy", p, *args))
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr and "error" in r.stderr


def test_three_year_example(audited):
    # Yearly periods of 8760 h at months 0, 12, 24; 1-year reservations renew per year.
    pr = load_problem(EXAMPLE)
    out = rb.analyse(pr, solver=SOLVER, do_sensitivity=False)
    s = out.strategies.set_index("name")
    assert (s["status"] == "optimal").all()
    assert s.loc["mix", "objective"] <= min(s.loc["rent", "objective"], s.loc["buy", "objective"]) + 1e-6
    mix = out.mix
    com = mix.commitments
    owned = com[com["pricing"] == "owned"]
    assert owned["new_units"].sum() >= 1
    # each 1-year reservation block the plan holds (renewals included) is paid in its own year only
    # (renewal inside the horizon: tests/test_known_answers.py::test_reserved_terms_renew_inside_the_horizon)
    one_year = com[com["offering"] == "aws-p5-1y"]
    led = mix.ledger[(mix.ledger["offering"] == "aws-p5-1y") & (mix.ledger["item"] == "reservation")]
    per_period = led.groupby("period")["cost"].sum()
    units = dict(zip(one_year["start_month"] // 12, one_year["units"]))
    for i, period in enumerate(pr.periods.index):
        assert per_period.get(period, 0.0) == pytest.approx(units.get(i, 0) * 32.4736 * 8760)
    # NPV of the cash flows = the plan's NPV (objective: npv); book value back at month 36
    items = out.cash_flows["items"]
    assert items["pv"].sum() == pytest.approx(mix.npv) and mix.npv == pytest.approx(mix.objective)
    assert set(items.loc[items["item"] == "book_value", "month"]) == {36.0}
    # break-even verified by solving just below and just above it
    be = out.break_even.set_index("offering").loc["dc1-h100-owned"]
    assert be["outcome"] == "bisected"
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    assert rb.new_units(solve(rb.with_capex(pr, "dc1-h100-owned", be["capex"] * 0.99)), "dc1-h100-owned") >= 1
    assert rb.new_units(solve(rb.with_capex(pr, "dc1-h100-owned", be["capex_tested_above"] * 1.01)),
                        "dc1-h100-owned") == 0
    # the rule of thumb: owning wins above ~66-80 % against GPU-cloud prices, far lower against hyperscalers
    u = out.utilisation.set_index("rental")
    assert 0.6 < u.loc["runpod-h100-8x-od", "utilisation"] < 0.85
    assert u.loc["aws-p5-od", "utilisation"] < 0.35 and u.loc["azure-nd-h100-v5-od", "utilisation"] < 0.2
