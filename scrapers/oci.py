"""Oracle Cloud: GPU shapes (cost-estimator shapes.json) priced from the public price list.

GPU shapes are priced per GPU-hour x `gpuQty` (the shape's product part number carries the
per-GPU price). OCI list prices are the same in every commercial region, so records use region
"global". Preemptible capacity is 50% of on-demand (OCI preemptible pricing) where a shape
allows it. The feed has no availability.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx
from pydantic import ConfigDict, Field, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import FeedModel, HttpScraper, build_record, dedupe, get_text, load_json

REGION = "global"
PREEMPTIBLE_DISCOUNT = 0.5
MAX_PAGES = 50


class _Value(FeedModel):
    value: str = ""


class _ShapeProduct(FeedModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: _Value = _Value()
    part_number: str = Field(alias="partNumber")
    qty: float = 0


class _Shape(FeedModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    hidden: bool = False
    status: str = "ACTIVE"
    bundle_memory_qty: float | None = Field(default=None, alias="bundleMemoryQty")
    gpu_qty: int | None = Field(default=None, alias="gpuQty")
    gpu_memory_qty: float | None = Field(default=None, alias="gpuMemoryQty")
    sub_type: _Value = Field(default=_Value(), alias="subType")
    allow_preemptible: bool = Field(default=False, alias="allowPreemptible")
    products: list[_ShapeProduct] = []


def _usd_payg(product: dict[str, Any]) -> float | None:
    for loc in product.get("currencyCodeLocalizations") or []:
        if isinstance(loc, dict) and loc.get("currencyCode") == "USD":
            for price in loc.get("prices") or []:
                if isinstance(price, dict) and price.get("model") == "PAY_AS_YOU_GO":
                    value = price.get("value")
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        return float(value)
    return None


def _next_link(data: dict[str, Any]) -> str | None:
    if not data.get("hasMore"):
        return None
    for link in data.get("links") or []:
        if isinstance(link, dict) and link.get("rel") == "next":
            href = link.get("href")
            return href if isinstance(href, str) else None
    return None


class OciScraper(HttpScraper):
    """OCI GPU shapes (no auth, no availability)."""

    name: ClassVar[str] = "oci"
    display_name: ClassVar[str] = "Oracle Cloud"
    kind: ClassVar[str] = "list"
    default_url: ClassVar[str] = (
        "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD"
    )
    extra_default_urls: ClassVar[dict[str, str]] = {
        "shapes": "https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json"
    }

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """The shapes file, then every page of the price list (hasMore / links rel=next)."""
        shapes_url = self.url("shapes")
        pages = [RawPage(url=shapes_url, body=await get_text(client, shapes_url))]
        host = urlsplit(self.base_url).netloc
        url: str | None = self.base_url
        count = 0
        while url and count < MAX_PAGES:
            body = await get_text(client, url, max_bytes=self.max_bytes)
            pages.append(RawPage(url=url, body=body))
            count += 1
            data = load_json(body, url)
            link = _next_link(data) if isinstance(data, dict) and data.get("items") else None
            url = link if link and urlsplit(link).netloc == host else None
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """Join shapes with product prices by part number."""
        result = ParseResult()
        shapes: list[Any] = []
        prices: dict[str, tuple[float, str]] = {}
        for page in pages:
            data = load_json(page.body, page.url)
            items = data.get("items") if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise FeedFormatError(f"{page.url}: expected an object with an items list")
            for item in items:
                if not isinstance(item, dict):
                    continue
                if "currencyCodeLocalizations" in item:
                    price = _usd_payg(item)
                    part = item.get("partNumber")
                    if isinstance(part, str) and price is not None:
                        prices[part] = (price, str(item.get("displayName") or ""))
                elif "products" in item:
                    shapes.append(item)
        if not prices or not shapes:
            raise FeedFormatError("need both the shapes file and the price list")
        records = []
        for raw in shapes:
            try:
                shape = _Shape.model_validate(raw)
            except ValidationError as exc:
                result.warnings.append(f"skipped shape: {exc.errors()[0]['msg']}")
                continue
            if shape.sub_type.value != "gpu" or shape.hidden or shape.status != "ACTIVE":
                continue
            record = self._record(shape, prices, result.warnings)
            if record:
                records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    def _record(
        self, shape: _Shape, prices: dict[str, tuple[float, str]], warnings: list[str]
    ) -> OfferRecord | None:
        priced = [(p, prices[p.part_number]) for p in shape.products if p.part_number in prices]
        if len(priced) != 1 or not shape.gpu_qty:
            warnings.append(f"skipped {shape.name}: no single priced product or no GPU count")
            return None
        product, (per_gpu, display) = priced[0]
        raw_gpu = display.removeprefix("Compute - GPU - ").strip() or shape.name
        vram = shape.gpu_memory_qty / shape.gpu_qty if shape.gpu_memory_qty else None
        price = round(per_gpu * shape.gpu_qty, 6)
        return build_record(
            warnings,
            shape.name,
            provider=self.name,
            instance_type=shape.name,
            region=REGION,
            gpu_model=normalize_gpu_name(raw_gpu, memory_gib=vram, context=shape.name),
            gpu_raw_name=raw_gpu,
            gpu_count=shape.gpu_qty,
            vram_gib_per_gpu=vram,
            vcpus=product.qty * 2 if product.type.value == "ocpu" else None,  # 1 OCPU = 2 vCPU
            ram_gib=shape.bundle_memory_qty,
            price_per_hour=price,
            spot_price_per_hour=(
                round(price * PREEMPTIBLE_DISCOUNT, 6) if shape.allow_preemptible else None
            ),
        )
