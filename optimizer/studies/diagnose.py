"""Why a problem has no plan: cheap pre-checks, then an elastic re-solve.

A diagnosis is a list of *culprits*, plain dicts with the keys

``kind``
    ``no-fit`` (a model fits no offered GPU in the allowed precisions),
    ``slo`` (it fits, but no batch size meets the SLOs), ``region`` (no
    usable offering where the workload may run), ``demand`` (a service's
    demand in a period cannot be met), ``min-replicas``, ``training`` (a job
    cannot finish by its deadline), ``budget`` (the least cost that meets
    everything else exceeds ``constraints.budget``), ``capacity`` (an
    offering's ``max_units`` is too small), ``unknown`` (nothing above
    explains it, or a re-solve stopped early);
``workload``, ``offering``, ``period``
    what it names (``None`` where not applicable);
``amount``, ``unit``
    how much: rps short, hours missing, GB per GPU needed, least cost,
    units beyond the quota;
``message``
    one readable sentence naming the field to change.

:func:`precheck` finds what needs no solver; :func:`diagnose` adds the
smallest relaxations of an elastic model (docs/diagnosis.md): the normal MIP
from :func:`~optimizer.model.formulation.build_model` with non-negative slack
columns (:meth:`~optimizer.model.mip.MIP.add_slack`) on the demand, min-replicas,
training-progress and budget rows, and quotas (``max_units``) made elastic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..solve.backends import DEFAULT_SOLVER, Status, solve
from ..candidates import Candidates
from ..errors import suggest
from ..load import Problem

KEYS = ("kind", "workload", "offering", "period", "amount", "unit", "message")
#: Slack below this (in its row's own relative units) is solver noise, not a relaxation.
TOL = 1e-6


def culprit(kind: str, message: str, *, workload: str | None = None, offering: str | None = None,
            period: str | None = None, amount: float | None = None, unit: str | None = None,
            **extra: Any) -> dict:
    """One diagnosis entry with every key of :data:`KEYS` (plus ``extra``)."""
    if amount is not None:
        amount = float(amount)
        amount = round(amount, 6) if math.isfinite(amount) else None
    return {"kind": kind, "workload": workload, "offering": offering, "period": period,
            "amount": amount, "unit": unit, "message": message, **extra}


def describe(diagnosis: list[dict]) -> list[str]:
    """Readable lines, one per culprit."""
    return [f"{d['kind']}: {d['message']}" for d in diagnosis]


def _fmt(x: float) -> str:
    return f"{x:,.6g}" if abs(x) < 1e6 else f"{x:,.0f}"


# ---------------------------------------------------------------------------
# pre-checks


def precheck(problem: Problem, candidates: Candidates, tables=None) -> list[dict]:
    """Culprits found without a solver; every one makes the problem infeasible.

    Parameters
    ----------
    tables
        The formulation's :class:`~optimizer.model.formulation.Tables` when already
        prepared (saves preparing them again).
    """
    if tables is None:
        from ..model.formulation import prepare

        tables = prepare(problem, candidates)
    out: list[dict] = []
    out += _precheck_services(problem, candidates, tables)
    out += _precheck_jobs(problem, candidates, tables)
    return out


def _service_demand(problem: Problem) -> pd.DataFrame:
    """rps per service, bucket and period (demand × share)."""
    return problem.demand()


def _precheck_services(problem: Problem, cands: Candidates, T) -> list[dict]:
    out = []
    demand = _service_demand(problem)
    inf = cands.inference
    opts = T.inference_options
    for s in problem.services:
        d = demand[demand["service"] == s.name]
        need_buckets = sorted(set(d.loc[d["rps"] > 0, "bucket"]), key=[b.name for b in s.buckets].index)
        if s.min_replicas > 0 and not need_buckets:
            need_buckets = [s.buckets[0].name]
        if not need_buckets:
            continue
        mine = inf[inf["service"] == s.name]
        served_cfg = set(opts.loc[opts["service"] == s.name, "config"])
        no_cand = [b for b in need_buckets if mine[mine["bucket"] == b].empty]
        no_place = [b for b in need_buckets if b not in no_cand
                    and mine[(mine["bucket"] == b) & mine["config"].isin(served_cfg)].empty]
        if s.min_replicas > 0 and not served_cfg and not mine.empty and not no_place:
            no_place = [need_buckets[0]]
        peak = d.groupby("period")["rps"].sum().max() if len(d) else 0.0
        if no_cand:
            out.append(_no_fit_service(problem, s, no_cand, len(no_cand) < len(s.buckets)))
        if no_place:
            out.append(_region_service(problem, s, mine, float(peak)))
    return out


def _bucket_text(s, buckets: list[str], partial: bool) -> str:
    if not partial or buckets == ["all"]:
        return ""
    return f" (request bucket{'s' if len(buckets) > 1 else ''} {', '.join(buckets)})"


def _sizing():
    """The sizing package's public functions, or None when this build lacks them."""
    try:
        from .. import sizing
    except Exception:  # pragma: no cover - sizing ships with the package
        return None
    need = ("load_reference", "resolve_model", "resolve_gpu", "estimate_inference", "estimate_training")
    return sizing if all(hasattr(sizing, n) for n in need) else None


def _offered_specs(problem: Problem, model: str):
    """(sizing module, the model's architecture, efficiency factors, [(GPU type, spec)] per offered type), or None.

    None when the sizing module is not available; resolution errors propagate.
    """
    sz = _sizing()
    if sz is None:
        return None
    models, gpus, eff = sz.load_reference(problem.spec, problem.file)
    arch = sz.resolve_model(model, models)
    return sz, arch, eff, [(g, sz.resolve_gpu(g, gpus)) for g in sorted(set(problem.offerings["gpu"]))]


def _no_fit_service(problem: Problem, s, buckets: list[str], partial: bool) -> dict:
    where = f"inference[{s.name}]"
    btext = _bucket_text(s, buckets, partial)
    precs = ", ".join(s.precisions)
    generic = culprit("no-fit", f"{where}{btext}: model {s.model} has no configuration on any offered GPU "
                                f"type in precisions [{precs}] (VRAM or SLOs)", workload=s.name)
    try:
        ref = _offered_specs(problem, s.model)
        if ref is None:
            return generic
        sz, arch, eff, offered = ref
        tps = tuple(getattr(sz, "TP_DEGREES", (1, 2, 4, 8)))
        bk = [b for b in s.buckets if b.name in buckets]
        best_need = None  # (GB per GPU, gpu, tp, precision, usable GB)
        slo_best = None  # (gpu, tp, precision, ttft, tpot) of a config that fits VRAM but misses the SLOs
        for gname, spec in offered:
            usable = float(spec.vram_gb) * float(eff["vram_usable_fraction"])
            for prec in dict.fromkeys(s.precisions):
                for tp in tps:
                    need, vram_ok = 0.0, True
                    for b in bk:
                        r = sz.estimate_inference(arch, spec, tp, prec, b.prompt_tokens, b.output_tokens, eff,
                                                  ttft_ms=s.slo.ttft_ms, tpot_ms=s.slo.tpot_ms)
                        if r.get("vram_gb_per_gpu") is None:  # precision not supported here
                            vram_ok, need = False, None
                            break
                        if r.get("fits") or r.get("max_batch", 0) >= 1 or r.get("ttft_ms") is not None:
                            continue
                        vram_ok = False
                        need = max(need, float(r["vram_gb_per_gpu"]))
                    if need is None:
                        continue
                    if vram_ok:
                        if slo_best is None:
                            slo_best = (gname, tp, prec)
                        continue
                    if best_need is None or need < best_need[0]:
                        best_need = (need, gname, tp, prec, usable)
        if slo_best is not None:
            g, tp, prec = slo_best
            slo = ", ".join(f"{k} {v:g} ms" for k, v in (("ttft", s.slo.ttft_ms), ("tpot", s.slo.tpot_ms))
                            if v is not None)
            return culprit("slo", f"{where}{btext}: model {s.model} fits in VRAM (e.g. {tp} x {g}, {prec}) but no "
                                  f"batch size meets the SLOs ({slo}) on any offered GPU type; relax "
                                  f"{where}.slo or allow other precisions/GPU types", workload=s.name)
        if best_need is None:
            return culprit("no-fit", f"{where}{btext}: no offered GPU type runs model {s.model} in precisions "
                                     f"[{precs}]; allow another precision or offer another GPU type",
                           workload=s.name)
        need, g, tp, prec, usable = best_need
        return culprit("no-fit", f"{where}{btext}: model {s.model} fits no offered GPU in precisions [{precs}]: "
                                 f"its smallest configuration ({tp} x {g}, {prec}) needs {need:,.1f} GB per GPU "
                                 f"for one sequence, {usable:,.1f} GB usable", workload=s.name,
                       amount=need, unit="GB per GPU")
    except Exception:
        return generic


def _region_service(problem: Problem, s, mine: pd.DataFrame, peak: float) -> dict:
    where = f"inference[{s.name}]"
    O = problem.offerings
    regions = list(s.regions) if s.regions else None
    here = O if regions is None else O[O["region"].isin(regions)]
    rtext = "any region" if regions is None else f"region{'s' if len(regions) > 1 else ''} {', '.join(regions)}"
    amount = dict(amount=peak, unit="rps") if peak > 0 else {}
    if here.empty:
        known = sorted(set(O["region"]))
        hint = ""
        for r in regions or []:
            near = suggest(r, known)
            if near and near != r:
                hint = f"; did you mean {near!r}?"
                break
        return culprit("region", f"{where}: no offering in {rtext} (regions with offerings: "
                                 f"{', '.join(known[:12])}{' ...' if len(known) > 12 else ''}){hint}",
                       workload=s.name, region=", ".join(regions or []), **amount)
    gpus_needed = sorted(set(mine["gpu"]))
    typed = here[here["gpu"].isin(gpus_needed)]
    if typed.empty:
        return culprit("region", f"{where}: offerings in {rtext} have GPU types {', '.join(sorted(set(here['gpu'])))}"
                                 f", but the service's configurations need {', '.join(gpus_needed)}",
                       workload=s.name, region=", ".join(regions or []), **amount)
    width = mine.groupby("gpu")["gpus"].min()
    wide = typed[typed["gpus_per_unit"] >= typed["gpu"].map(width)]
    if wide.empty:
        need = ", ".join(f"{int(n)} x {g}" for g, n in width.items() if g in set(typed["gpu"]))
        return culprit("region", f"{where}: a replica needs at least {need} GPUs, more than one unit of any "
                                 f"offering in {rtext} holds", workload=s.name, region=", ".join(regions or []),
                       **amount)
    if not s.spot and (wide["pricing"] == "spot").all():
        return culprit("region", f"{where}: the only usable offerings in {rtext} are spot "
                                 f"({', '.join(wide.index[:6])}) and the service has spot: false",
                       workload=s.name, region=", ".join(regions or []), **amount)
    return culprit("region", f"{where}: no usable offering in {rtext}", workload=s.name,
                   region=", ".join(regions or []), **amount)


def _precheck_jobs(problem: Problem, cands: Candidates, T) -> list[dict]:
    out = []
    tc = cands.training
    topt = T.training_options
    P = problem.periods
    for j in problem.jobs:
        mine = tc[tc["job"] == j.name]
        if mine.empty:
            out.append(_no_fit_job(problem, j))
            continue
        opts = topt[topt["job"] == j.name]
        if opts.empty:
            out.append(_region_job(problem, j, mine))
            continue
        # the most progress each configuration can make in its window: every period's hours at the
        # best progress rate among its placements (a job runs at most the period's hours in a period)
        best = opts.groupby(["config", "period"], as_index=False).agg(progress=("progress", "max"),
                                                                        hours=("period_hours", "first"))
        best["can"] = best["progress"] * best["hours"]
        can = best.groupby("config")["can"].sum()
        need = mine.set_index("config")["hours"]
        missing = (need - can.reindex(need.index).fillna(0.0))
        if (missing > TOL * need.clip(lower=1.0)).all():
            c = str(missing.idxmin())
            window = float(P.loc[(P["month"] >= j.start_month) & (P["month"] <= j.deadline_month), "hours"].sum())
            out.append(culprit(
                "training", f"training[{j.name}]: even its fastest configuration ({c}) needs {_fmt(need[c])} h "
                            f"but can run at most {_fmt(can.get(c, 0.0))} h in months {j.start_month}.."
                            f"{j.deadline_month} ({_fmt(window)} h of periods); {_fmt(missing[c])} h missing: "
                            f"move training[{j.name}].deadline_month later or allow larger clusters",
                workload=j.name, amount=float(missing[c]), unit="hours", config=c))
    return out


def _no_fit_job(problem: Problem, j) -> dict:
    where = f"training[{j.name}]"
    sizes = ", ".join(str(n) for n in sorted(set(j.cluster_gpus)))
    generic = culprit("no-fit", f"{where}: model {j.model} cannot be trained in {j.precision} on any offered GPU "
                                f"type with cluster_gpus [{sizes}]", workload=j.name)
    try:
        ref = _offered_specs(problem, j.model)
        if ref is None:
            return generic
        sz, arch, eff, offered = ref
        best = None
        for gname, spec in offered:
            for n in sorted(set(j.cluster_gpus)):
                r = sz.estimate_training(arch, spec, n, j.precision, float(j.tokens), eff)
                v = r.get("vram_gb_per_gpu")
                if r.get("fits") or v is None:
                    continue
                usable = float(spec.vram_gb) * float(eff["train_vram_usable_fraction"])
                if best is None or v < best[0]:
                    best = (float(v), gname, n, usable)
        if best is None:
            return culprit("no-fit", f"{where}: no offered GPU type trains in {j.precision}; change "
                                     f"{where}.precision or offer another GPU type", workload=j.name)
        v, g, n, usable = best
        return culprit("no-fit", f"{where}: model {j.model} fits no offered GPU in {j.precision}: its smallest "
                                 f"layout ({n} x {g}) needs {v:,.1f} GB per GPU, {usable:,.1f} GB usable; "
                                 f"allow larger cluster_gpus or offer larger GPUs", workload=j.name,
                       amount=v, unit="GB per GPU")
    except Exception:
        return generic


def _region_job(problem: Problem, j, mine: pd.DataFrame) -> dict:
    where = f"training[{j.name}]"
    O = problem.offerings
    regions = list(j.regions) if j.regions else None
    rtext = "any region" if regions is None else f"region{'s' if len(regions) > 1 else ''} {', '.join(regions)}"
    here = O if regions is None else O[O["region"].isin(regions)]
    hours = float(mine["hours"].min())
    base = dict(workload=j.name, region=", ".join(regions or []), amount=hours, unit="hours")
    if here.empty:
        return culprit("region", f"{where}: no offering in {rtext}", **base)
    typed = here[here["gpu"].isin(set(mine["gpu"]))]
    if typed.empty:
        return culprit("region", f"{where}: offerings in {rtext} have GPU types "
                                 f"{', '.join(sorted(set(here['gpu'])))}, but its configurations need "
                                 f"{', '.join(sorted(set(mine['gpu'])))}", **base)
    if not j.spot and (typed["pricing"] == "spot").all():
        return culprit("region", f"{where}: the only usable offerings in {rtext} are spot and the job has "
                                 "spot: false", **base)
    smallest = mine.groupby("gpu")["gpus"].min()
    cap = typed["max_units"] * typed["gpus_per_unit"]
    if (cap.notna() & (cap < typed["gpu"].map(smallest))).all():
        return culprit("region", f"{where}: its smallest cluster ({', '.join(f'{n} x {g}' for g, n in smallest.items())})"
                                 f" is larger than max_units x gpus_per_unit of every offering in {rtext}", **base)
    return culprit("region", f"{where}: no offering in {rtext} can host a cluster (GPU type, quota, or spot "
                             "interruptions too frequent for its checkpoints)", **base)


# ---------------------------------------------------------------------------
# the elastic model


class Elastic:
    """The normal MIP made elastic once; the phases change only its objective and some bounds.

    Built with :func:`~optimizer.model.formulation.build_model`, then:

    - a slack ``s ≥ 0`` (:meth:`~optimizer.model.mip.MIP.add_slack`) on every
      ``inference-demand`` row (rps), ``inference-min-replicas`` row
      (replicas) and ``training-progress`` row (hours), each with the weight
      1 ÷ its row's requirement, so the weighted sum counts shares of what
      was asked;
    - a slack on the ``budget`` row (currency), never penalised: the cost
      objective of phase 2 sets it;
    - ``quota-excess[offering]`` ≥ 0 (units beyond ``max_units``), at first
      bounded to 0, with the quota rows made elastic up to it;
    - ``elastic-bound``: Σ weight·slack ≤ b, at first b = ∞.
    """

    def __init__(self, problem: Problem, cands: Candidates):
        from ..model.formulation import build_model

        self.problem = problem
        m, T, _ = build_model(problem, cands)
        self.m = m
        self.cost_terms = _aggregate(m.objective_terms())
        self.cost_constant = float(m.objective_constant)
        self.slacks: dict[str, pd.DataFrame] = {}
        c = m.constraints

        def elastic(block: str, weight: np.ndarray) -> None:
            if block in c and c[block].size:
                s = m.add_slack(block, 1.0)
                s["weight"] = weight
                self.slacks[block] = s

        if "inference-demand" in c:
            elastic("inference-demand", 1.0 / np.maximum(c["inference-demand"].lower, 1e-9))
        if "inference-min-replicas" in c:
            elastic("inference-min-replicas", 1.0 / np.maximum(c["inference-min-replicas"].lower, 1.0))
        if "training-progress" in c:
            b = c["training-progress"]
            need = cands.training.set_index(["job", "config"])["hours"]
            h = need.reindex(pd.MultiIndex.from_frame(b.coords[["job", "config"]])).to_numpy(float)
            elastic("training-progress", 1.0 / np.maximum(np.nan_to_num(h, nan=1.0), 1e-9))
        self.budget = m.add_slack("budget", -1.0) if "budget" in c and c["budget"].size else None
        self.excess = _relax_quotas(m, problem)
        parts = [s[["var", "weight"]] for s in self.slacks.values() if len(s)]
        self.weighted = (pd.concat(parts, ignore_index=True).rename(columns={"weight": "coef"})
                         if parts else pd.DataFrame({"var": np.array([], np.int64), "coef": np.array([], float)}))
        self.has_bound = len(self.weighted) > 0
        if self.has_bound:
            m.add_constraints("elastic-bound", [self.weighted.assign(k=0)[["k", "var", "coef"]]], "<=",
                              pd.DataFrame({"k": [0], "rhs": [np.inf]}), keys=["k"])

    # -- knobs ----------------------------------------------------------------
    def objective(self, terms: pd.DataFrame, constant: float = 0.0) -> None:
        """Make the objective exactly ``terms + constant`` (by adding the difference)."""
        cur = _aggregate(self.m.objective_terms())
        want = _aggregate(terms)
        delta = want.sub(cur, fill_value=0.0)
        delta = delta[delta != 0]
        self.m.add_objective(pd.DataFrame({"var": delta.index.to_numpy(np.int64), "coef": delta.to_numpy(float)}),
                             constant - self.m.objective_constant)

    def bound(self, value: float) -> None:
        if self.has_bound:
            self.m.constraints["elastic-bound"].upper[:] = value

    def quotas(self, elastic: bool) -> None:
        if self.excess is not None:
            b = self.m.variables["quota-excess"]
            b.upper[:] = np.inf if elastic else 0.0

    # -- phases ---------------------------------------------------------------
    def min_slack(self) -> None:
        self.objective(self.weighted)

    def min_cost(self) -> None:
        self.objective(self.cost_terms.rename("coef").rename_axis("var").reset_index(), self.cost_constant)

    def min_excess(self) -> None:
        G = self.problem.offerings["gpus_per_unit"].astype(float)
        ex = self.excess
        self.objective(pd.DataFrame({"var": ex["var"].to_numpy(np.int64),
                                     "coef": ex["offering"].map(G).to_numpy(float)}))

    # -- reading a solution ---------------------------------------------------
    def weighted_sum(self, x: np.ndarray) -> float:
        if not self.has_bound:
            return 0.0
        return float((x[self.weighted["var"].to_numpy(np.int64)] * self.weighted["coef"].to_numpy(float)).sum())

    def slack_values(self, block: str, x: np.ndarray) -> pd.DataFrame:
        s = self.slacks.get(block)
        if s is None or s.empty:
            return pd.DataFrame()
        s = s.copy()
        s["value"] = x[s["var"].to_numpy(np.int64)]
        return s[s["value"] * s["weight"] > TOL]


def _aggregate(terms: pd.DataFrame) -> pd.Series:
    if terms is None or len(terms) == 0:
        return pd.Series(dtype=float)
    return terms.groupby("var")["coef"].sum()


def _relax_quotas(m, problem: Problem) -> pd.DataFrame | None:
    """Let units exceed ``max_units`` by ``quota-excess[offering]`` units (bounded to 0 until a phase frees it).

    Every ``units-*`` variable with a finite upper bound loses it and gets the
    row ``units − excess ≤ bound``; rows whose right-hand side is the quota
    (``capacity-running-upper`` in units, ``training-fit-rented`` in GPUs) get a
    slack no larger than the excess.
    """
    G = problem.offerings["gpus_per_unit"].astype(float)
    capped = [(name, b) for name, b in m.variables.items()
              if name.startswith("units-") and "offering" in b.coords and np.isfinite(b.upper).any()]
    offerings = sorted({o for _, b in capped for o in b.coords.loc[np.isfinite(b.upper), "offering"]})
    if not offerings:
        return None
    ex = m.add_variables("quota-excess", pd.DataFrame({"offering": offerings}), upper=0.0)
    ex_var = ex.set_index("offering")["var"]
    link, rhs = [], []
    for name, b in capped:
        fin = np.isfinite(b.upper)
        ids = b.ids[fin]
        off = b.coords.loc[fin, "offering"].to_numpy()
        rhs.append(pd.DataFrame({"row": ids, "rhs": b.upper[fin]}))
        link.append(pd.DataFrame({"row": ids, "var": ids, "coef": 1.0}))
        link.append(pd.DataFrame({"row": ids, "var": ex_var.reindex(off).to_numpy(np.int64), "coef": -1.0}))
        b.upper[fin] = np.inf
    for block, per_gpu in (("capacity-running-upper", False), ("training-fit-rented", True)):
        if block not in m.constraints or m.constraints[block].size == 0:
            continue
        cb = m.constraints[block]
        mask = cb.coords["offering"].isin(ex_var.index).to_numpy()
        if not mask.any():
            continue
        coef = -(cb.coords.loc[mask, "offering"].map(G).to_numpy(float) if per_gpu else 1.0)
        s = m.add_slack(block, coef, rows=mask, name=f"quota:{block}")
        sid = -1 - s["var"].to_numpy(np.int64)  # link rows keyed apart from the units rows (ids ≥ 0)
        link.append(pd.DataFrame({"row": sid, "var": s["var"].to_numpy(np.int64), "coef": 1.0}))
        link.append(pd.DataFrame({"row": sid, "var": ex_var.reindex(s["offering"]).to_numpy(np.int64),
                                  "coef": -1.0}))
        rhs.append(pd.DataFrame({"row": sid, "rhs": 0.0}))
    m.add_constraints("quota-elastic", link, "<=", pd.concat(rhs, ignore_index=True), keys=["row"])
    return ex


def _solve(m, solver: str, time_limit: float | None, threads: int | None):
    r = solve(m, solver=solver, time_limit=time_limit, gap=1e-6, threads=threads)
    return r if r.status.has_plan else None


def diagnose(problem: Problem, candidates: Candidates, solver: str = DEFAULT_SOLVER,
             time_limit: float | None = None, threads: int | None = None,
             pre: list[dict] | None = None) -> list[dict]:
    """Every culprit of an infeasible problem: pre-checks, then the elastic re-solves.

    Phase 1 minimises the weighted slacks (demand, min replicas, training
    progress; the budget free); phase 2, when there is a budget, finds the
    least cost with the slacks held at that minimum; phase 3, when slack
    remains and some offering has a quota, asks how many units beyond
    ``max_units`` would remove it. Never raises: a failed phase becomes an
    ``unknown`` culprit.
    """
    if pre is None:
        pre = precheck(problem, candidates)
    found: list[dict] = []
    try:
        found = _elastic_culprits(problem, candidates, solver, time_limit, threads)
    except Exception as exc:  # a diagnosis must never hide the infeasible plan behind a traceback
        found = [culprit("unknown", f"the elastic re-solve failed: {type(exc).__name__}: {exc}")]
    # a job that cannot run anywhere also shows as training hours missing: the root cause says more
    rooted = {d["workload"] for d in pre if d["kind"] in ("region", "no-fit", "slo")}
    found = [d for d in found if not (d["kind"] == "training" and d["workload"] in rooted)]
    # the same culprit from both: keep the pre-check's (more specific) words when the amounts agree
    key = (lambda d: (d["kind"], d["workload"], d["offering"], d["period"]))
    pre_by_key = {key(d): d for d in pre}
    merged = []
    for d in found:
        p = pre_by_key.get(key(d))
        if p is not None and p["amount"] is not None and d["amount"] is not None and math.isclose(
                p["amount"], d["amount"], rel_tol=1e-6, abs_tol=1e-6):
            d = p
        merged.append(d)
    seen = {key(d) for d in merged}
    out = [d for d in pre if key(d) not in seen] + merged
    if not out:
        out = [culprit("unknown", "no single requirement explains the infeasibility: demand, training, budget "
                                  "and quotas can all be met by the elastic model")]
    return out


def _elastic_culprits(problem: Problem, cands: Candidates, solver: str, time_limit: float | None,
                      threads: int | None) -> list[dict]:
    out: list[dict] = []
    cur = problem.currency
    el = Elastic(problem, cands)
    # phase 1: the smallest weighted shortfall, quotas as they are, the budget free
    el.min_slack()
    r = _solve(el.m, solver, time_limit, threads)
    if r is None:
        return [culprit("unknown", "the elastic re-solve found no relaxation within the limit "
                                   "(try a larger --time-limit)")]
    best = el.weighted_sum(r.x)
    out += _shortfalls(problem, el, r.x)

    # phase 2: the least cost with the shortfall held at its minimum
    if problem.budget is not None and el.budget is not None:
        el.bound(best * (1 + 1e-6) + TOL)
        el.min_cost()
        rb = _solve(el.m, solver, time_limit, threads)
        if rb is None:
            out.append(culprit("unknown", "the least cost that meets everything else was not found within the limit"))
        elif rb.objective > problem.budget + max(TOL, 1e-9 * abs(problem.budget)):
            least = float(rb.objective)
            what = "cost" if problem.objective == "cost" else "NPV of costs"
            rest = "everything else" if best <= TOL else "everything else that can be met"
            out.append(culprit(
                "budget", f"constraints.budget: {_fmt(problem.budget)} {cur} is too small; the least {what} "
                          f"that meets {rest} is {_fmt(least)} {cur} ({_fmt(least - problem.budget)} {cur} over)",
                amount=least, unit=cur, budget=float(problem.budget), excess=round(least - problem.budget, 6)))

    # phase 3: would more units than max_units remove the shortfall? The fewest extra GPUs that do.
    if best > TOL and el.excess is not None:
        el.quotas(True)
        el.bound(np.inf)
        el.min_slack()
        rc = _solve(el.m, solver, time_limit, threads)
        if rc is not None:
            rest = el.weighted_sum(rc.x)
            if rest < best - TOL:
                el.bound(rest * (1 + 1e-6) + TOL)
                el.min_excess()
                rd = _solve(el.m, solver, time_limit, threads)
                if rd is not None:
                    out += _quota_culprits(problem, el.excess, rd.x, full=rest <= TOL)
    return out


def _shortfalls(problem: Problem, el: Elastic, x: np.ndarray) -> list[dict]:
    out = []
    c_dem = el.slack_values("inference-demand", x)
    multi = {s.name for s in problem.services if len(s.buckets) > 1}
    for r in c_dem.itertuples(index=False):
        need = 1.0 / r.weight
        bucket = f" (request bucket {r.bucket})" if r.service in multi else ""
        out.append(culprit(
            "demand", f"inference[{r.service}] period {r.period}{bucket}: {_fmt(r.value)} of the {_fmt(need)} rps "
                      f"demand cannot be served with the offerings and quotas allowed",
            workload=r.service, period=r.period, amount=float(r.value), unit="rps",
            **({"bucket": r.bucket} if r.service in multi else {})))
    for r in el.slack_values("inference-min-replicas", x).itertuples(index=False):
        out.append(culprit(
            "min-replicas", f"inference[{r.service}] period {r.period}: {_fmt(r.value)} of its "
                            f"{_fmt(1.0 / r.weight)} min_replicas cannot be placed",
            workload=r.service, period=r.period, amount=float(r.value), unit="replicas"))
    jobs = {j.name: j for j in problem.jobs}
    tr = el.slack_values("training-progress", x)
    for r in tr.itertuples(index=False):
        j = jobs.get(r.job)
        need = 1.0 / r.weight
        window = f" by month {j.deadline_month}" if j is not None else ""
        out.append(culprit(
            "training", f"training[{r.job}]: {_fmt(r.value)} h of the {_fmt(need)} h it needs on {r.config} cannot "
                        f"be done{window} (deadline_month, regions, quotas or capacity shared with inference)",
            workload=r.job, amount=float(r.value), unit="hours", config=r.config))
    return out


def _quota_culprits(problem: Problem, ex: pd.DataFrame | None, x: np.ndarray, full: bool) -> list[dict]:
    if ex is None:
        return []
    out = []
    O = problem.offerings
    for o, v in zip(ex["offering"], x[ex["var"].to_numpy(np.int64)]):
        if v <= TOL:
            continue
        units = math.ceil(v - 1e-6)
        mx = O.at[o, "max_units"]
        now = "" if pd.isna(mx) else f" (now {int(mx)})"
        effect = "would remove the shortfall" if full else "would reduce the shortfall (the rest needs other changes)"
        out.append(culprit(
            "capacity", f"offerings[{o}].max_units{now}: {units} more unit(s) {effect}",
            offering=o, amount=float(units), unit="units"))
    return out
