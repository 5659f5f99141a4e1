"""Sessions as timelines (issue 38, point 4): one entry per exchange with its own turns in order, the
session titled by its first prompt, and what was forgotten from it listed apart."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import msgspec

from memstream.console.timeline import session_rows, timeline, turns_of
from memstream.schemas import Memory, Provenance

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
SESSION = "0b7e1f2a-9c4d-4e5f-8a6b-7c8d9e0f1a2b"


def made(text: str, chunk: str, line: int, minutes: int) -> Memory:
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, text)),
        text=text,
        type="progress",
        scope="project",
        scope_key="p_alpha",
        source_chunk=chunk,
        created_at=T0 + timedelta(minutes=minutes),
        updated_at=T0 + timedelta(minutes=minutes),
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        embedding_model="test",
        session_id=SESSION,
        project="/repos/alpha",
        sources=[Provenance(source_type="claude-code", session_id=SESSION, file="/s.jsonl", line=line)],
    )


def test_turns_are_split_at_their_role_marks_inline_or_on_lines() -> None:
    assert turns_of("[user] Implement the plan [assistant] Done: 3 files") == [
        ("user", "Implement the plan"),
        ("assistant", "Done: 3 files"),
    ]
    assert turns_of("[user] a\nsecond line\n[assistant] b") == [("user", "a\nsecond line"), ("assistant", "b")]
    assert turns_of("no marks") == [("", "no marks")]


def test_each_exchange_keeps_its_own_turns_in_order_and_the_first_prompt_titles_the_session() -> None:
    first = "[user] Implement the following plan: paging [assistant] I will start with the store"
    later = "[user] Now the tests [assistant] Tests written, all green"
    memories = [
        # Made later from a later exchange, but read first (newest first, as the store lists).
        made("Tests are green", later, 40, 30),
        made("Paging starts in the store", first, 3, 1),
        made("The store pages by time", first, 3, 2),
    ]
    forgotten = msgspec.structs.replace(made("Old note", later, 40, 31), superseded_by="forgotten:op-1")
    line = timeline(SESSION, [*memories, forgotten])
    assert line.title == "Implement the following plan: paging"
    assert [e.turns for e in line.exchanges] == [
        [("user", "Implement the following plan: paging"), ("assistant", "I will start with the store")],
        [("user", "Now the tests"), ("assistant", "Tests written, all green")],
    ]
    assert [[m.text for m in e.memories] for e in line.exchanges] == [
        ["Paging starts in the store", "The store pages by time"],
        ["Tests are green", "Old note"],
    ]
    assert [m.text for m in line.forgotten] == ["Old note"]
    [row] = session_rows(memories)
    assert (row.title, row.project, row.source, row.exchanges, row.memories) == (
        "Implement the following plan: paging",
        "/repos/alpha",
        "claude-code",
        2,
        3,
    )
