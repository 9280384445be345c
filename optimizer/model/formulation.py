"""Stage 3: the mixed-integer program, built per component family from whole tables.

:func:`build_model` reads as the list of families. Each ``add_<family>`` selects
its rows with pandas merges and states its constraints with the expression
layer of :mod:`optimizer.model.expr`, as docs/formulation.md writes them.
Block names follow fixed patterns so a solution maps back to tables
mechanically; the plan and the report use the same names:

variables
    ``inference-replicas`` [service, config, offering, period] integer;
    ``inference-routing`` [service, bucket, config, offering, period] rps;
    ``replica-starts`` [service, config, offering, period] replicas started;
    ``config-used`` [service, config] binary (services limited in configurations);
    ``units-running`` [offering, period] integer (on-demand, spot: rented for the whole period);
    ``units-reserved`` [offering, block] integer (one per term block: renewals);
    ``units-owned-new`` [offering] integer;
    ``training-select`` [job, config] binary;
    ``training-run`` [job, config, offering, period, mode] binary;
    ``training-hours`` [job, config, offering, period, mode] hours.

A training cluster runs in one of two modes: ``shared``, inside the units
the plan holds for the whole period (reserved, owned, or rented units
running), beside that period's inference; or ``hourly``, on rented units
taken by the hour for the cluster alone (on-demand and spot only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import Problem, provider_allowed
from ..vocabulary import HOURS_PER_MONTH, HOURS_PER_YEAR, PAY_PER_HOUR
from .expr import Expr, lin, rhs_table
from .mip import MIP

#: pricing kinds whose units are rented period by period (or hour by hour for training)
#: pricing kinds whose units are committed for a term or bought
COMMITTED_KINDS = ("reserved", "owned")
#: A spot placement whose expected waste is at least this share of its hours is not offered.
MAX_SPOT_WASTE = 0.5
#: training modes (see the module docstring)
SHARED, HOURLY = "shared", "hourly"


@dataclass
class ModelData:
    """Inputs of the formulation as flat tables (what the families read)."""

    periods: pd.DataFrame  # period, hours, month, discount, pos (order in the horizon)
    offerings: pd.DataFrame  # offering, gpu, G (GPUs per billed unit), host, pricing, price, max_units, ...
    inference_options: pd.DataFrame  # service, config, offering, period, gpus, G, pricing, hours, discount
    rps: pd.DataFrame  # service, config, bucket, rps
    demand: pd.DataFrame  # service, bucket, period, rps
    multi_bucket: set[str]
    min_replicas: pd.DataFrame  # service, period, min_replicas
    stability: pd.DataFrame  # service, max_configurations, replica_start_cost
    training_configs: pd.DataFrame  # job, config, gpu, gpus
    training_options: pd.DataFrame  # job, config, offering, period, mode, gpus, units, rate, waste, ...
    horizon_hours: float
    objective: str
    rate: float  # yearly discount rate applied (0 under `objective: cost`)
    commitments: str  # `horizon` or `full`
    jobs: list[str] = field(default_factory=list)  # every training job, candidates or not
    #: tables derived from the fields above, computed once by the first family that asks (replicas needed, GPU
    #: floors, the strengthening's group tables); a new ModelData (a re-priced copy) starts empty
    cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)


# ---------------------------------------------------------------------------
# preparation: everything the families need, as tables


def discount_factors(months: pd.Series, rate: float) -> pd.Series:
    """Present-value factor of a cash flow in calendar month ``m``: (1 + r)^(−m/12)."""
    return (1.0 + rate) ** (-months.astype(float) / 12.0)


def horizon_end_month(P: pd.DataFrame) -> float:
    """Calendar month at which the horizon ends (when owned units' book value comes back).

    The month after the last period's month, or later when a period runs
    past it: a period of 8760 h at month 24 ends at month 36, not 25.
    """
    months = P["month"].astype(float)
    return float(max(months.max() + 1.0, (months + P["hours"].astype(float) / HOURS_PER_MONTH).max()))


def spot_waste(
    cluster_units: np.ndarray,
    interruptions_per_hour: np.ndarray,
    checkpoint_minutes: np.ndarray,
    checkpoint_write_minutes: float,
    restart_minutes: float,
) -> np.ndarray:
    """Expected share of a spot training job's hours that makes no progress.

    A cluster spans ``cluster_units`` units, each reclaimed at rate λ per
    hour, so interruptions arrive every M = 1/(units·λ) hours. With a
    checkpoint every τ hours that takes δ to write, and a restart taking R,
    the waste per hour of wall clock is (Young/Daly)

        waste = δ/τ + (τ/2 + R)/M

    the checkpoint writes, plus half an interval of lost work and a restart
    per interruption.
    """
    mtbi = 1.0 / np.maximum(cluster_units * interruptions_per_hour, 1e-12)
    tau = checkpoint_minutes / 60.0
    return checkpoint_write_minutes / 60.0 / tau + (tau / 2.0 + restart_minutes / 60.0) / mtbi


def offering_table(problem: Problem) -> pd.DataFrame:
    """One row per offering, in the model's units.

    ``host`` is the GPUs of one machine (``gpus_per_unit``). ``G`` is the GPUs
    of one *billed* unit: the machine, or one GPU for rented offerings that
    bill by the GPU (``billing: per_gpu``), whose ``price`` and ``max_units``
    are then per GPU. Everything below counts billed units.
    """
    O = problem.offerings.reset_index().rename(columns={"id": "offering", "gpus_per_unit": "host"})
    O["host"] = O["host"].astype(int)
    per_gpu = (O["billing"] == "per_gpu").to_numpy()
    O["G"] = np.where(per_gpu, 1, O["host"]).astype(int)
    price = O["price_per_hour"].astype(float).fillna(0.0)
    O["price"] = np.where(per_gpu, price / O["host"], price)
    O["max_units"] = np.where(per_gpu, O["max_units"].astype(float) * O["host"], O["max_units"].astype(float))
    O["interruptions"] = O["interruptions_per_hour"].astype(float).fillna(0.0)  # only non-spot rows are empty
    O["existing"] = O["existing_units"].fillna(0).astype(int)
    # energy per busy GPU-hour of an owned GPU; idle GPU-hours pay idle_power_fraction of it
    # (numbers on owned rows, empty elsewhere: as floats, so an empty one is a missing number, not an object)
    O["energy_per_gpu_hour"] = (O["power_kw"].astype(float).fillna(0) / O["host"] * O["pue"].astype(float).fillna(1.0)
                                * O["electricity_per_kwh"].astype(float).fillna(0))
    O["provider_key"] = [p.lower() if isinstance(p, str) else None for p in O["provider"]]
    return O


def _allowed(opts: pd.DataFrame, workloads: dict, key: str) -> np.ndarray:
    """Region, spot and provider rules of each row's workload."""
    ok = []
    for name, region, pricing, prov in zip(opts[key], opts["region"], opts["pricing"], opts["provider"]):
        w = workloads[name]
        ok.append((not w.regions or region in w.regions) and (pricing != "spot" or w.spot)
                  and provider_allowed(w.providers, prov if isinstance(prov, str) else None))
    return np.asarray(ok, dtype=bool)


def prepare(problem: Problem, cands: Candidates) -> ModelData:
    """Turn the problem and its candidates into the tables the families select from."""
    eff = cands.efficiency
    P = problem.periods.reset_index().rename(columns={"name": "period"})
    rate = problem.discount_rate if problem.objective == "npv" else 0.0
    P["discount"] = discount_factors(P["month"], rate)
    P["pos"] = np.arange(len(P))
    O = offering_table(problem)
    cols = ["offering", "gpu", "G", "host", "pricing", "region", "provider"]

    # --- inference options: (service, config) × offerings × periods with demand or a floor
    inf = cands.inference
    services = {s.name: s for s in problem.services}
    demand = problem.demand()
    total = demand.groupby(["service", "period"], as_index=False)["rps"].sum()
    floors = pd.DataFrame([(s.name, p, s.min_replicas) for s in problem.services for p in P["period"]],
                          columns=["service", "period", "min_replicas"])
    active = floors.merge(total, on=["service", "period"], how="left")
    active = active[(active["rps"].fillna(0) > 0) | (active["min_replicas"] > 0)]
    configs = inf.drop_duplicates(["service", "config"])[["service", "config", "gpu", "gpus"]]
    opts = configs.merge(O[cols], on="gpu")
    opts = opts[(opts["gpus"] <= opts["host"]).to_numpy() & _allowed(opts, services, "service")]
    opts = opts.merge(active[["service", "period"]], on="service").merge(
        P[["period", "hours", "discount", "pos"]], on="period")
    inference_options = opts.drop(columns=["region", "provider"]).reset_index(drop=True)

    stab = pd.DataFrame([(s.name, *problem.stability(s)) for s in problem.services],
                        columns=["service", "max_configurations", "replica_start_cost"])

    # --- training options: (job, config) × offerings × periods in the window × modes ---
    jobs = {j.name: j for j in problem.jobs}
    tc = cands.training
    window = pd.DataFrame([(j.name, p) for j in problem.jobs for p, m in zip(P["period"], P["month"])
                           if j.start_month <= m <= j.deadline_month], columns=["job", "period"])
    topt = training_placements(tc, O)
    topt = topt[_allowed(topt, jobs, "job")]
    cp = np.array([jobs[j].checkpoint_minutes for j in topt["job"]], dtype=float)
    waste = spot_waste(topt["cluster_units"].to_numpy(float), topt["interruptions"].to_numpy(float), cp,
                       float(eff["checkpoint_write_minutes"]), float(eff["restart_minutes"]))
    topt["waste"] = np.where(topt["pricing"] == "spot", waste, 0.0)
    topt = topt[topt["waste"] < MAX_SPOT_WASTE]
    # progress per hour run: the share of the job one hour does
    topt["rate"] = (1.0 - topt["waste"]) / topt["hours"]
    topt = topt.merge(window, on="job").merge(
        P[["period", "hours", "discount", "pos"]].rename(columns={"hours": "period_hours"}), on="period")
    # shared mode needs units held for the period: committed, or rented units that inference also runs
    shared = topt.assign(mode=SHARED)
    inf_op = inference_options[["offering", "period"]].drop_duplicates()
    rented = shared["pricing"].isin(PAY_PER_HOUR)
    shared = pd.concat([shared[~rented], shared[rented].merge(inf_op, on=["offering", "period"])],
                       ignore_index=True)
    hourly = topt[topt["pricing"].isin(PAY_PER_HOUR)].assign(mode=HOURLY)
    training_options = pd.concat([shared, hourly], ignore_index=True).drop(
        columns=["region", "provider", "interruptions"]).reset_index(drop=True)

    min_reps = floors.loc[floors["min_replicas"] > 0, ["service", "period", "min_replicas"]]
    return ModelData(
        periods=P,
        offerings=O,
        inference_options=inference_options,
        rps=inf[["service", "config", "bucket", "rps"]],
        demand=demand[demand["rps"] > 0].reset_index(drop=True),
        multi_bucket={s.name for s in problem.services if len(s.buckets) > 1},
        min_replicas=min_reps,
        stability=stab,
        training_configs=tc.drop_duplicates(["job", "config"])[["job", "config", "gpu", "gpus", "precision"]],
        training_options=training_options,
        horizon_hours=float(P["hours"].sum()),
        objective=problem.objective,
        rate=rate,
        commitments=problem.spec.finance.commitments,
        jobs=[j.name for j in problem.jobs],
    )


def training_placements(tc: pd.DataFrame, O: pd.DataFrame) -> pd.DataFrame:
    """Every (job, config, offering) where the cluster can be placed, with its hours there.

    A cluster of n GPUs on machines of ``host`` GPUs spans ⌈n / host⌉ of them.
    One machine always works; more need a fabric between the machines
    (``fabric`` not ``none``), at most ``max_cluster_units`` of them, and a
    quota (``max_units``) that holds them. The hours are those of the
    candidate row for the offering's link profile (or the one-node row).
    ``units`` is how many *billed* units the cluster occupies. The offering's
    ``region``, ``provider`` and ``interruptions`` come along (for the
    workloads' filters and spot waste).
    """
    cols = ["offering", "gpu", "G", "host", "pricing", "fabric_gbps_per_gpu", "max_cluster_units", "max_units",
            "region", "provider", "interruptions"]
    x = tc.drop(columns=["hours", "gpus_per_node", "fabric_gbps_per_gpu"]).drop_duplicates(["job", "config"]).merge(
        O[cols], on="gpu")
    x["cluster_units"] = np.ceil(x["gpus"] / x["host"]).astype(int)
    one = x["cluster_units"] == 1
    joined = (x["fabric_gbps_per_gpu"].notna() & (x["cluster_units"] <= x["max_cluster_units"].fillna(np.inf)))
    x["units"] = np.ceil(x["gpus"] / x["G"]).astype(int)
    quota = x["max_units"].isna() | (x["units"] <= x["max_units"].fillna(0))
    x = x[(one | joined) & quota]
    # hours: the row of the offering's link profile where the cluster spans machines, else the row that
    # applies to any link (a cluster inside one machine, or a measured profile)
    anyl = tc[tc["gpus_per_node"].isna()][["job", "config", "hours"]].rename(columns={"hours": "any_hours"})
    linked = tc[tc["gpus_per_node"].notna()][["job", "config", "gpus_per_node", "fabric_gbps_per_gpu", "hours"]]
    out = x.merge(anyl, on=["job", "config"], how="left").merge(
        linked.rename(columns={"gpus_per_node": "host"}), on=["job", "config", "host", "fabric_gbps_per_gpu"],
        how="left")
    multi = out["cluster_units"] > 1
    out["hours"] = np.where(multi, out["hours"].fillna(out["any_hours"]), out["any_hours"])
    out = out[out["hours"].notna()].drop(columns="any_hours")
    return out.drop(columns=["max_cluster_units", "fabric_gbps_per_gpu"])


# ---------------------------------------------------------------------------
# families


def add_inference(m: MIP, d: ModelData) -> dict[str, pd.DataFrame]:
    """Replicas per (service, config, offering, period); demand, routing and floors.

    Single-size services: Σ replicas·rps ≥ demand. Bucketed services: each
    bucket's traffic (demand × share) is routed to configurations in any
    fractions, Σ routed ≥ demand·share, and a replica's time is shared by what
    is routed to it: Σ_b routed_b ÷ rps_b ≤ replicas.
    """
    opts = d.inference_options
    keys = ["service", "config", "offering", "period"]
    x = m.add_variables_on("inference-replicas", opts, keys, integer=True)
    single = x[~x["service"].isin(d.multi_bucket)].merge(d.rps, on=["service", "config"])
    multi = x[x["service"].isin(d.multi_bucket)]

    route = multi[keys + ["var"]].rename(columns={"var": "rep_var"}).merge(d.rps, on=["service", "config"])
    route = route.merge(d.demand[["service", "bucket", "period"]], on=["service", "bucket", "period"])
    rkeys = ["service", "bucket", "config", "offering", "period"]
    f = m.add_variables_on("inference-routing", route, rkeys)

    dkeys = ["service", "bucket", "period"]
    served = lin(single, single["rps"], dkeys) + lin(f, 1.0, dkeys)
    m.add("inference-demand", served >= d.demand.rename(columns={"rps": "rhs"}))
    load = lin(f, 1.0 / f["rps"], keys) - lin(multi, 1.0, keys)
    m.add("inference-routing-capacity", load <= 0.0)
    m.add("inference-min-replicas",
          lin(x, 1.0, ["service", "period"]) >= d.min_replicas.rename(columns={"min_replicas": "rhs"}))
    return {"replicas": x, "routing": f}


def add_stability(m: MIP, d: ModelData, inf: dict) -> dict[str, pd.DataFrame]:
    """Stable fleets: each request class on at most N configurations, and a price on every replica started.

    ``config-used`` c_{s,b,k} is 1 if configuration k serves bucket b of
    service s in any period (a single-size service has the one bucket
    ``all``). A replica of k exists only where k serves some bucket:
    Σ_{o,p} x_{s,k,o,p} ≤ (Σ_p X̄_{s,k,p})·Σ_b c_{s,b,k} (X̄ the most replicas k can need
    there, summed over the horizon's periods: one row per configuration);
    a bucket is routed only to configurations it uses,
    Σ_{o,p} f_{s,b,k,o,p} ≤ (Σ_p D_{s,b,p})·c_{s,b,k}; and Σ_k c_{s,b,k} ≤ N_s. So a
    request class never moves from one configuration to another across
    periods (N_s = 1), while different classes may sit on different
    hardware. Only services with a bucket that has more candidate
    configurations than N_s get these rows. ``replica-starts``
    r ≥ x_{s,k,o,p} − x_{s,k,o,p'} (p' the period before p) for services with
    a start cost; the cost is in :func:`add_costs`.
    """
    x = inf["replicas"]
    st = d.stability
    sbk = x[["service", "config"]].drop_duplicates().merge(d.rps[["service", "config", "bucket"]],
                                                            on=["service", "config"])
    n_cfg = sbk.groupby(["service", "bucket"])["config"].nunique().groupby("service").max()
    n_cfg = n_cfg.rename("n").reset_index().merge(st, on="service")
    limited = n_cfg[n_cfg["n"] > n_cfg["max_configurations"]]
    used = pd.DataFrame(columns=["service", "bucket", "config", "var"])
    if len(limited):
        sk = sbk[sbk["service"].isin(limited["service"])]
        used = m.add_variables("config-used", sk[["service", "bucket", "config"]], upper=1.0, integer=True)
        # one row per configuration (per request class) over the whole horizon, not per period: the
        # same integer points, a relaxation as loose as the per-period rows' where it matters (the
        # solve driver proves the stable optimum from the model without these rows), and an LP that
        # solves 7x faster on bench x1 (docs/performance.md)
        xs = x[x["service"].isin(limited["service"])]
        if len(xs):
            need = replicas_needed(d)
            # with a start cost each offering may keep up to the bound (replicas_needed), so the sum over
            # offerings is at most their count times it; without, one period never needs more than X̄ in all
            n_off = xs.groupby(["service", "config", "period"], as_index=False)["offering"].nunique()
            need = need.merge(n_off, on=["service", "config", "period"]).merge(
                st[["service", "replica_start_cost"]], on="service")
            need["ub"] = np.where(need["replica_start_cost"] > 0, need["ub"] * need["offering"], need["ub"])
            cap = need.groupby(["service", "config"], as_index=False)["ub"].sum().merge(
                used, on=["service", "config"])
            keys = ["service", "config"]
            m.add("stability-config-used", lin(xs, 1.0, keys) - lin(cap, cap["ub"], keys) <= 0.0)
        f = inf["routing"]
        f = f[f["service"].isin(limited["service"])]
        if len(f):
            rk = ["service", "bucket", "config"]
            dem = f[rk + ["period"]].drop_duplicates().merge(d.demand, on=["service", "bucket", "period"])
            dem = dem.groupby(rk, as_index=False)["rps"].sum().merge(used, on=rk)
            m.add("stability-bucket-routed", lin(f, 1.0, rk) - lin(dem, dem["rps"], rk) <= 0.0)
        lim = limited[["service", "max_configurations"]].rename(columns={"max_configurations": "rhs"})
        m.add("stability-configurations",
              lin(used, 1.0, ["service", "bucket"]) <= used[["service", "bucket"]].drop_duplicates().merge(
                  lim, on="service"))
    starts = pd.DataFrame(columns=["service", "config", "offering", "period", "var", "start_cost"])
    costly = st[st["replica_start_cost"] > 0]
    xs = x[x["service"].isin(costly["service"]) & (x["pos"] > 0)]
    if len(xs):
        keys = ["service", "config", "offering", "period"]
        starts = m.add_variables_on("replica-starts", xs[keys + ["pos", "discount"]], keys)
        starts = starts.merge(costly[["service", "replica_start_cost"]], on="service").rename(
            columns={"replica_start_cost": "start_cost"})
        prev = x[["service", "config", "offering", "pos", "var"]].assign(pos=x["pos"] + 1).rename(
            columns={"var": "prev_var"})
        sp = starts[keys + ["pos"]].merge(x[keys + ["var"]], on=keys).merge(
            prev, on=["service", "config", "offering", "pos"], how="left")
        grown = lin(sp, 1.0, keys) - lin(starts, 1.0, keys)
        had = sp[sp["prev_var"].notna()].astype({"prev_var": np.int64})
        m.add("stability-starts", grown - lin(had, 1.0, keys, var="prev_var") <= 0.0)
    return {"used": used, "starts": starts}


def replicas_needed(d: ModelData) -> pd.DataFrame:
    """Most replicas of a configuration a service can need in a period, over all offerings.

    Enough to carry all of the period's demand alone, Σ_b ⌈demand_b ÷ rps_b⌉
    rounded up as a whole, and no fewer than the floor: a plan with more is
    never cheaper. Columns service, config, period, ub. Computed once per
    model data (the stability rows and presolve's bounds both read it; neither
    changes it).
    """
    cached = d.cache.get("replicas_needed")
    if cached is not None:
        return cached
    opts = d.inference_options[["service", "config", "period"]].drop_duplicates()
    need = opts.merge(d.rps, on=["service", "config"]).merge(
        d.demand.rename(columns={"rps": "demand"}), on=["service", "bucket", "period"], how="left")
    need["t"] = need["demand"].fillna(0.0) / need["rps"]
    ub = need.groupby(["service", "config", "period"], as_index=False)["t"].sum()
    ub = ub.merge(d.min_replicas, on=["service", "period"], how="left")
    ub["ub"] = np.maximum(np.ceil(ub["t"] - 1e-9), ub["min_replicas"].fillna(0.0))
    # with a start cost, replicas kept through a dip can avoid starts after it: the bound is the most any
    # period needs (capping each offering's replicas at that constant never adds a start, and the
    # capped count still carries any period's demand alone)
    costly = set(d.stability.loc[d.stability["replica_start_cost"] > 0, "service"])
    if costly:
        c = ub["service"].isin(costly)
        ub.loc[c, "ub"] = ub[c].groupby(["service", "config"])["ub"].transform("max")
    ub = ub[["service", "config", "period", "ub"]]
    d.cache["replicas_needed"] = ub
    return ub


def add_training(m: MIP, d: ModelData) -> dict[str, pd.DataFrame]:
    """One configuration per job; hours per offering, period and mode; progress to completion.

    ``training-run`` is 1 where the job's cluster runs on an offering in a
    period (in a mode); its hours there are at most the period's; a job's
    hours in a period over all placements are at most the period's hours;
    progress, Σ hours × rate (the share of the job an hour does, less spot
    waste), equals 1 for the chosen configuration.
    """
    tc = d.training_configs
    z = m.add_variables_on("training-select", tc, ["job", "config"], upper=1.0, integer=True)
    opts = d.training_options
    keys = ["job", "config", "offering", "period", "mode"]
    # a placement never runs longer than the period, nor longer than the whole job takes there (1 ÷ rate)
    opts = opts.assign(max_hours=np.minimum(opts["period_hours"], 1.0 / opts["rate"]))
    # a run binary only where running at all matters: a shared cluster needs its GPUs free for the
    # period, an hourly one on a capped offering needs its units within the quota. An hourly cluster
    # on an uncapped offering pays by the hour and needs nothing more: its hours are bounded by the
    # selection itself, t ≤ max_hours·z (the same optimum, without binaries the LP would split)
    needs_run = ((opts["mode"] == SHARED) | opts["max_units"].notna()).to_numpy()
    ro = opts[needs_run]
    w = m.add_variables_on("training-run", ro, keys, upper=1.0, integer=True)
    t = m.add_variables_on("training-hours", opts, keys, upper=opts["max_hours"].to_numpy())

    # every job, so one without candidates is an empty row reported as infeasible
    m.add("training-select-one", lin(z, 1.0, ["job"]).eq(pd.DataFrame({"job": pd.Series(d.jobs, dtype=object),
                                                                      "rhs": 1.0})))
    t_run = t[needs_run]
    m.add("training-hours-run", lin(t_run, 1.0, keys) - lin(w, w["max_hours"], keys) <= 0.0)
    ws = w.merge(z[["job", "config", "var"]].rename(columns={"var": "sel_var"}), on=["job", "config"])
    m.add("training-run-select", lin(ws, 1.0, keys) - lin(ws, 1.0, keys, var="sel_var") <= 0.0)
    free = t[~needs_run].merge(z[["job", "config", "var"]].rename(columns={"var": "sel_var"}),
                               on=["job", "config"])
    if len(free):
        m.add("training-hours-select", lin(free, 1.0, keys) - lin(free, free["max_hours"], keys, var="sel_var")
              <= 0.0)
    per = t.groupby(["job", "period"], as_index=False)["period_hours"].first()
    m.add("training-period-hours", lin(t, 1.0, ["job", "period"]) <= rhs_table(per, ["job", "period"],
                                                                               per["period_hours"]))
    m.add("training-progress", (lin(t, t["rate"], ["job", "config"]) - lin(z, 1.0, ["job", "config"])).eq(0.0))
    return {"select": z, "run": w, "hours": t}


def positions(index, keys, what: str) -> np.ndarray:
    """The position in ``index`` of every one of ``keys`` (one per row), for gathering a table's columns by row.

    A key ``index`` does not hold is our bug (a plan or model table naming an offering or period its model does
    not have): it raises, where a position of −1 would silently read the last row.
    """
    at = pd.Index(index).get_indexer(keys)
    if (at < 0).any():
        missing = sorted({str(k) for k, i in zip(keys, at) if i < 0})
        raise ValueError(f"internal error: {what} not in the model: {', '.join(missing[:5])}")
    return at


def term_block(month, term_months) -> np.ndarray:
    """The term block a month falls in: ⌊month ÷ term_months⌋ (block k runs from month k·term on)."""
    return np.asarray(month).astype(int) // np.asarray(term_months).astype(int)


def period_blocks(O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """Term block of every (reserved offering, period) (:func:`term_block`)."""
    res = O[O["pricing"] == "reserved"]
    # every reserved offering × every period, offering-major (the rows a cross join gives), built by position
    oi, pi = np.repeat(np.arange(len(res)), len(P)), np.tile(np.arange(len(P)), len(res))
    return pd.DataFrame({"offering": res["offering"].iloc[oi].reset_index(drop=True),
                         "period": P["period"].iloc[pi].reset_index(drop=True),
                         "block": term_block(P["month"].to_numpy()[pi], res["term_months"].to_numpy()[oi])})


def reserved_blocks(O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """One row per (reserved offering, term block that some period falls in), with its start month."""
    pb = period_blocks(O, P).drop_duplicates(["offering", "block"])[["offering", "block"]]
    pb = pb.sort_values(["offering", "block"]).reset_index(drop=True)
    # each block's offering row gathered by position (an offering is one row): a join of the whole wide
    # offering table, then a sort of it, cost ten times as much
    reserved = O[O["pricing"] == "reserved"]
    at = positions(reserved["offering"], pb["offering"], "reserved offering")
    res = pd.concat([pb, reserved.drop(columns="offering").iloc[at].reset_index(drop=True)], axis=1)
    res["start_month"] = res["block"] * res["term_months"].astype(int)
    return res


def add_units(m: MIP, d: ModelData) -> dict[str, pd.DataFrame]:
    """Units per offering: rented for the period, reserved per term block, owned (existing + new).

    Returns the variable tables and ``held``: for every (offering, period),
    the units the plan holds for the whole period as terms ``G·var`` plus
    the GPUs already owned (``G·existing``).
    """
    O, P = d.offerings, d.periods
    need = pd.concat([d.inference_options[["offering", "period"]],
                      d.training_options.loc[d.training_options["mode"] == SHARED, ["offering", "period"]]]
                     ).drop_duplicates()
    rented = O[O["pricing"].isin(PAY_PER_HOUR)][["offering", "G", "max_units", "price"]]
    run = rented.merge(need, on="offering").merge(P[["period", "hours", "discount", "pos"]], on="period")
    y = m.add_variables_on("units-running", run, ["offering", "period"],
                           upper=run["max_units"].fillna(np.inf).to_numpy(float), integer=True)

    # reserved units per term block: a term of T months covers months [k·T, (k+1)·T); a new block
    # is a renewal, whose size may differ. A term at least as long as the horizon is one block.
    res = reserved_blocks(O, P)
    u = m.add_variables_on("units-reserved", res, ["offering", "block"],
                           upper=res["max_units"].fillna(np.inf).to_numpy(float), integer=True)

    own = O[O["pricing"] == "owned"].reset_index(drop=True)
    cap = (own["max_units"] - own["existing"]).fillna(np.inf).clip(lower=0).to_numpy(float)
    v = m.add_variables_on("units-owned-new", own, ["offering"], upper=cap, integer=True)

    pb = period_blocks(O, P)
    held = pd.concat([
        y[["offering", "period", "G", "var"]].assign(existing=0),
        pb.merge(u[["offering", "block", "G", "var"]], on=["offering", "block"])[
            ["offering", "period", "G", "var"]].assign(existing=0),
        v[["offering", "G", "var", "existing"]].merge(P[["period"]], how="cross"),
    ], ignore_index=True)[["offering", "period", "G", "var", "existing"]]
    return {"running": y, "reserved": u, "owned": v, "held": held}


def add_capacity(m: MIP, d: ModelData, inf: dict, tr: dict, units: dict) -> None:
    """Inference and training GPUs fit in the units, period by period.

    With H the units held for the whole period (rented units running,
    reserved units of the period's block, owned units) and G GPUs per unit:

    - ``capacity``: inference GPUs + shared training GPUs (cluster GPUs ×
      hours ÷ period hours) ≤ G·H;
    - ``training-fit``: a shared cluster runs only where it fits beside the
      period's inference, never time-sliced: n·w + inference GPUs ≤ G·H;
    - ``capacity-quota`` (rented with ``max_units``): units running + the
      hourly clusters' units (× hours ÷ period hours) ≤ max_units, and
      ``training-fit-quota``: units running + a cluster's units ≤ max_units
      while it runs.
    """
    keys = ["offering", "period"]
    x, held = inf["replicas"], units["held"]
    t, w = tr["hours"], tr["run"]
    t_sh, w_sh = t[t["mode"] == SHARED], w[w["mode"] == SHARED]
    I = lin(x, x["gpus"], keys)
    H = lin(held, held["G"], keys)
    owned_gpus = rhs_table(held[held["existing"] > 0], keys, held.loc[held["existing"] > 0, "G"]
                           * held.loc[held["existing"] > 0, "existing"])
    m.add("capacity", I + lin(t_sh, t_sh["gpus"] / t_sh["period_hours"], keys) - H <= owned_gpus)

    fkeys = ["job", "config", "offering", "period", "mode"]
    if len(w_sh):
        fi = w_sh[fkeys].merge(x[keys + ["var", "gpus"]], on=keys)
        fh = w_sh[fkeys].merge(held, on=keys)
        # one held row per (offering, period): its units, and the GPUs already owned on the right
        m.add("training-fit", lin(w_sh, w_sh["gpus"], fkeys) + lin(fi, fi["gpus"], fkeys)
              - lin(fh, fh["G"], fkeys) <= rhs_table(fh, fkeys, fh["G"] * fh["existing"]))

    y = units["running"]
    capped = y[y["max_units"].notna()]
    t_hr, w_hr = t[t["mode"] == HOURLY], w[w["mode"] == HOURLY]
    t_hr = t_hr[t_hr["offering"].isin(set(capped["offering"])) | t_hr["max_units"].notna()]
    quota = pd.concat([capped[keys + ["max_units"]],
                       t_hr[keys + ["max_units"]]]).drop_duplicates(keys)
    m.add("capacity-quota", lin(capped, 1.0, keys) + lin(t_hr, t_hr["units"] / t_hr["period_hours"], keys)
          <= rhs_table(quota, keys, quota["max_units"]))
    w_hr = w_hr[w_hr["max_units"].notna()]
    if len(w_hr):
        wy = w_hr[fkeys].merge(y[keys + ["var"]], on=keys)
        m.add("training-fit-quota", lin(w_hr, w_hr["units"], fkeys) + lin(wy, 1.0, fkeys)
              <= rhs_table(w_hr, fkeys, w_hr["max_units"]))


def pooled_placements(t: pd.DataFrame) -> np.ndarray:
    """Per training placement: does it share a pool with another job's (lanes, :func:`add_training_lanes`)?

    A pool is an offering's units held in a period (``shared``) or its
    quota in a period (``hourly`` on an offering with ``max_units``).
    """
    keys = ["offering", "period", "mode"]
    in_pool = ((t["mode"] == SHARED) | t["max_units"].notna()).to_numpy()
    jobs = t[in_pool].groupby(keys)["job"].transform("nunique")
    out = np.zeros(len(t), dtype=bool)
    out[np.flatnonzero(in_pool)[jobs.to_numpy() >= 2]] = True
    return out


def add_training_lanes(m: MIP, d: ModelData, inf: dict, tr: dict, units: dict) -> dict[str, pd.DataFrame]:
    """Clusters of different jobs that share a pool in a period get a timetable: lanes.

    ``capacity`` counts shared clusters by GPU-hours, and ``training-fit``
    fits each cluster alone beside the period's inference. Neither stops two
    16-GPU clusters from running 112 hours between them in a 108-hour period
    on 18 free GPUs, which no team can do: side by side they need 32 GPUs,
    one after the other 112 hours. So where clusters of two or more jobs can
    run in one pool, a pool being the units held on an offering in a period
    (``shared``) or an offering's quota in a period (``hourly`` on an
    offering with ``max_units``), its free capacity is divided into **lanes**
    for the period: ``training-lanes`` λ_{o,p,mode,n} lanes n wide (n a
    cluster size of the pool, in GPUs for ``shared`` and in billed units for
    ``hourly``). A lane runs one cluster at a time, of any size up to its
    width. With S_n the sizes of the pool and t_a the hours of cluster a:

    - ``training-lanes-hours``: for every size s of the pool, the clusters of
      size at least s fit in the time of the lanes at least that wide,
      Σ_{a: n_a ≥ s} t_a ≤ h_p·Σ_{n ≥ s} λ_n (Hall's condition for nested
      choices: the clusters' hours can then be poured into lanes, widest
      first);
    - ``training-lanes-fit``: the lanes fit beside what else holds the pool,
      Σ_n n·λ_n + inference GPUs ≤ G·H (``shared``); ``training-lanes-quota``:
      units running + Σ_n n·λ_n ≤ max_units (``hourly``). With the hours
      rows they imply the pool's ``capacity`` (``capacity-quota``) row
      (Σ_a n_a·t_a ≤ h_p·Σ_n n·λ_n), which is kept: without it HiGHS's
      simplex took 117,101 iterations on bench ×1's LP instead of 65,759.

    A plan that meets these rows has a timetable: each lane is a machine,
    each job runs at most h_p hours in the period over all its placements
    (``training-period-hours``), so a preemptive open-shop schedule exists
    (Gonzalez and Sahni 1976) and :mod:`optimizer.timetable` builds it. A cluster
    may be paused and resumed inside the period (it checkpoints). What the
    lanes do not allow is re-cutting a pool within a period (two 16-GPU
    clusters side by side in the hours a 32-GPU cluster left free): a
    restriction, so every plan stays executable.
    """
    t = tr["hours"]
    keys = ["offering", "period", "mode"]
    pooled = t[pooled_placements(t)]
    pooled = pooled.assign(size=np.where(pooled["mode"] == SHARED, pooled["gpus"], pooled["units"]).astype(int))
    empty = pd.DataFrame(columns=keys + ["size", "var"])
    if not len(pooled):
        return {"lanes": empty}
    # a lane n wide is worth having only for a cluster that size or smaller, at most one per job
    lanes = pooled[keys + ["size"]].drop_duplicates().merge(
        pooled[keys + ["size", "job"]].rename(columns={"size": "cluster"}), on=keys)
    lanes = lanes[lanes["cluster"] <= lanes["size"]].groupby(keys + ["size"], as_index=False)["job"].nunique()
    lam = m.add_variables("training-lanes", lanes[keys + ["size"]], upper=lanes["job"].to_numpy(float),
                          integer=True).merge(lanes[keys + ["size"]], on=keys + ["size"])
    lam = lam.merge(d.periods[["period", "hours"]], on="period")
    # for every size s of the pool: the clusters at least s wide against the lanes at least s wide
    s = lanes[keys + ["size"]].rename(columns={"size": "s"})
    need = pooled.merge(s, on=keys)
    need = need[need["size"] >= need["s"]]
    room = lam.merge(s, on=keys)
    room = room[room["size"] >= room["s"]]
    m.add("training-lanes-hours", lin(need, 1.0, keys + ["s"]) - lin(room, room["hours"], keys + ["s"]) <= 0.0)

    pk = ["offering", "period"]
    sh, hr = lam[lam["mode"] == SHARED], lam[lam["mode"] != SHARED]
    if len(sh):
        x, held = inf["replicas"], units["held"]
        pools = sh[pk].drop_duplicates()
        xi = x.merge(pools, on=pk)
        hh = held.merge(pools, on=pk)
        owned = hh[hh["existing"] > 0]
        m.add("training-lanes-fit", lin(sh, sh["size"], pk) + lin(xi, xi["gpus"], pk) - lin(hh, hh["G"], pk)
              <= rhs_table(owned, pk, owned["G"] * owned["existing"]))
    if len(hr):
        y = units["running"].merge(hr[pk].drop_duplicates(), on=pk)
        cap = hr[pk].drop_duplicates().merge(d.offerings[["offering", "max_units"]], on="offering")
        m.add("training-lanes-quota", lin(hr, hr["size"], pk) + lin(y, 1.0, pk)
              <= rhs_table(cap, pk, cap["max_units"]))
    return {"lanes": lam}


def after_horizon_months(start_month, term_months, end_month: float) -> np.ndarray:
    """Months of a term that fall after the horizon's end: max(0, start + term − end)."""
    return np.maximum(0.0, np.asarray(start_month, float) + np.asarray(term_months, float) - end_month)


def monthly_flow_pv(months: np.ndarray, first_month: float, rate: float) -> np.ndarray:
    """Present value of 730 h a month paid for ``months`` months from ``first_month`` (one per row).

    Month k (k = 0, 1, ...) of the flow is discounted at (1 + r)^(−(first + k)/12);
    a fraction of a month pays its fraction.
    """
    out = np.zeros(len(months))
    for i, n in enumerate(np.asarray(months, float)):
        k = np.arange(int(np.ceil(n)))
        share = np.minimum(1.0, n - k)
        out[i] = float((HOURS_PER_MONTH * share * (1.0 + rate) ** (-(first_month + k) / 12.0)).sum())
    return out


def owned_unit_costs(O: pd.DataFrame, P: pd.DataFrame, objective: str, rate: float, commitments: str
                     ) -> pd.DataFrame:
    """Per-offering cost of one owned unit, excluding busy energy.

    Capital of a new unit (``capital_new``), counted as ``finance.commitments`` says:

    - ``horizon``, under ``cost``: straight-line depreciation of the horizon's
      share, capex·(1 − residual)·H ÷ (lifetime·8760); under ``npv``: capex at
      the start less the book value at the horizon's end,
      capex·(1 − (1 − residual)·min(1, H ÷ (lifetime·8760))), discounted.
    - ``full``, for a unit whose life outlasts the horizon: the whole purchase
      less its resale value at the end of its life, capex·(1 − residual) under
      ``cost`` and capex − capex·residual·(1 + r)^(−lifetime) under ``npv``.
      A unit whose life ends inside the horizon counts as under ``horizon``.

    For every unit, new or existing: fixed_per_month·months (``fixed_unit``)
    and idle energy e·idle·G·H (``idle_energy_unit``) over the horizon, per
    period and discounted under ``npv``.
    """
    H = float(P["hours"].sum())
    own = O[O["pricing"] == "owned"][["offering", "host", "capex", "lifetime_years", "residual_fraction",
                                      "fixed_per_month", "idle_power_fraction", "energy_per_gpu_hour"]].copy()
    life_h = own["lifetime_years"] * HOURS_PER_YEAR
    hours = float((P["hours"] * P["discount"]).sum()) if objective == "npv" else H
    if objective == "npv":
        end = (1.0 + rate) ** (-horizon_end_month(P) / 12.0)
        book = own["capex"] * (1 - (1 - own["residual_fraction"]) * np.minimum(1.0, H / life_h))
        horizon = own["capex"] - book * end
        full = own["capex"] - own["capex"] * own["residual_fraction"] * (1.0 + rate) ** (-own["lifetime_years"])
    else:
        horizon = own["capex"] * (1 - own["residual_fraction"]) * H / life_h
        full = own["capex"] * (1 - own["residual_fraction"])
    outlives = (life_h > H).to_numpy()
    own["capital_new"] = np.where(outlives & (commitments == "full"), full, horizon)
    own["fixed_unit"] = own["fixed_per_month"] * hours / HOURS_PER_MONTH
    own["idle_energy_unit"] = own["energy_per_gpu_hour"] * own["idle_power_fraction"] * own["host"] * hours
    return own


def reserved_unit_costs(res: pd.DataFrame, P: pd.DataFrame, rate: float, commitments: str) -> np.ndarray:
    """Cost of one reserved unit of each term block (``res``: offering, block, start_month, term, price, upfront).

    ``horizon``: the price for every hour of the block's periods (discounted
    per period under ``npv``) and the upfront payment at the block's start.
    ``full`` adds what the term owes after the horizon: the price for 730 h a
    month over its months after the horizon's end (each month discounted
    under ``npv``).
    """
    start_disc = (1.0 + rate) ** (-res["start_month"].astype(float) / 12.0)
    pb = period_blocks(res.drop_duplicates("offering"), P).merge(P[["period", "hours", "discount"]], on="period")
    per = (pb["hours"] * pb["discount"]).groupby([pb["offering"], pb["block"]]).sum()
    dh = per.reindex(pd.MultiIndex.from_frame(res[["offering", "block"]])).to_numpy(float)
    if commitments == "full":
        end = horizon_end_month(P)
        dh = dh + monthly_flow_pv(after_horizon_months(res["start_month"], res["term_months"], end), end, rate)
    return res["price"].to_numpy(float) * dh + res["upfront"].fillna(0).to_numpy(float) * start_disc.to_numpy()


def add_costs(m: MIP, d: ModelData, inf: dict, tr: dict, units: dict, stab: dict) -> Expr:
    """The objective: rental, reservation, ownership, energy and replica starts (docs/formulation.md).

    Returns the objective as an expression (for the budget). Under ``npv``
    every per-period flow is weighted by its discount factor.
    """
    O = d.offerings
    y = units["running"]
    parts = [lin(y, y["price"] * y["hours"] * y["discount"], [])]

    t = tr["hours"].merge(O[["offering", "price", "energy_per_gpu_hour", "idle_power_fraction"]], on="offering")
    hourly = (t["mode"] == HOURLY).to_numpy()
    owned = (t["pricing"] == "owned").to_numpy()
    coef = np.where(hourly, t["units"] * t["price"], 0.0)
    coef = coef + np.where(owned, t["gpus"] * t["energy_per_gpu_hour"] * (1 - t["idle_power_fraction"].fillna(0)),
                           0.0)
    parts.append(lin(t, coef * t["discount"], []))

    x = inf["replicas"].merge(O[["offering", "energy_per_gpu_hour", "idle_power_fraction"]], on="offering")
    x = x[x["pricing"] == "owned"]
    parts.append(lin(x, x["gpus"] * x["hours"] * x["energy_per_gpu_hour"] * (1 - x["idle_power_fraction"].fillna(0))
                     * x["discount"], []))

    u = units["reserved"]
    parts.append(lin(u, reserved_unit_costs(u, d.periods, d.rate, d.commitments), []))

    v = units["owned"].merge(owned_unit_costs(O, d.periods, d.objective, d.rate, d.commitments)[
        ["offering", "capital_new", "fixed_unit", "idle_energy_unit"]], on="offering")
    parts.append(lin(v, v["capital_new"] + v["fixed_unit"] + v["idle_energy_unit"], []))
    constant = float((v["existing"] * (v["fixed_unit"] + v["idle_energy_unit"])).sum())

    s = stab["starts"]
    if len(s):
        parts.append(lin(s, s["start_cost"] * s["discount"], []))

    obj = parts[0]
    for p in parts[1:]:
        obj = obj + p
    m.add_objective(obj.terms, constant)
    return obj


def add_budget(m: MIP, obj: Expr, budget: float | None) -> None:
    """The objective, constant included, is at most ``constraints.budget``."""
    if budget is None:
        return
    m.add("budget", obj <= budget - m.objective_constant)


def build_model(problem: Problem, cands: Candidates) -> tuple[MIP, ModelData, dict]:
    """The whole MIP: one call per component family.

    Returns the model, its input tables and the labelled variable tables
    (what :mod:`optimizer.plan` reads the solution from), named as the blocks.
    """
    d = prepare(problem, cands)
    m = MIP()
    inf = add_inference(m, d)
    stab = add_stability(m, d, inf)
    tr = add_training(m, d)
    units = add_units(m, d)
    add_capacity(m, d, inf, tr, units)
    tr.update(add_training_lanes(m, d, inf, tr, units))
    obj = add_costs(m, d, inf, tr, units, stab)
    add_budget(m, obj, problem.budget)
    return m, d, {"inference-replicas": inf["replicas"], "inference-routing": inf["routing"],
                  "config-used": stab["used"], "replica-starts": stab["starts"],
                  "training-select": tr["select"], "training-run": tr["run"], "training-hours": tr["hours"],
                  "training-lanes": tr["lanes"],
                  "units-running": units["running"], "units-reserved": units["reserved"],
                  "units-owned-new": units["owned"], "units-held": units["held"]}
