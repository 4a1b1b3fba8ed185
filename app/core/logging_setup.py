"""Structured (JSON lines) logging, so scrape runs can be searched by provider and status.

Every line passes through app.core.redaction: no configured key or secret is ever written.
httpx and httpcore log each request URL at INFO (with any key in its query string), so they are
kept at WARNING.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from app.core.redaction import install_log_redaction, redact, register_settings

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
QUIET_LOGGERS = ("httpx", "httpcore", "hpack")


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the message and any `extra=` fields, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "msg": record.getMessage(),
        }
        payload.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            payload["exc"] = record.exc_text or self.formatException(record.exc_info)
        clean = {k: redact(v) if isinstance(v, str) else v for k, v in payload.items()}
        return redact(json.dumps(clean, default=str))


def configure_logging(level: str = "INFO", settings: Any = None) -> None:
    """JSON lines on stderr at `level`, with the settings' secrets registered for redaction."""
    if settings is not None:
        register_settings(settings)
    install_log_redaction()
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
