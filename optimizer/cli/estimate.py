"""``gpuopt estimate inference|training`` (owned by the sizing work, issue 3).

Size one configuration from the shipped catalogs: a model, a GPU type, a
number of GPUs and a precision. A configuration that does not fit is a
result (``fits: false``, exit 0), not an error; unknown names are input
errors (exit 2).
"""

from __future__ import annotations

import json
import math
import sys

import click

from ..errors import InputError
from ..vocabulary import PRECISIONS
from .common import EXIT_INFEASIBLE


def _reference(efficiency: tuple[str, ...], model_file: str | None = None):
    from ..sizing import load_efficiency, load_gpus, load_models
    from ..yamlio import read_yaml

    over = {}
    for item in efficiency:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError("expected NAME=VALUE", field="--efficiency", value=item)
        try:
            over[name.strip()] = float(value)
        except ValueError:
            raise InputError("efficiency values must be numbers", field=f"efficiency.{name.strip()}",
                             value=value) from None
    inline = None
    if model_file is not None:
        raw = read_yaml(model_file)
        # a file of one architecture, a list of them, or a problem-style {models: [...]}
        inline = raw.get("models") if isinstance(raw, dict) and "models" in raw else raw
        inline = [inline] if isinstance(inline, dict) else inline
        if not isinstance(inline, list) or not all(isinstance(m, dict) for m in inline):
            raise InputError("expected a model architecture, a list of them or {models: [...]}",
                             field="--model-file", value=model_file,
                             allowed="fields as in catalogs/models.yaml (docs/sizing.md)")
    try:
        models = load_models(inline, file=model_file)
    except InputError as exc:
        raise exc.with_file(model_file) if model_file else exc from None
    return models, load_gpus(), load_efficiency(over)


def _emit(result: dict, fmt: str, keys: list[str]) -> None:
    if fmt == "json":
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in result.items()}
        click.echo(json.dumps(clean, indent=2))
        return
    width = max(len(k) for k in result)
    for k in keys + [k for k in result if k not in keys]:
        v = result.get(k)
        if isinstance(v, float):
            v = f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"
        click.echo(f"{k:<{width}}  {'-' if v is None else v}")


_COMMON = [
    click.option("--model", "-m", required=True, help="Model name or alias (catalogs/models.yaml)."),
    click.option("--gpu", "-g", required=True, help="GPU type or alias (catalogs/gpus.csv)."),
    click.option("--gpus", "-n", type=click.IntRange(min=1), default=1, show_default=True,
                 help="GPUs per replica (inference, tensor-parallel degree) or in the cluster (training)."),
    click.option("--precision", "-p", type=click.Choice(PRECISIONS, case_sensitive=False), default="bf16",
                 show_default=True),
    click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True),
    click.option("--efficiency", "-e", multiple=True, metavar="NAME=VALUE",
                 help="Override a named efficiency factor (repeatable)."),
    click.option("--model-file", type=click.Path(dir_okay=False, exists=True), default=None,
                 help="YAML with an architecture (or a list, or {models: [...]}) in catalogs/models.yaml's "
                      "fields; --model names it (it may also replace a catalog model)."),
]


def _common(f):
    for opt in reversed(_COMMON):
        f = opt(f)
    return f


def parse_percentile(value: str | None) -> float | str:
    """``--percentile``: ``mean`` or a number in (0, 100); the schema's default when not given."""
    from ..schema import DEFAULT_SLO_PERCENTILE

    if value is None:
        return DEFAULT_SLO_PERCENTILE
    if value.strip().lower() == "mean":
        return "mean"
    try:
        p = float(value.strip().lower().lstrip("p"))
    except ValueError:
        p = math.nan
    if not 0 < p < 100:
        raise InputError("not a percentile", field="--percentile", value=value,
                         allowed="a number in (0, 100), e.g. 99, or 'mean'")
    return p


@click.group()
def estimate() -> None:
    """Estimate VRAM, latency and throughput of one configuration."""


@estimate.command("inference")
@_common
@click.option("--prompt-tokens", "-i", type=click.IntRange(min=1), required=True, help="Prompt length (ISL).")
@click.option("--output-tokens", type=click.IntRange(min=1), required=True, help="Output length (OSL).")
@click.option("--ttft-ms", type=click.FloatRange(min=0, min_open=True), default=None, help="TTFT SLO.")
@click.option("--tpot-ms", type=click.FloatRange(min=0, min_open=True), default=None, help="TPOT SLO.")
@click.option("--percentile", default=None, metavar="P|mean",
              help="Which TTFT and TPOT statistic the SLOs bound: a percentile in (0, 100) or 'mean'. Default: 99.")
@click.option("--rps", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Load: Poisson arrivals at this many requests/s.")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Load: this many requests always in flight (closed loop).")
@click.option("--layout", type=click.Choice(["best", "tp", "dep"], case_sensitive=False), default="best",
              show_default=True,
              help="Replica layout: tp (tensor parallel), dep (attention data parallel + expert parallel; MoE "
                   "models, 2+ GPUs) or best (the one that does most; the output names it).")
def inference(model, gpu, gpus, precision, fmt, efficiency, model_file, prompt_tokens, output_tokens, ttft_ms, tpot_ms,
              percentile, rps, concurrency, layout):
    """One inference replica of GPUS GPUs under a load.

    The replica is tensor parallel, or for an MoE model on 2 or more GPUs
    attention data parallel + expert parallel (DEP); --layout best (the
    default) takes whichever does more and names it in `layout`.
    With --rps or --concurrency: mean and p99 TTFT and TPOT at that load.
    Otherwise, with SLOs: the most requests/s whose latencies meet them at
    the percentile (what the planner uses per replica); without: the knee
    of the throughput curve.
    """
    from ..schema import is_power_of_two
    from ..sizing import estimate_inference, resolve_gpu, resolve_model

    if not is_power_of_two(gpus):
        raise InputError("GPUs per replica must be a power of two", field="--gpus", value=gpus)
    models, gpu_table, eff = _reference(efficiency, model_file)
    arch = resolve_model(model, models, field="--model")
    spec = resolve_gpu(gpu, gpu_table, field="--gpu")
    if rps is not None and concurrency is not None:
        raise InputError("give one load, not both", field="--rps/--concurrency", value=f"{rps:g}/{concurrency}",
                         allowed="--rps R (open loop) or --concurrency C (closed loop)")
    statistic = parse_percentile(percentile)
    layout = layout.lower()
    if layout == "dep" and (not arch.is_moe or gpus < 2):
        raise InputError("the dep layout shards routed experts: it needs an MoE model and at least 2 GPUs",
                         field="--layout", value=layout, allowed="tp or best" if not arch.is_moe else "--gpus 2 or more")
    r = estimate_inference(arch, spec, gpus, precision.lower(), prompt_tokens, output_tokens, eff,
                           ttft_ms=ttft_ms, tpot_ms=tpot_ms, percentile=statistic, rps=rps, concurrency=concurrency,
                           layout=layout)
    r["slo"] = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "percentile": statistic}
    _emit(r, fmt, ["fits", "meets_slo", "layout", "load", "rps", "ttft_ms", "tpot_ms", "ttft_ms_p99", "tpot_ms_p99",
                   "output_tokens_per_s", "capacity_rps", "utilisation", "mean_batch", "queue_ms", "max_batch",
                   "vram_gb_per_gpu"])
    if not r["meets_slo"]:  # nothing to deploy: exit 1, like a problem with no plan
        sys.exit(EXIT_INFEASIBLE)


@estimate.command("training")
@_common
@click.option("--tokens", "-t", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Training tokens (e.g. 1e11).")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=None,
              help="GPUs per machine. Default: train_scaling_base_gpus (8).")
@click.option("--fabric-gbps", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Fabric between machines, Gbit/s per GPU (infiniband/efa/roce 400; 12.5 for 100 Gbit/s "
                   "Ethernet shared by 8 GPUs). Default: train_network_gbs_per_gpu x 8.")
@click.option("--method", type=click.Choice(["full", "lora", "qlora"], case_sensitive=False), default="full",
              show_default=True, help="Train every weight, or LoRA/QLoRA adapters beside frozen weights.")
@click.option("--lora-rank", type=click.IntRange(min=1), default=16, show_default=True,
              help="Rank of the LoRA/QLoRA adapters.")
@click.option("--framework", type=click.Choice(["any", "megatron", "fsdp"], case_sensitive=False), default="any",
              show_default=True, help="Training framework: its layouts and fp8 speed-up (any: the best layout).")
@click.option("--sequence-length", type=click.IntRange(min=1), default=None,
              help="Tokens per sequence. Default: train_sequence_tokens.")
@click.option("--global-batch-tokens", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Tokens per optimizer step. Default: train_global_batch_tokens.")
def training(model, gpu, gpus, precision, fmt, efficiency, model_file, tokens, gpus_per_node, fabric_gbps,
             method, lora_rank, framework, sequence_length, global_batch_tokens):
    """A training run of TOKENS tokens on a cluster of GPUS GPUs."""
    from ..sizing import estimate_training, resolve_gpu, resolve_model
    from ..sizing.training import Network, default_network

    models, gpu_table, eff = _reference(efficiency, model_file)
    arch = resolve_model(model, models, field="--model")
    spec = resolve_gpu(gpu, gpu_table, field="--gpu")
    base = default_network(gpus, eff)
    net = Network(gpus_per_node or base.gpus_per_node, fabric_gbps or base.fabric_gbps_per_gpu)
    over = {k: float(v) for k, v in (("train_sequence_tokens", sequence_length),
                                     ("train_global_batch_tokens", global_batch_tokens)) if v is not None}
    eff = eff.with_overrides(over) if over else eff
    r = estimate_training(arch, spec, gpus, precision.lower(), tokens, eff, net, method.lower(), lora_rank,
                          framework.lower())
    r["gpus_per_node"], r["fabric_gbps_per_gpu"] = net.gpus_per_node, net.fabric_gbps_per_gpu
    _emit(r, fmt, ["fits", "method", "framework", "vram_gb_per_gpu", "tokens_per_s", "hours", "gpu_hours", "mfu",
                   "layout"])
    if not r["fits"]:
        sys.exit(EXIT_INFEASIBLE)
