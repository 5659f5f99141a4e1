"""The API's routes, one module per resource; each handler is a module-level function of a request,
which takes the app's :class:`memstream.serve.context.ApiContext` with ``context_of``."""

from __future__ import annotations

from starlette.routing import BaseRoute

from memstream.serve.routes import admin, health, intake, memories, recall


def api_routes() -> list[BaseRoute]:
    """Every API route, in the order they are matched."""
    return [*health.ROUTES, *admin.ROUTES, *memories.ROUTES, *recall.ROUTES, *intake.ROUTES]
