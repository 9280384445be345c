"""Training sizing: memory per GPU, a parallel layout that fits, and wall-clock time.

For a cluster of ``n`` GPUs the model enumerates layouts -- tensor-parallel
degree ``t`` (inside one node, with sequence parallelism), context-parallel
degree ``c`` (Megatron/NeMo: each GPU holds s/c tokens of every sequence),
pipeline degree ``p`` (powers of two and the layer count's divisors) with
``v`` model chunks per stage (Megatron's interleaved schedule; v = 1 is
plain 1F1B), data-parallel degree ``d = n // (t c p)`` (GPUs left over stay
idle), ZeRO stage 1 or 3 (FSDP) and activation recomputation none, full or
selective -- keeps those that fit in memory and picks the fastest.

Memory per GPU (u = ceil(L/(p v)) p v / L, the fullest stage against the
average; Psi = total params x u / (t p))::

    ZeRO-1:  (weights+grads bytes) x Psi + optimizer bytes x Psi / (d c)
    ZeRO-3:  (weights+grads + optimizer bytes) x Psi / d + two layers' weights (gathered)   (c = 1)
    activations, no recompute:   k x a x s x b x h x L / (t c)   (1F1B keeps L layers' worth on stage 1)
    activations, full recompute: 2 x s x b x h x L x k / (t c) + a x s x b x h / (t c) (one layer live)
    activations, selective:      a_sel x s x b x h x L x k / (t c)  (norms and SwiGLU products recomputed)
        k = u (1F1B), u x (1 + (p - 1)/(p v)) interleaved (Korthikanti et al. 2022)
    + fp32 logits 4 x s x b x V / (t c) + misc

LoRA and QLoRA (``method``): the base weights are frozen (16-bit, or
``qlora_weight_bytes_per_param`` for QLoRA's 4-bit body) with no gradients
or optimizer state; rank-r adapters on every linear layer of every layer
(A = L x r x (7h + 2 a d + 2 k d + 3f) parameters) carry weights, gradients
and Adam state (train_param_grad_bytes + train_optimizer_bytes each)::

    ZeRO-1:  base bytes x Psi + (pg + opt) x A / (t p)
    ZeRO-3:  base bytes x Psi / d + gathered layers + (pg + opt) x A / (t p d)

Time, per token through all L layers of one tensor x context group::

    FLOPs per token = 6 x active params + 6 x L x s x (attention pair FLOPs / 4)   (causal attention)
                      (LoRA: 4 x active params, no weight gradients of the base; + 6 x A)
    speed      = peak_bf16 x MFU(generation) x [fp8 speed-up] x [QLoRA factor] x [FSDP factor]  (per GPU)
    compute    = FLOPs per token x [recompute factor] / speed / (t c)
    TP         = (1 - train_tp_comm_overlap) x L x (4 | 6 with full recompute) x 2 (2h bytes) (t-1)/t
                 / (link x train_comm_bw_fraction) / c          (overlap only on a Megatron/NeMo stack)
    CP         = L / s x max(0, 3 (c-1) (s/c) x K/V bytes per token and layer / t / (link x fraction)
                                  - one layer's attention of a sequence (fwd + bwd) / (t c) / speed)
    tokens/s   = d p x scaling(n) / ((compute + TP + CP) x u) / bubble, less exposed DP traffic
    scaling(n) = 1 / (1 + loss per doubling x log2(n / base GPUs))      (1 up to one node)
    bubble     = (m + (p - 1)/v) / m,  m = global batch sequences / (micro-batch x d)
    DP traffic = (2 for ZeRO-1, 3 for ZeRO-3) x Psi x 2 bytes x (d c - 1)/(d c) per step over the network
                 (NVLink inside one node, else the fabric's Gbit/s per GPU / 8), hidden behind
                 train_dp_comm_overlap x compute, the rest exposed
    hours      = tokens / tokens per second / 3600
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .architecture import ModelArch, arch_stats
from ..errors import unknown_name
from .efficiency import Efficiency
from .hardware import GpuSpec

GIB = 2.0**30


def _pow2_upto(n: int) -> list[int]:
    return [2**i for i in range(int(math.log2(n)) + 1)] if n >= 1 else []


def scaling_efficiency(gpus, eff: Efficiency):
    """Scale-out efficiency: 1 up to ``train_scaling_base_gpus``, then 1/(1 + loss x doublings)."""
    doublings = np.maximum(0.0, np.log2(np.asarray(gpus, float) / eff["train_scaling_base_gpus"]))
    return 1.0 / (1.0 + eff["train_scaling_loss_per_doubling"] * doublings)


METHODS = ("full", "lora", "qlora")


def lora_params(arch: ModelArch, rank: int) -> float:
    """Adapter parameters of a rank-``rank`` LoRA on every linear layer of every layer.

    Each adapted matrix of shape (in, out) gets A (in x r) and B (r x out):
    r x (in + out). Per layer, attention: q (h, a d), k and v (h, k d),
    o (a d, h): r x (4h + 2ad + 2kd), d the head dimension (``hidden_size /
    heads`` unless the model states it). MLP of width f: gate and up (h, f)
    and down (f, h), r x 3(h + f) (without a gate, r x 2(h + f)). Dense
    layers adapt their MLP (``ffn_size``); MoE layers adapt the shared
    experts' path only (routed experts frozen; f = shared experts x expert
    width, none without shared experts). A model that interleaves dense and
    MoE layers (``moe_layer_step``, ``dense_layers``) counts each kind apart.
    """
    h, d = arch.hidden_size, arch.d
    attention = 4 * h + 2 * arch.heads * d + 2 * arch.kv_heads * d
    matrices = 3 if arch.gated_mlp else 2

    def mlp(f: int) -> int:
        return matrices * (h + f) if f else 0

    n_moe = arch_stats(arch).moe_layers if arch.is_moe else 0
    shared = arch.shared_experts * (arch.expert_ffn_size or arch.ffn_size)
    per_dense, per_moe = attention + mlp(arch.ffn_size), attention + mlp(shared)
    return float(rank * ((arch.layers - n_moe) * per_dense + n_moe * per_moe))


def flops_per_token(arch: ModelArch, seq_len: float, method: str = "full", lora_rank: int = 16) -> float:
    """Training FLOPs per token: 6 x active params (LoRA: 4, no base weight gradients; plus 6 x the
    adapters) + causal attention (forward + backward)."""
    st = arch_stats(arch)
    # forward attention per token = layers x (s/2 keys) x pair FLOPs; x3 for backward.
    attn = 1.5 * arch.layers * seq_len * st.attn_pair_flops_prefill
    if method == "full":
        return 6.0 * st.params_active + attn
    return 4.0 * st.params_active + 6.0 * lora_params(arch, lora_rank) + attn


def training_mfu(gpu: GpuSpec, eff: Efficiency) -> float:
    """Single-node MFU of the GPU's generation (``train_mfu_<generation>``)."""
    key = f"train_mfu_{gpu.generation}"
    return eff[key] if key in eff else eff["train_mfu_ampere"]


@dataclass(frozen=True)
class Network:
    """How a training cluster's GPUs are joined.

    ``gpus_per_node`` GPUs share a node (NVLink, Infinity Fabric or PCIe:
    the GPU's own link bandwidth); nodes are joined by a fabric of
    ``fabric_gbps_per_gpu`` Gbit/s per GPU and direction (``None``: the
    cluster is one node). Tensor parallelism stays inside a node.
    """

    gpus_per_node: int
    fabric_gbps_per_gpu: float | None = None

    def link_bytes_s(self, gpu: GpuSpec, gpus: int) -> float:
        """Bandwidth per GPU for data-parallel traffic: the GPU's link inside one node, else the
        slower of that and the fabric (Gbit/s / 8 = GB/s)."""
        if gpus <= self.gpus_per_node or self.fabric_gbps_per_gpu is None:
            return gpu.link_bytes_s
        return min(gpu.link_bytes_s, self.fabric_gbps_per_gpu * 1e9 / 8.0)


def default_network(gpus: int, eff: Efficiency) -> Network:
    """Without an offering to say how GPUs are joined: nodes of ``train_scaling_base_gpus`` GPUs on a
    fabric of ``train_network_gbs_per_gpu`` GB/s per GPU (the named defaults)."""
    return Network(int(eff["train_scaling_base_gpus"]), eff["train_network_gbs_per_gpu"] * 8.0)


#: training frameworks and the layouts each can run
FRAMEWORKS = ("any", "megatron", "fsdp")


def _framework_allows(framework: str, t: int, p: int, d: int, zero: int) -> bool:
    """Whether ``framework`` runs tensor degree ``t``, pipeline degree ``p`` and ZeRO stage ``zero``.

    Megatron/NeMo: tensor and pipeline parallelism with the distributed
    optimizer (ZeRO-1), never ZeRO-3. PyTorch FSDP (full shard, as
    llm-foundry runs it): ZeRO-3 over plain data parallelism, no tensor or
    pipeline parallelism. ``any``: the best layout of either.
    """
    if framework == "megatron":
        return d == 1 or zero == 1
    if framework == "fsdp":
        return t == 1 and p == 1 and (d == 1 or zero == 3)
    return True


def _pipeline_degrees(layers: int, most: int) -> list[int]:
    """Pipeline degrees tried: powers of two and every divisor of the layer count (stages of equal
    layers, e.g. Megatron's PP 35 for 105 layers), up to ``most`` and the layer count."""
    top = min(most, layers)
    return sorted(set(_pow2_upto(top)) | {q for q in range(1, top + 1) if layers % q == 0})


def _virtual_stages(layers: int, p: int, max_v: int) -> list[int]:
    """Model chunks per pipeline stage of an interleaved schedule: 1 (plain 1F1B) and every v from 2 to
    ``max_v`` that leaves each chunk at least one layer. Layers that do not split evenly over p x v
    chunks make the fullest stage the slowest (:func:`layouts`)."""
    if p == 1:
        return [1]
    return list(range(1, min(layers // p, max_v) + 1))


def layouts(arch: ModelArch, gpu: GpuSpec, gpus: int, precision: str, eff: Efficiency,
            network: Network | None = None, method: str = "full", lora_rank: int = 16,
            framework: str = "any") -> dict:
    """Every layout for ``gpus`` GPUs with its memory per GPU and throughput (arrays).

    ``network`` says how the GPUs are joined (default: :func:`default_network`);
    ``framework`` limits the layouts to those it runs (:func:`_framework_allows`).
    Returns a dict of equal-length arrays: ``t, c, p, v, d, zero, recompute``
    (tensor, context, pipeline degree, model chunks per pipeline stage,
    data-parallel degree), ``vram_bytes`` (per GPU), ``fits``,
    ``tokens_per_s`` (cluster).
    """
    network = network or default_network(gpus, eff)
    st = arch_stats(arch)
    L, h, V = arch.layers, arch.hidden_size, arch.vocab_size
    s = eff["train_sequence_tokens"]
    b = eff["train_micro_batch_seqs"]
    grid = []
    for t in _pow2_upto(min(gpus, int(eff["train_max_tp"]), arch.heads, network.gpus_per_node)):
        # context parallelism: each of c GPUs holds s/c tokens of every sequence (in 2c chunks for the
        # causal load balance, so s must split into 2c equal chunks)
        for c in _pow2_upto(min(gpus // t, int(eff["train_max_cp"]))):
            if c > 1 and (s % (2 * c) or framework == "fsdp"):
                continue
            for p in _pipeline_degrees(L, gpus // (t * c)):
                d = gpus // (t * c * p)
                for v in _virtual_stages(L, p, int(eff["train_max_virtual_stages"])):
                    for zero in ((1, 3) if d * c > 1 else (1,)):
                        if not _framework_allows(framework, t, p, d, zero) or (c > 1 and zero == 3):
                            continue
                        for rec in (0, 1, 2):  # none, full, selective
                            grid.append((t, c, p, v, d, zero, rec))
    t, c, p, v, d, zero, rec = (np.array(col, dtype=float) for col in zip(*grid))

    # -- memory per GPU -------------------------------------------------------
    pg, opt = eff["train_param_grad_bytes"], eff["train_optimizer_bytes"]
    act_b = 2.0
    if precision == "fp32":  # fp32 weights+grads, Adam m+v without a separate master copy
        pg, opt, act_b = 2 * pg, max(opt - 4.0, 0.0), 4.0
    # uneven stages: when the layers do not split evenly over p x v chunks, a stage holds v chunks of
    # ceil(L/(p v)) layers at most; the fullest stage holds `uneven` x the average and sets the pace
    uneven = np.ceil(L / (p * v)) * p * v / L
    psi = st.params_total * uneven / (t * p)
    dc = d * c          # the distributed optimizer shards over data- and context-parallel ranks alike
    if method == "full":
        live = 2.0 * (st.params_total / L) / t * (pg / 2.0)       # ZeRO-3: gathered layers in flight
        states = np.where(zero == 3, (pg + opt) * psi / d + live, pg * psi + opt * psi / dc)
    else:  # frozen base (no gradients, no optimizer state) + trained adapters
        emb = st.params_embedding
        body_b = eff["qlora_weight_bytes_per_param"] if method == "qlora" else act_b
        base_b = (body_b * (st.params_total - emb) + act_b * emb) / st.params_total   # bytes per base weight
        live = 2.0 * (st.params_total / L) / t * base_b
        adapters = (pg + opt) * lora_params(arch, lora_rank) / (t * p)
        states = np.where(zero == 3, base_b * psi / d + live + adapters / d, base_b * psi + adapters)
    sbh = s * b * h * act_b / 2.0 / c    # context parallelism: s/c tokens of each sequence per GPU
    # 1F1B keeps L layers' worth of micro-batches on the first stage; the interleaved schedule
    # L x (1 + (p - 1)/(p v)) (Korthikanti et al. 2022, interleaved pipelining)
    held = np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0) * uneven
    acts_full = eff["train_act_bytes_per_sbh"] * sbh * L * held / t
    acts_rec = 2.0 * sbh * L * held / t + eff["train_act_bytes_per_sbh"] * sbh / t
    acts_sel = eff["train_act_bytes_per_sbh_selective"] * sbh * L * held / t
    acts = np.select([rec == 1, rec == 2], [acts_rec, acts_sel], acts_full) + 4.0 * s * b * V / (t * c)
    vram = states + acts + eff["train_misc_memory_gib"] * GIB
    fits = vram <= gpu.vram_bytes * eff["train_vram_usable_fraction"]

    # -- throughput -----------------------------------------------------------
    # Times per token, all L layers. Compute: one GPU's time at MFU x the stack's speed-ups; a tensor x
    # context group of t c GPUs shares it.
    f_tok = flops_per_token(arch, s, method, lora_rank)
    # MFU is defined on the 16-bit peak; fp8 runs at train_fp8_speedup x the bf16 speed.
    peak = gpu.peak_tflops("bf16" if precision == "fp8" else precision) * 1e12
    speed = peak * training_mfu(gpu, eff) * np.ones_like(t)             # FLOP/s per GPU
    # Transformer Engine fp8 (and TP communication overlap) come with Megatron/NeMo, not with FSDP
    # (llm-foundry): a ZeRO-3 layout runs on an FSDP stack, any other on Megatron's
    fsdp_stack = (framework == "fsdp") | ((framework == "any") & (zero == 3) & (d > 1))
    if precision == "fp8":
        speed = speed * np.where(fsdp_stack, eff["train_fp8_speedup_fsdp"], eff["train_fp8_speedup"])
    if method == "qlora":
        speed = speed * eff["train_qlora_speed_factor"]
    speed = speed * np.where((zero == 3) & (d > 1), eff["train_fsdp_efficiency"], 1.0)
    recompute = np.select([rec == 1, rec == 2],
                          [eff["train_recompute_factor"], eff["train_selective_recompute_factor"]], 1.0)
    compute_tok = f_tok * recompute / speed / (t * c)
    # TP collectives (sequence parallel: an all-gather and a reduce-scatter, together one all-reduce's
    # bytes, 2 forward + 2 backward per layer, 2 more with full recompute) of the s/c tokens a TP group
    # holds; under Megatron/NeMo train_tp_comm_overlap of their time hides behind the GEMMs.
    bw = eff["train_comm_bw_fraction"]
    ar_bytes = 2.0 * (2.0 * h * act_b / 2.0) * (t - 1) / t
    n_ar = 4.0 + 2.0 * (rec == 1)
    tp_hidden = np.where(fsdp_stack, 0.0, eff["train_tp_comm_overlap"])
    tp_tok = (1.0 - tp_hidden) * L * n_ar * ar_bytes / (gpu.link_bytes_s * bw) / c
    # Context parallelism (ring attention): per layer and sequence every GPU receives the other c - 1
    # ranks' K and V chunks (s/c tokens x K/V elements / t, forward) and K, V and their gradients
    # (backward): 3 (c - 1) chunks, overlapped with that layer's attention compute; what the attention
    # cannot hide is exposed. Inside one node over the GPU's link, across nodes over the fabric.
    kv_layer = st.kv_elems_per_token / L * act_b / t                   # K+V bytes per token and layer
    cp_bytes = 3.0 * (c - 1.0) * (s / c) * kv_layer
    cp_link = np.array([network.link_bytes_s(gpu, int(tt * cc)) for tt, cc in zip(t, c)])
    attn_s = 1.5 * s * s * st.attn_pair_flops_prefill / speed / (t * c)   # fwd + bwd, one layer
    cp_tok = L * np.maximum(0.0, cp_bytes / (cp_link * bw) - attn_s) / s
    token_s = (compute_tok + tp_tok + cp_tok) * uneven   # one tensor x context group, all layers
    # d = gpus // (t c p): GPUs left over when the degrees do not divide the cluster stay idle
    rate = d * p * scaling_efficiency(gpus, eff) / token_s    # no bubble, no DP traffic
    # Global batch: the configured tokens, or one micro-batch per data-parallel rank if more.
    batch_tokens = np.maximum(eff["train_global_batch_tokens"], d * s * b)
    m = batch_tokens / (s * b * d)                        # micro-batches per pipeline per step
    bubble = (m + (p - 1.0) / v) / m                      # interleaved: v chunks per stage
    compute_step = batch_tokens * bubble / rate
    # Data-parallel traffic per step and GPU (ring over the d c ranks holding the same weights):
    # gradient all-reduce (ZeRO-1) = 2 x shard, ZeRO-3 = 3 x shard (two parameter all-gathers +
    # gradient reduce-scatter); hidden behind a share of the step's compute, the rest exposed.
    grad_b = 4.0 if precision == "fp32" else 2.0
    if method == "full":
        volume = np.where(zero == 3, 3.0, 2.0) * psi * grad_b * (dc - 1) / dc
    else:  # only the adapters' gradients are reduced; ZeRO-3 still gathers the frozen base twice
        ad = lora_params(arch, lora_rank) / (t * p)
        volume = (2.0 * ad * grad_b + np.where(zero == 3, 2.0 * psi * base_b, 0.0)) * (dc - 1) / dc
    dp_comm = volume / (network.link_bytes_s(gpu, gpus) * bw)
    exposed = np.maximum(0.0, dp_comm - eff["train_dp_comm_overlap"] * compute_step)
    tokens_per_s = batch_tokens / (compute_step + exposed)
    return {"t": t.astype(int), "c": c.astype(int), "p": p.astype(int), "v": v.astype(int),
            "d": d.astype(int), "zero": zero.astype(int),
            "recompute": np.array(["none", "full", "selective"])[rec.astype(int)], "vram_bytes": vram,
            "fits": fits, "tokens_per_s": tokens_per_s}


def estimate_training(arch: ModelArch, gpu: GpuSpec, gpus: int, precision: str, tokens: float,
                      eff: Efficiency, network: Network | None = None, method: str = "full",
                      lora_rank: int = 16, framework: str = "any") -> dict:
    """One configuration: the ``gpuopt estimate training`` result.

    ``network``: how the cluster's GPUs are joined (default:
    :func:`default_network`, the named defaults). ``method``: ``full``,
    ``lora`` or ``qlora`` (rank ``lora_rank`` adapters on every linear layer).
    ``framework``: ``any`` (the best layout), ``megatron`` or ``fsdp`` (the
    layouts that framework runs, :func:`_framework_allows`).

    Returns ``fits``, ``vram_gb_per_gpu``, ``tokens_per_s`` (whole
    cluster), ``hours``, ``mfu`` (model FLOPs utilisation against the dense
    peak of ``precision``), ``layout`` and, when it does not fit, ``reason``.
    """
    if framework not in FRAMEWORKS:
        raise unknown_name("training framework", framework, FRAMEWORKS, field="framework", value=framework)
    if method not in ("full", "lora", "qlora"):
        raise unknown_name("training method", method, ("full", "lora", "qlora"), field="method", value=method)
    out = {"model": arch.name, "gpu": gpu.name, "gpus": gpus, "precision": precision, "tokens": tokens,
           "method": method, "framework": framework, "fits": False, "vram_gb_per_gpu": None, "tokens_per_s": 0.0, "hours": None, "mfu": None,
           "layout": None}
    if not gpu.supports_training(precision):
        out["reason"] = f"{precision} training is not supported on {gpu.name}"
        return out
    lay = layouts(arch, gpu, gpus, precision, eff, network, method, lora_rank, framework)
    if not lay["fits"].any():
        i = int(np.argmin(lay["vram_bytes"]))
        out["vram_gb_per_gpu"] = round(float(lay["vram_bytes"][i]) / 1e9, 3)
        out["layout"] = _layout_text(lay, i)
        out["reason"] = (f"the smallest layout needs {out['vram_gb_per_gpu']:.1f} GB per GPU; "
                         f"{gpu.vram_gb * eff['train_vram_usable_fraction']:.1f} GB usable")
        return out
    speed = np.where(lay["fits"], lay["tokens_per_s"], -np.inf)
    i = int(np.argmax(speed))
    tps = float(lay["tokens_per_s"][i])
    peak = gpu.peak_tflops(precision) * 1e12  # reported MFU: against the peak of the precision used
    out.update({
        "fits": True,
        "vram_gb_per_gpu": round(float(lay["vram_bytes"][i]) / 1e9, 3),
        "tokens_per_s": tps,
        "hours": tokens / tps / 3600.0,
        "mfu": flops_per_token(arch, eff["train_sequence_tokens"], method, lora_rank) * tps / (gpus * peak),
        "gpu_hours": gpus * tokens / tps / 3600.0,
        "layout": _layout_text(lay, i),
        "tp": int(lay["t"][i]), "cp": int(lay["c"][i]), "pp": int(lay["p"][i]), "vp": int(lay["v"][i]),
        "dp": int(lay["d"][i]),
        # the degrees need not divide the cluster: GPUs beyond tp x cp x pp x dp idle (still paid for)
        "gpus_used": int(lay["t"][i] * lay["c"][i] * lay["p"][i] * lay["d"][i]),
        "zero": int(lay["zero"][i]), "recompute": str(lay["recompute"][i]),
    })
    return out


def _layout_text(lay: dict, i: int) -> str:
    rec = lay["recompute"][i]
    vp = f" vp{lay['v'][i]}" if lay["v"][i] > 1 else ""
    cp = f" cp{lay['c'][i]}" if lay["c"][i] > 1 else ""
    return (f"tp{lay['t'][i]}{cp} pp{lay['p'][i]}{vp} dp{lay['d'][i]} zero{lay['zero'][i]}"
            + ("" if rec == "none" else f" recompute={rec}"))
