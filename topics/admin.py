"""Create the catalog's topics on the broker, idempotently, before any agent starts."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from memstream.topics.catalog import ALL_TOPICS, TopicSpec, topic_config, topic_name

log = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.errno


class TopicError(RuntimeError):
    """The broker refused to create a topic; the message names it and the error."""


def partitions_of(spec: TopicSpec, default: int) -> int:
    return spec.partitions if spec.partitions is not None else default


async def ensure_topics(
    bootstrap: str,
    prefix: str,
    *,
    partitions: int,
    replication: int = 1,
    specs: tuple[TopicSpec, ...] = ALL_TOPICS,
    security: Mapping[str, Any] | None = None,
    words_retention_ms: int = 0,
) -> list[str]:
    """Create missing topics; existing ones are left as they are. Returns the names created.
    ``words_retention_ms``: caps the retention of the topics holding people's words (0: as declared)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=f"{prefix}-admin", **(security or {}))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                topic_name(prefix, spec),
                num_partitions=partitions_of(spec, partitions),
                replication_factor=replication,
                topic_configs=topic_config(spec, words_retention_ms),
            )
            for spec in specs
            if topic_name(prefix, spec) not in existing
        ]
        if not wanted:
            return []
        response = await admin.create_topics(wanted)
        created = []
        for name, code, message in response.topic_errors:
            if code == 0:
                created.append(name)
            elif code != _TOPIC_ALREADY_EXISTS:  # another worker won the race: fine
                raise TopicError(f"cannot create topic {name}: error {code} {message or ''}".strip())
        log.info("created topics: %s", ", ".join(created))
        return created
    finally:
        await admin.close()


async def describe_partitions(
    bootstrap: str, names: list[str], *, security: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """Partition count of each named topic, as the broker reports it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **(security or {}))
    await admin.start()
    try:
        described = await admin.describe_topics(names)
        return {t["topic"]: len(t["partitions"]) for t in described}
    finally:
        await admin.close()
