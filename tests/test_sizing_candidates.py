"""The candidate tables the MIP reads (interface of optimizer.sizing)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from optimizer import schema
from optimizer.errors import InputError
from optimizer.sizing import inference_candidates, load_reference, training_candidates
from optimizer.yamlio import read_yaml

FIXTURE = Path(__file__).parent / "fixtures" / "sizing" / "inline.yaml"
OFFERED = ["H100-SXM", "H200", "L4", "A10G", "L40S", "A100-80GB", "MI300X", "B200"]


@pytest.fixture(scope="module")
def ref():
    pf = schema.ProblemFile(periods=[{"name": "p", "hours": 100.0, "month": 0}])
    return load_reference(pf, "problem.yaml")


def service(**kw):
    base = dict(name="chat", model="llama-3.1-70b", precisions=["fp8", "bf16"], prompt_tokens=1500,
                output_tokens=300, slo={"ttft_ms": 1000.0, "tpot_ms": 50.0}, demand_rps=10.0)
    base.update(kw)
    return schema.InferenceService(**base)


def test_inference_columns_and_rows(ref):
    models, gpus, eff = ref
    df = inference_candidates(service(), OFFERED, models=models, gpus=gpus, eff=eff)
    assert list(df.columns[:5]) == ["gpu", "gpus", "precision", "bucket", "rps"]
    assert {"max_batch", "ttft_ms", "tpot_ms", "vram_gb_per_gpu"} <= set(df.columns)
    assert len(df) > 0 and (df["rps"] > 0).all()
    assert (df["bucket"] == "all").all()
    assert set(df["gpus"]) <= {1, 2, 4, 8}
    assert set(df["gpu"]) <= set(OFFERED) and set(df["precision"]) <= {"fp8", "bf16"}
    assert (df["ttft_ms"] <= 1000).all() and (df["tpot_ms"] <= 50).all()
    assert not ((df["gpu"] == "A100-80GB") & (df["precision"] == "fp8")).any()  # no fp8 units
    assert not df.duplicated(["gpu", "gpus", "precision", "bucket"]).any()
    # 70B fp8 on one H200 is a candidate, and on one H100: 70.6 GB of fp8 weights in 0.9 x 81,559 MiB
    # = 77.0 GB usable (TensorRT-LLM v0.17 serves it so, bench/data/calibration_more.csv); in bf16
    # (141 GB of weights) it is not
    assert ((df["gpu"] == "H200") & (df["gpus"] == 1) & (df["precision"] == "fp8")).any()
    assert ((df["gpu"] == "H100-SXM") & (df["gpus"] == 1) & (df["precision"] == "fp8")).any()
    assert not ((df["gpu"] == "H100-SXM") & (df["gpus"] == 1) & (df["precision"] == "bf16")).any()


def test_buckets_and_aliases(ref):
    models, gpus, eff = ref
    s = service(model="Llama-3.1-8B-Instruct", precisions=["bf16"], prompt_tokens=None, output_tokens=None,
                requests=[{"name": "short", "prompt_tokens": 200, "output_tokens": 100, "share": 0.7},
                          {"name": "long", "prompt_tokens": 6000, "output_tokens": 400, "share": 0.3}],
                slo={"ttft_ms": 1500.0, "tpot_ms": 40.0})
    df = inference_candidates(s, ["h100", "L4"], models=models, gpus=gpus, eff=eff)
    assert set(df["bucket"]) == {"short", "long"} and set(df["gpu"]) == {"H100-SXM", "L4"}
    rps = df.set_index(["gpu", "gpus", "bucket"])["rps"]
    assert rps[("H100-SXM", 1, "short")] > rps[("H100-SXM", 1, "long")]


def test_dominated_configurations_are_pruned(ref):
    models, gpus, eff = ref
    df = inference_candidates(service(model="llama-3.1-8b", precisions=["bf16"], prompt_tokens=100,
                                      output_tokens=50, slo={}), OFFERED, models=models, gpus=gpus, eff=eff)
    for (g, p), grp in df.groupby(["gpu", "precision"]):
        grp = grp.sort_values("gpus")
        assert grp["rps"].is_monotonic_increasing and grp["rps"].is_unique, (g, grp)


def test_tighter_slo_never_adds_rps(ref):
    models, gpus, eff = ref
    loose = inference_candidates(service(slo={"tpot_ms": 80.0}), OFFERED, models=models, gpus=gpus, eff=eff)
    tight = inference_candidates(service(slo={"tpot_ms": 30.0}), OFFERED, models=models, gpus=gpus, eff=eff)
    key = ["gpu", "gpus", "precision", "bucket"]
    both = tight.merge(loose, on=key, how="left", suffixes=("_t", "_l"))
    assert both["rps_l"].notna().all() and (both["rps_t"] <= both["rps_l"] + 1e-12).all()


def test_no_candidates_gives_empty_typed_frame(ref):
    models, gpus, eff = ref
    df = inference_candidates(service(model="llama-3.1-405b", precisions=["bf16"]), ["L4"],
                              models=models, gpus=gpus, eff=eff)
    assert df.empty and list(df.columns[:5]) == ["gpu", "gpus", "precision", "bucket", "rps"]


def test_unknown_gpu_name_is_an_input_error(ref):
    models, gpus, eff = ref
    with pytest.raises(InputError) as e:
        inference_candidates(service(), ["H100-SXMM"], models=models, gpus=gpus, eff=eff)
    assert e.value.suggestion == "H100-SXM"


def test_training_candidates(ref):
    models, gpus, eff = ref
    job = schema.TrainingJob(name="pt", model="llama-3.1-70b", tokens=1e11, deadline_month=1,
                             cluster_gpus=[8, 16, 32, 64, 128])
    df = training_candidates(job, OFFERED, models=models, gpus=gpus, eff=eff)
    assert list(df.columns[:6]) == ["gpu", "gpus", "precision", "gpus_per_node", "fabric_gbps_per_gpu", "hours"]
    assert {"tokens_per_s", "mfu", "vram_gb_per_gpu", "layout"} <= set(df.columns)
    assert (df["hours"] > 0).all() and (df["precision"] == "bf16").all()
    assert set(df["gpus"]) <= {8, 16, 32, 64, 128}
    h100 = df[df["gpu"] == "H100-SXM"].sort_values("gpus")
    assert 8 not in set(h100["gpus"])  # 70B x 16 B/param does not fit 8 x 80 GB
    assert h100["hours"].is_monotonic_decreasing
    fp8 = schema.TrainingJob(name="pt", model="llama-3.1-8b", tokens=1e10, deadline_month=1, precision="fp8")
    df8 = training_candidates(fp8, OFFERED, models=models, gpus=gpus, eff=eff)
    assert "A100-80GB" not in set(df8["gpu"]) and "H100-SXM" in set(df8["gpu"])


def test_inline_models_gpus_and_overrides_from_a_problem_file():
    pf = schema.ProblemFile.model_validate(read_yaml(FIXTURE))
    models, gpus, eff = load_reference(pf, str(FIXTURE))
    assert "tiny-1b" in models and "TestGPU-48" in gpus and "llama-3.1-8b" in models
    assert eff["decode_bw_fraction"] == 0.6
    df = inference_candidates(pf.inference[0], ["tg48", "H100-SXM"], models=models, gpus=gpus, eff=eff)
    assert set(df["gpu"]) == {"TestGPU-48", "H100-SXM"} and (df["rps"] > 0).all()
    tdf = training_candidates(pf.training[0], ["TestGPU-48"], models=models, gpus=gpus, eff=eff)
    assert list(tdf["gpus"]) == [8, 16]


def test_inline_errors_name_file_and_field(tmp_path):
    data = read_yaml(FIXTURE)
    data["gpus"][0]["vram_gbs"] = 48
    pf = schema.ProblemFile.model_validate(data)
    with pytest.raises(InputError) as e:
        load_reference(pf, "problem.yaml")
    assert e.value.file == "problem.yaml" and e.value.field == "gpus[0].vram_gbs"
    data = read_yaml(FIXTURE)
    data["models"][0]["layers"] = "sixteen"
    with pytest.raises(InputError) as e:
        load_reference(schema.ProblemFile.model_validate(data), "problem.yaml")
    assert e.value.field == "models[0].layers" and e.value.value == "sixteen"
    data = read_yaml(FIXTURE)
    data["efficiency"] = {"prefil_mfu_8bit": 0.5}
    with pytest.raises(InputError) as e:
        load_reference(schema.ProblemFile.model_validate(data), "problem.yaml")
    assert e.value.field == "efficiency.prefil_mfu_8bit" and e.value.suggestion == "prefill_mfu_8bit"


def test_a_slow_fabric_lengthens_a_multi_node_job_by_its_exposed_data_parallel_traffic(ref):
    # One layout, computed by hand from the sizing's formula (docs/sizing.md, "Training"): llama-3.1-8b
    # on 16 H100 as 2 nodes of 8, layout tp1 pp1 dp16 zero1 no recompute. Per step every GPU sends
    # 2 x P x 2 bytes x (d - 1)/d of gradients (ring all-reduce, bf16), at the fabric's Gbit/s / 8 x
    # train_comm_bw_fraction; what train_dp_comm_overlap x compute cannot hide adds to the step.
    from optimizer.sizing.architecture import arch_stats
    from optimizer.sizing.training import Network, layouts

    models, gpus, eff = ref
    arch, h100 = models["llama-3.1-8b"], gpus["H100-SXM"]
    fast = layouts(arch, h100, 16, "bf16", eff, Network(8, 400.0))
    slow = layouts(arch, h100, 16, "bf16", eff, Network(8, 12.5))
    i = next(k for k in range(len(fast["t"])) if (fast["t"][k], fast["p"][k], fast["d"][k], fast["zero"][k],
                                                  fast["recompute"][k]) == (1, 1, 16, 1, "none"))
    P = arch_stats(arch).params_total
    volume = 2 * P * 2 * 15 / 16                                   # bytes per GPU per step
    comm_fast = volume / (400e9 / 8 * eff["train_comm_bw_fraction"])
    comm_slow = volume / (12.5e9 / 8 * eff["train_comm_bw_fraction"])
    batch = max(eff["train_global_batch_tokens"], 16 * eff["train_sequence_tokens"] * eff["train_micro_batch_seqs"])
    step_fast = batch / fast["tokens_per_s"][i]
    hide = eff["train_dp_comm_overlap"]
    # at 400 Gbit/s the traffic is hidden (so step_fast is the compute step); at 12.5 it is not
    assert comm_fast <= hide * step_fast
    expected_step_slow = step_fast + (comm_slow - hide * step_fast)
    assert batch / slow["tokens_per_s"][i] == pytest.approx(expected_step_slow, rel=1e-9)


def test_training_candidates_are_sized_per_fabric(ref):
    # two ways to join H100 nodes of 8: 400 and 12.5 Gbit/s per GPU. A 16-GPU cluster gets a row for
    # each, the slow one no faster; an 8-GPU cluster fits one node and gets one row without a fabric.
    models, gpus, eff = ref
    links = pd.DataFrame({"gpu": ["H100-SXM", "H100-SXM", "H100-SXM"], "gpus_per_node": [8.0, 8.0, 1.0],
                          "fabric_gbps_per_gpu": [400.0, 12.5, float("nan")]})
    job = schema.TrainingJob(name="pt", model="llama-3.1-8b", tokens=1e10, deadline_month=1, cluster_gpus=[8, 16])
    df = training_candidates(job, ["H100-SXM"], models=models, gpus=gpus, eff=eff, links=links)
    one = df[df["gpus"] == 8]
    assert len(one) == 1 and one["gpus_per_node"].isna().all()
    two = df[df["gpus"] == 16].set_index("fabric_gbps_per_gpu")["hours"]
    assert set(two.index) == {400.0, 12.5}
    assert two[12.5] > two[400.0]


def test_moe_services_get_dep_layouts_named_and_never_one_whose_experts_do_not_fit(ref):
    models, gpus, eff = ref
    svc = service(model="deepseek-r1", precisions=["fp8", "fp4"], prompt_tokens=1000, output_tokens=1000,
                  slo={"ttft_ms": 10_000.0, "tpot_ms": 200.0})
    df = inference_candidates(svc, ["H100-SXM", "H200", "B200"], models=models, gpus=gpus, eff=eff)
    assert "layout" in df.columns and len(df) > 0
    assert all(lay == f"{kind}{n}" for lay, n, kind in zip(df["layout"], df["gpus"], df["layout"].str[:-1]))
    # 671 B parameters at 1 byte: no H100 layout of up to 8 GPUs holds them (DEP8 needs 81.7 GB of experts
    # plus 19 GB replicated per GPU), H200 fits from 8 GPUs; DEP holds 8x the MLA cache and is picked there
    assert "H100-SXM" not in set(df["gpu"])
    h200 = df[df["gpu"] == "H200"]
    assert set(h200["gpus"]) == {8} and set(h200["layout"]) == {"dep8"}
    b200 = df[df["gpu"] == "B200"]
    assert set(b200.loc[b200["gpus"] >= 4, "layout"]) <= {"dep4", "dep8"}
    # a dense model never gets a DEP layout
    dense = inference_candidates(service(), OFFERED, models=models, gpus=gpus, eff=eff)
    assert dense["layout"].str.startswith("tp").all()


def test_the_planner_sees_the_dep_layout_in_the_configuration_name(tmp_path):
    from optimizer.candidates import build_candidates
    from optimizer.load import load_problem

    problem = tmp_path / "p.yaml"
    problem.write_text(
        "periods: [{name: p1, hours: 730, month: 0}]\n"
        "offerings:\n"
        "  - {id: b200-od, provider: x, gpu: B200, gpus_per_unit: 8, region: r, pricing: on_demand,\n"
        "     price_per_hour: 40.0, unit_link: nvlink, source: test, date: 2026-11-25}\n"
        "inference:\n"
        "  - {name: r1, model: deepseek-r1, precisions: [fp4], prompt_tokens: 1000, output_tokens: 1000,\n"
        "     slo: {ttft_ms: 10000, tpot_ms: 200}, demand_rps: 5, regions: [r]}\n")
    c = build_candidates(load_problem(str(problem)))
    assert any(cfg.endswith(" dep4") or cfg.endswith(" dep8") for cfg in c.inference["config"])
    assert c.inference["config"].is_unique
