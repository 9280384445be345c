"""Reductions that cannot change the optimum, applied before and just after ``build_model``.

docs/performance.md states each one with the argument that it keeps the
optimum. In short:

1. **Dominated inference configurations** (:func:`drop_dominated`): two
   configurations of one service on the same GPU type and GPUs per replica
   use exactly the same offerings, capacity and energy; if one serves at
   least as many rps in every request bucket the other serves, the other is
   never needed. Ties keep one. Under a limit on configurations per service
   the argument holds too: replacing the dominated one by its dominator never
   adds a configuration, and the replicas (so the replicas started) stay the same.
2. **Duplicate offerings** (:func:`drop_duplicate_offerings`): an offering
   identical to another in every field that matters to the model (GPU type,
   unit, region, provider, pricing and every price, cost and topology
   field) where the other has no ``max_units`` holds nothing the other
   cannot hold at the same price; it is dropped. (Owned offerings with
   existing units are never dropped: those units are already paid for.)
3. **Tight upper bounds on integer variables** (:func:`tighten_bounds`),
   from demand: replicas ≤ max(⌈Σ_b demand_b ÷ rps_b⌉, min_replicas) (for a
   service with a replica start cost, the most of that over the periods:
   replicas kept through a dip can save the starts after it, and capping
   each offering's replicas at that constant never adds a start),
   routed rps ≤ the bucket's demand, units running ≤ ⌈(most inference GPUs
   + the largest shared cluster) ÷ G⌉, reserved units per term block and
   new owned units ≤ ⌈(most inference GPUs + Σ jobs' largest cluster) ÷ G⌉
   over the block's periods (minus existing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import Problem
from .formulation import SHARED, ModelData, build_model, replicas_needed
from .mip import MIP
from .strengthen import CUTS, add_cuts

#: Offering fields that must agree for two offerings to hold the same things at the same price.
SAME = ["gpu", "gpus_per_unit", "region", "provider", "pricing", "price_per_hour", "interruptions_per_hour",
        "upfront", "term_months", "capex", "lifetime_years", "residual_fraction", "power_kw",
        "idle_power_fraction", "pue", "electricity_per_kwh", "fixed_per_month", "unit_link", "fabric",
        "fabric_gbps_per_gpu", "max_cluster_units", "billing"]


@dataclass
class Model:
    """A built model after the reductions: what the solve driver solves and the plan is read from."""

    problem: Problem
    candidates: Candidates
    mip: MIP
    data: ModelData
    vars: dict
    #: what the reductions removed: configurations (service, config, dominated_by), offerings (id, kept)
    dropped_configs: pd.DataFrame = field(default_factory=pd.DataFrame)
    dropped_offerings: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary(self) -> dict:
        return {"configs_dropped": int(len(self.dropped_configs)),
                "offerings_dropped": int(len(self.dropped_offerings))}


# ---------------------------------------------------------------------------
# 1. dominated configurations


def drop_dominated(inf: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Remove configurations dominated by another on the same GPU type and GPUs per replica.

    Within each (service, GPU type, GPUs per replica), configuration c is
    dominated by k when k serves every bucket c serves with at least c's rps
    (the most rps a candidate row gives for that bucket). The configurations
    are taken strongest first (most rps summed over buckets; ties in the
    order of their names), and each is checked against the ones kept so
    far, so that a kept configuration is checked before those it may
    dominate. Returns the table without the dominated rows and
    (service, config, dominated_by) of each one dropped.
    """
    empty = pd.DataFrame(columns=["service", "config", "dominated_by"])
    if inf.empty:
        return inf, empty
    # one pass over plain arrays: a pandas pivot per group cost about a tenth of a small model's build
    service, config = inf["service"].to_numpy(object), inf["config"].to_numpy(object)
    group = pd.MultiIndex.from_arrays([inf["service"], inf["gpu"], inf["gpus"]]).factorize()[0]
    rps = inf["rps"].to_numpy(float)
    bucket = inf["bucket"].to_numpy(object)
    drops = []
    for g in pd.unique(group):
        at = np.flatnonzero(group == g)
        names = sorted(set(config[at]))
        if len(names) < 2:
            continue
        buckets = sorted(set(bucket[at]))
        row_of, col_of = {c: i for i, c in enumerate(names)}, {b: j for j, b in enumerate(buckets)}
        table = np.full((len(names), len(buckets)), np.nan)
        for i in at:
            if np.isnan(rps[i]):
                continue
            r, c = row_of[config[i]], col_of[bucket[i]]
            table[r, c] = rps[i] if np.isnan(table[r, c]) else max(table[r, c], rps[i])
        served = ~np.isnan(table)
        strength = np.where(served, table, 0.0).sum(axis=1)
        kept: list[int] = []
        for r in np.argsort(-strength, kind="stable"):
            if not served[r].any():
                continue  # no rps in any bucket: nothing to compare (and nothing it could dominate)
            need = table[r, served[r]] - 1e-12
            by = next((k for k in kept if served[k, served[r]].all() and (table[k, served[r]] >= need).all()), None)
            if by is None:
                kept.append(r)
            else:
                drops.append((service[at[0]], names[r], names[by]))
    dropped = pd.DataFrame(drops, columns=["service", "config", "dominated_by"])
    if not len(dropped):
        return inf, empty
    key = pd.MultiIndex.from_frame(inf[["service", "config"]])
    gone = key.isin(pd.MultiIndex.from_frame(dropped[["service", "config"]]))
    return inf[~gone].reset_index(drop=True), dropped


# ---------------------------------------------------------------------------
# 2. duplicate offerings


def drop_duplicate_offerings(problem: Problem) -> tuple[Problem, pd.DataFrame]:
    """Drop offerings identical to an uncapped one (module doc); returns the problem and id -> kept."""
    O = problem.offerings
    if len(O) < 2:
        return problem, pd.DataFrame(columns=["id", "kept"])
    # one key per offering, every field as text (a missing one as ∅); a dictionary groups them in order of
    # first appearance (a pandas groupby on 22 columns cost 12-19 ms per build and per re-price)
    values, known = O[SAME].to_numpy(object), O[SAME].notna().to_numpy()
    groups: dict[tuple, list] = {}
    for i, row, ok in zip(O.index, values, known):
        groups.setdefault(tuple(str(v) if k else "∅" for v, k in zip(row, ok)), []).append(i)
    drops = []
    for ids in groups.values():
        if len(ids) < 2:
            continue
        uncapped = [i for i in ids if pd.isna(O.at[i, "max_units"])]
        if not uncapped:
            continue
        keep = uncapped[0]
        drops += [(i, keep) for i in ids if i != keep and not (O.at[i, "existing_units"] or 0) > 0]
    dropped = pd.DataFrame(drops, columns=["id", "kept"])
    if not len(dropped):
        return problem, dropped
    return dataclasses.replace(problem, offerings=O.drop(index=dropped["id"])), dropped


# ---------------------------------------------------------------------------
# 3. bounds


def tighten_bounds(mip: MIP, d: ModelData, vt: dict) -> dict[str, int]:
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

    x = vt["inference-replicas"]
    need = replicas_needed(d)
    r = x[["service", "config", "period", "var", "gpus", "offering"]].merge(
        need, on=["service", "config", "period"])
    apply("inference-replicas", r["var"].to_numpy(), r["ub"].to_numpy(float))

    route = vt["inference-routing"]
    if len(route):
        dem = d.demand.rename(columns={"rps": "dem"})
        rd = route[["service", "bucket", "period", "var"]].merge(dem, on=["service", "bucket", "period"], how="left")
        apply("inference-routing", rd["var"].to_numpy(), rd["dem"].fillna(0.0).to_numpy(float))

    # most inference GPUs an offering can need in a period, and the clusters that can run there
    inf_gpus = (r["ub"] * r["gpus"]).groupby([r["offering"], r["period"]]).sum()
    w = vt["training-run"]
    shared = w[w["mode"] == SHARED]
    per_job = shared.groupby(["offering", "period", "job"])["gpus"].max()
    tr_gpus = per_job.groupby(level=["offering", "period"]).sum() if len(per_job) else pd.Series(dtype=float)

    held = vt["units-held"]
    idx = pd.MultiIndex.from_frame(held[["offering", "period"]])
    total = (inf_gpus.reindex(idx).astype(float).fillna(0.0).to_numpy()
             + tr_gpus.reindex(idx).astype(float).fillna(0.0).to_numpy())
    h = held.assign(units=np.ceil(total / held["G"].to_numpy(float) - 1e-9) - held["existing"].to_numpy(float))
    ub = h.groupby("var")["units"].max().clip(lower=0.0)
    for block in ("units-running", "units-reserved", "units-owned-new"):
        mine = ub.index.isin(vt[block]["var"].to_numpy())
        apply(block, ub.index.to_numpy()[mine], ub.to_numpy()[mine])
    return changed


# ---------------------------------------------------------------------------


def build(problem: Problem, cands: Candidates, enabled: bool = True, cuts=CUTS) -> Model:
    """The reductions (unless ``enabled`` is false), ``build_model``, tightened bounds, then the valid
    inequalities ``cuts`` (:mod:`optimizer.model.strengthen`; ``()`` for none)."""
    dropped_c = pd.DataFrame(columns=["service", "config", "dominated_by"])
    dropped_o = pd.DataFrame(columns=["id", "kept"])
    reduced = problem
    if enabled:
        inference, dropped_c = drop_dominated(cands.inference)
        cands = dataclasses.replace(cands, inference=inference)
        reduced, dropped_o = drop_duplicate_offerings(problem)
    mip, data, vt = build_model(reduced, cands)
    if enabled:
        tighten_bounds(mip, data, vt)
    add_cuts(mip, data, vt, cuts)
    # the plan speaks of the user's problem; the model's tables hold only the offerings kept
    return Model(problem, cands, mip, data, vt, dropped_c, dropped_o)
