"""Where independent solves run: in this process, in local processes, or on a Dask cluster.

Sweeps, what-ifs and the per-period bound of :mod:`optimizer.solve.decompose`
hand plain-data tasks to one of these and read the results back; every
executor gives the same numbers for the same tasks.

- ``inline``: one after the other, in this process (the default; no start-up).
- threads of this process (:class:`Threads`): for tasks whose work runs
  outside Python's lock, such as HiGHS's search (the exact split's leaves).
- ``local`` with ``workers > 1``: a pool of spawned processes.
- ``dask``: a Dask cluster, the one at ``scheduler`` (``tcp://HOST:8786``) or,
  without one, a local cluster of ``workers`` single-threaded processes.

Every executor offers ``submit(fn, arg) -> future`` (``future.result(timeout)``,
``future.done()``), ``workers`` (solves at once) and ``close()``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import uuid

from .errors import InputError

#: how long to wait for a Dask scheduler to answer before the address is an input error
CONNECT_TIMEOUT = "15s"


class Inline:
    """Runs each task when it is submitted, in this process; its future is already done."""

    workers = 1

    def submit(self, fn, arg) -> cf.Future:
        fut: cf.Future = cf.Future()
        fut.set_result(fn(arg))
        return fut

    def close(self) -> None:
        pass


class Threads:
    """A pool of ``workers`` threads in this process; each new thread first runs ``initializer``.

    For tasks whose work runs outside Python's interpreter lock (a HiGHS
    search): no process start-up and nothing pickled, and the tasks share
    this process's memory. ``close`` drops the tasks not started and waits
    for those running (a HiGHS run torn down mid-search would abort the
    process).
    """

    def __init__(self, workers: int, initializer=None):
        self.workers = workers
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuopt", initializer=initializer)

    def submit(self, fn, arg) -> cf.Future:
        return self._pool.submit(fn, arg)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one, else every CPU)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def threads_per_worker(threads: int | None, workers: int, executor: str = "local",
                       scheduler: str | None = None) -> int | None:
    """Solver threads for each of ``workers`` solves at once: ``threads`` when given; else, when the workers
    are on this machine (local processes, or the local Dask cluster started without a ``scheduler``), its
    CPUs divided among them (at least one); else None (each solve's default: one worker, or a cluster's
    workers on machines of their own)."""
    if threads is not None or workers <= 1 or (executor == "dask" and scheduler):
        return threads
    return max(1, cpus() // workers)


class Processes:
    """A pool of ``workers`` spawned processes on this machine."""

    def __init__(self, workers: int):
        import multiprocessing as mp

        self.workers = workers
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))

    def submit(self, fn, arg) -> cf.Future:
        return self._pool.submit(fn, arg)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def dask_client(scheduler: str | None, workers: int):
    """A Dask client: of the cluster at ``scheduler``, else of a new local cluster (returned second, or None)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - a dependency
        raise InputError("--executor dask needs dask[distributed] installed", field="--executor") from None
    if scheduler:
        try:
            return Client(scheduler, timeout=CONNECT_TIMEOUT), None
        except (OSError, TimeoutError, ValueError) as e:
            raise InputError(f"cannot reach the Dask scheduler ({e})", field="--scheduler", value=scheduler,
                             allowed="an address such as tcp://HOST:8786") from None
    cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    return Client(cluster), cluster


class Dask:
    """A Dask cluster (see :func:`dask_client`); ``workers`` is its number of worker threads.

    A scheduler's address is reached at once (a wrong one is an input error
    before any solve); a local cluster starts at the first task, so its
    start-up (seconds) falls inside the solve's time limit rather than
    before it.
    """

    def __init__(self, scheduler: str | None, workers: int):
        self._scheduler, self._n_workers = scheduler, workers
        self._client, self._cluster = dask_client(scheduler, workers) if scheduler else (None, None)
        self._tag = uuid.uuid4().hex[:8]
        self._n = 0

    @property
    def client(self):
        if self._client is None:
            self._client, self._cluster = dask_client(None, self._n_workers)
        return self._client

    @property
    def workers(self) -> int:
        if self._client is None:
            return max(1, self._n_workers)
        return max(1, sum(self._client.nthreads().values()))

    def submit(self, fn, arg):
        self._n += 1
        return self.client.submit(fn, arg, key=f"gpuopt-{self._tag}-{self._n}", pure=False)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_executor(executor: str = "local", workers: int = 1, scheduler: str | None = None):
    """The executor named on the command line (``--executor``, ``--workers``, ``--scheduler``)."""
    if executor == "dask":
        return Dask(scheduler, workers)
    if executor != "local":
        raise InputError(f"unknown executor {executor!r}", field="--executor", value=executor,
                         allowed="local, dask")
    if scheduler:
        raise InputError("--scheduler needs --executor dask", field="--scheduler", value=scheduler)
    return Processes(workers) if workers > 1 else Inline()


@contextlib.contextmanager
def solve_executor(executor: str = "local", workers: int = 1, scheduler: str | None = None):
    """The executor a solve asks for (``--workers`` > 1 or ``--executor dask``), or None; closed on exit."""
    pool = make_executor(executor, workers, scheduler) if executor == "dask" or workers > 1 else None
    try:
        yield pool
    finally:
        if pool is not None:
            pool.close()
