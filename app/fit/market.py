"""What a job costs beyond the hourly price: set-up time, checkpoint writes, spot interruptions.

Pure functions over the packaged `app/fit/data/provider_market.yaml` (loaded once) and the spot
advisor rows the caller passes in (the `spot_advisor` table); no database or network access.
Every number returned comes with the text that says where it came from.

Models (README "Job cost beyond the price"):
- set-up = provisioning + image pull + job start + weights download (bytes / hub Gbit/s) + load
  (bytes / local disk GB/s), per provider kind, overridable as a whole (`setup_minutes`);
- checkpoints: a synchronous write of the state every `interval` minutes of training;
- spot: interruptions arrive at a constant rate per running hour; each loses the work since the
  last checkpoint and then costs `restart` minutes; the expected wall time to finish a segment
  of x hours is (1/rate + restart) * (e^(rate*x) - 1), summed over the checkpoint segments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Kind = Literal["hyperscaler_vm", "gpu_cloud_vm", "marketplace_container", "unknown"]
UNKNOWN_KIND: Kind = "unknown"
SETUP_FIELDS = (
    "provision_minutes",
    "image_minutes",
    "start_minutes",
    "download_gbps",
    "load_gbytes_per_s",
)
_MAX_EXPONENT = 700.0  # e**700 is near float's limit; beyond it a job never finishes
# An advisor band label: "<5%", "5-10%" or ">20%" (operator, number, optional upper number).
_BAND = re.compile(r"^\s*([<>])?\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*%\s*$")


# --- the data file --------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_urls(value: str | list[str] | None) -> str | list[str] | None:
    for url in [value] if isinstance(value, str) else value or []:
        if not url.startswith("https://"):
            raise ValueError(f"source must be an https URL, got {url!r}")
    return value


class Sourced(_Model):
    """A number with where it comes from: a source URL, a stated assumption, or both."""

    value: float = Field(ge=0)
    source: str | list[str] | None = None
    assumption: str | None = None

    _urls = field_validator("source")(_check_urls)

    @model_validator(mode="after")
    def _traced(self) -> Sourced:
        if not self.source and not self.assumption:
            raise ValueError("a value needs a source or an assumption")
        return self

    def cite(self) -> str:
        """'assumption: ...; source: URL' (whichever parts exist)."""
        return _cite(self.source, self.assumption)


def _cite(source: str | list[str] | None, assumption: str | None) -> str:
    urls = [source] if isinstance(source, str) else source or []
    parts = [f"assumption: {assumption}"] if assumption else []
    return "; ".join([*parts, *(f"source: {url}" for url in urls)])


def _positive_speeds(model: KindSetup | SetupOverrides) -> None:
    for name in ("download_gbps", "load_gbytes_per_s"):
        speed = getattr(model, name)
        if speed is not None and speed.value <= 0:
            raise ValueError(f"{name} must be above 0")


class KindSetup(_Model):
    label: str
    provision_minutes: Sourced
    image_minutes: Sourced
    start_minutes: Sourced
    download_gbps: Sourced
    load_gbytes_per_s: Sourced

    @model_validator(mode="after")
    def _speeds(self) -> KindSetup:
        _positive_speeds(self)
        return self


class SetupOverrides(_Model):
    provision_minutes: Sourced | None = None
    image_minutes: Sourced | None = None
    start_minutes: Sourced | None = None
    download_gbps: Sourced | None = None
    load_gbytes_per_s: Sourced | None = None

    @model_validator(mode="after")
    def _speeds(self) -> SetupOverrides:
        _positive_speeds(self)
        return self


class RateSpec(_Model):
    """A default interruption rate: either per hour, or an advisor-style band over a window."""

    per_hour: float | None = Field(default=None, ge=0, le=10)
    band: str | None = None
    window_hours: float | None = Field(default=None, gt=0)
    source: str | list[str] | None = None
    assumption: str | None = None

    _urls = field_validator("source")(_check_urls)

    @model_validator(mode="after")
    def _one_form(self) -> RateSpec:
        if (self.per_hour is None) == (self.band is None):
            raise ValueError("give exactly one of per_hour or band")
        if self.band is not None:
            try:
                _parse_band(self.band)
            except ValueError:
                raise ValueError(
                    f"band {self.band!r} is not like '<5%', '5-10%' or '>20%'"
                ) from None
        if not self.source and not self.assumption:
            raise ValueError("a rate needs a source or an assumption")
        return self


class SpotRule(_Model):
    available: bool
    rule: str
    source: str | None = None
    notice_seconds: Sourced | None = None
    max_runtime_hours: Sourced | None = None
    feed: str | None = None  # side feed id whose rows override the default, e.g. aws-spot-advisor
    default_rate: RateSpec | None = None

    _urls = field_validator("source")(_check_urls)

    @model_validator(mode="after")
    def _rate_if_available(self) -> SpotRule:
        if self.available and self.default_rate is None:
            raise ValueError("a provider with a spot market needs a default_rate")
        return self


class ProviderMarket(_Model):
    name: str
    kind: Kind
    setup: SetupOverrides = SetupOverrides()
    billing_minimum_minutes: Sourced | None = None  # the least a started machine is billed
    spot: SpotRule


class AdvisorConversion(_Model):
    window_hours: Sourced
    open_band_fraction: Sourced


class CheckpointDefaults(_Model):
    write_gbps: Sourced
    interval_minutes: Sourced  # the checkpoint_minutes default


class PlanLimits(_Model):
    max_nodes: Sourced

    @model_validator(mode="after")
    def _whole(self) -> PlanLimits:
        if self.max_nodes.value < 1 or self.max_nodes.value != int(self.max_nodes.value):
            raise ValueError("max_nodes must be a whole number of at least 1")
        return self


class UnknownProvider(_Model):
    spot: SpotRule


class MarketData(_Model):
    """The parsed provider_market.yaml."""

    aliases: dict[str, str] = {}
    kinds: dict[Kind, KindSetup]
    checkpoint: CheckpointDefaults
    plans: PlanLimits
    advisor: AdvisorConversion
    unknown_provider: UnknownProvider
    providers: dict[str, ProviderMarket]

    @model_validator(mode="after")
    def _complete(self) -> MarketData:
        missing = set(Kind.__args__) - set(self.kinds)  # type: ignore[attr-defined]
        if missing:
            raise ValueError(f"kinds missing: {sorted(missing)}")
        if not 0 < self.advisor.open_band_fraction.value < 1:
            raise ValueError("open_band_fraction must be a fraction")
        bad = {alias: to for alias, to in self.aliases.items() if to not in self.providers}
        if bad:
            raise ValueError(f"aliases to unknown providers: {bad}")
        return self

    def canonical(self, provider_id: str) -> str:
        """The offer provider id for an id or a facts-file alias ('vast' -> 'vastai')."""
        key = provider_id.strip().lower()
        return self.aliases.get(key, key)

    def provider(self, provider_id: str) -> ProviderMarket | None:
        """The entry for an offer provider id (or a facts-file alias), None if unknown."""
        return self.providers.get(self.canonical(provider_id))

    @cached_property
    def setup_plans(self) -> dict[str | None, _SetupPlan]:
        """Each provider's resolved set-up values (None: the unknown kind), computed once."""
        plans: dict[str | None, _SetupPlan] = {None: _setup_plan(None, self.kinds[UNKNOWN_KIND])}
        for provider_id, entry in self.providers.items():
            plans[provider_id] = _setup_plan(entry, self.kinds[entry.kind])
        return plans

    def band_reading(self, label: str) -> tuple[float, str]:
        """(rate per hour, how it was read) for an advisor band label; memoized per label."""
        known = self._band_readings.get(label)
        if known is None:
            window = self.advisor.window_hours.value
            fraction = band_fraction(label, data=self)
            rate = fraction_to_hourly_rate(fraction, window)
            known = self._band_readings[label] = (
                rate,
                f"read as {fraction:.1%} of instances interrupted over {window:g} h -> "
                f"{rate:.2g}/h (-ln(1-p)/{window:g} h; {self.advisor.window_hours.cite()})",
            )
        return known

    @cached_property
    def _band_readings(self) -> dict[str, tuple[float, str]]:
        return {}

    @cached_property
    def default_rates(self) -> dict[str | None, tuple[float, str]]:
        """Each spot market's default (rate, why); None: the unknown-provider default."""
        rates: dict[str | None, tuple[float, str]] = {
            None: _default_rate(self.unknown_provider.spot, self)
        }
        for provider_id, entry in self.providers.items():
            if entry.spot.available:
                rates[provider_id] = _default_rate(entry.spot, self)
        return rates


@lru_cache(maxsize=1)
def load_market_data() -> MarketData:
    """The packaged data file, validated once per process."""
    text = resources.files("app.fit").joinpath("data/provider_market.yaml").read_text("utf-8")
    return parse_market_data(yaml.safe_load(text))


def parse_market_data(raw: Any) -> MarketData:
    """Validate a provider_market mapping (tests build variants of the shipped file)."""
    return MarketData.model_validate(raw)


# --- set-up ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetupStep:
    name: str
    minutes: float
    note: str  # how the minutes were obtained, with the source or assumption


@dataclass(frozen=True)
class SetupTime:
    """Hours from "rent" to the first training step, with the steps that make it up."""

    hours: float
    steps: tuple[SetupStep, ...]
    basis: Literal["provider", "unknown_provider", "user"]

    @property
    def minutes(self) -> float:
        return self.hours * 60

    @property
    def notes(self) -> tuple[str, ...]:
        """One 'step: N min (source/assumption)' line per step."""
        return tuple(f"{s.name}: {s.minutes:.1f} min ({s.note})" for s in self.steps)

    def summary(self) -> str:
        """Short form for an explanation line: 'set-up 9.5 min = provisioning 3 + ...'."""
        parts = " + ".join(f"{s.name} {s.minutes:.1f}" for s in self.steps)
        return f"set-up {self.minutes:.1f} min = {parts}"


def hub_weight_bytes(params_b: float, bytes_per_param: float = 2.0) -> float:
    """Bytes of a checkpoint on the hub: bf16/fp16 weights are 2 bytes per parameter."""
    _finite(params_b, "params_b", minimum=0)
    _finite(bytes_per_param, "bytes_per_param", minimum=0)
    return params_b * 1e9 * bytes_per_param


def setup_hours(
    provider: str,
    weight_bytes: float,
    *,
    setup_minutes: float | None = None,
    download_gbps: float | None = None,
    data: MarketData | None = None,
) -> SetupTime:
    """Set-up hours on `provider` for a model of `weight_bytes`, with each step's source.

    `setup_minutes` (the user's own figure) replaces the whole estimate; `download_gbps` replaces
    the provider's hub download speed (e.g. a marketplace host's advertised downlink).
    """
    _finite(weight_bytes, "weight_bytes", minimum=0)
    if setup_minutes is not None:
        _finite(setup_minutes, "setup_minutes", minimum=0)
        step = SetupStep("set-up", float(setup_minutes), "your setup_minutes")
        return SetupTime(setup_minutes / 60, (step,), "user")
    if download_gbps is not None:
        _finite(download_gbps, "download_gbps", minimum=0, strict=True)
    data = data or load_market_data()
    entry = data.provider(provider)
    plan = data.setup_plans[data.canonical(provider) if entry else None]
    gbps = plan.download_gbps if download_gbps is None else download_gbps
    speed_note = plan.download_note if download_gbps is None else "the offer's own downlink"
    gigabytes = weight_bytes / 1e9
    steps = (
        *plan.fixed_steps,
        SetupStep(
            "weights download",
            gigabytes * 8 / gbps / 60,
            f"{gigabytes:.1f} GB at {gbps:g} Gbit/s; {speed_note}",
        ),
        SetupStep(
            "weights load",
            gigabytes / plan.load_gbytes_per_s / 60,
            f"{gigabytes:.1f} GB at {plan.load_gbytes_per_s:g} GB/s; {plan.load_note}",
        ),
    )
    minutes = sum(s.minutes for s in steps)
    return SetupTime(minutes / 60, steps, "provider" if entry else "unknown_provider")


@dataclass(frozen=True)
class _SetupPlan:
    fixed_steps: tuple[SetupStep, ...]  # provisioning, image, job start
    download_gbps: float
    download_note: str
    load_gbytes_per_s: float
    load_note: str


def _setup_plan(entry: ProviderMarket | None, kind: KindSetup) -> _SetupPlan:
    values: dict[str, Sourced] = {name: getattr(kind, name) for name in SETUP_FIELDS}
    if entry is not None:
        for name in SETUP_FIELDS:
            override = getattr(entry.setup, name)
            if override is not None:
                values[name] = override
    label = kind.label if entry is None else f"{entry.name}, {kind.label}"
    fixed = tuple(
        SetupStep(step, values[name].value, f"{label}: {values[name].cite()}")
        for step, name in (
            ("provisioning", "provision_minutes"),
            ("image", "image_minutes"),
            ("job start", "start_minutes"),
        )
    )
    return _SetupPlan(
        fixed_steps=fixed,
        download_gbps=values["download_gbps"].value,
        download_note=values["download_gbps"].cite(),
        load_gbytes_per_s=values["load_gbytes_per_s"].value,
        load_note=values["load_gbytes_per_s"].cite(),
    )


# --- billing, plans, profiles ---------------------------------------------------------------


def billing_minimum_hours(provider: str, *, data: MarketData | None = None) -> tuple[float, str]:
    """(hours, why) a started machine of `provider` is billed at least; (0, '') when none."""
    data = data or load_market_data()
    entry = data.provider(provider)
    if entry is None or entry.billing_minimum_minutes is None:
        return 0.0, ""
    minimum = entry.billing_minimum_minutes
    return minimum.value / 60, f"{minimum.value:g} min minimum ({minimum.cite()})"


def default_checkpoint_minutes(*, data: MarketData | None = None) -> float:
    """The `checkpoint_minutes` default (minutes of training between two saves)."""
    return (data or load_market_data()).checkpoint.interval_minutes.value


def max_plan_nodes(*, data: MarketData | None = None) -> int:
    """The most identical listings one plan may join."""
    return int((data or load_market_data()).plans.max_nodes.value)


def market_profile(provider: str, *, data: MarketData | None = None) -> str:
    """The provider's entry id in the data file ('' for a provider it does not know): offers
    of one profile share every set-up, billing and spot default."""
    data = data or load_market_data()
    key = data.canonical(provider)
    return key if key in data.providers else ""


def known_profiles(*, data: MarketData | None = None) -> tuple[str, ...]:
    """Every provider id with an entry (what market_profile keeps), sorted."""
    return tuple(sorted((data or load_market_data()).providers))


def has_advisor_feed(provider: str, *, data: MarketData | None = None) -> bool:
    """Whether the provider's spot risk reads per-listing bands from a side feed."""
    data = data or load_market_data()
    entry = data.provider(provider)
    return bool(entry and entry.spot.available and entry.spot.feed)


# --- checkpoints ----------------------------------------------------------------------------


def checkpoint_overhead_hours(
    state_bytes: float,
    interval_minutes: float | None,
    run_hours: float,
    *,
    write_gbps: float | None = None,
    writers: int = 1,
    data: MarketData | None = None,
) -> float:
    """Hours spent writing checkpoints of `state_bytes` every `interval_minutes` of training.

    Checkpoints fall at each interval boundary strictly inside the run (the final save happens
    anyway), so a run of R minutes writes ceil(R / interval) - 1 of them. Writes are synchronous;
    `writers` nodes write their shards in parallel. No interval (None or 0) means no checkpoints.
    """
    _finite(state_bytes, "state_bytes", minimum=0)
    _finite(run_hours, "run_hours", minimum=0)
    if writers < 1:
        raise ValueError("writers must be at least 1")
    if interval_minutes is None or interval_minutes == 0:
        return 0.0
    _finite(interval_minutes, "interval_minutes", minimum=0, strict=True)
    if write_gbps is None:
        write_gbps = (data or load_market_data()).checkpoint.write_gbps.value
    _finite(write_gbps, "write_gbps", minimum=0, strict=True)
    count = max(0, math.ceil(run_hours * 60 / interval_minutes) - 1)
    seconds_each = state_bytes * 8 / (write_gbps * 1e9 * writers)
    return count * seconds_each / 3600


# --- spot risk ------------------------------------------------------------------------------


class AdvisorRowLike(Protocol):
    """What the spot functions read from a `spot_advisor` row (the ORM row fits)."""

    @property
    def provider_id(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def os(self) -> str: ...
    @property
    def band_label(self) -> str: ...
    @property
    def fetched_at(self) -> datetime | None: ...


AdvisorIndex = Mapping[tuple[str, str, str], AdvisorRowLike]  # (provider, region, type) -> row


def advisor_index(
    rows: Iterable[AdvisorRowLike], *, os: str = "Linux"
) -> dict[tuple[str, str, str], AdvisorRowLike]:
    """Rows of one OS keyed by (provider id, region, instance type); build once per query."""
    return {(row.provider_id, row.region, row.instance_type): row for row in rows if row.os == os}


@dataclass(frozen=True)
class SpotRisk:
    """Expected interruptions per running hour and the sentence that says where it comes from."""

    per_hour: float
    source: str
    basis: Literal["advisor", "provider_default", "unknown_provider", "no_spot_market"]
    band_label: str | None = None
    notice_seconds: float | None = None


def band_fraction(label: str, *, data: MarketData | None = None) -> float:
    """The share of instances interrupted that a band label stands for: the label's midpoint
    ('5-10%' -> 0.075, '<5%' -> 0.025); the open top band ('>20%') uses open_band_fraction."""
    operator, first, second = _parse_band(label)
    if operator == "<":
        return first / 200
    if operator == ">":
        open_value = (data or load_market_data()).advisor.open_band_fraction.value
        return max(open_value, first / 100)
    return (first + second) / 200


def _parse_band(label: str) -> tuple[str | None, float, float]:
    """('<' | '>' | None, first number, second number or 0); ValueError for anything else."""
    match = _BAND.match(label)
    operator, first, second = match.groups() if match else (None, None, None)
    if first is None or (operator is None) == (second is None):
        raise ValueError(f"not an interruption band: {label!r}")
    return operator, float(first), float(second or 0)


def fraction_to_hourly_rate(fraction: float, window_hours: float) -> float:
    """Constant hourly hazard under which an instance running `window_hours` is interrupted with
    probability `fraction`: -ln(1 - fraction) / window_hours."""
    _finite(fraction, "fraction", minimum=0)
    _finite(window_hours, "window_hours", minimum=0, strict=True)
    if fraction >= 1:
        raise ValueError("fraction must be below 1")
    return -math.log1p(-fraction) / window_hours


def spot_interruption_rate(
    provider: str,
    instance_type: str,
    region: str,
    advisor: AdvisorIndex | Iterable[AdvisorRowLike] | None = None,
    *,
    data: MarketData | None = None,
) -> SpotRisk:
    """Interruptions per hour for a spot listing: the AWS advisor band for its instance type and
    region when the feed has one, else the provider's documented default, else a conservative
    default named as such."""
    data = data or load_market_data()
    entry = data.provider(provider)
    row = None
    if entry is not None and entry.spot.available and entry.spot.feed:
        index = advisor if isinstance(advisor, Mapping) else advisor_index(advisor or ())
        row = index.get((data.canonical(provider), region, instance_type))
    if row is None:
        return spot_risk_for_band(provider, None, data=data)
    return spot_risk_for_band(
        provider,
        row.band_label,
        where=f"{row.instance_type} in {row.region}",
        fetched_at=row.fetched_at,
        data=data,
    )


def spot_risk_for_band(
    provider: str,
    band_label: str | None,
    *,
    where: str = "this instance type and region",
    fetched_at: datetime | None = None,
    data: MarketData | None = None,
) -> SpotRisk:
    """spot_interruption_rate for a caller that already looked up the listing's advisor band
    (None: the feed has no row for it); a band is used only for providers with a feed."""
    data = data or load_market_data()
    entry = data.provider(provider)
    if entry is None:
        rate, why = data.default_rates[None]
        return SpotRisk(rate, f"unknown provider {provider!r}: {why}", "unknown_provider")
    spot = entry.spot
    notice = spot.notice_seconds.value if spot.notice_seconds else None
    if not spot.available:
        rate, why = data.default_rates[None]
        text = f"{entry.name} documents no spot market ({spot.rule}); {why}"
        return SpotRisk(rate, text, "no_spot_market")
    missing = ""
    if spot.feed:
        missing = " (no advisor row for this type and region)"
        if band_label is not None:
            try:
                return _advisor_risk(entry, band_label, where, fetched_at, notice, data)
            except ValueError:  # a band label the conversion does not understand
                missing = f" (advisor band {band_label[:16]!r} not understood)"
    rate, why = data.default_rates[data.canonical(provider)]
    said = f"{spot.rule} (source: {spot.source})" if spot.source else spot.rule
    text = f"{entry.name} spot{missing}: {said}; {why}"
    return SpotRisk(rate, text, "provider_default", notice_seconds=notice)


def _advisor_risk(
    entry: ProviderMarket,
    band_label: str,
    where: str,
    fetched_at: datetime | None,
    notice: float | None,
    data: MarketData,
) -> SpotRisk:
    rate, reading = data.band_reading(band_label)
    fetched = f", fetched {fetched_at:%Y-%m-%d}" if fetched_at else ""
    text = (
        f"{entry.name} Spot Instance Advisor: {where} is in the "
        f"'{band_label}' band{fetched}, {reading}"
    )
    return SpotRisk(rate, text, "advisor", band_label=band_label, notice_seconds=notice)


def _default_rate(rule: SpotRule, data: MarketData) -> tuple[float, str]:
    spec = rule.default_rate
    assert spec is not None  # guaranteed by SpotRule for available markets and unknown_provider
    cite = _cite(spec.source, spec.assumption)
    if spec.per_hour is not None:
        return spec.per_hour, f"{spec.per_hour:g}/h ({cite})"
    assert spec.band is not None
    window = spec.window_hours or data.advisor.window_hours.value
    fraction = band_fraction(spec.band, data=data)
    rate = fraction_to_hourly_rate(fraction, window)
    return rate, (
        f"band '{spec.band}' read as {fraction:.1%} over {window:g} h -> {rate:.2g}/h ({cite})"
    )


# --- expected spot overhead -----------------------------------------------------------------


def expected_spot_overhead_hours(
    run_hours: float,
    rate_per_hour: float,
    checkpoint_minutes: float | None,
    restart_minutes: float,
) -> float:
    """Expected extra wall-clock hours that interruptions add to a run of `run_hours`.

    Interruptions arrive at `rate_per_hour` of running (constant hazard); each loses the work
    since the last checkpoint (on average about half an interval, exactly 1/rate - c/(e^(rate*c)
    - 1) for an interval c) and then `restart_minutes` (re-provision, set-up, reload) before work
    resumes. Finishing x hours of work between checkpoints takes (1/rate + restart)(e^(rate*x) - 1)
    hours on average, so long runs grow linearly with checkpoints and exponentially without
    (None or 0 means no checkpoints). Returns math.inf when the run would practically never end.
    """
    _finite(run_hours, "run_hours", minimum=0)
    _finite(rate_per_hour, "rate_per_hour", minimum=0)
    _finite(restart_minutes, "restart_minutes", minimum=0)
    if checkpoint_minutes is not None:
        _finite(checkpoint_minutes, "checkpoint_minutes", minimum=0)
    if run_hours == 0 or rate_per_hour == 0:
        return 0.0
    restart = restart_minutes / 60
    segments = _segments(run_hours, checkpoint_minutes)
    total = 0.0
    for count, length in segments:
        exponent = rate_per_hour * length
        if exponent > _MAX_EXPONENT:
            return math.inf
        total += count * (1 / rate_per_hour + restart) * math.expm1(exponent)
    return max(0.0, total - run_hours)


def expected_interruptions(
    run_hours: float, rate_per_hour: float, checkpoint_minutes: float | None
) -> float:
    """Expected number of interruptions before the run finishes (same model as the overhead)."""
    _finite(run_hours, "run_hours", minimum=0)
    _finite(rate_per_hour, "rate_per_hour", minimum=0)
    total = 0.0
    for count, length in _segments(run_hours, checkpoint_minutes):
        exponent = rate_per_hour * length
        if exponent > _MAX_EXPONENT:
            return math.inf
        total += count * math.expm1(exponent)
    return total


def _segments(run_hours: float, checkpoint_minutes: float | None) -> list[tuple[int, float]]:
    """(count, hours) of work between checkpoints: full intervals plus the remainder."""
    if not checkpoint_minutes:
        return [(1, run_hours)]
    interval = checkpoint_minutes / 60
    full = math.floor(run_hours / interval)
    rest = run_hours - full * interval
    return [(full, interval), (1, rest)] if rest > 1e-12 else [(full, interval)]


def _finite(value: float, name: str, *, minimum: float, strict: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        relation = "above" if strict else "at least"
        raise ValueError(f"{name} must be {relation} {minimum:g}, got {value:g}")
