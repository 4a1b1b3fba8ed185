"""Parse the workload query parameters shared by /api/estimate and the offers endpoint.

`WorkloadQuery` is an optional dependency (None when neither `model` nor `params_b` is given);
`RequiredWorkloadQuery` insists on one. Validation errors, including cross-field ones, come back
as FastAPI 422s whose `loc` is ["query", "<field>"].
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.fit.stacks import StackId
from app.fit.workload import LoraTargets, Method, Optimizer, Precision, Sharding, Workload


def _echo(value: Any) -> str | int | bool | None:
    # Echo the offending input as text: nan/inf floats are not valid JSON.
    if value is None or isinstance(value, bool | int):
        return value
    return str(value)[:100]


def _query_errors(exc: ValidationError) -> list[dict[str, Any]]:
    errors = []
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        ctx = err.get("ctx") or {}
        field = str(loc[0]) if loc else str(ctx.get("field", "model"))
        errors.append(
            {
                "type": err["type"],
                "loc": ("query", field),
                "msg": err["msg"],
                "input": _echo(err.get("input")) if loc else None,
            }
        )
    return errors


def workload_from_query(**params: Any) -> Workload:
    """Build a Workload from query values (None = default); raise RequestValidationError."""
    try:
        return Workload(**{k: v for k, v in params.items() if v is not None})
    except ValidationError as exc:
        raise RequestValidationError(_query_errors(exc)) from exc


def check_workload_fields(**params: Any) -> None:
    """Raise RequestValidationError for any given value out of its field's bounds (the rules
    that tie fields together, such as model-or-params_b, are not checked here)."""
    values = {k: v for k, v in params.items() if v is not None}
    try:
        Workload(params_b=1.0, **values)
    except ValidationError as exc:
        field_errors = [e for e in _query_errors(exc) if e["loc"][1] in values]
        if field_errors:
            raise RequestValidationError(field_errors) from exc


def workload_query(
    model: Annotated[str | None, Query(description="preset model id, e.g. llama-3.1-8b")] = None,
    params_b: Annotated[float | None, Query(description="model size in billions")] = None,
    method: Method = "lora",
    stack: Annotated[
        StackId, Query(description="training stack: hf, hf-liger, torchtune, litgpt, ...")
    ] = "hf",
    precision: Precision = "bf16",
    pure_16bit: Annotated[
        bool | None, Query(description="bf16 weights and optimizer states (default: stack's)")
    ] = None,
    optimizer: Optimizer = "adamw",
    batch_size: int = 1,
    grad_accum: Annotated[int, Query(description="micro-batches per optimizer step")] = 1,
    seq_len: int = 2048,
    packed: Annotated[
        bool | None, Query(description="packed/fixed-length batches (default: pretrain only)")
    ] = None,
    grad_checkpointing: bool = True,
    lora_rank: int = 16,
    lora_targets: LoraTargets = "all",
    sharding: Sharding = "none",
    gpus: int = 1,
    tokens: Annotated[float | None, Query(description="tokens to train on")] = None,
    dataset_tokens: Annotated[
        float | None, Query(description="tokens in the dataset (with epochs, instead of tokens)")
    ] = None,
    epochs: Annotated[
        float | None,
        Query(description="passes over dataset_tokens (dataset_tokens × epochs at least 1)"),
    ] = None,
    layers: Annotated[int | None, Query(description="decoder layers (params_b models)")] = None,
    hidden: Annotated[int | None, Query(description="hidden size (params_b models)")] = None,
    heads: Annotated[int | None, Query(description="attention heads (params_b models)")] = None,
    kv_heads: Annotated[int | None, Query(description="KV heads (params_b models)")] = None,
    vocab: Annotated[int | None, Query(description="vocabulary size (params_b models)")] = None,
    intermediate: Annotated[int | None, Query(description="MLP width (params_b models)")] = None,
) -> Workload | None:
    """Optional workload: None when neither model nor params_b is present."""
    fields: dict[str, Any] = {
        "method": method,
        "stack": stack,
        "precision": precision,
        "pure_16bit": pure_16bit,
        "optimizer": optimizer,
        "batch_size": batch_size,
        "grad_accum": grad_accum,
        "seq_len": seq_len,
        "packed": packed,
        "grad_checkpointing": grad_checkpointing,
        "lora_rank": lora_rank,
        "lora_targets": lora_targets,
        "sharding": sharding,
        "gpus": gpus,
        "tokens": tokens,
        "dataset_tokens": dataset_tokens,
        "epochs": epochs,
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "vocab": vocab,
        "intermediate": intermediate,
    }
    if (model is None or not model.strip()) and params_b is None:
        # No job to size, but a value out of range is still a 422 naming it, as with a job.
        check_workload_fields(**fields)
        return None
    return workload_from_query(model=model, params_b=params_b, **fields)


def required_workload(workload: Annotated[Workload | None, Depends(workload_query)]) -> Workload:
    """The workload, or a 422 on `model` when neither model nor params_b is given."""
    if workload is None:
        raise RequestValidationError(
            [
                {
                    "type": "model_required",
                    "loc": ("query", "model"),
                    "input": None,
                    "msg": "give a preset model id (model) or a size in billions (params_b)",
                }
            ]
        )
    return workload


WorkloadQuery = Annotated[Workload | None, Depends(workload_query)]
RequiredWorkloadQuery = Annotated[Workload, Depends(required_workload)]
