"""The expression layer and the rows it gives, worked by hand on tables of a few rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizer.model.expr import lin, rhs_table
from optimizer.model.mip import MIP


def dense(m: MIP, name: str) -> np.ndarray:
    """Block ``name`` as a dense matrix over every column of ``m``."""
    b = m.constraints[name]
    out = np.zeros((b.size, m.n_vars))
    np.add.at(out, (b.rows - b.start, b.cols), b.vals)
    return out


def two_blocks():
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"offering": ["a", "a", "b"], "period": ["p1", "p2", "p1"],
                                           "G": [8.0, 8.0, 4.0]}))
    y = m.add_variables("y", pd.DataFrame({"offering": ["b", "a", "a"], "period": ["p1", "p1", "p2"]}))
    return m, x, y


def test_rows_are_the_distinct_coordinates_in_order_of_appearance_with_the_terms_of_each():
    m, x, y = two_blocks()
    # 8·x0 − 2·y1 <= 5 (a, p1); 8·x1 − 2·y2 <= 0 (a, p2); 4·x2 − 2·y0 <= 0 (b, p1); (c, p1) has no terms
    rhs = rhs_table(pd.DataFrame({"offering": ["a", "c"], "period": ["p1", "p1"]}), ["offering", "period"],
                    np.array([5.0, 3.0]))
    m.add("cap", lin(x, x["G"], ["offering", "period"]) - lin(y, 2.0, ["offering", "period"]) <= rhs)
    b = m.constraints["cap"]
    assert b.coords.to_dict("list") == {"offering": ["a", "a", "b"], "period": ["p1", "p2", "p1"]}
    assert dense(m, "cap").tolist() == [[8, 0, 0, 0, -2, 0], [0, 8, 0, 0, 0, -2], [0, 0, 4, -2, 0, 0]]
    assert b.upper.tolist() == [5.0, 0.0, 0.0] and np.isneginf(b.lower).all()
    # a row without terms that zero meets is dropped, not reported
    assert "cap" not in m.infeasible_rows
    m.add("need", lin(x, 1.0, ["offering", "period"]) >= rhs)  # (c, p1) ≥ 3 with nothing to meet it
    assert m.infeasible_rows["need"].to_dict("list") == {"offering": ["c"], "period": ["p1"], "rhs": [3.0]}


def test_terms_of_one_variable_in_one_row_are_summed_and_zero_coefficients_dropped():
    m, x, y = two_blocks()
    e = lin(x, 1.0, ["period"]) + lin(x, 2.0, ["period"]) + lin(y, 0.0, ["period"])
    m.add("sum", e.sum("period").eq(1.0))
    # p1: 3·x0 + 3·x2; p2: 3·x1; the y terms (coefficient 0) are gone
    assert dense(m, "sum").tolist() == [[3, 0, 3, 0, 0, 0], [0, 3, 0, 0, 0, 0]]
    assert m.constraints["sum"].lower.tolist() == m.constraints["sum"].upper.tolist() == [1.0, 1.0]


def test_scaling_negation_selection_and_a_row_over_everything():
    m, x, y = two_blocks()
    e = -(lin(x, x["G"], ["offering"]) * np.array([1.0, 0.5, 2.0])).where(np.array([True, True, False]))
    m.add("one", (e.sum() + lin(y, 1.0, [])) <= 7.0)  # −8·x0 − 4·x1 + y0 + y1 + y2 ≤ 7, a single row
    assert dense(m, "one").tolist() == [[-8, -4, 0, 1, 1, 1]]
    assert m.constraints["one"].upper.tolist() == [7.0]


def test_a_key_column_of_python_objects_beside_strings_takes_the_type_pandas_gives_the_tables():
    m, x, _ = two_blocks()
    rhs = pd.DataFrame({"period": pd.Series(["p1", "p3"], dtype=object), "rhs": [1.0, 0.0]})
    m.add("per", lin(x, 1.0, ["period"]) <= rhs)
    terms = pd.DataFrame({"period": x["period"].array, "var": x["var"], "coef": 1.0})
    expected = pd.concat([terms[["period"]], rhs[["period"]]], ignore_index=True)["period"].dtype
    coords = m.constraints["per"].coords
    assert coords["period"].dtype == expected
    assert coords["period"].tolist() == ["p1", "p2"]  # p3: no terms, and 0 <= 0 holds


def test_a_variable_table_gets_its_ids_as_joining_its_coordinates_back_would_give_them():
    table = pd.DataFrame({"offering": ["a", "b", "a"], "G": [8, 4, 8], "period": ["p1", "p1", "p2"],
                          "price": [1.0, 2.0, 3.0]})
    keys = ["offering", "period"]
    for t in (table, table.iloc[[0, 1, 2, 0]]):  # keys unique; keys repeated (then they are joined)
        m, before = MIP(), MIP()
        got = m.add_variables_on("x", t, keys, upper=2.0, integer=True)
        expected = before.add_variables("x", t[keys], upper=2.0, integer=True).merge(t, on=keys)
        pd.testing.assert_frame_equal(got, expected)
        assert list(got.columns) == ["offering", "period", "var", "G", "price"]
        pd.testing.assert_frame_equal(m.variables["x"].coords, before.variables["x"].coords)
        assert m.variables["x"].upper.tolist() == [2.0] * len(t) and m.variables["x"].integer
