"""Stage 5: the plan, as pandas tables read mechanically from the solution.

The cost ledger is recomputed here from the plan's own rows and the
offerings' prices, following docs/formulation.md's cost semantics. It does
not reuse the objective coefficients, so comparing the ledger's total with
the solver's objective (:mod:`optimizer.audit`) checks the formulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .solve.result import SolveResult, Status
from .candidates import Candidates
from .model.formulation import RENTED, Tables, discount_factors, horizon_end_month, period_blocks
from .load import HOURS_PER_MONTH, HOURS_PER_YEAR, Problem
from .model.mip import MIP

IDLE = "(idle)"
#: Values below this are solver noise, not a plan decision.
EPS = 1e-7


@dataclass
class Plan:
    """Everything a user reads about one solve."""

    problem: Problem
    result: SolveResult
    stats: dict
    commitments: pd.DataFrame = field(default_factory=pd.DataFrame)
    inference: pd.DataFrame = field(default_factory=pd.DataFrame)
    routing: pd.DataFrame = field(default_factory=pd.DataFrame)
    training: pd.DataFrame = field(default_factory=pd.DataFrame)
    training_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    usage: pd.DataFrame = field(default_factory=pd.DataFrame)
    ledger: pd.DataFrame = field(default_factory=pd.DataFrame)
    candidates: Candidates | None = None
    mip: MIP | None = None
    tables: Tables | None = None
    #: what :func:`optimizer.audit.audit` found wrong in this plan (None: not audited)
    audit: list[str] | None = None

    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def total_cost(self) -> float | None:
        return float(self.ledger["cost"].sum()) if self.status.has_plan else None

    @property
    def npv(self) -> float | None:
        return float(self.ledger["pv"].sum()) if self.status.has_plan else None

    @property
    def objective(self) -> float | None:
        if not self.status.has_plan:
            return None
        return self.npv if self.problem.objective == "npv" else self.total_cost

    def by_pricing(self) -> pd.DataFrame:
        g = self.ledger.groupby("pricing", as_index=False)[["cost", "pv"]].sum()
        return g.sort_values("cost", ascending=False, ignore_index=True)

    def by_workload(self) -> pd.DataFrame:
        g = allocate(self).groupby("workload", as_index=False)[["cost", "pv"]].sum()
        return g.sort_values("cost", ascending=False, ignore_index=True)


def _round_int(v: np.ndarray) -> np.ndarray:
    return np.rint(v).astype(int)


def _clean(v: np.ndarray) -> np.ndarray:
    return np.where(np.abs(v) < EPS, 0.0, v)


def extract(problem: Problem, cands: Candidates, mip: MIP, T: Tables, result: SolveResult) -> Plan:
    """Read the plan tables from a solution (empty tables when there is none)."""
    plan = Plan(problem=problem, result=result, stats=mip.stats(), candidates=cands, mip=mip, tables=T)
    if not result.status.has_plan:
        return plan
    x = result.x
    O = T.offerings.set_index("offering")
    P = T.periods.set_index("period")

    rep = mip.values("inference-replicas", x)
    rep["replicas"] = _round_int(rep["value"].to_numpy())
    rep = rep[rep["replicas"] > 0].merge(
        T.inference_options[["service", "config", "offering", "period", "gpu", "gpus"]],
        on=["service", "config", "offering", "period"])
    cfg = cands.inference.drop_duplicates(["service", "config"]).set_index(["service", "config"])["precision"]
    rep["precision"] = [cfg.get((s, c), "") for s, c in zip(rep["service"], rep["config"])]
    rep = rep.rename(columns={"gpus": "gpus_per_replica"})
    rep["gpus"] = rep["replicas"] * rep["gpus_per_replica"]
    rep["pricing"] = rep["offering"].map(O["pricing"])
    rep["region"] = rep["offering"].map(O["region"])

    route = mip.values("inference-routing", x)
    route["rps"] = _clean(route["value"].to_numpy())
    route = route[route["rps"] > 0].drop(columns="value")
    # capacity a replica set offers: single-size services, replicas × rps; bucketed, what is routed
    rps_single = cands.inference[~cands.inference["service"].isin(T.multi_bucket)][["service", "config", "rps"]]
    rep = rep.merge(rps_single.rename(columns={"rps": "rps_per_replica"}), on=["service", "config"], how="left")
    routed = route.groupby(["service", "config", "offering", "period"], as_index=False)["rps"].sum()
    rep = rep.merge(routed.rename(columns={"rps": "routed"}), on=["service", "config", "offering", "period"],
                    how="left")
    rep["rps"] = np.where(rep["service"].isin(T.multi_bucket), rep["routed"].fillna(0.0),
                          rep["replicas"] * rep["rps_per_replica"].fillna(0.0))
    plan.inference = rep[["service", "period", "offering", "pricing", "region", "gpu", "config", "precision",
                          "gpus_per_replica", "replicas", "gpus", "rps"]].sort_values(
        ["service", "period", "offering"], key=_period_order(P), ignore_index=True)
    plan.routing = route[["service", "bucket", "period", "offering", "config", "rps"]].sort_values(
        ["service", "bucket", "period"], key=_period_order(P), ignore_index=True)

    hrs = mip.values("training-hours", x)
    hrs["hours"] = _clean(hrs["value"].to_numpy())
    hrs = hrs[hrs["hours"] > 0].merge(
        T.training_options[["job", "config", "offering", "period", "gpu", "gpus", "progress"]],
        on=["job", "config", "offering", "period"])
    hrs["pricing"] = hrs["offering"].map(O["pricing"])
    hrs["progress_hours"] = hrs["hours"] * hrs["progress"]
    plan.training = hrs[["job", "period", "offering", "pricing", "gpu", "config", "gpus", "hours",
                         "progress_hours"]].sort_values(["job", "period"], key=_period_order(P), ignore_index=True)
    sel = mip.values("training-select", x)
    sel = sel[_round_int(sel["value"].to_numpy()) == 1].merge(T.training_configs, on=["job", "config"])
    done = plan.training.groupby("job")["progress_hours"].sum()
    sel["progress_hours"] = sel["job"].map(done).fillna(0.0)
    last = plan.training.assign(month=plan.training["period"].map(P["month"])).groupby("job")["month"].max()
    sel["last_month"] = sel["job"].map(last)
    deadline = {j.name: j.deadline_month for j in problem.jobs}
    sel["deadline_month"] = sel["job"].map(deadline)
    plan.training_summary = sel[["job", "config", "gpu", "gpus", "precision", "hours", "progress_hours",
                                 "last_month", "deadline_month"]].rename(columns={"hours": "required_hours"})

    units = {}
    for name in ("units-running", "units-reserved", "units-owned-new"):
        v = mip.values(name, x)
        v["units"] = _round_int(v["value"].to_numpy())
        units[name] = v.drop(columns="value")
    plan.commitments = _commitments(problem, O, units)
    plan.usage = _usage(plan, O, P, units["units-running"])
    plan.ledger = ledger(plan, O, P)
    return plan


def _period_order(P: pd.DataFrame):
    order = {p: i for i, p in enumerate(P.index)}

    def key(col: pd.Series) -> pd.Series:
        return col.map(order) if col.name == "period" else col

    return key


def term_periods(rows: pd.DataFrame, O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """One row per commitment row and period in which it holds its units.

    A reserved row (``pricing`` reserved, term block ``block``) holds them in
    the periods whose month lies in its term, ⌊month ÷ term_months⌋ = block;
    an owned row in every period. ``rows`` needs ``offering``, ``pricing`` and
    ``block``; the result adds ``period``, ``month``, ``hours``, the row's
    position ``_c`` and the period's position ``_p``, in row order, then
    period order.
    """
    r = rows.reset_index(drop=True).assign(_c=np.arange(len(rows)))
    per = P[["month", "hours"]].rename_axis("period").reset_index().assign(_p=np.arange(len(P)))
    reserved = r["pricing"] == "reserved"
    # the model's own period -> term block map, so the plan reads blocks exactly as the model built them
    blocks = period_blocks(O.rename_axis("offering").reset_index(), per)
    x = pd.concat([r[reserved].merge(blocks, on=["offering", "block"]).merge(per, on="period"),
                   r[~reserved].merge(per, how="cross")], ignore_index=True)
    return x.sort_values(["_c", "_p"], kind="stable").reset_index(drop=True)


def _commitments(problem: Problem, O: pd.DataFrame, units: dict) -> pd.DataFrame:
    """Reserved units per term block and owned units, with what a term leaves after the horizon."""
    P = problem.periods
    res = units["units-reserved"]
    res = res[res["units"] > 0].assign(new_units=np.nan, existing_units=np.nan, pricing="reserved")
    term = res["offering"].map(O["term_months"]).fillna(12).astype(int)
    res["start_month"] = res["block"] * term
    # months of each block the horizon covers: hours of its periods ÷ 730
    covered = term_periods(res, O, P).groupby("_c")["hours"].sum().reindex(range(len(res)), fill_value=0.0)
    res["months_after_horizon"] = np.maximum(0.0, term.to_numpy(float) - covered.to_numpy(float) / HOURS_PER_MONTH)
    own = units["units-owned-new"].rename(columns={"units": "new_units"})
    own["existing_units"] = own["offering"].map(O["existing_units"]).fillna(0).astype(int)
    own["units"] = own["new_units"] + own["existing_units"]
    own = own[own["units"] > 0].assign(block=0, start_month=0, months_after_horizon=np.nan)
    rows = pd.concat([res, own], ignore_index=True)
    rows["pricing"] = rows["offering"].map(O["pricing"])
    rows["gpu"] = rows["offering"].map(O["gpu"])
    rows["region"] = rows["offering"].map(O["region"])
    rows["gpus"] = rows["units"] * rows["offering"].map(O["G"])
    rows["term_months"] = rows["offering"].map(O["term_months"])
    price = rows["offering"].map(O["price"])
    rows["commitment_after_horizon"] = np.where(
        rows["pricing"] == "reserved", rows["units"] * price * rows["months_after_horizon"] * HOURS_PER_MONTH, np.nan)
    rows["block"] = rows["block"].astype(int)
    rows["start_month"] = rows["start_month"].astype(int)
    return rows[["offering", "pricing", "gpu", "region", "block", "start_month", "units", "new_units",
                 "existing_units", "gpus", "term_months", "months_after_horizon", "commitment_after_horizon"]]


def held_units(plan: "Plan", O: pd.DataFrame, P: pd.DataFrame) -> pd.Series:
    """Reserved or owned units available per (offering, period), from the commitments."""
    tp = term_periods(plan.commitments, O, P)
    return pd.Series(tp["units"].to_numpy(float), index=pd.MultiIndex.from_arrays([tp["offering"], tp["period"]]),
                     dtype=float)


def _usage(plan: Plan, O: pd.DataFrame, P: pd.DataFrame, running: pd.DataFrame) -> pd.DataFrame:
    """GPUs available and used, per offering and period (offerings the plan touches)."""
    inf = plan.inference.groupby(["offering", "period"])["gpus"].sum().rename("inference_gpus")
    tr = plan.training.assign(avg=plan.training["gpus"] * plan.training["hours"]
                              / plan.training["period"].map(P["hours"]))
    trg = tr.groupby(["offering", "period"])["avg"].sum().rename("training_gpus")
    run = running.set_index(["offering", "period"])["units"].rename("units_running")
    held = held_units(plan, O, P).rename("units_held")
    idx = pd.MultiIndex.from_product([O.index, P.index], names=["offering", "period"])
    u = pd.concat([inf, trg, run, held], axis=1).reindex(idx).fillna(0.0).reset_index()
    u["pricing"] = u["offering"].map(O["pricing"])
    u["G"] = u["offering"].map(O["G"])
    fixed = u["pricing"].isin(["reserved", "owned"])
    u["units"] = np.where(fixed, u["units_held"], u["units_running"])
    # rented training clusters are billed for exactly the GPUs they run: they add to what is held
    u["capacity_gpus"] = u["units"] * u["G"] + np.where(fixed, 0.0, u["training_gpus"])
    used = u["inference_gpus"] + u["training_gpus"]
    u["utilisation"] = np.where(u["capacity_gpus"] > 0, used / u["capacity_gpus"].where(u["capacity_gpus"] > 0), np.nan)
    touched = (used > 0) | (u["units"] > 0)
    u = u[touched]
    return u[["offering", "period", "pricing", "units", "capacity_gpus", "inference_gpus", "training_gpus",
              "utilisation"]].reset_index(drop=True)


LEDGER_COLUMNS = ["offering", "pricing", "period", "item", "workload", "cost", "pv"]


def ledger(plan: Plan, O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """Every cost item of the plan, under both accountings.

    Columns: offering, pricing, period (empty for one-off items), item,
    workload (empty for capacity items shared by all), cost (counted as under
    ``objective: cost``) and pv (the cash flow discounted as under
    ``objective: npv`` at the problem's discount rate). Rows come in this
    order: rented units running for inference, training hours, owned
    inference's busy energy, then each reservation (its periods, then its
    upfront payment) and each owned commitment (its one-off items, then per
    period its fixed cost and idle energy).
    """
    rate = plan.problem.discount_rate
    H = float(P["hours"].sum())
    disc = discount_factors(P["month"], rate)
    end = (1.0 + rate) ** (-horizon_end_month(P) / 12.0)
    parts: list[pd.DataFrame] = []

    def add(g: int, rows: pd.DataFrame, item, workload, cost, pv, period=None, c=None, phase=0, p=None, sub=0):
        """Append ledger rows of group ``g``; ``c``, ``phase``, ``p``, ``sub`` order them within it."""
        n = len(rows)
        if not n:
            return

        def col(v, dtype=None):
            return np.broadcast_to(np.asarray(v, dtype=dtype), (n,))

        parts.append(pd.DataFrame({
            "offering": rows["offering"].to_numpy(), "pricing": rows["offering"].map(O["pricing"]).to_numpy(),
            "period": rows["period"].to_numpy() if period is None else col(period, object),
            "item": col(item, object), "workload": col(workload, object),
            "cost": col(cost, float), "pv": col(pv, float),
            "_g": g, "_c": np.arange(n) if c is None else col(c), "_phase": phase,
            "_p": 0 if p is None else col(p), "_sub": sub}))

    def on(rows: pd.DataFrame, col: str) -> pd.Series:
        return rows["offering"].map(O[col])

    # rented units running for inference, whole period blocks
    u = plan.usage[plan.usage["pricing"].isin(RENTED) & (plan.usage["units"] > 0)]
    c = u["units"] * on(u, "price") * u["period"].map(P["hours"])
    add(0, u, "rental", "", c, c * u["period"].map(disc))
    # training: rented clusters billed for the hours they run; owned clusters pay busy energy
    t = plan.training[plan.training["pricing"].isin(RENTED + ("owned",))]
    rent = t["pricing"].isin(RENTED)
    c = np.where(rent, t["gpus"] * on(t, "price") / on(t, "G") * t["hours"],
                 t["gpus"] * t["hours"] * on(t, "energy_per_gpu_hour"))
    add(1, t, np.where(rent, "rental", "energy-busy"), t["job"], c, c * t["period"].map(disc))
    i = plan.inference[plan.inference["pricing"] == "owned"]
    c = i["gpus"] * i["period"].map(P["hours"]) * on(i, "energy_per_gpu_hour")
    add(2, i, "energy-busy", i["service"], c, c * i["period"].map(disc))

    # reservations: paid every hour of the horizon, used or not; the upfront when the term starts
    res = term_periods(plan.commitments[plan.commitments["pricing"] == "reserved"], O, P)
    c = res["units"] * on(res, "price") * res["hours"]
    add(3, res, "reservation", "", c, c * res["period"].map(disc), c=res["_c"], p=res["_p"])
    first = res.drop_duplicates("_c")
    first = first[on(first, "upfront") > 0]
    c = first["units"] * on(first, "upfront")
    add(3, first, "upfront", "", c, c * (1.0 + rate) ** (-first["start_month"] / 12.0), c=first["_c"], phase=1)

    # owned: depreciation (cost) or capex and book value (npv); fixed costs and idle energy per period
    own = plan.commitments[plan.commitments["pricing"] == "owned"].reset_index(drop=True)
    new = own[own["new_units"] > 0]
    life_h = on(new, "lifetime_years") * HOURS_PER_YEAR
    capex, resid = on(new, "capex"), on(new, "residual_fraction")
    book = new["new_units"] * capex * (1 - (1 - resid) * np.minimum(1.0, H / life_h))
    add(4, new, "depreciation", "", new["new_units"] * capex * (1 - resid) * H / life_h, 0.0, "", c=new.index, sub=0)
    add(4, new, "capex", "", 0.0, new["new_units"] * capex, "", c=new.index, sub=1)
    add(4, new, "book-value", "", 0.0, -book * end, "", c=new.index, sub=2)
    tp = term_periods(own, O, P)
    # busy GPU-hours per owned offering and period; the rest of the owned GPU-hours are idle
    busy = (plan.inference.assign(gh=plan.inference["gpus"] * plan.inference["period"].map(P["hours"]))
            .groupby(["offering", "period"])["gh"].sum()
            .add(plan.training.assign(gh=plan.training["gpus"] * plan.training["hours"])
                 .groupby(["offering", "period"])["gh"].sum(), fill_value=0.0))
    busy_tp = busy.reindex(pd.MultiIndex.from_arrays([tp["offering"], tp["period"]]), fill_value=0.0).to_numpy()
    fixed = tp["units"] * on(tp, "fixed_per_month") * tp["hours"] / HOURS_PER_MONTH
    keep = fixed != 0
    add(4, tp[keep], "fixed", "", fixed[keep], fixed[keep] * tp.loc[keep, "period"].map(disc),
        c=tp.loc[keep, "_c"], phase=1, p=tp.loc[keep, "_p"], sub=0)
    idle = ((tp["units"] * on(tp, "G") * tp["hours"] - busy_tp) * on(tp, "energy_per_gpu_hour")
            * on(tp, "idle_power_fraction"))
    keep = idle != 0
    add(4, tp[keep], "energy-idle", "", idle[keep], idle[keep] * tp.loc[keep, "period"].map(disc),
        c=tp.loc[keep, "_c"], phase=1, p=tp.loc[keep, "_p"], sub=1)
    if not parts:
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    # within a commitment: a reservation's periods, then its upfront; an owned unit's one-offs, then its
    # periods. The other groups keep their rows' order
    out = out.sort_values(["_g", "_c", "_phase", "_p", "_sub"], kind="stable")
    return out[LEDGER_COLUMNS].reset_index(drop=True)


def allocate(plan: Plan) -> pd.DataFrame:
    """Split shared capacity items of the ledger among workloads.

    Rented units running in a period are split by each service's share of
    their GPUs; reserved and owned capacity items by each workload's share
    of the offering's GPU-hours over the horizon. What nobody uses is
    ``(idle)``. Items already tied to a workload stay with it.
    """
    P = plan.problem.periods
    L = plan.ledger
    direct = L[L["workload"] != ""]
    shared = L[L["workload"] == ""]
    use = pd.concat([
        plan.inference.assign(workload=plan.inference["service"],
                              gpu_hours=plan.inference["gpus"] * plan.inference["period"].map(P["hours"]))[
            ["offering", "period", "workload", "gpu_hours"]],
        plan.training.assign(workload=plan.training["job"],
                             gpu_hours=plan.training["gpus"] * plan.training["hours"])[
            ["offering", "period", "workload", "gpu_hours"]],
    ], ignore_index=True)
    u = plan.usage
    rented = u["pricing"].isin(["on_demand", "spot"])
    held_gpus = u["capacity_gpus"] - np.where(rented, u["training_gpus"], 0.0)  # units × G
    cap = u.assign(cap_hours=held_gpus * u["period"].map(P["hours"]))

    out = [direct]
    rent = shared[shared["item"] == "rental"]
    if len(rent):
        # units running hold inference only; rented training hours are billed to their job directly
        inf_use = use[use["workload"].isin(plan.inference["service"])]
        u = inf_use.merge(cap[["offering", "period", "cap_hours"]], on=["offering", "period"])
        u["share"] = u["gpu_hours"] / u["cap_hours"]
        s = rent.drop(columns="workload").merge(u[["offering", "period", "workload", "share"]],
                                                on=["offering", "period"], how="left")
        out.append(_split(rent, s, ["offering", "period"]))
    fixed = shared[shared["item"] != "rental"]
    if len(fixed):
        tot = use.groupby(["offering", "workload"], as_index=False)["gpu_hours"].sum()
        capo = cap.groupby("offering")["cap_hours"].sum()
        tot["share"] = tot["gpu_hours"] / tot["offering"].map(capo)
        s = fixed.drop(columns="workload").merge(tot[["offering", "workload", "share"]], on="offering", how="left")
        out.append(_split(fixed, s, ["offering", "period", "item"]))
    return pd.concat(out, ignore_index=True)


def _split(items: pd.DataFrame, shares: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Apportion each item by the shares; the remainder of each item goes to (idle)."""
    s = shares.copy()
    s["share"] = s["share"].fillna(0.0)
    s["workload"] = s["workload"].fillna(IDLE)
    parts = s.assign(cost=s["cost"] * s["share"], pv=s["pv"] * s["share"])
    parts = parts[parts["workload"] != IDLE]
    used = parts.groupby(keys, as_index=False)[["cost", "pv"]].sum()
    rest = items.drop(columns="workload").merge(used, on=keys, how="left", suffixes=("", "_used"))
    rest["cost"] = rest["cost"] - rest["cost_used"].fillna(0.0)
    rest["pv"] = rest["pv"] - rest["pv_used"].fillna(0.0)
    rest = rest.drop(columns=["cost_used", "pv_used"]).assign(workload=IDLE)
    return pd.concat([parts[items.columns], rest[items.columns]], ignore_index=True)
