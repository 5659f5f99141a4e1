"""What every adapter does the same way: decode a record, read a timestamp, build and order turns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memstream.capture.model import CapturedTurn, Problem, RawRecord, Source

#: Epoch values above this are milliseconds, not seconds (year 5138 in seconds).
_MILLISECONDS_FROM = 100_000_000_000


def load(record: RawRecord, file: str, problems: list[Problem]) -> dict[str, Any] | None:
    """The record's JSON object, or None (and a problem) if it is not one."""
    try:
        value = json.loads(record.text)
    except (ValueError, RecursionError) as error:
        problems.append(Problem(file, record.line, f"invalid JSON: {error}"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(file, record.line, f"a JSON {type(value).__name__} where an object was expected"))
        return None
    return value


def utc(value: object, fallback: datetime) -> datetime:
    """A record's timestamp (ISO 8601 text or epoch seconds/milliseconds) in UTC; ``fallback`` if absent/bad."""
    if isinstance(value, bool):
        return fallback
    if isinstance(value, int | float):
        seconds = value / 1000 if value > _MILLISECONDS_FROM else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return fallback
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            return fallback
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return fallback


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive datetime is taken as UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(slots=True)
class Draft:
    """A turn being assembled from one or more records."""

    role: str
    ts: datetime
    line: int
    session_id: str
    project: str = ""
    model: str = ""
    message_id: str = ""
    parts: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        # A response rewritten whole (a resumed copy, a re-appended record) repeats a part: keep it once.
        if text and text not in self.parts:
            self.parts.append(text)

    @property
    def content(self) -> str:
        return "\n\n".join(part.strip() for part in self.parts if part.strip())


def finish(drafts: list[Draft], *, source: Source, file: str) -> list[CapturedTurn]:
    """Drafts with text, as turns in time order (stable: records with equal or no time keep file order)."""
    turns = [
        CapturedTurn(
            source=source,
            session_id=draft.session_id,
            role=draft.role,
            content=draft.content,
            ts=draft.ts,
            file=file,
            line=draft.line,
            project=draft.project,
            model=draft.model,
            message_id=draft.message_id,
        )
        for draft in drafts
        if draft.content
    ]
    turns.sort(key=lambda turn: turn.ts)  # list.sort is stable
    return turns


def text_of(value: object) -> str:
    """The text of a string, or of a list of parts/blocks that carry ``text`` (other parts are not text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value["text"] if isinstance(value.get("text"), str) and not value.get("thought") else ""
    if isinstance(value, list):
        return "\n\n".join(piece for piece in (text_of(item) for item in value) if piece.strip())
    return ""
