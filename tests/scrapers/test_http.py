"""The shared request helper: retries, Retry-After, giving up, size cap, User-Agent, redaction."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest
import respx

from scrapers import http
from scrapers.http import FetchError, ResponseTooLarge, get_text, make_client, post_json_text

URL = "https://feed.example/prices"


@respx.mock
async def test_retries_on_503_then_succeeds(fast_retries: list[float]) -> None:
    route = respx.get(URL).mock(
        side_effect=[httpx.Response(503), httpx.Response(502), httpx.Response(200, text="ok")]
    )
    async with make_client(timeout=5) as client:
        assert await get_text(client, URL) == "ok"
    assert route.call_count == 3
    assert len(fast_retries) == 2
    assert all(0 <= w <= http.RETRY_MAX_SECONDS for w in fast_retries)


@respx.mock
async def test_retries_transport_timeouts() -> None:
    respx.get(URL).mock(side_effect=[httpx.ReadTimeout("slow"), httpx.Response(200, text="ok")])
    async with make_client(timeout=5) as client:
        assert await get_text(client, URL) == "ok"


@respx.mock
async def test_honors_retry_after_seconds(fast_retries: list[float]) -> None:
    respx.get(URL).mock(
        side_effect=[httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200)]
    )
    async with make_client(timeout=5) as client:
        await get_text(client, URL)
    assert fast_retries == [7.0]


@respx.mock
async def test_retry_after_is_capped(fast_retries: list[float]) -> None:
    respx.get(URL).mock(
        side_effect=[httpx.Response(503, headers={"Retry-After": "86400"}), httpx.Response(200)]
    )
    async with make_client(timeout=5) as client:
        await get_text(client, URL)
    assert fast_retries == [http.RETRY_AFTER_CAP_SECONDS]


def test_retry_after_http_date() -> None:
    now = time.time()
    header = email.utils.formatdate(now + 30, usegmt=True)
    assert http.parse_retry_after(header, now=now) == pytest.approx(30, abs=1)
    assert http.parse_retry_after("garbage") is None
    assert http.parse_retry_after("-5") == 0


@respx.mock
async def test_gives_up_after_attempts_with_readable_error() -> None:
    route = respx.get(URL).mock(return_value=httpx.Response(503, text="upstream down"))
    async with make_client(timeout=5) as client:
        with pytest.raises(FetchError, match=r"gave up after 3 attempts.*HTTP 503.*upstream down"):
            await get_text(client, URL, attempts=3)
    assert route.call_count == 3


@respx.mock
async def test_client_error_is_not_retried() -> None:
    route = respx.get(URL).mock(return_value=httpx.Response(403, text="forbidden"))
    async with make_client(timeout=5) as client:
        with pytest.raises(FetchError, match="HTTP 403") as info:
            await get_text(client, URL)
    assert info.value.status == 403
    assert route.call_count == 1


@respx.mock
async def test_size_cap_enforced_while_streaming() -> None:
    respx.get(URL).mock(return_value=httpx.Response(200, content=b"x" * 5000))
    async with make_client(timeout=5) as client:
        with pytest.raises(ResponseTooLarge, match="exceeds cap"):
            await get_text(client, URL, max_bytes=1000)
        assert len(await get_text(client, URL, max_bytes=5000)) == 5000


@respx.mock
async def test_user_agent_and_headers_sent() -> None:
    route = respx.get(URL).mock(return_value=httpx.Response(200))
    async with httpx.AsyncClient() as client:  # even a bare client gets our User-Agent
        await get_text(client, URL, headers={"Authorization": "Bearer k"})
    sent = route.calls.last.request
    assert sent.headers["User-Agent"] == http.USER_AGENT
    assert sent.headers["Authorization"] == "Bearer k"


@respx.mock
async def test_post_json_body() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(200, json={"ok": True}))
    async with make_client(timeout=5) as client:
        assert await post_json_text(client, URL, {"a": 1}) == '{"ok":true}'
    assert route.calls.last.request.content == b'{"a":1}'


@respx.mock
async def test_secrets_redacted_in_errors() -> None:
    respx.get(URL).mock(return_value=httpx.Response(401))
    async with make_client(timeout=5) as client:
        with pytest.raises(FetchError) as info:
            await get_text(client, URL, params={"key": "s3cret", "pageSize": "10"})
    assert "s3cret" not in str(info.value)
    assert "pageSize=10" in str(info.value)


async def test_gather_limited_bounds_concurrency() -> None:
    import asyncio

    running = peak = 0

    async def job(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1
        return i

    out = await http.gather_limited(2, [lambda i=i: job(i) for i in range(6)])
    assert out == list(range(6))
    assert peak == 2
