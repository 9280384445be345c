"""The table-built MIP container: rows from term tables, duplicates, empty rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from optimizer.solve.backends import solve
from optimizer.model.mip import MIP, terms

ROOT = Path(__file__).resolve().parent.parent


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


def test_rows_in_order_of_appearance_with_summed_right_hand_sides():
    # Three variables keyed (g, h); rows are the distinct (g, h) of the terms, in the order they first appear,
    # then those only the right-hand side names. By hand:
    #   row ("b", 1): x0 + 2·x2 (two terms),  rhs 1 + 2 = 3 (two rhs lines for one row)
    #   row ("a", 1): x1,                      rhs 0 (no rhs line)
    #   row ("a", 2): no term, rhs 4 > 0: cannot hold with "<=" 4? it can (0 <= 4): dropped, not recorded
    #   row (None, 1): no term, rhs line with a missing key: counts nothing, row dropped
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"g": ["b", "a", "b"], "h": [1, 1, 1]}))
    t = terms(x, ["g", "h"], np.array([1.0, 1.0, 2.0]))
    rhs = pd.DataFrame({"g": ["b", "a", "b", None], "h": [1, 2, 1, 1], "rhs": [1.0, 4.0, 2.0, 9.0]})
    m.add_constraints("cap", [t], "<=", rhs, keys=["g", "h"])
    c = m.constraints["cap"]
    assert c.coords.to_dict("records") == [{"g": "b", "h": 1}, {"g": "a", "h": 1}]
    assert c.upper.tolist() == [3.0, 0.0] and np.isneginf(c.lower).all()
    assert sorted(zip(c.rows.tolist(), c.cols.tolist(), c.vals.tolist())) == [(0, 0, 1.0), (0, 2, 2.0), (1, 1, 1.0)]
    assert "cap" not in m.infeasible_rows
    # the same rows as ">=": ("a", 2) needs 4 from no variable and is recorded; the row with a missing key is not
    m.add_constraints("need", [t], ">=", rhs, keys=["g", "h"])
    assert m.infeasible_rows["need"].to_dict("records") == [{"g": "a", "h": 2, "rhs": 4.0}]


def test_a_right_hand_side_table_without_lines_gives_zero_bounds():
    # an empty rhs table: every row's rhs is 0.0, a float (an empty sum must not turn the bounds into integers)
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0, 1]}))
    m.add_constraints("row", [terms(x, ["i"], 1.0)], "<=", pd.DataFrame({"i": [], "rhs": []}), keys=["i"])
    c = m.constraints["row"]
    assert c.upper.dtype == float and c.upper.tolist() == [0.0, 0.0]
    assert np.isneginf(c.lower).all()


def test_values_map_back_to_coordinates():
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"a": ["p", "q"]}), upper=np.array([3.0, 4.0]), integer=True)
    m.add_objective(terms(x, [], -1.0))
    r = solve(m, solver="cbc")
    v = m.values("x", r.x).set_index("a")["value"]
    assert v["p"] == pytest.approx(3) and v["q"] == pytest.approx(4)



def test_a_point_of_one_program_is_read_in_another_by_block_and_coordinates():
    # source: units (a, p1)=1, (a, p2)=2, (b, p1)=3; an "owned" block of one variable = 4; a block only it has.
    # target: units in another order, (c, p1) it alone has, (b, p1) missing; the owned block; no "extra".
    src = MIP()
    src.add_variables("units", pd.DataFrame({"offering": ["a", "a", "b"], "period": ["p1", "p2", "p1"]}))
    src.add_variables("owned", pd.DataFrame({"offering": ["a"]}))
    src.add_variables("extra", pd.DataFrame({"i": [0, 1]}))
    dst = MIP()
    dst.add_variables("owned", pd.DataFrame({"offering": ["z", "a"]}))
    dst.add_variables("units", pd.DataFrame({"offering": ["c", "a", "a"], "period": ["p1", "p2", "p1"]}))
    point = src.named(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 0.0]))
    # owned z, owned a, units (c, p1), (a, p2), (a, p1)
    assert dst.point_from(point).tolist() == [0.0, 4.0, 0.0, 2.0, 1.0]
    assert src.point_from(point).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
    # a block of the same name with other coordinates is not read
    other = MIP()
    other.add_variables("units", pd.DataFrame({"offering": ["a"]}))
    other.add_variables("owned", pd.DataFrame({"gpu": ["a"]}))
    assert other.point_from(point).tolist() == [0.0, 0.0]


def test_highs_returns_its_own_optimum_when_presolve_solves_a_started_model():
    # The units round of fix-and-optimize: every decision but the units fixed at a first plan, which is
    # the start. HiGHS's presolve solves such a model alone; HiGHS 1.16.0 (highspy) then reported the
    # optimum's objective but handed back the start (bench standard x0.05, 4 weeks: 884,006 for 682,354).
    # Started or not, the back end must return the restriction's optimum.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.generate import problem
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve.polish import restrict

    pr = problem(0.05, 0, family="standard", weeks=4)
    model = presolve.build(pr, build_candidates(pr))
    mip, a = model.mip, model.mip.arrays()
    first = solve(mip, solver="highs", gap=0.01, time_limit=60, target=np.inf)  # the first plan found
    assert first.status.has_plan
    units_round = restrict(mip, a, first.x, ())
    started = solve(mip, solver="highs", gap=1e-9, arrays=units_round, start=first.x)
    fresh = solve(mip, solver="highs", gap=1e-9, arrays=units_round)
    assert fresh.objective <= first.objective
    assert started.objective == pytest.approx(fresh.objective, rel=1e-9)


def covering_mip():
    """min x + y over integers 0..10 with 2x + 3y >= 13: the LP optimum is 13/3 (y = 4.33), the integer one 5."""
    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0, 1]}), upper=np.array([10.0, 10.0]), integer=True)
    x["k"] = 0
    m.add_constraints("cover", [terms(x, ["k"], np.array([2.0, 3.0]))], ">=",
                      pd.DataFrame({"k": [0], "rhs": [13.0]}), keys=["k"])
    m.add_objective(terms(x, [], 1.0))
    return m, x


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_a_cutoff_prunes_what_is_not_cheaper_and_proves_the_cutoff(solver):
    # min x + y over integers with 2x + 3y >= 13: the LP gives y = 13/3 (4.33); the integer optimum is 5
    # (x = 2, y = 3, or y = 5). A cutoff of 4.9 (a plan of that cost held elsewhere) leaves nothing cheaper
    # here: the result proves exactly the cutoff and is not "infeasible" (the model is not). A cutoff of
    # 5.5 leaves the optimum, found and proven as usual.
    from optimizer.solve.backends import Status

    m, x = covering_mip()
    assert solve(m, solver=solver).objective == pytest.approx(5.0)
    cut = solve(m, solver=solver, cutoff=4.9)
    assert cut.status == Status.CUT_OFF and not cut.status.has_plan and cut.x is None
    assert cut.bound == pytest.approx(4.9)
    kept = solve(m, solver=solver, cutoff=5.5)
    assert kept.status == Status.OPTIMAL and kept.objective == pytest.approx(5.0)
    # with a constant of 100 in the objective (CBC never sees it): the same, 100 higher
    m.add_objective(terms(x, [], 0.0), constant=100.0)
    cut = solve(m, solver=solver, cutoff=104.9)
    assert cut.status == Status.CUT_OFF and cut.bound == pytest.approx(104.9)
    kept = solve(m, solver=solver, cutoff=105.5)
    assert kept.status == Status.OPTIMAL and kept.objective == pytest.approx(105.0)


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_a_search_stopped_before_its_root_under_a_cutoff_proves_nothing(solver):
    # The same model as above (optimum 5) with a cutoff of 7, above the optimum, and a limit of a
    # nanosecond: the search stops before it has a plan or a bound. The cutoff must not come back as its
    # bound: 7 is no lower bound here (5 < 7), and the exact split read it as a proof that its leaf held
    # nothing cheaper than the plan found elsewhere (a plan 2.2x the optimum reported with a 9 % gap).
    from optimizer.solve.backends import Status

    m, x = covering_mip()
    r = solve(m, solver=solver, cutoff=7.0, time_limit=1e-9)
    if r.status.has_plan:  # a back end that finds the plan before it looks at the clock: a real plan
        assert r.objective >= 5.0 - 1e-9
    else:  # stopped by the clock, not cut off: nothing was proven about the cutoff
        assert r.status == Status.TIME_LIMIT, (r.status, r.message)
    assert r.bound is None or r.bound <= 5.0 + 1e-9


@pytest.fixture
def highs_options(monkeypatch):
    """Every (option, value) the back end sets on a HiGHS instance, in order, while the test runs."""
    import highspy

    seen = []
    real = highspy.Highs.setOptionValue

    def spy(self, name, value):
        seen.append((name, value))
        return real(self, name, value)

    monkeypatch.setattr(highspy.Highs, "setOptionValue", spy)
    return seen


def test_restarts_are_the_back_ends_choice_unless_the_caller_forbids_them(highs_options):
    # HiGHS's mip_allow_restart is left at its default unless restart=False; the exact split's leaves pass
    # False (split.LEAF_RESTARTS). The same optimum either way (the covering model: 5).
    from optimizer.solve import split
    from optimizer.solve.backends import Status

    seen = highs_options
    m, _ = covering_mip()
    assert solve(m, solver="highs").objective == pytest.approx(5.0)
    assert not [v for k, v in seen if k == "mip_allow_restart"]
    seen.clear()
    r = solve(m, solver="highs", restart=False)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(5.0)
    assert ("mip_allow_restart", False) in seen
    seen.clear()
    assert split.LEAF_RESTARTS is False
    leaf = split.solve_leaf(split.LeafTask(m.arrays(), "highs", None, 1e-6, None, None, None))
    assert leaf.objective == pytest.approx(5.0) and ("mip_allow_restart", False) in seen


def test_every_highs_search_runs_without_the_aggregator_and_probes_only_below_ten_per_cent(highs_options):
    # Every MIP search, the whole model's and a part model's alike, has HiGHS's aggregator (presolve rule 12)
    # off; its probing (rule 15) is off too where the search is asked for a gap of 10 % or more (the guide, the
    # split's first pass). An LP keeps every rule. The plan within the gap either way (the covering model,
    # min x + y, 2x + 3y >= 13, optimum 5: within 10 % means at most 5 / 0.9).
    from optimizer.solve import decompose
    from optimizer.solve.backends import Status, highspy_backend, solve_relaxation

    seen = highs_options
    assert highspy_backend.AGGREGATOR_RULE == 12
    assert highspy_backend.PROBING_GAP == 0.1 and highspy_backend.PROBING_RULE == 15
    m, _ = covering_mip()
    loose = solve(m, solver="highs", gap=0.1)
    assert [v for k, v in seen if k == "presolve_rule_off"] == [(1 << 12) | (1 << 15)]
    assert loose.status == Status.OPTIMAL and loose.objective <= 5.0 / 0.9 + 1e-9
    for tight in (0.0999, 1e-6):
        seen.clear()
        r = solve(m, solver="highs", gap=tight)
        assert [v for k, v in seen if k == "presolve_rule_off"] == [1 << 12] and r.objective == pytest.approx(5.0)
    seen.clear()
    task = decompose.PartTask("all", np.arange(m.n_vars), m.arrays(), None, 1e-6)
    assert decompose.solve_part(task)["bound"] == pytest.approx(5.0)
    assert [v for k, v in seen if k == "presolve_rule_off"] == [1 << 12]
    seen.clear()
    lp = solve_relaxation(m, m.arrays(), "highs")
    assert lp.objective == pytest.approx(13 / 3) and not [v for k, v in seen if k == "presolve_rule_off"]


def test_a_leaf_stopped_at_its_cutoff_by_the_callback_is_cut_off_not_a_failure():
    # q3 at 3x the L4 spot price, the split's leaf chat on H100 x4 fp8, no reserved unit, one new server,
    # searched below 119,149.18 (the plan of another leaf) without restarts: HiGHS stops at our callback
    # once its global bound reaches the cutoff, says "interrupted by user" and reports a dual bound of +inf
    # (every node pruned). That is a proof that nothing in the leaf is cheaper; it came back as an `error`
    # without a bound, and the split, without a time limit, reported the optimum 119,129.13 as "time
    # limit", 14 % short of proven (a sweep then solved all 100 of its points).
    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem
    from optimizer.model import presolve
    from optimizer.model.strengthen import training_cover
    from optimizer.solve.backends import Status

    pr = load_problem(ROOT / "problems" / "q3.yaml", sets=["offerings[aws-g6-spot].price_per_hour*=3"])
    model = presolve.build(pr, build_candidates(pr))
    mip = model.mip
    a = mip.arrays().with_rows(training_cover(mip, model.vars)).copy_bounds()
    cu = mip.variables["config-used"]
    chat = (cu.coords["service"] == "chat").to_numpy()
    a.col_lo[cu.ids[chat]] = a.col_hi[cu.ids[chat]] = 0.0
    x4 = cu.ids[chat & (cu.coords["config"] == "H100-SXM x4 fp8").to_numpy()]
    a.col_lo[x4] = a.col_hi[x4] = 1.0
    for name, v in (("units-reserved", 0.0), ("units-owned-new", 1.0)):
        ids = mip.variables[name].ids
        a.col_lo[ids] = a.col_hi[ids] = v
    cutoff = 119_149.18025506602
    r = solve(None, solver="highs", arrays=a, gap=0.1, cutoff=cutoff, restart=False)
    assert r.status == Status.CUT_OFF, (r.status, r.message)
    assert r.bound == pytest.approx(cutoff) and r.x is None


def test_warm_relaxations_solve_each_bound_change_as_from_scratch(monkeypatch):
    # min x + y, 2x + 3y >= 13, 0 <= x, y <= 10, worked by hand for each change of bounds, solved one after
    # the other on one HiGHS model (strong branching). The model is passed to HiGHS once for the program and
    # once more for another program; each answer is also checked against a solve from scratch.
    from optimizer.solve.backends import Status, solve_relaxation, warm_relaxations
    from optimizer.solve.backends import highspy_backend

    passed = []
    real = highspy_backend._lp
    monkeypatch.setattr(highspy_backend, "_lp", lambda hs, a: passed.append(a) or real(hs, a))
    m, x = covering_mip()
    a = m.arrays()
    lps = warm_relaxations()

    def fixed(**bounds):
        b = a.copy_bounds()
        for name, value in bounds.items():
            lo, hi = value if isinstance(value, tuple) else (value, value)
            col = {"x": 0, "y": 1, "row": None}[name]
            if col is None:
                b.row_lo[0] = lo
            else:
                b.col_lo[col], b.col_hi[col] = lo, hi
        return b

    cases = [
        (fixed(), 13 / 3),                     # y = 13/3
        (fixed(y=1.0), 6.0),                   # 2x >= 10: x = 5
        (fixed(y=0.0), 6.5),                   # x = 6.5
        (fixed(x=0.0, y=(0.0, 4.0)), None),    # 3y >= 13 with y <= 4: infeasible
        (fixed(x=2.0), 5.0),                   # 3y >= 9: y = 3
        (fixed(row=(3.0, np.inf)), 1.0),       # 2x + 3y >= 3: y = 1
    ]
    for b, expected in cases:
        warm = lps.solve(b)
        cold = solve_relaxation(m, b, "highs")
        if expected is None:
            assert warm.status == cold.status == Status.INFEASIBLE
        else:
            assert warm.status == Status.OPTIMAL and warm.objective == pytest.approx(expected, rel=1e-9)
            assert cold.objective == pytest.approx(expected, rel=1e-9)
    warm_passes = len(passed) - len(cases)  # each solve from scratch passed its model once
    assert warm_passes == 1
    m.add_objective(terms(x, [], 0.0), constant=100.0)  # another program: passed anew, 100 higher
    assert lps.solve(m.arrays()).objective == pytest.approx(100 + 13 / 3, rel=1e-9)
    assert len(passed) - len(cases) == 2


def test_first_plan_side_by_side_takes_a_restriction_that_has_one():
    # min x + y, 2x + 3y >= 13, x, y integers in 0..10 (optimum 5), in two restrictions searched side by side:
    # x, y <= 1 holds no plan (2 + 3 = 5 < 13); the model itself does. The plan comes from the second, meets
    # every row, and costs at least the optimum; with both restrictions empty there is no plan and no index.
    from optimizer.solve.backends import Status, first_plan, settle_background
    from optimizer.solve.feasibility import violations

    m, _ = covering_mip()
    a = m.arrays()
    empty = a.copy_bounds()
    empty.col_hi[:] = 1.0
    i, r = first_plan([empty, a], time_limit=30.0, gap=1e-6)
    settle_background()
    assert i == 1 and r.status.has_plan
    assert not violations(a, r.x) and r.objective == pytest.approx(float(a.c @ r.x + a.c0))
    assert r.objective >= 5.0 - 1e-9
    i, r = first_plan([empty, empty], time_limit=30.0, gap=1e-6)
    assert i is None and not r.status.has_plan and r.status == Status.INFEASIBLE


def test_a_target_of_infinity_returns_a_plan_of_the_model():
    # stopped at its first plan: whatever HiGHS found first, it meets every row and is priced by the model
    from optimizer.solve.backends import settle_background
    from optimizer.solve.feasibility import violations

    m, _ = covering_mip()
    a = m.arrays()
    r = solve(m, solver="highs", target=np.inf)
    settle_background()
    assert r.status.has_plan and not violations(a, r.x)
    assert r.objective == pytest.approx(float(a.c @ r.x + a.c0)) and r.objective >= 5.0 - 1e-9


def test_a_seed_reaches_highs_and_leaves_the_optimum_alone(highs_options):
    # HiGHS's random_seed is left at its default (0) unless a seed is asked for (bench/seeds.py); another seed
    # takes another path to the same optimum (the covering model, min x + y, 2x + 3y >= 13: 5)
    from optimizer.solve.backends import Status

    seen = highs_options
    m, _ = covering_mip()
    assert solve(m, solver="highs").objective == pytest.approx(5.0)
    assert not [v for k, v in seen if k == "random_seed"]
    for seed in (1, 7):
        seen.clear()
        r = solve(m, solver="highs", seed=seed)
        assert [v for k, v in seen if k == "random_seed"] == [seed]
        assert r.status == Status.OPTIMAL and r.objective == pytest.approx(5.0) and r.bound == pytest.approx(5.0)


def test_without_heuristics_the_search_still_finds_and_proves_the_optimum():
    # min x + y, 2x + 3y >= 13 (optimum 5, worked by hand above): the tree alone reaches and proves it
    from optimizer.solve.backends import Status

    m, _ = covering_mip()
    r = solve(m, solver="highs", heuristics=False)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(5.0) and r.bound == pytest.approx(5.0)


def test_an_lp_on_two_threads_gives_the_same_optimum_and_leaves_the_callers_scheduler_alone():
    # A dense LP HiGHS's presolve does not solve (min c.x, A x >= b, 0 <= x <= 10, fixed seed), solved with the
    # parallel dual simplex on two threads in a thread of its own: its optimum is scipy's (an independent
    # solve), HiGHS's log names the parallel solver, and a MIP solved afterwards in this thread on one thread
    # (its scheduler set here) still solves: the covering MIP's optimum 5, worked by hand above.
    from scipy.optimize import linprog

    from optimizer.model.mip import Arrays
    from optimizer.solve.backends import Status, solve_relaxation

    rng = np.random.default_rng(7)
    n, k = 12, 8
    dense = rng.uniform(0.5, 3.0, (k, n))
    c, b = rng.uniform(1.0, 5.0, n), rng.uniform(10.0, 20.0, k)
    rows, cols = np.nonzero(dense)
    a = Arrays(n_vars=n, n_rows=k, rows=rows, cols=cols, vals=dense[rows, cols], row_lo=b, row_hi=np.full(k, np.inf),
               col_lo=np.zeros(n), col_hi=np.full(n, 10.0), integer=np.zeros(n, bool), c=c, c0=0.0,
               var_names=[f"x{i}" for i in range(n)], row_names=[f"r{i}" for i in range(k)])
    expected = linprog(c, A_ub=-dense, b_ub=-b, bounds=[(0, 10)] * n, method="highs").fun
    m, _ = covering_mip()
    one = solve(m, solver="highs", threads=1)
    lp = solve_relaxation(None, a, "highs", threads=2)
    assert lp.status == Status.OPTIMAL and lp.objective == pytest.approx(expected, rel=1e-9)
    assert "parallel dual simplex" in lp.log
    assert solve_relaxation(None, a, "highs").objective == pytest.approx(expected, rel=1e-9)
    again = solve(m, solver="highs", threads=1)
    assert one.objective == again.objective == pytest.approx(5.0) and again.status == Status.OPTIMAL


def _in_a_new_thread(fn):
    """``fn()`` in a thread of its own, whose HiGHS has no scheduler yet; its exceptions re-raised here."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def test_a_thread_count_asked_after_a_run_elsewhere_and_a_default_run_is_not_refused():
    # A run to a target at 3 threads goes on in a thread of its own; a run with HiGHS's default count then
    # builds this thread's scheduler; a run at 3 threads here must reset it, not be refused by HiGHS ("the
    # scheduler has already been initialized to use N threads"). Before, the target run's reset of this
    # thread's scheduler recorded 3 here, so the last run was refused and read as a run without a plan (the
    # driver under --threads 1 then kept every fix-and-optimize round's start). The covering MIP's optimum is
    # 5, worked by hand above.
    from optimizer.solve.backends import Status, settle_background

    m, _ = covering_mip()

    def runs():
        first = solve(m, solver="highs", threads=3, target=np.inf)
        settle_background()
        default = solve(m, solver="highs")
        three = solve(m, solver="highs", threads=3)
        return first, default, three

    first, default, three = _in_a_new_thread(runs)
    assert first.status.has_plan
    assert default.status == three.status == Status.OPTIMAL and three.objective == pytest.approx(5.0)


def test_a_run_highs_refuses_is_raised_not_read_as_a_solver_outcome(monkeypatch):
    # This module's bookkeeping of the thread's scheduler switched off: a run at 2 threads builds it, and a run
    # at 1 thread is refused by HiGHS. That is a fault of the caller, raised with HiGHS's error line, never a
    # result without a plan for the driver to work around.
    from optimizer.solve.backends import highspy_backend

    monkeypatch.setattr(highspy_backend, "_scheduler_for", lambda h, threads: None)
    m, _ = covering_mip()

    def runs():
        solve(m, solver="highs", threads=2)
        solve(m, solver="highs", threads=1)

    with pytest.raises(RuntimeError, match="HiGHS refused the run: .*scheduler has already been initialized"):
        _in_a_new_thread(runs)


def test_a_run_without_a_count_in_a_thread_set_to_one_keeps_that_count():
    # A worker thread marked as running HiGHS on one thread (the split's leaves, the searches beside): a run
    # there without a count (a period model) must not build its scheduler at HiGHS's default, or the next run
    # at one thread is refused. The covering MIP's optimum, 5, worked by hand above.
    from optimizer.solve.backends import Status, one_thread

    m, _ = covering_mip()

    def runs():
        one_thread()
        default = solve(m, solver="highs")
        one = solve(m, solver="highs", threads=1)
        return default, one

    default, one = _in_a_new_thread(runs)
    assert default.status == one.status == Status.OPTIMAL and one.objective == pytest.approx(5.0)


def test_positions_gather_by_row_and_a_key_the_model_lacks_is_an_error():
    from optimizer.model.formulation import positions

    index = pd.Index(["od", "res", "own"])
    assert positions(index, ["own", "od", "own"], "offering").tolist() == [2, 0, 2]
    # pandas says -1 for a missing key, which as a position would read the last row ("own") without a word
    with pytest.raises(ValueError, match="internal error: offering not in the model: gone"):
        positions(index, ["od", "gone"], "offering")
