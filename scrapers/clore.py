"""Clore.ai: the public GPU server marketplace (no key).

`/v1/marketplace` lists servers with their GPUs (`gpu_array`), specs (country in
`specs.net.cc`), an on-demand price in USD (`price.usd.on_demand_usd`, whole server per hour)
and whether they are rented. Each server is one offer; a rented server is OUT, a free one
IN_STOCK with its free GPU count (`partial_gpu_rental.available_gpus` when given).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, ClassVar

import httpx
from pydantic import ConfigDict

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    HttpScraper,
    build_record,
    dedupe,
    get_text,
    load_json,
    to_float,
    validated,
)


class _Server(FeedModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    rented: bool = False
    gpu_array: list[str] = []
    specs: dict[str, Any] = {}
    price: dict[str, Any] = {}
    partial_gpu_rental: dict[str, Any] | None = None


def _country(specs: dict[str, Any]) -> str:
    net = specs.get("net")
    cc = net.get("cc") if isinstance(net, dict) else None
    return str(cc).strip()[:40] if cc else "unknown"


class CloreScraper(HttpScraper):
    """Clore.ai marketplace servers (public, no key)."""

    name: ClassVar[str] = "clore"
    display_name: ClassVar[str] = "Clore.ai"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://api.clore.ai/v1/marketplace"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GET: every listed server."""
        body = await get_text(client, self.base_url, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """servers[] -> one record per priced server with GPUs."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            servers = data.get("servers") if isinstance(data, dict) else None
            if not isinstance(servers, list):
                raise FeedFormatError(f"{page.url}: expected a servers list")
            for server in validated(_Server, servers, "server", result.warnings):
                record = self._record(server, result.warnings)
                if record:
                    records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    def _record(self, server: _Server, warnings: list[str]) -> OfferRecord | None:
        names = [n.strip() for n in server.gpu_array if n and n.strip()]
        usd = server.price.get("usd") if isinstance(server.price, dict) else None
        price = to_float(usd.get("on_demand_usd")) if isinstance(usd, dict) else None
        if not names or not price:
            return None
        raw, _ = Counter(names).most_common(1)[0]
        count = len(names)
        memory = re.search(r"(\d+)\s*GB", raw, re.I)
        vram = float(memory.group(1)) if memory else None
        free = count
        if server.partial_gpu_rental and "available_gpus" in server.partial_gpu_rental:
            free = int(to_float(server.partial_gpu_rental["available_gpus"]) or 0)
        return build_record(
            warnings,
            f"server {server.id}",
            provider=self.name,
            instance_type=f"clore-{server.id}",
            region=_country(server.specs),
            gpu_model=normalize_gpu_name(raw, memory_gib=vram, context=raw),
            gpu_raw_name=raw,
            gpu_count=count,
            vram_gib_per_gpu=vram,
            price_per_hour=price,
            availability=Availability.OUT if server.rented else Availability.IN_STOCK,
            availability_count=0 if server.rented else free,
        )
