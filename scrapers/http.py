"""Shared HTTP and payload helpers for every scraper.

Requests get a timeout per read, a total deadline (a feed dripping bytes cannot hold a run), a
clear User-Agent, retries with exponential backoff and jitter on 429, 5xx and transport errors
(honoring `Retry-After`, capped), and a size cap on the decompressed body, enforced while
streaming and inflating (a compression bomb stops at the cap, not at the memory limit). Non-2xx
answers raise `FetchError` with a readable message in which every credential is redacted
(app.core.redaction), including what an upstream error body echoes back. The payload helpers turn
one bad item into a warning instead of a crash.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import random
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar, get_args
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
)

from app.core.redaction import redact, register_secrets
from app.records import OfferRecord
from scrapers.base import FeedFormatError, Scraper

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

USER_AGENT = "gpufit/0.1 (+https://github.com/gpufit)"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_ATTEMPTS = 4
# Total time for one request, retries included (the client's timeout is per read/connect).
DEFAULT_REQUEST_DEADLINE_SECONDS = 600.0
# Tests shrink these (monkeypatch) so retries run instantly.
RETRY_BASE_SECONDS = 1.0  # first backoff; doubles per attempt, full jitter
RETRY_MAX_SECONDS = 30.0  # cap on a computed backoff
RETRY_AFTER_CAP_SECONDS = 120.0  # a hostile or confused Retry-After must not stall a run
_SECRET_PARAMS = re.compile(
    r"^(key|api_key|apikey|token|access_token|refresh_token|client_secret|password)$", re.I
)
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})
_ERROR_SNIPPET = 200
# Only codings we can inflate with a bound on the output are offered (and accepted).
ACCEPT_ENCODING = "gzip, deflate"
_INFLATE_PIECE = 64 * 1024


class FetchError(RuntimeError):
    """A request failed for good: non-2xx status, transport error, deadline or oversized body."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(redact(message))
        self.status = status


class ResponseTooLarge(FetchError):
    """The body (after decompression) exceeded the configured byte cap; the download was aborted."""


class _Retryable(FetchError):
    def __init__(self, message: str, *, status: int, retry_after: float | None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


async def sleep(seconds: float) -> None:
    """The backoff sleep; a module attribute so tests can record waits instead of sleeping."""
    await asyncio.sleep(seconds)


def redact_url(url: str) -> str:
    """The URL with secret-looking query values (and any known secret) replaced."""
    parts = urlsplit(url)
    if parts.query:
        query = [
            (k, "REDACTED" if _SECRET_PARAMS.match(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        url = urlunsplit(parts._replace(query=urlencode(query, safe="$,:'()/ ")))
    return redact(url)


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


class FeedClient(httpx.AsyncClient):
    """An AsyncClient that also carries the total deadline of each request made with it."""

    def __init__(self, *, request_deadline: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request_deadline = request_deadline


def make_client(*, timeout: float, deadline: float | None = None) -> httpx.AsyncClient:
    """A client with our User-Agent, a per-read timeout (connect capped at 10 s) and a total
    per-request deadline (default DEFAULT_REQUEST_DEADLINE_SECONDS)."""
    return FeedClient(
        request_deadline=deadline or DEFAULT_REQUEST_DEADLINE_SECONDS,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
        follow_redirects=True,
    )


def _register_credentials(
    headers: Mapping[str, str], params: Mapping[str, str] | None, json_body: Any
) -> None:
    # Whatever credential a request carries is redacted from then on, even one obtained at run
    # time (an OAuth access token) that no setting holds.
    values: list[str] = []
    for name, value in headers.items():
        if name.lower() in _CREDENTIAL_HEADERS:
            values += [value, value.split(" ", 1)[-1]]
    for name, value in (params or {}).items():
        if _SECRET_PARAMS.match(name):
            values.append(str(value))
    if isinstance(json_body, Mapping):
        values += [str(v) for k, v in json_body.items() if _SECRET_PARAMS.match(str(k))]
    if values:
        register_secrets(values, runtime=True)


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
    merged = {"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING, **(headers or {})}
    _register_credentials(merged, params, json_body)
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


# --- bounded decompression -------------------------------------------------------------------


class _Inflater:
    """One content-coding layer (gzip or deflate), producing at most `limit` bytes in all."""

    def __init__(self, coding: str, limit: int, shown: str) -> None:
        self.coding = coding
        self.limit = limit
        self.shown = shown
        self.produced = 0
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._z = zlib.decompressobj(wbits)
        self._may_be_raw = coding == "deflate"

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Inflate `data` in pieces of at most 64 KiB, never holding more than one piece."""
        while not self._z.eof:
            try:
                piece = self._z.decompress(data, _INFLATE_PIECE)
            except zlib.error as exc:
                if self._may_be_raw:
                    # Some servers send raw deflate (no zlib header) as "deflate".
                    self._may_be_raw = False
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise FetchError(f"{self.shown}: corrupt {self.coding} body ({exc})") from exc
            self._may_be_raw = False
            data = self._z.unconsumed_tail
            if piece:
                self.produced += len(piece)
                if self.produced > self.limit:
                    raise ResponseTooLarge(
                        f"{self.shown}: response exceeds cap of {self.limit} bytes once "
                        f"decompressed ({self.coding})"
                    )
                yield piece
            if not data and len(piece) < _INFLATE_PIECE:
                return


def _inflaters(response: httpx.Response, limit: int, shown: str) -> list[_Inflater]:
    """Decoders for the response's Content-Encoding, in the order they must be applied."""
    codings = [
        c.strip().lower()
        for c in response.headers.get("Content-Encoding", "").split(",")
        if c.strip() and c.strip().lower() != "identity"
    ]
    for coding in codings:
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise FetchError(f"{shown}: unsupported Content-Encoding {coding[:40]!r}")
    if len(codings) > 2:
        raise FetchError(f"{shown}: {len(codings)} layers of Content-Encoding refused")
    return [_Inflater(c, limit, shown) for c in reversed(codings)]


def _through(layers: list[_Inflater], data: bytes) -> Iterator[bytes]:
    if not layers:
        yield data
        return
    for piece in layers[0].feed(data):
        yield from _through(layers[1:], piece)


async def _decoded_chunks(response: httpx.Response, limit: int, shown: str) -> AsyncIterator[bytes]:
    """The body's bytes after Content-Encoding, never inflating more than `limit` bytes."""
    layers = _inflaters(response, limit, shown)
    async for raw in response.aiter_raw():
        for piece in _through(layers, raw):
            yield piece
        if layers:
            await asyncio.sleep(0)  # inflating is CPU work: let the event loop serve others


def _text_decoder(response: httpx.Response) -> codecs.IncrementalDecoder:
    try:
        return codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
    except LookupError:
        return codecs.getincrementaldecoder("utf-8")(errors="replace")


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
    kept_size = total = index = 0
    pending = ""
    decoder = _text_decoder(response)
    limit = max_total or DEFAULT_MAX_BYTES

    def take(lines: list[str]) -> None:
        nonlocal kept_size, index
        for line in lines:
            line = line.rstrip("\r")
            if keep(index, line):
                kept_size += len(line) + 1
                if kept_size > max_kept:
                    raise ResponseTooLarge(f"{shown}: kept lines exceed cap of {max_kept} bytes")
                kept.append(line)
            index += 1

    async for chunk in _decoded_chunks(response, limit, shown):
        total += len(chunk)
        if total > limit:
            raise ResponseTooLarge(f"{shown}: download exceeds cap of {limit} bytes")
        *lines, pending = (pending + decoder.decode(chunk)).split("\n")
        if len(pending) > max_kept:
            raise ResponseTooLarge(f"{shown}: a line longer than the cap of {max_kept} bytes")
        take(lines)
    pending += decoder.decode(b"", final=True)
    take([pending] if pending else [])
    return "\n".join(kept)


async def _read_capped(
    response: httpx.Response, max_bytes: int, shown: str, *, strict: bool = True
) -> str:
    declared = response.headers.get("Content-Length", "")
    if strict and declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLarge(f"{shown}: response of {declared} bytes exceeds cap {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in _decoded_chunks(response, max_bytes, shown):
            size += len(chunk)
            if size > max_bytes:
                if not strict:
                    chunks.append(chunk[: max(0, max_bytes - (size - len(chunk)))])
                    break
                raise ResponseTooLarge(f"{shown}: response exceeds cap of {max_bytes} bytes")
            chunks.append(chunk)
    except FetchError:
        if strict:
            raise
    return _text_decoder(response).decode(b"".join(chunks), final=True)


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
    """Send one request with retries, within the client's total deadline; return the body text
    or raise FetchError.

    With `line_filter(index, line)`, only the kept lines are returned (joined by newlines).
    """
    deadline = getattr(client, "request_deadline", DEFAULT_REQUEST_DEADLINE_SECONDS)
    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=_wait,
        retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
        sleep=lambda seconds: sleep(seconds),
    )
    try:
        async with asyncio.timeout(deadline):
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
    except TimeoutError as exc:
        raise FetchError(
            f"timed out: no complete answer within the {deadline:g} s deadline on {method} "
            f"{redact_url(url)}"
        ) from exc
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


class FeedModel(BaseModel):
    """Base of a feed's raw item models: JSON true/false is never a number.

    pydantic's lax mode reads `true` as 1 for a float or int field, so a feed sending
    `"price": true` would list an offer at $1.00/h; here that item fails validation instead.
    """

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key in _numeric_keys(cls):
                if isinstance(data.get(key), bool):
                    raise ValueError(f"{key}: a boolean is not a number")
        return data


_NUMERIC_KEYS: dict[type[BaseModel], tuple[str, ...]] = {}


def _numeric_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The input keys (names and aliases) of a model's int and float fields, cached."""
    keys = _NUMERIC_KEYS.get(model)
    if keys is None:
        found: set[str] = set()
        for name, info in model.model_fields.items():
            types = set(get_args(info.annotation)) or {info.annotation}
            if types & {int, float} and bool not in types:
                aliases = (name, info.alias, info.validation_alias)
                found |= {k for k in aliases if isinstance(k, str)}
        keys = _NUMERIC_KEYS[model] = tuple(sorted(found))
    return keys


def load_json(text: str, url: str = "") -> Any:
    """Decode a JSON (or JSONP) body, raising FeedFormatError on anything that isn't JSON."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" from {redact_url(url)}" if url else ""
        raise FeedFormatError(f"response{where} is not valid JSON: {exc}") from exc


def validated(model: type[M], items: Iterable[Any], what: str, warnings: list[str]) -> Iterator[M]:
    """Each item as `model`; one that does not validate is skipped with a warning naming
    `what`, so one bad item never costs the rest of the feed."""
    for raw in items:
        try:
            yield model.model_validate(raw)
        except ValidationError as exc:
            warnings.append(f"skipped {what}: {exc.errors()[0]['msg']}")


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
