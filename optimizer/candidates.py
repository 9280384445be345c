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
    job, config, gpu, gpus, precision, hours — wall-clock hours the job needs
    on a cluster of ``gpus`` GPUs at full speed (no interruptions).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .errors import InputError
from .load import Problem

INFERENCE_COLUMNS = ["service", "config", "gpu", "gpus", "precision", "bucket", "rps"]
TRAINING_COLUMNS = ["job", "config", "gpu", "gpus", "precision", "hours"]


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
        rows.append((j.name, config_id(p.gpu, p.gpus, j.precision), p.gpu, p.gpus, j.precision, float(p.hours)))
    df = pd.DataFrame(rows, columns=TRAINING_COLUMNS)
    if df["config"].duplicated().any():
        raise InputError("two profiles measure the same GPU type and cluster size",
                         file=problem.file, field=f"training[{j.name}].profiles")
    return df


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float if c in ("rps", "hours") else
                                      ("int64" if c == "gpus" else object)) for c in columns})


def build_candidates(problem: Problem) -> Candidates:
    """Candidate tables for every workload of ``problem``.

    Workloads with ``profiles`` use exactly those; the others are sized
    analytically on every GPU type some offering provides.
    """
    eff = efficiency_values(problem)
    offered = sorted(problem.offerings["gpu"].unique())
    inf_parts, tr_parts = [], []
    need_sizing = [s for s in problem.services if not s.profiles] + [j for j in problem.jobs if not j.profiles]
    reference = None
    if need_sizing:
        reference = _sizing_reference(problem)
    for s in problem.services:
        if s.profiles:
            inf_parts.append(_profile_inference(problem, s))
        else:
            from . import sizing

            models, gpus, seff = reference
            df = sizing.inference_candidates(s, offered, models=models, gpus=gpus, eff=seff)
            df = df.assign(service=s.name)
            df["config"] = [config_id(g, n, p) for g, n, p in zip(df["gpu"], df["gpus"], df["precision"])]
            inf_parts.append(df[INFERENCE_COLUMNS])
    for j in problem.jobs:
        if j.profiles:
            tr_parts.append(_profile_training(problem, j))
        else:
            from . import sizing

            models, gpus, seff = reference
            df = sizing.training_candidates(j, offered, models=models, gpus=gpus, eff=seff)
            df = df.assign(job=j.name)
            df["config"] = [config_id(g, n, p) for g, n, p in zip(df["gpu"], df["gpus"], df["precision"])]
            tr_parts.append(df[TRAINING_COLUMNS])
    inference = pd.concat(inf_parts, ignore_index=True) if inf_parts else _empty(INFERENCE_COLUMNS)
    training = pd.concat(tr_parts, ignore_index=True) if tr_parts else _empty(TRAINING_COLUMNS)
    inference["gpus"] = inference["gpus"].astype("int64")
    training["gpus"] = training["gpus"].astype("int64")
    return Candidates(inference=inference, training=training, efficiency=eff)


def _sizing_reference(problem: Problem):
    try:
        from . import sizing
    except ImportError:  # pragma: no cover - sizing ships with the package
        sizing = None
    if sizing is None or not hasattr(sizing, "load_reference"):
        names = [s.name for s in problem.services if not s.profiles] + [j.name for j in problem.jobs if not j.profiles]
        raise InputError(
            "the analytic sizing model is not available in this build; give measured `profiles` "
            f"for {', '.join(names)}",
            file=problem.file)
    return sizing.load_reference(problem.spec, problem.file)
