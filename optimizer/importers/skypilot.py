"""Import a SkyPilot ``vms.csv`` price catalog as gpuopt offerings.

SkyPilot's catalogs (github.com/skypilot-org/skypilot-catalog,
``catalogs/<schema>/<cloud>/vms.csv``) hold one row per instance type and
region (and zone). This importer turns them into on-demand and spot
:class:`~optimizer.schema.Offering` rows, one per (instance type, region):

* columns are read **by name** (their order differs per cloud); extra fields
  beyond the header (Azure's unquoted ``V1,V2`` generation) are ignored and
  counted; CRLF or LF line endings and a UTF-8 BOM are accepted;
* ``GpuInfo`` is a Python-literal dict string; it is parsed with
  :func:`ast.literal_eval` (never ``eval``) and used only for GPU memory, to
  tell A100 40 GB from 80 GB. Per-GPU memory is ``SizeInMiB`` except on Vast
  (total across GPUs) and where the value is below 1024 (RunPod v8 writes GB);
* accelerator names are mapped to gpuopt GPU types, using the instance type
  where the name is ambiguous (AWS ``p5`` H100 is H100-SXM, Lambda
  ``gpu_1x_h100_pcie`` is H100-PCIe, Azure ``NC..H100_v5`` is H100-NVL, RunPod
  ``H100`` is the PCIe card); names that map to nothing are **reported** with
  row counts, never dropped silently;
* per-zone rows fold to one offering per region: on-demand is the cheapest
  ``Price`` in the region, spot the median ``SpotPrice`` over its zones (the
  middle zone's, the dearer of two middles: a price some zone quotes). The
  cheapest zone is an outlier too often to plan on: AWS p4d.24xlarge in
  us-east-1 quotes 2.47 in one zone and 7.88-8.19 in the three others
  (``spot_zone="cheapest"`` keeps the old choice);
  blank, zero or non-numeric prices mean "not offered"; a spot price equal to
  or above the on-demand price is a placeholder and is dropped (reported);
* GCP prices attachable GPUs apart from their host VM (rows with an empty
  ``InstanceType``): the GPU row is joined to its host VM in the same zone
  (A100 -> ``a2-highgpu-Ng``, A100-80GB -> ``a2-ultragpu-Ng``, H100 ->
  ``a3-highgpu-Ng``, H100-MEGA -> ``a3-megagpu-8g``, H200 ->
  ``a3-ultragpu-8g``, B200 -> ``a4-highgpu-8g``, L4 -> ``g2-standard-*``,
  T4/V100/P100/P4 -> ``n1-highmem-8``) and the offering's price is the sum;
* fractional GPU counts (AWS g6f 0.25 L4, Azure NV*ads_A10_v5 1/6 A10) and
  counts that are not a power of two are skipped and reported: a gpuopt unit
  holds a whole power-of-two number of GPUs.
"""

from __future__ import annotations

import ast
import csv
import datetime as _dt
import io
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..yamlio import read_text

from ..errors import InputError
from ..schema import Offering, is_power_of_two
from .derive import DEFAULT_INTERRUPTION_BAND, interruptions_per_hour, sig

REQUIRED_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
MAX_BYTES = 64 * 1024 * 1024
PRICE_DECIMALS = 6

# Accelerator names whose gpuopt type does not depend on the instance type.
# (Case-insensitive; aliases from catalogs/gpus.csv are tried after this table.)
SIMPLE_NAMES = {
    "t4": "T4",
    "l4": "L4",
    "a10g": "A10G",
    "a10": "A10",
    "l40s": "L40S",
    "rtx4090": "RTX-4090",
    "rtx-4090": "RTX-4090",
    "rtx5090": "RTX-5090",
    "rtx-5090": "RTX-5090",
    "a100-80gb-sxm": "A100-80GB",
    "h100-sxm": "H100-SXM",
    "h100-mega": "H100-SXM",
    "h100-nvl": "H100-NVL",
    "h200": "H200",
    "h200-sxm": "H200",
    "gh200": "GH200",
    "b200": "B200",
    "gb200": "GB200",
    "mi300x": "MI300X",
    "mi325x": "MI325X",
    "mi355x": "MI355X",
    "gaudi3": "Gaudi3",
}

# GCP: the host VM an attachable accelerator row is priced with, by (name, count).
_GCP_L4_HOSTS = {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"}
GCP_N1_HOST = "n1-highmem-8"


def gcp_host_vm(accelerator: str, count: int) -> str | None:
    """The GCP host VM type SkyPilot pairs with ``count`` attachable ``accelerator`` GPUs."""
    name = accelerator.upper()
    if name == "A100":
        return "a2-megagpu-16g" if count == 16 else f"a2-highgpu-{count}g"
    if name == "A100-80GB":
        return f"a2-ultragpu-{count}g"
    if name == "H100":
        return f"a3-highgpu-{count}g"
    if name == "H100-MEGA":
        return "a3-megagpu-8g"
    if name == "H200":
        return "a3-ultragpu-8g"
    if name == "B200":
        return "a4-highgpu-8g"
    if name == "L4":
        return _GCP_L4_HOSTS.get(count)
    if name in ("T4", "V100", "P100", "P4"):
        return GCP_N1_HOST
    return None


def map_accelerator(name: str, instance_type: str, mem_gb: float | None,
                    aliases: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """gpuopt GPU type for a SkyPilot accelerator, and how it was decided.

    Returns ``(gpu, rule)``; ``gpu`` is None when the accelerator is not a
    gpuopt GPU type. ``rule`` explains non-obvious decisions (for the report).
    """
    n = name.strip().lower().replace("_", "-")
    it = instance_type.strip().lower()
    if n in ("h100", "h100-80gb"):
        if "pcie" in it or "pci-e" in it:
            return "H100-PCIe", "instance type says PCIe"
        if "nvl" in it.replace("nvlink", ""):
            return "H100-NVL", "instance type says NVL"
        if re.match(r"standard_ncc?\d+a\w*_h100_v5", it):
            return "H100-NVL", "Azure NC H100 v5 carries H100 NVL (94 GB)"
        if re.match(r"\d+x_h100_", it):
            return "H100-PCIe", "RunPod 'H100' is the PCIe card (its SXM part is 'H100-SXM')"
        if mem_gb is not None and mem_gb > 90:
            return "H100-NVL", "94 GB memory"
        if re.match(r"^(p5\.|p5e?n?\.|a3-|standard_nd\d+\w*_h100)", it) or "sxm" in it or "nvlink" in it:
            return "H100-SXM", None
        return "H100-SXM", "assumed SXM (instance type does not say)"
    if n in ("a100", "a100-40gb"):
        if mem_gb is not None and mem_gb > 60:
            pcie = "pcie" in it or "pci" in it
            return ("A100-PCIe-80GB" if pcie else "A100-80GB"), "80 GB memory in GpuInfo"
        return "A100-40GB", ("PCIe 40 GB card counted as A100-40GB" if "pci" in it else None)
    if n == "a100-80gb":
        if ("pcie" in it or re.match(r"standard_nc\d+ads_a100_v4", it) or re.match(r"\d+x_a100-80gb_", it)):
            return "A100-PCIe-80GB", "PCIe form factor by instance type"
        return "A100-80GB", None
    hit = SIMPLE_NAMES.get(n)
    if hit:
        return hit, None
    if aliases:
        for key in (name.strip().lower(), n):
            if key in aliases:
                return aliases[key], "alias in gpus.csv"
    return None, None


def parse_gpu_info(text: str) -> dict | None:
    """Parse a ``GpuInfo`` cell (a Python-literal dict) safely; None if it is not a dict."""
    text = (text or "").strip()
    if not text.startswith("{"):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def gpu_memory_gb(info: dict | None, count: float, provider: str) -> float | None:
    """Per-GPU memory in GB from a parsed GpuInfo, with the per-provider quirks."""
    if not info:
        return None
    try:
        size = float(info["Gpus"][0]["MemoryInfo"]["SizeInMiB"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if size <= 0:
        return None
    if size < 1024:  # RunPod v8 writes GB in the MiB field
        return size
    if provider.lower() == "vast" and count >= 1:  # Vast: total across the GPUs
        size /= count
    return size / 1024


def _num(text: str | None) -> float | None:
    """A price or count cell as a float; blank, non-numeric, NaN or inf -> None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def slug(text: str) -> str:
    """Lower-case id fragment: letters, digits, dots and dashes."""
    s = re.sub(r"[^a-z0-9.]+", "-", text.strip().lower()).strip("-")
    return re.sub(r"-{2,}", "-", s) or "x"


@dataclass
class ImportReport:
    """What the importer did with the rows it did not turn into offerings."""

    rows: int = 0
    cpu_rows: int = 0
    unknown: Counter = field(default_factory=Counter)          # accelerator name -> rows
    fractional: Counter = field(default_factory=Counter)       # "name x count (type)" -> rows
    not_pow2: Counter = field(default_factory=Counter)
    no_price: Counter = field(default_factory=Counter)         # instance type -> regions without OD price
    spot_placeholder: Counter = field(default_factory=Counter)  # instance type -> regions dropped
    no_spot: int = 0                                           # groups without any spot quote
    no_host: Counter = field(default_factory=Counter)          # GCP accelerator rows without a host VM
    extra_fields: int = 0
    assumed: Counter = field(default_factory=Counter)          # "NAME -> GPU (rule)" -> rows
    on_demand: int = 0
    spot: int = 0

    def lines(self) -> list[str]:
        """A human summary (the CLI prints it on stderr)."""
        out = [f"read {self.rows} rows: {self.on_demand} on-demand and {self.spot} spot offerings"]
        if self.cpu_rows:
            out.append(f"skipped {self.cpu_rows} rows without an accelerator (CPU-only or host VMs)")

        def block(title: str, counts: Counter, limit: int = 25) -> None:
            if not counts:
                return
            out.append(f"{title}: {sum(counts.values())} rows")
            for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
                out.append(f"  {key}: {n}")
            if len(counts) > limit:
                rest = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[limit:]
                out.append(f"  ... and {len(rest)} more names ({sum(n for _, n in rest)} rows)")

        block("UNKNOWN accelerators (not a gpuopt GPU type; not imported)", self.unknown)
        block("skipped fractional GPU counts", self.fractional)
        block("skipped GPU counts that are not a power of two", self.not_pow2)
        block("GCP accelerator rows without their host VM in the zone (skipped)", self.no_host)
        block("instance types x regions without an on-demand price (no on-demand offering)", self.no_price)
        block("spot quotes dropped (all >= the on-demand price: placeholders), instance type x region",
              self.spot_placeholder)
        if self.no_spot:
            out.append(f"{self.no_spot} instance type x region pairs have no spot quote (blank or zero)")
        block("accelerator names mapped by rule", self.assumed)
        if self.extra_fields:
            out.append(f"{self.extra_fields} rows had more fields than the header; extras ignored")
        return out


@dataclass
class _Group:
    provider_name: str
    instance_type: str
    accelerator: str
    gpu: str
    count: int
    region: str
    od: list = field(default_factory=list)     # (price, zone)
    spot: list = field(default_factory=list)   # (price, zone)
    zones: set = field(default_factory=set)
    rows: int = 0
    attachable: bool = False


def read_rows(path: str | Path) -> tuple[list[str], list[dict[str, str]], int]:
    """Header, rows as dicts (by column name) and the count of rows with extra fields."""
    path = Path(path)
    file = str(path)
    text = read_text(path, max_bytes=MAX_BYTES, encoding="utf-8-sig")  # BOM-tolerant
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file (no CSV header)", file=file) from None
    except csv.Error as exc:
        raise InputError(f"CSV error in the header: {exc}", file=file) from None
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"not a SkyPilot vms.csv: missing column {missing[0]!r}", file=file,
                         field=missing[0], allowed=", ".join(REQUIRED_COLUMNS),
                         value=",".join(header)[:200])
    rows: list[dict[str, str]] = []
    extra = 0
    try:
        for cells in reader:
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                extra += 1
            cells = [c.strip() for c in cells] + [""] * (len(header) - len(cells))
            rows.append(dict(zip(header, cells)))
    except csv.Error as exc:
        raise InputError(f"CSV error at line {reader.line_num}: {exc}", file=file) from None
    return header, rows, extra


def import_skypilot(path: str | Path, provider: str, *, date: str | _dt.date | None = None,
                    source: str | None = None, gpus: set[str] | None = None,
                    regions: set[str] | None = None, spot: bool = True,
                    aliases: dict[str, str] | None = None,
                    known_gpus: set[str] | None = None,
                    interruption_band: float = DEFAULT_INTERRUPTION_BAND,
                    spot_zone: str = "median",
                    ) -> tuple[list[Offering], ImportReport]:
    """Offerings (on-demand and spot, one per instance type and region) from a SkyPilot vms.csv.

    ``provider`` names the cloud (it picks the quirks: Vast memory totals);
    ``date`` is when the prices were observed (default: the file's
    modification date); ``source`` defaults to the path and provider.
    ``gpus``/``regions`` keep only those canonical GPU types / regions.
    ``aliases`` maps lower-cased names to canonical GPU types (gpus.csv);
    ``known_gpus`` are the GPU types an offering may name (others are reported
    as unknown). Spot offerings get ``interruptions_per_hour`` =
    -ln(1 - interruption_band) / 730 (SkyPilot catalogs carry no interruption
    data; the band defaults to finance_defaults' spot_interruption_band_monthly).
    Returns the offerings and an :class:`ImportReport`.
    """
    if spot_zone not in ("median", "cheapest"):
        raise ValueError(f"spot_zone must be 'median' or 'cheapest', not {spot_zone!r}")
    lam = sig(interruptions_per_hour(interruption_band))
    path = Path(path)
    provider = provider.strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", provider):
        raise InputError("provider must be a simple name (letters, digits, '.', '_', '-')",
                         field="--provider", value=provider)
    header, rows, extra = read_rows(path)
    if date is None:
        date = _dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    date = date.isoformat() if isinstance(date, _dt.date) else str(date)
    if source is None:
        source = f"SkyPilot catalog {path} (provider {provider})"
    report = ImportReport(rows=len(rows), extra_fields=extra)

    # GCP-style host VMs: (instance type, zone or region) -> (price, spot price)
    hosts: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for r in rows:
        if r.get("InstanceType") and not r.get("AcceleratorName"):
            loc = r.get("AvailabilityZone") or r.get("Region", "")
            hosts[(r["InstanceType"], loc)] = (_num(r.get("Price")), _num(r.get("SpotPrice")))

    groups: dict[tuple[str, str], _Group] = {}
    for r in rows:
        acc = r.get("AcceleratorName", "")
        if not acc:
            report.cpu_rows += 1
            continue
        inst = r.get("InstanceType", "")
        region = r.get("Region", "")
        zone = r.get("AvailabilityZone", "") or ""
        count_f = _num(r.get("AcceleratorCount"))
        if count_f is None or count_f <= 0:
            report.fractional[f"{acc} x {r.get('AcceleratorCount')!r} ({inst or 'attachable'})"] += 1
            continue
        price, spot_price = _num(r.get("Price")), _num(r.get("SpotPrice"))
        attachable = not inst
        if attachable:
            host = gcp_host_vm(acc, int(count_f)) if count_f == int(count_f) else None
            if host is None and count_f == int(count_f):
                if acc.lower().startswith("tpu") or map_accelerator(acc, "", None, aliases)[0] is None:
                    report.unknown[acc] += 1
                else:
                    report.no_host[f"{acc} x {int(count_f)} (no host VM rule)"] += 1
                continue
            # N1 hosts take several GPU types and counts: name the pairing
            inst = f"{host}+{count_f:g}x{acc}" if host == GCP_N1_HOST else host
        if count_f != int(count_f):
            report.fractional[f"{acc} x {count_f:g} ({inst})"] += 1
            continue
        count = int(count_f)
        info = parse_gpu_info(r.get("GpuInfo", ""))
        mem = gpu_memory_gb(info, count_f, provider)
        gpu, rule = map_accelerator(acc, inst, mem, aliases)
        if gpu is not None and known_gpus is not None and gpu not in known_gpus:
            gpu = None
        if gpu is None:
            report.unknown[acc] += 1
            continue
        if not is_power_of_two(count):
            report.not_pow2[f"{acc} x {count} ({inst})"] += 1
            continue
        if gpus is not None and gpu not in gpus:
            continue
        if regions is not None and region.lower() not in regions:
            continue
        if rule:
            report.assumed[f"{acc} -> {gpu} ({rule})"] += 1
        if attachable:
            host = inst.split("+")[0]
            hp = hosts.get((host, zone or region))
            if hp is None:
                report.no_host[f"{acc} x {count} ({host} not in {zone or region})"] += 1
                continue
            price = price + hp[0] if (price is not None and hp[0] is not None) else None
            spot_price = (spot_price + hp[1]
                          if (spot_price is not None and hp[1] is not None) else None)
        key = (inst, region)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(provider, inst, acc, gpu, count, region, attachable=attachable)
        elif g.gpu != gpu or g.count != count:
            report.assumed[f"{inst} in {region}: conflicting rows ({g.gpu} x {g.count} kept)"] += 1
            continue
        g.rows += 1
        if zone:
            g.zones.add(zone)
        if price is not None and price > 0:
            g.od.append((round(price, PRICE_DECIMALS), zone))
        if spot_price is not None and spot_price > 0:
            g.spot.append((round(spot_price, PRICE_DECIMALS), zone))

    offerings: list[Offering] = []
    used_ids: set[str] = set()

    def new_id(base: str) -> str:
        oid, k = base, 2
        while oid in used_ids:
            oid, k = f"{base}-{k}", k + 1
        used_ids.add(oid)
        return oid

    for (inst, region), g in sorted(groups.items()):
        od = min(g.od) if g.od else None
        stem = f"{slug(provider)}-{slug(inst)}-{slug(region)}"
        zones = f"; {len(g.zones)} zone(s)" if g.zones else ""
        if od is None:
            report.no_price[f"{inst} in {region}"] += 1
        else:
            offerings.append(Offering(
                id=new_id(f"{stem}-od"), provider=provider, gpu=g.gpu, gpus_per_unit=g.count,
                region=region, pricing="on_demand", instance_type=inst, price_per_hour=od[0],
                source=source, date=date,
                notes=f"SkyPilot accelerator {g.accelerator} x {g.count}; cheapest on-demand price "
                      f"in the region{zones}" + ("; GPU price + host VM price" if g.attachable else ""),
            ))
            report.on_demand += 1
        if not spot:
            continue
        valid = [s for s in g.spot if od is None or s[0] < od[0]]
        if not valid:
            if g.spot:
                report.spot_placeholder[f"{inst} in {region}"] += 1
            else:
                report.no_spot += 1
            continue
        ranked = sorted(valid)
        best = ranked[len(ranked) // 2] if spot_zone == "median" else ranked[0]
        offerings.append(Offering(
            id=new_id(f"{stem}-spot"), provider=provider, gpu=g.gpu, gpus_per_unit=g.count,
            region=region, pricing="spot", instance_type=inst, price_per_hour=best[0],
            interruptions_per_hour=lam, source=source, date=date,
            notes=f"SkyPilot accelerator {g.accelerator} x {g.count}; {spot_zone} spot price over "
                  f"{len({z for _, z in valid}) or 1} zone(s)" + (f", in {best[1]}" if best[1] else "")
                  + (f" (zones quote {ranked[0][0]:g} to {ranked[-1][0]:g})" if len(ranked) > 1 else "")
                  + f"; interruptions_per_hour = -ln(1 - {interruption_band:g})/730 "
                    "(monthly band assumed; SkyPilot has no interruption data)",
        ))
        report.spot += 1
    return offerings, report
