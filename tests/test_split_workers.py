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
from conftest import patch_driver


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
        self.most_at_once = 0

    def submit(self, fn, arg):
        fut = _Polled(self)
        if not isinstance(arg, split.LeafTask):
            fut.set_result(fn(arg))
            return fut
        fut.index = len(self.cutoffs)
        self.cutoffs.append(arg.cutoff)
        self.pending.append((fut, arg))
        self.most_at_once = max(self.most_at_once, len(self.pending))
        self.polls = 0
        return fut

    def poll(self, _fut=None) -> None:
        self.polls += 1
        if self.pending and (len(self.pending) >= self.workers or self.polls >= 2):
            fut, arg = self.pending.pop()
            self.order.append(fut.index)
            fut.set_result(split.solve_leaf(arg))

    def close(self) -> None:
        pass


class _Polled(cf.Future):
    """A future that asks its pool to move on each time the split looks at it (the pool is told which)."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def done(self) -> bool:
        if not super().done():
            self.pool.poll(self)
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


@pytest.mark.parametrize("make, dear, dear_cost, optimum", [
    # the 7 $/h point's plan (A in both periods, no reservation) costs 1,100 here too
    (reserved_flip, "offerings[h100-1y].price_per_hour=7", 1_100, 1_000),
    # at 8 $/h for the H100 node chat2 moves to A as well (2,400 > 2,200): 1,100 + 2,200 = 3,300 here
    (two_classes, "offerings[h100].price_per_hour=8", 3_300, 2_900),
])
def test_leaves_finishing_out_of_order_give_the_same_optimum_and_proof(solve, make, dear, dear_cost, optimum):
    # Handed a dearer stable plan, every leaf goes out at once with it as the cutoff; the one handed out
    # last comes back first. The optimum, its proof and the message are those of one process.
    other = solve(make(), solver="highs", sets=[dear])
    pool = LastFirst()
    plan = solve(make(), solver="highs", executor=pool, known=[other.result.x])
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(optimum)
    assert plan.result.bound == pytest.approx(optimum, rel=1e-6)
    assert plan.result.message.startswith("optimal: one stable solve per configuration of chat")
    assert plan.result.message.endswith("the cheapest kept")
    assert pool.cutoffs[:2] == [pytest.approx(dear_cost)] * 2
    assert pool.most_at_once == 2 and pool.order != sorted(pool.order)


def test_a_leaf_without_a_cutoff_goes_out_alone(solve):
    # With no plan in hand the first leaf has nothing to be cut off at: searched whole beside another leaf
    # it could take many times what that leaf's plan would let it take, so it runs alone and every later
    # leaf goes out with the best plan's cost.
    pool = LastFirst()
    plan = solve(reserved_flip(), solver="highs", executor=pool)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert pool.cutoffs[0] is None and None not in pool.cutoffs[1:]
    assert len(pool.cutoffs) >= 2


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


def test_a_leaf_the_back_end_fails_on_is_counted_at_its_lp_bound_and_named(solve, monkeypatch):
    # The back end fails on the first leaf searched, every time it is searched (a solver failure, not a
    # limit). That leaf proves no more than its LP bound: the result is a plan, not proven, with no time
    # limit to blame ("not proven", never "time limit"), and the message names the failure. reserved_flip's
    # stable plans cost 1,000 (B on the reserved unit), 1,100 and 1,200, so the plan costs at least 1,000
    # and its bound, the least of the leaves' bounds, is at most 1,000.
    from optimizer.solve.result import SolveResult

    real = split.solve_leaf
    first = []

    def failing(task):
        key = (task.arrays.col_lo.tobytes(), task.arrays.col_hi.tobytes())
        if not first:
            first.append(key)
        if key == first[0]:
            return SolveResult(Status.ERROR, "highs", message="HiGHS status Solve error")
        return real(task)

    monkeypatch.setattr(split, "solve_leaf", failing)
    plan = solve(reserved_flip(), solver="highs")
    r = plan.result
    assert plan.status == Status.FEASIBLE and plan.objective >= 1_000 - 1e-6
    assert r.bound is not None and r.relaxation_bound - 1e-6 <= r.bound <= 1_000 + 1e-6
    assert r.message.startswith("not proven: one stable solve per configuration of chat")
    assert "the back end failed on 1 leaf (first: HiGHS status Solve error), counted at their LP bounds" in r.message


def test_a_leaf_searched_again_from_its_own_plan_is_a_proof_without_heuristics(solve, monkeypatch):
    # reserved_flip's leaves (one per configuration of chat and count of reserved units; optimum 1,000: B on
    # one reserved unit) each come back from their first pass, to the guide's gap, as if stopped at that gap
    # with a weaker bound (95 % of the plan: a valid bound, only less sharp), and one leaf as if stopped
    # before its first plan. The leaves that had a plan are searched again from it without the back end's
    # heuristics (a proof); the one without a plan keeps them. The optimum and its proof are unchanged.
    from optimizer.solve.result import SolveResult

    tasks = []
    real = split.solve_leaf
    first_pass = {"n": 0}

    def stand_in(task):
        tasks.append(task)
        r = real(task)
        if task.gap < 0.1 - 1e-12:  # the second pass: as the back end gives it
            return r
        first_pass["n"] += 1
        if first_pass["n"] == 1:  # the first leaf: stopped before its first plan
            return SolveResult(Status.TIME_LIMIT, "highs", message="no plan within the time limit")
        if r.status.has_plan:
            r.status, r.bound = Status.FEASIBLE, 0.95 * r.objective
        return r

    monkeypatch.setattr(split, "solve_leaf", stand_in)
    plan = solve(reserved_flip(), solver="highs", gap=1e-6)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    again = [t for t in tasks if t.gap < 0.1 - 1e-12]
    assert again, "no leaf was searched a second time"
    assert all(t.heuristics is (t.start is None) for t in again)
    assert any(t.start is None for t in again) and any(t.start is not None for t in again)
    assert all(t.heuristics for t in tasks if t.gap >= 0.1 - 1e-12)


@pytest.mark.parametrize("threads", [2, 1])
def test_without_an_executor_the_leaves_run_on_threads_of_this_process(solve, monkeypatch, threads):
    # No executor given: on two threads (--threads 2, or a machine of two CPUs) the leaves are searched in
    # threads of this process, one HiGHS thread each; on one they are searched in the caller's thread. The
    # optimum and its proof are those of test_leaves_on_two_local_processes (worked by hand in reserved_flip).
    import threading

    seen = []
    real = split.solve_leaf
    monkeypatch.setattr(split, "solve_leaf",
                        lambda task: seen.append((threading.current_thread().name, task.threads)) or real(task))
    plan = solve(reserved_flip(), solver="highs", threads=threads)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    assert len(seen) >= 2
    if threads == 2:
        assert all(name.startswith("gpuopt") and n == 1 for name, n in seen), seen
    else:
        assert all(name == threading.main_thread().name and n == 1 for name, n in seen), seen


def test_workers_on_this_machine_divide_its_cpus(monkeypatch):
    # sweeps and what-ifs with --workers N on this machine (processes, or a local Dask cluster): each solve
    # gets the CPUs divided by N (at least one), so the leaves of N solves at once do not ask for N times the
    # machine; a given --threads is kept; one worker, or a Dask scheduler's workers (other machines' CPUs),
    # leave the solver's own default
    from optimizer import executors

    monkeypatch.setattr(executors, "cpus", lambda: 8)
    assert executors.threads_per_worker(None, 2) == 4
    assert executors.threads_per_worker(None, 3) == 2
    assert executors.threads_per_worker(None, 16) == 1
    assert executors.threads_per_worker(3, 2) == 3
    assert executors.threads_per_worker(None, 1) is None
    assert executors.threads_per_worker(None, 2, "dask") == 4
    assert executors.threads_per_worker(None, 2, "dask", "tcp://scheduler:8786") is None
    # a local pool lends a waiting worker's CPU only when the threads were divided, not chosen
    assert executors.share_cpus(None, 2) == (4, True)
    assert executors.share_cpus(3, 2) == (3, False)


def test_in_a_worker_of_a_lending_pool_the_leaves_borrow_idle_cpus(solve, monkeypatch):
    # A solve in a worker of a pool that lends CPUs (a sweep's; stood in for: a loan installed in this process,
    # one CPU of two idle), given one thread (its share): the leaves run on threads of a Lending pool, one
    # HiGHS thread each, and every CPU borrowed is given back. The optimum and its proof are those of
    # test_leaves_on_two_local_processes (worked by hand in reserved_flip).
    import multiprocessing as mp
    import threading

    from optimizer import executors

    lender = executors.CpuLoan(mp.get_context("spawn").Value("i", 1), share=1)
    monkeypatch.setattr(executors, "_loan", lender)
    patch_driver(monkeypatch, "cpus", lambda: 2)
    seen = []
    real = split.solve_leaf
    monkeypatch.setattr(split, "solve_leaf",
                        lambda task: seen.append((threading.current_thread().name, task.threads)) or real(task))
    plan = solve(reserved_flip(), solver="highs", threads=1)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    assert len(seen) >= 2 and all(name.startswith("gpuopt") and n == 1 for name, n in seen), seen
    assert lender.free == 1


class InOrder:
    """An executor of two workers whose leaves finish in the order handed out, and only while the split waits.

    The earliest leaf handed out finishes once it has been polled twice since
    the last hand-out with both workers busy, or three times with one (the
    split reads back what has finished by polling every running leaf once,
    and waits by polling again). It records, for every leaf handed out, its
    search (first pass or proof), its arrays (one object per leaf) and
    whether a first pass was still running then.
    """

    workers = 2

    def __init__(self):
        self.pending: list[list] = []  # [future, task, polls since the last hand-out]
        self.handed: list[tuple[str, int, bool]] = []

    def submit(self, fn, arg):
        fut = _Polled(self)
        if not isinstance(arg, split.LeafTask):
            fut.set_result(fn(arg))
            return fut
        first_running = any(t.gap >= 0.1 - 1e-12 for _, t, _ in self.pending)
        self.handed.append(("first" if arg.gap >= 0.1 - 1e-12 else "proof", id(arg.arrays), first_running))
        for item in self.pending:
            item[2] = 0
        self.pending.append([fut, arg, 0])
        return fut

    def poll(self, fut) -> None:
        item = next(it for it in self.pending if it[0] is fut)
        item[2] += 1
        if item is self.pending[0] and item[2] >= (2 if len(self.pending) >= self.workers else 3):
            self.pending.pop(0)
            fut.set_result(split.solve_leaf(item[1]))

    def close(self) -> None:
        pass


def test_a_proof_starts_on_a_free_worker_lowest_bound_first(solve, monkeypatch):
    # reserved_flip's three leaves (optima 1,200, then 1,000 and 1,100 under the cutoff 1,200; optimum 1,000)
    # come back from their first pass, to the guide's gap, unproven: their bounds at half, 95 % and 80 % of
    # their plans (600, 950, 880; valid, only less sharp). The first goes out alone; the other two together,
    # and the 1,000 leaf comes back first. A worker is then free while the 1,100 leaf's first pass runs:
    # the 1,200 leaf's proof (bound 600, the lowest open) takes it at once rather than waiting for every
    # first pass. When the 1,100 leaf comes back (bound 880), the next free worker proves it before the
    # 1,000 leaf (950): the lowest bound known when a worker frees goes first.
    from optimizer.solve.result import SolveResult

    real = split.solve_leaf
    share = {1_200: 0.5, 1_000: 0.95, 1_100: 0.8}

    def stand_in(task: split.LeafTask) -> SolveResult:
        r = real(task)
        if task.gap >= 0.1 - 1e-12 and r.status.has_plan:
            r.status, r.bound = Status.FEASIBLE, share[round(r.objective)] * r.objective
        return r

    monkeypatch.setattr(split, "solve_leaf", stand_in)
    pool = InOrder()
    plan = solve(reserved_flip(), solver="highs", executor=pool, gap=1e-6)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    firsts = [leaf for kind, leaf, _ in pool.handed if kind == "first"]
    proofs = [(leaf, running) for kind, leaf, running in pool.handed if kind == "proof"]
    assert len(firsts) == 3
    # the first proof went out while the third leaf's first pass ran
    assert proofs[0] == (firsts[0], True)
    # then the 1,100 leaf (880) before the 1,000 leaf (950)
    assert [leaf for leaf, _ in proofs] == [firsts[0], firsts[2], firsts[1]]


@pytest.mark.parametrize("time_limit", [None, 60.0])
def test_the_lp_bounds_below_are_computed_while_the_first_leaf_runs_alone(solve, monkeypatch, time_limit):
    # reserved_flip splits chat's configuration (two options), then the reserved count under each. The first
    # leaf goes out alone; while it runs (the other worker idle) the split computes the LP bounds of the nodes
    # it has not reached (the reserved counts under the second configuration), so that they are at hand when
    # it gets there. Every node's LPs are computed once, and the optimum and its proof are unchanged. Under a
    # time limit the search computes them itself when it gets there (a node's LPs cannot be stopped).
    log = []
    real = split.option_bounds

    def logged(mip, b, choice, lps=None):
        log.append(("lps", choice.name))
        return real(mip, b, choice, lps)

    class Logged(InOrder):
        def poll(self, fut) -> None:
            before = len(self.pending)
            super().poll(fut)
            if len(self.pending) < before:
                log.append(("leaf back", None))

    monkeypatch.setattr(split, "option_bounds", logged)
    plan = solve(reserved_flip(), solver="highs", executor=Logged(), time_limit=time_limit)
    assert plan.status == Status.OPTIMAL and plan.objective == pytest.approx(1_000)
    assert plan.result.bound == pytest.approx(1_000, rel=1e-6)
    assert plan.result.message.startswith("optimal: one stable solve per configuration of chat")
    first_back = log.index(("leaf back", None))
    counts = [name for kind, name in log if kind == "lps" and name.startswith("reserved units")]
    assert len(counts) == 2  # one node per configuration, each computed once
    later = [kind for kind, _ in log[first_back:] if kind == "lps"]
    assert later == ([] if time_limit is None else ["lps"])  # the second node's: before the first leaf came back
