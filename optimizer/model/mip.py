"""A solver-neutral mixed-integer linear program built from whole tables.

Variables and constraints live in named *blocks* (``inference-replicas``,
``capacity-reserved``) whose rows are labelled by a coordinate table, as in
linopy. A linear expression is a set of terms: the coordinate columns of the
rows it belongs to, the global variable id ``var`` and ``coef``, one array
each (:class:`optimizer.model.expr.Expr`; :meth:`MIP.add_constraints` takes
them as a table too). Constraints are built by concatenating the terms'
arrays and numbering the distinct row coordinates, so no Python loop runs
per element.

Backends read the assembled arrays (:meth:`MIP.arrays`): a sparse matrix in
coordinate form, row bounds, variable bounds, integrality and the objective.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .expr import as_table, concat_columns

if TYPE_CHECKING:
    from .expr import Constraint

INF = float("inf")


@dataclass
class VarBlock:
    """Variables of one family; ``coords`` has one row per variable."""

    name: str
    coords: pd.DataFrame
    start: int
    lower: np.ndarray
    upper: np.ndarray
    integer: bool
    #: :meth:`keys`, made once: a plan is read by name (:meth:`MIP.named`, :meth:`MIP.point_from`) in every solve
    #: handed known plans, and each block's coordinates never change once the block is made
    _keys: pd.MultiIndex | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.coords)

    def keys(self) -> pd.MultiIndex:
        """The block's coordinates as an index of text tuples, one per variable in order (:func:`_keys`)."""
        if self._keys is None:
            self._keys = _keys(self.coords)
        return self._keys

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.start, self.start + self.size)


@dataclass
class ConBlock:
    """Constraints of one family: ``lower <= A x <= upper`` row by row."""

    name: str
    coords: pd.DataFrame
    start: int
    rows: np.ndarray  # global row id of each term
    cols: np.ndarray  # global variable id of each term
    vals: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    sense: str

    @property
    def size(self) -> int:
        return len(self.coords)

    @property
    def ids(self) -> np.ndarray:
        """The global row id of each constraint of the family (as :attr:`VarBlock.ids` for columns)."""
        return np.arange(self.start, self.start + self.size)


@dataclass
class Arrays:
    """The assembled program: min c·x + c0 s.t. row_lo <= A x <= row_hi, lo <= x <= hi."""

    n_vars: int
    n_rows: int
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integer: np.ndarray
    c: np.ndarray
    c0: float
    var_names: list[str]
    row_names: list[str]

    def activity(self, x: np.ndarray) -> np.ndarray:
        """A x: each row's value at the point ``x``."""
        return np.bincount(self.rows, weights=self.vals * x[self.cols], minlength=self.n_rows)

    def copy_bounds(self) -> "Arrays":
        """The same program with bound arrays of its own (column and row bounds), to fix or free columns in;
        the matrix, costs and integrality are shared."""
        return replace(self, col_lo=self.col_lo.copy(), col_hi=self.col_hi.copy(),
                                   row_lo=self.row_lo.copy(), row_hi=self.row_hi.copy())

    def relaxed(self) -> "Arrays":
        """The same program with every integrality dropped (its LP relaxation); the other arrays are shared."""
        return replace(self, integer=np.zeros_like(self.integer))

    def with_rows(self, extra: "Rows") -> "Arrays":
        """The same program with the rows ``extra`` appended after its own (the columns are unchanged)."""
        if not extra.size:
            return self
        return replace(self, n_rows=self.n_rows + extra.size,
                       rows=np.concatenate([self.rows, self.n_rows + extra.rows]),
                       cols=np.concatenate([self.cols, extra.cols]), vals=np.concatenate([self.vals, extra.vals]),
                       row_lo=np.concatenate([self.row_lo, extra.lo]), row_hi=np.concatenate([self.row_hi, extra.hi]),
                       row_names=self.row_names + extra.names)


@dataclass
class Rows:
    """Rows kept apart from a model's blocks, to append to its arrays (:meth:`Arrays.with_rows`).

    Row i is ``lo[i] <= Σ vals·x[cols] <= hi[i]`` over its terms (``rows == i``).
    """

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    names: list[str]

    @property
    def size(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class NamedPoint:
    """A point of a program by name: per variable block, the coordinates of its non-zero variables and their
    values (:meth:`MIP.named`), so that a plan of one program can be read as a point of another
    (:meth:`MIP.point_from`)."""

    blocks: dict[str, tuple[pd.MultiIndex, np.ndarray]]


def _keys(coords: pd.DataFrame) -> pd.MultiIndex:
    """A block's coordinates as an index of text tuples (a column's dtype may differ between two builds; a
    block without coordinates is numbered by its position in the block)."""
    if coords.columns.empty:
        return pd.MultiIndex.from_arrays([coords.index.astype(str)])
    return pd.MultiIndex.from_frame(coords.astype(str))


@dataclass
class MIP:
    """A mixed-integer linear program assembled from named blocks."""

    variables: dict[str, VarBlock] = field(default_factory=dict)
    constraints: dict[str, ConBlock] = field(default_factory=dict)
    _n_vars: int = 0
    _n_rows: int = 0
    _obj: list[pd.DataFrame] = field(default_factory=list)
    objective_constant: float = 0.0
    infeasible_rows: dict[str, pd.DataFrame] = field(default_factory=dict)

    # -- variables ----------------------------------------------------------
    def add_variables(
        self,
        name: str,
        coords: pd.DataFrame,
        lower: float | np.ndarray = 0.0,
        upper: float | np.ndarray = INF,
        integer: bool = False,
    ) -> pd.DataFrame:
        """Add one variable per row of ``coords``; return ``coords`` with a ``var`` id column."""
        if name in self.variables:
            raise ValueError(f"variable block {name} exists")
        coords = coords.reset_index(drop=True)
        n = len(coords)
        lo = np.broadcast_to(np.asarray(lower, dtype=float), (n,)).copy()
        hi = np.broadcast_to(np.asarray(upper, dtype=float), (n,)).copy()
        block = VarBlock(name, coords, self._n_vars, lo, hi, integer)
        self.variables[name] = block
        self._n_vars += n
        out = coords.copy()
        out["var"] = block.ids
        return out

    def add_variables_on(
        self,
        name: str,
        table: pd.DataFrame,
        keys: list[str],
        lower: float | np.ndarray = 0.0,
        upper: float | np.ndarray = INF,
        integer: bool = False,
    ) -> pd.DataFrame:
        """Add one variable per row of ``table``, with its ``keys`` columns as coordinates; return ``table``
        with the ``var`` ids after the keys.

        The table :meth:`add_variables` returns joined back onto ``table`` by ``keys``, without the join
        (a join per block was a tenth of a small model's build): the keys of a variable block are unique,
        so each row gets its own id in order. Keys that repeat are joined, as before.
        """
        coords = self.add_variables(name, table[keys], lower, upper, integer)
        if len(table) and len(_row_codes(table, keys)[1]) < len(table):
            return coords.merge(table, on=keys)
        rest = [c for c in table.columns if c not in keys]
        return pd.concat([coords, table[rest].reset_index(drop=True)], axis=1) if rest else coords

    # -- constraints --------------------------------------------------------
    def add_constraints(
        self,
        name: str,
        terms: pd.DataFrame | list[pd.DataFrame],
        sense: str,
        rhs: float | pd.DataFrame = 0.0,
        keys: list[str] | None = None,
    ) -> None:
        """Add ``Σ coef·var  (sense)  rhs`` per distinct value of ``keys``.

        Parameters
        ----------
        terms
            Term table(s) with columns ``keys + [var, coef]``; terms sharing keys
            form one row. Several tables are concatenated.
        sense
            ``"<="``, ``">="`` or ``"=="``.
        rhs
            A scalar for every row, or a table with columns ``keys + [rhs]``.
            Rows that appear only in ``rhs`` have no terms: if zero does not
            satisfy them they are recorded in :attr:`infeasible_rows`.
        """
        if isinstance(terms, list):
            terms = [t for t in terms if len(t)]
            terms = pd.concat(terms, ignore_index=True) if terms else pd.DataFrame()
        keys = list(keys or [])
        if terms.empty:
            self._add_rows(name, {}, np.zeros(0, np.int64), np.zeros(0), sense, rhs, keys)
            return
        self._add_rows(name, {k: terms[k].array for k in keys}, terms["var"].to_numpy(np.int64),
                       terms["coef"].to_numpy(float), sense, rhs, keys)

    def _add_rows(self, name: str, columns: dict, var: np.ndarray, coef: np.ndarray, sense: str,
                  rhs: float | pd.DataFrame, keys: list[str]) -> None:
        """:meth:`add_constraints` on terms given as arrays: ``columns`` (each of ``keys``, one value per
        term), ``var`` and ``coef``."""
        if name in self.constraints:
            raise ValueError(f"constraint block {name} exists")
        if not len(var):
            # no terms: rows only from the right-hand side, their keys as a table without terms has them
            columns = {k: pd.array([], dtype=object) for k in keys}
            var, coef = np.zeros(0, np.int64), np.zeros(0)
        nz = coef != 0
        if not nz.all():
            columns, var, coef = {k: v[nz] for k, v in columns.items()}, var[nz], coef[nz]
        row_keys, codes = self._rows(columns, len(var), rhs, keys)
        term_rows = codes[:len(var)]
        if len(var) and len(pd.unique(term_rows * (int(var.max()) + 1) + var)) < len(var):
            # one coefficient per (row, variable): some back ends keep only the last duplicate
            terms = as_table({**columns, "var": var, "coef": coef})
            terms = terms.groupby(keys + ["var"], as_index=False, sort=False)["coef"].sum()
            terms = terms[terms["coef"] != 0]
            columns, var, coef = ({k: terms[k].array for k in keys}, terms["var"].to_numpy(np.int64),
                                  terms["coef"].to_numpy(float))
            row_keys, codes = self._rows(columns, len(var), rhs, keys)
            term_rows = codes[:len(var)]
        if isinstance(rhs, pd.DataFrame):
            # Σ rhs per row; a rhs row with a missing key adds nothing (as pandas' groupby drops it)
            value = rhs["rhs"].to_numpy(float)
            missing = np.isnan(value)
            for k in keys:
                missing |= pd.isna(rhs[k].array)
            value = np.where(missing, 0.0, value)
            # (float: numpy counts an empty table's sums as integers)
            r = (np.bincount(codes[len(var):], weights=value, minlength=len(row_keys)).astype(float) if keys
                 else np.full(len(row_keys), float(value.sum())))
        else:
            r = np.full(len(row_keys), float(rhs))
        has_terms = np.zeros(len(row_keys), dtype=bool)
        has_terms[term_rows] = True
        lo, hi = _bounds(sense, r)
        empty_bad = (~has_terms) & ((lo > 1e-9) | (hi < -1e-9))
        if empty_bad.any():
            bad = row_keys[empty_bad].copy()
            bad["rhs"] = r[empty_bad]
            self.infeasible_rows[name] = bad
        keep = has_terms
        new_row = np.cumsum(keep) - 1
        if not keep.all():
            row_keys = row_keys[keep].reset_index(drop=True)
        start = self._n_rows
        block = ConBlock(
            name=name,
            coords=row_keys,
            start=start,
            rows=start + new_row[term_rows].astype(np.int64),
            cols=var,
            vals=coef,
            lower=lo[keep],
            upper=hi[keep],
            sense=sense,
        )
        self.constraints[name] = block
        self._n_rows += block.size

    @staticmethod
    def _rows(columns: dict, n: int, rhs, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
        """A block's rows: every distinct key of the ``n`` terms (``columns``), then of a right-hand-side table,
        in order of appearance; and the row of each term, then of each right-hand-side line (one row and zeros
        without keys)."""
        if isinstance(rhs, pd.DataFrame):
            # each key column as concatenating the two tables gives it (an empty one's type counts too)
            every = {k: concat_columns([columns[k], rhs[k].array]) for k in keys}
            n += len(rhs)
        else:
            every = {k: columns[k] for k in keys}
        if not keys:
            return pd.DataFrame(index=pd.RangeIndex(1)), np.zeros(n, dtype=np.int64)
        codes, first = _row_codes(every, keys)
        return as_table({k: every[k].take(first) for k in keys}), codes

    def add(self, name: str, con: "Constraint") -> None:
        """Add the rows of ``con`` (built with :mod:`optimizer.model.expr`) as block ``name``."""
        rhs = con.rhs
        if isinstance(rhs, pd.DataFrame) and set(rhs.columns) != set(con.lhs.coords) | {"rhs"}:
            raise ValueError(f"{name}: rhs columns {list(rhs.columns)} do not match the rows {con.lhs.coords}")
        e = con.lhs
        self._add_rows(name, {k: e.columns[k] for k in e.coords}, e.var, e.coef, con.sense, rhs, list(e.coords))

    def add_slack(
        self,
        block: str,
        coef_sign: float | np.ndarray = 1.0,
        penalty: float | np.ndarray = 0.0,
        rows: np.ndarray | pd.Series | None = None,
        name: str | None = None,
    ) -> pd.DataFrame:
        """Add one non-negative continuous slack variable to rows of constraint block ``block``.

        Row ``i`` gains the term ``coef_sign[i]·s_i`` (``+1`` relaxes a ``>=`` row,
        ``-1`` a ``<=`` row; any non-zero coefficient scales the slack's unit) and
        the objective gains ``penalty[i]·s_i``. Used by :mod:`optimizer.studies.diagnose`
        for the elastic model; nothing else changes.

        Parameters
        ----------
        rows
            Positions of rows within the block (integers) or a boolean mask over
            them; all rows when ``None``.
        name
            Name of the new variable block (default ``slack:<block>``).

        Returns
        -------
        DataFrame
            The block's coordinates of those rows, with the slack's ``var`` id.
        """
        b = self.constraints[block]
        if rows is None:
            idx = np.arange(b.size, dtype=np.int64)
        else:
            r = np.asarray(rows)
            idx = np.flatnonzero(r) if r.dtype == bool else r.astype(np.int64)
        coords = b.coords.iloc[idx].reset_index(drop=True)
        out = self.add_variables(name or f"slack:{block}", coords)
        n = len(idx)
        coef = np.broadcast_to(np.asarray(coef_sign, dtype=float), (n,)).copy()
        b.rows = np.concatenate([b.rows, b.start + idx])
        b.cols = np.concatenate([b.cols, out["var"].to_numpy(np.int64)])
        b.vals = np.concatenate([b.vals, coef])
        pen = np.broadcast_to(np.asarray(penalty, dtype=float), (n,))
        if n and np.any(pen != 0):
            self.add_objective(pd.DataFrame({"var": out["var"].to_numpy(np.int64), "coef": pen}))
        return out

    # -- objective ----------------------------------------------------------
    def add_objective(self, terms: pd.DataFrame, constant: float = 0.0) -> None:
        """Add ``Σ coef·var + constant`` to the objective (minimised)."""
        if len(terms):
            self._obj.append(terms[["var", "coef"]])
        self.objective_constant += float(constant)

    def repriced(self, costs: "MIP") -> "MIP":
        """This model with the objective of ``costs`` (a model that holds only an objective on these variables).

        Variables and constraint blocks are shared, not copied: neither is changed after the build.
        """
        return replace(self, constraints=dict(self.constraints), _obj=list(costs._obj),
                       objective_constant=costs.objective_constant)

    def replace_block(self, block: ConBlock) -> None:
        """Put ``block`` in the place of the constraint block of its name, which has as many rows.

        ``block`` is built as if it were added last (row ids from the number of rows); it is moved to the
        old block's rows.
        """
        old = self.constraints[block.name]
        if block.size != old.size:
            raise ValueError(f"block {block.name}: {block.size} rows in place of {old.size}")
        shift = old.start - block.start
        self.constraints[block.name] = replace(block, start=old.start, rows=block.rows + shift)

    def objective_terms(self) -> pd.DataFrame:
        if not self._obj:
            return pd.DataFrame({"var": np.array([], dtype=np.int64), "coef": np.array([], dtype=float)})
        return pd.concat(self._obj, ignore_index=True)

    # -- assembly -----------------------------------------------------------
    @property
    def n_vars(self) -> int:
        return self._n_vars

    @property
    def n_rows(self) -> int:
        return self._n_rows

    def n_integer(self) -> int:
        return sum(b.size for b in self.variables.values() if b.integer)

    def arrays(self) -> Arrays:
        """Assemble every block into flat arrays for a backend."""
        n = self._n_vars
        col_lo = np.concatenate([b.lower for b in self.variables.values()]) if n else np.zeros(0)
        col_hi = np.concatenate([b.upper for b in self.variables.values()]) if n else np.zeros(0)
        integer = (np.concatenate([np.full(b.size, b.integer) for b in self.variables.values()])
                   if n else np.zeros(0, bool))
        c = np.zeros(n)
        obj = self.objective_terms()
        np.add.at(c, obj["var"].to_numpy(np.int64), obj["coef"].to_numpy(float))
        blocks = list(self.constraints.values())
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
        var_names = [f"{b.name}#{i}" for b in self.variables.values() for i in range(b.size)]
        row_names = [f"{b.name}#{i}" for b in blocks for i in range(b.size)]
        return Arrays(
            n_vars=n,
            n_rows=self._n_rows,
            rows=cat([b.rows for b in blocks], np.int64),
            cols=cat([b.cols for b in blocks], np.int64),
            vals=cat([b.vals for b in blocks], float),
            row_lo=cat([b.lower for b in blocks], float),
            row_hi=cat([b.upper for b in blocks], float),
            col_lo=col_lo,
            col_hi=col_hi,
            integer=integer,
            c=c,
            c0=self.objective_constant,
            var_names=var_names,
            row_names=row_names,
        )

    def named(self, x: np.ndarray) -> NamedPoint:
        """``x``, a point of this program, by block name and coordinates (its non-zero values only)."""
        x = np.asarray(x, float)
        blocks = {}
        for name, block in self.variables.items():
            v = x[block.start: block.start + block.size]
            nz = np.flatnonzero(v)
            if len(nz):
                blocks[name] = (block.keys()[nz], v[nz].copy())
        return NamedPoint(blocks)

    def point_from(self, point: NamedPoint) -> np.ndarray:
        """``point`` (a plan of this or another program, :meth:`named`) as a point of this program.

        Each variable takes the value the point gives the block of the same
        name at the same coordinates (service, offering, period, ...), and 0
        where it gives none: a plan of a narrower problem (no new owned
        servers, one offering fewer) read as a plan of a wider one. Whether
        the result meets this program's rows is for the caller to check
        (:func:`optimizer.solve.driver.known_plan`).
        """
        out = np.zeros(self._n_vars)
        for name, (keys, values) in point.blocks.items():
            block = self.variables.get(name)
            if block is None or not block.size or list(keys.names) != list(block.keys().names):
                continue
            at = block.keys().get_indexer(keys)  # the keys of a block are unique
            found = at >= 0
            out[block.start + at[found]] = values[found]
        return out

    def values(self, name: str, x: np.ndarray) -> pd.DataFrame:
        """The solution of block ``name``: its coordinates plus a ``value`` column."""
        b = self.variables[name]
        out = b.coords.copy()
        out["value"] = x[b.start: b.start + b.size] if b.size else np.zeros(0)
        return out

    def stats(self) -> dict:
        return {
            "variables": self._n_vars,
            "integer_variables": self.n_integer(),
            "constraints": self._n_rows,
            "nonzeros": int(sum(len(b.vals) for b in self.constraints.values())),
            "blocks": {**{f"var:{k}": v.size for k, v in self.variables.items()},
                       **{f"con:{k}": v.size for k, v in self.constraints.items()}},
        }


def _row_codes(columns, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct values of ``keys`` in ``columns`` (a table, or arrays by key) in order of first
    appearance.

    Returns each row's number and, per number, the position of its first
    row (the rows ``drop_duplicates`` keeps). Missing values are a value of
    their own, as for ``drop_duplicates``. One factorisation per key column,
    the running code renumbered after each, so it never overflows.
    """
    code = np.zeros(len(columns[keys[0]]) if keys else 0, dtype=np.int64)
    for k in keys:
        column = columns[k]
        if isinstance(column, pd.arrays.NumpyExtensionArray):
            column = column.to_numpy()  # pandas 2.2 warns on factorising this wrapper; its array factorises alike
        c, u = pd.factorize(column, sort=False, use_na_sentinel=False)
        code = pd.factorize(code * len(u) + c, sort=False)[0]
    n = int(code.max()) + 1 if len(code) else 0
    first = np.empty(n, dtype=np.int64)
    first[code[::-1]] = np.arange(len(code) - 1, -1, -1, dtype=np.int64)
    return code, first


def _bounds(sense: str, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if sense == "<=":
        return np.full_like(rhs, -INF), rhs
    if sense == ">=":
        return rhs, np.full_like(rhs, INF)
    if sense == "==":
        return rhs.copy(), rhs.copy()
    raise ValueError(f"unknown sense {sense!r}")


def terms(df: pd.DataFrame, keys: list[str], coef: np.ndarray | pd.Series | float, var: str = "var") -> pd.DataFrame:
    """A term table from ``df``: its ``keys`` columns, its variable ids and ``coef``."""
    out = df[keys].copy()
    out["var"] = df[var].to_numpy(np.int64)
    out["coef"] = np.broadcast_to(np.asarray(coef, dtype=float), (len(df),)) if len(df) else np.zeros(0)
    return out
