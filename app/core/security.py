"""Security headers and request size limits (pure ASGI middleware), and the check that keeps
control characters out of every path, query and form value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, get_args, get_origin

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024  # forms here are tiny; anything bigger is abuse

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
# FastAPI's interactive docs load their own scripts; they get the other headers but not the CSP.
CSP_EXEMPT_PREFIXES = ("/docs", "/redoc")


HSTS = (b"strict-transport-security", b"max-age=31536000; includeSubDomains")
# Responses that depend on the browser's owner cookie: never stored by any cache.
PER_OWNER_PATHS = ("/saved", "/saved.csv", "/api/saved")
NO_STORE = b"no-store"
# Every other page embeds the browser's form token: private (no shared cache), revalidated.
HTML_CACHE = b"private, no-cache"


def cache_control(path: str, headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The Cache-Control a response needs, or None to leave it as it is."""
    names = {name.lower() for name, _ in headers}
    if b"cache-control" in names:
        return None
    per_owner = path in PER_OWNER_PATHS or (
        path.startswith("/saved/") and not path.endswith(".atom")
    )
    if per_owner or b"set-cookie" in names:
        return NO_STORE
    content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
    return HTML_CACHE if content_type.startswith(b"text/html") else None


class SecurityHeadersMiddleware:
    """Add CSP (no inline script), nosniff, frame-ancestors/X-Frame-Options, referrer policy,
    Cache-Control for per-browser responses and, with `hsts`, Strict-Transport-Security."""

    def __init__(self, app: ASGIApp, hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        exempt = path.startswith(CSP_EXEMPT_PREFIXES)
        extra = [h for h in SECURITY_HEADERS if not (exempt and h[0] == b"content-security-policy")]
        if self.hsts:
            extra.append(HSTS)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [h for h in extra if h[0] not in present]
                cache = cache_control(path, headers)
                if cache is not None:
                    headers.append((b"cache-control", cache))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadMiddleware:
    """HEAD on every GET route: the GET's status and headers, without the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)


class BodySizeLimitMiddleware:
    """Answer 413 for request bodies over `max_bytes`, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _too_large(send, self.max_bytes)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await _too_large(send, self.max_bytes)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = f'{{"detail": "request body larger than {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), *SECURITY_HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": body})


# --- text input ------------------------------------------------------------------------------

# C0 controls and DEL (NUL breaks Postgres text and XML; the rest have no business in a URL or a
# form), plus the Unicode non-characters U+FFFE/U+FFFF, invalid in XML. Form text may hold
# tabs and line breaks.
_URL_CONTROL = re.compile("[\x00-\x1f\x7f\ufffe\uffff]")
_FORM_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _shown_name(name: str) -> str:
    return _URL_CONTROL.sub("?", name)[:100] or "?"


def _error(where: str, name: str) -> dict[str, Any]:
    return {
        "type": "control_character",
        "loc": (where, _shown_name(name)),
        "msg": "must not contain control characters (such as NUL)",
        "input": None,
    }


async def reject_control_characters(request: Request) -> None:
    """FastAPI dependency for every route: a 422 naming each path, query or form field that
    holds a control character, before any of it reaches the database or a page."""
    errors = [
        _error("path", name)
        for name, value in request.path_params.items()
        if isinstance(value, str) and _URL_CONTROL.search(value)
    ]
    errors += [
        _error("query", name)
        for name, value in request.query_params.multi_items()
        if _URL_CONTROL.search(name) or _URL_CONTROL.search(value)
    ]
    if request.method == "POST" and request.headers.get("content-type", "").startswith(_FORM_TYPES):
        form = await request.form()
        errors += [
            _error("body", name)
            for name, value in form.multi_items()
            if _URL_CONTROL.search(name) or (isinstance(value, str) and _FORM_CONTROL.search(value))
        ]
    errors += [
        {**_error("query", name), "type": "repeated", "msg": "give this parameter once"}
        for name in _repeated_scalars(request)
    ]
    if errors:
        raise RequestValidationError(errors)


def _repeated_scalars(request: Request) -> list[str]:
    """Query parameters given more than once although the route takes a single value
    (FastAPI would silently keep the last one)."""
    counts: dict[str, int] = {}
    for name, _ in request.query_params.multi_items():
        counts[name] = counts.get(name, 0) + 1
    repeated = [name for name, n in counts.items() if n > 1]
    if not repeated:
        return []
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return []
    scalars = _scalar_query_names(dependant)
    return [name for name in repeated if name in scalars]


_SCALARS: dict[int, frozenset[str]] = {}


def _scalar_query_names(dependant: Any) -> frozenset[str]:
    """Names of a route's single-valued query parameters (query models expanded), cached."""
    key = id(dependant)
    found = _SCALARS.get(key)
    if found is None:
        names: set[str] = set()
        pending = [dependant]
        while pending:
            current = pending.pop()
            pending.extend(current.dependencies)
            for field in current.query_params:
                annotation = field.field_info.annotation
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    for name, info in annotation.model_fields.items():
                        if not _is_sequence(info.annotation):
                            names.add(info.alias or name)
                elif not _is_sequence(annotation):
                    names.add(field.alias)
        found = _SCALARS[key] = frozenset(names)
    return found


def _is_sequence(annotation: Any) -> bool:
    """list[str], tuple[...], set[...] or an Optional/Union of one."""
    origin = get_origin(annotation)
    if isinstance(origin, type) and issubclass(origin, Sequence | set | frozenset):
        return not issubclass(origin, str | bytes)
    return any(_is_sequence(arg) for arg in get_args(annotation) if arg is not type(None))
