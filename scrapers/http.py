"""Shared HTTP and payload helpers for every scraper.

Requests get a timeout, a clear User-Agent, retries with exponential backoff and jitter on 429,
5xx and transport errors (honoring `Retry-After`, capped), and a response size cap enforced while
streaming. Non-2xx answers raise `FetchError` with a readable message (secrets in the URL are
redacted). The payload helpers turn one bad item into a warning instead of a crash.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from pydantic import ValidationError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
)

from app.records import OfferRecord
from scrapers.base import FeedFormatError, Scraper

T = TypeVar("T")

USER_AGENT = "gpufit/0.1 (+https://github.com/gpufit)"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_ATTEMPTS = 4
# Tests shrink these (monkeypatch) so retries run instantly.
RETRY_BASE_SECONDS = 1.0  # first backoff; doubles per attempt, full jitter
RETRY_MAX_SECONDS = 30.0  # cap on a computed backoff
RETRY_AFTER_CAP_SECONDS = 120.0  # a hostile or confused Retry-After must not stall a run
_SECRET_PARAMS = re.compile(r"^(key|api_key|apikey|token|access_token|client_secret)$", re.I)
_ERROR_SNIPPET = 200


class FetchError(RuntimeError):
    """A request failed for good: non-2xx status, transport error or oversized body."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ResponseTooLarge(FetchError):
    """The body exceeded the configured byte cap; the download was aborted."""


class _Retryable(FetchError):
    def __init__(self, message: str, *, status: int, retry_after: float | None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


async def sleep(seconds: float) -> None:
    """The backoff sleep; a module attribute so tests can record waits instead of sleeping."""
    await asyncio.sleep(seconds)


def redact_url(url: str) -> str:
    """The URL with secret-looking query values replaced, for logs and error messages."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [
        (k, "REDACTED" if _SECRET_PARAMS.match(k) else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query, safe="$,:'()/ ")))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_SECONDS)


def _wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, _Retryable) and exc.retry_after is not None:
        return exc.retry_after
    ceiling = min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** (state.attempt_number - 1))
    return random.uniform(0, ceiling)  # noqa: S311 - jitter, not crypto


def make_client(*, timeout: float) -> httpx.AsyncClient:
    """An AsyncClient with our User-Agent and a per-request timeout (connect capped at 10 s)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=True,
    )


async def _once(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    params: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    json_body: Any,
    max_bytes: int,
    line_filter: Callable[[int, str], bool] | None = None,
    max_total_bytes: int = 0,
) -> str:
    merged = {"User-Agent": USER_AGENT, **(headers or {})}
    shown = redact_url(str(httpx.URL(url, params=params)) if params else url)
    async with client.stream(
        method, url, params=params, headers=merged, json=json_body
    ) as response:
        status = response.status_code
        if status == 429 or status >= 500:
            body = (await _read_capped(response, _ERROR_SNIPPET * 4, shown, strict=False)).strip()
            raise _Retryable(
                f"{method} {shown}: HTTP {status} {body[:_ERROR_SNIPPET]!r}",
                status=status,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        if not 200 <= status < 300:
            body = (await _read_capped(response, _ERROR_SNIPPET * 4, shown, strict=False)).strip()
            raise FetchError(
                f"{method} {shown}: HTTP {status} {body[:_ERROR_SNIPPET]!r}", status=status
            )
        if line_filter is not None:
            return await _read_lines(response, line_filter, max_bytes, max_total_bytes, shown)
        return await _read_capped(response, max_bytes, shown)


async def _read_lines(
    response: httpx.Response,
    keep: Callable[[int, str], bool],
    max_kept: int,
    max_total: int,
    shown: str,
) -> str:
    # Huge bulk files (AWS price lists) are filtered while streaming: only kept lines count
    # against the normal cap, and the whole download against a separate, larger one.
    kept: list[str] = []
    kept_size = total = 0
    index = 0
    async for line in response.aiter_lines():
        total += len(line) + 1
        if max_total and total > max_total:
            raise ResponseTooLarge(f"{shown}: download exceeds cap of {max_total} bytes")
        if keep(index, line):
            kept_size += len(line) + 1
            if kept_size > max_kept:
                raise ResponseTooLarge(f"{shown}: kept lines exceed cap of {max_kept} bytes")
            kept.append(line)
        index += 1
    return "\n".join(kept)


async def _read_capped(
    response: httpx.Response, max_bytes: int, shown: str, *, strict: bool = True
) -> str:
    declared = response.headers.get("Content-Length", "")
    if strict and declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLarge(f"{shown}: response of {declared} bytes exceeds cap {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            if not strict:
                chunks.append(chunk[: max(0, max_bytes - (size - len(chunk)))])
                break
            raise ResponseTooLarge(f"{shown}: response exceeds cap of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")


async def request_text(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    attempts: int = DEFAULT_ATTEMPTS,
    line_filter: Callable[[int, str], bool] | None = None,
    max_total_bytes: int = 0,
) -> str:
    """Send one request with retries; return the body text or raise FetchError.

    With `line_filter(index, line)`, only the kept lines are returned (joined by newlines).
    """
    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=_wait,
        retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
        sleep=lambda seconds: sleep(seconds),
    )
    try:
        async for attempt in retrying:
            with attempt:
                return await _once(
                    client,
                    method,
                    url,
                    params=params,
                    headers=headers,
                    json_body=json_body,
                    max_bytes=max_bytes,
                    line_filter=line_filter,
                    max_total_bytes=max_total_bytes,
                )
    except RetryError as exc:
        last = exc.last_attempt.exception()
        if isinstance(last, httpx.TimeoutException):
            detail = f"timed out ({type(last).__name__}) on {method} {url}"
        elif isinstance(last, httpx.TransportError):
            detail = f"{type(last).__name__}: {last or 'connection failed'} on {method} {url}"
        else:
            detail = str(last)
        status = last.status if isinstance(last, FetchError) else None
        raise FetchError(
            f"gave up after {attempts} attempts: {detail}".replace(url, redact_url(url)),
            status=status,
        ) from last
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover


async def get_text(
    client: httpx.AsyncClient,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    attempts: int = DEFAULT_ATTEMPTS,
) -> str:
    """GET a URL with retries and a size cap; return the body text."""
    return await request_text(
        client, "GET", url, params=params, headers=headers, max_bytes=max_bytes, attempts=attempts
    )


async def post_json_text(
    client: httpx.AsyncClient,
    url: str,
    body: Any,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    attempts: int = DEFAULT_ATTEMPTS,
) -> str:
    """POST a JSON body with retries and a size cap; return the response text."""
    return await request_text(
        client,
        "POST",
        url,
        params=params,
        headers=headers,
        json_body=body,
        max_bytes=max_bytes,
        attempts=attempts,
    )


async def gather_limited(limit: int, jobs: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run job factories concurrently, at most `limit` at a time; results keep job order."""
    semaphore = asyncio.Semaphore(max(1, limit))

    async def run(job: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await job()

    return list(await asyncio.gather(*(run(job) for job in jobs)))


class HttpScraper(Scraper):
    """A Scraper with a concurrency limit for multi-request fetches (regions, pages)."""

    limit: ClassVar[int] = 4  # concurrent requests to one provider
    max_bytes: ClassVar[int] = DEFAULT_MAX_BYTES

    def url(self, name: str) -> str:
        """A secondary feed URL from config.extra_urls, else the class default."""
        return self.config.extra_urls.get(name) or self.extra_default_urls[name]

    @property
    def base_url(self) -> str:
        """The primary feed URL (config wins over the class default)."""
        return self.config.base_url or self.default_url


# --- payload helpers -----------------------------------------------------------------------


def load_json(text: str, url: str = "") -> Any:
    """Decode a JSON (or JSONP) body, raising FeedFormatError on anything that isn't JSON."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" from {redact_url(url)}" if url else ""
        raise FeedFormatError(f"response{where} is not valid JSON: {exc}") from exc


def build_record(warnings: list[str], what: str, **fields: Any) -> OfferRecord | None:
    """Construct an OfferRecord, or record a warning and return None if it fails validation."""
    try:
        return OfferRecord(**fields)
    except (ValidationError, ValueError, TypeError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        reason = f"{'.'.join(map(str, first['loc']))}: {first['msg']}" if first else str(exc)
        warnings.append(f"skipped {what[:120]}: {reason[:200]}")
        return None


def to_float(value: Any) -> float | None:
    """A finite float from a number or numeric string; None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out and out not in (float("inf"), float("-inf")) else None


def dedupe(records: Iterable[OfferRecord], warnings: list[str]) -> list[OfferRecord]:
    """Keep the cheapest record per key; a feed listing one key twice gets a warning."""
    best: dict[tuple[str, str, str, bool], OfferRecord] = {}
    for record in records:
        seen = best.get(record.key)
        if seen is None:
            best[record.key] = record
            continue
        warnings.append(f"duplicate offer {record.key[1]} in {record.key[2]}: kept cheapest")
        price = record.spot_price_per_hour if record.spot else record.price_per_hour
        old = seen.spot_price_per_hour if seen.spot else seen.price_per_hour
        if price is not None and (old is None or price < old):
            best[record.key] = record
    return list(best.values())
