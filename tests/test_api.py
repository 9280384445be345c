"""The Python API: the commands as functions, DataFrames out, the same JSON as the command line.

Timing fields (``solve_seconds``, ``build_seconds``, ``seconds``) differ from
run to run and are left out of the comparisons; everything else must match.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_whatif_toy import TOY, write

from conftest import assert_audited, gpuopt_here

import optimizer
from optimizer import estimate_training, load_problem, rentbuy, solve, sweep, whatif

ROOT = Path(__file__).resolve().parent.parent
TIMING = {"solve_seconds", "build_seconds", "seconds"}


def cli_json(*args, process: bool = False) -> dict:
    """The command's JSON: in a new process (the real entry point) or in this one (the same command code)."""
    if process:
        r = subprocess.run([sys.executable, "-m", "optimizer", *map(str, args), "--format", "json"],
                           capture_output=True, text=True, cwd=ROOT)
    else:
        r = gpuopt_here(*args, "--format", "json", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def untimed(obj):
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def test_the_package_exports_the_commands():
    assert set(optimizer.__all__) == {"estimate_inference", "estimate_training", "load_problem", "rentbuy",
                                      "scenarios", "solve", "sweep", "whatif"}


def test_solve_gives_dataframes_on_the_shipped_example():
    # q3-profiled: q3 with measured profiles, proven in about a third of q3's time (docs/performance.md,
    # "Targets"), so the suite leaves q3 itself to the benchmark and the README's first command
    q3 = ROOT / "problems" / "q3-profiled.yaml"
    plan = solve(q3)
    assert plan.status.value == "optimal" and plan.result.gap == pytest.approx(0, abs=1e-6)
    assert_audited(plan)
    assert isinstance(plan.inference, pd.DataFrame) and len(plan.inference)
    assert isinstance(plan.by_pricing(), pd.DataFrame)
    assert set(plan.tables()) >= {"commitments", "inference", "training", "usage", "ledger", "by_pricing"}
    # the plan's total is its ledger's: an independent sum over the cost items
    assert plan.total_cost == pytest.approx(float(plan.ledger["cost"].sum()))
    # every workload planned
    assert {"chat", "assistant", "batch-summarize"} <= set(plan.inference["service"])
    assert set(plan.training["job"]) == {"ft-chat-70b", "pretrain-8b"}
    # the terminal report fits 100 columns; --wide keeps one column per period
    from optimizer.render.report import to_table

    assert max(map(len, to_table(plan).splitlines())) <= 100
    assert "w13-offpeak" in to_table(plan, wide=True).split("Inference replicas")[1].splitlines()[1]


def test_solve_gives_the_json_of_the_command_line():
    # the other shipped problem, which solves in well under a second: the API's plan as JSON is the command's
    # output, timings left out
    path = ROOT / "problems" / "rent-vs-buy-3y.yaml"
    plan = solve(path)
    assert_audited(plan)
    d = cli_json("solve", path, process=True)
    assert d["status"] == "optimal" and len(d["inference"])
    assert untimed(json.loads(plan.to_json())) == untimed(d)


def test_keyword_overrides_are_the_command_lines_sets():
    q3 = ROOT / "problems" / "q3.yaml"
    by_kw = load_problem(q3, catalog=["default"], allow__buy=True, providers__exclude=["vast"])
    by_set = load_problem(q3, sets=["catalog=[default]", "allow.buy=true", "providers.exclude=[vast]"])
    assert list(by_kw.offerings.index) == list(by_set.offerings.index)
    assert by_kw.warnings == by_set.warnings
    assert "owned-mi300x-8x-dc1" in by_kw.offerings.index  # buying enabled
    assert not by_kw.offerings["provider"].eq("vast").any()
    mapping = load_problem(q3, overrides={"inference[chat].demand_rps": 5})
    chat = next(s for s in mapping.spec.inference if s.name == "chat")
    assert chat.demand_rps == 5


def test_a_problem_object_takes_no_overrides():
    pr = load_problem(ROOT / "problems" / "q3.yaml")
    with pytest.raises(TypeError, match="overrides apply to a problem file"):
        solve(pr, catalog=["default"])


def test_a_misspelt_solver_in_a_notebook_is_named_with_the_nearest_one(tmp_path):
    # The command line checks --solver itself; from Python the name reaches the back ends, whose first lookup is
    # the LP relaxation's. There too it is the caller's error (exit 2 on the command line), not a KeyError.
    from optimizer.errors import InputError

    with pytest.raises(InputError, match="unknown solver 'higs'") as err:
        solve(write(tmp_path, TOY), solver="higs")
    assert "did you mean 'highs'" in str(err.value) and "cbc, cp-sat, highs, scip" in str(err.value)


def test_scenarios_side_by_side_match_the_command_line(tmp_path):
    from test_whatif_toy import toy

    from optimizer import scenarios
    from optimizer.errors import InputError

    with pytest.raises(InputError, match="no scenarios"):
        scenarios(write(tmp_path, TOY))
    p = write(tmp_path, toy(scenarios=[{"name": "cheap-spot", "set": ["offerings[spot].price_per_hour=20"]}]))
    sbs = scenarios(p)
    assert untimed(sbs.to_dict()) == untimed(cli_json("whatif", p))
    frame = sbs.frame()
    assert list(frame["name"]) == ["base", "cheap-spot"] and list(frame["status"]) == ["optimal", "optimal"]
    assert frame.loc[0, "objective"] == pytest.approx(22_500)  # test_whatif_toy's hand-worked optimum
    assert frame.loc[1, "objective"] < frame.loc[0, "objective"]  # a cheaper spot unit is taken
    assert {"bound", "gap", "total_cost", "mix", "audit_violations"} <= set(frame.columns)
    assert list(frame["audit_violations"]) == [0, 0]
    # the cost columns add up to the total cost, row by row
    costs = frame[[c for c in frame.columns if c.startswith("cost_")]].sum(axis=1)
    assert list(costs) == pytest.approx(list(frame["total_cost"]))


def test_whatif_and_sweep_match_the_command_line(tmp_path):
    toy = write(tmp_path, TOY)
    w = whatif(toy, sets=["offerings[spot].price_per_hour=20"])
    assert_audited(w.base)
    assert_audited(w.scenario)
    assert w.base.objective == pytest.approx(22_500)  # test_whatif_toy's hand-worked optimum
    assert w.scenario.objective < w.base.objective  # a cheaper spot unit is taken
    assert untimed(w.to_dict()) == untimed(cli_json("whatif", toy, "--set", "offerings[spot].price_per_hour=20"))

    s = sweep(toy, "offerings[spot].price_per_hour=20:60:3")
    frame = s.frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert untimed(s.to_dict()) == untimed(cli_json("sweep", toy, "--vary", "offerings[spot].price_per_hour=20:60:3"))


def test_rentbuy_returns_tables_and_json(tmp_path):
    from test_rentbuy import TINY

    rb = rentbuy(write(tmp_path, TINY), solver="highs", sensitivity=False, break_even=False)
    for plan in rb.plans.values():
        assert_audited(plan)
    tables = rb.tables()
    assert all(isinstance(t, pd.DataFrame) for t in tables.values())
    d = json.loads(rb.to_json())
    assert {"strategies", "cash_flows", "currency"} <= set(d)


def test_estimate_training_is_the_command_lines():
    api = estimate_training("llama-3.1-8b", "H100-SXM", 64, 1e11, fabric_gbps=12.5)
    cli = cli_json("estimate", "training", "-m", "llama-3.1-8b", "-g", "H100-SXM", "-n", "64", "-t", "1e11",
                   "--fabric-gbps", "12.5")
    assert api["hours"] == pytest.approx(cli["hours"]) and api["layout"] == cli["layout"]


def test_a_price_change_in_a_notebook_re_prices_the_model_built_before(tmp_path):
    # The toy at an on-demand price of 60 instead of 80: the same plan (1 reserved unit, 1 spot and 1 on-demand
    # unit in p1), its on-demand unit 2,000 cheaper: 10,000 + 4,500 + 6,000 = 20,500. Without the reserved unit
    # it costs 21,960 (p1: spot and 2 on-demand units, 16,500; p2: spot, and small on 8 L4s, 5,460). The
    # second solve and the what-if's scenario re-price the first solve's model instead of building one; the
    # plans are those of a model built afresh.
    import numpy as np

    from optimizer.model.reprice import models_of_structure
    from optimizer.pipeline import run

    toy = write(tmp_path, TOY)
    cheaper = ["offerings[od].price_per_hour=60"]
    first = solve(toy)
    assert_audited(first)
    assert first.objective == pytest.approx(22_500)
    models = models_of_structure(load_problem(toy))
    assert models.counts == {"built": 1, "repriced": 0}
    second = solve(toy, sets=cheaper)
    assert models.counts == {"built": 1, "repriced": 1}
    assert_audited(second)
    assert second.objective == pytest.approx(20_500)
    fresh = run(load_problem(toy, sets=cheaper))
    assert_audited(fresh)
    assert np.array_equal(second.result.x, fresh.result.x)
    w = whatif(toy, sets=cheaper)
    assert models.counts == {"built": 1, "repriced": 3}  # the base and the scenario
    assert_audited(w.base)
    assert_audited(w.scenario)
    assert w.scenario.objective == pytest.approx(20_500) and w.base.objective == pytest.approx(22_500)
