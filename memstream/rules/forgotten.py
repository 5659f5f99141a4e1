"""What a forgotten exchange may still become: only the words said after it (issue 37.4).

A raw exchange keeps its memory id while its session goes on, so the reply that comes after a forget
arrives as a new version of the forgotten memory, holding the forgotten words too. A forgotten memory is
never rewritten: what the session said since becomes a memory of its own, under an id derived from the
forgotten one and its forget (stable, so the next reply refreshes it), holding only the turns the
forgotten text does not hold.
"""

from __future__ import annotations

import re

from memstream.identity import derived_id
from memstream.schemas.memory import FORGOTTEN_MARK, WRONG_MARK, Memory

#: Marks of a memory taken out on request: forgotten, or marked wrong in the console.
TAKEN_OUT: tuple[str, ...] = (FORGOTTEN_MARK, WRONG_MARK)
#: The types a session's exchange is stored as in raw mode: its text grows while the session goes on.
RAW_EXCHANGE_TYPES: frozenset[str] = frozenset({"conversation"})
#: Where a raw exchange's turns begin ("[user] …", "[assistant] …").
_TURN = re.compile(r"(?=\[(?:user|assistant|system|tool)\] )")


def taken_out(superseded_by: str | None) -> bool:
    """Was the memory forgotten or marked wrong (not superseded by a newer fact)?"""
    return bool(superseded_by) and str(superseded_by).startswith(TAKEN_OUT)


def grew_after_forget(existing: Memory, memory: Memory) -> bool:
    """Is ``memory`` a raw exchange that went on after ``existing``, its forgotten (or marked wrong) self?
    The same text again is not: a restore, a fact remembered again or a replay take the store's usual
    path (brought back, or refreshed and kept forgotten)."""
    return (
        memory.type in RAW_EXCHANGE_TYPES
        and taken_out(existing.superseded_by)
        and _normal(memory.text) != _normal(existing.text)
    )


def _normal(text: str) -> str:
    return " ".join(text.split())


def said_since(forgotten: str, text: str) -> str:
    """The turns of ``text`` the ``forgotten`` text does not hold, in order; empty when none is new."""
    old = _normal(forgotten)
    kept = [part.strip() for part in _TURN.split(text) if part.strip() and _normal(part) not in old]
    return " ".join(kept)


def continued_id(memory_id: str, mark: str) -> str:
    """The id of what a session said after ``memory_id`` was taken out by ``mark``."""
    return derived_id("said-since", memory_id, mark)
