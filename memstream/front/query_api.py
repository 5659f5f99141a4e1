"""``memstream api``: the HTTP API (and whatever mounts on it, MCP included) without the pipeline.

A query-only process: it reads the store, the history and the graph of a Qdrant server,
embeds queries, and publishes the few events a reader causes (turns, memory usage,
forgets, the console's corrections) with a plain Kafka producer; GET /events tails
memory-updated with a consumer of its own. It joins no consumer group, runs no agent and
holds no table, so API replicas scale with readers and never take partitions from the
workers (compose and the Helm chart run the API this way; the workers run ``memstream up``).

Nothing here imports Faust or the agents.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from memstream.bootstrap import build_embedder, build_graph, build_history, build_store
from memstream.front.app import create_app
from memstream.identity import turn_session_key
from memstream.kafka.security import client_options
from memstream.ports import Providers
from memstream.schemas import Fact, ForgetScope, MemoryOp, MemoryUsage, Turn, encode
from memstream.serve.context import ApiContext
from memstream.serve.events import EventHub, KafkaEventSource
from memstream.settings import Settings
from memstream.topics.catalog import (
    CONSOLIDATION,
    FACTS,
    FORGOTTEN,
    MEMORY_OPS,
    MEMORY_UPDATED,
    TURNS,
    topic_name,
)

log = logging.getLogger(__name__)


class QueryApiError(RuntimeError):
    """``memstream api`` cannot run with these settings; the message says why."""


def check_settings(settings: Settings) -> None:
    """A query-only API shares the store and the broker with the workers, so both must be servers."""
    if not settings.qdrant_url:
        raise QueryApiError(
            "memstream api reads the workers' store: set MEMSTREAM_QDRANT_URL (the in-process store "
            "belongs to the one `memstream up` that opened it)"
        )
    if not settings.kafka_bootstrap:
        raise QueryApiError("memstream api publishes to the workers' Kafka: set MEMSTREAM_KAFKA_BOOTSTRAP")


def query_providers(settings: Settings) -> Providers:
    """The read side only: no LLM (queries are embedded, never extracted)."""
    embedder = build_embedder(settings)
    return Providers(
        settings=settings,
        embedder=embedder,
        store=build_store(settings, embedder),
        llm=None,
        history=build_history(settings),
        graph=build_graph(settings),
    )


@dataclass
class Publisher:
    """The events a reader causes, sent with one Kafka producer (no consumer, no group)."""

    producer: Any
    prefix: str

    async def usage(self, usage: MemoryUsage) -> None:
        await self.producer.send_and_wait(topic_name(self.prefix, CONSOLIDATION), encode(usage), key=b"usage")

    async def turns(self, turns: Sequence[Turn]) -> None:
        for turn in turns:
            await self.producer.send_and_wait(
                topic_name(self.prefix, TURNS),
                encode(turn),
                key=turn_session_key(turn.session_id, turn.project, turn.user).encode(),
            )

    async def fact(self, fact: Fact) -> None:
        """An explicit memory or a console correction, to the decision stage."""
        await self.producer.send_and_wait(topic_name(self.prefix, FACTS), encode(fact), key=fact.scope_key.encode())

    async def memory_op(self, op: MemoryOp) -> None:
        """A forget, pin or mark-wrong, to the store agent."""
        await self.producer.send_and_wait(topic_name(self.prefix, MEMORY_OPS), encode(op), key=op.scope_key.encode())

    async def forget(self, event: ForgetScope) -> None:
        await self.producer.send_and_wait(
            topic_name(self.prefix, FORGOTTEN), encode(event), key=event.scope_key.encode()
        )


def build(settings: Settings, providers: Providers, publisher: Publisher, **context: Any) -> Any:
    """The ASGI app a query-only process serves: the same API as ``memstream up``'s."""
    source = KafkaEventSource(
        settings.kafka_bootstrap,
        topic_name(settings.topic_prefix, MEMORY_UPDATED),
        client_id=f"{settings.topic_prefix}-api-events",
        options=client_options(settings),
    )
    context.setdefault(
        "events", EventHub(source, client_buffer=settings.events_buffer, heartbeat_s=settings.events_heartbeat_s)
    )
    ctx = ApiContext(
        providers=providers,
        record_usage=publisher.usage,
        publish_turns=publisher.turns,
        publish_forget=publisher.forget,
        send_fact=publisher.fact,
        send_memory_op=publisher.memory_op,
        kafka_bootstrap=settings.kafka_bootstrap,
        **ApiContext.auth_from(settings),
        **context,
    )
    return create_app(ctx)


async def serve(settings: Settings) -> None:
    """Serve until SIGINT or SIGTERM; the store and the producer open before the first request."""
    import uvicorn
    from aiokafka import AIOKafkaProducer

    check_settings(settings)
    providers = query_providers(settings)
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, client_id=f"{settings.topic_prefix}-api", **client_options(settings)
    )

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        await providers.open()
        await producer.start()
        try:
            yield
        finally:
            await producer.stop()
            await providers.close()

    app = build(settings, providers, Publisher(producer, settings.topic_prefix))
    config = uvicorn.Config(
        app,
        host=settings.http_host,
        port=settings.http_port,
        access_log=False,
        log_level="warning",
        lifespan="on",
        # uvicorn would take X-Forwarded-For from any loopback peer as the client's address;
        # the guard reads it only from MEMSTREAM_TRUSTED_PROXIES (memstream.serve.guard).
        proxy_headers=False,
    )
    server = uvicorn.Server(config)  # stops on SIGINT and SIGTERM (uvicorn's own handlers)
    async with running():
        print(f"memstream api: serving {settings.api_url} (query-only: no consumer group, no agents)", flush=True)
        await server.serve()
