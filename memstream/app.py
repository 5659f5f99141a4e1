"""The app factory: a Faust app with every topic, table and agent of the pipeline.

Nothing here runs at import. ``build_app`` is called with settings, providers and the
broker address once they are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust
from faust.contrib.opentelemetry import sdk_is_configured, setup_opentelemetry

import memstream.agents as agents
from memstream import api, limits
from memstream.agents.base import DeadLetters
from memstream.bootstrap import Providers
from memstream.codec import register_codec
from memstream.settings import Settings
from memstream.topics.binding import Topics, bind_topics
from memstream.transport import MemstreamApp

#: Seconds a consumer-group join waits for members. Faust's default made a worker
#: take 30 s to become ready on Tansu; the broker holds a join for the session timeout.
REBALANCE_TIMEOUT = 3.0
SESSION_TIMEOUT = 6.0
HEARTBEAT_INTERVAL = 1.0
#: How a memstream Faust app joins its group and starts reading: the pipeline's, and the
#: pass-through agents of ``bench.floor``, which must cost what the pipeline's hops cost.
CONSUMER_OPTIONS: dict[str, Any] = {
    "topic_disable_leader": True,
    "consumer_auto_offset_reset": "earliest",
    "broker_rebalance_timeout": REBALANCE_TIMEOUT,
    "broker_session_timeout": SESSION_TIMEOUT,
    "broker_heartbeat_interval": HEARTBEAT_INTERVAL,
}


@dataclass
class Pipeline:
    app: faust.App
    topics: Topics
    providers: Providers
    dead_letters: DeadLetters


def build_app(settings: Settings, providers: Providers, bootstrap: str, *, web: bool = True) -> Pipeline:
    register_codec()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = MemstreamApp(
        settings.topic_prefix,
        broker=[f"kafka://{server}" for server in bootstrap.split(",")],
        store="memory://",
        datadir=str(settings.data_dir / "faust"),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        **CONSUMER_OPTIONS,
        web_enabled=web,
        web_host=settings.http_host,
        web_bind=settings.http_host,
        web_port=settings.http_port,
        web_in_thread=False,
        autodiscover=False,
        producer_max_request_size=limits.RECORD_MAX_BYTES,
        consumer_max_fetch_size=limits.FETCH_PARTITION_MAX_BYTES,
    )
    app.fetch_max_wait_ms = settings.effective_fetch_max_wait_ms
    app.prefetch_backoff_ms = settings.prefetch_backoff_ms
    topics = bind_topics(app, settings.topic_prefix, settings.partitions)
    dead_letters = DeadLetters(topics.dead_letters)
    app.dead_letter_sink = dead_letters
    for module in agents.ALL_AGENTS:
        module.register(app, topics, providers, dead_letters)
    if sdk_is_configured():  # else the sensor would read every event's headers for no-op spans
        setup_opentelemetry(app)
    if web:
        api.register(app, providers, topics)
    return Pipeline(app=app, topics=topics, providers=providers, dead_letters=dead_letters)
