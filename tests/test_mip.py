"""The table-built MIP container: rows from term tables, duplicates, empty rows."""

import numpy as np
import pandas as pd
import pytest

from optimizer.solve.backends import solve
from optimizer.model.mip import MIP, terms


def test_duplicate_terms_in_a_row_are_summed():
    # x appears twice in one row with coefficients 1 and 2: the row is 3x >= 6, so x = 2 at minimum.
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0]}), integer=True)
    t = pd.concat([terms(x, ["i"], 1.0), terms(x, ["i"], 2.0)], ignore_index=True)
    m.add_constraints("row", [t], ">=", pd.DataFrame({"i": [0], "rhs": [6.0]}), keys=["i"])
    m.add_objective(terms(x, [], 1.0))
    for solver in ("cbc", "highs"):
        r = solve(m, solver=solver)
        assert r.objective == pytest.approx(2.0)


def test_row_without_variables_is_recorded_when_it_cannot_hold():
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0]}))
    m.add_constraints("need", [terms(x, ["i"], 1.0)], ">=",
                      pd.DataFrame({"i": [0, 1], "rhs": [1.0, 5.0]}), keys=["i"])
    assert m.n_rows == 1
    assert m.infeasible_rows["need"]["i"].tolist() == [1]


def test_values_map_back_to_coordinates():
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"a": ["p", "q"]}), upper=np.array([3.0, 4.0]), integer=True)
    m.add_objective(terms(x, [], -1.0))
    r = solve(m, solver="cbc")
    v = m.values("x", r.x).set_index("a")["value"]
    assert v["p"] == pytest.approx(3) and v["q"] == pytest.approx(4)
