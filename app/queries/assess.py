"""Fit assessment for the table: an offer's facts, the VRAM prefilter, the spot advisor bands,
and a process-wide cache of assessments (pure functions of workload, machine facts and terms)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, or_
from sqlalchemy.orm import Session

from app.fit import (
    JobTerms,
    MemoryEstimate,
    OfferFacts,
    OfferFit,
    Workload,
    assess_offer,
    estimate_memory,
)
from app.fit.market import has_advisor_feed, known_profiles, max_plan_nodes
from app.fit.memory import per_gpu_breakdown
from app.fit.plans import listing_step
from app.queries.params import WORKLOAD_SORTS, Sort
from app.queries.rows import OfferRow, RankedOffer, fetch_rows, id_in, row_select
from app.store import data_cache
from app.store.models import Offer
from app.store.spot_advisor import advisor_rows

BandIndex = Mapping[tuple[str, str, str], str]  # (provider, region, instance type) -> band


def offer_facts(row: OfferRow, bands: BandIndex | None = None) -> OfferFacts:
    """The fit engine's view of one offer (with its advisor band when `bands` has one)."""
    band = (bands or {}).get((row.provider, row.region, row.instance_type))
    return OfferFacts(
        gpu_count=row.gpu_count,
        vram_gib_per_gpu=row.vram_gib_per_gpu,
        bf16_tflops=row.bf16_tflops,
        fp16_tflops=row.fp16_tflops,
        memory_type=row.memory_type,
        interconnect=row.interconnect,
        nvlink_gbps=row.nvlink_gbps,
        network=row.network,
        network_gbps=row.network_gbps,
        billing=row.billing,
        price_per_hour=row.price_per_hour,
        spot_price_per_hour=row.spot_price_per_hour,
        spot=row.spot,
        availability=row.availability,
        gpu_slug=row.gpu_model if row.gpu_model != "unknown" else None,
        provider=row.provider,
        spot_band=band,
        spot_where=f"{row.instance_type} in {row.region}" if band else None,
        listings_available=listing_step(row.availability_count, row.gpu_count),
    )


data_cache.share("listing_bands")


def listing_bands(session: Session) -> dict[tuple[str, str, str], str]:
    """Advisor bands of every provider whose spot risk reads a side feed (Linux rows), keyed
    like the SQL join of app.queries.shapes (cached until the data changes, and kept for the
    rest of the session: a ranked page asks several times within one request)."""
    held: dict[tuple[str, str, str], str] | None = session.info.get(_BANDS_KEY)
    if held is None:
        held = session.info[_BANDS_KEY] = _listing_bands(session)
    return held


_BANDS_KEY = "gpufit.listing_bands"


def hold_bands(session: Session, bands: dict[tuple[str, str, str], str]) -> None:
    """Keep `bands` (read under the current data version) as the session's listing_bands."""
    session.info.setdefault(_BANDS_KEY, bands)


def _listing_bands(session: Session) -> dict[tuple[str, str, str], str]:
    def load() -> dict[tuple[str, str, str], str]:
        out: dict[tuple[str, str, str], str] = {}
        for provider in known_profiles():
            if has_advisor_feed(provider):
                for row in advisor_rows(session, provider_id=provider):
                    out[(row.provider_id, row.region, row.instance_type)] = row.band_label
        return out

    return data_cache.cached(session, "listing_bands", None, load)


# Shared: a ranked page whose head was warmed (app.queries.ranking.ranked_head) still reads the
# bands for its rows' facts.
data_cache.share("listing_bands")


@dataclass(frozen=True)
class VramBounds:
    """Lower bounds any fitting offer meets: per-GPU VRAM, and total VRAM of whole-GPU offers."""

    per_gpu_gib: float
    total_gib: float


# The SQL prefilter must never drop an offer that fits; shave a little off for float noise.
_BOUND_SLACK = 0.999
_MANY_GPUS = 1024


def vram_bounds(workload: Workload, estimate: MemoryEstimate) -> VramBounds:
    """Sound lower bounds on what a fitting offer needs (see app.fit.plans' layouts).

    Per GPU: no layout needs less than ZeRO-3 over very many GPUs (only activations, logits and
    overheads stay) or the job alone on one GPU. In total: n GPUs each holding their share need
    at least what one GPU holding everything needs, since sharding only splits model states; a
    plan joins at most `max_plan_nodes` listings, so one listing holds at least that share.
    """
    arch = estimate.arch
    one = per_gpu_breakdown(workload, arch, 1, workload.sharding).total_gib
    spread = per_gpu_breakdown(workload, arch, _MANY_GPUS, "zero3").total_gib
    return VramBounds(
        per_gpu_gib=min(one, spread) * _BOUND_SLACK,
        total_gib=one / max_plan_nodes() * _BOUND_SLACK,
    )


def candidate_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """Offers whose VRAM could hold the job (the fit ranking's SQL prefilter)."""
    return and_(Offer.vram_gib_per_gpu >= bounds.per_gpu_gib, _total_vram_clause(bounds))


def _total_vram_clause(bounds: VramBounds) -> ColumnElement[bool]:
    # Fractional (shared) GPUs count as one whole GPU for memory, so the total bound skips them.
    return or_(Offer.gpu_count < 1, Offer.vram_gib_total >= bounds.total_gib)


def shape_member_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """`candidate_clause` for offers joined to candidate shapes by their exact VRAM per GPU.

    The shapes met the per-GPU bound already, so it is left out: beside the join's equality on
    that column, SQLite's planner would take the range instead and stop using the shape index
    after its fourth column.
    """
    return _total_vram_clause(bounds)


def rest_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """The complement of `candidate_clause`, NULL-safe (unknown VRAM never fits)."""
    return or_(
        Offer.vram_gib_per_gpu.is_(None),
        Offer.vram_gib_per_gpu < bounds.per_gpu_gib,
        and_(
            Offer.gpu_count >= 1,
            or_(Offer.vram_gib_total.is_(None), Offer.vram_gib_total < bounds.total_gib),
        ),
    )


class Assessor:
    """assess_offer with a cache: offers with identical facts (common in lists) share a result.

    The fit is a pure function of (workload, facts, terms), so results outlive the data
    version: after an ingest only shapes never seen before are assessed again.
    """

    def __init__(self, workload: Workload, terms: JobTerms | None = None) -> None:
        self.workload, self.terms = workload, terms or JobTerms()
        self.estimate = estimate_memory(workload)
        # Hashing a pydantic model costs ~100 us; its JSON, hashed once per string, ~nothing.
        # Cached aggregates of the job (its classes, a page's head) key by it too.
        self.workload_key = workload.model_dump_json()
        self._fits = _job_fits((self.workload_key, self.terms))

    def __call__(self, facts: OfferFacts) -> OfferFit:
        # One plain dict per job, looked up without a lock (a race assesses twice, equally):
        # the first ranked page after an ingest looks up thousands of shapes, and the shapes'
        # facts are interned (app.queries.shapes), so a hit compares by identity.
        fit = self._fits.get(facts)
        if fit is None:
            fit = assess_offer(self.workload, self.estimate, facts, self.terms)
            if len(self._fits) >= _FITS_PER_JOB:
                self._fits.clear()  # a runaway job (every offer its own shape) starts over
            self._fits[facts] = fit
        return fit


# Recent jobs (workload and terms) kept, each with up to this many assessed facts: a few
# thousand shapes per job at 100k offers.
_JOBS_KEPT = 256
_FITS_PER_JOB = 50_000
_FIT_CACHE: OrderedDict[tuple[str, JobTerms], dict[OfferFacts, OfferFit]] = OrderedDict()
_FIT_LOCK = threading.Lock()


def _job_fits(job: tuple[str, JobTerms]) -> dict[OfferFacts, OfferFit]:
    with _FIT_LOCK:
        fits = _FIT_CACHE.get(job)
        if fits is None:
            fits = _FIT_CACHE[job] = {}
            while len(_FIT_CACHE) > _JOBS_KEPT:
                _FIT_CACHE.popitem(last=False)
        else:
            _FIT_CACHE.move_to_end(job)
        return fits


def forget_fit_assessments() -> None:
    """Empty the process-wide fit cache (tests)."""
    with _FIT_LOCK:
        _FIT_CACHE.clear()


def assess_row(
    session: Session, row: OfferRow, workload: Workload, terms: JobTerms | None = None
) -> OfferFit:
    """The fit of `workload` on one offer (offer and detail pages), as the table ranks it."""
    return Assessor(workload, terms)(offer_facts(row, listing_bands(session)))


def full_rows(session: Session, ids: Sequence[int], assess: Assessor) -> list[RankedOffer]:
    """Full rows with their full assessment, in the order of `ids`."""
    if not ids:
        return []
    by_id = {row.id: row for row in fetch_rows(session, row_select().where(id_in(session, ids)))}
    bands = listing_bands(session)
    return [RankedOffer(by_id[i], assess(offer_facts(by_id[i], bands))) for i in ids]


@dataclass(frozen=True)
class RankedHead:
    """The page's share of the prefiltered offers: fitting ones (ranked), then near misses."""

    ids: list[int]  # in page order
    n_fit: int  # fitting offers in all (tight ones included), within the deadline and budget
    n_missed: int  # prefiltered offers no layout fits (near misses) in all
    n_tight: int  # of n_fit, those under the headroom margin
    n_candidates: int  # prefiltered offers (enough VRAM by the bound): the rest is the others


def rest_sort(sort: Sort) -> Sort:
    """How offers that do not fit are ordered: fit and cost mean nothing for them."""
    return "price_per_gpu" if sort in WORKLOAD_SORTS else sort
