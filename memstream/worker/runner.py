"""Runs the whole pipeline in one process: broker (if embedded), topics, providers, worker.

Used by ``memstream up`` and by the end-to-end tests, so both exercise the same path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust

from memstream.bootstrap import build_providers
from memstream.kafka import doorbell
from memstream.kafka.broker import EmbeddedBroker
from memstream.kafka.security import client_options
from memstream.logs import quiet_flow_control, quiet_payload_loggers
from memstream.ports import Providers
from memstream.runtime import read_runtime_file as read_runtime_file  # its old home: callers still import it here
from memstream.runtime import remove_runtime_file, write_runtime_file
from memstream.settings import Settings
from memstream.telemetry import health
from memstream.topics.admin import ensure_topics
from memstream.worker.api_thread import ApiThread
from memstream.worker.app import Pipeline, build_app

log = logging.getLogger(__name__)

#: How long a worker may take to join its group and recover its tables.
READY_TIMEOUT_SECONDS = 90.0
#: How long stopping the worker may take before it is abandoned (the process then exits).
STOP_TIMEOUT_SECONDS = 8.0


class _Worker(faust.Worker):
    """A Faust worker that tells when it is ready and leaves signals to its owner."""

    def __init__(self, app: faust.App, **kwargs: Any):
        super().__init__(app, **kwargs)
        # Faust's spinner writes cursor escapes to stdout even when quiet; `up` prints its own banner.
        self.spinner = None
        self.ready = asyncio.Event()

    def install_signal_handlers(self) -> None:
        # ``memstream up`` and the tests own the process's signals.
        pass

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        self.ready.set()


@dataclass
class Running:
    """A started pipeline; ``await running.stop()`` stops everything it started."""

    settings: Settings
    bootstrap: str
    pipeline: Pipeline
    broker: EmbeddedBroker | None
    worker: _Worker
    started_in: float
    timings: dict[str, float] = field(default_factory=dict)
    announced: bool = True
    #: Read positions seen per partition, to tell a stalled one (memstream.telemetry.health).
    watch: health.Watch = field(default_factory=health.Watch)
    runtime_written: bool = False
    #: The UDP endpoint other processes ring after publishing (memstream.kafka.doorbell).
    doorbell_endpoint: asyncio.DatagramTransport | None = None
    #: The HTTP API's socket and thread, serving this pipeline's app; closed by ``stop`` when
    #: ``owns_api`` (else its owner, `memstream up`, keeps it open across fresh starts).
    api: ApiThread | None = None
    owns_api: bool = False
    #: Seconds each part of the last ``stop`` took: the worker, the providers (store, embedder, …), the broker.
    stop_timings: dict[str, float] = field(default_factory=dict)

    @property
    def providers(self) -> Providers:
        return self.pipeline.providers

    def health(self) -> health.Status:
        """Liveness and readiness (memstream.telemetry.health); what ``/health`` reports."""
        return health.status(
            self.pipeline.app,
            started=self.worker.ready.is_set(),
            announced=self.runtime_written or not self.announced,
            watch=self.watch,
        )

    @property
    def broker_pid(self) -> int | None:
        return self.broker.pid if self.broker is not None else None

    async def stop(
        self, *, keep_broker: bool = False, keep_providers: bool = False, keep_api: bool = False, cancel: bool = False
    ) -> None:
        """Stop the worker, the providers and the embedded broker. A broker started afresh
        (memstream.worker.recycle) keeps the providers and the API's socket for the next worker,
        and stops the broker itself once it has read what the broker still holds. ``cancel``: the
        events still under way are dropped, not waited for (a stop past its drain bound,
        memstream.worker.drain). The API stops handing requests to this pipeline first."""
        if self.doorbell_endpoint is not None:
            self.doorbell_endpoint.close()
        if cancel:
            self.pipeline.app.conf.stream_wait_empty = False
        began = time.monotonic()
        try:
            if self.api is not None:
                await self.api.detach()
                if self.owns_api and not keep_api:
                    await self.api.close()
            await _stop_worker(self.worker)
        finally:
            self.stop_timings["worker"] = time.monotonic() - began
            try:
                if not keep_providers:
                    await self.providers.close()
            finally:
                self.stop_timings["store"] = time.monotonic() - began - self.stop_timings["worker"]
                if self.broker is not None and not keep_broker:
                    stopping = time.monotonic()
                    self.broker.stop()
                    self.stop_timings["broker"] = time.monotonic() - stopping
                if self.announced and keep_broker:
                    # Started afresh next (memstream.worker.recycle): `up` still runs, so a `memstream
                    # publish` meanwhile waits for "ready" instead of hearing "not running".
                    _write_runtime_file(self.settings, self.bootstrap, self.broker, ready=False)
                elif self.announced:
                    remove_runtime_file(self.settings)


async def start(
    settings: Settings,
    providers: Providers | None = None,
    *,
    web: bool = True,
    loglevel: str | None = None,
    announce: bool = True,
    broker_port: int | None = None,
    carried_states: dict[str, dict[str, Any]] | None = None,
    before_worker: Callable[[str], Awaitable[None]] | None = None,
    api: ApiThread | None = None,
) -> Running:
    """Start broker (embedded default), topics, providers and the Faust worker; wait until ready.

    A broker started afresh (memstream.worker.recycle) takes its predecessor's ``broker_port``, so
    every client's bootstrap stays right; its tables adopt ``carried_states`` (per table, states by
    key), and ``before_worker`` is awaited with the bootstrap once the topics exist and before
    anything reads them.

    With ``web``, the pipeline's API is served once the worker is ready: by ``api`` when given (its
    owner keeps it, `memstream up` across fresh starts), else by an :class:`ApiThread` of its own."""
    began = time.monotonic()
    timings: dict[str, float] = {}
    quiet_payload_loggers()
    quiet_flow_control()  # a backlog at start makes Faust wait for its producer: not a warning
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    broker: EmbeddedBroker | None = None
    if settings.embedded_broker:
        broker = EmbeddedBroker(port=broker_port, log_file=settings.data_dir / "broker.log").start()
        bootstrap = broker.bootstrap
    else:
        bootstrap = settings.kafka_bootstrap
    timings["broker"] = time.monotonic() - began
    worker: _Worker | None = None
    endpoint: asyncio.DatagramTransport | None = None
    owns_api = web and api is None
    if web and api is None:
        api = ApiThread(settings.http_host, settings.http_port)
    try:
        if announce:  # "starting": `memstream publish` waits for ready instead of failing
            _write_runtime_file(settings, bootstrap, broker, ready=False)
        await ensure_topics(
            bootstrap,
            settings.topic_prefix,
            partitions=settings.partitions,
            replication=settings.replication,
            security=client_options(settings) if broker is None else None,
            words_retention_ms=int(settings.words_retention_days * 86_400_000),
        )
        timings["topics"] = time.monotonic() - began
        if before_worker is not None:
            await before_worker(bootstrap)
        providers = providers or build_providers(settings)
        await providers.open()
        timings["providers"] = time.monotonic() - began
        pipeline = build_app(settings, providers, bootstrap, web=web)
        pipeline.app.carried_states = carried_states or {}  # type: ignore[attr-defined]
        worker = _Worker(
            pipeline.app,
            daemon=False,
            loglevel=loglevel or settings.log_level,
            quiet=True,
            redirect_stdouts=False,
            override_logging=False,
        )
        running = Running(settings, bootstrap, pipeline, broker, worker, 0.0, timings, announce)
        running.api, running.owns_api = (api, owns_api) if web else (None, False)
        pipeline.app.health = running.health  # type: ignore[attr-defined]
        bell = getattr(pipeline.app, "doorbell", None)
        if broker is not None and bell is not None:
            # At the broker's own address, on UDP: every publisher knows it (memstream.kafka.doorbell.ring).
            endpoint = running.doorbell_endpoint = await doorbell.listen(bell, broker.host, broker.port)
        await worker.start()
        await asyncio.wait_for(worker.ready.wait(), READY_TIMEOUT_SECONDS)
        if running.api is not None:  # "ready" means the API answers
            await running.api.attach(pipeline.api, pipeline.api_reads)
        timings["ready"] = time.monotonic() - began
    except BaseException:
        # A failed or interrupted start stops what it started: the worker (its agents and
        # consumer would otherwise outlive the broker, crashing) and the broker.
        if endpoint is not None:
            endpoint.close()
        try:
            if api is not None:
                await asyncio.shield(api.close() if owns_api else api.detach())
            if worker is not None:
                await asyncio.shield(_stop_worker(worker))
            if providers is not None:
                await providers.close()
        except BaseException:
            log.warning("stopping after a failed start failed", exc_info=True)
        finally:
            if broker is not None:
                broker.stop()
            if announce:
                remove_runtime_file(settings)
        raise
    running.started_in = time.monotonic() - began
    if announce:  # a replay's shadow pipeline shares the data dir but is not what `up` serves
        _write_runtime_file(settings, bootstrap, broker, ready=True)
        running.runtime_written = True
    return running


async def _stop_worker(worker: _Worker) -> None:
    """Stop the Faust worker, at most ``STOP_TIMEOUT_SECONDS`` (a wedged agent must not
    keep the process, and the broker, alive)."""
    try:
        await asyncio.wait_for(worker.stop(), STOP_TIMEOUT_SECONDS)
    except TimeoutError:
        log.warning("the worker did not stop within %.0fs; leaving it", STOP_TIMEOUT_SECONDS)


def _write_runtime_file(settings: Settings, bootstrap: str, broker: EmbeddedBroker | None, *, ready: bool) -> None:
    data = {
        "bootstrap": bootstrap,
        "api_url": settings.api_url,
        "topic_prefix": settings.topic_prefix,
        "embedded_broker": broker is not None,
        "ready": ready,
        # Open mode (MEMSTREAM_API_OPEN, loopback only): the CLI beside it writes without a token too.
        "api_open": settings.api_open,
    }
    write_runtime_file(settings, data)
