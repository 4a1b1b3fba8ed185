"""The Jinja2 environment (autoescaped everywhere) and the display filters the templates use."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from app.queries import LABELS
from app.store.models import utcnow

TEMPLATES_DIR = Path(__file__).resolve().parent.parent.parent / "templates"


def money(value: float | None, currency: str = "USD") -> str:
    """$1.23 (three decimals below ten cents, so cheap offers stay distinguishable)."""
    if value is None:
        return "—"
    prefix = "$" if currency == "USD" else f"{currency} "
    if abs(value) < 0.1:
        return f"{prefix}{value:,.3f}"
    return f"{prefix}{value:,.2f}"


def num(value: float | None, digits: int = 1) -> str:
    """A number with up to `digits` decimals and no trailing zeros; — for None."""
    if value is None:
        return "—"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def hours(value: float | None) -> str:
    """Durations: minutes below an hour, hours below two days, then days."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 60:.0f} min"
    if value < 48:
        return f"{value:.1f} h"
    return f"{value / 24:.1f} d"


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """'5 min ago', '3 h ago', '2 d ago'."""
    if value is None:
        return "never"
    seconds = max(0.0, ((now or utcnow()) - value).total_seconds())
    if seconds < 90:
        return "just now"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} d ago"


def label(value: str | None) -> str:
    """Display label of an enum value (nvswitch -> NVSwitch)."""
    if value is None:
        return "—"
    return LABELS.get(value, value)


def isotime(value: datetime | None) -> str:
    return "" if value is None else value.isoformat(timespec="seconds")


# Characters XML 1.0 forbids (and HTML parsers reject): C0 controls but tab and line breaks,
# lone surrogates, U+FFFE/U+FFFF. Stripped from every value a template writes, so a feed or a
# page stays well-formed whatever a stored name holds.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(value: object) -> object:
    """`value` with the characters XML cannot hold removed (strings only)."""
    if isinstance(value, str) and _NOT_XML.search(value):
        clean = _NOT_XML.sub("", value)
        return Markup(clean) if isinstance(value, Markup) else clean  # keep "already safe"
    return value


def make_templates() -> Jinja2Templates:
    """Templates with autoescaping on for every file: scraped strings are untrusted."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=xml_safe,
    )
    env.filters.update(money=money, num=num, hours=hours, ago=ago, label=label, isotime=isotime)
    return Jinja2Templates(env=env)


templates = make_templates()
