"""The bound of the periods solved apart (optimizer/solve/decompose.py).

Checked three ways: with integrality dropped the decomposition at the LP's
duals must give the LP optimum exactly (LP duality; an independent check of
the pieces' costs and of HiGHS's sign convention); with integrality it
never exceeds a known optimum; on a case worked by hand it rises from the
LP bound to the optimum. Serial and Dask give the same bound and plan.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.executors import Dask, Inline, make_executor
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import decompose
from optimizer.solve.backends import Status

from test_executable_plans import FLIP, assert_plan_audited
from test_known_answers import reserved_problem
from optimizer.solve import proofs


def model_of(tmp_path, data):
    # without the valid inequalities of optimizer/model/strengthen.py: with them the reservation example's LP
    # is already its optimum (the unit floor asks p1 for 3 whole units), and the LP numbers worked by hand
    # below are those of the model as built
    pr = load_problem(write_problem(tmp_path, data))
    return presolve.build(pr, build_candidates(pr), cuts=())


def relaxed_bound(model, duals):
    a = model.mip.arrays()
    a = dataclasses.replace(a, integer=np.zeros_like(a.integer))
    return decompose.start(model, duals, Inline(), arrays=a).collect().bound


def test_the_reservation_example_rises_from_the_lp_bound_to_the_optimum(tmp_path):
    # reserved_problem: p1 and p2 of 100 h; demand 10 and 3 rps, a replica is 2 GPUs serving 1 rps; an on-demand
    # 8-GPU unit costs 80 $/h (1,000 per GPU and period), a 12-month reserved unit 50 $/h over both periods
    # (10,000 per unit, 1,250 per GPU for both). Optimum 26,000 (test_known_answers).
    # LP: reserve r GPUs and rent the rest: 1,250 r + 1,000 (20 − r) + 1,000 (6 − r)⁺, least at r = 6:
    # 7,500 + 14,000 = 21,500.
    # Its duals: the reserved capacity rows price a GPU at 1,000 in p1 (on demand is marginal there) and
    # 1,250 − 1,000 = 250 in p2 (the reserved unit's cost, 8 GPUs × (1,000 + 250) = 10,000, is fully priced).
    # Periods apart, a reserved unit costs 8,000 in p1 and 2,000 in p2: p1 needs 20 GPUs = 3 whole units at
    # 8,000 whichever kind = 24,000; p2 needs 6 GPUs = 1 reserved unit at 2,000; the master pays
    # 10,000 − 8,000 − 2,000 = 0 for it. Bound 24,000 + 2,000 = 26,000: the optimum.
    model = model_of(tmp_path, reserved_problem())
    lp, duals = decompose.lp_duals(model)
    assert lp == pytest.approx(21_500)
    assert relaxed_bound(model, duals) == pytest.approx(21_500)
    res = decompose.lagrangian_bound(model, duals)
    assert res.complete
    assert res.bound == pytest.approx(26_000, rel=1e-6)
    assert res.parts.set_index("part")["bound"].to_dict() == pytest.approx({"p1": 24_000, "p2": 2_000})
    assert res.master == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("name,data,optimum", [("reserved", reserved_problem(), 26_000), ("flip", FLIP, 1_100)])
def test_the_bound_is_the_lp_without_integrality_and_never_above_the_optimum(tmp_path, name, data, optimum):
    # FLIP has stability rows across its two periods: they are priced at their LP duals, not kept
    model = model_of(tmp_path, copy.deepcopy(data))
    lp, duals = decompose.lp_duals(model)
    assert relaxed_bound(model, duals) == pytest.approx(lp, rel=1e-9)
    res = decompose.lagrangian_bound(model, duals)
    assert lp - 1e-6 <= res.bound <= optimum * (1 + 1e-6)


def test_linking_rows_and_global_columns_are_found(tmp_path):
    # FLIP: two periods; the stability rows sum a configuration over both periods (linking), one
    # configuration per request class (global only), and the replicas and units are per period
    model = model_of(tmp_path, copy.deepcopy(FLIP))
    split = decompose.split_by_period(model)
    a = split.arrays
    names = lambda rows: {a.row_names[r].split("#")[0] for r in rows}  # noqa: E731
    assert names(split.linking_rows) == {"stability-config-used"}
    assert names(split.master_rows) == {"stability-configurations"}
    assert {a.var_names[c].split("#")[0] for c in split.global_columns} == {"config-used"}
    assert len(split.local_rows) == 2 and all(len(r) for r in split.local_rows)


def test_a_period_model_not_done_in_time_counts_its_lp_bound(tmp_path):
    class Never:
        """An executor whose futures never finish."""

        workers = 1

        def submit(self, fn, arg):
            import concurrent.futures as cf

            return cf.Future()

    from optimizer.solve.driver import relaxation

    model = model_of(tmp_path, reserved_problem())
    lp, duals = decompose.lp_duals(model)
    res = decompose.start(model, duals, Never()).collect(timeout=0.0)
    # every period at its LP price: the LP bound again (21,500), never more
    assert list(res.parts["status"]) == ["not finished", "not finished"]
    assert not res.complete
    assert res.bound == pytest.approx(21_500)
    # given the LP's optimum, each period counts its part of it, with no solve: p1 pays its 14 on-demand GPUs
    # (14,000) and its 6 reserved GPUs at 1,000 (6,000), p2 its 6 reserved GPUs at 250 (1,500)
    res = decompose.start(model, duals, Never(), lp_x=relaxation(model).x).collect(timeout=0.0)
    assert res.parts.set_index("part")["bound"].to_dict() == pytest.approx({"p1": 20_000, "p2": 1_500})
    assert res.bound == pytest.approx(21_500)



def test_a_weak_bound_of_a_period_model_gives_way_to_its_lp_part(tmp_path):
    class Weak:
        """An executor whose period models end at once with a trivial bound of their own (stopped before the
        root LP, as HiGHS may be on its time limit)."""

        workers = 1

        def submit(self, fn, task):
            import concurrent.futures as cf

            f = cf.Future()
            f.set_result({"part": task.part, "bound": -1e6, "bound_from": "mip", "status": "time-limit",
                          "objective": None, "seconds": 0.0})
            return f

    from optimizer.solve.driver import relaxation

    model = model_of(tmp_path, reserved_problem())
    lp, duals = decompose.lp_duals(model)
    # without the LP's optimum the weak bounds are all there is: constant + master + 2 × (-1e6), far below the LP
    assert decompose.start(model, duals, Weak()).collect().bound < -1e6
    # with it each period counts its part of the LP optimum (p1 20,000, p2 1,500: the test above), the stronger
    res = decompose.start(model, duals, Weak(), lp_x=relaxation(model).x).collect()
    assert res.parts.set_index("part")["bound"].to_dict() == pytest.approx({"p1": 20_000, "p2": 1_500})
    assert list(res.parts["bound_from"]) == ["lp", "lp"]
    assert res.bound == pytest.approx(21_500)

def test_models_done_are_read_when_no_time_is_left(tmp_path):
    # a Dask future asked for its result with a timeout of 0 raises TimeoutError even when it is done; the
    # collect after a search that used all of its time must still read every model that finished
    import concurrent.futures as cf

    class DoneButImpatient(cf.Future):
        def result(self, timeout=None):
            if timeout is not None:
                raise cf.TimeoutError
            return super().result()

    class Impatient:
        workers = 1

        def submit(self, fn, task):
            f = DoneButImpatient()
            f.set_result(fn(task))
            return f

    model = model_of(tmp_path, reserved_problem())
    _, duals = decompose.lp_duals(model)
    res = decompose.start(model, duals, Impatient()).collect(timeout=0.0)
    assert set(res.parts["status"]) == {"optimal"} and res.complete
    assert res.bound == pytest.approx(26_000, rel=1e-6)  # the periods' MIPs, worked by hand in the first test


def test_dask_and_serial_give_the_same_bound_and_plan(tmp_path):
    model = model_of(tmp_path, reserved_problem())
    _, duals = decompose.lp_duals(model)
    serial = decompose.lagrangian_bound(model, duals, Inline())
    ex = Dask(None, 2)
    try:
        assert ex.workers == 2
        on_dask = decompose.lagrangian_bound(model, duals, ex)
    finally:
        ex.close()
    assert on_dask.bound == serial.bound
    assert list(on_dask.parts["bound"]) == list(serial.parts["bound"])


def test_solve_reports_the_periods_apart_bound_through_the_cli(tmp_path):
    from click.testing import CliRunner

    from optimizer.cli import main

    path = write_problem(tmp_path, reserved_problem())
    runner = CliRunner()
    base = runner.invoke(main, ["solve", str(path), "--format", "json"])
    apart = runner.invoke(main, ["solve", str(path), "--format", "json", "--executor", "dask", "--workers", "2"])
    assert base.exit_code == 0 and apart.exit_code == 0, apart.output
    b, d = json.loads(base.stdout), json.loads(apart.stdout)
    assert b["decomposition_bound"] is None
    assert d["decomposition_bound"] == pytest.approx(26_000, rel=1e-6)
    assert d["audit"] == [] and d["objective"] == pytest.approx(b["objective"]) == pytest.approx(26_000)
    assert d["commitments"] == b["commitments"] and d["inference"] == b["inference"]


@pytest.mark.parametrize("command", [["solve"], ["rentbuy"],
                                     ["sweep", "--vary", "offerings[res].price_per_hour=40:50:2"]])
def test_scheduler_without_dask_is_a_usage_error(tmp_path, command):
    # every command with --workers/--executor/--scheduler refuses it before any solve
    from click.testing import CliRunner

    from optimizer.cli import main

    path = write_problem(tmp_path, reserved_problem())
    r = CliRunner().invoke(main, [command[0], str(path), *command[1:], "--scheduler", "tcp://127.0.0.1:1"])
    assert r.exit_code == 2 and "--scheduler needs --executor dask" in r.output


def test_an_unreachable_scheduler_is_an_input_error(monkeypatch):
    from optimizer import executors
    from optimizer.errors import InputError

    monkeypatch.setattr(executors, "CONNECT_TIMEOUT", "2s")  # nothing listens there: no need to wait 15 s
    with pytest.raises(InputError) as e:
        make_executor("dask", 1, "tcp://127.0.0.1:9")
    assert e.value.field == "--scheduler"


def test_driver_raises_its_bound_with_the_periods_apart(tmp_path):
    # a model the driver proves anyway: the periods' bound is recorded and never above the plan
    from optimizer.pipeline import run

    plan = run(load_problem(write_problem(tmp_path, reserved_problem())), executor=Inline())
    r = plan.result
    assert r.status == Status.OPTIMAL and plan.audit == []
    assert r.decomposition_bound == pytest.approx(26_000, rel=1e-6)
    assert r.decomposition_bound <= r.objective * (1 + 1e-6)


def test_the_periods_bound_takes_the_place_of_the_bound_named_before():
    # a heuristic plan of 100 whose message names the LP's 50 as its bound; the periods apart prove 80:
    # the bound is 80, the gap (100 - 80) / 100 = 20 %, and the message names one source, the periods
    import pandas as pd

    from optimizer.solve.result import SolveResult

    r = SolveResult(Status.FEASIBLE, "highs", objective=100.0, bound=50.0, gap=0.5,
                    message="time limit: a heuristic plan" + proofs.BOUND_NAMED.format("the LP's"))
    periods = pd.DataFrame({"part": ["p1", "p2"], "bound": [30.0, 50.0], "bound_from": ["mip", "lp"],
                            "status": ["optimal", "not finished"], "objective": [None, None], "seconds": [0.0, 0.0]})
    dec = decompose.DecompositionBound(80.0, periods, 0.0, 0.0, 2, 0.0)
    proofs.apply_decomposition(r, dec, 1e-6)
    assert r.bound == pytest.approx(80.0) and r.gap == pytest.approx(0.2)
    assert r.message == ("time limit: a heuristic plan; the bound is the periods solved apart (2 period models on "
                         "2 workers, 1 of them at their LP bound (not proven above it in time))")
    assert r.status == Status.FEASIBLE
    # proving 100, the plan is optimal, and its message starts so
    r = SolveResult(Status.FEASIBLE, "highs", objective=100.0, bound=50.0, gap=0.5,
                    message="time limit: a heuristic plan" + proofs.BOUND_NAMED.format("the LP's"))
    proofs.apply_decomposition(r, decompose.DecompositionBound(100.0, periods, 0.0, 0.0, 2, 0.0), 1e-6)
    assert r.status == Status.OPTIMAL and r.gap == pytest.approx(0.0)
    assert r.message.startswith("optimal: a heuristic plan; the bound is the periods solved apart")


@pytest.mark.parametrize("threads", [None, 1])
def test_the_periods_are_solved_apart_beside_the_heuristics_of_a_model_whose_lp_took_long(tmp_path, monkeypatch,
                                                                                         threads):
    # The reservation example with a second, dearer configuration (1 GPU for 0.3 rps: 3.3 GPUs an rps against
    # 2), so it has a configuration to choose and takes the stable path; its LP and optimum stay those worked
    # by hand above (21,500 and 26,000). Its LP made to look slow (10 s of a 30-s limit): the heuristics make
    # the plan (from the configurations the descent chooses), and on the CPU they leave idle the periods are
    # solved apart, whose bound is reported: above the LP (each period's units whole) and never above the
    # optimum. (The configuration's choice is a column without a period, priced in each period at the LP's
    # duals, so the bound is not the 26,000 above.)
    # Under --threads 1 (one core asked for) nothing runs beside, and the plan is found and proven all the
    # same (before, a HiGHS scheduler left at the wrong count refused that path's searches).
    from optimizer.solve import driver

    data = reserved_problem()
    data["inference"][0]["profiles"].append({"gpu": "H100-SXM", "gpus": 1, "rps": 0.3})
    model = model_of(tmp_path, data)
    assert "config-used" in model.mip.variables
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = driver.relaxation

    def slow_lp(*args, **kw):
        lp = real(*args, **kw)
        assert lp.objective == pytest.approx(21_500)
        return dataclasses.replace(lp, solve_seconds=10.0)

    patch_driver(monkeypatch, "relaxation", slow_lp)
    r = driver.solve(model, time_limit=30.0, gap=1e-9, threads=threads)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(26_000)
    assert "configurations fixed to those the descent over the configurations uses most" in r.message
    assert r.bound == pytest.approx(26_000, rel=1e-6)
    if threads == 1:
        assert r.decomposition_bound is None
    else:
        assert 21_500 + 1.0 < r.decomposition_bound <= 26_000 * (1 + 1e-9)


def test_a_period_model_started_after_its_deadline_counts_its_share_of_the_callers_lp(tmp_path, monkeypatch):
    # A period model handed out with the caller's deadline already past neither searches nor solves its own LP
    # (before, its LP ran to the end past the deadline, and the caller waited for it: bench training-heavy x0.25
    # at 10 s ended after 19 s). It ends without a bound of its own, and the caller counts its part of the LP
    # optimum: p1 20,000 and p2 1,500, the LP's 21,500 (worked by hand in the tests above).
    import time

    from optimizer.solve.backends import highspy_backend
    from optimizer.solve.driver import relaxation

    model = model_of(tmp_path, reserved_problem())
    _, duals = decompose.lp_duals(model)
    lp_x = relaxation(model).x
    split = decompose.split_by_period(model)
    tasks, _, _ = decompose.part_tasks(split, decompose.multipliers(split, duals), None, 1e-9)
    searched = [decompose.solve_part(task) for task in tasks]
    calls = []
    real = highspy_backend.solve_highspy
    monkeypatch.setattr(highspy_backend, "solve_highspy", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    late = [decompose.solve_part(dataclasses.replace(task, deadline=time.time() - 1.0)) for task in tasks]
    assert calls == []
    assert [r["bound"] for r in late] == [None, None] and {r["bound_from"] for r in searched} == {"mip"}
    res = decompose.start(model, duals, Inline(), lp_x=lp_x, deadline=time.time() - 1.0).collect()
    # the one HiGHS run is the master's (the global columns, bounds only, no rows), solved by the caller
    assert len(calls) == 1 and calls[0]["arrays"].n_rows == 0
    assert res.parts.set_index("part")["bound"].to_dict() == pytest.approx({"p1": 20_000, "p2": 1_500})
    assert list(res.parts["bound_from"]) == ["lp", "lp"] and res.bound == pytest.approx(21_500)
    # never above what the same models prove when searched
    assert all(r["bound"] <= s["bound"] + 1e-6 for r, s in zip(res.parts.to_dict("records"), searched))
