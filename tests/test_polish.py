"""Fix-and-optimize rounds (optimizer/solve/polish.py): what each round frees, and that a round only improves."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import polish as pol
from optimizer.solve.backends import solve as backend_solve
from optimizer.solve.feasibility import objective, violations
from optimizer.solve.result import SolveResult, Status
from test_executable_plans import FLIP, assert_plan_audited
from optimizer.solve import fixed


def flip_model(tmp_path):
    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    return presolve.build(pr, build_candidates(pr))


def test_restrict_fixes_integer_decisions_outside_the_free_families(tmp_path):
    model = flip_model(tmp_path)
    mip, a = model.mip, model.mip.arrays()
    x = backend_solve(mip, "highs", gap=1e-9).x
    r = pol.restrict(mip, a, x, ("inference-replicas",))
    reps = mip.variables["inference-replicas"].ids
    units = mip.variables["units-running"].ids
    used = mip.variables["config-used"].ids
    routing = [i for i in range(a.n_vars) if not a.integer[i]]
    # free: replicas, units, every continuous variable; fixed: the configuration choice
    assert np.array_equal(r.col_lo[reps], a.col_lo[reps]) and np.array_equal(r.col_hi[reps], a.col_hi[reps])
    assert np.array_equal(r.col_hi[units], a.col_hi[units])
    assert np.array_equal(r.col_hi[routing], a.col_hi[routing])
    assert np.array_equal(r.col_lo[used], np.round(x[used])) and np.array_equal(r.col_hi[used], np.round(x[used]))


def test_the_units_round_returns_idle_units(tmp_path):
    # FLIP's stable optimum: L4 replicas in both periods, 1 unit in p1 (100 h x 1 $) and 10 in p2 (1,000):
    # 1,100. A plan that also holds an idle H100 node in p1 (100 h x 6 $) costs 1,700. The units round
    # (replicas fixed) gives the 600 back.
    model = flip_model(tmp_path)
    mip, a = model.mip, model.mip.arrays()
    x = backend_solve(mip, "highs", gap=1e-9).x.copy()
    assert objective(a, x) == pytest.approx(1_100)
    y = mip.values("units-running", x)
    i = mip.variables["units-running"].ids[((y["offering"] == "h100") & (y["period"] == "p1")).to_numpy()][0]
    assert x[i] == pytest.approx(0)
    x[i] = 1.0
    assert not violations(a, x) and objective(a, x) == pytest.approx(1_700)
    better, log = pol.polish(mip, a, x, "highs", time_limit=30.0)
    assert log[0]["round"] == "units" and log[0]["after"] == pytest.approx(1_100)
    assert objective(a, better) == pytest.approx(1_100) and not violations(a, better)


def test_a_round_starts_with_less_than_a_second_where_the_model_is_small_enough(tmp_path):
    # FLIP's plan with an idle H100 node in p1 (1,700, as above), 0.9 s to improve it: with a second as the
    # least a round needs (a large model's) nothing starts; with a tenth (driver.stage_least of a small model's
    # LP), the units round gives the 600 back
    model = flip_model(tmp_path)
    mip, a = model.mip, model.mip.arrays()
    x = backend_solve(mip, "highs", gap=1e-9).x.copy()
    y = mip.values("units-running", x)
    x[mip.variables["units-running"].ids[((y["offering"] == "h100") & (y["period"] == "p1")).to_numpy()][0]] = 1.0
    assert objective(a, x) == pytest.approx(1_700)
    same, log = pol.polish(mip, a, x, "highs", time_limit=0.9, least=1.0)
    assert log == [] and np.array_equal(same, x)
    better, log = pol.polish(mip, a, x, "highs", time_limit=0.9, least=0.1)
    assert log[0]["round"] == "units" and objective(a, better) == pytest.approx(1_100) and not violations(a, better)


def test_the_least_seconds_of_a_step_follow_the_lp_between_a_tenth_and_a_second_with_highs():
    from optimizer.solve.driver import STAGE_LPS, stage_least

    assert STAGE_LPS == 2.0
    assert stage_least(0.07) == pytest.approx(0.14)  # q3's LP on a slow machine
    assert stage_least(0.3) == pytest.approx(0.6)
    assert stage_least(9.0) == 1.0  # bench x1's: a large model keeps the second
    assert stage_least(0.001) == 0.1  # a toy's: the floor
    assert stage_least(0.07, "cbc") == stage_least(0.07, "scip") == 1.0  # measured: no better with less


def flip_west(tmp_path):
    """FLIP with a second L4 offering in another region at half the price, and its plan held to the first L4
    offering: 1 replica in p1 and 10 in p2, 100 h each at 1 $/h, 1,100 (the optimum here: 11 × 100 × 0.5 = 550)."""
    from test_known_answers import od

    data = copy.deepcopy(FLIP)
    data["offerings"].append(od(id="l4-west", gpu="L4", G=1, price=0.5, region="r2"))
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    mip, a = model.mip, model.mip.arrays()
    units = mip.variables["units-running"]
    on_first = a.copy_bounds()
    on_first.col_hi[units.ids[(units.coords["offering"] == "l4-west").to_numpy()]] = 0.0
    x = backend_solve(mip, "highs", gap=1e-9, arrays=on_first).x
    assert objective(a, x) == pytest.approx(1_100) and not violations(a, x)
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=1_100.0, x=x))
    gpu_of = {"l4": "L4", "l4-west": "L4", "h100": "H100-SXM"}
    return model, mip, a, x, gpu_of


def test_a_part_by_gpu_frees_only_that_gpus_replicas_and_units(tmp_path):
    # The inference round's part for the H100 holds every L4 replica and unit where the plan has them: 1,100.
    # The part for the L4 moves them to the cheaper L4 offering: 550.
    model, mip, a, x, gpu_of = flip_west(tmp_path)
    free = pol.ROUNDS["inference"]
    h100 = pol.gpu_part(mip, pol.restrict(mip, a, x, free), gpu_of, "H100-SXM", x, free)
    held = backend_solve(mip, "highs", gap=1e-9, arrays=h100)
    assert held.objective == pytest.approx(1_100)
    assert_plan_audited(model, held)
    l4 = pol.gpu_part(mip, pol.restrict(mip, a, x, free), gpu_of, "L4", x, free)
    r = backend_solve(mip, "highs", gap=1e-9, arrays=l4, start=x)
    assert r.objective == pytest.approx(550) and not violations(a, r.x)
    assert_plan_audited(model, r)
    reps = mip.values("inference-replicas", r.x)
    assert set(reps.loc[reps["value"] > 0.5, "offering"]) == {"l4-west"}


def test_the_inference_round_by_gpu_takes_the_most_spent_on_first(tmp_path):
    # The plan spends 1,100 on L4 units and nothing on H100s: one part, the L4's (an H100 part would have no
    # replica to move). The units round cannot move a replica (1,100 stays); the L4 part moves all eleven to the
    # cheaper offering (550). Without the GPU models the round is searched whole and reaches 550 too.
    model, mip, a, x, gpu_of = flip_west(tmp_path)
    assert pol.gpus_by_spend(mip, a, gpu_of, x) == [("L4", pytest.approx(1_100))]
    better, log = pol.polish(mip, a, x, "highs", time_limit=60.0, cycles=1, gpu_of=gpu_of)
    assert [(r["round"], r["part"]) for r in log] == [("units", None), ("inference", "L4"), ("training", None)]
    assert log[0]["after"] == pytest.approx(1_100) and log[1]["after"] == pytest.approx(550)
    assert objective(a, better) == pytest.approx(550) and not violations(a, better)
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=550.0, x=better))
    whole, log = pol.polish(mip, a, x, "highs", time_limit=60.0, cycles=1)
    assert [r["part"] for r in log] == [None, None, None] and objective(a, whole) == pytest.approx(550)
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=550.0, x=whole))


def test_a_round_never_returns_a_dearer_plan(tmp_path):
    # Started from the optimum, every round gives it back (its start is a plan of every round's restriction).
    model = flip_model(tmp_path)
    mip, a = model.mip, model.mip.arrays()
    x = backend_solve(mip, "highs", gap=1e-9).x
    better, log = pol.polish(mip, a, x, "highs", time_limit=30.0)
    assert [r["round"] for r in log] == list(pol.ROUNDS)
    assert all(r["after"] is None or r["after"] >= 1_100 - 1e-6 for r in log)
    assert objective(a, better) == pytest.approx(1_100)


def test_the_lp_neighbourhood_keeps_training_where_the_lp_places_it(tmp_path):
    # One 8-GPU job of 100 h; two EFA node offerings with a quota (so their clusters carry run binaries):
    # A at 40 $/h, B at 60 $/h. The LP runs the job on A only (100 h x 40 = 4,000, hourly or in a share
    # of a unit held: the same 4,000), so every binary on B is closed, those on A stay open, and the
    # restricted model still has the optimum, 4,000.
    from optimizer.solve.neighbourhood import training_support
    from optimizer.solve.driver import relaxation
    from test_executable_plans import MONTH, job
    from test_known_answers import od

    node = dict(G=8, fabric="efa", fabric_gbps_per_gpu=400, max_cluster_units=16, max_units=2)
    data = {"periods": MONTH, "offerings": [od(id="a", price=40.0, **node), od(id="b", price=60.0, **node)],
            "training": [job(8, 100)]}
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    mip, a = model.mip, model.mip.arrays()
    lp = relaxation(model)
    assert lp.objective == pytest.approx(4_000)
    near = training_support(mip, a, lp.x)
    run = mip.variables["training-run"]
    where = run.coords["offering"].to_numpy()
    assert (where == "b").any() and (where == "a").any()
    assert (near.col_hi[run.ids[where == "b"]] == 0).all()
    assert np.array_equal(near.col_hi[run.ids[where == "a"]], a.col_hi[run.ids[where == "a"]])
    assert backend_solve(mip, "highs", gap=1e-9, arrays=near).objective == pytest.approx(4_000)
    assert training_support(mip, a) is None  # no point, nothing to restrict


def test_a_model_whose_lp_takes_a_large_share_of_the_limit_skips_the_stages(tmp_path, monkeypatch):
    # Under a time limit, when the LP relaxation alone took more than STAGES_MAX_LP_SHARE of it, the
    # driver does not solve the model without stability limits (a MIP of the same size): it fixes the
    # configurations the descent from the LP's most used chooses, and searches from there. FLIP's optimum is
    # still reached (1,100), proven by the whole stable model at the end.
    from optimizer.solve import driver

    model = flip_model(tmp_path)
    lp = driver.relaxation(model)
    calls = []
    real = fixed.fixed_configurations

    def spy(*args, **kw):
        calls.append(kw.get("source"))
        return real(*args, **kw)

    patch_driver(monkeypatch, "fixed_configurations", spy)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=10.0)  # 10 s of 40
    assert calls == ["the descent over the configurations"]
    assert r.objective == pytest.approx(1_100) and r.bound == pytest.approx(1_100, rel=1e-6)
    assert "configurations fixed to those the descent over the configurations uses most" in r.message
    calls.clear()
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert calls == [] and r.objective == pytest.approx(1_100)  # the stages: split on the configuration


def test_under_a_time_limit_a_budget_row_gets_a_solver_search(tmp_path, monkeypatch):
    # FLIP with a budget of 1,150: B in both periods (1,200) breaks it, A in both (1,100) meets it. On the
    # path for large models (the LP took most of the limit) the configurations are fixed to those the LP
    # uses most: B (0.6 $ per rps-hour against A's 1 $, so the LP serves all 1,100 rps-hours on fractions
    # of a B node). Under the budget row, which spans both periods, that choice admits no plan; the whole
    # stable model is searched and finds and proves 1,100 (never a heuristic plan without a search).
    from optimizer.solve import driver

    data = copy.deepcopy(FLIP)
    data["constraints"] = {"budget": 1_150}
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    assert "budget" in model.mip.constraints
    lp = driver.relaxation(model)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=10.0)
    assert r.objective == pytest.approx(1_100) and r.bound == pytest.approx(1_100, rel=1e-6)
    assert "the configurations the LP relaxation uses most admit no plan" in r.message
    assert "the whole stable model" in r.message and "heuristic plan" not in r.message
    assert not violations(model.mip.arrays(), r.x)


def test_a_heuristic_plan_names_the_lp_relaxation_once_as_its_bound(tmp_path, monkeypatch):
    # FLIP on the path for large models with the LP's configurations fixed: B in both periods, 1,200 (the
    # rounds cannot leave B). The whole stable model that follows is made to stop without a plan or a bound,
    # so the plan stays a heuristic one, with the bound the caller passed (the LP's, 700 at most: A in p1 and
    # B in p2 at fractions). Its message names that bound once.
    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult, Status

    model = flip_model(tmp_path)
    a = model.mip.arrays()
    lp = driver.relaxation(model)
    assert lp.objective <= 700 + 1e-6
    real = driver.backend_solve

    def no_whole_search(*args, arrays=None, **kw):
        if arrays is a:
            return SolveResult(Status.TIME_LIMIT, "highs")
        return real(*args, arrays=arrays, **kw)

    patch_driver(monkeypatch, "backend_solve", no_whole_search)
    r = fixed.fixed_configurations(model, a, lp.x, "highs", 30.0, 1e-9, None, lp.objective, 0.0,
                                     source="the LP relaxation", lp_x=lp.x)
    assert r.status == Status.FEASIBLE and r.objective == pytest.approx(1_200) and not violations(a, r.x)
    assert_plan_audited(model, r)
    assert r.message.endswith("(the bound is that of the LP relaxation)")


def test_on_the_search_path_a_cycle_of_rounds_comes_before_the_search(tmp_path, monkeypatch):
    # FLIP's configurations fixed where its optimum has them (L4: 1 unit in p1, 10 in p2, 1,100), and the first
    # plan of that restriction made to be its optimum with an idle H100 node held in p1 (1,700, as above). A cycle
    # of rounds gives the node back (its units round) before the restriction's search starts, and says so;
    # without that cycle (share 0) the search itself finds the 1,100
    model = flip_model(tmp_path)
    mip, a = model.mip, model.mip.arrays()
    best = backend_solve(mip, "highs", gap=1e-9).x
    poor = best.copy()
    y = mip.values("units-running", poor)
    poor[mip.variables["units-running"].ids[((y["offering"] == "h100") & (y["period"] == "p1")).to_numpy()][0]] = 1
    assert objective(a, poor) == pytest.approx(1_700) and not violations(a, poor)
    monkeypatch.setattr(fixed, "first_plans",
                        lambda *args, **kw: (SolveResult(Status.FEASIBLE, "highs", objective=1_700.0, x=poor), "",
                                             0.0))
    r = fixed.fixed_configurations(model, a, best, "highs", 30.0, 1e-9, None, 700.0, 0.0, search=True,
                                   least=0.1)
    assert_plan_audited(model, r)
    assert r.objective == pytest.approx(1_100)
    assert "then a cycle of fix-and-optimize rounds from 1,700.00" in r.message
    assert "then searched with those configurations fixed" not in r.message  # nothing cheaper left for it
    monkeypatch.setattr(fixed, "SEARCH_ROUNDS_SHARE", 0.0)
    r = fixed.fixed_configurations(model, a, best, "highs", 30.0, 1e-9, None, 700.0, 0.0, search=True,
                                   least=0.1)
    assert r.objective == pytest.approx(1_100) and "rounds" not in r.message
    assert "then searched with those configurations fixed, from 1,700.00" in r.message
