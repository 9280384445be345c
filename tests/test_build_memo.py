"""The model's build is a function of its input, which the suite's build memo (tests/build_memo.py) rests on;
and the memo hands out equal, independent copies, and builds afresh where the code differs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import build_memo
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import formulation, presolve

from test_reprice import assert_same_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.generate import problem as generated  # noqa: E402


def shipped(name: str):
    return load_problem(ROOT / "problems" / name)


@pytest.mark.parametrize("make", [lambda: shipped("q3.yaml"), lambda: shipped("rent-vs-buy-3y.yaml"),
                                  lambda: generated(0.02, 0, weeks=4, regions=2)],
                         ids=["q3", "rent-vs-buy-3y", "generated"])
def test_a_model_built_twice_from_one_input_is_the_same(make):
    # two problems loaded apart (no object shared), each built afresh: every array, variable table and input
    # table the same (reserved and owned units, training lanes, stability rows, budget: q3; yearly periods and
    # purchases: rent-vs-buy; two regions, generated)
    first, second = make(), make()
    a = build_memo.fresh(first, build_candidates(first))
    b = build_memo.fresh(second, build_candidates(second))
    a = dataclasses.replace(a, problem=b.problem)  # assert_same_model also checks whose problem it speaks of
    assert_same_model(a, b)
    assert a.mip.objective_constant == b.mip.objective_constant


@pytest.mark.skipif(build_memo.MEMO is None, reason="GPUOPT_TEST_FRESH_BUILDS: no memo in this run")
def test_the_memo_hands_out_equal_copies_that_stay_apart():
    memo = build_memo.MEMO
    pr = shipped("q3-profiled.yaml")
    cands = build_candidates(pr)
    first = presolve.build(pr, cands)
    builds, hits = memo.builds, memo.hits
    again = presolve.build(shipped("q3-profiled.yaml"), cands)  # another object of the same content
    assert (memo.builds, memo.hits) == (builds, hits + 1)
    assert again.mip is not first.mip
    assert_same_model(dataclasses.replace(again, problem=first.problem), first)
    # what a caller does to its copy reaches no other
    block = again.mip.variables["units-running"]
    block.upper[:] = 0.0
    third = presolve.build(pr, cands)
    assert np.array_equal(third.mip.variables["units-running"].upper, first.mip.variables["units-running"].upper)
    assert third.problem is pr


@pytest.mark.skipif(build_memo.MEMO is None, reason="GPUOPT_TEST_FRESH_BUILDS: no memo in this run")
def test_the_memo_builds_afresh_where_the_code_or_the_cuts_differ(monkeypatch):
    memo = build_memo.MEMO
    pr = shipped("q3-profiled.yaml")
    cands = build_candidates(pr)
    presolve.build(pr, cands)
    builds = memo.builds
    presolve.build(pr, cands, cuts=())
    assert memo.builds == builds + 1
    real = formulation.spot_waste
    monkeypatch.setattr(formulation, "spot_waste", lambda *a, **k: real(*a, **k))
    presolve.build(pr, cands)
    assert memo.builds == builds + 2
