"""HiGHS through its official Python API (``highspy``), in process.

The model goes in whole as a column-wise sparse matrix (``passModel``), the
objective constant as the model's offset, so every objective and bound HiGHS
reports includes it. What HiGHS reports is read from its own result objects,
not from its log:

- status from ``getModelStatus``; a plan exists when the primal solution
  status is feasible (also after a time limit);
- the objective and the proven dual bound from ``getInfo``
  (``objective_function_value``, ``mip_dual_bound``);
- the **root bound**: the dual bound HiGHS reports through its MIP
  interrupt callback while the node count is still 0, the last such value
  (the bound after the root node's cuts), once the search has gone past
  the root; a search that ends at the root (solved there, or by its
  presolve) has its final bound as its root bound, and one stopped inside
  the root (a time limit, a target) has none: its last value there could be
  any early bound, below the LP's;
- a start goes in with ``setSolution`` (HiGHS checks it and uses it as its
  first incumbent);
- with a ``target``, each improving plan is read from HiGHS's
  improving-solution callback, and the first that meets it is returned at
  once, the run ending in the background (:class:`_Run`); several such
  runs can go side by side (:func:`first_plan`).

HiGHS prints nothing (``output_flag`` off); its log lines arrive through
the logging callback and are kept in the result. ``threads`` sets HiGHS's
thread count (its scheduler is reset when the calling thread asks for another
count than last time, never while a run is still going in the background).

highspy and OR-Tools each carry a HiGHS library; loaded into one process
they clash, so the OR-Tools back ends (SCIP, CP-SAT) run in a child process
(:mod:`optimizer.solve.backends.isolated`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from ...model.mip import MIP, Arrays
from ..result import SolveResult, Status, assess, clip_to_cutoff, cut_off, cut_off_message


_quiet_lock = threading.Lock()

#: HiGHS's primal heuristics that run by default (1.16): switched off, with its in-tree heuristic effort, for a
#: search that only proves a bound (``heuristics=False``; the exact split's second pass, docs/performance.md)
HEURISTICS = ("mip_heuristic_run_feasibility_jump", "mip_heuristic_run_rins", "mip_heuristic_run_rens",
              "mip_heuristic_run_root_reduced_cost")

#: a search asked for a relative gap of at least this skips HiGHS's probing (its presolve rule 15,
#: ``presolve_rule_off`` bit :data:`PROBING_RULE`). Probing fixes binaries one at a time and propagates, to learn
#: implications and cliques for the bound of a long tree search; a search that may stop 10 % above its bound
#: ends at or near its root, where that work can cost more than the whole search (a small bench model: 3 s of
#: probing in each search, 0.3 s for the rest), while a proof needs it (q3's, 2-4 times slower without).
#: Measured in docs/performance.md, "Probing only where a proof is asked for".
PROBING_GAP = 0.1
PROBING_RULE = 15
#: HiGHS's presolve rule that aggregates columns (``presolve_rule_off`` bit 12), off in every MIP search (an LP
#: keeps it). HiGHS does not look at its time limit inside it, and on our small models it costs more than it
#: saves: a 2,000-column part model of bench training-heavy x0.25 spent 10 s of a 3 s limit in it and is proven
#: in 0.26 s without it; a 1,277-column bench x0.05 model's presolve (probing off) takes 0.77 s with it and
#: 0.013 s without, and small bench models are proven up to 40 % sooner without it, with no change on q3 or the
#: x0.25 models at 60 s
#: (docs/performance.md, "A time limit kept beside the search" and "HiGHS's aggregator off in every search")
AGGREGATOR_RULE = 12


@contextlib.contextmanager
def _quiet_stdout():
    """fd 1 to /dev/null: HiGHS prints its banner when a solver object is made (it would corrupt JSON)."""
    with _quiet_lock:
        sys.stdout.flush()
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)


def _lp(highspy, a: Arrays):
    """The HighsLp of ``a``: bounds, costs and offset, the matrix column-wise, integrality."""
    lp = highspy.HighsLp()
    lp.num_col_ = int(a.n_vars)
    lp.num_row_ = int(a.n_rows)
    lp.col_cost_ = np.asarray(a.c, dtype=np.float64)
    lp.col_lower_ = np.asarray(a.col_lo, dtype=np.float64)
    lp.col_upper_ = np.asarray(a.col_hi, dtype=np.float64)
    lp.row_lower_ = np.asarray(a.row_lo, dtype=np.float64)
    lp.row_upper_ = np.asarray(a.row_hi, dtype=np.float64)
    lp.offset_ = float(a.c0)
    m = sp.csc_matrix((a.vals, (a.rows, a.cols)), shape=(a.n_rows, a.n_vars))
    m.sum_duplicates()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = m.indptr.astype(np.int32)
    lp.a_matrix_.index_ = m.indices.astype(np.int32)
    lp.a_matrix_.value_ = m.data.astype(np.float64)
    if a.integer.any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in a.integer.tolist()]
    return lp


def solve_highspy(mip: MIP, time_limit: float | None = None, gap: float = 1e-6, threads: int | None = None,
                  start: np.ndarray | None = None, arrays: Arrays | None = None,
                  target: float | None = None, cutoff: float | None = None, restart: bool = True,
                  heuristics: bool = True, lp_threads: int | None = None,
                  stop: threading.Event | None = None,
                  enough: Callable[[float, float], bool] | None = None, seed: int = 0) -> SolveResult:
    """Solve with HiGHS (highspy); never raises on a solver outcome.

    ``target``: stop as soon as a plan costs at most this much (the caller
    holds a proof that nothing is cheaper, e.g. a relaxation's bound); the
    result is then ``feasible`` with HiGHS's own bound, and the caller
    applies its proof. The plan comes back as soon as HiGHS finds it, not
    when HiGHS next looks at its interrupt (:class:`_Run`). ``cutoff``: the
    caller has a plan of this cost elsewhere, so only cheaper plans matter:
    HiGHS prunes every node whose bound reaches it from the start (its
    ``objective_bound``), and stops as soon as its global bound does. A
    plan found at or above the cutoff only shows that nothing cheaper than
    the cutoff exists here; the result then carries the cutoff as its bound.
    A search that proves nothing is below the cutoff ends "cut off", with
    the cutoff as its bound. ``restart``: HiGHS's ``mip_allow_restart`` (a
    restart presolves again and repeats the root's cuts once the root has
    fixed a fifth of the integers). ``heuristics`` False: none of HiGHS's
    primal heuristics (:data:`HEURISTICS`, and no effort in the tree), for
    a search that is there to prove a bound. ``lp_threads`` (an LP only, at
    least 2): HiGHS's parallel dual simplex on that many threads
    (``simplex_strategy`` 2), run in a thread of its own so that its
    scheduler is not the caller's (HiGHS keeps one per calling thread; the
    caller's is neither reset nor resized). ``stop`` (a MIP): an event the
    caller sets when it no longer needs the run (a search beside its own that
    has its answer); HiGHS stops at its next interrupt point, and the run
    ends as on its time limit: ``time-limit`` with its bound, or ``feasible``
    with its plan and bound. ``enough`` (a MIP): called at each interrupt
    point with the best plan's cost (+inf before one) and the global bound;
    True stops the run as ``stop`` does (a search run for its bound, whose
    caller knows what bound it needs). ``seed``: HiGHS's ``random_seed`` (0,
    its default): another seed searches the same model along another path,
    to the same optimum in another time. A MIP search runs without HiGHS's
    aggregator (:data:`AGGREGATOR_RULE`), and without its probing where
    the gap asked for is loose (:data:`PROBING_GAP`).
    """
    a = arrays if arrays is not None else mip.arrays()
    if lp_threads is not None and (lp_threads < 2 or a.integer.any()):
        lp_threads = None
    run = _Run(a, time_limit, gap, threads, start, target, cutoff, restart, heuristics, lp_threads, stop, enough,
               seed)
    result = run.result() if run.run_to_target([run]) else run.early_result()
    if start is not None and run.mip_model and run.reported is not None \
            and abs(run.returned - run.reported) > 1e-6 * max(1.0, abs(run.reported)):
        # HiGHS 1.16.0 (highspy) hands back the start it was given, not its own optimum, when MIP presolve
        # solves the whole model (its reported objective is the optimum's): solve again without the start
        left = None if time_limit is None else max(1.0, time_limit - result.solve_seconds)
        again = solve_highspy(mip, time_limit=left, gap=gap, threads=threads, start=None, arrays=a, target=target,
                              cutoff=cutoff, restart=restart, heuristics=heuristics)
        again.solve_seconds += result.solve_seconds
        again.build_seconds += result.build_seconds
        return again
    return result


def first_plan(arrays: list[Arrays], time_limit: float | None, gap: float,
               threads: int | None = None) -> tuple[int | None, SolveResult]:
    """The first plan any of several restrictions gives, searched side by side, one HiGHS run each.

    Each run has the whole ``time_limit`` and stops at its first plan (a
    target of +inf); as soon as one has a plan, the others are told to stop
    at their next interrupt point and end in the background
    (:func:`settle_background`). Returns the index of the restriction that
    gave the plan and its result; (None, the last run's result) when none
    had a plan (every run ended).
    """
    runs = [_Run(a, time_limit, gap, threads, None, np.inf, None, True) for a in arrays]
    for r in runs:  # one signal for the group: the first plan stops every run
        r.early["stop"] = runs[0].early["stop"]
    if runs[0].run_to_target(runs):  # every run ended: read as usual
        results = [r.result() for r in runs]
        found = [i for i, r in enumerate(results) if r.status.has_plan]
        if not found:
            return None, results[-1]
        i = min(found, key=lambda k: results[k].objective)
        return i, results[i]
    found = [i for i, r in enumerate(runs) if r.early["x"] is not None]
    i = min(found, key=lambda k: runs[k].early["objective"])
    return i, runs[i].early_result()


class _Run:
    """One HiGHS run of the arrays ``a``, prepared (options, model, callbacks), then run and read.

    With a ``target``, the first plan that meets it is read from HiGHS's
    improving-solution callback (``early``). HiGHS looks at its interrupt
    only between the stages of its search, the first after the root LP,
    while its heuristics may find that plan right after presolve (bench ×1
    training-heavy with the configurations fixed: a plan at 3.6 s, the root
    LP until 17.8 s). So a run with a target goes on in a thread of its own,
    and its plan comes back as soon as it is found (:meth:`run_to_target`).
    """

    def __init__(self, a: Arrays, time_limit: float | None, gap: float, threads: int | None,
                 start: np.ndarray | None, target: float | None, cutoff: float | None, restart: bool,
                 heuristics: bool = True, lp_threads: int | None = None, stop: threading.Event | None = None,
                 enough: Callable[[float, float], bool] | None = None, seed: int = 0):
        import highspy

        t0 = time.perf_counter()
        self.a, self.gap, self.target, self.cutoff = a, gap, target, cutoff
        #: the caller's event to stop the run and its test of the bound (:func:`solve_highspy`), and whether
        #: either stopped it
        self.stop, self.enough, self.stopped = stop, enough, False
        self.hs = highspy
        with _quiet_stdout():
            h = self.h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        self.lp_threads = lp_threads
        self.mip_model = bool(a.integer.any())
        if lp_threads:  # run in a new thread, whose scheduler starts at this count: no reset
            h.setOptionValue("threads", int(lp_threads))
            h.setOptionValue("simplex_strategy", 2)  # the dual simplex, parallel (HiGHS's SIP)
        else:
            _thread_count(h, threads, here=not self.in_threads_of_its_own)
        h.setOptionValue("mip_rel_gap", float(gap))
        if self.mip_model:  # no aggregator in a MIP's presolve (:data:`AGGREGATOR_RULE`), an LP keeps every rule
            rules_off = 1 << AGGREGATOR_RULE
            if gap >= PROBING_GAP - 1e-12:  # nor probing in a loose search (:data:`PROBING_GAP`)
                rules_off |= 1 << PROBING_RULE
            h.setOptionValue("presolve_rule_off", rules_off)
        if not restart:
            h.setOptionValue("mip_allow_restart", False)
        if seed:
            h.setOptionValue("random_seed", int(seed))
        if not heuristics:
            for option in HEURISTICS:
                h.setOptionValue(option, False)
            h.setOptionValue("mip_heuristic_effort", 0.0)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(time_limit))
        h.passModel(_lp(highspy, a))
        self.cut = cutoff is not None and np.isfinite(cutoff) and self.mip_model
        if self.cut:
            h.setOptionValue("objective_bound", float(cutoff))
        self.used_start = ""
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(start, dtype=np.float64)
            sol.value_valid = True
            h.setSolution(sol)
            self.used_start = "incumbent"
        self.log: list[str] = []
        self.root = {"pending": None, "bound": None}  # the last node-0 bound; the root bound once past node 0
        #: set when the callback stops the search because its global bound reached the cutoff: a proof that
        #: nothing here is cheaper, which HiGHS's own status ("interrupted", a dual bound of +inf once every
        #: node is pruned) does not say
        self.at_cutoff = False
        #: with a target: the first plan that meets it; ``stop`` (set when a plan is found, or when every run
        #: of the group has ended: stop at the next interrupt point; shared by runs side by side) and ``ended``
        self.early = {"x": None, "objective": None, "stop": threading.Event(), "ended": threading.Event()}
        cb = highspy.cb.HighsCallbackType
        h.setCallback(self._on_event, None)
        h.startCallback(cb.kCallbackLogging)
        if self.mip_model:
            h.startCallback(cb.kCallbackMipInterrupt)
            if target is not None:
                h.startCallback(cb.kCallbackMipImprovingSolution)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("output_flag", True)  # lines reach the logging callback only
        self.build = time.perf_counter() - t0
        self.t1 = None
        #: HiGHS's objective for its solution, and the solution's own cost (they differ when HiGHS hands back
        #: its start: :func:`solve_highspy`)
        self.reported = self.returned = None

    def _on_event(self, kind, message, data_out, data_in, user_data):
        cb = self.hs.cb.HighsCallbackType
        if kind == cb.kCallbackLogging:
            self.log.append(message)
        elif kind == cb.kCallbackMipImprovingSolution:
            value = float(data_out.objective_function_value)
            if value <= self.target and self.early["x"] is None and not self.early["stop"].is_set():
                self.early["x"] = np.array(data_out.mip_solution, dtype=float)
                self.early["objective"] = value
                self.early["stop"].set()
        elif kind == cb.kCallbackMipInterrupt:
            if data_out.mip_node_count == 0:
                b = float(data_out.mip_dual_bound)
                if np.isfinite(b):
                    self.root["pending"] = b
            elif self.root["bound"] is None:
                self.root["bound"] = self.root["pending"]
            primal = float(data_out.mip_primal_bound)  # +inf until the first plan
            if self.target is not None and (self.early["stop"].is_set() or (np.isfinite(primal)
                                                                             and primal <= self.target)):
                data_in.user_interrupt = True
            if self.cutoff is not None and float(data_out.mip_dual_bound) >= self.cutoff:
                self.at_cutoff = True
                data_in.user_interrupt = True
            if (self.stop is not None and self.stop.is_set()) or \
                    (self.enough is not None and self.enough(primal, float(data_out.mip_dual_bound))):
                self.stopped = True
                data_in.user_interrupt = True

    @property
    def in_threads_of_its_own(self) -> bool:
        """Does this run go on in a thread of its own (:meth:`run_to_target`), not in the calling thread?"""
        return bool(self.lp_threads) or (self.target is not None and self.mip_model)

    def _run(self) -> None:
        """HiGHS's run; a run HiGHS refuses (an option it rejects: its status is then not set) is a fault in how
        this module called it, never a solver outcome, and is raised with HiGHS's own error line."""
        if self.h.run() == self.hs.HighsStatus.kError and \
                self.h.getModelStatus() == self.hs.HighsModelStatus.kNotset:
            said = [line.strip() for line in self.log if "ERROR" in line]
            raise RuntimeError("HiGHS refused the run: " + (said[-1] if said else "no error line in its log"))

    def run_to_target(self, group: list["_Run"]) -> bool:
        """Run every run of ``group`` (this one among them) until each has ended or one has a plan that meets
        its target; without a target (or on an LP), this run alone, in this thread, or, with ``lp_threads``,
        in a thread of its own, waited for.

        True when every run ended (each is read with :meth:`result`); False
        when a plan came first (:meth:`early_result`): the runs still going
        are told to stop at their next interrupt point and end in the
        background (:func:`settle_background` waits for them).
        """
        self.t1 = time.perf_counter()
        if not self.in_threads_of_its_own:
            self._run()
            return True
        failure: list[BaseException] = []

        def work(run: "_Run") -> None:
            try:
                run._run()
            except BaseException as e:  # re-raised in the caller's thread: a failure is never lost in a thread
                failure.append(e)
            finally:
                run.early["ended"].set()
                if all(r.early["ended"].is_set() for r in group):
                    run.early["stop"].set()  # wakes the caller

        for r in group:
            r.t1 = self.t1
        threads = [threading.Thread(target=work, args=(r,), name="highs-to-target", daemon=True) for r in group]
        for t in threads:
            t.start()
        self.early["stop"].wait()  # shared by the group
        if all(r.early["ended"].is_set() for r in group):
            for t in threads:
                t.join()
            if failure:
                raise failure[0]
            return True
        for t in threads:
            _yield_cpu(t)
        _background.extend(threads)
        return False

    def early_result(self) -> SolveResult:
        """The plan read from the improving-solution callback, as a result (``feasible``; no bound)."""
        seconds = time.perf_counter() - self.t1
        r = assess(self.a.c, self.a.c0, self.a.integer, self.early["x"], None, self.gap, completed=False)
        if r.error:
            return SolveResult(Status.ERROR, "highs", message=r.error, build_seconds=self.build,
                               solve_seconds=seconds, start=self.used_start)
        return SolveResult(Status.FEASIBLE, "highs", objective=r.objective, x=r.x, message="stopped at the target",
                           build_seconds=self.build, solve_seconds=seconds, start=self.used_start)

    def result(self) -> SolveResult:
        """What HiGHS reports once the run has ended: status, plan, bounds, log."""
        h, hs, a, cutoff = self.h, self.hs, self.a, self.cutoff
        elapsed = time.perf_counter() - self.t1
        status = h.getModelStatus()
        info = h.getInfo()
        S = hs.HighsModelStatus
        common = dict(build_seconds=self.build, solve_seconds=elapsed, log="".join(self.log), start=self.used_start,
                      root_bound=self.root["bound"])
        if status == S.kInfeasible:
            if self.cut:  # nodes at or above the cutoff were pruned: nothing here costs less than it
                return cut_off("highs", cutoff, **common)
            return SolveResult(Status.INFEASIBLE, "highs", message="infeasible", **common)
        if status == S.kModelEmpty:  # no variables (nothing to buy): the plan is empty, its cost the constant
            return SolveResult(Status.OPTIMAL, "highs", objective=float(a.c0), bound=float(a.c0), gap=0.0,
                               x=np.zeros(a.n_vars), message="optimal (empty model)", **common)
        has_plan = info.primal_solution_status == 2  # kSolutionStatusFeasible
        dual = float(info.mip_dual_bound) if self.mip_model else None
        bound = dual if dual is not None and np.isfinite(dual) else None
        if self.cut and self.at_cutoff:
            bound = float(cutoff)  # the search was stopped there: its global bound had reached the cutoff
        elif self.cut:
            bound = clip_to_cutoff(bound, cutoff)
        if common["root_bound"] is None and self.mip_model and status == S.kOptimal and info.mip_node_count <= 1:
            common["root_bound"] = bound  # the search ended at its root: the root proved what the search did
        stopped = self.stopped and status == S.kInterrupt  # the caller's stop: as on a time limit
        if not has_plan:
            msg = {S.kUnbounded: "unbounded", S.kUnboundedOrInfeasible: "unbounded or infeasible",
                   S.kTimeLimit: "no plan within the time limit"}.get(
                status, "stopped by its caller before a plan" if stopped
                else f"HiGHS status {h.modelStatusToString(status)}")
            st = Status.TIME_LIMIT if status == S.kTimeLimit or stopped else Status.ERROR
            if cutoff is not None and bound is not None and bound >= cutoff:
                msg, st = cut_off_message(cutoff), Status.CUT_OFF
            return SolveResult(st, "highs", message=msg, bound=bound, **common)
        col_value = np.asarray(h.getSolution().col_value, dtype=float)
        self.reported = float(info.objective_function_value)
        self.returned = float(a.c @ col_value + a.c0)
        r = assess(a.c, a.c0, a.integer, col_value, bound, self.gap,
                   completed=status == S.kOptimal, bound_is_objective=not self.mip_model and status == S.kOptimal)
        if r.error:
            return SolveResult(Status.ERROR, "highs", message=r.error, **common)
        if not self.mip_model and status == S.kOptimal:  # an LP: its row duals price the rows (decompose)
            common["duals"] = np.asarray(h.getSolution().row_dual, dtype=float)
        x, objective, bound, g, proven = r.x, r.objective, r.bound, r.gap, r.proven
        st = Status.OPTIMAL if proven else Status.FEASIBLE
        target = self.target
        msg = "optimal" if proven else ("time limit (best plan so far, with its bound)" if status == S.kTimeLimit
                                        else "stopped at the target" if target is not None and objective <= target
                                        else "cut off" if cutoff is not None and bound is not None and bound >= cutoff
                                        else "stopped by its caller (best plan so far, with its bound)" if stopped
                                        else f"HiGHS status {h.modelStatusToString(status)}")
        return SolveResult(st, "highs", objective=objective, bound=bound, gap=g, x=x, message=msg, **common)


#: HiGHS runs still going in a thread of their own after their caller has its plan (:meth:`_Run.run_to_target`)
_background: list[threading.Thread] = []
#: per calling thread, the thread count HiGHS's scheduler was last reset to here
_scheduler = threading.local()


def _thread_count(h, threads: int | None, here: bool) -> None:
    """Set the thread count of ``h``'s next run: ``threads`` where given, this thread's scheduler reset to it
    first when the run is ``here`` (in the calling thread; a run in a thread of its own starts a scheduler of
    its own at that count). A run here without a count takes the count this thread's scheduler was set to,
    where it was: HiGHS would otherwise build a scheduler not yet built at its own default, behind this
    module's record, and refuse the next run at the recorded count ("the scheduler has already been
    initialized to use N threads"; docs/performance.md, "A HiGHS scheduler at the wrong count")."""
    if threads:
        if here:
            _scheduler_for(h, int(threads))
        h.setOptionValue("threads", int(threads))
    elif here and getattr(_scheduler, "threads", None) is not None:
        h.setOptionValue("threads", int(_scheduler.threads))


def _scheduler_for(h, threads: int) -> None:
    """Reset this thread's HiGHS scheduler to ``threads`` when it was last set to another count.

    HiGHS documents the reset as unsafe while another thread is inside HiGHS
    (its pull request #3141), so runs still going in the background are
    waited for first; a count already in place needs no reset.
    """
    if getattr(_scheduler, "threads", None) == threads:
        return
    settle_background()
    h.resetGlobalScheduler(True)
    _scheduler.threads = threads


def fresh_thread(threads: int) -> None:
    """Record that this thread, new and not yet inside HiGHS, runs HiGHS on ``threads`` threads.

    HiGHS keeps one scheduler per calling thread and creates it at the
    ``threads`` option of the thread's first run, so a new thread whose
    every run asks for the same count needs no reset (nor makes one while
    other threads are inside HiGHS). An initializer of worker threads
    (:class:`optimizer.executors.Threads`).
    """
    _scheduler.threads = threads


def _yield_cpu(thread: threading.Thread) -> None:
    """Give a run that was told to stop the lowest CPU priority (Linux ``nice`` 19 for its thread).

    Its answer no longer matters, but HiGHS may be inside an LP it does not
    interrupt (bench ×1 training-heavy: a root LP of 15 s): at normal priority
    it would take a core from the work that follows. Where a thread's
    priority cannot be set (not Linux), it keeps its own.
    """
    tid = thread.native_id
    if tid is None or not thread.is_alive() or not hasattr(os, "setpriority"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, tid, 19)
    except (ProcessLookupError, PermissionError):  # the thread ended meanwhile; or a sandbox forbids it
        pass


def settle_background() -> None:
    """Wait for the HiGHS runs left going in the background (each ends at its next interrupt point or its
    time limit)."""
    while _background:
        _background.pop().join()


# a process that ends (an exception, a caller that never settles) first lets its background runs end: HiGHS's
# threads torn down mid-run abort the process ("terminate called without an active exception")
atexit.register(settle_background)


class WarmRelaxation:
    """The LP relaxation of one program under changing bounds, each solve started from the last one's basis.

    Strong branching solves one LP many times with a few columns fixed
    differently (the exact split's options: a configuration, a count). Passed
    to HiGHS once, each later solve starts from the basis the previous one
    ended with, and the dual simplex repairs only what the new bounds moved:
    on q3 the split's 66 option LPs take 3–10 times fewer iterations each
    than from scratch (docs/performance.md, "Strong branching from the last
    basis").

    :meth:`solve` takes arrays of the same program (the matrix and costs
    shared, as :meth:`~optimizer.model.mip.Arrays.copy_bounds` makes them)
    with any column and row bounds; arrays of another program are passed
    anew (no warm start, the same answer).
    """

    def __init__(self):
        import highspy

        self._highspy = highspy
        with _quiet_stdout():
            self._h = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        self._a = None

    def _same_program(self, b: Arrays) -> bool:
        a = self._a
        return (a is not None and b.n_rows == a.n_rows and b.n_vars == a.n_vars and b.vals is a.vals
                and b.rows is a.rows and b.cols is a.cols and b.c is a.c and b.c0 == a.c0)

    def solve(self, b: Arrays) -> SolveResult | None:
        """The LP relaxation of ``b``: ``optimal`` with its objective and point, or ``infeasible``; None for any
        other outcome (the caller solves it from scratch instead)."""
        t0 = time.perf_counter()
        h, hs = self._h, self._highspy
        if not self._same_program(b):
            h.passModel(_lp(hs, b.relaxed()))
            self._a = b.copy_bounds()
        else:
            a = self._a
            for lo, hi, cur_lo, cur_hi, change in ((b.col_lo, b.col_hi, a.col_lo, a.col_hi, h.changeColsBounds),
                                                   (b.row_lo, b.row_hi, a.row_lo, a.row_hi, h.changeRowsBounds)):
                moved = np.flatnonzero((lo != cur_lo) | (hi != cur_hi))
                if len(moved):
                    change(len(moved), moved.astype(np.int32), np.asarray(lo[moved], dtype=np.float64),
                           np.asarray(hi[moved], dtype=np.float64))
                    cur_lo[moved] = lo[moved]
                    cur_hi[moved] = hi[moved]
        _thread_count(h, None, here=True)
        h.run()
        status = h.getModelStatus()
        S = hs.HighsModelStatus
        seconds = time.perf_counter() - t0
        if status == S.kOptimal:
            value = float(h.getInfo().objective_function_value)
            return SolveResult(Status.OPTIMAL, "highs", objective=value, bound=value, gap=0.0,
                               x=np.asarray(h.getSolution().col_value, dtype=float), solve_seconds=seconds,
                               message="optimal")
        if status == S.kInfeasible:
            return SolveResult(Status.INFEASIBLE, "highs", message="infeasible", solve_seconds=seconds)
        return None
