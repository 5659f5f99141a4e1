"""Pipeline v2's document ingest, as pure functions: HTML to text, chunking, the chunk memories,
what a (re-)ingest adds and removes, and the status trail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import msgspec
from selectolax.lexbor import LexborHTMLParser

from memstream.identity import derived_id, normalize_content
from memstream.schemas import DOCUMENT_CHUNK, ChunkLink, Document, DocumentIngest, Memory, Provenance, StatusChange
from memstream.schemas.document import DocumentStatus

#: Pipeline v2: a chunk memory's importance.
CHUNK_IMPORTANCE: Final = 0.3
#: Elements whose text is not the document's: scripts, styles and page furniture.
_NOT_CONTENT: Final = ["script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside", "form"]
#: Content types read as HTML.
_MIME_HTML: Final = ("text/html", "application/xhtml+xml")


class Extracted(msgspec.Struct, frozen=True):
    title: str
    text: str


def is_html(content_type: str, body: str) -> bool:
    """HTML by its content type, or, without one, by how it starts."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind:
        return kind in _MIME_HTML
    head = body.lstrip()[:200].lower()
    return head.startswith("<!doctype html") or head.startswith("<html")


def html_to_text(html: str) -> Extracted:
    """The page's title and its readable text, one block per line (Lexbor's HTML5 parser)."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    root = tree.body or tree.root
    if root is None:
        return Extracted(title, "")
    for node in root.css(",".join(_NOT_CONTENT)):
        node.decompose()
    lines = (" ".join(line.split()) for line in root.text(separator="\n").splitlines())
    return Extracted(title, "\n".join(line for line in lines if line))


def chunk(text: str, size: int, overlap: int) -> list[str]:
    """Windows of ``size`` characters, each sharing ``overlap`` with the one before.

    A text no longer than one window is one chunk; the last window ends at the text's end.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"chunk size {size} and overlap {overlap}: need 0 <= overlap < size")
    if len(text) <= size:
        return [text] if text.strip() else []
    chunks = []
    start = 0
    while True:
        end = min(start + size, len(text))
        chunks.append(text[start:end])
        if end == len(text):
            return chunks
        start = end - overlap


def document_id(scope_key: str, source_type: str, source: str) -> str:
    """A document's id: the same URL or file in the same project is the same document."""
    return derived_id("document", scope_key, source_type, source)


def chunk_memory_id(document: str, content_hash: str) -> str:
    """A chunk's memory id: by document, so two documents sharing a passage keep one each."""
    return derived_id("document-chunk", document, content_hash)


@dataclass(frozen=True)
class Plan:
    """What an ingest does with the chunks: the ones to embed and write, and the links after it."""

    #: (index, storage text, content hash) of chunks not yet linked to the document.
    new: list[tuple[int, str, str]]
    #: Every chunk of the document after this ingest, by index.
    links: list[ChunkLink]
    #: Memory ids linked before and no longer in the document's content.
    stale: list[str]


def plan(document: str, chunks: Sequence[str], linked: Sequence[ChunkLink]) -> Plan:
    """Normalize and hash each chunk, and deduplicate it against the chunks already linked
    to this document (and against its own repeated passages)."""
    known = {link.content_hash: link for link in linked}
    seen: set[str] = set()
    new: list[tuple[int, str, str]] = []
    links: list[ChunkLink] = []
    for index, text in enumerate(chunks):
        content = normalize_content(text)
        if not content.storage or content.content_hash in seen:
            continue
        seen.add(content.content_hash)
        memory = known[content.content_hash].memory_id if content.content_hash in known else None
        if memory is None:
            new.append((index, content.storage, content.content_hash))
            memory = chunk_memory_id(document, content.content_hash)
        links.append(ChunkLink(index=index, memory_id=memory, content_hash=content.content_hash))
    kept = {link.memory_id for link in links}
    stale = [link.memory_id for link in linked if link.memory_id not in kept]
    return Plan(new, links, stale)


def chunk_memory(
    request: DocumentIngest, title: str, text: str, content_hash: str, *, embedding_model: str, now: datetime
) -> Memory:
    """A chunk as a memory: type ``document_chunk``, importance 0.3, the document's title."""
    return Memory(
        id=chunk_memory_id(request.document_id, content_hash),
        text=text,
        type=DOCUMENT_CHUNK,
        scope="project",
        scope_key=request.scope_key,
        created_at=now,
        updated_at=now,
        content_hash=content_hash,
        embedding_model=embedding_model,
        project=request.project,
        sources=[Provenance(source_type="document", file=request.source)],
        importance=CHUNK_IMPORTANCE,
        title=title,
        document_id=request.document_id,
    )


def start(request: DocumentIngest, existing: Document | None, attempt: int, now: datetime) -> Document:
    """The record as an attempt begins: ``extracting``, keeping the links and trail of before."""
    change = StatusChange(status="extracting", ts=now, attempt=attempt)
    if existing is None:
        return Document(
            id=request.document_id,
            source_type=request.source_type,
            source=request.source,
            title=request.title,
            project=request.project,
            scope_key=request.scope_key,
            status="extracting",
            attempts=attempt,
            trail=[change],
            created_at=now,
            updated_at=now,
        )
    return msgspec.structs.replace(
        existing,
        title=request.title or existing.title,
        status="extracting",
        error="",
        attempts=attempt,
        trail=[*existing.trail, change],
        updated_at=now,
    )


def advance(
    document: Document, status: DocumentStatus, now: datetime, *, error: str = "", **fields: object
) -> Document:
    """The record moved to ``status`` (with its error, for ``failed``), the change on its trail."""
    change = StatusChange(status=status, ts=now, attempt=document.attempts, error=error)
    return msgspec.structs.replace(
        document,
        status=status,
        error=error or document.error,
        trail=[*document.trail, change],
        updated_at=now,
        **fields,
    )


def attempt_failed(document: Document, error: str, now: datetime, *, final: bool) -> Document:
    """An attempt failed: the last one turns the document ``failed`` with the error; an earlier
    one leaves its status where it stopped, the error on the record and on the trail."""
    if final:
        return advance(document, "failed", now, error=error)
    change = StatusChange(status=document.status, ts=now, attempt=document.attempts, error=error)
    return msgspec.structs.replace(document, error=error, trail=[*document.trail, change], updated_at=now)


def backfill_title(document: Document, page_title: str) -> str:
    """Pipeline v2: a page title fills the document's title only when it has none."""
    return document.title or page_title
