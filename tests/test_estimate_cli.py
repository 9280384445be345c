"""``gpuopt estimate inference|training`` through click's test runner."""

from __future__ import annotations

import json

from click.testing import CliRunner

from optimizer.cli import main

INFER = ["estimate", "inference", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--gpus", "1",
         "--precision", "bf16", "--prompt-tokens", "1000", "--output-tokens", "200"]
TRAIN = ["estimate", "training", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "64",
         "--precision", "bf16", "--tokens", "1e11"]


def run(args):
    return CliRunner().invoke(main, args)


def test_inference_json_fields():
    r = run(INFER + ["--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("fits", "vram_gb_per_gpu", "max_batch", "ttft_ms", "tpot_ms", "output_tokens_per_s", "rps"):
        assert k in d
    assert d["fits"] is True and d["meets_slo"] is True and d["rps"] > 0 and d["max_batch"] >= 1
    assert d["output_tokens_per_s"] == 200 * d["rps"] or abs(d["output_tokens_per_s"] - 200 * d["rps"]) < 1e-6


def test_inference_slos_are_met():
    r = run(INFER + ["--ttft-ms", "300", "--tpot-ms", "25", "--format", "json"])
    d = json.loads(r.output)
    assert d["fits"] and d["ttft_ms"] <= 300 and d["tpot_ms"] <= 25
    free = json.loads(run(INFER + ["--format", "json"]).output)
    assert d["rps"] <= free["rps"]


def test_training_json_fields():
    r = run(TRAIN + ["--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("fits", "vram_gb_per_gpu", "tokens_per_s", "hours", "mfu"):
        assert k in d
    assert d["fits"] and d["gpu"] == "H100-SXM" and d["hours"] > 0 and 0 < d["mfu"] < 1


def test_table_format():
    r = run(INFER)
    assert r.exit_code == 0 and "rps" in r.output and "fits" in r.output


def test_nothing_to_deploy_exits_1_and_says_which_part_failed():
    # 405B in bf16 needs about 810 GB of weights: no memory on one H100
    r = run(["estimate", "inference", "-m", "llama-3.1-405b", "-g", "H100-SXM", "-n", "1", "-i", "100",
             "--output-tokens", "10", "--format", "json"])
    d = json.loads(r.output)
    assert r.exit_code == 1 and d["fits"] is False and d["meets_slo"] is False
    # the 8B model fits one H100 (16 GB of weights), but no batch has a 1 ms time to first token
    r = run(INFER + ["--ttft-ms", "1", "--format", "json"])
    d = json.loads(r.output)
    assert r.exit_code == 1 and d["fits"] is True and d["meets_slo"] is False and "SLO" in d["reason"]
    r = run(["estimate", "training", "-m", "llama-3.1-405b", "-g", "H100-SXM", "-n", "8", "-t", "1e9",
             "--format", "json"])
    assert r.exit_code == 1 and json.loads(r.output)["fits"] is False


def test_output_tokens_do_not_take_the_output_path_option():
    r = run(["estimate", "inference", "-m", "llama-3.1-8b", "-g", "H100-SXM", "-i", "100", "-o", "10"])
    assert r.exit_code == 2 and "-o" in r.output


def test_bad_gpu_name_exits_2_without_traceback():
    r = run(INFER[:4] + ["--gpu", "H100-SXMM"] + INFER[6:])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "H100-SXMM" in r.output and "H100-SXM" in r.output


def test_bad_model_and_efficiency_exit_2():
    r = run(["estimate", "training", "-m", "lama-3.1-8b", "-g", "H100", "-t", "1e9"])
    assert r.exit_code == 2 and "llama-3.1-8b" in r.output
    r = run(INFER + ["--efficiency", "decode_bw_fraction=2"])
    assert r.exit_code == 2 and "efficiency.decode_bw_fraction" in r.output
    r = run(INFER[:6] + ["--gpus", "3"] + INFER[8:])
    assert r.exit_code == 2


MY_MODEL = """name: my-13b
layers: 40
hidden_size: 5120
heads: 40
kv_heads: 8
head_dim: 128
ffn_size: 13824
vocab_size: 32000
tied_embeddings: false
source: "a team's config.json"
date: 2026-11-24
"""


def test_model_file_gives_an_inline_architecture(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(MY_MODEL)
    r = run(["estimate", "inference", "--model", "my-13b", "--gpu", "L40S", "--prompt-tokens", "1000",
             "--output-tokens", "200", "--model-file", str(path), "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    # 40 layers x (2 x 5,120^2 + 2 x 5,120 x 1,024 + 3 x 5,120 x 13,824 + 2 x 5,120) + 5,120
    # + 2 x 32,000 x 5,120 embeddings = 12,736,010,240 parameters at 2 bytes
    body = 40 * (2 * 5120**2 + 2 * 5120 * 1024 + 3 * 5120 * 13824 + 2 * 5120) + 5120
    assert d["weights_gb_per_gpu"] == round((body + 2 * 32000 * 5120) * 2 / 1e9, 3)
    # KV per token: 2 x 40 layers x 8 heads x 128 x 2 bytes
    assert d["kv_cache_bytes_per_token_per_gpu"] == 2 * 40 * 8 * 128 * 2


def test_a_bad_model_file_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(MY_MODEL.replace("layers: 40", "layers: -4"))
    r = run(["estimate", "inference", "--model", "my-13b", "--gpu", "L40S", "--prompt-tokens", "1000",
             "--output-tokens", "200", "--model-file", str(path)])
    assert r.exit_code == 2 and str(path) in r.output and "layers" in r.output


def test_inference_names_its_layout_and_dep_is_for_moe_models():
    moe = ["estimate", "inference", "--model", "DeepSeek-R1", "--gpu", "B200", "--gpus", "4", "--precision", "fp4",
           "--prompt-tokens", "1000", "--output-tokens", "1000", "--format", "json"]
    best = json.loads(run(moe).output)
    dep = json.loads(run(moe + ["--layout", "dep"]).output)
    tp = json.loads(run(moe + ["--layout", "tp"]).output)
    assert (best["layout"], dep["layout"], tp["layout"]) == ("dep4", "dep4", "tp4")
    assert dep["capacity_rps"] > tp["capacity_rps"] and best["rps"] == dep["rps"]
    assert json.loads(run(INFER + ["--format", "json"]).output)["layout"] == "tp1"
    r = run(INFER + ["--layout", "dep"])
    assert r.exit_code == 2 and "--layout" in r.output and "MoE" in r.output
    r = run(moe[:7] + ["1"] + moe[8:] + ["--layout", "dep"])   # one GPU: nothing to shard over
    assert r.exit_code == 2 and "--gpus 2 or more" in r.output
