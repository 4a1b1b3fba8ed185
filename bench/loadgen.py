"""A small closed-loop HTTP load generator, run as its own process (used when `wrk` is missing).

`python -m bench.loadgen --base http://127.0.0.1:PORT --duration 30 --concurrency 8 PATH...`
prints one JSON object: requests, failures (non-2xx or transport errors), requests/s, p50/p95/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any

import httpx


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def _run(base: str, paths: list[str], duration: float, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    kinds: dict[str, int] = {}  # what failed: "HTTP 503", "ReadTimeout", ...
    cycle = itertools.cycle(paths)
    deadline = time.perf_counter() + duration
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def user() -> None:
            nonlocal failures
            while time.perf_counter() < deadline:
                path = next(cycle)
                start = time.perf_counter()
                kind = ""
                try:
                    response = await client.get(path)
                    if response.status_code >= 400:
                        kind = f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    kind = type(exc).__name__
                latencies.append(time.perf_counter() - start)
                if kind:
                    failures += 1
                    kinds[kind] = kinds.get(kind, 0) + 1

        start = time.perf_counter()
        await asyncio.gather(*(user() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return {
        "requests": len(latencies),
        "failures": failures,
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "failure_kinds": kinds,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if not args.base.startswith(("http://127.0.0.1", "http://localhost")):
        raise SystemExit("loopback targets only")
    result = asyncio.run(_run(args.base, args.paths, args.duration, args.concurrency))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
