"""A built model re-priced for new prices is the model built afresh for them, to the last coefficient.

The comparison is with :func:`optimizer.model.presolve.build` run on the
changed problem: every array the back ends read (matrix, row and column
bounds, integrality, objective and its constant) must be equal bit for bit,
and every table the plan is read from must be equal too. A change that is
not a price must never share a model.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.model.mip import MIP
from optimizer.model.reprice import Models, reprice, structure_key
from optimizer.studies import rentbuy as rb

from test_rentbuy import SOLVER, TINY, audited, tiny  # noqa: F401 (audited: a fixture)

ROOT = Path(__file__).resolve().parent.parent
ARRAYS = ("rows", "cols", "vals", "row_lo", "row_hi", "col_lo", "col_hi", "integer", "c")


def assert_same_model(got, want) -> None:
    a, b = got.mip.arrays(), want.mip.arrays()
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and np.array_equal(x, y), name
    assert a.c0 == b.c0
    assert a.row_names == b.row_names and a.var_names == b.var_names
    assert got.vars.keys() == want.vars.keys()
    for name in want.vars:
        pd.testing.assert_frame_equal(got.vars[name], want.vars[name], obj=name)
    for name in ("offerings", "periods", "inference_options", "training_options"):
        pd.testing.assert_frame_equal(getattr(got.data, name), getattr(want.data, name), obj=name)
    assert got.data.rate == want.data.rate
    assert got.problem is want.problem  # the plan speaks of the changed problem


def price_variants(pr):
    """Every price-only change the rent-versus-buy analysis makes, down and up, and a capex probe per owned
    offering."""
    out = [(f"{p.name} x{f}", p.apply(pr, f)) for p in rb.PARAMETERS if p.name != "demand" and p.present(pr)
           for f in (0.8, 1.2)]
    out += [(f"capex of {oid} = 1", rb.with_capex(pr, oid, 1.0)) for oid in rb.owned_ids(pr)]
    return out


def per_gpu_rental() -> dict:
    # TINY with its on-demand rental sold by the GPU on 8-GPU machines: the model's price is per GPU
    # (price_per_hour ÷ 8), a column derived from a price field
    data = copy.deepcopy(TINY)
    data["offerings"][2].update(gpus_per_unit=8, billing="per_gpu", price_per_hour=16.0)
    return data


@pytest.mark.parametrize("per_gpu", [False, True], ids=["per-unit", "per-gpu"])
def test_every_price_change_of_rent_versus_buy_re_prices_to_the_model_built_afresh(tmp_path, per_gpu):
    pr = tiny(tmp_path, per_gpu_rental() if per_gpu else None)
    if per_gpu:
        O = presolve.build(pr, build_candidates(pr)).data.offerings.set_index("offering")
        assert O.at["od", "price"] == 2.0 and O.at["od", "G"] == 1
    cands = build_candidates(pr)
    base = presolve.build(pr, cands)
    variants = price_variants(pr)
    # TINY has all seven priced parameters: capex, lifetime, residual value, discount rate, electricity,
    # fixed costs and cloud prices
    assert len(variants) == 7 * 2 + 1
    for name, v in variants:
        assert structure_key(v) == structure_key(pr), name
        got = reprice(base, v)
        assert got is not None, name
        assert_same_model(got, presolve.build(v, cands))


@pytest.mark.parametrize("parameter", ["capex", "electricity price", "cloud prices"])
def test_q3_with_its_budget_row_re_prices_to_the_model_built_afresh(parameter):
    # q3 has what TINY lacks: training jobs (their hours carry owned energy), spot, one-year reserved
    # terms, and a budget row, whose coefficients are the objective's
    pr = load_problem(ROOT / "problems" / "q3.yaml")
    assert pr.budget is not None and pr.jobs
    cands = build_candidates(pr)
    base = presolve.build(pr, cands)
    par = next(p for p in rb.PARAMETERS if p.name == parameter)
    v = par.apply(pr, 1.2)
    got = reprice(base, v)
    want = presolve.build(v, cands)
    assert_same_model(got, want)
    # the budget row moved with the prices: its coefficients are the new objective's
    budget = want.mip.constraints["budget"]
    old = base.mip.constraints["budget"]
    assert not np.array_equal(budget.vals, old.vals) or budget.upper[0] != old.upper[0]


def _structural_changes(pr):
    def offerings(f):
        O = pr.offerings.copy()
        f(O)
        return rb.variant(pr, offerings=O)

    def max_units(O):
        O["max_units"] = O["max_units"].astype(float)
        O.loc[O.index[2], "max_units"] = 7.0

    def existing(O):
        O["existing_units"] = O["existing_units"].astype(float)
        O.loc["own", "existing_units"] = 1.0

    def region(O):
        O.loc["od", "region"] = "elsewhere"

    budget = copy.deepcopy(pr)
    budget.spec = budget.spec.model_copy(update={"constraints": budget.spec.constraints.model_copy(
        update={"budget": 1e6})})
    hours = copy.deepcopy(pr)
    hours.periods = hours.periods.assign(hours=hours.periods["hours"] / 2)
    return {"demand": rb.scale_demand(pr, 1.2), "max_units": offerings(max_units),
            "existing units": offerings(existing), "region": offerings(region), "budget": budget,
            "period hours": hours}


def test_a_change_that_is_not_a_price_never_shares_a_model(tmp_path):
    pr = tiny(tmp_path)
    key = structure_key(pr)
    for name, v in _structural_changes(pr).items():
        assert structure_key(v) != key, name
    models = Models(build_candidates(pr))
    models.build(pr)
    for name, v in _structural_changes(pr).items():
        assert_same_model(models.build(v), presolve.build(v, models.candidates))
    assert models.counts == {"built": 7, "repriced": 0}


def test_prices_that_make_or_break_duplicate_offerings_build_afresh(tmp_path):
    # od2 is od to the cent and has no cap, so the reduction drops it; at another price it must stay, and
    # a re-priced model (which lacks it) would be wrong
    data = copy.deepcopy(TINY)
    data["offerings"].append({**data["offerings"][2], "id": "od2"})
    pr = tiny(tmp_path, data)
    models = Models(build_candidates(pr))
    base = models.build(pr)
    assert list(base.dropped_offerings["id"]) == ["od2"]
    O = pr.offerings.copy()
    O.loc["od2", "price_per_hour"] = 1.5
    cheaper = rb.variant(pr, offerings=O)
    assert structure_key(cheaper) == structure_key(pr)
    assert reprice(base, cheaper) is None
    got = models.build(cheaper)
    assert "od2" in set(got.data.offerings["offering"])
    assert_same_model(got, presolve.build(cheaper, models.candidates))
    assert models.counts == {"built": 2, "repriced": 0}


def test_a_block_is_replaced_only_by_one_of_as_many_rows():
    m, other = MIP(), MIP()
    x = m.add_variables("x", pd.DataFrame({"i": [0, 1]}))
    m.add_constraints("a", x.assign(coef=1.0), "<=", 1.0, keys=["i"])
    y = other.add_variables("x", pd.DataFrame({"i": [0, 1]}))
    other.add_constraints("a", y.assign(coef=1.0), "<=", 2.0, keys=[])
    with pytest.raises(ValueError, match="1 rows in place of 2"):
        m.replace_block(other.constraints["a"])


def test_rent_versus_buy_builds_only_the_copies_that_change_more_than_prices(tmp_path, monkeypatch, audited):
    kept = []
    init = rb.Solves.__init__

    def recording(self, *a, **kw):
        init(self, *a, **kw)
        kept.append(self)

    monkeypatch.setattr(rb.Solves, "__init__", recording)
    out = rb.analyse(tiny(tmp_path), solver=SOLVER)
    solves = kept[0].models.counts
    # built: the mix, rent and buy strategies, demand x0.8 and x1.2 (the break-even's problem without new
    # units is rent's); re-priced: the 14 priced sensitivity solves and every break-even capex probe
    assert solves["built"] == 5
    assert solves["repriced"] == 14 + out.break_even.set_index("offering").loc["own", "solves"] - 1
    # every plan solved, built or re-priced, passed its audit (the fixture checks each)
    assert len(audited) == solves["built"] + solves["repriced"]


def test_the_pre_check_runs_once_per_structure(tmp_path, monkeypatch):
    # what the pre-check finds depends on no price: a problem that differs only in prices gets the culprits found
    # for its structure before (a copy: what a caller does with them stays its own); another structure is checked
    from optimizer import pipeline

    pr = tiny(tmp_path)
    models = Models(build_candidates(pr))
    calls = []

    def check():
        calls.append(1)
        return [{"kind": "region", "message": "found once"}]

    first = models.prechecked(pr, check)
    first[0]["message"] = "changed by the caller"
    O = pr.offerings.copy()
    O.loc["od", "price_per_hour"] = 3.0
    dearer = rb.variant(pr, offerings=O)
    assert models.prechecked(dearer, check) == [{"kind": "region", "message": "found once"}] and len(calls) == 1
    models.prechecked(_structural_changes(pr)["region"], check)
    assert len(calls) == 2
    # the pipeline asks the models it builds with: rent versus buy's re-priced copies are not checked again
    ran = []
    real = pipeline.precheck
    monkeypatch.setattr(pipeline, "precheck", lambda *a, **k: ran.append(1) or real(*a, **k))
    models = Models(build_candidates(pr))
    plans = [pipeline.run(p, solver=SOLVER, models=models) for p in (pr, dearer)]
    assert len(ran) == 1 and models.counts == {"built": 1, "repriced": 1}
    assert [p.status.value for p in plans] == ["optimal", "optimal"] and plans[1].objective > plans[0].objective
    assert [p.audit for p in plans] == [[], []]
