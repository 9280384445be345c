"""Rent versus buy with its solves side by side: the same tables as one process, the break-even chain first.

The tables of ``analyse`` on two worker processes are compared, cell by
cell, with those of the same analysis in this process (the wall seconds
aside). The gate of :class:`optimizer.studies.rentbuy.Solves` is checked on
an executor whose tasks end only when the test says so.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import pandas as pd
import pytest

from optimizer.executors import make_executor
from optimizer.studies import rentbuy as rb

from conftest import assert_audited
from test_rentbuy import SOLVER, tiny


def _without_seconds(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if "seconds" in c]).reset_index(drop=True)


def test_two_workers_give_the_tables_of_one_process(tmp_path, monkeypatch):
    # two of the tornado's parameters (a price and the demand) keep the test short: the sensitivity's problems
    # are made here and only solved on the workers, so the list reaches them
    monkeypatch.setattr(rb, "PARAMETERS", [p for p in rb.PARAMETERS if p.name in ("capex", "demand")])
    pr = tiny(tmp_path)
    here = rb.analyse(pr, solver=SOLVER)
    pool = make_executor("local", 2)
    try:
        apart = rb.analyse(pr, solver=SOLVER, executor=pool)
    finally:
        pool.close()
    for name, plan in apart.plans.items():
        assert_audited(plan)
        assert plan.status == here.plans[name].status  # buy has no plan on the tiny problem
        if plan.status.has_plan:
            assert plan.objective == pytest.approx(here.plans[name].objective, rel=1e-12)
    mine, theirs = here.tables(), apart.tables()
    assert mine.keys() == theirs.keys()
    for name in mine:
        pd.testing.assert_frame_equal(_without_seconds(theirs[name]), _without_seconds(mine[name]), obj=name)
    # all three kinds of solve ran apart: strategies, the break-even search, the two parameters' four solves
    assert set(apart.sensitivity["parameter"]) == {"capex", "demand"}
    assert set(apart.sensitivity["status_low"]) | set(apart.sensitivity["status_high"]) == {"optimal"}
    assert apart.break_even["solves"].iloc[0] >= 2


class HeldExecutor:
    """Two workers whose tasks end only when :meth:`finish` is called; records what was handed out, in order."""

    workers = 2

    def __init__(self):
        self.handed: list[str] = []
        self.futures: list[cf.Future] = []

    def submit(self, fn, task):
        self.handed.append(task[0])
        fut: cf.Future = cf.Future()
        self.futures.append(fut)
        return fut

    def finish(self, i: int) -> None:
        self.futures[i].set_result((self.handed[i], 0.0))


def _until(condition, what: str) -> None:
    """Wait for a thread of this test to reach a state (a deadlock would otherwise hang the suite)."""
    end = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.001)


def test_a_solve_called_alone_goes_before_the_queued_ones():
    ex = HeldExecutor()
    s = rb.Solves(cands=None, options={}, executor=ex)
    s._submit("sens-1", first=False)
    s._submit("sens-2", first=False)  # both workers busy
    queued = threading.Thread(target=s._submit, args=("sens-3", False))
    queued.start()
    _until(lambda: len(s._gate._waiters) == 1, "the third sensitivity solve waits")
    chain = threading.Thread(target=s._submit, args=("break-even", True))
    chain.start()
    _until(lambda: len(s._gate._waiters) == 2 and s._first_in_line == 1, "the chain's solve waits too")
    ex.finish(0)  # one worker frees: the chain's solve takes it, though the other waited longer
    _until(lambda: len(ex.handed) == 3, "a waiting solve is handed out")
    assert ex.handed[2] == "break-even"
    ex.finish(1)
    _until(lambda: len(ex.handed) == 4, "the queued solve is handed out")
    assert ex.handed[3] == "sens-3"
    queued.join(5)
    chain.join(5)
    assert not queued.is_alive() and not chain.is_alive()


def test_without_workers_the_solves_run_here_in_order(tmp_path):
    pr = tiny(tmp_path)
    s, _ = rb.make_solver(pr, solver=SOLVER, executor=make_executor("local", 1))
    assert not s.side_by_side
    solved = s.timed([rb.rent_strategy(pr), pr])
    plans = [plan for plan, _ in solved]
    assert [p.status.value for p in plans] == ["optimal", "optimal"]
    assert all(seconds > 0 for _, seconds in solved)
    assert plans[0].objective > plans[1].objective  # renting only costs more than the mix (test_rentbuy)
