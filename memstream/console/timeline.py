"""Sessions as timelines, built from the memories a session made (the store is what the console reads).

One entry per exchange: the ``[user] …`` / ``[assistant] …`` turns the memory kept as its source, in
the order the session file holds them (its line, then when the memory was made), each with the
memories it produced. A session's title is its first prompt. What was forgotten from the session is
listed apart, so the timeline shows what its next reader gets and what was taken out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memstream.rules.forgotten import taken_out
from memstream.schemas import Memory

#: A turn's role mark as snapshots write it (``memstream.rules.snapshot``): at a line's start or inline.
ROLE = re.compile(r"\[(user|assistant|system|tool)\] ")
#: The longest title shown for a session.
TITLE_CHARS = 90


def turns_of(chunk: str) -> list[tuple[str, str]]:
    """(role, text) of each turn in an exchange's kept text, in order; an unmarked text is one turn."""
    marks = list(ROLE.finditer(chunk))
    if not marks:
        return [("", chunk.strip())] if chunk.strip() else []
    found = []
    if chunk[: marks[0].start()].strip():
        found.append(("", chunk[: marks[0].start()].strip()))
    for here, after in zip(marks, [*marks[1:], None], strict=True):
        text = chunk[here.end() : after.start() if after else len(chunk)].strip()
        found.append((here.group(1), text))
    return found


@dataclass
class Exchange:
    where: str
    turns: list[tuple[str, str]]
    memories: list[Memory] = field(default_factory=list)


@dataclass(frozen=True)
class Timeline:
    title: str
    exchanges: list[Exchange]
    forgotten: list[Memory]


def _place(memory: Memory, session_id: str) -> tuple[str, int]:
    for s in memory.sources:
        if s.session_id == session_id and s.file:
            return s.file, s.line or 0
    return "", 0


def timeline(session_id: str, made: Sequence[Memory]) -> Timeline:
    """The session's exchanges in order, each with its own turns and the memories it produced."""
    exchanges: dict[str, Exchange] = {}
    order: dict[str, tuple[int, datetime, str]] = {}
    for m in sorted(made, key=lambda m: (m.created_at, m.id)):
        file, line = _place(m, session_id)
        # The same kept text is the same exchange, whichever memories came of it.
        key = " ".join(m.source_chunk.split()) or f"memory:{m.id}"
        entry = exchanges.get(key)
        if entry is None:
            where = f"{file}:{line}" if file and line else file or "(no file recorded)"
            entry = exchanges[key] = Exchange(where, turns_of(m.source_chunk))
            order[key] = (line, m.created_at, m.id)
        entry.memories.append(m)
    ordered = [exchanges[k] for k in sorted(exchanges, key=lambda k: order[k])]
    forgotten = [m for m in made if taken_out(m.superseded_by)]
    return Timeline(title_of(ordered), ordered, forgotten)


def title_of(exchanges: Sequence[Exchange]) -> str:
    """The session's first prompt (its first user turn), cut to a line."""
    for exchange in exchanges:
        for role, text in exchange.turns:
            if role == "user" and text:
                line = " ".join(text.split())
                return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return ""


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    title: str
    project: str
    source: str
    first: datetime
    last: datetime
    exchanges: int
    memories: int


def session_rows(listed: Sequence[Memory], limit: int | None = None) -> list[SessionRow]:
    """The sessions these memories came from, newest first, each titled by its first prompt; the newest
    ``limit`` only (a session's timeline, which gives its title, is built for the ones shown)."""
    grouped: dict[str, list[Memory]] = {}
    for m in listed:
        for sid in {m.session_id, *(s.session_id for s in m.sources)} - {""}:
            grouped.setdefault(sid, []).append(m)
    newest = sorted(grouped.items(), key=lambda item: max(m.updated_at for m in item[1]), reverse=True)
    rows = []
    for sid, made in newest[:limit]:
        line = timeline(sid, made)
        source = next((s.source_type for m in made for s in m.sources if s.session_id == sid and s.source_type), "")
        project = next((m.project for m in made if m.project), "")
        rows.append(
            SessionRow(
                sid,
                line.title,
                project,
                source,
                min(m.created_at for m in made),
                max(m.updated_at for m in made),
                len(line.exchanges),
                len(made),
            )
        )
    return sorted(rows, key=lambda r: r.last, reverse=True)
