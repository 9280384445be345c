"""gpuopt whatif: base vs changed plan (JSON shape, deltas), named scenarios side by side, errors."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from optimizer.cli import main
from conftest import assert_audited, gpuopt_here
from test_whatif_toy import toy, write


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_whatif_json_shape_and_delta(tmp_path):
    p = write(tmp_path, toy())
    r = gpuopt_here("whatif", p, "--set", "offerings[res].price_per_hour*=2", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"base", "scenario", "delta"}
    for side in ("base", "scenario"):  # each side is solve's JSON
        assert {"status", "objective", "total_cost", "commitments", "inference", "training", "costs"} <= set(d[side])
    delta = d["delta"]
    assert delta["objective"]["delta"] == pytest.approx(d["scenario"]["objective"] - d["base"]["objective"])
    assert delta["objective"]["delta"] > 0
    by = {r["pricing"]: r for r in delta["by_pricing"]}
    assert sum(r["delta"] for r in by.values()) == pytest.approx(delta["total_cost"]["delta"])
    assert by["reserved"]["scenario"] == 0 and by["reserved"]["base"] > 0  # reservations no longer pay
    units = {u["offering"]: u for u in delta["units"]}
    assert units["res"]["base"] == 1 and units["res"]["scenario"] == 0
    assert {"service", "gpu", "base_peak", "scenario_peak"} <= set(delta["replicas"][0])
    assert sum(r["delta"] for r in delta["by_workload"]) == pytest.approx(delta["total_cost"]["delta"])
    assert d["change"]["set"] == ["offerings[res].price_per_hour*=2"]


def test_whatif_table_shows_what_moved(tmp_path):
    r = cli("whatif", write(tmp_path, toy()), "--scale", "demand,service=small:4")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Cost by pricing kind" in out and "Cost by workload" in out and "Units per offering" in out
    assert "small" in out.split("Inference replicas")[1]


@pytest.mark.parametrize("args", [
    ["--scale", "pricing=owned:2"],
    ["--scale", "demand,service=nope:2"],
    ["--set", "offerings[nope].price_per_hour=3"],
    ["--scenario", "nope"],
])
def test_whatif_bad_overlay_exits_2_naming_it(tmp_path, args):
    r = cli("whatif", write(tmp_path, toy()), *args)
    assert r.exit_code == 2, r.output
    assert "nope" in r.stderr or "pricing=owned" in r.stderr
    assert "Traceback" not in r.stderr


def test_nothing_to_compare_is_a_usage_error(tmp_path):
    r = cli("whatif", write(tmp_path, toy()))
    assert r.exit_code == 2 and "nothing to compare" in r.stderr


SCEN = [
    {"name": "spot-cut", "description": "H100 spot falls 30 %", "scale": ["pricing=spot,gpu=H100-SXM:0.7"]},
    {"name": "double", "scale": "demand:2"},
    {"name": "res-up", "set": ["offerings[res].price_per_hour=95"]},
]


def test_scenarios_side_by_side_from_the_problem_file(tmp_path):
    p = write(tmp_path, toy(scenarios=SCEN))
    r = cli("whatif", p, "--format", "json")
    assert r.exit_code == 0, r.output
    rows = {s["name"]: s for s in json.loads(r.stdout)["scenarios"]}
    assert list(rows) == ["base", "spot-cut", "double", "res-up"]
    base = rows["base"]["objective"]
    assert rows["spot-cut"]["objective"] < base < rows["double"]["objective"]
    assert rows["res-up"]["objective"] >= base
    assert rows["res-up"]["mix"].get("res", 0) == 0 and rows["base"]["mix"]["res"] == 1
    for row in rows.values():
        assert sum(row["by_pricing"].values()) == pytest.approx(row["total_cost"])
    # the table: one row per scenario, cost per pricing kind, the mix
    r = cli("whatif", p)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "on_demand" in lines[1] and "reserved" in lines[1] and "spot" in lines[1] and "mix" in lines[1]
    assert [ln.split()[0] for ln in lines[2:6]] == ["base", "spot-cut", "double", "res-up"]
    assert "H100 spot falls 30 %" in r.stdout
    # one named scenario against the base, in full
    r = cli("whatif", p, "--scenario", "spot-cut", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["scenario"]["objective"] == pytest.approx(rows["spot-cut"]["objective"])
    assert d["change"]["name"] == "spot-cut"


def test_scenario_file_and_errors(tmp_path):
    p = write(tmp_path, toy(scenarios=SCEN[:1]))
    sf = tmp_path / "more.yaml"
    sf.write_text(yaml.safe_dump({"scenarios": SCEN[1:]}))
    r = cli("whatif", p, "--scenarios", sf, "--format", "json")
    assert r.exit_code == 0, r.output
    assert [s["name"] for s in json.loads(r.stdout)["scenarios"]] == ["base", "spot-cut", "double", "res-up"]
    # a duplicate name, a scenario that names nothing, an unknown key: exit 2 naming them
    sf.write_text(yaml.safe_dump(SCEN[:1]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "duplicate scenario name" in r.stderr and "spot-cut" in r.stderr
    sf.write_text(yaml.safe_dump([{"name": "bad", "scale": ["gpu=B200:0.5"]}]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "scenarios[bad].scale" in r.stderr and "gpu=B200" in r.stderr
    sf.write_text(yaml.safe_dump([{"name": "bad", "sett": ["x=1"]}]))
    r = cli("whatif", p, "--scenarios", sf)
    assert r.exit_code == 2 and "sett" in r.stderr and "Traceback" not in r.stderr


def test_infeasible_scenario_is_reported_with_exit_1(tmp_path):
    p = write(tmp_path, toy())
    r = cli("whatif", p, "--set", "offerings[od].max_units=0", "--set", "offerings[res].max_units=0",
            "--format", "json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["scenario"]["status"] == "infeasible" and d["delta"]["objective"]["delta"] is None


def _solve_change(tmp_path, sets=(), scales=()):
    from optimizer.studies.whatif import Change, build, overlay, read_raw, solve_change

    p = write(tmp_path, toy())
    raw = read_raw(p)
    new = overlay(raw, str(p), list(sets), list(scales))
    return solve_change(Change("scenario", list(sets), list(scales)), build(raw, str(p)), build(new, str(p)))


def _spy_runs(monkeypatch) -> list:
    """Every pipeline.run of the test: (the known plans it was handed, its plan)."""
    from optimizer import pipeline

    calls = []
    real = pipeline.run

    def spy(problem, **kw):
        plan = real(problem, **kw)
        calls.append((list(kw.get("known", ())), plan))
        return plan

    monkeypatch.setattr(pipeline, "run", spy)
    return calls


def _handed_to_scenario(calls: list) -> tuple:
    """The scenario's arrays (the second run of ``calls``, :func:`_spy_runs`) and the one plan it was handed, read
    in its model."""
    (handed,) = calls[1][0]
    scenario = calls[1][1]
    return scenario.mip.arrays(), scenario.mip.point_from(handed)


def test_a_change_of_prices_starts_the_scenario_from_the_base_plan(tmp_path, monkeypatch):
    # The toy's optimum (22,500, worked by hand in test_whatif_toy.py) rents one on-demand unit for the 100 h of
    # p1. At 1.5 times the on-demand price that plan costs 22,500 + 40 x 100 = 26,500, so the scenario, started
    # from it, costs at most that.
    calls = _spy_runs(monkeypatch)
    r = _solve_change(tmp_path, sets=["offerings[od].price_per_hour*=1.5"])
    assert len(calls) == 2 and r.base.objective == pytest.approx(22_500)
    (handed,) = calls[1][0]
    assert (calls[1][1].mip.point_from(handed) == calls[0][1].result.x).all()  # the same model: the same columns
    assert r.scenario.objective <= 26_500 + 1e-6
    assert_audited(r.base)
    assert_audited(r.scenario)


def test_a_change_of_structure_hands_the_base_plan_over_where_it_is_a_plan_of_the_scenario(tmp_path, monkeypatch):
    from optimizer.solve import driver

    calls = _spy_runs(monkeypatch)
    # A second spot unit (max_units 1 -> 2) is a bound of the model, not a price: another model. The base's plan
    # (22,500) is still one of it, at the same prices. The scenario's optimum puts the second spot unit in
    # place of the on-demand unit of p1: 22,500 - (80 - 45) x 100 = 19,000.
    r = _solve_change(tmp_path, sets=["offerings[spot].max_units=2"])
    a, x = _handed_to_scenario(calls)
    used = driver.known_plan(a, [x], "highs")
    assert used is not None and used.objective == pytest.approx(22_500)
    assert r.scenario.objective == pytest.approx(19_000)
    assert_audited(r.base)
    assert_audited(r.scenario)
    assert len(calls) == 2  # the base is proven: the scenario's plan (more spot) is no plan of the base's model
    calls.clear()
    # Twice the demand: the base's plan, handed over, serves half of chat's 20 rps in p1, so it breaks the
    # scenario's demand rows and the scenario searches without it.
    r = _solve_change(tmp_path, scales=["demand:2"])
    a, x = _handed_to_scenario(calls)
    assert driver.known_plan(a, [x], "highs") is None
    assert r.scenario.status.value == "optimal"
    assert_audited(r.base)
    assert_audited(r.scenario)


def test_less_demand_takes_the_base_plan_with_its_replicas_clipped(tmp_path, monkeypatch):
    # Half the demand: the base's plan (22,500, worked by hand in test_whatif_toy.py) has more replicas than the
    # scenario's model allows (its replica bounds are what half the demand needs), and meets every other row
    # there. Read with each column clipped to the scenario's bounds it is a plan of the scenario with the same
    # units, so the same 22,500 (the toy prices units, not replicas), and the scenario's search starts from it.
    from optimizer.solve import driver
    from optimizer.solve.feasibility import violations

    calls = _spy_runs(monkeypatch)
    r = _solve_change(tmp_path, scales=["demand:0.5"])
    a, x = _handed_to_scenario(calls)
    assert any(v.startswith("bound of inference-replicas") for v in violations(a, x))  # not a plan as it is
    used = driver.known_plan(a, [x], "highs")
    assert used is not None and used.objective == pytest.approx(22_500)
    assert r.scenario.objective <= 22_500 + 1e-6
    assert_audited(r.base)
    assert_audited(r.scenario)


def _first_search_stopped_dear(monkeypatch) -> list:
    """The test's first driver search made to stop on its "limit" holding the toy's optimum plus one more
    on-demand unit in both periods (80 x 100 h x 2 = 16,000 dearer); every search's known plans, listed."""
    import dataclasses

    from optimizer.solve import driver
    from optimizer.solve.result import Status

    real = driver.solve
    handed = []

    def dear_first(model, *args, **kw):
        result = real(model, *args, **kw)
        handed.append(list(kw.get("known", ())))
        if len(handed) > 1:
            return result
        units = model.mip.variables["units-running"]
        x = result.x.copy()
        x[units.ids[(units.coords["offering"] == "od").to_numpy()]] += 1.0
        return dataclasses.replace(result, status=Status.FEASIBLE, objective=result.objective + 16_000.0, x=x,
                                   bound=None, gap=None, message="time limit: stopped by the test")

    monkeypatch.setattr(driver, "solve", dear_first)
    return handed


def test_a_base_stopped_above_the_scenarios_plan_is_searched_again_from_it(tmp_path, monkeypatch):
    # The base's search is made to stop on its "limit" holding the optimum plus one more on-demand unit in both
    # periods (80 x 100 h x 2 = 16,000 dearer: 38,500). The scenario (L4 1 % dearer) finds a plan that costs far
    # less at the base's prices, so the base is searched again from it and ends at its optimum, 22,500.
    handed = _first_search_stopped_dear(monkeypatch)
    r = _solve_change(tmp_path, sets=["offerings[l4].price_per_hour*=1.01"])
    assert len(handed) == 3  # the base, the scenario, the base again
    assert len(handed[1]) == 1 and len(handed[2]) == 1  # the base's dear plan to the scenario, its plan back
    assert r.base.objective == pytest.approx(22_500) and r.base.status.value == "optimal"
    assert_audited(r.base)
    assert_audited(r.scenario)


def test_a_known_plan_of_another_model_is_never_used(tmp_path):
    # a plan of another number of columns is no plan of this model (it is skipped, not an error); a plan of the
    # right size that breaks a row neither
    import numpy as np

    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem
    from optimizer.model import presolve
    from optimizer.solve import driver

    problem = load_problem(write(tmp_path, toy()))
    model = presolve.build(problem, build_candidates(problem))
    a = model.mip.arrays()
    x = driver.solve(model).x
    assert driver.known_plan(a, [x], "highs").objective == pytest.approx(22_500)
    assert driver.known_plan(a, [np.append(x, 0.0)], "highs") is None  # one column more: another model's
    assert driver.known_plan(a, [np.zeros(a.n_vars)], "highs") is None  # serves no demand


def test_scenarios_side_by_side_under_a_time_limit_share_the_base_plan(tmp_path, monkeypatch):
    # Under a time limit the base is solved first and each scenario starts from its plan. The base's search is
    # made to stop 16,000 above its optimum (one more on-demand unit in both periods: 80 x 100 h x 2), at
    # 38,500; "l4-up" (L4 1 % dearer) and "spot-cut" find plans that cost less at the base's prices (the
    # optimum, 22,500, holds no spot above its one unit, so it is a plan of the base's model), so the base is
    # searched again from them, and ends at 22,500. Without a time limit nothing is handed over.
    from optimizer.studies import sweep

    real_task = sweep.solve_task
    tasks = []
    calls = _first_search_stopped_dear(monkeypatch)

    def spy(task):
        tasks.append((task["index"], len(task.get("known", ()))))
        return real_task(task)

    monkeypatch.setattr(sweep, "solve_task", spy)
    runs = _spy_runs(monkeypatch)
    scen = [{"name": "l4-up", "set": ["offerings[l4].price_per_hour*=1.01"]}, SCEN[0]]
    p = write(tmp_path, toy(scenarios=scen))
    r = cli("whatif", p, "--format", "json", "--time-limit", "60")
    assert r.exit_code == 0, r.output
    rows = {s["name"]: s for s in json.loads(r.stdout)["scenarios"]}
    # the base, the two scenarios (each handed the base's plan), the base again (its plan and theirs)
    assert tasks == [(0, 0), (1, 1), (2, 1), (0, 3)]
    assert rows["base"]["objective"] == pytest.approx(22_500) and rows["base"]["status"] == "optimal"
    assert "point" not in rows["base"] and "point_cost" not in rows["base"]
    assert len(runs) == 4
    for _, plan in runs:
        assert_audited(plan)
    tasks.clear()
    calls.clear()
    r = cli("whatif", p, "--format", "json")
    assert r.exit_code == 0, r.output
    assert [k for _, k in tasks] == [0, 0, 0]
    # the base stopped dear, and without a limit nothing repairs it: the rows read each side as solved
    assert json.loads(r.stdout)["scenarios"][0]["objective"] == pytest.approx(38_500)


def test_side_by_side_rows_carry_the_proven_bound_and_gap(tmp_path):
    # every row of the toy is proven optimal: its bound is its objective, its gap at most the 1e-6 asked for
    data = toy(scenarios=[{"name": "dear-od", "set": ["offerings[od].price_per_hour=200"]}])
    r = cli("whatif", write(tmp_path, data), "--format", "json")
    assert r.exit_code == 0, r.output
    for row in json.loads(r.stdout)["scenarios"]:
        assert row["status"] == "optimal"
        assert row["bound"] == pytest.approx(row["objective"], rel=1e-6) and 0 <= row["gap"] <= 1e-6
    table = cli("whatif", write(tmp_path, data)).stdout
    assert table.splitlines()[1].split()[:4] == ["name", "status", "objective", "gap"]
    assert "0.00 %" in table and "stopped on the time limit" not in table


def test_a_row_stopped_on_its_limit_shows_its_gap_and_says_what_it_means():
    # rows as the side-by-side run gives them: one stopped at a 17.89 % gap (bound 73,400 under 89,395.29)
    from optimizer.studies.whatif import GAP_NOTE, render_side_by_side

    def row(name, status, objective, gap):
        return {"name": name, "description": None, "status": status, "message": "", "objective": objective,
                "bound": None if gap is None else objective * (1 - gap), "gap": gap, "total_cost": objective,
                "by_pricing": {"on_demand": objective}, "mix": {"od": 1}, "audit": []}

    text = render_side_by_side([row("base", "optimal", 100.0, 0.0), row("cut", "feasible", 89_395.29, 0.1789),
                                row("none", "infeasible", None, None)], "USD")
    lines = {line.split()[0]: line.split() for line in text.splitlines()[2:5]}
    assert lines["base"][3:5] == ["0.00", "%"] and lines["cut"][3:5] == ["17.89", "%"]
    assert lines["none"][3] == "-"
    assert GAP_NOTE in text


def test_the_comparison_shows_each_sides_gap_and_says_what_a_stopped_one_means(tmp_path):
    import dataclasses

    from optimizer.solve.result import Status
    from optimizer.studies.whatif import GAP_NOTE, render_compare

    r = _solve_change(tmp_path, sets=["offerings[od].price_per_hour*=1.5"])
    title = "od × 1.5"
    text = render_compare(r.delta, r.base, r.scenario, title)
    gap_row = next(line for line in text.splitlines() if line.startswith("gap"))
    assert gap_row.split() == ["gap", "0.00", "%", "0.00", "%"] and GAP_NOTE not in text
    # the scenario as a search stopped at a proven 25 % would give it
    r.scenario.result = dataclasses.replace(r.scenario.result, status=Status.FEASIBLE, gap=0.25)
    text = render_compare(r.delta, r.base, r.scenario, title)
    gap_row = next(line for line in text.splitlines() if line.startswith("gap"))
    assert gap_row.split() == ["gap", "0.00", "%", "25.00", "%"] and GAP_NOTE in text
