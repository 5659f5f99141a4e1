"""What an adapter reads from a session file, and what it hands to the ingest machinery.

Adapters are pure: ``records in -> CapturedTurn out``. They never publish, hash, checkpoint or touch the
broker; the ingest machinery does all of that with what is here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class Source(enum.StrEnum):
    """The coding CLI a session file belongs to (the capture spec's ``llm_source``)."""

    CLAUDE = "claude"
    CODEX = "codex"
    GEMINI = "gemini"
    KIMI = "kimi"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of a session file as read from disk: a JSONL line, or one element of a JSON document.

    ``line`` is 1-based (for a single-JSON file, the line where the element starts, or 1); ``offset`` is
    the byte offset just past the record, so a reader can resume after it; ``start`` is the byte offset
    where the record's line begins (-1 when the producer does not know it), so a reader can resume before it.
    """

    line: int
    offset: int
    text: str
    start: int = -1


@dataclass(frozen=True, slots=True)
class CapturedTurn:
    """One human-visible message of a session: a user prompt or the assistant's text reply."""

    source: Source
    session_id: str
    role: str  # "user" or "assistant"
    content: str
    ts: datetime  # UTC; the record's own timestamp, else the file's modification time
    file: str  # absolute path of the session file
    line: int  # 1-based line of the (first) record the message came from
    project: str = ""  # the project directory (cwd), or the CLI's own project map's answer; "" if unknown
    model: str = ""  # the model that wrote an assistant message, where the file records it
    message_id: str = ""  # the CLI's own id for the message, where it has one


@dataclass(frozen=True, slots=True)
class Problem:
    """A record an adapter skipped: a half-written last line, invalid JSON or UTF-8, an unknown shape."""

    file: str
    line: int
    reason: str


@dataclass(slots=True)
class Parsed:
    """An adapter's answer for one file: the turns in conversation order, and what it skipped.

    ``resume_offset``/``resume_line`` are set when an adapter called with ``final=False`` held back a
    message the file has not finished (a Kimi answer still streaming): the next read must start there
    rather than at the reader's offset, so the whole message is read again once it is complete.
    """

    turns: list[CapturedTurn] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    resume_offset: int | None = None
    resume_line: int | None = None
