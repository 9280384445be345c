"""The descent over the configurations (optimizer/solve/descent.py), on FLIP3 worked by hand.

FLIP3 (tests/test_executable_plans.py): chat needs 1 rps in p1 and 10 in
p2, 100 h each, limited to one configuration: A (one L4 at 1 rps, 1 an
hour), B (an 8-GPU H100 node at 10 rps, 6 an hour) or C (one A100 at 2 rps,
2.4 an hour). With the configuration fixed and the floors (whole replicas
per period), each choice's LP is what its plan costs: A 100 + 1,000 =
1,100; B 600 + 600 = 1,200; C 240 + 5 × 240 = 1,440.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from conftest import write_problem, patch_driver
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.solve import driver, split
from optimizer.solve.backends import Status
from optimizer.solve.descent import choose_configurations
from optimizer.solve.feasibility import violations

from test_executable_plans import FLIP3, assert_plan_audited
from optimizer.solve import relaxations


def model_of(tmp_path, data):
    pr = load_problem(write_problem(tmp_path, data))
    return presolve.build(pr, build_candidates(pr))


def configs(model):
    return model.mip.variables["config-used"].coords.reset_index(drop=True)


def use_of(model, traffic=0.0):
    """The traffic of each configuration (as optimizer.solve.split.configuration_use gives it), every class
    limited to one configuration."""
    return configs(model).assign(use=traffic, max_configurations=1)


def chosen(model, prefix):
    """The choice of the configurations whose GPU name starts with ``prefix``, one per service."""
    return configs(model)["config"].str.startswith(prefix).to_numpy()


@pytest.mark.parametrize("start", ["H100", "A100", "L4"])
def test_each_start_descends_to_the_cheapest_choice(tmp_path, start):
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    d = choose_configurations(model, model.mip.arrays(), chosen(model, start), use_of(model), None)
    assert d.value == pytest.approx(1_100) and d.local
    assert configs(model)["config"][d.keep].str.startswith("L4").all() and d.keep.sum() == 1
    # the start's LP, then the class's two other configurations once: its answer is final, no other class
    assert d.lps == 3 and d.changes == (0 if start == "L4" else 1)


def test_its_point_is_a_point_of_the_configuration_relaxation_which_starts_from_it(tmp_path):
    from optimizer.model.strengthen import config_floor

    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    a = model.mip.arrays()
    d = choose_configurations(model, a, chosen(model, "H100"), use_of(model), None)
    floors = a.with_rows(config_floor(model.mip, model.data, model.vars))
    ids = model.mip.variables["config-used"].ids
    integer = np.zeros_like(floors.integer)
    integer[ids] = True
    assert violations(dataclasses.replace(floors, integer=integer), d.x) == []
    relaxed = relaxations.configuration_relaxation(model, a, "highs", 30.0, 1e-9, None, start=d.x)
    assert relaxed.status == Status.OPTIMAL and relaxed.objective == pytest.approx(1_100)


def test_out_of_time_it_keeps_the_start(tmp_path):
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    d = choose_configurations(model, model.mip.arrays(), chosen(model, "H100"), use_of(model), 0.0)
    assert not d.local and d.changes == 0 and d.lps == 1 and d.value == pytest.approx(1_200)


def test_out_of_time_inside_a_class_it_keeps_the_cheapest_tried(tmp_path, monkeypatch):
    # started on B (1,200), chat's other configurations are tried in their order, A (1,100) then C (1,440). A
    # clock that moves a second at each look, and a 1.5-s limit: A is tried (at 1 s), the time is up before C (at
    # 2 s). A, cheaper than the start, is kept: one change, 1,100 after 2 LPs
    from optimizer.solve import descent

    class Clock:
        now = -1.0

        @classmethod
        def perf_counter(cls):
            cls.now += 1.0
            return cls.now

    monkeypatch.setattr(descent, "time", Clock)
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    d = choose_configurations(model, model.mip.arrays(), chosen(model, "H100"), use_of(model), 1.5)
    assert not d.local and d.lps == 2 and d.changes == 1 and d.value == pytest.approx(1_100)
    assert configs(model)["config"][d.keep].str.startswith("L4").all() and d.keep.sum() == 1


def test_a_class_is_tried_again_only_after_another_changed(tmp_path):
    # FLIP3's chat twice (chat and chat2, the same offerings): started both on B, the least used class first
    # (chat2, by the use given) moves to A (1 + 2 LPs), then chat (2 LPs), after which chat2 is tried again
    # (2 LPs) and nothing changes: 7 LPs, 2 changes, both on A, 2,200
    data = copy.deepcopy(FLIP3)
    twin = copy.deepcopy(data["inference"][0])
    twin["name"] = "chat2"
    data["inference"].append(twin)
    model = model_of(tmp_path, data)
    cs = configs(model)
    use = use_of(model, np.where(cs["service"].eq("chat"), 2.0, 1.0))
    d = choose_configurations(model, model.mip.arrays(), chosen(model, "H100"), use, None)
    assert d.value == pytest.approx(2_200) and d.local and d.changes == 2 and d.lps == 7
    assert sorted(cs["service"][d.keep]) == ["chat", "chat2"]
    assert cs["config"][d.keep].str.startswith("L4").all()


def test_the_driver_starts_the_relaxation_from_the_descent_and_says_so(tmp_path, monkeypatch):
    # the path of a model no split can take: the descent, then the relaxation from its point; the plan on A,
    # 1,100, proven by the relaxation's bound
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    monkeypatch.setattr(split, "MAX_SPLIT", 1)
    lp = driver.relaxation(model, "highs")
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(1_100)
    assert "started from the descent over the configurations (1,100.00 after" in r.message


def test_on_the_heuristics_path_the_descent_chooses_what_is_fixed(tmp_path, monkeypatch):
    # a model whose LP took too long for any stage: the configurations fixed are the descent's (A, 1,100 as
    # its plan), started from those the LP relaxation uses most; without the descent, the LP's own
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    patch_driver(monkeypatch, "heuristics_only", lambda *a, **k: True)
    lp = driver.relaxation(model, "highs")
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.objective == pytest.approx(1_100)
    assert r.message.count("the descent over the configurations (1,100.00 after") == 1
    assert "configurations fixed to those the descent over the configurations uses most" in r.message
    patch_driver(monkeypatch, "HEURISTICS_DESCENT_SHARE", 0.0)
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert "descent" not in r.message and "configurations fixed to those the LP relaxation uses most" in r.message


def test_a_guide_stopped_short_of_its_gap_hands_its_choice_to_the_descent(tmp_path, monkeypatch):
    # under a limit, the model without stability limits stops before its gap (forced here): its plan puts chat
    # on B in p2, where most traffic is (A in p1, B in p2: 100 + 600 = 700), so the configuration it uses most is
    # B (1,200 as a stable plan). The descent from that choice moves chat to A (1,100), and the fixed path starts
    # from there; the bound stays the model without limits'
    model = model_of(tmp_path, copy.deepcopy(FLIP3))
    real = driver.backend_solve

    def guide_short(mip, *args, **kw):
        r = real(mip, *args, **kw)
        if kw.get("gap") == driver.GUIDE_GAP and r.status == Status.OPTIMAL:  # the guide: as if on its limit
            r.status = Status.FEASIBLE
        return r

    patch_driver(monkeypatch, "backend_solve", guide_short)
    lp = driver.relaxation(model, "highs")
    r = driver.solve_stable(model, "highs", 30.0, 1e-9, None, guide=lp.x, lp_seconds=0.01)
    assert_plan_audited(model, r)
    assert r.objective == pytest.approx(1_100)
    assert ("the descent over the configurations (1,100.00 after 3 LPs and 1 change" in r.message
            and "from the configurations the plan without stability limits uses most" in r.message)
    assert "configurations fixed to those the descent over the configurations uses most" in r.message
