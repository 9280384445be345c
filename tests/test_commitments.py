"""The commitment MIP: whole reserved units chosen against the LP of the rest, not rounded from the LP."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.model import presolve
from optimizer.solve.warmstart import lp_start, start_objective
from optimizer.candidates import build_candidates
from optimizer.load import build_problem, parse_problem_file

TWO_PERIODS = [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}]


def idle_unit_problem():
    # 5 one-GPU replicas (1 rps each) in both periods of 100 h.
    # Reserved: 8-GPU units at 8 $/h (1 $/GPU-h); on-demand: 1-GPU units at 1.5 $/h.
    # LP: 5/8 of a reserved unit, 0.625 × 8 × 200 = 1,000.
    # Whole units: 1 reserved = 8 × 200 = 1,600; none, 5 on-demand × 1.5 × 200 = 1,500. Optimum 1,500.
    # Rounding 0.625 up or to the nearest unit both give 1 unit (1,600).
    data = {"periods": TWO_PERIODS,
            "offerings": [
                {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r1", "pricing": "on_demand",
                 "price_per_hour": 1.5},
                {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
                 "price_per_hour": 8.0, "term_months": 12}],
            "inference": [{"name": "chat", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
                           "demand_rps": 5.0, "profiles": [{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0}]}]}
    file = "<idle unit>"
    return build_problem(parse_problem_file(data, file), file, Path("."))


def test_rounding_buys_an_idle_unit_and_the_commitment_mip_does_not():
    pr = idle_unit_problem()
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    rounded = lp_start(model.mip, model.tables, model.vars, a, info={}, commit_time=0)
    assert start_objective(a, rounded) == pytest.approx(1_600)
    info: dict = {}
    x = lp_start(model.mip, model.tables, model.vars, a, info=info, commit_time=None)
    assert start_objective(a, x) == pytest.approx(1_500)
    assert info["lp_bound"] == pytest.approx(1_000)
    # a relaxation of the MIP, so a lower bound, and here the optimum itself
    assert 1_000 < info["commit_bound"] <= 1_500 + 1e-6
    assert info["commit_bound"] == pytest.approx(1_500, rel=1e-4)


def test_model_start_reports_the_commitment_bound():
    pr = idle_unit_problem()
    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    x = model.start(time_limit=30)
    assert start_objective(a, x) == pytest.approx(1_500)
    assert model.lp_bound == pytest.approx(1_500, rel=1e-4)  # the commitment MIP's bound, not the LP's 1,000
