"""Sweeps along a price settle the points between two solves (optimizer/studies/parametric.py).

The expected costs are worked by hand; the sweep that solves every point is
the second, independent route to the same numbers.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from optimizer import api
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve
from optimizer.pipeline import run
from optimizer.studies import parametric

from conftest import assert_audited, write_problem

HOUR100 = [{"name": "p1", "hours": 100, "month": 0}]


def two_offerings(demand=5.0) -> dict:
    # 5 one-GPU replicas (1 rps each) for 100 h, on offering a at p $/GPU-h or on b at 2 $/GPU-h:
    # the optimum is 500·min(p, 2), a's plan below p = 2 and b's above.
    return {"periods": HOUR100,
            "offerings": [{"id": "a", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r1",
                           "pricing": "on_demand", "price_per_hour": 1.0},
                          {"id": "b", "gpu": "H100-SXM", "gpus_per_unit": 1, "region": "r2",
                           "pricing": "on_demand", "price_per_hour": 2.0}],
            "inference": [{"name": "chat", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100,
                           "demand_rps": demand, "profiles": [{"gpu": "H100-SXM", "gpus": 1, "rps": 1.0}]}]}


def settled(sweep) -> list[int]:
    return [p["index"] for p in sweep.points if "without a solve" in p["message"]]


def test_a_price_sweep_settles_the_points_between_two_solves(tmp_path):
    path = write_problem(tmp_path, two_offerings())
    sw = api.sweep(path, vary="offerings[a].price_per_hour=1.0:3.0:21", solver="highs")
    prices = [1.0 + 0.1 * i for i in range(21)]
    for p, price in zip(sw.points, prices):
        assert p["status"] == "optimal"
        assert p["objective"] == pytest.approx(500 * min(price, 2.0))
        if price < 2.0 - 1e-9:
            assert p["mix"] == {"a": 5}
        elif price > 2.0 + 1e-9:
            assert p["mix"] == {"b": 5}
    # the ends and a few midpoints are solved; the rest are settled from the solves around them
    assert len(settled(sw)) >= 10
    assert 0 not in settled(sw) and 20 not in settled(sw)
    # --every-point solves each point (five here, the same formula)
    every = api.sweep(path, vary="offerings[a].price_per_hour=1.0:3.0:5", solver="highs", every_point=True)
    assert settled(every) == []
    assert [p["objective"] for p in every.points] == pytest.approx([500 * min(1.0 + 0.5 * i, 2.0) for i in range(5)])


def test_a_demand_sweep_is_solved_point_by_point(tmp_path):
    # demand moves the rows, not the objective: nothing may be settled. d rps need ⌈d⌉ replicas on a: 100·⌈d⌉.
    path = write_problem(tmp_path, two_offerings())
    sw = api.sweep(path, vary="inference[chat].demand_rps=1:5:9", solver="highs")
    assert settled(sw) == []
    for p, d in zip(sw.points, [1 + 0.5 * i for i in range(9)]):
        assert p["objective"] == pytest.approx(100 * -(-d // 1))


def model_at(tmp_path, price: float, name: str):
    data = two_offerings()
    data["offerings"][0]["price_per_hour"] = price
    pr = load_problem(write_problem(tmp_path, data, name))
    return presolve.build(pr, build_candidates(pr))


def anchor_at(tmp_path, price: float, index: int):
    model = model_at(tmp_path, price, f"p{index}.yaml")
    plan = run(model.problem, solver="highs", gap=1e-9)
    assert plan.audit == [], plan.audit
    return parametric.anchor(index, price, plan.result, plan.mip.arrays())


def test_settling_checks_the_point_against_its_neighbours(tmp_path):
    left, right = anchor_at(tmp_path, 1.0, 0), anchor_at(tmp_path, 3.0, 2)
    mid = model_at(tmp_path, 1.5, "mid.yaml").mip.arrays()
    r = parametric.settle(mid, 1.5, left, right, gap=1e-9)
    # a's plan at 1.5: 750; the bound interpolates 500 and 1,000 at λ = 3/4: 625 — not proven, so it is solved
    assert r is None
    assert parametric.predict(1.5, left, right) == pytest.approx((750.0, 625.0))
    left2 = anchor_at(tmp_path, 1.8, 1)
    r = parametric.settle(model_at(tmp_path, 1.4, "m2.yaml").mip.arrays(), 1.4, left, left2, gap=1e-9)
    assert r is not None and r.objective == pytest.approx(700.0) and r.bound == pytest.approx(700.0)
    # the same model told the wrong value: its objective is not the interpolation there
    assert parametric.settle(model_at(tmp_path, 1.4, "m3.yaml").mip.arrays(), 1.6, left, left2, gap=1e-9) is None
    # a point outside the two, and a model with other rows (more demand), are never settled
    assert parametric.settle(mid, 2.5, left, left2, gap=1e-9) is None
    data = two_offerings(demand=6.0)
    data["offerings"][0]["price_per_hour"] = 1.4
    pr = load_problem(write_problem(tmp_path, data, "more.yaml"))
    other = presolve.build(pr, build_candidates(pr)).mip.arrays()
    assert parametric.settle(other, 1.4, left, left2, gap=1e-9) is None


def test_a_point_solved_between_two_solved_ones_starts_from_their_plans(tmp_path, monkeypatch):
    # The sweep of the first test: the first end is solved from nothing, the far end from its plan; every
    # other point it solves (the midpoints of the stretches it cannot settle) is handed every plan solved
    # on the line so far (its neighbours' among them), which the driver uses as a first incumbent where
    # they meet the point's rows. With one worker the n-th solve is handed n - 1 plans. The answers stay
    # 500·min(p, 2).
    import optimizer.pipeline as pipeline

    real, calls = pipeline.run, []

    def spy(problem, *args, known=(), **kw):
        calls.append(len(known))
        plan = real(problem, *args, known=known, **kw)
        assert_audited(plan)
        return plan

    monkeypatch.setattr(pipeline, "run", spy)
    path = write_problem(tmp_path, two_offerings())
    sw = api.sweep(path, vary="offerings[a].price_per_hour=1.0:3.0:21", solver="highs")
    assert [p["objective"] for p in sw.points] == pytest.approx([500 * min(1.0 + 0.1 * i, 2.0) for i in range(21)])
    assert len(calls) > 2 and calls == list(range(len(calls)))


def test_a_sweep_solves_where_the_plans_cross_not_at_midpoints(tmp_path, monkeypatch):
    # a at p $/GPU-h costs 500·p, b costs 1,000: the lines cross at p = 2. Along 1.0:3.05:21 the step is
    # 0.1025, so p = 2 is at index 9.76. After the ends (a at 0, 500; b at 20, 1,000) the point nearest the
    # crossing is 10 (p = 2.025: b, 1,000); between 0 (a) and 10 (b) the lines cross at 9.76 again, so 9
    # (p = 1.9225: a, 961.25). Then each stretch has one plan at both ends and is settled: 4 solves. Halving
    # the stretches solved 0, 20, 10, 5, 7, 8, 9: 7 solves.
    import optimizer.pipeline as pipeline

    real, solved = pipeline.run, []

    def spy(problem, *args, **kw):
        plan = real(problem, *args, **kw)
        assert_audited(plan)
        solved.append(round(float(problem.offerings.at["a", "price_per_hour"]), 4))
        return plan

    monkeypatch.setattr(pipeline, "run", spy)
    path = write_problem(tmp_path, two_offerings())
    sw = api.sweep(path, vary="offerings[a].price_per_hour=1.0:3.05:21", solver="highs")
    assert solved == [1.0, 3.05, 2.025, 1.9225]
    assert [p["objective"] for p in sw.points] == pytest.approx([500 * min(1.0 + 0.1025 * i, 2.0) for i in range(21)])
    assert len(settled(sw)) == 17


class _Clock:
    """A virtual clock and a pool of ``workers`` servers on it: each task takes ``duration(index)`` units."""

    def __init__(self, workers, duration):
        self.now, self.workers, self.duration = 0.0, workers, duration
        self.free_at = [0.0] * workers
        self.started = []  # (start time, index, left neighbour's index, right neighbour's index)
        self.handed = {}   # per index: how many solved plans its task was handed

    def submit(self, fn, task):
        import numpy as np

        server = min(range(self.workers), key=lambda s: self.free_at[s])
        start = max(self.now, self.free_at[server])
        side = {s: None if task.get(s) is None else task[s]["index"] for s in ("left", "right")}
        handed = len(task.get("known", ())) + sum(v is not None for v in side.values())
        end = self.free_at[server] = start + self.duration(task["index"], handed)
        self.started.append((start, task["index"], side["left"], side["right"]))
        self.handed[task["index"]] = handed
        # every solve proves only a bound of 0 below its plan of 1: nothing is ever settled
        anchor = parametric.Anchor(task["index"], task["t"], np.zeros(1), np.zeros(1), 1.0, 1.0, 0.0, "same")
        clock = self

        class Future:
            def done(self):
                return clock.now >= end

            def result(self):
                return {"index": task["index"], "anchor": anchor.as_dict(), "settled": False}

        self.pending = getattr(self, "pending", []) + [end]
        return Future()

    def sleep(self, _seconds):
        self.now = min(e for e in self.pending if e > self.now)


def test_the_far_end_waits_for_the_first_end_and_stretches_are_halved_where_nothing_crosses():
    # A line of 11 points; its far end takes 5 units from nothing and 2 handed a plan, every other solve 1.
    # Every solve proves a bound of 0 below its plan of 1 and every plan costs 1 everywhere, so nothing
    # settles and no crossing is in view: each stretch is cut at its middle (ties: the point on the left).
    # One worker: 0 (0-1), 10 from 0's plan (1-3), then longest stretch first (ties: the left one): 5, 2,
    # 7, 3, 8, then 1, 4, 6, 9; done at 12.
    # Two workers: 0 (0-1), the other worker idle (the far end waits for the first end's plan, and no
    # stretch has two ends); 10 from 0's plan (1-3); the stretch 0-10 waits for 10; at 3, 5 (3-4), alone
    # (no crossing in view, so no second probe); at 4, 2 and 7 (4-5); at 5, 3 and 8, the longest (5-6); at
    # 6, 1 and 4 (6-7); at 7, 6 and 9 (7-8). Every point is solved once either way; done at 8, where
    # starting 10 from nothing beside 0 ended at 10 (5 units for 10 instead of 1 + 2).
    from optimizer.studies.sweep import Progress, _search_lines

    def run(workers):
        pool = _Clock(workers, lambda k, handed: (2.0 if handed else 5.0) if k == 10 else 1.0)
        line = list(range(11))
        results = _search_lines([line], {i: {"index": i} for i in line}, {i: float(i) for i in line}, 1e-6,
                                pool, workers, Progress(11, enabled=False), sleep=pool.sleep)
        assert sorted(results) == line
        return pool

    one = run(1)
    assert [k for _, k, _, _ in one.started] == [0, 10, 5, 2, 7, 3, 8, 1, 4, 6, 9]
    assert max(one.pending) == 12
    two = run(2)
    assert [(t, k) for t, k, _, _ in two.started] == [(0, 0), (1, 10), (3, 5), (4, 2), (4, 7), (5, 3), (5, 8),
                                                    (6, 1), (6, 4), (7, 6), (7, 9)]
    assert max(two.pending) == 8
    sides = {k: (left, right) for _, k, left, right in two.started}
    assert sides[0] == sides[10] == (None, None)  # no neighbours around the ends
    assert two.handed[0] == 0 and two.handed[10] == 1  # the far end handed the first end's plan
    assert sides[5] == (0, 10)
    assert sides[2] == (0, 5) and sides[7] == (5, 10)
    assert two.handed[7] == 3                     # 5 and 10 around it, and 0 also solved on the line


def test_a_crossing_gets_a_solve_on_each_side_when_two_workers_are_free():
    # Two plans along t = 0..10: A costs t, B costs 5.4 (columns: A's and B's share of the work). Solved at
    # 0 (A, 0) and 10 (B, 5.4). Between them U = min(t, 5.4) and L = 0.54·t, so U − L = 0.46·t up to the
    # crossing at 5.4 and 5.4 − 0.54·t after it: 2.3 at 5 (the largest), 2.16 at 6, 1.84 at 4. The first
    # solve is at 5; a second worker solves 6, across the crossing.
    from optimizer.studies.sweep import _next_tasks

    a = parametric.Anchor(0, 0.0, np.array([1.0, 0.0]), np.array([0.0, 5.4]), 0.0, 0.0, 0.0, "same")
    b = parametric.Anchor(10, 10.0, np.array([0.0, 1.0]), np.array([10.0, 5.4]), 0.0, 5.4, 5.4, "same")
    line = list(range(11))
    args = ([line], {i: float(i) for i in line}, {0: {}, 10: {}}, {0: a, 10: b}, {}, 1e-6)
    assert _next_tasks(*args, free=2) == [(5, a, b), (6, a, b)]
    assert _next_tasks(*args, free=1) == [(5, a, b)]
    # predicted by hand: U − L at every open point
    for k, want in {4: 1.84, 5: 2.3, 6: 2.16, 9: 0.54}.items():
        u, lo = parametric.predict(float(k), a, b)
        assert u - lo == pytest.approx(want)
    # The crossing near one end, as in q3's sweep (between 79 and 80 of 0..99): t = 0..20, B costs 15.1, so
    # L = 0.755·t and U − L is 0.245·t up to 15.1, then 15.1 − 0.755·t: 3.675 at 15 (the largest), 3.43 at
    # 14, 3.02 at 16. The second solve is 16, across the crossing, though 14 is left less proven.
    a = parametric.Anchor(0, 0.0, np.array([1.0, 0.0]), np.array([0.0, 15.1]), 0.0, 0.0, 0.0, "same")
    b = parametric.Anchor(20, 20.0, np.array([0.0, 1.0]), np.array([20.0, 15.1]), 0.0, 15.1, 15.1, "same")
    line = list(range(21))
    args = ([line], {i: float(i) for i in line}, {0: {}, 20: {}}, {0: a, 20: b}, {}, 1e-6)
    assert _next_tasks(*args, free=2) == [(15, a, b), (16, a, b)]
    for k, want in {14: 3.43, 15: 3.675, 16: 3.02}.items():
        u, lo = parametric.predict(float(k), a, b)
        assert u - lo == pytest.approx(want)


# --- bounds of the exact split carried along a price ---------------------------------------------------

def reserved_flip_at(price: float) -> dict:
    # tests/test_executable_plans.py's FLIP with a 12-month reservation of the H100 node at `price` $/h. The
    # stable plans: A (L4) in both periods 1,100; B on demand in both 1,200; B on one reserved unit for the
    # plan's 200 h, 200·price. So the optimum is min(1,100, 200·price): the reservation up to 5.5 $/h.
    from test_executable_plans import FLIP
    from test_known_answers import od

    data = copy.deepcopy(FLIP)
    data["offerings"].append({**od(id="h100-1y", price=price), "pricing": "reserved", "term_months": 12})
    return data


def flip_anchor(tmp_path, price: float, index: int):
    pr = load_problem(write_problem(tmp_path, reserved_flip_at(price), f"flip{index}.yaml"))
    plan = run(pr, solver="highs")
    assert_audited(plan)
    assert plan.objective == pytest.approx(min(1_100, 200 * price))
    return parametric.anchor(index, price, plan.result, plan.mip.arrays())


def test_leaf_bounds_interpolate_the_neighbours_and_clip_at_the_budget(tmp_path):
    left, right = flip_anchor(tmp_path, 4.0, 0), flip_anchor(tmp_path, 7.0, 2)
    assert left.leaf_bounds and right.leaf_bounds  # both points were proven by the split
    pr = load_problem(write_problem(tmp_path, reserved_flip_at(5.0), "mid.yaml"))
    mid = presolve.build(pr, build_candidates(pr)).mip.arrays()
    # hand-made bounds, to check the arithmetic: at 5 $/h, λ = (7 − 5) ÷ (7 − 4) = 2/3 of the left anchor's
    a, b, c = (("chat", "A"),), (("chat", "B"),), (("chat", "B"), ("u", "1"))
    left.leaf_bounds = {a: 900.0, b: 1_200.0}
    right.leaf_bounds = {a: 1_500.0, c: 1_800.0}
    got = parametric.leaf_bounds(mid, 5.0, left, right)
    assert got[a] == pytest.approx(2 / 3 * 900 + 1 / 3 * 1_500)      # 1,100
    # c lies in the left anchor's subtree b: 2/3 of 1,200 + 1/3 of 1,800 = 1,400; b itself is known left only
    assert got[c] == pytest.approx(1_400) and b not in got
    # an infinite bound (a leaf without plans) is clipped at the budget, where the anchor had one
    left.leaf_bounds[a], left.budget = np.inf, 1_000.0
    assert parametric.leaf_bounds(mid, 5.0, left, right)[a] == pytest.approx(2 / 3 * 1_000 + 1 / 3 * 1_500)
    # off the line (outside the two, or a different model): nothing is carried
    assert parametric.leaf_bounds(mid, 8.0, left, right) == {}
    other = load_problem(write_problem(tmp_path, {**reserved_flip_at(5.0), "constraints": {"budget": 5_000}},
                                       "budget.yaml"))
    assert parametric.leaf_bounds(presolve.build(other, build_candidates(other)).mip.arrays(), 5.0, left,
                                  right) == {}


def test_a_sweep_prunes_leaves_with_bounds_carried_from_its_solved_neighbours(tmp_path, monkeypatch):
    # The reservation price from 4 to 7 $/h in 13 points: min(1,100, 200·p), the reservation up to 5.5 $/h.
    # Every point a sweep solves between two solved ones gets their split's bounds; where a leaf's carried
    # bound is not below the best plan, it is not searched. The answers are the hand-worked ones.
    from optimizer.solve import split

    leaves, carried = [], []
    real_leaf, real_bounds = split.solve_leaf, parametric.leaf_bounds
    monkeypatch.setattr(split, "solve_leaf", lambda task: leaves.append(task.cutoff) or real_leaf(task))

    def spy(*args, **kw):
        out = real_bounds(*args, **kw)
        carried.append(out)
        return out

    monkeypatch.setattr(parametric, "leaf_bounds", spy)
    import optimizer.pipeline as pipeline

    real_run, audited = pipeline.run, []

    def audited_run(*args, **kw):  # every plan the sweep solves passes the audit
        plan = real_run(*args, **kw)
        assert_audited(plan)
        audited.append(plan.objective)
        return plan

    monkeypatch.setattr(pipeline, "run", audited_run)
    path = write_problem(tmp_path, reserved_flip_at(5.0))
    vary = "offerings[h100-1y].price_per_hour=4:7:13"
    sw = api.sweep(path, vary=vary, solver="highs")
    prices = [4 + 0.25 * i for i in range(13)]
    assert [p["objective"] for p in sw.points] == pytest.approx([min(1_100, 200 * p) for p in prices])
    assert all(p["status"] == "optimal" for p in sw.points)
    assert audited and carried and any(carried)  # some solved point was between two split-proven ones
    assert any("by bounds carried from solved neighbours" in p["message"] for p in sw.points)
    # such a point splits on the class its neighbours split on, without the model without limits
    assert any(p["message"].endswith("split as the solved points of its line were, without the model without limits")
               for p in sw.points)


def test_a_lines_far_end_splits_on_the_class_its_first_end_split_on(tmp_path, monkeypatch):
    # The reservation price at 4, 4.75, 5.5, 6.25 and 7 $/h: min(1,100, 200·p) = 800, 950, 1,100, 1,100, 1,100.
    # The first end (4 $/h) is proven by the exact split; the far end (7 $/h) is handed its plan and the keys of
    # its split, with no bound (they hold at 4 $/h only), and splits on the same class without the model
    # without limits. Its answer is still the hand-worked one.
    keys_handed = []
    real = parametric.split_like
    monkeypatch.setattr(parametric, "split_like", lambda a, keys: keys_handed.append(keys) or real(a, keys))
    path = write_problem(tmp_path, reserved_flip_at(5.0))
    sw = api.sweep(path, vary="offerings[h100-1y].price_per_hour=4:7:5", solver="highs")
    assert [p["objective"] for p in sw.points] == pytest.approx([800, 950, 1_100, 1_100, 1_100])
    assert all(p["status"] == "optimal" and p["audit"] == [] for p in sw.points)  # every plan passed its audit
    assert len(keys_handed) == 1  # the far end only
    assert len({key[0][0] for key in keys_handed[0]}) == 1  # one class
    assert all(bound == -np.inf for bound in real(None, keys_handed[0]).values())
    far = sw.points[-1]
    assert far["message"].endswith("split as the solved points of its line were, without the model without limits")
