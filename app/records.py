"""The normalized offer record every scraper and the sample importer produce.

One record is one rentable configuration: (provider, instance_type, region, spot) is its stable key.
`spot=True` marks an interruptible-only listing; an on-demand listing may still carry the paired
spot price in `spot_price_per_hour` when the feed gives both.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_TEXT = 200  # scraped strings are untrusted: bound them before they reach the database
MAX_PRICE_PER_HOUR = 10_000.0  # no real single instance costs more; larger values are feed errors
MAX_URL = 500
# Control characters (NUL breaks Postgres text, and XML), lone surrogates (not encodable as
# UTF-8) and the Unicode non-characters U+FFFE/U+FFFF have no place in an offer's text.
_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


MIN_NETWORK_GBPS = 0.001  # 1 Mbit/s


class Interconnect(StrEnum):
    NVSWITCH = "nvswitch"
    NVLINK = "nvlink"
    PCIE = "pcie"
    UNKNOWN = "unknown"


class Network(StrEnum):
    INFINIBAND = "infiniband"
    ROCE = "roce"
    EFA = "efa"
    ETHERNET = "ethernet"
    NONE = "none"
    UNKNOWN = "unknown"


class Billing(StrEnum):
    SECOND = "second"
    MINUTE = "minute"
    HOUR = "hour"
    UNKNOWN = "unknown"


class Availability(StrEnum):
    IN_STOCK = "in_stock"
    LIMITED = "limited"
    OUT = "out"
    UNKNOWN = "unknown"


def _bounded(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    if len(value) > MAX_TEXT:
        raise ValueError(f"longer than {MAX_TEXT} characters")
    if _UNSAFE_TEXT.search(value):
        raise ValueError("contains a control character or invalid Unicode")
    return value


class OfferRecord(BaseModel):
    """A validated offer; construction fails (ValueError) on anything a sane feed cannot produce."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    instance_type: str
    region: str
    spot: bool = False
    gpu_model: str  # canonical slug from app.gpus, or "unknown"
    gpu_raw_name: str
    gpu_count: float = Field(gt=0, le=1024)  # fractional for shared GPUs (Azure NV A10 v5)
    vram_gib_per_gpu: float | None = Field(default=None, gt=0, le=1024)
    vcpus: float | None = Field(default=None, ge=0, le=100_000)
    ram_gib: float | None = Field(default=None, ge=0, le=1_000_000)
    disk_gib: float | None = Field(default=None, ge=0, le=10_000_000)
    price_per_hour: float | None = None  # on-demand, whole instance
    spot_price_per_hour: float | None = None  # whole instance
    currency: str = "USD"
    interconnect: Interconnect = Interconnect.UNKNOWN
    network: Network = Network.UNKNOWN
    # Gbit/s between nodes, at least 1 Mbit/s: marketplace hosts on home links report tens of
    # Mbit/s, and a denormal made the ring bandwidth 0 (a division by zero in the time model).
    network_gbps: float | None = Field(default=None, ge=MIN_NETWORK_GBPS, le=100_000)
    billing: Billing = Billing.UNKNOWN
    availability: Availability = Availability.UNKNOWN
    availability_count: int | None = Field(default=None, ge=0, le=1_000_000)
    provider_url: str | None = None  # the provider's page for this offer (or its pricing page)

    @field_validator("provider", "instance_type", "region", "gpu_model", "gpu_raw_name")
    @classmethod
    def _text(cls, value: str) -> str:
        return _bounded(value)

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if len(value) != 3 or not value.isalpha():
            raise ValueError("must be a 3-letter ISO 4217 code")
        return value.upper()

    @field_validator("provider_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        # Shown as a link: only absolute http(s) URLs without spaces or quotes get through.
        if value is None:
            return None
        value = value.strip()
        if len(value) > MAX_URL or not value.startswith(("https://", "http://")):
            raise ValueError(f"must be an http(s) URL of at most {MAX_URL} characters")
        if any(c.isspace() or c in "\"'<>" for c in value):
            raise ValueError("must not contain spaces, quotes or angle brackets")
        return value

    @field_validator("price_per_hour", "spot_price_per_hour", mode="before")
    @classmethod
    def _price_is_a_number(cls, value: object) -> object:
        # pydantic would read JSON true as 1.0: a boolean is never a price.
        if isinstance(value, bool):
            raise ValueError("a boolean is not a price")
        return value

    @field_validator("price_per_hour", "spot_price_per_hour")
    @classmethod
    def _price(cls, value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value) or value <= 0 or value > MAX_PRICE_PER_HOUR:
            raise ValueError(f"price must be a finite number in (0, {MAX_PRICE_PER_HOUR}]")
        return value

    @model_validator(mode="after")
    def _has_price(self) -> OfferRecord:
        if self.spot and self.spot_price_per_hour is None:
            raise ValueError("a spot listing needs spot_price_per_hour")
        if not self.spot and self.price_per_hour is None:
            raise ValueError("an on-demand listing needs price_per_hour")
        return self

    @property
    def key(self) -> tuple[str, str, str, bool]:
        return (self.provider, self.instance_type, self.region, self.spot)

    @property
    def price_per_gpu_hour(self) -> float | None:
        return None if self.price_per_hour is None else self.price_per_hour / self.gpu_count
