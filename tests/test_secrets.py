"""Secrets never leave settings: a key echoed back by an upstream error, or logged by httpx with
a URL, appears in no log record, no stored error and no page."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

import scrapers.http
from app.core.logging_setup import JsonFormatter, configure_logging
from app.core.redaction import REDACTED, redact, register_secrets
from app.core.settings import ProviderSettings, Settings
from app.pipeline.scrape_runner import ScrapeRunner
from app.store.models import ScrapeRun
from scrapers.http import get_text, make_client
from scrapers.registry import get_scraper_class
from tests.feed_server import FeedServer

# Each keyed scraper: (provider id, path its feed URL is served at, path the echo answers on).
KEYED = [
    ("gcp", "/gcp/skus", "/gcp/skus"),
    ("lambdalabs", "/lambda/instance-types", "/lambda/instance-types"),
    ("runpod", "/runpod/graphql", "/runpod/graphql"),
    ("tensordock", "/tensordock/locations", "/tensordock/locations"),
    ("vastai", "/vast/bundles/", "/vast/bundles/"),
    ("verda", "/verda", "/verda/oauth2/token"),
]
KEY = "K3y-{name}-0123456789abcdef"
SECRET = "S3cret-{name}-fedcba9876543210"


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record of every logger, httpx's request lines included."""
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield caplog
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def _logged_text(caplog: pytest.LogCaptureFixture) -> str:
    formatter = JsonFormatter()
    return "\n".join(
        [r.getMessage() for r in caplog.records]
        + [r.exc_text or "" for r in caplog.records]
        + [formatter.format(r) for r in caplog.records]
    )


def _pages(client: TestClient) -> str:
    return "\n".join(
        client.get(path).text for path in ("/providers", "/api/providers", "/providers.csv")
    )


@pytest.mark.parametrize(("name", "feed_path", "echo_path"), KEYED)
async def test_a_key_echoed_by_an_upstream_error_leaks_nowhere(
    name: str,
    feed_path: str,
    echo_path: str,
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    client: TestClient,
    all_logs: pytest.LogCaptureFixture,
) -> None:
    key, secret = KEY.format(name=name), SECRET.format(name=name)
    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=2,
        providers={
            name: ProviderSettings(url=server.url + feed_path, api_key=key, api_secret=secret)
        },  # fmt: skip
        _env_file=None,
    )
    runner = ScrapeRunner(settings, engine, session_factory)
    server.serve(echo_path, b"", status=400, echo=True)

    result = await runner.run(get_scraper_class(name))

    assert result.status == "failed" and result.error
    requested_urls = json.dumps(server.hits)  # keys travel in headers or bodies, not URLs
    with session_factory() as session:
        stored = session.scalars(select(ScrapeRun.error)).one() or ""
    # The echo reached the stored error (so the test can fail), with the credential cut out.
    assert REDACTED in stored, stored
    for text in (stored, result.error, _logged_text(all_logs), _pages(client), requested_urls):
        assert key not in text and secret not in text


async def test_a_token_obtained_at_run_time_is_redacted_too(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    client: TestClient,
    all_logs: pytest.LogCaptureFixture,
) -> None:
    token = "eyJ-runtime-access-token-0123456789"
    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=2,
        providers={
            "verda": ProviderSettings(
                url=server.url + "/verda", api_key="client-id-1234", api_secret="client-secret-1234"
            )
        },  # fmt: skip
        _env_file=None,
    )
    runner = ScrapeRunner(settings, engine, session_factory)
    server.serve("/verda/oauth2/token", json.dumps({"access_token": token}))
    server.serve("/verda/instance-types", b"", status=403, echo=True)
    # The availability lists are fetched concurrently: only the echoing request may fail.
    server.serve("/verda/instance-availability", b"[]")

    result = await runner.run(get_scraper_class("verda"))

    assert result.status == "failed" and result.error and REDACTED in result.error
    for text in (result.error, _logged_text(all_logs), _pages(client)):
        assert token not in text


async def test_httpx_request_lines_never_log_a_key(
    server: FeedServer, all_logs: pytest.LogCaptureFixture
) -> None:
    secret = "AIzaSy-url-key-0123456789"
    register_secrets([secret])
    url = server.serve("/skus", b"{}")
    async with make_client(timeout=2) as client:
        await get_text(client, url, params={"key": secret, "pageSize": "10"})
    logged = _logged_text(all_logs)
    assert "HTTP Request" in logged  # httpx did log the request line, at INFO
    assert secret not in logged and "pageSize=10" in logged


def test_stored_errors_from_older_versions_are_redacted_on_display(
    session_factory: sessionmaker[Session], client: TestClient
) -> None:
    with session_factory.begin() as session:
        session.add(
            ScrapeRun(
                source="gcp",
                status="failed",
                error="GET https://billing/skus?key=AIzaOldLeak123456&pageSize=5000: HTTP 400",
            )
        )
    shown = _pages(client)
    assert "AIzaOldLeak123456" not in shown and "key=[REDACTED]" in shown


def test_configure_logging_quiets_httpx_and_redacts_json_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging(
            "DEBUG",
            Settings(
                providers={"runpod": ProviderSettings(api_key="rp-key-abcdef0123")}, _env_file=None
            ),  # fmt: skip
        )
        assert logging.getLogger("httpx").level == logging.WARNING
        assert logging.getLogger("httpcore").level == logging.WARNING
        logging.getLogger("gpufit.test").warning(
            "upstream said %s", "bad key rp-key-abcdef0123", extra={"url": "x?token=abcdef12345"}
        )
        line = capsys.readouterr().err.strip().splitlines()[-1]
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
        for name in ("httpx", "httpcore", "hpack"):
            logging.getLogger(name).setLevel(logging.NOTSET)
    payload = json.loads(line)
    assert payload["msg"] == f"upstream said bad key {REDACTED}"
    assert payload["url"] == f"x?token={REDACTED}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET https://x/skus?key=abcdef123456&pageToken=CAESBg", "key=[REDACTED]&pageToken=CAESBg"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1", "Authorization: Bearer [REDACTED]"),
        ('{"client_secret": "s3cr3t-value", "n": 1}', '{"client_secret": "[REDACTED]", "n": 1}'),
        ("X-Goog-Api-Key: AIzaSy123456", "X-Goog-Api-Key: [REDACTED]"),
        ("monkey=banana basic shapes", "monkey=banana basic shapes"),
    ],
)
def test_credential_shapes_are_redacted(text: str, expected: str) -> None:
    assert expected in redact(text)


def test_registered_values_are_redacted_in_every_encoding() -> None:
    register_secrets(["p@ss/w0rd+key"])
    assert redact("a p@ss/w0rd+key b") == f"a {REDACTED} b"
    assert redact("u=p%40ss%2Fw0rd%2Bkey") == f"u={REDACTED}"
    register_secrets(["my secret phrase"])
    assert redact("q=my+secret+phrase&x=1") == f"q={REDACTED}&x=1"
    assert redact('{"p": "my secret phrase"}') == f'{{"p": "{REDACTED}"}}'
    register_secrets(["secret"])
    assert redact("a secret") == "a secret"  # values under 8 characters are never registered


def test_fetch_errors_are_redacted_when_raised() -> None:
    register_secrets(["leaky-key-7777777"])
    error = scrapers.http.FetchError("HTTP 400 'bad key leaky-key-7777777'")
    assert "leaky-key-7777777" not in str(error)
