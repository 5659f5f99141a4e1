"""The console's routes, one module per view group; each handler is a module-level function of a request,
which takes the console's :class:`memstream.console.context.Console` with ``console_of``."""

from __future__ import annotations

from starlette.routing import BaseRoute

from memstream.console.routes import admin, memories, overview, sessions, signin, stale


def console_routes() -> list[BaseRoute]:
    """Every console route below /console, in the order they are matched."""
    return [*memories.ROUTES, *signin.ROUTES, *sessions.ROUTES, *overview.ROUTES, *admin.ROUTES, *stale.ROUTES]
