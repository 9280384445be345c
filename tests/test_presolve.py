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

from test_known_answers import ONE_PERIOD, od, svc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.generate import problem  # noqa: E402


def _solve(pr, enabled: bool, solver: str = "highs"):
    cands = build_candidates(pr)
    model = presolve.build(pr, cands, enabled=enabled)
    res = model.solve(solver=solver, gap=1e-9)
    plan = extract(*model.restore(res), res)
    return model, plan


@pytest.mark.parametrize("seed", [0, 3])
def test_generated_objective_same_with_and_without_presolve(seed):
    pr = problem(scale=0.05, seed=seed, weeks=2, regions=1)
    model, with_pre = _solve(pr, True)
    _, without = _solve(pr, False)
    assert with_pre.status == without.status == Status.OPTIMAL
    assert with_pre.objective == pytest.approx(without.objective, rel=1e-7)
    assert audit(with_pre) == []
    # the generator plants duplicates and dominated precisions: presolve has work to do
    s = model.pre.summary()
    assert s["offerings_merged"] > 0 and s["configs_dropped"] > 0
    # the plan speaks of real offerings only, never of a merged pool
    assert set(with_pre.inference["offering"]) <= set(pr.offerings.index)
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


QUOTA = {"periods": ONE_PERIOD,
         # two identical L4 offerings of one unit each (inference-only GPU type): merged, then split back
         "offerings": [od(id="l4-a", gpu="L4", G=1, price=1.0, max_units=1),
                       od(id="l4-b", gpu="L4", G=1, price=1.0, max_units=1),
                       od(id="l4-dear", gpu="L4", G=1, price=3.0)],
         "inference": [svc(demand=3.0, gpu="L4", gpus=1, rps=1.0)]}


def test_merged_quota_offerings_map_back_to_real_ids(solve):
    # 3 replicas: 1 on l4-a, 1 on l4-b (quota 1 each), 1 on l4-dear: 100 + 100 + 300
    plan = solve(copy.deepcopy(QUOTA))
    assert plan.objective == pytest.approx(500)
    got = plan.inference.groupby("offering")["replicas"].sum().to_dict()
    assert got == {"l4-a": 1, "l4-b": 1, "l4-dear": 1}
    assert set(plan.usage["offering"]) == {"l4-a", "l4-b", "l4-dear"}


def test_merge_rules(tmp_path):
    from conftest import write_problem
    from optimizer.load import load_problem

    data = copy.deepcopy(QUOTA)
    data["offerings"].append(od(id="l4-c", gpu="L4", G=1, price=1.0))  # uncapped twin: absorbs the group
    pr = load_problem(write_problem(tmp_path, data))
    pre = presolve.presolve(pr, build_candidates(pr))
    assert pre.merged == {"l4-c": ["l4-c", "l4-a", "l4-b"]} and pre.merge_kind == {"l4-c": "absorb"}

    # capped twins on a GPU type some training job may use: left alone (a cluster never spans offerings)
    data = copy.deepcopy(QUOTA)
    data["training"] = [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "deadline_month": 0,
                         "profiles": [{"gpu": "L4", "gpus": 1, "hours": 10}]}]
    pr = load_problem(write_problem(tmp_path, data, "t.yaml"))
    assert presolve.presolve(pr, build_candidates(pr)).merged == {}


def test_bounds_are_finite_and_respect_demand():
    pr = problem(scale=0.05, seed=0, weeks=2, regions=1)
    model = presolve.build(pr, build_candidates(pr))
    rep = model.mip.variables["inference-replicas"]
    assert (rep.upper < float("inf")).all()
    run = model.mip.variables["units-running"]
    assert (run.upper < float("inf")).all()
