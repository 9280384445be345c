"""Fix-and-optimize by period (optimizer/solve/period_polish.py), on a plan whose cost is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.executors import Inline, Processes
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import backends, driver
from optimizer.solve.feasibility import objective, violations
from optimizer.solve.period_polish import polish_periods, recommit
from optimizer.solve.result import SolveResult, Status

from test_executable_plans import assert_plan_audited
from test_known_answers import reserved_problem
from optimizer.solve import fixed


def audited(model, a, x) -> None:
    """The plan ``x`` read as a plan of ``model`` and audited, as the pipeline audits every plan it returns."""
    assert_plan_audited(model, SolveResult(Status.FEASIBLE, "highs", objective=objective(a, x), x=x))


def padded_plan(tmp_path):
    """reserved_problem's optimum (26,000: 1 reserved unit, 2 on-demand units in p1) with one more on-demand
    unit rented in each period: 26,000 + 2 × 80 $/h × 100 h = 42,000."""
    pr = load_problem(write_problem(tmp_path, reserved_problem()))
    model = presolve.build(pr, build_candidates(pr))
    best = driver.solve(model)
    a = model.mip.arrays()
    x = best.x.copy()
    y = model.mip.variables["units-running"]
    x[y.ids] += 1.0
    assert objective(a, x) == pytest.approx(42_000) and not violations(a, x)
    return model, a, x


@pytest.mark.parametrize("side_by_side", [False, True], ids=["one after the other", "side by side"])
def test_each_period_drops_the_unit_it_does_not_need(tmp_path, side_by_side):
    # With the reservation held at 1 unit, p1 needs 6 replicas beyond the 4 it holds = 12 GPUs = 2 on-demand
    # units (16,000) and p2's 3 replicas fit the reserved unit (0): back to 10,000 + 16,000 = 26,000.
    model, a, x = padded_plan(tmp_path)
    ex = Processes(2) if side_by_side else Inline()
    try:
        out, rec = polish_periods(model, a, x, 60.0, ex)
    finally:
        ex.close()
    assert objective(a, out) == pytest.approx(26_000)
    audited(model, a, out)
    assert rec == {**rec, "periods": 2, "improved": 2, "before": pytest.approx(42_000), "after": pytest.approx(26_000)}
    assert not violations(a, out)
    # the reservation (a column without a period) is never changed by a period round
    u = model.mip.variables["units-reserved"].ids
    assert np.array_equal(out[u], x[u])


def over_committed(tmp_path, data=None, cuts=None):
    """reserved_problem with 3 reserved units: every replica on the reservation (p1 10 of its 12 places, p2 3),
    nothing rented: 3 × 50 $/h × 200 h = 30,000."""
    pr = load_problem(write_problem(tmp_path, data or reserved_problem()))
    extra = {} if cuts is None else {"cuts": cuts}
    model = presolve.build(pr, build_candidates(pr), **extra)
    a = model.mip.arrays()
    u = model.mip.variables["units-reserved"].ids
    three = a.copy_bounds()
    three.col_lo[u] = three.col_hi[u] = 3.0
    x = backends.solve(model.mip, arrays=three).x
    assert objective(a, x) == pytest.approx(30_000) and not violations(a, x)
    audited(model, a, x)
    return model, a, x


def test_recommit_fits_every_period_to_the_new_commitments(tmp_path):
    # One reserved unit holds 4 replicas: p1 rents 2 on-demand units for its other 6 (2 × 80 × 100 = 16,000),
    # p2's 3 fit the reservation: 10,000 + 16,000 = 26,000, the optimum (test_reserved_versus_on_demand).
    # Neither round alone gets there from 30,000: with the replicas fixed on the reservation the units round
    # must keep 3 units, and a period round cannot change the reservation.
    model, a, x = over_committed(tmp_path)
    out, rec = recommit(model, a, x, {"units-reserved": np.array([1.0])}, 60.0)
    assert rec == {**rec, "periods": 2, "before": pytest.approx(30_000), "after": pytest.approx(26_000)}
    assert objective(a, out) == pytest.approx(26_000) and not violations(a, out)
    audited(model, a, out)
    # with no reservation: 3 on-demand units in p1 and 1 in p2, 4 × 8,000 = 32,000 (dearer: the caller decides)
    out, rec = recommit(model, a, x, {"units-reserved": np.array([0.0])}, 60.0)
    assert rec["after"] == pytest.approx(32_000)
    audited(model, a, out)


def test_a_recommit_solves_its_periods_to_its_gap_and_a_pass_to_the_period_gap(tmp_path, monkeypatch):
    # the re-commit only fits the plan to new counts (the passes after each cycle of rounds solve every period
    # again to PERIOD_GAP), so its period MIPs stop at RECOMMIT_GAP; a pass keeps the tight gap
    from optimizer.solve import period_polish
    from optimizer.solve.backends import highspy_backend

    gaps = []
    real = highspy_backend.solve_highspy

    def recording(*args, **kw):
        gaps.append(kw["gap"])
        return real(*args, **kw)

    monkeypatch.setattr(highspy_backend, "solve_highspy", recording)
    model, a, x = over_committed(tmp_path)
    gaps.clear()
    out, _ = recommit(model, a, x, {"units-reserved": np.array([1.0])}, 60.0)
    assert gaps == [period_polish.RECOMMIT_GAP] * 2 and objective(a, out) == pytest.approx(26_000)
    audited(model, a, out)
    gaps.clear()
    passed, _ = polish_periods(model, a, x, 60.0, Inline())
    assert gaps == [period_polish.PERIOD_GAP] * 2
    audited(model, a, passed)
    assert period_polish.PERIOD_GAP < period_polish.RECOMMIT_GAP


def test_recommit_without_a_plan_in_some_period(tmp_path):
    # on-demand capped at 1 unit (8 GPUs = 4 replicas): without the reservation p1's 10 replicas have no room
    data = reserved_problem()
    data["offerings"][0]["max_units"] = 1
    model, a, x = over_committed(tmp_path, data)
    out, rec = recommit(model, a, x, {"units-reserved": np.array([0.0])}, 60.0)
    assert out is None and rec["after"] is None and rec["before"] == pytest.approx(30_000)


def test_the_lp_commitments_rounded_up(tmp_path):
    # Without the valid inequalities the LP rents fractions of a unit: p1 needs 2.5 units, p2 0.75. A reserved
    # unit up to 0.75 saves 2 × 8,000 for 10,000, beyond that only p1's 8,000: the LP reserves 0.75, and
    # 7,500 + 1.75 × 8,000 = 21,500. Rounded up: 1 unit, and the periods re-solved give the optimum, 26,000.
    model, a, x = over_committed(tmp_path, cuts=())
    lp = driver.relaxation(model)
    u = model.mip.variables["units-reserved"].ids
    assert lp.objective == pytest.approx(21_500) and lp.x[u] == pytest.approx([0.75])
    out, rec = fixed._commit_as_lp(model, a, x, lp.x, 60.0)
    assert objective(a, out) == pytest.approx(26_000) and not violations(a, out)
    audited(model, a, out)
    # a plan that already holds those counts is left to the other rounds
    assert fixed._commit_as_lp(model, a, out, lp.x, 60.0) == (None, {})


def test_the_driver_recommits_a_first_plan_that_holds_too_much(tmp_path, monkeypatch):
    # The large-model path of the driver, on reserved_problem with a second configuration (1 GPU at 0.3 rps,
    # dearer per request; kept, reductions off) so that the stability limit applies. Its first plan is made
    # to be a back end's worst case, 3 reserved units (30,000). The LP relaxation's commitments rounded up,
    # and the periods re-solved against them, take it below that; the optimum is 26,000 (2-GPU replicas: 4
    # on one reserved unit, and 2 on-demand units in p1).
    data = reserved_problem()
    data["inference"][0]["profiles"].append({"gpu": "H100-SXM", "gpus": 1, "rps": 0.3})
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr), enabled=False)
    assert "config-used" in model.mip.variables
    a = model.mip.arrays()
    lp = driver.relaxation(model)
    u = model.mip.variables["units-reserved"].ids
    three = a.copy_bounds()
    three.col_lo[u] = three.col_hi[u] = 3.0
    dear = backends.solve(model.mip, arrays=three)
    assert dear.objective == pytest.approx(30_000)
    real = driver.backend_solve
    calls = []

    def first_plan_dear(*args, **kw):
        calls.append(kw.get("target"))
        return dear if len(calls) == 1 else real(*args, **kw)

    patch_driver(monkeypatch, "backend_solve", first_plan_dear)
    r = fixed.fixed_configurations(model, a, lp.x, "highs", 30.0, 1e-9, None, None, 0.0,
                                     source="the LP relaxation", lp_x=lp.x)
    assert calls[0] == np.inf  # the first call is the restriction's first plan
    assert r.objective == pytest.approx(26_000) and not violations(a, r.x)
    assert_plan_audited(model, r)
    assert ("then the LP relaxation's commitments, rounded up, with every period re-solved against them, "
            "from 30,000.00") in r.message


def test_a_pass_over_the_periods_follows_every_cycle_of_rounds(tmp_path, monkeypatch):
    # fixed._rounds_and_passes on the padded plan (42,000: one spare on-demand unit in each period, 8,000 each),
    # with the two heuristics replaced by scripted steps to read the order they run in. The first cycle of rounds
    # drops p2's spare unit (34,000), the pass after it p1's (26,000, the optimum); the second cycle and its pass
    # find nothing, so the loop ends there: rounds, pass, rounds, pass. (Before, the rounds ran cycle after cycle
    # until one gained nothing, and one pass came at the end.)
    model, a, x42 = padded_plan(tmp_path)
    y = model.mip.variables["units-running"].ids
    periods = model.mip.variables["units-running"].coords["period"].tolist()
    x34 = x42.copy()
    x34[y[periods.index("p2")]] -= 1.0
    x26 = x34.copy()
    x26[y[periods.index("p1")]] -= 1.0
    assert objective(a, x34) == pytest.approx(34_000) and objective(a, x26) == pytest.approx(26_000)
    calls, gpus = [], []

    def rounds(mip, arrays, x, solver, time_limit, threads, cycles=None, gpu_of=None, least=1.0):
        calls.append(("rounds", cycles))
        gpus.append(gpu_of)
        return (x34 if objective(a, x) > 34_000 + 1 else x), [{"round": "units"}]

    def a_pass(model_, arrays, x, time_limit, executor):
        calls.append(("pass", time_limit))
        out = x26 if objective(a, x) > 26_000 + 1 else x
        return out, {"periods": 2, "improved": int(out is not x), "before": objective(a, x),
                     "after": objective(a, out), "seconds": 0.0}

    patch_driver(monkeypatch, "polish", rounds)
    patch_driver(monkeypatch, "polish_periods", a_pass)
    deadline = driver.time.perf_counter() + 100.0
    out, cost, said = fixed._rounds_and_passes(model, a, x42, 42_000.0, "highs", deadline, None, None, True,
                                                lambda obj: True)
    assert [c[0] for c in calls] == ["rounds", "pass", "rounds", "pass"]
    assert all(c[1] == 1 for c in calls if c[0] == "rounds")  # one cycle at a time
    # the rounds are told each offering's GPU model (the inference round is searched one GPU model at a time)
    assert gpus == [{"od": "H100-SXM", "res": "H100-SXM"}] * 2
    # each pass gets PERIOD_SHARE of the time left (100 s less what the fakes took): the whole model follows
    assert calls[1][1] == pytest.approx(fixed.PERIOD_SHARE * 100.0, abs=1.0)
    assert cost == pytest.approx(26_000) and out is x26
    assert said == ("improved by fix-and-optimize from 42,000.00 (2 rounds; after each cycle a pass over the "
                    "periods: 1 period re-solved cheaper in 2 passes)")
    audited(model, a, out)
