"""Oracle Cloud: GPU shapes (cost-estimator shapes.json) priced from the public price list.

GPU shapes are priced per GPU-hour x `gpuQty` (the shape's product part number carries the
per-GPU price). OCI list prices are the same in every commercial region, so records use region
"global". Preemptible capacity is 50% of on-demand (OCI preemptible pricing) where a shape
allows it. The feed has no availability.

The GPU comes from the shape name (OCI shape docs), not the price list's product name: real
product names are hardware generations ("Compute - GPU - E3", "Compute - GPU Standard - V2")
or carry formatting quirks ("OCI- Compute - GPU - MI355X"). Shapes may list a null OCPU
quantity (B300, RTX PRO 6000), a per-GPU instead of a total GPU memory (MI355X), or a display
suffix on the name ("BM.GPU.GB200.4 (NVL72)"); all three are tolerated.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx
from pydantic import ConfigDict, Field

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    HttpScraper,
    build_record,
    dedupe,
    get_text,
    load_json,
    validated,
)

REGION = "global"
PREEMPTIBLE_DISCOUNT = 0.5
MAX_PAGES = 50

# Shape name -> (raw GPU name with form factor, GPU memory GiB per GPU or None to trust the
# shape), from the OCI Compute GPU shape docs.
SHAPE_GPUS: tuple[tuple[re.Pattern[str], str, float | None], ...] = tuple(
    (re.compile(pattern), raw, memory)
    for pattern, raw, memory in (
        (r"^BM\.GPU\.H100\.8$", "H100 SXM5 80GB", 80),
        (r"^BM\.GPU\.H200\.8$", "H200 SXM 141GB", 141),
        (r"^BM\.GPU\.B200\.8$", "B200 SXM", 180),
        (r"^BM\.GPU\.B300\.8$", "B300 SXM", None),
        (r"^BM\.GPU\.GB200\.4$", "GB200", None),
        (r"^BM\.GPU\.GB300\.4$", "GB300", None),
        (r"^BM\.GPU\.A100-v2\.8$", "A100 80GB SXM4", 80),
        (r"^BM\.GPU4\.8$", "A100 40GB SXM4", 40),
        (r"^(BM|VM)\.GPU3\.\d+$", "Tesla V100 SXM2 16GB", 16),
        (r"^(BM|VM)\.GPU2\.\d+$", "Tesla P100 16GB", 16),
        (r"^(BM|VM)\.GPU\.A10\.\d+$", "A10", 24),
        (r"^BM\.GPU\.L40S(-NC)?\.4$", "L40S", 48),
        (r"^BM\.GPU\.MI300X\.8$", "MI300X", 192),
        (r"^BM\.GPU\.MI355X\.8$", "MI355X", 288),
        (r"^BM\.GPU\.RTXPRO\.8$", "RTX PRO 6000 Blackwell Server", 96),
    )
)
_DISPLAY_PREFIX = re.compile(r"^(?:OCI\s*-\s*)?Compute\s*-\s*GPU\s*-\s*", re.I)
_NAME_SUFFIX = re.compile(r"\s*\([^)]*\)\s*$")  # "BM.GPU.GB200.4 (NVL72)"


def shape_gpu(shape: str) -> tuple[str, float | None] | None:
    """The GPU of an OCI shape (raw name with form factor, per-GPU GiB), or None."""
    for pattern, raw, memory in SHAPE_GPUS:
        if pattern.match(shape):
            return raw, memory
    return None


def clean_shape_name(name: str) -> str:
    """A shape name without display suffixes ("BM.GPU.GB200.4 (NVL72)" -> "BM.GPU.GB200.4")."""
    return _NAME_SUFFIX.sub("", name).strip()


class _Value(FeedModel):
    value: str = ""


class _ShapeProduct(FeedModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: _Value = _Value()
    part_number: str = Field(alias="partNumber")
    qty: float | None = None  # null for some GPU shapes (B300, RTX PRO 6000)


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
        for shape in validated(_Shape, shapes, "shape", result.warnings):
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
        name = clean_shape_name(shape.name)
        known = shape_gpu(name)
        raw_gpu = known[0] if known else _DISPLAY_PREFIX.sub("", display).strip() or name
        vram = _per_gpu_memory(shape, known[1] if known else None)
        price = round(per_gpu * shape.gpu_qty, 6)
        ocpus = product.qty if product.type.value == "ocpu" else None
        return build_record(
            warnings,
            name,
            provider=self.name,
            instance_type=name,
            region=REGION,
            gpu_model=normalize_gpu_name(raw_gpu, memory_gib=vram, context=name),
            gpu_raw_name=raw_gpu,
            gpu_count=shape.gpu_qty,
            vram_gib_per_gpu=vram,
            vcpus=ocpus * 2 if ocpus else None,  # 1 OCPU = 2 vCPU
            ram_gib=shape.bundle_memory_qty,
            price_per_hour=price,
            spot_price_per_hour=(
                round(price * PREEMPTIBLE_DISCOUNT, 6) if shape.allow_preemptible else None
            ),
        )


def _per_gpu_memory(shape: _Shape, documented: float | None) -> float | None:
    """Per-GPU GiB: the shape's total / count, unless that contradicts the documented size.

    Some shapes list the per-GPU memory in gpuMemoryQty (MI355X: 288 for 8 GPUs), which read as
    a total would give 36 GiB per GPU.
    """
    if not shape.gpu_memory_qty or not shape.gpu_qty:
        return documented
    from_total = shape.gpu_memory_qty / shape.gpu_qty
    if documented is None:
        return from_total
    if abs(from_total - documented) <= 0.1 * documented:
        return from_total
    return documented
