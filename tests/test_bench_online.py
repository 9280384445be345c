"""bench/online.py: the comparison it prints is the model's own estimate at that concurrency."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.online import evaluate  # noqa: E402
from optimizer.api import estimate_inference  # noqa: E402


def test_each_row_compares_the_estimate_at_its_concurrency(tmp_path):
    csv = tmp_path / "one.csv"
    csv.write_text("model,gpu,gpu_count,precision,prompt_tokens,output_tokens,concurrency,ttft_ms,tpot_ms,"
                   "output_tokens_per_s,source,taken\n"
                   "llama-3.1-8b,H100-SXM,1,fp8,1000,200,8,100.0,10.0,500.0,test,2026-11-24\n")
    row = evaluate(str(csv)).iloc[0]
    est = estimate_inference("llama-3.1-8b", "H100-SXM", 1, precision="fp8", prompt_tokens=1000,
                             output_tokens=200, concurrency=8)
    assert row["tpot_ms_model"] == pytest.approx(est["tpot_ms"], abs=0.01)
    # error = model / measured - 1, in percent, with the measured figures of the row
    assert row["ttft_ms_err_pct"] == pytest.approx(100 * (est["ttft_ms"] / 100.0 - 1), abs=0.06)
    assert row["output_tokens_per_s_err_pct"] == pytest.approx(100 * (est["output_tokens_per_s"] / 500.0 - 1),
                                                               abs=0.06)
