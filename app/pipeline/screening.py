"""Screen parsed offers before ingest: a price no real offer has is a feed error, not a bargain.

Pure functions. Each skipped offer becomes one warning on the run; the rest of the scrape goes on.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.records import OfferRecord


def price_problem(record: OfferRecord, floor: float, ceiling: float) -> str | None:
    """Why the record's prices per GPU-hour fall outside [floor, ceiling], or None."""
    for label, price in (
        ("on-demand", record.price_per_hour),
        ("spot", record.spot_price_per_hour),
    ):
        if price is None:
            continue
        per_gpu = price / record.gpu_count
        if per_gpu < floor:
            return f"{label} price ${per_gpu:.3g}/GPU-hour is below the floor of ${floor:g}"
        if per_gpu > ceiling:
            return f"{label} price ${per_gpu:,.2f}/GPU-hour is above the ceiling of ${ceiling:g}"
    return None


def screen_prices(
    records: Iterable[OfferRecord], *, floor: float, ceiling: float
) -> tuple[list[OfferRecord], list[str]]:
    """The records priced within [floor, ceiling] per GPU-hour, and a warning per skipped one."""
    kept: list[OfferRecord] = []
    warnings: list[str] = []
    for record in records:
        problem = price_problem(record, floor, ceiling)
        if problem is None:
            kept.append(record)
        else:
            where = f"{record.instance_type[:80]} in {record.region[:40]}"
            warnings.append(f"skipped {where}: {problem}")
    return kept, warnings
