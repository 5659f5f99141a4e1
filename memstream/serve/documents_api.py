"""The documents' HTTP handlers, as plain async functions of their inputs: (status, JSON body).

Whatever serves the API wraps them (``memstream.serve.routes.admin``): they take the document store and a
``send`` that publishes a request on the documents topic, and read nothing else.

GET    /documents?project=DIR       the project's documents, newest first (no chunk list)
GET    /documents?id=ID             one document: status, status trail, chunks
POST   /documents                   {"source": URL, "project": DIR, "title"?} or {"content": TEXT, …}
DELETE /documents?id=ID             remove a document and its chunks
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from memstream.identity import project_key
from memstream.intake.documents import DocumentError, ingest_request, is_url, remove_request
from memstream.schemas import Document, DocumentIngest, DocumentRemove
from memstream.store.documents import DocumentStore

Reply = tuple[int, dict[str, Any]]
Send = Callable[[DocumentIngest | DocumentRemove], Awaitable[None]]


def summary(document: Document) -> dict[str, Any]:
    """A document without its chunk links and trail: what a listing shows."""
    return {
        "id": document.id,
        "title": document.title,
        "source_type": document.source_type,
        "source": document.source,
        "project": document.project,
        "status": document.status,
        "error": document.error,
        "attempts": document.attempts,
        "characters": document.characters,
        "chunks": len(document.chunks),
        "updated_at": msgspec.to_builtins(document.updated_at),
    }


async def list_or_show(documents: DocumentStore | None, query: Mapping[str, str]) -> Reply:
    if documents is None:
        return 503, {"error": "document ingest is not available on this server"}
    document_id = query.get("id", "").strip()
    if document_id:
        document = await documents.get(document_id)
        if document is None:
            return 404, {"error": f"no document {document_id} (yet: an ingest shows up once it starts)"}
        return 200, {"document": msgspec.to_builtins(document)}
    project = query.get("project", "").strip()
    if not project:
        return 400, {"error": "the 'project' (a project directory) or 'id' parameter is required"}
    listed = await documents.list(project_key(project))
    return 200, {"documents": [summary(d) for d in listed]}


async def add(body: object, send: Send, *, max_bytes: int) -> Reply:
    """Queue an ingest: a ``source`` URL, or ``content`` (text); ``project`` is required."""
    if not isinstance(body, dict):
        return 400, {"error": "the body must be a JSON object"}
    project = str(body.get("project") or "").strip()
    source = str(body.get("source") or "").strip()
    content = body.get("content")
    if not project:
        return 400, {"error": "'project' (the project directory) is required"}
    if content is not None and not isinstance(content, str):
        return 400, {"error": "'content' must be text"}
    if content is None and not is_url(source):
        return 400, {"error": "give 'source' (an http or https URL) or 'content' (the document's text)"}
    try:
        request = ingest_request(
            source or "-", project=project, title=str(body.get("title") or ""), content=content, max_bytes=max_bytes
        )
    except DocumentError as exc:
        return 400, {"error": str(exc)}
    await send(request)
    return 202, {"document_id": request.document_id, "status": "queued"}


async def remove(documents: DocumentStore | None, query: Mapping[str, str], send: Send) -> Reply:
    if documents is None:
        return 503, {"error": "document ingest is not available on this server"}
    document_id = query.get("id", "").strip()
    if not document_id:
        return 400, {"error": "the 'id' parameter is required"}
    document = await documents.get(document_id)
    if document is None:
        return 404, {"error": f"no document {document_id}"}
    await send(remove_request(document_id))
    return 202, {"document_id": document_id, "chunks": len(document.chunks), "status": "removing"}
