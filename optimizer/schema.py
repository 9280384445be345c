"""The problem file and catalog entries, as pydantic models.

Field names are the contract of ``docs/problem-format.md``; every number has
its unit in its name (``price_per_hour``, ``power_kw``) or in the docs. Unknown
keys, NaN and infinite numbers, and strings where numbers belong are errors:
a typo must never pass silently.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .vocabulary import PAY_PER_HOUR

Pricing = Literal["on_demand", "spot", "reserved", "owned"]
UnitLink = Literal["nvlink", "xgmi", "pcie"]
Fabric = Literal["infiniband", "roce", "efa", "ethernet", "none"]
#: how a rented offering bills a training cluster: whole units, or the GPUs it uses
Billing = Literal["per_unit", "per_gpu"]
Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]

NonNeg = Annotated[float, Field(ge=0)]
Pos = Annotated[float, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(gt=0)]


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


class Strict(BaseModel):
    """Base: unknown keys forbidden, no NaN/inf, no string-to-number coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=False)


class Period(Strict):
    """A block of hours of one calendar month; demand is constant inside it."""

    name: str
    hours: Pos
    month: NonNegInt


# Fields that only make sense for some pricing kinds; anything else is an error.
_KIND_FIELDS = {
    "on_demand": set(),
    "spot": {"interruptions_per_hour"},
    "reserved": {"upfront", "term_months"},
    "owned": {
        "capex",
        "lifetime_years",
        "residual_fraction",
        "power_kw",
        "idle_power_fraction",
        "pue",
        "electricity_per_kwh",
        "fixed_per_month",
        "existing_units",
    },
}
_ALL_KIND_FIELDS = set().union(*_KIND_FIELDS.values())


class Offering(Strict):
    """GPU capacity one can rent, reserve or buy, in units of ``gpus_per_unit`` GPUs.

    Prices are per unit: ``price_per_hour`` for on-demand, spot and the
    effective hourly rate of a reservation; ``capex`` per unit for owned.
    """

    id: str
    gpu: str
    gpus_per_unit: PosInt
    region: str
    pricing: Pricing
    price_per_hour: NonNeg | None = None
    max_units: NonNegInt | None = None
    # spot
    interruptions_per_hour: NonNeg | None = None
    # reserved
    upfront: NonNeg | None = None
    term_months: PosInt | None = None
    # owned
    capex: NonNeg | None = None
    lifetime_years: Pos | None = None
    residual_fraction: Fraction | None = None
    power_kw: NonNeg | None = None
    idle_power_fraction: Fraction | None = None
    pue: Annotated[float, Field(ge=1)] | None = None
    electricity_per_kwh: NonNeg | None = None
    fixed_per_month: NonNeg | None = None
    existing_units: NonNegInt | None = None
    # topology: how GPUs connect inside a unit and how units connect to each other
    unit_link: UnitLink | None = None
    fabric: Fabric | None = None
    fabric_gbps_per_gpu: Pos | None = None
    max_cluster_units: PosInt | None = None
    # billing of rented training clusters (on_demand, spot): whole units or the GPUs used
    billing: Billing | None = None
    # metadata (catalog entries carry source and date)
    provider: str | None = None
    instance_type: str | None = None
    source: str | None = None
    date: str | _dt.date | None = None
    notes: str | None = None
    #: where ``max_units`` comes from (a provider's published quota, or a documented default)
    quota_source: str | None = None
    #: names of fields whose values are assumptions (no primary source); flagged where they decide a plan
    assumed: list[str] | None = None

    @field_validator("gpus_per_unit")
    @classmethod
    def _pow2(cls, v: int) -> int:
        if not is_power_of_two(v):
            raise ValueError("gpus_per_unit must be a power of two (1, 2, 4, 8, ...)")
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> "Offering":
        allowed = _KIND_FIELDS[self.pricing]
        for name in sorted(_ALL_KIND_FIELDS - allowed):
            if getattr(self, name) is not None:
                owners = [k for k, v in _KIND_FIELDS.items() if name in v]
                raise ValueError(
                    f"field {name!r} applies only to pricing {' or '.join(owners)}, "
                    f"not {self.pricing}"
                )
        if self.pricing != "owned" and self.price_per_hour is None:
            raise ValueError(f"price_per_hour is required for pricing {self.pricing}")
        if self.pricing == "owned":
            if self.price_per_hour is not None:
                raise ValueError("owned offerings have no price_per_hour; give capex and running costs")
            missing = [f for f in ("capex", "lifetime_years", "power_kw", "electricity_per_kwh")
                       if getattr(self, f) is None]
            if missing:
                raise ValueError(f"owned offerings need {', '.join(missing)}")
            if (self.max_units is not None and self.existing_units is not None
                    and self.existing_units > self.max_units):
                raise ValueError(
                    f"existing_units ({self.existing_units}) exceeds max_units ({self.max_units})"
                )
        if self.fabric == "none" and self.max_cluster_units is not None and self.max_cluster_units > 1:
            raise ValueError(f"max_cluster_units {self.max_cluster_units} needs a fabric between units; "
                             "fabric is none (one unit per cluster)")
        if self.fabric == "none" and self.fabric_gbps_per_gpu is not None:
            raise ValueError("fabric_gbps_per_gpu is given but fabric is none")
        if self.billing is not None and self.pricing not in PAY_PER_HOUR:
            raise ValueError(f"billing applies only to pricing on_demand or spot, not {self.pricing}")
        if self.assumed:
            unknown = sorted(set(self.assumed) - set(type(self).model_fields))
            if unknown:
                raise ValueError(f"assumed names fields that do not exist: {unknown}")
        return self

    # Defaults that apply when a kind-specific field is absent (docs/problem-format.md).
    @property
    def term(self) -> int:
        return self.term_months if self.term_months is not None else 12

    @property
    def existing(self) -> int:
        return self.existing_units or 0


#: the SLO statistic when a service names none: the 99th percentile, as MLPerf Inference's LLM server
#: scenario constrains TTFT and TPOT (MLCommons inference rules, v4.0+, 2024)
DEFAULT_SLO_PERCENTILE = 99.0


class SLO(Strict):
    """Latency objectives of a service under its load.

    ``percentile`` says which statistic of TTFT and TPOT must meet them:
    a percentile in (0, 100) or ``"mean"``.
    """

    ttft_ms: Pos | None = None
    tpot_ms: Pos | None = None
    percentile: Literal["mean"] | Annotated[float, Field(gt=0, lt=100)] = DEFAULT_SLO_PERCENTILE


class RequestBucket(Strict):
    """One request size and its share of the service's traffic."""

    name: str
    prompt_tokens: PosInt
    output_tokens: PosInt
    share: Annotated[float, Field(gt=0, le=1)]


class InferenceProfile(Strict):
    """A measured configuration: ``rps`` per replica of ``gpus`` GPUs of type ``gpu``."""

    gpu: str
    gpus: PosInt
    rps: Pos
    bucket: str | None = None
    precision: Precision | None = None

    @field_validator("gpus")
    @classmethod
    def _pow2(cls, v: int) -> int:
        if not is_power_of_two(v):
            raise ValueError("gpus per replica must be a power of two")
        return v


class Providers(Strict):
    """Which providers' offerings may be used: ``include`` only these, ``exclude`` never these.

    Names match an offering's ``provider`` case-insensitively; offerings that
    name no provider (a file's own definitions) are not affected.
    """

    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _one_or_list(cls, v):
        return [v] if isinstance(v, str) else v


class Stability(Strict):
    """How steady a service's fleet must be across periods (docs/formulation.md, "Stable fleets").

    ``max_configurations``: most distinct configurations (GPU type, GPUs per
    replica, precision) a service uses over the horizon; absent: one. ``replica_start_cost``: currency charged per replica
    started in a period after the first (a replica of a configuration on an
    offering beyond the previous period's count), so that a change is made
    only when it saves more than it costs.
    """

    max_configurations: PosInt | None = None
    replica_start_cost: NonNeg | None = None


class Allow(Strict):
    """Catalog options a problem takes on only when it says so.

    ``buy``: owned (bought) offerings from the catalogs are candidates.
    ``reserved_terms_months``: catalog reservations whose term outlasts the
    horizon are candidates only for these terms. A problem's own offerings
    are always candidates.
    """

    buy: bool = False
    reserved_terms_months: list[PosInt] = Field(default_factory=list)


class InferenceService(Strict):
    """An inference service: a model, its request sizes, SLOs and demand per period."""

    name: str
    model: str
    precisions: list[Precision] = Field(default_factory=lambda: ["bf16"], min_length=1)
    prompt_tokens: PosInt | None = None
    output_tokens: PosInt | None = None
    requests: list[RequestBucket] | None = None
    slo: SLO = Field(default_factory=SLO)
    demand_rps: NonNeg | dict[str, NonNeg]
    regions: list[str] | None = None
    spot: bool = False
    min_replicas: NonNegInt = 0
    profiles: list[InferenceProfile] | None = None
    providers: Providers | None = None
    stability: Stability | None = None

    @model_validator(mode="after")
    def _sizes(self) -> "InferenceService":
        single = self.prompt_tokens is not None or self.output_tokens is not None
        if self.requests is not None and single:
            raise ValueError("give either prompt_tokens/output_tokens or requests buckets, not both")
        if self.requests is None:
            if self.prompt_tokens is None or self.output_tokens is None:
                raise ValueError("give prompt_tokens and output_tokens, or requests buckets")
        else:
            if not self.requests:
                raise ValueError("requests must list at least one bucket")
            names = [b.name for b in self.requests]
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate request bucket names: {names}")
            total = sum(b.share for b in self.requests)
            if not math.isclose(total, 1.0, abs_tol=1e-6):
                raise ValueError(f"request bucket shares must add up to 1 (they add up to {total:g})")
        if self.profiles:
            known = {b.name for b in self.buckets}
            for p in self.profiles:
                if p.bucket is not None and p.bucket not in known:
                    raise ValueError(
                        f"profile names bucket {p.bucket!r}, which is not one of {sorted(known)}"
                    )
        return self

    @property
    def buckets(self) -> list[RequestBucket]:
        """Request buckets; a single request size is one bucket named ``all``."""
        if self.requests is not None:
            return list(self.requests)
        return [RequestBucket(name="all", prompt_tokens=self.prompt_tokens,
                              output_tokens=self.output_tokens, share=1.0)]


class TrainingProfile(Strict):
    """A measured configuration: ``hours`` of wall clock on ``gpus`` GPUs of type ``gpu``."""

    gpu: str
    gpus: PosInt
    hours: Pos
    precision: Precision | None = None


class TrainingJob(Strict):
    """A training run: a model, a token budget and a window of months.

    ``method``: ``full`` trains every weight; ``lora`` trains rank-``lora_rank``
    adapters on every linear layer beside frozen 16-bit weights; ``qlora`` the
    same beside 4-bit weights. ``sequence_length`` and ``global_batch_tokens``
    replace the named defaults ``train_sequence_tokens`` and
    ``train_global_batch_tokens`` for this job. ``framework``: ``megatron``
    (Megatron/NeMo: tensor and pipeline parallelism, distributed optimizer),
    ``fsdp`` (PyTorch FSDP full shard) or ``any`` (the best layout of either):
    it limits the layouts sizing considers and sets the fp8 speed-up.
    """

    name: str
    model: str
    tokens: Pos
    precision: Precision = "bf16"
    start_month: NonNegInt = 0
    deadline_month: NonNegInt
    spot: bool = False
    checkpoint_minutes: Pos = 30.0
    cluster_gpus: list[PosInt] = Field(default_factory=lambda: [8, 16, 32, 64], min_length=1)
    method: Literal["full", "lora", "qlora"] = "full"
    lora_rank: PosInt = 16
    framework: Literal["any", "megatron", "fsdp"] = "any"
    sequence_length: PosInt | None = None
    global_batch_tokens: Pos | None = None
    regions: list[str] | None = None
    profiles: list[TrainingProfile] | None = None
    providers: Providers | None = None

    @model_validator(mode="after")
    def _window(self) -> "TrainingJob":
        if self.deadline_month < self.start_month:
            raise ValueError(
                f"deadline_month ({self.deadline_month}) is before start_month ({self.start_month})"
            )
        bad = [n for n in self.cluster_gpus if not is_power_of_two(n)]
        if bad:
            raise ValueError(f"cluster_gpus must be powers of two; got {bad}")
        return self


class Constraints(Strict):
    budget: NonNeg | None = None


class Finance(Strict):
    objective: Literal["cost", "npv"] = "cost"
    discount_rate: Annotated[float, Field(ge=0, le=1)] = 0.10
    #: what the objective counts of a commitment that outlives the horizon: its share in the horizon
    #: (``horizon``) or its whole term's payments and the purchase less its resale value (``full``)
    commitments: Literal["horizon", "full"] = "horizon"


class Scenario(Strict):
    """A named what-if: ``--set`` and ``--scale`` overlays (docs/whatif.md)."""

    name: str
    set: list[str] = Field(default_factory=list)
    scale: list[str] = Field(default_factory=list)
    description: str | None = None

    @field_validator("set", "scale", mode="before")
    @classmethod
    def _one_or_list(cls, v):
        return [v] if isinstance(v, str) else v


class ProblemFile(Strict):
    """The whole problem file, exactly as the user wrote it (before catalogs merge)."""

    name: str = "problem"
    currency: str = "USD"
    catalog: list[str] = Field(default_factory=list)
    periods: list[Period] = Field(min_length=1)
    offerings: list[Offering] = Field(default_factory=list)
    inference: list[InferenceService] = Field(default_factory=list)
    training: list[TrainingJob] = Field(default_factory=list)
    constraints: Constraints = Field(default_factory=Constraints)
    finance: Finance = Field(default_factory=Finance)
    efficiency: dict[str, float] = Field(default_factory=dict)
    models: list[dict] = Field(default_factory=list)
    gpus: list[dict] = Field(default_factory=list)
    scenarios: list[Scenario] = Field(default_factory=list)
    allow: Allow = Field(default_factory=Allow)
    providers: Providers = Field(default_factory=Providers)
    stability: Stability = Field(default_factory=Stability)

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog_list(cls, v):
        return [v] if isinstance(v, str) else v
