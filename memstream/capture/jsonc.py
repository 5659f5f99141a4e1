"""JSON with comments (JSONC), edited in place: what gemini-cli (and VS Code) accept as settings.

:func:`loads` reads ``//`` and ``/* */`` comments; :func:`edit` turns one document into another by
rewriting only the members and array items that changed, so that every comment, blank line and hand-made
indentation elsewhere keeps its bytes, and a member appended then removed gives back the original text.
Pure: strings in, strings out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def strip_comments(text: str) -> str:
    """``text`` with each comment blanked (spaces, newlines kept): offsets stay those of ``text``."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if text[j] != "\n":
                    out[j] = " "
            i = end
            continue
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """Parse JSONC (raises ``ValueError`` as :func:`json.loads` does)."""
    return json.loads(strip_comments(text))


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    #: Object members (key, member start, value node) or array items (None, start, node), in order.
    members: list[tuple[str | None, int, _Node]] = field(default_factory=list)
    container: bool = False


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = strip_comments(text)
        self.decoder = json.JSONDecoder()

    def ws(self, i: int) -> int:
        while i < len(self.s) and self.s[i] in " \t\r\n":
            i += 1
        return i

    def node(self, i: int) -> _Node:
        i = self.ws(i)
        c = self.s[i]
        if c not in "{[":
            value, end = self.decoder.raw_decode(self.s, i)
            return _Node(i, end, value)
        close = "}" if c == "{" else "]"
        node = _Node(i, i, {} if c == "{" else [], container=True)
        j = self.ws(i + 1)
        while self.s[j] != close:
            key = None
            start = j
            if c == "{":
                key, j = self.decoder.raw_decode(self.s, j)
                j = self.ws(j)
                assert self.s[j] == ":"
                j += 1
            child = self.node(j)
            node.members.append((key, start, child))
            j = self.ws(child.end)
            if self.s[j] == ",":
                j = self.ws(j + 1)
        node.end = j + 1
        return node


def _indent_at(text: str, pos: int) -> str:
    line = text.rfind("\n", 0, pos) + 1
    return text[line : line + len(text[line:]) - len(text[line:].lstrip(" \t"))]


def _dumps(value: Any, indent: str, step: str) -> str:
    return json.dumps(value, indent=len(step), ensure_ascii=False).replace("\n", "\n" + indent)


def edit(text: str, new: Any) -> str:
    """``text`` (JSONC) changed to hold ``new``, rewriting only what differs."""
    parser = _Parser(text)
    root = parser.node(0)
    edits: list[tuple[int, int, str]] = []
    _patch(text, root, new, edits)
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _patch(text: str, node: _Node, new: Any, edits: list[tuple[int, int, str]]) -> None:
    old = json.loads(strip_comments(text)[node.start : node.end])
    if old == new:
        return
    indent = _indent_at(text, node.start)
    step = "  "
    if node.members:
        step = _indent_at(text, node.members[0][1])[len(indent) :] or "  "
    is_object = isinstance(old, dict) and isinstance(new, dict)
    is_array = isinstance(old, list) and isinstance(new, list)
    if not node.container or not (is_object or is_array):
        edits.append((node.start, node.end, _dumps(new, indent, step)))
        return
    kept: list[tuple[str | None, int, _Node]] = []
    if is_object:
        for key, start, child in node.members:
            if key in new:
                _patch(text, child, new[key], edits)
                kept.append((key, start, child))
        extra = [(k, v) for k, v in new.items() if k not in old]
    else:
        want = list(new)
        for key, start, child in node.members:
            if want and json.loads(strip_comments(text)[child.start : child.end]) == want[0]:
                want.pop(0)
                kept.append((key, start, child))
        # Items kept in order and new ones appended: anything else is rewritten whole.
        kept_values = [json.loads(strip_comments(text)[c.start : c.end]) for _, _, c in kept]
        if new[: len(kept_values)] != kept_values:
            edits.append((node.start, node.end, _dumps(new, indent, step)))
            return
        extra = [(None, v) for v in new[len(kept_values) :]]
    # Remove the members that went: a leading run up to the first member kept; any other from the end of
    # the member before it (its comma) to its own end, so that an appended member goes without a trace.
    members = node.members
    if not kept:
        if members:
            edits.append((node.start + 1, node.end - 1, ""))
    else:
        first_kept = next(i for i, member in enumerate(members) if member in kept)
        if first_kept:
            edits.append((members[0][1], members[first_kept][1], ""))
        for index in range(first_kept + 1, len(members)):
            if members[index] not in kept:
                edits.append((members[index - 1][2].end, members[index][2].end, ""))
    if extra:
        inner = indent + step
        parts = [
            f"\n{inner}" + (f"{json.dumps(k, ensure_ascii=False)}: " if k is not None else "") + _dumps(v, inner, step)
            for k, v in extra
        ]
        if kept:
            edits.append((kept[-1][2].end, kept[-1][2].end, "," + ",".join(parts)))
        else:
            edits.append((node.start + 1, node.end - 1, ",".join(parts) + f"\n{indent}"))
