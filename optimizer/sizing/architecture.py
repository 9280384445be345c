"""Model architectures and the quantities derived exactly from them.

A :class:`ModelArch` is one entry of ``catalogs/models.yaml`` (or an inline
``models:`` entry of a problem file). :class:`ArchStats` holds what sizing
needs, computed once: parameter counts (total, active per token, embedding),
KV-cache bytes per token per byte of element size, and attention FLOPs per
(query, key) pair.

Parameter count of a decoder layer (Llama/Mistral/Qwen family, GQA and
SwiGLU; perf_models.md section 1)::

    attention  = h*a*d (Q) + 2*h*k*d (K, V) + a*d*h (O)  [+ a*d + 2*k*d biases if qkv_bias]
    MLP        = 3*h*f (gate, up, down; 2*h*f for a plain two-matrix MLP)
    norms      = 2*h
    model      = L*(attention + MLP + norms) + V*h*(1 if tied else 2) + h

MoE layers replace the MLP by ``experts`` routed experts of width
``expert_ffn_size`` plus ``shared_experts`` always-on experts and a router
``h*experts``; the first ``dense_layers`` layers keep a dense MLP, and of the
layers after them every ``moe_layer_step``-th is MoE (Llama-4 Maverick's
``interleave_moe_layer_step`` 2: dense and MoE layers alternate), the others
dense: ``moe layers = (L - dense_layers) // moe_layer_step``. Active
parameters count the ``experts_per_token`` routed experts plus the shared
ones. MLA (DeepSeek-V2/V3) attention: Q down/up projections through
``q_lora_rank``, a joint K/V down-projection to ``kv_lora_rank`` plus a
decoupled RoPE key of ``rope_head_dim``, K/V up-projections and the output
projection; its cache holds only the latent (``kv_lora_rank + rope_head_dim``
per layer and token).
"""

from __future__ import annotations

import datetime as _dt
import functools
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import catalog as cat
from .hardware import Aliases, _merge_inline, _pydantic_error

PosInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]


class ModelArch(BaseModel):
    """A transformer decoder architecture (Hugging Face ``config.json`` values)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    aliases: Aliases = ()
    layers: PosInt
    hidden_size: PosInt
    heads: PosInt
    kv_heads: PosInt
    head_dim: PosInt | None = None
    ffn_size: PosInt
    vocab_size: PosInt
    tied_embeddings: bool = False
    qkv_bias: bool = False
    gated_mlp: bool = True
    # MoE
    experts: NonNegInt = 0
    experts_per_token: NonNegInt = 0
    shared_experts: NonNegInt = 0
    expert_ffn_size: PosInt | None = None
    dense_layers: NonNegInt = 0
    moe_layer_step: PosInt = 1
    # attention kind; MLA fields
    attention: Literal["gqa", "mla"] = "gqa"
    q_lora_rank: PosInt | None = None
    kv_lora_rank: PosInt | None = None
    rope_head_dim: PosInt | None = None
    nope_head_dim: PosInt | None = None
    v_head_dim: PosInt | None = None
    max_context: PosInt | None = None
    source: str = ""
    date: str | _dt.date | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "ModelArch":
        if self.attention == "gqa":
            if self.kv_heads > self.heads or self.heads % self.kv_heads:
                raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        else:
            missing = [f for f in ("kv_lora_rank", "rope_head_dim") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"attention: mla needs {', '.join(missing)}")
        if self.experts:
            if not 0 < self.experts_per_token <= self.experts:
                raise ValueError("experts_per_token must be between 1 and experts")
            if self.dense_layers > self.layers:
                raise ValueError("dense_layers exceeds layers")
            if self.moe_layer_step > self.layers - self.dense_layers:
                raise ValueError(f"moe_layer_step ({self.moe_layer_step}) leaves no MoE layer in the "
                                 f"{self.layers - self.dense_layers} layers after dense_layers")
        elif self.experts_per_token or self.shared_experts or self.moe_layer_step != 1:
            raise ValueError("experts_per_token/shared_experts/moe_layer_step need experts > 0")
        return self

    # shape helpers -------------------------------------------------------
    @property
    def d(self) -> int:
        """Head dimension (``hidden_size / heads`` unless the config says otherwise)."""
        return self.head_dim or self.hidden_size // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def stats(self) -> "ArchStats":
        return arch_stats(self)


@dataclass(frozen=True)
class ArchStats:
    """Derived quantities of an architecture (all counts, not bytes, unless named).

    Attributes
    ----------
    params_total, params_active
        Every parameter; parameters used per token (MoE: top-k + shared experts).
    params_embedding
        Input embedding + untied LM head (kept in 16 bit when quantising).
    params_lm_head
        The output projection (a matmul for each token whose logits are needed).
    params_expert
        Routed-expert parameters (MoE decode reads only the experts it touches).
    moe_layers
        Layers with a routed MoE block (``(L - dense_layers) // moe_layer_step``).
    params_expert_active
        Routed-expert parameters one token multiplies (``experts_per_token`` per MoE layer).
    kv_elems_per_token
        KV-cache elements per token over all layers (bytes = this x bytes/element).
    kv_shards
        Ways the cache can be split over tensor-parallel ranks: KV heads for
        GQA (heads replicate beyond that), 1 for MLA (the latent is replicated).
    attn_pair_flops_prefill, attn_pair_flops_decode
        FLOPs per layer for one (query, key) pair: ``2*a*(d_qk + d_v)``
        (QK^T plus AV). MLA prefill uses the expanded heads, MLA decode the
        absorbed latent form.
    """

    params_total: float
    params_active: float
    params_embedding: float
    params_lm_head: float
    params_expert: float
    moe_layers: int
    params_expert_active: float
    kv_elems_per_token: float
    kv_shards: int
    attn_pair_flops_prefill: float
    attn_pair_flops_decode: float
    params_per_layer_active: float


@functools.cache
def arch_stats(m: ModelArch) -> ArchStats:
    """Exact parameter and cache counts of ``m`` (see the module docstring)."""
    L, h, a, k, d, V = m.layers, m.hidden_size, m.heads, m.kv_heads, m.d, m.vocab_size
    if m.attention == "mla":
        r, c = m.rope_head_dim, m.kv_lora_rank
        nope = m.nope_head_dim or d
        v = m.v_head_dim or d
        q = m.q_lora_rank
        q_proj = (h * q + q + q * a * (nope + r)) if q else h * a * (nope + r)
        attn = q_proj + h * (c + r) + c + c * a * (nope + v) + a * v * h
        kv_elems = L * (c + r)
        shards = 1
        pair_prefill = 2 * a * ((nope + r) + v)
        pair_decode = 2 * a * ((c + r) + c)
    else:
        attn = h * a * d + 2 * h * k * d + a * d * h
        if m.qkv_bias:
            attn += a * d + 2 * k * d
        kv_elems = 2 * L * k * d
        shards = k
        pair_prefill = pair_decode = 2 * a * (d + d)
    mats = 3 if m.gated_mlp else 2
    dense_mlp = mats * h * m.ffn_size
    norms = 2 * h
    if m.is_moe:
        fe = m.expert_ffn_size or m.ffn_size
        n_moe = (L - m.dense_layers) // m.moe_layer_step
        n_dense = L - n_moe
        expert = mats * h * fe
        routed = m.experts * expert
        moe_total = routed + m.shared_experts * expert + h * m.experts
        moe_active = (m.experts_per_token + m.shared_experts) * expert + h * m.experts
        body_total = L * (attn + norms) + n_dense * dense_mlp + n_moe * moe_total
        body_active = L * (attn + norms) + n_dense * dense_mlp + n_moe * moe_active
        params_expert = n_moe * routed
        expert_active = n_moe * m.experts_per_token * expert
    else:
        n_moe = 0
        body_total = body_active = L * (attn + dense_mlp + norms)
        params_expert = expert_active = 0
    emb = V * h * (1 if m.tied_embeddings else 2)
    return ArchStats(
        params_total=float(body_total + emb + h),
        params_active=float(body_active + emb + h),
        params_embedding=float(emb),
        params_lm_head=float(V * h),
        params_expert=float(params_expert),
        moe_layers=n_moe,
        params_expert_active=float(expert_active),
        kv_elems_per_token=float(kv_elems),
        kv_shards=shards,
        attn_pair_flops_prefill=float(pair_prefill),
        attn_pair_flops_decode=float(pair_decode),
        params_per_layer_active=float(body_active / L),
    )


def kv_bytes_per_token(m: ModelArch, bytes_per_elem: float = 2.0) -> float:
    """KV-cache bytes per token over all layers (GQA: ``2*L*k*d*B``; MLA: ``L*(c+r)*B``)."""
    return arch_stats(m).kv_elems_per_token * bytes_per_elem


def model_arch(entry: dict, *, file: str | None = None, field: str = "models") -> ModelArch:
    """Validate one architecture entry (a dict with the catalog's fields)."""
    try:
        return ModelArch.model_validate(dict(entry))
    except ValidationError as exc:
        raise _pydantic_error(exc, file, field, entry, list(ModelArch.model_fields)) from None


def load_models(inline: list[dict] | None = None, *, file: str | None = None) -> dict[str, ModelArch]:
    """Catalog architectures merged with a problem's inline ``models:`` entries.

    Returns ``{canonical name: ModelArch}``; an inline entry whose name or
    alias matches a catalog model replaces it.
    """
    return _merge_inline("models", model_arch, cat.model_entries(), "catalogs/models.yaml", inline, file)


def model_alias_map(models: dict[str, ModelArch]) -> dict[str, str]:
    return cat.alias_map(list(models), [m.aliases for m in models.values()])


def resolve_model(name: str, models: dict[str, ModelArch], **where) -> ModelArch:
    """The architecture called ``name`` (case-insensitive, aliases welcome), else an InputError."""
    if name in models:
        return models[name]
    return models[cat.resolve("model", name, model_alias_map(models), **where)]
