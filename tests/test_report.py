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


def test_report_refuses_what_it_cannot_read_or_would_overwrite(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    out = tmp_path / "r.html"

    def gpuopt(*args):
        return subprocess.run([sys.executable, "-m", "optimizer", *map(str, args)], capture_output=True, text=True,
                              cwd=root)

    r = gpuopt("report", bad, "-o", out)
    assert r.returncode == 2 and "x.json" in r.stderr and "gpuopt solve, whatif, sweep or rentbuy" in r.stderr
    out.write_text("mine")
    r = gpuopt("report", root / "problems" / "q3.yaml", "-o", out)
    assert r.returncode == 2 and "--force" in r.stderr and out.read_text() == "mine"  # never overwritten silently


def test_whatif_and_sweep_pages_carry_their_charts(tmp_path):
    from test_whatif_toy import TOY, write

    from optimizer import sweep, whatif
    from optimizer.render.html import kind_of, report_html

    toy = write(tmp_path, TOY)
    w = whatif(toy, sets=["offerings[spot].price_per_hour=20"]).to_dict()
    assert kind_of(w) == "whatif"
    page = report_html(w)
    assert 'data-chart="fleet"' in page and "offerings[spot].price_per_hour=20" in page
    s = sweep(toy, "offerings[spot].price_per_hour=20:60:3").to_dict()
    assert kind_of(s) == "sweep" and 'data-chart="sweep-objective"' in report_html(s)
