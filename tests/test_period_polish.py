"""Fix-and-optimize by period (optimizer/solve/period_polish.py), on a plan whose cost is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_problem
from optimizer.candidates import build_candidates
from optimizer.executors import Inline, Processes
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import driver
from optimizer.solve.feasibility import objective, violations
from optimizer.solve.period_polish import polish_periods

from test_known_answers import reserved_problem


def padded_plan(tmp_path):
    """reserved_problem's optimum (26,000: 1 reserved unit, 2 on-demand units in p1) with one more on-demand
    unit rented in each period: 26,000 + 2 × 80 $/h × 100 h = 42,000."""
    pr = load_problem(write_problem(tmp_path, reserved_problem()))
    model = presolve.build(pr, build_candidates(pr))
    best = driver.solve(model)
    a = model.mip.arrays()
    x = best.x.copy()
    y = model.mip.variables["units-running"]
    x[y.ids] += 1.0
    assert objective(a, x) == pytest.approx(42_000) and not violations(a, x)
    return model, a, x


@pytest.mark.parametrize("side_by_side", [False, True], ids=["one after the other", "side by side"])
def test_each_period_drops_the_unit_it_does_not_need(tmp_path, side_by_side):
    # With the reservation held at 1 unit, p1 needs 6 replicas beyond the 4 it holds = 12 GPUs = 2 on-demand
    # units (16,000) and p2's 3 replicas fit the reserved unit (0): back to 10,000 + 16,000 = 26,000.
    model, a, x = padded_plan(tmp_path)
    ex = Processes(2) if side_by_side else Inline()
    try:
        out, rec = polish_periods(model, a, x, 60.0, ex)
    finally:
        ex.close()
    assert objective(a, out) == pytest.approx(26_000)
    assert rec == {**rec, "periods": 2, "improved": 2, "before": pytest.approx(42_000), "after": pytest.approx(26_000)}
    assert not violations(a, out)
    # the reservation (a column without a period) is never changed by a period round
    u = model.mip.variables["units-reserved"].ids
    assert np.array_equal(out[u], x[u])
