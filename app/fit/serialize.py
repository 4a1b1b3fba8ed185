"""JSON-ready dicts of estimates and offer fits (shared by the API and the CLI)."""

from __future__ import annotations

from typing import Any

from app.fit.estimate import MemoryEstimate, TimeAnswer
from app.fit.hardware import link_text
from app.fit.offer_facts import OfferFit
from app.fit.presets import get_preset, preset_ids
from app.fit.stacks import all_stacks


def time_dict(answer: TimeAnswer) -> dict[str, Any]:
    """The `time` object of /api/estimate: speed, MFU, hours and what they assumed."""
    links = answer.links
    out: dict[str, Any] = {
        "gpu": answer.gpu_slug,
        "gpu_name": answer.gpu.name,
        "gpus": links.gpus,
        "gpus_per_node": links.gpus_per_node,
        "nodes": links.nodes,
        "interconnect": links.interconnect,
        "network": links.network,
        "network_gbps": links.network_gbps,
        "links": link_text(links),
        "sharding": answer.sharding,
        "matmul_efficiency": answer.gpu.matmul_efficiency,
        "attention_efficiency": answer.gpu.attention_efficiency,
        "efficiency_source": answer.gpu.source,
        "note": answer.refusal,
    }
    if answer.time is not None:
        out.update(answer.time.as_dict())
    else:
        out.update(tokens_per_s_per_gpu=None, mfu=None, hours=None, comm_share=None)
    return out


def estimate_dict(est: MemoryEstimate, time: TimeAnswer | None = None) -> dict[str, Any]:
    """The /api/estimate response body (with `time` when a GPU was named)."""
    a = est.arch
    body: dict[str, Any] = {
        "model": est.model_id,
        "model_name": est.model_name,
        "stack": est.stack.id,
        "stack_name": est.stack.name,
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
        "assumptions": list(est.assumptions),
    }
    if time is not None:
        body["time"] = time_dict(time)
    return body


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
        "tokens_per_s_per_gpu": _round(fit.tokens_per_s_per_gpu, 1),
        "mfu": _round(fit.mfu, 4),
        "comm_share": _round(fit.comm_share, 4),
        "tight": fit.tight,
        "nodes": fit.nodes,
        "plan_gpu_count": fit.plan_gpu_count,
        "plan": fit.plan,
        "market_used": fit.market_used,
        "price_used_per_hour": fit.price_used_per_hour,
        "plan_price_per_hour": (
            None if fit.price_used_per_hour is None else fit.price_used_per_hour * fit.nodes
        ),
        "run_hours": fit.run_hours,
        "setup_hours": fit.setup_hours,
        "checkpoint_hours": fit.checkpoint_hours,
        "spot_overhead_hours": fit.spot_overhead_hours,
        "spot_rate_per_hour": fit.spot_rate_per_hour,
        "spot_risk_source": fit.spot_risk_source,
        "alternative": fit.alternative,
        "checkpoints": fit.checkpoint_note or None,
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def stacks_list() -> list[dict[str, Any]]:
    """Every training stack with what it changes and its sources."""
    return [
        {
            "id": s.id,
            "name": s.name,
            "loss": s.loss,
            "logits_bytes": s.logits_bytes,
            "pure_16bit": s.pure_16bit,
            "adapter_bytes": s.adapter_bytes,
            "checkpointing": s.checkpointing,
            "qlora": s.qlora.implementation,
            "fused_kernels": s.fused_kernels,
            "sources": s.sources,
        }
        for s in all_stacks()
    ]


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
