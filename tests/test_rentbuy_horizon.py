"""Multi-year horizons: yearly periods, book value at the horizon end, reserved renewals.

Hand-computed optima; every plan is audited (conftest.solve_data).
"""

from __future__ import annotations

import pytest

YEARS = [{"name": "y1", "hours": 8760, "month": 0}, {"name": "y2", "hours": 8760, "month": 12}]


def svc(demand, gpus=8, rps=1.0):
    return {"name": "chat", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
            "demand_rps": demand, "profiles": [{"gpu": "H100-SXM", "gpus": gpus, "rps": rps}]}


def test_book_value_comes_back_at_the_horizon_end_of_yearly_periods(solve):
    # Bug fixed with this test: the book value came back at (last period's month + 1) = month 13 even
    # though the second yearly period (8760 h from month 12) ends at month 24.
    # One new unit, capex 100,000, life 4 years, residual 0.2, no running costs; on-demand is dearer.
    # Horizon 2 years: book value = 100,000 × (1 − 0.8 × 2/4) = 60,000, back at month 24: / 1.1^2.
    # NPV = 100,000 − 60,000 / 1.21 = 50,413.22; cost = depreciation 100,000 × 0.8 × 2/4 = 40,000.
    owned = {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "dc", "pricing": "owned",
             "capex": 100_000, "lifetime_years": 4, "residual_fraction": 0.2, "power_kw": 0.0,
             "electricity_per_kwh": 0.0}
    od = {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "dc", "pricing": "on_demand",
          "price_per_hour": 10.0}
    plan = solve({"periods": YEARS, "offerings": [od, owned], "inference": [svc(1)],
                  "finance": {"objective": "npv", "discount_rate": 0.1}})
    assert plan.commitments.set_index("offering").loc["own", "new_units"] == 1
    assert plan.objective == pytest.approx(100_000 - 60_000 / 1.21)
    assert plan.total_cost == pytest.approx(40_000)
    book = plan.ledger[plan.ledger["item"] == "book-value"]["pv"].sum()
    assert book == pytest.approx(-60_000 / 1.21)
