"""CPUs lent between the workers of a pool (executors.CpuLoan, executors.Lending): the counts, by hand."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest

from optimizer import executors
from optimizer.executors import CpuLoan, Lending, Processes, cpus


def loan_of(free: int, share: int = 1) -> CpuLoan:
    return CpuLoan(mp.get_context("spawn").Value("i", free), share)


def test_a_loan_lends_only_idle_cpus_and_counts_each_task_on_its_share():
    # Two CPUs, two workers of one CPU each: both busy, nothing to borrow; one ends, its CPU is lent once.
    loan = loan_of(2)
    loan.hold()
    loan.hold()
    assert loan.free == 0 and not loan.borrow()
    loan.release()
    assert loan.borrow() and loan.free == 0
    assert not loan.borrow()
    loan.hold()  # a new task starts at once on its share while the lent CPU is still in use
    assert loan.free == -1
    loan.give_back()
    assert loan.free == 0


def test_a_lending_pool_runs_a_second_task_only_on_a_borrowed_cpu_and_gives_it_back():
    loan = loan_of(1)  # one idle CPU on the machine
    pool = Lending(loan, most=2)
    gate = threading.Event()
    try:
        assert pool.workers == 1  # nothing runs: its own CPU is enough
        first = pool.submit(lambda _: gate.wait(10), None)
        assert pool.workers == 2 and loan.free == 0  # one runs on its own CPU: the idle one is borrowed
        second = pool.submit(lambda _: gate.wait(10), None)
        assert pool.workers == 2  # at most two
        gate.set()
        first.result(10), second.result(10)
        assert loan.free == 1  # both ended: the borrowed CPU is back
        assert pool.workers == 1
    finally:
        gate.set()
        pool.close()
    assert loan.free == 1


def test_a_lending_pool_without_an_idle_cpu_runs_one_task_at_a_time():
    loan = loan_of(0)
    pool = Lending(loan, most=2)
    gate = threading.Event()
    try:
        fut = pool.submit(lambda _: gate.wait(10), None)
        assert pool.workers == 1 and loan.free == 0
        gate.set()
        fut.result(10)
    finally:
        gate.set()
        pool.close()


def what_the_worker_sees(_arg) -> tuple[int, int] | None:
    """In a worker of a lending pool: (CPUs idle while this task runs, this task's share)."""
    loan = executors.loan()
    return None if loan is None else (loan.free, loan.share)


@pytest.mark.parametrize("lend", [True, False])
def test_a_lending_process_pool_holds_each_tasks_share_while_it_runs(lend):
    # One worker on this machine's CPUs: its share is all of them, so while its task runs none is idle.
    pool = Processes(1, lend=lend)
    try:
        seen = pool.submit(what_the_worker_sees, None).result(120)
    finally:
        pool.close()
    assert seen == ((0, cpus()) if lend else None)


def test_pool_workers_come_from_a_fork_server_that_imported_every_module_a_task_runs_from():
    import importlib

    from optimizer.solve.decompose import solve_part
    from optimizer.solve.period_polish import solve_restriction
    from optimizer.solve.split import solve_leaf
    from optimizer.studies.rentbuy import solve_copy
    from optimizer.studies.sweep import solve_task

    if "forkserver" in mp.get_all_start_methods():
        assert executors.process_context().get_start_method() == "forkserver"
    for name in executors.WORKER_MODULES:
        importlib.import_module(name)  # a name the server cannot import would be skipped without a word
    for task in (solve_task, solve_copy, solve_leaf, solve_part, solve_restriction):
        assert task.__module__ in executors.WORKER_MODULES, task


def loaded(names: list[str]) -> dict[str, bool]:
    """Which of the modules ``names`` the process has imported (a worker imports this file to run it, and this
    file imports neither module)."""
    import sys

    return {n: n in sys.modules for n in names}


def test_a_pool_after_the_first_runs_its_tasks_in_workers_with_the_modules_already_imported():
    pools = [Processes(2) for _ in range(2)]
    try:
        for pool in pools:
            assert sorted(f.result(timeout=60) for f in [pool.submit(abs, -3), pool.submit(abs, 4)]) == [3, 4]
        seen = pools[1].submit(loaded, ["optimizer.pipeline", "optimizer.studies.sweep"]).result(60)
        assert seen == {"optimizer.pipeline": True, "optimizer.studies.sweep": True}
    finally:
        for pool in pools:
            pool.close()
