"""MIP.add_slack: slack columns appended to existing constraint rows (the elastic model's tool)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from optimizer.solve.backends import Status, solve
from optimizer.model.mip import MIP, terms


def _model():
    # x[a] + x[b] >= 10 per row k, with x <= 3: short by 4 in row "one"; row "two" asks only 5
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"k": ["one", "one", "two"], "i": ["a", "b", "c"]}), upper=3.0)
    m.add_constraints("need", [terms(x, ["k"], 1.0)], ">=",
                      pd.DataFrame({"k": ["one", "two"], "rhs": [10.0, 3.0]}), keys=["k"])
    m.add_objective(terms(x, [], 1.0))
    return m, x


def test_slack_relaxes_rows_and_is_penalised():
    m, _ = _model()
    assert solve(m).status == Status.INFEASIBLE
    before = m.stats()["nonzeros"]
    s = m.add_slack("need", 1.0, penalty=100.0)
    assert list(s.columns) == ["k", "var"] and list(s["k"]) == ["one", "two"]
    assert m.stats()["nonzeros"] == before + 2
    r = solve(m)
    assert r.status == Status.OPTIMAL
    vals = m.values("slack:need", r.x).set_index("k")["value"]
    assert vals["one"] == pytest.approx(4.0) and vals["two"] == pytest.approx(0.0)
    # 6 + 3 units of x at 1 each, 4 units of slack at 100 each
    assert r.objective == pytest.approx(9 + 400)


def test_slack_on_selected_rows_with_coefficient():
    m, _ = _model()
    s = m.add_slack("need", np.array([2.0]), rows=np.array([True, False]), penalty=100.0,
                   name="half")
    assert list(s["k"]) == ["one"] and "half" in m.variables
    r = solve(m)
    assert r.status == Status.OPTIMAL
    # the slack counts twice in its row: 4 missing -> 2
    assert m.values("half", r.x)["value"].iloc[0] == pytest.approx(2.0)


def test_slack_on_empty_selection_changes_nothing():
    m, _ = _model()
    s = m.add_slack("need", -1.0, rows=np.array([], dtype=np.int64))
    assert s.empty and m.n_vars == 3
