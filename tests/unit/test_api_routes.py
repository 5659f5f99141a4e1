"""Each API handler is a module-level function: importable, and served on its own over a context."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.testclient import TestClient

from memstream.auth import admin_principal
from memstream.serve.context import ApiContext
from memstream.serve.guard import AuthMiddleware
from memstream.serve.routes import api_routes, recall
from memstream.settings import Settings


def alone(handler: Any, ctx: ApiContext, path: str) -> TestClient:
    """``handler`` as the only route of an app that carries ``ctx``, behind the real guard."""
    app = Starlette(routes=[Route(path, handler)])
    app.state.ctx = ctx
    return TestClient(AuthMiddleware(app, tokens=None, open_principal=admin_principal()))


def test_the_health_handler_serves_on_its_own() -> None:
    from memstream.serve.routes import health

    providers: Any = SimpleNamespace(raw_mode=True, llm=None, embedder=SimpleNamespace(model="e5"))
    answer = alone(health.health, ApiContext(providers=providers), "/health").get("/health")
    assert answer.status_code == 200
    assert answer.json()["raw_mode"] is True and answer.json()["embedding_model"] == "e5"


def test_the_search_handler_refuses_a_bad_request_on_its_own() -> None:
    providers: Any = SimpleNamespace(settings=Settings.from_env({}))
    client = alone(recall.search, ApiContext(providers=providers), "/search")
    missing = client.get("/search", params={"project": "/repo"})
    assert missing.status_code == 400 and missing.json() == {"error": "the 'q' parameter is required"}
    relative = client.get("/search", params={"q": "port", "project": "repo"})
    assert relative.status_code == 400 and "absolute directory path" in relative.json()["error"]


def test_a_handler_reads_the_context_of_its_own_app() -> None:
    seen: list[ApiContext] = []

    async def probe(request: Request) -> Any:
        from memstream.serve.context import JSON, context_of

        seen.append(context_of(request))
        return JSON({})

    ctx = ApiContext(providers=SimpleNamespace())  # type: ignore[arg-type]
    alone(probe, ctx, "/probe").get("/probe")
    assert seen == [ctx]


def test_every_route_is_a_module_level_function() -> None:
    for route in api_routes():
        assert isinstance(route, Route)
        handler = route.endpoint
        assert "<locals>" not in handler.__qualname__, handler.__qualname__
        assert handler.__module__.startswith("memstream.serve.routes."), handler.__module__


def test_every_console_route_is_a_module_level_function() -> None:
    from memstream.console.routes import console_routes

    for route in console_routes():
        assert isinstance(route, Route)
        assert "<locals>" not in route.endpoint.__qualname__, route.endpoint.__qualname__
        assert route.endpoint.__module__.startswith("memstream.console.routes."), route.endpoint.__module__
