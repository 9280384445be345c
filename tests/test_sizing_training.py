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
    # the degrees need not divide the cluster (pipeline degrees that split the layers evenly, e.g. 9 for
    # 126); GPUs left over stay idle and are not counted as working
    assert big["tp"] * big["cp"] * big["pp"] * big["dp"] <= 1024


# --- LoRA and QLoRA ---------------------------------------------------------------------------------
# Llama-3.1-70B: body 68,452,360,192 parameters, input and output embeddings 2,101,346,304.
# Rank-16 adapters on every linear layer: 80 layers x 16 x (7 x 8,192 + 2 x 8,192 + 2 x 1,024 + 3 x 28,672)
# = 80 x 16 x 161,792 = 207,093,760 parameters.
BODY, EMB, ADAPTERS = 68_452_360_192, 2_101_346_304, 80 * 16 * 161_792


def _layout_vram(ref, method, tp=8):
    from optimizer.sizing.training import layouts

    models, gpus, eff = ref
    lay = layouts(models["llama-3.1-70b"], gpus["H100-SXM"], tp, "bf16", eff, method=method)
    i = [j for j in range(len(lay["t"])) if lay["t"][j] == tp and lay["p"][j] == 1 and lay["zero"][j] == 1
         and lay["recompute"][j] == "full"][0]
    return float(lay["vram_bytes"][i])


def test_lora_memory_of_70b_by_hand(ref):
    from optimizer.sizing.training import lora_params

    models, _, _ = ref
    assert lora_params(models["llama-3.1-70b"], 16) == ADAPTERS
    # tp8, one pipeline stage, one data-parallel rank, ZeRO-1: activations are the same for every method,
    # so the differences are the weight and optimizer states alone (per GPU: a tenth of the model each)
    full = 16 * (BODY + EMB) / 8                                   # bf16 weights + grads 4, Adam 12
    lora = 2 * (BODY + EMB) / 8 + 16 * ADAPTERS / 8                # frozen bf16 base, trained adapters
    qlora = (0.516 * BODY + 2 * EMB) / 8 + 16 * ADAPTERS / 8       # NF4 body, 16-bit embeddings
    assert _layout_vram(ref, "lora") - _layout_vram(ref, "full") == pytest.approx(lora - full)
    assert _layout_vram(ref, "qlora") - _layout_vram(ref, "full") == pytest.approx(qlora - full)


def test_lora_flops_skip_the_base_weight_gradients(ref):
    models, _, _ = ref
    arch = models["llama-3.1-70b"]
    n = BODY + EMB
    attn = flops_per_token(arch, 4096) - 6 * n
    assert flops_per_token(arch, 4096, "lora", 16) == pytest.approx(4 * n + 6 * ADAPTERS + attn)


def test_a_70b_fine_tune_no_longer_needs_16_gpus(ref):
    models, gpus, eff = ref

    def fits(n, method):
        return estimate_training(models["llama-3.1-70b"], gpus["H100-SXM"], n, "bf16", 1e9, eff,
                                 method=method)["fits"]

    assert not fits(8, "full") and fits(16, "full")
    assert not fits(1, "lora") and fits(2, "lora")
    assert fits(1, "qlora")
    q = estimate_training(models["llama-3.1-70b"], gpus["H100-SXM"], 8, "bf16", 1e9, eff, method="qlora")
    lo = estimate_training(models["llama-3.1-70b"], gpus["H100-SXM"], 8, "bf16", 1e9, eff, method="lora")
    assert q["gpu_hours"] == pytest.approx(8 * q["hours"]) and q["hours"] > lo["hours"]


def test_a_job_states_its_method_sequence_length_and_batch(ref):
    from optimizer import schema
    from optimizer.sizing import training_candidates

    models, gpus, eff = ref
    base = dict(name="ft", model="llama-3.1-70b", tokens=1e9, deadline_month=1, cluster_gpus=[2, 16])
    full = training_candidates(schema.TrainingJob(**base), ["H100-SXM"], models=models, gpus=gpus, eff=eff)
    lora = training_candidates(schema.TrainingJob(**base, method="lora"), ["H100-SXM"], models=models,
                               gpus=gpus, eff=eff)
    assert list(full["gpus"]) == [16] and 2 in set(lora["gpus"])
    short = training_candidates(schema.TrainingJob(**base, method="lora", sequence_length=1024), ["H100-SXM"],
                                models=models, gpus=gpus, eff=eff).set_index("gpus")
    long_ = training_candidates(schema.TrainingJob(**base, method="lora", sequence_length=32768), ["H100-SXM"],
                                models=models, gpus=gpus, eff=eff).set_index("gpus")
    assert long_.loc[16, "hours"] > short.loc[16, "hours"]  # attention FLOPs grow with the sequence
    with pytest.raises(ValueError):
        schema.TrainingJob(**base, method="dora")


def test_the_framework_limits_the_layouts_and_sets_the_fp8_speed_up():
    from optimizer.errors import InputError
    from optimizer.sizing import estimate_training, load_efficiency, load_gpus, load_models

    models, gpus, eff = load_models(), load_gpus(), load_efficiency()
    arch, h100 = models["llama-3.1-70b"], gpus["H100-SXM"]
    # FSDP (full shard) has no tensor or pipeline parallelism; Megatron never shards parameters (ZeRO-3)
    fsdp = estimate_training(arch, h100, 64, "bf16", 1e11, eff, framework="fsdp")
    assert fsdp["layout"].startswith("tp1 pp1 dp64 zero3")
    mega = estimate_training(arch, h100, 64, "bf16", 1e11, eff, framework="megatron")
    assert "zero3" not in mega["layout"]
    best = estimate_training(arch, h100, 64, "bf16", 1e11, eff)
    assert best["tokens_per_s"] >= max(fsdp["tokens_per_s"], mega["tokens_per_s"])
    # fp8 speed-up: a LoRA run of an 8B model on one GPU has no tensor, pipeline or data-parallel term,
    # so fp8 over bf16 is exactly the framework's factor (1.6 Megatron/NeMo, 1.25 FSDP)
    small = models["llama-3.1-8b"]
    for framework, want in (("megatron", eff["train_fp8_speedup"]), ("fsdp", eff["train_fp8_speedup_fsdp"])):
        r = {p: estimate_training(small, h100, 1, p, 1e9, eff, method="lora", framework=framework)["tokens_per_s"]
             for p in ("bf16", "fp8")}
        assert r["fp8"] / r["bf16"] == pytest.approx(want)
    assert eff["train_fp8_speedup"] == 1.6 and eff["train_fp8_speedup_fsdp"] == 1.25
    with pytest.raises(InputError) as e:
        estimate_training(arch, h100, 8, "bf16", 1e9, eff, framework="deepspeed")
    assert e.value.field == "framework"


def test_cli_framework(tmp_path):
    import json

    from click.testing import CliRunner

    from optimizer.cli import main

    args = ["estimate", "training", "-m", "llama-3.1-70b", "-g", "H100-SXM", "-n", "64", "-t", "1e11",
            "--format", "json"]
    out = json.loads(CliRunner().invoke(main, args + ["--framework", "fsdp"]).output)
    assert out["framework"] == "fsdp" and out["layout"].startswith("tp1 pp1 dp64 zero3")
    r = CliRunner().invoke(main, args + ["--framework", "jax"])
    assert r.exit_code == 2 and "--framework" in r.output
