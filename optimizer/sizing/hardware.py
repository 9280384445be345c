"""GPU types: datasheet figures and which precisions a GPU can run.

A :class:`GpuSpec` is one row of ``catalogs/gpus.csv`` (or an inline
``gpus:`` entry of a problem file, same fields). All throughput figures are
*dense* (no 2:4 sparsity) peaks in TFLOPS (TOPS for int8); a blank column
means the GPU has no such units and that precision is not offered on it.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from .. import catalog as cat
from ..errors import InputError, suggest

PosF = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: A list of names or one ``;``-separated string (gpus.csv cells), for GPUs and models alike.
Aliases = Annotated[tuple[str, ...], BeforeValidator(cat.split_aliases)]

#: Columns of the per-precision dense peaks, in the catalog.
PEAK_COLUMNS = {
    "fp32": "fp32_dense_tflops",
    "bf16": "bf16_dense_tflops",
    "fp16": "fp16_dense_tflops",
    "fp8": "fp8_dense_tflops",
    "int8": "int8_dense_tflops",
    "fp4": "fp4_dense_tflops",
}

#: Weight/activation formats of each serving precision: (weight class, compute class).
#: ``int4`` is weight-only (4-bit memory, 16-bit compute); ``fp8``/``int8`` are W8A8.
SERVING_FORMATS = {
    "fp32": ("fp32", "fp32"),
    "bf16": ("bf16", "bf16"),
    "fp16": ("fp16", "fp16"),
    "fp8": ("fp8", "fp8"),
    "int8": ("int8", "int8"),
    "int4": ("int4", "16bit"),
    "fp4": ("fp4", "fp4"),
}

TRAINING_PRECISIONS = ("fp32", "bf16", "fp16", "fp8")


class GpuSpec(BaseModel):
    """One GPU type (per-GPU figures).

    Attributes
    ----------
    vram_gb
        Memory per GPU as the datasheet prints it ("80 GB").
    vram_mib
        Memory per GPU in MiB as the driver reports it, where a source gives
        it (``vram_mib_source``). HBM parts have binary capacities: an
        "80 GB" H100 has 81,559 MiB (85.5·10^9 bytes), 7 % more than 80·10^9.
        Without it, ``vram_gb`` is read as 10^9 bytes.
    mem_bw_tbs
        HBM/GDDR bandwidth, TB/s (10^12 bytes/s).
    *_dense_tflops
        Dense peak per precision (TOPS for int8); ``None`` = no such units.
    interconnect_gbs
        Bidirectional per-GPU scale-up bandwidth (NVLink/Infinity Fabric/
        RoCE, or PCIe for cards without a GPU link), GB/s.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    aliases: Aliases = ()
    vendor: str = "unknown"
    generation: str
    vram_gb: PosF
    vram_mib: PosF | None = None
    vram_mib_source: str | None = None
    mem_bw_tbs: PosF
    fp32_dense_tflops: PosF | None = None
    bf16_dense_tflops: PosF | None = None
    fp16_dense_tflops: PosF | None = None
    fp8_dense_tflops: PosF | None = None
    int8_dense_tflops: PosF | None = None
    fp4_dense_tflops: PosF | None = None
    tdp_w: PosF | None = None
    interconnect_gbs: PosF
    source: str = ""
    date: str | _dt.date | None = None

    @field_validator("generation")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip().lower()

    def peak_tflops(self, compute: str) -> float | None:
        """Dense peak for a compute class (``16bit`` = bf16, else fp16)."""
        if compute == "16bit":
            return self.bf16_dense_tflops or self.fp16_dense_tflops
        return getattr(self, PEAK_COLUMNS[compute])

    def supports(self, precision: str) -> bool:
        """Whether ``precision`` can be served here (the GPU has its units)."""
        return self.peak_tflops(SERVING_FORMATS[precision][1]) is not None

    def supports_training(self, precision: str) -> bool:
        return precision in TRAINING_PRECISIONS and self.supports(precision)

    @property
    def vram_bytes(self) -> float:
        """Memory per GPU in bytes: ``vram_mib`` × 2^20 where sourced, else ``vram_gb`` × 10^9."""
        return self.vram_mib * 2.0**20 if self.vram_mib is not None else self.vram_gb * 1e9

    @property
    def bw_bytes_s(self) -> float:
        return self.mem_bw_tbs * 1e12

    @property
    def link_bytes_s(self) -> float:
        """One-direction scale-up bandwidth (half the bidirectional figure)."""
        return self.interconnect_gbs * 1e9 / 2


def _clean(rec: dict) -> dict:
    """Drop NaN cells (blank CSV cells) so they become ``None`` defaults."""
    out = {}
    for k, v in rec.items():
        if isinstance(v, float) and math.isnan(v):
            continue
        if hasattr(v, "item") and not isinstance(v, str):  # numpy scalar -> python
            v = v.item()
        if isinstance(v, int) and not isinstance(v, bool) and k not in ("name", "aliases"):
            v = float(v)
        out[k] = v
    return out


def _pydantic_error(exc: ValidationError, file: str | None, prefix: str, entry: dict,
                    fields: list[str] | None = None) -> InputError:
    """The first validation error as an InputError; an unknown field gets the nearest of ``fields``."""
    e = exc.errors()[0]
    loc = ".".join(str(p) for p in e["loc"])
    field = f"{prefix}.{loc}" if loc else prefix
    value = entry.get(e["loc"][0]) if e["loc"] else None
    msg = e["msg"]
    if e["type"] == "extra_forbidden":
        msg = "unknown field"
        value = e["loc"][0]
        if fields:
            return InputError(msg, file=file, field=field, value=value, allowed=", ".join(fields),
                              suggestion=suggest(str(value), fields))
    return InputError(msg, file=file, field=field, value=value)


def gpu_spec(entry: dict, *, file: str | None = None, field: str = "gpus") -> GpuSpec:
    """Validate one GPU entry (a dict with the catalog's fields)."""
    try:
        return GpuSpec.model_validate(_clean(dict(entry)))
    except ValidationError as exc:
        raise _pydantic_error(exc, file, field, entry) from None


def load_gpus(inline: list[dict] | None = None, *, file: str | None = None) -> dict[str, GpuSpec]:
    """Catalog GPU types merged with a problem's inline ``gpus:`` entries.

    Returns ``{canonical name: GpuSpec}``. An inline entry whose name (or
    alias) matches a catalog type replaces it; errors name ``gpus[i].field``.
    """
    return _merge_inline("gpus", gpu_spec, cat.gpu_table().to_dict("records"), "catalogs/gpus.csv", inline, file)


def _merge_inline(section: str, parse, catalog: list[dict], catalog_file: str, inline: list | None,
                  file: str | None) -> dict:
    """``{name: parse(entry)}`` of the catalog's entries, then the problem's inline ones.

    An inline entry whose name is the name or an alias of an earlier entry
    replaces it, and the replaced entry's name and aliases become aliases of
    the new one: whatever called the old entry (a catalog offering's
    ``H100-SXM``) now gets the problem's figures instead of failing to
    resolve. Errors name ``section[name]`` in ``catalog_file`` or
    ``section[i]`` in ``file``. Shared by :func:`load_gpus` and
    :func:`~optimizer.sizing.architecture.load_models`.
    """
    out: dict = {}
    for i, rec in enumerate(catalog):
        entry = parse(rec, file=catalog_file, field=f"{section}[{rec.get('name', i)}]")
        out[entry.name] = entry
    for i, rec in enumerate(inline or []):
        if not isinstance(rec, dict):
            raise InputError(f"a {section} entry must be a mapping", file=file, field=f"{section}[{i}]", value=rec)
        entry = parse(rec, file=file, field=f"{section}[{i}]")
        old = cat.alias_map(list(out), [e.aliases for e in out.values()]).get(entry.name.lower())
        if old is not None and old != entry.name:
            prev = out.pop(old)
            keep: dict[str, str] = {entry.name.lower(): entry.name}
            for n in (*entry.aliases, prev.name, *prev.aliases):
                keep.setdefault(n.lower(), n)
            entry = entry.model_copy(update={"aliases": tuple(keep.values())[1:]})
        out[entry.name] = entry
    return out


def gpu_alias_map(gpus: dict[str, GpuSpec]) -> dict[str, str]:
    """Lower-cased name/alias -> canonical name, for :func:`optimizer.catalog.resolve`."""
    return cat.alias_map(list(gpus), [g.aliases for g in gpus.values()])


def resolve_gpu(name: str, gpus: dict[str, GpuSpec], **where) -> GpuSpec:
    """The GPU type called ``name`` (case-insensitive, aliases welcome), else an InputError."""
    if name in gpus:
        return gpus[name]
    return gpus[cat.resolve("GPU type", name, gpu_alias_map(gpus), **where)]
