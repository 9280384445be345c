"""Stage 3: the mixed-integer program, built per component family from whole tables.

``build_model`` reads as the list of families. Each ``add_<family>`` selects
its rows with pandas merges and hands whole term tables to :class:`~optimizer.model.mip.MIP`.
Names follow fixed patterns so a solution maps back to tables mechanically
(docs/formulation.md gives the mathematics under the same names):

variables
    ``inference-replicas`` [service, config, offering, period] integer;
    ``inference-routing`` [service, bucket, config, offering, period] rps;
    ``units-running`` [offering, period] integer (on-demand, spot);
    ``units-reserved`` [offering, block] integer (one per term block: renewals);
    ``units-owned-new`` [offering] integer;
    ``training-select`` [job, config] binary;
    ``training-run`` [job, config, offering, period] binary;
    ``training-hours`` [job, config, offering, period] hours.
constraints
    ``inference-demand``, ``inference-routing-capacity``, ``inference-min-replicas``,
    ``capacity-running-inference``, ``capacity-running-upper``,
    ``capacity-reserved``, ``capacity-owned``, ``training-fit``,
    ``training-hours-run``, ``training-run-select``, ``training-select-one``,
    ``training-period-hours``, ``training-progress``, ``budget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import HOURS_PER_MONTH, HOURS_PER_YEAR, Problem
from .mip import MIP, terms

RENTED = ("on_demand", "spot")
#: A spot placement whose expected waste is at least this share of its hours is not offered.
MAX_SPOT_WASTE = 0.5


@dataclass
class Tables:
    """Inputs of the formulation as flat tables (what the model code reads)."""

    periods: pd.DataFrame  # period, hours, month, discount
    offerings: pd.DataFrame  # offering, gpu, G, pricing, price, max_units, ... + cost coefficients
    inference_options: pd.DataFrame  # service, config, offering, period, gpus, G, pricing
    rps: pd.DataFrame  # service, config, bucket, rps
    demand: pd.DataFrame  # service, bucket, period, rps
    multi_bucket: set[str]
    min_replicas: pd.DataFrame  # service, period, min_replicas
    training_configs: pd.DataFrame  # job, config, gpu, gpus, hours
    training_options: pd.DataFrame  # job, config, offering, period, gpus, G, pricing, hours_p, progress
    horizon_hours: float
    objective: str
    rate: float  # yearly discount rate applied (0 under `objective: cost`)
    jobs: list[str] = field(default_factory=list)  # every training job, candidates or not


# ---------------------------------------------------------------------------
# preparation: everything the families need, as tables


def discount_factors(months: pd.Series, rate: float) -> pd.Series:
    """Present-value factor of a cash flow in calendar month ``m``: (1 + r)^(−m/12)."""
    return (1.0 + rate) ** (-months.astype(float) / 12.0)


def horizon_end_month(P: pd.DataFrame) -> float:
    """Calendar month at which the horizon ends (when owned units' book value comes back).

    The month after the last period's month (design.md), or later when a period
    runs past it: a period of 8760 h at month 24 ends at month 36, not 25.
    """
    months = P["month"].astype(float)
    return float(max(months.max() + 1.0, (months + P["hours"].astype(float) / HOURS_PER_MONTH).max()))


def spot_waste(
    cluster_gpus: np.ndarray,
    gpus_per_unit: np.ndarray,
    interruptions_per_hour: np.ndarray,
    checkpoint_minutes: np.ndarray,
    checkpoint_write_minutes: float,
    restart_minutes: float,
) -> np.ndarray:
    """Expected share of a spot training job's hours that makes no progress.

    A cluster spans ``n = ceil(cluster_gpus / gpus_per_unit)`` units, each
    reclaimed at rate λ per hour, so interruptions arrive every M = 1/(n·λ)
    hours. With a checkpoint every τ hours that takes δ to write, and a restart
    taking R, the waste per hour of wall clock is (Young/Daly)

        waste = δ/τ + (τ/2 + R)/M

    the checkpoint writes, plus half an interval of lost work and a restart
    per interruption.
    """
    units = np.ceil(cluster_gpus / gpus_per_unit)
    mtbi = 1.0 / np.maximum(units * interruptions_per_hour, 1e-12)
    tau = checkpoint_minutes / 60.0
    return checkpoint_write_minutes / 60.0 / tau + (tau / 2.0 + restart_minutes / 60.0) / mtbi


def prepare(problem: Problem, cands: Candidates) -> Tables:
    """Turn the problem and its candidates into the tables the families select from."""
    eff = cands.efficiency
    P = problem.periods.reset_index().rename(columns={"name": "period"})
    rate = problem.discount_rate if problem.objective == "npv" else 0.0
    P["discount"] = discount_factors(P["month"], rate)
    H = float(P["hours"].sum())

    O = problem.offerings.reset_index().rename(columns={"id": "offering", "gpus_per_unit": "G"})
    O["G"] = O["G"].astype(int)
    O["price"] = O["price_per_hour"].fillna(0.0)
    O["interruptions"] = O["interruptions_per_hour"].astype(float).fillna(0.0)  # only non-spot rows are empty
    O["existing"] = O["existing_units"].fillna(0).astype(int)
    # energy per busy GPU-hour of an owned GPU; idle GPU-hours pay idle_power_fraction of it
    O["energy_per_gpu_hour"] = (O["power_kw"].fillna(0) / O["G"] * O["pue"].fillna(1.0)
                                * O["electricity_per_kwh"].fillna(0))

    # --- inference options: (service, config) × offerings × periods -------------
    inf = cands.inference
    svc_rows = []
    for s in problem.services:
        regions = s.regions
        for p in P["period"]:
            svc_rows.append((s.name, p, bool(s.spot), tuple(regions) if regions else None, s.min_replicas))
    svc = pd.DataFrame(svc_rows, columns=["service", "period", "spot_ok", "regions", "min_replicas"])
    demand = problem.demand()
    total = demand.groupby(["service", "period"], as_index=False)["rps"].sum()
    svc = svc.merge(total, on=["service", "period"], how="left")
    # a replica is only useful where there is demand or a floor to meet
    active = svc[(svc["rps"] > 0) | (svc["min_replicas"] > 0)]

    configs = inf.drop_duplicates(["service", "config"])[["service", "config", "gpu", "gpus"]]
    opts = configs.merge(O[["offering", "gpu", "G", "pricing", "region"]], on="gpu")
    opts = opts[opts["gpus"] <= opts["G"]]
    opts = opts.merge(active[["service", "period", "spot_ok", "regions"]], on="service")
    ok_region = [r is None or reg in r for reg, r in zip(opts["region"], opts["regions"])]
    ok_spot = (opts["pricing"] != "spot") | opts["spot_ok"]
    opts = opts[np.asarray(ok_region, dtype=bool) & ok_spot.to_numpy()]
    opts = opts.merge(P[["period", "hours", "discount"]], on="period")
    inference_options = opts.drop(columns=["regions", "spot_ok", "region"]).reset_index(drop=True)

    multi = {s.name for s in problem.services if len(s.buckets) > 1}
    min_reps = svc.loc[svc["min_replicas"] > 0, ["service", "period", "min_replicas"]]

    # --- training options: (job, config) × offerings × periods in the window ----
    tc = cands.training
    job_rows = []
    for j in problem.jobs:
        for p, m in zip(P["period"], P["month"]):
            if j.start_month <= m <= j.deadline_month:
                job_rows.append((j.name, p, bool(j.spot), tuple(j.regions) if j.regions else None,
                                 float(j.checkpoint_minutes)))
    jobs = pd.DataFrame(job_rows, columns=["job", "period", "spot_ok", "regions", "checkpoint_minutes"])
    topt = tc[["job", "config", "gpu", "gpus", "hours"]].merge(
        O[["offering", "gpu", "G", "pricing", "region", "max_units", "interruptions"]], on="gpu")
    fits = topt["max_units"].isna() | (topt["gpus"] <= topt["max_units"].fillna(0) * topt["G"])
    topt = topt[fits].merge(jobs, on="job")
    ok_region = [r is None or reg in r for reg, r in zip(topt["region"], topt["regions"])]
    ok_spot = (topt["pricing"] != "spot") | topt["spot_ok"]
    topt = topt[np.asarray(ok_region, dtype=bool) & ok_spot.to_numpy()].copy()
    waste = spot_waste(
        topt["gpus"].to_numpy(float), topt["G"].to_numpy(float), topt["interruptions"].to_numpy(float),
        topt["checkpoint_minutes"].to_numpy(float),
        float(eff.get("checkpoint_write_minutes", 5.0)), float(eff.get("restart_minutes", 20.0)),
    )
    topt["waste"] = np.where(topt["pricing"] == "spot", waste, 0.0)
    topt = topt[topt["waste"] < MAX_SPOT_WASTE]
    topt["progress"] = 1.0 - topt["waste"]
    topt = topt.merge(P[["period", "hours", "discount"]].rename(columns={"hours": "period_hours"}), on="period")
    training_options = topt.drop(columns=["regions", "spot_ok", "region", "max_units", "interruptions"]
                                 ).reset_index(drop=True)

    return Tables(
        periods=P,
        offerings=O,
        inference_options=inference_options,
        rps=inf[["service", "config", "bucket", "rps"]],
        demand=demand[demand["rps"] > 0],
        multi_bucket=multi,
        min_replicas=min_reps,
        training_configs=tc,
        training_options=training_options,
        horizon_hours=H,
        objective=problem.objective,
        rate=rate,
        jobs=[j.name for j in problem.jobs],
    )


# ---------------------------------------------------------------------------
# cost coefficients (shared by the model, the plan's ledger and the audit)


def owned_unit_costs(O: pd.DataFrame, P: pd.DataFrame, objective: str, rate: float) -> pd.DataFrame:
    """Per-offering cost of one owned unit over the horizon, excluding busy energy.

    Under ``cost``: depreciation of a new unit, capex·(1 − residual)·H ÷
    (lifetime·8760); for every unit, fixed_per_month·months and idle energy
    e·idle·G·H. Under ``npv``: capex at the start, minus the book value at the
    end, capex·(1 − (1 − residual)·min(1, H ÷ (lifetime·8760))), discounted to
    the month after the last period; fixed costs and idle energy per period,
    discounted. ``P`` carries each period's ``discount`` factor.
    """
    H = float(P["hours"].sum())
    own = O[O["pricing"] == "owned"][["offering", "G", "capex", "lifetime_years", "residual_fraction",
                                      "fixed_per_month", "idle_power_fraction", "energy_per_gpu_hour"]].copy()
    life_h = own["lifetime_years"] * HOURS_PER_YEAR
    if objective == "npv":
        hours = float((P["hours"] * P["discount"]).sum())  # discounted hours
        end = (1.0 + rate) ** (-horizon_end_month(P) / 12.0)
        book = own["capex"] * (1 - (1 - own["residual_fraction"]) * np.minimum(1.0, H / life_h))
        own["capital_new"] = own["capex"] - book * end
    else:
        hours = H
        own["capital_new"] = own["capex"] * (1 - own["residual_fraction"]) * H / life_h
    own["fixed_unit"] = own["fixed_per_month"] * hours / HOURS_PER_MONTH
    own["idle_energy_unit"] = own["energy_per_gpu_hour"] * own["idle_power_fraction"] * own["G"] * hours
    return own


# ---------------------------------------------------------------------------
# families


def add_inference(m: MIP, T: Tables) -> dict[str, pd.DataFrame]:
    """Replicas per (service, config, offering, period); demand, routing and floors.

    Single-size services: Σ replicas·rps ≥ demand. Bucketed services: each
    bucket's traffic (demand × share) is routed to configurations in any
    fractions, Σ routed ≥ demand·share, and a replica's time is shared by what
    is routed to it: Σ_b routed_b ÷ rps_b ≤ replicas.
    """
    opts = T.inference_options
    rep = m.add_variables("inference-replicas", opts[["service", "config", "offering", "period"]], integer=True)
    rep = rep.merge(opts, on=["service", "config", "offering", "period"])
    single = rep[~rep["service"].isin(T.multi_bucket)].merge(T.rps, on=["service", "config"])
    multi = rep[rep["service"].isin(T.multi_bucket)]

    route = multi[["service", "config", "offering", "period", "var"]].rename(columns={"var": "rep_var"}).merge(
        T.rps, on=["service", "config"])
    route = route.merge(T.demand[["service", "bucket", "period"]], on=["service", "bucket", "period"])
    rv = m.add_variables("inference-routing", route[["service", "bucket", "config", "offering", "period"]])
    route = route.reset_index(drop=True)
    route["var"] = rv["var"].to_numpy()

    keys = ["service", "bucket", "period"]
    m.add_constraints(
        "inference-demand",
        [terms(single, keys, single["rps"]), terms(route, keys, 1.0)],
        ">=",
        T.demand.rename(columns={"rps": "rhs"}),
        keys=keys,
    )
    ckeys = ["service", "config", "offering", "period"]
    m.add_constraints(
        "inference-routing-capacity",
        [terms(route, ckeys, 1.0 / route["rps"]), terms(multi, ckeys, -1.0)],
        "<=", 0.0, keys=ckeys,
    )
    mkeys = ["service", "period"]
    m.add_constraints(
        "inference-min-replicas",
        [terms(rep, mkeys, 1.0)],
        ">=",
        T.min_replicas.rename(columns={"min_replicas": "rhs"}),
        keys=mkeys,
    )
    return {"replicas": rep, "routing": route}


def add_training(m: MIP, T: Tables) -> dict[str, pd.DataFrame]:
    """One configuration per job; hours per offering and period; progress to completion.

    ``training-run`` is 1 where the job's cluster is placed on an offering in
    a period; hours there are at most the period's hours; a job's hours in a
    period, over all offerings, are at most the period's hours; progress
    (hours × (1 − spot waste)) covers the chosen configuration's hours.
    """
    tc = T.training_configs
    sel = m.add_variables("training-select", tc[["job", "config"]], upper=1.0, integer=True)
    sel = sel.merge(tc, on=["job", "config"])
    opts = T.training_options
    keys = ["job", "config", "offering", "period"]
    run = m.add_variables("training-run", opts[keys], upper=1.0, integer=True).merge(opts, on=keys)
    hrs = m.add_variables("training-hours", opts[keys], upper=opts["period_hours"].to_numpy()).merge(opts, on=keys)

    m.add_constraints("training-select-one", [terms(sel, ["job"], 1.0)], "==",
                      # every job, so one without candidates is an empty row reported as infeasible
                      pd.DataFrame({"job": pd.Series(T.jobs, dtype=object), "rhs": 1.0}), keys=["job"])
    m.add_constraints("training-hours-run",
                      [terms(hrs, keys, 1.0), terms(run, keys, -run["period_hours"])], "<=", 0.0, keys=keys)
    selv = sel[["job", "config", "var"]].rename(columns={"var": "sel_var"})
    rs = run.merge(selv, on=["job", "config"])
    m.add_constraints("training-run-select",
                      [terms(rs, keys, 1.0), terms(rs, keys, -1.0, var="sel_var")], "<=", 0.0, keys=keys)
    per = hrs.groupby(["job", "period"], as_index=False)["period_hours"].first().rename(
        columns={"period_hours": "rhs"})
    m.add_constraints("training-period-hours", [terms(hrs, ["job", "period"], 1.0)], "<=", per,
                      keys=["job", "period"])
    m.add_constraints("training-progress",
                      [terms(hrs, ["job", "config"], hrs["progress"]), terms(sel, ["job", "config"], -sel["hours"])],
                      "==", 0.0, keys=["job", "config"])
    return {"select": sel, "run": run, "hours": hrs}


def period_blocks(O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """Term block of every (reserved offering, period): block = ⌊month ÷ term_months⌋."""
    res = O[O["pricing"] == "reserved"][["offering", "term_months"]]
    pb = res.merge(P[["period", "month"]], how="cross")
    pb["block"] = (pb["month"] // pb["term_months"].astype(int)).astype(int)
    return pb[["offering", "period", "block"]]


def reserved_blocks(O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """One row per (reserved offering, term block that some period falls in)."""
    pb = period_blocks(O, P).drop_duplicates(["offering", "block"])[["offering", "block"]]
    res = pb.merge(O[O["pricing"] == "reserved"], on="offering")
    res["start_month"] = res["block"] * res["term_months"].astype(int)
    return res.sort_values(["offering", "block"]).reset_index(drop=True)


def add_units(m: MIP, T: Tables) -> dict[str, pd.DataFrame]:
    """Units running per period (rented), reserved units per term block, new owned units."""
    O = T.offerings
    rented = O[O["pricing"].isin(RENTED)]
    run = rented[["offering"]].merge(T.periods[["period"]], how="cross")
    run = run.merge(rented[["offering", "G", "max_units", "price"]], on="offering")
    run = run.merge(T.periods[["period", "hours", "discount"]], on="period")
    used = set(T.inference_options["offering"])
    run = run[run["offering"].isin(used)]
    ub = run["max_units"].fillna(np.inf).to_numpy(float)
    v = m.add_variables("units-running", run[["offering", "period"]], upper=ub, integer=True)
    run = run.reset_index(drop=True)
    run["var"] = v["var"].to_numpy()

    # reserved units per term block: a term of T months covers months [k·T, (k+1)·T); a new block
    # is a renewal, whose size may differ. A term at least as long as the horizon is one block.
    res = reserved_blocks(O, T.periods)
    v = m.add_variables("units-reserved", res[["offering", "block"]],
                        upper=res["max_units"].fillna(np.inf).to_numpy(float), integer=True)
    res["var"] = v["var"].to_numpy()

    own = O[O["pricing"] == "owned"].reset_index(drop=True)
    cap = (own["max_units"] - own["existing"]).fillna(np.inf).clip(lower=0).to_numpy(float)
    v = m.add_variables("units-owned-new", own[["offering"]], upper=cap, integer=True)
    own["var"] = v["var"].to_numpy()

    # committed or owned units available in each period (the variable and the units already there)
    pb = period_blocks(O, T.periods)
    held = pd.concat([
        pb.merge(res[["offering", "block", "G", "var"]], on=["offering", "block"]).assign(existing=0),
        own[["offering", "G", "var", "existing"]].merge(T.periods[["period"]], how="cross"),
    ], ignore_index=True)[["offering", "period", "G", "var", "existing"]]
    return {"running": run, "reserved": res, "owned": own, "held": held}


def add_capacity(m: MIP, T: Tables, inf: dict, tr: dict, units: dict) -> None:
    """Inference GPUs I and training GPUs T fit in each offering, period by period.

    Rented: I ≤ G·units running and units running + T/G ≤ max_units.
    Reserved: I + T ≤ G·units reserved. Owned: I + T ≤ G·(existing + new).
    A cluster runs beside that period's inference only where it fits:
    cluster GPUs ≤ G·units − I (reserved, owned) or ≤ (max_units − units
    running)·G (rented).
    """
    keys = ["offering", "period"]
    rep = inf["replicas"]
    I_terms = terms(rep, keys, rep["gpus"])  # inference GPUs
    hrs = tr["hours"]
    T_terms = terms(hrs, keys, hrs["gpus"] / hrs["period_hours"])  # average training GPUs
    run = units["running"]

    is_rented = I_terms["offering"].isin(run["offering"])
    m.add_constraints("capacity-running-inference",
                      [I_terms[is_rented], terms(run, keys, -run["G"])], "<=", 0.0, keys=keys)
    capped = run[run["max_units"].notna()]
    t_rented = T_terms[T_terms["offering"].isin(capped["offering"])]
    m.add_constraints(
        "capacity-running-upper",
        [terms(capped, keys, 1.0), t_rented.assign(coef=t_rented["coef"] /
                                                  t_rented["offering"].map(capped.groupby("offering")["G"].first()))],
        "<=", capped[keys].assign(rhs=capped["max_units"].to_numpy(float)), keys=keys)

    held = units["held"]
    for kind, name in (("reserved", "capacity-reserved"), ("owned", "capacity-owned")):
        rows = held[held["offering"].isin(T.offerings.loc[T.offerings["pricing"] == kind, "offering"])]
        mine = set(rows["offering"])
        m.add_constraints(
            name,
            [I_terms[I_terms["offering"].isin(mine)], T_terms[T_terms["offering"].isin(mine)],
             terms(rows, keys, -rows["G"])],
            "<=", rows[keys].assign(rhs=(rows["G"] * rows["existing"]).to_numpy(float)), keys=keys)

    # training-fit: n_c·run + I − G·units ≤ G·existing (reserved/owned); n_c·run + G·running ≤ G·max_units (rented)
    fkeys = ["job", "config", "offering", "period"]
    trun = tr["run"]
    fr = trun[trun["offering"].isin(held["offering"])]
    if len(fr):
        rep_op = rep[["offering", "period", "var", "gpus"]]
        fr_inf = fr[fkeys].merge(rep_op, on=["offering", "period"])
        fr_cap = fr[fkeys].merge(held.rename(columns={"var": "uvar"}), on=["offering", "period"])
        m.add_constraints(
            "training-fit",
            [terms(fr, fkeys, fr["gpus"]), terms(fr_inf, fkeys, fr_inf["gpus"]),
             terms(fr_cap, fkeys, -fr_cap["G"], var="uvar")],
            "<=", fr_cap[fkeys].assign(rhs=(fr_cap["G"] * fr_cap["existing"]).to_numpy(float)), keys=fkeys)
    rr = trun[trun["offering"].isin(capped["offering"])]
    if len(rr):
        rr_units = rr[fkeys].merge(capped[["offering", "period", "var", "G", "max_units"]].rename(
            columns={"var": "uvar"}), on=["offering", "period"])
        m.add_constraints(
            "training-fit-rented",
            [terms(rr, fkeys, rr["gpus"]), terms(rr_units, fkeys, rr_units["G"], var="uvar")],
            "<=", rr_units[fkeys].assign(rhs=(rr_units["G"] * rr_units["max_units"]).to_numpy(float)), keys=fkeys)


def add_costs(m: MIP, T: Tables, inf: dict, tr: dict, units: dict) -> pd.DataFrame:
    """The objective: rental, reservation, ownership and energy, as docs/formulation.md states.

    Returns the objective's term table (``var``, ``coef``) for the budget.
    Under ``npv`` every per-period flow is weighted by its discount factor.
    """
    O = T.offerings
    parts = []
    run = units["running"]
    parts.append(terms(run, [], run["price"] * run["hours"] * run["discount"]))

    hrs = tr["hours"].merge(O[["offering", "price", "energy_per_gpu_hour", "idle_power_fraction"]], on="offering")
    rented = hrs["pricing"].isin(RENTED)
    owned = hrs["pricing"] == "owned"
    coef = np.where(rented, hrs["gpus"] / hrs["G"] * hrs["price"], 0.0)
    coef = coef + np.where(owned, hrs["gpus"] * hrs["energy_per_gpu_hour"]
                           * (1 - hrs["idle_power_fraction"].fillna(0)), 0.0)
    parts.append(terms(hrs, [], coef * hrs["discount"]))

    rep = inf["replicas"].merge(O[["offering", "energy_per_gpu_hour", "idle_power_fraction"]], on="offering")
    rep = rep[rep["pricing"] == "owned"]
    parts.append(terms(rep, [], rep["gpus"] * rep["hours"] * rep["energy_per_gpu_hour"]
                       * (1 - rep["idle_power_fraction"].fillna(0)) * rep["discount"]))

    res = units["reserved"]
    pb = period_blocks(O, T.periods).merge(T.periods[["period", "hours", "discount"]], on="period")
    dh = (pb["hours"] * pb["discount"]).groupby([pb["offering"], pb["block"]]).sum()
    res_dh = dh.reindex(pd.MultiIndex.from_frame(res[["offering", "block"]])).to_numpy(float)
    start_disc = (1.0 + T.rate) ** (-res["start_month"].astype(float) / 12.0)
    parts.append(terms(res, [], res["price"] * res_dh + res["upfront"].fillna(0) * start_disc))

    own = units["owned"].merge(owned_unit_costs(O, T.periods, T.objective, T.rate)[
        ["offering", "capital_new", "fixed_unit", "idle_energy_unit"]], on="offering")
    parts.append(terms(own, [], own["capital_new"] + own["fixed_unit"] + own["idle_energy_unit"]))
    constant = float((own["existing"] * (own["fixed_unit"] + own["idle_energy_unit"])).sum())

    obj = pd.concat(parts, ignore_index=True)
    m.add_objective(obj, constant)
    return obj


def add_budget(m: MIP, obj: pd.DataFrame, budget: float | None) -> None:
    """The objective, constant included, is at most ``constraints.budget``."""
    if budget is None:
        return
    m.add_constraints("budget", [obj.assign(k=0)], "<=",
                      pd.DataFrame({"k": [0], "rhs": [budget - m.objective_constant]}), keys=["k"])


def build_model(problem: Problem, cands: Candidates) -> tuple[MIP, Tables, dict]:
    """The whole MIP: one call per component family.

    Returns the model, the input tables and the labelled variable tables
    (what :mod:`optimizer.plan` reads the solution from).
    """
    T = prepare(problem, cands)
    m = MIP()
    inf = add_inference(m, T)
    tr = add_training(m, T)
    units = add_units(m, T)
    add_capacity(m, T, inf, tr, units)
    obj = add_costs(m, T, inf, tr, units)
    add_budget(m, obj, problem.budget)
    return m, T, {**{f"inference-{k}": v for k, v in inf.items()},
                  **{f"training-{k}": v for k, v in tr.items()},
                  **{f"units-{k}": v for k, v in units.items()}}
