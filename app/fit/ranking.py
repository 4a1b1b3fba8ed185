"""rank_key: plans that fit with margin first, then tight ones, then the rest; cheapest expected
job first, then fewer listings, interconnect, billing, stock, headroom and time."""

from __future__ import annotations

import math

from app.fit.offer_facts import OfferFit


def rank_key(fit: OfferFit) -> tuple[float, ...]:
    """Sort key (ascending = better) for OfferFit values."""
    cost = fit.est_total_cost if fit.est_total_cost is not None else math.inf
    hours = fit.est_hours if fit.est_hours is not None else math.inf
    return (float(fit.fit_class), cost, *fit.tiebreak, hours)
