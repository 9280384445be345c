"""A bound proven elsewhere applied to a result: raised, named in its message, and its status made optimal
where it closes the gap.

The solve driver's paths prove with bounds from several places (a
relaxation, the searches beside, the parts solved apart); a result keeps
the best, and its message names one source: the clause
:data:`BOUND_NAMED`, replaced whenever a better bound comes.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from . import decompose
from .result import SolveResult, Status, bound_error, relative_gap, within_gap

#: the clause by which a heuristic path's message names the source of its bound
#: (:func:`~optimizer.solve.fixed.fixed_configurations`); a better bound found later (:func:`apply_decomposition`)
#: takes its place, so the message names one source
BOUND_NAMED = " (the bound is {})"

#: how the message of a plan returned on the time limit starts
TIME_LIMIT_SAID = "time limit: "

#: that clause in a message, whatever source it names (derived from it, so the two cannot drift apart)
BOUND_NAMED_RE = re.compile(re.escape(BOUND_NAMED).replace(re.escape("{}"), "[^()]*"))


def raise_bound(result: SolveResult, bound: float | None) -> bool:
    """Raise ``result``'s bound to ``bound`` (a relaxation's proof) where that is higher; the gap follows.

    True when it did. The bound is clipped to the plan's objective, as a
    back end clips its own (the relaxation's optimum lies below every plan).
    """
    if not result.status.has_plan or bound is None or (result.bound is not None and result.bound >= bound):
        return False
    result.bound = min(bound, result.objective)
    result.gap = relative_gap(result.objective, result.bound)
    return True


def proven_if_within(result: SolveResult, gap: float) -> None:
    """A plan whose gap a bound found after its search closed is optimal: its status says so, and so does the
    start of its message (``time limit: ...`` becomes ``optimal: ...``)."""
    if not within_gap(result.objective, result.bound, gap) or result.status != Status.FEASIBLE:
        return
    result.status = Status.OPTIMAL
    if result.message.startswith(TIME_LIMIT_SAID):
        result.message = "optimal: " + result.message[len(TIME_LIMIT_SAID):]


def apply_decomposition(result: SolveResult, dec: decompose.DecompositionBound, gap: float,
                         where: str | None = None) -> None:
    """Record the part models' bound and prove with it where it is the best (the message says so, and
    ``where`` they ran: by default on the executor's workers). Of several decompositions (by component, by
    period), ``decomposition_bound`` keeps the best."""
    n = len(dec.parts)
    fell_back = int((dec.parts["bound_from"] != "mip").sum())
    where = where or f"on {dec.workers} worker{'s' if dec.workers > 1 else ''}"
    how = (f"{n} {dec.kind} model{'' if n == 1 else 's'} {where}"
           + (f", {fell_back} of them at their LP bound (not proven above it in time)" if fell_back else ""))
    what = f"the {dec.kind}s solved apart"
    if dec.bound is None or not np.isfinite(dec.bound):
        result.message += f"; {what} gave no bound ({how})"
        return
    if result.status.has_plan and bound_error(result.objective, dec.bound):
        # above a plan's cost: round-off in a part model, never a proof
        result.message += f"; {what} gave {dec.bound:,.2f}, above the plan: not used ({how})"
        return
    if result.decomposition_bound is None or dec.bound > result.decomposition_bound:
        result.decomposition_bound = dec.bound
    if raise_bound(result, dec.bound):
        result.message = BOUND_NAMED_RE.sub("", result.message) + f"; the bound is {what} ({how})"
        proven_if_within(result, gap)


def held_with_bound(held: SolveResult, result: SolveResult, gap: float, said: str,
                     seconds: float = 0.0) -> SolveResult:
    """The plan ``held`` (made before ``result``'s search, which found nothing cheaper) with that search's proven
    bound, clipped to the plan's cost, and its times and root bound; ``said``: how the message names the plan,
    ``seconds``: the solver's time spent on ``held``."""
    bound = None if result.bound is None else min(result.bound, held.objective)
    proven = within_gap(held.objective, bound, gap)
    return dataclasses.replace(
        held, status=Status.OPTIMAL if proven else Status.FEASIBLE, bound=bound,
        gap=relative_gap(held.objective, bound),
        x=held.x.copy(), solve_seconds=result.solve_seconds + seconds, build_seconds=result.build_seconds,
        root_bound=result.root_bound,
        message=f"{'optimal' if proven else 'time limit'}: {said} ({result.message})")
