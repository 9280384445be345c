"""Why a problem has no plan: the pre-checks, then an elastic re-solve (docs/diagnosis.md).

:func:`diagnose` adds to :func:`~optimizer.studies.precheck.precheck` the
smallest relaxations of an elastic model: the normal MIP from
:func:`~optimizer.model.formulation.build_model` with non-negative slack
columns (:meth:`~optimizer.model.mip.MIP.add_slack`) on the demand,
min-replicas, training-progress and budget rows, and quotas (``max_units``)
made elastic. A phase whose solve ends without a plan (a time limit) is
reported as an ``unknown`` culprit saying so; anything else that fails is a
bug and propagates.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..candidates import Candidates
from ..load import Problem
from ..solve.backends import DEFAULT_SOLVER, solve
from ..model.formulation import build_model
from .precheck import TOL, _fmt, culprit, precheck


class Elastic:
    """The normal MIP made elastic once; the phases change only its objective and some bounds.

    Built with :func:`~optimizer.model.formulation.build_model`, then:

    - a slack ``s ≥ 0`` (:meth:`~optimizer.model.mip.MIP.add_slack`) on every
      ``inference-demand`` row (rps) and ``inference-min-replicas`` row
      (replicas), each with the weight 1 ÷ its row's requirement, and on
      every ``training-progress`` row (a share of the job, weight 1), so the
      weighted sum counts shares of what was asked;
    - a slack on the ``budget`` row (currency), never penalised: the cost
      objective of phase 2 sets it;
    - ``quota-excess[offering]`` ≥ 0 (units beyond ``max_units``), at first
      bounded to 0, with the quota rows made elastic up to it;
    - ``elastic-bound``: Σ weight·slack ≤ b, at first b = ∞.
    """

    def __init__(self, problem: Problem, cands: Candidates):
        self.problem = problem
        m, _, _ = build_model(problem, cands)
        self.m = m
        self.cost_terms = _aggregate(m.objective_terms())
        self.cost_constant = float(m.objective_constant)
        self.slacks: dict[str, pd.DataFrame] = {}
        c = m.constraints

        def elastic(block: str, weight: np.ndarray) -> None:
            if block in c and c[block].size:
                s = m.add_slack(block, 1.0)
                s["weight"] = weight
                self.slacks[block] = s

        if "inference-demand" in c:
            elastic("inference-demand", 1.0 / np.maximum(c["inference-demand"].lower, 1e-9))
        if "inference-min-replicas" in c:
            elastic("inference-min-replicas", 1.0 / np.maximum(c["inference-min-replicas"].lower, 1.0))
        if "training-progress" in c:
            elastic("training-progress", 1.0)
        self.budget = m.add_slack("budget", -1.0) if "budget" in c and c["budget"].size else None
        self.excess = _relax_quotas(m, problem)
        parts = [s[["var", "weight"]] for s in self.slacks.values() if len(s)]
        self.weighted = (pd.concat(parts, ignore_index=True).rename(columns={"weight": "coef"})
                         if parts else pd.DataFrame({"var": np.array([], np.int64), "coef": np.array([], float)}))
        self.has_bound = len(self.weighted) > 0
        if self.has_bound:
            m.add_constraints("elastic-bound", [self.weighted.assign(k=0)[["k", "var", "coef"]]], "<=",
                              pd.DataFrame({"k": [0], "rhs": [np.inf]}), keys=["k"])

    # -- knobs ----------------------------------------------------------------
    def objective(self, terms: pd.DataFrame, constant: float = 0.0) -> None:
        """Make the objective exactly ``terms + constant`` (by adding the difference)."""
        cur = _aggregate(self.m.objective_terms())
        want = _aggregate(terms)
        delta = want.sub(cur, fill_value=0.0)
        delta = delta[delta != 0]
        self.m.add_objective(pd.DataFrame({"var": delta.index.to_numpy(np.int64), "coef": delta.to_numpy(float)}),
                             constant - self.m.objective_constant)

    def bound(self, value: float) -> None:
        if self.has_bound:
            self.m.constraints["elastic-bound"].upper[:] = value

    def quotas(self, elastic: bool) -> None:
        if self.excess is not None:
            b = self.m.variables["quota-excess"]
            b.upper[:] = np.inf if elastic else 0.0

    # -- phases ---------------------------------------------------------------
    def min_slack(self) -> None:
        self.objective(self.weighted)

    def min_cost(self) -> None:
        self.objective(self.cost_terms.rename("coef").rename_axis("var").reset_index(), self.cost_constant)

    def min_excess(self) -> None:
        G = self.problem.offerings["gpus_per_unit"].astype(float)
        ex = self.excess
        self.objective(pd.DataFrame({"var": ex["var"].to_numpy(np.int64),
                                     "coef": ex["offering"].map(G).to_numpy(float)}))

    # -- reading a solution ---------------------------------------------------
    def weighted_sum(self, x: np.ndarray) -> float:
        if not self.has_bound:
            return 0.0
        return float((x[self.weighted["var"].to_numpy(np.int64)] * self.weighted["coef"].to_numpy(float)).sum())

    def slack_values(self, block: str, x: np.ndarray) -> pd.DataFrame:
        s = self.slacks.get(block)
        if s is None or s.empty:
            return pd.DataFrame()
        s = s.copy()
        s["value"] = x[s["var"].to_numpy(np.int64)]
        return s[s["value"] * s["weight"] > TOL]


def _aggregate(terms: pd.DataFrame) -> pd.Series:
    if terms is None or len(terms) == 0:
        return pd.Series(dtype=float)
    return terms.groupby("var")["coef"].sum()


def _relax_quotas(m, problem: Problem) -> pd.DataFrame | None:
    """Let units exceed ``max_units`` by ``quota-excess[offering]`` units (bounded to 0 until a phase frees it).

    Every ``units-*`` variable with a finite upper bound loses it and gets the
    row ``units − excess ≤ bound``; rows whose right-hand side is the quota
    (``capacity-quota`` and ``training-fit-quota``, in units) get a slack no
    larger than the excess.
    """
    capped = [(name, b) for name, b in m.variables.items()
              if name.startswith("units-") and "offering" in b.coords and np.isfinite(b.upper).any()]
    offerings = sorted({o for _, b in capped for o in b.coords.loc[np.isfinite(b.upper), "offering"]})
    if not offerings:
        return None
    ex = m.add_variables("quota-excess", pd.DataFrame({"offering": offerings}), upper=0.0)
    ex_var = ex.set_index("offering")["var"]
    link, rhs = [], []
    for name, b in capped:
        fin = np.isfinite(b.upper)
        ids = b.ids[fin]
        off = b.coords.loc[fin, "offering"].to_numpy()
        rhs.append(pd.DataFrame({"row": ids, "rhs": b.upper[fin]}))
        link.append(pd.DataFrame({"row": ids, "var": ids, "coef": 1.0}))
        link.append(pd.DataFrame({"row": ids, "var": ex_var.reindex(off).to_numpy(np.int64), "coef": -1.0}))
        b.upper[fin] = np.inf
    for block in ("capacity-quota", "training-fit-quota"):
        if block not in m.constraints or m.constraints[block].size == 0:
            continue
        cb = m.constraints[block]
        mask = cb.coords["offering"].isin(ex_var.index).to_numpy()
        if not mask.any():
            continue
        s = m.add_slack(block, -1.0, rows=mask, name=f"quota:{block}")
        sid = -1 - s["var"].to_numpy(np.int64)  # link rows keyed apart from the units rows (ids ≥ 0)
        link.append(pd.DataFrame({"row": sid, "var": s["var"].to_numpy(np.int64), "coef": 1.0}))
        link.append(pd.DataFrame({"row": sid, "var": ex_var.reindex(s["offering"]).to_numpy(np.int64),
                                  "coef": -1.0}))
        rhs.append(pd.DataFrame({"row": sid, "rhs": 0.0}))
    m.add_constraints("quota-elastic", link, "<=", pd.concat(rhs, ignore_index=True), keys=["row"])
    return ex


def _solve(m, solver: str, time_limit: float | None, threads: int | None):
    r = solve(m, solver=solver, time_limit=time_limit, gap=1e-6, threads=threads)
    return r if r.status.has_plan else None


def diagnose(problem: Problem, candidates: Candidates, solver: str = DEFAULT_SOLVER,
             time_limit: float | None = None, threads: int | None = None,
             pre: list[dict] | None = None) -> list[dict]:
    """Every culprit of an infeasible problem: pre-checks, then the elastic re-solves.

    Phase 1 minimises the weighted slacks (demand, min replicas, training
    progress; the budget free); phase 2, when there is a budget, finds the
    least cost with the slacks held at that minimum; phase 3, when slack
    remains and some offering has a quota, asks how many units beyond
    ``max_units`` would remove it. A phase that ends without a plan within
    ``time_limit`` becomes an ``unknown`` culprit saying so.
    """
    if pre is None:
        pre = precheck(problem, candidates)
    found = _elastic_culprits(problem, candidates, solver, time_limit, threads)
    # a job that cannot run anywhere also shows as training hours missing: the root cause says more
    rooted = {d["workload"] for d in pre if d["kind"] in ("region", "no-fit", "slo", "topology", "placement")}
    found = [d for d in found if not (d["kind"] == "training" and d["workload"] in rooted)]
    # the same culprit from both: keep the pre-check's (more specific) words when the amounts agree
    key = (lambda d: (d["kind"], d["workload"], d["offering"], d["period"]))
    pre_by_key = {key(d): d for d in pre}
    merged = []
    for d in found:
        p = pre_by_key.get(key(d))
        if p is not None and p["amount"] is not None and d["amount"] is not None and math.isclose(
                p["amount"], d["amount"], rel_tol=1e-6, abs_tol=1e-6):
            d = p
        merged.append(d)
    seen = {key(d) for d in merged}
    out = [d for d in pre if key(d) not in seen] + merged
    if not out:
        out = [culprit("unknown", "no single requirement explains the infeasibility: demand, training, budget "
                                  "and quotas can all be met by the elastic model")]
    return out


def _elastic_culprits(problem: Problem, cands: Candidates, solver: str, time_limit: float | None,
                      threads: int | None) -> list[dict]:
    out: list[dict] = []
    cur = problem.currency
    el = Elastic(problem, cands)
    # phase 1: the smallest weighted shortfall, quotas as they are, the budget free
    el.min_slack()
    r = _solve(el.m, solver, time_limit, threads)
    if r is None:
        return [culprit("unknown", "the elastic re-solve found no relaxation within the limit "
                                   "(try a larger --time-limit)")]
    best = el.weighted_sum(r.x)
    out += _shortfalls(problem, el, r.x)

    # phase 2: the least cost with the shortfall held at its minimum
    if problem.budget is not None and el.budget is not None:
        el.bound(best * (1 + 1e-6) + TOL)
        el.min_cost()
        rb = _solve(el.m, solver, time_limit, threads)
        if rb is None:
            out.append(culprit("unknown", "the least cost that meets everything else was not found within the limit"))
        elif rb.objective > problem.budget + max(TOL, 1e-9 * abs(problem.budget)):
            least = float(rb.objective)
            what = "cost" if problem.objective == "cost" else "NPV of costs"
            rest = "everything else" if best <= TOL else "everything else that can be met"
            out.append(culprit(
                "budget", f"constraints.budget: {_fmt(problem.budget)} {cur} is too small; the least {what} "
                          f"that meets {rest} is {_fmt(least)} {cur} ({_fmt(least - problem.budget)} {cur} over)",
                amount=least, unit=cur, budget=float(problem.budget), excess=round(least - problem.budget, 6)))

    # phase 3: would more units than max_units remove the shortfall? The fewest extra GPUs that do.
    if best > TOL and el.excess is not None:
        el.quotas(True)
        el.bound(np.inf)
        el.min_slack()
        rc = _solve(el.m, solver, time_limit, threads)
        if rc is not None:
            rest = el.weighted_sum(rc.x)
            if rest < best - TOL:
                el.bound(rest * (1 + 1e-6) + TOL)
                el.min_excess()
                rd = _solve(el.m, solver, time_limit, threads)
                if rd is not None:
                    out += _quota_culprits(problem, el.excess, rd.x, full=rest <= TOL)
    return out


def _shortfalls(problem: Problem, el: Elastic, x: np.ndarray) -> list[dict]:
    out = []
    c_dem = el.slack_values("inference-demand", x)
    multi = {s.name for s in problem.services if len(s.buckets) > 1}
    for r in c_dem.itertuples(index=False):
        need = 1.0 / r.weight
        bucket = f" (request bucket {r.bucket})" if r.service in multi else ""
        out.append(culprit(
            "demand", f"inference[{r.service}] period {r.period}{bucket}: {_fmt(r.value)} of the {_fmt(need)} rps "
                      f"demand cannot be served with the offerings and quotas allowed",
            workload=r.service, period=r.period, amount=float(r.value), unit="rps",
            **({"bucket": r.bucket} if r.service in multi else {})))
    for r in el.slack_values("inference-min-replicas", x).itertuples(index=False):
        out.append(culprit(
            "min-replicas", f"inference[{r.service}] period {r.period}: {_fmt(r.value)} of its "
                            f"{_fmt(1.0 / r.weight)} min_replicas cannot be placed",
            workload=r.service, period=r.period, amount=float(r.value), unit="replicas"))
    jobs = {j.name: j for j in problem.jobs}
    tr = el.slack_values("training-progress", x)
    for r in tr.itertuples(index=False):
        window = f" by month {jobs[r.job].deadline_month}"
        out.append(culprit(
            "training", f"training[{r.job}]: {100 * r.value:.1f} % of the job on {r.config} cannot be done{window} "
                        "(deadline_month, regions, quotas or capacity shared with inference)",
            workload=r.job, amount=float(r.value), unit="share of the job", config=r.config))
    return out


def _quota_culprits(problem: Problem, ex: pd.DataFrame | None, x: np.ndarray, full: bool) -> list[dict]:
    if ex is None:
        return []
    out = []
    O = problem.offerings
    for o, v in zip(ex["offering"], x[ex["var"].to_numpy(np.int64)]):
        if v <= TOL:
            continue
        units = math.ceil(v - 1e-6)
        mx = O.at[o, "max_units"]
        now = "" if pd.isna(mx) else f" (now {int(mx)})"
        effect = "would remove the shortfall" if full else "would reduce the shortfall (the rest needs other changes)"
        out.append(culprit(
            "capacity", f"offerings[{o}].max_units{now}: {units} more unit(s) {effect}",
            offering=o, amount=float(units), unit="units"))
    return out
