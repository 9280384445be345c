"""Training clusters that share a pool in a period: lanes in the model, a timetable in the plan.

The model once counted shared clusters only by GPU-hours, so two 16-GPU
clusters could run 120 hours between them in a 100-hour period on 24 GPUs:
side by side they need 32 GPUs, one after the other 120 hours. Each optimum
below is worked out by hand in the comment beside it; every plan goes
through the audit (conftest.solve_data), which checks the timetable instant
by instant.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pandas as pd
import pytest

from optimizer.audit import audit
from optimizer.solve.backends import Status
from optimizer.timetable import NoTimetable, timetable

from test_known_answers import od
from conftest import patch_driver

PERIOD = [{"name": "p", "hours": 100, "month": 0}]
FABRIC = {"fabric": "infiniband", "fabric_gbps_per_gpu": 400}


def owned(units: int) -> dict:
    """Servers already paid for (no capex, power or site cost): their GPUs cost nothing to use."""
    return {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "owned",
            "capex": 200_000, "lifetime_years": 4, "residual_fraction": 0.1, "power_kw": 0.0,
            "electricity_per_kwh": 0.0, "fixed_per_month": 0.0, "existing_units": units, "max_units": units,
            **FABRIC}


def job(name: str, gpus: int, hours: float) -> dict:
    return {"name": name, "model": "llama-3.1-70b", "tokens": 1e9, "deadline_month": 0, "cluster_gpus": [gpus],
            "profiles": [{"gpu": "H100-SXM", "gpus": gpus, "hours": hours}]}


NODE = od(id="node", price=40.0, **FABRIC)  # 8 GPUs joined by a fabric, rented by the hour: 80 $/h for 16 GPUs
#: two 16-GPU jobs of 60 h in a 100-h period: 24 owned GPUs, or a quota of 3 cheap units (optima 1,600 and 10,000 below)
TAKE_TURNS = {"periods": PERIOD, "offerings": [owned(3), NODE], "training": [job("a", 16, 60), job("b", 16, 60)]}
SHARE_QUOTA = {"periods": PERIOD, "offerings": [od(id="cheap", price=40.0, max_units=3, **FABRIC),
                                                od(id="dear", price=50.0, **FABRIC)],
               "training": [job("a", 16, 60), job("b", 16, 60)]}


def test_two_clusters_that_cannot_share_the_pool_take_turns_and_the_rest_is_rented(solve):
    # 24 owned GPUs, two jobs of 16 GPUs × 60 h in a 100-h period. Side by side they need 32 GPUs; one
    # after the other 120 h. So the pool is one 16-GPU lane of 100 h, and 20 h are rented: 2 units × 40 $/h
    # × 20 h = 1,600. (Counted by GPU-hours alone, 16 × 120 / 100 = 19.2 ≤ 24, both would run free: 0.)
    plan = solve({"periods": PERIOD, "offerings": [owned(3), NODE], "training": [job("a", 16, 60), job("b", 16, 60)]})
    assert plan.status == Status.OPTIMAL
    assert plan.objective == pytest.approx(1_600)
    own = plan.training[plan.training["offering"] == "own"]
    assert own["hours"].sum() == pytest.approx(100)
    tt = plan.timetable[plan.timetable["offering"] == "own"]
    assert set(tt["lane"]) == {1} and tt["end_hour"].max() == pytest.approx(100)


def test_two_clusters_run_side_by_side_when_the_pool_holds_both(solve):
    # 32 owned GPUs: two lanes of 16, each job runs its 60 h on its own lane at no cost.
    plan = solve({"periods": PERIOD, "offerings": [owned(4), NODE], "training": [job("a", 16, 60), job("b", 16, 60)]})
    assert plan.objective == pytest.approx(0.0, abs=1e-6)
    tt = plan.timetable
    assert sorted(tt["lane"]) == [1, 2]
    assert (tt["start_hour"] == 0).all() and tt["end_hour"].to_numpy() == pytest.approx([60, 60])


def test_a_smaller_cluster_follows_a_larger_one_in_the_same_lane(solve):
    # 16 owned GPUs: a (16 GPUs, 60 h) then b (8 GPUs, 30 h) in one 16-GPU lane, 90 h ≤ 100: free. Lanes by
    # exact size would need 16 + 8 = 24 GPUs and rent b: 1 unit × 40 × 30 = 1,200.
    plan = solve({"periods": PERIOD, "offerings": [owned(2), NODE], "training": [job("a", 16, 60), job("b", 8, 30)]})
    assert plan.objective == pytest.approx(0.0, abs=1e-6)
    tt = plan.timetable.sort_values("start_hour")
    assert list(tt["job"]) == ["a", "b"] and set(tt["lane_size"]) == {16}
    assert tt["start_hour"].to_numpy() == pytest.approx([0, 60])
    assert tt["end_hour"].to_numpy() == pytest.approx([60, 90])


def test_clusters_rented_by_the_hour_share_the_quota_in_time(solve):
    # A cheap offering capped at 3 units (40 $/h a unit) and a dear one without a cap (50 $/h). Two jobs of
    # 2 units × 60 h: side by side they need 4 units > 3, so the cheap quota runs one cluster at a time for
    # 100 h (2 × 40 × 100 = 8,000) and the other 20 h go to the dear one (2 × 50 × 20 = 2,000): 10,000.
    # (Counted by unit-hours, 2 × 120 / 100 = 2.4 ≤ 3 and all 120 h cheap: 9,600.)
    plan = solve(copy.deepcopy(SHARE_QUOTA))
    assert plan.objective == pytest.approx(10_000)
    assert plan.training.groupby("offering")["hours"].sum().to_dict() == pytest.approx({"cheap": 100, "dear": 20})


def test_the_audit_rejects_a_timetable_that_runs_too_much_at_once(solve):
    plan = solve(copy.deepcopy(TAKE_TURNS))
    bad = plan.timetable.copy()
    own = bad["offering"] == "own"
    # both clusters from hour 0 on the 24 owned GPUs: 32 GPUs at once
    bad.loc[own, "end_hour"] = bad.loc[own, "hours"]
    bad.loc[own, "start_hour"] = 0.0
    plan.timetable = bad
    found = audit(plan)
    assert any("training GPUs" in v and "held" in v for v in found), found
    assert any("runs twice at once" in v or "lane serves two clusters" in v for v in found), found


# --- the timetable alone ---------------------------------------------------------------------

def _check(tt: pd.DataFrame, training: pd.DataFrame, h: float) -> None:
    """Every stretch inside [0, h]; no job and no lane twice at once; each cluster's hours laid out."""
    assert (tt["start_hour"] >= -1e-9).all() and (tt["end_hour"] <= h + 1e-9).all()
    for keys in (["job"], ["offering", "mode", "lane"]):
        for _, g in tt.groupby(keys):
            for a, b in itertools.combinations(g.itertuples(), 2):
                assert a.end_hour <= b.start_hour + 1e-9 or b.end_hour <= a.start_hour + 1e-9
    laid = tt.groupby(["job", "offering"])["hours"].sum()
    for r in training.itertuples():
        assert laid[(r.job, r.offering)] == pytest.approx(r.hours)


def test_a_job_split_across_lanes_and_offerings_never_runs_twice_at_once():
    # A 10-h period. Pool "own" has two 16-GPU lanes; a, b, c (16 GPUs) run 8, 7 and 5 h there (20 h = two
    # full lanes: a whole in lane 1, b whole in lane 2, c split 3 h + 2 h over what is left). b also runs
    # 3 h on "node": its 10 h are the whole period, so its pieces must follow each other exactly.
    tr = pd.DataFrame([("a", "p", "own", "shared", 16, 0, 8.0), ("b", "p", "own", "shared", 16, 0, 7.0),
                       ("c", "p", "own", "shared", 16, 0, 5.0), ("b", "p", "node", "hourly", 16, 2, 3.0)],
                      columns=["job", "period", "offering", "mode", "gpus", "billed_units", "hours"])
    lanes = pd.DataFrame([("own", "p", "shared", 16, 2)], columns=["offering", "period", "mode", "size", "lanes"])
    tt = timetable(tr, lanes, pd.Series({"p": 10.0}))
    _check(tt, tr, 10.0)
    b = tt[tt["job"] == "b"].sort_values("start_hour")
    assert b["hours"].sum() == pytest.approx(10.0) and set(b["offering"]) == {"own", "node"}
    assert b["start_hour"].iloc[0] == pytest.approx(0.0) and b["end_hour"].iloc[-1] == pytest.approx(10.0)
    assert b["start_hour"].to_numpy()[1:] == pytest.approx(b["end_hour"].to_numpy()[:-1])
    c = tt[tt["job"] == "c"]
    assert c["hours"].sum() == pytest.approx(5.0) and set(c["lane"]) == {1, 2}


def test_every_load_a_period_can_hold_is_laid_out_in_it():
    # Gonzalez and Sahni: a jobs x machines matrix of hours whose every row and column sums to at most h has a
    # preemptive schedule of length h. 300 random matrices (up to 7 x 7, 40 % zeros), each scaled so its
    # largest line sum is 30-100 % of h; checked here without the module: each (job, machine) gets exactly its
    # hours, inside [0, h], and no job or machine does two things at once.
    from optimizer.timetable import TOLERANCE, _open_shop

    rng = np.random.default_rng(20261127)
    h = 100.0
    for _ in range(300):
        p = rng.random((rng.integers(1, 8), rng.integers(1, 8)))
        p *= rng.random(p.shape) < 0.6
        p *= h * rng.uniform(0.3, 1.0) / max(p.sum(axis=1).max(), p.sum(axis=0).max(), 1e-9)
        runs = _open_shop(pd.DataFrame(p), h)
        got = np.zeros_like(p)
        for i, j, start, end in runs:
            assert -1e-9 <= start < end <= h + 1e-6
            got[i, j] += end - start
        assert got == pytest.approx(np.where(p < TOLERANCE, 0.0, p), abs=1e-6)
        for (i, j, s1, e1), (i2, j2, s2, e2) in itertools.combinations(runs, 2):
            if i == i2 or j == j2:
                assert e1 <= s2 + 1e-6 or e2 <= s1 + 1e-6


def test_hours_that_do_not_fit_the_lanes_raise():
    tr = pd.DataFrame([("a", "p", "own", "shared", 16, 0, 8.0), ("b", "p", "own", "shared", 16, 0, 7.0)],
                      columns=["job", "period", "offering", "mode", "gpus", "billed_units", "hours"])
    lanes = pd.DataFrame([("own", "p", "shared", 16, 1)], columns=["offering", "period", "mode", "size", "lanes"])
    with pytest.raises(NoTimetable):
        timetable(tr, lanes, pd.Series({"p": 10.0}))


def test_the_drivers_lp_leaves_the_lanes_out_and_is_still_a_bound(tmp_path, monkeypatch):
    # The driver's LP relaxation lifts the lanes' rows (optimizer.solve.driver.LP_LEAVES_OUT). A relaxation
    # of the LP relaxation: never above it, nor above the optimum (1,600 here). By hand, both LPs are 0: the
    # 24 owned GPUs give 2,400 GPU-hours against 2 x 16 x 60 = 1,920, and a fractional lane (1.5 lanes of
    # 16 GPUs, 150 h >= 120 h) is any share of the pool.
    from conftest import write_problem
    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem
    from optimizer.model import presolve
    from optimizer.solve import driver
    from optimizer.solve.backends import solve_relaxation

    problem = load_problem(write_problem(tmp_path, copy.deepcopy(TAKE_TURNS)))
    model = presolve.build(problem, build_candidates(problem))
    assert "training-lanes-hours" in model.mip.constraints  # the lanes are in the model
    seen = []
    patch_driver(monkeypatch, "solve_relaxation",
                        lambda mip, a, *rest: seen.append(a) or solve_relaxation(mip, a, *rest))
    lp = driver.relaxation(model, "highs")
    lifted = model.mip.constraints["training-lanes-hours"].ids
    assert np.isinf(seen[0].row_lo[lifted]).all() and np.isinf(seen[0].row_hi[lifted]).all()
    assert np.isfinite(model.mip.arrays().row_hi[lifted]).all()  # on a copy: the model keeps its rows
    full = solve_relaxation(model.mip, model.mip.arrays(), "highs")
    assert lp.status == full.status == Status.OPTIMAL
    assert lp.objective == pytest.approx(0.0, abs=1e-6) and full.objective == pytest.approx(0.0, abs=1e-6)
    assert lp.objective <= full.objective + 1e-9 <= 1_600


@pytest.mark.parametrize("limit", [None, 600])
def test_the_model_without_stability_limits_leaves_the_lanes_out_and_the_plan_keeps_them(solve, monkeypatch, limit):
    # TAKE_TURNS's two jobs on the owned pool of region r1 (one lane: 1,600, by hand above), beside the FLIP
    # service of tests/test_executable_plans.py in region r2 (stable: 1,100; two configurations: 700). The
    # pools are apart, so the optimum is 1,100 + 1,600 = 2,700. The model without stability limits relaxes
    # the lanes too: there both jobs fit the 24 owned GPUs by GPU-hours (16 x 120 / 100 = 19.2), so it costs
    # 700 alone. Its plan puts chat on two configurations, so the split runs, and its leaves keep the lanes.
    # Under a time limit that model keeps the lanes (its plan may place the training of the fixed-configuration
    # path, which must fit them): 700 + 1,600 = 2,300.
    from test_executable_plans import FLIP, record_solves

    flip = copy.deepcopy(FLIP)
    for o in flip["offerings"]:
        o["region"] = "r2"
    flip["inference"][0]["regions"] = ["r2"]
    data = {"periods": flip["periods"], "offerings": flip["offerings"] + [owned(3), NODE],
            "inference": flip["inference"], "training": [job("a", 16, 60), job("b", 16, 60)]}
    calls = record_solves(monkeypatch, key="arrays")
    plan = solve(data, solver="highs", time_limit=limit)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(2_700)
    guide, guide_cost = calls[0]
    rows = plan.mip.constraints["training-lanes-hours"].ids
    if limit is None:
        assert np.isinf(guide.row_hi[rows]).all() and guide_cost == pytest.approx(700)
    else:
        assert np.isfinite(guide.row_hi[rows]).all() and guide_cost == pytest.approx(2_300)
    assert "one stable solve per configuration of chat/all" in plan.result.message
    tt = plan.timetable[plan.timetable["offering"] == "own"]
    assert set(tt["lane"]) == {1} and tt["end_hour"].max() == pytest.approx(100)
