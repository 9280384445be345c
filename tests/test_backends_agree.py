"""Every back end finds the hand-computed optimum of the known-answer problems, with an honest bound.

The data are the dictionaries of tests/test_known_answers.py; each plan goes
through the audit (conftest.solve_data). CP-SAT runs only where the model is
pure-integer (no request buckets, no training); elsewhere it must refuse.
"""

from __future__ import annotations

import copy

import pytest

from optimizer.solve.backends import Status

from test_known_answers import BUCKETS, ONE_PERIOD, OWNED, SHARED, od, reserved_problem, svc
from test_training_timetable import SHARE_QUOTA, TAKE_TURNS

RESERVED = reserved_problem()
# existing owned units: the objective has a constant (fixed + idle energy of the unit already owned)
EXISTING = {"periods": [{"name": "m", "hours": 730, "month": 0}],
            "offerings": [od(price=20, region="dc"), {**OWNED, "existing_units": 1}],
            "inference": [svc(demand=2)]}
MIN_REPLICAS = {"periods": ONE_PERIOD, "offerings": [od(price=2.0, G=1)],
                "inference": [svc(demand=0.5, gpus=1, min_replicas=3)]}
SPOT_TRAINING = {"periods": [{"name": "p1", "hours": 700, "month": 0}],
                 "offerings": [od(price=15), {"id": "sp", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                              "pricing": "spot", "price_per_hour": 10,
                                              "interruptions_per_hour": 0.01}],
                 "training": [{"name": "pt", "model": "llama-3.1-8b", "tokens": 1e10, "deadline_month": 0,
                               "spot": True, "checkpoint_minutes": 30,
                               "profiles": [{"gpu": "H100-SXM", "gpus": 8, "hours": 100}]}],
                 "efficiency": {"checkpoint_write_minutes": 5, "restart_minutes": 20}}

INTEGER_ONLY = [("on-demand", {"periods": ONE_PERIOD, "offerings": [od()], "inference": [svc()]}, 24_000),
                ("reserved", RESERVED, 26_000),
                ("existing-owned", EXISTING, 1_438),
                ("min-replicas", MIN_REPLICAS, 600)]
MIXED = [("buckets", BUCKETS, 60),
         ("shared-training", SHARED, 4_000),
         ("spot-training", SPOT_TRAINING, 8 * 10 / 8 * 100 / (1 - 0.1725)),
         ("clusters-take-turns", TAKE_TURNS, 1_600),    # worked in tests/test_training_timetable.py
         ("clusters-share-a-quota", SHARE_QUOTA, 10_000)]


@pytest.mark.parametrize("solver", ["cbc", "highs", "scip", "cp-sat"])
@pytest.mark.parametrize("name,data,expected", INTEGER_ONLY, ids=[c[0] for c in INTEGER_ONLY])
def test_integer_problems_agree(solve, solver, name, data, expected):
    plan = solve(copy.deepcopy(data), solver=solver)
    r = plan.result
    assert r.status == Status.OPTIMAL, r.message
    assert plan.objective == pytest.approx(expected, rel=1e-6)
    # the bound includes the objective constant (EXISTING has one of 1,146) and meets the objective
    assert r.bound == pytest.approx(expected, rel=1e-6)
    assert r.gap == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("solver", ["cbc", "highs", "scip"])
@pytest.mark.parametrize("name,data,expected", MIXED, ids=[c[0] for c in MIXED])
def test_mixed_problems_agree(solve, solver, name, data, expected):
    plan = solve(copy.deepcopy(data), solver=solver)
    assert plan.status == Status.OPTIMAL, plan.result.message
    assert plan.objective == pytest.approx(expected, rel=1e-6)
    assert plan.result.bound == pytest.approx(expected, rel=1e-6)


def test_cp_sat_refuses_continuous_models(solve):
    # request-bucket routing is continuous: CP-SAT would scale it to integers and solve another problem
    plan = solve(copy.deepcopy(BUCKETS), solver="cp-sat")
    assert plan.status == Status.ERROR
    assert "continuous" in plan.result.message


def test_infeasible_on_every_backend(solve):
    data = {"periods": ONE_PERIOD, "offerings": [od()], "inference": [svc()], "constraints": {"budget": 23_999}}
    for solver in ("cbc", "highs", "scip", "cp-sat"):
        assert solve(copy.deepcopy(data), solver=solver).status == Status.INFEASIBLE, solver
