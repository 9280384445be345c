"""Checks a buyer would apply to an offering catalog (``gpuopt catalog check``).

Each rule has a name and a threshold from ``catalogs/check_rules.csv``
(value, unit, source, date), so a rule is changed by editing data with its
source, never by loosening code. A check reads offerings and returns one
row per violation; the catalog build drops what violates a price rule and
says so in the file's header, and a test runs the check on the shipped
catalog.

Rules
-----
``sourced``
    Every offering has a ``source`` and a ``date``.
``supply``
    Every offering has ``max_units`` and a ``quota_source``.
``spot-fraction``
    A spot price lies in [spot_fraction_min, spot_fraction_max) of the
    on-demand price of the same provider, instance type and region
    (``spot_fraction_max_<provider>`` where the provider publishes a band).
``reserved-below-on-demand``
    A reservation's effective hourly price (price + upfront spread over the
    term) is below the on-demand price of the same instance and region.
``owned-power``
    An owned server's busy power per GPU is at most its GPU's TDP times
    owned_power_per_gpu_max.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .. import catalog as _catalog
from ..load import HOURS_PER_MONTH
from ..schema import Offering

VIOLATION_COLUMNS = ["rule", "offering", "value", "limit", "message"]


def rules() -> dict[str, float]:
    """Rule thresholds by name (``catalogs/check_rules.csv``)."""
    t = pd.read_csv(_catalog.CATALOG_DIR / "check_rules.csv")
    return dict(zip(t["name"], t["value"].astype(float)))


def _key(o: Offering) -> tuple:
    return (o.provider, o.instance_type or o.id.rsplit("-", 1)[0], o.region)


def check(offerings: Iterable[Offering], limits: dict[str, float] | None = None,
          tdp_w: dict[str, float] | None = None) -> pd.DataFrame:
    """Every violation of every rule (columns rule, offering, value, limit, message); empty when all pass.

    ``tdp_w`` maps GPU types to their TDP in watts (default: ``catalogs/gpus.csv``).
    """
    offs = list(offerings)
    lim = rules() if limits is None else limits
    if tdp_w is None:
        g = _catalog.gpu_table()
        tdp_w = dict(zip(g["name"], g["tdp_w"].astype(float)))
    od = {_key(o): o for o in offs if o.pricing == "on_demand"}
    out = []

    def bad(rule, o, value, limit, message):
        out.append({"rule": rule, "offering": o.id, "value": value, "limit": limit, "message": message})

    for o in offs:
        if not o.source or o.date is None:
            bad("sourced", o, None, None, "no source or no date")
        if o.max_units is None or not o.quota_source:
            bad("supply", o, o.max_units, None, "no max_units or no quota_source")
        base = od.get(_key(o))
        if o.pricing == "spot" and base is not None:
            frac = o.price_per_hour / base.price_per_hour
            lo = lim["spot_fraction_min"]
            hi = lim.get(f"spot_fraction_max_{o.provider}", lim["spot_fraction_max"])
            if frac < lo:
                bad("spot-fraction", o, round(frac, 4), lo, f"spot is {frac:.0%} of on-demand {base.id}; no "
                    f"provider publishes a discount beyond {1 - lo:.0%}")
            elif frac >= hi:
                bad("spot-fraction", o, round(frac, 4), hi, f"spot is {frac:.0%} of on-demand {base.id}; at most "
                    f"{hi:.0%} for {o.provider} (spot_fraction_max"
                    f"{'_' + o.provider if f'spot_fraction_max_{o.provider}' in lim else ''})")
        if o.pricing == "reserved" and base is not None:
            term_h = (o.term_months or 12) * HOURS_PER_MONTH
            eff = o.price_per_hour + (o.upfront or 0.0) / term_h
            if eff >= base.price_per_hour:
                bad("reserved-below-on-demand", o, round(eff, 4), base.price_per_hour,
                    f"a reservation at {eff:g} per hour is not below on-demand {base.id} at {base.price_per_hour:g}")
        if o.pricing == "owned" and o.gpu in tdp_w and o.power_kw is not None:
            per_gpu = o.power_kw * 1000.0 / o.gpus_per_unit
            cap = tdp_w[o.gpu] * lim["owned_power_per_gpu_max"]
            if per_gpu > cap:
                bad("owned-power", o, round(per_gpu, 1), round(cap, 1),
                    f"{per_gpu:.0f} W per GPU busy; a {o.gpu} server draws at most {cap:.0f} W per GPU")
    return pd.DataFrame(out, columns=VIOLATION_COLUMNS)
