"""Named efficiency factors and defaults (``catalogs/efficiency.csv``).

Every number the sizing model does not derive from an architecture or a
datasheet -- achieved fractions of peak compute and bandwidth, MFU by GPU
generation, scheduler overheads, memory headroom, byte sizes of quantised
weights, training layout defaults -- is one named row of the catalog table
with its unit, source and date. A problem file may override any of them
with ``efficiency: {name: value}``; an unknown name or a value outside the
range its unit allows is an :class:`~optimizer.errors.InputError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import pandas as pd

from .. import catalog as cat
from ..errors import InputError, unknown_name

REQUIRED_COLUMNS = ("name", "value", "unit", "source", "date", "description")

# Allowed range per unit: (low, low_inclusive, high). A fraction is in (0, 1], a share in [0, 1];
# a count (tokens, GPUs, sequences, count) is at least 1; a time or size is >= 0.
_RANGES: dict[str, tuple[float, bool, float]] = {
    "fraction": (0.0, False, 1.0),   # an achieved share of a peak: 0 would mean "never finishes"
    "share": (0.0, True, 1.0),       # a share that may be zero (a loss, an overlap)
    "ratio": (0.0, False, math.inf),
    "bytes": (0.0, False, math.inf),
    "bytes/param": (0.0, False, math.inf),
    "GiB": (0.0, True, math.inf),
    "GB/s": (0.0, False, math.inf),
    "ms": (0.0, True, math.inf),
    "us": (0.0, True, math.inf),
    "ns": (0.0, True, math.inf),
    "minutes": (0.0, True, math.inf),
    "tokens": (1.0, True, math.inf),
    "sequences": (1.0, True, math.inf),
    "GPUs": (1.0, True, math.inf),
    "count": (1.0, True, math.inf),
}


def _range_text(unit: str) -> str:
    lo, inclusive, hi = _RANGES[unit]
    left = f">= {lo:g}" if inclusive else f"> {lo:g}"
    return left if math.isinf(hi) else f"{left} and <= {hi:g}"


def _in_range(unit: str, value: float) -> bool:
    lo, inclusive, hi = _RANGES[unit]
    if not math.isfinite(value):
        return False
    return (value >= lo if inclusive else value > lo) and value <= hi


class Efficiency(Mapping):
    """Read-only mapping ``name -> value`` of efficiency factors.

    Parameters
    ----------
    table
        The catalog table (columns ``name, value, unit, source, date,
        description``).
    overrides
        Values that replace the catalog's (already validated).

    Notes
    -----
    ``eff["decode_bw_fraction"]`` gives a float; :meth:`row` gives the whole
    catalog row; :attr:`overridden` names the values a problem replaced.
    Instances are hashable by content so results can be cached per value set.
    """

    def __init__(self, table: pd.DataFrame, overrides: Mapping[str, float] | None = None) -> None:
        self._table = table.set_index("name", drop=False)
        self._values = {str(n): float(v) for n, v in zip(table["name"], table["value"])}
        self.overridden = dict(overrides or {})
        self._values.update({k: float(v) for k, v in self.overridden.items()})
        self._key = tuple(sorted(self._values.items()))

    def __getitem__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise unknown_name("efficiency factor", name, self._values, field=f"efficiency.{name}",
                               value=name) from None

    def __contains__(self, name: object) -> bool:
        # Mapping's default asks __getitem__, whose unknown name is an InputError (bad user input),
        # not the KeyError membership needs
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Efficiency) and other._key == self._key

    def row(self, name: str) -> dict:
        """The catalog row of ``name`` (with the effective value)."""
        r = dict(self._table.loc[name])
        r["value"] = self[name]
        return r

    def unit(self, name: str) -> str:
        return str(self._table.loc[name, "unit"])

    def with_overrides(self, overrides: Mapping[str, float], *, file: str | None = None) -> "Efficiency":
        """A copy with more overrides applied (validated like a problem file's)."""
        merged = dict(self.overridden)
        merged.update(validate_overrides(self._table.reset_index(drop=True), overrides, file=file))
        return Efficiency(self._table.reset_index(drop=True), merged)

    def table(self) -> pd.DataFrame:
        """The table with effective values and an ``overridden`` flag column."""
        t = self._table.reset_index(drop=True).copy()
        t["value"] = [self._values[n] for n in t["name"]]
        t["overridden"] = [n in self.overridden for n in t["name"]]
        return t


def validate_table(table: pd.DataFrame, file: str = "catalogs/efficiency.csv") -> pd.DataFrame:
    """Check the catalog table: columns, unique names, known units, values in range."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"efficiency table lacks columns {missing}", file=file)
    dup = table["name"][table["name"].duplicated()].tolist()
    if dup:
        raise InputError("duplicate efficiency names", file=file, value=dup)
    for name, value, unit in zip(table["name"], table["value"], table["unit"]):
        if unit not in _RANGES:
            raise InputError(f"unknown unit {unit!r}", file=file, field=f"{name}.unit",
                             allowed=", ".join(_RANGES))
        if not _in_range(unit, float(value)):
            raise InputError("value out of range", file=file, field=f"{name}.value", value=value,
                             allowed=_range_text(unit))
    return table


def validate_overrides(table: pd.DataFrame, overrides: Mapping[str, object], *,
                       file: str | None = None) -> dict[str, float]:
    """Check a problem's ``efficiency:`` overrides against the table.

    Each name must be a row of the table (else an error with the nearest
    name), each value a real number in the range its unit allows.
    """
    units = dict(zip(table["name"], table["unit"]))
    out: dict[str, float] = {}
    for name, value in (overrides or {}).items():
        field = f"efficiency.{name}"
        if name not in units:
            raise unknown_name("efficiency factor", name, units, file=file, field=field, value=name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError("efficiency values must be numbers", file=file, field=field, value=value)
        v = float(value)
        if not _in_range(units[name], v):
            raise InputError(f"value out of range for unit {units[name]}", file=file, field=field,
                             value=value, allowed=_range_text(units[name]))
        out[name] = v
    return out


def load_efficiency(overrides: Mapping[str, object] | None = None, *, file: str | None = None) -> Efficiency:
    """The shipped efficiency table with ``overrides`` (a problem's ``efficiency:``) applied.

    Parameters
    ----------
    overrides
        ``{name: value}``; names must exist in the table.
    file
        The problem file, named in errors.
    """
    table = validate_table(cat.efficiency_table())
    return Efficiency(table, validate_overrides(table, overrides or {}, file=file))
