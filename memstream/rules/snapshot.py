"""Seed 000 step 1 and its privacy rule: the last messages as ``[role] content``.

``<private>…</private>`` is stripped before anything else sees the text; a message
that was entirely private is left out of the snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memstream.schemas import Message, Provenance

_PRIVATE_BLOCK = re.compile(r"<private>.*?</private>", re.IGNORECASE | re.DOTALL)
#: An opening tag never closed hides everything after it: failing closed is the safe side.
_PRIVATE_UNCLOSED = re.compile(r"<private>.*\Z", re.IGNORECASE | re.DOTALL)
_TRUNCATION_MARK = " …[truncated]"


def strip_private(text: str) -> str:
    """Remove private spans; returns "" when nothing public is left."""
    text = _PRIVATE_BLOCK.sub("", text)
    text = _PRIVATE_UNCLOSED.sub("", text)
    text = re.sub(r"</private>", "", text, flags=re.IGNORECASE)
    return text.strip()


def public_message(message: Message) -> Message | None:
    """The message with private spans removed, or None if it was fully private."""
    content = strip_private(message.content)
    return Message(message.role, content, message.provenance) if content else None


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(_TRUNCATION_MARK):
        return text[:limit]
    return text[: limit - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK


def window(messages: Sequence[Message], new: Message, size: int) -> list[Message]:
    """The session's last ``size`` public messages after ``new`` arrives."""
    public = public_message(new)
    kept = [*messages, public] if public is not None else list(messages)
    return kept[-size:]


def format_snapshot(messages: Sequence[Message], *, message_max_chars: int, max_chars: int) -> str:
    """``[role] content`` per message, newest last; the oldest text is cut first."""
    lines = [f"[{m.role}] {truncate(m.content, message_max_chars)}" for m in messages]
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[len(text) - max_chars :]
    return text


def exchange_start(messages: Sequence[Message]) -> int:
    """Where the last exchange begins: the first of the user messages since the previous assistant
    reply (user turns sent back to back belong to one exchange; none of them may be left out)."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    replied = [i for i, m in enumerate(messages[:last_user]) if m.role == "assistant"]
    return replied[-1] + 1 if replied else 0 if any(m.role == "user" for m in messages) else last_user


def last_exchange(messages: Sequence[Message], *, message_max_chars: int) -> str:
    """The user messages since the previous reply and everything after them: the turn raw mode stores."""
    return format_snapshot(messages[exchange_start(messages) :], message_max_chars=message_max_chars, max_chars=10**9)


def pending_is_due(messages: Sequence[Message], last_seen: float, flushed: bool, now: float, idle: float) -> bool:
    """Should user turns that got no reply be stored now? When the session ends on the user
    (nothing arrived for ``idle`` seconds of processing time) and they were not stored yet.

    Processing time, not the turns' own timestamps: a replay of old turns must not see a
    session as idle between a user turn and its reply."""
    return bool(messages) and messages[-1].role == "user" and not flushed and now - last_seen >= idle


def exchange_sources(messages: Sequence[Message]) -> list[Provenance]:
    """Where the messages of the last exchange came from, oldest first, each source once."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    sources: list[Provenance] = []
    for message in messages[start:]:
        if message.provenance is not None and message.provenance not in sources:
            sources.append(message.provenance)
    return sources


def is_summary_turn(assistant_turn: int, every: int) -> bool:
    """Seed 000: summary mode is triggered every N assistant turns (default 5)."""
    return assistant_turn > 0 and assistant_turn % every == 0


def snapshot_modes(assistant_turn: int, *, raw: bool, summary_every: int) -> list[str]:
    """Which snapshots an assistant turn produces: normal after every turn, plus summary
    every N turns; raw mode (no LLM) stores the exchange itself and never summarizes."""
    if raw:
        return ["raw"]
    modes = ["normal"]
    if is_summary_turn(assistant_turn, summary_every):
        modes.append("summary")
    return modes
