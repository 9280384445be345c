"""Inference sizing: memory fit, latency and throughput behave as the physics says."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.sizing import estimate_inference, load_efficiency, load_gpus, load_models
from optimizer.sizing.inference import replica


@pytest.fixture(scope="module")
def ref():
    return load_models(), load_gpus(), load_efficiency()


def est(ref, model, gpu, tp, prec, isl=1000, osl=200, **slo):
    models, gpus, eff = ref
    return estimate_inference(models[model], gpus[gpu], tp, prec, isl, osl, eff, **slo)


def test_405b_bf16_fits_on_no_single_gpu(ref):
    models, gpus, eff = ref
    for g in gpus:
        for prec in ("bf16", "fp16"):
            assert not est(ref, "llama-3.1-405b", g, 1, prec, 100, 100)["fits"], g


def test_70b_fp8_fits_on_one_h200_not_in_bf16(ref):
    r = est(ref, "llama-3.1-70b", "H200", 1, "fp8", 1500, 300)
    assert r["fits"] and r["max_batch"] >= 8
    assert 70 < r["weights_gb_per_gpu"] < 75  # 68.4 B params at 1 B + embeddings at 2 B
    assert r["vram_gb_per_gpu"] <= 143_771 * 2**20 / 1e9 * 0.9  # H200: 143,771 MiB (gpus.csv vram_mib), 90 % usable
    # bf16 weights take 141.1 of the H200's 150.8 GB: a handful of sequences, not on an H100 at all
    bf16 = est(ref, "llama-3.1-70b", "H200", 1, "bf16", 1500, 300)
    assert bf16["fits"] and bf16["max_batch"] < r["max_batch"] / 4
    assert not est(ref, "llama-3.1-70b", "H100-SXM", 1, "bf16", 1500, 300)["fits"]


def test_weights_match_vllm_log(ref):
    models, gpus, eff = ref
    rep = replica(models["llama-3.1-8b"], gpus["A10G"], 1, "bf16", eff)
    assert rep.weights_gpu / 2**30 == pytest.approx(14.96, abs=0.01)  # vLLM: "took 14.9595 GB" (GiB)


def test_unsupported_precision_does_not_fit(ref):
    r = est(ref, "llama-3.1-8b", "A100-80GB", 1, "fp8")
    assert not r["fits"] and "fp8" in r["reason"]


def test_quantised_weights_are_smaller(ref):
    w = {p: est(ref, "llama-3.1-8b", "H100-SXM", 1, p)["weights_gb_per_gpu"] for p in ("bf16", "fp8", "int4")}
    assert w["int4"] < w["fp8"] < w["bf16"]
    assert 5.0 < w["int4"] < 6.0  # 4-bit body + 16-bit embeddings


def test_kv_is_replicated_beyond_kv_heads_and_mla_is_not_split(ref):
    models, gpus, eff = ref
    kv = [replica(models["llama-3.1-70b"], gpus["H100-SXM"], t, "bf16", eff).kv_tok_gpu for t in (1, 2, 4, 8)]
    assert kv == [327_680, 163_840, 81_920, 40_960]
    m = models["llama-2-7b"]  # 32 KV heads: split up to 8
    assert replica(m, gpus["H100-SXM"], 8, "bf16", eff).kv_tok_gpu == 524_288 / 8
    ds = [replica(models["deepseek-v3"], gpus["H200"], t, "fp8", eff).kv_tok_gpu for t in (1, 8)]
    assert ds[0] == ds[1] == 61 * 576  # latent replicated, fp8 cache


def test_more_gpus_never_slower(ref):
    for model, gpu in [("llama-3.1-70b", "H100-SXM"), ("llama-3.1-8b", "A100-80GB"), ("mixtral-8x7b", "H200")]:
        rows = [est(ref, model, gpu, t, "bf16", 2000, 200) for t in (1, 2, 4, 8)]
        rows = [r for r in rows if r["fits"]]
        assert len(rows) >= 2
        ttft = [r["ttft_ms"] for r in rows]
        rps = [r["rps"] for r in rows]
        assert ttft == sorted(ttft, reverse=True), (model, ttft)
        assert rps == sorted(rps), (model, rps)
        models, gpus, eff = ref
        step = [float(replica(models[model], gpus[gpu], r["gpus"], "bf16", eff).decode_step_s(1, 2000))
                for r in rows]
        assert step == sorted(step, reverse=True), (model, step)


def test_longer_prompts_never_lower_ttft(ref):
    models, gpus, eff = ref
    rep = replica(models["llama-3.1-8b"], gpus["L40S"], 1, "fp8", eff)
    prev = 0.0
    for isl in (16, 128, 512, 2048, 8192, 9000, 16384, 32768):
        m = rep.serve(isl, 100, batches=np.array([1, 4]))
        assert m["ttft_ms"][0] >= prev and m["ttft_ms"][1] >= m["ttft_ms"][0]
        prev = m["ttft_ms"][0]


def test_tighter_slos_never_raise_rps(ref):
    prev = np.inf
    for tpot in (200, 100, 60, 40, 30, 20, 15, 10):
        r = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16", 1000, 200, tpot_ms=tpot)
        rps = r["rps"]
        assert rps <= prev + 1e-12
        if r["fits"]:
            assert r["tpot_ms"] <= tpot
        prev = rps
    loose = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16", 4000, 200, ttft_ms=2000)["rps"]
    tight = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16", 4000, 200, ttft_ms=200)["rps"]
    assert tight <= loose


def test_no_slo_is_the_maximum_throughput_point(ref):
    free = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16")
    slo = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16", tpot_ms=30)
    assert free["rps"] >= slo["rps"] and free["max_batch"] >= slo["max_batch"]
    assert free["output_tokens_per_s"] == pytest.approx(free["rps"] * 200)


def test_impossible_slo_fits_memory_but_meets_no_slo(ref):
    r = est(ref, "llama-3.1-70b", "A100-80GB", 4, "bf16", tpot_ms=1.0)
    assert r["fits"] and not r["meets_slo"] and r["rps"] == 0 and "SLO" in r["reason"]


def test_moe_decode_reads_fewer_bytes_at_small_batch(ref):
    models, gpus, eff = ref
    rep = replica(models["mixtral-8x7b"], gpus["H100-SXM"], 2, "bf16", eff)
    assert rep.experts_touched(1) == pytest.approx(0.25)
    assert rep.experts_touched(64) == pytest.approx(1.0, abs=1e-6)
    assert rep.decode_step_s(1, 100) < rep.decode_step_s(64, 100)


def test_fp4_and_int4_paths(ref):
    b = est(ref, "llama-3.1-70b", "B200", 1, "fp4", 1000, 200)
    f8 = est(ref, "llama-3.1-70b", "B200", 1, "fp8", 1000, 200)
    assert b["fits"] and b["weights_gb_per_gpu"] < 0.6 * f8["weights_gb_per_gpu"]
    assert not est(ref, "llama-3.1-70b", "H200", 1, "fp4")["fits"]
    # int4 is weight-only: prefill compute runs at the 16-bit peak, so a long prompt is no faster
    i4 = est(ref, "llama-3.1-8b", "H100-SXM", 1, "int4", 8000, 10)
    bf = est(ref, "llama-3.1-8b", "H100-SXM", 1, "bf16", 8000, 10)
    models, gpus, eff = ref
    p4 = float(replica(models["llama-3.1-8b"], gpus["H100-SXM"], 1, "int4", eff).prefill_s(8000))
    p16 = float(replica(models["llama-3.1-8b"], gpus["H100-SXM"], 1, "bf16", eff).prefill_s(8000))
    assert p4 == pytest.approx(p16, rel=0.02) and i4["fits"] and bf["fits"]


def test_deepseek_v3_needs_a_node(ref):
    assert not est(ref, "deepseek-v3", "H200", 4, "fp8")["fits"]
    r = est(ref, "deepseek-v3", "H200", 8, "fp8")
    assert r["fits"] and r["weights_gb_per_gpu"] > 80


def test_all_reduce_latency_is_paid_per_engine_step_not_per_prompt(ref):
    # Raising the fixed all-reduce latency by 1 ms adds 2 x layers ms to every decode step (two
    # all-reduces per layer, once per step) and nothing to the work a prompt adds when it is
    # mixed into a step: the prompt rides in the step's all-reduces and adds only its bytes.
    models, gpus, eff = ref
    arch = models["llama-3.1-70b"]
    base = replica(arch, gpus["H100-SXM"], 8, "fp8", eff)
    slow = replica(arch, gpus["H100-SXM"], 8, "fp8",
                   eff.with_overrides({"allreduce_latency_us": eff["allreduce_latency_us"] + 1000.0}))
    assert float(slow.decode_step_s(64, 256) - base.decode_step_s(64, 256)) == pytest.approx(2 * 80 * 1e-3)
    assert float(slow.prefill_work_s(128)) == pytest.approx(float(base.prefill_work_s(128)))
    # the prompt's bytes: 2 all-reduces x 80 layers of 128 tokens x 8,192 x 2 bytes, ring 2 (tp-1)/tp
    ring = 2 * 128 * 8192 * 2.0 * 7 / 8
    lin, attn = base.prefill_compute_s(128, 128, 1)
    assert float(base.prefill_work_s(128)) == pytest.approx(float(lin + attn) + 160 * ring / base.ar_bw)


def test_70b_fp8_on_one_h100_memory_by_hand(ref):
    # Llama-3.1-70B: 80 layers of h 8,192, 64 query and 8 KV heads of 128, SwiGLU f 28,672, vocab 128,256.
    # Per layer: attention 2 x 8,192^2 + 2 x 8,192 x 1,024 = 150,994,944; MLP 3 x 8,192 x 28,672 =
    # 704,643,072; norms 16,384 -> 855,654,400; x 80 + final norm 8,192 = 68,452,360,192 at 1 byte (fp8),
    # plus input and output embeddings 2 x 128,256 x 8,192 = 2,101,346,304 at 2 bytes.
    weights = 68_452_360_192 + 2 * 2_101_346_304
    h100 = 81_559 * 2**20                                  # 81,559 MiB (gpus.csv vram_mib), not 80e9
    workspace = 8_192 * (10 * 8_192 + 5 * 28_672)          # max_batched_tokens x activation bytes per token
    overhead = 0.5 * 2**30                                 # runtime_overhead_gib
    pool = 0.9 * (h100 - weights - workspace - overhead)   # kv_cache_free_fraction of what is left
    kv_per_token = 2 * 80 * 8 * 128 * 1                    # K and V, 8 KV heads of 128, fp8 cache
    models, gpus, eff = ref
    rep = replica(models["llama-3.1-70b"], gpus["H100-SXM"], 1, "fp8", eff)
    assert rep.weights_gpu == weights and rep.kv_pool_gpu == pytest.approx(pool)
    assert rep.max_batch(1500, 300) == int(pool // (kv_per_token * 1800)) == 31
    r = est(ref, "llama-3.1-70b", "H100-SXM", 1, "fp8", 1500, 300)
    assert r["fits"] and r["max_batch"] == 31


def test_fp4_decode_has_its_own_compute_share(ref):
    # Llama-3.1-8B on one B200 in fp4 at 256 sequences is compute-bound at both shares below: matmul
    # FLOPs per token = 2 x (8,030,261,248 - 128,256 x 4,096) = 2 x 7,504,924,672 (every weight but the
    # input embedding table multiplies), 256 tokens = 3.842e12 FLOP; at 9,000 TFLOP/s fp4 dense x 0.2
    # that is 2.13 ms, against ~1.0 ms of weight reads (~5.3 GB at 0.65 x 8 TB/s). Halving nothing else,
    # the step grows by exactly FLOP / peak x (1/0.2 - 1/0.3).
    models, gpus, eff = ref
    arch, b200 = models["llama-3.1-8b"], gpus["B200"]
    flop = 256 * 2 * (8_030_261_248 - 128_256 * 4_096)
    steps = {}
    for share in (0.3, 0.2):
        e = eff.with_overrides({"decode_mfu_4bit": share})
        steps[share] = float(replica(arch, b200, 1, "fp4", e).decode_step_s(256, 1000))
        # the 8/16-bit share is untouched by it
        fp8 = float(replica(arch, b200, 1, "fp8", e).decode_step_s(256, 1000))
        assert fp8 == pytest.approx(float(replica(arch, b200, 1, "fp8", eff).decode_step_s(256, 1000)))
    assert steps[0.2] - steps[0.3] == pytest.approx(flop / 9000e12 * (1 / 0.2 - 1 / 0.3), rel=1e-9)


def test_moe_routing_costs_every_routed_token(ref):
    # Qwen3-30B-A3B routes every token to 8 experts in each of its 48 layers (all MoE): at
    # moe_route_ns = 20 a decode step of 100 sequences pays 100 x 8 x 48 x 20 ns = 0.768 ms more
    # than without, a 1,000-token prefill 1,000 x 8 x 48 x 20 ns = 7.68 ms; a dense model pays nothing.
    models, gpus, eff = ref
    on, off = eff.with_overrides({"moe_route_ns": 20}), eff.with_overrides({"moe_route_ns": 0})
    h100 = gpus["H100-SXM"]
    moe = models["qwen3-30b-a3b"]
    step = [float(replica(moe, h100, 1, "fp8", e).decode_step_s(100, 1500)) for e in (on, off)]
    assert step[0] - step[1] == pytest.approx(100 * 8 * 48 * 20e-9, rel=1e-9)
    pre = [float(replica(moe, h100, 1, "fp8", e).prefill_s(1000)) for e in (on, off)]
    assert pre[0] - pre[1] == pytest.approx(1000 * 8 * 48 * 20e-9, rel=1e-9)
    dense = models["llama-3.1-8b"]
    assert float(replica(dense, h100, 1, "fp8", on).decode_step_s(100, 1500)) == \
        float(replica(dense, h100, 1, "fp8", off).decode_step_s(100, 1500))


def test_an_mi300x_is_rated_as_mlperf_measured_it_against_an_h200(ref):
    # MLPerf Inference v4.1 closed, llama2-70b-99 Offline, fp8 on both: 8 x MI300X 23,514.8 and 24,109.8
    # tokens/s (two AMD hosts) against 8 x H200 31,302.7 -- 0.751 and 0.770 of an H200. On datasheet peaks
    # (2,615 against 1,979 dense fp8 TFLOP/s) it would be 1.3.
    models, gpus, eff = ref
    arch = models["llama-2-70b"]
    cap = {g: estimate_inference(arch, gpus[g], 1, "fp8", 300, 294, eff)["capacity_rps"] for g in ("H200", "MI300X")}
    assert 0.72 <= cap["MI300X"] / cap["H200"] <= 0.80
    # the factor multiplies every achieved share of an AMD GPU and none of an NVIDIA one
    half = eff.with_overrides({"serving_efficiency_cdna3": 0.5})
    amd, nv = replica(arch, gpus["MI300X"], 1, "fp8", half), replica(arch, gpus["H200"], 1, "fp8", half)
    assert (amd.e_dec, amd.e_pf, amd.e_bw, amd.e_kv) == pytest.approx(
        (0.5 * eff["decode_mfu"], 0.5 * eff["prefill_mfu_8bit"], 0.5 * eff["decode_bw_fraction"],
         0.5 * eff["kv_bw_fraction"]))
    assert nv.e_dec == eff["decode_mfu"]


def test_weight_only_4bit_step_by_hand(ref):
    # Llama-3.1-8B in int4 (W4A16) on one H100 SXM, 256 sequences at a mean context of 1,000 tokens.
    # Body: 8,030,261,248 - 2 x 128,256 x 4,096 = 6,979,588,096 weights at 0.53 bytes; input and output
    # embeddings 2 x 525,336,576 at 2 bytes. A step reads the body and the LM head (not the input table):
    # 6,979,588,096 x 0.53 + 1,050,673,152 = 4,749,854,843 B, 2.18 ms at 0.65 x 3.35 TB/s. Its matmuls
    # multiply at the 16-bit peak (989 TFLOP/s x 0.45): 256 x (2 x 6,979,588,096 / d + 2 x 525,336,576)
    # FLOP, 8.63 ms at d = 1 -- compute-bound, so the dequantisation share d stretches only the body's
    # FLOPs: step(d = 0.5) - step(d = 1) = 256 x 13,959,176,192 x (2 - 1) / (989e12 x 0.45).
    models, gpus, eff = ref
    arch, h100 = models["llama-3.1-8b"], gpus["H100-SXM"]
    one, half = eff.with_overrides({"w4a16_dequant_efficiency": 1.0}), eff.with_overrides(
        {"w4a16_dequant_efficiency": 0.5})
    r1, r2 = replica(arch, h100, 1, "int4", one), replica(arch, h100, 1, "int4", half)
    assert r1.weights_gpu == pytest.approx(6_979_588_096 * 0.53 + 1_050_673_152 * 2, rel=1e-12)
    assert r1.kv_tok_gpu == 2 * 32 * 8 * 128 * 2          # 16-bit KV cache: W4A16 keeps 16-bit activations
    read = 6_979_588_096 * 0.53 + 1_050_673_152
    mm1 = 256 * (2 * 6_979_588_096 + 2 * 525_336_576) / (989e12 * 0.45)
    assert mm1 > read / (3.35e12 * 0.65)                   # compute-bound at d = 1 already
    step1, step2 = (float(r.decode_step_s(256, 1000)) for r in (r1, r2))
    assert step2 - step1 == pytest.approx(256 * 13_959_176_192 * (2 - 1) / (989e12 * 0.45), rel=1e-9)
    # an 8,000-token prefill is compute-bound too: it grows by the body's FLOPs at the prefill share,
    # attention (16-bit activations, no weights) and the LM head unchanged
    pre1, pre2 = (float(r.prefill_s(8000)) for r in (r1, r2))
    assert pre2 - pre1 == pytest.approx(8000 * 13_959_176_192 * (2 - 1) / (989e12 * 0.7), rel=1e-9)
    # W8A8, W4A4 and 16-bit serving are untouched by it; a smaller share is never faster
    for prec, gpu in (("fp8", h100), ("bf16", h100), ("fp4", gpus["B200"])):
        assert float(replica(arch, gpu, 1, prec, half).decode_step_s(256, 1000)) == \
            float(replica(arch, gpu, 1, prec, one).decode_step_s(256, 1000))
    batches = np.arange(1, 300)
    assert np.all(r2.decode_step_s(batches, 1000) >= r1.decode_step_s(batches, 1000))


def test_a_sequence_is_not_slowed_by_its_own_prefill(ref):
    # Benchmarks time TPOT (inter-token latency) over the tokens after the first: a request's own
    # prefill is its TTFT. Over the OSL steps of a batch of C, the C prompts that replace its
    # sequences are prefilled; the replica's rate carries all C of them, a running sequence's tokens
    # wait for the other C - 1. Composed by hand from the step and the prefill work:
    #   TPOT(C) = step(C) + (C - 1) x work / OSL,   rps(C) = C / (OSL x step(C) + C x work).
    models, gpus, eff = ref
    rep = replica(models["llama-3.1-70b"], gpus["H100-SXM"], 2, "fp8", eff)
    isl, osl = 5000, 500
    m = rep.serve(isl, osl, batches=[1, 2, 25, 50])
    work = float(rep.prefill_work_s(isl))
    for i, c in enumerate((1, 2, 25, 50)):
        step = float(rep.decode_step_s(c, isl + osl / 2))
        assert m["tpot_ms"][i] == pytest.approx(1e3 * (step + (c - 1) * work / osl), rel=1e-12)
        assert m["rps"][i] == pytest.approx(c / (osl * step + c * work), rel=1e-12)
    # one request alone decodes at the bare step; its prefill is in its TTFT, not in its TPOT
    assert m["tpot_ms"][0] == pytest.approx(1e3 * float(rep.decode_step_s(1, isl + osl / 2)), rel=1e-12)
    assert m["ttft_ms"][0] == pytest.approx(1e3 * float(rep.prefill_s(isl)), rel=1e-12)
    # Little's law holds to within the half step an arriving prompt waits: C in flight each spend
    # TTFT + (OSL - 1) x TPOT in the replica, C / rps = OSL x step + C x work
    c, i = 25, 2
    life = m["ttft_ms"][i] / 1e3 + (osl - 1) * m["tpot_ms"][i] / 1e3
    assert life == pytest.approx(c / m["rps"][i], rel=0.01)


# -- expert parallelism (DEP: attention data parallel + experts sharded n ways) -----------------------

SMALL_MOE = dict(name="tiny-moe", layers=2, hidden_size=1024, heads=8, kv_heads=8, head_dim=128, ffn_size=4096,
                 vocab_size=1000, experts=8, experts_per_token=2, expert_ffn_size=512, source="test", date="2026-11-25")


def _tiny(ref):
    from optimizer.sizing.architecture import model_arch
    models, gpus, eff = ref
    return model_arch(SMALL_MOE), gpus["H100-SXM"], eff


def test_dep_memory_per_gpu_by_hand(ref):
    from optimizer.sizing.inference import dep_replica
    arch, gpu, eff = _tiny(ref)
    # per layer: attention 4 x 1024 x 1024 = 4,194,304; norms 2,048; 8 experts of 3 x 1024 x 512 = 1,572,864
    # (12,582,912); router 1024 x 8 = 8,192. Two layers 33,574,912 + embeddings 2 x 1000 x 1024 + final norm 1024
    # = 35,623,936 parameters, 25,165,824 of them routed experts; bf16: 2 bytes each
    assert arch.stats.params_total == 35_623_936 and arch.stats.params_expert == 25_165_824
    rep = dep_replica(arch, gpu, 4, "bf16", eff)
    # each GPU: everything but the experts (2 x 10,458,112 = 20,916,224 B) + 2 of the 8 experts of each layer
    # (2 x 25,165,824 / 4 = 12,582,912 B)
    assert rep.weights_gpu == 20_916_224 + 12_582_912 == 33_499_136
    # one-GPU workspace: 8192 tokens x (10 x 1024 + 5 x 1024 (k x expert width = 2 x 512)) bytes; overhead
    # 0.5 GiB runtime + 0.5 GiB communication buffer
    assert rep.workspace_gpu == 8192 * 15 * 1024 == 125_829_120
    assert rep.overhead_gpu == 2**30
    # H100: 81,559 MiB; the KV pool is 0.9 of what is left
    vram = 81_559 * 2**20
    pool = 0.9 * (vram - 33_499_136 - 125_829_120 - 2**30)
    assert rep.kv_pool_gpu == pytest.approx(pool)
    # a GPU keeps the whole KV cache of its own sequences: 2 x 2 layers x 8 heads x 128 x 2 B = 8,192 B/token
    assert rep.kv_tok_seq == 8192
    # 100,000-token sequences: floor(pool / 819,200,000) = 92 per GPU, 368 over the replica
    assert int(pool // (8192 * 100_000)) == 92
    assert rep.max_batch(90_000, 10_000) == 4 * 92
    # 5 sequences: the fullest GPU holds ceil(5/4) = 2
    assert float(rep.vram_gb(5, 90_000, 10_000)) == pytest.approx((33_499_136 + 125_829_120 + 2**30
                                                                   + 2 * 8192 * 100_000) / 1e9)
    # tensor parallel over the same 4 GPUs splits every weight and the KV heads instead
    tp = replica(arch, gpu, 4, "bf16", eff)
    assert tp.weights_gpu == 71_247_872 / 4 and tp.kv_tok_gpu == 8192 / 4


def test_dep_all_to_all_bytes_and_time_per_step_by_hand(ref):
    from optimizer.sizing.inference import dep_replica
    arch, gpu, eff = _tiny(ref)
    rep = dep_replica(arch, gpu, 4, "bf16", eff)
    # 256 sequences over 4 GPUs: 64 tokens per GPU per decode step, 2 experts each: 128 (token, expert)
    # pairs, 3/4 of them on another GPU = 96, each 1024 x 2 bytes = 196,608 bytes per all-to-all;
    # a dispatch and a combine per MoE layer, 2 MoE layers: 786,432 bytes a GPU sends per step
    assert float(rep.alltoall_bytes(64)) == 786_432
    # H100 NVLink 900 GB/s bidirectional = 450e9 one way, x a2a_bw_fraction 0.75 = 337.5e9 B/s;
    # 4 all-to-alls x 3 peers x a2a_latency_us 50
    assert eff["a2a_bw_fraction"] == 0.75 and eff["a2a_latency_us"] == 50
    assert float(rep.alltoall_s(64)) == pytest.approx(4 * 3 * 50e-6 + 786_432 / 337.5e9)
    # the decode step of 256 sequences carries it (no all-reduce in DEP)
    without = dep_replica(arch, gpu, 4, "bf16", eff.with_overrides({"a2a_latency_us": 0.0, "a2a_bw_fraction": 1e-9}))
    assert float(without.decode_step_s(256, 1000)) > float(rep.decode_step_s(256, 1000))
    assert float(rep.allreduce_s(1e6)) == 0.0


def test_dep_never_fits_when_its_experts_do_not(ref):
    from optimizer.sizing.inference import dep_replica
    models, gpus, eff = ref
    r1 = models["deepseek-r1"]
    # fp8: 656.7 B routed-expert parameters (58 MoE layers x 256 x 3 x 7168 x 2048), 1 byte each
    assert r1.stats.params_expert == 58 * 256 * 3 * 7168 * 2048
    experts = 58 * 256 * 3 * 7168 * 2048
    h100, h200 = gpus["H100-SXM"].vram_bytes, gpus["H200"].vram_bytes   # 85.5 GB, 150.8 GB
    for gpu, n, fits in (("H100-SXM", 4, False), ("H100-SXM", 8, False), ("H200", 4, False), ("H200", 8, True)):
        rep = dep_replica(r1, gpus[gpu], n, "fp8", eff)
        assert rep.experts_gpu == experts / n
        assert (rep.max_batch(1000, 1000) > 0) is fits, (gpu, n)
        assert est(ref, "deepseek-r1", gpu, n, "fp8", 1000, 1000, layout="dep")["fits"] is fits
        assert not est(ref, "deepseek-r1", gpu, n, "fp8", 1, 1, layout="dep")["fits"] or fits
    # a quarter of the experts (163.5 GB) exceeds either GPU; an eighth (81.7 GB) fits an H100 alone but not
    # with the replicated rest: 671,026,404,352 - 653,908,770,816 expert parameters = 17,117,633,536, of
    # which the embedding and LM head (2 x 129,280 x 7,168 = 1,853,358,080) stay at 2 bytes: 18.97 GB
    assert experts == 653_908_770_816 and r1.stats.params_total == 671_026_404_352
    rest = (671_026_404_352 - experts - 1_853_358_080) * 1 + 1_853_358_080 * 2
    assert rest == 18_970_991_616
    assert dep_replica(r1, gpus["H100-SXM"], 8, "fp8", eff).weights_gpu == experts / 8 + rest
    assert experts / 4 > h200 > h100 > experts / 8 and experts / 8 + rest > h100 and experts / 8 + rest < h200
    # 8 x H200 is what TensorRT-LLM ran (bench/data/trtllm_perf_overview_2025.csv)


def test_dep_is_only_for_moe_models_and_best_names_the_layout(ref):
    from optimizer.errors import InputError
    with pytest.raises(InputError) as e:
        est(ref, "llama-3.1-70b", "H100-SXM", 4, "fp8", layout="dep")
    assert e.value.field == "layout"
    with pytest.raises(InputError):
        est(ref, "qwen3-235b-a22b", "B200", 1, "fp4", layout="dep")
    with pytest.raises(InputError):
        est(ref, "qwen3-235b-a22b", "B200", 4, "fp4", layout="ep")
    assert est(ref, "llama-3.1-70b", "H100-SXM", 4, "fp8", layout="best")["layout"] == "tp4"
    tp = est(ref, "deepseek-r1", "B200", 4, "fp4", 1000, 1000, layout="tp")
    dep = est(ref, "deepseek-r1", "B200", 4, "fp4", 1000, 1000, layout="dep")
    best = est(ref, "deepseek-r1", "B200", 4, "fp4", 1000, 1000, layout="best")
    assert tp["layout"] == "tp4" and dep["layout"] == "dep4"
    # the MLA cache is not split by TP: DEP holds 4 x the sequences and serves more
    assert dep["max_batch"] > tp["max_batch"] and dep["capacity_rps"] > tp["capacity_rps"]
    assert best["layout"] == "dep4" and best["rps"] == dep["rps"]


def test_maverick_routes_and_exchanges_in_its_24_moe_layers_only(ref):
    from optimizer.sizing.inference import dep_replica
    models, gpus, eff = ref
    mav = models["llama-4-maverick"]
    # interleave_moe_layer_step 2: 24 of 48 layers are MoE, top-1 of 128 experts
    tp = replica(mav, gpus["B200"], 4, "fp4", eff)
    assert tp.route_s == pytest.approx(1 * 24 * eff["moe_route_ns"] * 1e-9)
    dep = dep_replica(mav, gpus["B200"], 4, "fp4", eff)
    assert dep.moe_layers == 24 and dep.k == 1
    # 100 tokens on a GPU: 100 x 1 x 3/4 remote pairs x 5120 x 2 B, dispatch + combine, 24 layers
    assert float(dep.alltoall_bytes(100)) == 2 * 24 * 75 * 5120 * 2
    # expert bytes: 24 layers x 128 experts x 3 x 5120 x 8192 at the fp4 bytes per weight, a quarter per GPU
    assert dep.experts_gpu == pytest.approx(24 * 128 * 3 * 5120 * 8192 * eff["fp4_weight_bytes_per_param"] / 4)
