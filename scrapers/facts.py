"""Provider facts the price feeds don't carry: billing granularity, interconnect, network, storage.

Facts live in `scrapers/facts/<provider>.yaml`, one file per provider id, each fact with a `source`
note so an offer page can say where a claim comes from. `apply_facts` only fills what a feed left
UNKNOWN: a feed value always wins over a facts file.

Single-GPU (and fractional-GPU) instances get no intra-node interconnect from facts: there is no
GPU-to-GPU link to speak of, so `interconnect_for` returns UNKNOWN for them and `describe` says
"n/a (single GPU)". Claiming PCIE there would read as a (slow) multi-GPU fabric in rankings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.records import Billing, Interconnect, Network, OfferRecord

# Live scraper ids that share the sample importer's facts file for the same cloud.
ALIASES: dict[str, str] = {"lambdalabs": "lambda", "vastai": "vast"}
_COMMON = "_common"  # GPU-model rules appended after every provider's own rules
_PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_MAX_SOURCE = 300


class FactsError(ValueError):
    """A facts file exists but is not valid (a bug in the shipped data, not in a feed)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Flag(_Model):
    value: bool
    source: str = Field(min_length=1, max_length=_MAX_SOURCE)


class _BillingFact(_Model):
    value: Billing
    source: str = Field(min_length=1, max_length=_MAX_SOURCE)


_URL = r"^https://[^\s\"'<>]+$"


class _InstancePage(_Model):
    """An instance-type page template used when `match` (a regex) finds the instance type."""

    match: str
    url: str = Field(pattern=_URL, max_length=300)

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value


class _Urls(_Model):
    """Where to rent: the pricing page, and instance-type page templates where a stable one exists.

    Templates may use {instance_type} and {family} (the instance type up to its first dot),
    both URL-quoted. No affiliate or tracking parameters.
    """

    pricing: str = Field(pattern=_URL, max_length=300)
    instances: list[_InstancePage] = Field(default_factory=list)
    source: str = Field(min_length=1, max_length=_MAX_SOURCE)

    def url_for(self, instance_type: str) -> str:
        for page in self.instances:
            if re.search(page.match, instance_type):
                family = instance_type.split(".", 1)[0]
                return page.url.format(
                    instance_type=quote(instance_type, safe=""), family=quote(family, safe="")
                )
        return self.pricing


class _Rule(_Model):
    """Matches when every given condition holds; regexes are searched case-insensitively."""

    instance_type: str | None = None  # regex over the provider's instance type
    gpu_model: str | None = None  # regex over the canonical GPU slug
    min_gpus: float = 0
    source: str = Field(min_length=1, max_length=_MAX_SOURCE)

    @field_validator("instance_type", "gpu_model")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    def matches(self, instance_type: str, gpu_model: str, gpu_count: float | None) -> bool:
        if self.instance_type and not re.search(self.instance_type, instance_type, re.I):
            return False
        if self.gpu_model and not re.search(self.gpu_model, gpu_model, re.I):
            return False
        return not (self.min_gpus and (gpu_count is None or gpu_count < self.min_gpus))


class _InterconnectRule(_Rule):
    value: Interconnect


class _NetworkRule(_Rule):
    value: Network
    gbps: float | None = Field(default=None, gt=0, le=100_000)


class _FactsFile(_Model):
    display_name: str | None = Field(default=None, min_length=1, max_length=80)
    urls: _Urls | None = None
    billing: _BillingFact | None = None
    spot_available: _Flag | None = None
    persistent_storage: _Flag | None = None
    interconnect: list[_InterconnectRule] = Field(default_factory=list)
    network: list[_NetworkRule] = Field(default_factory=list)


@dataclass(frozen=True)
class Fact:
    """One displayable fact about an offer, e.g. Fact("billing", "minute", "pricing page")."""

    name: str
    value: str
    source: str


@dataclass(frozen=True)
class ProviderFacts:
    """The parsed facts of one provider; an empty instance knows nothing (everything UNKNOWN)."""

    provider: str
    data: _FactsFile = _FactsFile()

    @property
    def display_name(self) -> str:
        """The provider's name as users know it ("DigitalOcean"), else its id."""
        return self.data.display_name or self.provider

    def url_for(self, instance_type: str) -> str | None:
        """The provider's page for this instance type, else its pricing page (None: no facts)."""
        return self.data.urls.url_for(instance_type) if self.data.urls else None

    @property
    def billing(self) -> Billing:
        return self.data.billing.value if self.data.billing else Billing.UNKNOWN

    @property
    def spot_available(self) -> bool | None:
        return self.data.spot_available.value if self.data.spot_available else None

    @property
    def persistent_storage(self) -> bool | None:
        return self.data.persistent_storage.value if self.data.persistent_storage else None

    @property
    def sources(self) -> dict[str, str]:
        """Provider-wide fact name -> source note."""
        out: dict[str, str] = {}
        for name in ("billing", "spot_available", "persistent_storage", "urls"):
            fact = getattr(self.data, name)
            if fact is not None:
                out[name] = fact.source
        return out

    def _interconnect_rule(
        self, instance_type: str, gpu_model: str, gpu_count: float | None
    ) -> _InterconnectRule | None:
        if gpu_count is not None and gpu_count < 2:
            return None  # see module docstring: no GPU-to-GPU link on a single GPU
        for rule in self.data.interconnect:
            if rule.matches(instance_type, gpu_model, gpu_count):
                return rule
        return None

    def _network_rule(
        self, instance_type: str, gpu_model: str = "", gpu_count: float | None = None
    ) -> _NetworkRule | None:
        for rule in self.data.network:
            if rule.matches(instance_type, gpu_model, gpu_count):
                return rule
        return None

    def interconnect_for(
        self, instance_type: str, gpu_model: str = "", gpu_count: float | None = None
    ) -> Interconnect:
        """Intra-node GPU interconnect from the first matching rule; UNKNOWN for 1-GPU offers."""
        rule = self._interconnect_rule(instance_type, gpu_model, gpu_count)
        return rule.value if rule else Interconnect.UNKNOWN

    def network_for(
        self, instance_type: str, gpu_model: str = "", gpu_count: float | None = None
    ) -> tuple[Network, float | None]:
        """Inter-node network kind and Gbit/s from the first matching rule."""
        rule = self._network_rule(instance_type, gpu_model, gpu_count)
        return (rule.value, rule.gbps) if rule else (Network.UNKNOWN, None)

    def describe(
        self, instance_type: str, gpu_model: str = "", gpu_count: float | None = None
    ) -> list[Fact]:
        """Every known fact for one offer, with its source, for display on an offer page."""
        facts: list[Fact] = []
        if self.data.billing:
            facts.append(Fact("billing", self.data.billing.value.value, self.data.billing.source))
        for name in ("spot_available", "persistent_storage"):
            flag: _Flag | None = getattr(self.data, name)
            if flag is not None:
                facts.append(Fact(name, "yes" if flag.value else "no", flag.source))
        if gpu_count is not None and gpu_count < 2:
            facts.append(Fact("interconnect", "n/a (single GPU)", "one GPU has no GPU-GPU link"))
        else:
            rule = self._interconnect_rule(instance_type, gpu_model, gpu_count)
            if rule:
                facts.append(Fact("interconnect", rule.value.value, rule.source))
        net = self._network_rule(instance_type, gpu_model, gpu_count)
        if net:
            value = net.value.value + (f" {net.gbps:g} Gbit/s" if net.gbps else "")
            facts.append(Fact("network", value, net.source))
        return facts


def parse_facts(provider: str, text: str) -> ProviderFacts:
    """Parse one facts YAML document (pure; raises FactsError on an invalid file)."""
    try:
        raw: Any = yaml.safe_load(text)
        data = _FactsFile.model_validate(raw or {})
    except (yaml.YAMLError, ValidationError, re.error) as exc:
        raise FactsError(f"invalid facts file for {provider!r}: {exc}") from exc
    return ProviderFacts(provider=provider, data=data)


def _read(name: str) -> str | None:
    path = resources.files("scrapers").joinpath("facts", f"{name}.yaml")
    return path.read_text(encoding="utf-8") if path.is_file() else None


@cache
def load_facts(provider: str) -> ProviderFacts:
    """Facts for one provider id from the packaged YAML; empty facts when there is no file."""
    name = ALIASES.get(provider, provider)
    if not _PROVIDER_ID.match(name):
        return ProviderFacts(provider=provider)
    text = _read(name)
    if text is None:
        return ProviderFacts(provider=provider)
    own = parse_facts(provider, text).data
    common = parse_facts(_COMMON, _read(_COMMON) or "").data
    merged = own.model_copy(
        update={
            "interconnect": [*own.interconnect, *common.interconnect],
            "network": [*own.network, *common.network],
        }
    )
    return ProviderFacts(provider=provider, data=merged)


def display_name(provider: str) -> str:
    """A provider id's display name from its facts file ("do" -> "DigitalOcean")."""
    return load_facts(provider).display_name


def apply_facts(record: OfferRecord, facts: ProviderFacts) -> OfferRecord:
    """Fill provider URL, billing, interconnect, network the feed left unknown; feed values win."""
    update: dict[str, Any] = {}
    if record.provider_url is None:
        url = facts.url_for(record.instance_type)
        if url is not None:
            update["provider_url"] = url
    if record.billing is Billing.UNKNOWN and facts.billing is not Billing.UNKNOWN:
        update["billing"] = facts.billing
    if record.interconnect is Interconnect.UNKNOWN:
        interconnect = facts.interconnect_for(
            record.instance_type, record.gpu_model, record.gpu_count
        )
        if interconnect is not Interconnect.UNKNOWN:
            update["interconnect"] = interconnect
    if record.network is Network.UNKNOWN:
        network, gbps = facts.network_for(record.instance_type, record.gpu_model, record.gpu_count)
        if network is not Network.UNKNOWN:
            update["network"] = network
            if record.network_gbps is None and gbps is not None:
                update["network_gbps"] = gbps
    if not update:
        return record
    return OfferRecord.model_validate({**record.model_dump(), **update})
