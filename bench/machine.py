"""What the bench ran on: CPU, memory, Python and database versions."""

from __future__ import annotations

import os
import platform
import sqlite3
from pathlib import Path

import psycopg


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def machine_info(pg_dsn: str | None) -> dict[str, str]:
    ram = _ram_gib()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {
        "CPU": _cpu_model(),
        "nproc": str(cpus),
        "RAM": f"{ram:.1f} GiB" if ram else "unknown",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "SQLite": sqlite3.sqlite_version,
        "psycopg": psycopg.__version__,
    }
    if pg_dsn:
        try:
            with psycopg.connect(pg_dsn, connect_timeout=3) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                info["PostgreSQL"] = str(row[0]) if row else "unknown"
        except psycopg.Error as exc:
            info["PostgreSQL"] = f"unreachable ({str(exc).splitlines()[0]})"
    return info
