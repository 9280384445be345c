"""A built model re-priced for a problem that differs from its own only in prices.

Rent versus buy re-solves one problem many times with one price changed:
capex, lifetime, residual value, electricity, fixed costs, the discount rate,
cloud prices, and the break-even search's capex probes. Those changes move
the objective and nothing else: every variable, every row but ``budget``,
every bound and every valid inequality of the model is the same. Building
the model takes most of such a small solve (docs/performance.md, "Re-priced
models"), so :class:`Models` builds a problem's model once and, for a
problem whose structure is the same, only recomputes what prices enter:

- the offerings table (``price``, ``energy_per_gpu_hour`` and the raw price
  fields) and the periods' discount factors;
- those columns wherever the build copied them into another table (the
  options and the variable tables the plan is read from);
- the objective, and the ``budget`` row (whose coefficients are the
  objective's).

Two problems have the same structure when they are equal after every field
of :data:`PRICE_FIELDS` is blanked (:func:`structure_key`). Everything else,
demand, quotas, windows, regions, existing units, the budget itself, is part
of the key, so a change there builds the model afresh. One reduction reads
prices: duplicate offerings must agree in every price field. When the new
prices make other offerings duplicates (or stop two being ones), the model
is built afresh too.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import Problem
from .formulation import ModelData, add_budget, add_costs, discount_factors, offering_table, positions
from .mip import MIP
from .presolve import Model, build, drop_duplicate_offerings

#: Offering and finance fields that enter the model only through the objective (and the budget row,
#: which bounds the objective). Nothing else may be listed here: a field that decides a variable, a
#: row or a bound would make two different models share a key.
PRICE_FIELDS = ("price_per_hour", "upfront", "capex", "lifetime_years", "residual_fraction", "power_kw", "pue",
                "electricity_per_kwh", "idle_power_fraction", "fixed_per_month", "discount_rate")

#: Columns of the model's offerings table computed from :data:`PRICE_FIELDS` (``offering_table``).
DERIVED = ("price", "energy_per_gpu_hour")


def _blank(tree):
    """``tree`` (a dumped problem file) with the value of every key of :data:`PRICE_FIELDS` set to None."""
    if isinstance(tree, dict):
        return {k: (None if k in PRICE_FIELDS else _blank(v)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_blank(v) for v in tree]
    return tree


def structure_key(problem: Problem) -> bytes:
    """A digest of everything of ``problem`` the model's structure can depend on.

    The problem's tables and file with every price field blanked, and the
    file's path (the sizing reads reference files beside it). Left out: the
    overrides' record, the warnings and the excluded offerings' list, which
    neither the candidates nor the build read.
    """
    O = problem.offerings.copy()
    for c in PRICE_FIELDS:
        if c in O.columns:
            O[c] = np.nan
    spec = _blank(problem.spec.model_dump(mode="python"))
    digest = hashlib.sha256()
    # each part pickled alone: pickle refers back to an object met before, so two equal problems whose
    # parts share different objects would pickle differently as one tuple
    for part in (problem.file, problem.periods, O, problem.services, problem.jobs, spec, problem.catalog_version):
        digest.update(hashlib.sha256(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)).digest())
    return digest.digest()


def _refresh(table: pd.DataFrame, O: pd.DataFrame, P: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its price columns looked up again: offering columns by offering, ``discount`` by period."""
    cols = [c for c in (*PRICE_FIELDS, *DERIVED) if c in table.columns and c in O.columns]
    by_offering = bool(cols) and "offering" in table.columns
    refresh_discount = "discount" in table.columns and "period" in table.columns
    if not by_offering and not refresh_discount:
        return table
    # a shallow copy: only the refreshed columns are new (pandas copies on write, so the model's tables stay)
    out = table.copy(deep=False)
    if by_offering:
        at = positions(O["offering"], out["offering"], "offering")
        for c in cols:
            out[c] = O[c].to_numpy()[at]
    if refresh_discount:
        out["discount"] = P["discount"].to_numpy()[positions(P["period"], out["period"], "period")]
    return out


def reprice(model: Model, problem: Problem) -> Model | None:
    """``model`` (built with the reductions and cuts of :func:`build`) with ``problem``'s prices.

    ``problem`` must have ``model.problem``'s structure (:func:`structure_key`).
    Returns None when the new prices change which offerings are duplicates:
    then the model must be built afresh.
    """
    reduced, dropped = drop_duplicate_offerings(problem)
    old = model.dropped_offerings
    if sorted(map(tuple, dropped[["id", "kept"]].to_numpy())) != sorted(map(tuple, old[["id", "kept"]].to_numpy())):
        return None
    d = model.data
    O = offering_table(reduced)
    if not O["offering"].equals(d.offerings["offering"]):
        raise ValueError("internal error: a re-priced model's offerings differ from the model's")
    rate = problem.discount_rate if problem.objective == "npv" else 0.0
    P = d.periods.copy()
    P["discount"] = discount_factors(P["month"], rate)
    fresh = {f.name: getattr(d, f.name) for f in dataclasses.fields(d) if f.init}  # not the cache: prices changed
    for name, value in fresh.items():
        if isinstance(value, pd.DataFrame):
            fresh[name] = _refresh(value, O, P)
    data = ModelData(**{**fresh, "offerings": O, "periods": P, "rate": rate})
    vt = {name: _refresh(t, O, P) for name, t in model.vars.items()}

    costs = MIP()  # the objective alone, on the model's variable ids
    obj = add_costs(costs, data, {"replicas": vt["inference-replicas"]}, {"hours": vt["training-hours"]},
                    {"running": vt["units-running"], "reserved": vt["units-reserved"], "owned": vt["units-owned-new"]},
                    {"starts": vt["replica-starts"]})
    mip = model.mip.repriced(costs)
    if "budget" in mip.constraints:
        row = MIP(objective_constant=costs.objective_constant)
        add_budget(row, obj, problem.budget)
        mip.replace_block(row.constraints["budget"])
    return dataclasses.replace(model, problem=problem, mip=mip, data=data, vars=vt)


class Models:
    """Models of one candidate set, built once per structure and re-priced for the problems that share it.

    ``build(problem)`` gives the model :func:`optimizer.model.presolve.build`
    gives, and takes a fraction of its time when a problem of the same
    structure was built before; ``prechecked(problem, check)`` runs the
    pipeline's pre-check once per structure. At most ``keep`` structures are
    kept (the least recently used go first).
    """

    def __init__(self, candidates: Candidates, keep: int = 4):
        self.candidates = candidates
        self.keep = keep
        self._built: OrderedDict[bytes, Model] = OrderedDict()
        #: how many models were built and how many re-priced (for the benchmark)
        self.counts = {"built": 0, "repriced": 0}
        self._checked: OrderedDict[bytes, list[dict]] = OrderedDict()

    def build(self, problem: Problem) -> Model:
        key = structure_key(problem)
        base = self._built.get(key)
        if base is not None:
            self._built.move_to_end(key)
            model = reprice(base, problem)
            if model is not None:
                self.counts["repriced"] += 1
                return model
        model = build(problem, self.candidates)
        self.counts["built"] += 1
        if base is None:
            self._built[key] = model
            while len(self._built) > self.keep:
                self._built.popitem(last=False)
        return model

    def prechecked(self, problem: Problem, check: Callable[[], list[dict]]) -> list[dict]:
        """``check()`` (the pipeline's pre-check of ``problem``), run once per structure and copied after.

        What the pre-check finds (a workload no configuration fits, no usable
        offering, a job that cannot finish in its window) depends on no
        price, so problems that differ only in prices (:func:`structure_key`)
        have the same culprits: rent versus buy's 22 solves ran it 22 times,
        23 ms each (docs/performance.md, "Targets, 2026-11-29 (afternoon)").
        At most ``keep`` structures are kept.
        """
        key = structure_key(problem)
        if key not in self._checked:
            self._checked[key] = check()
            while len(self._checked) > self.keep:
                self._checked.popitem(last=False)
        self._checked.move_to_end(key)
        return copy.deepcopy(self._checked[key])


#: The models a process (a worker) keeps from task to task: by the digest of their candidates, or by the
#: structure of their problem (the last few).
_IN_THIS_PROCESS: OrderedDict[bytes, Models] = OrderedDict()
KEEP_CANDIDATE_SETS = 2


def _kept(key: bytes, make) -> Models:
    models = _IN_THIS_PROCESS.get(key)
    if models is None:
        models = _IN_THIS_PROCESS[key] = make()
        while len(_IN_THIS_PROCESS) > KEEP_CANDIDATE_SETS:
            _IN_THIS_PROCESS.popitem(last=False)
    _IN_THIS_PROCESS.move_to_end(key)
    return models


def candidates_digest(candidates: Candidates) -> bytes:
    """A digest of a candidate set's content: the key a worker keeps its models by."""
    return hashlib.sha256(pickle.dumps(candidates, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def models_in_this_process(candidates: Candidates, digest: bytes) -> Models:
    """The :class:`Models` this process keeps for candidates of ``digest`` (made with ``candidates`` if none).

    A worker that solves copies of one problem one after the other (rent
    versus buy's solves side by side) re-prices the ones that change only
    prices, as one process does. The digest is the candidates' content, so
    tasks of another problem never meet these models.
    """
    return _kept(b"candidates:" + digest, lambda: Models(candidates))


def models_of_structure(problem: Problem) -> Models:
    """The :class:`Models` this process keeps for problems of ``problem``'s structure (:func:`structure_key`).

    For a sweep along a price, whose points are rebuilt from the file in
    each task: the candidates do not depend on prices either (they are
    sized from the workloads and the GPU types), so a point of a structure
    met before skips both the candidates and the build.
    """
    from ..candidates import build_candidates

    return _kept(b"structure:" + structure_key(problem), lambda: Models(build_candidates(problem)))
