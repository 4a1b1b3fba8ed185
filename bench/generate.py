"""Deterministic synthetic offers drawn from the bundled sample's distributions.

The bundled sample (app/sample, ~837 real offers from 11 clouds) gives, per provider: the machine
shapes it rents (GPU model, GPU count, vCPUs, RAM, per-GPU VRAM, facts such as interconnect and
billing), its regions, its share of spot-only listings and of on-demand listings that also carry a
spot price. Across providers it gives the on-demand price per GPU-hour of every GPU model.

A synthetic offer picks a provider (weighted by its sample size), one of its real shapes and
regions, a per-GPU price from that GPU model's real prices times log-normal noise (sigma 0.15), a
spot price at 35-75 % of on-demand where the provider sells spot, and an availability
(marketplaces report stock; the others mostly "unknown"). Larger sets clone the providers
(`vastai`, `vastai-1`, ...; one clone per 25k offers) so a provider holds a realistic number of
offers. Instance types get a host suffix (`gpu_8x_h100_sxm5.m1a2b`), as on a marketplace.

Price history, 30 days: every offer has the point written when it was first seen; a volatile
fraction (20 %, marketplace-like re-pricing) also gets a point every 6-12 hours (uniform) from
first seen to last seen, walking the price. Half the offers exist for the whole window, the rest
appear uniformly during it; 10 % are inactive (gone before now). That averages ~12 history rows
per offer (~1.2 M rows per 100k offers).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import random
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources

from app.records import Availability, OfferRecord

SEED = 20261202
HISTORY_DAYS = 30
HISTORY_STEP_HOURS = (6.0, 12.0)
VOLATILE_FRACTION = 0.20
INACTIVE_FRACTION = 0.10
WHOLE_WINDOW_FRACTION = 0.5
PRICE_NOISE_SIGMA = 0.15
SPOT_RATIO = (0.35, 0.75)
OFFERS_PER_PROVIDER_CLONE = 25_000
# Providers whose feeds list individual hosts with stock (marketplace-style).
MARKETPLACES = frozenset({"vastai", "primeintellect", "cudo"})
FIXED_NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@dataclass
class Profile:
    """What one sample provider looks like."""

    provider: str
    shapes: list[OfferRecord] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    spot_only: int = 0
    paired_spot: int = 0

    @property
    def weight(self) -> int:
        return len(self.shapes)

    @property
    def spot_only_ratio(self) -> float:
        return self.spot_only / max(1, len(self.shapes))

    @property
    def paired_spot_ratio(self) -> float:
        on_demand = len(self.shapes) - self.spot_only
        return self.paired_spot / max(1, on_demand)


@dataclass
class SampleStats:
    profiles: list[Profile]
    price_pool: dict[str, list[float]]  # GPU slug -> observed on-demand $/GPU-hour
    records: int
    parser: str  # how the sample was parsed (real parser, or the bench fallback)

    def profile(self, provider: str) -> Profile:
        for p in self.profiles:
            if p.provider == provider:
                return p
        raise KeyError(provider)


# Used only while scrapers.skypilot cannot be imported (app.gpus.normalize and scrapers.http
# are being written): a plain lookup over SkyPilot's AcceleratorName spellings in the sample.
_FALLBACK_SLUGS = {
    "h100": "h100-80gb",
    "h100sxm": "h100-sxm",
    "a10080gb": "a100-80gb",
    "a6000": "rtx-a6000",
    "rtxa6000": "rtx-a6000",
    "b200": "b200",
    "b300": "b300",
    "l40s": "l40s",
    "h200": "h200",
    "a40": "a40",
    "rtx6000": "quadro-rtx-6000",
    "a10": "a10",
    "gh200": "gh200",
    "rtxa5000": "rtx-a5000",
    "a800": "a800-80gb",
    "l40": "l40",
    "rtx4090": "rtx-4090",
    "rtx5090": "rtx-5090",
    "l4": "l4",
    "a4000": "rtx-a4000",
    "rtxpro6000": "rtx-pro-6000",
    "rtxpro6000s": "rtx-pro-6000",
    "rtxpro600096gb": "rtx-pro-6000",
    "rtx6000ada": "rtx-6000-ada",
    "v10032gb": "v100-32gb",
    "rtxa2000": "rtx-a2000",
    "p4000": "quadro-p4000",
    "m4000": "quadro-m4000",
    "rtx3090": "rtx-3090",
    "rtx3080": "rtx-3080",
    "rtx3070": "rtx-3070",
    "rtx3060": "rtx-3060",
    "rtx4070": "rtx-4070",
    "rtx4060": "rtx-4060",
    "a30": "a30",
}


def _fallback_normalize(name: str, memory_gib: float | None = None, context: str = "") -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    if key == "a100":
        return "a100-80gb" if (memory_gib or 40) > 60 else "a100-40gb"
    if key == "v100":
        return "v100-32gb" if (memory_gib or 16) > 20 else "v100-16gb"
    return _FALLBACK_SLUGS.get(key, "unknown")


_PROVIDER_FOR_CLOUD = {"lambda": "lambdalabs", "vast": "vastai"}
_SIZE_IS_TOTAL = frozenset({"vast", "primeintellect"})


def _sample_csvs() -> list[tuple[str, str]]:
    root = resources.files("app") / "sample"
    out = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        csv_path = folder / "vms.csv"
        if folder.is_dir() and csv_path.is_file():
            out.append((folder.name, csv_path.read_text(encoding="utf-8")))
    return out


def _num(value: str | None) -> float | None:
    value = (value or "").strip()
    return float(value) if value else None


def _per_gpu_gib(cloud: str, info_text: str, count: float) -> float | None:
    text = info_text.strip()
    if not text.startswith("{"):
        return None
    try:
        info = json.loads(text)
    except ValueError:
        info = ast.literal_eval(text)
    gpus = {k.lower(): v for k, v in info.items()}.get("gpus") or []
    if not gpus:
        return None
    first = {k.lower(): v for k, v in gpus[0].items()}
    memory = {k.lower(): v for k, v in (first.get("memoryinfo") or {}).items()}
    mib = float(memory.get("sizeinmib") or 0)
    if mib <= 0:
        return None
    return round((mib / count if cloud in _SIZE_IS_TOTAL else mib) / 1024, 2)


def _fallback_parse(cloud: str, text: str) -> list[OfferRecord]:
    """The bench's own reading of a sample vms.csv (same conventions as scrapers.skypilot)."""
    records = []
    for row in csv.DictReader(io.StringIO(text)):
        name = (row.get("AcceleratorName") or "").strip()
        count = _num(row.get("AcceleratorCount"))
        if not name or not count:
            continue
        price = _num(row.get("Price"))
        spot = _num(row.get("SpotPrice"))
        price = price if price and price > 0 else None
        spot = spot if spot and spot > 0 else None
        if price is None and spot is None:
            continue
        region = (row.get("Region") or "").strip() or "unspecified"
        zone = (row.get("AvailabilityZone") or "").strip()
        memory = _per_gpu_gib(cloud, row.get("GpuInfo") or "", count)
        records.append(
            OfferRecord(
                provider=_PROVIDER_FOR_CLOUD.get(cloud, cloud),
                instance_type=row["InstanceType"].strip(),
                region=f"{region}/{zone}" if zone else region,
                spot=price is None,
                gpu_model=_fallback_normalize(name, memory),
                gpu_raw_name=name,
                gpu_count=count,
                vram_gib_per_gpu=memory,
                vcpus=_num(row.get("vCPUs")),
                ram_gib=_num(row.get("MemoryGiB")),
                price_per_hour=price,
                spot_price_per_hour=spot,
            )
        )
    return records


def _sample_records() -> tuple[list[OfferRecord], str]:
    """The bundled sample as records: through the real parser when the tree has all of it."""
    try:
        from scrapers.skypilot import parse_catalog_csv

        parse = lambda cloud, text: parse_catalog_csv(cloud, text).records  # noqa: E731
        parser = "scrapers.skypilot.parse_catalog_csv"
    except ImportError as exc:  # the scraper package is mid-change in the shared tree
        parse = _fallback_parse
        parser = f"bench fallback CSV reader (scrapers.skypilot not importable: {exc})"
    try:
        from scrapers.facts import apply_facts, load_facts
    except ImportError:
        apply_facts = load_facts = None  # type: ignore[assignment]
    else:
        parser += " + scrapers.facts"
    records: list[OfferRecord] = []
    for cloud, text in _sample_csvs():
        parsed = parse(cloud, text)
        if apply_facts is not None and load_facts is not None:
            facts = {p: load_facts(p) for p in {r.provider for r in parsed}}
            parsed = [apply_facts(r, facts[r.provider]) for r in parsed]
        records += parsed
    return records, parser


@cache
def sample_stats() -> SampleStats:
    """Distributions of the bundled sample (computed once per process)."""
    records, parser = _sample_records()
    profiles: dict[str, Profile] = {}
    pool: dict[str, list[float]] = defaultdict(list)
    spot_pool: dict[str, list[float]] = defaultdict(list)
    for r in records:
        prof = profiles.setdefault(r.provider, Profile(r.provider))
        prof.shapes.append(r)
        prof.regions.append(r.region)
        if r.spot:
            prof.spot_only += 1
            assert r.spot_price_per_hour is not None
            spot_pool[r.gpu_model].append(r.spot_price_per_hour / r.gpu_count)
        else:
            if r.spot_price_per_hour is not None:
                prof.paired_spot += 1
            assert r.price_per_hour is not None
            pool[r.gpu_model].append(r.price_per_hour / r.gpu_count)
    for slug, spot_prices in spot_pool.items():
        if slug not in pool:  # spot-only model: assume spot is ~55 % of on-demand
            pool[slug] = [p / 0.55 for p in spot_prices]
    ordered = sorted(profiles.values(), key=lambda p: p.provider)
    return SampleStats(profiles=ordered, price_pool=dict(pool), records=len(records), parser=parser)


@dataclass(frozen=True)
class SyntheticOffer:
    record: OfferRecord
    first_seen: datetime
    last_seen: datetime
    active: bool
    volatile: bool


def provider_clones(n: int) -> int:
    return max(1, math.ceil(n / OFFERS_PER_PROVIDER_CLONE))


def clone_name(provider: str, clone: int) -> str:
    return provider if clone == 0 else f"{provider}-{clone}"


def _availability(rng: random.Random, provider: str) -> tuple[Availability, int | None]:
    r = rng.random()
    if provider in MARKETPLACES:
        if r < 0.70:
            return Availability.IN_STOCK, rng.randint(1, 16)
        if r < 0.90:
            return Availability.LIMITED, 1
        return Availability.OUT, 0
    if r < 0.70:
        return Availability.UNKNOWN, None
    if r < 0.92:
        return Availability.IN_STOCK, None
    return Availability.OUT, None


def _record(
    rng: random.Random,
    stats: SampleStats,
    profile: Profile,
    provider: str,
    serial: int,
) -> OfferRecord:
    shape = rng.choice(profile.shapes)
    region = rng.choice(profile.regions)
    spot = rng.random() < profile.spot_only_ratio
    base = rng.choice(stats.price_pool.get(shape.gpu_model) or [2.0])
    per_gpu = base * rng.lognormvariate(0.0, PRICE_NOISE_SIGMA)
    price = min(round(per_gpu * shape.gpu_count, 4), 9_999.0)
    spot_price = None
    if spot or rng.random() < profile.paired_spot_ratio:
        spot_price = max(0.0001, round(price * rng.uniform(*SPOT_RATIO), 4))
    availability, count = _availability(rng, profile.provider)
    return OfferRecord(
        provider=provider,
        instance_type=f"{shape.instance_type}.m{serial:x}",
        region=region,
        spot=spot,
        gpu_model=shape.gpu_model,
        gpu_raw_name=shape.gpu_raw_name,
        gpu_count=shape.gpu_count,
        vram_gib_per_gpu=shape.vram_gib_per_gpu,
        vcpus=shape.vcpus,
        ram_gib=shape.ram_gib,
        disk_gib=shape.disk_gib,
        price_per_hour=None if spot else price,
        spot_price_per_hour=spot_price,
        interconnect=shape.interconnect,
        network=shape.network,
        network_gbps=shape.network_gbps,
        billing=shape.billing,
        availability=availability,
        availability_count=count,
    )


def generate_offers(
    n: int, *, seed: int = SEED, now: datetime = FIXED_NOW
) -> Iterator[SyntheticOffer]:
    """`n` offers over all (cloned) sample providers; the same seed gives the same offers."""
    stats = sample_stats()
    rng = random.Random(seed)
    clones = provider_clones(n)
    cum_weights: list[int] = []
    total = 0
    for p in stats.profiles:
        total += p.weight
        cum_weights.append(total)
    serials: dict[str, int] = defaultdict(int)
    window = timedelta(days=HISTORY_DAYS)
    for _ in range(n):
        profile = rng.choices(stats.profiles, cum_weights=cum_weights)[0]
        provider = clone_name(profile.provider, rng.randrange(clones))
        serials[provider] += 1
        record = _record(rng, stats, profile, provider, serials[provider])
        if rng.random() < WHOLE_WINDOW_FRACTION:
            first_seen = now - window
        else:
            first_seen = now - window * rng.random()
        active = rng.random() >= INACTIVE_FRACTION
        last_seen = now if active else first_seen + (now - first_seen) * rng.random()
        yield SyntheticOffer(
            record=record,
            first_seen=first_seen,
            last_seen=last_seen,
            active=active,
            volatile=rng.random() < VOLATILE_FRACTION,
        )


HistoryRow = tuple[datetime, float | None, float | None, str, int | None]


def history_points(offer: SyntheticOffer, rng: random.Random) -> list[HistoryRow]:
    """(observed_at, price, spot price, availability, count), oldest first; the last point
    carries the offer's current values."""
    r = offer.record
    current: HistoryRow = (
        offer.last_seen if offer.volatile else offer.first_seen,
        r.price_per_hour,
        r.spot_price_per_hour,
        r.availability.value,
        r.availability_count,
    )
    if not offer.volatile:
        return [current]
    lo, hi = HISTORY_STEP_HOURS
    times = [offer.first_seen]
    t = offer.first_seen + timedelta(hours=rng.uniform(lo, hi))
    while t < offer.last_seen:
        times.append(t)
        t += timedelta(hours=rng.uniform(lo, hi))
    points: list[HistoryRow] = []
    factor = rng.uniform(0.85, 1.15)
    for at in times[:-1]:
        price = None if r.price_per_hour is None else round(r.price_per_hour * factor, 4)
        spot = None if r.spot_price_per_hour is None else round(r.spot_price_per_hour * factor, 4)
        points.append((at, price, spot, r.availability.value, r.availability_count))
        factor = min(1.6, max(0.6, factor * rng.lognormvariate(0.0, 0.03)))
    points.append((times[-1], *current[1:]))
    return points


def generate_scrape(
    provider: str, n: int, *, template: str = "vastai", seed: int = SEED + 1
) -> list[OfferRecord]:
    """One provider's scrape of `n` offers, shaped like the `template` sample provider."""
    stats = sample_stats()
    rng = random.Random(seed)
    profile = stats.profile(template)
    return [_record(rng, stats, profile, provider, i + 1) for i in range(n)]


def reprice(
    records: Sequence[OfferRecord], fraction: float = 0.2, *, seed: int = SEED + 2
) -> tuple[list[OfferRecord], int]:
    """A re-scrape: the same offers with `fraction` of them at a new price (+-3..15 %)."""
    rng = random.Random(seed)
    out: list[OfferRecord] = []
    changed = 0
    for r in records:
        if rng.random() >= fraction:
            out.append(r)
            continue
        f = rng.choice((-1, 1)) * rng.uniform(0.03, 0.15) + 1
        update: dict[str, float | None] = {}
        if r.price_per_hour is not None:
            update["price_per_hour"] = round(r.price_per_hour * f, 4)
        if r.spot_price_per_hour is not None:
            update["spot_price_per_hour"] = max(0.0001, round(r.spot_price_per_hour * f, 4))
        out.append(r.model_copy(update=update))
        changed += 1
    return out, changed


# How often the synthetic providers were scraped: marketplaces hourly, list-price clouds every 6 h.
SCRAPE_EVERY_HOURS = {True: 1.0, False: 6.0}
GpuPriceRow = tuple[str, str, datetime, float, float, int]


def is_marketplace(provider: str) -> bool:
    return any(provider == m or provider.startswith(m + "-") for m in MARKETPLACES)


def gpu_price_points(
    pairs: dict[tuple[str, str], tuple[float, float, int]],
    *,
    seed: int = SEED + 3,
    now: datetime = FIXED_NOW,
) -> Iterator[GpuPriceRow]:
    """What ingest snapshots per scrape (gpu_price_points) for each (provider, GPU model) pair:
    (slug, provider, time, cheapest, dearest on-demand price per GPU-hour, offers) at every
    scrape over the history window, the prices walking around the pair's current range."""
    rng = random.Random(seed)
    window = timedelta(days=HISTORY_DAYS)
    for (provider, slug), (low, high, count) in sorted(pairs.items()):
        step = timedelta(hours=SCRAPE_EVERY_HOURS[is_marketplace(provider)])
        at, factor = now - window, 1.0
        while at <= now:
            yield (slug, provider, at, round(low * factor, 6), round(high * factor, 6), count)
            factor = min(1.3, max(0.75, factor * rng.lognormvariate(0.0, 0.02)))
            at += step
