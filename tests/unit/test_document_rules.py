"""Pipeline v2's document ingest rules: HTML to text, chunking, deduplication, the status trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstream.identity import normalize_content
from memstream.rules import documents as rules
from memstream.schemas import DOCUMENT_CHUNK, ChunkLink, DocumentIngest

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)

PAGE = """<!doctype html><html><head><title>  Deploy   Guide </title><style>p {color: red}</style>
<script>var secret = "not content";</script></head>
<body><nav>Home | Docs</nav><h1>Deploying</h1><p>Run <code>make ship</code> from main.</p>
<p>Rollbacks use   the previous tag.</p><footer>(c) 2026</footer></body></html>"""


def request(**fields: object) -> DocumentIngest:
    values: dict[str, object] = {
        "document_id": "d1",
        "source_type": "url",
        "source": "http://127.0.0.1/guide",
        "project": "/repo",
        "scope_key": "p_repo",
        "ts": NOW,
    }
    values.update(fields)
    return DocumentIngest(**values)  # type: ignore[arg-type]


def test_html_becomes_its_title_and_readable_text() -> None:
    page = rules.html_to_text(PAGE)
    assert page.title == "Deploy Guide"
    assert page.text == "Deploying\nRun\nmake ship\nfrom main.\nRollbacks use the previous tag."
    assert "secret" not in page.text and "Home" not in page.text and "color" not in page.text


def test_html_is_recognised_by_content_type_or_by_its_start() -> None:
    assert rules.is_html("text/html; charset=utf-8", "")
    assert not rules.is_html("text/plain", "<html>")
    assert rules.is_html("", "  <!DOCTYPE html><html>")
    assert not rules.is_html("", "# Markdown")


def test_a_document_shorter_than_one_chunk_is_not_split() -> None:
    assert rules.chunk("x" * 2000, 2000, 200) == ["x" * 2000]
    assert rules.chunk("short", 2000, 200) == ["short"]
    assert rules.chunk("   ", 2000, 200) == []


def test_chunks_are_windows_overlapping_the_previous_one() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(4500))
    chunks = rules.chunk(text, 2000, 200)
    assert [len(c) for c in chunks] == [2000, 2000, 900]
    assert chunks[1][:200] == chunks[0][-200:] and chunks[2][:200] == chunks[1][-200:]
    assert chunks[0] + chunks[1][200:] + chunks[2][200:] == text
    with pytest.raises(ValueError):
        rules.chunk(text, 200, 200)


def test_a_plan_deduplicates_against_the_linked_chunks_and_finds_stale_ones() -> None:
    first = rules.plan("d1", ["alpha  one", "beta two", "Alpha one."], [])
    # "Alpha one." normalizes to the same content as "alpha  one": written once.
    assert [(i, text) for i, text, _ in first.new] == [(0, "alpha one"), (1, "beta two")]
    assert [link.index for link in first.links] == [0, 1]
    again = rules.plan("d1", ["beta two", "gamma three"], first.links)
    assert [text for _, text, _ in again.new] == ["gamma three"]
    beta = normalize_content("beta two").content_hash
    assert again.links[0] == ChunkLink(index=0, memory_id=rules.chunk_memory_id("d1", beta), content_hash=beta)
    assert again.stale == [first.links[0].memory_id]


def test_the_same_passage_in_two_documents_is_two_memories() -> None:
    digest = normalize_content("shared passage").content_hash
    assert rules.chunk_memory_id("d1", digest) != rules.chunk_memory_id("d2", digest)
    assert rules.document_id("p_a", "url", "http://x") == rules.document_id("p_a", "url", "http://x")
    assert rules.document_id("p_a", "url", "http://x") != rules.document_id("p_b", "url", "http://x")


def test_a_chunk_memory_is_a_document_chunk_of_importance_0_3_with_the_title() -> None:
    memory = rules.chunk_memory(request(), "Deploy Guide", "Run make ship.", "h1", embedding_model="m", now=NOW)
    assert (memory.type, memory.importance, memory.title, memory.document_id) == (
        DOCUMENT_CHUNK,
        0.3,
        "Deploy Guide",
        "d1",
    )
    assert memory.scope_key == "p_repo" and memory.sources[0].file == "http://127.0.0.1/guide"


def test_the_status_trail_and_a_failure_after_the_last_attempt() -> None:
    record = rules.start(request(title=""), None, 1, NOW)
    record = rules.advance(record, "chunking", NOW, title=rules.backfill_title(record, "Deploy Guide"))
    assert record.title == "Deploy Guide"
    record = rules.attempt_failed(record, "HTTP 503", NOW + timedelta(seconds=1), final=False)
    assert (record.status, record.error) == ("chunking", "HTTP 503")
    record = rules.start(request(title=""), record, 2, NOW + timedelta(seconds=2))
    assert (record.status, record.error, record.title) == ("extracting", "", "Deploy Guide")
    record = rules.attempt_failed(record, "HTTP 503", NOW + timedelta(seconds=3), final=True)
    assert (record.status, record.error, record.attempts) == ("failed", "HTTP 503", 2)
    assert [(c.status, c.attempt, c.error) for c in record.trail] == [
        ("extracting", 1, ""),
        ("chunking", 1, ""),
        ("chunking", 1, "HTTP 503"),
        ("extracting", 2, ""),
        ("failed", 2, "HTTP 503"),
    ]


def test_a_given_title_is_kept_over_the_page_title() -> None:
    record = rules.start(request(title="Mine"), None, 1, NOW)
    assert rules.backfill_title(record, "Page") == "Mine"
