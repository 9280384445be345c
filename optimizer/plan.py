"""Stage 5: the plan, as pandas tables read mechanically from the solution, and its cost ledger.

The tables carry the model's names: a row of ``inference`` is a value of the
``inference-replicas`` variable block, a row of ``training`` one of
``training-hours``, and so on (docs/formulation.md). The ledger lists every
cost item of the plan from its rows and the offerings' prices, under both
accountings (``cost`` and the present value ``pv``); :mod:`optimizer.audit`
checks plan, ledger and objective with formulas of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .candidates import Candidates
from .load import HOURS_PER_MONTH, HOURS_PER_YEAR, Problem
from .model.formulation import (COMMITTED_KINDS, HOURLY, ModelData, after_horizon_months, term_block,
                                discount_factors, horizon_end_month, monthly_flow_pv)
from .model.mip import MIP
from .schema import PAY_PER_HOUR
from .model.presolve import Model
from .solve.result import SolveResult, Status
from .timetable import COLUMNS as TIMETABLE_COLUMNS, NoTimetable, timetable

IDLE = "(idle)"
#: Values below this are solver noise, not a plan decision.
EPS = 1e-7

LEDGER_COLUMNS = ["offering", "pricing", "period", "item", "workload", "cost", "pv"]


@dataclass
class Plan:
    """Everything a user reads about one solve.

    Tables (pandas DataFrames; empty when there is no plan):

    commitments
        Reserved units per term block and owned units, with what each
        commits after the horizon (``owed_after_horizon`` for reservations;
        ``capex_spent`` and ``book_value_at_end`` for bought servers).
    inference, routing
        Replicas per service, configuration, offering and period; each
        bucket's rps routed to them.
    training, training_summary
        Cluster hours per job, offering, period and mode (``shared``: inside
        units held for the period; ``hourly``: rented by the hour); one row
        per job with its configuration.
    timetable
        When each cluster runs inside its periods: one row per stretch it
        runs without a pause, in a lane of its pool, with start and end in
        hours from the period's start (:mod:`optimizer.timetable`).
    starts
        Replicas started per service, configuration, offering and period
        (services with a ``replica_start_cost``).
    usage
        Units and GPUs per offering and period, with utilisation.
    ledger
        Every cost item (LEDGER_COLUMNS).
    """

    problem: Problem
    result: SolveResult
    stats: dict
    commitments: pd.DataFrame = field(default_factory=pd.DataFrame)
    inference: pd.DataFrame = field(default_factory=pd.DataFrame)
    routing: pd.DataFrame = field(default_factory=pd.DataFrame)
    training: pd.DataFrame = field(default_factory=pd.DataFrame)
    training_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    timetable: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: why no timetable could be built for the training hours (a bug; the audit reports it), or None
    timetable_error: str | None = None
    starts: pd.DataFrame = field(default_factory=pd.DataFrame)
    usage: pd.DataFrame = field(default_factory=pd.DataFrame)
    ledger: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: warnings about this plan (commitments that outlive the horizon, assumption-priced offerings)
    warnings: list[str] = field(default_factory=list)
    candidates: Candidates | None = None
    mip: MIP | None = None
    data: ModelData | None = None
    #: what :func:`optimizer.audit.audit` found wrong in this plan (None: not audited)
    audit: list[str] | None = None
    #: why there is no plan (:func:`optimizer.studies.diagnose.diagnose`), when there is none
    diagnosis: list[dict] | None = None

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

    def tables(self) -> dict[str, pd.DataFrame]:
        """The plan's tables by name (what ``gpuopt solve --format csv`` writes, one file each)."""
        return {"commitments": self.commitments, "inference": self.inference, "routing": self.routing,
                "training": self.training, "training_summary": self.training_summary, "timetable": self.timetable,
                "starts": self.starts,
                "usage": self.usage, "ledger": self.ledger, "by_pricing": self.by_pricing() if self.status.has_plan
                else pd.DataFrame(), "by_workload": self.by_workload() if self.status.has_plan else pd.DataFrame()}

    def to_dict(self) -> dict:
        """The JSON of ``gpuopt solve --format json`` as a dict (docs/json-format.md)."""
        from .render.report import plan_dict

        return plan_dict(self)

    def to_json(self) -> str:
        """The text ``gpuopt solve --format json`` prints."""
        from .render.report import to_json

        return to_json(self)

    def after_horizon(self) -> dict:
        """What the plan commits beyond the horizon, in total (currency)."""
        c = self.commitments
        if not self.status.has_plan or c.empty:
            return {"owed_after_horizon": 0.0, "capex_spent": 0.0, "book_value_at_end": 0.0}
        return {k: float(c[k].fillna(0.0).sum()) for k in ("owed_after_horizon", "capex_spent", "book_value_at_end")}


def _values(mip: MIP, vt: dict, name: str, x: np.ndarray) -> pd.DataFrame:
    """The variable table ``name`` with the solution's ``value`` of each variable."""
    tab = vt[name]
    return tab.assign(value=x[tab["var"].to_numpy(np.int64)] if len(tab) else np.zeros(0))


def extract(model: Model, result: SolveResult) -> Plan:
    """Read the plan tables from a solution (empty tables when there is none)."""
    problem, d, vt, mip = model.problem, model.data, model.vars, model.mip
    plan = Plan(problem=problem, result=result, stats=mip.stats(), candidates=model.candidates, mip=mip, data=d)
    if not result.status.has_plan:
        return plan
    x = result.x
    O = d.offerings.set_index("offering")
    P = d.periods.set_index("period")

    rep = _values(mip, vt, "inference-replicas", x)
    rep["replicas"] = np.rint(rep["value"]).astype(int)
    rep = rep[rep["replicas"] > 0].copy()
    cfg = model.candidates.inference.drop_duplicates(["service", "config"]).set_index(["service", "config"])
    rep["precision"] = [cfg["precision"].get((s, c), "") for s, c in zip(rep["service"], rep["config"])]
    rep = rep.rename(columns={"gpus": "gpus_per_replica"})
    rep["gpus"] = rep["replicas"] * rep["gpus_per_replica"]
    rep["region"] = rep["offering"].map(O["region"])
    route = _values(mip, vt, "inference-routing", x)
    route["rps"] = np.where(np.abs(route["value"]) < EPS, 0.0, route["value"])
    route = route[route["rps"] > 0]
    # capacity a replica set offers: single-size services, replicas × rps; bucketed, what is routed to it
    single = d.rps[~d.rps["service"].isin(d.multi_bucket)][["service", "config", "rps"]]
    rep = rep.merge(single.rename(columns={"rps": "rps_per_replica"}), on=["service", "config"], how="left")
    routed = route.groupby(["service", "config", "offering", "period"], as_index=False)["rps"].sum()
    rep = rep.merge(routed.rename(columns={"rps": "routed"}), on=["service", "config", "offering", "period"],
                    how="left")
    rep["rps"] = np.where(rep["service"].isin(d.multi_bucket), rep["routed"].fillna(0.0),
                          rep["replicas"] * rep["rps_per_replica"].fillna(0.0))
    order = _period_order(P)
    plan.inference = rep[["service", "period", "offering", "pricing", "region", "gpu", "config", "precision",
                          "gpus_per_replica", "replicas", "gpus", "rps"]].sort_values(
        ["service", "period", "offering"], key=order, ignore_index=True)
    plan.routing = route[["service", "bucket", "period", "offering", "config", "rps"]].sort_values(
        ["service", "bucket", "period"], key=order, ignore_index=True)

    hrs = _values(mip, vt, "training-hours", x)
    hrs["hours"] = hrs["value"]
    hrs = hrs[hrs["hours"] > EPS].copy()
    hrs["progress"] = hrs["hours"] * hrs["rate"]
    hrs["billed_units"] = np.where(hrs["mode"] == HOURLY, hrs["units"], 0)
    plan.training = hrs[["job", "period", "offering", "pricing", "mode", "gpu", "config", "gpus", "billed_units",
                         "hours", "progress"]].sort_values(["job", "period", "offering"], key=order,
                                                           ignore_index=True)
    sel = _values(mip, vt, "training-select", x)
    sel = sel[np.rint(sel["value"]) == 1]
    t = plan.training.assign(gpu_hours=plan.training["gpus"] * plan.training["hours"],
                             month=plan.training["period"].map(P["month"]))
    sel = sel.assign(gpu_hours=sel["job"].map(t.groupby("job")["gpu_hours"].sum()).fillna(0.0),
                     progress=sel["job"].map(t.groupby("job")["progress"].sum()).fillna(0.0),
                     last_month=sel["job"].map(t.groupby("job")["month"].max()),
                     deadline_month=sel["job"].map({j.name: j.deadline_month for j in problem.jobs}))
    plan.training_summary = sel[["job", "config", "gpu", "gpus", "precision", "gpu_hours", "progress",
                                 "last_month", "deadline_month"]].reset_index(drop=True)
    lanes = _values(mip, vt, "training-lanes", x)
    lanes = lanes.assign(lanes=np.rint(lanes["value"]).astype(int))
    try:
        plan.timetable = timetable(plan.training, lanes[lanes["lanes"] > 0], P["hours"])
    except NoTimetable as e:  # the model's lane rows forbid it: the audit reports it as a violation
        plan.timetable, plan.timetable_error = pd.DataFrame(columns=TIMETABLE_COLUMNS), str(e)

    st = _values(mip, vt, "replica-starts", x) if len(vt["replica-starts"]) else vt["replica-starts"].assign(value=0.0)
    st = st[st["value"] > EPS]
    plan.starts = st.assign(started=st["value"])[["service", "config", "offering", "period", "started"]
                                                  ].reset_index(drop=True)

    units = {}
    for name in ("units-running", "units-reserved", "units-owned-new"):
        v = _values(mip, vt, name, x)
        units[name] = v.assign(units=np.rint(v["value"]).astype(int))
    plan.commitments = _commitments(d, O, P, units)
    plan.usage = _usage(plan, O, P, units["units-running"])
    plan.ledger = ledger(plan, d, O, P)
    plan.warnings = commitment_warnings(plan) + assumption_warnings(plan)
    return plan


def _period_order(P: pd.DataFrame):
    order = {p: i for i, p in enumerate(P.index)}

    def key(col: pd.Series) -> pd.Series:
        return col.map(order) if col.name == "period" else col

    return key


def term_periods(rows: pd.DataFrame, O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """One row per commitment row and period in which it holds its units.

    A reserved row (term block ``block``) holds them in the periods of its
    block; an owned row in every period. ``rows`` needs ``offering``,
    ``pricing`` and ``block``; the result adds ``period``, ``month``,
    ``hours``, the row's position ``_c`` and the period's position ``_p``, in
    row order, then period order.
    """
    r = rows.reset_index(drop=True)
    month = P["month"].to_numpy().astype(int)
    # holds[c, p]: row c holds its units in period p (a reserved row: the period's month is in its block)
    holds = np.ones((len(r), len(P)), dtype=bool)
    reserved = (r["pricing"] == "reserved").to_numpy()
    if reserved.any():
        term = r.loc[reserved, "offering"].map(O["term_months"]).to_numpy()
        block = r.loc[reserved, "block"].to_numpy().astype(int)
        holds[reserved] = term_block(month[None, :], term[:, None]) == block[:, None]
    c, p = np.nonzero(holds)  # row-major: row order, then period order
    return r.iloc[c].reset_index(drop=True).assign(
        _c=c.astype(np.int64), period=P.index[p], month=P["month"].to_numpy()[p],
        hours=P["hours"].to_numpy()[p], _p=p.astype(np.int64))


def _commitments(d: ModelData, O: pd.DataFrame, P: pd.DataFrame, units: dict) -> pd.DataFrame:
    """Reserved units per term block and owned units, with what each commits after the horizon."""
    end = horizon_end_month(P)
    H = float(P["hours"].sum())
    res = units["units-reserved"]
    res = res[res["units"] > 0].assign(new_units=np.nan, existing_units=np.nan)
    res["months_after_horizon"] = after_horizon_months(res["start_month"], res["term_months"], end)
    res["owed_after_horizon"] = res["units"] * res["price"] * HOURS_PER_MONTH * res["months_after_horizon"]
    own = units["units-owned-new"].rename(columns={"units": "new_units"})
    own["existing_units"] = own["existing"]
    own["units"] = own["new_units"] + own["existing_units"]
    own = own[own["units"] > 0].assign(block=0, start_month=0, term_months=np.nan)
    life_h = own["lifetime_years"] * HOURS_PER_YEAR
    own["months_after_horizon"] = np.where(own["new_units"] > 0,
                                           np.maximum(0.0, (life_h - H) / HOURS_PER_MONTH), np.nan)
    own["capex_spent"] = own["new_units"] * own["capex"]
    own["book_value_at_end"] = own["capex_spent"] * (1 - (1 - own["residual_fraction"]) * np.minimum(1.0, H / life_h))
    rows = pd.concat([res, own], ignore_index=True)
    for col in ("owed_after_horizon", "capex_spent", "book_value_at_end"):
        if col not in rows:
            rows[col] = np.nan
    rows["gpus"] = rows["units"] * rows["offering"].map(O["host"])
    rows["block"] = rows["block"].astype(int)
    rows["start_month"] = rows["start_month"].astype(int)
    return rows[["offering", "pricing", "gpu", "region", "block", "start_month", "units", "new_units",
                 "existing_units", "gpus", "term_months", "months_after_horizon", "owed_after_horizon",
                 "capex_spent", "book_value_at_end"]].reset_index(drop=True)


def commitment_warnings(plan: Plan) -> list[str]:
    """One line for every commitment that outlives the horizon, whoever defined its offering."""
    out = []
    cur = plan.problem.currency
    for r in plan.commitments.itertuples():
        if r.pricing == "reserved" and r.months_after_horizon > 1e-9:
            out.append(f"{r.offering}: {r.units} reserved units from month {r.start_month} for "
                       f"{int(r.term_months)} months outlive the horizon by {r.months_after_horizon:.1f} months; "
                       f"{r.owed_after_horizon:,.0f} {cur} still owed after it")
        elif r.pricing == "owned" and r.new_units > 0 and r.months_after_horizon > 1e-9:
            out.append(f"{r.offering}: {int(r.new_units)} server(s) bought for {r.capex_spent:,.0f} {cur}; "
                       f"{r.book_value_at_end:,.0f} {cur} of book value is left at the horizon's end")
    return out


def assumption_warnings(plan: Plan) -> list[str]:
    """One line for every assumption that decides something in the plan.

    An offering the plan uses whose fields are marked ``assumed`` (no
    primary source: e.g. a node price without a quote) is named with those
    fields; an offering whose units reach its ``max_units`` in some period,
    where that quota is a stated default rather than the provider's, is
    named with the quota: the plan is bounded by a guess, and the provider
    should be asked.
    """
    src = plan.problem.offerings
    used = plan.usage.groupby("offering").agg(units=("units", "max"), hourly=("hourly_units", "max"))
    out = []
    for oid, r in used.iterrows():
        if oid not in src.index:
            continue
        o = src.loc[oid]
        assumed = o.get("assumed")
        if isinstance(assumed, list) and assumed:
            out.append(f"{oid}: used by the plan, and its {', '.join(assumed)} "
                       f"{'is an assumption' if len(assumed) == 1 else 'are assumptions'} (no primary source)")
        quota_source = o.get("quota_source")
        cap = o.get("max_units")
        if (isinstance(quota_source, str) and "assumption" in quota_source.lower() and pd.notna(cap)
                and max(r["units"], r["hourly"]) >= float(cap) - 1e-6):
            out.append(f"{oid}: the plan uses all {int(cap)} units its quota allows, and that quota is an "
                       f"assumed default ({quota_source}); ask the provider for the real figure")
    return out


def held_units(plan: Plan, O: pd.DataFrame, P: pd.DataFrame) -> pd.Series:
    """Reserved or owned units available per (offering, period), from the commitments."""
    tp = term_periods(plan.commitments, O, P)
    return pd.Series(tp["units"].to_numpy(float), index=pd.MultiIndex.from_arrays([tp["offering"], tp["period"]]),
                     dtype=float)


def _usage(plan: Plan, O: pd.DataFrame, P: pd.DataFrame, running: pd.DataFrame) -> pd.DataFrame:
    """Units and GPUs per offering and period (offerings the plan touches).

    ``units`` are those held for the whole period (running, reserved or
    owned), ``hourly_units`` the average units rented by the hour for
    training; ``capacity_gpus`` counts both.
    """
    inf = plan.inference.groupby(["offering", "period"])["gpus"].sum().rename("inference_gpus")
    tr = plan.training.assign(avg=plan.training["gpus"] * plan.training["hours"]
                              / plan.training["period"].map(P["hours"]),
                              hourly=plan.training["billed_units"] * plan.training["hours"]
                              / plan.training["period"].map(P["hours"]))
    trg = tr.groupby(["offering", "period"])["avg"].sum().rename("training_gpus")
    hrl = tr.groupby(["offering", "period"])["hourly"].sum().rename("hourly_units")
    run = running.set_index(["offering", "period"])["units"].rename("units_running")
    held = held_units(plan, O, P).rename("units_held")
    idx = pd.MultiIndex.from_product([O.index, P.index], names=["offering", "period"])
    u = pd.concat([inf, trg, hrl, run, held], axis=1).reindex(idx).fillna(0.0).reset_index()
    u["pricing"] = u["offering"].map(O["pricing"])
    committed = u["pricing"].isin(COMMITTED_KINDS)
    u["units"] = np.where(committed, u["units_held"], u["units_running"])
    u["capacity_gpus"] = (u["units"] + u["hourly_units"]) * u["offering"].map(O["G"])
    used = u["inference_gpus"] + u["training_gpus"]
    u["utilisation"] = np.where(u["capacity_gpus"] > 0, used / u["capacity_gpus"].where(u["capacity_gpus"] > 0),
                                np.nan)
    u = u[(used > 0) | (u["units"] > 0)]
    return u[["offering", "period", "pricing", "units", "hourly_units", "capacity_gpus", "inference_gpus",
              "training_gpus", "utilisation"]].reset_index(drop=True)


def ledger(plan: Plan, d: ModelData, O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """Every cost item of the plan, under both accountings.

    Columns: offering, pricing, period (the term's first period for an
    upfront payment; empty for purchases and for what is owed after the
    horizon), item, workload (empty for capacity
    shared by all), cost (counted as under ``objective: cost``) and pv (the
    cash flow discounted as under ``objective: npv`` at the problem's rate).
    ``finance.commitments: full`` adds the items after the horizon
    (``reservation-after-horizon``, ``depreciation-after-horizon``; under pv
    the resale at the end of life instead of the book value). Rows come in
    this order: rented units running, hourly training, owned busy energy,
    replica starts, then each reservation (its periods, its upfront, what is
    owed after) and each owned commitment (its one-off items, then per
    period its fixed cost and idle energy).
    """
    problem = plan.problem
    rate = problem.discount_rate
    full = problem.spec.finance.commitments == "full"
    H = float(P["hours"].sum())
    disc = discount_factors(P["month"], rate)
    end_month = horizon_end_month(P)
    end = (1.0 + rate) ** (-end_month / 12.0)
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

    # rented units running for the whole period (inference, and clusters sharing them)
    u = plan.usage[plan.usage["pricing"].isin(PAY_PER_HOUR) & (plan.usage["units"] > 0)]
    c = u["units"] * on(u, "price") * u["period"].map(P["hours"])
    add(0, u, "rental", "", c, c * u["period"].map(disc))
    # training: clusters rented by the hour pay their billed units for the hours they run; clusters on
    # owned units pay busy energy; clusters sharing rented or reserved units pay nothing more
    t = plan.training
    hourly = t[t["mode"] == HOURLY]
    c = hourly["billed_units"] * on(hourly, "price") * hourly["hours"]
    add(1, hourly, "rental", hourly["job"], c, c * hourly["period"].map(disc))
    own_t = t[(t["mode"] != HOURLY) & (t["pricing"] == "owned")]
    c = own_t["gpus"] * own_t["hours"] * on(own_t, "energy_per_gpu_hour")
    add(1, own_t, "energy-busy", own_t["job"], c, c * own_t["period"].map(disc))
    i = plan.inference[plan.inference["pricing"] == "owned"]
    c = i["gpus"] * i["period"].map(P["hours"]) * on(i, "energy_per_gpu_hour")
    add(2, i, "energy-busy", i["service"], c, c * i["period"].map(disc))
    s = plan.starts
    if len(s):
        cost_of = {sv.name: problem.stability(sv)[1] for sv in problem.services}
        c = s["started"] * s["service"].map(cost_of)
        add(2, s, "replica-start", s["service"], c, c * s["period"].map(disc))

    # reservations: paid every hour of the horizon, used or not; the upfront when the term starts
    com = plan.commitments
    res_rows = com[com["pricing"] == "reserved"]
    res = term_periods(res_rows, O, P)
    c = res["units"] * on(res, "price") * res["hours"]
    add(3, res, "reservation", "", c, c * res["period"].map(disc), c=res["_c"], p=res["_p"])
    first = res.drop_duplicates("_c")
    first = first[on(first, "upfront") > 0]
    c = first["units"] * on(first, "upfront")
    add(3, first, "upfront", "", c, c * (1.0 + rate) ** (-first["start_month"] / 12.0), c=first["_c"], phase=1)
    if full:
        r = res_rows.reset_index(drop=True)
        r = r[r["months_after_horizon"] > 0]
        pv = r["units"] * on(r, "price") * monthly_flow_pv(r["months_after_horizon"].to_numpy(), end_month, rate)
        add(3, r, "reservation-after-horizon", "", r["owed_after_horizon"], pv, "", c=r.index, phase=2)

    # owned: depreciation (cost) or capex and book value (npv); fixed costs and idle energy per period
    own = com[com["pricing"] == "owned"].reset_index(drop=True)
    new = own[own["new_units"] > 0]
    life_h = on(new, "lifetime_years") * HOURS_PER_YEAR
    capex, resid = on(new, "capex"), on(new, "residual_fraction")
    outlives = (life_h > H) & full
    add(4, new, "depreciation", "", new["new_units"] * capex * (1 - resid) * H / life_h, 0.0, "", c=new.index, sub=0)
    after = new[outlives]
    add(4, after, "depreciation-after-horizon", "",
        after["new_units"] * on(after, "capex") * (1 - on(after, "residual_fraction"))
        * (1 - H / (on(after, "lifetime_years") * HOURS_PER_YEAR)), 0.0, "", c=after.index, sub=1)
    add(4, new, "capex", "", 0.0, new["new_units"] * capex, "", c=new.index, sub=2)
    keep = new[~outlives]
    book = keep["new_units"] * on(keep, "capex") * (1 - (1 - on(keep, "residual_fraction")) * np.minimum(
        1.0, H / (on(keep, "lifetime_years") * HOURS_PER_YEAR)))
    add(4, keep, "book-value", "", 0.0, -book * end, "", c=keep.index, sub=3)
    add(4, after, "resale", "", 0.0, -after["new_units"] * on(after, "capex") * on(after, "residual_fraction")
        * (1.0 + rate) ** (-on(after, "lifetime_years")), "", c=after.index, sub=3)
    tp = term_periods(own, O, P)
    # busy GPU-hours per owned offering and period; the rest of the owned GPU-hours are idle
    busy = (plan.inference.assign(gh=plan.inference["gpus"] * plan.inference["period"].map(P["hours"]))
            .groupby(["offering", "period"])["gh"].sum()
            .add(t.assign(gh=t["gpus"] * t["hours"]).groupby(["offering", "period"])["gh"].sum(), fill_value=0.0))
    busy_tp = busy.reindex(pd.MultiIndex.from_arrays([tp["offering"], tp["period"]]), fill_value=0.0).to_numpy()
    fixed = tp["units"] * on(tp, "fixed_per_month") * tp["hours"] / HOURS_PER_MONTH
    keep = fixed != 0
    add(4, tp[keep], "fixed", "", fixed[keep], fixed[keep] * tp.loc[keep, "period"].map(disc),
        c=tp.loc[keep, "_c"], phase=1, p=tp.loc[keep, "_p"], sub=0)
    idle = ((tp["units"] * on(tp, "host") * tp["hours"] - busy_tp) * on(tp, "energy_per_gpu_hour")
            * on(tp, "idle_power_fraction"))
    keep = idle != 0
    add(4, tp[keep], "energy-idle", "", idle[keep], idle[keep] * tp.loc[keep, "period"].map(disc),
        c=tp.loc[keep, "_c"], phase=1, p=tp.loc[keep, "_p"], sub=1)
    if not parts:
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out = out.sort_values(["_g", "_c", "_phase", "_p", "_sub"], kind="stable")
    return out[LEDGER_COLUMNS].reset_index(drop=True)


def allocate(plan: Plan) -> pd.DataFrame:
    """Split shared capacity items of the ledger among workloads.

    Rented units running in a period are split by each workload's share of
    their GPU-hours in that period; reserved and owned capacity items by
    each workload's share of the offering's GPU-hours over the horizon.
    What nobody uses is ``(idle)``. Items already tied to a workload stay
    with it.
    """
    P = plan.problem.periods
    L = plan.ledger
    direct = L[L["workload"] != ""]
    shared = L[L["workload"] == ""]
    t = plan.training[plan.training["mode"] != HOURLY]
    use = pd.concat([
        plan.inference.assign(workload=plan.inference["service"],
                              gpu_hours=plan.inference["gpus"] * plan.inference["period"].map(P["hours"]))[
            ["offering", "period", "workload", "gpu_hours"]],
        t.assign(workload=t["job"], gpu_hours=t["gpus"] * t["hours"])[["offering", "period", "workload",
                                                                        "gpu_hours"]],
    ], ignore_index=True)
    u = plan.usage
    G = u["offering"].map(plan.data.offerings.set_index("offering")["G"])
    cap = u.assign(cap_hours=u["units"] * G * u["period"].map(P["hours"]))

    out = [direct]
    rent = shared[shared["item"] == "rental"]
    if len(rent):
        s = use.merge(cap[["offering", "period", "cap_hours"]], on=["offering", "period"])
        s = s.groupby(["offering", "period", "workload"], as_index=False).agg(gpu_hours=("gpu_hours", "sum"),
                                                                               cap_hours=("cap_hours", "first"))
        s["share"] = s["gpu_hours"] / s["cap_hours"]
        m = rent.drop(columns="workload").merge(s[["offering", "period", "workload", "share"]],
                                                on=["offering", "period"], how="left")
        out.append(_split(rent, m, ["offering", "period"]))
    fixed = shared[shared["item"] != "rental"].rename_axis("_row").reset_index()
    if len(fixed):
        tot = use.groupby(["offering", "workload"], as_index=False)["gpu_hours"].sum()
        capo = cap.groupby("offering")["cap_hours"].sum()
        tot["share"] = tot["gpu_hours"] / tot["offering"].map(capo)
        m = fixed.drop(columns="workload").merge(tot[["offering", "workload", "share"]], on="offering", how="left")
        # one ledger row can be one of several alike (two terms' upfronts): split each row by its own id
        out.append(_split(fixed, m, ["_row"]).drop(columns="_row"))
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
