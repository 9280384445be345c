"""A thin expression layer over term tables, so constraint families read like their maths.

A variable block is a table: one row per variable, its coordinates, any data
columns merged onto it, and its id in ``var``. :func:`lin` turns such a table
and a coefficient per row into an :class:`Expr`: a table of terms, each with
the coordinates of the row it will belong to, a variable id and a coefficient.
Expressions add (``+``, ``-``), scale (``*`` by a number or a column of per-term
numbers), and aggregate: ``e.sum("offering", "period")`` keeps those coordinates
and sums over every other one, so each distinct (offering, period) becomes one
row. Comparing an expression with a right-hand side (a number, or a table with
the row coordinates and ``rhs``) gives a :class:`Constraint` that
:meth:`optimizer.model.mip.MIP.add` turns into rows::

    x = m.add_variables("inference-replicas", coords, integer=True)
    I = lin(x, x["gpus"]).sum("offering", "period")          # inference GPUs
    y = m.add_variables("units-running", ...)
    m.add("capacity-running", I - lin(y, y["G"]).sum("offering", "period") <= 0)

Rows are formed by the coordinates an expression keeps; terms of the same
variable in one row are summed. Nothing loops per element in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def lin(table: pd.DataFrame, coef: float | np.ndarray | pd.Series = 1.0, coords: list[str] | None = None,
        var: str = "var") -> "Expr":
    """Σ coef·var with one term per row of ``table`` (a variable table: coordinates, data, ``var``).

    ``coords``: the columns the terms keep (default every column but the
    variable ids); ``var``: the column holding them (a table joined to two
    blocks names the second one differently).
    """
    keep = [c for c in table.columns if c != var] if coords is None else list(coords)
    # one frame from the columns' arrays (their dtypes kept): a third faster than a copy plus two inserts
    t = pd.DataFrame({**{c: table[c].array for c in keep}, "var": table[var].to_numpy(np.int64),
                      "coef": _per_row(coef, len(table))})
    return Expr(t, keep)


def _per_row(coef, n: int) -> np.ndarray:
    if isinstance(coef, pd.Series):
        coef = coef.to_numpy(float)
    return np.broadcast_to(np.asarray(coef, dtype=float), (n,)).copy() if n else np.zeros(0)


@dataclass
class Expr:
    """Σ coef·var per row; ``terms`` has the row coordinates ``coords``, ``var`` and ``coef``."""

    terms: pd.DataFrame
    coords: list[str]

    def __add__(self, other: "Expr") -> "Expr":
        if not isinstance(other, Expr):
            return NotImplemented
        if set(self.coords) != set(other.coords):
            raise ValueError(f"cannot add expressions over {self.coords} and {other.coords}")
        parts = [t for t in (self.terms, other.terms[self.coords + ["var", "coef"]]) if len(t)]
        terms = pd.concat(parts, ignore_index=True) if parts else self.terms
        return Expr(terms, self.coords)

    def __neg__(self) -> "Expr":
        return Expr(self.terms.assign(coef=-self.terms["coef"]), self.coords)

    def __sub__(self, other: "Expr") -> "Expr":
        return self + (-other)

    def __mul__(self, k: float | np.ndarray | pd.Series) -> "Expr":
        return Expr(self.terms.assign(coef=self.terms["coef"].to_numpy() * _per_row(k, len(self.terms))),
                    self.coords)

    __rmul__ = __mul__

    def sum(self, *by: str) -> "Expr":
        """Keep the coordinates ``by`` (in that order) and sum over the others; ``sum()`` is one row."""
        missing = [c for c in by if c not in self.coords]
        if missing:
            raise ValueError(f"sum by {missing}: the expression has coordinates {self.coords}")
        return Expr(self.terms[list(by) + ["var", "coef"]], list(by))

    def where(self, mask: np.ndarray | pd.Series) -> "Expr":
        """The terms where ``mask`` (one boolean per term) holds."""
        m = np.asarray(mask, dtype=bool)
        return Expr(self.terms[m].reset_index(drop=True), self.coords)

    def __len__(self) -> int:
        return len(self.terms)

    # comparisons build constraints ------------------------------------------
    def __le__(self, rhs) -> "Constraint":  # type: ignore[override]
        return Constraint(self, "<=", rhs)

    def __ge__(self, rhs) -> "Constraint":  # type: ignore[override]
        return Constraint(self, ">=", rhs)

    def eq(self, rhs) -> "Constraint":
        """``self == rhs`` as a constraint (``==`` itself keeps Python's meaning)."""
        return Constraint(self, "==", rhs)


@dataclass
class Constraint:
    """``lhs (sense) rhs`` per row of ``lhs``; ``rhs`` a number or a table of ``coords + [rhs]``.

    Rows that appear only in the right-hand-side table have no terms; the
    model records those that zero cannot satisfy (nothing can serve them).
    """

    lhs: Expr
    sense: str
    rhs: float | pd.DataFrame = 0.0


def rhs_table(df: pd.DataFrame, coords: list[str], values: np.ndarray | pd.Series | float) -> pd.DataFrame:
    """A right-hand-side table: ``df``'s ``coords`` columns and ``rhs``."""
    return pd.DataFrame({**{c: df[c].array for c in coords}, "rhs": _per_row(values, len(df))})
