"""A bound on what one visitor can make the server do: POSTs per browser and per client address.

Pure ASGI middleware over the `limits` library (moving windows, in-process memory). Every POST
counts, accepted or not, against its client address and, when the request carries one, its
owner cookie; the first limit exceeded answers 429 with Retry-After and a message saying which.
The counters are per process: with W web workers a visitor gets up to W times the limits.
"""

from __future__ import annotations

import hashlib
import math
import time

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import Request, cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import error_response


class PostRateLimitMiddleware:
    """429 for POSTs beyond `per_owner` (by the `cookie` value) or `per_address` (client IP)."""

    def __init__(self, app: ASGIApp, *, per_owner: str, per_address: str, cookie: str) -> None:
        self.app = app
        self.cookie = cookie
        self.limits: list[tuple[str, RateLimitItem]] = [
            ("address", parse(per_address)),
            ("owner", parse(per_owner)),
        ]
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        keys = {"address": _address(scope), "owner": self._owner(scope)}
        for kind, limit in self.limits:
            key = keys[kind]
            if key is not None and not self.limiter.hit(limit, kind, key):
                reset = self.limiter.get_window_stats(limit, kind, key).reset_time
                retry_after = max(1, math.ceil(reset - time.time()))
                who = "this browser" if kind == "owner" else "your network address"
                message = (
                    f"Too many changes from {who}: at most {limit.amount} per "
                    f"{_period(limit)}. Try again in {retry_after} s."
                )
                headers = {"Retry-After": str(retry_after)}
                response = error_response(
                    Request(scope), 429, "Too many requests", message, headers
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _owner(self, scope: Scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                token = cookie_parser(value.decode("latin-1")).get(self.cookie)
                if token:
                    # Hashed: a bounded key per browser whatever the cookie holds.
                    return hashlib.sha256(token.encode()).hexdigest()[:32]
        return None


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _period(limit: RateLimitItem) -> str:
    unit = limit.GRANULARITY.name
    return unit if limit.multiples == 1 else f"{limit.multiples} {unit}s"
