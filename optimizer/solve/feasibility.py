"""Whether a vector is a feasible point of the assembled model: every row, bound and integrality."""

from __future__ import annotations

import numpy as np

from ..model.mip import Arrays


def violations(a: Arrays, x: np.ndarray, tol: float = 1e-6, limit: int = 5) -> list[str]:
    """Rows, bounds and integralities ``x`` violates (empty when it is a feasible point of ``a``).

    A row's tolerance is relative to its size: ``tol`` times (1 + the sum of
    its terms' magnitudes at ``x`` + its bounds' magnitudes); a column's
    bound's, ``tol`` times (1 + the bound's magnitude). Relative, because a
    back end may hand its values over in print (CBC's solution file keeps 8
    significant digits: 111.693738 comes back as 111.69374). At most
    ``limit`` rows are named.
    """
    bad = []
    if x.shape != (a.n_vars,):
        return [f"the vector has {x.shape} values for {a.n_vars} variables"]
    # an infinite bound needs no tolerance: it keeps a finite one, and ±inf ∓ a finite number is ±inf
    lo_tol = tol * (1.0 + np.where(np.isfinite(a.col_lo), np.abs(a.col_lo), 0.0))
    hi_tol = tol * (1.0 + np.where(np.isfinite(a.col_hi), np.abs(a.col_hi), 0.0))
    out = (x < a.col_lo - lo_tol) | (x > a.col_hi + hi_tol)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        bad.append(f"bound of {a.var_names[i]}: {x[i]} not in [{a.col_lo[i]}, {a.col_hi[i]}]"
                   + (f" (and {int(out.sum()) - 1} more)" if out.sum() > 1 else ""))
    frac = a.integer & (np.abs(x - np.rint(x)) > tol)
    if frac.any():
        i = int(np.flatnonzero(frac)[0])
        bad.append(f"{int(frac.sum())} integer variables are fractional, e.g. {a.var_names[i]} = {x[i]}")
    ax = a.activity(x)
    scale = 1.0 + np.bincount(a.rows, weights=np.abs(a.vals * x[a.cols]), minlength=a.n_rows) + np.abs(
        np.where(np.isfinite(a.row_lo), a.row_lo, 0)) + np.abs(np.where(np.isfinite(a.row_hi), a.row_hi, 0))
    viol = (ax < a.row_lo - tol * scale) | (ax > a.row_hi + tol * scale)
    for r in np.flatnonzero(viol)[:limit]:
        bad.append(f"row {a.row_names[r]}: {ax[r]:g} not in [{a.row_lo[r]:g}, {a.row_hi[r]:g}]")
    if viol.sum() > limit:
        bad.append(f"... {int(viol.sum()) - limit} more rows")
    return bad


def within_bounds(a: Arrays, x: np.ndarray) -> np.ndarray | None:
    """``x`` if it is a plan of the arrays ``a``; else ``x`` clipped to ``a``'s column bounds if that is one; else
    None.

    A plan for more demand, read in a model for less, breaks the bounds
    the smaller demand puts on its replicas (presolve's most replicas a
    configuration can need, :func:`optimizer.model.formulation.replicas_needed`),
    and often nothing else: with each column clipped to its bound it still
    carries the smaller demand (a replica count at its bound carries the
    period's whole demand alone), and it uses no more capacity than
    before. The clipped point is checked like any other, so a clip that
    breaks a row (replicas a routed bucket needs) is never used.
    """
    if x.shape != (a.n_vars,):
        return None
    if not violations(a, x):
        return x
    clipped = np.clip(x, a.col_lo, a.col_hi)
    return None if violations(a, clipped) else clipped


def objective(a: Arrays, x: np.ndarray) -> float:
    """c·x + c0 at ``x``."""
    return float(a.c @ x + a.c0)


def objective_floor(a: Arrays) -> float:
    """The least c·x + c0 over the column bounds alone: c0 + Σ_j min(c_j·lo_j, c_j·hi_j) (−inf where a column
    with a cost has no bound on its cheap side).

    A lower bound on every plan that needs no row: with every cost
    non-negative and every column at least 0, the objective's constant. A
    bound proven by a weak relaxation can fall below it (a Lagrangian
    relaxation at prices read off another model); the floor is then the
    better proof.
    """
    c = a.c
    with np.errstate(invalid="ignore"):  # 0·inf: a column without a cost adds nothing
        least = np.where(c > 0, c * a.col_lo, np.where(c < 0, c * a.col_hi, 0.0))
    return float(a.c0 + least.sum())
