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

from .model.formulation import MAX_SPOT_WASTE, RENTED, spot_waste
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
    # one table per check, grouped from the plan's rows (a loop per service and period is quadratic)
    rps = cands.inference.set_index(["service", "config", "bucket"])["rps"]
    demand = pr.demand()
    sp = pd.MultiIndex.from_product([[s.name for s in pr.services], P.index], names=["service", "period"])
    reps = inf.groupby(["service", "period"])["replicas"].sum().reindex(sp, fill_value=0)
    floor = pd.Series([s.min_replicas for s in pr.services for _ in P.index], index=sp)
    for (s, p), n in reps[reps < floor].items():
        v.append(f"inference {s}/{p}: {n} replicas < min {floor[(s, p)]}")
    one = {s.name: s.buckets[0].name for s in pr.services if len(s.buckets) == 1}
    if one:
        mine = inf[inf["service"].isin(list(one))]
        keys = list(zip(mine["service"], mine["config"], mine["service"].map(one)))
        cap = (mine["replicas"] * rps.reindex(keys).to_numpy()).groupby([mine["service"], mine["period"]]).sum()
        need = demand[demand["service"].isin(list(one))].groupby(["service", "period"])["rps"].sum()
        cap = cap.reindex(need.index, fill_value=0.0)
        for (s, p), c in cap[cap < need - TOL * need.clip(lower=1)].items():
            v.append(f"inference {s}/{p}: capacity {c:g} rps < demand {need[(s, p)]:g}")
    many = [s.name for s in pr.services if len(s.buckets) > 1]
    if many:
        rt = plan.routing[plan.routing["service"].isin(many)]
        need = demand[demand["service"].isin(many)].groupby(["service", "bucket", "period"])["rps"].sum()
        got = rt.groupby(["service", "bucket", "period"])["rps"].sum().reindex(need.index, fill_value=0.0)
        for (s, b, p), g in got[got < need - TOL * need.clip(lower=1)].items():
            v.append(f"inference {s}/{b}/{p}: routed {g:g} < demand {need[(s, b, p)]:g}")
        key = ["service", "config", "offering", "period"]
        load = (rt["rps"] / rps.reindex(list(zip(rt["service"], rt["config"], rt["bucket"]))).to_numpy())
        load = load.groupby([rt[k] for k in key]).sum()
        have = inf.groupby(key)["replicas"].sum().reindex(load.index, fill_value=0)
        for (s, c, o, p), used in load[load > have + TOL * have.clip(lower=1)].items():
            v.append(f"inference {s}/{c}/{o}/{p}: routed load {used:g} replicas > {have[(s, c, o, p)]}")

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
    touched = sorted(set(inf["offering"]) | set(tr["offering"]) | set(com["offering"]) | set(plan.usage["offering"]))
    op = pd.MultiIndex.from_product([touched, P.index], names=["offering", "period"])
    cap = pd.DataFrame(index=op)
    cap["I"] = inf.groupby(["offering", "period"])["gpus"].sum()
    cap["T_avg"] = (tr["gpus"] * tr["hours"]).groupby([tr["offering"], tr["period"]]).sum()
    cap = cap.fillna(0.0)
    cap["T_avg"] /= P["hours"].reindex(op.get_level_values("period")).to_numpy()
    o_of = op.get_level_values("offering")
    cap["pricing"] = O["pricing"].reindex(o_of).to_numpy()
    for col in ("gpus_per_unit", "max_units"):
        cap[col] = O[col].astype(float).reindex(o_of).to_numpy()
    rented = cap["pricing"].isin(RENTED).to_numpy()
    running = plan.usage.groupby(["offering", "period"])["units"].sum()
    cap["u"] = np.where(rented, running.reindex(op, fill_value=0.0).to_numpy(),
                        held.reindex(op, fill_value=0.0).to_numpy() if len(held) else 0.0)
    G, u, I, T_avg, mx = (cap[c].to_numpy(float) for c in ("gpus_per_unit", "u", "I", "T_avg", "max_units"))
    capped = ~np.isnan(mx)
    bad = rented & (I > G * u + TOL)
    for (o, p), i, g, n in zip(op[bad], I[bad], G[bad], u[bad]):
        v.append(f"capacity {o}/{p}: {i:g} inference GPUs > {n:g} units × {g:g}")
    bad = rented & capped & (u + T_avg / G > mx + TOL)
    for (o, p), n, t, m in zip(op[bad], u[bad], (T_avg / G)[bad], mx[bad]):
        v.append(f"capacity {o}/{p}: {n:g} units + training {t:g} > max {m:g}")
    bad = ~rented & (I + T_avg > G * u + TOL)
    for (o, p), i, t, n, g in zip(op[bad], I[bad], T_avg[bad], u[bad], G[bad]):
        v.append(f"capacity {o}/{p}: {i:g} + {t:g} GPUs > {n:g} units × {g:g}")
    bad = ~rented & capped & (u > mx)
    for o, n, m in zip(op[bad].get_level_values("offering"), u[bad], mx[bad]):
        v.append(f"units {o}: {n:g} > max_units {m:g}")
    # a training cluster fits whole beside its period's inference (held) or under max_units (rented)
    at = cap.reindex(list(zip(tr["offering"], tr["period"])))
    free = np.where(at["pricing"].isin(RENTED),
                    ((at["max_units"] - at["u"]) * at["gpus_per_unit"]).fillna(np.inf),  # no max_units: no limit
                    at["gpus_per_unit"] * at["u"] - at["I"])
    bad = tr["gpus"].to_numpy(float) > free + TOL
    for job, o, p, n, f in zip(tr["job"][bad], tr["offering"][bad], tr["period"][bad], tr["gpus"][bad], free[bad]):
        v.append(f"training-fit {job} on {o}/{p}: cluster {n:g} GPUs > {f:g} free")

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
