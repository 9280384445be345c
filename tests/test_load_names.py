"""Names in a problem file resolve through the sizing catalogs (catalog + inline `gpus:`/`models:`).

Inline `aliases` may be a YAML list or one `;`-separated string (the catalog CSV style);
both mean the same names, and a string is never split into its letters.
"""

from __future__ import annotations

import pytest

from conftest import write_problem
from optimizer.catalog import split_aliases
from optimizer.errors import InputError
from optimizer.load import load_problem
from optimizer.overlay import apply_sets
from optimizer.sizing.hardware import load_gpus

GPU = {"name": "TestGPU-48", "vendor": "test", "generation": "hopper", "vram_gb": 48, "mem_bw_tbs": 2.0,
       "bf16_dense_tflops": 400, "fp16_dense_tflops": 400, "fp8_dense_tflops": 800, "interconnect_gbs": 64}
MODEL = {"name": "tiny-1b", "layers": 16, "hidden_size": 2048, "heads": 16, "kv_heads": 4, "ffn_size": 8192,
         "vocab_size": 32000, "tied_embeddings": True, "max_context": 8192}


def problem(gpu_aliases, model_aliases, gpu="tg48", model="Tiny-1B"):
    return {
        "periods": [{"name": "p0", "hours": 100, "month": 0}],
        "gpus": [{**GPU, "aliases": gpu_aliases}],
        "models": [{**MODEL, "aliases": model_aliases}],
        "offerings": [{"id": "tg", "gpu": gpu, "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
                       "price_per_hour": 20}],
        "inference": [{"name": "svc", "model": model, "prompt_tokens": 500, "output_tokens": 100,
                       "slo": {"ttft_ms": 500, "tpot_ms": 30}, "demand_rps": 5}],
    }


@pytest.mark.parametrize("gpu_aliases, model_aliases", [
    (["tg48", "TG-48GB"], ["Tiny-1B", "tiny"]),
    ("tg48;TG-48GB", "Tiny-1B;tiny"),
    (" tg48 ; TG-48GB ", "Tiny-1B ; tiny"),
])
@pytest.mark.parametrize("gpu, model", [("tg48", "Tiny-1B"), ("tg-48gb", "TINY"), ("testgpu-48", "tiny-1b")])
def test_inline_aliases_as_a_list_or_a_string(tmp_path, gpu_aliases, model_aliases, gpu, model):
    pr = load_problem(write_problem(tmp_path, problem(gpu_aliases, model_aliases, gpu, model)))
    assert list(pr.offerings["gpu"]) == ["TestGPU-48"]
    assert pr.services[0].model == "tiny-1b"


@pytest.mark.parametrize("gpu_aliases, model_aliases", [(["tg48"], ["Tiny-1B"]), ("tg48", "Tiny-1B")])
def test_a_letter_of_an_alias_is_not_a_name(tmp_path, gpu_aliases, model_aliases):
    with pytest.raises(InputError) as e:
        load_problem(write_problem(tmp_path, problem(gpu_aliases, model_aliases, gpu="t")))
    assert e.value.field == "offerings[tg].gpu" and e.value.value == "t"
    assert "unknown GPU type 't'" in e.value.message
    with pytest.raises(InputError) as e:
        load_problem(write_problem(tmp_path, problem(gpu_aliases, model_aliases, model="T")))
    assert e.value.field == "inference[svc].model" and e.value.value == "T"


def test_unknown_names_keep_file_field_value_and_suggestion(tmp_path):
    path = write_problem(tmp_path, problem("tg48", "Tiny-1B", gpu="TestGPU-84", model="tiny-1c"))
    with pytest.raises(InputError) as e:
        load_problem(path)
    errs = {x.field: x for x in e.value.errors}
    gpu, model = errs["offerings[tg].gpu"], errs["inference[svc].model"]
    assert gpu.file == str(path) and gpu.value == "TestGPU-84" and gpu.suggestion == "TestGPU-48"
    assert model.file == str(path) and model.value == "tiny-1c" and model.suggestion == "tiny-1b"


def test_a_bad_inline_entry_is_an_error_of_the_problem_file(tmp_path):
    data = problem("tg48", "Tiny-1B")
    data["gpus"][0]["vram_gbs"] = 48
    path = write_problem(tmp_path, data)
    with pytest.raises(InputError) as e:
        load_problem(path)
    assert e.value.file == str(path) and e.value.field == "gpus[0].vram_gbs"


@pytest.mark.parametrize("gpu_aliases", [["tg48", "TG-48GB"], "tg48;TG-48GB"])
def test_scale_selectors_know_inline_aliases(gpu_aliases):
    raw = problem(gpu_aliases, "Tiny-1B")
    out = apply_sets(raw, [], "p.yaml", scales=["gpu=TG-48GB:2"])
    assert out["offerings"][0]["price_per_hour"] == 40
    with pytest.raises(InputError) as e:
        apply_sets(problem(gpu_aliases, "Tiny-1B"), [], "p.yaml", scales=["gpu=g:2"])
    assert "unknown GPU type 'g'" in e.value.render()


def test_split_aliases_is_the_one_reading_of_both_forms():
    assert split_aliases("H100; H100-80GB;;") == split_aliases(["H100", " H100-80GB", ""]) == ("H100", "H100-80GB")
    assert split_aliases(None) == split_aliases(float("nan")) == split_aliases([]) == ()
    assert split_aliases(5) == 5  # left for the model's validation to reject


def test_an_inline_entry_named_by_a_catalog_alias_takes_over_every_name_of_that_entry(tmp_path):
    # 'H100' and 'Llama-2-7B' are catalog aliases of H100-SXM and llama-2-7b: the inline entries replace
    # those, and the catalog's names (used by catalog offerings) resolve to the inline figures
    data = problem("tg48", "Tiny-1B")
    data["gpus"] = [{**GPU, "name": "H100", "vram_gb": 94, "aliases": "my-h100"}]
    data["models"] = [{**MODEL, "name": "Llama-2-7B"}]
    data["offerings"] = [{**data["offerings"][0], "id": f"o{i}", "gpu": g}
                         for i, g in enumerate(["H100-SXM", "h100-sxm5", "my-h100", "H100"])]
    data["inference"][0]["model"] = "meta-llama/Llama-2-7b-hf"
    pr = load_problem(write_problem(tmp_path, data))
    assert list(pr.offerings["gpu"]) == ["H100"] * 4
    assert pr.services[0].model == "Llama-2-7B"
    gpus = load_gpus(data["gpus"])
    assert "H100-SXM" not in gpus and gpus["H100"].vram_gb == 94
    assert gpus["H100"].aliases[:2] == ("my-h100", "H100-SXM")
    assert len({a.lower() for a in gpus["H100"].aliases}) == len(gpus["H100"].aliases)
