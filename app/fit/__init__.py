"""Job-fit engine: memory, topology, time and cost of a training job on a GPU offer."""

from app.fit.estimate import MemoryEstimate, estimate_memory
from app.fit.memory import MemoryBreakdown
from app.fit.offer_facts import OfferFacts, OfferFit
from app.fit.offers import assess_offer
from app.fit.plans import JobTerms
from app.fit.presets import ModelArch, preset_ids
from app.fit.ranking import rank_key
from app.fit.workload import Workload, resolve_model

__all__ = [
    "MemoryBreakdown",
    "MemoryEstimate",
    "ModelArch",
    "OfferFacts",
    "OfferFit",
    "JobTerms",
    "Workload",
    "assess_offer",
    "estimate_memory",
    "preset_ids",
    "rank_key",
    "resolve_model",
]
