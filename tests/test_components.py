"""The bound of the components solved apart (optimizer/solve/decompose.py, ``by="component"``).

Each inference service and each training job is a part; the units they
share (rented, reserved, owned, lanes) belong to none. Checked as the
period cut is (tests/test_decompose.py): with integrality dropped the cut at
the LP's duals gives the LP optimum exactly (LP duality, an independent check
of the pieces' costs); with integrality it never exceeds the optimum of the
model solved whole; on a case worked by hand it rises to the optimum where
the period cut does not. The prices read off the monthly model
(optimizer/solve/coarse.py) give a bound too, and the driver reports the
cut's bound beside its heuristics.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.executors import Dask, Inline
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import coarse, decompose
from optimizer.solve.backends import Status, solve as backend_solve

from test_executable_plans import FLIP
from test_known_answers import reserved_problem
from optimizer.solve import fixed, relaxations


def generated(seed: int, weeks: int = 6):
    """A small generated problem: several services and training jobs sharing offerings, reservations."""
    from bench.generate import problem

    pr = problem(0.05, seed, weeks=weeks, regions=1)
    return presolve.build(pr, build_candidates(pr))


def relaxed(model, duals) -> float:
    a = model.mip.arrays()
    a = dataclasses.replace(a, integer=np.zeros_like(a.integer))
    return decompose.start(model, duals, Inline(), arrays=a, by="component").collect().bound


def test_each_service_and_job_is_a_part_and_the_shared_units_are_global():
    model = generated(0)
    mip = model.mip
    split = decompose.split_by_component(model)
    pr = model.problem
    want = {f"service {s.name}" for s in pr.services} | {f"job {j.name}" for j in pr.jobs}
    assert set(split.parts) == want and {n.split(" ")[0] for n in want} == {"service", "job"}
    # every column of a block with a service or job coordinate is that component's; the others are global
    for name, block in mip.variables.items():
        if not block.size:
            continue
        key = "service" if "service" in block.coords.columns else "job" if "job" in block.coords.columns else None
        got = split.column_part[block.ids]
        if key is None:
            assert (got == -1).all(), name
        else:
            want = [split.parts.index(f"{key} {v}") for v in block.coords[key].astype(str)]
            assert list(got) == want, name
    assert set(np.flatnonzero(split.column_part < 0)) == set(split.global_columns)
    # a local row holds columns of its own part (and global ones) only; a linking row of two parts or more
    A = split.A.tocsr()
    for k, rows in enumerate(split.local_rows):
        for r in rows[:50]:
            owners = set(split.column_part[A.indices[A.indptr[r]:A.indptr[r + 1]]]) - {-1}
            assert owners == {k}
    for r in split.linking_rows[:200]:
        assert len(set(split.column_part[A.indices[A.indptr[r]:A.indptr[r + 1]]]) - {-1}) >= 2
    families = {mip.arrays().row_names[r].split("#")[0] for r in split.linking_rows}
    assert families and families <= {"capacity", "capacity-quota", "training-fit", "training-fit-quota", "budget",
                                      "training-lanes-hours", "training-lanes-fit", "training-lanes-quota"}


@pytest.mark.parametrize("seed", [0, 4])
def test_without_integrality_the_cut_at_the_lp_duals_is_the_lp(seed):
    model = generated(seed)
    lp, duals = decompose.lp_duals(model)
    assert len(decompose.split_by_component(model).linking_rows)  # the services and jobs do share units
    assert relaxed(model, duals) == pytest.approx(lp, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_the_bound_lies_between_the_lp_and_the_optimum(seed, optimum):
    model = generated(seed)
    lp, duals = decompose.lp_duals(model)
    res = decompose.lagrangian_bound(model, duals, by="component")
    assert res.kind == "component" and res.complete
    assert lp - 1e-6 * abs(lp) <= res.bound <= optimum(model) * (1 + 1e-7)


def test_one_service_rises_to_the_optimum_where_the_periods_do_not(tmp_path):
    # FLIP (tests/test_executable_plans.py): chat needs 1 rps in p1 and 10 in p2, 100 h each, on one
    # configuration over the horizon: L4 (1 GPU at 1 $/h, 1 rps) costs 100 + 1,000 = 1,100 in both periods,
    # H100 (an 8-GPU unit at 6 $/h, 10 rps) 600 + 600 = 1,200; L4 then H100 (700) breaks the rule.
    # One service and no job: no row links two components, so the component model is the whole model (its
    # units copied in at the prices its rows give them, bought back by the master at cost minus that) and
    # the bound is the optimum, 1,100. The period cut prices the one-configuration rows between the periods
    # instead of keeping them, and each period takes its cheapest configuration again: below 1,100.
    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr), cuts=())
    lp, duals = decompose.lp_duals(model)
    split = decompose.split_by_component(model)
    assert split.parts == ["service chat"] and len(split.linking_rows) == 0
    res = decompose.lagrangian_bound(model, duals, by="component")
    assert res.bound == pytest.approx(1_100)
    assert res.master == pytest.approx(0.0, abs=1e-9)  # every unit's LP reduced cost is ≥ 0: none bought back
    periods = decompose.lagrangian_bound(model, duals, by="period")
    assert lp - 1e-6 <= periods.bound < 1_100 - 1.0


def test_the_reservation_example_is_one_component_at_its_optimum(tmp_path):
    # reserved_problem (tests/test_decompose.py works its LP, 21,500, and optimum, 26,000, by hand): one
    # service, so again the component model is the whole model
    pr = load_problem(write_problem(tmp_path, reserved_problem()))
    model = presolve.build(pr, build_candidates(pr), cuts=())
    lp, duals = decompose.lp_duals(model)
    assert lp == pytest.approx(21_500)
    assert relaxed(model, duals) == pytest.approx(21_500)
    assert decompose.lagrangian_bound(model, duals, by="component").bound == pytest.approx(26_000)


@pytest.mark.parametrize("seed", [0, 4])
def test_prices_read_off_the_monthly_model_bound_the_weekly_optimum(seed, optimum):
    # any multipliers of the right sign prove: those read off the monthly LP's duals (coarse.row_duals)
    model = generated(seed)
    monthly = coarse.solve(model, "highs", None, None)
    priced = coarse.priced_components(model, monthly)
    assert priced is not None and priced.kind == "component" and priced.lp_values is None
    y = coarse.row_duals(model, monthly)
    assert y.shape == (model.mip.n_rows,) and np.count_nonzero(y)
    bound = decompose.start(model, None, Inline(), priced=priced).collect().bound
    assert bound <= optimum(model) * (1 + 1e-7)
    # and a part not finished in time solves its LP when the bound is collected (no LP optima were given)
    class Never:
        workers = 1

        def submit(self, fn, arg):
            import concurrent.futures as cf

            return cf.Future()

    late = decompose.start(model, None, Never(), priced=priced).collect(timeout=0.0)
    assert set(late.parts["bound_from"]) == {"lp"} and late.bound <= bound + 1e-6 * abs(bound)


def test_a_model_gets_its_share_of_what_is_left_to_its_worker(monkeypatch):
    # 9 models queued after this one on its worker, 10 s left: it gets 90 % of a tenth, 0.9 s; the last one
    # (none after it) gets all that is left
    from optimizer.solve.backends import highspy_backend

    seen = []

    def fake(model, time_limit=None, gap=None, arrays=None, **kw):
        seen.append(time_limit)
        return decompose.SolveResult(Status.OPTIMAL, "highs", objective=0.0, bound=0.0)

    model = generated(0)
    split = decompose.split_by_component(model)
    task = decompose.part_tasks(split, decompose.multipliers(split, np.zeros(model.mip.n_rows)), None, 1e-6)[0][0]
    monkeypatch.setattr(highspy_backend, "solve_highspy", fake)
    monkeypatch.setattr(decompose.time, "time", lambda: 1_000.0)  # the clock stands still: no speed dependence
    decompose.solve_part(dataclasses.replace(task, deadline=1_010.0, later=9))
    decompose.solve_part(dataclasses.replace(task, deadline=1_010.0, later=0))
    assert seen == [pytest.approx(0.9), pytest.approx(10.0)]


def test_the_cuts_share_one_queue_and_the_components_go_first(optimum):
    class Record:
        workers = 1

        def __init__(self):
            self.tasks = []

        def submit(self, fn, task):
            import concurrent.futures as cf

            self.tasks.append(task)
            f = cf.Future()
            f.set_result(fn(task))
            return f

    model = generated(0)
    _, duals = decompose.lp_duals(model)
    ex = Record()
    pendings = decompose.start_cuts(model, duals, ex, 30.0, 1e-6)
    assert [p.kind for p in pendings] == ["component", "period"]
    n = len(ex.tasks)
    assert [t.later for t in ex.tasks] == list(range(n - 1, -1, -1))  # one queue: each counts all behind it
    assert len({t.deadline for t in ex.tasks}) == 1
    bounds = [p.collect().bound for p in pendings]
    assert all(b <= optimum(model) * (1 + 1e-7) for b in bounds)


def test_dask_and_serial_give_the_same_component_bound():
    model = generated(4)
    _, duals = decompose.lp_duals(model)
    serial = decompose.lagrangian_bound(model, duals, Inline(), by="component")
    ex = Dask(None, 2)
    try:
        on_dask = decompose.lagrangian_bound(model, duals, ex, by="component")
    finally:
        ex.close()
    assert on_dask.bound == pytest.approx(serial.bound, rel=1e-9)
    assert list(on_dask.parts["part"]) == list(serial.parts["part"])


def test_a_stopped_inline_executor_starts_nothing_and_each_part_counts_its_lp_share():
    # the event set before the cuts are handed out: no part model runs, each counts its part of the LP (its LP
    # optimum at the LP's duals, by complementary slackness), so the bound is at least the LP's
    import threading

    model = generated(0)
    a = model.mip.arrays()
    from optimizer.solve.backends.highspy_backend import solve_highspy

    lp = solve_highspy(None, gap=1e-9, arrays=a.relaxed())
    stop = threading.Event()
    stop.set()
    ran = []
    real = decompose.solve_part
    try:
        decompose.solve_part = lambda task: ran.append(task) or real(task)
        pendings = decompose.start_cuts(model, lp.duals, Inline(stop), 30.0, 1e-6, lp_x=lp.x)
    finally:
        decompose.solve_part = real
    assert ran == []
    for p in pendings:
        res = p.collect(0.0)
        assert set(res.parts["status"]) == {"not finished"} and set(res.parts["bound_from"]) == {"lp"}
        assert res.bound >= lp.objective - 1e-6 * abs(lp.objective)


def test_the_cuts_follow_the_floors_search_beside_and_prove_what_the_restrictions_cannot(tmp_path, monkeypatch):
    # FLIP on the fixed-configuration path with a search (tests/test_executable_plans.py): the restriction (B
    # in both periods) gives 1,200 and proves it for itself only; the caller's bound is 700 (the plan without
    # limits). On the second CPU the stable model with its floors is searched first, then the configuration
    # relaxation; here both end at once with nothing (stood in for), so time is left, and the CPU goes on with
    # the cuts at the LP's duals. FLIP is one
    # service, so its component model is the whole model and proves the optimum, 1,100 (A in both periods,
    # worked by hand in test_one_service_rises_to_the_optimum_where_the_periods_do_not). The whole stable
    # model's search is made to end with nothing after the cuts are done (a large model's, on its limit):
    # the plan is the restriction's 1,200, its bound 1,100, gap 100 / 1,200, and the message names the cut.
    # (Built without the valid inequalities, as in that test: with them the LP's duals put the units' cost on
    # the unit floors, rows of the units alone that the master keeps, and the component model sees its units
    # free: 700.)
    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult
    from test_executable_plans import assert_plan_audited, spy_on_solves

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr), cuts=())
    a = model.mip.arrays()
    free = a.copy_bounds()
    ids = model.mip.variables["config-used"].ids
    free.col_lo[ids] = free.col_hi[ids] = 1.0
    free.row_hi[model.mip.constraints["stability-configurations"].ids] = len(ids)
    unlimited = backend_solve(model.mip, "highs", gap=1e-9, arrays=free)
    assert unlimited.objective == pytest.approx(700)  # A in p1, B in p2
    lp = driver.relaxation(model, "highs")
    assert lp.objective < 1_100 - 1.0
    patch_driver(monkeypatch, "cpus", lambda: 2)
    cuts_done = __import__("threading").Event()
    real_cuts = driver.decompose.start_cuts

    def cuts(*args, **kw):
        out = real_cuts(*args, **kw)
        cuts_done.set()
        return out

    monkeypatch.setattr(driver.decompose, "start_cuts", cuts)
    real = driver.backend_solve
    seen = {"floors": 0, "relaxation": 0, "whole": 0}

    def spy(*args, **kw):
        if len(kw["arrays"].row_lo) > len(a.row_lo):  # the floors' rows: the searches beside, stopped with nothing
            # the configuration relaxation keeps only the configurations whole
            only_configurations = kw["arrays"].integer.sum() == len(ids)
            seen["relaxation" if only_configurations else "floors"] += 1
            return SolveResult(Status.TIME_LIMIT, "highs", message="stopped on its limit")
        if kw["arrays"] is a:  # the whole stable model's search, once the cuts beside are done
            seen["whole"] += 1
            assert cuts_done.wait(60.0)
            return SolveResult(Status.TIME_LIMIT, "highs", message="stopped on its limit")
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, 700.0, 0.0, search=True,
                                     lp_x=lp.x, duals=lp.duals)
    assert_plan_audited(model, r)
    assert seen == {"floors": 1, "relaxation": 1, "whole": 1}
    assert r.status == Status.FEASIBLE and r.objective == pytest.approx(1_200)
    assert r.bound == pytest.approx(1_100, rel=1e-6) and r.gap == pytest.approx(100 / 1_200, rel=1e-6)
    assert r.decomposition_bound == pytest.approx(1_100, rel=1e-6)
    assert "the bound is the components solved apart (1 component model on the CPU beside the search)" in r.message
    assert "(the bound is the plan without stability limits" not in r.message


def test_the_guide_is_skipped_where_the_lp_leaves_it_too_little_time(tmp_path, monkeypatch):
    # With 100 s left after the LP: the model without limits guides the split only while the LP took at most 1 %
    # of the limit (1 s of 101 s); past 5 % (5.3 s of 106 s) no stage runs for any model; between, a model no
    # split can take keeps its own path (the configuration relaxation). Without a limit, always the stages; the
    # monthly model's LP standing in: never.
    from optimizer.solve import driver

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr))
    lp = relaxations.Relaxation.LP
    assert not driver.heuristics_only(model, 100.0, 1.0, lp)          # 1.0 <= 0.01 × 101
    assert driver.heuristics_only(model, 100.0, 1.02, lp)             # 1.02 > 0.01 × 101.02
    assert not driver.heuristics_only(model, None, 50.0, lp)
    assert driver.heuristics_only(model, 100.0, 0.0, relaxations.Relaxation.MONTHLY)
    patch_driver(monkeypatch, "too_wide_to_split", lambda m: True)
    assert not driver.heuristics_only(model, 100.0, 5.0, lp)          # 5.0 <= 0.05 × 105: its own path
    assert driver.heuristics_only(model, 100.0, 5.3, lp)              # 5.3 > 0.05 × 105.3


def test_a_model_whose_lp_leaves_the_guide_too_little_time_takes_the_heuristics_path(tmp_path, monkeypatch):
    # The reservation example with a second configuration (tests/test_decompose.py: LP 21,500, optimum 26,000),
    # its LP made to look as if it took 1 s of a 30-s limit (3 %: below the 5 % past which no stage runs, above
    # the 1 % the model without limits needs): the heuristics make the plan, the cuts run beside, and the
    # optimum is found and proven all the same.
    from optimizer.solve import driver
    from test_executable_plans import assert_plan_audited

    data = reserved_problem()
    data["inference"][0]["profiles"].append({"gpu": "H100-SXM", "gpus": 1, "rps": 0.3})
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr), cuts=())
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = driver.relaxation
    patch_driver(monkeypatch, "relaxation", lambda *a, **k: dataclasses.replace(real(*a, **k), solve_seconds=1.0))
    r = driver.solve(model, time_limit=30.0, gap=1e-9)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(26_000)
    assert "configurations fixed to those the descent over the configurations uses most" in r.message
    assert 21_500 + 1.0 < r.decomposition_bound <= 26_000 * (1 + 1e-9)
