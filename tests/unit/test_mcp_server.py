"""The MCP server's own logic, in process with the SDK's client and a stand-in API: the project from
the client's MCP roots, the working-directory fallback, and API failures as one-line tool errors."""

from __future__ import annotations

from typing import Any

import httpx
import mcp.types as types
from mcp import Client
from pydantic import FileUrl

from memstream.serve.mcp_server import ApiClient, build_server


def api(asked: list[httpx.Request], status: int = 200) -> ApiClient:
    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        if status != 200:
            return httpx.Response(status, json={"error": "the store is\nunavailable"})
        return httpx.Response(200, json={"score": "fused", "fields": ["id", "type", "preview"], "hits": []})

    return ApiClient(httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://api"), user="me@x")


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///home/dev/shop"), name="shop")])


async def test_the_project_comes_from_the_clients_first_root() -> None:
    asked: list[httpx.Request] = []
    async with Client(build_server(api(asked), default_project="/srv/cwd"), list_roots_callback=roots) as client:
        result = await client.call_tool("search_memories", {"query": "deploys"})
    assert not result.is_error, result.content
    assert asked[0].url.params["project"] == "/home/dev/shop"
    assert asked[0].url.params["user"] == "me@x"


async def test_without_roots_the_working_directory_and_an_explicit_project_wins() -> None:
    asked: list[httpx.Request] = []
    async with Client(build_server(api(asked), default_project="/srv/cwd")) as client:
        await client.call_tool("search_memories", {"query": "deploys"})
        await client.call_tool("search_memories", {"query": "deploys", "project": "/elsewhere"})
    assert [r.url.params["project"] for r in asked] == ["/srv/cwd", "/elsewhere"]


async def test_an_api_failure_is_a_one_line_tool_error() -> None:
    async with Client(build_server(api([], status=503), default_project="/srv/cwd")) as client:
        result = await client.call_tool("search_memories", {"query": "deploys"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == "search_memories: /search failed (503): the store is unavailable"


async def test_the_roots_parameter_is_not_part_of_any_tools_schema() -> None:
    async with Client(build_server(api([]), default_project=None)) as client:
        tools = (await client.list_tools()).tools
    # The memory tools of issue 14 (get_memory became get_memories, and timeline joined, in issue 25)
    # and the two document tools of Pipeline v2's document ingest.
    assert {tool.name for tool in tools} == {
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
    for tool in tools:
        assert "roots" not in tool.input_schema.get("properties", {}), tool.name


def test_the_tools_accept_exactly_the_stored_memory_types() -> None:
    # The MCP schema spells the types out to stay light; it once lacked document_chunk.
    import typing

    from memstream.schemas.memory import StoredType
    from memstream.serve.mcp_server import MemoryTypeName

    def names(tp: object) -> set[str]:
        args = typing.get_args(tp)
        return set().union(*(names(a) for a in args)) if typing.get_origin(tp) is not typing.Literal else set(args)

    assert names(MemoryTypeName) == names(StoredType)


def string_properties(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every string-typed (sub)schema of a tool argument: plain, optional (anyOf) or list items."""
    found: list[dict[str, Any]] = []
    if schema.get("type") == "string" and "enum" not in schema:
        found.append(schema)
    for option in schema.get("anyOf", []):
        found += string_properties(option)
    if isinstance(schema.get("items"), dict):
        found += string_properties(schema["items"])
    return found


async def test_every_string_argument_declares_its_max_length() -> None:
    # Issue 37.6: a 100,000-character query had no maxLength in the schema to warn the client.
    async with Client(build_server(api([]), default_project=None)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        for name, schema in tool.input_schema.get("properties", {}).items():
            for one in string_properties(schema):
                assert "maxLength" in one, f"{tool.name}.{name}"


def test_the_mcp_limits_are_the_apis() -> None:
    # The stdio server does not import the API's context (numpy, msgspec): the limits are spelled twice.
    from memstream.serve import context, mcp_server

    assert mcp_server.MAX_QUERY_CHARS == context.MAX_QUERY_CHARS
    assert mcp_server.MAX_PROJECT_CHARS == context.MAX_PROJECT_CHARS
    assert mcp_server.MAX_MEMORY_CHARS == context.MAX_MEMORY_CHARS


async def test_an_over_long_query_or_memory_is_one_clear_line() -> None:
    asked: list[httpx.Request] = []
    async with Client(build_server(api(asked), default_project="/srv/cwd")) as client:
        query = await client.call_tool("search_memories", {"query": "q" * 100_000})
        memory = await client.call_tool("add_memory", {"text": "m" * 100_000})
    for result, tool in ((query, "search_memories"), (memory, "add_memory")):
        assert result.is_error
        text = result.content[0].text  # type: ignore[union-attr]
        assert "\n" not in text and text.startswith(f"{tool}: ") and "Error executing tool" not in text, text
        assert "at most" in text and len(text) < 300, text
    assert asked == []  # refused before the API was called


async def test_add_memory_answers_the_id_and_a_short_preview() -> None:
    text = "Deploys go through make ship, never by hand. " * 150  # ~6,750 characters

    def answer(request: httpx.Request) -> httpx.Response:
        memory = {"id": "m1", "text": text, "type": "learned-pattern"}
        return httpx.Response(200, json={"status": "stored", "id": "m1", "fact_id": "f1", "memory": memory})

    client = ApiClient(httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://api"), user="me")
    async with Client(build_server(client, default_project="/srv/cwd")) as mcp:
        result = await mcp.call_tool("add_memory", {"text": text})
    assert not result.is_error, result.content
    said = result.content[0].text  # type: ignore[union-attr]
    assert '"id":"m1"' in said and "Deploys go through make ship" in said
    assert len(said) < 400, len(said)


async def test_get_memory_block_sends_the_block_once() -> None:
    # Issue 37.5: the block came as text plus a structured copy ({"result": block}).
    block = "[MEMORY]\n## Project Brief\nA shop.\n[/MEMORY]"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=block, headers={"content-type": "text/plain"})

    client = ApiClient(httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://api"), user="me")
    async with Client(build_server(client, default_project="/srv/cwd")) as mcp:
        result = await mcp.call_tool("get_memory_block", {})
    assert not result.is_error, result.content
    assert result.structured_content is None
    assert [part.text for part in result.content] == [block]  # type: ignore[union-attr]


async def test_a_tool_call_never_hops_to_a_worker_thread(monkeypatch: Any) -> None:
    """Each hop to a thread costs the API's loop a wake-up and a GIL hand-off, which a backlog makes
    slow (issue 42): resolving the project, from the arguments or the client's roots, stays on the loop."""
    import anyio.to_thread

    hops: list[Any] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn)
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    asked: list[httpx.Request] = []
    async with Client(build_server(api(asked), default_project="/srv/cwd"), list_roots_callback=roots) as client:
        await client.call_tool("search_memories", {"query": "deploys", "project": "/elsewhere"})
        await client.call_tool("search_memories", {"query": "deploys"})
    assert [r.url.params["project"] for r in asked] == ["/elsewhere", "/home/dev/shop"]
    assert hops == []
