"""Document ingest end to end (Pipeline v2): a URL and a file become searchable chunks with their
status trail, through ``memstream doc`` and the API, on the real embedded broker, store and
embedder; pages come from a loopback HTTP server."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from memstream.identity import project_key
from memstream.rules.documents import chunk
from memstream.schemas import DOCUMENT_CHUNK, Memory
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

PARAGRAPHS = [
    f"Step {i}: the deploy pipeline builds image {i}, runs the smoke tests against staging, "
    f"and promotes the release to production once canary {i} reports healthy for ten minutes."
    for i in range(40)
]
# A chunk's worth of the guide on another subject, for search to find.
PARAGRAPHS[14:28] = [
    f"Billing note {i}: Stripe webhooks for failed card payments are retried by the billing worker with "
    f"exponential backoff, and invoice {i} stays unpaid until a retried payment succeeds."
    for i in range(14)
]
GUIDE = (
    "<!doctype html><html><head><title>Deploy Guide</title><script>track()</script></head><body>"
    "<nav>Home</nav>" + "".join(f"<p>{p}</p>" for p in PARAGRAPHS) + "</body></html>"
)
GUIDE_TEXT = "\n".join(PARAGRAPHS)


class Site:
    """A loopback web server with a long HTML page, a page too large to fetch, and a 404."""

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        async def guide(request: web.Request) -> web.Response:
            return web.Response(text=GUIDE, content_type="text/html")

        async def huge(request: web.Request) -> web.Response:
            return web.Response(text="x" * 20_000, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/guide.html", guide)
        app.router.add_get("/huge.txt", huge)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


class Run:
    def __init__(self, running: runner.Running, site: Site, root: Path):
        self.running, self.site, self.root = running, site, root

    @property
    def api(self) -> str:
        return self.running.settings.api_url

    async def cli(self, *args: str, stdin: bytes | None = None) -> str:
        env = {
            **os.environ,
            "MEMSTREAM_KAFKA_BOOTSTRAP": self.running.bootstrap,
            "MEMSTREAM_TOPIC_PREFIX": self.running.settings.topic_prefix,
            "MEMSTREAM_HTTP_PORT": str(self.running.settings.http_port),
            "MEMSTREAM_DATA_DIR": str(self.root / "cli-data"),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "memstream.cli",
            *args,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else None,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(stdin)
        assert process.returncode == 0, err.decode()
        return out.decode()

    async def http(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session, session.request(method, self.api + path, **kwargs) as r:
            return r.status, await r.json(content_type=None)

    async def document(self, document_id: str, status: str, *, trail: int = 0) -> dict[str, Any]:
        """The document once it reached ``status`` with at least ``trail`` status changes (an ingest
        of a document already ``done`` is told apart by its longer trail)."""

        async def reached() -> dict[str, Any] | None:
            code, body = await self.http("GET", "/documents", params={"id": document_id})
            if code != 200:
                return None
            document: dict[str, Any] = body["document"]
            if len(document["trail"]) < trail:
                return None
            if document["status"] in ("done", "failed") and document["status"] != status:
                raise AssertionError(f"document {document_id} is {document['status']}: {document['error']}")
            return document if document["status"] == status else None

        return await eventually(reached, what=f"document {document_id} {status}")

    async def chunks(self, project: Path) -> list[Memory]:
        return await self.running.providers.store.list([project_key(str(project))], types=[DOCUMENT_CHUNK])


def queued_id(output: str) -> str:
    return output.split()[2]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    site = Site()
    await site.start()
    running = await start_pipeline(
        tmp_module_dir / "data",
        extract_attempts=2,
        document_worker_interval_ms=1000,
        document_max_content_bytes=16_384,
    )
    try:
        yield Run(running, site, tmp_module_dir)
    finally:
        await running.stop()
        await site.stop()


async def test_a_url_becomes_searchable_chunks_with_its_status_trail(run: Run) -> None:
    project = run.root / "shop"
    out = await run.cli("doc", "add", f"{run.site.url}/guide.html", "--project", str(project))
    document = await run.document(queued_id(out), "done")
    assert [c["status"] for c in document["trail"]] == ["extracting", "chunking", "embedding", "indexing", "done"]
    assert document["title"] == "Deploy Guide"  # backfilled from the page
    expected = chunk(GUIDE_TEXT, 2000, 200)
    assert len(expected) > 1 and len(document["chunks"]) == len(expected)
    assert document["characters"] == len(GUIDE_TEXT)

    chunks = await run.chunks(project)
    assert {m.id for m in chunks} == {link["memory_id"] for link in document["chunks"]}
    assert all(m.importance == 0.3 and m.title == "Deploy Guide" and "track()" not in m.text for m in chunks)

    # Searchable through the same recall as memories, and filterable in or out.
    query = {"q": "how are Stripe payment webhooks retried", "project": str(project), "detail": "full"}
    _, found = await run.http("GET", "/search", params={**query, "documents": "only"})
    assert found["results"] and all(hit["type"] == DOCUMENT_CHUNK for hit in found["results"])
    assert "Stripe webhooks" in found["results"][0]["text"]
    _, everything = await run.http("GET", "/search", params=query)
    assert everything["results"][0]["id"] == found["results"][0]["id"]
    _, without = await run.http("GET", "/search", params={**query, "documents": "exclude"})
    assert all(hit["type"] != DOCUMENT_CHUNK for hit in without["results"])
    out = await run.cli(
        "search", "how are Stripe payment webhooks retried", "--project", str(project), "--documents", "only", "--full"
    )
    assert out.splitlines()[0].startswith("score: fused")  # which score the results show, then the results
    assert "[document_chunk, project]" in out.splitlines()[1]

    # Added again: the chunks already linked are kept, none duplicated.
    out = await run.cli("doc", "add", f"{run.site.url}/guide.html", "--project", str(project))
    again = await run.document(queued_id(out), "done", trail=10)
    assert len(again["trail"]) == 10 and again["chunks"] == document["chunks"]
    assert len(await run.chunks(project)) == len(expected)

    # A chunk memory lost behind the document's back is written again by the next add.
    lost = document["chunks"][1]["memory_id"]
    await run.running.providers.store.delete(lost)
    out = await run.cli("doc", "add", f"{run.site.url}/guide.html", "--project", str(project))
    await run.document(queued_id(out), "done", trail=15)
    assert await run.running.providers.store.get(lost) is not None
    assert len(await run.chunks(project)) == len(expected)

    # Removed as a unit.
    await run.cli("doc", "remove", document["id"])
    await eventually(lambda: _none(run, project), what="the guide's chunks removed")
    code, _ = await run.http("GET", "/documents", params={"id": document["id"]})
    assert code == 404


async def _none(run: Run, project: Path) -> bool:
    return not await run.chunks(project)


async def test_a_file_and_standard_input_become_documents(run: Run) -> None:
    project = run.root / "files"
    notes = run.root / "runbook.md"
    notes.write_text("# Runbook\n\nPage the on-call engineer when the queue lag passes five minutes.\n")
    out = await run.cli("doc", "add", str(notes), "--project", str(project))
    document = await run.document(queued_id(out), "done")
    assert (document["title"], document["source_type"], len(document["chunks"])) == ("runbook.md", "file", 1)

    out = await run.cli(
        "doc", "add", "-", "--project", str(project), "--title", "Stdin notes", stdin=b"Backups run at 02:00 UTC daily."
    )
    await run.document(queued_id(out), "done")
    listing = await run.cli("doc", "list", "--project", str(project))
    assert "runbook.md" in listing and "Stdin notes" in listing and listing.count(" done ") == 2
    shown = await run.cli("doc", "show", document["id"])
    assert "status:  done" in shown and "chunk   0" in shown
    texts = {m.text for m in await run.chunks(project)}
    assert texts == {
        "# Runbook Page the on-call engineer when the queue lag passes five minutes.",
        "Backups run at 02:00 UTC daily.",
    }


async def test_the_api_adds_text_and_refuses_bad_requests(run: Run) -> None:
    project = run.root / "api"
    code, body = await run.http(
        "POST", "/documents", json={"content": "Feature flags live in LaunchDarkly.", "project": str(project)}
    )
    assert code == 202
    await run.document(body["document_id"], "done")
    code, listed = await run.http("GET", "/documents", params={"project": str(project)})
    assert code == 200 and [d["chunks"] for d in listed["documents"]] == [1]
    code, body = await run.http("POST", "/documents", json={"source": "/etc/passwd", "project": str(project)})
    assert code == 400 and "URL" in body["error"]
    code, body = await run.http("POST", "/documents", json={"source": "http://x"})
    assert code == 400 and "project" in body["error"]


async def test_a_fetch_that_keeps_failing_ends_failed_with_its_error(run: Run) -> None:
    project = run.root / "broken"
    out = await run.cli("doc", "add", f"{run.site.url}/missing", "--project", str(project))
    failed = await run.document(queued_id(out), "failed")
    assert failed["attempts"] == 2 and "HTTP 404" in failed["error"]
    assert [c["status"] for c in failed["trail"]] == ["extracting", "extracting", "extracting", "failed"]

    out = await run.cli("doc", "add", f"{run.site.url}/huge.txt", "--project", str(project))
    too_big = await run.document(queued_id(out), "failed")
    assert "MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES (16384)" in too_big["error"]
    assert not await run.chunks(project)
