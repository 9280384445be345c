"""Properties over random small problems (hypothesis).

Every plan passes the audit; and the optimum moves the right way when the
input changes: a higher price never lowers the cost, another offering never
raises it, less demand never raises it. Problems are small (measured
profiles, one or two periods) so each solve takes milliseconds; the example
counts are bounded so the file runs in seconds.
"""

from __future__ import annotations

import copy
import tempfile
from unittest import mock
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_audited
from optimizer.solve.backends import Status
from optimizer.load import load_problem
from optimizer.pipeline import run

SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GPUS = ("H100-SXM", "L4")


@st.composite
def offerings(draw, oid: str):
    gpu = draw(st.sampled_from(GPUS))
    G = draw(st.sampled_from([1, 2, 4, 8]))
    kind = draw(st.sampled_from(["on_demand", "on_demand", "spot", "reserved", "owned"]))
    o = {"id": oid, "gpu": gpu, "gpus_per_unit": G, "region": draw(st.sampled_from(["r1", "r1", "r2"])),
         "pricing": kind}
    if draw(st.booleans()):
        o["max_units"] = draw(st.integers(0, 4))
    if kind == "owned":
        o.update(capex=float(draw(st.integers(1, 50))) * 1000 * G, lifetime_years=draw(st.sampled_from([1, 3, 4])),
                 power_kw=0.7 * G, electricity_per_kwh=0.1, fixed_per_month=float(draw(st.integers(0, 500))),
                 idle_power_fraction=0.3)
        if draw(st.booleans()):
            o["existing_units"] = min(draw(st.integers(0, 2)), o.get("max_units", 2))
    else:
        o["price_per_hour"] = float(draw(st.integers(1, 40))) * G
        if kind == "reserved":
            o["term_months"] = draw(st.sampled_from([1, 12]))
        if kind == "spot":
            o["interruptions_per_hour"] = draw(st.sampled_from([0.001, 0.01, 0.05]))
    return o


@st.composite
def problems(draw):
    two = draw(st.booleans())
    periods = [{"name": "p1", "hours": float(draw(st.sampled_from([50, 100, 300]))), "month": 0}]
    if two:
        periods.append({"name": "p2", "hours": float(draw(st.sampled_from([50, 100, 300]))),
                        "month": draw(st.integers(0, 1))})
    names = [p["name"] for p in periods]
    offs = [draw(offerings(f"o{i}")) for i in range(draw(st.integers(1, 3)))]
    services = []
    for k in range(draw(st.integers(1, 2))):
        gpu = draw(st.sampled_from(GPUS))
        s = {"name": f"s{k}", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
             "demand_rps": {p: float(draw(st.integers(0, 12))) for p in names},
             "profiles": [{"gpu": gpu, "gpus": draw(st.sampled_from([1, 2])),
                           "rps": float(draw(st.sampled_from([0.5, 1.0, 2.5])))}],
             "spot": draw(st.booleans())}
        if draw(st.booleans()):
            s["min_replicas"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            s["regions"] = ["r1"]
        services.append(s)
    data = {"periods": periods, "offerings": offs, "inference": services}
    if draw(st.booleans()):
        data["training"] = [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9,
                             "deadline_month": max(p["month"] for p in periods), "spot": draw(st.booleans()),
                             "profiles": [{"gpu": draw(st.sampled_from(GPUS)), "gpus": draw(st.sampled_from([2, 8])),
                                           "hours": float(draw(st.integers(5, 150)))}]}]
    regions = {o["region"] for o in offs}
    for s in services:  # regions must name a region some offering is in
        if "regions" in s and not set(s["regions"]) <= regions:
            del s["regions"]
    return data


def solve(data: dict, diagnose: bool = True):
    """Solve and audit; the base problem of each example is diagnosed when infeasible (the changed
    one is not, to keep the run short)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        if diagnose:
            plan = run(load_problem(path), gap=1e-9)
        else:
            with mock.patch("optimizer.pipeline.diagnose", lambda *a, **k: []):
                plan = run(load_problem(path), gap=1e-9)
    assert plan.status in (Status.OPTIMAL, Status.INFEASIBLE), (plan.status, plan.result.message)
    assert_audited(plan)
    if plan.status == Status.INFEASIBLE and diagnose:
        kinds = {d["kind"] for d in plan.diagnosis}
        assert kinds and "unknown" not in kinds, plan.diagnosis
    return plan


def cost(plan) -> float | None:
    return plan.objective if plan.status.has_plan else None


def tol(x: float) -> float:
    return 1e-6 * max(1.0, abs(x))


@SETTINGS
@given(problems(), st.data())
def test_higher_price_never_lowers_the_cost(data, draw):
    base = solve(data)
    dearer = copy.deepcopy(data)
    o = dearer["offerings"][draw.draw(st.integers(0, len(dearer["offerings"]) - 1))]
    factor = draw.draw(st.sampled_from([1.25, 2.0, 10.0]))
    o["capex" if o["pricing"] == "owned" else "price_per_hour"] *= factor
    after = solve(dearer, diagnose=False)
    assert after.status == base.status  # prices never change what is feasible
    if base.status.has_plan:
        assert cost(after) >= cost(base) - tol(cost(base))


@SETTINGS
@given(problems(), st.data())
def test_another_offering_never_raises_the_cost(data, draw):
    base = solve(data)
    more = copy.deepcopy(data)
    more["offerings"].append(draw.draw(offerings("extra")))
    after = solve(more, diagnose=False)
    if base.status.has_plan:
        assert after.status.has_plan
        assert cost(after) <= cost(base) + tol(cost(base))


@SETTINGS
@given(problems(), st.data())
def test_less_demand_never_raises_the_cost(data, draw):
    base = solve(data)
    less = copy.deepcopy(data)
    s = less["inference"][draw.draw(st.integers(0, len(less["inference"]) - 1))]
    p = draw.draw(st.sampled_from(sorted(s["demand_rps"])))
    s["demand_rps"][p] *= draw.draw(st.sampled_from([0.0, 0.5]))
    after = solve(less, diagnose=False)
    if base.status.has_plan:
        assert after.status.has_plan
        assert cost(after) <= cost(base) + tol(cost(base))
