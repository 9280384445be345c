"""The monthly model standing in for the LP relaxation (optimizer/solve/coarse.py).

Checked three ways: the merge of a problem's periods by hand; on the
reservation example cut into half-periods, the prices read off the monthly
LP give the bounds worked by hand (the period LPs' 21,500, the period
MIPs' 26,000, the optimum); on generated problems the bound at those prices
never exceeds the optimum of the model solved whole, and the period LPs'
never the weekly LP's. Then the solve driver: a model whose LP stops on its
share of the limit takes the monthly model's point and prices, and says so.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.executors import Inline
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import coarse, decompose
from optimizer.solve.backends import Status, solve as backend_solve

from test_executable_plans import assert_plan_audited
from test_known_answers import od, svc
from optimizer.solve import fixed as fixed_path

#: the reservation example of tests/test_known_answers.py (p1 and p2 of 100 h, demand 10 and 3 rps) with each
#: period cut into two halves of 50 h in the same month: its monthly model is that example exactly
HALVES = [{"name": "p1a", "hours": 50, "month": 0}, {"name": "p1b", "hours": 50, "month": 0},
          {"name": "p2a", "hours": 50, "month": 1}, {"name": "p2b", "hours": 50, "month": 1}]


def halves_problem(second_config: bool = False) -> dict:
    service = svc(demand={"p1a": 10, "p1b": 10, "p2a": 3, "p2b": 3})
    if second_config:  # a dearer configuration (1 GPU for 0.3 rps), so the class has one to choose
        service["profiles"].append({"gpu": "H100-SXM", "gpus": 1, "rps": 0.3})
    return {"periods": HALVES,
            "offerings": [od(), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                 "pricing": "reserved", "price_per_hour": 50, "term_months": 12}],
            "inference": [service]}


def model_of(tmp_path, data, cuts=()):
    # without the valid inequalities by default: with them the example's LP is its optimum already (the unit
    # floor asks p1 for 3 whole units), and the numbers worked by hand below are those of the model as built
    pr = load_problem(write_problem(tmp_path, data))
    return presolve.build(pr, build_candidates(pr), cuts=cuts)


def test_merge_periods_sums_hours_and_averages_demand_by_hours(tmp_path):
    # w1 (month 0, 100 h, 10 rps) and w2 (month 0, 300 h, 2 rps) merge into one period of 400 h whose demand
    # is (10 × 100 + 2 × 300) / 400 = 4 rps; w3 (month 1) stays alone with its 5 rps
    data = halves_problem()
    data["periods"] = [{"name": "w1", "hours": 100, "month": 0}, {"name": "w2", "hours": 300, "month": 0},
                       {"name": "w3", "hours": 100, "month": 1}]
    data["inference"][0]["demand_rps"] = {"w1": 10, "w2": 2, "w3": 5}
    pr = load_problem(write_problem(tmp_path, data))
    assert coarse.mergeable(pr)
    merged, into = coarse.merge_periods(pr)
    assert into.to_dict() == {"w1": "w1..w2", "w2": "w1..w2", "w3": "w3"}
    assert merged.periods.to_dict("index") == {"w1..w2": {"hours": 400.0, "month": 0},
                                               "w3": {"hours": 100.0, "month": 1}}
    assert merged.services[0].demand_rps == pytest.approx({"w1..w2": 4.0, "w3": 5.0})
    assert merged.horizon_hours == pr.horizon_hours
    # one period per month: nothing to merge
    data["periods"][1]["month"] = 1
    data["periods"][2]["month"] = 2
    single = load_problem(write_problem(tmp_path, data))
    assert not coarse.mergeable(single) and coarse.merge_periods(single) is None


def test_prices_from_the_monthly_lp_give_the_bounds_worked_by_hand(tmp_path):
    # The monthly model is the reservation example: LP 21,500 (reserve 6 GPUs' worth, 0.75 of a unit), its
    # capacity rows pricing a GPU at 1,000 in p1 and 250 in p2 (tests/test_decompose.py). A reserved unit is
    # then worth 8 × 1,000 = 8,000 in month 0 and 2,000 in month 1, shared by hours: 4,000 in p1a and in p1b,
    # 1,000 in p2a and in p2b. The master pays 10,000 − 2 × 4,000 − 2 × 1,000 = 0 for it.
    # Period MIPs: p1a needs 20 GPUs = 3 whole units at 4,000 (on demand: 80 $/h × 50 h, the same) = 12,000,
    # p1b the same; p2a needs 6 GPUs = one reserved unit at 1,000, p2b the same: 26,000, the optimum.
    # Period LPs: 20 GPUs at 500 a GPU = 10,000 in p1a and p1b, 6 at 125 = 750 in p2a and p2b: 21,500.
    model = model_of(tmp_path, halves_problem())
    monthly = coarse.solve(model, "highs", None, None, cuts=())
    assert monthly is not None and monthly.lp.objective == pytest.approx(21_500)
    assert len(monthly.model.data.periods) == 2
    bound, priced = coarse.priced_periods(model, monthly)
    assert priced.master == pytest.approx(0.0, abs=1e-6)
    assert priced.lp_values == pytest.approx([10_000, 10_000, 750, 750])
    assert bound == pytest.approx(21_500)
    apart = decompose.start(model, None, Inline(), priced=priced)
    assert apart.collect().bound == pytest.approx(26_000)
    assert backend_solve(model.mip, "highs").objective == pytest.approx(26_000)
    # the guide: what a month holds, each half holds (0.75 reserved unit; on demand 20 GPUs − 6 reserved =
    # 14 GPUs = 1.75 units in each half of p1, none in p2)
    x = coarse.point(model, monthly)
    held = model.mip.values("units-running", x).set_index("period")["value"]
    assert held.to_dict() == pytest.approx({"p1a": 1.75, "p1b": 1.75, "p2a": 0.0, "p2b": 0.0})
    assert model.mip.values("units-reserved", x)["value"].tolist() == pytest.approx([0.75])


@pytest.mark.parametrize("seed", [0, 4])
def test_the_bound_at_monthly_prices_never_exceeds_the_optimum(seed, optimum):
    # generated problems with training (progress rows link the weeks) and reservations: any prices of the
    # right sign give a lower bound, so the period MIPs' bound is at most the optimum of the model solved
    # whole, and the period LPs' at most the weekly LP's
    from bench.generate import problem

    pr = problem(0.05, seed, weeks=6, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    assert coarse.mergeable(pr)
    monthly = coarse.solve(model, "highs", None, None)
    bound, priced = coarse.priced_periods(model, monthly)
    lp = decompose.lp_duals(model)[0]
    assert bound <= lp * (1 + 1e-7)
    apart = decompose.start(model, None, Inline(), priced=priced)
    assert bound - 1e-6 <= apart.collect().bound <= optimum(model) * (1 + 1e-7)


def _lp_stopped_on_its_share(monkeypatch, driver, seen):
    real = driver.relaxation

    def stopped(model, solver="highs", time_limit=None, threads=None):
        seen.append(time_limit)
        lp = real(model, solver, time_limit, threads)
        return dataclasses.replace(lp, status=Status.TIME_LIMIT, objective=None, x=None, duals=None,
                                   solve_seconds=time_limit)

    patch_driver(monkeypatch, "relaxation", stopped)


def test_a_model_whose_lp_stops_on_its_share_is_solved_from_the_monthly_model(tmp_path, monkeypatch):
    # The LP relaxation gets a quarter of the 40-s limit and (made to) stop there: the monthly model stands in.
    # Its bound, the period LPs at its prices, is the relaxation bound (21,500, worked by hand above); the
    # model has no configuration to choose, so the back end searches it whole and proves 26,000; the periods
    # solved apart on the executor, at the monthly prices, prove 26,000 too (worked by hand above)
    from optimizer.solve import driver

    seen = []
    _lp_stopped_on_its_share(monkeypatch, driver, seen)
    model = model_of(tmp_path, halves_problem())
    r = driver.solve(model, time_limit=40.0, gap=1e-9, executor=Inline())
    assert seen == [pytest.approx(0.25 * 40.0)]
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(26_000)
    assert r.relaxation_bound == pytest.approx(21_500)
    assert r.decomposition_bound == pytest.approx(26_000, rel=1e-6)


def test_a_stable_model_whose_lp_stops_is_guided_by_the_monthly_model(tmp_path, monkeypatch):
    # With a second configuration the model takes the heuristics' path (its LP, at its share, "took too long"):
    # the configurations are fixed to those the monthly model's LP uses most, and the message names it and
    # the bound's source; the plan is the optimum (26,000, the dearer configuration left out) and the bound
    # lies between the period LPs' 21,500 and the optimum
    from optimizer.solve import driver

    _lp_stopped_on_its_share(monkeypatch, driver, [])
    patch_driver(monkeypatch, "cpus", lambda: 2)
    model = model_of(tmp_path, halves_problem(second_config=True))
    assert "config-used" in model.mip.variables
    r = driver.solve(model, time_limit=40.0, gap=1e-9)
    assert_plan_audited(model, r)
    assert r.objective == pytest.approx(26_000)
    assert ("configurations fixed to those the monthly model's LP uses most, the periods solved one after the "
            "other from the monthly model's LP's point" in r.message)
    assert r.relaxation_bound == pytest.approx(21_500)
    assert 21_500 - 1e-6 <= r.bound <= 26_000 * (1 + 1e-9)


def test_a_problem_with_one_period_a_month_keeps_the_whole_limit_for_its_lp(tmp_path, monkeypatch):
    from optimizer.solve import driver
    from test_known_answers import reserved_problem

    seen = []
    real = driver.relaxation
    patch_driver(monkeypatch, "relaxation", lambda m, s, t, th: seen.append(t) or real(m, s, t, th))
    model = model_of(tmp_path, reserved_problem())
    r = driver.solve(model, time_limit=40.0)
    assert seen == [40.0] and r.objective == pytest.approx(26_000)
    np.testing.assert_allclose(r.relaxation_bound, 21_500)


def _monthly_start(model):
    """The monthly point with its choices made whole, the configurations fixed as the driver fixes them."""
    from optimizer.solve import driver

    lp, _ = driver._monthly(model, "highs", None, None)
    a = model.mip.arrays()
    fixed = a.copy_bounds()
    if "config-used" in model.mip.variables:
        ids = model.mip.variables["config-used"].ids
        keep = fixed_path.most_used(model, lp.x, extra=0, then=lp.x)
        fixed.col_hi[ids[~keep]] = 0.0
        fixed.col_lo[ids[keep]] = 1.0
    return fixed, fixed_path._choices_made_whole(model, fixed, lp.x)


def test_a_plan_built_period_by_period_from_the_monthly_point(tmp_path):
    # The halves example: the monthly LP reserves 0.75 of a unit, rounded up to 1. Each half of p1 then needs
    # 20 GPUs: the reserved unit's 8 and two on-demand units (2 × 80 $/h × 50 h = 8,000); each half of p2 its
    # 6 GPUs in the reserved unit. 10,000 + 2 × 8,000 = 26,000, the optimum.
    from optimizer.solve.feasibility import violations
    from optimizer.solve.period_polish import build_by_periods
    from optimizer.solve.result import SolveResult

    model = model_of(tmp_path, halves_problem())
    fixed, start = _monthly_start(model)
    assert model.mip.values("units-reserved", start)["value"].tolist() == [1.0]
    x, record = build_by_periods(model, fixed, start, 30.0)
    assert x is not None and violations(model.mip.arrays(), x) == []
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=record["after"], x=x))
    assert record["after"] == pytest.approx(26_000)


@pytest.mark.parametrize("seed", [0, 4])
def test_plans_built_period_by_period_meet_every_row(seed, optimum):
    # generated problems with jobs whose progress spans weeks, stable classes and reservations: the plan made
    # one period after the other meets every row of the model (checked on the model's own arrays, and by the
    # audit, which recomputes each rule from the plan's rows), and costs no less than the optimum
    from bench.generate import problem
    from optimizer.solve.feasibility import violations
    from optimizer.solve.period_polish import build_by_periods
    from optimizer.solve.result import SolveResult

    pr = problem(0.05, seed, weeks=6, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    assert len(model.mip.constraints["training-progress"].ids)
    fixed, start = _monthly_start(model)
    x, record = build_by_periods(model, fixed, start, 60.0)
    assert x is not None and violations(model.mip.arrays(), x) == []
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=record["after"], x=x))
    assert record["after"] >= optimum(model) * (1 - 1e-9)


def test_the_monthly_model_takes_the_heuristics_path_however_short_the_lp_share(tmp_path, monkeypatch):
    # the LP stopped on a share of 0.4 s (far below the 5 % of the limit past which an LP "took too long"): it
    # did not solve, so the model is still one for the heuristics, guided by the monthly point; before, the
    # stages ran and their model without limits made the plan (bench x1 with such a share: a 68 % gap)
    from optimizer.solve import driver

    seen = []
    _lp_stopped_on_its_share(monkeypatch, driver, seen)
    patch_driver(monkeypatch, "LP_MAX_SHARE", 0.01)
    model = model_of(tmp_path, halves_problem(second_config=True))
    r = driver.solve(model, time_limit=40.0, gap=1e-9)
    assert seen == [pytest.approx(0.4)]
    assert_plan_audited(model, r)
    assert "configurations fixed to those the monthly model's LP uses most" in r.message
    assert "without stability limits" not in r.message


def test_objective_floor_worked_by_hand():
    # c = (2, -1, 0, 3), bounds [1, 5], [0, 4], free, [0, inf), c0 = 10: each column at its cheap bound gives
    # 10 + 2·1 - 1·4 + 0 + 3·0 = 8; a cost on a column unbounded on its cheap side gives no floor
    from optimizer.model.mip import Arrays
    from optimizer.solve.feasibility import objective_floor

    def arrays(c, lo, hi):
        n = len(c)
        return Arrays(n_vars=n, n_rows=0, rows=np.zeros(0, int), cols=np.zeros(0, int), vals=np.zeros(0),
                      row_lo=np.zeros(0), row_hi=np.zeros(0), col_lo=np.array(lo, float), col_hi=np.array(hi, float),
                      integer=np.zeros(n, bool), c=np.array(c, float), c0=10.0, var_names=[f"x{i}" for i in range(n)],
                      row_names=[])

    inf = np.inf
    assert objective_floor(arrays([2, -1, 0, 3], [1, 0, -inf, 0], [5, 4, inf, inf])) == pytest.approx(8.0)
    assert objective_floor(arrays([-1], [0], [inf])) == -inf


def test_the_monthly_stand_in_never_proves_less_than_the_objective_floor():
    # On q3-profiled the Lagrangian of the weekly periods at the monthly model's prices is far below zero, although
    # every cost and every column of the model is non-negative, so no plan costs less than the objective's
    # constant c0 (the existing servers' costs). The stand-in for the LP relaxation reports that floor instead
    from pathlib import Path

    from optimizer.solve import driver

    pr = load_problem(Path(__file__).resolve().parents[1] / "problems" / "q3-profiled.yaml")
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    assert (a.c >= 0).all() and (a.col_lo >= 0).all() and a.c0 > 0
    monthly = coarse.solve(model, "highs", None, None)
    raw, _ = coarse.priced_periods(model, monthly)
    assert raw < a.c0  # the case this guards against
    lp, _ = driver._monthly(model, "highs", None, None)
    assert lp.bound == pytest.approx(a.c0) and lp.objective == pytest.approx(a.c0)
