"""Each memory says whether it is in the next [MEMORY] block and why (issue 38, point 9)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import msgspec

from memstream.console.explain import verdict
from memstream.recall.search import SECTION_LIMIT, build_block
from memstream.schemas import Memory

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def m(text: str, kind: str = "architecture", minutes: int = 0) -> Memory:
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, text)),
        text=text,
        type=kind,  # type: ignore[arg-type]
        scope="project",
        scope_key="p_a",
        source_chunk="",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=minutes),
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        embedding_model="t",
    )


def test_in_the_block_or_not_and_why() -> None:
    arch = [m(f"architecture fact {i:02d} about part {i}", minutes=i) for i in range(SECTION_LIMIT + 2)]
    doc = m("a chunk of the design doc", "document_chunk")
    repeat = msgspec.structs.replace(m("architecture fact 11 about part 11", "progress", -5), id=str(uuid.uuid4()))
    listed = [*arch, repeat]
    block = build_block(listed, max_tokens=4_000)
    assert str(verdict(arch[-1], block, listed, 4_000)) == "in the next block: section “Architecture”"
    oldest = verdict(arch[0], block, listed, 4_000)
    assert not oldest.included and "newest 10" in oldest.why
    assert "no section" in verdict(doc, block, listed, 4_000).why
    assert "already holds its text" in verdict(repeat, block, listed, 4_000).why
    gone = msgspec.structs.replace(arch[-1], superseded_by="forgotten:op")
    assert "superseded or forgotten" in verdict(gone, block, listed, 4_000).why
    small = build_block(listed, max_tokens=40)
    assert "budget of 40 tokens" in verdict(arch[5], small, listed, 40).why
