"""Whole reserved units: chosen by the MIP against the rest, never rounded from the LP relaxation."""

from __future__ import annotations

import pytest

from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import driver
from optimizer.solve.backends import Status

from conftest import write_problem

TWO_PERIODS = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}]

# 5 one-GPU replicas (1 rps each) in both periods of 100 h.
# Reserved: 8-GPU units at 8 $/h (1 $/GPU-h); on-demand: 1-GPU units at 1.5 $/h.
# LP relaxation: 5/8 of a reserved unit, 0.625 × 8 × 200 = 1,000.
# Whole units: 1 reserved = 8 × 200 = 1,600; none, 5 on-demand × 1.5 × 200 = 1,500. Optimum 1,500.
# Rounding the LP's 0.625 up, or to the nearest unit, both give 1 unit (1,600).
IDLE_UNIT = {"periods": TWO_PERIODS,
             "offerings": [
                 {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r1", "pricing": "on_demand",
                  "price_per_hour": 1.5},
                 {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
                  "price_per_hour": 8.0, "term_months": 12}],
             "inference": [{"name": "chat", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
                            "demand_rps": 5.0, "profiles": [{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0}]}]}


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_whole_units_are_chosen_not_rounded(tmp_path, solver):
    pr = load_problem(write_problem(tmp_path, IDLE_UNIT))
    # the model's own rows, without the valid inequalities of optimizer/model/strengthen.py
    model = presolve.build(pr, build_candidates(pr), cuts=())
    lp = driver.relaxation(model, solver)
    assert lp.status == Status.OPTIMAL and lp.objective == pytest.approx(1_000)
    res = driver.solve(model, solver, gap=1e-9)
    assert res.status == Status.OPTIMAL and res.objective == pytest.approx(1_500)
    assert res.relaxation_bound == pytest.approx(1_000)
    assert res.bound == pytest.approx(1_500, rel=1e-6)
    # with them (the default), the LP is already the optimum: at most X̄ = 5 replicas, and 5 × 1 GPU < 8,
    # so `replica-unit` gives x_p ≤ 5·u in each period: a share a on the reservation needs u ≥ a,
    # 1,600·a, the rest on demand 1,500·(1 − a), least at a = 0: 1,500. (`unit-floor` alone cannot
    # round: the offerings bill 1 and 8 GPUs, so its row is in GPUs, 8·u + y ≥ 5, as the LP's 0.625.)
    model = presolve.build(pr, build_candidates(pr))
    lp = driver.relaxation(model, solver)
    assert lp.status == Status.OPTIMAL and lp.objective == pytest.approx(1_500)
    res = driver.solve(model, solver, gap=1e-9)
    assert res.status == Status.OPTIMAL and res.objective == pytest.approx(1_500)


def test_the_commitments_table_holds_numbers_whatever_kinds_the_plan_commits(tmp_path):
    # 8 one-GPU replicas for 200 h: one reserved 8-GPU unit (8 $/h × 200 h = 1,600) beats eight on-demand GPUs
    # (8 × 1.5 × 200 = 2,400). Its 12-month term outlives the 2-month horizon by 10 months, owed at
    # 8 $/h × 730 h/month × 10 = 58,400; a reserved row has no capex, so capex and book value are missing numbers.
    # Only reserved rows: the table's columns used to be typed by pandas' rules for joining an empty table of
    # owned rows, which made these three columns Python objects (and differ between pandas 2.2 and 3).
    from optimizer.api import solve

    spec = {**IDLE_UNIT, "inference": [{**IDLE_UNIT["inference"][0], "demand_rps": 8.0}]}
    plan = solve(write_problem(tmp_path, spec))
    assert plan.objective == pytest.approx(1_600)
    com = plan.commitments
    assert list(com["offering"]) == ["res"] and list(com["units"]) == [1]
    for col in ("new_units", "existing_units", "term_months", "months_after_horizon", "owed_after_horizon",
                "capex_spent", "book_value_at_end"):
        assert com[col].dtype == float, col
    assert com.loc[0, "months_after_horizon"] == pytest.approx(10)
    assert com.loc[0, "owed_after_horizon"] == pytest.approx(58_400)
    assert com[["capex_spent", "book_value_at_end", "new_units"]].isna().all().all()
    assert plan.after_horizon()["owed_after_horizon"] == pytest.approx(58_400)
