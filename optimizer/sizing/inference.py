"""Inference sizing: VRAM, TTFT, TPOT and requests/s of one replica.

A replica is ``tp`` GPUs of one type running one model copy with tensor
parallelism (weights and KV heads split over the ranks). Everything is a
roofline: each phase takes the longer of its compute time (FLOPs over the
achieved share of the dense peak) and its memory time (bytes over the
achieved share of HBM bandwidth), plus tensor-parallel all-reduces and a
fixed scheduler time per engine step. All functions are vectorised over the
concurrency ``C`` (running sequences), so one call evaluates every batch
size of a configuration at once.

Memory per GPU::

    weights/tp + activation workspace + runtime overhead + KV cache
    KV per token per GPU = KV bytes per token / min(tp, KV heads)   (MLA: not split)
    KV pool = kv_cache_free_fraction x (VRAM - weights/tp - workspace - overhead)   (as engines give it)
    C_max = floor(KV pool / (KV per token per GPU x (ISL + OSL)))

Steady state at concurrency C for a request of ISL prompt and OSL output
tokens (continuous batching; average context ISL + OSL/2)::

    t_step(C) = max(weight bytes read / (tp x BW x e_bw), C x 2 x active params / (tp x peak x e_dec))
                + C x max(context x KV bytes per token per GPU / (BW x e_kv), attention FLOPs / (tp x peak x e_dec))
                + 2 x layers x all-reduce(C x hidden) + t_sched
    rps(C)    = C / (OSL x t_step(C) + C x prefill work of one prompt)   (prompts mixed into steps)
    TPOT(C)   = t_step(C) + ((C - 1) / OSL) x prefill work of one prompt
                (the tokens after a request's first wait for the other C - 1 prompts; its own is its TTFT)
    TTFT(C)   = prefill(ISL) + (ceil(ISL / chunk) + 1/2) x t_step(C - 1)
    prefill(ISL) = max(matmul FLOPs / (tp x peak x e_pf), weights / (tp x BW x e_bw))
                   + attention FLOPs / (tp x peak x e_pf) + all-reduces + fixed prefill overhead

MoE models on n >= 2 GPUs can also be laid out as attention data parallel + expert parallel
(DEP, :class:`DepReplica`): each GPU holds everything but the routed experts and runs attention for
its own C/n sequences with their whole KV cache, the routed experts are sharded n ways, and tokens
reach their experts by an all-to-all (dispatch and combine per MoE layer)::

    weights per GPU = non-expert weights + ceil(E/n)/E x expert weights
    C_max           = n x min(max_batch_seqs, floor(KV pool / (full KV per token x (ISL + OSL))))
    t_step(C)       = max((non-expert bytes + expert bytes / n x touched(C)) / (BW x e_bw),
                          (C/n) x 2 x active params / (peak x e_dec))
                      + (C/n) x max(context x full KV per token / (BW x e_kv), attention FLOPs / (peak x e_dec))
                      + (C/n) x route + a2a(C/n) + t_sched
    a2a(b)          = 2 x MoE layers x ((n - 1) x a2a_latency_us + b x k x (n - 1)/n x hidden x 2 B
                                        / (link x a2a_bw_fraction))

Weight-only 4-bit serving (int4, W4A16; e.g. MXFP4 experts on Hopper): weights are read at 4-bit
bytes and multiplied at the 16-bit peak after dequantisation, the body's matmul FLOPs divided by
w4a16_dequant_efficiency (attention and the 16-bit LM head are not dequantised).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..schema import DEFAULT_SLO_PERCENTILE
from . import queueing
from .architecture import ModelArch, arch_stats
from .efficiency import Efficiency
from .hardware import SERVING_FORMATS, GpuSpec

GIB = 2.0**30

_WEIGHT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def weight_bytes_per_param(precision: str, eff: Efficiency) -> float:
    """Bytes per (non-embedding) weight when serving in ``precision``."""
    if precision == "int4":
        return eff["int4_weight_bytes_per_param"]
    if precision == "fp4":
        return eff["fp4_weight_bytes_per_param"]
    return _WEIGHT_BYTES[precision]


def kv_bytes_per_elem(precision: str, eff: Efficiency) -> float:
    """Bytes per KV-cache element: 4 for fp32, 8-bit for W8A8/fp4 serving, else 2."""
    if precision == "fp32":
        return 4.0
    if precision in ("fp8", "int8", "fp4"):
        return eff["kv_cache_bytes_8bit"]
    return 2.0


def prefill_mfu(precision: str, eff: Efficiency) -> float:
    compute = SERVING_FORMATS[precision][1]
    if compute in ("fp8", "int8"):
        return eff["prefill_mfu_8bit"]
    if compute == "fp4":
        return eff["prefill_mfu_4bit"]
    return eff["prefill_mfu_16bit"]


def serving_efficiency(gpu: GpuSpec, eff: Efficiency) -> float:
    """Achieved shares of compute and HBM bandwidth on ``gpu`` relative to the calibrated ones.

    The inference factors were calibrated on NVIDIA GPUs with NVIDIA's
    engines; a generation with a factor ``serving_efficiency_<generation>``
    (AMD CDNA, Intel Gaudi) multiplies every achieved share by it. A
    generation without one (the NVIDIA ones, the calibration reference) keeps 1.
    """
    key = f"serving_efficiency_{gpu.generation}"
    return eff[key] if key in eff else 1.0


def decode_mfu(precision: str, eff: Efficiency) -> float:
    """Achieved share of the precision's dense peak in decode steps.

    4-bit GEMMs (fp4 weights and activations) have their own factor: at the
    token counts of a decode step their kernels reach a smaller share of a
    peak twice the fp8 one, so reusing the 8/16-bit figure made fp4 decode
    too fast.
    """
    if SERVING_FORMATS[precision][1] == "fp4":
        return eff["decode_mfu_4bit"]
    return eff["decode_mfu"]


def weight_only_compute_share(precision: str, eff: Efficiency) -> float:
    """Share of the activation precision's matmul speed left when the weights must be dequantised first."""
    if SERVING_FORMATS[precision][0] == "int4":
        return eff["w4a16_dequant_efficiency"]
    return 1.0


@dataclass(frozen=True)
class Replica:
    """Per-replica constants of one (model, GPU type, TP degree, precision).

    Byte and FLOP figures are per replica unless named ``*_gpu``. Built by
    :func:`replica`; ``None`` there means the precision is not supported.
    """

    arch: ModelArch
    gpu: GpuSpec
    tp: int
    precision: str
    eff: Efficiency
    weights_gpu: float           # bytes of weights on each GPU
    kv_tok_gpu: float            # KV-cache bytes per token on each GPU
    workspace_gpu: float         # activation workspace bytes per GPU
    overhead_gpu: float          # runtime overhead bytes per GPU
    kv_pool_gpu: float           # bytes per GPU the engine gives the KV cache (may be <= 0)
    read_fixed: float            # bytes every decode step reads (replica): all but routed experts, input embedding
    read_experts: float          # bytes of routed experts (replica)
    lin_flops_tok: float         # matmul FLOPs per token, excluding the LM head
    head_flops_tok: float        # LM-head FLOPs per token whose logits are needed
    peak: float                  # dense peak FLOP/s of one GPU for this precision
    bw: float                    # HBM bytes/s of one GPU
    act_bytes: float             # bytes per activation element
    # efficiency factors and shape constants, looked up once (hot loops use them)
    e_bw: float = 0.0            # achieved bandwidth share, weights
    e_kv: float = 0.0            # achieved bandwidth share, KV cache
    e_dec: float = 0.0           # achieved compute share, decode
    e_pf: float = 0.0            # achieved compute share, prefill
    dequant: float = 1.0         # share of matmul speed left when 4-bit weights are dequantised first (W4A16)
    sched_s: float = 0.0         # fixed time per decode step
    prefill_fixed_s: float = 0.0 # fixed time per prefill (context) launch
    ar_latency_s: float = 0.0    # fixed time per all-reduce
    ar_bw: float = 1.0           # achieved one-direction link bytes/s
    chunk_tokens: float = 1.0    # prompt tokens per engine step
    pair_prefill: float = 0.0    # attention FLOPs per (query, key) pair per layer, prefill
    pair_decode: float = 0.0     # same, decode
    moe_k_over_e: float = 0.0    # routed experts per token / routed experts (0 = dense)
    route_s: float = 0.0         # fixed time per token the MoE layers route (k experts x MoE layers x routing cost)

    # -- layout ---------------------------------------------------------------
    @property
    def gpus(self) -> int:
        """GPUs in the replica."""
        return self.tp

    @property
    def layout(self) -> str:
        """``tp<n>``: every GPU runs every layer on a 1/n slice of each weight matrix."""
        return f"tp{self.tp}"

    # -- memory ---------------------------------------------------------------
    @property
    def static_gpu(self) -> float:
        """Bytes per GPU before any KV cache."""
        return self.weights_gpu + self.workspace_gpu + self.overhead_gpu

    def max_batch(self, isl: int, osl: int) -> int:
        """Most concurrent sequences of ISL+OSL tokens whose KV cache fits (0 = none)."""
        if self.kv_pool_gpu <= 0:
            return 0
        n = int(self.kv_pool_gpu // (self.kv_tok_gpu * (isl + osl)))
        return max(0, min(n, int(self.eff["max_batch_seqs"])))

    def gpu_memory_needed_gb(self, isl: int, osl: int, batch: int = 1) -> float:
        """GB of GPU memory the replica needs per GPU for ``batch`` sequences: the static part plus
        a KV pool of which the engine's share holds them (fits iff this is at most the GPU's memory)."""
        kv = batch * self.kv_tok_gpu * (isl + osl) / self.eff["kv_cache_free_fraction"]
        return (self.static_gpu + kv) / 1e9

    def vram_gb(self, batch, isl: int, osl: int):
        """GB used per GPU with ``batch`` sequences of ISL+OSL tokens resident."""
        return (self.static_gpu + np.asarray(batch) * self.kv_tok_gpu * (isl + osl)) / 1e9

    # -- time -----------------------------------------------------------------
    def allreduce_s(self, nbytes):
        """Ring all-reduce time of ``nbytes`` over the TP group (0 without TP)."""
        if self.tp == 1:
            return 0.0 * np.asarray(nbytes, dtype=float)
        ring = 2.0 * np.asarray(nbytes, dtype=float) * (self.tp - 1) / self.tp
        return self.ar_latency_s + ring / self.ar_bw

    def experts_touched(self, tokens):
        """Expected share of routed experts a step touches with ``tokens`` tokens (uniform routing)."""
        if not self.moe_k_over_e:
            return 0.0 * np.asarray(tokens, dtype=float)
        return 1.0 - (1.0 - self.moe_k_over_e) ** np.asarray(tokens, dtype=float)

    def prefill_compute_s(self, tokens, seq_len, seqs):
        """Compute-bound prefill time as (matmuls incl. LM head, causal attention), seconds.

        Matmul FLOPs = 2 x active (non-embedding) params per token + LM head per
        prompt; attention FLOPs = layers x pair FLOPs x tokens x seq_len / 2.
        """
        tokens = np.asarray(tokens, float)
        denom = self.tp * self.peak * self.e_pf
        lin = (self.lin_flops_tok * tokens / self.dequant + self.head_flops_tok * seqs) / denom
        # MoE routing runs in its own kernels: it adds to the step like attention does
        attn = self.arch.layers * self.pair_prefill * tokens * seq_len / 2.0 / denom + self.route_s * tokens
        return lin, attn

    def prefill_s(self, seq_len: int, seqs=1):
        """Latency of prefilling ``seqs`` prompts of ``seq_len`` tokens in one go (batch-1 TTFT when seqs=1).

        max(matmul compute, weights read once) + attention compute + 2
        all-reduces per layer + the fixed prefill overhead.
        """
        tokens = np.asarray(seqs, float) * seq_len
        lin, attn = self.prefill_compute_s(tokens, seq_len, seqs)
        read = self.read_fixed + self.read_experts * self.experts_touched(tokens)
        memory = read / (self.tp * self.bw * self.e_bw)
        comm = 2 * self.arch.layers * self.allreduce_s(tokens * self.arch.hidden_size * self.act_bytes)
        return np.maximum(lin, memory) + attn + comm + self.prefill_fixed_s

    def prefill_work_s(self, seq_len: int):
        """Replica time one prompt adds when it is mixed into running steps: its compute and the
        bytes its activations add to the step's all-reduces.

        The all-reduces' fixed latency is the step's, paid once per layer
        whatever the step carries (:meth:`decode_step_s`), so a prompt mixed
        into a step adds only its bytes over the link.
        """
        lin, attn = self.prefill_compute_s(seq_len, seq_len, 1)
        if self.tp == 1:
            return lin + attn
        ring = 2.0 * seq_len * self.arch.hidden_size * self.act_bytes * (self.tp - 1) / self.tp
        return lin + attn + 2 * self.arch.layers * ring / self.ar_bw

    def decode_step_s(self, batch, context):
        """One decode step for ``batch`` sequences with mean cached context ``context`` tokens.

        Matmuls and attention run as separate kernels, so their times add:
        matmuls take max(weights read (routed experts only as touched) over
        tp x BW x e_bw, 2 x active params x batch FLOPs over tp x peak x
        e_dec); attention takes max(KV cache read over BW x e_kv per GPU,
        its FLOPs over tp x peak x e_dec). Plus 2 all-reduces per layer and
        the scheduler overhead.
        """
        b = np.asarray(batch, dtype=float)
        read = self.read_fixed + self.read_experts * self.experts_touched(b) if self.moe_k_over_e \
            else self.read_fixed
        compute = self.tp * self.peak * self.e_dec
        t_mm = np.maximum(read / (self.tp * self.bw * self.e_bw),
                          b * ((self.lin_flops_tok / self.dequant + self.head_flops_tok) / compute))
        t_attn = b * np.maximum(context * self.kv_tok_gpu / (self.bw * self.e_kv),
                                context * self.arch.layers * self.pair_decode / compute)
        step = t_mm + t_attn + self.sched_s + self.route_s * b
        if self.tp > 1:
            step = step + 2 * self.arch.layers * self.allreduce_s(b * self.arch.hidden_size * self.act_bytes)
        return np.where(b > 0, step, 0.0)

    # -- serving --------------------------------------------------------------
    def serve(self, isl: int, osl: int, batches=None) -> dict:
        """Steady-state metrics at each concurrency in ``batches`` (default 1..C_max).

        Returns a dict of arrays: ``batch``, ``ttft_ms``, ``tpot_ms``, ``rps``,
        ``output_tokens_per_s`` (replica), ``vram_gb_per_gpu``; and ``prefill_ms``,
        the replica time of one prompt's prefill (the prefill queue's service time).
        """
        if batches is None:
            c = np.arange(0.0, self.max_batch(isl, osl) + 1.0)   # 0..C_max; 0 gives step(C-1) at C=1
            step_all = self.decode_step_s(c, isl + osl / 2.0)
            c, step, step_prev = c[1:], step_all[1:], step_all[:-1]
        else:
            c = np.asarray(batches, dtype=float)
            step = self.decode_step_s(c, isl + osl / 2.0)
            step_prev = self.decode_step_s(c - 1, isl + osl / 2.0)
        work = float(self.prefill_work_s(isl))
        # OSL steps of the batch carry the prefills of the C prompts that replace its sequences: the
        # replica's rate counts all C; a sequence's own prefill is its TTFT, so the output tokens after
        # its first are slowed by the other C - 1 only
        rps = c / (osl * step + c * work)
        tpot = step + (c - 1.0) * (work / osl)
        chunks = math.ceil(isl / self.chunk_tokens)
        ttft = float(self.prefill_s(isl)) + (chunks + 0.5) * step_prev
        return {
            "batch": c.astype(int),
            "ttft_ms": ttft * 1e3,
            "tpot_ms": tpot * 1e3,
            "rps": rps,
            "output_tokens_per_s": rps * osl,
            "vram_gb_per_gpu": self.vram_gb(c, isl, osl),
            # replica time one prompt's prefill holds the engine: the prefill queue's service time
            "prefill_ms": float(self.prefill_work_s(isl)) * 1e3,
        }

    def static_batch(self, batch: int, isl: int, osl: int) -> dict:
        """A static batch (TRT-LLM gptSessionBenchmark): prefill all, then OSL decode steps.

        Output tokens/s per GPU = batch x OSL / (prefill + OSL x t_step at mean context) / tp.
        """
        total = self.prefill_s(isl, batch) + osl * self.decode_step_s(batch, isl + osl / 2.0)
        return {"seconds": float(total), "output_tokens_per_s_per_gpu": float(batch * osl / total / self.tp)}


@functools.lru_cache(maxsize=4096)
def replica(arch: ModelArch, gpu: GpuSpec, tp: int, precision: str, eff: Efficiency) -> Replica | None:
    """Per-replica constants, or ``None`` when ``gpu`` cannot run ``precision``.

    Weights: non-embedding parameters at the precision's bytes, embedding and
    LM head at 16 bit when quantised (fp32 keeps 4 bytes), all split over tp.
    """
    if not gpu.supports(precision):
        return None
    st = arch_stats(arch)
    bw_param = weight_bytes_per_param(precision, eff)
    emb_bytes = 4.0 if precision == "fp32" else 2.0
    act_bytes = 4.0 if precision == "fp32" else 2.0
    body = st.params_total - st.params_embedding
    weights = body * bw_param + st.params_embedding * emb_bytes
    kv_tok = st.kv_elems_per_token * kv_bytes_per_elem(precision, eff) / min(tp, st.kv_shards)
    if arch.is_moe:
        ffn = max(arch.ffn_size if st.moe_layers < arch.layers else 0,
                  (arch.experts_per_token + arch.shared_experts) * (arch.expert_ffn_size or arch.ffn_size))
    else:
        ffn = arch.ffn_size
    per_tok = (eff["act_bytes_per_token_hidden"] * arch.hidden_size
               + eff["act_bytes_per_token_ffn"] * ffn / tp) * act_bytes / 2.0
    workspace = eff["max_batched_tokens"] * per_tok
    overhead = (eff["runtime_overhead_gib"] + (eff["comm_buffer_gib"] if tp > 1 else 0.0)) * GIB
    experts = st.params_expert * bw_param
    input_emb = 0.0 if arch.tied_embeddings else st.params_lm_head * emb_bytes
    read_fixed = weights - experts - input_emb   # LM head read every step, input table only by row
    # Per-token matmul FLOPs: 2 x active params that multiply (not the input embedding lookup).
    lin = 2.0 * (st.params_active - st.params_embedding)
    vendor = serving_efficiency(gpu, eff)
    dequant = weight_only_compute_share(precision, eff)
    return Replica(
        arch=arch, gpu=gpu, tp=tp, precision=precision, eff=eff,
        weights_gpu=weights / tp, kv_tok_gpu=kv_tok, workspace_gpu=workspace, overhead_gpu=overhead,
        kv_pool_gpu=eff["kv_cache_free_fraction"] * (gpu.vram_bytes - weights / tp - workspace - overhead),
        read_fixed=read_fixed, read_experts=experts,
        lin_flops_tok=lin, head_flops_tok=2.0 * st.params_lm_head,
        peak=gpu.peak_tflops(SERVING_FORMATS[precision][1]) * 1e12, bw=gpu.bw_bytes_s,
        act_bytes=act_bytes,
        e_bw=eff["decode_bw_fraction"] * vendor, e_kv=eff["kv_bw_fraction"] * vendor,
        e_dec=decode_mfu(precision, eff) * vendor,
        e_pf=prefill_mfu(precision, eff) * vendor, dequant=dequant, sched_s=eff["sched_overhead_ms"] * 1e-3,
        prefill_fixed_s=eff["prefill_overhead_ms"] * 1e-3,
        ar_latency_s=eff["allreduce_latency_us"] * 1e-6, ar_bw=gpu.link_bytes_s * eff["comm_bw_fraction"],
        chunk_tokens=eff["max_batched_tokens"], pair_prefill=st.attn_pair_flops_prefill,
        pair_decode=st.attn_pair_flops_decode,
        moe_k_over_e=(arch.experts_per_token / arch.experts) if arch.is_moe else 0.0,
        route_s=(arch.experts_per_token * st.moe_layers * eff["moe_route_ns"] * 1e-9)
        if arch.is_moe else 0.0,
    )


@dataclass(frozen=True)
class DepReplica(Replica):
    """A replica of ``tp`` = n GPUs laid out as attention data parallel + expert parallel (DEP).

    Every GPU holds a full copy of everything but the routed experts (attention, shared experts,
    dense layers, embeddings) and runs attention for its own C/n sequences, whose whole KV cache it
    keeps; the routed experts of each MoE layer are sharded n ways (ceil(E/n) per GPU). Tokens
    travel to their experts by all-to-all over the scale-up link: per MoE layer a dispatch and a
    combine, each carrying ``hidden x activation bytes`` per routed (token, expert) pair whose
    expert is on another GPU ((n - 1)/n of the k pairs of a token, uniform routing), at
    ``a2a_bw_fraction`` of the one-direction link bandwidth, plus ``a2a_latency_us`` per peer
    ((n - 1) of them) each. No all-reduce. Fields as :class:`Replica`, with ``kv_tok_gpu`` the full KV bytes per token
    divided by n (a GPU holds 1/n of the replica's sequences: the pool and the reads per GPU
    come out the same as a per-sequence count) and ``read_fixed`` the bytes each GPU reads.
    """

    kv_tok_seq: float = 0.0        # full KV bytes per token of one sequence (on the GPU that owns it)
    experts_gpu: float = 0.0       # routed-expert bytes on each GPU
    lin_expert_tok: float = 0.0    # routed-expert matmul FLOPs per token (2 x k x expert params x MoE layers)
    moe_layers: int = 0
    k: int = 0
    a2a_pair_bytes: float = 0.0    # bytes per routed (token, expert) pair, each way
    a2a_bw: float = 1.0            # achieved one-direction link bytes/s in all-to-all
    a2a_latency_s: float = 0.0     # fixed time per peer of one all-to-all (2 all-to-alls per MoE layer per step)

    @property
    def layout(self) -> str:
        return f"dep{self.tp}"

    # -- memory ---------------------------------------------------------------
    def max_batch(self, isl: int, osl: int) -> int:
        """n x the sequences one GPU holds (its pool over the full KV per sequence), each GPU
        capped at ``max_batch_seqs`` (an attention rank schedules its own batch)."""
        if self.kv_pool_gpu <= 0:
            return 0
        per = int(self.kv_pool_gpu // (self.kv_tok_seq * (isl + osl)))
        return self.tp * max(0, min(per, int(self.eff["max_batch_seqs"])))

    def gpu_memory_needed_gb(self, isl: int, osl: int, batch: int = 1) -> float:
        kv = math.ceil(batch / self.tp) * self.kv_tok_seq * (isl + osl) / self.eff["kv_cache_free_fraction"]
        return (self.static_gpu + kv) / 1e9

    def vram_gb(self, batch, isl: int, osl: int):
        """GB used on the fullest GPU: ceil(batch / n) sequences of ISL+OSL tokens."""
        return (self.static_gpu + np.ceil(np.asarray(batch, dtype=float) / self.tp)
                * self.kv_tok_seq * (isl + osl)) / 1e9

    # -- time -----------------------------------------------------------------
    def allreduce_s(self, nbytes):
        return 0.0 * np.asarray(nbytes, dtype=float)

    def alltoall_bytes(self, tokens_gpu):
        """Bytes one GPU sends in one engine step carrying ``tokens_gpu`` tokens: a dispatch and a
        combine per MoE layer, each of tokens x k x (n - 1)/n remote pairs x hidden x activation bytes."""
        remote = np.asarray(tokens_gpu, dtype=float) * self.k * (self.tp - 1) / self.tp
        return 2.0 * self.moe_layers * remote * self.a2a_pair_bytes

    def alltoall_s(self, tokens_gpu):
        """Dispatch + combine time of one GPU sending ``tokens_gpu`` tokens to their experts, all
        MoE layers: 2 x MoE layers x ((n - 1) x latency per peer + remote pairs x pair bytes / link
        share), remote pairs = tokens x k x (n - 1)/n."""
        return (2.0 * self.moe_layers * (self.tp - 1) * self.a2a_latency_s
                + self.alltoall_bytes(tokens_gpu) / self.a2a_bw)

    def expert_read_gpu(self, tokens):
        """Expert bytes a GPU reads when the replica's experts see ``tokens`` tokens."""
        return self.experts_gpu * self.experts_touched(tokens)

    def decode_step_s(self, batch, context):
        """One decode step for ``batch`` sequences over the replica (C/n per GPU): each GPU reads
        its replicated weights and the experts of its shard the C tokens touch, multiplies its
        share of the FLOPs, reads the full KV of its own C/n sequences, routes them and sends them
        to their experts and back; plus the scheduler overhead."""
        b = np.asarray(batch, dtype=float)
        per = b / self.tp
        read = self.read_fixed + self.expert_read_gpu(b)
        compute = self.peak * self.e_dec
        t_mm = np.maximum(read / (self.bw * self.e_bw),
                          per * ((self.lin_flops_tok / self.dequant + self.head_flops_tok) / compute))
        t_attn = per * np.maximum(context * self.kv_tok_seq / (self.bw * self.e_kv),
                                  context * self.arch.layers * self.pair_decode / compute)
        step = t_mm + t_attn + self.sched_s + self.route_s * per + self.alltoall_s(per)
        return np.where(b > 0, step, 0.0)

    def prefill_s(self, seq_len: int, seqs=1):
        """Prefill of ``seqs`` prompts spread over the attention ranks (ceil(seqs/n) on the fullest):
        its attention and replicated matmuls on one GPU, the expert matmuls of all prompts over n."""
        seqs_arr = np.asarray(seqs, dtype=float)
        mine = np.maximum(np.ceil(seqs_arr / self.tp), 1.0)
        tokens_mine, tokens_all = mine * seq_len, seqs_arr * seq_len
        denom = self.peak * self.e_pf
        lin = (((self.lin_flops_tok - self.lin_expert_tok) * tokens_mine + self.lin_expert_tok * tokens_all / self.tp)
               / self.dequant + self.head_flops_tok * mine) / denom
        attn = self.arch.layers * self.pair_prefill * tokens_mine * seq_len / 2.0 / denom + self.route_s * tokens_mine
        memory = (self.read_fixed + self.expert_read_gpu(tokens_all)) / (self.bw * self.e_bw)
        return np.maximum(lin, memory) + attn + self.alltoall_s(tokens_mine) + self.prefill_fixed_s

    def prefill_work_s(self, seq_len: int):
        """Replica time one prompt adds to running steps: its FLOPs and routing over n GPUs and its
        all-to-all bytes (the latencies are the step's)."""
        lin, attn = self.prefill_compute_s(seq_len, seq_len, 1)   # FLOPs / (n x peak), route_s x tokens
        attn = attn - self.route_s * seq_len + self.route_s * seq_len / self.tp
        remote = seq_len * self.k * (self.tp - 1) / self.tp
        return lin + attn + 2.0 * self.moe_layers * remote * self.a2a_pair_bytes / self.a2a_bw / self.tp


@functools.lru_cache(maxsize=4096)
def dep_replica(arch: ModelArch, gpu: GpuSpec, n: int, precision: str, eff: Efficiency) -> DepReplica | None:
    """Per-replica constants of ``n`` GPUs in attention data parallel + expert parallel (DEP), or
    ``None`` when ``gpu`` cannot run ``precision``. Needs an MoE model and n >= 2.

    Memory per GPU: weights other than routed experts (replicated) + ceil(E/n)/E of the routed
    experts + the one-GPU activation workspace + overhead (with the communication buffer); the KV
    pool is ``kv_cache_free_fraction`` of the rest, for the GPU's own sequences at the full KV
    bytes per token (not split: each GPU runs whole attention heads).
    """
    if not arch.is_moe or n < 2:
        raise ValueError("DEP needs an MoE model and at least 2 GPUs")
    one = replica(arch, gpu, 1, precision, eff)
    if one is None:
        return None
    st = arch_stats(arch)
    experts = one.read_experts                      # bytes of all routed experts (the replica holds one copy)
    share = math.ceil(arch.experts / n) / arch.experts
    experts_gpu = experts * share
    weights_gpu = one.weights_gpu - experts + experts_gpu
    overhead = (eff["runtime_overhead_gib"] + eff["comm_buffer_gib"]) * GIB
    kv_seq = one.kv_tok_gpu
    return DepReplica(
        arch=arch, gpu=gpu, tp=n, precision=precision, eff=eff,
        weights_gpu=weights_gpu, kv_tok_gpu=kv_seq / n, workspace_gpu=one.workspace_gpu, overhead_gpu=overhead,
        kv_pool_gpu=eff["kv_cache_free_fraction"] * (gpu.vram_bytes - weights_gpu - one.workspace_gpu - overhead),
        read_fixed=one.read_fixed, read_experts=experts,
        lin_flops_tok=one.lin_flops_tok, head_flops_tok=one.head_flops_tok, peak=one.peak, bw=one.bw,
        act_bytes=one.act_bytes, e_bw=one.e_bw, e_kv=one.e_kv, e_dec=one.e_dec, e_pf=one.e_pf,
        dequant=one.dequant, sched_s=one.sched_s, prefill_fixed_s=one.prefill_fixed_s,
        ar_latency_s=0.0, ar_bw=1.0, chunk_tokens=one.chunk_tokens, pair_prefill=one.pair_prefill,
        pair_decode=one.pair_decode, moe_k_over_e=one.moe_k_over_e, route_s=one.route_s,
        kv_tok_seq=kv_seq, experts_gpu=experts_gpu, lin_expert_tok=2.0 * st.params_expert_active,
        moe_layers=st.moe_layers, k=arch.experts_per_token,
        a2a_pair_bytes=arch.hidden_size * one.act_bytes, a2a_bw=gpu.link_bytes_s * eff["a2a_bw_fraction"],
        a2a_latency_s=eff["a2a_latency_us"] * 1e-6,
    )


LAYOUTS = ("tp", "dep")


def layout_replica(arch: ModelArch, gpu: GpuSpec, n: int, precision: str, eff: Efficiency,
                   layout: str = "tp") -> Replica | None:
    """The replica of ``n`` GPUs in ``layout`` (``tp`` or ``dep``); ``None`` if the precision is unsupported."""
    if layout == "dep":
        return dep_replica(arch, gpu, n, precision, eff)
    return replica(arch, gpu, n, precision, eff)


def layouts_for(arch: ModelArch, n: int) -> tuple[str, ...]:
    """Layouts a replica of ``n`` GPUs of ``arch`` can take: TP always, DEP too for MoE models with n >= 2."""
    return ("tp", "dep") if arch.is_moe and n >= 2 else ("tp",)


def estimate_inference(arch: ModelArch, gpu: GpuSpec, tp: int, precision: str, isl: int, osl: int,
                       eff: Efficiency, *, ttft_ms: float | None = None, tpot_ms: float | None = None,
                       percentile: float | str = DEFAULT_SLO_PERCENTILE, rps: float | None = None,
                       concurrency: int | None = None, layout: str = "tp") -> dict:
    """One configuration in ``layout`` (``tp``, ``dep``, or ``best``: every layout the model
    allows on ``tp`` GPUs, :func:`layouts_for`, and the one that does most; see
    :func:`_estimate_one` for the fields). ``layout`` in the result names the one used.
    """
    if layout not in (*LAYOUTS, "best"):
        raise InputError("unknown layout", field="layout", value=layout, allowed="tp, dep, best")
    if layout == "dep" and "dep" not in layouts_for(arch, tp):
        raise InputError("the dep layout shards routed experts: it needs an MoE model and at least 2 GPUs",
                         field="layout", value=layout, allowed="tp or best")
    kw = dict(ttft_ms=ttft_ms, tpot_ms=tpot_ms, percentile=percentile, rps=rps, concurrency=concurrency)
    if layout != "best":
        return _estimate_one(arch, gpu, tp, precision, isl, osl, eff, layout=layout, **kw)
    results = [_estimate_one(arch, gpu, tp, precision, isl, osl, eff, layout=lay, **kw)
               for lay in layouts_for(arch, tp)]
    return max(results, key=_layout_score)


def _layout_score(r: dict) -> tuple:
    """Which layout does most: one that meets the SLO and fits, then the most requests/s at the SLO or
    the knee (at a given load: the most capacity, i.e. the lowest utilisation); TP on ties (first)."""
    at_load = r["load"] in ("rps", "concurrency")
    return (bool(r["meets_slo"]), bool(r["fits"]), r["capacity_rps"] if at_load else r["rps"])


def _estimate_one(arch: ModelArch, gpu: GpuSpec, tp: int, precision: str, isl: int, osl: int,
                  eff: Efficiency, *, ttft_ms: float | None = None, tpot_ms: float | None = None,
                  percentile: float | str = DEFAULT_SLO_PERCENTILE, rps: float | None = None,
                  concurrency: int | None = None, layout: str = "tp") -> dict:
    """One configuration, one request size, one load: the ``gpuopt estimate inference`` result.

    The load is, in order: ``rps`` (Poisson arrivals), ``concurrency``
    (requests always in flight), else the largest Poisson load whose
    ``percentile`` statistic (or ``"mean"``) of TTFT and TPOT meets the
    SLOs, else (no SLOs) the knee of the throughput curve
    (:mod:`.queueing`).

    Returns ``fits`` (memory only: the weights and one sequence fit),
    ``meets_slo`` (it fits, the load is below capacity and the SLOs hold
    at it; true without SLOs), ``load`` (which of the four set the point),
    ``rps``, mean ``ttft_ms`` and ``tpot_ms``, ``ttft_ms_p99``,
    ``tpot_ms_p99``, ``output_tokens_per_s`` (whole replica),
    ``mean_batch``, ``queue_ms``, ``utilisation``, ``capacity_rps`` (a full
    batch), ``max_batch`` (the most sequences whose KV cache fits),
    ``vram_gb_per_gpu`` (at the load's mean batch, rounded up), and
    ``reason`` when it does not fit, is overloaded or meets no SLO.
    """
    out = {"model": arch.name, "gpu": gpu.name, "gpus": tp, "layout": f"{layout}{tp}", "precision": precision,
           "prompt_tokens": isl, "output_tokens": osl, "fits": False, "meets_slo": False, "load": None,
           "vram_gb_per_gpu": None, "max_batch": 0, "rps": 0.0, "ttft_ms": None, "tpot_ms": None,
           "ttft_ms_p99": None, "tpot_ms_p99": None, "output_tokens_per_s": 0.0, "mean_batch": None,
           "queue_ms": None, "utilisation": None, "capacity_rps": 0.0,
           "weights_gb_per_gpu": None, "kv_cache_bytes_per_token_per_gpu": None}
    rep = layout_replica(arch, gpu, tp, precision, eff, layout)
    if rep is None:
        out["reason"] = f"{gpu.name} has no {precision} units"
        return out
    out["weights_gb_per_gpu"] = round(rep.weights_gpu / 1e9, 3)
    # DEP: a GPU keeps the whole cache of its own sequences (kv_tok_gpu is that over n, a replica average)
    out["kv_cache_bytes_per_token_per_gpu"] = rep.kv_tok_seq if isinstance(rep, DepReplica) else rep.kv_tok_gpu
    cmax = rep.max_batch(isl, osl)
    if cmax < 1:
        need = rep.gpu_memory_needed_gb(isl, osl)
        out["vram_gb_per_gpu"] = round(need, 3)
        out["reason"] = (f"needs {need:.1f} GB per GPU for one sequence; the GPU has {gpu.vram_bytes / 1e9:.1f} GB")
        return out
    out["fits"] = True
    m = rep.serve(isl, osl)
    out["max_batch"] = cmax
    out["capacity_rps"] = queueing.capacity(m)
    slos = ttft_ms is not None or tpot_ms is not None
    if rps is not None:
        out["load"] = "rps"
        if not rps < out["capacity_rps"]:
            out["rps"] = rps
            out["reason"] = (f"overloaded: {rps:g} requests/s is not below the replica's capacity of "
                             f"{out['capacity_rps']:.4g}; the queue grows without bound")
            return out
        point = queueing.under_rps(m, rps, osl)
        ok = queueing.meets(m, rps, ttft_ms, tpot_ms, percentile) if slos else True
    elif concurrency is not None:
        out["load"] = "concurrency"
        point = queueing.at_concurrency(m, concurrency, osl)
        ok = _meets_point(point, ttft_ms, tpot_ms, percentile)
    elif slos:
        out["load"] = "slo"
        lam = queueing.max_rps_at_slo(m, ttft_ms, tpot_ms, percentile)
        if lam <= 0:
            out.update({k: v for k, v in queueing.at_concurrency(m, 1, osl).items()
                        if k in ("ttft_ms", "tpot_ms", "ttft_ms_p99", "tpot_ms_p99")})
            out["vram_gb_per_gpu"] = round(float(rep.vram_gb(1, isl, osl)), 3)
            out["reason"] = "no load meets the SLOs, not even one request at a time"
            return out
        point, ok = queueing.under_rps(m, lam, osl), True
    else:
        out["load"] = "knee"
        point, ok = queueing.at_concurrency(m, queueing.knee(m) + 1, osl), True
    out.update({k: (round(v, 3) if k.endswith("_ms") or k.endswith("_p99") else v) for k, v in point.items()})
    out["vram_gb_per_gpu"] = round(float(rep.vram_gb(min(cmax, math.ceil(point["mean_batch"] - 1e-9) or 1),
                                                     isl, osl)), 3)
    out["meets_slo"] = bool(ok)
    if not ok:
        out["reason"] = "the SLOs do not hold at this load"
    return out


def _meets_point(point: dict, ttft_ms, tpot_ms, percentile) -> bool:
    """SLOs against a closed-loop point: the mean, or the p99 for any percentile (TPOT is the same at
    every percentile; TTFT's spread is the prefill wait, and p99 bounds the lower percentiles)."""
    key = "" if percentile == queueing.MEAN else "_p99"
    return ((ttft_ms is None or point["ttft_ms" + key] <= ttft_ms)
            and (tpot_ms is None or point["tpot_ms" + key] <= tpot_ms))
