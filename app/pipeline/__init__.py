"""Feeds to store: scrapes, ingest, freshness, sample; uses store, core, scrapers, never web/api."""
