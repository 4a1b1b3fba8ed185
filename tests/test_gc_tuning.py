"""The server entry point tunes the garbage collector (app.core.gc_tuning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.core.gc_tuning import THRESHOLDS

ROOT = Path(__file__).resolve().parent.parent


def test_the_asgi_entry_point_freezes_start_up_objects_and_raises_thresholds() -> None:
    # A subprocess: importing app.asgi tunes the interpreter that imports it.
    code = (
        "import gc, json; import app.asgi; "
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "GPUFIT_DATABASE_URL": "sqlite://"},
    )
    thresholds, frozen = json.loads(out.stdout.strip().splitlines()[-1])
    assert tuple(thresholds) == THRESHOLDS
    assert frozen > 10_000  # the app's modules, templates and catalogs
