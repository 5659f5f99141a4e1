"""One factory for provider clients in tests: fast retries, every client closed afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from memstream.llm.retry import RetryPolicy


@asynccontextmanager
async def client_factory(build: Callable[..., Any], first: str, **defaults: Any) -> AsyncIterator[Callable[..., Any]]:
    """Yields ``make(**overrides)``: ``build(<first option>, **rest)`` with ``defaults`` under the
    overrides, where ``max_retries=N`` becomes a RetryPolicy with millisecond backoff."""
    made: list[Any] = []

    def make(**overrides: Any) -> Any:
        options = {**defaults}
        retries = overrides.pop("max_retries", 0)
        options.update({"retry": RetryPolicy(max_retries=retries, base_delay=0.01), **overrides})
        client = build(options.pop(first), **options)
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            await client.close()
