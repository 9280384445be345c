"""A thin expression layer over term tables, so constraint families read like their maths.

A variable block is a table: one row per variable, its coordinates, any data
columns merged onto it, and its id in ``var``. :func:`lin` turns such a table
and a coefficient per row into an :class:`Expr`: terms, each with the
coordinates of the row it will belong to, a variable id and a coefficient,
held as one array per column (the variable table's own arrays; a table per
operation cost more than the arithmetic).
Expressions add (``+``, ``-``), scale (``*`` by a number or a column of per-term
numbers), and aggregate: ``e.sum("offering", "period")`` keeps those coordinates
and sums over every other one, so each distinct (offering, period) becomes one
row. Comparing an expression with a right-hand side (a number, or a table with
the row coordinates and ``rhs``) gives a :class:`Constraint` that
:meth:`optimizer.model.mip.MIP.add` turns into rows::

    x = m.add_variables_on("inference-replicas", options, keys, integer=True)
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
from pandas.api.types import is_object_dtype


def lin(table: pd.DataFrame, coef: float | np.ndarray | pd.Series = 1.0, coords: list[str] | None = None,
        var: str = "var") -> "Expr":
    """Σ coef·var with one term per row of ``table`` (a variable table: coordinates, data, ``var``).

    ``coords``: the columns the terms keep (default every column but the
    variable ids); ``var``: the column holding them (a table joined to two
    blocks names the second one differently).
    """
    keep = [c for c in table.columns if c != var] if coords is None else list(coords)
    columns = {c: table[c].array for c in keep}
    loose = [c for c in keep if is_object_dtype(columns[c].dtype)]
    if loose:
        # a column of Python objects takes the type pandas infers for it in a new table (strings: ``str``), as
        # the terms' table of earlier versions did; the row tables keep it
        inferred = pd.DataFrame({c: columns[c] for c in loose})
        columns.update({c: inferred[c].array for c in loose})
    return Expr(columns, table[var].to_numpy(np.int64), _per_row(coef, len(table)), keep)


def _per_row(coef, n: int) -> np.ndarray:
    if isinstance(coef, pd.Series):
        coef = coef.to_numpy(float)
    return np.broadcast_to(np.asarray(coef, dtype=float), (n,)).copy() if n else np.zeros(0)


def concat_columns(parts: list) -> object:
    """One column from the pieces ``parts`` (arrays of one column, in order), as ``pd.concat`` of the tables
    holding them would give it: the pieces' own type where they share one, else pandas' common type."""
    first = parts[0]
    if len(parts) == 1:
        return first
    if all(p.dtype == first.dtype for p in parts):
        return type(first)._concat_same_type(parts)
    # pieces of different types (rare): pandas itself chooses the common type, as for the whole tables
    return pd.concat([as_table({"c": p}) for p in parts], ignore_index=True)["c"].array


def as_table(columns: dict) -> pd.DataFrame:
    """A table of the arrays ``columns``, each keeping its type (a new table would infer ``str`` for a column
    of Python strings)."""
    return pd.DataFrame({k: pd.Series(v, dtype=object) if is_object_dtype(v.dtype) else v
                         for k, v in columns.items()})


@dataclass
class Expr:
    """Σ coef·var per row: one term per entry of ``var`` and ``coef``, with its row's coordinates in ``columns``.

    ``columns`` maps each of ``coords`` to an array of one value per term
    (the variable tables' own column arrays: a table of the terms made anew
    by every operation was most of a small model's build).
    """

    columns: dict[str, object]
    var: np.ndarray
    coef: np.ndarray
    coords: list[str]

    @property
    def terms(self) -> pd.DataFrame:
        """The terms as one table: the row coordinates, ``var`` and ``coef``."""
        return as_table({**{c: self.columns[c] for c in self.coords}, "var": self.var, "coef": self.coef})

    def __add__(self, other: "Expr") -> "Expr":
        if not isinstance(other, Expr):
            return NotImplemented
        if set(self.coords) != set(other.coords):
            raise ValueError(f"cannot add expressions over {self.coords} and {other.coords}")
        parts = [e for e in (self, other) if len(e)]
        if len(parts) < 2:
            # one side has no terms: the other's terms as they are (a sum over no terms adds nothing)
            e = parts[0] if parts else self
            return Expr({c: e.columns[c] for c in self.coords}, e.var, e.coef, self.coords)
        return Expr({c: concat_columns([self.columns[c], other.columns[c]]) for c in self.coords},
                    np.concatenate([self.var, other.var]), np.concatenate([self.coef, other.coef]), self.coords)

    def __neg__(self) -> "Expr":
        return Expr(self.columns, self.var, -self.coef, self.coords)

    def __sub__(self, other: "Expr") -> "Expr":
        return self + (-other)

    def __mul__(self, k: float | np.ndarray | pd.Series) -> "Expr":
        return Expr(self.columns, self.var, self.coef * _per_row(k, len(self)), self.coords)

    __rmul__ = __mul__

    def sum(self, *by: str) -> "Expr":
        """Keep the coordinates ``by`` (in that order) and sum over the others; ``sum()`` is one row."""
        missing = [c for c in by if c not in self.coords]
        if missing:
            raise ValueError(f"sum by {missing}: the expression has coordinates {self.coords}")
        return Expr({c: self.columns[c] for c in by}, self.var, self.coef, list(by))

    def where(self, mask: np.ndarray | pd.Series) -> "Expr":
        """The terms where ``mask`` (one boolean per term) holds."""
        m = np.asarray(mask, dtype=bool)
        return Expr({c: self.columns[c][m] for c in self.coords}, self.var[m], self.coef[m], self.coords)

    def __len__(self) -> int:
        return len(self.var)

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
