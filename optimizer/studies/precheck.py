"""Why a problem has no plan, found without a solver (the first half of a diagnosis).

A diagnosis is a list of *culprits*, plain dicts with the keys

``kind``
    ``no-fit`` (a model fits no offered GPU in the allowed precisions),
    ``slo`` (it fits, but no batch size meets the SLOs), ``region`` (no
    usable offering where the workload may run), ``topology`` (a job's
    clusters fit its GPUs, but no offering joins enough machines: no fabric,
    ``max_cluster_units`` or ``max_units``), ``placement`` (no offering for
    other reasons: regions, providers, spot), ``demand`` (a service's
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

:func:`precheck` finds what needs no solver: workloads no configuration
fits, workloads with no usable offering (regions, spot, providers, a
cluster no offering's topology can hold) and jobs that cannot finish in
their window. :mod:`optimizer.studies.diagnose` adds the elastic re-solve.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .. import sizing
from ..candidates import Candidates
from ..errors import suggest
from ..sizing.candidates import job_efficiency
from ..load import Problem, provider_allowed

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


def _fmt(x: float) -> str:
    return f"{x:,.6g}" if abs(x) < 1e6 else f"{x:,.0f}"


# ---------------------------------------------------------------------------
# pre-checks


def precheck(problem: Problem, candidates: Candidates, data=None) -> list[dict]:
    """Culprits found without a solver; every one makes the problem infeasible.

    Parameters
    ----------
    data
        The formulation's :class:`~optimizer.model.formulation.ModelData` when
        already prepared (saves preparing it again).
    """
    if data is None:
        from ..model.formulation import prepare

        data = prepare(problem, candidates)
    tables = data
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


def _offered_specs(problem: Problem, model: str):
    """(sizing module, the model's architecture, efficiency factors, [(GPU type, spec)] per offered type)."""
    models, gpus, eff = sizing.load_reference(problem.spec, problem.file)
    arch = sizing.resolve_model(model, models)
    return sizing, arch, eff, [(g, sizing.resolve_gpu(g, gpus)) for g in sorted(set(problem.offerings["gpu"]))]


def _no_fit_service(problem: Problem, s, buckets: list[str], partial: bool) -> dict:
    where = f"inference[{s.name}]"
    btext = _bucket_text(s, buckets, partial)
    precs = ", ".join(s.precisions)
    sz, arch, eff, offered = _offered_specs(problem, s.model)
    tps = sz.TP_DEGREES
    bk = [b for b in s.buckets if b.name in buckets]
    best_need = None  # (GB per GPU, gpu, tp, precision, GB on the GPU)
    slo_best = None  # (gpu, tp, precision, ttft, tpot) of a config that fits VRAM but misses the SLOs
    for gname, spec in offered:
        usable = spec.vram_bytes / 1e9
        for prec in dict.fromkeys(s.precisions):
            for tp in tps:
                need, vram_ok = 0.0, True
                for b in bk:
                    r = sz.estimate_inference(arch, spec, tp, prec, b.prompt_tokens, b.output_tokens, eff,
                                              ttft_ms=s.slo.ttft_ms, tpot_ms=s.slo.tpot_ms, layout="best")
                    if r.get("vram_gb_per_gpu") is None:  # precision not supported here
                        vram_ok, need = False, None
                        break
                    if r["fits"]:  # memory fits; the SLOs are judged below
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
                             f"for one sequence, the GPU has {usable:,.1f} GB", workload=s.name,
                   amount=need, unit="GB per GPU")


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


def _precheck_jobs(problem: Problem, cands: Candidates, data) -> list[dict]:
    out = []
    tc = cands.training
    topt = data.training_options
    P = problem.periods
    # the most of a job each configuration can do in its window: every period's hours at the best rate
    # among its placements (a job runs at most the period's hours in a period); one pass over every job
    best = topt.groupby(["job", "config", "period"]).agg(rate=("rate", "max"), hours=("period_hours", "first"))
    can_of = (best["rate"] * best["hours"]).groupby(level=["job", "config"]).sum()
    with_candidates, placed = set(tc["job"]), set(can_of.index.get_level_values("job"))
    for j in problem.jobs:
        if j.name not in with_candidates:
            out.append(_no_fit_job(problem, j))
            continue
        if j.name not in placed:
            out.append(_placement_job(problem, j, tc[tc["job"] == j.name]))
            continue
        can = can_of.xs(j.name, level="job")
        if (can < 1.0 - TOL).all():
            c = str(can.idxmax())
            window = float(P.loc[(P["month"] >= j.start_month) & (P["month"] <= j.deadline_month), "hours"].sum())
            out.append(culprit(
                "training", f"training[{j.name}]: even its fastest configuration ({c}) can do only "
                            f"{100 * can[c]:.1f} % of the job in months {j.start_month}..{j.deadline_month} "
                            f"({_fmt(window)} h of periods): move training[{j.name}].deadline_month later or "
                            "allow larger clusters",
                workload=j.name, amount=float(1.0 - can[c]), unit="share of the job", config=c))
    return out


def _no_fit_job(problem: Problem, j) -> dict:
    where = f"training[{j.name}]"
    sz, arch, eff, offered = _offered_specs(problem, j.model)
    best = None
    for gname, spec in offered:
        for n in sorted(set(j.cluster_gpus)):
            r = sz.estimate_training(arch, spec, n, j.precision, float(j.tokens), job_efficiency(j, eff),
                                     method=j.method, lora_rank=j.lora_rank)
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


def placement_reasons(problem: Problem, j, mine: pd.DataFrame) -> list[tuple[str, str]]:
    """Why each offering of a job's GPU types cannot hold any of its clusters: (offering, reason).

    The rules of docs/formulation.md ("Where a training cluster may run"), in
    order: region, provider, spot, then topology for the smallest cluster
    that could use the offering: more machines than one without a fabric,
    more than ``max_cluster_units``, more units than ``max_units``.
    """
    O = problem.offerings
    typed = O[O["gpu"].isin(set(mine["gpu"]))]
    out = []
    for oid, o in typed.iterrows():
        if j.regions and o["region"] not in j.regions:
            out.append((oid, f"region {o['region']} is not in its regions"))
            continue
        if not provider_allowed(j.providers, o["provider"] if isinstance(o["provider"], str) else None):
            out.append((oid, f"provider {o['provider']} is not allowed by its providers"))
            continue
        if o["pricing"] == "spot" and not j.spot:
            out.append((oid, "spot, and the job has spot: false"))
            continue
        n = int(mine.loc[mine["gpu"] == o["gpu"], "gpus"].min())
        host = int(o["gpus_per_unit"])
        machines = -(-n // host)
        billed = n if o["billing"] == "per_gpu" else machines
        quota = o["max_units"] * (host if o["billing"] == "per_gpu" else 1) if pd.notna(o["max_units"]) else None
        if machines > 1 and o["fabric"] == "none":
            out.append((oid, f"its smallest cluster ({n} GPUs) spans {machines} machines of {host} GPUs and the "
                             "offering has no fabric between machines (fabric: none)"))
        elif machines > 1 and pd.notna(o["max_cluster_units"]) and machines > o["max_cluster_units"]:
            out.append((oid, f"its smallest cluster spans {machines} machines; max_cluster_units is "
                             f"{int(o['max_cluster_units'])}"))
        elif quota is not None and billed > quota:
            out.append((oid, f"its smallest cluster needs {billed} units; max_units is {int(o['max_units'])}"))
        else:
            out.append((oid, "spot interruptions too frequent for its checkpoints"))
    return out


def _placement_job(problem: Problem, j, mine: pd.DataFrame) -> dict:
    """The culprit of a job whose clusters fit some GPU but no offering can hold one."""
    where = f"training[{j.name}]"
    O = problem.offerings
    base = dict(workload=j.name, region=", ".join(j.regions or []))
    typed = O[O["gpu"].isin(set(mine["gpu"]))]
    if typed.empty:
        return culprit("placement", f"{where}: no offering has the GPU types its configurations need "
                                    f"({', '.join(sorted(set(mine['gpu'])))})", **base)
    reasons = placement_reasons(problem, j, mine)
    topo = [r for r in reasons if "machines" in r[1] or "max_units" in r[1]]
    region = [r for r in reasons if r[1].startswith("region ")]
    kind = ("topology" if topo and len(topo) == len(reasons)
            else "region" if region and len(region) == len(reasons) else "placement")
    shown = "; ".join(f"{o}: {r}" for o, r in reasons[:6]) + (f"; and {len(reasons) - 6} more" if len(reasons) > 6
                                                              else "")
    hint = (" Allow smaller cluster_gpus, or use an offering whose machines share a fabric (fabric, "
            "max_cluster_units)." if kind == "topology" else "")
    return culprit(kind, f"{where}: no offering can hold one of its clusters ({shown}).{hint}",
                   offerings_ruled_out=[{"offering": o, "reason": r} for o, r in reasons], **base)
