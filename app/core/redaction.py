"""Secrets never leave settings: configured keys, and the tokens a request carried, are replaced
by `[REDACTED]` in log records, stored scrape errors and pages.

Two layers: a registry of known secret values (every provider key and secret in settings, the
database password, and credentials the HTTP helper sends, such as an OAuth access token) and,
as a net under it, credential-shaped text (`key=...`, `Bearer ...`, `"client_secret": "..."`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED]"
# Shorter values would redact ordinary words ("secret"); no real API key is this short.
MIN_SECRET_CHARS = 8
# Runtime credentials (a fresh OAuth token every run) are kept for the last few runs only.
MAX_RUNTIME_SECRETS = 64

_NAMES = (
    r"(?:api[_-]?key|apikey|key|access[_-]?token|refresh[_-]?token|id[_-]?token|token"
    r"|client[_-]?secret|secret|password|passwd)"
)
# "Bearer abc...", and "Basic <base64>" as an Authorization header carries it.
_AUTH_VALUE = re.compile(
    r"(?i:\b(bearer))(\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{6,}"
    r"|\b(Basic)(\s+)[A-Za-z0-9+/]{12,}=*"
)
# name=value in URLs, forms and free text (a name glued to a word, e.g. pageToken, is not one).
_KEY_VALUE = re.compile(rf"(?i)((?<![A-Za-z0-9_]){_NAMES}=)(?!\[REDACTED\])[^&\s\"'<>,;)}}\]]+")
# "name": "value" in JSON, and "X-Api-Key: value" headers echoed back.
_KEY_COLON = re.compile(
    rf"(?i)((?<![A-Za-z0-9_])[\"']?{_NAMES}[\"']?[ \t]*:[ \t]*[\"']?)(?!\[REDACTED\])[^\"'\s,}}&]+"
)

_lock = threading.Lock()
_configured: set[str] = set()
_runtime: deque[str] = deque(maxlen=MAX_RUNTIME_SECRETS)
_pattern: re.Pattern[str] | None = None


def _variants(value: str) -> set[str]:
    # The forms a value takes once sent: raw, percent-encoded (URLs, forms) and JSON-escaped.
    return {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}


def _rebuild() -> None:
    global _pattern
    values: set[str] = set()
    for secret in (*_configured, *_runtime):
        values |= {v for v in _variants(secret) if len(v) >= MIN_SECRET_CHARS}
    if not values:
        _pattern = None
        return
    alternatives = sorted(values, key=len, reverse=True)  # longest first: no partial leftovers
    _pattern = re.compile("|".join(re.escape(v) for v in alternatives))


def register_secrets(values: Iterable[str | None], *, runtime: bool = False) -> None:
    """Remember secret values so `redact` removes them; `runtime` ones are kept for a while.
    Log records are redacted from then on, whoever logs (not only once logging is configured)."""
    install_log_redaction()
    fresh = [v for v in values if v and len(v) >= MIN_SECRET_CHARS]
    with _lock:
        known = _configured | set(_runtime)
        new = [v for v in fresh if v not in known]
        if not new:
            return
        for value in new:
            if runtime:
                _runtime.append(value)
            else:
                _configured.add(value)
        _rebuild()


def register_settings(settings: Any) -> None:
    """Register every provider key and secret and the database password of a Settings object."""
    values: list[str | None] = []
    for provider in getattr(settings, "providers", {}).values():
        values += [provider.api_key, provider.api_secret]
    url = getattr(settings, "database_url", "")
    if url:
        from sqlalchemy.engine import make_url

        try:
            values.append(make_url(url).password)
        except Exception:  # noqa: BLE001 - an unparsable URL has no password to hide
            pass
    register_secrets(values)


def redact(text: str) -> str:
    """The text with every known secret and credential-shaped value replaced by [REDACTED]."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    text = _AUTH_VALUE.sub(_auth_sub, text)
    text = _KEY_VALUE.sub(rf"\1{REDACTED}", text)
    return _KEY_COLON.sub(rf"\1{REDACTED}", text)


def _auth_sub(match: re.Match[str]) -> str:
    scheme, space = (match.group(1), match.group(2)) if match.group(1) else match.group(3, 4)
    return f"{scheme}{space}{REDACTED}"


def redact_record(record: logging.LogRecord) -> None:
    """Redact a log record in place: its message, its arguments and its exception text."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a broken format string is logging's own problem
        return
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def install_log_redaction() -> None:
    """Redact every log record as it is created, before any handler (or test) sees it."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "gpufit_redacting", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record)
        return record

    factory.gpufit_redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def forget_secrets() -> None:
    """Empty the registry (tests start each case from a clean one)."""
    with _lock:
        _configured.clear()
        _runtime.clear()
        _rebuild()
