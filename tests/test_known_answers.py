"""Tiny problems whose optimum is computed by hand in the comment beside each.

Every plan goes through the audit (conftest.solve_data), so these also check
that each constraint and the ledger hold on the plan's own rows.
"""

from __future__ import annotations

import copy

import pytest

from optimizer.solve.backends import Status

ONE_PERIOD = [{"name": "p1", "hours": 100, "month": 0}]
TWO_PERIODS = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}]


def svc(name="chat", demand=10.0, gpu="H100-SXM", gpus=2, rps=1.0, **extra):
    return {"name": name, "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
            "demand_rps": demand, "profiles": [{"gpu": gpu, "gpus": gpus, "rps": rps}], **extra}


def od(id="od", price=80.0, gpu="H100-SXM", G=8, region="r1", **extra):
    return {"id": id, "gpu": gpu, "gpus_per_unit": G, "region": region, "pricing": "on_demand",
            "price_per_hour": price, **extra}


def test_on_demand_only(solve):
    # 10 rps at 1 rps per 2-GPU replica = 10 replicas = 20 GPUs -> 3 units of 8 (24 GPUs).
    # cost = 3 units × 80 $/h × 100 h = 24,000
    plan = solve({"periods": ONE_PERIOD, "offerings": [od()], "inference": [svc()]})
    assert plan.status == Status.OPTIMAL
    assert plan.objective == pytest.approx(24_000)
    assert plan.result.gap == pytest.approx(0.0, abs=1e-9)
    assert plan.inference["replicas"].sum() == 10


def reserved_problem() -> dict:
    """On-demand beside a 12-month reservation at 50 $/h; demand 10 rps in p1, 3 in p2."""
    return {"periods": TWO_PERIODS,
            "offerings": [od(), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                 "pricing": "reserved", "price_per_hour": 50, "term_months": 12}],
            "inference": [svc(demand={"p1": 10, "p2": 3})]}


def test_reserved_versus_on_demand(solve):
    # Demand 10 rps in p1, 3 rps in p2; replica = 2 GPUs at 1 rps; a unit holds 4 replicas.
    # On-demand unit-period = 80 × 100 = 8,000; reserved unit over the horizon = 50 × 200 = 10,000.
    # 0 reserved: p1 3 units + p2 1 unit = 32,000
    # 1 reserved (4 replicas both periods): 10,000 + p1 needs 6 more replicas = 2 units = 16,000 -> 26,000
    # 2 reserved: 20,000 + p1 2 more replicas = 1 unit 8,000 -> 28,000; 3 reserved: 30,000.  Optimum 26,000.
    plan = solve(reserved_problem())
    assert plan.objective == pytest.approx(26_000)
    com = plan.commitments.set_index("offering")
    assert com.loc["res", "units"] == 1
    # the horizon is calendar months 0 and 1, so it ends at month 2; the 12-month term from month 0 runs
    # 10 months past it, owed at 50 $/h × 730 h/month (not counted in the objective: commitments: horizon)
    assert com.loc["res", "months_after_horizon"] == pytest.approx(10)
    assert com.loc["res", "owed_after_horizon"] == pytest.approx(50 * 730 * 10)
    assert plan.after_horizon()["owed_after_horizon"] == pytest.approx(365_000)
    assert plan.by_pricing().set_index("pricing")["cost"].to_dict() == pytest.approx(
        {"on_demand": 16_000, "reserved": 10_000})


def test_reserved_upfront(solve):
    # Reserved at 40 $/h + 3,000 upfront per unit: 40 × 200 + 3,000 = 11,000 per unit.
    # 1 reserved + 2 on-demand units in p1 (16,000) = 27,000 < 32,000 (no reservation).
    data = {"periods": TWO_PERIODS,
            "offerings": [od(), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                 "pricing": "reserved", "price_per_hour": 40, "upfront": 3000}],
            "inference": [svc(demand={"p1": 10, "p2": 3})]}
    plan = solve(data)
    assert plan.objective == pytest.approx(27_000)
    # the ledger's rows, in its documented order: rented units (p1: 2 × 80 × 100), then the reservation's
    # periods (40 × 100 each) and its upfront, booked in the term's first period
    L = plan.ledger
    assert list(zip(L["item"], L["period"], L["cost"].round(6))) == [
        ("rental", "p1", 16_000.0), ("reservation", "p1", 4_000.0), ("reservation", "p2", 4_000.0),
        ("upfront", "p1", 3_000.0)]


def test_spot_only_where_allowed(solve):
    # Spot at 30 $/h vs on-demand 80 $/h, 3 units needed for 100 h.
    # spot: false -> 3 × 80 × 100 = 24,000; spot: true -> 3 × 30 × 100 = 9,000.
    spot = {"id": "sp", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "spot",
            "price_per_hour": 30, "interruptions_per_hour": 0.01}
    base = {"periods": ONE_PERIOD, "offerings": [od(), spot], "inference": [svc()]}
    assert solve(base).objective == pytest.approx(24_000)
    allowed = copy.deepcopy(base)
    allowed["inference"][0]["spot"] = True
    plan = solve(allowed)
    assert plan.objective == pytest.approx(9_000)
    assert set(plan.inference["pricing"]) == {"spot"}


def test_max_units_quota_spills_over(solve):
    # Cheap offering capped at 2 units (16 GPUs = 8 replicas); 2 more replicas need 1 unit of the dear one.
    # 2 × 60 × 100 + 1 × 80 × 100 = 20,000
    data = {"periods": ONE_PERIOD, "offerings": [od(), od(id="cheap", price=60, max_units=2)],
            "inference": [svc()]}
    plan = solve(data)
    assert plan.objective == pytest.approx(20_000)


def test_min_replicas(solve):
    # Demand 0.5 rps needs one 1-GPU replica, but min_replicas = 3: 3 units × 2 $/h × 100 h = 600.
    data = {"periods": ONE_PERIOD, "offerings": [od(price=2.0, G=1)],
            "inference": [svc(demand=0.5, gpus=1, min_replicas=3)]}
    plan = solve(data)
    assert plan.objective == pytest.approx(600)
    assert plan.inference["replicas"].sum() == 3


def test_regions(solve):
    # The cheaper offering is in r2, but the service runs only in r1: 3 × 80 × 100 = 24,000.
    data = {"periods": ONE_PERIOD, "offerings": [od(), od(id="far", price=10, region="r2")],
            "inference": [svc(regions=["r1"])]}
    plan = solve(data)
    assert plan.objective == pytest.approx(24_000)
    assert set(plan.inference["offering"]) == {"od"}


OWNED = {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "dc", "pricing": "owned",
         "capex": 87_600, "lifetime_years": 1, "residual_fraction": 0.0, "power_kw": 8.0,
         "idle_power_fraction": 0.2, "pue": 1.25, "electricity_per_kwh": 0.1, "fixed_per_month": 1000}


def test_owned_depreciation_and_energy(solve):
    # One month of 730 h. Energy per GPU-hour e = 8 kW / 8 GPUs × 1.25 × 0.1 = 0.125 $.
    # Demand 2 rps = 2 replicas × 2 GPUs = 4 busy GPUs of a new 8-GPU unit:
    #   depreciation 87,600 × (1 − 0) × 730 / (1 × 8760) = 7,300
    #   fixed        1,000 × 730/730                     = 1,000
    #   busy energy  4 × 730 × 0.125                     =   365
    #   idle energy  4 × 730 × 0.125 × 0.2               =    73
    #   total                                            = 8,738  (on-demand would be 20 × 730 = 14,600)
    data = {"periods": [{"name": "m", "hours": 730, "month": 0}],
            "offerings": [od(price=20, region="dc"), OWNED],
            "inference": [svc(demand=2)]}
    plan = solve(data)
    assert plan.objective == pytest.approx(8_738)
    items = plan.ledger.groupby("item")["cost"].sum().to_dict()
    assert items == pytest.approx({"depreciation": 7300, "fixed": 1000, "energy-busy": 365, "energy-idle": 73,
                                   "capex": 0, "book-value": 0})
    assert plan.commitments.set_index("offering").loc["own", "new_units"] == 1


def test_owned_existing_units_pay_no_capex(solve):
    # The same unit already owned: fixed 1,000 + busy 365 + idle 73 = 1,438 (no depreciation).
    data = {"periods": [{"name": "m", "hours": 730, "month": 0}],
            "offerings": [od(price=20, region="dc"), {**OWNED, "existing_units": 1}],
            "inference": [svc(demand=2)]}
    plan = solve(data)
    assert plan.objective == pytest.approx(1_438)
    assert plan.commitments.set_index("offering").loc["own", "new_units"] == 0


def test_owned_idle_units_still_cost(solve):
    # An existing unit nobody needs still pays fixed + idle energy: 1,000 + 8 × 730 × 0.125 × 0.2 = 1,146,
    # on top of the 2 on-demand units the service uses elsewhere: 2 × 20 × 730 = 29,200.
    data = {"periods": [{"name": "m", "hours": 730, "month": 0}],
            "offerings": [od(price=20, region="cloud"), {**OWNED, "existing_units": 1}],
            "inference": [svc(demand=6, regions=["cloud"])]}
    plan = solve(data)
    assert plan.objective == pytest.approx(29_200 + 1_146)
    # the owned unit is all idle; the two rented units hold 12 of 16 GPUs, so 4/16 of 29,200 is idle too
    assert plan.by_workload().set_index("workload").loc["(idle)", "cost"] == pytest.approx(1_146 + 29_200 / 4)



SHARING = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 300, "month": 1}]
# a: 2 then 3 replicas of 2 GPUs (4, then 6 GPUs); b: 1 replica (2 GPUs): one 8-GPU unit holds both in each period
SHARERS = [svc("a", demand={"p1": 2, "p2": 3}), svc("b", demand=1)]


def test_rented_units_are_shared_by_each_periods_gpu_hours(solve):
    # One on-demand unit per period at 80 $/h: p1 8,000, p2 24,000.
    # p1: a 4/8, b 2/8, idle 2/8 -> 4,000, 2,000, 2,000; p2: a 6/8, b 2/8 -> 18,000, 6,000, idle 0.
    plan = solve({"periods": SHARING, "offerings": [od()], "inference": SHARERS})
    assert plan.objective == pytest.approx(32_000)
    shares = plan.by_workload().set_index("workload")["cost"].to_dict()
    assert shares == pytest.approx({"a": 22_000, "b": 8_000, "(idle)": 2_000})


def test_reserved_units_are_shared_by_the_horizons_gpu_hours(solve):
    # A one-month reservation (one term block per period) at 50 $/h with 1,600 upfront per term:
    # p1 5,000 + 1,600, p2 15,000 + 1,600 = 23,200. The offering holds 8 x 100 + 8 x 300 = 3,200 GPU-hours;
    # a runs 4 x 100 + 6 x 300 = 2,200 of them (11/16), b 2 x 400 = 800 (1/4), idle 200 (1/16), and every
    # item, the upfronts too, is split so: a 15,950, b 5,800, idle 1,450.
    res = {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
           "price_per_hour": 50, "term_months": 1, "upfront": 1_600}
    plan = solve({"periods": SHARING, "offerings": [res], "inference": SHARERS})
    assert plan.objective == pytest.approx(23_200)
    shares = plan.by_workload().set_index("workload")["cost"].to_dict()
    assert shares == pytest.approx({"a": 15_950, "b": 5_800, "(idle)": 1_450})

def test_npv_reserved_discounting(solve):
    # Periods in month 0 and month 12 (730 h each); discount rate 10 %/year.
    # Reserved for 24 months at 10 $/h + 1,000 upfront; demand needs the one unit in both periods.
    # NPV  = 1,000 (upfront, undiscounted) + 10 × 730 + 10 × 730 / 1.1 = 14,936.36...
    # cost = 1,000 + 10 × 1,460 = 15,600
    data = {"periods": [{"name": "y0", "hours": 730, "month": 0}, {"name": "y1", "hours": 730, "month": 12}],
            "offerings": [od(price=1000), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                           "pricing": "reserved", "price_per_hour": 10, "upfront": 1000,
                                           "term_months": 24}],
            "inference": [svc(demand=4)],
            "finance": {"objective": "npv", "discount_rate": 0.1}}
    plan = solve(data)
    assert plan.objective == pytest.approx(1000 + 7300 + 7300 / 1.1)
    assert plan.total_cost == pytest.approx(15_600)


def test_reserved_terms_renew_inside_the_horizon(solve):
    # 12-month terms over months 0 and 12 (730 h each): two terms, sized independently.
    # Demand: 8 replicas (16 GPUs, 2 units) in year 0, 4 replicas (1 unit) in year 1; 1 rps per 2-GPU replica.
    # Reserved 10 $/h + 1,000 upfront per unit and term; on demand 1,000 $/h (never worth it).
    # cost = year 0: 2 × (10 × 730 + 1,000) = 16,600; year 1: 1 × (7,300 + 1,000) = 8,300 -> 24,900
    # NPV (10 %): 16,600 + 8,300 / 1.1 (both the upfront at month 12 and the hours in month 12) = 24,145.45
    data = {"periods": [{"name": "y0", "hours": 730, "month": 0}, {"name": "y1", "hours": 730, "month": 12}],
            "offerings": [od(price=1000), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                           "pricing": "reserved", "price_per_hour": 10, "upfront": 1000,
                                           "term_months": 12}],
            "inference": [svc(demand={"y0": 8, "y1": 4})],
            "finance": {"objective": "npv", "discount_rate": 0.1}}
    plan = solve(data)
    assert plan.total_cost == pytest.approx(24_900)
    assert plan.objective == pytest.approx(16_600 + 8_300 / 1.1)
    com = plan.commitments.set_index("start_month")
    assert com.loc[0, "units"] == 2 and com.loc[12, "units"] == 1
    assert com.loc[12, "months_after_horizon"] == pytest.approx(11)


def test_npv_owned_book_value(solve):
    # New owned unit, capex 100,000, life 2 years (17,520 h), residual 0.2, no running costs.
    # Horizon 1,460 h (months 0 and 12). Book value at the end:
    #   100,000 × (1 − 0.8 × min(1, 1460/17520)) = 100,000 × (1 − 0.8/12) = 93,333.33,
    #   returned at month 13: discounted by 1.1^(−13/12).
    # NPV  = 100,000 − 93,333.33 × 1.1^(−13/12)
    # cost = depreciation 100,000 × 0.8 × 1460 / 17520 = 6,666.67
    owned = {**OWNED, "capex": 100_000, "lifetime_years": 2, "residual_fraction": 0.2, "power_kw": 0.0,
             "electricity_per_kwh": 0.0, "fixed_per_month": 0.0}
    data = {"periods": [{"name": "y0", "hours": 730, "month": 0}, {"name": "y1", "hours": 730, "month": 12}],
            "offerings": [od(price=1000, region="dc"), owned],
            "inference": [svc(demand=4)],
            "finance": {"objective": "npv", "discount_rate": 0.1}}
    plan = solve(data)
    book = 100_000 * (1 - 0.8 / 12)
    assert plan.objective == pytest.approx(100_000 - book * 1.1 ** (-13 / 12))
    assert plan.total_cost == pytest.approx(100_000 * 0.8 * 1460 / 17520)


# --- training --------------------------------------------------------------

SHARED = {
    # p1 and p2 are months 0 and 1, 200 h each. One reserved 8-GPU unit at 10 $/h (max 1 unit)
    # and an expensive on-demand offering at 100 $/h per 8-GPU unit.
    "periods": [{"name": "p1", "hours": 200, "month": 0}, {"name": "p2", "hours": 200, "month": 1}],
    "offerings": [
        {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
         "price_per_hour": 10, "max_units": 1},
        od(price=100),
    ],
    # inference: 4-GPU replicas at 1 rps: p1 needs 2 replicas (8 GPUs), p2 one (4 GPUs)
    "inference": [svc(demand={"p1": 2, "p2": 1}, gpus=4)],
    # training: 4-GPU cluster for 150 h
    "training": [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "start_month": 0, "deadline_month": 1,
                  "cluster_gpus": [4], "profiles": [{"gpu": "H100-SXM", "gpus": 4, "hours": 150}]}],
}


def test_training_shares_reserved_capacity_with_inference(solve):
    # p1: inference fills the unit, a cluster cannot fit beside it. p2: inference uses 4 GPUs,
    # the 4-GPU cluster fits beside it for 150 of 200 h (4 + 4 × 150/200 = 7 ≤ 8).
    # Cost = reserved 1 unit × 10 × 400 = 4,000; nothing on demand.
    plan = solve(copy.deepcopy(SHARED))
    assert plan.objective == pytest.approx(4_000)
    assert set(plan.training["period"]) == {"p2"}
    assert plan.training["hours"].sum() == pytest.approx(150)


def test_training_window_forces_on_demand(solve):
    # Deadline month 0: the job must run in p1, where the reserved unit is full of inference,
    # so it rents on demand for 150 h. The cloud rents whole 8-GPU units: the 4-GPU cluster pays
    # 1 unit × 100 $/h × 150 h = 15,000 (not 4/8 of it). Total 4,000 + 15,000 = 19,000.
    data = copy.deepcopy(SHARED)
    data["training"][0]["deadline_month"] = 0
    plan = solve(data)
    assert plan.objective == pytest.approx(19_000)
    assert set(plan.training["offering"]) == {"od"}


def test_training_cluster_never_time_slices(solve):
    # An 8-GPU cluster does not fit beside p2's 4 inference GPUs even though 4 + 8 × 50/200 = 6 ≤ 8
    # on average: it must rent on demand, 8 × 100/8 × 50 = 5,000, plus the reservation 4,000.
    data = copy.deepcopy(SHARED)
    data["training"][0]["cluster_gpus"] = [8]
    data["training"][0]["profiles"] = [{"gpu": "H100-SXM", "gpus": 8, "hours": 50}]
    data["training"][0]["start_month"] = 1
    plan = solve(data)
    assert plan.objective == pytest.approx(9_000)


def test_training_one_configuration_and_period_hours(solve):
    # Two configurations: 8 GPUs for 300 h, or 16 GPUs for 160 h, on demand at 8 $/GPU-h... per 8-GPU unit 64 $/h.
    # 8 GPUs × 8 × 300 = 19,200 ; 16 GPUs × 8 × 160 = 20,480. The job needs 300 h but a period has only
    # 200 h and the window is one period, so the 8-GPU plan is impossible: 20,480. The 16-GPU cluster spans
    # two units, so the offering states an InfiniBand fabric joining them.
    data = {"periods": [{"name": "p1", "hours": 200, "month": 0}, {"name": "p2", "hours": 200, "month": 1}],
            "offerings": [od(price=64, fabric="infiniband", fabric_gbps_per_gpu=400, max_cluster_units=4)],
            "training": [{"name": "pt", "model": "llama-3.1-8b", "tokens": 1e10, "deadline_month": 0,
                          "profiles": [{"gpu": "H100-SXM", "gpus": 8, "hours": 300},
                                       {"gpu": "H100-SXM", "gpus": 16, "hours": 160}]}]}
    plan = solve(data)
    assert plan.objective == pytest.approx(20_480)
    assert set(plan.training["gpus"]) == {16}
    # with the window open to month 1 the cheaper 8-GPU configuration runs across both periods
    data["training"][0]["deadline_month"] = 1
    plan = solve(data)
    assert plan.objective == pytest.approx(19_200)


def test_spot_training_waste(solve):
    # 8-GPU cluster, 100 h of work; one 8-GPU spot unit interrupted 0.01 times per hour (M = 100 h).
    # Checkpoint every 30 min, 5 min to write, 20 min to restart:
    #   waste = (5/60)/(30/60) + (0.25 h + 20/60 h)/100 h = 0.166667 + 0.005833 = 0.1725
    #   hours = 100 / (1 − 0.1725) = 120.8459; cost = 8 × 10/8 × 120.8459 = 1,208.46 (on demand: 1,500)
    data = {"periods": [{"name": "p1", "hours": 700, "month": 0}],
            "offerings": [od(price=15), {"id": "sp", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1",
                                         "pricing": "spot", "price_per_hour": 10, "interruptions_per_hour": 0.01}],
            "training": [{"name": "pt", "model": "llama-3.1-8b", "tokens": 1e10, "deadline_month": 0,
                          "spot": True, "checkpoint_minutes": 30,
                          "profiles": [{"gpu": "H100-SXM", "gpus": 8, "hours": 100}]}],
            "efficiency": {"checkpoint_write_minutes": 5, "restart_minutes": 20}}
    plan = solve(data)
    assert plan.objective == pytest.approx(8 * 10 / 8 * 100 / (1 - 0.1725), rel=1e-6)
    # the same job without spot tolerance pays on-demand: 8 × 15/8 × 100 = 1,500
    data["training"][0]["spot"] = False
    assert solve(data).objective == pytest.approx(1_500)


# --- budget and buckets ---------------------------------------------------------

def test_budget_binds(solve, tmp_path):
    data = {"periods": ONE_PERIOD, "offerings": [od()], "inference": [svc()], "constraints": {"budget": 24_000}}
    assert solve(data).objective == pytest.approx(24_000)
    data["constraints"]["budget"] = 23_999
    plan = solve(data)
    assert plan.status == Status.INFEASIBLE


BUCKETS = {
    # One period of 10 h. L4 and H100 offerings of one GPU per unit at 1 and 4 $/h.
    # Demand 10 rps split into four buckets; rps per replica:
    #   bucket  share  L4    H100
    #   b1      0.4    4     8
    #   b2      0.3    3     6
    #   b3      0.2    0.5   4
    #   b4      0.1    -     2       (L4 cannot serve b4)
    # All H100: replica-time 4/8 + 3/6 + 2/4 + 1/2 = 2.0 -> 2 replicas = 8 $/h -> 80.
    # All L4: impossible (b4).
    # Mix: 2 L4 take b1 (4/4 = 1) and b2 (3/3 = 1); 1 H100 takes b3 (2/4) and b4 (1/2) -> 2 + 4 = 6 $/h -> 60.
    # (1 H100 + 1 L4 cannot: b2 on H100 would need 1.5 H100 replica-time.)
    "periods": [{"name": "p1", "hours": 10, "month": 0}],
    "offerings": [od(id="l4", gpu="L4", G=1, price=1.0), od(id="h100", gpu="H100-SXM", G=1, price=4.0)],
    "inference": [{
        "name": "assistant", "model": "llama-3.1-8b", "demand_rps": 10,
        "requests": [{"name": "b1", "prompt_tokens": 200, "output_tokens": 100, "share": 0.4},
                     {"name": "b2", "prompt_tokens": 1000, "output_tokens": 200, "share": 0.3},
                     {"name": "b3", "prompt_tokens": 4000, "output_tokens": 400, "share": 0.2},
                     {"name": "b4", "prompt_tokens": 16000, "output_tokens": 400, "share": 0.1}],
        "profiles": [{"gpu": "L4", "gpus": 1, "bucket": "b1", "rps": 4},
                     {"gpu": "L4", "gpus": 1, "bucket": "b2", "rps": 3},
                     {"gpu": "L4", "gpus": 1, "bucket": "b3", "rps": 0.5},
                     {"gpu": "H100-SXM", "gpus": 1, "bucket": "b1", "rps": 8},
                     {"gpu": "H100-SXM", "gpus": 1, "bucket": "b2", "rps": 6},
                     {"gpu": "H100-SXM", "gpus": 1, "bucket": "b3", "rps": 4},
                     {"gpu": "H100-SXM", "gpus": 1, "bucket": "b4", "rps": 2}]}],
}


def test_buckets_make_a_heterogeneous_fleet_cheaper(solve):
    plan = solve(copy.deepcopy(BUCKETS))
    assert plan.objective == pytest.approx(60)
    reps = plan.inference.groupby("gpu")["replicas"].sum().to_dict()
    assert reps == {"L4": 2, "H100-SXM": 1}
    routed = plan.routing.groupby(["bucket", "offering"])["rps"].sum()
    assert routed[("b4", "h100")] == pytest.approx(1.0)
    # a single GPU type does worse: H100 only costs 80, L4 only cannot serve b4 at all
    h100_only = copy.deepcopy(BUCKETS)
    h100_only["offerings"] = [BUCKETS["offerings"][1]]
    assert solve(h100_only).objective == pytest.approx(80)
    l4_only = copy.deepcopy(BUCKETS)
    l4_only["offerings"] = [BUCKETS["offerings"][0]]
    assert solve(l4_only).status == Status.INFEASIBLE


# --- back ends agree ---------------------------------------------------------------

@pytest.mark.parametrize("solver", ["highs", "scip"])
def test_backends_agree(solve, solver):
    for data, expected in ((copy.deepcopy(BUCKETS), 60), (copy.deepcopy(SHARED), 4_000),
                           ({"periods": TWO_PERIODS,
                             "offerings": [od(), {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8,
                                                  "region": "r1", "pricing": "reserved", "price_per_hour": 50}],
                             "inference": [svc(demand={"p1": 10, "p2": 3})]}, 26_000)):
        plan = solve(data, solver=solver)
        assert plan.status == Status.OPTIMAL
        assert plan.objective == pytest.approx(expected)


def test_job_without_usable_configuration_is_never_dropped(tmp_path):
    # A 405B-parameter job on single L4 cards: sizing finds no configuration that fits, so the job has
    # no candidates at all. The model still records its empty `training-select-one` row (a job can't
    # silently vanish from a "feasible" plan).
    from conftest import write_problem
    from optimizer.candidates import build_candidates
    from optimizer.model.formulation import build_model
    from optimizer.load import load_problem

    data = {"periods": ONE_PERIOD, "offerings": [od(gpu="L4", G=1)],
            "training": [{"name": "j", "model": "llama-3.1-405b", "tokens": 1e9, "deadline_month": 0,
                          "cluster_gpus": [1]}]}
    problem = load_problem(write_problem(tmp_path, data))
    cands = build_candidates(problem)
    assert cands.training.empty
    mip, _, _ = build_model(problem, cands)
    assert mip.infeasible_rows["training-select-one"]["job"].tolist() == ["j"]


def test_spot_offering_without_a_rate_gets_the_catalog_default(tmp_path):
    # catalogs/finance_defaults.csv: spot_interruptions_per_hour = -ln(1 - 0.15)/730 (a 15 %/month band)
    import math

    from conftest import write_problem
    from optimizer.load import load_problem

    spot = {"id": "sp", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "spot",
            "price_per_hour": 10}
    problem = load_problem(write_problem(tmp_path, {"periods": ONE_PERIOD, "offerings": [spot],
                                                    "inference": [svc(spot=True)]}))
    rate = problem.offerings.loc["sp", "interruptions_per_hour"]
    assert rate == pytest.approx(-math.log(0.85) / 730, rel=1e-4)
