"""The terminal report: period grids summarised to fit 100 columns, repeated messages grouped."""

from __future__ import annotations


def test_a_period_grid_is_summarised_by_min_typical_max_and_changes():
    import pandas as pd

    from optimizer.render.report import grouped, series_summary

    periods = ["p1", "p2", "p3", "p4"]
    grid = pd.DataFrame([[2, 2, 5, 2], [1, 1, 1, 1]], columns=periods,
                        index=pd.Index(["a", "b"], name="service"))
    s = series_summary(grid, periods)
    # a: 2, 2, 5, 2 -> min 2, median 2, max 5; changes at p3 (2 -> 5) and p4 (5 -> 2)
    assert s.loc[0, ["min", "typical", "max", "changes"]].tolist() == ["2", "2", "5", "2: p3, p4"]
    assert s.loc[1, "changes"] == "none"
    assert grouped(["x", "y", "x", "x"]) == ["x (x3)", "y"]
