"""The catalog bound to a Faust app: one Faust topic object per declared topic."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import faust
from faust.types import Message

from memstream.kafka.codec import CODEC_NAME
from memstream.topics.admin import partitions_of
from memstream.topics.catalog import (
    CONSOLIDATION,
    DEAD_LETTERS,
    DOCUMENTS,
    EMBEDDED,
    FACTS,
    FORGOTTEN,
    HISTORY,
    MEMORY_OPS,
    MEMORY_UPDATED,
    PARKED,
    SNAPSHOTS,
    TURNS,
    TopicSpec,
    topic_name,
)

log = logging.getLogger(__name__)


class DeadLetterSink(Protocol):
    async def dead_letter(self, stage: str, reason: str, message: Message | None) -> None: ...


class DeadLetteringTopic(faust.Topic):
    """A topic whose undecodable payloads go to the dead-letter topic instead of
    crashing the agent (Faust's default re-raises into the stream)."""

    async def on_key_decode_error(self, exc: Exception, message: Message) -> None:
        await self._dead_letter(f"key does not decode: {exc}", message)

    async def on_value_decode_error(self, exc: Exception, message: Message) -> None:
        await self._dead_letter(f"value does not decode: {exc}", message)

    async def _dead_letter(self, reason: str, message: Message) -> None:
        sink: DeadLetterSink | None = getattr(self.app, "dead_letter_sink", None)
        if sink is not None:
            await sink.dead_letter(f"decode:{message.topic}", reason, message)
        else:  # pragma: no cover - the app factory always installs a sink
            log.error("dropping undecodable message from %s: %s", message.topic, reason)
        # No stage ever sees it: this reader is done with it, or the commit would stay before it
        # (the partition never settles, and a restart dead-letters it again). Each reader of the
        # topic decodes it on its own channel, so each marks it once (memstream.kafka.transport).
        mark = getattr(self.app.consumer, "finished", None)
        if mark is not None:
            mark(message, f"decode:{id(self)}")


@dataclass(frozen=True)
class Topics:
    turns: faust.TopicT
    snapshots: faust.TopicT
    parked: faust.TopicT
    facts: faust.TopicT
    embedded: faust.TopicT
    memory_ops: faust.TopicT
    memory_updated: faust.TopicT
    consolidation: faust.TopicT
    history: faust.TopicT
    forgotten: faust.TopicT
    dead_letters: faust.TopicT
    documents: faust.TopicT


def bind_topics(app: faust.App, prefix: str, partitions: int) -> Topics:
    def bind(spec: TopicSpec) -> Any:
        return DeadLetteringTopic(
            app,
            topics=[topic_name(prefix, spec)],
            partitions=partitions_of(spec, partitions),
            key_serializer="raw",
            value_serializer=CODEC_NAME,
            config=dict(spec.config),
        )

    return Topics(
        turns=bind(TURNS),
        snapshots=bind(SNAPSHOTS),
        parked=bind(PARKED),
        facts=bind(FACTS),
        embedded=bind(EMBEDDED),
        memory_ops=bind(MEMORY_OPS),
        memory_updated=bind(MEMORY_UPDATED),
        consolidation=bind(CONSOLIDATION),
        history=bind(HISTORY),
        forgotten=bind(FORGOTTEN),
        dead_letters=bind(DEAD_LETTERS),
        documents=bind(DOCUMENTS),
    )
