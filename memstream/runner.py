"""Runs the whole pipeline in one process: broker (if embedded), topics, providers, worker.

Used by ``memstream up`` and by the end-to-end tests, so both exercise the same path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import faust

from memstream.app import Pipeline, build_app
from memstream.bootstrap import Providers, build_providers
from memstream.broker import EmbeddedBroker
from memstream.logs import quiet_payload_loggers
from memstream.runtime import read_runtime_file as read_runtime_file  # its old home: callers still import it here
from memstream.settings import Settings
from memstream.topics.admin import ensure_topics

log = logging.getLogger(__name__)

#: How long a worker may take to join its group and recover its tables.
READY_TIMEOUT_SECONDS = 90.0


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

    @property
    def providers(self) -> Providers:
        return self.pipeline.providers

    async def stop(self) -> None:
        try:
            await self.worker.stop()
        finally:
            try:
                await self.providers.close()
            finally:
                if self.broker is not None:
                    self.broker.stop()
                if self.announced:
                    _remove_runtime_file(self.settings)


async def start(
    settings: Settings,
    providers: Providers | None = None,
    *,
    web: bool = True,
    loglevel: str | None = None,
    announce: bool = True,
) -> Running:
    """Start broker (embedded default), topics, providers and the Faust worker; wait until ready."""
    began = time.monotonic()
    timings: dict[str, float] = {}
    quiet_payload_loggers()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    broker: EmbeddedBroker | None = None
    if settings.embedded_broker:
        broker = EmbeddedBroker(log_file=settings.data_dir / "broker.log").start()
        bootstrap = broker.bootstrap
    else:
        bootstrap = settings.kafka_bootstrap
    timings["broker"] = time.monotonic() - began
    try:
        await ensure_topics(
            bootstrap, settings.topic_prefix, partitions=settings.partitions, replication=settings.replication
        )
        timings["topics"] = time.monotonic() - began
        providers = providers or build_providers(settings)
        await providers.open()
        timings["providers"] = time.monotonic() - began
        pipeline = build_app(settings, providers, bootstrap, web=web)
        worker = _Worker(
            pipeline.app,
            daemon=False,
            loglevel=loglevel or settings.log_level,
            quiet=True,
            redirect_stdouts=False,
            override_logging=False,
        )
        await worker.start()
        await asyncio.wait_for(worker.ready.wait(), READY_TIMEOUT_SECONDS)
        timings["ready"] = time.monotonic() - began
    except BaseException:
        if broker is not None:
            broker.stop()
        raise
    running = Running(settings, bootstrap, pipeline, broker, worker, time.monotonic() - began, timings, announce)
    if announce:  # a replay's shadow pipeline shares the data dir but is not what `up` serves
        _write_runtime_file(running)
    return running


def _write_runtime_file(running: Running) -> None:
    data = {
        "pid": os.getpid(),
        "bootstrap": running.bootstrap,
        "api_url": running.settings.api_url,
        "topic_prefix": running.settings.topic_prefix,
        "embedded_broker": running.broker is not None,
    }
    running.settings.runtime_file.write_text(json.dumps(data, indent=2))


def _remove_runtime_file(settings: Settings) -> None:
    with contextlib.suppress(FileNotFoundError):
        settings.runtime_file.unlink()
