"""`gpufit estimate`: print a job's memory breakdown (and, with --gpu, its speed) as a table, or
JSON with --json (the same body as /api/estimate)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from app.fit.estimate import estimate_memory, estimate_time
from app.fit.serialize import estimate_dict
from app.fit.workload import Workload

INTERCONNECTS = ("nvswitch", "nvlink", "pcie", "unknown")
NETWORKS = ("infiniband", "roce", "efa", "ethernet", "none", "unknown")


def _table(data: dict[str, Any]) -> str:
    bd = data["breakdown"]
    lines = [
        f"{data['model_name']} ({data['params_b']}B), stack {data['stack']}",
        f"{'component':26} {'GiB':>7}",
    ]
    labels = {
        "overhead_gib": "overhead (buffer+frag+ctx)",
        "peak_overlap_gib": "not alive at the peak (-)",
    }
    for key, value in bd.items():
        shown = -value if key == "peak_overlap_gib" else value
        lines.append(f"{labels.get(key, key.removesuffix('_gib')):26} {shown:7.2f}")
    lines.append(f"{'per GPU total':26} {data['per_gpu_gib']:7.2f}")
    fits = data["fits_gpu_gib"]
    lines.append(f"fits card: {f'{fits} GB' if fits else 'none (too large)'}")
    lines.append(
        f"smallest layout: {data['gpus_needed']} GPU(s), {data['topology']}"
        f" ({data['layout_sharding']})"
    )
    time = data.get("time")
    if time:
        if time["hours"] is None:
            lines.append(f"time on {time['gpu_name']}: {time['note']}")
        else:
            lines.append(
                f"time on {time['links']} ({time['gpu_name']}): {time['hours']:.2f} h, "
                f"{time['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, MFU {time['mfu']:.0%}, "
                f"communication {time['comm_share']:.0%} of step time"
            )
    lines += [f"note: {n}" for n in data["notes"]]
    lines += [f"assumed: {a}" for a in data["assumptions"]]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add the `estimate` command to the main CLI."""

    @app.command("estimate")
    def estimate_cmd(
        model: Annotated[str | None, typer.Option(help="Preset id, e.g. llama-3.1-8b.")] = None,
        params_b: Annotated[float | None, typer.Option(help="Model size in billions.")] = None,
        method: Annotated[str, typer.Option(help="pretrain|full|lora|qlora")] = "lora",
        stack: Annotated[
            str, typer.Option(help="hf|hf-liger|torchtune|litgpt|unsloth|torchtitan")
        ] = "hf",
        precision: Annotated[str, typer.Option(help="bf16|fp16|fp32")] = "bf16",
        pure_16bit: Annotated[
            bool | None,
            typer.Option("--pure-16bit/--mixed-precision", help="Default: the stack's policy."),
        ] = None,
        optimizer: Annotated[str, typer.Option(help="adamw|adamw8bit|sgd")] = "adamw",
        batch_size: Annotated[int, typer.Option(help="Micro-batch size per GPU.")] = 1,
        grad_accum: Annotated[int, typer.Option(help="Micro-batches per optimizer step.")] = 1,
        seq_len: Annotated[int, typer.Option(help="Sequence length.")] = 2048,
        packed: Annotated[
            bool | None,
            typer.Option("--packed/--variable-length", help="Default: packed for pretraining."),
        ] = None,
        grad_checkpointing: Annotated[bool, typer.Option(help="Activation checkpointing.")] = True,
        lora_rank: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
        lora_targets: Annotated[str, typer.Option(help="all|attention|qv")] = "all",
        sharding: Annotated[str, typer.Option(help="none|zero1|zero2|zero3")] = "none",
        gpus: Annotated[int, typer.Option(help="Data-parallel GPU count.")] = 1,
        tokens: Annotated[float | None, typer.Option(help="Tokens to train on.")] = None,
        dataset_tokens: Annotated[
            float | None, typer.Option(help="Dataset tokens (with --epochs).")
        ] = None,
        epochs: Annotated[float | None, typer.Option(help="Passes over the dataset.")] = None,
        layers: Annotated[int | None, typer.Option(help="Decoder layers (params_b).")] = None,
        hidden: Annotated[int | None, typer.Option(help="Hidden size (params_b).")] = None,
        heads: Annotated[int | None, typer.Option(help="Attention heads (params_b).")] = None,
        kv_heads: Annotated[int | None, typer.Option(help="KV heads (params_b).")] = None,
        vocab: Annotated[int | None, typer.Option(help="Vocabulary size (params_b).")] = None,
        intermediate: Annotated[int | None, typer.Option(help="MLP width (params_b).")] = None,
        gpu: Annotated[
            str | None, typer.Option(help="Catalog GPU slug, e.g. h100-sxm: adds the time.")
        ] = None,
        interconnect: Annotated[
            str | None, typer.Option(help="nvswitch|nvlink|pcie|unknown (default: form factor)")
        ] = None,
        network: Annotated[
            str, typer.Option(help="infiniband|roce|efa|ethernet|none|unknown")
        ] = "unknown",
        network_gbps: Annotated[
            float | None, typer.Option(help="Gbit/s per node between nodes.")
        ] = None,
        nodes: Annotated[
            int | None,
            typer.Option(help="Identical machines the GPUs are split over (a plan's listings)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Estimate per-GPU memory (and, with --gpu, speed and hours) of a training job."""
        params = {
            "model": model,
            "params_b": params_b,
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
        try:
            workload = Workload(**{k: v for k, v in params.items() if v is not None})
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                field = ".".join(str(p) for p in err["loc"]) or str(
                    (err.get("ctx") or {}).get("field", "model")
                )
                typer.echo(f"error: --{field.replace('_', '-')}: {err['msg']}", err=True)
            raise typer.Exit(2) from exc
        for name, value, allowed in (
            ("interconnect", interconnect, INTERCONNECTS),
            ("network", network, NETWORKS),
        ):
            if value is not None and value not in allowed:
                typer.echo(f"error: --{name}: one of {', '.join(allowed)}", err=True)
                raise typer.Exit(2)
        if network_gbps is not None and not 0 < network_gbps <= 100_000:
            typer.echo("error: --network-gbps: between 0 and 100000 Gbit/s", err=True)
            raise typer.Exit(2)
        if nodes is not None and not 1 <= nodes <= 1024:
            typer.echo("error: --nodes: between 1 and 1024", err=True)
            raise typer.Exit(2)
        estimate = estimate_memory(workload)
        time = None
        if gpu:
            time = estimate_time(
                workload,
                estimate,
                gpu.strip().lower(),
                interconnect=interconnect,
                network=network,
                network_gbps=network_gbps,
                nodes=nodes,
            )
            if time is None:
                typer.echo(f"error: --gpu: unknown GPU {gpu!r}", err=True)
                raise typer.Exit(2)
        data = estimate_dict(estimate, time)
        typer.echo(json.dumps(data, indent=2) if as_json else _table(data))
