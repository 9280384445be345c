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
    assert big["tp"] * big["cp"] * big["pp"] * big["dp"] == big["gpus_used"] <= 1024


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


# --- TP communication overlap, interleaved pipelines, context parallelism ------------------------------
# Each check picks one layout out of `layouts` and recomputes its memory or throughput by hand from
# docs/sizing.md ("Training model"): H100-SXM bf16 dense peak 989 TFLOP/s, one-direction NVLink 450 GB/s,
# 81,559 MiB of memory; train_mfu_hopper 0.46, train_comm_bw_fraction 0.75.

def _pick(lay, **want):
    rows = [i for i in range(len(lay["t"])) if all(lay[k][i] == v for k, v in want.items())]
    assert len(rows) == 1, (want, rows)
    return rows[0]


def test_tp_overlap_of_one_removes_the_tp_term_and_zero_charges_it_in_full(ref):
    from optimizer.sizing.training import layouts

    models, gpus, eff = ref
    arch = models["llama-3.1-70b"]  # 80 layers, hidden 8,192
    f = flops_per_token(arch, eff["train_sequence_tokens"])
    # tp8 on one node, no pipeline, no data parallelism (so no bubble and no gradient traffic):
    # a token takes f / (8 x 989e12 x 0.46) s of compute, plus per layer 4 all-reduces of the 2-byte hidden
    # vector, ring: 2 x (8,192 x 2 B) x 7/8 = 28,672 B each, at 450e9 x 0.75 B/s
    compute = f / (8 * 989e12 * 0.46)
    comm = 80 * 4 * 28_672 / (450e9 * 0.75)
    assert comm == pytest.approx(27.185e-6, rel=1e-4)
    for overlap, want in ((1.0, 1 / compute), (0.0, 1 / (compute + comm)), (0.9, 1 / (compute + 0.1 * comm))):
        e = eff.with_overrides({"train_tp_comm_overlap": overlap})
        lay = layouts(arch, gpus["H100-SXM"], 8, "bf16", e, framework="megatron")
        i = _pick(lay, t=8, c=1, p=1, recompute="none")
        assert lay["tokens_per_s"][i] == pytest.approx(want, rel=1e-9), overlap
    # overlap 0 is the time before the factor existed: tokens/s = rate / f / (1 + comm/compute) for bf16
    before = 8 * 989e12 * 0.46 / f / (1 + comm / compute)
    assert 1 / (compute + comm) == pytest.approx(before, rel=1e-12)
    # fp8 speeds the GEMMs up (train_fp8_speedup 1.6), not NVLink: the TP time stays what it is
    e = eff.with_overrides({"train_tp_comm_overlap": 0.0})
    lay = layouts(arch, gpus["H100-SXM"], 8, "fp8", e, framework="megatron")
    i = _pick(lay, t=8, c=1, p=1, recompute="none")
    assert lay["tokens_per_s"][i] == pytest.approx(1 / (compute / 1.6 + comm), rel=1e-9)


def test_interleaving_shrinks_the_bubble_by_hand(ref):
    from optimizer.sizing.training import layouts

    models, gpus, eff = ref
    arch = models["llama-3.1-8b"]  # 32 layers: 2 stages of 16, or 2 x 2 chunks of 8
    # 2 GPUs as a 2-stage pipeline, one data-parallel rank, a global batch of 4 sequences of 4,096 tokens:
    # m = 4 micro-batches. Bubble 1F1B (4 + 1)/4 = 1.25; interleaved with v = 2 (4 + 1/2)/4 = 1.125.
    e = eff.with_overrides({"train_global_batch_tokens": 4 * 4096, "train_sequence_tokens": 4096})
    lay = layouts(arch, gpus["H100-SXM"], 2, "bf16", e, framework="megatron")
    f = flops_per_token(arch, 4096)
    busy = 2 * 989e12 * 0.46 / f              # tokens/s of 2 GPUs without a bubble (no TP, CP or DP terms)
    one = lay["tokens_per_s"][_pick(lay, t=1, c=1, p=2, v=1, recompute="none")]
    two = lay["tokens_per_s"][_pick(lay, t=1, c=1, p=2, v=2, recompute="none")]
    assert one == pytest.approx(busy / 1.25, rel=1e-9)
    assert two == pytest.approx(busy / 1.125, rel=1e-9)
    # memory: the first stage holds 1 + (p - 1)/(p v) = 1.25 x the 1F1B activations (Korthikanti et al.)
    sbh = 4096 * 4096                          # tokens x hidden, 2-byte activations
    acts_1f1b = 36 * sbh * 32
    vram = {v: lay["vram_bytes"][_pick(lay, t=1, c=1, p=2, v=v, recompute="none")] for v in (1, 2)}
    assert vram[2] - vram[1] == pytest.approx(0.25 * acts_1f1b, rel=1e-9)
    # v = 3 does not split 32 layers evenly: 6 chunks of at most ceil(32/6) = 6 layers, so the fullest stage
    # holds 18 layers where the average is 16 and sets the pace (x 18/16); bubble (4 + 1/3)/4
    three = lay["tokens_per_s"][_pick(lay, t=1, c=1, p=2, v=3, recompute="none")]
    assert three == pytest.approx(busy / (18 / 16) / ((4 + 1 / 3) / 4), rel=1e-9)
    # a stage split that leaves a chunk without a layer is not tried: at most 16 chunks of one layer
    assert lay["v"][lay["p"] == 2].max() == 16 and 17 not in set(lay["v"])
    # train_max_virtual_stages 1 turns interleaving off
    off = layouts(arch, gpus["H100-SXM"], 2, "bf16", e.with_overrides({"train_max_virtual_stages": 1}),
                  framework="megatron")
    assert set(off["v"]) == {1}


def test_context_parallelism_makes_a_long_sequence_fit_with_the_memory_by_hand(ref):
    models, gpus, eff = ref
    arch, h100 = models["llama-3.1-8b"], gpus["H100-SXM"]
    # 128K tokens per sequence on 8 GPUs without NVLink peers for tensor parallelism (train_max_tp 1):
    # without CP the fp32 logits alone are 4 x 131,072 x 128,256 B = 67.2 GB per GPU
    e = eff.with_overrides({"train_sequence_tokens": 131072, "train_max_tp": 1})
    no_cp = estimate_training(arch, h100, 8, "bf16", 1e9, e.with_overrides({"train_max_cp": 1}),
                              framework="megatron")
    assert not no_cp["fits"]
    assert estimate_training(arch, h100, 8, "bf16", 1e9, e, framework="megatron")["fits"]
    # layout cp8 (each GPU holds 16,384 tokens of every sequence), no pipeline, ZeRO-1, full recompute:
    P = 8_030_261_248
    states = 4 * P + 12 * P / 8                 # bf16 weights + grads whole; Adam sharded over dp x cp = 8
    sbh = 131072 * 4096 / 8                     # tokens per GPU x hidden (2-byte activations: bytes = sbh)
    acts = 2 * sbh * 32 + 36 * sbh              # checkpointed layer inputs + one layer live
    logits = 4 * 131072 * 128256 / 8
    misc = 2 * 2**30
    want = states + acts + logits + misc
    assert want == pytest.approx(61.4e9, rel=1e-3) and want < 81_559 * 2**20 * 0.95
    from optimizer.sizing.training import layouts

    lay = layouts(arch, h100, 8, "bf16", e, framework="megatron")
    i = _pick(lay, t=1, c=8, p=1, recompute="full")
    assert lay["fits"][i] and lay["vram_bytes"][i] == pytest.approx(want, rel=1e-12)
    # FSDP has no context parallelism
    assert set(layouts(arch, h100, 8, "bf16", e, framework="fsdp")["c"]) == {1}


def test_context_parallel_exchange_hides_behind_attention_until_it_cannot(ref):
    from optimizer.sizing.architecture import arch_stats
    from optimizer.sizing.training import Network, layouts

    models, gpus, eff = ref
    arch, h100 = models["llama-3.1-8b"], gpus["H100-SXM"]
    st = arch_stats(arch)
    # Per layer and sequence a GPU of a cp2 group receives 3 x 1 chunks of s/2 tokens of K and V
    # (8 KV heads x 128 x 2 x 2 B = 4,096 B per token), against 1.5 s^2 x pair FLOPs / 2 GPUs of attention.
    kv = 2 * 8 * 128 * 2
    assert st.kv_elems_per_token / 32 * 2 == kv
    # one node of 2 (NVLink inside, 450e9 x 0.75 B/s) against 2 nodes of 1 on a 1 Gbit/s fabric
    for s, net, exposed in ((8192, Network(2, None), False), (8192, Network(1, 1.0), True)):
        e = eff.with_overrides({"train_sequence_tokens": s, "train_global_batch_tokens": s})
        lay = layouts(arch, h100, 2, "bf16", e, net, framework="megatron")
        i = _pick(lay, t=1, c=2, p=1, recompute="full")
        link = 450e9 * 0.75 if net.fabric_gbps_per_gpu is None else 1e9 / 8 * 0.75
        comm = 3 * 1 * (s / 2) * kv / link
        attn = 1.5 * s * s * st.attn_pair_flops_prefill / (989e12 * 0.46) / 2
        assert (comm > attn) == exposed
        f = flops_per_token(arch, s)
        token_s = f * 1.33 / (989e12 * 0.46) / 2 + 32 * max(0.0, comm - attn) / s
        # one sequence per step; the two CP ranks all-reduce their gradients (2 x P x 2 B x 1/2) over the
        # same link, hidden behind 0.7 of the step
        step = s * token_s
        grads = 2 * st.params_total * 2 * 0.5 / link
        assert lay["tokens_per_s"][i] == pytest.approx(s / (step + max(0.0, grads - 0.7 * step)), rel=1e-9)


def test_layout_text_names_interleaving_and_context_parallelism(ref):
    models, gpus, eff = ref
    e = eff.with_overrides({"train_sequence_tokens": 131072, "train_max_tp": 1})
    r = estimate_training(models["llama-3.1-8b"], gpus["H100-SXM"], 8, "bf16", 1e9, e, framework="megatron")
    assert " cp" in r["layout"] and r["cp"] > 1
    assert r["tp"] * r["cp"] * r["pp"] * r["dp"] <= 8


def test_lora_adapters_of_an_interleaved_moe_and_a_model_without_head_dim_by_hand(ref):
    # Llama-4 Maverick, rank 16: h 5120, 40 heads and 8 KV heads of 128, 48 layers, every second MoE.
    # Attention per layer: 4·5120 + 2·40·128 + 2·8·128 = 20,480 + 10,240 + 2,048 = 32,768.
    # 24 dense layers adapt their 16,384-wide gated MLP: 3·(5,120 + 16,384) = 64,512;
    # 24 MoE layers the one shared expert, 8,192 wide: 3·(5,120 + 8,192) = 39,936.
    # 16·(24·(32,768 + 64,512) + 24·(32,768 + 39,936)) = 16·(2,334,720 + 1,744,896) = 65,273,856.
    from optimizer.sizing.architecture import ModelArch
    from optimizer.sizing.training import lora_params

    models, _, _ = ref
    assert lora_params(models["llama-4-maverick"], 16) == 65_273_856
    # no head_dim stated: d = 4,096 / 32 = 128; a non-gated MLP has two matrices: 2·(4,096 + 16,384) = 40,960;
    # attention 4·4,096 + 2·32·128 + 2·32·128 = 32,768; 2 layers, rank 8: 8·2·(32,768 + 40,960) = 1,179,648
    arch = ModelArch(name="toy", layers=2, hidden_size=4096, heads=32, kv_heads=32, ffn_size=16384,
                     vocab_size=32000, gated_mlp=False)
    assert lora_params(arch, 8) == 1_179_648
