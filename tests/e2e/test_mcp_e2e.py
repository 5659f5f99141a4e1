"""Claude Code's side of MCP, simulated with the SDK's own client: search, add, read and forget
memories over stateless streamable HTTP (/mcp on the API) and over stdio (`memstream mcp`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from pydantic import FileUrl

from memstream.intake.publish import make_turn, publish
from memstream.recall.answers import SEARCH_FIELDS, index_rows
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "search_memories",
    "timeline",
    "get_memory_block",
    "add_memory",
    "get_memories",
    "memory_history",
    "list_memories",
    "forget_memory",
    "forget_user",
    "add_document",
    "list_documents",
}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    running = await start_pipeline(tmp_module_dir / "data", user="dev@example.com")
    try:
        yield running
    finally:
        await running.stop()


def data(result: Any) -> Any:
    """A tool result's JSON (structured content when the tool returns a dict, else its text)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def text(result: Any) -> str:
    assert not result.is_error, result.content
    return str(result.content[0].text)


def error(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


async def exercise(client: Client, project: str) -> None:
    """What an agent does: list the tools, add, find, read, forget, and check the audit trail."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
    assert tools["search_memories"].input_schema["required"] == ["query"]

    added = data(
        await client.call_tool("add_memory", {"text": "The staging database runs on port 6543", "project": project})
    )
    assert added["status"] == "stored", added
    memory_id = added["id"]

    found = data(await client.call_tool("search_memories", {"query": "staging database port", "project": project}))
    assert set(found["fields"]) | set(found.get("same", {})) == set(SEARCH_FIELDS)
    hit = next(row for row in index_rows(found) if row["id"] == memory_id)
    assert hit["preview"] == "The staging database runs on port 6543"
    full = data(
        await client.call_tool(
            "search_memories", {"query": "staging database port", "project": project, "detail": "full"}
        )
    )
    record = next(h for h in full["results"] if h["id"] == memory_id)
    for field in ("id", "text", "type", "scope", "score", "session", "provenance", "created_at", "updated_at"):
        assert field in record, field

    block = text(await client.call_tool("get_memory_block", {"project": project, "query": "database port"}))
    assert block.startswith("[MEMORY]") and "6543" in block

    listed = data(await client.call_tool("list_memories", {"project": project}))
    assert memory_id in [row[0] for row in listed["memories"]]
    got = data(await client.call_tool("get_memories", {"ids": [memory_id]}))
    assert got["memories"][0]["text"].endswith("6543")

    forgotten = data(await client.call_tool("forget_memory", {"id": memory_id, "reason": "the port moved to 7000"}))
    assert forgotten["status"] == "forgotten", forgotten
    after = data(await client.call_tool("search_memories", {"query": "staging database port", "project": project}))
    assert memory_id not in [row[0] for row in after["hits"]]
    kept = data(await client.call_tool("get_memories", {"ids": [memory_id]}))["memories"][0]
    assert kept["superseded_by"]  # a tombstone, not a hard delete

    async def audited() -> list[dict[str, Any]]:
        records = data(await client.call_tool("memory_history", {"id": memory_id}))["records"]
        return [r for r in records if r["outcome"] == "deleted"]

    deleted = await eventually(audited, what="the forget audit record")
    assert deleted[0]["reason"] == "forget: the port moved to 7000"

    assert data(await client.call_tool("get_memories", {"ids": ["nope"]}))["missing"] == ["nope"]
    assert "at least 10" in error(await client.call_tool("add_memory", {"text": "too short", "project": project}))


async def test_mcp_over_streamable_http(live: runner.Running, tmp_path: Path) -> None:
    async with Client(f"{live.settings.api_url}/mcp") as client:
        await exercise(client, str(tmp_path / "http-project"))
        # Over HTTP the server's directory means nothing: without roots, the project is required.
        assert "give 'project'" in error(await client.call_tool("search_memories", {"query": "anything"}))


async def test_mcp_over_stdio_defaults_to_the_working_directory(live: runner.Running, tmp_path: Path) -> None:
    project = tmp_path / "stdio-project"
    project.mkdir()
    await publish(
        live.bootstrap,
        live.settings.topic_prefix,
        [
            make_turn(session_id="s1", project=str(project), role="user", content="Which queue do we use for jobs?"),
            make_turn(session_id="s1", project=str(project), role="assistant", content="Jobs go through RabbitMQ."),
        ],
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
        "MEMSTREAM_DATA_DIR": str(live.settings.data_dir),
        "MEMSTREAM_HTTP_PORT": str(live.settings.http_port),
        "MEMSTREAM_USER": "dev@example.com",
        "PYTHONPATH": str(ROOT),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memstream.cli", "mcp"], env=env, cwd=str(project)
    )
    async with Client(params) as client:
        await exercise(client, str(project))

        async def conversation() -> list[Any]:
            found = data(await client.call_tool("search_memories", {"query": "RabbitMQ jobs queue"}))  # no project
            rows = index_rows(found)
            return [row for row in rows if "RabbitMQ" in row["preview"]]

        hits = await eventually(conversation, what="the published exchange, found from the working directory")
        assert hits[0]["session"] == "s1"

    # A client that offers MCP roots: its first root is the project, whatever the server's directory.
    elsewhere = tmp_path / "rooted"

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(elsewhere.as_uri()), name="rooted")])

    async with Client(params, list_roots_callback=roots) as client:
        found = data(await client.call_tool("list_documents", {}))
        assert found["project"] == str(elsewhere)


async def test_documents_through_mcp(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "docs-project")
    async with Client(f"{live.settings.api_url}/mcp") as client:
        content = "Runbook: when the payments queue backs up, scale the billing workers to six replicas first."
        added = data(
            await client.call_tool("add_document", {"content": content, "title": "Runbook", "project": project})
        )
        assert added["status"] == "queued"

        async def done() -> list[Any]:
            listed = data(await client.call_tool("list_documents", {"project": project}))["documents"]
            return [d for d in listed if d["id"] == added["document_id"] and d["status"] == "done"]

        (document,) = await eventually(done, what="the document ingested")
        assert (document["title"], document["chunks"]) == ("Runbook", 1)
        found = data(
            await client.call_tool("search_memories", {"query": "payments queue backs up", "project": project})
        )
        assert index_rows(found)[0]["type"] == "document_chunk"
        assert "either 'url' or 'content'" in error(await client.call_tool("add_document", {"project": project}))
