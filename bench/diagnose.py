"""Where a slow request spends its time: the SQL it issues (count, per-statement time, the
Postgres plan of the slowest) and a cProfile of the whole request, run in-process (TestClient).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastapi
import fastapi.routing
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from app.core.settings import Settings
from app.main import create_app
from bench.dbs import BenchDb

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(fastapi.__file__).resolve().parent.parent


@dataclass
class Statement:
    sql: str
    params: Any
    ms: float


@dataclass
class Diagnosis:
    path: str
    request_ms: float
    statements: list[Statement]
    profile_top: list[str]
    slowest_plan: list[str] = field(default_factory=list)

    @property
    def sql_ms(self) -> float:
        return sum(s.ms for s in self.statements)


def diagnose(db: BenchDb, path: str, *, runs: int = 3) -> Diagnosis:
    app = create_app(Settings(database_url=db.url, log_level="WARNING"), scheduler=False)
    engine = app.state.engine
    captured: list[Statement] = []
    starts: list[float] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        starts.append(time.perf_counter())

    def after(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        captured.append(Statement(statement, params, (time.perf_counter() - starts.pop()) * 1000))

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    with TestClient(app) as client:
        client.get(path)  # warm up caches and the pool
        captured.clear()
        best = float("inf")
        last: list[Statement] = []
        for _ in range(runs):
            captured.clear()
            start = time.perf_counter()
            client.get(path)
            best = min(best, (time.perf_counter() - start) * 1000)
            last = list(captured)
        # Sync endpoints run in a worker thread, out of reach of a profiler on this one: run
        # them inline (on the event loop's thread) with the profiler enabled around them.
        profiler = cProfile.Profile()
        original = fastapi.routing.run_in_threadpool

        async def inline(func: Any, *args: Any, **kwargs: Any) -> Any:
            profiler.enable()
            try:
                return func(*args, **kwargs)
            finally:
                profiler.disable()

        fastapi.routing.run_in_threadpool = inline  # type: ignore[assignment]
        try:
            client.get(path)
        finally:
            fastapi.routing.run_in_threadpool = original
    event.remove(engine, "before_cursor_execute", before)
    event.remove(engine, "after_cursor_execute", after)
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(60)
    lines = buffer.getvalue().splitlines()
    header = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    top = [
        line.rstrip().replace(str(SITE), "").replace(str(ROOT) + "/", "")
        for line in lines[header : header + 45]
        if line.strip()
    ]
    diagnosis = Diagnosis(path=path, request_ms=best, statements=last, profile_top=top)
    if db.is_pg and last:
        slowest = max(last, key=lambda s: s.ms)
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            cur = raw.cursor()
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + slowest.sql, slowest.params)
            diagnosis.slowest_plan = [str(r[0]) for r in cur.fetchall()]
            conn.execute(text("SELECT 1"))
    engine.dispose()
    return diagnosis
