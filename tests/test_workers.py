"""Two `gpufit worker` processes on one Postgres scrape each provider once per interval."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.pipeline.scrape_runner import INTERRUPTED
from app.store.db import make_engine
from app.store.migrate import upgrade
from app.store.models import ScrapeRun
from tests.conftest import PG_URL, scratch_postgres_url
from tests.feed_server import feed_server
from tests.test_scrape_runner import catalog

INTERVAL_S = 6.0
RUN_FOR_S = 21.0


@pytest.mark.skipif(not PG_URL, reason="advisory locks need Postgres: set GPUFIT_TEST_DATABASE_URL")
def test_two_workers_scrape_once_per_interval(repo_root: Path) -> None:
    url = scratch_postgres_url("workers")
    upgrade(url)
    with feed_server() as server:
        server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
        env = {
            **os.environ,
            "GPUFIT_DATABASE_URL": url,
            "GPUFIT_ENABLED_SCRAPERS": '["skypilot-cudo"]',
            "GPUFIT_PROVIDERS__SKYPILOT_CUDO__URL": server.url + "/cudo/vms.csv",
            "GPUFIT_PROVIDERS__SKYPILOT_CUDO__INTERVAL_MINUTES": str(INTERVAL_S / 60),
            "GPUFIT_INTERVAL_JITTER_SECONDS": "0",
            "GPUFIT_FIRST_RUN_SPREAD_SECONDS": "0",
        }
        cmd = [sys.executable, "-m", "app.cli", "worker"]
        workers = [
            subprocess.Popen(cmd, env=env, cwd=repo_root, stderr=subprocess.PIPE) for _ in range(2)
        ]
        time.sleep(RUN_FOR_S)
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(timeout=10)
        fetches = [hit for hit in server.hits if hit.startswith("/cudo/")]

    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(ScrapeRun.started_at, ScrapeRun.status, ScrapeRun.error).order_by(
                ScrapeRun.started_at
            )
        ).all()
    engine.dispose()
    starts = [r.started_at for r in rows]
    # The last tick's run may still be going when the test stops the workers (a loaded machine
    # scrapes slowly): it is then recorded as interrupted, which is what a stop must do.
    finished = rows[:-1] if rows and rows[-1].error == INTERRUPTED else rows
    assert all(r.status == "ok" for r in finished), rows
    # Both workers fire at every tick; exactly one of them runs it.
    assert 3 <= len(rows) <= int(RUN_FOR_S / INTERVAL_S) + 1, rows
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
    assert all(gap > INTERVAL_S * 0.7 for gap in gaps), gaps
    assert len(fetches) == len(rows)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_every_web_worker_logs_json_lines(repo_root: Path, tmp_path: Path) -> None:
    """`gpufit serve --workers 2`: the workers (spawned processes) log JSON like the parent."""
    url = f"sqlite:///{tmp_path / 'workers.db'}"
    upgrade(url)
    port = _free_port()
    env = {**os.environ, "GPUFIT_DATABASE_URL": url, "GPUFIT_LOG_LEVEL": "INFO"}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--workers", "2", "--no-scheduler",
           "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, cwd=repo_root, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
            time.sleep(0.3)
        for _ in range(20):
            httpx.get(f"http://127.0.0.1:{port}/api/offers?gpu=x%00", timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    lines = [line for line in stderr.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    started = {r["pid"] for r in records if r["msg"].startswith("Started server process")}
    assert len(started) == 2, lines  # both workers, not only the parent
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert {r["pid"] for r in access} <= started and len(access) >= 20
