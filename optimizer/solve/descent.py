"""Configurations chosen one request class at a time: a descent on the restriction's LP with the floors.

A heuristic for the configuration relaxation
(:func:`optimizer.solve.relaxations.configuration_relaxation`) of a model no
exact split can take. That relaxation keeps only ``config-used`` whole; with
the configuration floors (:func:`optimizer.model.strengthen.config_floor`),
a choice of one configuration per class limited to one fixes every
``config-used``, and what is left is an LP: the choice's value. So the
relaxation's optimum is the least LP value over the choices, and HiGHS's
branch and bound over the choices finds good ones slowly (q3 with the
default catalog, on a slow machine: its best point 78,758.57 after 27 s and
61,978.03 after 60 s, the restrictions to their choices costing 92,180 and
78,249 as plans; docs/performance.md, "Configurations chosen one class at a
time").

The descent starts from the configurations the LP relaxation uses most and
changes one class at a time: for each class in turn, each of its other
configurations is tried with the rest held, and the cheapest is kept if it
is cheaper than the class's current one (the class's best answer to the
others' choices). It ends when a whole pass over the classes changes
nothing (no single change of one class lowers the value: a local optimum)
or when its time is up; then the cheapest configuration tried so far in the
class it was in is kept too, if it is cheaper. Each LP starts from the last one's basis
(:func:`~optimizer.solve.backends.warm_relaxations`), HiGHS whatever the
back end, as the split's option LPs do: a value is a value whoever computes
it.

Its point is a point of the configuration relaxation (every row and the
floors met, ``config-used`` whole), so it is handed to that relaxation as
its start: the relaxation's point is then never dearer than the descent's,
and its search goes on from there for its bound and a better choice. On
the heuristics' path (a model whose LP took too long for any stage) no
relaxation follows: the descent's choice is the one fixed, in place of
the configurations the LP relaxation uses most (bench ×0.25 at 90 s: 2 %
cheaper plans).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd

from ..model.presolve import Model
from ..model.strengthen import config_floor
from .backends import solve_relaxation, warm_relaxations
from .result import Status
from .split import configurations_fixed

#: how messages name the descent
NAME = "the descent over the configurations"


@dataclasses.dataclass
class Descent:
    """What the descent ends with.

    ``x``: the LP point of the restriction to the choice (a point of the
    configuration relaxation); ``value``: its cost; ``keep``: per
    ``config-used`` variable, whether its configuration is chosen; ``lps``:
    how many LPs it solved; ``changes``: the choices it changed;
    ``local``: whether it ended on a pass that changed nothing (rather than
    on its time); ``seconds``: its wall clock.
    """

    x: np.ndarray
    value: float
    keep: np.ndarray
    lps: int
    changes: int
    local: bool
    seconds: float


def choose_configurations(model: Model, a, keep: np.ndarray, use: pd.DataFrame,
                          time_limit: float | None) -> Descent | None:
    """The descent from the choice ``keep`` (per ``config-used`` variable of ``model``, chosen or not), on the
    arrays ``a``, for at most ``time_limit`` seconds (None: until no class changes).

    ``use``: the traffic each configuration carries in the point that chose
    ``keep``, as :func:`optimizer.solve.split.configuration_use` gives it
    (per ``config-used`` variable, in its order: ``service``, ``bucket``,
    ``use``, ``max_configurations``). Classes limited to one configuration
    are searched, those with the least traffic first, so that the largest
    answers last, to the others' choices made; any other class is held to
    the configurations ``keep`` gives it. A class is tried again only after
    another has changed since its last try. Returns None when the start's LP
    has no optimum (then there is nothing to descend from; the caller's
    relaxation runs without a start).
    """
    t0 = time.perf_counter()
    mip = model.mip
    floors = a.with_rows(config_floor(mip, model.data, model.vars))
    lps = warm_relaxations()
    count = 0

    def value(choice: np.ndarray):
        nonlocal count
        b = configurations_fixed(model, floors, choice)
        count += 1
        r = lps.solve(b)
        if r is None:
            r = solve_relaxation(mip, b, "highs")
        return (r.objective, r.x) if r.status == Status.OPTIMAL else (np.inf, None)

    def out_of_time() -> bool:
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    keep = np.asarray(keep, bool).copy()
    best, x = value(keep)
    if x is None:
        return None
    single = use["max_configurations"].eq(1).to_numpy()
    traffic = use["use"].to_numpy(dtype=float)
    classes = sorted((rows for rows in use.groupby(["service", "bucket"], sort=False).indices.values()
                      if single[rows].all() and len(rows) > 1), key=lambda rows: traffic[rows].sum())
    # the classes whose best answer to the others' current choices is known: each one tried since the last change
    settled: set[int] = set()
    changes = 0
    while len(settled) < len(classes):
        for i, rows in enumerate(classes):
            if i in settled:
                continue
            # the class's best answer to the others' choices: every configuration of it tried, the cheapest
            # kept (the first cheaper one, taken at once, made the descent end where the order of the classes
            # led it: docs/performance.md, "Configurations chosen one class at a time")
            answer = None
            for r in rows:
                if keep[r]:
                    continue
                if out_of_time():
                    # the class's answer so far, where it is cheaper, is a better point whatever the others
                    # not tried (q3 at a 3-s limit: the time ran out inside the first class, whose L4 choice,
                    # already solved, took the value from 115,919 to 81,275; docs/performance.md, "The last
                    # second of a short limit")
                    if answer is not None and answer[0] < best - 1e-7 * max(1.0, abs(best)):
                        best, x, keep = answer
                        changes += 1
                    return Descent(x, best, keep, count, changes, False, time.perf_counter() - t0)
                trial = keep.copy()
                trial[rows] = False
                trial[r] = True
                v, y = value(trial)
                if answer is None or v < answer[0]:
                    answer = (v, y, trial)
            settled.add(i)
            # a change must gain more than the LP's own tolerance: two choices of the same value would
            # otherwise swap back and forth
            if answer is not None and answer[0] < best - 1e-7 * max(1.0, abs(best)):
                best, x, keep = answer
                changes += 1
                settled = {i}  # every other class answers again, to the new choice
    return Descent(x, best, keep, count, changes, True, time.perf_counter() - t0)
