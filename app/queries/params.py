"""The table's query parameters: sorts, labels, the validated filter model and parsing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_origin

from annotated_types import MaxLen
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.fit import JobTerms, Workload
from app.fit.plans import DEFAULT_MIN_HEADROOM_PCT, MIN_CHECKPOINT_MINUTES
from app.fit.query import workload_from_query

Sort = Literal["fit", "cost", "time", "cost_per_m", "price", "price_per_gpu", "vram", "newest"]
Market = Literal["any", "on_demand", "spot"]
InterconnectValue = Literal["nvswitch", "nvlink", "pcie", "unknown"]
NetworkValue = Literal["infiniband", "roce", "efa", "ethernet", "none", "unknown"]
BillingValue = Literal["second", "minute", "hour", "unknown"]
AvailabilityValue = Literal["in_stock", "limited", "out", "unknown"]

SORT_LABELS: dict[str, str] = {
    "cost": "Total job cost",
    "time": "Time to finish",
    "cost_per_m": "Cost per million tokens",
    "price": "Price per hour",
    "price_per_gpu": "Price per GPU-hour",
    "vram": "VRAM (most first)",
    "newest": "Newest",
}
WORKLOAD_SORTS = ("fit", "cost", "time", "cost_per_m")
# `fit` (the old name of the default ranking) still parses and ranks as `cost`.
SORT_ALIASES: dict[str, Sort] = {"fit": "cost"}
# The workload query parameters of /api/estimate (app.fit.query), shared by every table.
WORKLOAD_KEYS = (
    "model",
    "params_b",
    "method",
    "stack",
    "precision",
    "pure_16bit",
    "optimizer",
    "batch_size",
    "grad_accum",
    "seq_len",
    "packed",
    "grad_checkpointing",
    "lora_rank",
    "lora_targets",
    "sharding",
    "gpus",
    "tokens",
    "dataset_tokens",
    "epochs",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "vocab",
    "intermediate",
)
DEFAULT_SORT: Sort = "price_per_gpu"
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
LABELS: dict[str, str] = {
    "nvswitch": "NVSwitch",
    "nvlink": "NVLink",
    "pcie": "PCIe",
    "infiniband": "InfiniBand",
    "roce": "RoCE",
    "efa": "EFA",
    "ethernet": "Ethernet",
    "none": "none",
    "second": "per second",
    "minute": "per minute",
    "hour": "per hour",
    "in_stock": "in stock",
    "limited": "limited",
    "out": "out of stock",
    "unknown": "unknown",
    "on_demand": "on-demand",
    "spot": "spot",
    "nvidia": "NVIDIA",
    "amd": "AMD",
    "intel": "Intel",
}


def _blank_to_none(value: Any) -> Any:
    """An empty form field means "no filter", not an invalid number."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _blank_or_zero(value: Any) -> Any:
    """As `_blank_to_none`, and any spelling of zero ("0", "0.0") is the integer 0."""
    value = _blank_to_none(value)
    try:
        return 0 if value is not None and float(value) == 0 else value
    except (TypeError, ValueError):
        return value


def _one_checkpoint_error(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One error naming the field, not one per member of its union."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError(
            "checkpoint_minutes",
            "must be 0 (no checkpoints) or between 1 and 100000 minutes",
        ) from None


def _drop_blanks(value: Any) -> Any:
    if isinstance(value, list):
        return [v for v in value if not (isinstance(v, str) and not v.strip())]
    return value


OptFloat = Annotated[
    Annotated[float, Field(ge=0, le=1_000_000)] | None, BeforeValidator(_blank_to_none)
]


def _strs(values: Any) -> Any:
    return [v.strip() for v in _drop_blanks(values)] if isinstance(values, list) else values


StrList = Annotated[list[Annotated[str, Field(max_length=200)]], BeforeValidator(_strs)]


class OfferFilters(BaseModel):
    """The table's query parameters (filters, sort, page); workload params live in app.fit."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False, extra="ignore")

    gpu: StrList = Field(default_factory=list, max_length=100)
    vendor: Annotated[list[Literal["nvidia", "amd", "intel"]], BeforeValidator(_drop_blanks)] = (
        Field(default_factory=list)
    )
    provider: StrList = Field(default_factory=list, max_length=100)
    continent: StrList = Field(default_factory=list, max_length=20)
    region: StrList = Field(default_factory=list, max_length=200)
    gpu_count: Annotated[
        list[Annotated[float, Field(gt=0, le=1024)]], BeforeValidator(_drop_blanks)
    ] = Field(default_factory=list, max_length=50)
    min_vram: OptFloat = None
    min_vram_total: OptFloat = None
    market: Annotated[Market, BeforeValidator(lambda v: _blank_to_none(v) or "any")] = "any"
    nvlink: bool = False
    interconnect: Annotated[list[InterconnectValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    network: Annotated[list[NetworkValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    billing: Annotated[list[BillingValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    availability: Annotated[list[AvailabilityValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    in_stock: bool = False
    max_price_per_hour: OptFloat = None
    max_price_per_gpu_hour: OptFloat = None
    q: Annotated[Annotated[str, Field(max_length=100)] | None, BeforeValidator(_blank_to_none)] = (
        None
    )
    include_inactive: bool = False
    fits_only: bool = False
    # The job's terms (app.fit.plans.JobTerms) and its deadline and budget: they shape the
    # ranking of a workload, not which offers the SQL selects.
    min_headroom_pct: Annotated[
        Annotated[float, Field(ge=0, le=90)] | None, BeforeValidator(_blank_to_none)
    ] = None
    setup_minutes: Annotated[
        Annotated[float, Field(ge=0, le=10_000)] | None, BeforeValidator(_blank_to_none)
    ] = None
    # 0 turns checkpoints off; otherwise at least a minute (a 5e-324-minute interval would
    # mean infinitely many writes).
    checkpoint_minutes: Annotated[
        Annotated[float, Field(ge=MIN_CHECKPOINT_MINUTES, le=100_000)] | Literal[0] | None,
        BeforeValidator(_blank_or_zero),
        WrapValidator(_one_checkpoint_error),
    ] = None
    max_hours: Annotated[
        Annotated[float, Field(gt=0, le=1_000_000)] | None, BeforeValidator(_blank_to_none)
    ] = None
    max_cost: Annotated[
        Annotated[float, Field(gt=0, le=1_000_000_000)] | None, BeforeValidator(_blank_to_none)
    ] = None
    sort: Annotated[Sort | None, BeforeValidator(_blank_to_none)] = None
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)
    # Keyset page cursor (app.queries.keyset): the page after the row it names.
    after: Annotated[
        Annotated[str, Field(max_length=512)] | None, BeforeValidator(_blank_to_none)
    ] = None

    @field_validator("gpu", "provider", "continent", "region", "gpu_count", mode="before")
    @classmethod
    def _count_every_value(cls, value: Any, info: ValidationInfo) -> Any:
        # Blank values are dropped (an empty form field means "no filter"), but a list's bound
        # counts every value sent, as the API document says: 10,000 blank `region=` are refused.
        limit = _max_items(cls, info.field_name)
        if limit is not None and isinstance(value, list) and len(value) > limit:
            raise PydanticCustomError(
                "too_long", "List should have at most {max} items", {"max": limit}
            )
        return value


def _max_items(model: type[BaseModel], name: str | None) -> int | None:
    info = model.model_fields.get(name or "")
    if info is None:
        return None
    return next((m.max_length for m in info.metadata if isinstance(m, MaxLen)), None)


LIST_KEYS = frozenset(
    name for name, info in OfferFilters.model_fields.items() if get_origin(info.annotation) is list
)


def filters_from_args(args: Sequence[tuple[str, str]]) -> OfferFilters:
    """OfferFilters from query pairs (repeated keys for lists); raises pydantic ValidationError."""
    data: dict[str, Any] = {}
    for key, value in args:
        if key in LIST_KEYS:
            data.setdefault(key, []).append(value)
        elif key in OfferFilters.model_fields and key not in data:
            data[key] = value
    return OfferFilters.model_validate(data)


def workload_from_args(args: Sequence[tuple[str, str]]) -> Workload | None:
    """The workload a query names (model or params_b), else None; blank values mean default.

    Raises RequestValidationError naming the field, like the API's workload parameters.
    """
    values: dict[str, str] = {}
    for key, value in args:
        if key in WORKLOAD_KEYS and key not in values and value.strip():
            values[key] = value.strip()
    if "model" not in values and "params_b" not in values:
        return None
    return workload_from_query(**values)


JOB_KEYS = ("min_headroom_pct", "setup_minutes", "checkpoint_minutes", "max_hours", "max_cost")


def filters_key(filters: OfferFilters) -> str:
    """What selects the rows (not sort, page, fits_only or the job's terms): the key of cached
    aggregates."""
    return filters.model_dump_json(
        exclude={"sort", "limit", "offset", "after", "fits_only", *JOB_KEYS}
    )


def link_args(args: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs a link from a ranked row carries to the offer page: the workload and the
    job's terms (the offer page assesses the same plan)."""
    keep = {*WORKLOAD_KEYS, *JOB_KEYS, "market"}
    return [(k, v) for k, v in args if k in keep and v.strip()]


def job_terms(filters: OfferFilters) -> JobTerms:
    """The terms a ranked table costs every plan under (market rule, margin, set-up,
    checkpoint interval)."""
    return JobTerms(
        market=filters.market,
        min_headroom_pct=(
            DEFAULT_MIN_HEADROOM_PCT
            if filters.min_headroom_pct is None
            else filters.min_headroom_pct
        ),
        setup_minutes=filters.setup_minutes,
        checkpoint_minutes=filters.checkpoint_minutes,
    )
