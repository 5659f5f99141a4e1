"""MkDocs hook: the configuration reference, generated from ``memstream/settings.py`` at build time.

A page holding the marker below gets, in its place, one table per section of the Settings class (its
``# --- section ---`` comments): each variable, its default, its range or choices, and its meaning from
``settings_table()``, which reads the ``#:`` comment above each field. The reference therefore cannot
drift from the settings memstream actually reads.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

MARKER = "<!-- settings-reference -->"
_SECTION = re.compile(r"^\s*# --- (.+?) -+\s*$")
_FIELD = re.compile(r"^\s{4}(\w+): ")


def sections() -> dict[str, str]:
    """Each setting's variable → the section of the Settings class it is declared in."""
    from memstream.settings import Settings

    env = {f.name: f.metadata["env"] for f in dataclasses.fields(Settings)}
    found: dict[str, str] = {}
    section = ""
    for line in inspect.getsource(Settings).splitlines():
        if match := _SECTION.match(line):
            section = match.group(1).strip()
        elif (match := _FIELD.match(line)) and match.group(1) in env:
            found[env[match.group(1)]] = section
    return found


def _allowed(f: dataclasses.Field[Any]) -> str:
    if "choices" in f.metadata:
        return " or ".join(f"`{c}`" for c in f.metadata["choices"])
    if "range" in f.metadata:
        low, high = f.metadata["range"]
        return f"{'' if low is None else low} to {'' if high is None else high}".strip()
    return ""


def render() -> str:
    from memstream.settings import Settings, settings_table

    by_env = {f.metadata["env"]: f for f in dataclasses.fields(Settings)}
    section_of = sections()
    out: list[str] = []
    current = None
    for variable, default, meaning in settings_table():
        if section_of[variable] != current:
            current = section_of[variable]
            out += ["", f"### {current[:1].upper()}{current[1:]}", ""]
            out += ["| variable | default | allowed | meaning |", "|---|---|---|---|"]
        shown = f"`{default}`" if default else "(empty)"
        text = meaning.replace("``", "`").replace("|", "\\|")
        out.append(f"| `{variable}` | {shown} | {_allowed(by_env[variable])} | {text} |")
    return "\n".join(out).strip() + "\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown
