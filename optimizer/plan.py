"""Stage 5: the plan, as pandas tables read mechanically from the solution, and its cost ledger.

The tables carry the model's names: a row of ``inference`` is a value of the
``inference-replicas`` variable block, a row of ``training`` one of
``training-hours``, and so on (docs/formulation.md). The ledger lists every
cost item of the plan from its rows and the offerings' prices, under both
accountings (``cost`` and the present value ``pv``); :mod:`optimizer.audit`
checks plan, ledger and objective with formulas of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .candidates import Candidates
from .load import Problem
from .model.formulation import (COMMITTED_KINDS, HOURLY, ModelData, after_horizon_months, term_block,
                                discount_factors, horizon_end_month, monthly_flow_pv, positions)
from .model.mip import MIP, NamedPoint
from .vocabulary import HOURS_PER_MONTH, HOURS_PER_YEAR, PAY_PER_HOUR
from .model.presolve import Model
from .solve.driver import known_plan
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

    def point(self) -> NamedPoint | None:
        """The plan's values by variable block and coordinates (:meth:`optimizer.model.mip.MIP.named`), for
        another model's search to start from; None without a plan."""
        if not self.status.has_plan or self.mip is None or self.result.x is None:
            return None
        return self.mip.named(self.result.x)

    def beating(self, points: Sequence[NamedPoint], gap: float) -> list[NamedPoint]:
        """Those of ``points`` (plans of this or another model, :meth:`point`) that, read in this plan's model,
        are plans of it costing less than this one by more than the relative ``gap`` (:func:`beating`)."""
        if self.mip is None:  # no model was built (rejected before the build)
            return []
        return beating(points, self.mip, self.result.objective if self.status.has_plan else None, gap)

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


def beating(points: Sequence[NamedPoint], mip: MIP, cost: float | None, gap: float) -> list[NamedPoint]:
    """Those of ``points`` that, read in ``mip`` (:meth:`optimizer.model.mip.MIP.point_from`), are plans of it
    costing less than ``cost`` (the model's own plan's, in the model's objective; None: it has none) by more than
    the relative ``gap``.

    A plan of it meets every row, bound and integrality of the model
    (:func:`optimizer.solve.driver.known_plan` checks and prices each).
    Where the model has no plan, any plan of it beats it. None beats a
    plan proven within ``gap``: its bound lies below every plan's cost; so
    only a search stopped on its time limit is beaten.
    """
    a = mip.arrays()  # assembled once for every point
    out = []
    for p in points:
        other = known_plan(a, [mip.point_from(p)], "")  # None: another structure, or a row it breaks
        if other is not None and (cost is None or other.objective < cost - gap * max(abs(cost), 1e-9)):
            out.append(p)
    return out


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
    cfg = model.candidates.inference.drop_duplicates(["service", "config"])
    precision = dict(zip(zip(cfg["service"], cfg["config"]), cfg["precision"]))
    service, config = rep["service"].tolist(), rep["config"].tolist()
    offering, period = rep["offering"].tolist(), rep["period"].tolist()
    rep["precision"] = [precision.get(k, "") for k in zip(service, config)]
    rep = rep.rename(columns={"gpus": "gpus_per_replica"})
    rep["gpus"] = rep["replicas"] * rep["gpus_per_replica"]
    region = dict(zip(O.index, O["region"]))
    rep["region"] = [region[o] for o in offering]
    route = _values(mip, vt, "inference-routing", x)
    route["rps"] = np.where(np.abs(route["value"]) < EPS, 0.0, route["value"])
    route = route[route["rps"] > 0]
    # capacity a replica set offers: single-size services, replicas × rps; bucketed, what is routed to it (sums
    # and lookups in dictionaries: a plan's tables are small, and a pandas merge costs milliseconds)
    multi = set(d.multi_bucket)
    per_replica = {(s, c): r for s, c, r in zip(d.rps["service"], d.rps["config"], d.rps["rps"].to_numpy(float))
                   if s not in multi}
    routed: dict[tuple, float] = {}
    for k, r in zip(zip(route["service"], route["config"], route["offering"], route["period"]),
                    route["rps"].to_numpy(float)):
        routed[k] = routed.get(k, 0.0) + r
    replicas = rep["replicas"].to_numpy()
    rep["rps"] = np.array([routed.get((s, c, o, p), 0.0) if s in multi else n * per_replica.get((s, c), 0.0)
                           for s, c, o, p, n in zip(service, config, offering, period, replicas)], dtype=float)
    plan.inference = _sorted(rep[["service", "period", "offering", "pricing", "region", "gpu", "config", "precision",
                                  "gpus_per_replica", "replicas", "gpus", "rps"]], ["service", "period", "offering"], P)
    plan.routing = _sorted(route[["service", "bucket", "period", "offering", "config", "rps"]],
                           ["service", "bucket", "period"], P)

    hrs = _values(mip, vt, "training-hours", x)
    hrs["hours"] = hrs["value"]
    hrs = hrs[hrs["hours"] > EPS].copy()
    hrs["progress"] = hrs["hours"] * hrs["rate"]
    hrs["billed_units"] = np.where(hrs["mode"] == HOURLY, hrs["units"], 0)
    plan.training = _sorted(hrs[["job", "period", "offering", "pricing", "mode", "gpu", "config", "gpus",
                                 "billed_units", "hours", "progress"]], ["job", "period", "offering"], P)
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


def _sorted(table: pd.DataFrame, by: list[str], P: pd.DataFrame) -> pd.DataFrame:
    """``table`` sorted by the columns ``by`` (a stable sort, index 0, 1, ...): periods in the problem's order
    (their position in ``P``), anything else in its own (text by code point, a missing value last). One
    ``np.lexsort`` on integer codes: a ``sort_values`` with a key took three times as long."""
    keys = []
    for c in by:
        if c == "period":
            keys.append(positions(P.index, table[c], "period"))
        else:
            codes, uniques = pd.factorize(table[c], sort=True)
            keys.append(np.where(codes < 0, len(uniques), codes))  # a missing value last, as sort_values puts it
    out = table.take(np.lexsort(keys[::-1])) if len(table) else table.copy()
    out.index = pd.RangeIndex(len(out))
    return out


def _holds(rows: pd.DataFrame, O: pd.DataFrame, P: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(row, period) positions of every commitment row and period in which it holds its units, in row order, then
    period order: a reserved row (term block ``block``) holds them in the periods of its block, an owned row in
    every period. ``rows`` needs ``offering``, ``pricing`` and ``block``."""
    month = P["month"].to_numpy().astype(int)
    # holds[c, p]: row c holds its units in period p (a reserved row: the period's month is in its block)
    holds = np.ones((len(rows), len(P)), dtype=bool)
    reserved = (rows["pricing"] == "reserved").to_numpy()
    if reserved.any():
        term = O["term_months"].to_numpy()[positions(O.index, rows["offering"][reserved], "offering")]
        block = rows["block"].to_numpy()[reserved].astype(int)
        holds[reserved] = term_block(month[None, :], term[:, None]) == block[:, None]
    return np.nonzero(holds)  # row-major: row order, then period order


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
    # an empty side is left out (pandas before 3 and 3 itself type its columns differently), and the types are the
    # table's own: whole units and months, the rest numbers that a row of the other kind leaves missing
    rows = pd.concat([t for t in (res, own) if len(t)] or [res], ignore_index=True)
    for col in ("owed_after_horizon", "capex_spent", "book_value_at_end"):
        if col not in rows:
            rows[col] = np.nan
    rows = rows.astype({"block": int, "start_month": int, "units": int, "new_units": float, "existing_units": float,
                        "term_months": float, "months_after_horizon": float, "owed_after_horizon": float,
                        "capex_spent": float, "book_value_at_end": float})
    rows["gpus"] = rows["units"] * rows["offering"].map(O["host"])
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
    # the most units each offering holds, and rents by the hour, in any period (a loop over the few rows: a
    # grouped aggregation cost ten times as much)
    most: dict[str, list[float]] = {}
    for oid, units, hourly in zip(plan.usage["offering"], plan.usage["units"].tolist(),
                                  plan.usage["hourly_units"].tolist()):
        m = most.setdefault(oid, [np.nan, np.nan])
        for i, v in enumerate((units, hourly)):
            if not np.isnan(v):  # a missing value counts for nothing, as in a grouped maximum
                m[i] = v if np.isnan(m[i]) else max(m[i], v)
    out = []
    for oid in sorted(most):
        if oid not in src.index:
            continue
        units, hourly = most[oid]
        o = src.loc[oid]
        assumed = o.get("assumed")
        if isinstance(assumed, list) and assumed:
            out.append(f"{oid}: used by the plan, and its {', '.join(assumed)} "
                       f"{'is an assumption' if len(assumed) == 1 else 'are assumptions'} (no primary source)")
        quota_source = o.get("quota_source")
        cap = o.get("max_units")
        if (isinstance(quota_source, str) and "assumption" in quota_source.lower() and pd.notna(cap)
                and max(units, hourly) >= float(cap) - 1e-6):
            out.append(f"{oid}: the plan uses all {int(cap)} units its quota allows, and that quota is an "
                       f"assumed default ({quota_source}); ask the provider for the real figure")
    return out


def _grid(O: pd.DataFrame, P: pd.DataFrame, rows: pd.DataFrame, values) -> np.ndarray:
    """``values`` (one per row of ``rows``) summed per (offering, period): an array of offerings × periods, in
    the order of ``O`` and ``P``."""
    out = np.zeros((len(O), len(P)))
    np.add.at(out, (positions(O.index, rows["offering"], "offering"), positions(P.index, rows["period"], "period")),
              np.asarray(values, dtype=float))
    return out


def _usage(plan: Plan, O: pd.DataFrame, P: pd.DataFrame, running: pd.DataFrame) -> pd.DataFrame:
    """Units and GPUs per offering and period (offerings the plan touches).

    ``units`` are those held for the whole period (running, reserved or
    owned), ``hourly_units`` the average units rented by the hour for
    training; ``capacity_gpus`` counts both. Rows in offering order, then
    period order. Summed into (offering × period) arrays by position.
    """
    t = plan.training
    hours = P["hours"].to_numpy(float)[positions(P.index, t["period"], "period")]
    inference = _grid(O, P, plan.inference, plan.inference["gpus"])
    training = _grid(O, P, t, t["gpus"].to_numpy(float) * t["hours"].to_numpy(float) / hours)
    hourly = _grid(O, P, t, t["billed_units"].to_numpy(float) * t["hours"].to_numpy(float) / hours)
    run = _grid(O, P, running, running["units"])
    c, p = _holds(plan.commitments, O, P)
    held = np.zeros((len(O), len(P)))
    np.add.at(held, (positions(O.index, plan.commitments["offering"].to_numpy()[c], "offering"), p),
              plan.commitments["units"].to_numpy(float)[c])
    pricing = O["pricing"].to_numpy()
    units = np.where(np.isin(pricing, list(COMMITTED_KINDS))[:, None], held, run)
    capacity = (units + hourly) * O["G"].to_numpy(float)[:, None]
    used = inference + training
    with np.errstate(divide="ignore", invalid="ignore"):
        utilisation = np.where(capacity > 0, used / capacity, np.nan)
    o, p = np.nonzero((used > 0) | (units > 0))  # row-major: offering order, then period order
    return pd.DataFrame({"offering": O.index.to_numpy()[o], "period": P.index.to_numpy()[p], "pricing": pricing[o],
                         "units": units[o, p], "hourly_units": hourly[o, p], "capacity_gpus": capacity[o, p],
                         "inference_gpus": inference[o, p], "training_gpus": training[o, p],
                         "utilisation": utilisation[o, p]})


class _Ledger:
    """The ledger's rows as NumPy columns, collected part by part, then sorted into their order once."""

    def __init__(self, O: pd.DataFrame):
        self.O = O
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("o", "period", "item", "workload", "cost", "pv",
                                                                   "_g", "_c", "_phase", "_p", "_sub")}

    def add(self, g: int, o: np.ndarray, period, item: str, workload, cost, pv, c=None, phase=0, p=None,
            sub=0) -> None:
        """Rows of group ``g`` on the offerings at positions ``o``; ``period``: labels, or "" for none;
        ``c``, ``phase``, ``p``, ``sub`` order them within the group."""
        n = len(o)
        if not n:
            return

        def col(v, dtype=None):
            return np.broadcast_to(np.asarray(v, dtype=dtype), (n,))

        for k, v in (("o", o), ("period", col(period, object)), ("item", col(item, object)),
                     ("workload", col(workload, object)), ("cost", col(cost, float)), ("pv", col(pv, float)),
                     ("_g", col(g, np.int64)), ("_c", np.arange(n) if c is None else col(c, np.int64)),
                     ("_phase", col(phase, np.int64)), ("_p", col(0 if p is None else p, np.int64)),
                     ("_sub", col(sub, np.int64))):
            self.cols[k].append(v)

    def frame(self) -> pd.DataFrame:
        if not self.cols["o"]:
            return pd.DataFrame(columns=LEDGER_COLUMNS)
        a = {k: np.concatenate(v) for k, v in self.cols.items()}
        order = np.lexsort((a["_sub"], a["_p"], a["_phase"], a["_c"], a["_g"]))  # stable: parts keep their order
        o = a["o"][order]
        return pd.DataFrame({"offering": self.O.index.to_numpy()[o], "pricing": self.O["pricing"].to_numpy()[o],
                             "period": a["period"][order], "item": a["item"][order],
                             "workload": a["workload"][order], "cost": a["cost"][order], "pv": a["pv"][order]})


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

    The columns are NumPy arrays gathered by position (an offering's price
    is ``price[o]`` for its row ``o`` of ``O``): a plan's tables are small,
    and pandas' cost per operation, not the arithmetic, is what a ledger of
    a few dozen rows took (docs/performance.md, "The plan's tables in NumPy").
    """
    problem = plan.problem
    rate = problem.discount_rate
    full = problem.spec.finance.commitments == "full"
    H = float(P["hours"].sum())
    hours = P["hours"].to_numpy(float)
    disc = discount_factors(P["month"], rate).to_numpy(float)
    end_month = horizon_end_month(P)
    end = (1.0 + rate) ** (-end_month / 12.0)
    out = _Ledger(O)

    def at(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None]:
        """The positions of the rows' offerings in ``O`` and of their periods in ``P`` (None: no period)."""
        return (positions(O.index, rows["offering"], "offering"),
                positions(P.index, rows["period"], "period") if "period" in rows else None)

    def on(o: np.ndarray, col: str) -> np.ndarray:
        return O[col].to_numpy(float)[o]

    def num(rows: pd.DataFrame, col: str) -> np.ndarray:
        return rows[col].to_numpy(float)

    # rented units running for the whole period (inference, and clusters sharing them)
    u = plan.usage[plan.usage["pricing"].isin(PAY_PER_HOUR) & (plan.usage["units"] > 0)]
    o, p = at(u)
    c = num(u, "units") * on(o, "price") * hours[p]
    out.add(0, o, u["period"].to_numpy(), "rental", "", c, c * disc[p])
    # training: clusters rented by the hour pay their billed units for the hours they run; clusters on
    # owned units pay busy energy; clusters sharing rented or reserved units pay nothing more
    t = plan.training
    mode, pricing = t["mode"].to_numpy(), t["pricing"].to_numpy()
    hourly = t[mode == HOURLY]
    o, p = at(hourly)
    c = num(hourly, "billed_units") * on(o, "price") * num(hourly, "hours")
    out.add(1, o, hourly["period"].to_numpy(), "rental", hourly["job"].to_numpy(), c, c * disc[p])
    own_t = t[(mode != HOURLY) & (pricing == "owned")]
    o, p = at(own_t)
    c = num(own_t, "gpus") * num(own_t, "hours") * on(o, "energy_per_gpu_hour")
    out.add(1, o, own_t["period"].to_numpy(), "energy-busy", own_t["job"].to_numpy(), c, c * disc[p])
    i = plan.inference[plan.inference["pricing"].to_numpy() == "owned"]
    o, p = at(i)
    c = num(i, "gpus") * hours[p] * on(o, "energy_per_gpu_hour")
    out.add(2, o, i["period"].to_numpy(), "energy-busy", i["service"].to_numpy(), c, c * disc[p])
    s = plan.starts
    if len(s):
        cost_of = {sv.name: problem.stability(sv)[1] for sv in problem.services}
        o, p = at(s)
        c = num(s, "started") * np.array([cost_of[v] for v in s["service"]], dtype=float)
        out.add(2, o, s["period"].to_numpy(), "replica-start", s["service"].to_numpy(), c, c * disc[p])

    # reservations: paid every hour of the horizon, used or not; the upfront when the term starts
    com = plan.commitments
    res_rows = com[com["pricing"].to_numpy() == "reserved"].reset_index(drop=True)
    ro, _ = at(res_rows)
    rc, rp = _holds(res_rows, O, P)
    units = num(res_rows, "units")
    c = units[rc] * on(ro[rc], "price") * hours[rp]
    out.add(3, ro[rc], P.index.to_numpy()[rp], "reservation", "", c, c * disc[rp], c=rc, p=rp)
    # each row's first period it holds (its term's first), where the offering asks an upfront
    first = np.flatnonzero(np.r_[True, rc[1:] != rc[:-1]]) if len(rc) else np.zeros(0, dtype=int)
    first = first[on(ro[rc[first]], "upfront") > 0]
    fc = rc[first]
    c = units[fc] * on(ro[fc], "upfront")
    out.add(3, ro[fc], P.index.to_numpy()[rp[first]], "upfront", "", c,
            c * (1.0 + rate) ** (-num(res_rows, "start_month")[fc] / 12.0), c=fc, phase=1)
    if full:
        after = np.flatnonzero(num(res_rows, "months_after_horizon") > 0)
        pv = (units[after] * on(ro[after], "price")
              * monthly_flow_pv(num(res_rows, "months_after_horizon")[after], end_month, rate))
        out.add(3, ro[after], "", "reservation-after-horizon", "", num(res_rows, "owed_after_horizon")[after], pv,
                c=after, phase=2)

    # owned: depreciation (cost) or capex and book value (npv); fixed costs and idle energy per period
    own = com[com["pricing"].to_numpy() == "owned"].reset_index(drop=True)
    oo, _ = at(own)
    new_units = num(own, "new_units")
    new = np.flatnonzero(new_units > 0)
    # per new row: lifetime (years, hours), capex and residual fraction; those that outlive the horizon
    life = on(oo[new], "lifetime_years")
    life_h = life * HOURS_PER_YEAR
    capex, resid = on(oo[new], "capex"), on(oo[new], "residual_fraction")
    outlives = (life_h > H) & full
    out.add(4, oo[new], "", "depreciation", "", new_units[new] * capex * (1 - resid) * H / life_h, 0.0, c=new, sub=0)
    after, stays = new[outlives], ~outlives
    out.add(4, oo[after], "", "depreciation-after-horizon", "",
            new_units[after] * capex[outlives] * (1 - resid[outlives]) * (1 - H / life_h[outlives]), 0.0, c=after,
            sub=1)
    out.add(4, oo[new], "", "capex", "", 0.0, new_units[new] * capex, c=new, sub=2)
    keep = new[stays]
    book = new_units[keep] * capex[stays] * (1 - (1 - resid[stays]) * np.minimum(1.0, H / life_h[stays]))
    out.add(4, oo[keep], "", "book-value", "", 0.0, -book * end, c=keep, sub=3)
    out.add(4, oo[after], "", "resale", "", 0.0,
            -new_units[after] * capex[outlives] * resid[outlives] * (1.0 + rate) ** (-life[outlives]), c=after, sub=3)
    tc, tp = _holds(own, O, P)
    to = oo[tc]
    # busy GPU-hours per owned offering and period; the rest of the owned GPU-hours are idle
    inf = plan.inference
    busy = (_grid(O, P, inf, num(inf, "gpus") * hours[positions(P.index, inf["period"], "period")])
            + _grid(O, P, t, num(t, "gpus") * num(t, "hours")))
    units = num(own, "units")[tc]
    fixed = units * on(to, "fixed_per_month") * hours[tp] / HOURS_PER_MONTH
    k = fixed != 0
    out.add(4, to[k], P.index.to_numpy()[tp[k]], "fixed", "", fixed[k], fixed[k] * disc[tp[k]], c=tc[k], phase=1,
            p=tp[k], sub=0)
    idle = ((units * on(to, "host") * hours[tp] - busy[to, tp]) * on(to, "energy_per_gpu_hour")
            * on(to, "idle_power_fraction"))
    k = idle != 0
    out.add(4, to[k], P.index.to_numpy()[tp[k]], "energy-idle", "", idle[k], idle[k] * disc[tp[k]], c=tc[k],
            phase=1, p=tp[k], sub=1)
    return out.frame()


def allocate(plan: Plan) -> pd.DataFrame:
    """Split shared capacity items of the ledger among workloads.

    Rented units running in a period are split by each workload's share of
    their GPU-hours in that period; reserved and owned capacity items by
    each workload's share of the offering's GPU-hours over the horizon.
    What nobody uses is ``(idle)``. Items already tied to a workload stay
    with it. Rows: the items tied to a workload, in the ledger's order; the
    rented items' shares (workloads by name), then each one's idle rest;
    the same for the reserved and owned items.

    The sums are taken over dictionaries, not pandas merges: a plan's
    tables are small, and pandas' cost per operation is what this took
    (docs/performance.md, "The plan's tables in NumPy").
    """
    periods = plan.problem.periods
    hours = dict(zip(periods.index, periods["hours"].to_numpy(float)))
    L = plan.ledger
    off, per, item, wl = (L[c].to_numpy() for c in ("offering", "period", "item", "workload"))
    cost, pv = L["cost"].to_numpy(float), L["pv"].to_numpy(float)
    # GPU-hours of each workload inside held units, per (offering, period); hourly clusters are billed directly
    inf, t = plan.inference, plan.training[plan.training["mode"] != HOURLY]
    runs: dict[tuple, dict[str, float]] = {}
    for o, p, w, gh in [*zip(inf["offering"], inf["period"], inf["service"],
                             inf["gpus"].to_numpy(float) * np.array([hours[p] for p in inf["period"]], dtype=float)),
                        *zip(t["offering"], t["period"], t["job"], (t["gpus"] * t["hours"]).to_numpy(float))]:
        ws = runs.setdefault((o, p), {})
        ws[w] = ws.get(w, 0.0) + gh
    u = plan.usage
    G = dict(zip(plan.data.offerings["offering"], plan.data.offerings["G"].to_numpy(float)))
    cap = {(o, p): n * G[o] * hours[p] for o, p, n in zip(u["offering"], u["period"], u["units"].to_numpy(float))}
    # over the horizon: each workload's GPU-hours per offering, and the offering's held GPU-hours
    over: dict[str, dict[str, float]] = {}
    for (o, _), ws in runs.items():
        mine = over.setdefault(o, {})
        for w, gh in ws.items():
            mine[w] = mine.get(w, 0.0) + gh
    cap_o: dict[str, float] = {}
    for (o, _), c in cap.items():
        cap_o[o] = cap_o.get(o, 0.0) + c

    def in_period(i: int) -> list[tuple[str, float, float]]:
        key = (off[i], per[i])
        return [] if key not in cap else [(w, gh, cap[key]) for w, gh in sorted(runs.get(key, {}).items())]

    def over_horizon(i: int) -> list[tuple[str, float, float]]:
        return [(w, gh, cap_o.get(off[i], np.nan)) for w, gh in sorted(over.get(off[i], {}).items())]

    d = np.flatnonzero(wl != "")
    blocks = [(d, wl[d], cost[d], pv[d])]
    rental = (wl == "") & (item == "rental")
    for items, shares in ((np.flatnonzero(rental), in_period), (np.flatnonzero((wl == "") & ~rental), over_horizon)):
        rows = [(i, w, gh, c) for i in items for w, gh, c in shares(i)]
        of = np.array([r[0] for r in rows], dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            # a share that is not a number (no held GPU-hours to divide by, nothing run) counts as none
            s = np.nan_to_num(np.array([r[2] for r in rows], dtype=float) / np.array([r[3] for r in rows], dtype=float),
                              nan=0.0, posinf=np.inf, neginf=-np.inf)
        pc, pp = cost[of] * s, pv[of] * s
        used_c, used_p = np.zeros(len(L)), np.zeros(len(L))
        np.add.at(used_c, of, pc)
        np.add.at(used_p, of, pp)
        blocks.append((of, np.array([r[1] for r in rows], dtype=object), pc, pp))
        blocks.append((items, np.full(len(items), IDLE, dtype=object), cost[items] - used_c[items],
                       pv[items] - used_p[items]))
    at = np.concatenate([b[0] for b in blocks])
    return pd.DataFrame({"offering": off[at], "pricing": L["pricing"].to_numpy()[at], "period": per[at],
                         "item": item[at], "workload": np.concatenate([b[1] for b in blocks]),
                         "cost": np.concatenate([b[2] for b in blocks]), "pv": np.concatenate([b[3] for b in blocks])})
