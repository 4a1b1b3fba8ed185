"""Application settings, read from the environment with the GPUFIT_ prefix."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SQLITE_URL = "sqlite:///./var/gpufit.db"
# Postgres's default work_mem (4 MB) makes the aggregates over ~100k active offers (facet
# counts, machine shapes) sort on disk: the unfiltered facet scan took 358 ms that way and
# 146 ms as an in-memory hash aggregate at 32 MB. Each sort or hash node may use this much.
DEFAULT_WORK_MEM_MB = 32


class ProviderSettings(BaseModel):
    """Per-provider overrides: GPUFIT_PROVIDERS__<ID>__URL, __API_KEY, __INTERVAL_MINUTES, ..."""

    url: str = ""
    api_key: str = Field(default="", repr=False)
    api_secret: str = Field(default="", repr=False)
    interval_minutes: float | None = Field(default=None, gt=0)
    enabled: bool = True
    extra_urls: dict[str, str] = Field(default_factory=dict)


def provider_key(name: str) -> str:
    """Settings key for a provider id; env names cannot hold '-' (skypilot-cudo: SKYPILOT_CUDO)."""
    return name.lower().replace("-", "_")


class Settings(BaseSettings):
    """One typed settings object for the web app, the worker and the CLI."""

    model_config = SettingsConfigDict(
        env_prefix="GPUFIT_", env_nested_delimiter="__", env_file=".env", extra="ignore"
    )

    database_url: str = DEFAULT_SQLITE_URL
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    marketplace_interval_minutes: float = Field(default=30, gt=0)
    list_interval_minutes: float = Field(default=360, gt=0)
    interval_jitter_seconds: float = Field(default=120, ge=0)
    http_timeout_seconds: float = Field(default=30, gt=0)  # per connect / read
    # Total time for one feed request (retries included) and for one provider's whole fetch: a
    # feed that drips bytes, or never stops, cannot hold a scrape for longer.
    http_request_deadline_seconds: float = Field(default=600, gt=0)
    scrape_run_deadline_seconds: float = Field(default=1800, gt=0)
    # An offer priced outside [floor, ceiling] per GPU-hour is a feed error: skipped, with a
    # warning on the run (5e-324 $/h would otherwise rank first).
    min_price_per_gpu_hour: float = Field(default=0.001, gt=0)
    max_price_per_gpu_hour: float = Field(default=200, gt=0)
    # A scrape that returns fewer offers than this fraction of the last good run is treated as
    # partial: a provider outage often looks like an almost-empty but valid response.
    min_offer_fraction: float = Field(default=0.5, ge=0, le=1)
    scheduler_enabled: bool = True
    # JSON list of scraper ids to run on the schedule, e.g. '["vastai","azure"]'; empty = all.
    enabled_scrapers: list[str] = Field(default_factory=list)
    first_run_spread_seconds: float = Field(default=60, ge=0)
    log_level: str = "INFO"
    # Per-visitor bounds: saved searches one browser may keep, and POSTs (save, rename, delete)
    # per browser and per client address, in `limits` notation ("N/second|minute|hour|day").
    # The counters live in each process: with W web workers a client gets up to W times these.
    max_saved_searches_per_owner: int = Field(default=50, ge=1)
    post_rate_limit_per_owner: str = "30/minute"
    post_rate_limit_per_address: str = "120/minute"
    # Served over HTTPS (directly or behind a TLS proxy): HSTS on every response, Secure cookies.
    https: bool = False
    # How long `gpufit serve` keeps an idle keep-alive connection. Longer than the idle timeout
    # of the proxies and clients in front (often 60 s): a server closing first races the next
    # request on that connection, which the client then sees as a reset.
    keep_alive_seconds: float = Field(default=75, gt=0)
    # /saved shows each saved view's counts as of the data version they were computed for and
    # refreshes stale ones in the background; a budget above 0 refreshes them in the request
    # first, while it lasts (fresher counts, slower first view after a scrape).
    saved_refresh_budget_ms: float = Field(default=0, ge=0)
    # How many recently opened table views (besides the default one) an ingest warms.
    warm_views: int = Field(default=8, ge=0, le=200)
    # Warm the current data version's views in the background when the app starts.
    warm_on_start: bool = True
    # The table views (/ and /api/offers) are kept rendered this long within one data version,
    # per process (app.web.page_cache); 0 turns it off. It bounds how late what changes without
    # an ingest shows: "last seen ... ago", a feed turning stale in the banner.
    page_cache_seconds: float = Field(default=30, ge=0, le=3600)
    page_cache_mb: int = Field(default=32, ge=1, le=4096)
    # Rendered table rows kept per process, reused while every value they show is the same
    # (app.web.row_cache; ~2 kB a row); 0 turns it off.
    row_cache_rows: int = Field(default=5_000, ge=0, le=200_000)
    # Postgres work_mem per session, in MB (0: the server's setting).
    pg_work_mem_mb: int = Field(default=DEFAULT_WORK_MEM_MB, ge=0, le=4096)
    # The most rows one streamed export (/export/offers.csv, .jsonl) may hold.
    export_max_rows: int = Field(default=1_000_000, ge=1)

    @field_validator("database_url")
    @classmethod
    def _normalize_driver(cls, value: str) -> str:
        # Plain postgres:// URLs (Heroku, docker) select psycopg2 by default; we ship psycopg 3.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value

    @field_validator("post_rate_limit_per_owner", "post_rate_limit_per_address")
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        from limits import parse

        parse(value)  # raises ValueError on anything `limits` cannot read
        return value

    @field_validator("providers")
    @classmethod
    def _lowercase_ids(cls, value: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        return {provider_key(key): item for key, item in value.items()}

    def provider(self, name: str) -> ProviderSettings:
        return self.providers.get(provider_key(name), ProviderSettings())

    def scraper_enabled(self, name: str) -> bool:
        """Whether the scheduler runs `name` (its own flag and the enabled_scrapers list)."""
        if self.enabled_scrapers and name not in self.enabled_scrapers:
            return False
        return self.provider(name).enabled

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@cache
def get_settings() -> Settings:
    """The process-wide settings (tests build their own Settings instead)."""
    return Settings()
