"""The exact split: the stable optimum as the cheapest of a few fixed choices that span the horizon.

When the plan without stability limits puts a request class limited to one
configuration on several, every stable plan uses exactly one configuration
k of that class, so the stable optimum is the least, over k, of the stable
model with the class fixed to k. Below it, each commitment's count
(reserved units of a term block, new owned servers) is fixed the same way:
every plan buys some whole number of each. A **leaf** fixes one option of
every choice; the least of the leaves' bounds, with each pruned subtree at
its LP bound, proves (docs/performance.md, "The solve driver"). The leaves
are searched with the ``training-cover`` rows of
:func:`optimizer.model.strengthen.training_cover` appended.

The leaves are independent once a best plan exists (each is searched only
for plans cheaper than it, the back end's ``cutoff``), so with an executor
of more than one worker they run side by side on it (:class:`LeafTask`,
:func:`solve_leaf`): the solve driver's threads of this process (HiGHS, one
per CPU), or the processes of ``--workers N`` or ``--executor dask``;
without one, one after the other in the caller's thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module

import numpy as np
import pandas as pd

from ..model.mip import Arrays
from ..model.presolve import Model
from ..model.strengthen import training_cover
from .backends import solve as backend_solve, solve_relaxation, warm_relaxations
from .result import SolveResult, Status, best_root, relative_gap, within_gap

#: a request class limited to one configuration is split into one stable solve per candidate
#: configuration when it has at most this many candidates
MAX_SPLIT = 16
#: the split also fixes each commitment's count (reserved units of a term block, new owned servers) when
#: the model has at most this many commitment columns (q3 has two; docs/performance.md)
MAX_COMMITMENT_SPLIT = 4
#: the variable blocks whose columns are commitments: one integer that every period of its term uses
COMMITMENTS = ("units-reserved", "units-owned-new")
#: under a time limit, the least time a leaf is searched for; with less left, the leaves not yet searched count their
#: LP bound instead of starting past the limit
MIN_LEAF_SECONDS = 1.0
#: how often the split looks at the leaves running on an executor (seconds)
POLL_SECONDS = 0.02
#: whether a leaf's search may restart from its root (HiGHS's ``mip_allow_restart``). A leaf is a small model
#: with its choices fixed, searched under a cutoff: its root fixes a fifth or more of the integers by reduced
#: cost, and each restart presolves again and repeats the root's cuts, which cost more than the smaller model
#: saves (measured in docs/performance.md, "Leaves without restarts")
LEAF_RESTARTS = False
#: whether a leaf searched again (the second pass, from its own plan, under the best plan's cutoff) runs the back
#: end's primal heuristics. Its heuristics already ran in the first pass and found its plan; what is left is to
#: prove that nothing below the cutoff is there, and on q3 HiGHS's root heuristics (RENS, RINS, feasibility
#: jump) took more than half of such a proof (docs/performance.md, "Proofs without heuristics")
PROOF_HEURISTICS = False


def configuration_use(model: Model, x: np.ndarray) -> pd.DataFrame:
    """Per ``config-used`` variable (in its order): the traffic its configuration carries in the plan ``x``.

    Use is routed rps for a bucketed service, replicas × rps for a
    single-size one, each weighted by the period's hours, summed over the
    horizon; columns ``service, bucket, config, use, max_configurations``.
    """
    table, rows, cols, weights = _use_terms(model)
    use = np.bincount(rows, weights=weights * np.asarray(x, float)[cols], minlength=len(table))
    out = table.copy()
    out.insert(out.columns.get_loc("max_configurations"), "use", use)
    return out


def _use_terms(model: Model) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`configuration_use` sums, read once per model: the ``config-used`` rows with their
    ``max_configurations``, and per term the row, the column and its weight (hours for a routed rps; rps × hours
    for a replica of a single-size service), so that a plan's use is one weighted sum. The driver asks for the
    use of several plans of each model (the split, the configurations fixed, the classes over their limit)."""
    mip, d = model.mip, model.data
    cached = d.cache.get("configuration_use")
    if cached is not None:
        return cached
    keys = ["service", "bucket", "config"]
    cu = mip.variables["config-used"].coords.reset_index(drop=True)
    hours = d.periods.set_index("period")["hours"]

    def columns(name: str) -> pd.DataFrame:
        block = mip.variables[name]
        return block.coords.reset_index(drop=True).assign(col=block.start + np.arange(block.size))

    routed = columns("inference-routing")
    routed = routed.assign(weight=routed["period"].map(hours).to_numpy(float))
    reps = columns("inference-replicas").merge(d.rps, on=["service", "config"])
    reps = reps[~reps["service"].isin(d.multi_bucket)]
    reps = reps.assign(weight=(reps["rps"] * reps["period"].map(hours)).to_numpy(float))
    terms = pd.concat([routed[keys + ["col", "weight"]], reps[keys + ["col", "weight"]]], ignore_index=True)
    terms = cu[keys].assign(row=np.arange(len(cu))).merge(terms, on=keys)  # the terms of a config-used row
    table = cu.merge(d.stability[["service", "max_configurations"]], on="service")
    if len(table) != len(cu):  # the rows are read by position: every service has its limits
        raise ValueError("internal error: a config-used row's service has no stability limits")
    out = (table, terms["row"].to_numpy(np.int64), terms["col"].to_numpy(np.int64), terms["weight"].to_numpy(float))
    d.cache["configuration_use"] = out
    return out


def configurations_fixed(model: Model, a: Arrays, keep: np.ndarray) -> Arrays:
    """A copy of the arrays ``a`` with every ``config-used`` fixed to the choice ``keep`` (per variable, in its
    order): 1 where chosen, 0 elsewhere; a restriction of the stable model."""
    ids = model.mip.variables["config-used"].ids
    fixed = a.copy_bounds()
    fixed.col_hi[ids[~keep]] = 0.0
    fixed.col_lo[ids[keep]] = 1.0
    return fixed


def over_one(cu: pd.DataFrame) -> pd.DataFrame:
    """The request classes limited to one configuration that a plan puts on several, those on the most first.

    ``cu``: the plan's :func:`configuration_use`. Indexed by (service,
    bucket); column ``n``, the configurations the plan uses.
    """
    used = cu[cu["use"] > 1e-9].groupby(["service", "bucket"]).agg(n=("config", "nunique"),
                                                                 limit=("max_configurations", "first"))
    return used[(used["n"] > used["limit"]) & (used["limit"] == 1)].sort_values("n", ascending=False,
                                                                                 kind="stable")


def too_wide_to_split(model: Model) -> bool:
    """Has ``model`` request classes limited to one configuration, and none the exact split can take (each has
    more than :data:`MAX_SPLIT` candidates)?"""
    mip, d = model.mip, model.data
    if "config-used" not in mip.variables:
        return False
    cu = mip.variables["config-used"].coords.reset_index(drop=True).merge(
        d.stability[["service", "max_configurations"]], on="service")
    sizes = cu[cu["max_configurations"] == 1].groupby(["service", "bucket"]).size()
    return bool(len(sizes)) and bool((sizes > MAX_SPLIT).all())


@dataclass
class Choice:
    """One decision every plan makes exactly one way: the options partition the plans.

    ``options``: (label, columns, value, preferred) per option; choosing it
    fixes ``columns`` to ``value`` (one array each). ``preferred`` options are
    tried first (the plan without stability limits chose them), the others
    in order of their LP bound.
    """

    name: str
    options: list[tuple[str, np.ndarray, np.ndarray, bool]]


def configuration_choices(model: Model, point: np.ndarray | None, prefer: np.ndarray | None = None,
                          only: Sequence[str] | None = None) -> list[Choice]:
    """One choice per request class that ``point`` (the plan without limits) puts on more configurations than it may.

    Only classes that may use one configuration (N = 1) and have at most
    :data:`MAX_SPLIT` candidates: every stable plan uses exactly one of
    them, k, and fixing k (the class's other configurations off) is a
    partition of the stable plans. Classes with the most configurations in
    use come first; within a class, the configuration the plan ``prefer``
    (default: ``point``) uses most is tried first. ``only``: the classes
    named (``service/bucket``) instead, whatever ``point`` does (it may
    then be None; ``prefer`` must be given).
    """
    ids = model.mip.variables["config-used"].ids
    cu = configuration_use(model, point if point is not None else prefer)
    pref = cu["use"].to_numpy() if prefer is None else configuration_use(model, prefer)["use"].to_numpy()
    if only is not None:
        limits = cu.groupby(["service", "bucket"])["max_configurations"].first()
        over = limits[[f"{s}/{b}" in only and n == 1 for (s, b), n in limits.items()]]
    else:
        over = over_one(cu)
    out = []
    for service, bucket in over.index:
        mine = ((cu["service"] == service) & (cu["bucket"] == bucket)).to_numpy()
        ks = np.flatnonzero(mine)
        if len(ks) > MAX_SPLIT:
            continue
        top = ks[int(np.argmax(pref[ks]))]
        cols = ids[ks]
        out.append(Choice(f"{service}/{bucket}", [(str(cu["config"].iloc[k]), cols,
                                                    (cols == ids[k]).astype(float), k == top) for k in ks]))
    return out


def commitment_choices(model: Model, a, point: np.ndarray | None, prefer: np.ndarray | None = None) -> list[Choice]:
    """One choice per commitment column (reserved units of a term block, new owned servers): its count.

    A commitment is a single integer that every period of its term uses, so
    its LP value (a fraction of a server bought) weakens every period's
    relaxation at once; with the count fixed, the solver's root cuts close
    most of the gap (docs/performance.md, "Branching first on the commitments"). Only when the
    model has at most :data:`MAX_COMMITMENT_SPLIT` commitment columns, each
    with at most :data:`MAX_SPLIT` values; the count the plan ``prefer``
    (default: ``point``, the plan without limits) chose is tried first.
    """
    named = []
    for block in COMMITMENTS:
        if block not in model.mip.variables:
            continue
        v = model.mip.variables[block]
        for col, row in zip(v.ids, v.coords.itertuples(index=False)):
            what = ("new owned servers of " + row.offering if block == "units-owned-new"
                    else f"reserved units of {row.offering} (term block {row.block})")
            if a.col_hi[col] > a.col_lo[col]:
                named.append((col, what))
    if not named or len(named) > MAX_COMMITMENT_SPLIT:
        return []
    out = []
    for col, what in named:
        lo, hi = int(round(a.col_lo[col])), int(round(a.col_hi[col]))
        if hi - lo + 1 > MAX_SPLIT:
            continue
        chosen = (int(round(prefer[col])) if prefer is not None
                  else int(round(point[col])) if point is not None else None)
        one = np.array([col])
        out.append(Choice(what, [(str(n), one, np.array([float(n)]), n == chosen) for n in range(lo, hi + 1)]))
    return out


def exact_split(model: Model, a, first: SolveResult, solver: str, time_limit: float | None, gap: float,
                threads: int | None, incumbent: SolveResult | None = None, executor=None,
                carried: Mapping[tuple, float] | None = None,
                classes: Sequence[str] | None = None, first_gap: float | None = None,
                guide: np.ndarray | None = None, guide_name: str = "") -> SolveResult | None:
    """The stable optimum as the cheapest leaf of an exact split on a few decisions that span the horizon.

    The plan without stability limits (``first``) puts some request class
    on more configurations than it may use. The decisions split on, in
    order: the configuration of one such class (:func:`configuration_choices`;
    of several, the one whose options' least LP bound is highest: strong
    branching, :func:`option_bounds`), then each commitment's count
    (:func:`commitment_choices`). Each choice's
    options partition the stable plans, so the stable optimum is the least
    of the leaves' optima (a leaf fixes one option of every choice), and the
    least of the leaves' bounds, with pruned subtrees at their LP bound,
    proves. The search is depth first: at each choice the options are taken
    preferred first, then in order of their LP bound; a subtree whose LP
    bound is not below the best plan so far is pruned without a solve; a
    leaf is searched only for plans cheaper than the best so far (the back
    end's ``cutoff``); and the search ends as soon as the best plan meets ``first``'s
    bound (a relaxation: nothing is cheaper).

    ``incumbent``, a stable plan the caller has, is the first best plan
    (everything dearer is pruned or cut off from the start), and its choices
    are the preferred options.

    With an ``executor`` of more than one worker, each leaf is handed to it
    (:func:`solve_leaf`) with the best plan so far as its cutoff, and the
    search goes on while it runs: a leaf waits for a free worker, and,
    while no plan exists, for the leaves running to end (a leaf without a
    cutoff is searched whole). A leaf started before a cheaper plan came
    back searches under the cutoff it was given (valid, only less sharp);
    the order of the leaves and the pruning are those of one process.

    ``carried``: proven lower bounds of leaves and subtrees of this model
    found elsewhere (a sweep's two solved neighbours, interpolated: a
    leaf's optimum is concave in a price;
    :func:`optimizer.studies.parametric.leaf_bounds`), keyed as the
    result's ``leaf_bounds``: a leaf whose carried bound is not below the
    best plan is pruned without a solve. The result records every leaf's
    and pruned subtree's bound (``leaf_bounds``) for the next point.
    ``classes``: split on these request classes (``service/bucket``)
    rather than on those ``first`` breaks the limit of (then ``first``
    needs only its bound, and ``incumbent`` orders the options).

    ``first_gap`` (a gap above ``gap``; the driver's guide gap): each leaf is
    first searched to that gap only, then the leaves not settled are searched
    on to ``gap`` from their plans, each cut off at the best plan so far. A
    leaf finds its best plans early and spends most of its time proving;
    proven under the best cutoff, it proves sooner (docs/performance.md,
    "Plans first, proofs after"). Once the search has handed out every leaf's
    first pass, a worker that frees takes the proof of the open leaf with the
    lowest bound among those back, rather than idling until every first pass
    is: a proof started before the last plan came back is cut off at the best
    plan then (valid, only less sharp).

    ``guide``: a point that chooses in place of ``first``'s plan (the
    classes and the first options; the monthly model's plan without limits
    spread over the periods, :func:`optimizer.solve.coarse.guides`); ``first``
    then carries only its time, and no bound. ``guide_name``: what gave
    it, as the message names it.

    Returns None when no class qualifies (the caller's stages apply).
    Under a time limit a node's time is shared equally among its options
    not yet taken, except while no plan exists: then the leaf searched
    takes all the time left (a leaf stopped before its first plan gives
    neither a plan nor a cutoff for the others). A leaf stopped on its
    share keeps its bound and is taken up again, from its plan, with the
    time the others left. No leaf is searched with less than
    :data:`MIN_LEAF_SECONDS` left: it counts what it has proven (its LP
    bound, or its first search's bound), as a pruned subtree does.
    """
    t0 = time.perf_counter()
    mip = model.mip
    # the leaves search with each job's progress rounded to whole periods (valid rows the model itself does
    # not carry: they cost its LP and its other searches more than they give, docs/performance.md)
    a = a.with_rows(training_cover(mip, model.vars))
    prefer = None if incumbent is None else incumbent.x
    point = guide if guide is not None else first.x if first.status.has_plan else None
    configs = configuration_choices(model, point, prefer, only=classes)
    if not configs:
        return None
    lps = warm_relaxations()  # every option's LP, each started from the last one's basis
    try:
        # of several classes, the one whose options' least LP bound is highest (strong branching); its
        # options' LPs are the first level of the search
        options, config = max(((option_bounds(mip, a, ch, lps), ch) for ch in configs),
                              key=lambda oc: min((o[1] for o in oc[0]), default=np.inf))
    except Unsettled:  # an LP the back end could not settle: the caller's stages apply
        return None
    configs = [config]
    choices = configs + commitment_choices(model, a, point, prefer)
    B = first.bound
    state = {"best": incumbent, "pruned": 0, "carried": 0, "unsearched": 0}
    failed: dict[tuple, str] = {}  # the leaves whose last search the back end failed on, with its message
    solved: set[tuple] = set()  # the leaves searched (a leaf may be searched twice: to first_gap, then to gap)
    loose = gap if first_gap is None else max(gap, first_gap)
    carried = {} if carried is None else carried
    leaf_proofs: dict[tuple, float] = {}  # the bound of every leaf and pruned subtree, by its choices
    # the root bound of every leaf (its LP bound where the back end reports none) and pruned subtree (its LP
    # bound), by its choices: the least of them is the split's root bound
    roots: dict[tuple, float] = {}
    lp_of: dict[tuple, float] = {}  # each leaf's LP bound
    # leaves handed to the executor and not yet read back: (future, arrays, bound known before, key, final)
    running: list[tuple[object, Arrays, float, tuple, bool]] = []
    # an executor whose workers come and go (CPUs lent, executors.Lending) says how many it may have at most
    side_by_side = executor is not None and getattr(executor, "most", executor.workers) > 1
    bounds: list[float] = []      # a proven bound per settled leaf and pruned subtree
    open_: list[list] = []        # [bound, arrays, result, key] of leaves searched to first_gap or stopped on time

    def met(obj: float, bound: float | None) -> bool:
        return bound is not None and obj <= bound + gap * max(abs(bound), 1e-9)

    def settled(bound: float) -> bool:
        best = state["best"]
        return best is not None and bound >= best.objective - gap * max(abs(best.objective), 1e-9)

    def done() -> bool:
        return state["best"] is not None and met(state["best"].objective, B)

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - t0)

    def read(r: SolveResult, b: Arrays, known: float, key: tuple, final: bool) -> None:
        """Record a leaf's result: a cheaper plan is the best; its bound settles the leaf or leaves it open.

        ``final``: the leaf was searched to the requested gap, so a search that ended proves it whatever
        bound the back end reports, and, without a time limit, nothing is gained by searching it again
        (its bound counts as it is); a search to ``first_gap`` proves it only where its bound does."""
        solved.add(key)
        if r.status == Status.INFEASIBLE:
            leaf_proofs[key] = roots[key] = np.inf
            return
        if r.status == Status.ERROR:  # the back end failed on this leaf: its LP bound stands, the message says so
            failed[key] = r.message
        else:
            failed.pop(key, None)
        # a search that reports no bound (it failed, or stopped before its root) proves the leaf's LP bound
        bound = max(known, r.bound) if r.bound is not None else max(known, lp_of[key])
        leaf_proofs[key] = bound
        root = lp_of[key] if r.root_bound is None else min(r.root_bound, max(bound, lp_of[key]))
        roots[key] = max(roots.get(key, -np.inf), root)
        best = state["best"]
        if r.status.has_plan and (best is None or r.objective < best.objective):
            state["best"] = r
        if (settled(bound) or (r.status == Status.OPTIMAL and (final or met(r.objective, bound)))
                or (final and time_limit is None)):  # without a limit, a leaf searched to the gap is not retried
            bounds.append(bound)
        else:
            open_.append([bound, b, r, key])

    # each node's options with their LP bounds (option_bounds), by its choices: the search's own, and those
    # computed ahead of it while it waits on a leaf with a worker idle
    kids_of: dict[tuple, list] = {(): options}

    def child(key: tuple, label: str) -> tuple:
        """The key of the node below ``key`` that takes the option ``label`` of its choice."""
        return key + ((choices[len(key)].name, label),)

    def ahead() -> Iterator[bool]:
        """Compute the options' LP bounds of the nodes the search has not reached, in its order (depth first,
        each node's options in their search order), one node a step.

        The search computes them itself when it gets to a node, one after
        the other with the leaves it hands out; on q3 the LPs of the
        critical leaf's parents held its start back by 0.4 s while the first
        leaf ran on one worker and the other idled. Nodes the search later
        prunes are computed too: that time was idle. Only without a time
        limit: a node's LPs cannot be stopped, and a leaf that ends meanwhile
        is read after them. An LP the back end cannot settle is left to the
        search, which stops where it gets to it.
        """
        stack = [((), a)]
        while stack:
            key, b = stack.pop()
            depth = len(key)
            if depth == len(choices):
                continue
            if key not in kids_of:
                try:
                    kids_of[key] = option_bounds(mip, b, choices[depth], lps)
                except Unsettled:
                    return
                yield True
            stack.extend(reversed([(child(key, label), c) for _p, _lp, c, label in kids_of[key]]))

    state["ahead"] = ahead() if time_limit is None else iter(())

    def collect(wait: bool) -> None:
        """Read back the leaves that have finished; with ``wait``, first wait until one has (computing LP
        bounds ahead of the search meanwhile, while a worker is idle: :func:`ahead`)."""
        while wait and running and not any(item[0].done() for item in running):
            if not (len(running) < executor.workers and next(state["ahead"], False)):
                time.sleep(POLL_SECONDS)
        for item in [it for it in running if it[0].done()]:
            running.remove(item)
            read(item[0].result(), *item[1:])

    def drain() -> None:
        """Read back every leaf still running."""
        while running:
            collect(wait=True)

    def leaf(b, key: tuple, share: float | None, start: np.ndarray | None = None, known: float = -np.inf,
             leaf_gap: float = loose, heuristics: bool = True) -> None:
        if side_by_side:
            # a free worker; and a leaf with nothing to cut off at goes out alone: searched whole beside
            # another, it can take many times what the other's plan would let it take (q3-profiled: 9 s
            # against 1 s in one process)
            while len(running) >= executor.workers or (running and state["best"] is None):
                collect(wait=True)
        if time_limit is not None:
            if left() < MIN_LEAF_SECONDS:
                # the time is up (or ran out while the leaf waited for a worker): searched now, it would end past
                # the limit (bench standard x0.25 at 90 s: a leaf given 16 s at the limit, the run 16 s late). What
                # it has proven stands: its LP bound, as a pruned subtree's, or its first search's bound
                bound = max(known, lp_of[key])
                bounds.append(bound)
                leaf_proofs[key] = bound
                roots[key] = max(roots.get(key, -np.inf), lp_of[key])
                if key not in solved:
                    state["unsearched"] += 1
                return
            share = min(share, left())  # its share, taken when it was queued, within what is left now
        best = state["best"]
        task = LeafTask(b, solver, share, leaf_gap, threads, start, None if best is None else best.objective,
                        heuristics)
        if side_by_side:
            running.append((executor.submit(solve_leaf, task), b, known, key, leaf_gap <= gap))
            collect(wait=False)
        else:
            read(solve_leaf(task), b, known, key, leaf_gap <= gap)

    def node(b, key: tuple, budget_end: float | None, kids: list | None = None, lp_bound: float = -np.inf) -> None:
        depth = len(key)
        if depth == len(choices):
            known = carried_bound(key, carried)
            if settled(known):  # proven elsewhere not to hold a cheaper plan
                bounds.append(known)
                leaf_proofs[key] = roots[key] = known
                state["carried"] += 1
                return
            share = None if budget_end is None else max(MIN_LEAF_SECONDS, budget_end - time.perf_counter())
            if share is not None and state["best"] is None and not running:
                # no plan yet, anywhere: a leaf cut short of its first plan leaves nothing to return and
                # nothing to prune the others with, so the first leaf (the most promising) takes the time left
                share = max(share, left())
            lp_of[key] = lp_bound
            leaf(b, key, share)
            return
        if kids is None:
            kids = kids_of.get(key)
        if kids is None:
            kids = kids_of[key] = option_bounds(mip, b, choices[depth], lps)
        for i, (_p, lp_bound, c, label) in enumerate(kids):
            below = child(key, label)
            if done() or settled(lp_bound):
                bounds.append(lp_bound)
                leaf_proofs[below] = roots[below] = lp_bound
                state["pruned"] += 1
                continue
            end = None
            if budget_end is not None:
                end = time.perf_counter() + max(1.0, (budget_end - time.perf_counter()) / (len(kids) - i))
            node(c, below, end, lp_bound=lp_bound)

    try:
        node(a, (), None if time_limit is None else t0 + time_limit, options)
    except Unsettled:  # an LP the back end could not settle: the caller's stages apply
        drain()  # what runs on the executor is read back before the caller's stages take over
        return None
    state["ahead"] = iter(())  # every node the search reaches is behind it
    # the leaves not settled (searched to first_gap, or stopped on their share) are searched on to the gap, from
    # their plans, under the best cutoff, with the time the pruned and quick leaves left. A proof waits for a free
    # worker before it is chosen, so that a first pass coming back meanwhile with a lower bound goes first
    while (open_ or running) and not done() and (left() is None or left() >= MIN_LEAF_SECONDS):
        if not open_ or (side_by_side and len(running) >= executor.workers):
            collect(wait=True)
            continue
        open_.sort(key=lambda o: o[0])
        bound, b, r, key = open_.pop(0)
        if settled(bound):
            bounds.append(bound)
            continue
        share = None if left() is None else max(MIN_LEAF_SECONDS, left() / (len(open_) + len(running) + 1))
        own = r.x if r.status.has_plan else None
        # a leaf with a plan of its own searched again is a proof; one stopped before its first plan still searches
        leaf(b, key, share, own, bound, leaf_gap=gap, heuristics=PROOF_HEURISTICS or own is None)
    drain()
    bounds += [o[0] for o in open_]
    # the split's own time (its LPs, and the leaves, side by side or not) on top of the plan without limits
    best, seconds = state["best"], first.solve_seconds + (time.perf_counter() - t0)
    unsearched = (f"{state['unsearched']} not searched in the time (counted at their LP bound)"
                  if state["unsearched"] else "")
    failure = next(iter(failed.values()), None)  # the back end's word on the first leaf it failed on
    what = (" and ".join(f"configuration of {c.name} ({len(c.options)} configurations)" for c in configs)
            + "".join(f" and count of {c.name}" for c in choices[len(configs):]))
    if best is None:
        if not bounds:  # no option of the class admits a stable plan
            return SolveResult(Status.INFEASIBLE, solver, solve_seconds=seconds,
                               message="no plan meets every constraint with the stability limits")
        if time_limit is None:  # nothing stopped the leaves but the back end itself
            return SolveResult(Status.ERROR, solver, bound=min(bounds), solve_seconds=seconds,
                               message="no stable plan: the back end failed on the leaves of the split"
                               + (f" (first: {failure})" if failed else ""))
        return SolveResult(Status.TIME_LIMIT, solver, bound=min(bounds), solve_seconds=seconds,
                           message="no stable plan within the time limit: "
                           f"{len(solved)} lea{'f' if len(solved) == 1 else 'ves'} searched"
                           + (f", {unsearched}" if unsearched else ""))
    best.solve_seconds = seconds
    proof = B if done() else max(min(bounds, default=np.inf), B if B is not None else -np.inf)
    best.bound = min(best.objective, proof)
    best.gap = relative_gap(best.objective, best.bound)
    proven = within_gap(best.objective, best.bound, gap)
    best.status = Status.OPTIMAL if proven else Status.FEASIBLE
    best.leaf_bounds = leaf_proofs
    # a leaf's own root proves nothing for the others: the least of them is the split's root, unless the
    # model without limits' root (a relaxation of every leaf) is higher
    best.root_bound = best_root([first.root_bound, min(roots.values(), default=None)], best.bound)
    best.message = (f"{'optimal' if proven else 'time limit' if time_limit is not None else 'not proven'}: "
                    f"one stable solve per {what}: "
                    f"{len(solved)} solved, {state['pruned']} pruned by their LP bound, "
                    + (f"{state['carried']} by bounds carried from solved neighbours, " if state["carried"] else "")
                    + (f"{unsearched}, " if unsearched else "")
                    + ("none cheaper than the known plan, which is kept" if best is incumbent else "the cheapest kept")
                    + ("; it costs what the plan without stability limits costs" if done() else "")
                    + ("; split as the solved points of its line were, without the model without limits"
                       if classes is not None else "")
                    + (f"; where to split chosen by {guide_name}" if guide is not None else "")
                    + (f"; the back end failed on {len(failed)} lea{'f' if len(failed) == 1 else 'ves'} (first: "
                       f"{failure}), counted at their LP bounds" if failed else ""))
    return best


def option_bounds(mip, b, choice: Choice, lps=None) -> list[tuple[bool, float, Arrays, str]]:
    """Each option of ``choice`` under the arrays ``b``: (not preferred, its LP bound, its arrays, its label), in
    search order.

    ``lps`` (:func:`~optimizer.solve.backends.warm_relaxations`) solves each
    option's LP from the basis the last one ended with; an LP it does not
    settle, and every LP without it, is solved from scratch. Options whose
    LP is infeasible are left out; an LP neither optimal nor infeasible
    raises :class:`Unsettled`.
    """
    out = []
    for label, cols, value, preferred in choice.options:
        c = b.copy_bounds()
        c.col_lo[cols] = value
        c.col_hi[cols] = value
        # HiGHS in this process whatever the back end: an LP bound is a bound whoever computes it, and the
        # back ends in a child process (SCIP, CP-SAT) would start one per option (q3: 69 of them)
        r = None if lps is None else lps.solve(c)
        if r is None:
            r = solve_relaxation(mip, c, "highs")
        if r.status == Status.OPTIMAL:
            out.append((not preferred, r.objective, c, label))
        elif r.status != Status.INFEASIBLE:
            raise Unsettled
    return sorted(out, key=lambda t: (t[0], t[1]))


def carried_bound(key: tuple, known: Mapping[tuple, float]) -> float:
    """The best bound ``known`` holds for the leaf ``key``: its own, or that of a subtree it lies in."""
    return max((known[key[:d]] for d in range(1, len(key) + 1) if key[:d] in known), default=-np.inf)


class Unsettled(Exception):
    """A branch LP ended neither optimal nor infeasible (a back end's failure to settle it)."""


@dataclass
class LeafTask:
    """One leaf of the split as plain data, for an executor: its arrays and how to search them."""

    arrays: Arrays
    solver: str
    time_limit: float | None
    gap: float
    threads: int | None
    start: np.ndarray | None
    #: the best plan's cost when the leaf was handed out: only cheaper plans are searched for
    cutoff: float | None
    #: whether the back end runs its primal heuristics (off for a leaf searched again from its own plan: that
    #: search is a proof, :data:`PROOF_HEURISTICS`)
    heuristics: bool = True


def solve_leaf(task: LeafTask) -> SolveResult:
    """Search one leaf with the back end (in this process or on a worker); its result as the back end gives it."""
    return backend_solve(None, solver=task.solver, time_limit=task.time_limit, gap=task.gap, threads=task.threads,
                         arrays=task.arrays, start=task.start, cutoff=task.cutoff, restart=LEAF_RESTARTS,
                         heuristics=task.heuristics)


def warm(_=None) -> bool:
    """A task that only loads the back ends: handed to each worker when a solve starts, so that starting the
    workers (processes, a local Dask cluster) overlaps the LP and the model without limits, not the leaves."""
    import_module("optimizer.solve.backends.highspy_backend")
    return True
