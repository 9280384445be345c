"""Stage 5: when each training cluster runs inside its periods, as a timetable a team can follow.

The model plans training in hours per period: cluster a of job j runs t_a
hours on offering o in period p. That is executable only if the hours can be
laid out in time: a job runs one cluster at a time, and the clusters that
run at once on a pool fit in it. The model guarantees it with lanes
(docs/formulation.md, "Training lanes"); this module builds the timetable
from a plan, and :mod:`optimizer.audit` checks the timetable, instant by
instant, with nothing of this module's.

Per period, in two steps:

1. **Lanes as machines.** Where the model divided a pool into lanes
   (``training-lanes``), the pool's clusters are poured into its lanes,
   largest cluster first into the widest lane, each lane holding at most
   the period's hours: whole into the fullest lane that takes it, else
   spread over several (it then runs in one after the other). Taking the
   clusters largest first, the model's ``training-lanes-hours`` rows are
   exactly what makes this succeed: the clusters at least s wide never need
   more time than the lanes at least s wide have.
   Elsewhere each cluster is a machine of its own.
2. **An open-shop schedule.** Jobs against machines, with hours p_{j,m}
   where every job's row and every machine's column sums to at most h
   (the period's hours), has a preemptive schedule of length h (Gonzalez
   and Sahni 1976). It is found by Birkhoff's decomposition: the matrix,
   padded with idle time to a square one whose rows and columns all sum to
   h, is a sum of permutation matrices; each perfect matching on its
   positive entries is a slice of time in which every job runs on at most
   one machine and every machine serves at most one job.

A cluster may therefore pause and resume inside a period; it checkpoints
anyway (docs/formulation.md, spot waste), and a pause costs a restart.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

#: hours below this are round-off of the solver, not time in the timetable
TOLERANCE = 1e-6

COLUMNS = ["job", "period", "offering", "mode", "lane", "lane_size", "gpus", "billed_units", "start_hour",
           "end_hour", "hours"]


class NoTimetable(Exception):
    """The plan's training hours cannot be laid out in its lanes: a bug, since the model's rows forbid it."""


def timetable(training: pd.DataFrame, lanes: pd.DataFrame, period_hours: pd.Series) -> pd.DataFrame:
    """The timetable of a plan's training (COLUMNS; one row per stretch a cluster runs without a pause).

    Parameters
    ----------
    training
        The plan's ``training`` table: job, period, offering, mode, gpus,
        billed_units, hours.
    lanes
        Lanes per pool: offering, period, mode, size (GPUs for ``shared``,
        billed units for ``hourly``), lanes (how many, an integer).
    period_hours
        Hours of each period, by period name.

    ``lane`` numbers the lanes of a pool from 1, widest first; a cluster
    alone in its pool runs in lane 1 of its own size. ``start_hour`` and
    ``end_hour`` count hours from the start of the period.
    """
    # records in plain lists and dictionaries: a plan's training table has a few to a few hundred rows, where
    # each pandas filter or groupby cost about a millisecond (this was a fifth of a small plan's tables)
    by_period: dict = {}
    for a in zip(*(training[c].tolist() for c in _TRAINING)):
        by_period.setdefault(a[1], []).append(_Placement(*a))
    lanes_of: dict = {}  # (period, offering, mode) -> [(size, how many)]
    for o, p, mode, size, n in zip(*(lanes[c].tolist() for c in ("offering", "period", "mode", "size", "lanes"))):
        lanes_of.setdefault((p, o, mode), []).append((size, n))
    rows = []
    for period, tr in by_period.items():
        h = float(period_hours[period])
        machines, load = _machines(tr, lanes_of, period, h)
        first = {}  # (job, offering, mode) -> its first row of the period
        for a in tr:
            first.setdefault((a.job, a.offering, a.mode), a)
        for job_i, mach_i, start, end in _open_shop(load, h):
            job = load.index[job_i]
            m = machines[mach_i]
            a = first[(job, m["offering"], m["mode"])]
            rows.append((job, period, m["offering"], m["mode"], m["lane"], m["size"], int(a.gpus),
                         int(a.billed_units), start, end, end - start))
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["period", "offering", "mode", "lane", "start_hour"], ignore_index=True) \
        if len(out) else out


#: the columns of the plan's training table a timetable reads, in the order of :class:`_Placement`
_TRAINING = ("job", "period", "offering", "mode", "gpus", "billed_units", "hours")


class _Placement(NamedTuple):
    """One row of the plan's training table: a job's hours on an offering in a period, in a mode."""

    job: str
    period: str
    offering: str
    mode: str
    gpus: int
    billed_units: int
    hours: float


def _machines(tr: list[_Placement], lanes_of: dict, period: str, h: float) -> tuple[list[dict], pd.DataFrame]:
    """The period's machines (lanes, or a cluster's own) and the hours each job runs on each.

    ``lanes_of`` gives the lanes of each (period, offering, mode): a list of (size, how many).
    """
    machines: list[dict] = []
    cells: list[tuple[str, int, float]] = []
    by_pool: dict = {}
    for a in tr:
        by_pool.setdefault((a.offering, a.mode), []).append(a)
    for (o, mode), pool in by_pool.items():
        # a cluster's size: its GPUs in a pool of shared units, its billed units in one rented by the hour
        sized = [(int(a.gpus if mode == "shared" else a.billed_units), a) for a in pool]
        widths = sorted((int(s) for s, n in lanes_of.get((period, o, mode), ()) for _ in range(int(round(n)))),
                        reverse=True)
        if not widths:  # one job's cluster alone in the pool: a machine of its own
            for size, a in sized:
                machines.append({"offering": o, "mode": mode, "lane": 1, "size": size})
                cells.append((a.job, len(machines) - 1, float(a.hours)))
            continue
        first = len(machines)
        machines += [{"offering": o, "mode": mode, "lane": i + 1, "size": w} for i, w in enumerate(widths)]
        room = [h] * len(widths)
        # widest first, then longest, then by name (a stable sort, as pandas' on several columns)
        for size, a in sorted(sized, key=lambda sa: (-sa[0], -sa[1].hours, sa[1].job)):
            left = float(a.hours)
            fit = [i for i, w in enumerate(widths) if w >= size]
            whole = [i for i in fit if room[i] >= left - TOLERANCE]
            # whole in the fullest lane that takes it, else spread over the emptiest (fewest pieces)
            order = [min(whole, key=lambda i: room[i])] if whole else sorted(fit, key=lambda i: -room[i])
            for i in order:
                put = min(left, room[i])
                if put > TOLERANCE:
                    cells.append((a.job, first + i, put))
                    room[i] -= put
                    left -= put
            if left > TOLERANCE:
                raise NoTimetable(f"{a.job} on {o}/{a.period} ({mode}): {left:g} h of a {size}-wide cluster "
                                  f"left over in lanes {widths} of {h:g} h")
    jobs = sorted({j for j, _, _ in cells})
    row = {j: i for i, j in enumerate(jobs)}
    hours = np.zeros((len(jobs), len(machines)))
    for j, m, put in cells:
        hours[row[j], m] += put
    return machines, pd.DataFrame(hours, index=jobs, columns=range(len(machines)))


def _perfect_matching(a: np.ndarray, adj: list[list[int]], col_of_row: np.ndarray) -> bool:
    """Complete the matching ``col_of_row`` (−1: row unmatched) to a perfect one on the entries of ``a``
    above :data:`TOLERANCE`, in place; ``adj`` lists each row's columns in the order to try them.

    Augmenting paths found breadth first from each unmatched row (Kuhn
    1955): a row reaches the columns of its positive entries, a matched
    column leads on to its row, and a free column ends the path, along which
    every row takes the column that reached it. False when some row has no
    augmenting path (then there is no perfect matching).
    """
    row_of_col = np.full(a.shape[1], -1)
    for i in np.flatnonzero(col_of_row >= 0):
        row_of_col[col_of_row[i]] = i
    for root in np.flatnonzero(col_of_row < 0).tolist():
        came_from: dict[int, int] = {}  # column -> the row that reached it
        queue, head, free = [root], 0, -1
        while head < len(queue) and free < 0:
            i = queue[head]
            head += 1
            row = a[i]
            for j in adj[i]:
                if j in came_from or row[j] <= TOLERANCE:
                    continue
                came_from[j] = i
                if row_of_col[j] < 0:
                    free = j
                    break
                queue.append(int(row_of_col[j]))
        if free < 0:
            return False
        j = free
        while j >= 0:  # flip the path: each row on it takes the column that reached it
            i = came_from[j]
            before = int(col_of_row[i])
            col_of_row[i], row_of_col[j] = j, i
            j = before
    return True


def _open_shop(load: pd.DataFrame, h: float) -> list[tuple[int, int, float, float]]:
    """A preemptive schedule of ``load`` (jobs × machines, hours) in [0, h]: (job, machine, start, end) runs.

    Birkhoff's decomposition of the matrix padded to rows and columns of sum h
    (module docstring). Adjacent slices of one job on one machine are merged.
    """
    p = load.to_numpy(float, copy=True)
    p[p < TOLERANCE] = 0.0
    nj, nm = p.shape
    over = np.concatenate([p.sum(axis=1), p.sum(axis=0)]) - h
    if (over > 1e-5 * max(h, 1.0)).any():
        raise NoTimetable(f"a job or a lane holds {over.max() + h:g} h of a {h:g}-h period")
    scale = max(h, float(np.concatenate([p.sum(axis=1), p.sum(axis=0)]).max()))  # h, up to round-off
    n = nj + nm
    a = np.zeros((n, n))
    a[:nj, :nm] = p
    a[:nj, nm:] = np.diag(scale - p.sum(axis=1))
    a[nj:, :nm] = np.diag(scale - p.sum(axis=0))
    a[nj:, nm:] = p.T
    # the columns each row may take, work first: a job its machines before its idle column, a machine's idle
    # row the pairings of idle time (columns >= nm) before its own idle column. Entries only ever shrink
    # to zero, so the lists are made once and a used-up entry is skipped.
    adj = []
    for i in range(n):
        cols = np.flatnonzero(a[i] > TOLERANCE)
        adj.append((cols if i < nj else np.concatenate([cols[cols >= nm], cols[cols < nm]])).tolist())
    runs: list[list] = []
    last_run: dict[tuple[int, int], list] = {}  # the latest run of each (job, machine), to extend
    t = 0.0
    col_of_row = np.full(n, -1)  # the perfect matching, kept from slice to slice and repaired
    while a.max() > TOLERANCE:
        # every line sum is still the same (the time left), so a perfect matching on the positive entries
        # exists (Birkhoff–König). Work first: the last slice's jobs keep the machines they still have hours
        # on, every idle pairing is undone, and the free rows take real work before idle time where they can
        keep = np.arange(n) < nj
        keep &= (col_of_row >= 0) & (col_of_row < nm)
        keep &= a[np.arange(n), np.where(keep, col_of_row, 0)] > TOLERANCE
        col_of_row[~keep] = -1
        if not _perfect_matching(a, adj, col_of_row):  # cannot happen for equal line sums
            raise NoTimetable(f"no perfect matching left with {a.sum():g} h unscheduled")
        r, c = np.arange(n), col_of_row.copy()
        step = float(a[r, c].min())
        for i, j in zip(r[:nj].tolist(), c[:nj].tolist()):
            if j < nm:
                last = last_run.get((i, j))
                if last is not None and abs(last[3] - t) <= TOLERANCE:
                    last[3] = t + step
                else:
                    last_run[(i, j)] = [i, j, t, t + step]
                    runs.append(last_run[(i, j)])
        a[r, c] -= step
        a[a <= TOLERANCE] = 0.0
        t += step
    return [tuple(x) for x in runs]
