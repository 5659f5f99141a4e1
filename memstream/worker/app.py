"""The app factory: a Faust app with every topic, table and agent of the pipeline.

Nothing here runs at import. ``build_app`` is called with settings, providers and the
broker address once they are known.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import faust
from faust.contrib.opentelemetry import sdk_is_configured, setup_opentelemetry

import memstream.agents as agents
from memstream import limits
from memstream.agents.base import DeadLetters
from memstream.front.app import create_app
from memstream.identity import turn_session_key
from memstream.intake.turnlog import TurnLog
from memstream.kafka.codec import register_codec
from memstream.kafka.doorbell import Doorbell
from memstream.kafka.ledger import ForgottenLedger, ledger_of
from memstream.kafka.recovery import TableManager
from memstream.kafka.security import client_options, faust_credentials
from memstream.kafka.transport import MemstreamApp
from memstream.ports import Providers
from memstream.schemas import DocumentIngest, DocumentRemove, Fact, ForgetScope, MemoryOp, MemoryUsage, Turn
from memstream.serve import context as api
from memstream.serve.events import EventHub, KafkaEventSource
from memstream.settings import Settings
from memstream.telemetry import health
from memstream.telemetry.metrics import CONSUMER_LAG, PARKED
from memstream.topics.binding import Topics, bind_topics
from memstream.topics.catalog import MEMORY_UPDATED, topic_name

#: Seconds a consumer-group join waits for members. Faust's default made a worker
#: take 30 s to become ready on Tansu; the broker holds a join for half the session timeout.
REBALANCE_TIMEOUT = 3.0
SESSION_TIMEOUT = 6.0
HEARTBEAT_INTERVAL = 1.0
#: How a memstream Faust app joins its group and starts reading: the pipeline's, and the
#: pass-through agents of ``bench.perf.floor``, which must cost what the pipeline's hops cost.
CONSUMER_OPTIONS: dict[str, Any] = {
    "topic_disable_leader": True,
    "consumer_auto_offset_reset": "earliest",
    "broker_rebalance_timeout": REBALANCE_TIMEOUT,
    "broker_session_timeout": SESSION_TIMEOUT,
    "broker_heartbeat_interval": HEARTBEAT_INTERVAL,
}


def group_timeouts(session_timeout: float) -> dict[str, float]:
    """The group options for a session timeout (MEMSTREAM_GROUP_SESSION_TIMEOUT_S): the rebalance timeout
    half of it and the heartbeat a third, at most the defaults above (6 s gives exactly those)."""
    return {
        "broker_session_timeout": session_timeout,
        "broker_rebalance_timeout": min(REBALANCE_TIMEOUT, session_timeout / 2),
        "broker_heartbeat_interval": min(HEARTBEAT_INTERVAL, session_timeout / 3),
    }


@dataclass
class Pipeline:
    app: faust.App
    topics: Topics
    providers: Providers
    dead_letters: DeadLetters
    #: The HTTP API (memstream.front.app), served by memstream.worker.api_thread; None without ``web``.
    api: Any = None
    #: The same API for the reads the API's own loop answers (search, block, MCP: issue 42), its writes
    #: sent on the worker's loop (:func:`reads_context`); None without ``web``.
    api_reads: Any = None


def build_app(settings: Settings, providers: Providers, bootstrap: str, *, web: bool = True) -> Pipeline:
    register_codec()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = MemstreamApp(
        settings.topic_prefix,
        broker=[f"kafka://{server}" for server in bootstrap.split(",")],
        # TLS/SASL to a secured cluster (None: plaintext, as to the embedded broker).
        broker_credentials=faust_credentials(settings) if settings.kafka_bootstrap else None,
        store="memory://",
        datadir=str(settings.data_dir / "faust"),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        **{**CONSUMER_OPTIONS, **group_timeouts(settings.group_session_timeout_s)},
        # No Faust web server: the API is a Starlette app (memstream.front.app) that runs on the worker's
        # loop, its socket held by a thread of its own across the worker's restarts (worker.api_thread).
        web_enabled=False,
        autodiscover=False,
        processing_guarantee=settings.processing_guarantee,
        # Faust's, whose table recovery also ends on a changelog end no record is delivered at.
        TableManager=TableManager,
        producer_max_request_size=limits.RECORD_MAX_BYTES,
        consumer_max_fetch_size=limits.FETCH_PARTITION_MAX_BYTES,
    )
    app.fetch_max_wait_ms = settings.effective_fetch_max_wait_ms
    app.fetch_idle_wait_ms = settings.effective_fetch_idle_wait_ms
    app.prefetch_backoff_ms = settings.prefetch_backoff_ms
    # Tansu holds a fetch for its whole wait: there an idle consumer pauses on its own side instead,
    # until something is published (memstream.kafka.doorbell). Kafka answers a waiting fetch at once.
    app.doorbell = Doorbell() if settings.embedded_broker else None
    topics = bind_topics(app, settings.topic_prefix, settings.partitions)
    dead_letters = DeadLetters(topics.dead_letters)
    app.dead_letter_sink = dead_letters
    for module in agents.ALL_AGENTS:
        module.register(app, topics, providers, dead_letters)
    if sdk_is_configured():  # else the sensor would read every event's headers for no-op spans
        setup_opentelemetry(app)
    asgi = reads = None
    if web:
        context = api.ApiContext(
            providers=providers,
            record_usage=_usage_sink(topics),
            update_lag=lambda: update_lag(app),
            publish_turns=_turn_sink(topics, TurnLog.for_settings(settings)),
            publish_forget=_forget_sink(topics, ledger_of(app)),
            **api.ApiContext.auth_from(settings),
            health=lambda: _health(app),
            send_fact=_fact_sink(topics),
            send_memory_op=_op_sink(topics),
            send_document=_document_sink(topics),
            maintenance=getattr(app, "maintenance", None),
            events=event_hub(settings, bootstrap),
            kafka_bootstrap=bootstrap,
        )
        asgi = create_app(context)
        reads = create_app(reads_context(context, asyncio.get_running_loop()))
    return Pipeline(app=app, topics=topics, providers=providers, dead_letters=dead_letters, api=asgi, api_reads=reads)


def reads_context(context: api.ApiContext, loop: asyncio.AbstractEventLoop) -> api.ApiContext:
    """``context`` for an app served on another thread's loop (memstream.worker.api_thread): reads call
    the providers there (the store's and the query embedder's threads are their own, and the store's
    and graph's locks are taken by the pipeline's writes only), so a search does not wait for the
    worker's loop; every send runs on the worker's ``loop``, where its producer lives. Usage records
    are sent without waiting (a ranking signal: a read never waits for it). No events, console or
    maintenance: those stay on the worker's loop."""

    def on_worker(sink: Callable[..., Awaitable[Any]] | None) -> Any:
        if sink is None:
            return None

        async def sending(*args: Any) -> Any:
            return await sink(*args)

        async def send(*args: Any) -> Any:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(sending(*args), loop))

        return send

    async def recording(record: MemoryUsage) -> None:
        await context.record_usage(record)

    async def usage(record: MemoryUsage) -> None:
        sent: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(recording(record), loop)
        sent.add_done_callback(_usage_sent)

    return dataclasses.replace(
        context,
        record_usage=usage,
        publish_turns=on_worker(context.publish_turns),
        publish_forget=on_worker(context.publish_forget),
        send_fact=on_worker(context.send_fact),
        send_memory_op=on_worker(context.send_memory_op),
        send_document=on_worker(context.send_document),
        events=None,
        console=False,
        maintenance=None,
    )


def _usage_sent(sent: concurrent.futures.Future[None]) -> None:
    if not sent.cancelled() and sent.exception() is not None:
        logging.getLogger(__name__).warning("could not record memory usage", exc_info=sent.exception())


def event_hub(settings: Settings, bootstrap: str) -> EventHub:
    """GET /events' hub over the memory-updated topic (it starts with the first client)."""
    source = KafkaEventSource(
        bootstrap,
        topic_name(settings.topic_prefix, MEMORY_UPDATED),
        client_id=f"{settings.topic_prefix}-events",
        options=client_options(settings),
    )
    return EventHub(source, client_buffer=settings.events_buffer, heartbeat_s=settings.events_heartbeat_s)


def _health(app: MemstreamApp) -> health.Status:
    """What the runner installed on the app; "starting" until it has."""
    if app.health is None:
        return health.Status(live=True, ready=False, problems=["starting: the worker is not started yet"])
    status: health.Status = app.health()
    return status


def _usage_sink(topics: Topics) -> api.UsageSink:
    async def send(usage: MemoryUsage) -> None:
        await topics.consolidation.send(key=b"usage", value=usage)

    return send


def _turn_sink(topics: Topics, log: TurnLog | None) -> api.TurnSink:
    """POST /turns: written to the durable turn log first (embedded default), then sent; the caller
    hears "ok" once the broker has them."""

    async def send(turns: Sequence[Turn]) -> None:
        seqs = await asyncio.to_thread(log.append, turns) if log is not None else []
        sent = [
            await topics.turns.send(key=turn_session_key(turn.session_id, turn.project, turn.user).encode(), value=turn)
            for turn in turns
        ]
        if log is not None:
            for delivery in sent:
                await delivery
            await asyncio.to_thread(log.published, seqs)

    return send


def _document_sink(topics: Topics) -> Callable[[DocumentIngest | DocumentRemove], Awaitable[None]]:
    async def send(request: DocumentIngest | DocumentRemove) -> None:
        await topics.documents.send(key=request.document_id.encode(), value=request)

    return send


def _fact_sink(topics: Topics) -> api.FactSink:
    async def send(fact: Fact) -> None:
        await topics.facts.send(key=fact.scope_key.encode(), value=fact)

    return send


def _forget_sink(topics: Topics, ledger: ForgottenLedger) -> api.ForgetSink:
    async def send(event: ForgetScope) -> None:
        await topics.forgotten.send(key=event.scope_key.encode(), value=event)
        # Known here before the API answers: a turn sent after it finds its window stale.
        ledger.record(event)

    return send


def _op_sink(topics: Topics) -> api.OpSink:
    async def send(op: MemoryOp) -> None:
        await topics.memory_ops.send(key=op.scope_key.encode(), value=op)

    return send


def update_lag(app: faust.App) -> None:
    """Consumer lag per assigned partition: the partition's end minus the next offset to read."""
    try:
        consumer = app.consumer
        parked = 0
        for tp in consumer.assignment():
            if tp.topic.endswith("-changelog"):  # table changelogs are only read on recovery
                continue
            highwater = consumer.highwater(tp)
            read = consumer._read_offset.get(tp)  # type: ignore[attr-defined]  # Faust keeps no public "position"
            if highwater is None:
                continue
            lag = max(0, highwater - (read + 1 if read is not None else 0))
            CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(lag)
            if tp.topic.endswith(".parked"):  # parked snapshots not taken for a retry yet
                parked += lag
        PARKED.set(parked)
    except Exception:  # metrics never break serving
        logging.getLogger(__name__).debug("could not read the consumer lag", exc_info=True)
