"""Side feeds (AWS Spot Instance Advisor): stored per fetch, bad fetches keep rows, health shown."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import ProviderSettings, Settings
from app.pipeline.freshness import provider_statuses
from app.pipeline.scheduler import build_scheduler
from app.pipeline.scrape_runner import ScrapeRunner
from app.pipeline.side_feeds import SideFeedRunner
from app.store.models import ScrapeRun, SpotAdvisorRow, utcnow
from tests.feed_server import FeedServer
from tests.scrapers.conftest import fixture_text

FEED = "aws-spot-advisor"
PATH = "/spot-advisor-data.json"


@pytest.fixture
def side_runner(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> SideFeedRunner:
    import scrapers.http

    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.01)
    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=0.5,
        providers={FEED: ProviderSettings(url=server.url + PATH)},
        _env_file=None,
    )
    return SideFeedRunner(settings, engine, session_factory)


def stored(factory: sessionmaker[Session]) -> dict[tuple[str, str, str], tuple[str, float | None]]:
    with factory() as session:
        return {
            (r.region, r.instance_type, r.os): (r.band_label, r.savings_pct)
            for r in session.scalars(select(SpotAdvisorRow))
        }


def runs(factory: sessionmaker[Session]) -> list[tuple[str, str, str | None]]:
    with factory() as session:
        return [
            (r.source, r.status, r.error)
            for r in session.scalars(select(ScrapeRun).order_by(ScrapeRun.id))
        ]


async def test_fetch_stores_gpu_rows_and_records_the_run(
    side_runner: SideFeedRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    result = await side_runner.run_feed(FEED)
    assert (result.status, result.seen, result.added, result.removed) == ("ok", 355, 355, 0)
    rows = stored(session_factory)
    assert len(rows) == 355
    assert rows[("us-east-1", "p5.48xlarge", "Linux")] == (">20%", 52.0)
    with session_factory() as session:
        providers = {r.provider_id for r in session.scalars(select(SpotAdvisorRow))}
        fetched = {r.fetched_at for r in session.scalars(select(SpotAdvisorRow))}
        run = session.scalars(select(ScrapeRun)).one()
    assert providers == {"aws"} and len(fetched) == 1
    assert (run.source, run.status, run.offers_seen, run.warnings) == (FEED, "ok", 355, None)


async def test_next_fetch_replaces_the_set_and_keeps_warnings(
    side_runner: SideFeedRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    await side_runner.run_feed(FEED)
    server.serve(PATH, fixture_text("aws_spot_advisor", "partial.json"))
    result = await side_runner.run_feed(FEED)
    rows = stored(session_factory)
    assert result.status == "ok" and result.seen == len(rows) == 225
    assert not any(region == "us-west-2" for region, _, _ in rows)  # gone from the feed: gone
    assert ("us-east-1", "p5.48xlarge", "Linux") not in rows  # its bad row is not kept either
    assert rows[("us-east-1", "g5.xlarge", "Linux")] == (">20%", None)
    assert result.removed == 355 - 225 and result.updated == 1 and result.added == 0
    with session_factory() as session:
        last = session.scalars(select(ScrapeRun).order_by(ScrapeRun.id.desc())).first()
    assert last is not None and last.warnings is not None
    assert "unknown interruption band '9'" in last.warnings


@pytest.mark.parametrize(
    ("status", "body", "run_status", "error"),
    [
        (500, "oops", "failed", "HTTP 500"),
        (200, fixture_text("aws_spot_advisor", "malformed.json"), "failed", "malformed feed"),
        (
            200,
            json.dumps(
                {
                    "ranges": [{"index": 0, "label": "<5%", "dots": 0, "max": 5}],
                    "spot_advisor": {"us-east-1": {"Linux": {"g5.xlarge": {"s": 50, "r": 0}}}},
                }
            ),
            "partial",
            "fewer than 50%",
        ),
        (
            200,
            json.dumps(
                {
                    "ranges": [{"index": 0, "label": "<5%", "dots": 0, "max": 5}],
                    "spot_advisor": {"us-east-1": {"Linux": {"m7i.large": {"s": 50, "r": 0}}}},
                }
            ),
            "failed",
            "no offers",
        ),
    ],
)
async def test_a_bad_fetch_keeps_the_previous_rows(
    side_runner: SideFeedRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    status: int,
    body: str,
    run_status: str,
    error: str,
) -> None:
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    await side_runner.run_feed(FEED)
    before = stored(session_factory)
    server.serve(PATH, body, status=status)
    result = await side_runner.run_feed(FEED)
    assert result.status == run_status
    assert result.error is not None and error in result.error
    assert stored(session_factory) == before
    assert runs(session_factory)[-1][:2] == (FEED, run_status)


async def test_scheduled_run_stands_down_when_another_ran_this_interval(
    side_runner: SideFeedRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2021-02.json"))
    assert (await side_runner.run_feed(FEED, scheduled=True)).status == "ok"
    assert (await side_runner.run_feed(FEED, scheduled=True)).status == "locked"
    assert len(runs(session_factory)) == 1
    side_runner.clock = lambda: utcnow() + timedelta(hours=4)  # past half the 6 h interval
    assert (await side_runner.run_feed(FEED, scheduled=True)).status == "ok"


async def test_providers_status_and_api_show_the_side_feed(
    side_runner: SideFeedRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    client: TestClient,
) -> None:
    with session_factory() as session:
        before = {s.source: s for s in provider_statuses(session, side_runner.settings)}
    assert before[FEED].last_status is None and not before[FEED].stale
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    await side_runner.run_feed(FEED)
    server.serve(PATH, "nope", status=404)
    await side_runner.run_feed(FEED)
    with session_factory() as session:
        status = {s.source: s for s in provider_statuses(session, side_runner.settings)}[FEED]
    assert (status.last_status, status.feed_rows, status.stale) == ("failed", 355, False)
    assert status.offer_count == 0  # it brings no offers: provider counts still sum to the table
    assert status.last_success is not None and "HTTP 404" in (status.last_error or "")
    assert status.interval_minutes == 360
    api = {p["provider"]: p for p in client.get("/api/providers").json()["providers"]}
    assert api[FEED]["feed_rows"] == 355 and api[FEED]["offer_count"] == 0
    assert api[FEED]["last_status"] == "failed"
    assert api[FEED]["display_name"].startswith("AWS Spot Instance Advisor")
    page = client.get("/providers").text
    assert f'id="p-{FEED}"' in page and "HTTP 404" in page


def test_scheduler_runs_the_side_feed_on_its_own_switches(
    database_url: str, engine: Engine, session_factory: sessionmaker[Session]
) -> None:
    def jobs(**kwargs: object) -> dict[str, float]:
        settings = Settings(database_url=database_url, _env_file=None, **kwargs)  # type: ignore[arg-type]
        scheduler = build_scheduler(settings, ScrapeRunner(settings, engine, session_factory))
        return {j.id: j.trigger.interval.total_seconds() / 60 for j in scheduler.get_jobs()}

    assert jobs()[f"scrape-{FEED}"] == 360
    assert jobs(providers={FEED: ProviderSettings(interval_minutes=1440)})[f"scrape-{FEED}"] == 1440
    assert f"scrape-{FEED}" not in jobs(providers={FEED: ProviderSettings(enabled=False)})
    assert list(jobs(enabled_scrapers=["vastai"])) == ["scrape-vastai"]
    assert set(jobs(enabled_scrapers=["vastai", FEED])) == {"scrape-vastai", f"scrape-{FEED}"}


async def test_stored_bands_read_back_for_the_cost_model(
    side_runner: SideFeedRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    from app.fit.market import spot_interruption_rate
    from app.store.data_cache import data_version
    from app.store.spot_advisor import advisor_rows

    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2021-02.json"))
    await side_runner.run_feed(FEED)
    with session_factory() as session:
        first_version = data_version(session)
        rows = advisor_rows(session)
        assert {r.os for r in rows} == {"Linux"} and len(rows) == 48  # 24 GPU types x 2 regions
        risk = spot_interruption_rate("aws", "p4d.24xlarge", "us-east-1", rows)
        assert (risk.basis, risk.band_label) == ("advisor", "<5%")
    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    await side_runner.run_feed(FEED)
    with session_factory() as session:
        assert data_version(session) != first_version  # a new fetch invalidates cached bands
        rows = advisor_rows(session)
        risk = spot_interruption_rate("aws", "p4d.24xlarge", "us-east-1", rows)
        assert (risk.basis, risk.band_label) == ("advisor", "10-15%")
        assert len(advisor_rows(session, os="Windows")) > 0


def test_cli_scrapes_the_side_feed_by_id(
    database_url: str,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    import scrapers.http
    from app.cli import cli
    from app.core.settings import get_settings

    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.01)
    monkeypatch.setenv("GPUFIT_DATABASE_URL", database_url)
    monkeypatch.setenv("GPUFIT_PROVIDERS__AWS_SPOT_ADVISOR__URL", server.url + PATH)
    get_settings.cache_clear()
    try:
        server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
        ok = CliRunner().invoke(cli, ["scrape", FEED])
        assert ok.exit_code == 0, ok.output
        assert "aws-spot-advisor: ok: 355 rows: 355 added, 0 changed, 0 gone" in ok.output
        server.serve(PATH, "broken", status=500)
        failed = CliRunner().invoke(cli, ["scrape", FEED])
        assert failed.exit_code == 1 and "aws-spot-advisor: failed: " in failed.output
    finally:
        get_settings.cache_clear()
    assert len(stored(session_factory)) == 355


async def test_a_side_feed_success_keeps_the_sample_notice(
    side_runner: SideFeedRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    sample_loaded: int,
) -> None:
    from app.pipeline.freshness import sample_notice

    server.serve(PATH, fixture_text("aws_spot_advisor", "spot-advisor-2021-02.json"))
    assert (await side_runner.run_feed(FEED)).status == "ok"
    with session_factory() as session:
        notice = sample_notice(session)
    assert notice is not None and notice.sample_offers == sample_loaded
