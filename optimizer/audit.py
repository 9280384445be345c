"""Post-solve audit: every constraint and the objective, recomputed from the plan's rows.

The audit reads only the plan tables, the problem and the candidate tables
(rps per replica, hours per job); it never looks at the MIP. Any violation
means the formulation and the cost semantics disagree, so tests run it on
every plan they produce.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .formulation import MAX_SPOT_WASTE, spot_waste
from .plan import Plan, held_units

TOL = 1e-6


def _close(a: float, b: float, rel: float = 1e-6, abs_: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def audit(plan: Plan) -> list[str]:
    """Return a list of violations (empty when the plan is consistent)."""
    if not plan.status.has_plan:
        return []
    pr = plan.problem
    O = pr.offerings
    P = pr.periods
    cands = plan.candidates
    eff = cands.efficiency
    v: list[str] = []
    inf, tr, com = plan.inference, plan.training, plan.commitments
    services = {s.name: s for s in pr.services}
    jobs = {j.name: j for j in pr.jobs}

    # --- placement rules: GPU type, replica fits a unit, regions, spot --------
    for r in inf.itertuples():
        s = services[r.service]
        o = O.loc[r.offering]
        if o["gpu"] != r.gpu:
            v.append(f"inference {r.service}/{r.period}: config GPU {r.gpu} on offering of {o['gpu']}")
        if r.gpus_per_replica > o["gpus_per_unit"]:
            v.append(f"inference {r.service}: replica of {r.gpus_per_replica} GPUs on {o['gpus_per_unit']}-GPU units")
        if s.regions and o["region"] not in s.regions:
            v.append(f"inference {r.service}: region {o['region']} not allowed")
        if o["pricing"] == "spot" and not s.spot:
            v.append(f"inference {r.service}: on spot without spot: true")
    for r in tr.itertuples():
        j = jobs[r.job]
        o = O.loc[r.offering]
        if o["gpu"] != r.gpu:
            v.append(f"training {r.job}: GPU {r.gpu} on offering of {o['gpu']}")
        if j.regions and o["region"] not in j.regions:
            v.append(f"training {r.job}: region {o['region']} not allowed")
        if o["pricing"] == "spot" and not j.spot:
            v.append(f"training {r.job}: on spot without spot: true")
        m = P.at[r.period, "month"]
        if not (j.start_month <= m <= j.deadline_month):
            v.append(f"training {r.job}: runs in month {m} outside {j.start_month}..{j.deadline_month}")
        if r.hours > P.at[r.period, "hours"] + TOL:
            v.append(f"training {r.job}/{r.period}: {r.hours} h in a {P.at[r.period, 'hours']} h period")

    # --- inference demand, routing, floors ------------------------------------
    rps = cands.inference.set_index(["service", "config", "bucket"])["rps"]
    demand = pr.demand()
    for s in pr.services:
        buckets = s.buckets
        rows = inf[inf["service"] == s.name]
        for p in P.index:
            here = rows[rows["period"] == p]
            if here["replicas"].sum() < s.min_replicas:
                v.append(f"inference {s.name}/{p}: {here['replicas'].sum()} replicas < min {s.min_replicas}")
            if len(buckets) == 1:
                b = buckets[0].name
                cap = sum(r.replicas * rps[(s.name, r.config, b)] for r in here.itertuples())
                need = float(demand[(demand.service == s.name) & (demand.period == p)]["rps"].sum())
                if cap < need - TOL * max(1, need):
                    v.append(f"inference {s.name}/{p}: capacity {cap:g} rps < demand {need:g}")
        if len(buckets) > 1:
            rt = plan.routing[plan.routing["service"] == s.name]
            for b in buckets:
                for p in P.index:
                    need = float(demand[(demand.service == s.name) & (demand.bucket == b.name)
                                        & (demand.period == p)]["rps"].sum())
                    got = rt[(rt["bucket"] == b.name) & (rt["period"] == p)]["rps"].sum()
                    if got < need - TOL * max(1, need):
                        v.append(f"inference {s.name}/{b.name}/{p}: routed {got:g} < demand {need:g}")
            for (c, o, p), g in rt.groupby(["config", "offering", "period"]):
                time_used = sum(r.rps / rps[(s.name, c, r.bucket)] for r in g.itertuples())
                reps = rows[(rows["config"] == c) & (rows["offering"] == o) & (rows["period"] == p)]["replicas"].sum()
                if time_used > reps + TOL * max(1, reps):
                    v.append(f"inference {s.name}/{c}/{o}/{p}: routed load {time_used:g} replicas > {reps}")

    # --- training: one configuration, progress -------------------------------
    hours_req = cands.training.set_index(["job", "config"])["hours"]
    for j in pr.jobs:
        rows = tr[tr["job"] == j.name]
        configs = set(rows["config"])
        if len(configs) != 1:
            v.append(f"training {j.name}: {len(configs)} configurations used (must be exactly one)")
            continue
        (c,) = configs
        for p, g in rows.groupby("period"):
            if g["hours"].sum() > P.at[p, "hours"] + TOL:
                v.append(f"training {j.name}/{p}: {g['hours'].sum():g} h > period hours")
        o = O.loc[rows["offering"]]
        waste = spot_waste(rows["gpus"].to_numpy(float), o["gpus_per_unit"].to_numpy(float),
                           o["interruptions_per_hour"].astype(float).fillna(0.0).to_numpy(),
                           np.full(len(rows), float(j.checkpoint_minutes)),
                           float(eff.get("checkpoint_write_minutes", 5.0)), float(eff.get("restart_minutes", 20.0)))
        waste = np.where(o["pricing"].to_numpy() == "spot", waste, 0.0)
        if (waste >= MAX_SPOT_WASTE).any():
            v.append(f"training {j.name}: placed on spot with waste ≥ {MAX_SPOT_WASTE}")
        progress = float((rows["hours"].to_numpy() * (1 - waste)).sum())
        need = float(hours_req[(j.name, c)])
        if abs(progress - need) > TOL * max(1, need):
            v.append(f"training {j.name}: progress {progress:g} h != required {need:g} h")

    # --- capacity per offering and period ------------------------------------
    held = held_units(plan, O.rename(columns={"gpus_per_unit": "G"}), P)
    for o_id in set(inf["offering"]) | set(tr["offering"]) | set(com["offering"]) | set(plan.usage["offering"]):
        o = O.loc[o_id]
        G = o["gpus_per_unit"]
        for p in P.index:
            I = inf[(inf["offering"] == o_id) & (inf["period"] == p)]["gpus"].sum()
            trp = tr[(tr["offering"] == o_id) & (tr["period"] == p)]
            T_avg = float((trp["gpus"] * trp["hours"]).sum()) / P.at[p, "hours"]
            if o["pricing"] in ("on_demand", "spot"):
                u = plan.usage[(plan.usage["offering"] == o_id) & (plan.usage["period"] == p)]["units"].sum()
                if I > G * u + TOL:
                    v.append(f"capacity {o_id}/{p}: {I} inference GPUs > {u} units × {G}")
                if not pd.isna(o["max_units"]):
                    if u + T_avg / G > o["max_units"] + TOL:
                        v.append(f"capacity {o_id}/{p}: {u} units + training {T_avg / G:g} > max {o['max_units']}")
                    for r in trp.itertuples():
                        if r.gpus > (o["max_units"] - u) * G + TOL:
                            v.append(f"training-fit {r.job} on {o_id}/{p}: cluster {r.gpus} GPUs does not fit")
            else:
                units = float(held.get((o_id, p), 0.0))
                if I + T_avg > G * units + TOL:
                    v.append(f"capacity {o_id}/{p}: {I} + {T_avg:g} GPUs > {units} units × {G}")
                for r in trp.itertuples():
                    if r.gpus > G * units - I + TOL:
                        v.append(f"training-fit {r.job} on {o_id}/{p}: cluster {r.gpus} > free {G * units - I}")
                if not pd.isna(o["max_units"]) and units > o["max_units"]:
                    v.append(f"units {o_id}: {units} > max_units {o['max_units']}")

    # --- objective and budget -------------------------------------------------
    obj = plan.objective
    if plan.result.objective is not None and not _close(obj, plan.result.objective):
        v.append(f"objective: ledger {obj:.6f} != solver {plan.result.objective:.6f}")
    if not _close(plan.by_pricing()["cost"].sum(), plan.total_cost):
        v.append("by_pricing does not add up to total_cost")
    if not _close(plan.by_workload()["cost"].sum(), plan.total_cost):
        v.append("by_workload does not add up to total_cost")
    if pr.budget is not None and obj > pr.budget * (1 + 1e-9) + 1e-6:
        v.append(f"budget: objective {obj:g} > budget {pr.budget:g}")
    return v
