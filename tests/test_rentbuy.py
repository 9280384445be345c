"""Rent versus buy on tiny problems whose numbers are computed by hand in the comments.

Every plan solved here (strategies, break-even probes, sensitivity re-solves)
goes through optimizer.audit.audit: the ``audited`` fixture wraps the solve
that optimizer.studies.rentbuy uses.
"""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

from optimizer.render import rentbuy as rb_render
from optimizer.studies import rentbuy as rb
from optimizer.load import load_problem
from optimizer.pipeline import run

from conftest import assert_audited, write_problem

SOLVER = "highs"

# Two yearly periods; discount rate 10 %/year; 1-GPU units, one 1-GPU replica serves 1 rps.
#   own: capex 10,000, life 4 y, residual 0.2, 1 kW × PUE 1 × 0.10 $/kWh -> e = 0.10 $/GPU-h,
#        idle 0.5, fixed 100 $/month, at most 1 unit
#   res: 1-year terms (renewed at month 12) at 1.00 $/h + 500 upfront per term, at most 1 unit per term
#   od:  2.00 $/h
# Demand 2 rps in year 1, 3 rps in year 2.
TINY = {
    "name": "tiny-rentbuy",
    "periods": [{"name": "y1", "hours": 8760, "month": 0}, {"name": "y2", "hours": 8760, "month": 12}],
    "offerings": [
        {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r", "pricing": "owned",
         "capex": 10_000, "lifetime_years": 4, "residual_fraction": 0.2, "power_kw": 1.0, "pue": 1.0,
         "electricity_per_kwh": 0.1, "idle_power_fraction": 0.5, "fixed_per_month": 100, "max_units": 1},
        {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r", "pricing": "reserved",
         "price_per_hour": 1.0, "upfront": 500, "term_months": 12, "max_units": 1},
        {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r", "pricing": "on_demand",
         "price_per_hour": 2.0},
    ],
    "inference": [{"name": "chat", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
                   "demand_rps": {"y1": 2, "y2": 3},
                   "profiles": [{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0}]}],
    "finance": {"objective": "npv", "discount_rate": 0.1},
}

# Present values by hand (δ = 1/1.1 for month 12, 1/1.21 for month 24 = the horizon end):
#   own, one unit busy both years:
#     capital   10,000 − book 10,000 × (1 − 0.8 × 2/4) = 6,000 back at month 24: 10,000 − 6,000/1.21 = 5,041.32
#     fixed     1,200 + 1,200/1.1                                                        = 2,290.91
#     energy    876 + 876/1.1 (8760 busy GPU-h × 0.10)                                   = 1,672.36
#                                                                                 total    9,004.59
#   res per term: 8,760 + 500 = 9,260 (year 1), 9,260/1.1 = 8,418.18 (year 2)
#   od per unit-year: 17,520 (year 1), 15,927.27 (year 2)
# Optimum: own 1 + res 1 in year 1; own 1 + res 1 + od 1 in year 2.
#   NPV = 9,004.59 + 9,260 + 8,418.18 + 15,927.27 = 42,610.05
OWN_FIXED_ENERGY_PV = 1200 + 1200 / 1.1 + 876 + 876 / 1.1
MIX_NPV = (10_000 - 6_000 / 1.21) + OWN_FIXED_ENERGY_PV + 9_260 + 9_260 / 1.1 + 17_520 / 1.1


@pytest.fixture
def audited(monkeypatch):
    """Audit every plan optimizer.studies.rentbuy solves; the list of plans is returned for counting."""
    plans = []

    def run_audited(problem, *a, **kw):
        plan = run(problem, *a, **kw)
        assert_audited(plan)
        plans.append(plan)
        return plan

    monkeypatch.setattr(rb, "run", run_audited)
    return plans


def tiny(tmp_path, data=None):
    return load_problem(write_problem(tmp_path, data or TINY))


def test_cash_flows_and_npv_by_hand(tmp_path, audited):
    pr = tiny(tmp_path)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    plan = solve(pr)
    assert plan.objective == pytest.approx(MIX_NPV)  # 42,610.05
    assert plan.npv == pytest.approx(MIX_NPV)
    cf = rb.cash_flows(plan)
    m = cf["monthly"].set_index("month")
    # month 0: capex 10,000; fixed 1,200; energy 876; reservation 8,760; upfront 500; no rental -> 21,336
    assert m.loc[0, ["capex", "fixed", "energy", "reservation", "upfront", "rental"]].tolist() == pytest.approx(
        [10_000, 1_200, 876, 8_760, 500, 0])
    assert m.loc[0, "net_cash_out"] == pytest.approx(21_336)
    # month 12: fixed 1,200; energy 876; reservation 8,760; upfront 500 (renewed term); od 1 × 2 × 8760 = 17,520
    #   -> 28,856, worth 28,856 / 1.1 = 26,232.73 today
    assert m.loc[12, ["fixed", "energy", "reservation", "upfront", "rental"]].tolist() == pytest.approx(
        [1_200, 876, 8_760, 500, 17_520])
    assert m.loc[12, "net_cash_out"] == pytest.approx(28_856)
    assert m.loc[12, "pv"] == pytest.approx(28_856 / 1.1)
    # month 24 (the horizon's end): book value 6,000 comes back, worth −6,000 / 1.21 = −4,958.68
    assert m.loc[24, "book_value"] == pytest.approx(-6_000)
    assert m.loc[24, "pv"] == pytest.approx(-6_000 / 1.21)
    # every other month is empty; the grid runs 0..24
    assert list(m.index) == list(range(25))
    assert m.drop(index=[0, 12, 24])["net_cash_out"].abs().sum() == pytest.approx(0)
    # NPV = 21,336 + 26,232.73 − 4,958.68 = 42,610.05 = the plan's NPV
    assert m["pv"].sum() == pytest.approx(21_336 + 28_856 / 1.1 - 6_000 / 1.21)
    assert m["pv"].sum() == pytest.approx(plan.npv)
    # undiscounted: 21,336 + 28,856 − 6,000 = 44,192 = total cost (capex − book value = depreciation 4,000)
    assert m["cumulative_cash"].iloc[-1] == pytest.approx(44_192)
    assert plan.total_cost == pytest.approx(44_192)
    y = cf["yearly"].set_index("year")
    assert y["net_cash_out"].tolist() == pytest.approx([21_336, 28_856, -6_000])
    assert y.loc[3, "first_month"] == 24


def test_cash_flow_npv_equals_plan_npv_under_objective_cost(tmp_path, audited):
    # Under objective: cost the plan still reports the NPV at the discount rate; the cash flows match it.
    data = copy.deepcopy(TINY)
    data["finance"] = {"objective": "cost", "discount_rate": 0.07}
    pr = tiny(tmp_path, data)
    plan = rb.make_solver(pr, solver=SOLVER)[0](pr)
    cf = rb.cash_flows(plan)
    assert cf["items"]["pv"].sum() == pytest.approx(plan.npv)
    assert cf["monthly"]["pv"].sum() == pytest.approx(plan.npv)
    assert cf["yearly"]["net_cash_out"].sum() == pytest.approx(plan.total_cost)


def test_strategies_mix_never_costs_more(tmp_path, audited):
    # With up to 3 owned units, buy is feasible (3 units own everything).
    data = copy.deepcopy(TINY)
    data["offerings"][0]["max_units"] = 3
    pr = tiny(tmp_path, data)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    table, plans, units = rb.compare_strategies(pr, solve)
    s = table.set_index("name")
    assert set(s.index) == {"rent", "buy", "mix"}
    assert (s["status"] == "optimal").all()
    for other in ("rent", "buy"):
        assert s.loc["mix", "objective"] <= s.loc[other, "objective"] + 1e-6
    assert s.loc["mix", "best"] and s.loc["mix", "vs_best"] == pytest.approx(0)
    # rent: no new owned units -> res 1 each year + od 1 (year 1) and 2 (year 2):
    #   9,260 + 8,418.18 + 17,520 + 2 × 15,927.27 = 67,052.73
    assert s.loc["rent", "objective"] == pytest.approx(9_260 + 9_260 / 1.1 + 17_520 + 2 * 17_520 / 1.1)
    assert s.loc["rent", "new_owned_units"] == 0
    # buy: owned only -> 3 units, one idle in year 1 (idle energy 0.05 × 8760 = 438)
    assert plans["buy"].usage["pricing"].eq("owned").all()
    assert s.loc["buy", "new_owned_units"] == 3
    assert set(units.loc[units["strategy"] == "buy", "pricing"]) == {"owned"}
    assert s.loc["rent", "vs_best"] == pytest.approx(s.loc["rent", "objective"] - s.loc["mix", "objective"])
    # the transforms never touched the problem itself
    assert pr.offerings.at["own", "max_units"] == 3 and len(pr.offerings) == 3


def test_break_even_capex_matches_hand_value_and_brackets(tmp_path, audited):
    # Without new units the third replica... the unit's place is taken by on demand both years:
    #   17,520 + 15,927.27 = 33,447.27. Owning costs capex × (1 − 0.6/1.21) + 3,963.27 (fixed + energy).
    #   Break-even capex = (33,447.27 − 3,963.27) / (1 − 0.6/1.21) = 58,484.2
    hand = (17_520 + 17_520 / 1.1 - OWN_FIXED_ENERGY_PV) / (1 - 0.6 / 1.21)
    pr = tiny(tmp_path)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    be = rb.break_even_capex(pr, "own", solve)
    assert be.outcome == "bisected"
    assert be.capex <= hand <= be.capex_above * (1 + 1e-9)
    assert (be.capex_above - be.capex) <= rb.CAPEX_TOLERANCE * be.capex_above
    # verified: just below buys, just above does not
    below = solve(rb.with_capex(pr, "own", be.capex * 0.99))
    above = solve(rb.with_capex(pr, "own", be.capex_above * 1.01))
    assert rb.new_units(below, "own") >= 1
    assert rb.new_units(above, "own") == 0


def test_break_even_when_the_optimum_buys_nothing_and_when_it_never_buys(tmp_path, audited):
    # Capex 100,000 is above the break-even (58,484): the search brackets downwards from 0.
    data = copy.deepcopy(TINY)
    data["offerings"][0]["capex"] = 100_000
    pr = tiny(tmp_path, data)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    be = rb.break_even_capex(pr, "own", solve)
    assert be.new_units_current == 0 and be.outcome == "bisected"
    hand = (17_520 + 17_520 / 1.1 - OWN_FIXED_ENERGY_PV) / (1 - 0.6 / 1.21)
    assert be.capex <= hand <= be.capex_above * (1 + 1e-9)
    # Fixed costs of 2,000 $/month beat on demand (1,460 $/month) even at capex 0: buys none.
    data["offerings"][0]["fixed_per_month"] = 2_000
    pr = tiny(tmp_path, data)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    be = rb.break_even_capex(pr, "own", solve)
    assert be.outcome == "buys none even at capex 0" and be.capex is None
    assert rb.new_units(solve(rb.with_capex(pr, "own", 0.0)), "own") == 0


def test_break_even_buys_at_any_capex_without_an_alternative(tmp_path, audited):
    # Only owned capacity can serve: no plan exists without a new unit, so it buys at any capex.
    data = copy.deepcopy(TINY)
    data["offerings"] = [data["offerings"][0] | {"max_units": 3}]
    pr = tiny(tmp_path, data)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    be = rb.break_even_capex(pr, "own", solve)
    assert be.outcome == "buys at any capex" and math.isinf(be.capex)


def test_break_even_utilisation_and_payback_closed_forms(tmp_path, audited):
    # Per GPU-hour: capital 10,000 × 0.8 / (4 × 8760) = 0.228311; fixed 100/730 = 0.136986;
    # e = 0.10, idle 0.5 -> e·idle = 0.05.
    # u* vs on demand 2.00: (0.228311 + 0.136986 + 0.05) / (2.00 − 0.05) = 0.212973
    # u* vs reserved 1.00 + 500/(12 × 730) = 1.057078: 0.415297 / (1.057078 − 0.05) = 0.412378
    # payback at full use: 10,000 / (730 × (2.00 − 0.10 − 0.136986)) = 7.770 months;
    # in the plan the unit is busy all year: savings 17,520 − 1,200 − 876 = 15,444 in year 1,
    # so 10,000 / 15,444 × 12 = 7.770 months too.
    pr = tiny(tmp_path)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    plan = solve(pr)
    be, util = rb.break_even_table(pr, plan, None)
    r = be.set_index("offering").loc["own"]
    fixed_part = 10_000 * 0.8 / (4 * 8760) + 100 / 730 + 0.05
    assert r["utilisation"] == pytest.approx(fixed_part / 1.95)
    assert r["on_demand_offering"] == "od"
    assert r["utilisation_reserved"] == pytest.approx(fixed_part / (1 + 500 / 8760 - 0.05))
    assert r["payback_months_full_use"] == pytest.approx(10_000 / (730 * (2.0 - 0.1 - 100 / 730)))
    assert r["payback_months"] == pytest.approx(10_000 / 15_444 * 12)
    assert r["outcome"] == "not computed"
    # annuity form: (10,000 − 2,000/1.1^4) × CRF(10 %, 4) / 8760 + fixed + e·idle over the same margin
    crf = 0.1 * 1.1 ** 4 / (1.1 ** 4 - 1)
    ann = (10_000 - 2_000 / 1.1 ** 4) * crf / 8760
    assert r["utilisation_annuity"] == pytest.approx((ann + 100 / 730 + 0.05) / 1.95)
    assert set(util["rental"]) == {"od", "res"}


def test_transforms_never_touch_the_problem(tmp_path):
    pr = tiny(tmp_path)
    before = (pr.offerings.copy(), pr.discount_rate, [s.demand_rps for s in pr.services])
    changed = [p.apply(pr, 1.2) for p in rb.PARAMETERS] + [rb.rent_strategy(pr), rb.buy_strategy(pr),
                                                          rb.forbid_new_units(pr, "own"), rb.with_capex(pr, "own", 1)]
    pd.testing.assert_frame_equal(pr.offerings, before[0])
    assert pr.discount_rate == before[1] and [s.demand_rps for s in pr.services] == before[2]
    by = dict(zip([p.name for p in rb.PARAMETERS], changed))
    assert by["capex"].offerings.at["own", "capex"] == pytest.approx(12_000)
    assert by["residual value"].offerings.at["own", "residual_fraction"] == pytest.approx(0.24)
    assert by["discount rate"].discount_rate == pytest.approx(0.12)
    assert by["demand"].services[0].demand_rps == pytest.approx({"y1": 2.4, "y2": 3.6})
    assert by["cloud prices"].offerings.at["res", "upfront"] == pytest.approx(600)
    assert by["cloud prices"].offerings.at["od", "price_per_hour"] == pytest.approx(2.4)
    assert changed[-4].offerings.at["own", "max_units"] == 0  # rent: existing units only
    assert list(changed[-3].offerings.index) == ["own"]  # buy: owned only


def test_table_report(tmp_path, audited):
    pr = tiny(tmp_path)
    out = rb.analyse(pr, solver=SOLVER, do_sensitivity=False, do_break_even=False)
    assert out.mix.status.value == "optimal" and out.notes == []
    assert out.cash_flows["items"]["pv"].sum() == pytest.approx(MIX_NPV)
    text = rb_render.to_table(out)
    for heading in ("Strategies", "Break-even per owned offering", "Break-even utilisation", "Cash flows"):
        assert heading in text
    assert "mix beats rent by 24,443 USD" in text  # 67,052.73 − 42,610.05
    assert "buy: no plan meets every constraint" in text
    import highspy

    assert f"solver     highs (highspy {highspy.Highs().version()})" in text.splitlines()[1]


def test_only_the_asked_servers_and_fleet_rentals_are_compared(tmp_path):
    # TINY on the default catalog with buying allowed: the catalog's servers are candidates for the plan,
    # but the break-even is asked of the file's own server only, unless others are named; the rentals
    # owning is compared with are never spot and never a catalog's single host (Vast, max_units 1)
    from optimizer.errors import InputError

    data = copy.deepcopy(TINY)
    data["catalog"] = ["default"]
    data["allow"] = {"buy": True}
    pr = load_problem(write_problem(tmp_path, data))
    assert "owned-h100-sxm-8x-dc1" in pr.offerings.index
    assert rb.owned_to_assess(pr) == ["own"]
    assert rb.owned_to_assess(pr, ["owned-h100-sxm-8x-dc1"]) == ["owned-h100-sxm-8x-dc1"]
    O = pr.offerings
    everything = list(O.index[O["pricing"] != "owned"])
    refs = rb.reference_rentals(pr, everything)
    assert "od" in refs and "res" in refs  # the file's own, whatever their quota
    assert not any(O.at[r, "pricing"] == "spot" for r in refs)
    assert not any(r.startswith("vast-") for r in refs) and any(r.startswith("vast-") for r in everything)
    assert rb.reference_rentals(pr, everything, ["vast-8x-h100-sxm-32-65536-vietnam-vn-as-od"]) == [
        "vast-8x-h100-sxm-32-65536-vietnam-vn-as-od"]  # named by the user: taken as asked
    with pytest.raises(InputError) as e:
        rb.analyse(pr, offerings=["ownn"])
    assert e.value.suggestion == "own"


def test_a_break_even_utilisation_above_one_reads_never_pays():
    assert rb.verdict(1.41) == "never pays at any utilisation"
    assert rb.verdict(float("inf")) == "never pays at any utilisation"
    assert rb.verdict(0.5) == "pays when busy more than 50 % of the time"


def test_rentbuy_lists_the_assumptions_its_mix_rests_on(tmp_path, audited):
    # the mix buys the file's server (MIX_NPV above); mark its capex as an assumption
    import json

    from optimizer.render.rentbuy import to_dict

    data = copy.deepcopy(TINY)
    data["offerings"][0]["assumed"] = ["capex"]
    result = rb.analyse(load_problem(write_problem(tmp_path, data)), solver=SOLVER, do_break_even=False,
                        do_sensitivity=False)
    assert rb.new_units(result.mix, "own") >= 1
    warnings = json.loads(json.dumps(to_dict(result)))["warnings"]
    assert any(w.startswith("own:") and "capex is an assumption" in w for w in warnings)


def test_a_problem_asked_for_twice_is_solved_once(tmp_path, audited):
    # TINY has one owned offering, "own", with no units yet: the break-even search's problem without new
    # units of it (the first solve of its bracket, since the mix buys one) is the rent strategy's problem,
    # so the analysis solves it once: 3 strategies + the search's solves - 1.
    pr = tiny(tmp_path)
    out = rb.analyse(pr, solver=SOLVER, do_sensitivity=False)
    be = out.break_even.set_index("offering").loc["own"]
    assert be["solves"] >= 2
    assert len(audited) == 3 + be["solves"] - 1
    rent = out.strategies.set_index("name").loc["rent", "objective"]
    # the rent plan's cost is the z0 of the tangent bound: the break-even matches the hand value
    hand = (17_520 + 17_520 / 1.1 - OWN_FIXED_ENERGY_PV) / (1 - 0.6 / 1.21)
    assert be["capex"] <= hand <= be["capex_tested_above"] * (1 + 1e-9)
    assert rent > out.strategies.set_index("name").loc["mix", "objective"]


def test_a_mix_stopped_above_the_rent_plan_is_searched_again_from_it(tmp_path, audited, monkeypatch):
    # Rent (no owned unit) on TINY, by hand: res 1 in both years, od 1 in year 1 and 2 in year 2:
    #   9,260 + 8,418.18 + 17,520 + 2 x 15,927.27 = 67,052.73.
    # The mix's search is made to stop on its "limit" holding its optimum (42,610.05) plus one more on-demand
    # unit in both years (17,520 + 15,927.27 more: 76,057.32), dearer than renting alone. Every rent plan is a
    # mix plan, so the mix is searched again from the rent plan and ends at its optimum.
    import dataclasses

    from optimizer.solve import driver
    from optimizer.solve.result import Status

    real = driver.solve
    handed = []

    def mix_stopped_dear(model, *args, **kw):
        result = real(model, *args, **kw)
        handed.append(list(kw.get("known", ())))
        if len(handed) != 3:  # rent, buy, then the mix
            return result
        units = model.mip.variables["units-running"]
        x = result.x.copy()
        x[units.ids[(units.coords["offering"] == "od").to_numpy()]] += 1.0
        dear = result.objective + 17_520 + 17_520 / 1.1
        return dataclasses.replace(result, status=Status.FEASIBLE, objective=dear, x=x, bound=None, gap=None,
                                   message="time limit: stopped by the test")

    monkeypatch.setattr(driver, "solve", mix_stopped_dear)
    pr = tiny(tmp_path)
    solve, _ = rb.make_solver(pr, solver=SOLVER)
    table, plans, _units = rb.compare_strategies(pr, solve)
    s = table.set_index("name")
    rent = 9_260 + 8_418.18 + 17_520 + 2 * 17_520 / 1.1
    assert s.loc["rent", "objective"] == pytest.approx(rent, abs=0.01)
    assert s.loc["buy", "status"] == "infeasible"  # one owned unit cannot serve 3 rps
    assert len(handed) == 4  # rent, buy, the mix, the mix again
    assert len(handed[3]) == 1 and handed[2] == []  # the rent plan handed to the mix's second search
    assert s.loc["mix", "objective"] == pytest.approx(MIX_NPV) and s.loc["mix", "status"] == "optimal"
    assert plans["mix"].objective == pytest.approx(MIX_NPV)
    assert len(audited) == 4


def test_the_break_even_and_the_sensitivity_start_from_the_mix_plan(tmp_path, audited, monkeypatch):
    # every solve after the strategies is handed the mix's plan; where it is a plan of the copy (a price
    # changed) the copy's search starts from it
    handed = []
    real = rb.run  # the audited run

    def spy(problem, **kw):
        handed.append(list(kw.get("known", ())))
        return real(problem, **kw)

    monkeypatch.setattr(rb, "run", spy)
    out = rb.analyse(tiny(tmp_path), solver=SOLVER)
    assert handed[:3] == [[], [], []]  # the strategies, side by side, hand nothing over
    assert len(handed) > 3 and all(len(k) == 1 for k in handed[3:])
    mix = out.mix.result.x
    assert all((out.mix.mip.point_from(k[0]) == mix).all() for k in handed[3:])
