"""The terminal report: period grids summarised to fit 100 columns, repeated messages grouped."""

from __future__ import annotations

import json


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
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    out = tmp_path / "r.html"

    from conftest import gpuopt_here as gpuopt

    r = gpuopt("report", bad, "-o", out)
    assert r.returncode == 2 and "x.json" in r.stderr and "gpuopt solve, whatif (one change or scenarios), sweep or rentbuy" in r.stderr
    out.write_text("mine")
    r = gpuopt("report", root / "problems" / "q3.yaml", "-o", out)
    assert r.returncode == 2 and "--force" in r.stderr and out.read_text() == "mine"  # never overwritten silently


def test_whatif_and_sweep_pages_carry_their_charts(tmp_path):
    from test_whatif_toy import TOY, write

    from optimizer import sweep, whatif
    from optimizer.render.html import kind_of, report_html

    toy = write(tmp_path, TOY)
    result = whatif(toy, sets=["offerings[spot].price_per_hour=20"])
    assert result.base.audit == [] and result.scenario.audit == []
    w = result.to_dict()
    assert kind_of(w) == "whatif"
    page = report_html(w)
    assert 'data-chart="fleet"' in page and "offerings[spot].price_per_hour=20" in page
    s = sweep(toy, "offerings[spot].price_per_hour=20:60:3").to_dict()
    assert kind_of(s) == "sweep" and 'data-chart="sweep-objective"' in report_html(s)
    assert [p["audit"] for p in s["points"]] == [[], [], []] and "Audit FAILED" not in report_html(s)
    # a saved sweep with a point that failed its audit says so at the top of its page
    s["points"][1]["audit"] = ["capacity od/p1: 9 inference GPUs > 1 units × 8"]
    page = report_html(s)
    assert "Audit FAILED" in page and "point 1: 1 violation(s); first: capacity od/p1" in page


def test_a_wide_table_is_split_into_blocks_that_repeat_its_keys():
    import pandas as pd

    from optimizer.render.report import fit_table, wrap_long

    df = pd.DataFrame({"offering": ["a-long-offering-name", "b"], **{f"column_{i}": [1.0, 2.0] for i in range(12)}})
    text = fit_table(df, width=60)
    assert max(map(len, text.splitlines())) <= 60
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and all(b.splitlines()[0].lstrip().startswith("offering") for b in blocks)
    assert all(f"column_{i}" in text for i in range(12))  # nothing is dropped
    assert max(map(len, wrap_long("word " * 40, 30).splitlines())) <= 30


def test_whatif_sweep_and_rentbuy_tables_fit_100_columns(tmp_path):
    from test_rentbuy import TINY
    from test_whatif_toy import TOY, write

    from conftest import write_problem
    from optimizer import rentbuy, sweep, whatif
    from optimizer.render.rentbuy import to_table as rentbuy_table
    from optimizer.studies.sweep import render_table
    from optimizer.studies.whatif import render_compare

    toy = write(tmp_path, TOY)
    w = whatif(toy, sets=["offerings[spot].price_per_hour=20"])
    s = sweep(toy, "offerings[spot].price_per_hour=20:60:3")
    r = rentbuy(write_problem(tmp_path, TINY), solver="highs")
    assert all(p.audit == [] for p in (w.base, w.scenario, *r.plans.values()) if p.status.has_plan)
    texts = [render_compare(w.delta, w.base, w.scenario, "spot at 20"),
             render_table(s.dimensions, s.points, s.break_points, s.currency, "sweep"), rentbuy_table(r)]
    for text in texts:
        assert max(map(len, text.splitlines())) <= 100


def test_scenarios_side_by_side_get_a_page_from_the_command_and_from_their_saved_json(tmp_path):
    from test_whatif_toy import toy, write

    from conftest import gpuopt_here
    from optimizer.render.html import kind_of, report_html

    data = toy(scenarios=[{"name": "dear-od", "description": "on-demand at 200 an hour",
                           "set": ["offerings[od].price_per_hour=200"]}])
    p = write(tmp_path, data)
    page = tmp_path / "scenarios.html"
    r = gpuopt_here("whatif", p, "--html", page, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert kind_of(doc) == "scenarios" and doc["catalog_version"]
    html = page.read_text()
    assert html == report_html(doc)  # the saved JSON draws the same page
    assert 'data-chart="scenarios"' in html and "dear-od" in html and "on-demand at 200 an hour" in html
    assert "Audit FAILED" not in html and ">0.00 %<" in html
    # an existing page is refused before any solve, and gpuopt report reads the saved JSON
    r = gpuopt_here("whatif", p, "--html", page)
    assert r.returncode == 2 and "--force" in r.stderr
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(doc))
    r = gpuopt_here("report", saved, "-o", tmp_path / "again.html")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "again.html").read_text() == html
