"""Embed agent: document embeddings for facts, in batches.

Consumes ``facts`` (key: scope). Emits ``embedded`` (key: scope), in the order the facts
arrived on each partition. Embeds the facts that have arrived, up to ``MEMSTREAM_EMBED_BATCH``
at a time (the extraction spec: embeddings batched): a lone fact goes at once, and under load batches
fill while the previous one is embedded. Of a raw exchange's facts in one batch (each the whole exchange
so far, refreshing its one memory) only the newest is embedded and passed on: it holds all the others
hold (``rules.coalesce``), so an exchange that runs ahead of the embedder costs one embedding per batch,
not one per message. ``MEMSTREAM_EMBED_BATCH_WINDOW`` > 0 waits that long
at most for more, for remote APIs that bill or limit per request.
An outage of the embedding API holds the batch and retries it with capped backoff for up
to ``MEMSTREAM_RETRY_BUDGET`` before its facts are dead-lettered.
State: table ``embed-stats`` — per scope, texts embedded and batches, written on a timer
(``agents/counters.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time

import faust

from memstream.agents.base import DeadLetters, batches, state_table
from memstream.agents.counters import counters
from memstream.agents.extract import park_delay
from memstream.embed.base import EmbeddingOutage
from memstream.ports import Providers
from memstream.rules.coalesce import newest_of_each_exchange
from memstream.schemas import EmbeddedFact, EmbedStats, Fact
from memstream.telemetry import metrics
from memstream.telemetry.tracing import span_from_headers, stage_span
from memstream.topics.binding import Topics

STAGE = "embed"
log = logging.getLogger(__name__)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    embedder = providers.embedder
    stats = counters(app, state_table(app, "embed-stats", settings.partitions, use_partitioner=True), EmbedStats, STAGE)

    async def embed_through_outages(texts: list[str]) -> list[list[float]]:
        """Embed, waiting out an outage of the embedding API (Pipeline v2's backoff, 1 s doubling
        to 30 s plus jitter) for up to ``MEMSTREAM_RETRY_BUDGET``; then its error is raised.
        The batch stays unacked meanwhile, so a restart retries it (and its budget anew)."""
        failing_since: float | None = None
        failures = 0
        oldest = metrics.PARKED_OLDEST_SECONDS.labels(STAGE)
        while True:
            try:
                with (
                    stage_span("memstream.embed.batch", size=len(texts), model=embedder.model),
                    metrics.EMBED_SECONDS.time(),
                ):
                    vectors = await embedder.embed_documents(texts)
                oldest.set(0)
                return vectors
            except (EmbeddingOutage, OSError, TimeoutError) as exc:
                now = time.monotonic()
                failing_since = failing_since or now
                failures += 1
                if now - failing_since >= settings.retry_budget:
                    oldest.set(0)
                    raise
                delay = park_delay(failures, settings.park_delay, settings.park_delay_max)
                oldest.set(now - failing_since)
                log.warning("embedding unavailable (%s); batch of %d held, retry in %.1fs", exc, len(texts), delay)
                await asyncio.sleep(min(delay, max(0.0, failing_since + settings.retry_budget - now)))

    async def handle_batch(events: list[faust.types.EventT]) -> None:
        facts: list[tuple[Fact, faust.types.EventT]] = []
        for event in events:
            if isinstance(event.value, Fact):
                facts.append((event.value, event))
            else:
                await sink.dead_letter(
                    STAGE, f"TypeError: expected Fact, got {type(event.value).__name__}", event.message
                )
        if not facts:
            return
        kept = newest_of_each_exchange([fact for fact, _ in facts])
        coalesced: dict[str, int] = {}
        for (fact, _), keep in zip(facts, kept, strict=True):
            if not keep:
                coalesced[fact.scope_key] = coalesced.get(fact.scope_key, 0) + 1
        facts = [pair for pair, keep in zip(facts, kept, strict=True) if keep]
        try:
            vectors = await embed_through_outages([fact.text for fact, _ in facts])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.EVENTS_FAILED.labels(STAGE).inc(len(facts))
            for _, event in facts:
                await sink.dead_letter(STAGE, f"embedding failed: {type(exc).__name__}: {exc}", event.message)
            return
        metrics.EVENTS_PROCESSED.labels(STAGE).inc(len(facts))
        per_scope: dict[str, int] = {}
        for (fact, event), vector in zip(facts, vectors, strict=True):
            with span_from_headers("memstream.embed", event.message.headers, model=embedder.model):
                await topics.embedded.send(
                    key=fact.scope_key.encode(),
                    value=EmbeddedFact(fact=fact, vector=list(vector), embedding_model=embedder.model),
                )
            per_scope[fact.scope_key] = per_scope.get(fact.scope_key, 0) + 1
        for scope_key in per_scope.keys() | coalesced.keys():
            texts = per_scope.get(scope_key, 0)
            stats.add(
                scope_key, EmbedStats(texts=texts, batches=1 if texts else 0, coalesced=coalesced.get(scope_key, 0))
            )

    @app.agent(topics.facts, name=STAGE)
    async def embed(stream: faust.StreamT) -> None:
        async for events in batches(stream, settings.embed_batch, stage=STAGE, linger=settings.embed_batch_window):
            try:
                await handle_batch(list(events))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let one batch stop the stage
                log.exception("embed batch failed")
                for event in events:
                    await sink.dead_letter(STAGE, f"{type(exc).__name__}: {exc}", event.message)

    return embed
