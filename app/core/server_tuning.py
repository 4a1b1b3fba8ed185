"""Interpreter settings for a long-lived server process: the garbage collector and how often
threads trade the interpreter lock.

A web process holds a large, long-lived heap (templates, catalogs, cached aggregates, the fit
cache), and CPython's default thresholds (700, 10, 10) make it walk that heap again and again:
decoding a data version's machine shapes allocates tens of thousands of small objects, and in
three timings of the first ranked page after a scrape (1M offers, in process) one took 167 ms
against ~90 ms for the others; with these settings three took 87-93 ms. Objects alive after
start-up are frozen (never scanned again) and the young generation may grow before a
collection.

Threads hand over the interpreter lock every SWITCH_INTERVAL_S instead of CPython's 5 ms: a
request thread that waits on the database gives up the lock, and while a background thread runs
Python (the saved-view refresher grouping and assessing shapes) it waited up to 5 ms to get it
back after each of its statements. The first pages after a scrape, with the refresher busy,
took up to 260-280 ms for 25-40 ms of work; with 1 ms, at most 90 ms (100k offers, Postgres).
"""

from __future__ import annotations

import gc
import sys

# Allocations (less deallocations) before a young collection; then how many young and middle
# collections before the next older one. Cycles are rare here (rows, dicts, dataclasses), so
# collecting less often keeps little garbage for long.
THRESHOLDS = (50_000, 20, 100)
SWITCH_INTERVAL_S = 0.001


def tune_for_server() -> None:
    """Freeze what start-up built, collect less often and switch threads sooner (call once,
    after imports)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
