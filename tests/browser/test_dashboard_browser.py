"""End-to-end in headless Chromium: rank offers for a job, filter, save, reopen, open a chart.

Runs against a real uvicorn server (own thread, free loopback port, temp SQLite DB migrated and
loaded with the bundled sample). Needs Debian's Chromium at /usr/bin/chromium.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A uvicorn server on a migrated temp DB with the sample loaded; yields its base URL."""
    if not CHROMIUM.exists():
        pytest.skip(
            "Chromium not installed at /usr/bin/chromium "
            "(apt-get install -y chromium chromium-driver)"
        )
    import uvicorn

    from app.core.settings import Settings
    from app.main import create_app
    from app.pipeline.sample_loader import load_sample
    from app.store.db import make_engine, make_session_factory
    from app.store.migrate import upgrade

    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'browser.db'}"
    upgrade(url)
    engine = make_engine(url)
    with make_session_factory(engine).begin() as session:
        load_sample(session)
    engine.dispose()
    app = create_app(
        Settings(database_url=url, scheduler_enabled=False, _env_file=None), scheduler=False
    )
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


def test_rank_filter_save_reopen_and_chart(server: str, browser: object, tmp_path: Path) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

    response = page.goto(f"{server}/")
    expect(page.locator("h1#results-title")).to_have_text("GPU offers")
    # The browser asked for and got a compressed page (GZipMiddleware).
    assert response is not None and response.headers.get("content-encoding") == "gzip"

    # Fine-tuning with QLoRA on an 8B preset: the form applies itself on change.
    with page.expect_navigation():
        page.get_by_label("QLoRA").check()
    with page.expect_navigation():
        page.locator("select#model").select_option("llama-3.1-8b")
    expect(page.locator("h1#results-title")).to_contain_text("Llama 3.1 8B · QLoRA")
    assert "method=qlora" in page.url and "model=llama-3.1-8b" in page.url
    first_row = page.locator("table.offers tbody tr.offer").first
    expect(first_row.locator("td.fit")).to_contain_text("fits")
    expect(page.locator("#count-line")).to_contain_text("sorted by total job cost")

    # Change a filter: require NVLink/NVSwitch.
    with page.expect_navigation():
        page.get_by_label("NVLink / NVSwitch required").check()
    assert "nvlink=true" in page.url
    expect(page.locator("#caption")).to_contain_text("GPUs linked by NVLink or NVSwitch")
    interconnects = page.locator("table.offers tbody tr.offer td:nth-child(8)").all_inner_texts()
    assert interconnects and set(interconnects) <= {"NVLink", "NVSwitch"}
    page.screenshot(path=str(tmp_path / "ranked.png"))

    # Save it, then reload /saved and find it there.
    page.locator(".save-form input[name=name]").fill("QLoRA 8B on NVLink")
    with page.expect_navigation():
        page.get_by_role("button", name="Save this search").click()
    assert page.url.endswith("/saved")
    page.reload()
    saved = page.locator("a.saved-name", has_text="QLoRA 8B on NVLink")
    expect(saved).to_be_visible()
    with page.expect_navigation():
        saved.click()
    assert "nvlink=true" in page.url and "method=qlora" in page.url

    # Open an offer and see its price-history chart.
    with page.expect_navigation():
        page.locator("table.offers tbody tr.offer td.instance a").first.click()
    chart = page.locator("svg.chart:not(.availability)")
    expect(chart).to_be_visible()
    assert chart.locator("path.line").count() >= 1
    # Availability over time next to price, and a way to rent.
    expect(page.locator("svg.chart.availability")).to_be_visible()
    expect(page.locator("p.rent-line a.rent")).to_be_visible()
    assert not errors, errors
