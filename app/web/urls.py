"""Query-string helpers: the URL is the state, so every link is the current query plus a change.

Arguments are an ordered list of (key, value) pairs, as `request.query_params.multi_items()`
gives them; helpers return new lists and `qs` renders a canonical query string (blank values
dropped). Changing a filter drops `offset` and `after`, so a narrowed view starts on its first
page.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlencode

from starlette.requests import Request

Args = list[tuple[str, str]]

# Table formats sharing one query string: (path, media type).
TABLE_FORMATS = (
    ("/", "text/html"),
    ("/api/offers", "application/json"),
    ("/offers.csv", "text/csv"),
)


def args_of(request: Request) -> Args:
    """The request's query arguments without blanks (an empty form field is no argument)."""
    return clean(request.query_params.multi_items())


def clean(args: Iterable[tuple[str, str]]) -> Args:
    """Drop blank values; keep order and repeats."""
    return [(k, v) for k, v in args if v is not None and str(v).strip() != ""]


def qs(args: Iterable[tuple[str, str]]) -> str:
    """Canonical query string (no leading '?'), blanks dropped."""
    return urlencode(clean(args))


def url(path: str, args: Iterable[tuple[str, str]]) -> str:
    """`path` with the query string of `args` (no '?' when empty)."""
    query = qs(args)
    return f"{path}?{query}" if query else path


def without(args: Args, *keys: str) -> Args:
    """`args` minus every value of `keys`."""
    return [(k, v) for k, v in args if k not in keys]


# Where the page starts: an offset, or a keyset cursor (`after`); setting one drops the other.
PAGE_START = ("offset", "after")


def replace(args: Args, key: str, value: str | None) -> Args:
    """Set `key` to one value (None removes it); resets the page unless `key` is the page."""
    if key in PAGE_START:
        drop: tuple[str, ...] = PAGE_START
    elif key == "limit":
        drop = (key,)
    else:
        drop = (key, *PAGE_START)
    out = without(args, *drop)
    if value is not None:
        out.append((key, value))
    return out


def toggle(args: Args, key: str, value: str) -> Args:
    """Add `value` to a multi-valued `key`, or remove it if present; resets the page."""
    present = (key, value) in args
    out = [(k, v) for k, v in args if k not in PAGE_START and (k, v) != (key, value)]
    if not present:
        out.append((key, value))
    return out


def is_set(args: Args, key: str, value: str) -> bool:
    return (key, value) in args


def values(args: Args, key: str) -> list[str]:
    return [v for k, v in args if k == key]


def first(args: Args, key: str, default: str = "") -> str:
    found = values(args, key)
    return found[0] if found else default


def alternate_links(
    request: Request, twins: Iterable[tuple[str, str]] = TABLE_FORMATS
) -> dict[str, str]:
    """`Link: rel="alternate"` header naming the other formats of a page, same query string."""
    query = qs(request.query_params.multi_items())
    suffix = f"?{query}" if query else ""
    parts = [
        f'<{path}{suffix}>; rel="alternate"; type="{media}"'
        for path, media in twins
        if path != request.url.path
    ]
    return {"link": ", ".join(parts)}
