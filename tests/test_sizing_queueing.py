"""Latency under load (optimizer.sizing.queueing): a hand-worked chain, the limits, monotonicity, the CLI.

The hand-worked replica has room for two sequences: alone it completes 1
request/s (TTFT 100 ms, TPOT 10 ms), with two 1.5 requests/s (TTFT 150 ms,
TPOT 12 ms). Under Poisson arrivals at 0.5 requests/s the number of requests
n is a birth-death chain with pi(n) proportional to 1, 0.5/1 = 0.5,
0.5 x 0.5/1.5 = 1/6 and beyond two a geometric tail of ratio 1/3, so
P(0) = 1/1.75, P(1) = 0.5/1.75 and P(n >= 2) = (1/6)/(2/3)/1.75 = 1/7.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from optimizer import schema
from optimizer.cli import main
from optimizer.sizing import estimate_inference, inference_candidates, load_efficiency, load_gpus, load_models
from optimizer.sizing import queueing as q
from optimizer.sizing.inference import replica

TINY = {"batch": np.array([1, 2]), "rps": np.array([1.0, 1.5]), "ttft_ms": np.array([100.0, 150.0]),
        "tpot_ms": np.array([10.0, 12.0])}


@pytest.fixture(scope="module")
def curve():
    models, gpus, eff = load_models(), load_gpus(), load_efficiency()
    return replica(models["llama-3.1-8b"], gpus["H100-SXM"], 1, "bf16", eff).serve(1000, 200)


def test_the_hand_worked_chain():
    r = q.under_rps(TINY, 0.5, osl=100)
    p0, p1, full = 1 / 1.75, 0.5 / 1.75, 1 / 7
    # TTFT: 100 ms into an empty replica, 150 ms beside one, and with two running 150 ms after an
    # exponential wait of rate 1.5 - 0.5 = 1 per second (mean 1,000 ms)
    assert r["ttft_ms"] == pytest.approx(p0 * 100 + p1 * 150 + full * (150 + 1000))
    # TPOT over tokens: one sequence makes 1/10 tokens per ms, two make 2/12
    w1, w2 = p1 * 1 / 10, full * 2 / 12
    assert r["tpot_ms"] == pytest.approx((w1 * 10 + w2 * 12) / (w1 + w2))
    assert r["mean_batch"] == pytest.approx(p1 + 2 * full)
    assert r["queue_ms"] == pytest.approx(full * 1000)
    # p99 TTFT: 6/7 of arrivals start at once; the rest wait: 150 + 1000 x -ln(1 - (0.99 - 6/7) / (1/7))
    assert r["ttft_ms_p99"] == pytest.approx(150 + 1000 * -math.log(1 - (0.99 - 6 / 7) * 7))
    assert r["output_tokens_per_s"] == pytest.approx(50.0) and r["utilisation"] == pytest.approx(1 / 3)


def test_meets_agrees_with_the_hand_worked_chain():
    mean_ttft = q.under_rps(TINY, 0.5, osl=100)["ttft_ms"]
    assert q.meets(TINY, 0.5, mean_ttft + 1e-6, None, "mean") and not q.meets(TINY, 0.5, mean_ttft - 1e-3, None, "mean")
    # 6/7 = 85.7 % of arrivals find room: TTFT <= 150 ms at p85, not at p90
    assert q.meets(TINY, 0.5, 150.0, None, 85) and not q.meets(TINY, 0.5, 150.0, None, 90)


def test_at_low_load_the_latency_is_the_unloaded_one(curve):
    r = q.under_rps(curve, 1e-6 * q.capacity(curve), osl=200)
    assert r["ttft_ms"] == pytest.approx(curve["ttft_ms"][0], rel=1e-4)
    assert r["tpot_ms"] == pytest.approx(curve["tpot_ms"][0], rel=1e-4)


def test_the_queue_grows_without_bound_as_load_nears_capacity(curve):
    cap = q.capacity(curve)
    ttft = [q.under_rps(curve, cap * (1 - 10.0**-k), osl=200)["ttft_ms"] for k in (2, 4, 6)]
    assert ttft[0] < ttft[1] < ttft[2] and ttft[2] > 100 * ttft[0]
    with pytest.raises(ValueError, match="capacity"):
        q.under_rps(curve, cap, osl=200)


def test_more_load_never_lowers_ttft_or_tpot(curve):
    rows = [q.under_rps(curve, f * q.capacity(curve), osl=200) for f in np.linspace(0.01, 0.99, 60)]
    for key in ("ttft_ms", "tpot_ms", "ttft_ms_p99", "tpot_ms_p99"):
        seq = [r[key] for r in rows]
        assert all(b >= a - 1e-9 for a, b in zip(seq, seq[1:])), key


def test_tighter_slos_and_higher_percentiles_never_raise_rps(curve):
    by_ttft = [q.max_rps_at_slo(curve, t, 30.0, 99) for t in (400.0, 200.0, 100.0, 60.0, 45.0)]
    assert all(b <= a for a, b in zip(by_ttft, by_ttft[1:])) and by_ttft[0] > 0
    by_tpot = [q.max_rps_at_slo(curve, None, t, 99) for t in (40.0, 25.0, 15.0, 11.0)]
    assert all(b <= a for a, b in zip(by_tpot, by_tpot[1:])) and by_tpot[0] > 0
    by_pct = [q.max_rps_at_slo(curve, 60.0, 25.0, p) for p in (50, 90, 99, 99.9)]
    assert all(b <= a for a, b in zip(by_pct, by_pct[1:]))


def test_the_rps_at_the_slo_meets_it_and_a_little_more_does_not(curve):
    lam = q.max_rps_at_slo(curve, 60.0, 25.0, 99)
    r = q.under_rps(curve, lam, osl=200)
    assert r["ttft_ms_p99"] <= 60.0 + 1e-6 and r["tpot_ms_p99"] <= 25.0 + 1e-6
    assert not q.meets(curve, lam + 0.003 * q.capacity(curve), 60.0, 25.0, 99)


def test_closed_loop():
    # two in flight fill the batch: the curve's point; four: two wait (4 - 2) / 1.5 s each
    assert q.at_concurrency(TINY, 2, osl=100)["ttft_ms"] == 150.0
    r = q.at_concurrency(TINY, 4, osl=100)
    assert r["rps"] == 1.5 and r["ttft_ms"] == pytest.approx(150 + 2 / 1.5 * 1000) and r["tpot_ms"] == 12.0


def test_the_knee_is_the_point_farthest_above_the_chord():
    # throughput 1, 1.8, 2.0, 2.1 over batches 1..4: scaled, (1/3, 0.727) is 0.394 above the chord
    m = {"rps": np.array([1.0, 1.8, 2.0, 2.1])}
    assert q.knee(m) == 1


def test_the_planner_uses_the_estimates_rps_at_the_slo():
    models, gpus, eff = load_models(), load_gpus(), load_efficiency()
    s = schema.InferenceService(name="chat", model="llama-3.1-8b", precisions=["bf16"], prompt_tokens=1000,
                                output_tokens=200, slo={"ttft_ms": 300.0, "tpot_ms": 25.0, "percentile": 90},
                                demand_rps=10.0)
    df = inference_candidates(s, ["H100-SXM"], models=models, gpus=gpus, eff=eff).set_index("gpus")
    est = estimate_inference(models["llama-3.1-8b"], gpus["H100-SXM"], 1, "bf16", 1000, 200, eff,
                             ttft_ms=300.0, tpot_ms=25.0, percentile=90)
    assert est["load"] == "slo" and est["meets_slo"] and df.loc[1, "rps"] == est["rps"]


INFER = ["estimate", "inference", "-m", "llama-3.1-8b", "-g", "H100-SXM", "-i", "1000", "--output-tokens", "200",
         "--format", "json"]


def test_cli_rps_and_concurrency(curve):
    at = json.loads(CliRunner().invoke(main, INFER + ["--rps", "8"]).output)
    want = q.under_rps(curve, 8.0, osl=200)
    assert at["load"] == "rps" and at["rps"] == 8 and at["ttft_ms"] == pytest.approx(want["ttft_ms"], abs=1e-3)
    assert at["output_tokens_per_s"] == pytest.approx(1600.0)
    c = json.loads(CliRunner().invoke(main, INFER + ["--concurrency", "64"]).output)
    assert c["load"] == "concurrency" and c["tpot_ms"] == pytest.approx(curve["tpot_ms"][63], abs=1e-3)


def test_cli_overload_and_a_bad_percentile(curve):
    r = CliRunner().invoke(main, INFER + ["--rps", str(2 * q.capacity(curve))])
    assert r.exit_code == 1 and "overloaded" in json.loads(r.output)["reason"]
    r = CliRunner().invoke(main, INFER + ["--percentile", "p100"])
    assert r.exit_code == 2 and "--percentile" in r.output
    r = CliRunner().invoke(main, INFER + ["--rps", "1", "--concurrency", "2"])
    assert r.exit_code == 2


# The same replica with a prefill that holds the engine for S = 200 ms per prompt. At 0.5 requests/s the
# prefill server is busy rho = 0.5 x 0.2 = 0.1 of the time; its M/D/1 wait has mean
# rho S / (2 (1 - rho)) = 0.1 x 200 / 1.8 = 11.11 ms, modelled as an atom 0.9 at zero and an exponential
# tail of mean theta = S / (2 (1 - rho)) = 111.1 ms.
SLOW_PREFILL = dict(TINY, prefill_ms=200.0)


def test_prefills_queue_for_each_other_by_hand():
    without, r = q.under_rps(TINY, 0.5, osl=100), q.under_rps(SLOW_PREFILL, 0.5, osl=100)
    assert r["ttft_ms"] - without["ttft_ms"] == pytest.approx(0.1 * 200 / 1.8)
    assert r["tpot_ms"] == without["tpot_ms"] and r["rps"] == without["rps"]
    # P(TTFT <= 150 ms): an empty replica (100 ms) with a wait <= 50 ms, or one beside another (150 ms) with
    # no wait; a full batch always exceeds 150 ms
    p0, p1, theta = 1 / 1.75, 0.5 / 1.75, 200 / 1.8
    p = p0 * (1 - 0.1 * math.exp(-50 / theta)) + p1 * 0.9
    assert q.meets(SLOW_PREFILL, 0.5, 150.0, None, 100 * p - 0.01)
    assert not q.meets(SLOW_PREFILL, 0.5, 150.0, None, 100 * p + 0.01)
    # the p99 the estimate reports is where that distribution reaches 0.99, and meets() agrees with it
    p99 = r["ttft_ms_p99"]
    assert q.meets(SLOW_PREFILL, 0.5, p99 + 1e-3, None, 99) and not q.meets(SLOW_PREFILL, 0.5, p99 - 1e-2, None, 99)
    assert p99 > without["ttft_ms_p99"]


def test_closed_loop_prefill_waits_behind_the_other_clients_only():
    # one client never waits for another's prefill
    assert q.at_concurrency(SLOW_PREFILL, 1, osl=100)["ttft_ms"] == 100.0
    # two: the other client's prompts arrive at 1.5 x 1/2 = 0.75 per s, rho = 0.15,
    # mean wait 0.15 x 200 / (2 x 0.85) = 17.65 ms; p99 = theta ln(rho / 0.01), theta = 200 / 1.7
    r = q.at_concurrency(SLOW_PREFILL, 2, osl=100)
    assert r["ttft_ms"] == pytest.approx(150 + 0.15 * 200 / 1.7)
    assert r["ttft_ms_p99"] == pytest.approx(150 + 200 / 1.7 * math.log(15))


def test_the_prefill_queue_grows_with_load_and_the_estimate_carries_it(curve):
    assert curve["prefill_ms"] > 0
    cap = q.capacity(curve)
    waits = [q.under_rps(curve, f * cap, osl=200)["ttft_ms"] - q.under_rps(
        {k: v for k, v in curve.items() if k != "prefill_ms"}, f * cap, osl=200)["ttft_ms"] for f in (0.2, 0.5, 0.8)]
    assert 0 < waits[0] < waits[1] < waits[2]
