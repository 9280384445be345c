"""One infeasible problem per culprit kind: the diagnosis names it, with the amount.

The amounts are worked out by hand beside each fixture (docs/diagnosis.md
explains the pre-checks and the elastic model that find them).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import write_problem
from optimizer.solve.backends import Status
from optimizer.cli import main
from optimizer.studies.diagnose import diagnose
from optimizer.studies.precheck import KEYS, precheck
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.pipeline import run

P1 = [{"name": "p1", "hours": 100, "month": 0}]
P2 = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 0}]


def od(id="od", price=80.0, gpu="H100-SXM", G=8, region="r1", **extra):
    return {"id": id, "gpu": gpu, "gpus_per_unit": G, "region": region, "pricing": "on_demand",
            "price_per_hour": price, **extra}


def svc(name="chat", demand=10.0, gpu="H100-SXM", gpus=2, rps=1.0, **extra):
    return {"name": name, "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
            "demand_rps": demand, "profiles": [{"gpu": gpu, "gpus": gpus, "rps": rps}], **extra}


def job(name="ft", hours=150.0, gpus=8, **extra):
    return {"name": name, "model": "llama-3.1-8b", "tokens": 1e9, "deadline_month": 0,
            "profiles": [{"gpu": "H100-SXM", "gpus": gpus, "hours": hours}], **extra}


def diagnosis_of(tmp_path, data) -> list[dict]:
    plan = run(load_problem(write_problem(tmp_path, data)))
    assert plan.status == Status.INFEASIBLE
    assert plan.diagnosis, "an infeasible plan always carries a diagnosis"
    for d in plan.diagnosis:
        assert set(KEYS) <= set(d) and d["message"]
    return plan.diagnosis


def only(diag: list[dict], kind: str) -> dict:
    hits = [d for d in diag if d["kind"] == kind]
    assert len(hits) == 1, diag
    return hits[0]


def test_demand_shortfall_and_the_quota_that_causes_it(tmp_path):
    # One 8-GPU unit allowed = 4 replicas of 2 GPUs at 1 rps: 4 of 10 rps; 6 rps short in p1.
    # 10 replicas need 20 GPUs = 3 units: max_units 1 is 2 units short.
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(max_units=1)], "inference": [svc()]})
    d = only(diag, "demand")
    assert (d["workload"], d["period"], d["unit"]) == ("chat", "p1", "rps")
    assert d["amount"] == pytest.approx(6.0)
    c = only(diag, "capacity")
    assert c["offering"] == "od" and c["amount"] == 2 and c["unit"] == "units"
    assert "offerings[od].max_units" in c["message"]


def test_demand_shortfall_per_period(tmp_path):
    # p1 asks 10 rps, p2 5 rps; 4 rps fit: 6 short in p1, 1 short in p2
    diag = diagnosis_of(tmp_path, {"periods": P2, "offerings": [od(max_units=1)],
                                   "inference": [svc(demand={"p1": 10, "p2": 5})]})
    short = {d["period"]: d["amount"] for d in diag if d["kind"] == "demand"}
    assert short == pytest.approx({"p1": 6.0, "p2": 1.0})


def test_training_hours_missing_when_inference_holds_the_capacity(tmp_path):
    # One unit in both periods (month 0). Inference needs the whole unit in p1 (4 replicas × 2 GPUs),
    # so the 150 h job runs only in p2: 100 h, 50 h missing. Dropping p1's demand instead would cost a
    # relative shortfall of 1 (all of it) against 50/150 for training: training is the smaller relaxation.
    diag = diagnosis_of(tmp_path, {"periods": P2, "offerings": [od(max_units=1)],
                                   "inference": [svc(demand={"p1": 4, "p2": 0})], "training": [job()]})
    d = only(diag, "training")
    # 50 of the job's 150 h: a third of the job
    assert d["workload"] == "ft" and d["unit"] == "share of the job" and d["amount"] == pytest.approx(50 / 150)
    assert not [x for x in diag if x["kind"] == "demand"]
    assert only(diag, "capacity")["amount"] == 1


def test_training_window_too_short_is_a_precheck(tmp_path):
    # 300 h on its only configuration, but month 0 has 100 h: 200 h missing, no solver needed
    data = {"periods": P1, "offerings": [od()], "training": [job(hours=300)]}
    pr = load_problem(write_problem(tmp_path, data))
    pre = precheck(pr, build_candidates(pr))
    d = only(pre, "training")
    # 200 of its 300 h cannot run: two thirds of the job
    assert d["workload"] == "ft" and d["amount"] == pytest.approx(200 / 300)
    assert "deadline_month" in d["message"] and "33.3 %" in d["message"]
    assert only(diagnosis_of(tmp_path, data), "training")["amount"] == pytest.approx(200 / 300)


def test_budget_names_the_least_cost(tmp_path):
    # 10 replicas = 3 units × 80 $/h × 100 h = 24,000 > budget 20,000
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od()], "inference": [svc()],
                                   "constraints": {"budget": 20_000}})
    d = only(diag, "budget")
    assert d["amount"] == pytest.approx(24_000) and d["unit"] == "USD"
    assert d["excess"] == pytest.approx(4_000)
    assert "constraints.budget" in d["message"] and "24,000" in d["message"]
    assert len(diag) == 1


def test_budget_and_demand_together(tmp_path):
    # Quota 1 unit: 6 rps short; the 4 rps that fit cost 1 × 80 × 100 = 8,000 > budget 5,000
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(max_units=1)], "inference": [svc()],
                                   "constraints": {"budget": 5_000}})
    assert only(diag, "demand")["amount"] == pytest.approx(6.0)
    assert only(diag, "budget")["amount"] == pytest.approx(8_000)


def test_region_with_no_usable_gpu_type(tmp_path):
    # the service may run only in r2, where the only offering is a T4; its profile needs H100s
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(), od(id="t4", gpu="T4", G=4, region="r2")],
                                   "inference": [svc(regions=["r2"])]})
    d = only(diag, "region")
    assert d["workload"] == "chat" and d["region"] == "r2" and d["amount"] == pytest.approx(10.0)
    assert "T4" in d["message"] and "H100-SXM" in d["message"]


def test_region_with_only_spot(tmp_path):
    spot = {**od(id="sp", region="r2"), "pricing": "spot"}
    d = only(diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(), spot], "inference": [svc(regions=["r2"])]}),
             "region")
    assert "spot" in d["message"]


def test_training_region_with_no_usable_offering(tmp_path):
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(), od(id="t4", gpu="T4", G=4, region="r2")],
                                   "training": [job(regions=["r2"])]})
    # r2 has only T4s; the H100 offering that could hold the cluster is in r1
    d = only(diag, "region")
    assert d["workload"] == "ft" and d["offerings_ruled_out"] == [{"offering": "od",
                                                                   "reason": "region r1 is not in its regions"}]
    assert not [x for x in diag if x["kind"] == "training"]  # the root cause is enough


def test_model_that_fits_no_gpu_names_the_vram(tmp_path):
    # llama-3.1-405b in bf16 on 24 GB L4s: even 8-way tensor parallel needs ~100 GB per GPU
    diag = diagnosis_of(tmp_path, {
        "periods": P1, "offerings": [od(gpu="L4", G=8, price=1)],
        "inference": [{"name": "big", "model": "llama-3.1-405b", "prompt_tokens": 1000, "output_tokens": 100,
                       "precisions": ["bf16"], "demand_rps": 1}]})
    d = only(diag, "no-fit")
    assert d["workload"] == "big" and d["unit"] == "GB per GPU"
    assert d["amount"] > 24  # more than an L4 holds
    assert "L4" in d["message"] and "bf16" in d["message"]


def test_training_model_that_fits_no_gpu_is_not_silently_dropped(tmp_path):
    # before the pre-checks, a job with no candidate was left out of the MIP: "optimal" at cost 0
    diag = diagnosis_of(tmp_path, {
        "periods": P1, "offerings": [od(gpu="A100-40GB", G=1, price=1)],
        "training": [{"name": "big", "model": "llama-3.1-405b", "tokens": 1e9, "deadline_month": 0,
                      "cluster_gpus": [1]}]})
    d = only(diag, "no-fit")
    assert d["workload"] == "big" and d["amount"] > 40 and d["unit"] == "GB per GPU"


def test_slo_no_batch_meets(tmp_path):
    d = only(diagnosis_of(tmp_path, {
        "periods": P1, "offerings": [od(gpu="L4", G=1, price=1)],
        "inference": [{"name": "s", "model": "llama-3.1-8b", "prompt_tokens": 1000, "output_tokens": 100,
                       "demand_rps": 1, "slo": {"ttft_ms": 1}}]}), "slo")
    assert d["workload"] == "s" and "slo" in d["message"]


def test_min_replicas(tmp_path):
    # one unit holds 4 two-GPU replicas; min_replicas 6 leaves 2 unplaced
    diag = diagnosis_of(tmp_path, {"periods": P1, "offerings": [od(max_units=1)],
                                   "inference": [svc(demand=1, min_replicas=6)]})
    d = only(diag, "min-replicas")
    assert d["period"] == "p1" and d["amount"] == pytest.approx(2.0)


def test_diagnose_directly_and_through_the_cli(tmp_path):
    data = {"periods": P1, "offerings": [od(max_units=1)], "inference": [svc()]}
    path = write_problem(tmp_path, data)
    pr = load_problem(path)
    assert only(diagnose(pr, build_candidates(pr)), "demand")["amount"] == pytest.approx(6.0)
    r = CliRunner().invoke(main, ["solve", str(path), "--format", "json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["status"] == "infeasible"
    assert [d["kind"] for d in out["diagnosis"]] == ["demand", "capacity"]
    r = CliRunner().invoke(main, ["solve", str(path)])
    assert r.exit_code == 1 and "Why there is no plan" in r.stdout and "6 of the 10 rps" in r.stdout


def test_feasible_plans_carry_an_empty_diagnosis(tmp_path):
    path = write_problem(tmp_path, {"periods": P1, "offerings": [od()], "inference": [svc()]})
    r = CliRunner().invoke(main, ["solve", str(path), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["diagnosis"] == []
