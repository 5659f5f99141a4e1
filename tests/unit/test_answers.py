"""The shapes a reader is handed (issue 25): the compact index of search and timeline, and one full record."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import msgspec

from memstream.recall.answers import (
    INDEX_CHARS,
    INDEX_ROW_CHARS,
    PREVIEW_CHARS,
    SEARCH_FIELDS,
    full_hit,
    full_record,
    index_rows,
    preview,
    search_index,
    timeline_index,
)
from memstream.schemas import Provenance
from memstream.schemas.memory import HybridHit
from tests.unit.factories import T0, memory

LONG = (
    "[user] The deploy to staging failed again with 'connection refused' on port 6543 after the "
    'migration 0042_add_orders ran; what changed? "quoted" \\ back\\slash\n\n[assistant] ' + "word " * 400
)


def long_hit(i: int) -> HybridHit:
    stored = memory(
        str(uuid.uuid4()),
        "conversation",
        LONG,
        session_id=str(uuid.uuid4()),
        source_chunk=LONG * 2,
        sources=[Provenance(source_type="claude", session_id="s", file="/home/dev/.claude/p/s.jsonl", line=40 + i)],
        created_at=T0 + timedelta(minutes=i),
    )
    return HybridHit(stored, 0.9 - i / 100, 0.81234, 0.5)


def test_a_preview_is_one_line_cut_at_a_word() -> None:
    text = "Use   pnpm,\nnot npm: the lockfile is pnpm-lock.yaml and CI checks it " * 10
    shown = preview(text)
    assert len(shown) <= PREVIEW_CHARS and "\n" not in shown and "  " not in shown
    assert shown.endswith("…")
    assert text.replace("\n", " ").split()[: len(shown.split()) - 1] == shown.split()[:-1]  # whole words
    assert preview("short fact") == "short fact"


def test_ten_long_hits_fit_two_thousand_characters_of_compact_json() -> None:
    index = search_index([long_hit(i) for i in range(10)])
    encoded = msgspec.json.encode(index).decode()
    assert len(encoded) <= INDEX_CHARS, len(encoded)
    assert "\n" not in encoded and ": " not in encoded.replace('": "', "")
    # Each hit is another session's: the session stays in the rows, what they all share is said once.
    assert index["fields"] == ["id", "session", "score", "preview", "code"]
    assert {k: v for k, v in index["same"].items() if k != "preview"} == {
        "type": "conversation",
        "scope": "project",
        "date": "2025-01-01",
    }
    assert index["score"] == "fused"
    for row in index["hits"]:
        assert len(msgspec.json.encode(row).decode()) <= INDEX_ROW_CHARS
    for row in index_rows(index):
        assert (row["type"], row["scope"], row["date"]) == ("conversation", "project", "2025-01-01")
        assert row["preview"].startswith("[user] The deploy to staging failed")
    scores = [row["score"] for row in index_rows(index)]
    assert scores == sorted(scores, reverse=True)


def test_a_short_memory_is_shown_whole_and_a_timeline_has_no_score() -> None:
    short = memory("m1", "preference", "Prefers tabs over spaces", session_id="s1")
    assert search_index([HybridHit(short, 0.5, 0.5, None)])["hits"] == [
        ["m1", "preference", "project", "2025-01-01", "s1", 0.5, "Prefers tabs over spaces", ""]
    ]
    assert timeline_index([short], anchor="m1") == {
        "fields": ["id", "type", "scope", "date", "session", "preview"],
        "anchor": "m1",
        "memories": [["m1", "preference", "project", "2025-01-01", "s1", "Prefers tabs over spaces"]],
    }


def test_a_full_record_holds_each_field_once() -> None:
    hit = long_hit(2)
    record = full_record(hit.memory)
    # Once: provenance (file:line), not also the raw sources; the session, not also session_id.
    for left_out in ("sources", "session_id", "source_chunk", "content_hash", "embedding_model", "schema"):
        assert left_out not in record, left_out
    assert record["provenance"] == [{"source": "claude", "session": "s", "at": "/home/dev/.claude/p/s.jsonl:42"}]
    assert record["text"] == LONG and record["session"] == hit.memory.session_id
    assert len(json.dumps(record)) < len(LONG) + 600  # the record is its text and a little more
    shown = full_hit(hit)
    assert (shown["score"], shown["score_kind"], shown["vector_score"], shown["bm25_score"]) == (
        0.88,
        "fused",
        0.8123,
        0.5,
    )


def hook_hits(count: int, session: str = "7c1d0f4e-0b1a-4c55-9d2e-5a6b7c8d9e0f") -> list[HybridHit]:
    """Hits as hook capture makes them: one session, one type and scope, one day, each text led by ``[user]``."""
    return [
        HybridHit(
            memory(
                str(uuid.uuid4()),
                "conversation",
                f"[user] Why did staging deploy {i} fail after migration 0042? [assistant] "
                + "The pool was full. " * 30,
                session_id=session,
            ),
            0.9 - i / 100,
            0.8,
            0.5,
        )
        for i in range(count)
    ]


def test_previews_use_their_160_characters_and_what_every_row_repeats_is_said_once() -> None:
    index = search_index(hook_hits(10))
    assert index["same"] == {
        "type": "conversation",
        "scope": "project",
        "date": "2025-01-01",
        "session": "7c1d0f4e-0b1a-4c55-9d2e-5a6b7c8d9e0f",
        "preview": "[user] Why did staging deploy",
    }
    assert index["fields"] == ["id", "score", "preview", "code"]
    previews = [row[2] for row in index["hits"]]
    assert all(PREVIEW_CHARS - 15 <= len(p) <= PREVIEW_CHARS for p in previews), [len(p) for p in previews]
    assert all(not p.startswith("[user]") for p in previews)
    encoded = msgspec.json.encode(index).decode()
    assert len(encoded) <= INDEX_CHARS, len(encoded)
    assert encoded.count("7c1d0f4e") == 1
    # Read back, each row is whole again: the repeated columns and the preview's shared start restored.
    (first, *_) = index_rows(index)
    assert first["session"] == "7c1d0f4e-0b1a-4c55-9d2e-5a6b7c8d9e0f" and first["type"] == "conversation"
    assert first["preview"].startswith("[user] Why did staging deploy 0 fail")


def test_one_row_keeps_every_column() -> None:
    index = search_index(hook_hits(1))
    assert "same" not in index and index["fields"] == list(SEARCH_FIELDS)
    assert index_rows(index)[0]["session"] == "7c1d0f4e-0b1a-4c55-9d2e-5a6b7c8d9e0f"


def test_ten_hits_fit_the_budget_however_long_the_header_they_share() -> None:
    """The rows' room is what the header leaves: ten rows of the full row budget plus a header holding a
    long shared opening came to 2,469 characters (the MCP disclosure test at the fifth round's ranking)."""
    opening = "[user] Which port does the staging database listen on since the PgBouncer migration and why " * 2
    hits = []
    for i in range(10):
        stored = memory(
            str(uuid.uuid4()),
            "conversation",
            f"{opening} variant {i} " + "detail " * 60,
            session_id=str(uuid.uuid4()),
            created_at=T0 + timedelta(days=i),
        )
        hits.append(HybridHit(stored, 0.9 - i / 100, 0.8, 0.5, code="changed" if i % 2 else ""))
    index = search_index(hits)
    assert index["same"]["preview"]  # the shared opening is said once, in the header
    encoded = msgspec.json.encode(index).decode()
    assert len(encoded) <= INDEX_CHARS, len(encoded)
