"""Document agent: Pipeline v2's document worker.

Consumes ``documents`` (key: document id). For a ``DocumentIngest``: fetches the URL (bounded
by ``MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES``; HTML reduced to text, the page title backfilled)
or takes the raw content, then walks ``extracting → chunking → embedding → indexing → done``.
Each new chunk is embedded on its own and sent as a ``CreateMemory`` on ``memory-ops`` (key:
scope) before the next is embedded, so embedding and writing alternate as in the spec; the
store agent stays the only writer of memories. ``indexing`` removes the chunks the content no
longer has and waits until the store has applied the document's operations, so ``done``
means searchable. A failed attempt is tried again after ``MEMSTREAM_DOCUMENT_WORKER_INTERVAL_MS``;
after ``MEMSTREAM_EXTRACT_ATTEMPTS`` (workerMaxRetries) the document is ``failed`` with the error.
For a ``DocumentRemove``: deletes every linked chunk, then the record.

Emits ``memory-ops`` (key: scope). State: the document store, not a table: its records are
what the API and ``memstream doc`` read, one per document, rewritten at every status change;
a redelivered request re-runs an ingest, which the chunk links make idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded_by_key
from memstream.identity import derived_id
from memstream.intake.documents import DocumentError, fetch_url
from memstream.ports import Providers
from memstream.rules import documents as rules
from memstream.schemas import CreateMemory, DeleteMemory, Document, DocumentIngest, DocumentRemove
from memstream.store.documents import DocumentStore
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "document"
log = logging.getLogger(__name__)
#: Documents ingested at once per worker (one document's requests stay in order).
CONCURRENCY = 4
#: The longest ``indexing`` waits for the store to apply a document's operations.
INDEX_TIMEOUT_SECONDS = 120.0
CAUSE = "document"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings

    def store() -> DocumentStore:
        if providers.documents is None:
            raise RuntimeError("no document store is configured")
        return providers.documents

    async def put(document: Document) -> Document:
        await store().put(document)
        log.info("document %s: %s", document.id, document.status)
        return document

    async def extract(request: DocumentIngest, record: Document) -> tuple[str, str]:
        """(title, text) of the document; the title backfilled from an HTML page's."""
        if request.source_type != "url":
            return record.title, request.content
        content_type, body = await fetch_url(request.source, settings.document_max_content_bytes)
        if not rules.is_html(content_type, body):
            return record.title, body
        page = rules.html_to_text(body)
        return rules.backfill_title(record, page.title), page.text

    async def indexed(written: list[str], stale: list[str]) -> None:
        """Wait until the store has applied this ingest's operations. They share one
        partition of memory-ops (key: scope), so the last one applied means all were. Only
        what this attempt sent counts: a chunk that was already stored proves nothing."""
        last_gone = stale[-1] if stale else None
        last_there = written[-1] if written and not stale else None
        deadline = time.monotonic() + INDEX_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if last_gone is not None and await providers.store.get(last_gone) is None:
                return
            if last_there is not None and await providers.store.get(last_there) is not None:
                return
            if last_gone is None and last_there is None:
                return
            await asyncio.sleep(0.1)
        raise DocumentError(f"the store did not index the chunks within {INDEX_TIMEOUT_SECONDS:g}s")

    async def attempt(request: DocumentIngest, record: Document) -> Document:
        title, text = await extract(request, record)
        if not text.strip():
            raise DocumentError("the document has no text")
        record = await put(rules.advance(record, "chunking", datetime.now(UTC), title=title, characters=len(text)))
        chunks = rules.chunk(text, settings.document_chunk_size, settings.document_chunk_overlap)
        # A link whose memory is gone (deleted by hand, or a write the store never applied) is
        # no duplicate: its chunk is written again.
        linked = [link for link in record.chunks if await providers.store.get(link.memory_id) is not None]
        plan = rules.plan(request.document_id, chunks, linked)
        record = await put(rules.advance(record, "embedding", datetime.now(UTC)))
        key = request.scope_key.encode()
        written: list[str] = []
        for _, chunk_text, content_hash in plan.new:
            (vector,) = await providers.embedder.embed_documents([chunk_text])
            memory = rules.chunk_memory(
                request,
                title,
                chunk_text,
                content_hash,
                embedding_model=providers.embedder.model,
                now=datetime.now(UTC),
            )
            op = CreateMemory(
                op_id=derived_id(CAUSE, memory.id, request.ts.isoformat()),
                scope_key=request.scope_key,
                cause=CAUSE,
                memory=memory,
                vector=vector,
            )
            await topics.memory_ops.send(key=key, value=op)
            written.append(memory.id)
        record = await put(rules.advance(record, "indexing", datetime.now(UTC), chunks=plan.links))
        for memory_id in plan.stale:
            op_id = derived_id(CAUSE, "stale", memory_id, request.ts.isoformat())
            delete = DeleteMemory(op_id=op_id, scope_key=request.scope_key, cause=CAUSE, memory_id=memory_id)
            await topics.memory_ops.send(key=key, value=delete)
        await indexed(written, plan.stale)
        return await put(rules.advance(record, "done", datetime.now(UTC)))

    async def ingest(request: DocumentIngest) -> None:
        previous = await store().get(request.document_id)
        retries = settings.extract_attempts
        for number in range(1, retries + 1):
            record = await put(rules.start(request, previous, number, datetime.now(UTC)))
            try:
                with stage_span("memstream.document", source=request.source_type, attempt=number):
                    await attempt(request, record)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:2000]
                final = number == retries
                log.warning("document %s, attempt %d of %d: %s", request.document_id, number, retries, error)
                current = await store().get(request.document_id) or record
                previous = await put(rules.attempt_failed(current, error, datetime.now(UTC), final=final))
                if not final:
                    await asyncio.sleep(settings.document_worker_interval_ms / 1000)

    async def remove(request: DocumentRemove) -> None:
        record = await store().get(request.document_id)
        if record is None:
            return
        key = record.scope_key.encode()
        for link in record.chunks:
            op_id = derived_id(CAUSE, "remove", link.memory_id, request.ts.isoformat())
            delete = DeleteMemory(op_id=op_id, scope_key=record.scope_key, cause=CAUSE, memory_id=link.memory_id)
            await topics.memory_ops.send(key=key, value=delete)
        await store().delete(request.document_id)

    async def handle(value: Any, event: EventT) -> None:
        request: DocumentIngest | DocumentRemove = expect(value, (DocumentIngest, DocumentRemove))
        if isinstance(request, DocumentRemove):
            await remove(request)
        else:
            await ingest(request)

    @app.agent(topics.documents, name=STAGE)
    async def document(stream: faust.StreamT) -> None:
        await guarded_by_key(stream, STAGE, sink, handle, limit=CONCURRENCY)

    return document
