"""/mcp's tools call the API's app in process (memstream.front.app._mcp): as the caller of the /mcp
request, with the API's answers and failures as the tool's, and through no HTTP client (issue 42: an
HTTP client's request, URL and cookie handling cost the API's loop a millisecond a call)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memstream.auth import user_principal
from memstream.front.app import AsCaller, _mcp
from memstream.serve.guard import CURRENT_PRINCIPAL

HOST = "127.0.0.1"


def api_app(seen: list[dict[str, Any]]) -> Starlette:
    async def search(request: Request) -> JSONResponse:
        if request.query_params["q"] == "boom":
            raise RuntimeError("the store broke")
        principal = request.scope.get("state", {}).get("principal")
        seen.append({"params": dict(request.query_params), "user": principal.user if principal else None})
        return JSONResponse({"score": "fused", "fields": ["id", "preview"], "hits": [["m1", "uses zebra"]]})

    async def add(request: Request) -> JSONResponse:
        seen.append({"body": await request.json()})
        return JSONResponse({"id": "m2", "status": "stored"})

    return Starlette(routes=[Route("/search", search), Route("/memories", add, methods=["POST"])])


async def call_tool(name: str, arguments: dict[str, Any], seen: list[dict[str, Any]]) -> dict[str, Any]:
    routes, lifespan = _mcp(AsCaller(api_app(seen)), HOST)
    mcp = Starlette(routes=routes)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    token = CURRENT_PRINCIPAL.set(user_principal("ann@example.com", ["/repos/a"]))
    try:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=mcp), base_url=f"http://{HOST}:8765")
        async with lifespan(), client:
            answer = await client.post(
                "/mcp",
                json=body,
                headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
            )
    finally:
        CURRENT_PRINCIPAL.reset(token)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


async def test_a_tool_calls_the_api_in_process_as_the_caller_through_no_http_client(monkeypatch: Any) -> None:
    clients: list[str] = []
    send = httpx.AsyncClient.send

    async def counted(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        clients.append(str(self.base_url))
        return await send(self, request, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "send", counted)
    seen: list[dict[str, Any]] = []
    result = await call_tool("search_memories", {"query": "zebra", "project": "/repos/a"}, seen)
    assert not result["isError"], result
    assert "uses zebra" in result["content"][0]["text"]
    assert [(s["params"]["q"], s["params"]["project"], s["user"]) for s in seen] == [
        ("zebra", "/repos/a", "ann@example.com")
    ]
    assert clients == [f"http://{HOST}:8765"]  # the test's own request only


async def test_a_json_body_reaches_the_api() -> None:
    seen: list[dict[str, Any]] = []
    result = await call_tool("add_memory", {"text": "we deploy on fridays", "project": "/repos/a"}, seen)
    assert not result["isError"], result
    assert seen[0]["body"]["text"] == "we deploy on fridays"
    assert seen[0]["body"]["project"] == "/repos/a"


async def test_an_api_that_raises_is_a_one_line_tool_error() -> None:
    result = await call_tool("search_memories", {"query": "boom", "project": "/repos/a"}, [])
    assert result["isError"]
    text = result["content"][0]["text"]
    assert "/search failed (500)" in text and "\n" not in text, json.dumps(result)
