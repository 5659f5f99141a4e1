"""Documents from the outside: the ingest request for a URL, a file or text, and the bounded URL fetch.

``memstream doc add``, the API and the MCP tool build their requests here; the document
agent fetches URLs here. Imports no Faust.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from memstream.identity import derived_id, project_key
from memstream.rules.documents import document_id
from memstream.schemas import DocumentIngest, DocumentRemove

#: Seconds a URL fetch may take in all.
FETCH_TIMEOUT = 60.0
_READ_BLOCK = 64 * 1024


class DocumentError(ValueError):
    """A document cannot be added or fetched; the message says why in one line."""


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def ingest_request(
    source: str,
    *,
    project: str,
    title: str = "",
    content: str | None = None,
    max_bytes: int,
) -> DocumentIngest:
    """The request to ingest ``source``: a URL (fetched by the agent), ``-`` with ``content``
    (standard input, or text given to the API), or a file's path (read here).

    ``project`` is the project directory; the same URL or file in one project is one document.
    """
    scope = project_key(project)
    now = datetime.now(UTC)
    if is_url(source) and content is None:
        kind, text = "url", ""
        identity = source
    elif source == "-" or content is not None:
        kind, text = "text", content or ""
        identity = derived_id("text", text)
    else:
        path = Path(source).expanduser().resolve()
        try:
            size = path.stat().st_size
            if size > max_bytes:
                raise DocumentError(
                    f"{path} has {size} bytes, more than MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES ({max_bytes})"
                )
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise DocumentError(f"cannot read {path}: {exc.strerror}") from None
        kind, source, identity = "file", str(path), str(path)
        title = title or path.name
    if kind != "url":
        if len(text.encode()) > max_bytes:
            raise DocumentError(f"the content has more than MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES ({max_bytes}) bytes")
        if not text.strip():
            raise DocumentError("the document is empty")
    return DocumentIngest(
        document_id=document_id(scope, kind, identity),
        source_type=kind,  # type: ignore[arg-type]
        source=source,
        content=text,
        title=title.strip(),
        project=project,
        scope_key=scope,
        ts=now,
    )


def remove_request(document: str) -> DocumentRemove:
    return DocumentRemove(document_id=document, ts=datetime.now(UTC))


async def fetch_url(url: str, max_bytes: int, *, timeout: float = FETCH_TIMEOUT) -> tuple[str, str]:
    """(content type, text) of a URL, reading at most ``max_bytes``; a larger body is an error."""
    limit = f"MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES ({max_bytes})"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.get(url, headers={"Accept": "text/html, text/plain;q=0.9, */*;q=0.5"}) as response,
    ):
        if response.status >= 400:
            raise DocumentError(f"GET {url}: HTTP {response.status} {response.reason or ''}".strip())
        if response.content_length is not None and response.content_length > max_bytes:
            raise DocumentError(f"GET {url}: {response.content_length} bytes, more than {limit}")
        body = bytearray()
        async for block in response.content.iter_chunked(_READ_BLOCK):
            body.extend(block)
            if len(body) > max_bytes:
                raise DocumentError(f"GET {url}: more than {limit} bytes")
        charset = response.charset or "utf-8"
        try:
            text = body.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            text = body.decode("utf-8", errors="replace")
        return response.headers.get("Content-Type", ""), text
