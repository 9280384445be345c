"""Where independent solves run: in this process, in local processes, or on a Dask cluster.

Sweeps, what-ifs and the per-period bound of :mod:`optimizer.solve.decompose`
hand plain-data tasks to one of these and read the results back; every
executor gives the same numbers for the same tasks.

- ``inline``: one after the other, in this process (the default; no start-up).
- threads of this process (:class:`Threads`): for tasks whose work runs
  outside Python's lock, such as HiGHS's search (the exact split's leaves).
- ``local`` with ``workers > 1``: a pool of local processes, each a fresh
  interpreter (see :func:`process_context`). With
  ``lend``, its tasks share the machine's CPUs through a :class:`CpuLoan`:
  each task holds its share, and a task whose split has a leaf to spare
  borrows the CPU of a worker that waits for work (:class:`Lending`).
- ``dask``: a Dask cluster, the one at ``scheduler`` (``tcp://HOST:8786``) or,
  without one, a local cluster of ``workers`` single-threaded processes.

Every executor offers ``submit(fn, arg) -> future`` (``future.result(timeout)``,
``future.done()``), ``workers`` (solves at once) and ``close()``. One whose
``workers`` changes while it runs (:class:`Lending`) also offers ``most``,
the most it may have.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import threading
import uuid

from .errors import InputError

#: how long to wait for a Dask scheduler to answer before the address is an input error
CONNECT_TIMEOUT = "15s"


class Inline:
    """Runs each task when it is submitted, in this process; its future is already done.

    ``stop`` (an event another thread sets when it needs the results no
    longer): once set, a task submitted is not run, and its future raises
    ``TimeoutError``, as a task not finished in time does elsewhere.
    """

    workers = 1

    def __init__(self, stop: threading.Event | None = None):
        self.stop = stop

    def submit(self, fn, arg) -> cf.Future:
        fut: cf.Future = cf.Future()
        if self.stop is not None and self.stop.is_set():
            fut.set_exception(TimeoutError("not started: stopped by the caller"))
        else:
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


def share_cpus(threads: int | None, workers: int, executor: str = "local",
               scheduler: str | None = None) -> tuple[int | None, bool]:
    """How solves side by side on ``workers`` share this machine's CPUs: (threads of each, lend).

    ``threads`` per solve as :func:`threads_per_worker` divides them, and
    whether a pool of local processes lends the CPU of a worker waiting for
    work to the solves still running (:class:`CpuLoan`, ``make_executor``'s
    ``lend``): only when the user chose no threads.
    """
    return threads_per_worker(threads, workers, executor, scheduler), threads is None


def threads_per_worker(threads: int | None, workers: int, executor: str = "local",
                       scheduler: str | None = None) -> int | None:
    """Solver threads for each of ``workers`` solves at once: ``threads`` when given; else, when the workers
    are on this machine (local processes, or the local Dask cluster started without a ``scheduler``), its
    CPUs divided among them (at least one); else None (each solve's default: one worker, or a cluster's
    workers on machines of their own)."""
    if threads is not None or workers <= 1 or (executor == "dask" and scheduler):
        return threads
    return max(1, cpus() // workers)


class CpuLoan:
    """The CPUs of this machine that no task of one pool is using, counted in memory its processes share.

    In the manner of ``make``'s jobserver. Each task holds ``share`` CPUs
    while it runs (:meth:`hold`, :meth:`release`); a task may borrow an
    idle one for a while (:meth:`borrow`, :meth:`give_back`). The count
    may go below zero for a moment: a task starts on its share at once,
    even while a CPU lent before is still in use (one leaf's search).
    """

    def __init__(self, free, share: int):
        self._free = free  # a multiprocessing Value("i"), with its lock
        self.share = share

    @property
    def free(self) -> int:
        """CPUs idle now (below zero while more run than the machine has)."""
        return self._free.value

    def _add(self, n: int) -> None:
        with self._free.get_lock():
            self._free.value += n

    def hold(self) -> None:
        self._add(-self.share)

    def release(self) -> None:
        self._add(self.share)

    def borrow(self) -> bool:
        """Take one idle CPU, if there is one."""
        with self._free.get_lock():
            if self._free.value > 0:
                self._free.value -= 1
                return True
            return False

    def give_back(self) -> None:
        self._add(1)


#: the loan of the pool this process works for (set in each worker of a lending :class:`Processes`), or None
_loan: CpuLoan | None = None


def _install_loan(free, share: int) -> None:
    global _loan
    _loan = CpuLoan(free, share)


def loan() -> CpuLoan | None:
    """The CPU loan of the pool this process is a worker of, or None (not a worker of a lending pool)."""
    return _loan


def _on_its_share(fn, arg):
    """Run one task of a lending pool on its share of the CPUs (a worker process's side of :class:`CpuLoan`)."""
    _loan.hold()
    try:
        return fn(arg)
    finally:
        _loan.release()


class Lending:
    """Threads of this process that run on the share of CPUs a :class:`CpuLoan` gives it, and on CPUs it lends.

    ``workers`` is how many tasks may run now: the share, and one more
    each time it is asked while that many run and the loan has an idle CPU,
    up to ``most``. A CPU borrowed is given back as soon as fewer tasks run
    than the pool then has CPUs. For the exact split's leaves in a worker of
    a sweep (:func:`optimizer.solve.driver._leaf_threads`): the worker
    whose solve ended waits for work, and its CPU searches a leaf of the
    solve still running.
    """

    def __init__(self, lender: CpuLoan, most: int, initializer=None):
        self.most = most
        self._threads = Threads(most, initializer)
        self._lender = lender
        self._own = max(1, lender.share)
        self._lock = threading.Lock()
        self._running = 0
        self._borrowed = 0

    @property
    def workers(self) -> int:
        with self._lock:
            room = self._own + self._borrowed
            if self._running >= room and room < self.most and self._lender.borrow():
                self._borrowed += 1
            return self._own + self._borrowed

    def submit(self, fn, arg) -> cf.Future:
        with self._lock:
            self._running += 1
        fut = self._threads.submit(fn, arg)
        fut.add_done_callback(self._ended)
        return fut

    def _ended(self, _fut) -> None:
        with self._lock:
            self._running -= 1
            self._give_back(keep=self._running)

    def _give_back(self, keep: int) -> None:
        """Give back the borrowed CPUs beyond what ``keep`` tasks need (the lock held)."""
        while self._borrowed and keep < self._own + self._borrowed:
            self._borrowed -= 1
            self._lender.give_back()

    def close(self) -> None:
        self._threads.close()
        with self._lock:
            self._give_back(keep=0)


#: the modules whose functions a pool of local processes runs (and what they import), loaded once by the fork
#: server before it forks a worker (:func:`process_context`)
WORKER_MODULES = ["optimizer.pipeline", "optimizer.studies.sweep", "optimizer.studies.rentbuy",
                  "optimizer.solve.split", "optimizer.solve.decompose", "optimizer.solve.period_polish"]


def process_context():
    """How a pool of local processes starts them: forked by a fork server that imported :data:`WORKER_MODULES`.

    Never a fork of this process: its HiGHS threads may hold locks a forked
    copy would wait on for ever. The fork server is a fresh interpreter,
    started once per gpuopt process at its first pool, that imports the
    workers' modules and then only forks: each worker starts with them
    imported, in milliseconds, where a spawned one spends a second of CPU
    importing pandas, SciPy and HiGHS again, and every pool after the first
    costs no imports at all (docs/performance.md, "Workers forked by a fork
    server"). A worker sees the environment the fork server started with.
    Where the system has no fork server (Windows), workers are spawned.
    """
    import multiprocessing as mp

    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(WORKER_MODULES)  # read when the server starts, at the first pool
    return ctx


class Processes:
    """A pool of ``workers`` local processes (:func:`process_context`); with ``lend``, sharing the machine's CPUs
    (:class:`CpuLoan`)."""

    def __init__(self, workers: int, lend: bool = False):
        self.workers = workers
        self._lend = lend
        ctx = process_context()
        extra = {}
        if lend:
            share = max(1, cpus() // workers)
            extra = {"initializer": _install_loan, "initargs": (ctx.Value("i", cpus()), share)}
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, **extra)
        self._futures: list[cf.Future] = []

    def submit(self, fn, arg) -> cf.Future:
        fut = self._pool.submit(_on_its_share, fn, arg) if self._lend else self._pool.submit(fn, arg)
        self._futures = [f for f in self._futures if not f.done()] + [fut]
        return fut

    def close(self) -> None:
        """Cancel what has not started; wait for the pool to shut down when no task runs.

        A task still running (a period model on its own deadline) is not
        waited for. But a pool left to shut down in the background while
        nothing runs races Python 3.11's exit handler, which wakes the
        pool's manager thread through a pipe that thread may be closing at
        that moment ("OSError: [Errno 9] Bad file descriptor" printed at
        the end of a sweep with two workers), so then the shutdown is
        waited for: it only joins idle processes.
        """
        for f in self._futures:
            f.cancel()  # only a task not yet started is cancelled
        running = any(not f.done() for f in self._futures)
        self._pool.shutdown(wait=not running, cancel_futures=True)


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


def make_executor(executor: str = "local", workers: int = 1, scheduler: str | None = None, lend: bool = False):
    """The executor named on the command line (``--executor``, ``--workers``, ``--scheduler``).

    ``lend``: local processes share this machine's CPUs (:class:`CpuLoan`); for solves whose threads the
    CPUs divided (:func:`threads_per_worker`), not for a ``--threads`` the user chose."""
    if executor == "dask":
        return Dask(scheduler, workers)
    if executor != "local":
        raise InputError(f"unknown executor {executor!r}", field="--executor", value=executor,
                         allowed="local, dask")
    if scheduler:
        raise InputError("--scheduler needs --executor dask", field="--scheduler", value=scheduler)
    return Processes(workers, lend=lend) if workers > 1 else Inline()


@contextlib.contextmanager
def solve_executor(executor: str = "local", workers: int = 1, scheduler: str | None = None, lend: bool = False):
    """The executor a solve asks for (``--workers`` > 1 or ``--executor dask``), or None; closed on exit."""
    pool = make_executor(executor, workers, scheduler, lend) if executor == "dask" or workers > 1 else None
    try:
        yield pool
    finally:
        if pool is not None:
            pool.close()
