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
