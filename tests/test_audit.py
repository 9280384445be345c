"""The audit catches what it is there to catch.

Every test that produces a plan asserts ``audit(plan) == []``; that is only a
check if the audit does find a broken plan. Each case here solves a small
problem (the audit passes), breaks one thing in a copy of the plan's rows and
expects the audit to name it.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pandas as pd
import pytest

from optimizer.audit import audit
from test_known_answers import BUCKETS, SHARED, od

# test_known_answers.SHARED (reserved unit at 10 $/h beside inference, a 4-GPU training cluster, optimum 4,000)
# with offerings the optimum never uses, so that rows can be moved onto them: another region, spot, another
# GPU type; the service keeps to region r1 and at least one replica.
DATA = copy.deepcopy(SHARED)
DATA["offerings"] += [od(id="far", price=100, region="r2"),
                      {**od(id="sp", price=100), "pricing": "spot", "interruptions_per_hour": 0.01},
                      od(id="l4", gpu="L4", price=100)]
DATA["offerings"][1].update(max_units=2, fabric="infiniband", fabric_gbps_per_gpu=400, max_cluster_units=4)
# (the on-demand offering: at most two 8-GPU units, joined by InfiniBand)
DATA["inference"][0].update(regions=["r1"], min_replicas=1)
DATA["training"][0]["regions"] = ["r1"]
# a second configuration the optimum does not pick: 8 GPUs cannot sit beside p2's inference on the reserved
# unit, so it would rent 8 × 12.5 $/GPU-h × 80 h = 8,000
DATA["training"][0]["cluster_gpus"] = [4, 8]
DATA["training"][0]["profiles"].append({"gpu": "H100-SXM", "gpus": 8, "hours": 80})


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    from conftest import solve_data

    plan = solve_data(tmp_path_factory.mktemp("shared"), copy.deepcopy(DATA))
    assert plan.objective == pytest.approx(4_000)
    return plan


@pytest.fixture(scope="module")
def buckets(tmp_path_factory):
    from conftest import solve_data

    plan = solve_data(tmp_path_factory.mktemp("buckets"), copy.deepcopy(BUCKETS))
    assert plan.objective == pytest.approx(60)
    return plan


def broken(plan, table: str, where: dict, **set_to):
    """A copy of ``plan`` whose ``table`` rows matching ``where`` get ``set_to`` (``drop=True``: removed)."""
    df = getattr(plan, table).copy()
    hit = np.ones(len(df), bool)
    for k, v in where.items():
        hit &= (df[k] == v).to_numpy()
    assert hit.any(), (table, where)
    if set_to.get("drop"):
        df = df[~hit]
    else:
        for k, v in set_to.items():
            df.loc[hit, k] = v
    return dataclasses.replace(plan, **{table: df})


def expect(plan, text: str) -> None:
    found = audit(plan)
    assert any(text in v for v in found), found


def test_the_solved_plans_pass(shared, buckets):
    assert audit(shared) == [] and audit(buckets) == []


@pytest.mark.parametrize("mutation, text", [
    # one replica fewer in p1: 1 rps served against 2 demanded
    (("inference", {"period": "p1"}, {"replicas": 1, "gpus": 4}), "inference chat/p1: capacity 1 rps < demand 2"),
    # p2's replica gone: below the floor and the demand
    (("inference", {"period": "p2"}, {"drop": True}), "inference chat/p2: 0 replicas < min 1"),
    (("inference", {"period": "p1"}, {"offering": "far"}), "inference chat: region r2 not allowed"),
    (("inference", {"period": "p1"}, {"offering": "sp"}), "inference chat: on spot without spot: true"),
    (("inference", {"period": "p1"}, {"offering": "l4"}), "config GPU H100-SXM on offering of L4"),
    (("training", {"job": "ft"}, {"hours": 160.0}), "training ft: 106.6667 % of the job done, not 100 %"),
    (("training", {"job": "ft"}, {"hours": 250.0}), "training ft/p2: 250 h in a 200 h period"),
    (("training", {"job": "ft"}, {"offering": "far"}), "training ft: region r2 not allowed"),
    # the reservation gone: what runs on it has no capacity
    (("commitments", {"offering": "res"}, {"units": 0}), "capacity res/p1: 8 GPUs used > 0 held"),
    # an 8-GPU cluster beside p2's 4 inference GPUs on the 8-GPU unit
    (("training", {"job": "ft"}, {"gpus": 8}), "training-fit ft on res/p2: cluster 8 GPUs > 4 free"),
    (("commitments", {"offering": "res"}, {"units": 2}), "units res: 2 > max_units 1"),
    # a 24-GPU cluster on the on-demand offering (3 units; its quota is 2) inside units nobody rented
    (("training", {"job": "ft"}, {"offering": "od", "gpus": 24}), "training-fit ft on od/p2: cluster 24 GPUs > 0 free"),
    (("training", {"job": "ft"}, {"offering": "od", "gpus": 24, "mode": "hourly", "billed_units": 3}),
     "quota od/p2: 0 running + cluster 3 > max_units"),
    # the same cluster where no fabric joins the machines
    (("training", {"job": "ft"}, {"offering": "sp", "gpus": 24}), "topology ft on sp: 24 GPUs span 3 machines"),
    (("ledger", {"item": "reservation", "period": "p1"}, {"cost": 1000.0}), "recomputed 4000.000000 != ledger 3000"),
])
def test_a_broken_shared_plan_is_caught(shared, mutation, text):
    table, where, set_to = mutation
    expect(broken(shared, table, where, **set_to), text)


def test_two_configurations_of_one_job_are_caught(shared):
    other = set(shared.candidates.training.query("job == 'ft'")["config"]) - set(shared.training["config"])
    assert len(other) == 1
    two = dataclasses.replace(shared, training=pd.concat(
        [shared.training, shared.training.assign(config=other.pop(), hours=0.0)], ignore_index=True))
    expect(two, "training ft: 2 configurations used (must be exactly one)")


def test_training_outside_its_window_is_caught(shared):
    jobs = [j.model_copy(update={"start_month": 1}) for j in shared.problem.jobs]
    late = dataclasses.replace(shared, problem=dataclasses.replace(shared.problem, jobs=jobs))
    expect(broken(late, "training", {"job": "ft"}, period="p1"), "training ft: runs in month 0 outside 1..1")


def test_a_budget_below_the_plan_is_caught(shared):
    spec = shared.problem.spec
    spec = spec.model_copy(update={"constraints": spec.constraints.model_copy(update={"budget": 3_999.0})})
    tight = dataclasses.replace(shared, problem=dataclasses.replace(shared.problem, spec=spec))
    expect(tight, "budget: objective 4000 > budget 3999")


@pytest.mark.parametrize("mutation, text", [
    # b4 (1 rps) routed nowhere
    (("routing", {"bucket": "b4"}, {"rps": 0.0}), "inference assistant/b4/p1: routed 0 < demand 1"),
    # the H100 replica gone while b3 and b4 are still routed to it
    (("inference", {"offering": "h100"}, {"drop": True}), "routed load 1 replicas > 0"),
    # one L4 unit rented for two 1-GPU replicas
    (("usage", {"offering": "l4"}, {"units": 1.0}), "capacity l4/p1: 2 GPUs used > 1 held"),
])
def test_a_broken_bucket_plan_is_caught(buckets, mutation, text):
    table, where, set_to = mutation
    expect(broken(buckets, table, where, **set_to), text)


def test_a_service_on_more_configurations_than_allowed_is_caught(tmp_path):
    from conftest import solve_data
    from test_executable_plans import FLIP

    plan = solve_data(tmp_path, copy.deepcopy(FLIP))
    inf = plan.inference
    other = set(plan.candidates.inference["config"]) - set(inf["config"])
    extra = inf[inf["period"] == "p2"].assign(config=other.pop())
    expect(dataclasses.replace(plan, inference=pd.concat([inf, extra], ignore_index=True)),
           "stability chat/all: 2 configurations > max_configurations 1")


# --- bugs planted in the model's formulas: the audit, which has its own, names them ----------------

def test_a_reservation_priced_wrong_in_the_model_is_caught(tmp_path, monkeypatch):
    from conftest import write_problem
    from optimizer.load import load_problem
    from optimizer.model import formulation
    from optimizer.pipeline import run
    from test_executable_plans import RESERVED_1Y, quarter

    real = formulation.reserved_unit_costs
    monkeypatch.setattr(formulation, "reserved_unit_costs", lambda *a: 0.5 * real(*a))
    plan = run(load_problem(write_problem(tmp_path, quarter(RESERVED_1Y, "horizon"))), solver="highs")
    assert any("solver" in v for v in plan.audit), plan.audit


def test_spot_waste_wrong_in_the_model_is_caught(tmp_path, monkeypatch):
    from conftest import write_problem
    from optimizer.load import load_problem
    from optimizer.model import formulation
    from optimizer.pipeline import run
    from test_backends_agree import SPOT_TRAINING

    monkeypatch.setattr(formulation, "spot_waste", lambda *a, **k: 0.0 * formulation.np.asarray(a[0], float))
    plan = run(load_problem(write_problem(tmp_path, copy.deepcopy(SPOT_TRAINING))), solver="highs")
    assert any("% of the job done" in v for v in plan.audit), plan.audit


def test_a_cluster_joined_without_fabric_in_the_model_is_caught(tmp_path, monkeypatch):
    # the placement rule broken in the model (every offering treated as fabric-joined): the audit's own
    # topology check refuses the plan the solver then finds
    from conftest import write_problem
    from optimizer.load import load_problem
    from optimizer.model import formulation
    from optimizer.pipeline import run
    from test_executable_plans import NODE, VM, job

    real = formulation.training_placements

    def no_topology(tc, O):
        return real(tc, O.assign(fabric_gbps_per_gpu=400.0, max_cluster_units=1e9))

    monkeypatch.setattr(formulation, "training_placements", no_topology)
    data = {"periods": [{"name": "m0", "hours": 730, "month": 0}], "offerings": [VM, NODE],
            "training": [job(64, 100)]}
    plan = run(load_problem(write_problem(tmp_path, data)), solver="highs")
    assert any(v.startswith("topology ft on vm") for v in plan.audit), plan.audit
