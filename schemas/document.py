"""An ingested document as the document store keeps it: its status trail and its chunk links.

Not an event: the document agent writes it to the document store at every status change,
and the API and ``memstream doc`` read it from there. Evolution rules as for events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import msgspec

from memstream.schemas.events import DocumentSource

#: Pipeline v2's status transitions, in order, then the two ends.
DocumentStatus = Literal["extracting", "chunking", "embedding", "indexing", "done", "failed"]
STATUSES: Final[tuple[str, ...]] = DocumentStatus.__args__  # type: ignore[attr-defined]


class StatusChange(msgspec.Struct, frozen=True, kw_only=True):
    status: DocumentStatus
    ts: datetime
    #: The attempt (1-based) the change belongs to.
    attempt: int = 1
    #: Why it failed, on a ``failed`` change (or an attempt that failed and is tried again).
    error: str = ""


class ChunkLink(msgspec.Struct, frozen=True, kw_only=True):
    """Pipeline v2's ``document_memories`` row: a chunk memory of the document, by index."""

    index: int
    memory_id: str
    content_hash: str


class Document(msgspec.Struct, tag="document.v1", tag_field="schema", frozen=True, kw_only=True):
    id: str
    source_type: DocumentSource
    source: str
    title: str = ""
    project: str = ""
    scope_key: str
    status: DocumentStatus
    #: The error of the last failed attempt ("" when none failed).
    error: str = ""
    attempts: int = 0
    #: Characters of text extracted from the source.
    characters: int = 0
    chunks: list[ChunkLink] = []
    trail: list[StatusChange] = []
    created_at: datetime
    updated_at: datetime
