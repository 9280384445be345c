"""Sweeps along a price: the points between two solved ones, proven without a solve where they can be.

When a swept value enters only the objective (a price, a factor on
prices), every point has the same feasible plans; only their costs move,
and each plan's cost is an affine function of the value t. The optimum
V(t) is then the least of affine functions, so it is **concave** in t:
for t_k = λ·t_i + (1 − λ)·t_j between two points,

    V(t_k) ≥ λ·V(t_i) + (1 − λ)·V(t_j) ≥ λ·L_i + (1 − λ)·L_j = L_k,

L_i and L_j the two solves' proven bounds. That is a proven bound at t_k
with no solve. The plans x_i and x_j are feasible at t_k too, and the
cheaper of them there, U_k, is a plan; when U_k − L_k is within the gap,
t_k is settled: its plan is proven optimal by the two solves around it.
(Between two points with the same optimal plan this always holds: U − L is
then affine in t and within the gap at both ends.)

The ``budget`` row bounds the objective itself, so it moves with the
prices; the argument still holds (a plan within the budget at t_k is
within it at t_i or t_j, or dearer there than the optimum; docs/whatif.md).

Nothing here is taken on trust. A point is settled only after its own
model is built and checked against both solved neighbours:

- the same columns, rows, coefficients, bounds and integrality, the
  ``budget`` row's coefficients apart (:func:`shape`);
- the objective (costs and constant) the affine interpolation of the
  neighbours' at t_k, to rounding;
- the plan meets every row of the point's own model.

Otherwise the point is solved, as it would have been. The sweep solves
the ends of each line of the grid, then, in each interval it cannot
settle, the point where its two ends' plans cost the same (where U − L
below is largest: a breakpoint search, as Eisner and Severance's for
parametric programs, on the grid), so a sweep with B changes of plan costs
about 2·B + 2 solves when no third plan is hidden, instead of one per
point. Each of those solves starts from its two neighbours' plans (plans
of its own model too), so the search cuts off from the start whatever costs
more than the cheaper of them, and
from their splits' proofs: each leaf of the exact split is a smaller model
with the same plans at every point, so its optimum is concave too and the
interpolation of its neighbours' bounds bounds it (:func:`leaf_bounds`); a
leaf that cannot beat the best plan is not searched.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from ..model.mip import Arrays
from ..solve.feasibility import violations
from ..solve.split import carried_bound
from ..solve.result import SolveResult, Status, relative_gap, within_gap

#: the row block whose coefficients are the objective's (they move with the prices)
BUDGET = "budget"
#: the objective at a point must equal the interpolation of its neighbours' to this relative tolerance
AFFINE_TOLERANCE = 1e-9


@dataclass
class Anchor:
    """A solved point: what its neighbours need to be settled from it."""

    index: int
    t: float
    x: np.ndarray          # its optimal plan (the model's columns)
    c: np.ndarray          # its objective coefficients
    c0: float              # and constant
    objective: float
    bound: float           # its proven bound
    shape: str             # :func:`shape` of its model
    #: the exact split's proven bound per leaf and pruned subtree (SolveResult.leaf_bounds), if it split
    leaf_bounds: dict | None = None
    #: the most the objective may be (the ``budget`` row), None without one
    budget: float | None = None

    def cost(self, x: np.ndarray) -> float:
        """What the plan ``x`` costs at this point."""
        return float(self.c @ x + self.c0)

    def as_dict(self) -> dict:
        """Plain data for a task (``Anchor(**d)`` rebuilds it)."""
        return dataclasses.asdict(self)


def shape(a: Arrays) -> str:
    """A digest of everything in a model but its objective and the ``budget`` row's coefficients.

    Two models with the same digest have the same columns, integrality,
    bounds and rows (the budget's right-hand side included), so the same
    plans meet every row but the budget.
    """
    budget = np.array([name.split("#")[0] == BUDGET for name in a.row_names], dtype=bool)
    keep = ~budget[a.rows]
    h = hashlib.sha256()
    for arr in (a.rows[keep], a.cols[keep], a.vals[keep], a.row_lo, a.row_hi, a.col_lo, a.col_hi,
                a.integer.astype(np.int8), budget.astype(np.int8)):
        h.update(np.ascontiguousarray(arr).tobytes())
    h.update("\x00".join(a.var_names).encode())
    h.update("\x00".join(a.row_names).encode())
    return h.hexdigest()


def anchor(index: int, t: float, result: SolveResult, a: Arrays) -> Anchor | None:
    """The anchor of a solved point, or None when its plan is not proven optimal (nothing to interpolate)."""
    if result.status != Status.OPTIMAL or result.x is None or result.bound is None:
        return None
    return Anchor(index, float(t), np.asarray(result.x, float), np.asarray(a.c, float), float(a.c0),
                  float(result.objective), float(result.bound), shape(a),
                  None if result.leaf_bounds is None else dict(result.leaf_bounds), objective_budget(a))


def objective_budget(a: Arrays) -> float | None:
    """The most the objective (constant included) may be under the ``budget`` row, or None without one."""
    rows = [i for i, name in enumerate(a.row_names) if name.split("#")[0] == BUDGET]
    if not rows:
        return None
    return float(min(a.row_hi[rows])) + float(a.c0)


def weight(t: float, left: Anchor, right: Anchor) -> float | None:
    """λ with t = λ·t_left + (1 − λ)·t_right, or None when t is not strictly between them."""
    lo, hi = sorted((left.t, right.t))
    if not lo < t < hi:
        return None
    return (right.t - t) / (right.t - left.t)


def predict(t: float, left: Anchor, right: Anchor) -> tuple[float, float] | None:
    """(U, L) at t from the two anchors alone: the cheaper of their plans and the interpolated bound.

    Assumes what :func:`settle` checks (same model, objective affine in t);
    used to decide whether a point is worth settling or an interval needs
    another solve.
    """
    costs = plan_costs(t, left, right)
    if costs is None:
        return None
    lam = weight(t, left, right)
    return min(costs), lam * left.bound + (1 - lam) * right.bound


def plan_costs(t: float, left: Anchor, right: Anchor) -> tuple[float, float] | None:
    """What the left anchor's plan and the right anchor's plan cost at t, interpolated (each is affine in t
    along a price), or None where t is not between them or their models differ."""
    lam = weight(t, left, right)
    if lam is None or left.shape != right.shape:
        return None
    return (lam * left.objective + (1 - lam) * right.cost(left.x),
            lam * left.cost(right.x) + (1 - lam) * right.objective)


def on_line(a: Arrays, t: float, left: Anchor, right: Anchor) -> float | None:
    """λ when the model ``a`` at t lies on the line between the two anchors, else None.

    On the line: t strictly between them, the same model as theirs
    (:func:`shape`), and its objective (costs and constant) the affine
    interpolation of theirs, λ·left + (1 − λ)·right, to rounding.
    """
    lam = weight(t, left, right)
    if lam is None or not (shape(a) == left.shape == right.shape):
        return None
    expect = lam * left.c + (1 - lam) * right.c
    scale = 1.0 + np.abs(expect).max(initial=0.0)
    if np.abs(np.asarray(a.c, float) - expect).max(initial=0.0) > AFFINE_TOLERANCE * scale:
        return None
    c0 = lam * left.c0 + (1 - lam) * right.c0
    if abs(float(a.c0) - c0) > AFFINE_TOLERANCE * (1.0 + abs(c0)):
        return None
    return lam


def leaf_bounds(a: Arrays, t: float, left: Anchor, right: Anchor) -> dict[tuple, float]:
    """Proven bounds at t of the exact split's leaves and subtrees, carried from the two anchors' splits.

    A leaf of the split is the model with a few choices fixed, the same
    plans at every point of the line; its optimum V_L is the least of
    affine functions of t, so concave, as V is. For x* the leaf's optimum
    at t (a plan within the budget B there), its cost f(t) = c(t)·x* is
    affine, and at each anchor f(t_i) ≥ min(L_i, B_i): x* is within the
    budget there, so it costs at least the leaf's bound L_i, or it is not
    and costs more than B_i. So

        V_L(t) = f(t) ≥ λ·min(L_left, B_left) + (1 − λ)·min(L_right, B_right).

    A subtree's bound holds for each leaf in it
    (:func:`optimizer.solve.split.carried_bound`). Only keys both anchors
    proved are carried; nothing when ``a`` is not on their line
    (:func:`on_line`).
    """
    lam = on_line(a, t, left, right)
    if lam is None or left.leaf_bounds is None or right.leaf_bounds is None:
        return {}
    def clip(b: float, budget: float | None) -> float:
        return b if budget is None else min(b, budget)

    out = {}
    for key in set(left.leaf_bounds) | set(right.leaf_bounds):
        lb, rb = carried_bound(key, left.leaf_bounds), carried_bound(key, right.leaf_bounds)
        if lb > -np.inf and rb > -np.inf:  # an infinite bound (no plan in the leaf) stays one, or the budget
            out[key] = lam * clip(lb, left.budget) + (1 - lam) * clip(rb, right.budget)
    return out


def split_like(a: Arrays, keys) -> dict[tuple, float]:
    """The leaves and subtrees ``keys`` of a solved point's exact split, each with no bound known (−inf).

    Handed to a solve on the same line where only one point is solved (a
    line's far end): its bounds hold at its own price only, but its keys
    name the request class it split on, so the solve splits on that class
    too, started from the plans of the line, without first solving the
    model without stability limits to choose a class
    (:func:`optimizer.solve.driver.solve_stable`). Any class gives the
    same optimum: the split is exact whichever class it takes; the class
    decides only how fast. ``a`` (the point's model) is not read.
    """
    return {tuple(k): -np.inf for k in keys}


def settle(a: Arrays, t: float, left: Anchor, right: Anchor, gap: float, solver: str = "") -> SolveResult | None:
    """The plan at t proven from its two solved neighbours, or None (then the point is solved).

    ``a`` is the point's own model. Checks, in order: t between them; the
    model the same as theirs (:func:`shape`); its objective the affine
    interpolation of theirs; each neighbour's plan meeting every row of
    ``a``, the budget included. The cheaper plan is kept, with the bound
    λ·L_left + (1 − λ)·L_right; None unless their gap is within ``gap``.
    """
    lam = on_line(a, t, left, right)
    if lam is None:
        return None
    c = np.asarray(a.c, float)
    bound = lam * left.bound + (1 - lam) * right.bound
    feasible = [(float(c @ o.x + a.c0), o) for o in (left, right) if not violations(a, o.x)]
    if not feasible:
        return None
    cost, source = min(feasible, key=lambda f: f[0])
    x = source.x
    if not within_gap(cost, bound, gap):
        return None
    bound = min(bound, cost)
    return SolveResult(Status.OPTIMAL, solver, objective=cost, bound=bound, gap=relative_gap(cost, bound),
                       x=x.copy(), message=(f"optimal without a solve: the plan of point {source.index}, proven by "
                                            f"the solves of points {left.index} and {right.index} (the swept value "
                                            "moves only the objective, so the optimum is concave in it)"))
