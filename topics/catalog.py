"""The topic catalog: plain data, importable without Faust."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memstream.schemas import (
    AnyMemoryOp,
    ConsolidationEvent,
    DeadLetter,
    DocumentIngest,
    DocumentRemove,
    EmbeddedFact,
    Fact,
    ForgetScope,
    HistoryRecord,
    MemoryUpdated,
    ParkedSnapshot,
    Redriven,
    Snapshot,
    Turn,
)

_DAY_MS = 24 * 60 * 60 * 1000
#: How long the topics between a turn and its memory keep their records: the snapshots, parked
#: snapshots, facts, embedded facts and memory operations hold a forgotten user's words after a
#: forget (nothing can delete one scope's records from a delete-policy topic), so they keep them
#: only for a day -- four times the retry budget an outage is waited out for (6 h), after which
#: every record is consumed or dead-lettered. Topics created before this keep the retention they
#: were created with (docs/security.md says how to change it).
DERIVED_RETENTION_MS = _DAY_MS


@dataclass(frozen=True)
class TopicSpec:
    #: Suffix after the configured prefix: ``<prefix>.<name>``.
    name: str
    #: What the message key is; it decides which events keep their relative order.
    key: str
    #: The schema of the value.
    value: Any
    #: Fixed partition count, or None for the configured default.
    partitions: int | None = None
    #: Kafka topic configs (retention or compaction).
    config: dict[str, str] = field(default_factory=dict)
    doc: str = ""


TURNS = TopicSpec(
    "turns",
    key="session_id",
    value=Turn,
    # Kept forever: turns are the source of truth that replays re-extract from.
    config={"cleanup.policy": "delete", "retention.ms": "-1"},
    doc="Messages of coding-agent sessions, as agent hosts publish them.",
)
SNAPSHOTS = TopicSpec(
    "snapshots",
    key="session_id",
    value=Snapshot,
    config={"cleanup.policy": "delete", "retention.ms": str(DERIVED_RETENTION_MS)},
    doc="Privacy-stripped last-8-message snapshots, one per assistant turn (plus summary mode).",
)
PARKED = TopicSpec(
    "parked",
    key="session_id",
    value=ParkedSnapshot,
    config={"cleanup.policy": "delete", "retention.ms": str(DERIVED_RETENTION_MS)},
    doc="Snapshots whose extraction failed on every provider, waiting for their retry.",
)
FACTS = TopicSpec(
    "facts",
    key="scope_key",
    value=Fact,
    config={"cleanup.policy": "delete", "retention.ms": str(DERIVED_RETENTION_MS)},
    doc="Atomic typed facts extracted from snapshots or condensed by aging.",
)
EMBEDDED = TopicSpec(
    "embedded",
    key="scope_key",
    value=EmbeddedFact,
    config={"cleanup.policy": "delete", "retention.ms": str(DERIVED_RETENTION_MS)},
    doc="Facts with their document embeddings.",
)
MEMORY_OPS = TopicSpec(
    "memory-ops",
    key="scope_key",
    value=AnyMemoryOp,
    config={"cleanup.policy": "delete", "retention.ms": str(DERIVED_RETENTION_MS)},
    doc="Create, refresh, delete and supersede operations; only the store agent applies them.",
)
MEMORY_UPDATED = TopicSpec(
    "memory-updated",
    key="scope_key",
    value=MemoryUpdated,
    config={"cleanup.policy": "delete", "retention.ms": str(30 * _DAY_MS)},
    doc="What the store changed, for downstream services and the age and contradiction agents.",
)
CONSOLIDATION = TopicSpec(
    "consolidation",
    key="scope_key",
    value=ConsolidationEvent,
    # One partition: one global Phase 2 at a time across every worker, and its offsets
    # are Phase 2's watermark. Inputs are kept until a successful run has consumed them;
    # the consolidation agent's table holds them from then on.
    partitions=1,
    config={"cleanup.policy": "delete", "retention.ms": str(30 * _DAY_MS)},
    doc="Phase 1 outputs, memory usage and Phase 2 requests; exactly one partition.",
)
HISTORY = TopicSpec(
    "history",
    key="scope_key",
    value=HistoryRecord,
    # As long as the history store keeps records (MEMSTREAM_HISTORY_RETENTION_DAYS's default).
    config={"cleanup.policy": "delete", "retention.ms": str(180 * _DAY_MS)},
    doc="The audit trail: every proposal and outcome, with the model and prompt that decided it.",
)
FORGOTTEN = TopicSpec(
    "forgotten",
    key="scope_key",
    value=ForgetScope,
    # Compacted and never deleted: the ledger of forgotten scopes, which a replay reads so it
    # does not bring back what was forgotten (one record per scope: the latest forget).
    config={"cleanup.policy": "compact"},
    doc="Forgotten users and projects (memstream forget); the pipeline purges each, in order.",
)
DEAD_LETTERS = TopicSpec(
    "dead-letters",
    key="stage",
    value=DeadLetter,
    config={"cleanup.policy": "delete", "retention.ms": str(30 * _DAY_MS)},
    doc="Events a stage could not process: stage, reason, original bytes and offsets.",
)

DOCUMENTS = TopicSpec(
    "documents",
    key="document_id",
    value=DocumentIngest | DocumentRemove,
    # A file's content travels in its ingest request: room for documentMaxContentBytes' default
    # (10 MB) once JSON-escaped. The document agent's records in the document store outlive it.
    config={"cleanup.policy": "delete", "retention.ms": str(7 * _DAY_MS), "max.message.bytes": str(32 * 1024 * 1024)},
    doc="Requests to ingest a document (a URL, or raw content) or to remove one with its chunks.",
)
REDRIVEN = TopicSpec(
    "redriven",
    key="dead_letter",
    value=Redriven,
    # Compacted: the newest record per dead letter is kept for as long as the topic lives,
    # so a dead letter is never re-driven twice. On the broker rather than in the data dir:
    # dead-letter ids are offsets, which restart when the embedded (memory-only) broker
    # does, and every host that re-drives (CLI, maintenance worker) must see the same record.
    config={"cleanup.policy": "compact"},
    doc="Dead letters already sent back to their topic, one record per dead letter.",
)

ALL_TOPICS: tuple[TopicSpec, ...] = (
    TURNS,
    SNAPSHOTS,
    PARKED,
    FACTS,
    EMBEDDED,
    MEMORY_OPS,
    MEMORY_UPDATED,
    CONSOLIDATION,
    HISTORY,
    FORGOTTEN,
    DEAD_LETTERS,
    DOCUMENTS,
    REDRIVEN,
)


def topic_name(prefix: str, spec: TopicSpec) -> str:
    return f"{prefix}.{spec.name}"


#: The delete-policy topics whose records may still carry a forgotten scope's words after its forget:
#: nothing deletes one scope's records from them, so the words stay until the topic's retention
#: passes (docs/security.md, "What remains where after a forget"; the changelogs, cleared by the
#: forget and compacted by the broker, are not listed).
WORD_HOLDING_TOPICS: tuple[TopicSpec, ...] = tuple(
    spec for spec in ALL_TOPICS if spec.config.get("cleanup.policy") != "compact"
)


def topic_config(spec: TopicSpec, words_retention_ms: int = 0) -> dict[str, str]:
    """The configs a topic is created with: its declared ones, the retention of a word-holding topic
    capped at ``words_retention_ms`` when that is set (``MEMSTREAM_WORDS_RETENTION_DAYS``)."""
    config = dict(spec.config)
    if words_retention_ms > 0 and spec in WORD_HOLDING_TOPICS:
        declared = int(config.get("retention.ms", "-1"))
        config["retention.ms"] = str(words_retention_ms if declared < 0 else min(declared, words_retention_ms))
    return config


def words_held_until(forgotten_at: datetime, words_retention_ms: int = 0) -> dict[str, datetime | None]:
    """Per topic that may still hold a scope's words, when the last record written before its forget
    at ``forgotten_at`` passes the topic's retention as memstream creates it (None: kept forever). On
    a Kafka cluster whose topics were created with another retention, that retention applies instead."""
    held: dict[str, datetime | None] = {}
    for spec in WORD_HOLDING_TOPICS:
        retention_ms = int(topic_config(spec, words_retention_ms).get("retention.ms", "-1"))
        held[spec.name] = None if retention_ms < 0 else forgotten_at + timedelta(milliseconds=retention_ms)
    return held
