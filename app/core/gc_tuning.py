"""Garbage-collector settings for a long-lived server process.

A web process holds a large, long-lived heap (templates, catalogs, cached aggregates, the fit
cache), and CPython's default thresholds (700, 10, 10) make it walk that heap again and again:
decoding a data version's machine shapes allocates tens of thousands of small objects, and in
three timings of the first ranked page after a scrape (1M offers, in process) one took 167 ms
against ~90 ms for the others; with these settings three took 87-93 ms. Objects alive after
start-up are frozen (never scanned again) and the young generation may grow before a
collection.
"""

from __future__ import annotations

import gc

# Allocations (less deallocations) before a young collection; then how many young and middle
# collections before the next older one. Cycles are rare here (rows, dicts, dataclasses), so
# collecting less often keeps little garbage for long.
THRESHOLDS = (50_000, 20, 100)


def tune_for_server() -> None:
    """Freeze what start-up built and collect less often (call once, after imports)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
