"""MCP at /mcp behind the tokens: its tools call the API in process as the caller of the /mcp
request, so they read what the token may read and nothing else. Served by the real `memstream api`
(uvicorn, a Kafka producer on the embedded broker; the edge store stands in for a Qdrant server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from memstream.auth import TokenStore, user_principal
from memstream.bootstrap import build_providers
from memstream.front import query_api
from memstream.identity import memory_id, normalize_content, project_key, user_key
from memstream.kafka.broker import EmbeddedBroker, free_port
from memstream.topics.admin import ensure_topics
from tests.conftest import make_settings
from tests.e2e.conftest import eventually
from tests.tenancy.test_api_tenancy import ALICE, BOB, MARKS, A, B, leaks, seed

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: Any) -> AsyncIterator[tuple[str, dict[str, str]]]:
    with EmbeddedBroker() as broker:
        data = tmp_path_factory.mktemp("mcp-tenancy")
        settings = make_settings(
            data,
            api_open=False,
            graph_enabled=True,
            kafka_bootstrap=broker.bootstrap,
            qdrant_url="http://unused:6333",
            http_port=free_port(),
        )
        await ensure_topics(broker.bootstrap, settings.topic_prefix, partitions=2)
        providers = build_providers(dataclasses.replace(settings, qdrant_url=""))
        store = TokenStore(settings.tokens_file)
        tokens = {
            "alice": store.create(user_principal(ALICE, [A]))[0],
            "bob": store.create(user_principal(BOB, [B]))[0],
        }
        patch = pytest.MonkeyPatch()
        patch.setattr(query_api, "query_providers", lambda s: providers)
        serving = asyncio.create_task(query_api.serve(settings))
        try:
            async with httpx.AsyncClient(base_url=settings.api_url) as client:

                async def up() -> bool:
                    try:
                        return (await client.get("/health")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(up, what="memstream api to listen")
            await seed(providers)
            yield f"{settings.api_url}/mcp", tokens
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            patch.undo()


def as_caller(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))


def body(result: Any) -> str:
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "".join(getattr(part, "text", "") for part in result.content)


def memory_of(scope_key: str) -> str:
    text = f"{MARKS[scope_key]}: prefers tabs and uses the zebra build tool"
    return memory_id(scope_key, normalize_content(text).content_hash)


async def test_mcp_without_a_token_is_refused(served: tuple[str, dict[str, str]]) -> None:
    url, _ = served
    with pytest.raises(BaseException):  # noqa: B017 - the SDK raises its own transport error on a 401
        async with as_caller(url, None) as client:
            await client.list_tools()
    with pytest.raises(BaseException):  # noqa: B017
        async with as_caller(url, "mst_0123456789ab_wrong") as client:
            await client.list_tools()


async def test_mcp_tools_read_only_what_the_token_may(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    allowed = {project_key(A), user_key(ALICE)}
    async with as_caller(url, tokens["alice"]) as client:
        found = await client.call_tool("search_memories", {"query": "zebra build tool tabs", "project": A})
        assert not found.is_error, body(found)
        assert MARKS[project_key(A)] in body(found) and not leaks(body(found), allowed=allowed)
        block = await client.call_tool("get_memory_block", {"project": A, "query": "zebra"})
        assert not block.is_error and not leaks(body(block), allowed=allowed)
        for tool, args in (
            ("search_memories", {"query": "zebra", "project": B}),
            ("get_memory_block", {"project": B}),
            ("list_memories", {"project": B}),
            ("timeline", {"id": memory_of(project_key(B)), "project": A}),
            ("memory_history", {"id": memory_of(user_key(BOB))}),
        ):
            refused = await client.call_tool(tool, args)
            assert refused.is_error, (tool, body(refused))
            assert not leaks(body(refused), allowed=set()), tool
        foreign = await client.call_tool("get_memories", {"ids": [memory_of(user_key(BOB)), memory_of(project_key(B))]})
        assert not foreign.is_error and not leaks(body(foreign), allowed=set())
        assert json.loads(body(foreign))["missing"] == [memory_of(user_key(BOB)), memory_of(project_key(B))]
        mine = await client.call_tool("get_memories", {"ids": [memory_of(user_key(ALICE))]})
        assert not mine.is_error and MARKS[user_key(ALICE)] in body(mine)
