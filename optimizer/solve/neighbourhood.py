"""The LP's neighbourhood: training placed only where the relaxation places it.

A heuristic restriction (in the spirit of RENS, Berthold 2014: search the
integer points near the LP optimum), used by the solve driver for a first
plan on a model too large to search whole (docs/performance.md). The LP
relaxation spreads a job over fractions of clusters; the offerings it uses
for a job and configuration are nearly always where a good plan runs it,
and the back end, left to choose among every offering of every period,
places training far worse in the same time (bench ×1: a first plan of
52.3M against 14.3M with the restriction, LP 12.3M).

Only the ``training-run`` binaries are restricted, per (job, configuration,
offering): where the LP (or the plan without stability limits, when there
is one) runs any hours of that cluster on that offering, every period of
the job's window stays open. Replicas, units and hourly
clusters without a run binary stay free, so the restriction keeps room to
round the LP's fractions up.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..model.mip import Arrays, MIP

#: a variable the LP uses: a value above this
USED = 1e-6


def training_support(mip: MIP, a: Arrays, *points: np.ndarray | None) -> Arrays | None:
    """``a`` with each ``training-run`` binary closed unless one of ``points`` uses its (job, config, offering).

    ``points`` are the LP relaxation's optimum and any plan at hand (the
    plan without stability limits); None entries are skipped. Returns None
    when the model has no such binaries (nothing to restrict).
    """
    points = [p for p in points if p is not None]
    if not points or "training-run" not in mip.variables or mip.variables["training-run"].size == 0:
        return None
    keys = ["job", "config", "offering"]
    used = []
    for x in points:
        # hours, not the run binaries: an LP may set a binary to 1 where its cluster runs no hour (free)
        hours = mip.values("training-hours", x)
        used.append(hours.loc[hours["value"] > USED, keys])
    used = pd.concat(used).drop_duplicates().assign(_used=True)
    run = mip.variables["training-run"].coords.reset_index(drop=True)
    keep = run[keys].merge(used, on=keys, how="left")["_used"].eq(True).to_numpy()
    hi = a.col_hi.copy()
    hi[mip.variables["training-run"].ids[~keep]] = 0.0
    return dataclasses.replace(a, col_hi=hi)
