"""Training sizing: memory, layouts and time."""

from __future__ import annotations

import pytest

from optimizer.sizing import estimate_training, load_efficiency, load_gpus, load_models
from optimizer.sizing.training import flops_per_token


@pytest.fixture(scope="module")
def ref():
    return load_models(), load_gpus(), load_efficiency()


def tr(ref, model, gpu, n, prec="bf16", tokens=1e11, eff=None):
    models, gpus, e = ref
    return estimate_training(models[model], gpus[gpu], n, prec, tokens, eff or e)


def test_small_model_fits_one_node_big_one_does_not(ref):
    assert tr(ref, "llama-3.1-8b", "H100-SXM", 8)["fits"]
    r = tr(ref, "llama-3.1-405b", "H100-SXM", 8)
    assert not r["fits"] and r["vram_gb_per_gpu"] > 80 and r["reason"]
    assert tr(ref, "llama-3.1-405b", "H100-SXM", 512)["fits"]


def test_time_formula(ref):
    models, gpus, eff = ref
    r = tr(ref, "llama-3.1-8b", "H100-SXM", 8)
    # hours = tokens x FLOPs/token / achieved FLOP/s; with no scale-out penalty on one node
    achieved = r["mfu"] * 8 * 989e12
    f = flops_per_token(models["llama-3.1-8b"], eff["train_sequence_tokens"])
    assert r["hours"] == pytest.approx(1e11 * f / achieved / 3600, rel=1e-9)
    assert 6 * 8.03e9 < f < 6 * 8.03e9 * 1.1  # 6N plus causal attention
    assert 0.2 < r["mfu"] <= eff["train_mfu_hopper"]


def test_more_gpus_never_slower(ref):
    for model, gpu in [("llama-3.1-8b", "H100-SXM"), ("llama-3.1-70b", "A100-80GB"), ("llama-3.1-8b", "L40S")]:
        hours = [r["hours"] for r in (tr(ref, model, gpu, n) for n in (8, 16, 32, 64, 128, 256)) if r["fits"]]
        assert len(hours) >= 3
        assert hours == sorted(hours, reverse=True), (model, gpu, hours)


def test_fp8_faster_but_not_twice(ref):
    b = tr(ref, "llama-3.1-70b", "H100-SXM", 64)
    f = tr(ref, "llama-3.1-70b", "H100-SXM", 64, "fp8")
    assert 1.0 < b["hours"] / f["hours"] < 2.0


def test_unsupported_training_precision(ref):
    assert not tr(ref, "llama-3.1-8b", "A100-80GB", 8, "fp8")["fits"]
    assert not tr(ref, "llama-3.1-8b", "H100-SXM", 8, "int4")["fits"]
    assert not tr(ref, "llama-3.1-8b", "T4", 8, "bf16")["fits"]


def test_efficiency_override_changes_hours(ref):
    base = tr(ref, "llama-3.1-8b", "H100-SXM", 8)
    slow = tr(ref, "llama-3.1-8b", "H100-SXM", 8, eff=load_efficiency({"train_mfu_hopper": 0.2}))
    assert slow["hours"] > 1.5 * base["hours"]


def test_layout_search_uses_sharding_and_recompute_when_needed(ref):
    r = tr(ref, "llama-3.1-70b", "H100-SXM", 64)
    assert r["fits"] and r["vram_gb_per_gpu"] <= 80 * 0.95
    big = tr(ref, "llama-3.1-405b", "H100-SXM", 1024)
    assert big["fits"] and ("zero3" in big["layout"] or "pp" in big["layout"])
    assert big["tp"] * big["pp"] * big["dp"] == 1024
