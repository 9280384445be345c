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
``price-band``
    A rented offering's effective price per GPU-hour lies in the band its
    GPU type's published on-demand prices span (``rental_price_bands.csv``,
    lowest ``L`` and highest ``H``), widened by how far a published price
    moves in a year (``d`` = price_band_drift): on-demand in [L / d, H d];
    spot in [L s_min / d, H s_max d] with the spot fractions above; reserved
    (price plus upfront spread over the term) in [L (1 - r_max) / d, H d]
    with r_max = reserved_discount_max.
``price-band-missing``
    The offering's GPU type has no sourced band: its price cannot be checked.
``owned-capex``
    An owned server's capex per GPU lies in [P_low, P_high x
    owned_capex_overhead_max], where P is the published server price per GPU
    for its GPU type (``server_price_bands.csv``); the factor pays for the
    server's share of the cluster fabric and its installation.
``owned-power``
    An owned server's busy power per GPU lies in [TDP x
    owned_power_per_gpu_min, TDP x owned_power_per_gpu_max].
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .. import catalog as _catalog
from ..vocabulary import HOURS_PER_MONTH
from ..schema import Offering

VIOLATION_COLUMNS = ["rule", "offering", "value", "limit", "message"]


def rules() -> dict[str, float]:
    """Rule thresholds by name (``catalogs/check_rules.csv``)."""
    t = pd.read_csv(_catalog.CATALOG_DIR / "check_rules.csv")
    return dict(zip(t["name"], t["value"].astype(float)))


def _key(o: Offering) -> tuple:
    return (o.provider, o.instance_type or o.id.rsplit("-", 1)[0], o.region)


def _bands(table: pd.DataFrame) -> dict[str, tuple[float, float]]:
    return {g: (float(lo), float(hi)) for g, lo, hi in zip(table["gpu"], table["low"], table["high"])}


def rental_band(pricing: str, low: float, high: float, lim: dict[str, float],
                provider: str | None = None) -> tuple[float, float]:
    """The band a rented price per GPU-hour of this pricing kind must lie in, from the on-demand band [low, high]."""
    d = lim["price_band_drift"]
    if pricing == "spot":
        hi = lim.get(f"spot_fraction_max_{provider}", lim["spot_fraction_max"])
        return low * lim["spot_fraction_min"] / d, high * hi * d
    if pricing == "reserved":
        return low * (1.0 - lim["reserved_discount_max"]) / d, high * d
    return low / d, high * d


def _effective_per_gpu_hour(o: Offering) -> float:
    """Price per GPU-hour with any upfront payment spread over the term."""
    per_unit = o.price_per_hour or 0.0
    if o.pricing == "reserved" and o.upfront:
        per_unit += o.upfront / ((o.term_months or 12) * HOURS_PER_MONTH)
    return per_unit / o.gpus_per_unit


def check(offerings: Iterable[Offering], limits: dict[str, float] | None = None,
          tdp_w: dict[str, float] | None = None,
          rental_bands: dict[str, tuple[float, float]] | None = None,
          server_bands: dict[str, tuple[float, float]] | None = None) -> pd.DataFrame:
    """Every violation of every rule (columns rule, offering, value, limit, message); empty when all pass.

    ``tdp_w`` maps GPU types to their TDP in watts (default: ``catalogs/gpus.csv``);
    ``rental_bands`` and ``server_bands`` map GPU types to (low, high) published
    prices (default: ``catalogs/rental_price_bands.csv``, ``server_price_bands.csv``).
    """
    offs = list(offerings)
    lim = rules() if limits is None else limits
    if tdp_w is None:
        g = _catalog.gpu_table()
        tdp_w = dict(zip(g["name"], g["tdp_w"].astype(float)))
    if rental_bands is None:
        rental_bands = _bands(_catalog.rental_price_bands())
    if server_bands is None:
        server_bands = _bands(_catalog.server_price_bands())
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
        if o.pricing != "owned" and o.price_per_hour is not None:
            if o.gpu not in rental_bands:
                bad("price-band-missing", o, o.gpu, None, f"no published price band for {o.gpu} "
                    "(catalogs/rental_price_bands.csv): its price cannot be checked")
            else:
                per_gpu = _effective_per_gpu_hour(o)
                lo, hi = rental_band(o.pricing, *rental_bands[o.gpu], lim, o.provider)
                if not lo <= per_gpu <= hi:
                    bad("price-band", o, round(per_gpu, 4), (round(lo, 4), round(hi, 4)),
                        f"{per_gpu:.2f} USD per GPU-hour is outside {lo:.2f}-{hi:.2f} for {o.gpu} {o.pricing} "
                        f"(published on-demand {rental_bands[o.gpu][0]:g}-{rental_bands[o.gpu][1]:g}, "
                        "catalogs/rental_price_bands.csv)")
        if o.pricing == "owned" and o.capex is not None:
            if o.gpu not in server_bands:
                bad("price-band-missing", o, o.gpu, None, f"no published server price for {o.gpu} "
                    "(catalogs/server_price_bands.csv): its capex cannot be checked")
            else:
                per_gpu = o.capex / o.gpus_per_unit
                lo, hi = server_bands[o.gpu]
                hi = hi * lim["owned_capex_overhead_max"]
                if not lo <= per_gpu <= hi:
                    bad("owned-capex", o, round(per_gpu), (round(lo), round(hi)),
                        f"capex {per_gpu:,.0f} USD per GPU is outside {lo:,.0f}-{hi:,.0f} for a {o.gpu} server "
                        "(published server price per GPU, with fabric and installation; "
                        "catalogs/server_price_bands.csv)")
        if o.pricing == "owned" and o.gpu in tdp_w and o.power_kw is not None:
            per_gpu = o.power_kw * 1000.0 / o.gpus_per_unit
            cap = tdp_w[o.gpu] * lim["owned_power_per_gpu_max"]
            floor = tdp_w[o.gpu] * lim["owned_power_per_gpu_min"]
            if per_gpu > cap:
                bad("owned-power", o, round(per_gpu, 1), round(cap, 1),
                    f"{per_gpu:.0f} W per GPU busy; a {o.gpu} server draws at most {cap:.0f} W per GPU")
            elif per_gpu < floor:
                bad("owned-power", o, round(per_gpu, 1), round(floor, 1),
                    f"{per_gpu:.0f} W per GPU busy; a busy {o.gpu} server draws at least {floor:.0f} W per GPU")
    return pd.DataFrame(out, columns=VIOLATION_COLUMNS)
