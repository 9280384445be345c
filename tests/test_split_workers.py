"""The split's leaves side by side on an executor: the same optimum and proof as one after the other.

The problems and their optima are those of tests/test_executable_plans.py,
worked by hand there; every plan goes through the audit (conftest.solve_data).
"""

from __future__ import annotations

import concurrent.futures as cf
import copy

import pytest

from optimizer.executors import make_executor
from optimizer.solve import split
from optimizer.solve.backends import Status

from test_executable_plans import FLIP
from test_known_answers import od


class LastFirst:
    """An executor of two workers whose leaves finish last handed out first.

    A leaf finishes when both workers are busy, or when the split waits (its
    future polled twice with nothing handed out in between); the one handed
    out last finishes first, as on a real pool when the later leaf is the
    quicker. Other tasks (the periods solved apart) run when submitted.
    """

    workers = 2

    def __init__(self):
        self.pending: list[tuple[cf.Future, split.LeafTask]] = []
        self.cutoffs: list[float | None] = []  # per leaf, in the order handed out
        self.order: list[int] = []             # the leaves' indices in the order they finished
        self.polls = 0

    def submit(self, fn, arg):
        fut = _Polled(self)
        if not isinstance(arg, split.LeafTask):
            fut.set_result(fn(arg))
            return fut
        fut.index = len(self.cutoffs)
        self.cutoffs.append(arg.cutoff)
        self.pending.append((fut, arg))
        self.polls = 0
        return fut

    def poll(self) -> None:
        self.polls += 1
        if self.pending and (len(self.pending) >= self.workers or self.polls >= 2):
            fut, arg = self.pending.pop()
            self.order.append(fut.index)
            fut.set_result(split.solve_leaf(arg))

    def close(self) -> None:
        pass


class _Polled(cf.Future):
    def __init__(self, pool: LastFirst):
        super().__init__()
        self.pool = pool

    def done(self) -> bool:
        if not super().done():
            self.pool.poll()
        return super().done()


def reserved_flip() -> dict:
    # FLIP plus a 12-month reservation of the H100 node at 5 $/h: 1,000 a unit over the plan's 200 h.
    # Stable plans: A (L4) in both periods 1,100; B on demand in both 1,200; B on one reserved unit 1,000,
    # the optimum (test_the_split_also_fixes_a_commitment_count).
    data = copy.deepcopy(FLIP)
    data["offerings"].append({**od(id="h100-1y", price=5.0), "pricing": "reserved", "term_months": 12})
    return data


def two_classes() -> dict:
    # chat (A in both: 1,100) and chat2 at twice the demand (B: 600 + 1,200 = 1,800): 2,900
    # (test_two_classes_over_their_limit_split_on_one_chosen_by_its_lp_bounds).
    data = copy.deepcopy(FLIP)
    twin = copy.deepcopy(data["inference"][0])
    twin["name"], twin["demand_rps"] = "chat2", {"p1": 2, "p2": 20}
    data["inference"].append(twin)
    return data


@pytest.mark.parametrize("make, optimum", [(reserved_flip, 1_000), (two_classes, 2_900)])
def test_leaves_finishing_out_of_order_give_the_same_optimum_and_proof(solve, make, optimum):
    pool = LastFirst()
    plan = solve(make(), solver="highs", executor=pool)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(optimum)
    assert plan.result.bound == pytest.approx(optimum, rel=1e-6)
    assert plan.result.message.startswith("optimal: one stable solve per configuration of chat")
    # the leaves went to the executor, two at once, and one came back before a leaf handed out earlier
    assert len(pool.cutoffs) >= 2 and pool.order != sorted(pool.order)
    # a leaf handed out once a plan existed searched only below it
    assert all(c is None or c >= optimum - 1e-6 for c in pool.cutoffs)


def test_each_leaf_handed_out_searches_below_the_best_plan_so_far(solve):
    # Without a plan in hand the first two leaves go out at once, with nothing to cut off at. Handed the
    # 7 $/h point's plan (A in both periods, 1,100 here too; test_a_known_plan_starts_the_split_and_a_
    # cheaper_leaf_replaces_it), every leaf goes out cut off at 1,100, and the reserved leaf finds 1,000.
    pool = LastFirst()
    plan = solve(reserved_flip(), solver="highs", executor=pool)
    assert plan.objective == pytest.approx(1_000) and pool.cutoffs[:2] == [None, None]
    dear = solve(reserved_flip(), solver="highs", sets=["offerings[h100-1y].price_per_hour=7"])
    assert dear.objective == pytest.approx(1_100)
    pool = LastFirst()
    plan = solve(reserved_flip(), solver="highs", executor=pool, known=[dear.result.x])
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert pool.cutoffs and all(c == pytest.approx(1_100) for c in pool.cutoffs[:2])
    assert plan.result.message.endswith("the cheapest kept")


def test_leaves_on_two_local_processes(solve):
    # the leaves and their results cross process boundaries (pickled arrays and results)
    pool = make_executor("local", 2)
    try:
        plan = solve(reserved_flip(), solver="highs", executor=pool)
    finally:
        pool.close()
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    assert set(plan.inference["offering"]) == {"h100-1y"}


def test_without_workers_the_leaves_run_here(solve, monkeypatch):
    # an executor of one worker gains nothing from handing leaves out: they are solved in this process
    calls = []
    real = split.solve_leaf
    monkeypatch.setattr(split, "solve_leaf", lambda task: calls.append(task.cutoff) or real(task))

    class One:
        workers = 1

        def submit(self, fn, arg):  # the periods solved apart still run on it
            assert not isinstance(arg, split.LeafTask), "a leaf was handed to a one-worker executor"
            fut = cf.Future()
            fut.set_result(fn(arg))
            return fut

        def close(self):
            pass

    plan = solve(reserved_flip(), solver="highs", executor=One())
    assert plan.objective == pytest.approx(1_000) and calls
