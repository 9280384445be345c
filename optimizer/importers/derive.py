"""Derivations the shipped catalog uses (documented in docs/catalog.md).

* Spot interruption rate from AWS Spot Advisor's monthly band: a band p is
  the fraction of instances reclaimed in a month; with Poisson reclaims,
  ``lambda = -ln(1 - p) / 730`` interruptions per instance-hour.
* Reserved (1- or 3-year, no upfront) effective hourly price from the
  provider's commitment discount d: ``on_demand x (1 - d)``.
* Owned server capex and fixed cost per month (see :func:`owned_fixed_per_month`).
"""

from __future__ import annotations

import math

from ..vocabulary import HOURS_PER_MONTH  # one convention: 8760 h / 12

DEFAULT_INTERRUPTION_BAND = 0.15   # finance_defaults: spot_interruption_band_monthly


def sig(x: float, digits: int = 6) -> float:
    """``x`` rounded to ``digits`` significant digits (for readable catalog numbers)."""
    return float(f"{x:.{digits}g}")


def interruptions_per_hour(band_monthly: float) -> float:
    """Per-instance interruption rate (1/h) from a monthly reclaim fraction ``band_monthly``."""
    if not 0 <= band_monthly < 1:
        raise ValueError(f"monthly interruption band must be in [0, 1), got {band_monthly}")
    return -math.log(1.0 - band_monthly) / HOURS_PER_MONTH


def reserved_price(on_demand: float, discount: float) -> float:
    """Effective hourly price of a no-upfront commitment at ``discount`` off on-demand."""
    if not 0 <= discount < 1:
        raise ValueError(f"discount must be in [0, 1), got {discount}")
    return on_demand * (1.0 - discount)


def owned_capex(node_price: float, interconnect_fraction: float, misc_fraction: float) -> float:
    """All-in capex of a server: node price / (1 - cluster interconnect share) x (1 + misc)."""
    return node_price / (1.0 - interconnect_fraction) * (1.0 + misc_fraction)


def owned_fixed_per_month(contracted_kw: float, colo_per_kw_month: float, node_price: float,
                          maintenance_per_year: float, gpus: int, staff_per_gpu_year: float) -> float:
    """Colocation (kW-month x kW) + maintenance (share of node price / 12) + staff share per month."""
    return (colo_per_kw_month * contracted_kw + maintenance_per_year * node_price / 12.0
            + staff_per_gpu_year * gpus / 12.0)
