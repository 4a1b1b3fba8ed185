"""Security headers, request size limits and the Prometheus endpoint."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.testclient import TestClient

from app.core.metrics import record_scrape


def test_security_headers_on_pages_and_api(client: TestClient) -> None:
    for path in ("/healthz", "/api/providers", "/no-such-page"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff"


def test_oversized_body_is_rejected(client: TestClient) -> None:
    response = client.post(
        "/saved",
        content=b"x" * (65 * 1024),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]


def test_streamed_oversized_body_is_rejected(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b"y" * 1024

    response = client.post(
        "/saved", content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 413


def test_metrics_exposes_scrapes_offers_and_latency(client: TestClient, sample_loaded: int) -> None:
    record_scrape("vastai", "failed", 1.5)
    client.get("/healthz")
    text = client.get("/metrics").text
    assert 'gpufit_scrape_runs_total{provider="vastai",status="failed"}' in text
    assert 'gpufit_scrape_duration_seconds_count{provider="vastai"}' in text
    assert 'gpufit_offers_active{provider="lambdalabs"}' in text
    assert 'gpufit_http_request_duration_seconds_count{method="GET",route="/healthz"' in text
