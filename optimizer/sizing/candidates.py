"""Candidate configurations for the MIP: the interface the formulation calls.

``inference_candidates`` sizes one service on every offered GPU type, every
replica size 1, 2, 4, 8 and every allowed precision the GPU supports, in
every layout the model allows (tensor parallel; for MoE models with 2 or
more GPUs also attention data parallel + expert parallel, DEP), keeps the
better layout of each (GPU type, size, precision) and the configurations
that fit and meet the service's SLOs, one row per request bucket they can
serve. ``training_candidates``
sizes one job on every offered GPU type and every cluster size it allows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..errors import InputError
from .architecture import ModelArch, load_models, resolve_model
from .efficiency import Efficiency, load_efficiency
from .hardware import GpuSpec, load_gpus, resolve_gpu
from . import queueing
from .inference import layout_replica, layouts_for
from .training import Network, estimate_training

TP_DEGREES = (1, 2, 4, 8)

#: what the sizing returns (the candidate tables of :mod:`optimizer.candidates` keep a subset)
SIZED_INFERENCE_COLUMNS = ["gpu", "gpus", "precision", "bucket", "rps", "max_batch", "ttft_ms", "tpot_ms",
                           "vram_gb_per_gpu", "layout"]
SIZED_TRAINING_COLUMNS = ["gpu", "gpus", "precision", "gpus_per_node", "fabric_gbps_per_gpu", "hours", "tokens_per_s",
                          "mfu", "vram_gb_per_gpu", "layout"]


def load_reference(problem: schema.ProblemFile, file: str) -> tuple[dict[str, ModelArch], dict[str, GpuSpec], Efficiency]:
    """Catalog architectures, GPU types and efficiency factors with the problem's inline
    ``models:``/``gpus:`` entries and ``efficiency:`` overrides applied.

    Returns ``(models, gpus, eff)`` to pass to :func:`inference_candidates`
    and :func:`training_candidates`. Errors name ``file`` and the field.
    """
    try:
        models = load_models(problem.models, file=file)
        gpus = load_gpus(problem.gpus, file=file)
        eff = load_efficiency(problem.efficiency, file=file)
    except InputError as exc:
        raise exc.with_file(file) from None
    return models, gpus, eff


def _empty(columns: list[str]) -> pd.DataFrame:
    types = {"gpu": object, "gpus": "int64", "precision": object, "bucket": object, "layout": object,
             "max_batch": "int64"}
    return pd.DataFrame({c: pd.Series(dtype=types.get(c, float)) for c in columns})


def inference_candidates(service: schema.InferenceService, gpu_names: list[str], *, models: dict,
                         gpus: dict, eff) -> pd.DataFrame:
    """Configurations that fit and meet ``service``'s SLOs, with rps per replica per bucket.

    Parameters
    ----------
    service
        The inference service (model, allowed precisions, buckets, SLOs).
    gpu_names
        GPU types some offering provides (names or aliases).
    models, gpus, eff
        From :func:`load_reference`.

    Returns
    -------
    DataFrame
        One row per (gpu, gpus, precision, bucket): ``rps`` (> 0, the largest
        Poisson load of requests/s one replica serves with the service's SLO
        statistic met, or its knee without SLOs; :mod:`.queueing`) and the
        info columns ``max_batch`` (most sequences whose KV cache fits),
        mean ``ttft_ms`` and ``tpot_ms`` at that load, ``vram_gb_per_gpu``
        (with a full batch), ``layout`` (``tp<n>`` or ``dep<n>``: of the
        layouts the model allows on n GPUs, the one that serves the most
        buckets, then the most rps summed over buckets as shares of the
        better layout's rps in each). Configurations with more GPUs per
        replica and no more rps in every bucket than a smaller one of the
        same GPU type and precision are pruned.
    """
    arch = resolve_model(service.model, models, field=f"inference[{service.name}].model")
    ttft, tpot, statistic = service.slo.ttft_ms, service.slo.tpot_ms, service.slo.percentile
    buckets = service.buckets
    rows = []
    for name in dict.fromkeys(gpu_names):
        gpu = resolve_gpu(name, gpus, field=f"inference[{service.name}]")
        for precision in dict.fromkeys(service.precisions):
            for tp in TP_DEGREES:
                by_layout = []
                for layout in layouts_for(arch, tp):
                    rep = layout_replica(arch, gpu, tp, precision, eff, layout)
                    if rep is None:
                        break  # the GPU has no units for this precision
                    by_layout.append(_layout_rows(rep, buckets, ttft, tpot, statistic))
                if not by_layout:
                    break
                rows.extend(_better_layout(by_layout))
    rows = _prune_dominated(rows)
    if not rows:
        return _empty(SIZED_INFERENCE_COLUMNS)
    return pd.DataFrame(rows, columns=SIZED_INFERENCE_COLUMNS)


def _layout_rows(rep, buckets, ttft, tpot, statistic) -> list[tuple]:
    """Candidate rows of one replica layout, one per bucket it fits and meets the SLOs in."""
    rows = []
    for b in buckets:
        isl, osl = b.prompt_tokens, b.output_tokens
        if rep.max_batch(isl, osl) < 1:
            continue   # the weights (a DEP layout: its share of the experts) and one sequence do not fit
        m = rep.serve(isl, osl)
        rps = queueing.max_rps_at_slo(m, ttft, tpot, statistic)
        if not rps > 0:
            continue
        at = (queueing.under_rps(m, rps, osl) if ttft is not None or tpot is not None
              else queueing.at_concurrency(m, queueing.knee(m) + 1, osl))
        rows.append((rep.gpu.name, rep.gpus, rep.precision, b.name, rps, int(m["batch"][-1]), at["ttft_ms"],
                     at["tpot_ms"], float(rep.vram_gb(int(m["batch"][-1]), isl, osl)), rep.layout))
    return rows


def _better_layout(by_layout: list[list[tuple]]) -> list[tuple]:
    """The rows of the layout that serves the most buckets, then the most rps summed over buckets as
    shares of the best layout's rps in each (one layout per GPU type, size and precision: the planner
    deploys one kind of replica per configuration). The first (TP) wins ties."""
    best = {}
    for rows in by_layout:
        for r in rows:
            best[r[3]] = max(best.get(r[3], 0.0), r[4])
    return max(by_layout, key=lambda rows: (len(rows), sum(r[4] / best[r[3]] for r in rows)))


def _prune_dominated(rows: list[tuple]) -> list[tuple]:
    """Drop a configuration when a smaller one (same GPU type and precision) has at least
    its rps in every bucket it serves. Rows are (gpu, gpus, precision, bucket, rps, ...)."""
    table: dict[tuple, dict[int, dict[str, float]]] = {}
    for r in rows:
        table.setdefault((r[0], r[2]), {}).setdefault(r[1], {})[r[3]] = r[4]
    dropped = set()
    for key, by_size in table.items():
        sizes = sorted(by_size)
        for j, big in enumerate(sizes):
            served = by_size[big]
            for small in sizes[:j]:
                have = by_size[small]
                if all(b in have and have[b] >= v for b, v in served.items()):
                    dropped.add((key, big))
                    break
    return [r for r in rows if ((r[0], r[2]), r[1]) not in dropped]


def training_candidates(job: schema.TrainingJob, gpu_names: list[str], *, models: dict, gpus: dict,
                        eff, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cluster configurations that fit, with wall-clock hours at full speed, per way of joining GPUs.

    ``links`` (columns ``gpu, gpus_per_node, fabric_gbps_per_gpu``; one row
    per way an offering joins GPUs of that type, the fabric empty for none)
    says where a cluster can run. A cluster that fits in one node of some
    offering of its GPU type gets one row, sized inside a node
    (``gpus_per_node`` and ``fabric_gbps_per_gpu`` empty). A larger cluster
    gets one row per link profile with a fabric and smaller nodes, sized on
    that fabric: its data-parallel traffic crosses the fabric at its
    bandwidth, so a slow fabric gives more hours. Without ``links`` every
    cluster is sized on the named defaults (:func:`default_network`).

    Returns
    -------
    DataFrame
        One row per (gpu, gpus, link profile) with ``precision`` (the
        job's), ``hours`` (to train ``job.tokens`` without interruptions),
        ``gpus_per_node``, ``fabric_gbps_per_gpu`` and the info columns
        ``tokens_per_s`` (cluster), ``mfu``, ``vram_gb_per_gpu``, ``layout``.
    """
    arch = resolve_model(job.model, models, field=f"training[{job.name}].model")
    eff = job_efficiency(job, eff)
    rows = []
    for name in dict.fromkeys(gpu_names):
        gpu = resolve_gpu(name, gpus, field=f"training[{job.name}]")
        if not gpu.supports_training(job.precision):
            continue
        for n in sorted(set(job.cluster_gpus)):
            for node, gbps in _networks(links, gpu.name, n):
                if node is None:
                    net = None  # the named defaults
                elif np.isnan(node):
                    net = Network(n)  # inside one node
                else:
                    net = Network(int(node), gbps)
                r = estimate_training(arch, gpu, n, job.precision, float(job.tokens), eff, net, job.method,
                                      job.lora_rank, job.framework)
                if r["fits"]:
                    rows.append((gpu.name, n, job.precision, node, gbps, r["hours"], r["tokens_per_s"], r["mfu"],
                                 r["vram_gb_per_gpu"], r["layout"]))
    if not rows:
        return _empty(SIZED_TRAINING_COLUMNS)
    return pd.DataFrame(rows, columns=SIZED_TRAINING_COLUMNS)


def job_efficiency(job: schema.TrainingJob, eff):
    """The efficiency factors with the job's own ``sequence_length`` and ``global_batch_tokens``."""
    over = {k: float(v) for k, v in (("train_sequence_tokens", job.sequence_length),
                                     ("train_global_batch_tokens", job.global_batch_tokens)) if v is not None}
    return eff.with_overrides(over) if over else eff


def _networks(links: pd.DataFrame | None, gpu: str, n: int) -> list[tuple[float | None, float | None]]:
    """(gpus_per_node, fabric Gbit/s per GPU) of each way a cluster of ``n`` ``gpu`` can be joined;
    ``(None, None)`` for the default network (no ``links``); ``(nan, nan)`` for one node."""
    if links is None:
        return [(None, None)]
    mine = links[links["gpu"] == gpu]
    out: list[tuple[float | None, float | None]] = []
    if (mine["gpus_per_node"] >= n).any():
        out.append((np.nan, np.nan))
    fab = mine[mine["fabric_gbps_per_gpu"].notna() & (mine["gpus_per_node"] < n)]
    out.extend(zip(fab["gpus_per_node"].astype(float), fab["fabric_gbps_per_gpu"].astype(float)))
    return out
