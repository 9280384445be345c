"""Presolve keeps the optimum: dominated configurations, merged offerings (mapped back), bounds."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pandas as pd
import pytest

from optimizer.model import presolve
from optimizer.audit import audit
from optimizer.solve.backends import Status
from optimizer.candidates import build_candidates
from optimizer.plan import extract
from optimizer.solve import driver

from test_known_answers import ONE_PERIOD, od, svc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.generate import problem  # noqa: E402


def _solve(pr, enabled: bool, solver: str = "highs"):
    cands = build_candidates(pr)
    model = presolve.build(pr, cands, enabled=enabled)
    res = driver.solve(model, solver=solver, gap=1e-9)
    plan = extract(model, res)
    return model, plan


@pytest.mark.parametrize("seed", [0, 3])
def test_generated_objective_same_with_and_without_presolve(seed):
    pr = problem(scale=0.05, seed=seed, weeks=2, regions=1)
    model, with_pre = _solve(pr, True)
    _, without = _solve(pr, False)
    assert with_pre.status == without.status == Status.OPTIMAL
    assert with_pre.objective == pytest.approx(without.objective, rel=1e-7)
    assert audit(with_pre) == []
    # the generator plants dominated precisions and twin offerings: the reductions have work to do
    assert model.summary()["configs_dropped"] > 0 and model.summary()["offerings_dropped"] > 0
    assert with_pre.problem is pr


def test_dominated_precision_is_dropped_and_optimum_kept(solve):
    # fp8 serves 2 rps per 1-GPU replica, bf16 only 1.5: bf16 is dominated (same GPU type and size)
    s = svc(demand=8.0, gpus=1, precisions=["fp8", "bf16"])
    s["profiles"] = [{"gpu": "H100-SXM", "gpus": 1, "rps": 2.0, "precision": "fp8"},
                     {"gpu": "H100-SXM", "gpus": 1, "rps": 1.5, "precision": "bf16"}]
    plan = solve({"periods": ONE_PERIOD, "offerings": [od(price=8.0, G=1)], "inference": [s]})
    assert plan.objective == pytest.approx(4 * 8.0 * 100)  # 4 fp8 replicas
    inf = plan.candidates.inference
    assert set(inf["precision"]) == {"fp8"}


def test_not_dominated_when_better_in_one_bucket_only():
    inf = pd.DataFrame([
        ("s", "a", "L4", 1, "fp8", "short", 4.0), ("s", "a", "L4", 1, "fp8", "long", 1.0),
        ("s", "b", "L4", 1, "bf16", "short", 3.0), ("s", "b", "L4", 1, "bf16", "long", 1.5),
        ("s", "c", "L4", 1, "int8", "short", 2.0),  # serves only short, less than a: dominated
        ("s", "d", "L4", 2, "fp8", "short", 9.0),  # another size: never compared
    ], columns=["service", "config", "gpu", "gpus", "precision", "bucket", "rps"])
    kept, dropped = presolve.drop_dominated(inf)
    assert set(dropped["config"]) == {"c"}
    assert set(kept["config"]) == {"a", "b", "d"}


def test_ties_keep_the_first_name_and_most_rps_per_bucket_is_what_counts():
    # x and y serve the same (short 4, long 2), and z has two rows for "short", 1 and 5, with long 1: each
    # sums to 6 (z by its most rps per bucket, 5 + 1), so the three tie and are taken in name order. x is
    # kept; y is dominated by x (4 >= 4, 2 >= 2): the first name stays, the second goes (y first would drop x).
    # z is not dominated by x (short 5 > 4), which it would be if its 1 counted. w serves "long" only, 3 rps,
    # more than x's 2 and z's 1: kept. v has no rps at all: nothing to compare, kept. Another service's x
    # is never compared.
    inf = pd.DataFrame([
        ("s", "x", "L4", 1, "fp8", "short", 4.0), ("s", "x", "L4", 1, "fp8", "long", 2.0),
        ("s", "y", "L4", 1, "fp8", "short", 4.0), ("s", "y", "L4", 1, "fp8", "long", 2.0),
        ("s", "z", "L4", 1, "fp8", "short", 1.0), ("s", "z", "L4", 1, "fp8", "short", 5.0),
        ("s", "z", "L4", 1, "fp8", "long", 1.0),
        ("s", "w", "L4", 1, "fp8", "long", 3.0),
        ("s", "v", "L4", 1, "fp8", "short", float("nan")),
        ("t", "x", "L4", 1, "fp8", "short", 1.0),
    ], columns=["service", "config", "gpu", "gpus", "precision", "bucket", "rps"])
    kept, dropped = presolve.drop_dominated(inf)
    assert dropped[["service", "config", "dominated_by"]].to_numpy().tolist() == [["s", "y", "x"]]
    assert sorted(set(zip(kept["service"], kept["config"]))) == [
        ("s", "v"), ("s", "w"), ("s", "x"), ("s", "z"), ("t", "x")]


QUOTA = {"periods": ONE_PERIOD,
         # two identical L4 offerings of one unit each (inference-only GPU type): merged, then split back
         "offerings": [od(id="l4-a", gpu="L4", G=1, price=1.0, max_units=1),
                       od(id="l4-b", gpu="L4", G=1, price=1.0, max_units=1),
                       od(id="l4-dear", gpu="L4", G=1, price=3.0)],
         "inference": [svc(demand=3.0, gpu="L4", gpus=1, rps=1.0)]}


def test_capped_twins_each_keep_their_quota(solve):
    # 3 replicas: 1 on l4-a, 1 on l4-b (quota 1 each), 1 on l4-dear: 100 + 100 + 300
    plan = solve(copy.deepcopy(QUOTA))
    assert plan.objective == pytest.approx(500)
    got = plan.inference.groupby("offering")["replicas"].sum().to_dict()
    assert got == {"l4-a": 1, "l4-b": 1, "l4-dear": 1}


def test_an_uncapped_twin_absorbs_the_capped_ones(tmp_path, solve):
    from conftest import write_problem
    from optimizer.load import load_problem

    data = copy.deepcopy(QUOTA)
    data["offerings"].append(od(id="l4-c", gpu="L4", G=1, price=1.0))  # uncapped, identical otherwise
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    assert dict(zip(model.dropped_offerings["id"], model.dropped_offerings["kept"])) == {"l4-a": "l4-c",
                                                                                        "l4-b": "l4-c"}
    # 3 replicas at 1 $/h for 100 h on l4-c: the same optimum as with the twins, 300
    assert solve(data).objective == pytest.approx(300)
    # a twin with another topology is not a twin
    data["offerings"][-1]["fabric"] = "infiniband"
    data["offerings"][-1]["fabric_gbps_per_gpu"] = 100
    pr = load_problem(write_problem(tmp_path, data, "t.yaml"))
    assert presolve.build(pr, build_candidates(pr)).dropped_offerings.empty


def test_bounds_are_finite_and_respect_demand():
    pr = problem(scale=0.05, seed=0, weeks=2, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    rep = model.mip.variables["inference-replicas"]
    assert (rep.upper < float("inf")).all()
    run = model.mip.variables["units-running"]
    assert (run.upper < float("inf")).all()


def test_replicas_kept_through_a_dip_to_save_starts(solve):
    # Three periods of 100 h, demand 10, 1, 10 rps; 1-GPU replicas at 1 rps (a 2-GPU one at 1.5 rps is
    # dearer per rps and only makes two configurations, so the stability rows are built); 2-GPU units at
    # 0.02 $/h, at most 3 per offering in two regions (10 GPUs need both); 100 per replica started.
    # Following demand: 5 units (10) + 1 unit (2) + 5 units (10) + 9 starts in p3 (900) = 922.
    # Keeping the 10 replicas through p2: 3 × 10 = 30, no start. Optimum 30. Presolve's replica bound
    # was the period's own need (1 in p2) and the stability row's big-M Σ_p X̄_p = 21 < 30 replicas
    # summed over offerings and periods: both cut the optimum off (922).
    off = [{"id": i, "gpu": "H100-SXM", "gpus_per_unit": 2, "region": r, "pricing": "on_demand",
            "price_per_hour": 0.02, "max_units": 3} for i, r in (("a", "r1"), ("b", "r2"))]
    data = {"periods": [{"name": f"p{i}", "hours": 100, "month": 0} for i in (1, 2, 3)], "offerings": off,
            "inference": [svc(demand={"p1": 10, "p2": 1, "p3": 10}, gpus=1, rps=1.0,
                              profiles=[{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0},
                                        {"gpu": "H100-SXM", "gpus": 2, "rps": 1.5}])],
            "stability": {"replica_start_cost": 100}}
    plan = solve(data, solver="highs")
    assert plan.objective == pytest.approx(30)
    assert plan.inference.groupby("period")["replicas"].sum().to_dict() == {"p1": 10, "p2": 10, "p3": 10}
