"""The valid inequalities of optimizer/model/strengthen.py: each keeps the optimum and raises the LP bound.

Every case is solved with and without the family (``presolve.build(..., cuts=...)``); the LP
bounds are worked by hand in the comments. The known-answer tests (tests/test_known_answers.py)
solve every problem with all the families on, through the pipeline and the audit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import write_problem
from optimizer.audit import audit
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.model.strengthen import CUTS, min_gpus_single
from optimizer.plan import extract
from optimizer.solve import driver
from optimizer.solve.backends import Status

from test_known_answers import ONE_PERIOD, od, svc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.generate import problem as generated  # noqa: E402
from optimizer.solve import beside, relaxations


def _model(tmp_path, data, cuts):
    pr = load_problem(write_problem(tmp_path, data))
    return presolve.build(pr, build_candidates(pr), cuts=cuts)


def lp(tmp_path, data, cuts) -> float:
    r = driver.relaxation(_model(tmp_path, data, cuts))
    assert r.status == Status.OPTIMAL
    return r.objective


def optimum(model) -> float:
    res = driver.solve(model, solver="highs", gap=1e-9)
    plan = extract(model, res)
    assert res.status == Status.OPTIMAL
    assert audit(plan) == []
    return res.objective


def both_ways(tmp_path, data) -> tuple[float, float]:
    return optimum(_model(tmp_path, data, ())), optimum(_model(tmp_path, data, CUTS))


def test_min_gpus_single_by_hand():
    # q3's chat service (rps per replica of 1, 2, 4, 8 H100s: 0.79317, 3.504201, 7.53027, 11.860211),
    # at least 2 replicas. 6 rps: two ×2 replicas carry 7.0 rps on 4 GPUs (one ×4 alone breaks the floor
    # of 2 replicas; ×4 + ×1 is 5 GPUs). 24 rps: three ×4 (22.59) + one ×2 (3.50) = 26.09 rps on 14 GPUs;
    # 13 GPUs hold at most three ×4 and one ×1 (23.38 rps). 36 rps: five ×4 = 37.65 rps on 20 GPUs; 19
    # GPUs hold at most four ×4 + one ×2 + one ×1 (34.42 rps).
    n = np.array([1, 2, 4, 8])
    r = np.array([0.793170, 3.504201, 7.530270, 11.860211])
    assert [min_gpus_single(D, n, r, 2) for D in (6, 24, 36)] == [4, 14, 20]
    # 3 rps from 2-GPU replicas at 1 rps or 3-GPU replicas at 2 rps: 2 + 3 = 5 GPUs for 3 rps
    assert min_gpus_single(3, np.array([2, 3]), np.array([1.0, 2.0]), 0) == 5
    assert min_gpus_single(0, np.array([2]), np.array([1.0]), 2) == 4  # the floor alone
    assert min_gpus_single(0, np.array([2]), np.array([1.0]), 0) == 0


# --- unit-floor ---------------------------------------------------------------------------------

UNIT_FLOOR = {"periods": ONE_PERIOD, "offerings": [od()], "inference": [svc()]}


def test_unit_floor_raises_the_lp_to_whole_units(tmp_path):
    # 10 rps at 1 rps per 2-GPU replica: 10 replicas, 20 GPUs, on 8-GPU units at 80 $/h for 100 h.
    # LP without the row: 20/8 = 2.5 units = 2.5 × 80 × 100 = 20,000.
    # unit-floor: the 10 replicas need 20 GPUs, so ⌈20/8⌉ = 3 units: 3 × 8,000 = 24,000, the optimum
    # (tests/test_known_answers.py::test_on_demand_only). The replica bound (10 × 2 GPUs = 20 ≥ 8) adds
    # no replica-unit row, and there is no training: the family alone makes the difference.
    assert lp(tmp_path, UNIT_FLOOR, ()) == pytest.approx(20_000)
    assert lp(tmp_path, UNIT_FLOOR, ("unit-floor",)) == pytest.approx(24_000)
    assert both_ways(tmp_path, UNIT_FLOOR) == pytest.approx((24_000, 24_000))


# --- replica-unit -------------------------------------------------------------------------------

REPLICA_UNIT = {
    "periods": ONE_PERIOD,
    "offerings": [od(id="big", price=80.0), od(id="small", gpu="L4", G=1, price=15.0)],
    "inference": [{"name": "tiny", "model": "llama-3.1-8b", "prompt_tokens": 1000, "output_tokens": 200,
                   "demand_rps": 1.0, "profiles": [{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0},
                                                   {"gpu": "L4", "gpus": 1, "rps": 0.25}]}],
}


def test_replica_unit_raises_the_lp_where_a_replica_is_a_fraction_of_a_unit(tmp_path):
    # 1 rps: one 1-GPU H100 replica (1 rps) in an 8-GPU unit at 80 $/h, or four 1-GPU L4 VMs (0.25 rps
    # each) at 15 $/h, for 100 h. Optimum: the L4s, 4 × 15 × 100 = 6,000 (the H100 unit costs 8,000).
    # LP without the row: 1/8 of the H100 unit, 0.125 × 80 × 100 = 1,000.
    # unit-floor alone: the service's offerings bill 8 and 1 GPUs, so its floor is in GPUs,
    # 8·y_big + y_small ≥ 1 (one GPU), which 1/8 of the big unit meets: still 1,000.
    # replica-unit: at most X̄ = ⌈1/1⌉ = 1 H100 replica, and 1 × 1 GPU < 8: x_big ≤ 1·y_big. Serving a
    # share a by H100 costs 8,000·a (y_big ≥ a) + 6,000·(1 − a) by L4: least at a = 0, 6,000.
    assert lp(tmp_path, REPLICA_UNIT, ()) == pytest.approx(1_000)
    assert lp(tmp_path, REPLICA_UNIT, ("unit-floor",)) == pytest.approx(1_000)
    assert lp(tmp_path, REPLICA_UNIT, ("replica-unit",)) == pytest.approx(6_000)
    assert both_ways(tmp_path, REPLICA_UNIT) == pytest.approx((6_000, 6_000))


# --- cluster-unit-floor -------------------------------------------------------------------------

CLUSTER = {
    "periods": ONE_PERIOD,
    "offerings": [od(max_units=4)],
    # 2 rps at 1 rps per 2-GPU replica: 2 replicas, 4 GPUs
    "inference": [svc(demand=2.0)],
    # one 8-GPU cluster for 50 h in month 0
    "training": [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "start_month": 0, "deadline_month": 0,
                  "cluster_gpus": [8], "profiles": [{"gpu": "H100-SXM", "gpus": 8, "hours": 50}]}],
}


def test_cluster_unit_floor_raises_the_lp_when_a_cluster_cannot_sit_in_the_spare_gpus(tmp_path):
    # Units: 8 GPUs at 80 $/h, 100 h (8,000 per unit for the period). The plan: one unit for the 4
    # inference GPUs (8,000) and the cluster on 1 unit by the hour, 80 × 50 = 4,000: 12,000. (In the
    # units held for the period it needs 4 + 8 = 12 GPUs, 2 units: 16,000.)
    # In shared mode the job's 50 h are all of it, so t ≤ min(100, 50)·w: a share b of the job run
    # shared needs w ≥ b, and the fit row 8·w + 4 ≤ 8·y.
    # LP without the families: half a unit for the 4 inference GPUs (y = 0.5, 4,000) and the cluster by
    # the hour (4,000): 8,000.
    # unit-floor (and replica-unit, x ≤ 2·y): y ≥ ⌈4/8⌉ = 1; then y ≥ max(1, 0.5 + b) and the cost
    # 8,000·y + 4,000·(1 − b) is least at b = 0.5 (the cluster half in the 4 spare GPUs): 10,000.
    # cluster-unit-floor: U0 = ⌈4/8⌉ = 1, δ = ⌈(4 + 8)/8⌉ − 1 = 1: y ≥ 1 + w ≥ 1 + b; the cost
    # 8,000·(1 + b) + 4,000·(1 − b) = 12,000 + 4,000·b is least at b = 0: 12,000, the optimum.
    assert lp(tmp_path, CLUSTER, ()) == pytest.approx(8_000)
    assert lp(tmp_path, CLUSTER, ("unit-floor", "replica-unit")) == pytest.approx(10_000)
    assert lp(tmp_path, CLUSTER, ("cluster-unit-floor",)) == pytest.approx(12_000)
    assert both_ways(tmp_path, CLUSTER) == pytest.approx((12_000, 12_000))


@pytest.mark.parametrize("seed", [0, 3])
def test_generated_optimum_same_with_and_without_cuts(seed):
    # bench's generator at 5 %: stability limits, buckets, training, reserved and owned offerings
    pr = generated(scale=0.05, seed=seed, weeks=2, regions=1)
    cands = build_candidates(pr)
    plain = presolve.build(pr, cands, cuts=())
    cut = presolve.build(pr, cands)
    assert any(b in cut.mip.constraints for b in CUTS)
    assert driver.relaxation(cut).objective >= driver.relaxation(plain).objective - 1e-6
    assert optimum(cut) == pytest.approx(optimum(plain), rel=1e-7)


# --- rows the split's leaves get ------------------------------------------------------------

FABRIC = {"fabric": "infiniband", "fabric_gbps_per_gpu": 400}
#: two 100-h periods; 16 owned GPUs (free) that inference fills unless it moves to 8-GPU on-demand units
#: (10 $/h a unit, 2,000 a period for two); a 16-GPU job of 150 h, on the owned servers or by the hour on
#: "node" (2 units × 100 $/h)
COVER = {
    "periods": [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 0}],
    "offerings": [od(price=10.0), od(id="node", price=100.0, **FABRIC),
                  {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "owned",
                   "capex": 200_000, "lifetime_years": 4, "residual_fraction": 0.1, "power_kw": 0.0,
                   "electricity_per_kwh": 0.0, "fixed_per_month": 0.0, "existing_units": 2, "max_units": 2,
                   **FABRIC}],
    "inference": [svc(demand=8.0)],  # 8 replicas of 2 GPUs: 16 GPUs every period
    "training": [{"name": "ft", "model": "llama-3.1-70b", "tokens": 1e9, "deadline_month": 0, "cluster_gpus": [16],
                  "profiles": [{"gpu": "H100-SXM", "gpus": 16, "hours": 150}]}],
}


def test_training_cover_rounds_a_jobs_periods_up_to_whole_ones(tmp_path):
    # The job runs on the owned servers in whole periods (each empties them of inference: 2 on-demand units,
    # 2,000) or by the hour on node (200 $/h). 150 h: 100 h in p1 and 50 h in p2 on the owned servers, 4,000
    # (p1 and 50 h on node: 2,000 + 10,000). The LP runs it in 1.5 periods (w1 = 1, w2 = 0.5: the fit row
    # 16·w + 2·x ≤ 16 moves half of p2's inference, one unit, 1,000): 3,000.
    # training-cover: each owned period does a = 100/150 of the job; at δ = 2/3, β = 1.5, f = 0.5:
    # 0.5·w1 + 0.5·w2 + t_node/(150·δ) ≥ 0.5·2, i.e. w1 + w2 + t_node/50 ≥ 2: a second whole period
    # (+1,000) or 25 h on node (+5,000): the LP is 4,000, the optimum.
    from optimizer.model.strengthen import training_cover
    from optimizer.solve.backends import solve as backend_solve, solve_relaxation
    model = _model(tmp_path, COVER, CUTS)
    a = model.mip.arrays()
    cover = training_cover(model.mip, model.vars)
    assert cover.size == 1
    assert solve_relaxation(model.mip, a, "highs").objective == pytest.approx(3_000)
    assert solve_relaxation(model.mip, a.with_rows(cover), "highs").objective == pytest.approx(4_000)
    for arrays in (a, a.with_rows(cover)):
        assert backend_solve(model.mip, solver="highs", gap=1e-9, arrays=arrays).objective == pytest.approx(4_000)
    assert both_ways(tmp_path, COVER) == pytest.approx((4_000, 4_000))


@pytest.mark.parametrize("seed", [0, 3])
def test_generated_optimum_same_with_and_without_training_cover(seed):
    from optimizer.model.strengthen import training_cover
    from optimizer.solve.backends import solve as backend_solve
    pr = generated(scale=0.05, seed=seed, weeks=2, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    cover = training_cover(model.mip, model.vars)
    assert cover.size > 0
    plain = backend_solve(model.mip, solver="highs", gap=1e-9, arrays=a)
    covered = backend_solve(model.mip, solver="highs", gap=1e-9, arrays=a.with_rows(cover))
    assert plain.status == covered.status == Status.OPTIMAL
    assert covered.objective == pytest.approx(plain.objective, rel=1e-7)


# --- configuration floors (kept apart: the stable model's search for a bound gets them) ------------------

def test_config_floor_makes_the_lp_pay_for_a_whole_configuration(tmp_path):
    # FLIP (tests/test_executable_plans.py): chat on A (1-GPU L4 at 1 $/h, 1 rps a replica) or B (an 8-GPU
    # H100 node at 6 $/h, 10 rps), 1 rps in p1 and 10 in p2, 100 h each, one configuration. Without the rows
    # the LP may take A in p1 and B in p2 with c_A = 1/11 and c_B = 1/2 (each configuration's replicas over
    # the horizon against its most, 11 and 2): 100 + 600 = 700 at most. With them, c_A = λ and c_B = μ
    # force x_A ≥ λ in p1 and 10λ in p2, x_B ≥ μ in each; the most replicas rows (x_A1 + x_A2 ≤ 11λ,
    # x_B1 + x_B2 ≤ 2μ) make those equalities, p2's demand gives 10λ + 10μ ≥ 10, so λ + μ = 1 and the cost
    # is 100·11λ + 600·2μ = 1,200 − 100λ: 1,100 at λ = 1, the stable optimum.
    from optimizer.model.strengthen import config_floor
    from optimizer.solve.backends import solve as backend_solve

    from test_executable_plans import FLIP

    model = _model(tmp_path, FLIP, CUTS)
    a = model.mip.arrays()
    rows = config_floor(model.mip, model.data, model.vars)
    assert rows.size == 4  # (A, B) × (p1, p2)
    plain = backend_solve(None, solver="highs", arrays=a.relaxed())
    floored = backend_solve(None, solver="highs", arrays=a.with_rows(rows).relaxed())
    assert plain.objective <= 700 + 1e-6
    assert floored.objective == pytest.approx(1_100)


@pytest.mark.parametrize("seed", [0, 3])
def test_generated_optimum_same_with_and_without_config_floor_and_the_relaxations_below_it(seed):
    # bench's generator at 5 %: stability limits of one configuration, buckets, training, commitments
    from optimizer.model.strengthen import config_floor
    from optimizer.solve.backends import solve as backend_solve

    pr = generated(scale=0.05, seed=seed, weeks=2, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    rows = config_floor(model.mip, model.data, model.vars)
    assert rows.size > 0
    plain = backend_solve(None, solver="highs", arrays=a, gap=1e-9)
    floored = backend_solve(None, solver="highs", arrays=a.with_rows(rows), gap=1e-9)
    assert plain.status == floored.status == Status.OPTIMAL
    assert floored.objective == pytest.approx(plain.objective, rel=1e-7)
    lp_plain = backend_solve(None, solver="highs", arrays=a.relaxed()).objective
    lp_floored = backend_solve(None, solver="highs", arrays=a.with_rows(rows).relaxed()).objective
    assert lp_floored >= lp_plain - 1e-6
    # the configuration relaxations, only config-used whole and with whole units too: between the LP with the
    # floors and the stable optimum
    relaxed = relaxations.configuration_relaxation(model, a, "highs", None, 1e-9, None)
    units = relaxations.configuration_relaxation(model, a, "highs", None, 1e-9, None,
                                            whole=("config-used",) + beside.UNIT_FAMILIES)
    assert relaxed.status == units.status == Status.OPTIMAL
    assert lp_floored - 1e-6 <= relaxed.objective <= units.objective * (1 + 1e-7)
    assert units.objective <= plain.objective * (1 + 1e-7)


# --- the configuration relaxation (the fixed-configuration path's guide and bound) ---------------------------

HALF = {"periods": ONE_PERIOD,
        "offerings": [od(id="a", gpu="L4", G=1, price=1.0), od(id="b", gpu="A100-80GB", G=1, price=1.5)],
        "inference": [{**svc(demand=1.5, gpu="L4", gpus=1, rps=1.0),
                       "profiles": [{"gpu": "L4", "gpus": 1, "rps": 1.0},
                                    {"gpu": "A100-80GB", "gpus": 1, "rps": 2.0}]}]}


def test_the_configuration_relaxation_takes_whole_configurations_where_the_lp_takes_fractions(tmp_path):
    # chat, 1.5 rps for 100 h, one configuration: A (a 1-GPU VM at 1 $/h, 1 rps a replica) needs 2 replicas,
    # 200; B (a 1-GPU VM at 1.5 $/h, 2 rps) one, 150: the stable optimum is 150. The LP with the floors
    # mixes them: the most replicas rows (x_A ≤ 2·c_A, x_B ≤ 1·c_B) and the floors (x_A ≥ 2·c_A,
    # x_B ≥ 1·c_B) only tie x to c, c_A + c_B ≤ 1; the units hold the replicas (y ≥ x) and the unit floor
    # asks one whole GPU (y_a + y_b ≥ 1). So: min 100·(x_A + 1.5·x_B) with x_A + 2·x_B ≥ 1.5 (demand) and
    # x_A + x_B ≥ 1, whose optimum is where both meet, x_A = x_B = 1/2 (c_A = 1/4, c_B = 1/2): 125. With c
    # whole (every other integrality dropped), c_B = 1 and the floor asks one whole replica: 150, the
    # optimum; c_A = 1 would ask two, 200.
    from optimizer.model.strengthen import config_floor
    from optimizer.solve.backends import solve as backend_solve

    model = _model(tmp_path, HALF, CUTS)
    a = model.mip.arrays()
    floored = backend_solve(None, solver="highs", arrays=a.with_rows(
        config_floor(model.mip, model.data, model.vars)).relaxed())
    assert floored.objective == pytest.approx(125)
    r = relaxations.configuration_relaxation(model, a, "highs", None, 1e-9, None)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(150) and r.bound == pytest.approx(150)
    assert optimum(model) == pytest.approx(150)
    # with whole units too: one whole B unit, 150 again
    units = relaxations.configuration_relaxation(model, a, "highs", None, 1e-9, None,
                                            whole=("config-used",) + beside.UNIT_FAMILIES)
    assert units.objective == pytest.approx(150)
