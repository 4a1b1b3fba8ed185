"""One exception handler, two outputs: JSON for API clients, an error page for browsers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from markupsafe import escape
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("gpufit.errors")


def wants_html(request: Request) -> bool:
    """Browsers asking for a page get HTML; /api/*, .json and .csv clients get JSON."""
    path = request.url.path
    if path.startswith("/api/") or path.endswith((".json", ".csv", ".atom")):
        return False
    return "text/html" in request.headers.get("accept", "")


def _field_name(error: dict[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ()) if part not in ("query", "body", "path")]
    return ".".join(loc) or "request"


def _html_error(
    status: int, title: str, lines: list[str], headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    body = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f'<link rel=stylesheet href="/static/app.css"></head><body><main class=error-page>'
        f'<h1>{escape(title)}</h1><ul>{items}</ul><p><a href="/">Back to offers</a></p>'
        f"</main></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers=headers)


def error_response(
    request: Request,
    status: int,
    title: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An error as the client wants it: a page for browsers, {"detail": message} otherwise."""
    if wants_html(request):
        return _html_error(status, title, [message], headers)
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register handlers so no error reaches a user as a stack trace."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {
                "loc": list(e.get("loc", ())),
                "field": _field_name(e),
                "msg": e.get("msg", ""),
                "type": str(e.get("type", "value_error")),
            }
            for e in exc.errors()
        ]
        if wants_html(request):
            return _html_error(
                422,
                "Some filter values are not valid",
                [f"{e['field']}: {e['msg']}" for e in errors],
            )
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if wants_html(request):
            return _html_error(exc.status_code, str(exc.detail), [], exc.headers)
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        message = "internal error; it has been logged"
        if wants_html(request):
            return _html_error(500, "Something went wrong", [message])
        return JSONResponse({"detail": message}, status_code=500)
