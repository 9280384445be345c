"""The sizing model against the shipped measured figures (bench/data/calibration_figures.csv).

The measured values are public figures (TensorRT-LLM, Megatron-LM, Llama 3,
vLLM), not gpuopt output; the thresholds are what docs/sizing.md reports
("Calibration"), with room for small factor changes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import calibrate  # noqa: E402


def test_calibration_runs_from_a_fresh_clone_and_stays_within_its_reported_error():
    data = calibrate.evaluate(str(ROOT / "bench" / "data" / "calibration_figures.csv"))
    by_kind = calibrate.summary(data, "kind")
    assert set(by_kind.index) == {"infer", "memory", "train"}
    assert by_kind["rows"].sum() >= 100  # nearly every row is predicted
    assert by_kind.loc["infer", "median_error_pct"] < 15
    assert by_kind.loc["train", "median_error_pct"] < 15
    assert by_kind.loc["memory", "median_error_pct"] < 10


def test_calibrate_command_defaults_to_the_shipped_figures(capsys):
    assert calibrate.main([]) == 0
    assert "By kind" in capsys.readouterr().out
