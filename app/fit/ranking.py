"""rank_key: fitting offers first, cheapest first, then interconnect, billing, stock, spot risk."""

from __future__ import annotations

import math

from app.fit.offer_facts import OfferFit


def rank_key(fit: OfferFit) -> tuple[float, ...]:
    """Sort key (ascending = better) for OfferFit values."""
    cost = fit.est_total_cost if fit.est_total_cost is not None else math.inf
    hours = fit.est_hours if fit.est_hours is not None else math.inf
    return (0.0 if fit.fits else 1.0, cost, *fit.tiebreak, hours)
