"""Rent versus buy: strategies, break-even, cash flows, NPV and sensitivity.

Every number here comes from solves of the same MIP (:func:`optimizer.pipeline.run`)
on modified *copies* of a :class:`~optimizer.load.Problem`, or from closed forms
of the cost semantics of docs/formulation.md. docs/finance.md gives every
formula with a worked example. Rendering (tables, JSON, CSV, XLSX) is in
:mod:`optimizer.render.rentbuy`.

- :func:`compare_strategies`: ``rent`` (no new owned units), ``buy`` (owned
  capacity only) and ``mix`` (the optimum), each solved on a copy.
- :func:`break_even_capex`: the highest capex per unit at which the optimum
  still buys a new unit of an owned offering (bracket, then safeguarded
  bisection on solves to within 0.5 %).
- :func:`utilisation_table`: the closed-form break-even utilisation of each
  owned offering against every rental offering of its GPU type.
- :func:`payback`: months until the owned units' savings against renting the
  same GPU-hours on demand repay their capex.
- :func:`cash_flows`: per month and per year, from the plan's ledger; their
  present values add up to the plan's NPV.
- :func:`sensitivity`: a tornado of the mix's objective and owned units when
  one input moves −20 % and +20 %.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import hashlib
import math
import pickle
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..solve.backends import DEFAULT_SOLVER, Status
from ..candidates import Candidates, build_candidates
from ..model.formulation import discount_factors, horizon_end_month, owned_unit_costs
from ..model.mip import NamedPoint
from ..model.reprice import Models, candidates_digest, models_in_this_process
from ..load import Problem
from ..vocabulary import HOURS_PER_MONTH, HOURS_PER_YEAR, RENTED_OR_RESERVED
from ..pipeline import run
from ..plan import Plan
from ..errors import InputError
from ..executors import Inline

#: Break-even capex is located to within this share of its value.
CAPEX_TOLERANCE = 0.005
#: Upward bracketing of the break-even capex stops after this many doublings.
MAX_DOUBLINGS = 10
#: A break-even search stops after this many solves (and says so).
MAX_SOLVES = 40

Solver = Callable[[Problem], Plan]


# ---------------------------------------------------------------------------
# problem transforms (never in place)


def variant(problem: Problem, offerings: pd.DataFrame | None = None, services=None,
            discount_rate: float | None = None) -> Problem:
    """A deep copy of ``problem`` with some parts replaced; the original is never touched."""
    pr = copy.deepcopy(problem)
    if offerings is not None:
        pr.offerings = offerings.copy()
    if services is not None:
        pr.services = list(services)
    if discount_rate is not None:
        pr.spec = pr.spec.model_copy(update={"finance": pr.spec.finance.model_copy(
            update={"discount_rate": float(discount_rate)})})
    return pr


def owned_ids(problem: Problem) -> list[str]:
    O = problem.offerings
    return list(O.index[O["pricing"] == "owned"])


def rent_strategy(problem: Problem) -> Problem:
    """No new owned units (max units = existing units); everything else as it is."""
    O = problem.offerings.copy()
    own = O["pricing"] == "owned"
    O["max_units"] = O["max_units"].astype(float)
    O.loc[own, "max_units"] = O.loc[own, "existing_units"].fillna(0).astype(float)
    return variant(problem, offerings=O)


def buy_strategy(problem: Problem) -> Problem:
    """Owned capacity only: on-demand, spot and reserved offerings removed (existing owned kept)."""
    O = problem.offerings
    return variant(problem, offerings=O[O["pricing"] == "owned"])


def forbid_new_units(problem: Problem, oid: str) -> Problem:
    """No new units of one owned offering."""
    O = problem.offerings.copy()
    O["max_units"] = O["max_units"].astype(float)
    O.loc[oid, "max_units"] = float(0 if pd.isna(O.at[oid, "existing_units"]) else O.at[oid, "existing_units"])
    return variant(problem, offerings=O)


def with_capex(problem: Problem, oid: str, capex: float) -> Problem:
    O = problem.offerings.copy()
    O["capex"] = O["capex"].astype(float)
    O.loc[oid, "capex"] = float(capex)
    return variant(problem, offerings=O)


def scale_demand(problem: Problem, factor: float) -> Problem:
    """Every inference service's demand (every period) times ``factor``."""
    services = []
    for s in problem.services:
        d = s.demand_rps
        d = {k: v * factor for k, v in d.items()} if isinstance(d, dict) else d * factor
        services.append(s.model_copy(update={"demand_rps": d}))
    return variant(problem, services=services)


def _scale_columns(problem: Problem, kinds: tuple[str, ...], columns: list[str], factor: float,
                   upper: float | None = None) -> Problem:
    O = problem.offerings.copy()
    rows = O["pricing"].isin(kinds)
    for c in columns:
        O[c] = O[c].astype(float)
        v = O.loc[rows, c] * factor
        O.loc[rows, c] = v.clip(upper=upper) if upper is not None else v
    return variant(problem, offerings=O)


@dataclass(frozen=True)
class Parameter:
    """One input of the sensitivity analysis: how to scale it, and whether the problem has it."""

    name: str
    description: str
    apply: Callable[[Problem, float], Problem]
    present: Callable[[Problem], bool]


def _owned_has(col: str) -> Callable[[Problem], bool]:
    def present(pr: Problem) -> bool:
        O = pr.offerings
        v = O.loc[O["pricing"] == "owned", col].astype(float).fillna(0)
        return bool((v > 0).any())

    return present


PARAMETERS: list[Parameter] = [
    Parameter("capex", "capex of every owned offering",
              lambda pr, f: _scale_columns(pr, ("owned",), ["capex"], f), _owned_has("capex")),
    Parameter("lifetime", "lifetime_years of every owned offering",
              lambda pr, f: _scale_columns(pr, ("owned",), ["lifetime_years"], f), _owned_has("lifetime_years")),
    Parameter("residual value", "residual_fraction of every owned offering (at most 1)",
              lambda pr, f: _scale_columns(pr, ("owned",), ["residual_fraction"], f, upper=1.0),
              _owned_has("residual_fraction")),
    Parameter("discount rate", "finance.discount_rate (moves the objective only under objective: npv)",
              lambda pr, f: variant(pr, discount_rate=min(1.0, pr.discount_rate * f)),
              lambda pr: pr.discount_rate > 0),
    Parameter("electricity price", "electricity_per_kwh of every owned offering",
              lambda pr, f: _scale_columns(pr, ("owned",), ["electricity_per_kwh"], f),
              _owned_has("electricity_per_kwh")),
    Parameter("fixed costs", "fixed_per_month (colocation, support, staff) of every owned offering",
              lambda pr, f: _scale_columns(pr, ("owned",), ["fixed_per_month"], f), _owned_has("fixed_per_month")),
    Parameter("demand", "demand_rps of every inference service, every period",
              scale_demand, lambda pr: bool(pr.services)),
    Parameter("cloud prices", "price_per_hour (and upfront) of every on-demand, spot and reserved offering",
              lambda pr, f: _scale_columns(pr, RENTED_OR_RESERVED, ["price_per_hour", "upfront"], f),
              lambda pr: bool(pr.offerings["pricing"].isin(RENTED_OR_RESERVED).any())),
]


# ---------------------------------------------------------------------------
# solving


def make_solver(problem: Problem, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
                gap: float = 1e-6, threads: int | None = None, executor=None) -> tuple[Solves, Candidates]:
    """A solve function for copies of ``problem``; candidates are built once and shared.

    Candidate configurations depend on the workloads and the GPU types offered,
    never on prices, capex or demand, so every transform here can reuse them.
    ``executor`` (:mod:`optimizer.executors`): where the solves run.
    """
    cands = build_candidates(problem)
    options = {"solver": solver, "time_limit": time_limit, "gap": gap, "threads": threads}
    return Solves(cands, options, executor), cands


def solve_copy(task: tuple[Problem, Models | tuple[bytes, Candidates], dict]) -> tuple[Plan, float]:
    """Solve one copy of the problem (in this process or on a worker): its plan and the wall seconds it took.

    The second item is the models built so far (:class:`Models`) in this
    process, or on a worker the candidates with their digest, by which the
    worker keeps its own (:func:`models_in_this_process`). Either way a copy
    that changes only prices is re-priced rather than built.
    """
    problem, models, options = task
    t0 = time.perf_counter()
    if not isinstance(models, Models):
        digest, cands = models
        models = models_in_this_process(cands, digest)
    plan = run(problem, models=models, **options)
    return plan, time.perf_counter() - t0


class Solves:
    """Where the analysis's solves run: one after the other in this process, or side by side on an executor.

    Called with a problem, it solves it and returns its plan (the break-even
    search: each solve depends on the one before); :meth:`timed` solves
    several independent problems (strategies, sensitivity) and returns their
    plans in order, each with the wall seconds its solve took. On an executor of more than one worker at most
    ``workers`` solves run at once, and a solve called for alone (the
    break-even chain) goes before the queued ones of :meth:`timed`, so the
    chain, which cannot run ahead, never waits behind the sensitivity's
    solves. Every plan is the one the same solve gives in this process.

    A problem asked for twice is solved once: the break-even search's
    problem without new units of the one owned offering is the ``rent``
    strategy's when the problem owns a single offering (its key is the
    problem's pickled bytes, so only a copy equal to the byte is shared).

    A copy that differs from one solved before in the same process only in
    prices (the sensitivity's capex, lifetime, residual value, electricity,
    fixed costs, discount rate and cloud prices; the break-even's capex
    probes) gets that copy's model re-priced instead of built
    (:mod:`optimizer.model.reprice`); each worker keeps its own models.
    """

    def __init__(self, cands: Candidates, options: dict, executor=None):
        self.options = options
        self.executor = executor if executor is not None and executor.workers > 1 else None
        # in this process the models themselves; a worker gets the candidates and keeps its models by their digest
        self.models = Models(cands) if self.executor is None else (candidates_digest(cands), cands)
        self._gate = threading.Condition()
        self._free = 0 if self.executor is None else self.executor.workers
        self._first_in_line = 0
        self._asked: dict[bytes, cf.Future] = {}  # every problem submitted, by its pickled bytes' digest
        #: plans every solve submitted from now on starts from, where they meet its model's rows (:meth:`start_from`)
        self.known: list[NamedPoint] = []
        #: the violations of every plan that failed its audit, in the order the solves ended (a bug in gpuopt)
        self.failed_audits: list[list[str]] = []

    def start_from(self, plan: Plan) -> None:
        """Every solve from now on starts from ``plan`` (read by name in its model) where it is a plan of it.

        The break-even probes and the sensitivity's copies differ from the
        mix in one input; where the mix's plan is still a plan of the copy
        (a price, a capex, a lifetime changed), the copy's search starts from it, so
        that a copy's plan never costs more than the mix's plan at the
        copy's inputs because a search stopped on its time limit. Without a
        time limit every solve is proven within the gap either way.
        """
        point = plan.point()
        self.known = [] if point is None else [point]

    @property
    def side_by_side(self) -> bool:
        return self.executor is not None

    def __call__(self, problem: Problem) -> Plan:
        return self._submit(problem, first=True).result()[0]

    def timed(self, problems: list[Problem]) -> list[tuple[Plan, float]]:
        futures = [self._submit(pr, first=False) for pr in problems]
        return [f.result() for f in futures]

    def again(self, problem: Problem, known: Sequence[NamedPoint]) -> Plan:
        """``problem`` searched again from the plans ``known``; its plan is the one asked for ``problem`` from
        now on (a search stopped on its time limit above another strategy's plan, :func:`compare_strategies`)."""
        future = self._start(problem, True, known)
        self._asked[self._key(problem)] = future
        return future.result()[0]

    @staticmethod
    def _key(problem: Problem) -> bytes:
        return hashlib.sha256(pickle.dumps(problem)).digest()

    def _submit(self, problem: Problem, first: bool):
        key = self._key(problem)
        # the chain's thread and this one may both miss the same new key: then it is solved twice, as before
        if key not in self._asked:
            self._asked[key] = self._start(problem, first)
        return self._asked[key]

    def _start(self, problem: Problem, first: bool, known: Sequence[NamedPoint] = ()):
        known = [*known, *self.known]
        task = (problem, self.models, {**self.options, "known": known} if known else self.options)
        if self.executor is None:
            future = Inline().submit(solve_copy, task)
            future.add_done_callback(self._audited)
            return future
        with self._gate:
            self._first_in_line += first
            while self._free == 0 or (not first and self._first_in_line):
                self._gate.wait()
            self._free -= 1
            self._first_in_line -= first
        future = self.executor.submit(solve_copy, task)
        future.add_done_callback(self._release)
        future.add_done_callback(self._audited)
        return future

    def _audited(self, future) -> None:
        # a solve that raised raises again where its result is asked for; here only the plans are read
        if future.exception() is None:
            plan = future.result()[0]
            if plan.audit:
                self.failed_audits.append(list(plan.audit))

    def _release(self, _future) -> None:
        with self._gate:
            self._free += 1
            self._gate.notify_all()


def timed(solve: Solver, problems: list[Problem]) -> list[tuple[Plan, float]]:
    """``solve`` applied to each of ``problems`` (side by side when ``solve`` can, :class:`Solves`): each plan
    with the wall seconds its solve took."""
    if isinstance(solve, Solves):
        return solve.timed(problems)
    out = []
    for pr in problems:
        t0 = time.perf_counter()
        plan = solve(pr)
        out.append((plan, time.perf_counter() - t0))
    return out


def new_units(plan: Plan, oid: str) -> int:
    """New units of owned offering ``oid`` in the plan (0 without a plan)."""
    if not plan.status.has_plan or plan.commitments.empty:
        return 0
    c = plan.commitments
    rows = c[(c["offering"] == oid) & (c["pricing"] == "owned")]
    return int(rows["new_units"].fillna(0).sum())


def owned_new_units(plan: Plan) -> int:
    if not plan.status.has_plan or plan.commitments.empty:
        return 0
    c = plan.commitments
    return int(c.loc[c["pricing"] == "owned", "new_units"].fillna(0).sum())


def usable_offerings(plan: Plan) -> set[str]:
    """Offerings some workload may use (an inference or training option exists on them)."""
    d = plan.data
    if d is None:
        return set()
    return set(d.inference_options["offering"]) | set(d.training_options["offering"])


def units_summary(plan: Plan) -> pd.DataFrame:
    """Units per offering the plan uses: most held at once, hour-weighted average, GPU-hours used.

    Reserved offerings also list units per term block (``blocks``, in start-month order).
    ``utilisation`` is the busy share of held GPU-hours (reserved, owned); rented
    offerings have none (they bill what runs).
    """
    cols = ["offering", "pricing", "gpu", "units_max", "units_avg", "new_units", "existing_units", "blocks",
            "gpu_hours_used", "utilisation"]
    if not plan.status.has_plan or plan.usage.empty:
        return pd.DataFrame(columns=cols)
    P = plan.problem.periods
    O = plan.problem.offerings
    u = plan.usage.assign(hours=plan.usage["period"].map(P["hours"]))
    u["used_gh"] = (u["inference_gpus"] + u["training_gpus"]) * u["hours"]
    u["cap_gh"] = u["capacity_gpus"] * u["hours"]
    u["unit_h"] = u["units"] * u["hours"]
    g = u.groupby("offering").agg(units_max=("units", "max"), unit_h=("unit_h", "sum"),
                                  gpu_hours_used=("used_gh", "sum"), cap=("cap_gh", "sum")).reset_index()
    g["units_avg"] = g["unit_h"] / float(P["hours"].sum())
    g["utilisation"] = np.where(g["cap"] > 0, g["gpu_hours_used"] / g["cap"].where(g["cap"] > 0), np.nan)
    g["pricing"] = g["offering"].map(O["pricing"])
    g["gpu"] = g["offering"].map(O["gpu"])
    # rented units bill what runs (training by the hour, beside the units running for inference): no idle share
    g.loc[g["pricing"].isin(["on_demand", "spot"]), "utilisation"] = np.nan
    c = plan.commitments
    own = c[c["pricing"] == "owned"].set_index("offering")
    g["new_units"] = g["offering"].map(own["new_units"]) if len(own) else np.nan
    g["existing_units"] = g["offering"].map(own["existing_units"]) if len(own) else np.nan
    res = c[c["pricing"] == "reserved"].sort_values("start_month")
    blocks = {}
    for oid, rows in res.groupby("offering"):
        term = int(O.at[oid, "term_months"])
        starts = sorted({int(m) // term for m in P["month"]})
        per = dict(zip(rows["block"], rows["units"]))
        blocks[oid] = "/".join(str(int(per.get(b, 0))) for b in starts)
    g["blocks"] = [blocks.get(o, "") for o in g["offering"]]
    g = g[(g["units_max"] > 0) | (g["gpu_hours_used"] > 0)]
    order = {"owned": 0, "reserved": 1, "on_demand": 2, "spot": 3}
    g = g.sort_values(["pricing", "offering"], key=lambda s: s.map(order) if s.name == "pricing" else s)
    return g[cols].reset_index(drop=True)


def summary_text(units: pd.DataFrame) -> str:
    parts = []
    for r in units.itertuples():
        if r.pricing == "owned":
            new = 0 if pd.isna(r.new_units) else int(r.new_units)
            parts.append(f"{r.offering} {int(r.units_max)} owned ({new} new)")
        elif r.pricing == "reserved":
            parts.append(f"{r.offering} {r.blocks} reserved")
        elif r.units_max > 0:
            parts.append(f"{r.offering} <= {int(r.units_max)} {r.pricing} (avg {r.units_avg:.1f})")
        else:  # rented by the hour for training only
            parts.append(f"{r.offering} {r.pricing} {r.gpu_hours_used:,.0f} GPU-h")
    return "; ".join(parts) if parts else "(nothing)"


# ---------------------------------------------------------------------------
# strategies


def short_message(message: str, limit: int = 2) -> str:
    """The first reasons of a solver message ("; "-separated), with how many more there are."""
    parts = [p for p in (message or "").split("; ") if p]
    if len(parts) <= limit:
        return message or ""
    return "; ".join(parts[:limit]) + f"; and {len(parts) - limit} more"

STRATEGY_COLUMNS = ["name", "status", "objective", "gap", "total_cost", "npv", "best", "vs_best", "vs_best_pct",
                    "new_owned_units", "summary", "message", "solve_seconds"]


def compare_strategies(problem: Problem, solve: Solver) -> tuple[pd.DataFrame, dict[str, Plan], pd.DataFrame]:
    """Solve ``rent``, ``buy`` and ``mix`` on copies of ``problem``.

    Returns the strategies table, the plans by name and the units table
    (one row per strategy and offering the plan uses).
    """
    plans: dict[str, Plan] = {}
    rows, units = [], []
    has_owned = bool((problem.offerings["pricing"] == "owned").any())
    builds = [(name, build) for name, build in (("rent", rent_strategy), ("buy", buy_strategy),
                                                 ("mix", lambda pr: variant(pr))) if name != "buy" or has_owned]
    problems = {name: build(problem) for name, build in builds}
    solved = dict(zip(problems, timed(solve, list(problems.values()))))
    share_plans(solved, problems, solve)
    for name in ("rent", "buy", "mix"):
        if name not in solved:
            rows.append({"name": name, "status": "not applicable", "message": "the problem has no owned offerings"})
            continue
        plan, seconds = solved[name]
        plans[name] = plan
        u = units_summary(plan)
        units.append(u.assign(strategy=name))
        rows.append({"name": name, "status": plan.status.value, "objective": plan.objective,
                     # the proven relative gap (as gpuopt solve's): the objective is at most this far above the
                     # strategy's optimum; 0 when proven within the gap asked for
                     "gap": plan.result.gap if plan.status.has_plan else None,
                     "total_cost": plan.total_cost, "npv": plan.npv, "new_owned_units": owned_new_units(plan)
                     if plan.status.has_plan else None,
                     "summary": summary_text(u) if plan.status.has_plan else "",
                     "message": short_message(plan.result.message) if not plan.status.has_plan else "",
                     "solve_seconds": round(seconds, 3)})
    df = pd.DataFrame(rows).reindex(columns=STRATEGY_COLUMNS)
    obj = pd.to_numeric(df["objective"], errors="coerce")
    if obj.notna().any():
        best = obj.min()
        df["best"] = obj == best
        df["vs_best"] = obj - best
        df["vs_best_pct"] = np.where(obj.notna() & (abs(best) > 0), 100.0 * (obj - best) / abs(best), np.nan)
    else:
        df["best"] = False
    df["best"] = df["best"].fillna(False).astype(bool)
    # a plan without units adds nothing (its empty table would make every column hold Python objects)
    listed = [u for u in units if len(u)]
    ut = pd.concat(listed, ignore_index=True) if listed else pd.DataFrame()
    if not ut.empty:
        ut = ut[["strategy"] + [c for c in ut.columns if c != "strategy"]]
    else:
        ut = pd.DataFrame(columns=["strategy", "offering", "pricing", "gpu", "units_max", "units_avg", "new_units",
                                   "existing_units", "blocks", "gpu_hours_used", "utilisation"])
    return df, plans, ut


def share_plans(solved: dict[str, tuple[Plan, float]], problems: dict[str, Problem], solve: Solves) -> None:
    """Search a strategy again from another's plan where that is a plan of it that costs less by more than the gap.

    Every rent plan and every buy plan is a mix plan (the mix allows both),
    and a mix plan that buys no new server is a rent plan; so a mix dearer
    than renting alone, or a rent dearer than a mix that buys nothing, can
    only come from a search stopped on its time limit, and would show
    finance a saving or a cost that no choice makes. Each strategy, the mix
    first (it can take either plan), is checked against the others' plans,
    read in its model by name (:meth:`optimizer.plan.Plan.beating`), and
    searched again from those that beat it (its seconds include both
    searches). Without a time limit every plan is proven within the gap and
    nothing is searched again.
    """
    gap = solve.options["gap"]
    points = {name: plan.point() for name, (plan, _) in solved.items()}  # each plan by name, read once
    for name in ("mix", "rent", "buy"):
        if name not in solved:
            continue
        plan, seconds = solved[name]
        beaten = plan.beating([p for other, p in points.items() if other != name and p is not None], gap)
        if beaten:
            t0 = time.perf_counter()
            solved[name] = (solve.again(problems[name], beaten), seconds + time.perf_counter() - t0)
            points[name] = solved[name][0].point()


# ---------------------------------------------------------------------------
# break-even capex (solves)


@dataclass
class BreakEven:
    """Result of the capex search for one owned offering."""

    offering: str
    capex_current: float
    capex: float | None  # highest capex tested at which the optimum buys (None: never, inf: always)
    capex_above: float | None  # lowest capex tested at which it does not buy
    new_units_current: int
    new_units_at_break_even: int | None
    outcome: str  # "bisected" | "buys at any capex" | "buys none even at capex 0" | "stopped"
    note: str
    solves: int
    probes: list[tuple[float, int, float | None]] = field(default_factory=list)  # (capex, new units, objective)


def capex_coefficient(plan: Plan, oid: str) -> float:
    """d objective / d capex for one new unit of ``oid``, from the formulation's own unit costs.

    Under ``cost``: (1 − residual)·H ÷ (lifetime·8760); under ``npv``: 1 − the
    discounted book-value share. The objective of a fixed plan is linear in
    capex with slope coefficient × new units.
    """
    d = plan.data
    O = d.offerings[d.offerings["offering"] == oid].assign(capex=1.0)
    return float(owned_unit_costs(O, d.periods, d.objective, d.rate, d.commitments)["capital_new"].iloc[0])


def break_even_capex(problem: Problem, oid: str, solve: Solver, base: Plan | None = None,
                     tol: float = CAPEX_TOLERANCE) -> BreakEven:
    """Highest capex per unit of ``oid`` at which the optimal plan still buys at least one new unit.

    The set of capex values at which the optimum buys is an interval [0, c*):
    a plan that buys n ≥ 1 units at capex c costs Z(c) + k·n·(c' − c) at c'
    (k = :func:`capex_coefficient`), and every plan without new units costs
    at least Z0 (the optimum with new units forbidden, independent of capex).
    So c* ≥ c + (Z0 − Z(c)) ÷ (k·n), a tangent bound. The search brackets c*
    (the problem's capex, then doubling upwards or 0 downwards), then probes
    just above and just below the tangent bound, falling back to bisection,
    until the bracket is within ``tol`` of its upper end. Every reported
    capex is a solved point.
    """
    capex0 = float(problem.offerings.at[oid, "capex"])
    probes: list[tuple[float, int, float | None]] = []
    solves = 0

    def probe(c: float) -> Plan:
        nonlocal solves
        solves += 1
        p = solve(with_capex(problem, oid, c))
        probes.append((c, new_units(p, oid), p.objective))
        return p

    def result(capex, above, outcome, note, lo_plan=None) -> BreakEven:
        return BreakEven(oid, capex0, capex, above, n0, None if lo_plan is None else new_units(lo_plan, oid),
                         outcome, note, solves, probes)

    base = base if base is not None else probe(capex0)
    if not base.status.has_plan:
        n0 = 0
        return result(None, None, "no plan", f"no plan at the problem's capex ({base.status.value})")
    n0 = new_units(base, oid)
    if not probes:
        probes.append((capex0, n0, base.objective))
    k = capex_coefficient(base, oid)

    if n0 >= 1:
        lo, lo_plan, hi = capex0, base, None
        solves += 1
        none = solve(forbid_new_units(problem, oid))
        if not none.status.has_plan:
            return result(math.inf, None, "buys at any capex",
                          "no plan meets every constraint without new units of this offering", base)
        z0 = float(none.objective)
    else:
        hi, z0 = capex0, float(base.objective)
        if capex0 <= 0:
            return result(None, 0.0, "buys none even at capex 0", "the optimum buys none at capex 0")
        p = probe(0.0)
        if not p.status.has_plan or new_units(p, oid) < 1:
            return result(None, 0.0, "buys none even at capex 0", "the optimum buys none even at capex 0")
        lo, lo_plan = 0.0, p

    scale = max(capex0, 1.0)
    doublings = 0
    while solves < MAX_SOLVES:
        if hi is not None and hi - lo <= tol * hi:
            return result(lo, hi, "bisected", f"break-even within {100 * tol:g} % ({solves} solves)", lo_plan)
        s = k * new_units(lo_plan, oid)
        c_t = lo + (z0 - float(lo_plan.objective)) / s if s > 0 else math.inf
        c_t = max(c_t, lo)
        if hi is None:
            if math.isfinite(c_t) and c_t * (1 + tol / 2) > lo:
                x = c_t * (1 + tol / 2)
            else:
                x = 2 * max(lo, scale)
            if x > scale * 2 ** MAX_DOUBLINGS:
                return result(lo, None, "buys at any capex",
                              f"buys at every capex tested, up to {lo:,.0f}", lo_plan)
            doublings += not math.isfinite(c_t)
        else:
            below, above = c_t * (1 - tol / 2), c_t * (1 + tol / 2)
            if math.isfinite(c_t) and lo < below < hi and above >= hi:
                x = below
            elif math.isfinite(c_t) and lo < above < hi:
                x = above
            else:
                x = (lo + hi) / 2
        p = probe(x)
        if p.status.has_plan and new_units(p, oid) >= 1:
            lo, lo_plan = x, p
        else:
            hi = x
    return result(lo, hi, "stopped", f"stopped after {solves} solves; bracket [{lo:,.0f}, {hi}]", lo_plan)


# ---------------------------------------------------------------------------
# break-even utilisation (closed form) and payback


def _rental_price_per_gpu_hour(o: pd.Series) -> float:
    """Price per GPU-hour of a rental offering; a reservation's upfront is spread over its term."""
    p = float(o["price_per_hour"])
    if o["pricing"] == "reserved" and not pd.isna(o.get("upfront")) and float(o["upfront"]) > 0:
        p += float(o["upfront"]) / (float(o["term_months"]) * HOURS_PER_MONTH)
    return p / float(o["gpus_per_unit"])


def owned_hourly(o: pd.Series, rate: float) -> dict[str, float]:
    """An owned offering's costs per GPU-hour of wall clock (docs/finance.md §2).

    capital: capex·(1 − residual) ÷ (lifetime·8760·G) (straight line, as under
    ``objective: cost``); capital_annuity: (capex − residual·capex·(1+r)^−n)·CRF(r, n)
    ÷ (8760·G); fixed: fixed_per_month ÷ (730·G); e: energy per busy GPU-hour;
    idle: idle_power_fraction.
    """
    G = float(o["gpus_per_unit"])
    capex = float(o["capex"])
    n = float(o["lifetime_years"])
    res = 0.0 if pd.isna(o["residual_fraction"]) else float(o["residual_fraction"])
    fixed = 0.0 if pd.isna(o["fixed_per_month"]) else float(o["fixed_per_month"])
    pue = 1.0 if pd.isna(o["pue"]) else float(o["pue"])
    idle = 0.0 if pd.isna(o["idle_power_fraction"]) else float(o["idle_power_fraction"])
    e = float(o["power_kw"]) / G * pue * float(o["electricity_per_kwh"])
    crf = 1.0 / n if rate == 0 else rate * (1 + rate) ** n / ((1 + rate) ** n - 1)
    annuity = (capex - res * capex * (1 + rate) ** (-n)) * crf
    return {"capital": capex * (1 - res) / (n * HOURS_PER_YEAR * G), "capital_annuity": annuity / (HOURS_PER_YEAR * G),
            "fixed": fixed / (HOURS_PER_MONTH * G), "e": e, "idle": idle}


def break_even_utilisation(h: dict[str, float], price: float, annuity: bool = False) -> float:
    """u* at which an owned GPU-hour costs ``price`` (per GPU-hour of a rental).

    Owned cost per busy GPU-hour at utilisation u: (capital + fixed + e·idle) ÷ u + e·(1 − idle);
    equal to ``price`` at u* = (capital + fixed + e·idle) ÷ (price − e·(1 − idle)).
    Infinite when the price does not even cover the busy energy.
    """
    cap = h["capital_annuity"] if annuity else h["capital"]
    margin = price - h["e"] * (1 - h["idle"])
    return (cap + h["fixed"] + h["e"] * h["idle"]) / margin if margin > 0 else math.inf


UTILISATION_COLUMNS = ["owned", "gpu", "rental", "pricing", "price_per_gpu_hour", "owned_per_gpu_hour_full_use",
                       "utilisation", "utilisation_annuity", "verdict"]

#: rentals that owning is compared with: capacity one can hold for as long as one owns (never spot)
REFERENCE_KINDS = ("on_demand", "reserved")


def verdict(u: float) -> str:
    """What a break-even utilisation means for a buyer."""
    if not math.isfinite(u) or u > 1.0:
        return "never pays at any utilisation"
    return f"pays when busy more than {100 * u:.0f} % of the time"


def reference_rentals(problem: Problem, candidates: list[str], named: list[str] | None = None) -> list[str]:
    """The rentals owning is compared with.

    The ones the user ``named``; otherwise on-demand and reserved offerings
    (never spot: it can be taken away), and of a catalog's only those that
    could carry a fleet: a single rentable unit (``max_units`` 1, e.g. one
    marketplace host) is no baseline for buying servers. The problem file's
    own rentals always count: the user put them there.
    """
    O = problem.offerings
    if named:
        return [r for r in named if r in O.index]
    catalog = O["from_catalog"].astype(bool) if "from_catalog" in O else pd.Series(False, index=O.index)

    def single_host(r: str) -> bool:
        return bool(catalog[r]) and pd.notna(O.at[r, "max_units"]) and float(O.at[r, "max_units"]) <= 1

    return [r for r in candidates if O.at[r, "pricing"] in REFERENCE_KINDS and not single_host(r)]


def utilisation_table(problem: Problem, owned: list[str], rentals: list[str]) -> pd.DataFrame:
    """Break-even utilisation of every owned offering against every given rental of its GPU type."""
    O = problem.offerings
    rows = []
    for oid in owned:
        o = O.loc[oid]
        h = owned_hourly(o, problem.discount_rate)
        full = h["capital"] + h["fixed"] + h["e"]
        for rid in rentals:
            r = O.loc[rid]
            if r["gpu"] != o["gpu"] or r["pricing"] not in RENTED_OR_RESERVED:
                continue
            p = _rental_price_per_gpu_hour(r)
            u = break_even_utilisation(h, p)
            rows.append({"owned": oid, "gpu": o["gpu"], "rental": rid, "pricing": r["pricing"],
                         "price_per_gpu_hour": p, "owned_per_gpu_hour_full_use": full,
                         "utilisation": u, "utilisation_annuity": break_even_utilisation(h, p, annuity=True),
                         "verdict": verdict(u)})
    df = pd.DataFrame(rows, columns=UTILISATION_COLUMNS)
    return df.sort_values(["owned", "price_per_gpu_hour"], ignore_index=True)


def period_starts(P: pd.DataFrame) -> pd.Series:
    """Start of each period in months: its month plus the hours of earlier periods of that month ÷ 730."""
    before = P.groupby("month")["hours"].cumsum() - P["hours"]
    return P["month"].astype(float) + before / HOURS_PER_MONTH


def payback(plan: Plan, oid: str, rent_price_per_gpu_hour: float | None) -> tuple[float | None, str]:
    """Months until the new units' savings against on-demand repay their capex.

    Savings in a period = busy GPU-hours of ``oid`` × the on-demand price per
    GPU-hour − the offering's running costs (fixed, busy and idle energy);
    the new units' share is new ÷ (new + existing). They accrue evenly over
    the period's hours; periods follow each other in month order.
    """
    if rent_price_per_gpu_hour is None:
        return None, "no on-demand offering of this GPU type"
    if not plan.status.has_plan:
        return None, "no plan"
    n = new_units(plan, oid)
    if n < 1:
        return None, "the mix buys no new units"
    O = plan.problem.offerings
    P = plan.problem.periods
    c = plan.commitments.set_index("offering")
    existing = int(c.at[oid, "existing_units"]) if oid in c.index else 0
    share = n / (n + existing)
    capex = n * float(O.at[oid, "capex"])
    u = plan.usage[plan.usage["offering"] == oid].set_index("period")
    L = plan.ledger[(plan.ledger["offering"] == oid) & (plan.ledger["period"] != "")]
    running = L.groupby("period")["cost"].sum()
    starts = period_starts(P)
    cum, last_rate = 0.0, 0.0
    for p in sorted(P.index, key=lambda q: (starts[q], list(P.index).index(q))):
        h = float(P.at[p, "hours"])
        busy = 0.0
        if p in u.index:
            busy = float(u.at[p, "inference_gpus"] + u.at[p, "training_gpus"]) * h
        saving = share * (busy * rent_price_per_gpu_hour - float(running.get(p, 0.0)))
        if saving > 0 and cum + saving >= capex:
            return float(starts[p] + (capex - cum) / saving * h / HOURS_PER_MONTH), "from the mix plan's use"
        cum += saving
        last_rate = saving / (h / HOURS_PER_MONTH)  # savings per month in the latest period
    months = float(max(starts + P["hours"] / HOURS_PER_MONTH))
    repaid = f"{100 * max(cum, 0.0) / capex:.0f} % repaid within the {months:.0f}-month horizon"
    if last_rate > 0:
        return months + (capex - cum) / last_rate, f"{repaid}; extrapolated at the last period's savings"
    return None, f"not repaid: {repaid}, and the last period saves nothing"


def payback_full_use(h: dict[str, float], G: int, capex: float, price: float) -> float | None:
    """Months for one unit busy all the time: capex ÷ monthly (rent − energy − fixed) savings."""
    monthly = HOURS_PER_MONTH * G * (price - h["e"] - h["fixed"])
    return capex / monthly if monthly > 0 else None


BREAK_EVEN_COLUMNS = [
    "offering", "gpu", "capex", "capex_tested_above", "capex_current", "capex_margin_pct", "new_units_current",
    "new_units_at_break_even", "outcome", "solves", "utilisation", "utilisation_annuity", "verdict",
    "on_demand_offering",
    "on_demand_per_gpu_hour", "utilisation_reserved", "utilisation_reserved_annuity", "reserved_offering",
    "reserved_per_gpu_hour", "owned_per_gpu_hour_full_use", "payback_months", "payback_months_full_use",
    "payback_note", "note"]


def owned_to_assess(problem: Problem, offerings: list[str] | None = None) -> list[str]:
    """The owned offerings a break-even is asked of: ``offerings`` when given, else the problem file's own.

    A catalog's servers (``allow: {buy: true}``) are candidates for the
    plan, but nobody asked what they would have to cost: they are assessed
    only when named.
    """
    O = problem.offerings
    if offerings:
        return [o for o in offerings if o in O.index and O.at[o, "pricing"] == "owned"]
    catalog = O["from_catalog"].astype(bool) if "from_catalog" in O else pd.Series(False, index=O.index)
    return [o for o in owned_ids(problem) if not catalog[o]]


def break_even_table(problem: Problem, base: Plan, solve: Solver | None, offerings: list[str] | None = None,
                     rentals: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Break-even capex (solves, unless ``solve`` is None), utilisation and payback per owned offering.

    The owned offerings asked about: ``offerings`` when given, else those
    the problem file defines (not a catalog's) that some workload can use.
    Each is compared with :func:`reference_rentals` (``rentals`` when given).
    """
    O = problem.offerings
    usable = usable_offerings(base)
    owned = [o for o in owned_to_assess(problem, offerings) if o in usable]
    candidates = [r for r in O.index[O["pricing"].isin(RENTED_OR_RESERVED)] if r in usable]
    util = utilisation_table(problem, owned, reference_rentals(problem, candidates, rentals))
    rows = []
    for oid in owned:
        o = O.loc[oid]
        h = owned_hourly(o, problem.discount_rate)
        mine = util[util["owned"] == oid]
        od = mine[mine["pricing"] == "on_demand"].sort_values("price_per_gpu_hour").head(1)
        rs = mine[mine["pricing"] == "reserved"].sort_values("price_per_gpu_hour").head(1)
        row = {"offering": oid, "gpu": o["gpu"], "capex_current": float(o["capex"]),
               "owned_per_gpu_hour_full_use": h["capital"] + h["fixed"] + h["e"],
               "new_units_current": new_units(base, oid)}
        od_price = None
        if len(od):
            r = od.iloc[0]
            od_price = float(r["price_per_gpu_hour"])
            row.update(utilisation=r["utilisation"], utilisation_annuity=r["utilisation_annuity"],
                       verdict=r["verdict"], on_demand_offering=r["rental"], on_demand_per_gpu_hour=od_price,
                       payback_months_full_use=payback_full_use(h, int(o["gpus_per_unit"]), float(o["capex"]),
                                                                od_price))
        if len(rs):
            r = rs.iloc[0]
            row.update(utilisation_reserved=r["utilisation"], utilisation_reserved_annuity=r["utilisation_annuity"],
                       reserved_offering=r["rental"], reserved_per_gpu_hour=float(r["price_per_gpu_hour"]))
        row["payback_months"], row["payback_note"] = payback(base, oid, od_price)
        if solve is None:
            row["outcome"] = "not computed"
        else:
            be = break_even_capex(problem, oid, solve, base=base)
            row.update(capex=be.capex, capex_tested_above=be.capex_above, outcome=be.outcome, solves=be.solves,
                       new_units_at_break_even=be.new_units_at_break_even, note=be.note)
            if be.capex is not None and math.isfinite(be.capex) and row["capex_current"] > 0:
                row["capex_margin_pct"] = 100.0 * (be.capex / row["capex_current"] - 1.0)
        rows.append(row)
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS), util


# ---------------------------------------------------------------------------
# cash flows

#: Ledger items -> cash-flow columns (depreciation is not a cash flow).
CASH_ITEMS = {"capex": "capex", "book-value": "book_value", "rental": "rental", "reservation": "reservation",
              "upfront": "upfront", "fixed": "fixed", "energy-busy": "energy", "energy-idle": "energy"}
CASH_COLUMNS = ["capex", "book_value", "rental", "reservation", "upfront", "fixed", "energy"]
ITEM_COLUMNS = ["month", "year", "period", "offering", "pricing", "item", "ledger_item", "cash", "discount_factor",
                "pv"]


def cash_flow_items(plan: Plan) -> pd.DataFrame:
    """Every cash flow of the plan with its calendar month: positive paid out, negative received.

    Per-period items are paid in their period's month (a period's flows
    are discounted at its month, as in the objective); capex at month 0; upfronts when
    their term starts; the book value comes back at the horizon's end month.
    ``pv`` is the ledger's present value, so the items' pv adds up to the plan's NPV.
    """
    pr = plan.problem
    P, O = pr.periods, pr.offerings
    rate = pr.discount_rate
    end = horizon_end_month(P)
    L = plan.ledger[plan.ledger["item"].isin(CASH_ITEMS)].copy()
    months = []
    for r in L.itertuples():
        if r.item == "capex":
            months.append(0.0)
        elif r.item == "book-value":
            months.append(end)
        elif r.item == "upfront":
            t = int(O.at[r.offering, "term_months"])
            months.append(float(int(P.at[r.period, "month"]) // t * t))
        else:
            months.append(float(P.at[r.period, "month"]))
    L["month"] = months
    L["discount_factor"] = (1.0 + rate) ** (-L["month"] / 12.0)
    # per-period items: cash = cost; capex and book value carry their cash in pv only
    one_off = L["item"].isin(["capex", "book-value"])
    L["cash"] = np.where(one_off, L["pv"] / L["discount_factor"], L["cost"])
    L["ledger_item"] = L["item"]
    L["item"] = L["item"].map(CASH_ITEMS)
    L["year"] = (L["month"] // 12).astype(int) + 1
    return L[ITEM_COLUMNS].sort_values(["month", "item", "offering"], ignore_index=True)


def _wide(items: pd.DataFrame, key: str, index: list) -> pd.DataFrame:
    w = items.pivot_table(index=key, columns="item", values="cash", aggfunc="sum", fill_value=0.0)
    w = w.reindex(index=index, columns=CASH_COLUMNS, fill_value=0.0).fillna(0.0)
    w["net_cash_out"] = w[CASH_COLUMNS].sum(axis=1)
    w["pv"] = items.groupby(key)["pv"].sum().reindex(index, fill_value=0.0)
    w["cumulative_cash"] = w["net_cash_out"].cumsum()
    w["cumulative_pv"] = w["pv"].cumsum()
    w.index.name = key
    return w.reset_index()


MONTHLY_COLUMNS = ["month", "year"] + CASH_COLUMNS + ["net_cash_out", "discount_factor", "pv", "cumulative_cash",
                                                      "cumulative_pv"]
YEARLY_COLUMNS = ["year", "first_month", "last_month"] + CASH_COLUMNS + ["net_cash_out", "pv", "cumulative_cash",
                                                                         "cumulative_pv"]


def cash_flows(plan: Plan) -> dict[str, pd.DataFrame]:
    """``items``, ``monthly`` (every month from 0 to the horizon's end) and ``yearly`` cash flows."""
    items = cash_flow_items(plan)
    rate = plan.problem.discount_rate
    last = int(math.ceil(max(items["month"].max() if len(items) else 0.0, horizon_end_month(plan.problem.periods))))
    months = list(range(0, last + 1))
    it = items.assign(m=np.floor(items["month"]).astype(int))
    monthly = _wide(it, "m", months).rename(columns={"m": "month"})
    monthly["year"] = monthly["month"] // 12 + 1
    monthly["discount_factor"] = discount_factors(monthly["month"], rate)
    years = list(range(1, last // 12 + 2))
    yearly = _wide(items, "year", years)
    yearly["first_month"] = (yearly["year"] - 1) * 12
    yearly["last_month"] = yearly["first_month"] + 11
    return {"items": items, "monthly": monthly[MONTHLY_COLUMNS], "yearly": yearly[YEARLY_COLUMNS]}


# ---------------------------------------------------------------------------
# sensitivity

SENSITIVITY_COLUMNS = ["parameter", "description", "low_factor", "high_factor", "objective_base", "objective_low",
                       "objective_high", "delta_low", "delta_high", "swing", "owned_units_base", "owned_units_low",
                       "owned_units_high", "npv_low", "npv_high", "total_cost_low", "total_cost_high", "status_low",
                       "status_high"]


def sensitivity(problem: Problem, solve: Solver, base: Plan, step: float = 0.2,
                parameters: list[Parameter] | None = None) -> pd.DataFrame:
    """Tornado table: each parameter × (1 − step) and × (1 + step), a re-solve each, sorted by swing.

    ``swing`` = |objective at +step − objective at −step|; owned units are the
    new owned units of the plan. Parameters the problem does not have (no
    owned offering, zero electricity price) are listed with no solve.
    """
    rows = []
    zb = base.objective
    ub = owned_new_units(base)
    pars = [par for par in parameters or PARAMETERS if par.present(problem)]
    sides = (("low", 1 - step), ("high", 1 + step))
    plans = iter(plan for plan, _ in timed(solve, [par.apply(problem, f) for par in pars for _, f in sides]))
    for par in parameters or PARAMETERS:
        row = {"parameter": par.name, "description": par.description, "low_factor": 1 - step,
               "high_factor": 1 + step, "objective_base": zb, "owned_units_base": ub}
        if not par.present(problem):
            row.update(status_low="not present", status_high="not present", swing=0.0, delta_low=0.0,
                       delta_high=0.0, objective_low=zb, objective_high=zb, owned_units_low=ub, owned_units_high=ub,
                       npv_low=base.npv, npv_high=base.npv, total_cost_low=base.total_cost,
                       total_cost_high=base.total_cost)
            rows.append(row)
            continue
        for side, _ in sides:
            plan = next(plans)
            row[f"status_{side}"] = plan.status.value
            row[f"objective_{side}"] = plan.objective
            row[f"npv_{side}"] = plan.npv
            row[f"total_cost_{side}"] = plan.total_cost
            row[f"owned_units_{side}"] = owned_new_units(plan) if plan.status.has_plan else None
            row[f"delta_{side}"] = None if plan.objective is None else plan.objective - zb
        lo, hi = row["objective_low"], row["objective_high"]
        row["swing"] = abs(hi - lo) if lo is not None and hi is not None else math.inf
        rows.append(row)
    df = pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)
    return df.sort_values("swing", ascending=False, kind="stable", ignore_index=True)


# ---------------------------------------------------------------------------
# everything


@dataclass
class RentBuy:
    """What ``gpuopt rentbuy`` reports."""

    problem: Problem
    strategies: pd.DataFrame
    strategy_units: pd.DataFrame
    plans: dict[str, Plan]
    break_even: pd.DataFrame | None = None
    utilisation: pd.DataFrame | None = None
    cash_flows: dict[str, pd.DataFrame] | None = None
    sensitivity: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: one line per solve of the analysis whose plan failed its audit (a bug in gpuopt; the command exits 4)
    audit_failures: list[str] = field(default_factory=list)

    @property
    def mix(self) -> Plan:
        return self.plans["mix"]

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the report by name (what ``--format csv`` writes, one file each)."""
        from ..render.rentbuy import tables

        return tables(self)

    def to_dict(self) -> dict:
        """The JSON of ``gpuopt rentbuy --format json``."""
        from ..render.rentbuy import to_dict

        return to_dict(self)

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2)


def analyse(problem: Problem, solver: str = DEFAULT_SOLVER, time_limit: float | None = None, gap: float = 1e-6,
            threads: int | None = None, do_break_even: bool = True, do_sensitivity: bool = True,
            step: float = 0.2, offerings: list[str] | None = None, rentals: list[str] | None = None,
            executor=None) -> RentBuy:
    """Strategies, then (when the mix has a plan) break-even, cash flows and sensitivity.

    ``offerings``: the owned offerings to find the break-even of (default:
    the problem file's own); ``rentals``: the rentals to compare them with
    (default: :func:`reference_rentals`). ``executor``
    (:mod:`optimizer.executors`): with more than one worker, the strategies
    and the sensitivity's solves run side by side on it, and the break-even
    search beside the sensitivity (:class:`Solves`); the tables are the same.
    """
    O = problem.offerings
    for oid in [*(offerings or []), *(rentals or [])]:
        if oid not in O.index:
            from ..errors import unknown_name

            raise unknown_name("offering", oid, list(O.index), field="--offering/--rental", value=oid)
    for oid in offerings or []:
        if O.at[oid, "pricing"] != "owned":
            raise InputError(f"{oid} is not an owned offering", field="--offering", value=oid,
                             allowed=", ".join(owned_ids(problem)) or "(no owned offerings)")
    t0 = time.perf_counter()
    solve, _ = make_solver(problem, solver=solver, time_limit=time_limit, gap=gap, threads=threads,
                           executor=executor)
    strat, plans, units = compare_strategies(problem, solve)
    solve.start_from(plans["mix"])  # the break-even's and the sensitivity's copies start from the mix's plan
    out = RentBuy(problem=problem, strategies=strat, strategy_units=units, plans=plans)
    mix = plans["mix"]
    if not mix.status.has_plan:
        out.notes.append(f"the mix has no plan ({mix.status.value}): {mix.result.message}")
        return _finished(out, solve, t0)

    def break_even() -> tuple[pd.DataFrame, pd.DataFrame]:
        return break_even_table(problem, mix, solve if do_break_even else None, offerings=offerings,
                                rentals=rentals)

    if solve.side_by_side and do_break_even and do_sensitivity:
        # the break-even search (one solve after another) beside the sensitivity's independent solves
        with cf.ThreadPoolExecutor(max_workers=1) as chain:
            search = chain.submit(break_even)
            out.sensitivity = sensitivity(problem, solve, mix, step=step)
            out.break_even, out.utilisation = search.result()
    else:
        out.break_even, out.utilisation = break_even()
        if do_sensitivity:
            out.sensitivity = sensitivity(problem, solve, mix, step=step)
    out.cash_flows = cash_flows(mix)
    npv = float(out.cash_flows["items"]["pv"].sum())
    if not math.isclose(npv, mix.npv, rel_tol=1e-9, abs_tol=1e-6):
        out.notes.append(f"cash-flow NPV {npv:,.2f} differs from the plan's {mix.npv:,.2f}")
    if mix.status != Status.OPTIMAL or time_limit is not None or gap > 1e-4:
        out.notes.append("solves stopped at a time limit or a gap: comparisons and break-even points are only "
                         "as exact as the solver's gap")
    return _finished(out, solve, t0)


def _finished(out: RentBuy, solve: Solves, t0: float) -> RentBuy:
    """``out`` with the analysis's wall seconds and the plans of its solves that failed their audit."""
    from .whatif import audit_failures

    out.audit_failures = audit_failures((f"failed plan {k + 1}", v) for k, v in enumerate(solve.failed_audits))
    if out.audit_failures:
        out.notes.append(f"{len(out.audit_failures)} plan(s) failed their audit, a bug in gpuopt; first: "
                         f"{out.audit_failures[0]}")
    out.seconds = time.perf_counter() - t0
    return out
