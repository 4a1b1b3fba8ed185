"""JSON-ready dicts of estimates and offer fits (shared by the API and the CLI)."""

from __future__ import annotations

from typing import Any

from app.fit.estimate import MemoryEstimate
from app.fit.offer_facts import OfferFit
from app.fit.presets import get_preset, preset_ids


def estimate_dict(est: MemoryEstimate) -> dict[str, Any]:
    """The /api/estimate response body."""
    a = est.arch
    return {
        "model": est.model_id,
        "model_name": est.model_name,
        "params_b": round(est.params_b, 3),
        "per_gpu_gib": round(est.per_gpu_gib, 2),
        "breakdown": est.breakdown.as_dict(),
        "fits_gpu_gib": est.fits_gpu_gib,
        "topology": est.topology,
        "gpus_needed": est.gpus_needed,
        "layout_sharding": est.layout_sharding,
        "layout_per_gpu_gib": (
            round(est.layout_per_gpu_gib, 2) if est.layout_per_gpu_gib is not None else None
        ),
        "train_tokens": est.train_tokens,
        "architecture": {
            "layers": a.layers,
            "hidden": a.hidden,
            "heads": a.heads,
            "kv_heads": a.kv_heads,
            "vocab": a.vocab,
            "intermediate": a.intermediate,
        },
        "notes": list(est.notes),
    }


def fit_dict(fit: OfferFit) -> dict[str, Any]:
    """An OfferFit for JSON (tiebreak is internal)."""
    return {
        "fits": fit.fits,
        "per_gpu_gib_needed": round(fit.per_gpu_gib_needed, 2),
        "headroom_pct": None if fit.headroom_pct is None else round(fit.headroom_pct, 1),
        "est_hours": fit.est_hours,
        "billed_hours": fit.billed_hours,
        "est_total_cost": fit.est_total_cost,
        "cost_per_m_tokens": fit.cost_per_m_tokens,
        "score": fit.score,
        "factors": fit.factors,
        "explanation": fit.explanation,
        "reason": fit.reason,
        "sharding_used": fit.sharding_used,
    }


def presets_list() -> list[dict[str, Any]]:
    """Every preset with its size and shape."""
    out = []
    for pid in preset_ids():
        a = get_preset(pid)
        out.append(
            {
                "id": pid,
                "name": a.name,
                "params_b": round(a.params_b, 3),
                "layers": a.layers,
                "hidden": a.hidden,
                "heads": a.heads,
                "kv_heads": a.kv_heads,
                "vocab": a.vocab,
                "intermediate": a.intermediate,
                "experts": a.experts,
            }
        )
    return out
