"""Escaping templates: every value is escaped unless it is already ``Html`` built here.

Memory text comes from conversations, so it is untrusted input. The templates are Python
format strings whose values go through :func:`render`, which escapes anything that is not
:class:`Html` (for text and attribute values alike: quotes included). Nothing is ever
rendered as markdown or as markup from a memory: a ``<script>`` is shown as text, and a
``[link](javascript:…)`` stays a bracket, a parenthesis and the letters between.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any


class Html(str):
    """Markup this module built (or a template's own text): not escaped again."""

    __slots__ = ()


def esc(value: Any) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def render(template: str, **values: Any) -> Html:
    """``template`` (trusted) with each ``{name}`` replaced by its value, escaped unless ``Html``."""
    return Html(template.format(**{k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Html], sep: str = "") -> Html:
    return Html(sep.join(esc(p) for p in parts))


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """A same-origin URL: path segments quoted, parameters encoded (escaped again when rendered)."""
    query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v not in (None, "", False)})
    return path + (f"?{query}" if query else "")


def when(value: datetime | None) -> Html:
    if value is None:
        return Html("")
    return render('<time datetime="{iso}">{shown}</time>', iso=value.isoformat(), shown=f"{value:%Y-%m-%d %H:%M}")


def options(choices: Iterable[tuple[str, str]], selected: str) -> Html:
    return join(
        render(
            '<option value="{value}"{sel}>{label}</option>',
            value=value,
            label=label,
            sel=Html(" selected") if value == selected else Html(""),
        )
        for value, label in choices
    )
