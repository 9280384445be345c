"""Compare the analytic sizing model with measured figures.

Usage::

    python bench/calibrate.py [bench/data/calibration_figures.csv] [--rows] [--set NAME=VALUE ...]
    python bench/calibrate.py --fit [--factors a,b,...]      # fit, then leave one source out

Reads a CSV with columns ``kind, model, gpu, gpu_count, precision, metric,
value, unit, conditions, source`` (kinds ``infer``, ``train``, ``memory``),
predicts each figure with :mod:`optimizer.sizing` at the shipped efficiency
defaults (plus any ``--set`` overrides) and prints, per kind and per metric,
the median and worst relative error ``|predicted - measured| / measured``.
``--rows`` also prints every row.

The measured figures ship in ``bench/data/`` (provenance in its README);
``tests/test_calibration.py`` runs this on them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optimizer.errors import InputError  # noqa: E402
from optimizer.sizing import architecture as A  # noqa: E402
from optimizer.sizing import inference as I  # noqa: E402
from optimizer.sizing import training as T  # noqa: E402
from optimizer.sizing.efficiency import load_efficiency  # noqa: E402
from optimizer.sizing.hardware import load_gpus, resolve_gpu  # noqa: E402

# GPU names of the calibration set that are not catalog aliases.
GPU_NAMES = {
    "A100-SXM4": "A100-80GB",      # Selene nodes are DGX A100 80GB (see the row's conditions)
    "various (vLLM)": "H100-SXM",  # weights-only rows; the GPU does not matter
    "GH200-480GB": "GH200",        # TensorRT-LLM names the superchip by its 480 GB of CPU memory
}

# Architectures of the calibration set that are not in the shipped catalog
# (GPT-style: tied embeddings, plain 4h GeLU MLP; biases and learned
# positions ignored, < 0.1 % of parameters).
EXTRA_MODELS = [
    {"name": "gpt-530b", "aliases": ["GPT-530B", "MT-NLG-530B"], "layers": 105, "hidden_size": 20480,
     "heads": 128, "kv_heads": 128, "head_dim": 160, "ffn_size": 81920, "vocab_size": 51200,
     "tied_embeddings": True, "gated_mlp": False, "source": "Narayanan et al. 2021 Table 1; MT-NLG paper"},
]

# MosaicML MPT (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml, read 2026-11-24): GPT-style, tied
# embeddings, plain 4h MLP, ALiBi (no position table), vocab 50368.
def _mpt(size: str, layers: int, d: int, heads: int) -> dict:
    return {"name": f"mpt-{size}", "aliases": [f"MPT-{size}"], "layers": layers, "hidden_size": d, "heads": heads,
            "kv_heads": heads, "head_dim": d // heads, "ffn_size": 4 * d, "vocab_size": 50368,
            "tied_embeddings": True, "gated_mlp": False,
            "source": f"mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-{size}.yaml"}


# NeMo's GPT-3 5B (NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/5b.yaml, read 2026-11-25):
# 24 layers, hidden 4096, FFN 4h, 32 heads, GPT-2 BPE vocabulary (50,257) padded to a multiple of 128.
EXTRA_MODELS.append({"name": "gpt-3-5b", "aliases": ["GPT-3-5B", "GPT3-5B"], "layers": 24, "hidden_size": 4096,
                     "heads": 32, "kv_heads": 32, "head_dim": 128, "ffn_size": 16384, "vocab_size": 50304,
                     "tied_embeddings": True, "gated_mlp": False,
                     "source": "NVIDIA/NeMo-Framework-Launcher conf/training/gpt3/5b.yaml"})

# MPT-7B and MPT-30B, the two MosaicML released, are catalog models (catalogs/models.yaml, from their HF
# config.json); the sizes only llm-foundry's yamls define stay here.
EXTRA_MODELS += [_mpt("1b", 24, 2048, 16), _mpt("3b", 32, 2560, 20), _mpt("13b", 40, 5120, 40),
                 _mpt("70b", 80, 8192, 64)]

#: set to True to predict every training row with the best layout of any framework (the pre-2026-11-25 rule)
FRAMEWORKS_AS_ANY = False
#: set to False to predict the 2020-21 Megatron-LM / MT-NLG rows with today's software (TP communication
#: overlap, context parallelism, interleaving under DeepSpeed) instead of what those runs had
SOFTWARE_OF_THE_RUN = True

#: models the TensorRT-LLM overview ran from their makers' own 4-bit checkpoints whatever its column says:
#: gpt-oss ships MXFP4 experts (every other weight bf16) and is in neither of the overview's ModelOpt
#: lists (FP4 Models, FP8 Models). Blackwell multiplies them natively (fp4 here); Hopper dequantises
#: them to bf16 in the Triton MoE kernels ("Hopper | bf16 | mxfp4 | TRITON | simulated mxfp4, HGMMA",
#: NVIDIA/TensorRT-LLM examples/models/core/gpt_oss/README.md) and keeps the KV cache in the checkpoint's
#: dtype ("kv_cache_config: dtype: fp8  # Hopper: use auto"): the weight-only int4 (W4A16) path.
MXFP4_CHECKPOINTS = ("gpt-oss-20b", "gpt-oss-120b")

PRECISIONS = {"FP8": "fp8", "FP16": "fp16", "BF16": "bf16", "FP16/mixed": "fp16", "INT8": "int8", "FP4": "fp4",
              "NVFP4": "fp4"}


def _model_name(raw: str) -> str:
    # "Llama-3.1-8B (R1-Distill)" -> "Llama-3.1-8B"; "Llama-3-8B-Instruct" is an alias.
    return re.sub(r"\s*\(.*\)$", "", raw).strip()


def _num(pattern: str, text: str, default=None):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else default


def megatron_flops_per_token(arch, s: float) -> float:
    """Narayanan et al. 2021 hardware FLOPs per token with full recompute: 96 L h^2 (1 + s/6h + V/16Lh)."""
    L, h, V = arch.layers, arch.hidden_size, arch.vocab_size
    return 96.0 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))


def predict(row, models, gpus, eff) -> tuple[float | None, str]:
    """Predicted value of one calibration row (and a note)."""
    arch = A.resolve_model(_model_name(row.model), models)
    gpu = resolve_gpu(GPU_NAMES.get(row.gpu, row.gpu), gpus)
    prec = PRECISIONS[row.precision]
    if arch.name in MXFP4_CHECKPOINTS and row.kind == "infer":
        prec = "fp4" if gpu.supports("fp4") else "int4"
    cond = str(row.conditions)
    n = int(row.gpu_count)
    if row.kind in ("infer", "memory"):
        tp = int(_num(r"TP=(\d+)", cond, n))
        free = _num(r"kv_cache_free_gpu_mem_fraction ~?([0-9.]+)", cond)
        if free:  # the engine's own setting for the run (trtllm-bench)
            eff = eff.with_overrides({"kv_cache_free_fraction": free})
        rep = I.replica(arch, gpu, tp, prec, eff)
        if rep is None:
            return None, "precision unsupported"
        isl, osl = _num(r"ISL=(\d+)", cond), _num(r"OSL=(\d+)", cond)
        if row.metric == "static_batch_output_throughput_per_gpu":
            batch = int(_num(r"batch=(\d+)", cond))
            note = "" if rep.max_batch(int(isl), int(osl)) >= batch else \
                f"batch {batch} > modelled C_max {rep.max_batch(int(isl), int(osl))}"
            return rep.static_batch(batch, int(isl), int(osl))["output_tokens_per_s_per_gpu"], note
        if row.metric in ("offline_output_throughput", "offline_output_throughput_per_gpu"):
            # trtllm-bench offline max-throughput (infinite request rate): the whole TP group with its
            # batch full, the replica's capacity
            # DEP=n: attention data parallel + expert parallel over n GPUs (every rank runs attention on
            # its own sequences with a full copy of the attention weights and holds 1/n of the experts)
            dep = _num(r"DEP=(\d+)", cond)
            layout = "dep" if dep else "tp"
            tp = int(dep) if dep else tp
            r = I.estimate_inference(arch, gpu, tp, prec, int(isl), int(osl), eff, layout=layout)
            if not r["fits"]:
                return None, f"does not fit: {r.get('reason', '')}"
            per = tp if row.metric.endswith("_per_gpu") else 1
            return r["capacity_rps"] * int(osl) / per, r["layout"] if dep else ""
        if row.metric == "ttft_batch1":
            return float(rep.prefill_s(int(isl))) * 1e3, ""
        gib = I.GIB
        if row.metric == "weights_loaded":
            return rep.weights_gpu / gib, ""
        if row.metric == "activation_peak_profiled":
            return rep.workspace_gpu / gib, ""
        if row.metric == "gpu_total_memory_reported":
            return gpu.vram_bytes / gib, ""
        if row.metric == "kv_cache_allocated":
            # vLLM's convention: the KV cache gets gpu_memory_utilization x total memory minus the rest
            util = _num(r"gpu_memory_utilization ([0-9.]+)", cond)
            return (gpu.vram_bytes * util - rep.static_gpu) / gib, ""
        return None, f"unknown metric {row.metric}"
    if row.kind == "train":
        seq = _num(r"seq (\d+)", cond, eff["train_sequence_tokens"])
        over = {"train_sequence_tokens": seq}
        gb = _num(r"global batch (\d+)", cond)
        if gb:
            # "global batch 4194304 tokens" (llm-foundry) is in tokens; a bare number is sequences
            over["train_global_batch_tokens"] = gb if re.search(r"global batch \d+ tokens", cond) else gb * seq
        mtok = _num(r"(\d+)M tokens/batch", cond)
        if mtok:
            over["train_global_batch_tokens"] = mtok * 2**20
        # Scale-out network of the measured cluster: "RoCE 400 Gb/s" per GPU (Llama 3);
        # Selene (DGX A100) has one 200 Gb/s HDR InfiniBand port per GPU.
        gbit = _num(r"(\d+) Gb/s", cond)
        if gbit:
            over["train_network_gbs_per_gpu"] = gbit / 8
        elif "Selene" in cond:
            over["train_network_gbs_per_gpu"] = 25.0
        if SOFTWARE_OF_THE_RUN and re.search(r"Narayanan et al\. 2021|Megatron-DeepSpeed", f"{cond} {row.source}"):
            # runs of 2020-21 (Megatron-LM PTD-P, MT-NLG) had neither TP communication overlap (Transformer
            # Engine userbuffers, in NeMo since 2023: NVIDIA/NeMo PR #6362) nor context parallelism
            # (Megatron-Core, 2024); the software of the run, not a fit
            over["train_tp_comm_overlap"] = 0.0
            over["train_max_cp"] = 1.0
        if SOFTWARE_OF_THE_RUN and "Megatron-DeepSpeed" in cond:
            # DeepSpeed's pipeline engine runs plain 1F1B, without Megatron's interleaved schedule
            over["train_max_virtual_stages"] = 1.0
        e = eff.with_overrides(over)
        method = re.search(r"method=(full|lora|qlora)", cond)
        rank = _num(r"lora_rank=(\d+)", cond, 16)
        # the framework that ran it: NeMo/Megatron (TP, PP, distributed optimizer) or FSDP (llm-foundry)
        said = f"{cond} {row.source}"
        framework = "fsdp" if "FSDP" in said else "megatron" if re.search(r"NeMo|Megatron", said) else "any"
        if FRAMEWORKS_AS_ANY:
            framework = "any"
        r = T.estimate_training(arch, gpu, n, prec, 1.0, e, method=method.group(1) if method else "full",
                                lora_rank=int(rank), framework=framework)
        if not r["fits"]:
            return None, r.get("reason", "does not fit")
        tps = r["tokens_per_s"]
        note = r["layout"]
        if row.metric == "mfu":
            return r["mfu"] * 100.0, note
        if row.metric == "model_tflops_per_gpu":
            return T.flops_per_token(arch, seq) * tps / n / 1e12, note
        if row.metric == "achieved_tflops_per_gpu":
            # Megatron reports hardware FLOPs incl. recomputation (their eq. 3).
            return megatron_flops_per_token(arch, seq) * tps / n / 1e12, note
        if row.metric == "est_days_for_300B_tokens":
            return 300e9 / tps / 86400.0, note
        if row.metric == "tokens_per_s_per_gpu":
            return tps / n, note
        if row.metric == "iteration_time":
            return over["train_global_batch_tokens"] / tps, note
        return None, f"unknown metric {row.metric}"
    return None, f"unknown kind {row.kind}"


def evaluate(csv_path: str, overrides: dict[str, float] | None = None) -> pd.DataFrame:
    """Every row of ``csv_path`` with ``predicted`` and ``error`` (relative, signed)."""
    data = pd.read_csv(csv_path)
    eff = load_efficiency(overrides or {})
    models = A.load_models(EXTRA_MODELS)
    gpus = load_gpus()
    preds, notes = [], []
    for row in data.itertuples(index=False):
        try:
            p, note = predict(row, models, gpus, eff)
        except InputError as exc:
            p, note = None, str(exc)
        preds.append(p)
        notes.append(note)
    data["predicted"] = preds
    data["error"] = (data["predicted"] - data["value"]) / data["value"]
    data["note"] = notes
    return data


def summary(data: pd.DataFrame, by: str) -> pd.DataFrame:
    ok = data.dropna(subset=["error"])
    g = ok.assign(abs_error=ok["error"].abs()).groupby(by)["abs_error"]
    return pd.DataFrame({"rows": g.size(), "median_error_pct": g.median() * 100,
                         "worst_error_pct": g.max() * 100}).round(1)


#: the inference factors ``--fit`` searches by default (the ones the throughput and TTFT rows identify)
FIT_FACTORS = ["decode_bw_fraction", "kv_bw_fraction", "decode_mfu", "prefill_mfu_8bit", "prefill_mfu_16bit",
               "comm_bw_fraction", "allreduce_latency_us"]
#: coordinate search: each factor is tried at these multiples of its current value, two sweeps
FIT_STEPS = (0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4)


def _median_error(paths: list[str], over: dict[str, float], kind: str = "infer") -> float:
    errs = pd.concat([evaluate(p, over) for p in paths])
    errs = errs[(errs["kind"] == kind) & errs["error"].notna()]
    return float(errs["error"].abs().median())


def fit(paths: list[str], names: list[str], sweeps: int = 2) -> tuple[dict[str, float], float]:
    """Coordinate search for the factors ``names`` minimising the median |error| of the inference rows.

    Each sweep tries every factor at :data:`FIT_STEPS` times its current
    value (fractions capped at 1), keeping the best, one factor at a time.
    Returns the fitted values and their median |error|.
    """
    base = load_efficiency()
    cur = {n: float(base[n]) for n in names}
    best = _median_error(paths, cur)
    for _ in range(sweeps):
        for n in names:
            start = cur[n]  # the steps are multiples of the value this factor had when its turn began
            for step in FIT_STEPS:
                trial = dict(cur)
                trial[n] = start * step
                if n.endswith("_fraction") or n.endswith("_mfu") or "mfu" in n:
                    trial[n] = min(trial[n], 1.0)
                e = _median_error(paths, trial)
                if e < best - 1e-9:
                    best, cur = e, trial
    return cur, best


def loso(paths: list[str], names: list[str]) -> pd.DataFrame:
    """Leave one source (file) out: fit on the others, measure on it; plus the in-sample fit on all."""
    rows = []
    fitted_all, _ = fit(paths, names)
    for p in paths:
        rest = [q for q in paths if q != p]
        shipped = _median_error([p], {})
        in_sample = _median_error([p], fitted_all)
        held = _median_error([p], fit(rest, names)[0]) if rest else float("nan")
        rows.append({"source": Path(p).name, "shipped_pct": shipped * 100, "fit_on_all_pct": in_sample * 100,
                     "fit_without_it_pct": held * 100})
    out = pd.DataFrame(rows).round(1)
    out.attrs["fitted"] = fitted_all
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="?", default=str(Path(__file__).resolve().parent / "data" / "calibration_figures.csv"))
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override an efficiency factor (repeatable)")
    ap.add_argument("--fit", action="store_true",
                    help="fit the inference factors on every file given (default: both shipped files) and print "
                         "in-sample and leave-one-source-out median errors")
    ap.add_argument("--factors", default=",".join(FIT_FACTORS), help="comma-separated factors for --fit")
    ap.add_argument("more", nargs="*", help="further CSV files (with --fit)")
    args = ap.parse_args(argv)
    if args.fit:
        here = Path(__file__).resolve().parent / "data"
        given = [args.csv] + args.more if args.csv != ap.get_default("csv") or args.more else []
        paths = given or [str(here / "calibration_figures.csv"), str(here / "calibration_more.csv")]
        table = loso(paths, [f.strip() for f in args.factors.split(",") if f.strip()])
        print("Fitted on all files:", {k: round(v, 4) for k, v in table.attrs["fitted"].items()})
        print("Median |error| of inference rows, per source (file):")
        print(table.to_string(index=False))
        return 0
    over = {}
    for item in args.set:
        k, _, v = item.partition("=")
        over[k.strip()] = float(v)
    data = evaluate(args.csv, over)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    if args.rows:
        cols = ["kind", "model", "gpu", "gpu_count", "precision", "metric", "value", "predicted", "error", "note"]
        show = data[cols].copy()
        show["conditions"] = data["conditions"].str.extract(r"(TP=\d+; (?:batch=\d+; )?ISL=\d+(?:; OSL=\d+)?)")[0]
        show["predicted"] = show["predicted"].astype(float).round(2)
        show["error"] = (show["error"] * 100).round(1)
        print(show.to_string(index=False))
        print()
    missing = data[data["error"].isna()]
    if len(missing):
        print(f"{len(missing)} rows not predicted:")
        print(missing[["kind", "model", "gpu", "metric", "note"]].to_string(index=False))
        print()
    print("By kind (|predicted - measured| / measured):")
    print(summary(data, "kind").to_string())
    print()
    print("By metric:")
    print(summary(data, ["kind", "metric"]).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
