"""The server entry point tunes the interpreter (app.core.server_tuning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.core.server_tuning import SWITCH_INTERVAL_S, THRESHOLDS

ROOT = Path(__file__).resolve().parent.parent


def test_the_asgi_entry_point_tunes_the_collector_and_the_thread_switch() -> None:
    # A subprocess: importing app.asgi tunes the interpreter that imports it.
    code = (
        "import gc, json; import app.asgi; "
        "import sys; "
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), sys.getswitchinterval()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "GPUFIT_DATABASE_URL": "sqlite://"},
    )
    thresholds, frozen, switch = json.loads(out.stdout.strip().splitlines()[-1])
    assert tuple(thresholds) == THRESHOLDS
    assert switch == SWITCH_INTERVAL_S < 0.005  # CPython's default is 5 ms
    assert frozen > 10_000  # the app's modules, templates and catalogs
