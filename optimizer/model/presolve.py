"""Reductions that cannot change the optimum, applied before and just after ``build_model``.

docs/performance.md states each one with the argument that it keeps the
optimum. In short:

1. **Dominated inference configurations** (:func:`drop_dominated`): two
   configurations of one service on the same GPU type and GPUs per replica
   use exactly the same offerings, capacity and energy; if one serves at
   least as many rps in every request bucket the other serves, the other is
   never needed. Ties keep one.
2. **Identical offerings merged** (:func:`merge_offerings`): offerings with
   the same GPU type, GPUs per unit, region, pricing kind and every price and
   cost field are one pool. A group merges when

   - one member has no ``max_units`` (and, if owned, no member has existing
     units): that member absorbs the group, since it can hold anything the
     others hold at the same price; or
   - no training job has a configuration on that GPU type: inference packs
     exactly across the members (GPUs per replica and per unit are powers of
     two), so one offering with the summed ``max_units`` (and summed
     existing units) is the same pool.

   Groups where training clusters could use the members are left alone (a
   cluster never spans offerings, so a merged quota would let it run where it
   cannot). The plan is mapped back (:func:`expand`): the solution is split
   over the real offerings, checked against the unmerged model, and the plan
   is read from that model, so every id it reports is a real offering.
3. **Tight upper bounds on integer variables** (:func:`tighten_bounds`),
   from demand and quotas: replicas ≤ max(⌈Σ_b demand_b ÷ rps_b⌉, min_replicas),
   routed rps ≤ the bucket's demand, units running ≤ ⌈most inference GPUs ÷ G⌉,
   reserved units per term block and new owned units ≤ ⌈(most inference GPUs
   + Σ jobs' largest cluster) ÷ G⌉ over the block's periods (minus existing).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import Problem
from .mip import MIP

#: Offering fields that must agree for two offerings to be one pool (besides max_units, existing_units).
SAME = ["gpu", "gpus_per_unit", "region", "pricing", "price_per_hour", "interruptions_per_hour", "upfront",
        "term_months", "capex", "lifetime_years", "residual_fraction", "power_kw", "idle_power_fraction", "pue",
        "electricity_per_kwh", "fixed_per_month"]


@dataclass
class Presolved:
    """The reduced problem and how to map its solution back."""

    problem: Problem
    candidates: Candidates
    #: kept offering id -> the original offerings it stands for (kept id first)
    merged: dict[str, list[str]] = field(default_factory=dict)
    #: kept id -> "absorb" (one uncapped member holds everything) or "pack" (inference split back)
    merge_kind: dict[str, str] = field(default_factory=dict)
    #: service, config, dominated_by
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["service", "config", "dominated_by"]))

    def summary(self) -> dict:
        return {"configs_dropped": int(len(self.dropped)),
                "offerings_merged": int(sum(len(v) - 1 for v in self.merged.values())),
                "merge_groups": {k: list(v) for k, v in self.merged.items()}}


def presolve(problem: Problem, cands: Candidates) -> Presolved:
    """Drop dominated configurations and merge identical offerings (see the module doc)."""
    inference, dropped = drop_dominated(cands.inference)
    cands2 = dataclasses.replace(cands, inference=inference)
    problem2, merged, kind = merge_offerings(problem, cands2)
    return Presolved(problem2, cands2, merged, kind, dropped)


# ---------------------------------------------------------------------------
# 1. dominated configurations


def drop_dominated(inf: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Remove configurations dominated by another on the same GPU type and GPUs per replica."""
    if inf.empty:
        return inf, pd.DataFrame(columns=["service", "config", "dominated_by"])
    drops = []
    for (s, _g, _n), grp in inf.groupby(["service", "gpu", "gpus"], sort=False):
        if grp["config"].nunique() < 2:
            continue
        table = grp.pivot_table(index="config", columns="bucket", values="rps", aggfunc="max")
        # strongest first, so a kept configuration is checked before the ones it may dominate
        order = table.fillna(0).sum(axis=1).sort_values(ascending=False, kind="stable")
        kept: list[str] = []
        for c in order.index:
            row = table.loc[c]
            served = row.notna()
            by = None
            for k in kept:
                other = table.loc[k]
                if other[served].notna().all() and (other[served] >= row[served] - 1e-12).all():
                    by = k
                    break
            if by is None:
                kept.append(c)
            else:
                drops.append((s, c, by))
    dropped = pd.DataFrame(drops, columns=["service", "config", "dominated_by"])
    if not len(dropped):
        return inf, dropped
    key = pd.MultiIndex.from_frame(inf[["service", "config"]])
    gone = key.isin(pd.MultiIndex.from_frame(dropped[["service", "config"]]))
    return inf[~gone].reset_index(drop=True), dropped


# ---------------------------------------------------------------------------
# 2. identical offerings


def merge_offerings(problem: Problem, cands: Candidates) -> tuple[Problem, dict, dict]:
    """One offering per group of identical ones, where that keeps the optimum (module doc)."""
    O = problem.offerings
    if len(O) < 2:
        return problem, {}, {}
    train_gpus = set(cands.training["gpu"]) if len(cands.training) else set()
    key = O[SAME].astype(object).where(O[SAME].notna(), "∅")
    groups = key.groupby(SAME, sort=False, dropna=False).groups
    merged, kind = {}, {}
    O2 = O.copy()
    drop = []
    for _k, idx in groups.items():
        ids = list(idx)
        if len(ids) < 2:
            continue
        rows = O.loc[ids]
        pricing = rows["pricing"].iloc[0]
        uncapped = [i for i in ids if pd.isna(O.at[i, "max_units"])]
        existing = rows["existing_units"].fillna(0) if "existing_units" in rows else pd.Series(0, index=ids)
        if uncapped and (pricing != "owned" or (existing == 0).all()):
            keep = uncapped[0]
            kind[keep] = "absorb"
        elif rows["gpu"].iloc[0] not in train_gpus and not uncapped:
            keep = ids[0]
            kind[keep] = "pack"
            O2.at[keep, "max_units"] = float(rows["max_units"].sum())
            if pricing == "owned":
                O2.at[keep, "existing_units"] = float(existing.sum())
        else:
            continue
        merged[keep] = [keep] + [i for i in ids if i != keep]
        drop.extend(i for i in ids if i != keep)
    if not merged:
        return problem, {}, {}
    O2 = O2.drop(index=drop)
    return dataclasses.replace(problem, offerings=O2), merged, kind


def expand(pre: Presolved, vt: dict, mip_o: MIP, vt_o: dict, T_o, x: np.ndarray) -> np.ndarray:
    """Map a solution of the merged model onto the unmerged one (``vt``: the merged model's tables).

    Values are copied by coordinates; for a ``pack`` group the kept offering's
    units are split over the members in order (up to each one's quota) and, in
    every period, its replicas are packed largest first into the members'
    GPUs, routing following the replicas. An ``absorb`` group needs nothing:
    the kept offering is a real one and the others stay empty.
    """
    out = np.zeros(mip_o.n_vars)
    for name, tab in vt_o.items():
        if name not in vt or "var" not in tab.columns or name == "units-held":
            continue
        coords = [c for c in mip_o.variables[_block(name)].coords.columns] if _block(name) in mip_o.variables else None
        if not coords:
            continue
        src = vt[name][coords + ["var"]].rename(columns={"var": "src"})
        m = tab[coords + ["var"]].merge(src, on=coords, how="inner")
        out[m["var"].to_numpy(np.int64)] = x[m["src"].to_numpy(np.int64)]
    for keep, members in pre.merged.items():
        if pre.merge_kind.get(keep) == "pack":
            _split_pack(keep, members, pre.problem, T_o, vt, vt_o, x, out)
    return out


_BLOCKS = {
    "inference-replicas": "inference-replicas", "inference-routing": "inference-routing",
    "training-select": "training-select", "training-run": "training-run", "training-hours": "training-hours",
    "units-running": "units-running", "units-reserved": "units-reserved", "units-owned": "units-owned-new",
}


def _block(table_name: str) -> str:
    return _BLOCKS.get(table_name, table_name)


def _in_order(total: float, caps: dict) -> dict:
    """``total`` shared over the members of ``caps`` in their order, each taking up to its cap."""
    takes = {}
    for m, cap in caps.items():
        takes[m] = max(0.0, min(total, cap))
        total -= takes[m]
    return takes


def _split_pack(keep: str, members: list[str], problem_m: Problem, T_o, vt, vt_o, x, out) -> None:
    O = T_o.offerings.set_index("offering")
    G = float(O.at[keep, "G"])
    pricing = O.at[keep, "pricing"]
    caps = {m: (float(O.at[m, "max_units"]) if pd.notna(O.at[m, "max_units"]) else np.inf) for m in members}
    exist = {m: float(O.at[m, "existing"]) if pricing == "owned" else 0.0 for m in members}
    # zero what the copy put on the kept id; it is rebuilt below
    for name in ("inference-replicas", "inference-routing", "units-running", "units-reserved", "units-owned"):
        tab = vt_o.get(name)
        if tab is not None and len(tab):
            out[tab.loc[tab["offering"].isin(members), "var"].to_numpy(np.int64)] = 0.0

    # units per member: committed (reserved per block, owned) split in order up to each quota
    units_of = {}  # (member, period) -> units available to inference
    if pricing == "reserved":
        res_m = vt["units-reserved"]
        res_o = vt_o["units-reserved"].set_index(["offering", "block"])["var"]
        held = vt_o["units-held"]
        for blk, u in zip(res_m.loc[res_m["offering"] == keep, "block"], res_m.loc[res_m["offering"] == keep, "var"]):
            for m, take in _in_order(float(x[u]), caps).items():
                out[res_o[(m, blk)]] = take
            per = held[(held["offering"] == keep) & (held["var"] == res_o[(keep, blk)])]["period"]
            for p in per:
                for m in members:
                    units_of[(m, p)] = out[res_o[(m, blk)]]
    elif pricing == "owned":
        own_m = vt["units-owned"].set_index("offering")["var"]
        own_o = vt_o["units-owned"].set_index("offering")["var"]
        for m, take in _in_order(float(x[own_m[keep]]), {m: max(0.0, caps[m] - exist[m]) for m in members}).items():
            out[own_o[m]] = take
        for p in T_o.periods["period"]:
            for m in members:
                units_of[(m, p)] = exist[m] + out[own_o[m]]

    rep_m = vt["inference-replicas"]
    rep_m = rep_m[rep_m["offering"] == keep]
    rep_o = vt_o["inference-replicas"].set_index(["service", "config", "offering", "period"])["var"]
    route_m = vt.get("inference-routing")
    route_o = vt_o.get("inference-routing")
    route_o = route_o.set_index(["service", "bucket", "config", "offering", "period"])["var"] if (
        route_o is not None and len(route_o)) else None
    run_m = vt["units-running"]
    run_m = run_m[run_m["offering"] == keep].set_index("period")["var"] if pricing in ("on_demand", "spot") else None
    run_o = vt_o["units-running"].set_index(["offering", "period"])["var"] if pricing in ("on_demand", "spot") else None
    for p, g in rep_m.groupby("period", sort=False):
        if pricing in ("on_demand", "spot"):
            room = _in_order(float(x[run_m[p]]), caps)
        else:
            room = {m: units_of.get((m, p), 0.0) for m in members}
        free = {m: room[m] * G for m in members}
        used = {m: 0.0 for m in members}
        items = sorted(((int(r.gpus), r.service, r.config, int(round(x[r.var]))) for r in g.itertuples()
                        if x[r.var] > 0.5), key=lambda t: -t[0])
        for n, s, c, count in items:
            shares = {}
            for m in members:
                if count <= 0:
                    break
                k = min(count, int(math.floor((free[m] - used[m]) / n + 1e-9)))
                if k > 0:
                    out[rep_o[(s, c, m, p)]] += k
                    used[m] += k * n
                    shares[m] = k
                    count -= k
            if count > 0:  # cannot happen when the merged solution is feasible; leave it to the check
                m = members[-1]
                out[rep_o[(s, c, m, p)]] += count
                shares[m] = shares.get(m, 0) + count
            if route_m is not None and len(route_m) and route_o is not None:
                rr = route_m[(route_m["service"] == s) & (route_m["config"] == c) & (route_m["offering"] == keep)
                             & (route_m["period"] == p)]
                total = sum(shares.values())
                for r in rr.itertuples():
                    for m, k in shares.items():
                        out[route_o[(s, r.bucket, c, m, p)]] += x[r.var] * k / total
        if pricing in ("on_demand", "spot"):
            # units running: what the packed replicas need, then any extra units the plan paid for
            ys = {m: float(math.ceil(used[m] / G - 1e-9)) for m in members}
            extra = _in_order(float(x[run_m[p]]) - sum(ys.values()), {m: caps[m] - ys[m] for m in members})
            for m in members:
                out[run_o[(m, p)]] = ys[m] + extra[m]
    if pricing in ("on_demand", "spot"):
        # periods with units but no replicas (a plan may keep idle units)
        for p, v in run_m.items():
            if p in set(rep_m["period"]):
                continue
            for m, take in _in_order(float(x[v]), caps).items():
                out[run_o[(m, p)]] = take


# ---------------------------------------------------------------------------
# 3. bounds


def tighten_bounds(mip: MIP, T, vt: dict) -> dict[str, int]:
    """Lower the upper bounds of integer (and routing) variables; returns how many changed per block."""
    changed: dict[str, int] = {}

    def apply(block: str, var: np.ndarray, ub: np.ndarray) -> None:
        if block not in mip.variables or not len(var):
            return
        b = mip.variables[block]
        pos = var.astype(np.int64) - b.start
        new = np.minimum(b.upper[pos], ub)
        changed[block] = int((new < b.upper[pos] - 1e-9).sum())
        b.upper[pos] = new

    rep = vt["inference-replicas"]
    dem = T.demand.rename(columns={"rps": "d"})
    minr = T.min_replicas.rename(columns={"min_replicas": "floor"})
    # replica-time a configuration needs to carry all of its service's demand in the period
    need = rep[["service", "config", "offering", "period", "var", "gpus"]].merge(
        T.rps, on=["service", "config"]).merge(dem, on=["service", "bucket", "period"], how="left")
    need["t"] = need["d"].fillna(0.0) / need["rps"]
    t = need.groupby("var")["t"].sum()
    r = rep[["service", "period", "var", "gpus", "offering"]].copy()
    r["t"] = r["var"].map(t).fillna(0.0)
    r = r.merge(minr, on=["service", "period"], how="left")
    r["ub"] = np.maximum(np.ceil(r["t"] - 1e-9), r["floor"].fillna(0.0))
    apply("inference-replicas", r["var"].to_numpy(), r["ub"].to_numpy(float))

    route = vt.get("inference-routing")
    if route is not None and len(route):
        rd = route[["service", "bucket", "period", "var"]].merge(dem, on=["service", "bucket", "period"], how="left")
        apply("inference-routing", rd["var"].to_numpy(), rd["d"].fillna(0.0).to_numpy(float))

    # most inference GPUs an offering can need in a period, and the clusters that can run there
    inf_gpus = (r["ub"] * r["gpus"]).groupby([r["offering"], r["period"]]).sum()
    trun = vt.get("training-run")
    if trun is not None and len(trun):
        per_job = trun.groupby(["offering", "period", "job"])["gpus"].max()
        tr_gpus = per_job.groupby(level=["offering", "period"]).sum()
    else:
        tr_gpus = pd.Series(dtype=float)
    O = T.offerings.set_index("offering")

    run = vt.get("units-running")
    if run is not None and len(run):
        idx = pd.MultiIndex.from_frame(run[["offering", "period"]])
        g = inf_gpus.reindex(idx).fillna(0.0).to_numpy()
        apply("units-running", run["var"].to_numpy(), np.ceil(g / run["G"].to_numpy(float) - 1e-9))

    held = vt.get("units-held")
    if held is not None and len(held):
        idx = pd.MultiIndex.from_frame(held[["offering", "period"]])
        total = inf_gpus.reindex(idx).fillna(0.0).to_numpy() + tr_gpus.reindex(idx).fillna(0.0).to_numpy()
        h = held.assign(units=np.ceil(total / held["G"].to_numpy(float) - 1e-9) - held["existing"].to_numpy(float))
        ub = h.groupby("var")["units"].max().clip(lower=0.0)
        res_vars = set(vt["units-reserved"]["var"]) if "units-reserved" in vt else set()
        for block, mask in (("units-reserved", ub.index.isin(list(res_vars))),
                            ("units-owned-new", ~ub.index.isin(list(res_vars)))):
            apply(block, ub.index.to_numpy()[mask], ub.to_numpy()[mask])
    _ = O
    return changed


# ---------------------------------------------------------------------------
# the pipeline's entry points


@dataclass
class Model:
    """A built model (after presolve) and what is needed to read its plan against the original problem."""

    problem: Problem
    candidates: Candidates
    mip: MIP
    tables: object
    vars: dict
    pre: Presolved | None
    original: Problem

    #: shares of a time limit the warm start's LP relaxation and its per-period polish may use; the LP
    #: gets half because it is the rounding's guide and, when the solver is skipped, the only bound
    #: (×2: 17.9 s of 60; ×4: 100 s)
    LP_SHARE = 0.5
    POLISH_SHARE = 0.3
    #: at most this share of the time limit goes to the commitment MIP (see
    #: :func:`optimizer.solve.warmstart.commitment_mip`; skipped when that is under 10 LP-times)
    COMMIT_SHARE = 0.25
    #: the solver is not started when what it would have left is under this many times the LP's seconds:
    #: HiGHS checks its limit only between root rounds, so a short limit on a big model is overrun (×1
    #: benchmark: 27 s given, 44 s taken); the polish gets that time instead. 10 since the polish runs on
    #: every core: at ×1, 34 s left (8.5 LP-times) went to HiGHS, which raised the bound 0.4 % but left a
    #: plan 0.9 % dearer than polishing for that time (docs/performance.md)
    ROOT_FACTOR = 10.0
    #: when the solver runs, the polish still gets at least this many times the LP's seconds (if the time
    #: limit has them), so a longer limit never polishes less than a shorter one did: without it ×1 at
    #: 120 s polished 36 s to 12.739 M where 60 s (solver skipped, ~52 s of polish) reached 12.666 M
    #: (docs/performance.md)
    POLISH_FLOOR = 15.0

    #: HiGHS checks its limit between root rounds, so it overruns by about a round: the solver's limit
    #: is cut by this many LP-times (at least 1 s). Without it ×0.5 at 60 s took 63.3 s of wall, HiGHS
    #: taking 34.7 s of its 31.6 (docs/performance.md)
    OVERRUN_LP_TIMES = 2.0

    #: seconds the last :meth:`start` took (added to the result's build time by :meth:`restore`)
    start_seconds: float = 0.0
    #: seconds kept back from the solver's limit for its overrun (set by :meth:`start`)
    solver_margin: float = 0.0
    #: the best relaxation bound the warm start proved: the LP optimum, or the commitment MIP's bound
    #: when that ran (a relaxation too, and higher); see :meth:`restore`
    lp_bound: float | None = None
    #: set by :meth:`start` when the time limit leaves the solver too little to be worth starting
    skip_solver: bool = False

    def start(self, time_limit: float | None = None, threads: int | None = None) -> np.ndarray | None:
        """The LP-rounded warm start (or the greedy one if that fails), polished period by period.

        None when neither heuristic finds a feasible plan. ``threads``: how
        many periods the polish solves at once (default: one per CPU).
        Without a time limit the polish gets 2 s per period. With ``time_limit``,
        the LP gets :attr:`LP_SHARE` of it and the polish :attr:`POLISH_SHARE`,
        but not less than :attr:`POLISH_FLOOR` times the LP's seconds;
        when the solver would then have less than :attr:`ROOT_FACTOR` times
        the LP's seconds, :attr:`skip_solver` is set and the polish gets all
        the time that is left.
        """
        import time as _time

        from ..solve.warmstart import best_start, polish

        t = _time.perf_counter()
        self.skip_solver = False
        self.solver_margin = 0.0
        try:
            info: dict = {}
            a = self.mip.arrays()
            x = best_start(self.mip, self.tables, self.vars, None if time_limit is None else
                           self.LP_SHARE * time_limit, info, a,
                           None if time_limit is None else self.COMMIT_SHARE * time_limit)
            bounds = [info[k] for k in ("lp_bound", "commit_bound") if info.get(k) is not None]
            self.lp_bound = max(bounds) if bounds else None
            if x is None:
                return None
            if time_limit is None:
                polish_s = 2.0 * len(self.tables.periods)
            else:
                self.solver_margin = max(1.0, self.OVERRUN_LP_TIMES * info.get("lp_seconds", 0.0))
                polish_s, self.skip_solver = self.polish_seconds(
                    time_limit, time_limit - (_time.perf_counter() - t), info.get("lp_seconds", 0.0))
            return polish(self.mip, x, polish_s, a, guide=info.get("guide"), workers=threads) if polish_s > 0 else x
        finally:
            self.start_seconds = _time.perf_counter() - t

    @classmethod
    def polish_seconds(cls, time_limit: float, left: float, lp_seconds: float) -> tuple[float, bool]:
        """The polish's seconds and whether the solver is skipped, with ``left`` of ``time_limit`` unspent.

        The polish gets :attr:`POLISH_SHARE` of the limit, or :attr:`POLISH_FLOOR` LP-times if that is
        more (never more than ``left``). If what the solver would then have is under :attr:`ROOT_FACTOR`
        LP-times, the solver is skipped and the polish gets all of ``left`` but a margin for the last
        period's overrun of its share (~0.1 s).
        """
        polish_s = min(left, max(cls.POLISH_SHARE * time_limit, cls.POLISH_FLOOR * lp_seconds))
        skip = left - polish_s < cls.ROOT_FACTOR * lp_seconds
        return (left - 0.5 if skip else polish_s), skip

    def solve_from(self, x0: np.ndarray | None, solver: str, time_limit: float | None = None,
                   gap: float = 1e-6, threads: int | None = None):
        """:func:`optimizer.solve.backends.solve` from the start ``x0`` within what :meth:`start` left of ``time_limit``.

        When :meth:`start` set :attr:`skip_solver`, the start is the plan
        (``feasible``; :meth:`restore` adds the relaxation's bound) and no solver runs.
        """
        from ..solve.backends import solve, start_result

        if self.skip_solver and x0 is not None and time_limit is not None:
            return start_result(self.mip, x0, solver, gap, "time limit: the polished warm start is the plan "
                                "(too little time left to start the solver; the bound is the relaxation's: "
                                "the LP, or the commitment MIP)")
        return solve(self.mip, solver=solver, time_limit=self.left(time_limit), gap=gap, threads=threads, start=x0)

    def _use_lp_bound(self, result) -> None:
        _lp_bound_into(result, self.lp_bound)

    def left(self, time_limit: float | None) -> float | None:
        """What is left of ``time_limit`` for the solver after the warm start and its overrun margin (≥ 1 s)."""
        return None if time_limit is None else max(1.0, time_limit - self.start_seconds - self.solver_margin)

    def solve(self, solver: str | None = None, time_limit: float | None = None, gap: float = 1e-6,
              threads: int | None = None, warm_start: bool = True):
        """Warm start, then :func:`optimizer.solve.backends.solve` within what is left of ``time_limit``."""
        from ..solve.backends import DEFAULT_SOLVER, solve

        if not warm_start:
            return solve(self.mip, solver=solver or DEFAULT_SOLVER, time_limit=time_limit, gap=gap, threads=threads)
        return self.solve_from(self.start(time_limit), solver or DEFAULT_SOLVER, time_limit, gap, threads)

    def restore(self, result) -> tuple[Problem, Candidates, MIP, object]:
        """Problem, candidates, model and tables to read ``result``'s plan from (real offering ids).

        With merged offerings and a plan, the unmerged model is built, the
        solution mapped onto it (:func:`expand`) and checked against every row;
        ``result.x`` and ``result.objective`` then refer to that model.
        """
        result.build_seconds += self.start_seconds
        self.start_seconds = 0.0
        self._use_lp_bound(result)
        if self.pre is None or not self.pre.merged or not result.status.has_plan:
            return self.problem, self.candidates, self.mip, self.tables
        from ..solve.result import Status
        from ..solve.warmstart import check_start
        from .formulation import build_model

        mip_o, tables_o, vt_o = build_model(self.original, self.candidates)
        x_o = expand(self.pre, self.vars, mip_o, vt_o, tables_o, result.x)
        a = mip_o.arrays()
        bad = check_start(a, x_o)
        if bad:
            result.status = Status.ERROR
            result.message = "internal error: mapping merged offerings back failed: " + "; ".join(bad[:3])
            result.x = None
            return self.problem, self.candidates, self.mip, self.tables
        result.x = x_o
        result.objective = float(a.c @ x_o + a.c0)
        return self.original, self.candidates, mip_o, tables_o


def _lp_bound_into(result, lp_bound: float | None) -> None:
    """Raise a weaker solver bound (e.g. a time limit before the root LP finished) to the LP optimum."""
    if lp_bound is None or not result.status.has_plan or result.objective is None:
        return
    if result.bound is None or result.bound < lp_bound:
        from ..solve.result import relative_gap

        result.bound = min(lp_bound, result.objective)
        result.gap = relative_gap(result.objective, result.bound)


#: what follows the solve (map-back, plan tables, audit) takes 1.0–1.45 times as long as the build before
#: it (×0.25–×4: 0.51 s after 0.32 s … 5.75 s after 5.78 s; docs/performance.md); 1.5 keeps the wall inside
AFTER_SOLVE_PER_BUILD = 1.5


def solve_budget(time_limit: float | None, spent: float) -> float | None:
    """Seconds of ``time_limit`` (a wall-clock budget for the whole run) left to the start and the solver.

    ``spent`` seconds have gone on candidates, presolve and the model build;
    :data:`AFTER_SOLVE_PER_BUILD` times as many are kept for what follows
    the solve. The start and the solver always get at least a quarter of
    the limit, however slow the build. None: no limit.
    """
    if time_limit is None:
        return None
    return max(time_limit - (1.0 + AFTER_SOLVE_PER_BUILD) * spent, 0.25 * time_limit)


def build(problem: Problem, cands: Candidates, enabled: bool = True) -> Model:
    """Presolve (dominated configurations, identical offerings), ``build_model``, then tighten bounds."""
    from .formulation import build_model

    pre = presolve(problem, cands) if enabled else None
    pr, cd = (pre.problem, pre.candidates) if pre else (problem, cands)
    mip, tables, vt = build_model(pr, cd)
    if pre is not None:
        tighten_bounds(mip, tables, vt)
    return Model(pr, cd, mip, tables, vt, pre, problem)
