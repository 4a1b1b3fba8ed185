"""`gpufit estimate`: print a job's memory breakdown as a table, or JSON with --json."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import ValidationError

from app.fit.estimate import estimate_memory
from app.fit.serialize import estimate_dict
from app.fit.workload import Workload


def _table(data: dict[str, object]) -> str:
    bd = data["breakdown"]
    assert isinstance(bd, dict)
    lines = [f"{data['model_name']} ({data['params_b']}B)", f"{'component':26} {'GiB':>7}"]
    labels = {"overhead_gib": "overhead (buffer+frag+ctx)"}
    lines += [f"{labels.get(k, k.removesuffix('_gib')):26} {v:7.2f}" for k, v in bd.items()]
    lines.append(f"{'per GPU total':26} {data['per_gpu_gib']:7.2f}")
    fits = data["fits_gpu_gib"]
    lines.append(f"fits card: {f'{fits} GB' if fits else 'none (too large)'}")
    lines.append(
        f"smallest layout: {data['gpus_needed']} GPU(s), {data['topology']}"
        f" ({data['layout_sharding']})"
    )
    lines += [f"note: {n}" for n in data["notes"]]  # type: ignore[attr-defined]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add the `estimate` command to the main CLI."""

    @app.command("estimate")
    def estimate_cmd(
        model: Annotated[str | None, typer.Option(help="Preset id, e.g. llama-3.1-8b.")] = None,
        params_b: Annotated[float | None, typer.Option(help="Model size in billions.")] = None,
        method: Annotated[str, typer.Option(help="pretrain|full|lora|qlora")] = "lora",
        precision: Annotated[str, typer.Option(help="bf16|fp16|fp32")] = "bf16",
        optimizer: Annotated[str, typer.Option(help="adamw|adamw8bit|sgd")] = "adamw",
        batch_size: Annotated[int, typer.Option(help="Micro-batch size per GPU.")] = 1,
        seq_len: Annotated[int, typer.Option(help="Sequence length.")] = 2048,
        grad_checkpointing: Annotated[bool, typer.Option(help="Activation checkpointing.")] = True,
        lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
        sharding: Annotated[str, typer.Option(help="none|zero1|zero2|zero3")] = "none",
        gpus: Annotated[int, typer.Option(help="GPU count.")] = 1,
        tokens: Annotated[float | None, typer.Option(help="Tokens to train on.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Estimate per-GPU memory of a training or fine-tuning job."""
        params = {
            "model": model,
            "params_b": params_b,
            "method": method,
            "precision": precision,
            "optimizer": optimizer,
            "batch_size": batch_size,
            "seq_len": seq_len,
            "grad_checkpointing": grad_checkpointing,
            "lora_rank": lora_rank,
            "sharding": sharding,
            "gpus": gpus,
            "tokens": tokens,
        }
        try:
            workload = Workload(**{k: v for k, v in params.items() if v is not None})
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                field = ".".join(str(p) for p in err["loc"]) or str(
                    (err.get("ctx") or {}).get("field", "model")
                )
                typer.echo(f"error: --{field.replace('_', '-')}: {err['msg']}", err=True)
            raise typer.Exit(2) from exc
        data = estimate_dict(estimate_memory(workload))
        typer.echo(json.dumps(data, indent=2) if as_json else _table(data))
