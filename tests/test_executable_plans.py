"""Plans a team can execute: cluster topology, whole-unit billing, commitments after the horizon,
stable fleets, and buying or long terms only when the problem allows them.

Each optimum is worked out by hand in the comment beside it; every plan goes
through the audit (conftest.solve_data), which recomputes the topology,
quota, stability and cost rules with formulas of its own.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pandas as pd

import pytest

from conftest import write_problem, patch_driver
from optimizer.load import load_problem
from optimizer.solve.backends import Status

from test_known_answers import od, svc
from optimizer.solve import beside, fixed, proofs, relaxations

def spy_on_solves(monkeypatch, spy) -> None:
    """Route every back-end solve of the driver and of the split (its leaves, in this process) through ``spy``.

    The first-plan guesses that HiGHS searches side by side (``fixed.first_plan``) go through ``spy`` one
    after the other, each with the whole time, the first with a plan taken: what the side-by-side search
    returns when the guesses' first plans come in that order (tests/test_mip.py tests it itself).
    """
    from optimizer.solve import split

    patch_driver(monkeypatch, "backend_solve", spy)
    monkeypatch.setattr(split, "backend_solve", spy)

    def one_after_the_other(arrays, time_limit, gap, threads=None):
        out = None
        for i, b in enumerate(arrays):
            out = spy(None, solver="highs", time_limit=time_limit, gap=gap, threads=threads, arrays=b, target=np.inf)
            if out.status.has_plan:
                return i, out
        return None, out

    patch_driver(monkeypatch, "first_plan", one_after_the_other)


def spy_on_fixed_path(monkeypatch) -> list[tuple]:
    """Every hand-over to the driver's fixed-configuration path, as (its ``source``, its ``search``), in order."""

    handed = []
    real = fixed.fixed_configurations

    def spy(*args, **kw):
        handed.append((kw.get("source"), kw.get("search")))
        return real(*args, **kw)

    patch_driver(monkeypatch, "fixed_configurations", spy)
    return handed


MONTH = [{"name": "m0", "hours": 730, "month": 0}]
QUARTER = [{"name": f"m{i}", "hours": 730, "month": i} for i in range(3)]


def job(gpus: int, hours: float, **extra) -> dict:
    return {"name": "ft", "model": "llama-3.1-70b", "tokens": 1e9, "deadline_month": 0,
            "cluster_gpus": [gpus], "profiles": [{"gpu": "H100-SXM", "gpus": gpus, "hours": hours}], **extra}


# --- cluster topology ----------------------------------------------------------------

VM = od(id="vm", price=2.0, G=1)  # single-GPU VMs, no fabric stated: each VM stands alone
MARKET = od(id="host", price=12.0, G=8, max_units=1)  # a marketplace host: one machine, no fabric
NODE = od(id="node", price=40.0, G=8, fabric="efa", fabric_gbps_per_gpu=400, max_cluster_units=16)


def test_a_64_gpu_job_is_never_assembled_from_unjoined_machines(solve):
    # 64 GPUs for 100 h. Joined from 64 single-GPU VMs it would cost 64 × 2 × 100 = 12,800, from marketplace
    # hosts 8 × 12 × 100 = 9,600 (if there were 8 of them), but neither has a fabric between machines.
    # The only executable placement: 8 EFA-joined nodes, 8 × 40 × 100 = 32,000.
    data = {"periods": MONTH, "offerings": [VM, {**MARKET, "max_units": None}, NODE], "training": [job(64, 100)]}
    data["offerings"][1].pop("max_units")
    plan = solve(data)
    assert plan.status == Status.OPTIMAL
    assert plan.objective == pytest.approx(32_000)
    assert set(plan.training["offering"]) == {"node"}


def test_a_job_that_fits_one_machine_may_use_a_machine_without_fabric(solve):
    # 8 GPUs fit on one marketplace host: 12 × 100 = 1,200 beats the node (40 × 100 = 4,000).
    plan = solve({"periods": MONTH, "offerings": [MARKET, NODE], "training": [job(8, 100)]})
    assert plan.objective == pytest.approx(1_200)
    assert set(plan.training["offering"]) == {"host"}


def test_a_cluster_larger_than_max_cluster_units_has_no_plan_and_the_diagnosis_names_the_limit(solve):
    # 64 GPUs span 8 nodes of 8; the fabric joins at most 4: no offering can hold the cluster.
    node = {**NODE, "max_cluster_units": 4}
    plan = solve({"periods": MONTH, "offerings": [VM, node], "training": [job(64, 100)]})
    assert plan.status == Status.INFEASIBLE
    text = " ".join(d["message"] for d in plan.diagnosis)
    assert "max_cluster_units" in text and "node" in text
    assert "vm" in text  # and why the VMs were ruled out too


def test_a_cluster_spans_one_region(solve):
    # 16 GPUs, quota 1 node in each of two regions: no one region holds 2 nodes, so no plan.
    a = {**NODE, "id": "a", "max_units": 1}
    b = {**NODE, "id": "b", "region": "r2", "max_units": 1}
    plan = solve({"periods": MONTH, "offerings": [a, b], "training": [job(16, 10)]})
    assert plan.status == Status.INFEASIBLE


# --- whole instances ------------------------------------------------------------------

def test_a_4_gpu_job_on_an_8_gpu_rented_unit_pays_the_whole_unit(solve):
    # 4 GPUs for 100 h on an 8-GPU unit at 55.04 $/h: the cloud rents whole units, 55.04 × 100 = 5,504
    # (not 4/8 of it, 2,752).
    plan = solve({"periods": MONTH, "offerings": [od(price=55.04)], "training": [job(4, 100)]})
    assert plan.objective == pytest.approx(5_504)
    # sold by the GPU (billing: per_gpu), the same job pays for its 4 GPUs: 4 × 55.04/8 × 100 = 2,752
    plan = solve({"periods": MONTH, "offerings": [od(price=55.04, billing="per_gpu")], "training": [job(4, 100)]})
    assert plan.objective == pytest.approx(2_752)


def test_the_rest_of_a_rented_unit_serves_inference(solve):
    # One period of 100 h; an 8-GPU on-demand unit at 80 $/h. Inference: two 2-GPU replicas (4 GPUs).
    # Training: a 4-GPU cluster for the whole 100 h. Both fit one unit: 80 × 100 = 8,000
    # (separately: one unit for inference and one billed by the hour for the job, 16,000).
    data = {"periods": [{"name": "p1", "hours": 100, "month": 0}], "offerings": [od()],
            "inference": [svc(demand=2)], "training": [job(4, 100)]}
    plan = solve(data)
    assert plan.objective == pytest.approx(8_000)


# --- commitments after the horizon ----------------------------------------------------------

# Three months of 730 h. One 8-GPU unit serves four 2-GPU replicas every month.
# On demand: 30 $/h × 2,190 h = 65,700.
RESERVED_1Y = {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
               "price_per_hour": 20, "term_months": 12}
SERVER = {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "owned",
          "capex": 200_000, "lifetime_years": 4, "residual_fraction": 0.1, "power_kw": 0.0,
          "electricity_per_kwh": 0.0, "fixed_per_month": 0.0}


def quarter(offering: dict, commitments: str) -> dict:
    return {"periods": QUARTER, "offerings": [od(price=30), offering], "inference": [svc(demand=4)],
            "finance": {"commitments": commitments}}


def test_a_one_year_reservation_over_a_quarter(solve):
    # horizon: the quarter's hours, 20 × 2,190 = 43,800 < 65,700: reserve. The horizon ends at month 3,
    # so 9 of the 12 months are left: 20 $/h × 730 h × 9 = 131,400 still owed, reported and warned about.
    plan = solve(quarter(RESERVED_1Y, "horizon"))
    assert plan.objective == pytest.approx(43_800)
    c = plan.commitments.set_index("offering")
    assert c.loc["res", "months_after_horizon"] == pytest.approx(9)
    assert c.loc["res", "owed_after_horizon"] == pytest.approx(131_400)
    assert plan.after_horizon()["owed_after_horizon"] == pytest.approx(131_400)
    assert any("131,400" in w and "res" in w for w in plan.warnings)
    # full: the whole term, 43,800 + 131,400 = 175,200 > 65,700: rent on demand and commit nothing
    plan = solve(quarter(RESERVED_1Y, "full"))
    assert plan.objective == pytest.approx(65_700)
    assert plan.commitments.empty and plan.after_horizon()["owed_after_horizon"] == 0


def test_one_purchased_server_over_a_quarter(solve):
    # horizon: depreciation of the quarter's share, 200,000 × 0.9 × 2,190 / 35,040 = 11,250 < 65,700: buy.
    # Cash spent 200,000; book value at the end 200,000 × (1 − 0.9 × 2,190/35,040) = 188,750.
    plan = solve(quarter(SERVER, "horizon"))
    assert plan.objective == pytest.approx(11_250)
    after = plan.after_horizon()
    assert after["capex_spent"] == pytest.approx(200_000)
    assert after["book_value_at_end"] == pytest.approx(188_750)
    assert any("own" in w and "188,750" in w for w in plan.warnings)
    # full: the purchase less its resale at the end of its life, 200,000 × (1 − 0.1) = 180,000 > 65,700: rent
    plan = solve(quarter(SERVER, "full"))
    assert plan.objective == pytest.approx(65_700)
    # with a dearer rental (100 $/h: 219,000) buying pays even for the whole purchase: 180,000
    data = quarter(SERVER, "full")
    data["offerings"][0]["price_per_hour"] = 100
    plan = solve(data)
    assert plan.objective == pytest.approx(180_000)
    items = plan.ledger.groupby("item")["cost"].sum()
    assert items[items != 0].to_dict() == pytest.approx(
        {"depreciation": 11_250, "depreciation-after-horizon": 168_750})


# --- stable fleets ------------------------------------------------------------------------------

# Two periods of 100 h. Configuration A: one L4 at 1 $/h serves 1 rps; configuration B: 8 H100 at 6 $/h
# for the unit serve 10 rps. Demand 1 rps in p1 and 10 rps in p2.
# Free to switch: p1 A (100), p2 B (600) = 700. One configuration: A in both, 100 + 10 × 100 = 1,100;
# B in both, 600 + 600 = 1,200. So 1,100, and the price of stability is 400.
FLIP = {"periods": [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}],
        "offerings": [od(id="l4", gpu="L4", G=1, price=1.0), od(id="h100", price=6.0)],
        "inference": [{"name": "chat", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
                       "demand_rps": {"p1": 1, "p2": 10},
                       "profiles": [{"gpu": "L4", "gpus": 1, "rps": 1.0},
                                    {"gpu": "H100-SXM", "gpus": 8, "rps": 10.0}]}]}


def test_a_service_stays_on_one_configuration_by_default(solve):
    plan = solve(copy.deepcopy(FLIP))
    assert plan.objective == pytest.approx(1_100)
    assert plan.inference["gpu"].unique().tolist() == ["L4"]
    free = copy.deepcopy(FLIP)
    free["stability"] = {"max_configurations": 2}
    plan = solve(free)
    assert plan.objective == pytest.approx(700)  # 1,100 − 700 = 400, the price of stability


def test_a_replica_start_cost_prices_the_change(solve):
    # Two configurations allowed; a replica started costs S (starts are counted from one period to the
    # next, so p1's fleet is free). The options: A in both, 1,100 + 9 starts × S; B in both, 1,200 and no
    # start; A then B, 700 + 1 start × S.
    # S = 150: A then B, 850 (against 2,450 and 1,200).  S = 600: B in both, 1,200 (A then B 1,300; A 6,500).
    data = copy.deepcopy(FLIP)
    data["stability"] = {"max_configurations": 2, "replica_start_cost": 150}
    assert solve(data).objective == pytest.approx(850)
    data["stability"]["replica_start_cost"] = 600
    plan = solve(data)
    assert plan.objective == pytest.approx(1_200)
    assert plan.inference["gpu"].unique().tolist() == ["H100-SXM"]


# --- buying and long terms are the user's choice ----------------------------------------------

def test_catalog_purchases_and_long_terms_need_allow(tmp_path):
    base = {"catalog": ["default"], "periods": MONTH,
            "inference": [svc(demand=1)]}
    pr = load_problem(write_problem(tmp_path, base))
    O, X = pr.offerings, pr.excluded
    catalog_owned = O.index[(O["pricing"] == "owned") & O["from_catalog"]]
    assert len(catalog_owned) == 0
    assert X["reason"].str.contains("allow.buy").any()
    allowed = {**base, "allow": {"buy": True, "reserved_terms_months": [12]}}
    pr = load_problem(write_problem(tmp_path, allowed, "allowed.yaml"))
    O = pr.offerings
    assert ((O["pricing"] == "owned") & O["from_catalog"]).any()
    long_terms = O[(O["pricing"] == "reserved") & O["from_catalog"]]["term_months"]
    assert len(long_terms) and set(long_terms) <= {12} | {t for t in long_terms if t <= 1}


def test_an_unknown_provider_is_an_input_error_with_a_suggestion(tmp_path):
    from optimizer.errors import InputError

    data = {"catalog": ["default"], "periods": MONTH, "inference": [svc(demand=1)],
            "providers": {"include": ["lambd"]}}
    with pytest.raises(InputError) as e:
        load_problem(write_problem(tmp_path, data))
    assert "lambda" in str(e.value)


def test_a_deadline_after_the_horizon_is_an_input_error(tmp_path):
    from optimizer.errors import InputError

    data = {"periods": MONTH, "offerings": [NODE], "training": [job(8, 10, deadline_month=5)]}
    with pytest.raises(InputError) as e:
        load_problem(write_problem(tmp_path, data))
    assert "deadline_month" in str(e.value) and "0" in str(e.value)


def test_the_stable_fleet_is_solved_in_stages_with_a_proof(solve):
    # Demand 1 rps in both periods: A in both (100 + 100 = 200) is the optimum with or without the limit.
    # Stage 1 (no limit) proves 200 as a bound, stage 2 (A only) reaches it: optimal without stage 3.
    easy = copy.deepcopy(FLIP)
    easy["inference"][0]["demand_rps"] = {"p1": 1, "p2": 1}
    plan = solve(easy)
    assert plan.objective == pytest.approx(200) and plan.result.bound == pytest.approx(200)
    assert "without stability limits" in plan.result.message
    # FLIP: stage 1 finds 700 (a bound) with chat on both A and B, over its limit of one. Every stable plan
    # uses A or B alone, so the stable model is solved once with A fixed (1,100) and once with B (1,200,
    # or cut off at 1,100): the cheaper, 1,100, with the lesser of the two bounds as its proof.
    plan = solve(copy.deepcopy(FLIP))
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_100)
    assert plan.result.bound == pytest.approx(1_100, rel=1e-6)
    assert "one stable solve per configuration of chat/all (2 configurations)" in plan.result.message


def test_a_known_plan_is_the_split_s_first_best_plan_and_does_not_start_the_guide(solve, monkeypatch):
    # FLIP with the H100 unit at 9.6 $/h: A (L4) in both periods 100 + 1,000 = 1,100; B (H100) in both
    # 2 x 960 = 1,920; A in p1 then B in p2, 100 + 960 = 1,060, breaks chat's limit of one configuration.
    # Handed its own optimum (1,100), the solve still guides from nothing: the model without limits finds
    # 1,060 and so names chat as the class to split on. Started from the known plan, within its 10 % of
    # 1,060, a search may stop on that plan, which breaks no limit and names no class (q3 handed its own
    # optimum took 122 s that way, against 16 s from nothing). The known plan is the split's first best
    # plan: A's leaf (LP 1,100: whole L4s, exact) is pruned at its cost, B's (LP 9.6 x 100 x (0.1 + 1) =
    # 1,056) searched under the cutoff 1,100 and nothing found below it (B in both periods costs 1,920).
    data = copy.deepcopy(FLIP)
    data["offerings"][1]["price_per_hour"] = 9.6
    plan = solve(copy.deepcopy(data))
    assert plan.objective == pytest.approx(1_100)
    from optimizer.solve import driver

    real, calls = driver.backend_solve, []

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw.get("start") is None, out.objective))
        return out

    spy_on_solves(monkeypatch, spy)
    again = solve(copy.deepcopy(data), known=[plan.result.x])
    assert again.status == Status.OPTIMAL and again.objective == pytest.approx(1_100)
    assert again.result.bound == pytest.approx(1_100, rel=1e-6)
    assert calls[0] == (True, pytest.approx(1_060))  # the guide, from nothing: the plan without limits
    assert ("one stable solve per configuration of chat/all (2 configurations): 1 solved, 1 pruned by their LP "
            "bound, none cheaper than the known plan, which is kept") in again.result.message


# Two weeks of one month (100 h each), chat on A (one L4, 1 $/h, 1 rps) or B (an 8-GPU H100 unit, 6 $/h,
# 10 rps), at most one configuration: where one month's model (the weeks merged, demand averaged by hours)
# chooses where the split branches.
WEEKS = [{"name": "w1", "hours": 100, "month": 0}, {"name": "w2", "hours": 100, "month": 0}]


def weeks(demand: dict) -> dict:
    data = copy.deepcopy(FLIP)
    data["periods"] = copy.deepcopy(WEEKS)
    data["inference"][0]["demand_rps"] = demand
    return data


def is_weekly_guide(mip, kw: dict) -> bool:
    """Whether a back-end solve with keywords ``kw`` searches ``mip`` without its stability limits (every
    configuration switched on): the weekly guide."""
    a = kw.get("arrays")
    ids = mip.variables["config-used"].ids if mip is not None and "config-used" in mip.variables else []
    return a is not None and len(ids) > 0 and bool((a.col_lo[ids] == 1).all())


def guide_solves(monkeypatch, held: bool = False) -> list:
    """Every search of the weekly model without stability limits (the weekly guide), as its result.

    ``held``: a guide searched beside (it has a ``stop`` event) starts only once told to stop, so that the
    monthly models always end first, whatever the machine's speed; it then ends at once, as a guide stopped
    early does."""
    from optimizer.solve import driver

    real, guides = driver.backend_solve, []

    def spy(mip, *args, **kw):
        guide = is_weekly_guide(mip, kw)
        if guide and held and kw.get("stop") is not None:
            assert kw["stop"].wait(timeout=300), "the weekly guide beside was never stopped"
        out = real(mip, *args, **kw)
        if guide:
            guides.append(out)
        return out

    patch_driver(monkeypatch, "backend_solve", spy)
    return guides


@pytest.mark.parametrize("solver", ["highs", "cbc", "scip", "cp-sat"])
def test_the_monthly_model_chooses_where_the_split_branches(solve, monkeypatch, solver):
    # 11 rps in both weeks. Without limits the month's model (200 h at 11 rps) takes one B and one A, 7 $/h,
    # against 11 A (11 $/h) or 2 B (12 $/h): it breaks chat's limit, so the split branches on chat at once and
    # the weekly guide is not waited for. Stable: 11 A x 200 h = 2,200 against 2 B x 6 x 200 = 2,400.
    guides = guide_solves(monkeypatch, held=True)
    plan = solve(weeks({"w1": 11, "w2": 11}), solver=solver)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(2_200)
    assert plan.inference["gpu"].unique().tolist() == ["L4"]
    assert "one stable solve per configuration of chat/all (2 configurations)" in plan.result.message
    assert "where to split chosen by the monthly model without limits" in plan.result.message
    # with HiGHS the weekly guide starts beside the month's model and is stopped; the other back ends never start
    # it (no second search beside: the monthly model first, then the weekly guide only where needed)
    assert len(guides) == (1 if solver == "highs" else 0)  # HiGHS: started beside, held, stopped


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_where_the_monthly_model_breaks_no_limit_the_weekly_model_guides(solve, monkeypatch, solver):
    # 1 rps in w1, 12 in w2: the month's model serves 6.5 rps with one B (6 $/h, against 7 A at 7 $/h),
    # within chat's limit, so it chooses nothing. The weekly model without limits takes A in w1 (1 $/h) and
    # one B and two A in w2 (8 $/h, against 12 $/h either way alone), 100 + 800 = 900: it breaks the limit and
    # guides the split. Stable: A in both weeks (1 + 12) x 100 = 1,300 against B, (6 + 12) x 100 = 1,800.
    guides = guide_solves(monkeypatch)
    plan = solve(weeks({"w1": 1, "w2": 12}), solver=solver)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_300)
    assert "one stable solve per configuration of chat/all (2 configurations)" in plan.result.message
    assert "monthly" not in plan.result.message
    assert [g.objective for g in guides] == [pytest.approx(900)]


@pytest.mark.parametrize("solver", ["highs", "cbc", "scip", "cp-sat"])
def test_where_the_month_averages_its_peaks_away_its_periods_of_one_length_choose(solve, monkeypatch, solver):
    # Two weeks of one month, each a 50-h peak at 12 rps and a 100-h off-peak at 1 rps. The month's model
    # serves (12 x 100 + 1 x 200) / 300 = 4.67 rps for 300 h: five A (5 $/h, against one B at 6 $/h), within
    # chat's limit. Its peaks merged apart from its off-peaks (100 h at 12 rps, 200 h at 1): one B and two A
    # at the peak (8 $/h, against 12 $/h either way alone) break the limit, so that model chooses, and the
    # weekly guide is not waited for. Stable: A throughout, 12 x 100 + 1 x 200 = 1,400, against B throughout,
    # 2 x 6 x 100 + 6 x 200 = 2,400.
    guides = guide_solves(monkeypatch, held=True)
    data = copy.deepcopy(FLIP)
    data["periods"] = [{"name": f"w{w}-{kind}", "hours": hours, "month": 0}
                       for w in (1, 2) for kind, hours in (("peak", 50), ("off", 100))]
    data["inference"][0]["demand_rps"] = {p["name"]: 12 if "peak" in p["name"] else 1 for p in data["periods"]}
    plan = solve(data, solver=solver)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_400)
    assert plan.inference["gpu"].unique().tolist() == ["L4"]
    assert "where to split chosen by the model without limits with each month's periods of one length merged" \
        in plan.result.message
    assert len(guides) == (1 if solver == "highs" else 0)  # HiGHS: started beside, held, stopped


def test_a_weekly_guide_that_ends_first_ends_the_monthly_models(tmp_path):
    # a small model's weekly guide, searched beside, may end before the monthly models are built: from then on
    # none is built or searched, and the weekly plan guides
    from optimizer.candidates import build_candidates
    from optimizer.model.presolve import build
    from optimizer.solve import coarse, driver

    pr = load_problem(write_problem(tmp_path, weeks({"w1": 11, "w2": 11})))
    model = build(pr, build_candidates(pr))
    assert [name for _, _, name in coarse.guides(model, "highs", 0.1, None)] == [coarse.GUIDES[False]]
    assert list(coarse.guides(model, "highs", 0.1, None, enough=lambda: True)) == []

    class Ended:
        def done(self) -> bool:
            return True

    assert driver._monthly_point(model, "highs", 0.1, None, None) is not None
    assert driver._monthly_point(model, "highs", 0.1, None, Ended()) is None


def test_a_fault_in_the_monthly_models_stops_the_weekly_guide_beside_and_goes_on(solve, monkeypatch):
    # a fault of ours (here: raised on purpose) is never taken for a solver outcome: it reaches the caller, and
    # the weekly guide searched beside is told to stop, not left searching
    import threading

    from optimizer.solve import coarse

    def broken(*args, **kw):
        raise RuntimeError("a fault in the monthly models")
        yield

    monkeypatch.setattr(coarse, "guides", broken)
    released = threading.Event()
    from optimizer.solve import driver

    real = driver.backend_solve

    def held(mip, *args, **kw):
        if kw.get("stop") is not None:
            kw["stop"].wait(timeout=600)  # (longer than the test waits below: unstopped, the test fails)
            released.set()
        return real(mip, *args, **kw)

    patch_driver(monkeypatch, "backend_solve", held)
    with pytest.raises(RuntimeError, match="a fault in the monthly models"):
        solve(weeks({"w1": 11, "w2": 11}), solver="highs")
    assert released.wait(timeout=300)


def test_a_model_with_one_period_a_month_guides_in_the_caller_s_thread(solve, monkeypatch):
    # FLIP's two periods fall in two months: no monthly model merges anything, so nothing is started beside and
    # the weekly guide runs where it always did (FLIP: A in p1, B in p2, 700; stable 1,100)
    import threading

    from optimizer.solve import driver

    real, where = driver.backend_solve, []

    def spy(mip, *args, **kw):
        out = real(mip, *args, **kw)
        if is_weekly_guide(mip, kw):
            where.append((threading.current_thread() is threading.main_thread(), out.objective))
        return out

    patch_driver(monkeypatch, "backend_solve", spy)
    plan = solve(copy.deepcopy(FLIP), solver="highs")
    assert plan.objective == pytest.approx(1_100)
    assert where == [(True, pytest.approx(700))]


def test_under_a_time_limit_the_weekly_model_guides(solve, monkeypatch):
    # the case the month's model would choose for (11 rps in both weeks), with a time limit: the weekly guide's
    # own time sizes the split's first leaf, so it alone guides. Without limits: one B and one A in each week,
    # 7 $/h x 200 h = 1,400.
    guides = guide_solves(monkeypatch)
    plan = solve(weeks({"w1": 11, "w2": 11}), solver="highs", time_limit=60)
    assert plan.objective == pytest.approx(2_200)
    assert "monthly" not in plan.result.message
    assert [g.objective for g in guides] == [pytest.approx(1_400)]


def flip_with_a100() -> dict:
    """FLIP plus configuration C: one A100 at 20 $/h serving 1 rps (three configurations for chat)."""
    data = copy.deepcopy(FLIP)
    data["offerings"].append(od(id="a100", gpu="A100-80GB", G=1, price=20.0))
    data["inference"][0]["profiles"].append({"gpu": "A100-80GB", "gpus": 1, "rps": 1.0})
    return data


def record_solves(monkeypatch, key: str = "time_limit") -> list[tuple]:
    """Every back-end solve of the driver and the split, as (its keyword ``key``: the time limit given by
    default, objective found), in order."""
    from optimizer.solve import driver

    calls = []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw.get(key), out.objective))
        return out

    spy_on_solves(monkeypatch, spy)
    return calls


def test_the_configuration_split_prunes_a_branch_its_lp_cannot_win(solve, monkeypatch):
    # FLIP plus configuration C: one A100 at 20 $/h serving 1 rps. The plan without limits is FLIP's (A in
    # p1, B in p2: 700). Branch LP bounds: B 6 x 100 x (0.1 + 1) = 660, A 100 + 1,000 = 1,100, C 20 x 100 x
    # (1 + 10) = 22,000. In that order: B's MIP gives 1,200, A's (below 1,200) gives 1,100, and C's LP is
    # not below 1,100: pruned with no MIP solve. So three MIP solves: no limits, B, A.
    calls = record_solves(monkeypatch)
    plan = solve(flip_with_a100(), solver="highs")
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_100)
    assert [objective for _, objective in calls] == [pytest.approx(700), pytest.approx(1_200), pytest.approx(1_100)]
    assert "(3 configurations): 2 solved, 1 pruned by their LP bound, the cheapest kept" in plan.result.message


def test_under_a_time_limit_the_first_leaf_takes_the_time_left_until_a_plan_exists(solve, monkeypatch):
    # The three-configuration case above under a time limit of 600 s (these solves take well under a
    # second). Before any plan exists the first leaf (B) is searched with all the time left, not a third
    # of it: a leaf stopped before its first plan has nothing to return and nothing to prune with (a
    # generated 3-week problem ended with no plan at all in 20 s, its four leaves each stopped at 3 s).
    # Once B's plan exists, A's share is half of what is left (two options not yet taken).
    calls = record_solves(monkeypatch)
    plan = solve(flip_with_a100(), solver="highs", time_limit=600)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_100)
    # before the split, under a limit, a stable plan is held (B fixed, the configuration the plan without
    # limits uses most: 10 rps x 100 h against A's 1 x 100 h; B alone costs at least 1,200)
    (_, unlimited), (_, held), (first_leaf, b), (second_leaf, a) = calls
    assert (unlimited, b, a) == (pytest.approx(700), pytest.approx(1_200), pytest.approx(1_100))
    assert held >= 1_200 - 1e-6
    assert first_leaf > 0.8 * 600  # all that is left, not a third of it (under 200 s)
    assert second_leaf < 0.55 * first_leaf



def test_a_split_whose_leaves_find_no_plan_in_the_time_returns_the_stable_plan_held_before_it(solve, monkeypatch):
    # The three-configuration case under a limit of 600 s, with no time for any leaf (as on a model whose first
    # leaf finds no plan in what is left: bench standard x0.25 at 60 s returned no plan at all, 10 s late).
    # The split searches no leaf: each counts its LP bound (B 660, A 1,100, C 22,000, worked above), and the
    # proof is the better of their least (660) and the bound the plan without limits proved at the guide's gap
    # (at most its optimum, 700; HiGHS stops within 10 % of it). The plan returned is
    # the one held before the split: B fixed (the configuration the plan without limits uses most), which
    # costs at least 1,200 (one H100 node in each period, 600 each).
    from optimizer.solve import split

    monkeypatch.setattr(split, "MIN_LEAF_SECONDS", 1e9)
    calls = record_solves(monkeypatch, key="cutoff")
    plan = solve(flip_with_a100(), solver="highs", time_limit=600)
    assert plan.status == Status.FEASIBLE and plan.objective >= 1_200 - 1e-6
    assert set(plan.inference["offering"]) == {"h100"}
    assert 660 - 1e-6 <= plan.result.bound <= 700 + 1e-6
    assert [cutoff for cutoff, _ in calls if cutoff is not None] == []  # no leaf was searched
    assert "the split's leaves found no plan in the time" in plan.result.message
    assert "3 not searched in the time (counted at their LP bound)" in plan.result.message


def test_with_too_little_time_after_the_guide_the_configurations_are_fixed_and_searched_instead(solve,
                                                                                                monkeypatch):
    # The same case, with the split asking for more time than is left (SPLIT_ROOM times the guide's): no split.
    # B, the configuration the plan without limits uses most, is fixed and searched (1,200), then each class is
    # given one more configuration to choose from (B or A: 1,100), and so on to every configuration: the
    # stable optimum, 1,100 (A in both periods), is still found and proven.

    patch_driver(monkeypatch, "SPLIT_ROOM", 1e12)
    plan = solve(flip_with_a100(), solver="highs", time_limit=600)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_100)
    assert "configurations fixed to those the plan without stability limits uses most" in plan.result.message
    assert "one stable solve per configuration" not in plan.result.message


def flip_reserved() -> dict:
    """FLIP plus a 12-month reservation of the H100 node at 5 $/h (optimum 1,000: B on one reserved unit)."""
    data = copy.deepcopy(FLIP)
    data["offerings"].append({**od(id="h100-1y", price=5.0), "pricing": "reserved", "term_months": 12})
    return data


def spy_on_leaves(monkeypatch, on_leaf) -> None:
    """Route the split's leaf searches (the only back-end calls given a ``cutoff``) through ``on_leaf(kw, result)``,
    whose return is what the split reads; every other solve runs as it is."""
    from optimizer.solve import driver

    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        return on_leaf(kw, out) if "cutoff" in kw else out

    spy_on_solves(monkeypatch, spy)


def test_the_split_also_fixes_a_commitment_count(solve, monkeypatch):
    # FLIP plus a 12-month reservation of the H100 node at 5 $/h, charged for the plan's 200 h: 1,000 a unit.
    # Without limits: A (L4) in p1 100 + B on demand in p2 600 = 700, no reservation (u = 0). Stable plans:
    # A in both 1,100 (a reservation only adds 1,000); B on demand in both 1,200; B on one reserved unit in
    # both 1,000: the optimum. The split fixes chat's configuration and the reserved count u ∈ {0, 1}
    # (its bound: one node holds the most GPUs any period needs), u = 0 first (the plan without limits
    # chose it); every leaf solved or pruned, the least of them proves 1,000.
    from optimizer.solve import split

    data = flip_reserved()
    plan = solve(data, solver="highs")
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    assert set(plan.inference["offering"]) == {"h100-1y"}
    assert "and count of reserved units of h100-1y (term block 0)" in plan.result.message
    # the same optimum and proof when only the configuration is split (the commitment left to the solver)
    monkeypatch.setattr(split, "MAX_COMMITMENT_SPLIT", 0)
    plan = solve(data, solver="highs")
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert "count of" not in plan.result.message


def test_leaves_are_searched_to_the_guide_gap_first_then_proven_under_the_best_cutoff(solve, monkeypatch):
    # The reservation example above (optimum 1,000: B on one reserved unit; its three leaves' plans cost
    # 1,200, 1,000 and 1,100). Each leaf is first searched to the guide's gap (10 %); a search to that gap may
    # stop with its bound up to 10 % below its plan, stood in for by lowering each such bound by 5 % (a lower
    # bound lowered is still a bound). No leaf is then settled by its own search; a leaf whose bound is not
    # settled by the best plan either (the 1,000 leaf's 950) is searched again to the requested gap, from its
    # own plan, cut off from the start at the best plan back when it goes out (a proof takes a worker as soon
    # as one is free, so it may go out before the last first pass is back): the same optimum, proven to 1,000;
    # the message counts each leaf once.
    from optimizer.solve import driver

    calls = []

    def on_leaf(kw, out):
        calls.append((kw["gap"], kw["cutoff"], kw.get("start") is not None, out.objective))
        if kw["gap"] == pytest.approx(driver.GUIDE_GAP) and out.status.has_plan:
            out.bound = out.objective - 0.05 * abs(out.objective)
        return out

    spy_on_leaves(monkeypatch, on_leaf)
    plan = solve(flip_reserved(), solver="highs")
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    first = [c for c in calls if c[0] == pytest.approx(driver.GUIDE_GAP)]
    second = [c for c in calls if c[0] < 1e-5]
    assert len(first) + len(second) == len(calls) and calls[0] == first[0]  # the first leaf's first pass ends first
    assert sorted(round(c[3]) for c in first) == [1_000, 1_100, 1_200]
    assert second and all(c[2] for c in second)  # proven once more, from its plan
    assert all(round(c[1]) in (1_000, 1_100, 1_200) for c in second)  # under a plan some first pass brought back
    assert f"{len(first)} solved" in plan.result.message, (calls, plan.result.message)


def test_without_a_limit_a_leaf_searched_to_the_gap_is_not_searched_again(solve, monkeypatch):
    # The same example, with a back end that ends every search of a leaf short of its proof (each result
    # relabelled FEASIBLE, its bound 5 % below its plan). Without a time limit the second search of a leaf
    # is its last: the split ends, with the best plan (1,000) and the bound its leaves proved, reported as
    # unproven, instead of searching the same leaves again and again.
    import dataclasses

    leaves = []

    def on_leaf(kw, out):
        if not out.status.has_plan:
            return out
        leaves.append(kw["gap"])
        if len(leaves) > 40:
            pytest.fail("the split searches the same leaves again and again")
        return dataclasses.replace(out, status=Status.FEASIBLE, bound=out.objective - 0.05 * abs(out.objective))

    spy_on_leaves(monkeypatch, on_leaf)
    plan = solve(flip_reserved(), solver="highs")
    assert plan.objective == pytest.approx(1_000)
    assert plan.status == Status.FEASIBLE and plan.result.bound < 1_000 - 1
    solved = int(re.search(r"(\d+) solved", plan.result.message).group(1))
    assert len(leaves) <= 2 * solved  # to the guide's gap once, to the requested gap once


def test_two_classes_over_their_limit_split_on_one_chosen_by_its_lp_bounds(solve):
    # Two copies of FLIP's service (chat, and chat2 at twice the demand: 2 rps in p1, 20 in p2) on the same
    # uncapped offerings, so they are independent. chat: A in both 1,100 (B in both 1,200). chat2: A in both
    # 200 + 2,000 = 2,200; B (10 rps a replica) 1 replica in p1 (600) and 2 in p2 (1,200) = 1,800. The stable
    # optimum is 1,100 + 1,800 = 2,900. Without limits both switch (chat 700, chat2 200 + 1,200), so both
    # break their limit; the split fixes one of them (the one whose options' LP bounds prove most) and the
    # solver chooses the other inside each leaf ("configuration of chat" matches chat2's name too: once).
    data = copy.deepcopy(FLIP)
    twin = copy.deepcopy(data["inference"][0])
    twin["name"], twin["demand_rps"] = "chat2", {"p1": 2, "p2": 20}
    data["inference"].append(twin)
    plan = solve(data, solver="highs")
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(2_900)
    assert plan.result.bound == pytest.approx(2_900, rel=1e-6)
    gpus = plan.inference.groupby("service")["gpu"].unique()
    assert list(gpus["chat"]) == ["L4"] and list(gpus["chat2"]) == ["H100-SXM"]
    assert plan.result.message.count("configuration of chat") == 1


def assert_plan_audited(model, result) -> None:
    """A result of the driver's inner stages, read as a plan and audited like every plan the pipeline returns."""
    from optimizer.audit import audit
    from optimizer.plan import extract

    assert audit(extract(model, result)) == []


def flip_unlimited(tmp_path):
    """FLIP's model, its arrays, and its plan without stability limits (A in p1, B in p2: 700)."""
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    free = a.copy_bounds()
    ids = model.mip.variables["config-used"].ids
    free.col_lo[ids] = free.col_hi[ids] = 1.0
    free.row_hi[model.mip.constraints["stability-configurations"].ids] = len(ids)
    unlimited = driver.backend_solve(model.mip, "highs", gap=1e-9, arrays=free)
    assert unlimited.objective == pytest.approx(700)
    return model, a, unlimited


def test_fixed_configurations_give_a_stable_plan_and_the_time_left_improves_it(tmp_path, monkeypatch):
    # What the driver does on a large model: FLIP's plan without limits (A in p1, B in p2: 700) has B most
    # used (1,000 rps·h against 100), so B is fixed for both periods: 600 + 600 = 1,200 (fix-and-optimize
    # cannot leave B: the configurations stay fixed), the start of the whole stable model, which finds A in
    # both, 1,100, and proves it.
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    calls = []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw.get("start") is not None, out.objective))
        return out

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, unlimited.bound, 0.0)
    assert_plan_audited(model, r)
    assert calls[0] == (False, pytest.approx(1_200))  # the restriction: B fixed in both periods
    assert calls[1][0]  # the whole model, started from that plan
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert "the whole stable model, started from 1,200.00, found 1,100.00" in r.message


def test_a_searchable_restriction_is_searched_and_the_time_left_goes_to_the_whole_model(tmp_path, monkeypatch):
    # With search=True (a model whose LP is cheap next to the limit) the back end searches the restriction
    # itself after one cycle of fix-and-optimize rounds (not cycles with passes over the periods): B fixed in
    # both periods, whose optimum is 1,200 (600 + 600). That search ends before the limit, so the whole stable
    # model gets the time left, started from 1,200, and finds and proves A in both periods, 1,100.
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "BOUND_BESIDE", False)  # the main path's searches alone, in order
    calls = []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw.get("start") is not None, kw.get("target"), out.objective))
        return out

    spy_on_solves(monkeypatch, spy)
    cycles = []

    def rounds(mip, arrays, x, *args, **kw):  # the rounds' own solves are not the path's: only their count
        cycles.append(kw.get("cycles"))
        return x, []

    patch_driver(monkeypatch, "polish", rounds)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, unlimited.bound, 0.0,
                                     search=True)
    assert_plan_audited(model, r)
    assert cycles == [1]  # one cycle, before the search
    assert calls[0] == (False, np.inf, pytest.approx(1_200))  # the restriction's first plan
    assert calls[1] == (True, None, pytest.approx(1_200))  # its search, from that plan: nothing cheaper
    assert calls[2] == (True, None, pytest.approx(1_100))  # the whole stable model, from it
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)


# FLIP with a third configuration, C: one A100 at 2.40 an hour serving 2 rps. Per period (100 h): p1 needs
# 1 rps: A 100, B 600, C 240; p2 needs 10 rps: A 1,000, B 600, C 5 × 240 = 1,200. Without limits A then B,
# 700, which uses B most (1,000 rps·h), A next (100), C not at all. On one configuration: A 1,100, B 1,200,
# C 1,440.
FLIP3 = copy.deepcopy(FLIP)
FLIP3["offerings"].append(od(id="a100", gpu="A100-80GB", G=1, price=2.4))
FLIP3["inference"][0]["profiles"].append({"gpu": "A100-80GB", "gpus": 1, "rps": 2.0})


def flip3_unlimited(tmp_path):
    """FLIP3's model, its arrays, its plan without stability limits (700) and which config-used column is C's."""
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP3)))
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    cu = model.mip.variables["config-used"]
    free = a.copy_bounds()
    free.col_lo[cu.ids] = free.col_hi[cu.ids] = 1.0
    free.row_hi[model.mip.constraints["stability-configurations"].ids] = len(cu.ids)
    unlimited = driver.backend_solve(model.mip, "highs", gap=1e-9, arrays=free)
    assert unlimited.objective == pytest.approx(700)
    c = cu.ids[cu.coords.reset_index(drop=True)["config"].str.startswith("A100").to_numpy()]
    assert len(c) == 1 and len(cu.ids) == 3
    return model, a, unlimited, c[0]


def widen_flip3(tmp_path, monkeypatch, relabel=None):
    """FLIP3 on the searched fixed-configuration path; every back-end call as (started from a plan, objective,
    C's upper bound in its arrays), and the result. ``relabel(i, out)``: the result the driver sees of call i."""
    from optimizer.solve import driver

    model, a, unlimited, c = flip3_unlimited(tmp_path)
    patch_driver(monkeypatch, "BOUND_BESIDE", False)  # the searches of the restrictions alone, in order
    calls = []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append((kw.get("start") is not None, out.objective, kw["arrays"].col_hi[c]))
        return out if relabel is None else relabel(len(calls), out)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, unlimited.bound, 0.0,
                                     search=True)
    assert_plan_audited(model, r)
    return calls, r


def test_a_proven_restriction_is_widened_one_configuration_per_class_at_a_time(tmp_path, monkeypatch):
    # B is fixed (used most): 1,200, proven for that restriction. Widened to the two most used, B and A, with
    # the limit of one on (C forbidden), the search from 1,200 finds A in both periods, 1,100, and proves it
    # for that restriction; widened once more, every configuration is allowed: that is the whole stable
    # model, searched from 1,100, which proves 1,100 for the stable model itself.
    calls, r = widen_flip3(tmp_path, monkeypatch)
    assert calls[0] == (False, pytest.approx(1_200), 0.0)  # the restriction's first plan: B fixed
    assert calls[1] == (True, pytest.approx(1_200), 0.0)  # its search, proven
    assert calls[2] == (True, pytest.approx(1_100), 0.0)  # B or A, C still forbidden
    assert calls[3] == (True, pytest.approx(1_100), 1.0)  # the whole stable model: C allowed
    assert len(calls) == 4
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert "then searched with 1 more configuration per class to choose from, from 1,200.00" in r.message


@pytest.mark.parametrize("solver", ["cbc", "scip", "cp-sat"])
def test_every_back_end_widens_a_proven_restriction(tmp_path, solver):
    # The same ladder on the other back ends (no spy: they try the first-plan guesses one after the other):
    # B fixed, 1,200; widened to B or A, 1,100; the whole stable model proves it.

    model, a, unlimited, _ = flip3_unlimited(tmp_path)
    r = fixed.fixed_configurations(model, a, unlimited.x, solver, 30.0, 1e-9, None, unlimited.bound, 0.0,
                                     search=True)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert "then searched with 1 more configuration per class to choose from, from 1,200.00" in r.message


def test_a_restriction_not_proven_is_not_widened(tmp_path, monkeypatch):
    # The restriction's search stopped on the limit (stood in for: its result relabelled FEASIBLE): it may
    # hold cheaper plans still, so nothing is widened and the time left goes to the whole stable model.
    import dataclasses

    calls, r = widen_flip3(tmp_path, monkeypatch,
                           lambda i, out: dataclasses.replace(out, status=Status.FEASIBLE) if i == 2 else out)
    assert [cap for _, _, cap in calls] == [0.0, 0.0, 1.0]  # first plan, the restriction's search, whole model
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)


def fake_clock(monkeypatch) -> list[float]:
    """The driver's clock, moved on by ``offset[0]`` seconds whenever a test sets it; returns ``offset``."""
    from optimizer.solve import driver

    offset = [0.0]
    real_clock = driver.time.perf_counter

    class Clock:
        @staticmethod
        def perf_counter():
            return real_clock() + offset[0]

    patch_driver(monkeypatch, "time", Clock)
    return offset


def test_the_restrictions_bound_is_never_reported_as_the_stable_models(tmp_path, monkeypatch):
    # The same search, but the clock runs out as the restriction's search ends (a fake clock jumps 1,000 s),
    # so no time is left for the whole model. The plan is the restriction's 1,200; its search proved 1,200
    # for the restriction only (A in both periods costs 1,100), so the bound reported is the one the
    # caller proved (the plan without limits, 700): gap (1,200 - 700) / 1,200. The root bound is the one the
    # caller hands in (650, the model without limits' root), not the restriction's.
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "BOUND_BESIDE", False)  # test_a_bound_searched_beside_proves_... has it on
    offset = fake_clock(monkeypatch)
    calls = []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append(out)
        if len(calls) == 2:  # the restriction's search
            assert out.status == Status.OPTIMAL and out.bound == pytest.approx(1_200, rel=1e-6)
            offset[0] = 1_000.0
        return out

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, 700.0, 0.0, search=True,
                                     root=650.0)
    assert_plan_audited(model, r)
    assert len(calls) == 2
    assert r.root_bound == pytest.approx(650)
    assert r.status == Status.FEASIBLE and r.objective == pytest.approx(1_200)
    assert r.bound == pytest.approx(700) and r.gap == pytest.approx(500 / 1_200)
    assert "no time was left to search the whole stable model, with other configurations" in r.message


def test_a_bound_searched_beside_proves_what_the_restrictions_cannot(tmp_path, monkeypatch):
    # The same run as above (the clock runs out as the restriction's search ends), on a machine of two CPUs:
    # the stable model with its configuration floors is searched on the second one from the restriction's
    # first plan, 1,200. Its floors make its LP the stable optimum (A in both periods, 1,100:
    # tests/test_strengthen.py), so it finds and proves 1,100 where the restrictions alone returned 1,200
    # with the caller's bound, 700.
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    offset = fake_clock(monkeypatch)
    main, aside = [], []
    real = driver.backend_solve

    def spy(*args, **kw):
        out = real(*args, **kw)
        if len(kw["arrays"].row_lo) > len(a.row_lo):  # the floors' rows: the search beside
            aside.append(out)
        else:
            main.append(out)
            if len(main) == 2:  # the restriction's search
                offset[0] = 1_000.0
        return out

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, 700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    # the floors' search, then, on the same CPU while time is left, the configuration relaxation (FLIP's searches
    # take milliseconds, so it starts before the clock runs out)
    assert len(main) == 2 and len(aside) in (1, 2) and aside[0].objective == pytest.approx(1_100)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert "the stable model with its configuration floors, searched beside, found 1,100.00" in r.message


@pytest.mark.parametrize("gap", [1e-9, 0.1])
def test_the_configuration_relaxation_beside_proves_when_the_floors_search_finds_nothing(tmp_path, monkeypatch,
                                                                                        gap):
    # The same path on two CPUs, the stable model's search with its floors stopped with nothing (a large
    # model's, on its share) and no LP duals for the cuts. The CPU beside goes on with the configuration
    # relaxation (floors, only the configurations whole): its LP with the floors is already the stable optimum,
    # 1,100 (tests/test_strengthen.py works it by hand), so it proves 1,100. The plan is the restriction's 1,200
    # (B in both periods), proven within 100 / 1,200.
    # - At a gap of 1e-9 that is no proof of the plan: the whole stable model's search is stood in for by one
    #   stopped on its limit at once, and the plan comes back feasible.
    # - At 10 % (100 / 1,200 = 8.3 %) the relaxation's bound proves the plan. The whole stable model's search
    #   is stood in for by one that waits for its stop event, as a long search runs on: the relaxation's proof
    #   stops it, or keeps it from starting where the proof came first (which of the two depends on the
    #   threads' timing; the outcome does not), and 1,200 is returned optimal. Before, the path searched on
    #   until its limit (here the stand-in's 60 s, then not stopped).
    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    ids = model.mip.variables["config-used"].ids
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = driver.backend_solve
    seen, whole = [], {}

    def spy(*args, **kw):
        b = kw["arrays"]
        if len(b.row_lo) > len(a.row_lo) and b.integer.sum() > len(ids):  # the floors' search of the stable model
            seen.append("floors")
            return SolveResult(Status.TIME_LIMIT, "highs", message="stopped on its limit")
        if len(b.row_lo) > len(a.row_lo):
            seen.append("relaxation")
        elif b is a:  # the whole stable model's search
            if gap > 1e-9:
                whole["stopped"] = kw["stop"].wait(60.0)
            return SolveResult(Status.TIME_LIMIT, "highs", message="stopped on its limit")
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0 if gap < 0.1 else 600.0, gap, None,
                                     700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    assert seen.count("floors") == 1 and seen.count("relaxation") == 1
    assert r.objective == pytest.approx(1_200)
    assert r.bound == pytest.approx(1_100, rel=1e-6) and r.gap == pytest.approx(100 / 1_200, rel=1e-6)
    assert "the bound is the configuration relaxation, solved beside" in r.message
    if gap < 0.1:
        assert r.status == Status.FEASIBLE
    else:
        assert r.status == Status.OPTIMAL and whole in ({}, {"stopped": True})


@pytest.mark.parametrize("gap", [1e-9, 0.1])
def test_a_bound_proven_beside_before_the_plan_proves_it_when_it_comes(tmp_path, monkeypatch, gap):
    # FLIP's fixed path on two CPUs, limit 600 s. The floors' search beside is stood in for by one stopped on
    # its share with a dear plan (1,300) and a bound of 1,100 (the stable optimum, so the bound is valid); the
    # configuration relaxation after it by one that waits for its stop event. The path's own search of the
    # restriction waits until that bound is in, then proves the restriction's optimum, 1,200 (B in both periods).
    # - At 10 %, 100 / 1,200 = 8.3 %: the bound beside proves 1,200. The path starts nothing more (no whole
    #   stable model's search) and returns 1,200, optimal, its bound 1,100 named. Before, the bound was read
    #   only at the path's end, and the path searched the whole stable model first.
    # - At 1e-9 it proves nothing: the whole stable model is searched and finds 1,100.
    import threading

    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    bound_in, seen = threading.Event(), []

    def relaxation(*args, stop=None, **kw):
        seen.append("relaxation")
        stop.wait(60.0)
        return SolveResult(Status.TIME_LIMIT, "highs", message="stopped")

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    real = driver.backend_solve

    def spy(*args, **kw):
        b = kw["arrays"]
        if len(b.row_lo) > len(a.row_lo):  # the floors' search beside
            seen.append("floors")
            bound_in.set()
            return SolveResult(Status.FEASIBLE, "highs", objective=1_300.0, bound=1_100.0,
                               message="stopped on its share")
        if b is a:
            seen.append("whole")
        elif kw.get("target") is None:  # the path's search of the restriction, after its first plan
            assert bound_in.wait(60.0)
            seen.append("restriction")
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 600.0, gap, None, 700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    assert seen[0] == "floors" and "relaxation" in seen
    if gap > 1e-9:
        assert "whole" not in seen
        assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_200)
        assert r.bound == pytest.approx(1_100) and r.gap == pytest.approx(100 / 1_200)
        assert "proven by the bound of the stable model's search with its configuration floors" in r.message
    else:
        assert "whole" in seen
        assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)


def test_the_search_beside_stops_when_the_fixed_path_has_its_answer(tmp_path, monkeypatch):
    # FLIP's fixed path with a search, limit 600 s: its own searches prove 1,100 in well under a second. The
    # floors' search beside stops on its share with nothing (a large model's; had it proven FLIP's optimum, as
    # it does whole, nothing would follow it), and the configuration relaxation after it would run until the
    # limit; it is stood in for by one that waits for the stop event it is given. The path's own search waits
    # until the relaxation has started (so the order does not depend on the machine), and once the path has
    # its answer it sets the event and the run ends, with FLIP's optimum; without the event the stand-in would
    # wait its 60 s and say so.
    import threading

    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    started, seen = threading.Event(), {}

    def relaxation(*args, stop=None, **kw):
        seen["event"] = stop
        started.set()
        seen["stopped"] = stop is not None and stop.wait(60.0)
        return SolveResult(Status.TIME_LIMIT, "highs", message="stopped")

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    real = driver.backend_solve

    def spy(*args, **kw):
        floors = len(kw["arrays"].row_lo) > len(a.row_lo)
        if floors:
            return SolveResult(Status.TIME_LIMIT, "highs", message="stopped on its limit")
        if kw.get("target") is None:  # the path's own searches, after the first plan
            assert started.wait(60.0)
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 600.0, 1e-9, None, 700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    assert isinstance(seen["event"], threading.Event) and seen["stopped"]
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)


def test_a_search_beside_that_proves_the_optimum_stops_the_path_s_own(tmp_path, monkeypatch):
    # FLIP's fixed path on two CPUs, limit 600 s. The stable model with its configuration floors, searched
    # beside from the restriction's first plan (B in both periods, 1,200), has the stable optimum as its LP (A in
    # both, 1,100: tests/test_strengthen.py), so it ends proven at once. The path's own search of the restriction
    # is stood in for by one that waits for the stop event it is given, as a long search of a large model would
    # run on: the proof beside sets it, the path starts nothing more (no wider restriction, no whole stable
    # model), and the run returns 1,100, optimal, instead of searching until the limit.
    from optimizer.solve import driver
    from optimizer.solve.feasibility import objective
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = driver.backend_solve
    own, seen = [], {}

    def spy(*args, **kw):
        if len(kw["arrays"].row_lo) > len(a.row_lo) or kw.get("target") is not None:
            return real(*args, **kw)  # the floors' search beside, and the first plan's
        own.append(kw.get("stop"))
        seen["stopped"] = kw.get("stop") is not None and kw["stop"].wait(60.0)
        x = kw["start"]
        return SolveResult(Status.FEASIBLE, "highs", objective=objective(a, x), x=x,
                           message="stopped by its caller")

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 600.0, 1e-9, None, 700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    assert len(own) == 1 and seen["stopped"]  # the restriction's search only, stopped by the proof beside
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert "the stable model with its configuration floors, searched beside, found 1,100.00 and proved it" in r.message


def test_the_floors_search_follows_the_relaxations_beside(tmp_path, monkeypatch):
    # A model no class of which the split can take has the configuration relaxations solved on the second CPU
    # (``busy``), here stood in for by a run that holds that CPU until the test releases it. The floors' search
    # of the stable model does not start beside them: it waits on their thread and starts when they end. The
    # path's own search of the restriction releases them and then waits for its stop event, as a long search
    # would run on. The floors' search, started from the first plan (B in both periods, 1,200), finds and proves
    # the stable optimum (A in both, 1,100: its LP, tests/test_strengthen.py), which stops the path's search.
    # The order is fixed by the events, not by the machine's speed.
    import threading

    from optimizer.solve import driver
    from optimizer.solve.feasibility import objective
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    release, order = threading.Event(), []

    def relaxations():
        assert release.wait(60.0)
        order.append("relaxations ended")
        return SolveResult(Status.OPTIMAL, "highs", objective=700.0, bound=700.0), beside.HELD_UNITS

    busy = beside.Beside.start("highs", None, relaxations)
    real = driver.backend_solve
    starts, stopped = [], []

    def spy(*args, **kw):
        if len(kw["arrays"].row_lo) > len(a.row_lo):  # the floors' search
            order.append("floors started")
            starts.append(objective(a, kw["start"]))
            return real(*args, **kw)
        if kw.get("target") is not None:  # the first plan's guesses
            return real(*args, **kw)
        order.append("own search")
        release.set()
        stopped.append(kw["stop"].wait(60.0))
        return SolveResult(Status.FEASIBLE, "highs", objective=objective(a, kw["start"]), x=kw["start"],
                           message="stopped by its caller")

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 600.0, 1e-9, None, 700.0, 0.0, search=True,
                                     busy=busy)
    assert_plan_audited(model, r)
    assert order == ["own search", "relaxations ended", "floors started"] and stopped == [True]
    assert starts == [pytest.approx(1_200)]
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert "searched beside, found 1,100.00 and proved it" in r.message
    assert busy.result()[1] == beside.HELD_UNITS


def test_the_floors_search_after_the_relaxations_starts_from_the_plan_held_then(tmp_path, monkeypatch):
    # The floors' search queued behind the relaxations beside reads the caller's best plan when it starts,
    # not when it was queued: queued while the caller holds B in both periods (1,200), it starts from A in
    # both (1,100), the plan held by the time the relaxations end. Proven there (its LP is 1,100), it sets the
    # caller's event. With the relaxations ending past the deadline, it is not started at all.
    import threading
    import time

    from optimizer.solve import driver
    from optimizer.solve.feasibility import objective

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    ids = model.mip.variables["config-used"].ids
    on = [None, None]
    for k in (0, 1):  # the stable optimum restricted to one configuration: A (1,100) and B (1,200)
        b = a.copy_bounds()
        b.col_lo[ids] = b.col_hi[ids] = 0.0
        b.col_lo[ids[k]] = b.col_hi[ids[k]] = 1.0
        on[k] = driver.backend_solve(model.mip, solver="highs", gap=1e-9, arrays=b)
    dear, cheap = sorted(on, key=lambda r: r.objective)[::-1]
    assert (cheap.objective, dear.objective) == (pytest.approx(1_100), pytest.approx(1_200))
    real = driver.backend_solve
    starts = []

    def spy(*args, **kw):
        starts.append(objective(a, kw["start"]))
        return real(*args, **kw)

    patch_driver(monkeypatch, "backend_solve", spy)
    for late in (False, True):
        release = threading.Event()
        busy = beside.Beside.start("highs", None, lambda: release.wait(60.0))
        shared = beside.Shared(x=dear.x)
        answered = shared.answered
        deadline = time.perf_counter() + (0.0 if late else 600.0)
        floors = beside.bound_beside(model, a, dear.x, "highs", 600.0, 1e-9, None, deadline=deadline,
                                     after=busy, shared=shared)
        shared.x = cheap.x
        release.set()
        while not floors.done():  # asked for its result, it would be stopped (the caller has its answer)
            time.sleep(0.01)
        searched, cuts, relaxed = floors.result()
        if late:
            assert searched is None and not answered.is_set()
        else:
            assert searched.status == Status.OPTIMAL and searched.objective == pytest.approx(1_100)
            assert answered.is_set() and cuts == [] and relaxed is None
        assert busy.result() is True
    assert starts == [pytest.approx(1_100)]


def test_a_plan_proven_on_the_path_stops_the_relaxations_beside(tmp_path, monkeypatch):
    # The relaxations beside (``busy``, stood in for by a run that waits for its stop event, as the relaxation
    # with whole units of a large model would run to the limit) are there for their bound. FLIP's fixed path,
    # limit 600 s: B fixed (1,200, the caller's bound 700 leaves it open), the floors' search queued behind the
    # relaxations; the restriction proven, the whole stable model finds and proves 1,100. A proven plan needs no
    # more bound: the relaxations are stopped and the floors' search never starts, instead of the path waiting
    # for them until the limit.
    import threading

    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    stop, seen = threading.Event(), {}

    def relaxations():
        seen["stopped"] = stop.wait(60.0)
        return SolveResult(Status.TIME_LIMIT, "highs", message="stopped"), beside.HELD_UNITS

    busy = beside.Beside.start("highs", None, relaxations, stop)
    real = driver.backend_solve
    floors = []

    def spy(*args, **kw):
        if len(kw["arrays"].row_lo) > len(a.row_lo):
            floors.append(kw)
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 600.0, 1e-9, None, 700.0, 0.0, search=True,
                                     busy=busy)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert seen["stopped"] and floors == []
    assert busy.result()[1] == beside.HELD_UNITS


def test_a_class_too_wide_proven_early_does_not_wait_for_its_relaxations(tmp_path, monkeypatch):
    # FLIP with the split's largest class below chat's two candidates (too wide), limit 600 s: the configuration
    # relaxation chooses A and its bound, 1,100, proves the restriction's plan at once. The relaxation with
    # whole units beside it is stood in for by one that waits for the stop event it is given: it is stopped
    # once the plan is proven.
    from optimizer.solve import driver, split
    from optimizer.solve.result import SolveResult

    model, a, _ = flip_unlimited(tmp_path)
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = relaxations.configuration_relaxation
    seen = {}

    def relaxation(*args, whole=("config-used",), stop=None, **kw):
        if whole == ("config-used",):
            return real(*args, whole=whole, stop=stop, **kw)
        seen["stopped"] = stop is not None and stop.wait(60.0)
        return SolveResult(Status.TIME_LIMIT, "highs", message="stopped")

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    lp = driver.relaxation(model)
    r = driver.solve_stable(model, "highs", 600.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert seen["stopped"]


def test_a_relaxation_beside_that_proves_the_plan_stops_the_path(tmp_path, monkeypatch):
    # FLIP with the split's largest class below chat's two candidates (too wide), limit 600 s, the first
    # configuration relaxation's bound stood in for by a weaker valid one, 700 (the plan without limits'), so
    # that the path's plan, A in both periods (1,100), is not proven by it. The path's own search is stood in
    # for by one that waits for its stop event, as a long search would run on. The relaxation with whole units
    # beside has the stable optimum as its bound (1,100: the floors make the LP that already,
    # tests/test_strengthen.py), which proves the plan: the path's search is stopped, nothing more runs on
    # either CPU (not the model without limits, not the floors' search), and 1,100 is returned optimal, with the
    # relaxation named as the proof.
    import dataclasses
    import threading

    from optimizer.solve import driver, split
    from optimizer.solve.feasibility import objective
    from optimizer.solve.result import SolveResult

    model, a, _ = flip_unlimited(tmp_path)
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real_relaxation = relaxations.configuration_relaxation

    searching = threading.Event()  # the path's own search has started: its plan is in hand

    def relaxation(*args, whole=("config-used",), **kw):
        if whole != ("config-used",):  # the one beside: it ends only once the path has a plan (a large model's
            assert searching.wait(60.0)  # takes longer than the path's first plan)
        out = real_relaxation(*args, whole=whole, **kw)
        return dataclasses.replace(out, bound=700.0, root_bound=700.0) if whole == ("config-used",) else out

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    real = driver.backend_solve
    seen = {"whole stable": 0, "without limits": 0}

    def spy(*args, **kw):
        b = kw["arrays"]
        if len(b.row_lo) > len(a.row_lo):  # floor rows: a relaxation, or the floors' search (every column whole)
            if b.integer.sum() == a.integer.sum():
                seen["whole stable"] += 1
            return real(*args, **kw)
        if kw.get("target") is not None:  # the first plans
            return real(*args, **kw)
        if not b.integer.any() or b.col_lo[model.mip.variables["config-used"].ids].min() == 1.0:
            seen["without limits"] += 1
            return real(*args, **kw)
        searching.set()
        seen["stopped"] = kw["stop"].wait(60.0)  # the path's own search
        return SolveResult(Status.FEASIBLE, "highs", objective=objective(a, kw["start"]), x=kw["start"],
                           message="stopped by its caller")

    spy_on_solves(monkeypatch, spy)
    lp = driver.relaxation(model)
    r = driver.solve_stable(model, "highs", 600.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert seen == {"whole stable": 0, "without limits": 0, "stopped": True}
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert "the bound is the configuration relaxation with whole units, solved beside" in r.message
    assert r.message.startswith("optimal: ")


def test_one_thread_asked_for_means_no_search_beside(tmp_path, monkeypatch):
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    seen = []
    real = driver.backend_solve
    spy_on_solves(monkeypatch, lambda *args, **kw: seen.append(len(kw["arrays"].row_lo)) or real(*args, **kw))
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, 1, 700.0, 0.0, search=True)
    assert_plan_audited(model, r)
    assert r.objective == pytest.approx(1_100)
    assert all(n == len(a.row_lo) for n in seen)  # no search had the floors' rows


def test_a_stage_without_limits_stopped_on_the_limit_hands_a_searchable_model_on(tmp_path, monkeypatch):
    # The model without stability limits stopped on the limit (stood in for: its result relabelled
    # FEASIBLE) while the LP took a small share of it: the descent over the configurations starts from those
    # its plan uses most, the configurations the descent reaches are fixed, and the back end searches that
    # restriction (search=True). With the LP's share large, the rounds instead (search=False:
    # test_a_model_whose_lp_takes_a_large_share_of_the_limit_skips_the_stages).
    import dataclasses

    from optimizer.solve import driver

    model, a, _ = flip_unlimited(tmp_path)
    lp = driver.relaxation(model)
    real = driver.backend_solve
    first = []

    def spy(*args, **kw):
        out = real(*args, **kw)
        if not first:
            first.append(out)
            return dataclasses.replace(out, status=Status.FEASIBLE)
        return out

    spy_on_solves(monkeypatch, spy)
    handed = spy_on_fixed_path(monkeypatch)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert handed == [("the descent over the configurations", True)]
    assert r.objective == pytest.approx(1_100)
    assert "from the configurations the plan without stability limits uses most" in r.message
    assert "then searched with those configurations fixed" not in r.message  # its first plan is its optimum


def test_an_infeasible_fixed_choice_is_not_reported_as_an_infeasible_problem(tmp_path, monkeypatch):
    # The fixed configurations are a guess; when the guess admits no plan (here: every configuration
    # forbidden, while FLIP has demand), the whole stable model is solved: FLIP's stable optimum 1,100
    # (B in both periods would be 1,200; A in both 1,100); the whole model proves it, a bound above the
    # unlimited plan's 700.
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    n_configs = len(model.mip.variables["config-used"].ids)
    patch_driver(monkeypatch, "most_used", lambda model, x, extra=None, then=None: np.zeros(n_configs, bool))
    r = fixed.fixed_configurations(model, a, np.zeros(a.n_vars), "highs", 30.0, 1e-9, None, 700.0, 0.0)
    assert_plan_audited(model, r)
    assert r.status.has_plan and r.status != Status.INFEASIBLE
    assert r.objective == pytest.approx(1_100)
    assert r.status == Status.OPTIMAL and r.bound == pytest.approx(1_100, rel=1e-6)


@pytest.mark.parametrize("solver, threads", [("highs", None), ("highs", 1), ("cbc", None)])
def test_a_guess_that_finds_no_first_plan_leaves_time_for_the_next(tmp_path, monkeypatch, solver, threads):
    # Two guesses on FLIP under 30 s: training as the plan without limits places it, then the
    # configurations alone. HiGHS searches them side by side, each with the whole 30 s (fixed.first_plan).
    # A back end that cannot, or HiGHS asked for one thread, gives each an equal share of what is left, the
    # last all of it: the first about 15 s (not 30), and when it comes back without a plan (stood in for
    # here) the second gets the rest.
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    unlimited = driver.backend_solve(model.mip, "highs", gap=1e-9, arrays=a)
    limits, side_by_side = [], []
    real = driver.backend_solve

    def spy(*args, **kw):
        limits.append(kw.get("time_limit"))
        if len(limits) == 1:
            return SolveResult(Status.TIME_LIMIT, solver, message="no plan within the time limit")
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    stand_in = fixed.first_plan
    patch_driver(monkeypatch, "first_plan",
                        lambda arrays, time_limit, *rest: side_by_side.append((len(arrays), time_limit))
                        or stand_in(arrays, time_limit, *rest))
    r = fixed.fixed_configurations(model, a, unlimited.x, solver, 30.0, 1e-9, threads, 700.0, 0.0)
    assert_plan_audited(model, r)
    assert r.status.has_plan
    if solver == "highs" and threads is None:
        # each with what is left of the 30 s: all of it but the milliseconds spent before the search
        assert [n for n, _ in side_by_side] == [2] and side_by_side[0][1] == pytest.approx(30.0, abs=0.5)
        assert limits[:2] == [pytest.approx(30.0, abs=0.5)] * 2
    else:
        assert side_by_side == []
        assert 10.0 < limits[0] <= 15.0 + 1e-9
        assert limits[1] > 20.0


def test_no_plan_and_no_time_left_reports_the_callers_bound_not_the_restrictions(tmp_path, monkeypatch):
    # Every guess comes back without a plan (stood in for, each with a bound of 5,000 of its restriction: a
    # restriction may hold no plan below that while the stable model does, at 1,100) and the clock runs out
    # (a fake clock jumps 1,000 s): the result has no plan, and its bound and root are the caller's (700, 650).
    from optimizer.solve.result import SolveResult

    model, a, unlimited = flip_unlimited(tmp_path)
    offset = fake_clock(monkeypatch)
    def spy(*args, **kw):
        offset[0] = 1_000.0
        return SolveResult(Status.TIME_LIMIT, "highs", bound=5_000.0, root_bound=4_000.0,
                           message="no plan within the time limit")

    spy_on_solves(monkeypatch, spy)
    r = fixed.fixed_configurations(model, a, unlimited.x, "highs", 30.0, 1e-9, None, 700.0, 0.0, root=650.0)
    assert r.status == Status.TIME_LIMIT and not r.status.has_plan
    assert r.bound == pytest.approx(700) and r.root_bound == pytest.approx(650)

def test_without_a_guide_the_configurations_stay_free(tmp_path, monkeypatch):
    # No point to choose configurations from (an LP stopped on the limit): the first plan comes from the
    # stable model itself, not from one with every configuration forced on, which breaks chat's limit of
    # one (A and B both on) and admits no plan. FLIP's stable optimum is 1,100 (A in both periods).
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve

    pr = load_problem(write_problem(tmp_path, copy.deepcopy(FLIP)))
    model = presolve.build(pr, build_candidates(pr))
    calls = record_solves(monkeypatch)
    r = fixed.fixed_configurations(model, model.mip.arrays(), None, "highs", 30.0, 1e-9, None, 700.0, 0.0)
    assert_plan_audited(model, r)
    assert calls[0][1] is not None  # the first solve has a plan
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert "no point to fix configurations from" in r.message


def test_a_known_plan_starts_the_split_and_a_cheaper_leaf_replaces_it(solve, monkeypatch):
    # FLIP plus the 12-month reservation of test_the_split_also_fixes_a_commitment_count (optimum 1,000: B
    # on one reserved unit). At 7 $/h a reserved unit costs 1,400 over the plan, so that point's optimum is
    # A (L4) in both periods, 1,100, with no reservation. The two points have the same columns and rows, so
    # the 7 $/h plan is a plan of the 5 $/h point, costing 1,100 there too. Handed over as known, it is the
    # split's first best plan: every leaf is cut off at 1,100 from the start, and the leaf of one reserved
    # unit finds 1,000, which replaces it. Handed the 1,000 plan itself, no leaf is cheaper and it is kept.
    # A vector that serves nothing breaks the demand rows and is ignored.
    from optimizer.solve import driver

    data = flip_reserved()
    dear = solve(data, solver="highs", sets=["offerings[h100-1y].price_per_hour=7"])
    assert dear.status == Status.OPTIMAL and dear.objective == pytest.approx(1_100)
    assert set(dear.inference["offering"]) == {"l4"}
    cutoffs = []
    real = driver.backend_solve

    def spy(*args, **kw):
        cutoffs.append(kw.get("cutoff"))
        return real(*args, **kw)

    spy_on_solves(monkeypatch, spy)
    plan = solve(data, solver="highs", known=[dear.result.x, np.zeros_like(dear.result.x)])
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert set(plan.inference["offering"]) == {"h100-1y"}
    leaves = cutoffs[1:]  # after the model without limits
    assert leaves and all(c is not None and c <= 1_100 + 1e-6 for c in leaves)
    assert leaves[0] == pytest.approx(1_100)
    assert plan.result.message.endswith("the cheapest kept")

    kept = solve(data, solver="highs", known=[plan.result.x])
    assert kept.status == Status.OPTIMAL and kept.objective == pytest.approx(1_000)
    assert kept.result.bound == pytest.approx(1_000, rel=1e-6)
    assert "none cheaper than the known plan, which is kept" in kept.result.message


def _cover(upper: list[float]):
    """The arrays of: minimise x0 + 1.5 x1 over integers 0 <= x <= ``upper`` with 2 x0 + 3 x1 >= 13."""
    from optimizer.model.mip import MIP, terms

    m = MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0, 1], "k": [0, 0]}), upper=np.array(upper), integer=True)
    m.add_constraints("cover", [terms(x, ["k"], np.array([2.0, 3.0]))], ">=",
                      pd.DataFrame({"k": [0], "rhs": [13.0]}), keys=["k"])
    m.add_objective(terms(x, [], np.array([1.0, 1.5])))
    return m.arrays()


def test_a_known_plan_is_used_only_where_it_meets_every_row():
    # known_plan checks each vector on the model's own arrays: one of the wrong length and one that breaks a
    # row are dropped; of two feasible ones the cheaper is kept, priced by the model's own costs.
    from optimizer.solve.driver import known_plan

    a = _cover([10.0, 10.0])
    assert known_plan(a, [np.zeros(3), np.array([1.0, 1.0])], "highs") is None  # wrong length; 2 + 3 < 13
    best = known_plan(a, [np.array([0.0, 5.0]), np.array([5.0, 1.0]), np.array([2.5, 3.0])], "highs")
    # 0 + 7.5 = 7.5 against 5 + 1.5 = 6.5; (2.5, 3) is fractional
    assert best.objective == pytest.approx(6.5) and list(best.x) == [5.0, 1.0]


def test_a_known_plan_past_a_column_bound_is_read_clipped_where_that_meets_every_row():
    # cover: 2 x0 + 3 x1 >= 13 with x0 <= 5 and x1 <= 3 (a model for less demand: lower replica bounds).
    #   (8, 3): x0 past its bound; clipped (5, 3) gives 10 + 9 = 19 >= 13, a plan, costing 5 + 4.5 = 9.5.
    #   (8, 0): clipped (5, 0) gives 10 < 13: no plan, dropped.
    from optimizer.solve.driver import known_plan
    from optimizer.solve.feasibility import within_bounds

    a = _cover([5.0, 3.0])
    assert list(within_bounds(a, np.array([8.0, 3.0]))) == [5.0, 3.0]
    assert within_bounds(a, np.array([8.0, 0.0])) is None
    assert within_bounds(a, np.array([8.0])) is None  # another number of columns
    kept = within_bounds(a, np.array([2.0, 3.0]))  # a plan as it is: itself
    assert list(kept) == [2.0, 3.0]
    best = known_plan(a, [np.array([8.0, 3.0]), np.array([8.0, 0.0])], "highs")
    assert best.objective == pytest.approx(9.5) and list(best.x) == [5.0, 3.0]


def test_a_search_that_ends_without_a_cheaper_plan_returns_the_known_one_with_its_own_bound():
    # The search stopped on its limit with no plan and a proven bound of 900; the known plan costs 1,000:
    # it is returned, feasible, with that bound (gap (1,000 − 900) / 1,000 = 10 %). A search whose bound
    # reached 1,000 proves the known plan optimal.
    from optimizer.solve.driver import _keep_known
    from optimizer.solve.result import SolveResult

    known = SolveResult(Status.FEASIBLE, "highs", objective=1_000.0, x=np.array([1.0, 0.0]))
    out = _keep_known(known, SolveResult(Status.TIME_LIMIT, "highs", bound=900.0, message="no plan in time"), 1e-6)
    assert out.status == Status.FEASIBLE and out.objective == 1_000.0 and list(out.x) == [1.0, 0.0]
    assert out.bound == 900.0 and out.gap == pytest.approx(0.1)
    assert "the known plan" in out.message and "no plan in time" in out.message
    proven = _keep_known(known, SolveResult(Status.CUT_OFF, "highs", bound=1_000.0, message="cut off"), 1e-6)
    assert proven.status == Status.OPTIMAL and proven.gap == pytest.approx(0.0)


def test_a_notebook_hands_an_earlier_plan_to_solve(tmp_path):
    # api.solve(known=...) takes Plans (or their vectors). The 5 $/h reservation's optimum (1,000, see
    # test_a_known_plan_starts_the_split_and_a_cheaper_leaf_replaces_it) handed to the same problem is kept,
    # proven; a plan of a problem with other columns (FLIP, without the reservation) is ignored.
    from optimizer import api

    data = flip_reserved()
    path = write_problem(tmp_path, data)
    first = api.solve(path)
    assert first.objective == pytest.approx(1_000)
    again = api.solve(path, known=[first])
    assert again.status == Status.OPTIMAL and again.objective == pytest.approx(1_000)
    assert "none cheaper than the known plan, which is kept" in again.result.message
    assert again.audit == []
    other = api.solve(write_problem(tmp_path, copy.deepcopy(FLIP), "flip.yaml"))
    assert other.objective == pytest.approx(1_100)
    alone = api.solve(path, known=[other, other.result.x])
    assert alone.objective == pytest.approx(1_000) and "known plan" not in alone.result.message
    assert first.audit == other.audit == alone.audit == []


def test_a_restriction_within_the_gap_reports_the_relaxations_bound_not_its_own(tmp_path, monkeypatch):
    # Stages 2 and 3 (the split stood down, as for a limit above one). FLIP without limits: 700. Stage 2,
    # with no extra candidate, keeps B, the configuration most used (1,000 rps·h against 100): 600 + 600 =
    # 1,200, which its own search proves. With a 75 % gap, (1,200 - 700) / 1,200 = 41.7 % is within it, so
    # 1,200 is returned as optimal.
    # Its proof is the 700 of the model without limits: the restriction's 1,200 is above the stable
    # optimum (A in both periods, 1,100) and proves nothing for it; so is the restriction's root.
    from optimizer.solve import driver

    model, a, unlimited = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "exact_split", lambda *args, **kw: None)
    patch_driver(monkeypatch, "EXTRA_CANDIDATES", 0)
    r = driver.solve_stable(model, "highs", None, 0.75, None)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_200)
    assert r.bound <= 700 + 1e-6 and r.gap == pytest.approx((1_200 - r.bound) / 1_200)
    assert r.root_bound is None or r.root_bound <= 700 + 1e-6


@pytest.mark.parametrize("stood_down, source", [("split", "the plan without stability limits"),
                                                ("class too wide", "the configuration relaxation")])
def test_under_a_limit_a_class_no_split_can_take_goes_to_the_fixed_configurations(tmp_path, monkeypatch,
                                                                                   stood_down, source):
    # FLIP's plan without limits (700) puts chat on A and B, over its limit of one. Under a time limit:
    # - the split stood down (as for a class of more than MAX_SPLIT candidates, found only after the model
    #   without limits): that plan is handed to the fixed-configuration path, as when the model without limits
    #   stops on the limit: B fixed (used most, 1,200), widened to A or B (1,100), which the whole stable model
    #   proves. Stages 2 and 3 would first solve the model without limits on to the requested gap, whose plan
    #   is not stable;
    # - the split's largest class set below chat's two candidates (the class known too wide before solving):
    #   the model without limits is not solved; the configuration relaxation (only config-used whole, the
    #   floors on) chooses A (1,100, against B's 1,200: tests/test_strengthen.py works it by hand) and its
    #   bound, 1,100, proves the restriction's plan.
    from optimizer.solve import driver, split

    model, a, _ = flip_unlimited(tmp_path)
    if stood_down == "split":
        patch_driver(monkeypatch, "exact_split", lambda *args, **kw: None)
    else:
        monkeypatch.setattr(split, "MAX_SPLIT", 1)
    assert split.too_wide_to_split(model) is (stood_down == "class too wide")
    handed = spy_on_fixed_path(monkeypatch)
    lp = driver.relaxation(model)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert handed == [(source, True)]
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    assert f"configurations fixed to those {source} uses most" in r.message
    # without a limit, stages 2 and 3 (they end in the whole stable model's proof, however long it takes)
    r = driver.solve_stable(model, "highs", None, 1e-9, None, guide=lp.x)
    assert len(handed) == 1 and r.objective == pytest.approx(1_100)


def test_a_plan_within_its_limits_under_a_limit_is_proven_in_stages(tmp_path, monkeypatch):
    # Demand 1 rps in both periods: the plan without limits is A in both (200), within chat's limit of one,
    # so it is a stable plan; stage 2 reaches its bound and nothing is fixed.
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver

    easy = copy.deepcopy(FLIP)
    easy["inference"][0]["demand_rps"] = {"p1": 1, "p2": 1}
    pr = load_problem(write_problem(tmp_path, easy))
    model = presolve.build(pr, build_candidates(pr))
    patch_driver(monkeypatch, "fixed_configurations", lambda *args, **kw: pytest.fail("fixed path taken"))
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(200)


def test_the_bound_of_the_model_without_limits_is_kept_when_solving_it_on_proves_less(tmp_path, monkeypatch):
    # Stages 2 and 3, FLIP, gap 5 %. The model without limits is solved to the guide's 10 % (700, proven),
    # then on to 5 %: that run stands in for one stopped on its limit with a weaker bound (600). Stage 2
    # keeps B alone (EXTRA_CANDIDATES 0): 1,200, not within 5 % of 700. Stage 3, the whole stable model,
    # stands in for a search stopped on its limit at 1,100 with bound 650. The proof reported is the best
    # of them, the guide's 700, never a later run's weaker one: gap (1,100 - 700) / 1,100.
    import dataclasses

    from optimizer.solve import driver

    model, a, _ = flip_unlimited(tmp_path)
    patch_driver(monkeypatch, "exact_split", lambda *args, **kw: None)
    patch_driver(monkeypatch, "EXTRA_CANDIDATES", 0)
    real = driver.backend_solve
    calls = []

    def spy(*args, **kw):
        out = real(*args, **kw)
        calls.append(out.objective)
        if len(calls) == 2:
            return dataclasses.replace(out, status=Status.FEASIBLE, bound=600.0, root_bound=None)
        if len(calls) == 4:
            return dataclasses.replace(out, status=Status.FEASIBLE, bound=650.0, root_bound=None)
        return out

    spy_on_solves(monkeypatch, spy)
    r = driver.solve_stable(model, "highs", None, 0.05, None)
    assert_plan_audited(model, r)
    assert calls == [pytest.approx(700), pytest.approx(700), pytest.approx(1_200), pytest.approx(1_100)]
    assert r.objective == pytest.approx(1_100) and r.status == Status.FEASIBLE
    assert r.bound == pytest.approx(700) and r.gap == pytest.approx(400 / 1_100)


@pytest.mark.parametrize("limit, over_single", [(1, True), (2, False)])
def test_only_a_class_limited_to_one_configuration_on_several_sends_a_plan_to_the_fixed_path(
        tmp_path, limit, over_single):
    # FLIP3's model without limits, with a replica of C forced in p1 and one of A in p2: its plan uses C in
    # p1, B and A in p2, three configurations. Over a limit of one, the fixed-configuration path takes it (no
    # split can); over a limit of two only, stages 2 and 3 do, as they prove such a model of q3's size in the
    # time.
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver, split

    data = copy.deepcopy(FLIP3)
    data["stability"] = {"max_configurations": limit}
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    free = relaxations.without_limits(model.mip, a)
    x = model.mip.variables["inference-replicas"]
    coords = x.coords.reset_index(drop=True)
    for gpu, period in (("A100", "p1"), ("L4", "p2")):
        forced = x.ids[(coords["config"].str.startswith(gpu) & (coords["period"] == period)).to_numpy()]
        assert len(forced) == 1
        free.col_lo[forced] = 1.0
    plan = driver.backend_solve(model.mip, "highs", gap=1e-9, arrays=free)
    use = driver.configuration_use(model, plan.x)
    assert (use["use"] > 1e-9).sum() == 3
    assert (not split.over_one(driver.configuration_use(model, plan.x)).empty) is over_single


def test_a_model_whose_limits_are_above_one_keeps_the_model_without_limits(tmp_path, monkeypatch):
    # FLIP3 (three configurations) with two allowed: no class is limited to one configuration, so no floor
    # holds and the configuration relaxation would be little more than the LP; the model without limits
    # guides as before, even with the split's largest class set below three. Optimum: A in p1 and B in p2,
    # the plan without limits, 700.
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve
    from optimizer.solve import driver, split

    data = copy.deepcopy(FLIP3)
    data["stability"] = {"max_configurations": 2}
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    assert not split.too_wide_to_split(model)
    patch_driver(monkeypatch, "configuration_relaxation", lambda *args, **kw: pytest.fail("relaxation taken"))
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(700)


@pytest.mark.parametrize("threads", [None, 1])
def test_the_configuration_relaxation_with_whole_units_is_solved_beside_for_its_bound(tmp_path, monkeypatch,
                                                                                       threads):
    # FLIP with the split stood down, under a limit: the configuration relaxation guides; beside it, on the
    # other CPU, the same relaxation with whole units, whose bound is taken at the end. Under --threads 1
    # (one core asked for) nothing runs beside. Either way the optimum, 1,100, is proven.
    from optimizer.solve import driver, split

    model, a, _ = flip_unlimited(tmp_path)
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    real = relaxations.configuration_relaxation
    calls = []

    def relaxation(*args, whole=("config-used",), **kw):
        calls.append(tuple(whole))
        return real(*args, whole=whole, **kw)

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    lp = driver.relaxation(model)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, threads, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert r.bound == pytest.approx(1_100, rel=1e-6)
    units = ("config-used", "units-running", "units-reserved", "units-owned-new")
    assert sorted(calls) == (sorted([("config-used",), units]) if threads is None else [("config-used",)])


def test_the_bound_solved_beside_proves_where_it_is_the_best():
    # A plan of 1,100 with a bound of 900 (its search stopped on its limit): the relaxation with whole units
    # proved 1,100, so the plan is optimal and the message names that bound. A bound below 900 changes
    # nothing; one above the plan beyond round-off is a numerical failure, not a proof.
    from optimizer.solve.result import SolveResult

    def plan():
        return SolveResult(Status.FEASIBLE, "highs", objective=1_100.0, bound=900.0, gap=200 / 1_100,
                           message="time limit: fixed" + proofs.BOUND_NAMED.format("that of the LP relaxation"))

    r = plan()
    beside.held_bound(r, (SolveResult(Status.OPTIMAL, "highs", objective=1_100.0, bound=1_100.0),
                           beside.HELD_UNITS), 1e-6)
    assert r.status == Status.OPTIMAL and r.bound == pytest.approx(1_100) and r.gap == pytest.approx(0)
    assert r.message == ("optimal: fixed (the bound is the configuration relaxation with whole units, "
                         "solved beside)")
    r = plan()
    beside.held_bound(r, (SolveResult(Status.FEASIBLE, "highs", objective=1_300.0, bound=850.0),
                           beside.HELD_FREE), 1e-6)
    assert r.status == Status.FEASIBLE and r.bound == 900.0 and "that of the LP relaxation" in r.message
    r = plan()
    beside.held_bound(r, (SolveResult(Status.FEASIBLE, "highs", objective=1_300.0, bound=1_200.0),
                           beside.HELD_FREE), 1e-6)
    assert r.status == Status.FEASIBLE and r.bound == 900.0
    # a relaxation that reports no plan where the plan exists is numerical trouble: said, not used
    r = plan()
    beside.held_bound(r, (SolveResult(Status.INFEASIBLE, "highs"), beside.HELD_FREE), 1e-6)
    assert r.status == Status.FEASIBLE and r.bound == 900.0
    assert "the model without stability limits, solved beside, reported no plan where one exists" in r.message


def test_the_model_without_limits_follows_a_configuration_relaxation_proven_beside(tmp_path, monkeypatch):
    # COVER (tests/test_strengthen.py: a 16-GPU job of 150 h on the owned servers, in whole 100-h periods each
    # of which moves the inference to 2 on-demand units, 2,000) with a second configuration for chat, 4 GPUs
    # for 1.5 rps, dearer in every period than the 2-GPU one, so the optima stay COVER's. The configuration
    # relaxations keep training fractional: the job in 1.5 periods, half a period's move, 3,000 (COVER's
    # LP). The model without limits keeps the job's periods whole: 4,000, the optimum. So once the first is
    # proven, the second, solved after it on the same CPU, is the bound taken; past the deadline it is not
    # started.
    import time

    from optimizer.solve import driver

    model, a = _cover_two_configurations(tmp_path)
    assert "config-used" in model.mip.variables
    patch_driver(monkeypatch, "cpus", lambda: 2)
    units = relaxations.configuration_relaxation(model, a, "highs", None, 1e-9, 1,
                                            whole=("config-used",) + beside.UNIT_FAMILIES)
    assert units.status == Status.OPTIMAL and units.objective == pytest.approx(3_000)
    # asked for by a caller whose plan is not proven: they run on to their end (asked with the default, they
    # would be stopped before the second starts)
    held, said = beside.relaxations_beside(model, a, "highs", time.perf_counter() + 30.0, 1e-9,
                                            None).result(stop=False)
    assert said == beside.HELD_FREE and held.bound == pytest.approx(4_000)
    held, said = beside.relaxations_beside(model, a, "highs", time.perf_counter(), 1e-9, None).result(stop=False)
    assert said == beside.HELD_UNITS and held.bound == pytest.approx(3_000)
    # with the path's plan shared (the stable optimum, 4,000, searched for here): the first relaxation, whose
    # optimum (3,000) cannot prove it, is settled, and the second's bound proves it, which it says (answered)
    whole = driver.backend_solve(model.mip, solver="highs", gap=1e-9, threads=1)
    assert whole.status == Status.OPTIMAL and whole.objective == pytest.approx(4_000)
    shared = beside.Shared(x=whole.x)
    held, said = beside.relaxations_beside(model, a, "highs", time.perf_counter() + 30.0, 1e-6, None,
                                            shared).result(stop=False)
    assert said == beside.HELD_FREE and held.bound == pytest.approx(4_000) and shared.answered.is_set()
    # one thread asked for: nothing beside
    assert beside.relaxations_beside(model, a, "highs", time.perf_counter() + 30.0, 1e-9, 1) is None


@pytest.mark.parametrize("solver", ["cbc", "scip", "cp-sat"])
def test_every_back_end_solves_the_configuration_relaxation(tmp_path, monkeypatch, solver):
    # the same path on the other back ends: the relaxation chooses A, whose restriction's plan, 1,100, its
    # bound proves
    from optimizer.solve import driver, split

    model, a, _ = flip_unlimited(tmp_path)
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    relaxed = relaxations.configuration_relaxation(model, a, solver, 30.0, 1e-9, None)
    assert relaxed.status == Status.OPTIMAL and relaxed.objective == pytest.approx(1_100)
    lp = driver.relaxation(model, solver)
    r = driver.solve_stable(model, solver, 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert "the configuration relaxation" in r.message


def test_configurations_a_plan_leaves_unused_are_ranked_by_the_lps_traffic(tmp_path):
    # FLIP3: the plan on B alone (1,200) uses B; A and C carry nothing in it. Widened by one configuration,
    # the one added is the one the second point carries traffic on: C when it is the plan on C alone, A when
    # it is the plan on A alone.
    from optimizer.solve import driver

    model, a, _, c = flip3_unlimited(tmp_path)
    cu = model.mip.variables["config-used"]
    config = cu.coords.reset_index(drop=True)["config"].to_numpy()

    def stable_on(prefix):
        b = a.copy_bounds()
        b.col_hi[cu.ids[[not k.startswith(prefix) for k in config]]] = 0.0
        return driver.backend_solve(model.mip, "highs", gap=1e-9, arrays=b).x

    on_b, on_a, on_c = stable_on("H100"), stable_on("L4"), stable_on("A100")
    assert list(config[fixed.most_used(model, on_b, extra=0)]) == [k for k in config if k.startswith("H100")]
    assert sorted(config[fixed.most_used(model, on_b, extra=1, then=on_c)]) == sorted(
        k for k in config if not k.startswith("L4"))
    assert sorted(config[fixed.most_used(model, on_b, extra=1, then=on_a)]) == sorted(
        k for k in config if not k.startswith("A100"))


def test_the_splits_root_bound_is_the_least_of_its_leaves_not_the_best_leafs(solve, monkeypatch):
    # FLIP's split: leaf B (LP bound 675: B's node in p2, 600, and an eighth of it for p1's 1 rps, 75) is
    # searched first and finds 1,200; leaf A (LP bound 1,100) then finds 1,100 under that cutoff. The leaves
    # report root bounds of 900 (B) and 1,050 (A), each valid for its own leaf only. A plan cheaper than
    # 1,050 could still lie in B as far as the roots show, so the split's root bound is 900, not the best
    # leaf's 1,050. The model without limits reports no root here (its presolve solves it).
    roots = {1_200.0: 900.0, 1_100.0: 1_050.0}

    def on_leaf(kw, out):
        out.root_bound = roots[round(out.objective, 6)]
        return out

    spy_on_leaves(monkeypatch, on_leaf)
    plan = solve(copy.deepcopy(FLIP))
    assert plan.objective == pytest.approx(1_100) and plan.result.bound == pytest.approx(1_100)
    assert plan.result.root_bound == pytest.approx(900)


def test_a_leaf_without_a_root_bound_counts_at_its_lp_bound(solve, monkeypatch):
    # The same split, its leaves reporting no root bound (as CBC, SCIP and CP-SAT do): each counts at its LP
    # bound, min(675, 1,100) = 675 (the numbers of the test above).
    def on_leaf(kw, out):
        out.root_bound = None
        return out

    spy_on_leaves(monkeypatch, on_leaf)
    assert solve(copy.deepcopy(FLIP)).result.root_bound == pytest.approx(675)


def test_a_leaf_solved_at_its_root_has_its_bound_as_root_bound(solve):
    # With HiGHS's own reports: its presolve solves each leaf, so each search ends at its root and the root
    # proved what the search did: leaf B 1,200 (searched first, no cutoff), leaf A 1,100; the least, 1,100.
    plan = solve(copy.deepcopy(FLIP), solver="highs")
    assert plan.result.root_bound == pytest.approx(1_100)


def test_the_bound_that_proves_the_path_s_plan():
    # _Shared, worked by hand: the path holds a plan of cost 1,000 (c = (1, 2), x = (400, 300)); at a 1 % gap a
    # bound of 990 proves it (needed), 989 does not, and a proof sets `answered`; before a plan, nothing is
    # needed and nothing proves. The cost is computed again for a new plan (800: 792 needed).
    import types


    a = types.SimpleNamespace(c=np.array([1.0, 2.0]), c0=0.0)
    shared = beside.Shared(x=np.array([400.0, 300.0]))
    assert shared.cost(a) == 1_000.0 and shared.needed(a, 0.01) == pytest.approx(990.0)
    assert not shared.proven_by(a, 989.0, 0.01) and not shared.answered.is_set()
    assert shared.proven_by(a, 990.0, 0.01) and shared.answered.is_set()
    empty = beside.Shared()
    assert empty.needed(a, 0.01) is None and not empty.proven_by(a, 2_000.0, 0.01)
    shared.x = np.array([400.0, 200.0])
    assert shared.cost(a) == 800.0 and shared.needed(a, 0.01) == pytest.approx(792.0)
    # a bound proven before the path has a plan is kept (the best one), and proves the plan that comes: 795
    # proves 800 at 1 %, 780 would not
    early = beside.Shared()
    assert not early.proven_by(a, 780.0, 0.01) and not early.proven_by(a, 795.0, 0.01)
    assert not early.proven_by(a, 790.0, 0.01) and early.bound == 795.0  # the best so far, not the last
    early.x = np.array([400.0, 200.0])
    assert early.held(a, 0.01) and early.answered.is_set()
    dear = beside.Shared(bound=780.0, x=np.array([400.0, 200.0]))
    assert not dear.held(a, 0.01) and not dear.answered.is_set()


def _cover_two_configurations(tmp_path):
    """COVER (tests/test_strengthen.py) with a second, dearer configuration for chat; its stable optimum 4,000,
    its configuration relaxations 3,000 (see the test of the model without limits after them below)."""
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve

    from test_strengthen import COVER

    data = copy.deepcopy(COVER)
    data["inference"][0]["profiles"].append({"gpu": "H100-SXM", "gpus": 4, "rps": 1.5})
    pr = load_problem(write_problem(tmp_path, data))
    model = presolve.build(pr, build_candidates(pr))
    return model, model.mip.arrays()


@pytest.mark.parametrize("gap, need, said", [(0.26, 2_960.0, "units"), (0.24, 3_040.0, "free")])
def test_a_relaxation_beside_short_of_the_proof_is_solved_again_with_the_cutoff_it_needs(tmp_path, monkeypatch,
                                                                                         gap, need, said):
    # The path holds COVER's stable optimum, 4,000. The relaxation with whole units (optimum 3,000) is stood in
    # for, on its first solve, by one that ended within the gap of its own optimum with a weaker bound, 2,900,
    # and a best point of 3,100 (as HiGHS ends a search pruned at the gap). At a gap of 26 % the plan needs a
    # bound of 4,000 x 0.74 = 2,960: not proven, and 3,100 leaves room, so the relaxation is solved again (the
    # real one) with a cutoff at 2,960 and to a gap of 1e-6 (at 26 % HiGHS would prune below the cutoff once it
    # holds 3,000), ends cut off (its optimum 3,000 lies above), and its bound, 2,960,
    # proves the plan: nothing more runs. At 24 % (3,040 needed) the second solve finds 3,000 below the
    # cutoff: no proof can come from this relaxation, and the model without limits follows, whose 4,000 proves
    # the plan.
    import time

    from optimizer.solve import driver
    from optimizer.solve.result import SolveResult

    model, a = _cover_two_configurations(tmp_path)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    whole = driver.backend_solve(model.mip, solver="highs", gap=1e-9, threads=1)
    assert whole.status == Status.OPTIMAL and whole.objective == pytest.approx(4_000)
    real = relaxations.configuration_relaxation
    cutoffs = []

    def relaxation(*args, cutoff=None, **kw):
        cutoffs.append((args[4], cutoff))  # (the gap, the cutoff)
        if cutoff is None:
            return SolveResult(Status.OPTIMAL, "highs", objective=3_100.0, bound=2_900.0, gap=200 / 3_100)
        return real(*args, cutoff=cutoff, **kw)

    patch_driver(monkeypatch, "configuration_relaxation", relaxation)
    shared = beside.Shared(x=whole.x)
    held, name = beside.relaxations_beside(model, a, "highs", time.perf_counter() + 30.0, gap, None,
                                            shared).result(stop=False)
    assert cutoffs == [(gap, None), (beside.PROOF_GAP, pytest.approx(need))] and shared.answered.is_set()
    if said == "units":
        assert name == beside.HELD_UNITS and held.bound == pytest.approx(need)
    else:
        assert name == beside.HELD_FREE and held.bound == pytest.approx(4_000)


def test_within_gap_reads_the_relative_gap_and_wants_both_numbers():
    # (objective - bound) / |objective| against the gap, worked by hand; a bound above the objective is a gap of 0
    from optimizer.solve.result import within_gap

    assert within_gap(1_000.0, 990.0, 0.01) and not within_gap(1_000.0, 989.0, 0.01)
    assert within_gap(1_000.0, 1_001.0, 0.0) and within_gap(-1_000.0, -1_010.0, 0.01)
    assert not within_gap(None, 990.0, 0.5) and not within_gap(1_000.0, None, 0.5)
    assert not within_gap(np.inf, 990.0, 0.5)
