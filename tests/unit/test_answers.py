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
    full_hit,
    full_record,
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
    assert index["fields"] == ["id", "type", "scope", "date", "session", "score", "preview", "code"]
    assert index["score"] == "fused"
    for row in index["hits"]:
        assert len(msgspec.json.encode(row).decode()) <= INDEX_ROW_CHARS
        assert row[1:4] == ["conversation", "project", "2025-01-01"]
        assert row[6].startswith("[user] The deploy to staging failed")
    assert [row[5] for row in index["hits"]] == sorted((row[5] for row in index["hits"]), reverse=True)


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
