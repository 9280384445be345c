"""Exact parameter and KV-cache counts from the shipped architectures (hand-checked figures)."""

from __future__ import annotations

import pandas as pd
import pytest

from optimizer import catalog as cat
from optimizer.errors import InputError
from optimizer.sizing import kv_bytes_per_token, load_gpus, load_models, resolve_gpu, resolve_model
from optimizer.sizing.architecture import model_arch

MODELS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
          "mistral-7b", "mixtral-8x7b", "mixtral-8x22b", "qwen2.5-7b", "qwen2.5-72b", "deepseek-v3",
          "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "gpt-oss-20b", "llama-4-scout",
          "gpt-3-175b", "deepseek-r1", "llama-4-maverick", "llama-2-34b", "mpt-7b", "mpt-30b"]
GPUS = ["T4", "L4", "A10G", "A10", "L40S", "RTX-4090", "RTX-5090", "A100-40GB", "A100-80GB", "A100-PCIe-80GB",
        "H100-SXM", "H100-PCIe", "H100-NVL", "H200", "GH200", "B200", "GB200", "MI300X", "MI325X", "MI355X",
        "Gaudi3"]


@pytest.fixture(scope="module")
def models():
    return load_models()


def test_catalog_names_are_the_normative_ones(models):
    assert list(models) == MODELS
    assert list(load_gpus()) == GPUS


def test_catalog_rows_are_sourced_and_dated():
    t = cat.gpu_table()
    assert t["source"].notna().all() and t["date"].notna().all()
    for m in cat.model_entries():
        assert m.get("source") and m.get("date"), m["name"]


def test_llama_3_1_8b_params_and_kv(models):
    m = models["llama-3.1-8b"]
    # 32*(4096*4096*2 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 2*128256*4096 + 4096
    assert m.stats.params_total == 8_030_261_248
    assert kv_bytes_per_token(m, 2) == 131_072  # 2 * 32 layers * 8 heads * 128 * 2 bytes


@pytest.mark.parametrize("name,total_b,active_b,kv", [
    ("llama-2-7b", 6.738, 6.738, 524_288),
    ("llama-3.1-70b", 70.55, 70.55, 327_680),
    ("llama-3.1-405b", 405.85, 405.85, 516_096),
    ("mistral-7b", 7.242, 7.242, 131_072),
    ("qwen2.5-7b", 7.616, 7.616, 57_344),
    ("mixtral-8x7b", 46.70, 12.88, 131_072),
    ("deepseek-v3", 671.0, 37.5, 70_272),
])
def test_param_counts(models, name, total_b, active_b, kv):
    st = models[name].stats
    assert st.params_total / 1e9 == pytest.approx(total_b, rel=2e-3)
    assert st.params_active / 1e9 == pytest.approx(active_b, rel=5e-3)
    assert kv_bytes_per_token(models[name], 2) == kv


@pytest.mark.parametrize("name,total_b,rel,kv", [
    # totals the makers publish; KV at 2 bytes = 2 (K, V) x layers x KV heads x head_dim x 2
    ("qwen3-32b", 32.8, 2e-3, 2 * 64 * 8 * 128 * 2),          # Qwen3 model card: 32.8B
    ("qwen3-30b-a3b", 30.5, 2e-3, 2 * 48 * 4 * 128 * 2),      # 30.5B total, 3.3B activated
    ("qwen3-235b-a22b", 235.0, 2e-3, 2 * 94 * 4 * 128 * 2),   # 235B total, 22B activated
    ("gpt-oss-120b", 116.83, 2e-3, 2 * 36 * 8 * 64 * 2),      # OpenAI gpt-oss model card: 116.83B
    ("gpt-oss-20b", 20.91, 2e-3, 2 * 24 * 8 * 64 * 2),        # 20.91B
    ("llama-4-scout", 109.0, 2e-2, 2 * 48 * 8 * 128 * 2),     # Meta: 109B with the vision encoder
    ("gpt-3-175b", 175.0, 5e-3, 2 * 96 * 96 * 128 * 2),       # Brown et al. 2020: 175B
    ("deepseek-r1", 671.0, 2e-3, 61 * (512 + 64) * 2),         # R1 model card: 671B total (MLA latent cache)
    ("llama-4-maverick", 400.0, 2e-3, 2 * 48 * 8 * 128 * 2),  # Meta model card: 400B total
    ("llama-2-34b", 34.0, 1e-2, 2 * 48 * 8 * 128 * 2),        # Llama 2 paper Table 1: 34B (never released)
    ("mpt-7b", 6.7, 1e-2, 2 * 32 * 32 * 128 * 2),             # MosaicML: 6.7B
    ("mpt-30b", 30.0, 2e-3, 2 * 48 * 64 * 112 * 2),           # MosaicML: 30B
])
def test_param_counts_of_the_models_people_deploy_now(models, name, total_b, rel, kv):
    assert models[name].stats.params_total / 1e9 == pytest.approx(total_b, rel=rel)
    assert kv_bytes_per_token(models[name], 2) == kv


def test_llama_4_maverick_by_hand_from_its_config(models):
    """config.json text_config: 48 layers, h 5120, 40 heads, 8 KV heads of 128, dense layers' MLP 16384
    (intermediate_size_mlp), experts of 8192 (intermediate_size), 128 routed + 1 shared, top-1,
    interleave_moe_layer_step 2 (24 MoE layers, 24 dense), vocab 202048, untied."""
    m = models["llama-4-maverick"]
    h = 5120
    attn = h * 40 * 128 + 2 * h * 8 * 128 + 40 * 128 * h      # 62,914,560
    norms = 2 * h
    dense_mlp = 3 * h * 16384                                  # 251,658,240
    expert = 3 * h * 8192                                      # 125,829,120
    router = h * 128
    assert attn == 62_914_560 and dense_mlp == 251_658_240 and expert == 125_829_120
    total = 48 * (attn + norms) + 24 * dense_mlp + 24 * (129 * expert + router) + 2 * 202048 * h + h
    active = 48 * (attn + norms) + 24 * dense_mlp + 24 * (2 * expert + router) + 2 * 202048 * h + h
    assert total == 400_711_848_960          # Meta: "400B total"
    assert active == 17_184_691_200          # Meta: "17B active"
    st = m.stats
    assert st.params_total == total and st.params_active == active
    assert st.moe_layers == 24
    assert st.params_expert == 24 * 128 * expert
    assert st.params_expert_active == 24 * 1 * expert


def test_deepseek_r1_is_deepseek_v3s_architecture(models):
    v3, r1 = models["deepseek-v3"].stats, models["deepseek-r1"].stats
    assert r1 == v3
    assert r1.params_active / 1e9 == pytest.approx(37.5, rel=5e-3)
    assert resolve_model("DeepSeek-R1", models).name == "deepseek-r1"


def test_moe_layer_step_and_its_errors(models):
    base = dict(name="x", layers=4, hidden_size=64, heads=4, kv_heads=2, ffn_size=128, vocab_size=100,
                experts=4, experts_per_token=1, expert_ffn_size=32)
    every = model_arch(base).stats
    alt = model_arch({**base, "moe_layer_step": 2}).stats
    # 4 layers x (attention 4*64*64... ) alike; step 2 swaps 2 MoE blocks (4 experts of 3*64*32 + router 64*4)
    # for 2 dense MLPs of 3*64*128
    assert every.moe_layers == 4 and alt.moe_layers == 2
    assert every.params_total - alt.params_total == 2 * (4 * 3 * 64 * 32 + 64 * 4) - 2 * 3 * 64 * 128
    with pytest.raises(InputError):  # a step that leaves no MoE layer
        model_arch({**base, "moe_layer_step": 5}, field="models[0]")
    with pytest.raises(InputError):  # a step on a dense model
        model_arch({k: v for k, v in base.items() if not k.startswith("expert")} | {"moe_layer_step": 2})
    with pytest.raises(InputError) as e:  # a misspelt field: the near match
        model_arch({**base, "moe_layer_stp": 2}, file="m.yaml", field="models[0]")
    assert e.value.field == "models[0].moe_layer_stp" and e.value.suggestion == "moe_layer_step"
    with pytest.raises(InputError) as e:
        resolve_model("llama-4-maverik", models, field="--model")
    assert e.value.suggestion == "llama-4-maverick"


def test_moe_active_is_a_fraction_of_total(models):
    m = models["mixtral-8x22b"]
    assert m.stats.params_total / 1e9 == pytest.approx(140.6, rel=2e-3)
    assert m.stats.params_active < 0.3 * m.stats.params_total


def test_names_resolve_case_insensitively_with_aliases(models):
    assert resolve_model("Llama-3.1-8B-Instruct", models).name == "llama-3.1-8b"
    assert resolve_model("MIXTRAL-8X7B", models).name == "mixtral-8x7b"
    gpus = load_gpus()
    assert resolve_gpu("h100", gpus).name == "H100-SXM"
    assert resolve_gpu("A100-SXM4-80GB", gpus).name == "A100-80GB"
    with pytest.raises(InputError) as e:
        resolve_model("llama-3.1-8bb", models, field="inference[x].model")
    assert e.value.suggestion == "llama-3.1-8b" and e.value.field == "inference[x].model"


def test_precision_support_follows_blank_columns():
    g = load_gpus()
    assert not g["T4"].supports("bf16") and g["T4"].supports("fp16")
    assert g["T4"].supports("int8") and g["T4"].supports("int4") and not g["T4"].supports("fp8")
    assert not g["A100-80GB"].supports("fp8") and g["H100-SXM"].supports("fp8")
    assert g["B200"].supports("fp4") and not g["H200"].supports("fp4")
    assert not g["Gaudi3"].supports("int8")
    # blank really is blank in the CSV: no zeros standing in for "none"
    t = cat.gpu_table()
    for col in ["fp32", "bf16", "fp16", "fp8", "int8", "fp4"]:
        v = pd.to_numeric(t[f"{col}_dense_tflops"])
        assert (v.dropna() > 0).all()


def test_bad_architecture_is_an_input_error():
    base = dict(name="x", layers=2, hidden_size=64, heads=4, kv_heads=3, ffn_size=128, vocab_size=100)
    with pytest.raises(InputError):  # kv_heads must divide heads
        model_arch(base, file="p.yaml", field="models[0]")
    with pytest.raises(InputError) as e:
        model_arch({**base, "kv_heads": 2, "layerz": 3}, file="p.yaml", field="models[0]")
    assert e.value.field == "models[0].layerz" and e.value.file == "p.yaml"
