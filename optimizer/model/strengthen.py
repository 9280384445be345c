"""Valid inequalities that tighten the LP relaxation; added by :func:`optimizer.model.presolve.build`.

Each family is named and can be left out (``presolve.build(..., cuts=())``)
so a test can solve a model both ways. docs/formulation.md ("Valid
inequalities") argues each one and docs/performance.md measures it. None is
added to the model that :mod:`optimizer.studies.diagnose` makes elastic
(it calls :func:`~optimizer.model.formulation.build_model` itself): a row
derived from demand is not valid once demand may be missed.

``unit-floor``
    Per period, and per service or per GPU type: the units held of the
    offerings the services can use hold at least the GPUs their demand
    needs with whole replicas, rounded up to whole units (an integer
    lower bound of the GPUs, then a Chvátal–Gomory rounding).
``replica-unit``
    x_{s,k,o,p} ≤ X̄·H_{o,p} where a replica's upper bound X̄ (presolve) is
    below what one unit holds (G/n): a replica needs a whole unit.
``cluster-unit-floor``
    ``unit-floor`` of a GPU type's services with a shared training cluster
    beside them: with the cluster running (w = 1) the floor holds its GPUs too.

And rows kept apart from the model (:func:`training_cover`), which the
exact split's leaves get (:mod:`optimizer.solve.split`):

``training-cover``
    Per job, a mixed-integer rounding of its progress: a placement with a
    run binary can do at most a share a_i of the job in its period, so
    Σ a_i·w_i + Σ ρ·t ≥ 1 (the hours of placements without a binary kept
    continuous); rounded at a divisor δ, whole periods count whole (a job
    that needs 1.83 off-peak periods of a pool takes two, or rents the rest
    by the hour).

and (:func:`config_floor`), which the search for a bound of a large stable
model gets (:func:`optimizer.solve.fixed.fixed_configurations`):

``config-floor``
    A request class limited to one configuration that sits on k has all its
    traffic there, so k holds the whole replicas that traffic needs:
    Σ_o x_{s,k,o,p} ≥ ⌈D_{s,b,p} / r_{s,b,k}⌉·c_{s,b,k}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .expr import lin, rhs_table
from .mip import MIP, Rows

#: every family, in the order they are added
CUTS = ("unit-floor", "replica-unit", "cluster-unit-floor")
#: the knapsack of :func:`min_gpus_single` is solved exactly up to this many GPUs; above, the LP's ceiling
MAX_EXACT_GPUS = 512


def min_gpus_single(demand: float, gpus: np.ndarray, rps: np.ndarray, min_replicas: int) -> int:
    """Fewest GPUs whole replicas need to carry ``demand`` rps (one request size), with at least ``min_replicas``.

    min Σ_k n_k·x_k s.t. Σ_k r_k·x_k ≥ demand, Σ_k x_k ≥ min_replicas, x integer ≥ 0: an
    unbounded knapsack over the GPU count g, best[g][m] = most rps with g GPUs and
    min(m, min_replicas) replicas. When one configuration alone needs more than
    :data:`MAX_EXACT_GPUS`, the LP's value rounded up (GPUs come whole).
    """
    gpus = np.asarray(gpus, int)
    rps = np.asarray(rps, float)
    ok = rps > 0
    gpus, rps = gpus[ok], rps[ok]
    if not len(gpus):
        return 0
    mr = max(int(min_replicas), 0)
    need = demand * (1.0 - 1e-9) - 1e-9
    lp = max(float(np.min(gpus / rps)) * max(demand, 0.0), mr * int(gpus.min()))
    # a plan with one configuration alone: an upper limit on the search
    single = int(min(n * max(math.ceil(need / r) if need > 0 else 0, mr) for n, r in zip(gpus, rps)))
    if single > MAX_EXACT_GPUS:
        return int(math.ceil(lp - 1e-6))
    best = np.full((single + 1, mr + 1), -np.inf)
    best[0, 0] = 0.0
    for g in range(1, single + 1):
        ks = gpus <= g
        if not ks.any():
            continue
        val = best[g - gpus[ks]] + rps[ks, None]  # one more replica of each configuration
        row = np.full(mr + 1, -np.inf)
        if mr:
            row[1:] = val[:, :-1].max(axis=0)
        row[mr] = max(row[mr], val[:, mr].max())
        best[g] = row
        if best[g, mr] >= need:
            return g
    return single


def service_gpu_floor(d) -> pd.DataFrame:
    """Per (service, period): the fewest GPUs its demand and floor need with whole replicas (column ``lb``).

    A single-size service: :func:`min_gpus_single`. A service with request
    buckets: its LP value Σ_b D_b·min_k n_k/r_{k,b}, rounded up (GPUs come
    whole), and never below min_replicas × the smallest replica.
    """
    cached = d.cache.get("gpu_floor")
    if cached is not None:
        return cached
    # plain loops over dictionaries: the tables hold tens to hundreds of rows, where each pandas merge or
    # groupby cost about a millisecond (this function was a tenth of a small model's build)
    io = d.inference_options
    gpus_of: dict[tuple, int] = {}  # (service, config, period) -> GPUs of a replica, in order of appearance
    for key, n in zip(zip(io["service"], io["config"], io["period"]), io["gpus"].tolist()):
        gpus_of.setdefault(key, n)
    nmin: dict[tuple, int] = {}  # (service, period) -> the fewest GPUs of a replica
    for (sv, _c, p), n in gpus_of.items():
        nmin[(sv, p)] = min(nmin.get((sv, p), n), n)
    floors = dict(zip(zip(d.min_replicas["service"], d.min_replicas["period"]), d.min_replicas["min_replicas"]))
    rates: dict[tuple, list] = {}  # (service, config) -> [(bucket, rps)]
    for sv, c, b, r in zip(d.rps["service"], d.rps["config"], d.rps["bucket"], d.rps["rps"].tolist()):
        rates.setdefault((sv, c), []).append((b, r))
    demand = dict(zip(zip(d.demand["service"], d.demand["bucket"], d.demand["period"]), d.demand["rps"].tolist()))
    per: dict[tuple, float] = {}  # multi-bucket: (service, period, bucket) -> the fewest GPUs per rps
    single: dict[tuple, tuple] = {}  # one size: (service, period) -> (demand, [GPUs], [rps])
    for (sv, c, p), n in gpus_of.items():
        for b, r in rates.get((sv, c), ()):
            D = demand.get((sv, b, p))
            if D is None or not r > 0:
                continue
            if sv in d.multi_bucket:
                per[(sv, p, b)] = min(per.get((sv, p, b), n / r), n / r)
            else:
                _, ns, rs = single.setdefault((sv, p), (D, [], []))
                ns.append(n)
                rs.append(r)
    lp: dict[tuple, float] = {}
    for (sv, p, b) in sorted(per):  # Σ_b D_b·min_k n_k/r_{k,b}, buckets in sorted order as pandas summed them
        lp[(sv, p)] = lp.get((sv, p), 0.0) + per[(sv, p, b)] * demand[(sv, b, p)]
    lb = {k: math.ceil(v - 1e-6) for k, v in lp.items()}
    for (sv, p), (D, n, r) in single.items():
        lb[(sv, p)] = min_gpus_single(float(D), np.array(n), np.array(r), int(floors.get((sv, p), 0)))
    keys = list(nmin)
    out = pd.DataFrame({"service": pd.array([k[0] for k in keys], dtype=io["service"].dtype),
                        "period": pd.array([k[1] for k in keys], dtype=io["period"].dtype),
                        "lb": np.array([max(lb.get(k, 0), floors.get(k, 0) * nmin[k]) for k in keys], dtype=np.int64)})
    d.cache["gpu_floor"] = out
    return out


def _groups(d) -> pd.DataFrame:
    """Service groups S and the offerings O_S they can use per period: columns group, service, period,
    offering, and ``shared`` (a GPU type's group of two or more services).

    One group per service (``s:``), and one per GPU type (``g:``) holding
    every service whose configurations all use that type. ``unit-floor``
    takes the service groups and the shared type groups (a type group of one
    service repeats its service's row); ``cluster-unit-floor`` takes every
    type group.
    """
    io = d.inference_options[["service", "offering", "period", "gpu"]].drop_duplicates()
    groups = [io[["service", "period", "offering"]].assign(group="s:" + io["service"].astype(str), shared=False)]
    one_type = io.groupby("service")["gpu"].nunique()
    t = io[io["service"].isin(set(one_type[one_type == 1].index))]
    if len(t):
        n_in = t.groupby("gpu")["service"].nunique()
        shared = t["gpu"].map(n_in).to_numpy() > 1
        groups.append(t[["service", "period", "offering"]].assign(group="g:" + t["gpu"].astype(str), shared=shared))
    return pd.concat(groups, ignore_index=True)


def _group_floor(d, g: pd.DataFrame) -> pd.DataFrame:
    """Per (group, period): L, the sum of its services' :func:`service_gpu_floor` (column ``lb``)."""
    floor = service_gpu_floor(d)
    of = dict(zip(zip(floor["service"], floor["period"]), floor["lb"].tolist()))
    sums: dict[tuple, int] = {}
    for group, sv, p in dict.fromkeys(zip(g["group"], g["service"], g["period"])):  # each once
        if (sv, p) in of:
            sums[(group, p)] = sums.get((group, p), 0) + of[(sv, p)]
    keys = sorted(sums)  # (group, period) in order, as a groupby gives them
    return pd.DataFrame({"group": pd.array([k[0] for k in keys], dtype=g["group"].dtype),
                         "period": pd.array([k[1] for k in keys], dtype=g["period"].dtype),
                         "lb": np.array([sums[k] for k in keys], dtype=floor["lb"].dtype)})


def _held_of_groups(g: pd.DataFrame, held: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The held-units terms of every (group, period) and, per (group, period), ``Gu`` (the G every offering
    bills, NaN if they differ), ``gpus_owned`` and ``units_owned`` (existing units)."""
    h = g[["group", "period", "offering"]].drop_duplicates().merge(held, on=["offering", "period"])
    acc: dict[tuple, list] = {}  # (group, period) -> [least G, most G, existing units, existing GPUs]
    for key, G, e in zip(zip(h["group"], h["period"]), h["G"].tolist(), h["existing"].tolist()):
        a = acc.get(key)
        if a is None:
            acc[key] = [G, G, e, G * e]
        else:
            a[0], a[1], a[2], a[3] = min(a[0], G), max(a[1], G), a[2] + e, a[3] + G * e
    keys = sorted(acc)  # (group, period) in order, as a groupby gives them

    def col(i: int, dtype) -> np.ndarray:
        return np.array([acc[k][i] for k in keys], dtype=dtype)

    per = pd.DataFrame({"group": pd.array([k[0] for k in keys], dtype=h["group"].dtype),
                        "period": pd.array([k[1] for k in keys], dtype=h["period"].dtype),
                        "units_owned": col(2, h["existing"].dtype),
                        "gpus_owned": col(3, (h["G"] * h["existing"]).dtype),
                        "Gu": np.array([acc[k][0] if acc[k][0] == acc[k][1] else np.nan for k in keys], float)})
    return h, per


@dataclass(frozen=True)
class GroupTables:
    """What both floor families read, computed once per model: the groups (:func:`_groups`), their floors
    L (:func:`_group_floor`, with ``shared``), their held-units terms and per-(group, period) unit data
    (:func:`_held_of_groups`)."""

    groups: pd.DataFrame
    floor: pd.DataFrame
    terms: pd.DataFrame
    per: pd.DataFrame

    @classmethod
    def of(cls, d, held: pd.DataFrame) -> "GroupTables":
        g = _groups(d)
        floor = _group_floor(d, g).merge(g[["group", "shared"]].drop_duplicates("group"), on="group")
        terms, per = _held_of_groups(g, held)
        return cls(g, floor, terms, per)


def _group_tables(d, vt: dict) -> GroupTables:
    """:class:`GroupTables` of this model, kept on ``d`` for the family that asks second (both floor families
    read the same tables; a model of other held units gets its own)."""
    held = vt["units-held"]
    cached = d.cache.get("group_tables")
    if cached is not None and cached[0] is held:
        return cached[1]
    gt = GroupTables.of(d, held)
    d.cache["group_tables"] = (held, gt)
    return gt


def add_unit_floor(m: MIP, d, vt: dict) -> None:
    """``unit-floor``: Σ_{o∈O_S} G_o·H_{o,p} ≥ L_{S,p}, rounded to whole units where every G_o is the same.

    S is one service, or every service whose configurations all use one GPU
    type; O_S the offerings S can use in period p; L_{S,p} the sum of its
    services' :func:`service_gpu_floor`.
    """
    gt = _group_tables(d, vt)
    lb = gt.floor[(gt.floor["lb"] > 0) & (gt.floor["group"].str.startswith("s:") | gt.floor["shared"])]
    if lb.empty:
        return
    h, per = gt.terms, gt.per
    keys = ["group", "period"]
    rows = lb.merge(per, on=keys)
    whole = rows["Gu"].notna().to_numpy()
    need_units = np.ceil(rows["lb"].to_numpy(float) / rows["Gu"].fillna(1.0).to_numpy(float) - 1e-9)
    # Σ var ≥ ⌈L/G⌉ − existing (units), or Σ G·var ≥ L − G·existing (GPUs)
    rows["rhs"] = np.where(whole, need_units - rows["units_owned"], rows["lb"] - rows["gpus_owned"])
    rows = rows[rows["rhs"] > 1e-9]
    h = h.merge(rows[keys + ["Gu"]], on=keys)
    if h.empty:
        return
    coef = np.where(h["Gu"].notna(), 1.0, h["G"].to_numpy(float))
    m.add("unit-floor", lin(h, coef, keys) >= rhs_table(rows, keys, rows["rhs"]))


def add_cluster_unit_floor(m: MIP, d, vt: dict) -> None:
    """``cluster-unit-floor``: the unit floor of a GPU type's services with a shared cluster running beside them.

    For a shared placement (j, c, o, p) with run binary w on an offering o
    that the group S (the services of o's GPU type) can use:
    Σ_{o'∈O_S} G·H_{o',p} ≥ L_{S,p} + n_c·w, in whole units where every
    offering of O_S bills the same G: Σ H ≥ U_0 + δ·w, U_0 = ⌈L/G⌉,
    δ = ⌈(L + n_c)/G⌉ − U_0.
    """
    w = vt["training-run"]
    w = w[w["mode"] == "shared"]
    if w.empty:
        return
    gt = _group_tables(d, vt)
    g = gt.groups[gt.groups["group"].str.startswith("g:")]
    if g.empty:
        return
    h, keys = gt.terms, ["group", "period"]
    per = gt.per.merge(gt.floor[["group", "period", "lb"]], on=keys)
    wk = ["job", "config", "offering", "period", "mode"]
    # the placements on an offering of the group
    on = g[["group", "period", "offering"]].drop_duplicates().merge(w[wk + ["gpus", "var"]],
                                                                   on=["offering", "period"])
    on = on.merge(per, on=keys)
    if on.empty:
        return
    whole = on["Gu"].notna().to_numpy()
    Gu = on["Gu"].fillna(1.0).to_numpy(float)
    L, n = on["lb"].to_numpy(float), on["gpus"].to_numpy(float)
    U0 = np.ceil(L / Gu - 1e-9)
    delta = np.where(whole, np.ceil((L + n) / Gu - 1e-9) - U0, n)
    on["rhs"] = np.where(whole, U0 - on["units_owned"], L - on["gpus_owned"])
    on["delta"] = delta
    rk = ["group", "job", "config", "offering", "period", "mode"]
    terms = on[rk + ["Gu"]].merge(h.rename(columns={"offering": "held_offering", "var": "h_var"}), on=keys)
    coef = np.where(terms["Gu"].notna(), 1.0, terms["G"].to_numpy(float))
    lhs = lin(terms, coef, rk, var="h_var") - lin(on, on["delta"], rk)
    m.add("cluster-unit-floor", lhs >= rhs_table(on, rk, on["rhs"]))


def add_replica_unit(m: MIP, d, vt: dict) -> None:
    """``replica-unit``: x_{s,k,o,p} ≤ X̄·H_{o,p} where X̄·n_k < G_o, on offerings with no unit already owned."""
    x = vt["inference-replicas"]
    b = m.variables["inference-replicas"]
    ub = b.upper[x["var"].to_numpy(np.int64) - b.start]
    held = vt["units-held"]
    xr = x.assign(ub=ub).merge(held[["offering", "period", "G", "var", "existing"]].rename(
        columns={"var": "h_var"}), on=["offering", "period"], suffixes=("", "_u"))
    xr = xr[(xr["existing"] == 0) & np.isfinite(xr["ub"]) & (xr["ub"] * xr["gpus"] < xr["G_u"] - 1e-9)]
    if xr.empty:
        return
    keys = ["service", "config", "offering", "period"]
    m.add("replica-unit", lin(xr, 1.0, keys) - lin(xr, xr["ub"], keys, var="h_var") <= 0.0)


def mir(a: np.ndarray, b: float, delta: float) -> tuple[np.ndarray, float, float] | None:
    """The mixed-integer rounding of Σ a_i·x_i + s ≥ b (x_i integer ≥ 0, s ≥ 0 continuous) at a divisor δ > 0.

    With α_i = a_i/δ, β = b/δ and f = β − ⌊β⌋ > 0:
    Σ (f·⌊α_i⌋ + min(f, α_i − ⌊α_i⌋))·x_i + s/δ ≥ f·⌈β⌉, valid for every
    point of the row (the MIR of the ≤ form, Nemhauser and Wolsey 1988,
    applied to its negation). Returns the x coefficients, the factor 1/δ of
    s and the right-hand side; None when f = 0 (nothing to round).
    """
    beta = b / delta
    f = beta - math.floor(beta)
    if f < 1e-6 or f > 1 - 1e-6:
        return None
    alpha = np.asarray(a, float) / delta
    whole = np.floor(alpha + 1e-9)
    return f * whole + np.minimum(f, np.clip(alpha - whole, 0.0, None)), 1.0 / delta, f * math.ceil(beta)


def training_cover(m: MIP, vt: dict) -> Rows:
    """``training-cover`` rows (module docstring): per job and divisor δ, the MIR of its progress.

    The base row: the job's progress, Σ ρ·t = Σ_c z_{j,c} = 1 over all its
    placements, with t ≤ u·w where a placement has a run binary w (u the
    upper bound of its hours), so ρ·t ≤ a·w with a = ρ·u:
    Σ_{binary} a_i·w_i + Σ_{others} ρ·t ≥ 1. The divisors are the distinct
    a_i: divided by the share one period of a placement does, its binary
    counts as one whole period.

    Why apart from the model: these rows cut nothing off the LP optimum (on
    q3 and bench ×1 the LP bound does not move), are dense (a term per
    placement of the job: bench ×1's LP took 41 → 66 s with them) and sent
    the model without stability limits of q3-profiled down a slower path
    (3.1 → 6.8 s); in the split's leaves they halve q3's search
    (docs/performance.md, "Training lanes").
    """
    t, w = vt["training-hours"], vt["training-run"]
    empty = Rows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0), [])
    if t.empty or w.empty:
        return empty
    b = m.variables["training-hours"]
    keys = ["job", "config", "offering", "period", "mode"]
    tw = t[keys + ["var", "rate"]].assign(u=b.upper[t["var"].to_numpy(np.int64) - b.start]).merge(
        w[keys + ["var"]].rename(columns={"var": "w_var"}), on=keys, how="left")
    rows, cols, vals, rhs, names = [], [], [], [], []
    for job, g in tw.groupby("job", sort=False):
        binary = g["w_var"].notna().to_numpy()
        a = (g["rate"] * g["u"]).to_numpy(float)[binary]
        wv = g["w_var"].to_numpy()[binary].astype(np.int64)
        free_var, free_rate = g["var"].to_numpy(np.int64)[~binary], g["rate"].to_numpy(float)[~binary]
        for delta in np.unique(np.round(a, 9)):
            cut = mir(a, 1.0, float(delta))
            if cut is None:
                continue
            coef, per, r = cut
            i = len(names)
            rows += [np.full(len(wv) + len(free_var), i)]
            cols += [wv, free_var]
            vals += [coef, free_rate * per]
            rhs.append(r)
            names.append(f"training-cover#{job}/{delta:.9g}")
    if not names:
        return empty
    keep = np.concatenate(vals) != 0
    return Rows(np.concatenate(rows)[keep], np.concatenate(cols)[keep], np.concatenate(vals)[keep], np.asarray(rhs),
                np.full(len(rhs), np.inf), names)


def config_floor(m: MIP, d, vt: dict) -> Rows:
    """``config-floor`` rows: Σ_o x_{s,k,o,p} ≥ ⌈D_{s,b,p} / r_{s,b,k}⌉·c_{s,b,k} (one configuration a class).

    Why it holds: with the limit N_s = 1, c_{s,b,k} = 1 means k is the one
    configuration of bucket b (every other is off, so it routes nothing of
    b and holds no replica for it), so k carries all of b's demand D_{s,b,p}
    in every period: replicas × r ≥ D for a single-size service, routed ÷ r
    ≤ replicas for a bucket; replicas are whole, hence the ceiling. With
    c = 0 the row says nothing. A configuration with no replica column in a
    period (no offering there) gets the row with the ceiling alone: it
    cannot carry the class. Valid only with the limit: the model without
    stability limits, every c = 1, must not have them.

    The LP relaxation otherwise spreads a class over several configurations,
    at fractions of a replica each; with the rows a configuration it leans
    on pays for its whole replicas in proportion (FLIP: 700 → 1,100, the
    stable optimum; q3 with the default catalog: 45,828 → 54,507).

    Why apart from the model: in the exact split's leaves they made HiGHS's
    search of q3 3.6 times slower (6.6 → 24 s); they pay where the stable
    model's own bound is searched for (docs/performance.md, "Configuration
    floors").
    """
    empty = Rows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0), [])
    cu = vt.get("config-used")
    if cu is None or cu.empty:
        return empty
    one = d.stability.loc[d.stability["max_configurations"] == 1, "service"]
    cu = cu[cu["service"].isin(one)]
    need = cu.merge(d.rps[["service", "bucket", "config", "rps"]], on=["service", "bucket", "config"]).merge(
        d.demand.rename(columns={"rps": "demand"}), on=["service", "bucket"])
    # a hair below the quotient before the ceiling: a demand that is a whole number of replicas up to rounding
    # must not ask for one more
    need["floor"] = np.ceil(need["demand"] / need["rps"] - 1e-6)
    need = need[need["floor"] > 0].reset_index(drop=True)
    if need.empty:
        return empty
    keys = ["service", "bucket", "config", "period"]
    need["row"] = np.arange(len(need))
    x = vt["inference-replicas"][["service", "config", "period", "var"]].merge(
        need[keys + ["row"]], on=["service", "config", "period"])
    rows = np.concatenate([x["row"].to_numpy(np.int64), need["row"].to_numpy(np.int64)])
    cols = np.concatenate([x["var"].to_numpy(np.int64), need["var"].to_numpy(np.int64)])
    vals = np.concatenate([np.ones(len(x)), -need["floor"].to_numpy(float)])
    names = [f"config-floor#{s}/{b}/{k}/{p}" for s, b, k, p in need[keys].itertuples(index=False)]
    return Rows(rows, cols, vals, np.zeros(len(need)), np.full(len(need), np.inf), names)


FAMILIES = {"unit-floor": add_unit_floor, "replica-unit": add_replica_unit,
            "cluster-unit-floor": add_cluster_unit_floor}


def add_cuts(m: MIP, d, vt: dict, cuts=CUTS) -> None:
    """Add the named families (module docstring) to the built, bounded model."""
    for name in CUTS:
        if name in cuts:
            FAMILIES[name](m, d, vt)
