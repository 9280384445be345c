"""Whether a change to the model's build leaves every model the same: dump on one commit, compare on another.

A rewrite of a family or of a reduction for speed must give the same
model: the same columns, rows, bounds, costs and names, and the same
tables the plan reads (the labelled variable tables and the model data).
This script builds a fixed set of problems (the shipped examples, q3
against the default catalog, and small generated problems of every
family, under both objectives) and writes what each build gives to a
directory; run on the changed code with ``compare``, it names every
problem whose model differs and in what::

    git stash; python bench/same_model.py dump /tmp/models; git stash pop
    python bench/same_model.py compare /tmp/models

``dump`` refuses a directory that already holds dumps; ``compare`` names a
problem the dump does not have ("no dump") and exits 1 when any problem
differs or is missing. It also prints the seconds the builds took in all (one build each; for
timings use ``stages.py``). docs/performance.md reports where it was used.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: the fields of the assembled model compared
ARRAY_FIELDS = ("n_vars", "n_rows", "rows", "cols", "vals", "row_lo", "row_hi", "col_lo", "col_hi", "integer", "c",
                "c0", "var_names", "row_names")


def problems() -> list[tuple[str, object]]:
    """(name, Problem) of every problem built: the shipped examples, q3 on the default catalog, generated ones."""
    from bench.generate import problem
    from optimizer.load import load_problem
    from optimizer.studies.whatif import build, overlay, read_raw

    out = [(Path(f).name, load_problem(f)) for f in sorted(glob.glob(str(ROOT / "problems" / "*.yaml")))]
    q3 = str(ROOT / "problems" / "q3.yaml")
    out.append(("q3 + catalog default", build(overlay(read_raw(q3), q3, ("catalog=[default]",), ()), q3)))
    for family in ("standard", "training-heavy"):
        for seed in (0, 1):
            out.append((f"{family} x0.1 seed {seed}", problem(0.1, seed, weeks=3, family=family)))
    out.append(("catalog-wide x0.1", problem(0.1, family="catalog-wide")))  # q3's own shape: no seed or weeks
    for family in ("standard", "training-heavy"):
        out.append((f"{family} x0.1 seed 2 npv", problem(0.1, 2, weeks=3, family=family, objective="npv")))
    return out


def _table(df: pd.DataFrame) -> dict:
    """A table as plain lists by column name (missing values as None), so that equal tables compare equal."""
    df = df.reset_index(drop=True)
    return {c: df[c].astype(object).where(df[c].notna(), None).tolist() for c in sorted(map(str, df.columns))}


def _plain(v):
    if isinstance(v, pd.DataFrame):
        return _table(v)
    if isinstance(v, pd.Series):
        return _table(v.to_frame())
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return v


def what_it_builds(pr) -> dict:
    """The assembled model's arrays, the labelled variable tables and the model data of ``pr``'s build."""
    from optimizer.candidates import build_candidates
    from optimizer.model import presolve

    model = presolve.build(pr, build_candidates(pr))
    a = model.mip.arrays()
    out = {f"arrays.{k}": getattr(a, k) for k in ARRAY_FIELDS}
    out.update({f"vars.{k}": _plain(v) for k, v in model.vars.items() if isinstance(v, pd.DataFrame)})
    out.update({f"data.{f.name}": _plain(getattr(model.data, f.name)) for f in dataclasses.fields(model.data)
                if f.name != "cache"})
    return out


def differences(now: dict, before: dict) -> list[str]:
    """The names of the parts that differ (or exist on one side only)."""
    out = sorted(set(now) ^ set(before))
    for k in sorted(set(now) & set(before)):
        a, b = now[k], before[k]
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            same = isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
                and np.array_equal(a, b)
        else:
            same = a == b
        if not same:
            out.append(k)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("dump", "compare"))
    ap.add_argument("directory")
    args = ap.parse_args(argv)
    dumps = glob.glob(os.path.join(args.directory, "*.pkl"))
    if args.mode == "dump" and dumps:
        ap.error(f"{args.directory} already holds {len(dumps)} dumps: give an empty or new directory "
                 f"(an earlier dump is never overwritten)")
    if args.mode == "compare" and not dumps:
        ap.error(f"{args.directory} holds no dumps: run 'dump {args.directory}' on the commit to compare with first")
    os.makedirs(args.directory, exist_ok=True)
    seconds, differ = 0.0, 0
    for name, pr in problems():
        t = time.perf_counter()
        built = what_it_builds(pr)
        seconds += time.perf_counter() - t
        path = os.path.join(args.directory, hashlib.sha256(name.encode()).hexdigest()[:16] + ".pkl")
        if args.mode == "dump":
            with open(path, "wb") as f:
                pickle.dump(built, f)
            print(f"wrote {name}")
            continue
        if not os.path.exists(path):  # a problem added after the dump
            differ += 1
            print(f"no dump  {name}")
            continue
        with open(path, "rb") as f:
            diff = differences(built, pickle.load(f))
        differ += bool(diff)
        print(f"{'differs' if diff else 'same   '}  {name}" + (f": {', '.join(diff)}" if diff else ""))
    print(f"builds: {seconds:.2f} s in all")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
