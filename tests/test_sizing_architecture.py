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
          "gpt-3-175b"]
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
])
def test_param_counts_of_the_models_people_deploy_now(models, name, total_b, rel, kv):
    assert models[name].stats.params_total / 1e9 == pytest.approx(total_b, rel=rel)
    assert kv_bytes_per_token(models[name], 2) == kv


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
