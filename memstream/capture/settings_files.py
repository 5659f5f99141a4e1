"""Editing other programs' settings files so that removing what memstream added gives back the same bytes.

Two formats, two techniques:

- JSON (Claude Code, Gemini CLI, Kimi's ``mcp.json``): the file is parsed, edited as data and written back
  in the style it was written in: :func:`json_style` finds the ``json.dumps`` options (indent, separators,
  final newline) that reproduce the file exactly (``JSON.stringify(x, null, 2)`` and compact
  ``JSON.stringify(x)`` both have one), so everything not edited keeps its bytes.
- TOML (Codex, Kimi's ``config.toml``): edited as text, by whole tables. A TOML file is a preamble of
  top-level keys and a sequence of tables, each from its ``[header]`` line to the next one.
  :func:`toml_sections` splits it so; memstream's tables are removed with their lines (the blank line
  memstream put before its block included) and added as a block of text at the end of the file. Neither
  touches a byte of the user's own tables. A structural editor (tomlkit) cannot do this: it loses blank
  lines around inserted tables and leaves them behind removed ones, and it cannot delete an element of an
  array of tables whose entries are split around other tables (``[[hooks.Stop]]`` before and after a
  ``[projects."…"]`` table that Codex appended), which Codex writes itself.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import Any

#: ``json.dumps`` options tried, in order, to reproduce a file's own style.
_JSON_STYLES: tuple[dict[str, Any], ...] = (
    {"indent": 2},
    {"indent": 4},
    {"indent": "\t"},
    {"indent": 3},
    {"separators": (",", ":")},
    {"separators": (", ", ": ")},
    {"indent": 2, "separators": (",", ":")},
)


@dataclass(frozen=True)
class JsonStyle:
    """How a JSON file was written: ``json.dumps`` keyword arguments and whether it ends with a newline."""

    options: tuple[tuple[str, Any], ...]
    newline: bool
    #: Non-ASCII characters escaped (``\u00e9``, Python's default) rather than written (JavaScript's).
    ascii_only: bool = False

    def dumps(self, data: Any) -> str:
        text = json.dumps(data, ensure_ascii=self.ascii_only, **dict(self.options))
        return text + ("\n" if self.newline else "")


#: For a new file: what the CLIs themselves write (``JSON.stringify(settings, null, 2)``) and a newline.
DEFAULT_JSON_STYLE = JsonStyle((("indent", 2),), True)


def json_style(text: str, data: Any) -> JsonStyle:
    """The style that reproduces ``text`` from ``data``; else the file's indent guessed from its lines."""
    newline = text.endswith("\n")
    for options in _JSON_STYLES:
        for ascii_only in (False, True):
            rendered = json.dumps(data, ensure_ascii=ascii_only, **options)
            if rendered == text.rstrip("\n") or rendered == text.strip():
                return JsonStyle(tuple(options.items()), newline, ascii_only)
    ascii_only = text.isascii() and "\\u" in text
    if "\n" not in text.strip():
        separators = (",", ":") if '":' in text and '": ' not in text else (", ", ": ")
        return JsonStyle((("separators", separators),), newline, ascii_only)
    indent = re.search(r"\n([ \t]+)\S", text)
    unit: Any = indent.group(1) if indent else 2
    if isinstance(unit, str) and set(unit) == {" "}:
        unit = len(unit)
    return JsonStyle((("indent", unit),), newline, ascii_only)


# --- TOML ------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*(\]\]?)\s*(#.*)?$")


@dataclass
class Section:
    """A table of a TOML file: its header's key path (None for the preamble), its lines (ending ``\\n``)."""

    key: tuple[str, ...] | None
    array: bool
    lines: list[str]

    def body(self) -> dict[str, Any]:
        """The table's own keys (its header left out), parsed; empty if they do not parse alone."""
        try:
            return tomllib.loads("".join(self.lines[0 if self.key is None else 1 :]))
        except tomllib.TOMLDecodeError:
            return {}


def _split_key(text: str) -> tuple[str, ...]:
    """A dotted TOML key (``mcp_servers."my server".env``) as its parts."""
    parts = re.findall(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+)\s*(?:\.|$)', text)
    return tuple(json.loads(p) if p.startswith('"') else p.strip("'") for p in parts)


def toml_sections(text: str) -> list[Section]:
    """The file as its preamble and its tables, in order; joining every section's lines gives ``text``."""
    sections = [Section(None, False, [])]
    quote: str | None = None  # inside a multi-line string opened by this delimiter
    for line in text.splitlines(keepends=True):
        match = _HEADER.match(line) if quote is None else None
        if match and (match.group(1) == "[[") == (match.group(3) == "]]"):
            sections.append(Section(_split_key(match.group(2)), match.group(1) == "[[", [line]))
            continue
        sections[-1].lines.append(line)
        for delimiter in ('"""', "'''"):
            if quote in (None, delimiter) and line.count(delimiter) % 2 == 1:
                quote = None if quote == delimiter else delimiter
    return sections


def join(sections: list[Section]) -> str:
    return "".join("".join(s.lines) for s in sections)


def remove_sections(text: str, doomed: list[bool]) -> str:
    """``text`` without the sections flagged in ``doomed`` (index-aligned with :func:`toml_sections`).

    A run of removed tables that ends the file takes the blank line before it along: :func:`append_block`
    put it there.
    """
    sections = toml_sections(text)
    kept = [s for s, gone in zip(sections, doomed, strict=True) if not gone]
    if doomed and doomed[-1] and kept:
        last = kept[-1].lines
        if last and last[-1].strip() == "" and (len(last) > 1 or kept[-1].key is not None or len(kept) > 1):
            last.pop()
    return join(kept)


def append_block(text: str, block: str) -> str:
    """``text`` with ``block`` (whole tables) at its end, after one blank line."""
    if not text.strip():
        return text + block
    return text + ("\n" if text.endswith("\n") else "\n\n") + block


def toml_value(value: Any) -> str:
    """A value as TOML text (strings escaped as TOML wants them)."""
    import tomlkit

    if isinstance(value, dict):  # inline, so that it stays within the table it belongs to
        table = tomlkit.inline_table()
        table.update(value)
        return str(table.as_string())
    return str(tomlkit.item(value).as_string())


def parses(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
