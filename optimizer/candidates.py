"""Stage 2: candidate configurations per workload, as tables the formulation reads.

A workload's candidates come from its measured ``profiles`` when it has any
(they are then the only candidates), otherwise from the analytic sizing
models in :mod:`optimizer.sizing`.

Tables
------
inference
    service, config, gpu, gpus, precision, bucket, rps — one row per
    configuration and request bucket it can serve; ``rps`` per replica.
training
    job, config, gpu, gpus, precision, gpus_per_node, fabric_gbps_per_gpu,
    hours — wall-clock hours the job needs on a cluster of ``gpus`` GPUs at
    full speed (no interruptions). A cluster inside one node does not depend
    on the fabric: its row leaves ``gpus_per_node`` and ``fabric_gbps_per_gpu``
    empty and applies to every offering whose units hold it. A cluster over
    several nodes has one row per link profile (GPUs per node, fabric
    bandwidth per GPU) some offering of its GPU type has, its hours sized on
    that fabric (a slower fabric, more hours); a measured profile applies to
    every offering its cluster can be placed on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputError
from .load import Problem

INFERENCE_COLUMNS = ["service", "config", "gpu", "gpus", "precision", "bucket", "rps"]
TRAINING_COLUMNS = ["job", "config", "gpu", "gpus", "precision", "gpus_per_node", "fabric_gbps_per_gpu", "hours"]


@dataclass
class Candidates:
    inference: pd.DataFrame
    training: pd.DataFrame
    efficiency: dict[str, float]


def config_id(gpu: str, gpus: int, precision: str | None) -> str:
    """Readable configuration id: ``H100-SXM x2 fp8``."""
    return f"{gpu} x{gpus}" + (f" {precision}" if precision else "")


def efficiency_values(problem: Problem) -> dict[str, float]:
    """Named efficiency factors from the catalog with the problem's overrides (names and ranges checked)."""
    from .sizing import load_efficiency

    return dict(load_efficiency(problem.spec.efficiency, file=problem.file))


def _profile_inference(problem: Problem, s) -> pd.DataFrame:
    buckets = [b.name for b in s.buckets]
    rows = []
    for k, p in enumerate(s.profiles):
        if p.precision is not None and p.precision not in s.precisions:
            raise InputError(
                f"profile precision {p.precision!r} is not one of the service's precisions",
                file=problem.file, field=f"inference[{s.name}].profiles[{k}].precision",
                value=p.precision, allowed=", ".join(s.precisions))
        for b in [p.bucket] if p.bucket else buckets:
            rows.append((s.name, config_id(p.gpu, p.gpus, p.precision), p.gpu, p.gpus,
                         p.precision or "", b, float(p.rps)))
    df = pd.DataFrame(rows, columns=INFERENCE_COLUMNS)
    dup = df.duplicated(["config", "bucket"], keep=False)
    if dup.any():
        r = df[dup].iloc[0]
        raise InputError(
            "two profiles measure the same configuration and bucket",
            file=problem.file, field=f"inference[{s.name}].profiles",
            value=f"{r['gpu']} x{r['gpus']} bucket {r['bucket']}")
    return df


def _profile_training(problem: Problem, j) -> pd.DataFrame:
    rows = []
    for k, p in enumerate(j.profiles):
        if p.precision is not None and p.precision != j.precision:
            raise InputError(
                "profile precision differs from the job's precision",
                file=problem.file, field=f"training[{j.name}].profiles[{k}].precision",
                value=p.precision, allowed=j.precision)
        rows.append((j.name, config_id(p.gpu, p.gpus, j.precision), p.gpu, p.gpus, j.precision, np.nan, np.nan,
                     float(p.hours)))
    df = pd.DataFrame(rows, columns=TRAINING_COLUMNS)
    if df["config"].duplicated().any():
        raise InputError("two profiles measure the same GPU type and cluster size",
                         file=problem.file, field=f"training[{j.name}].profiles")
    return df


def _empty(columns: list[str]) -> pd.DataFrame:
    floats = ("rps", "hours", "gpus_per_node", "fabric_gbps_per_gpu")
    return pd.DataFrame({c: pd.Series(dtype=float if c in floats else
                                      ("int64" if c == "gpus" else object)) for c in columns})


def link_profiles(problem: Problem) -> pd.DataFrame:
    """The distinct ways offerings join GPUs: gpu, gpus_per_node, fabric_gbps_per_gpu (empty: no fabric)."""
    O = problem.offerings
    lp = pd.DataFrame({"gpu": O["gpu"].to_numpy(), "gpus_per_node": O["gpus_per_unit"].astype(float).to_numpy(),
                       "fabric_gbps_per_gpu": O["fabric_gbps_per_gpu"].astype(float).to_numpy()})
    return lp.drop_duplicates().reset_index(drop=True)


def _sized(kind: str, workload, offered: list[str], reference, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """Analytic candidates of one service (``kind="inference"``) or job, as a candidate table."""
    from . import sizing

    models, gpus, eff = reference
    if kind == "inference":
        df = sizing.inference_candidates(workload, offered, models=models, gpus=gpus, eff=eff)
        df, columns = df.assign(service=workload.name), INFERENCE_COLUMNS
    else:
        df = sizing.training_candidates(workload, offered, models=models, gpus=gpus, eff=eff, links=links)
        df, columns = df.assign(job=workload.name), TRAINING_COLUMNS
    df["config"] = [config_id(g, n, p) for g, n, p in zip(df["gpu"], df["gpus"], df["precision"])]
    if "layout" in df:
        # a replica laid out as attention data parallel + expert parallel names it: "B200 x4 fp4 dep4"
        df["config"] = [c + (f" {lay}" if str(lay).startswith("dep") else "")
                        for c, lay in zip(df["config"], df["layout"])]
    return df[columns]


def build_candidates(problem: Problem) -> Candidates:
    """Candidate tables for every workload of ``problem``.

    Workloads with ``profiles`` use exactly those; the others are sized
    analytically on every GPU type some offering provides.
    """
    from . import sizing

    eff = efficiency_values(problem)
    offered = sorted(problem.offerings["gpu"].unique())
    reference = None
    if any(not w.profiles for w in [*problem.services, *problem.jobs]):
        reference = sizing.load_reference(problem.spec, problem.file)
    inf_parts = [_profile_inference(problem, s) if s.profiles else _sized("inference", s, offered, reference)
                 for s in problem.services]
    links = link_profiles(problem)
    tr_parts = [_profile_training(problem, j) if j.profiles else _sized("training", j, offered, reference, links)
                for j in problem.jobs]
    inference = pd.concat(inf_parts, ignore_index=True) if inf_parts else _empty(INFERENCE_COLUMNS)
    training = pd.concat(tr_parts, ignore_index=True) if tr_parts else _empty(TRAINING_COLUMNS)
    inference["gpus"] = inference["gpus"].astype("int64")
    training["gpus"] = training["gpus"].astype("int64")
    return Candidates(inference=inference, training=training, efficiency=eff)
