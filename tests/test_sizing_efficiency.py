"""The named efficiency table and a problem's overrides."""

from __future__ import annotations

import pytest

from optimizer import catalog as cat
from optimizer.errors import InputError
from optimizer.sizing import estimate_inference, load_efficiency, load_gpus, load_models
from optimizer.sizing.efficiency import validate_table


def test_table_is_complete_and_valid():
    t = validate_table(cat.efficiency_table())
    assert list(t.columns[:6]) == ["name", "value", "unit", "source", "date", "description"]
    assert t["source"].notna().all() and t["date"].notna().all() and t["description"].notna().all()
    names = set(t["name"])
    for needed in ("kv_cache_free_fraction", "runtime_overhead_gib", "prefill_mfu_16bit", "decode_bw_fraction",
                   "comm_bw_fraction", "sched_overhead_ms", "train_mfu_hopper", "train_fp8_speedup",
                   "checkpoint_write_minutes", "restart_minutes"):
        assert needed in names
    eff = load_efficiency()
    assert eff["checkpoint_write_minutes"] == 5 and eff["restart_minutes"] == 20
    # every GPU generation has a training MFU
    for g in load_gpus().values():
        assert f"train_mfu_{g.generation}" in names, g.generation


def test_override_changes_the_result():
    models, gpus = load_models(), load_gpus()
    args = (models["llama-3.1-8b"], gpus["H100-SXM"], 1, "bf16", 1000, 200)
    base = estimate_inference(*args, load_efficiency())
    slow = estimate_inference(*args, load_efficiency({"decode_bw_fraction": 0.35, "kv_bw_fraction": 0.25}))
    assert slow["rps"] < base["rps"]
    small = estimate_inference(*args, load_efficiency({"kv_cache_free_fraction": 0.5}))
    assert small["max_batch"] < base["max_batch"]
    e = load_efficiency({"decode_bw_fraction": 0.35})
    assert e.overridden == {"decode_bw_fraction": 0.35} and e != load_efficiency()


def test_unknown_name_errors_with_suggestion():
    with pytest.raises(InputError) as e:
        load_efficiency({"decode_bw_fracton": 0.5}, file="p.yaml")
    err = e.value
    assert err.field == "efficiency.decode_bw_fracton" and err.file == "p.yaml"
    assert err.suggestion == "decode_bw_fraction"
    assert "decode_bw_fracton" in err.render()


@pytest.mark.parametrize("name,value", [
    ("decode_bw_fraction", 1.5), ("decode_bw_fraction", 0.0), ("prefill_mfu_8bit", -0.1),
    ("runtime_overhead_gib", -1.0), ("max_batch_seqs", 0), ("train_fp8_speedup", 0.0),
    ("decode_bw_fraction", float("nan")), ("decode_bw_fraction", "fast"), ("decode_bw_fraction", True),
])
def test_out_of_range_is_an_error(name, value):
    with pytest.raises(InputError) as e:
        load_efficiency({name: value}, file="p.yaml")
    assert e.value.field == f"efficiency.{name}"


def test_in_range_edges_are_accepted():
    e = load_efficiency({"decode_bw_fraction": 1.0, "runtime_overhead_gib": 0.0, "sched_overhead_ms": 0})
    assert e["decode_bw_fraction"] == 1.0 and e["sched_overhead_ms"] == 0.0


def test_every_factor_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "sizing.md").read_text()
    for name in cat.efficiency_table()["name"]:
        assert f"`{name}`" in doc, name


def test_membership_of_an_unknown_name_is_false_not_an_input_error():
    e = load_efficiency()
    assert "decode_mfu" in e and "serving_efficiency_hopper" not in e
