"""Every topic memstream uses, declared once: name, partitions, key, value schema, retention.

Turns and snapshots are keyed by session, so one session is processed in order; facts
onward are keyed by scope (project or user), so dedup, aging and supersede decisions of
one project are made one at a time while different projects run in parallel.
"""

from memstream.topics.catalog import (
    ALL_TOPICS,
    CONSOLIDATION,
    DEAD_LETTERS,
    DOCUMENTS,
    EMBEDDED,
    FACTS,
    MEMORY_OPS,
    MEMORY_UPDATED,
    PARKED,
    REDRIVEN,
    SNAPSHOTS,
    TURNS,
    TopicSpec,
    topic_name,
)

__all__ = [
    "ALL_TOPICS",
    "CONSOLIDATION",
    "DEAD_LETTERS",
    "DOCUMENTS",
    "EMBEDDED",
    "FACTS",
    "MEMORY_OPS",
    "MEMORY_UPDATED",
    "PARKED",
    "REDRIVEN",
    "SNAPSHOTS",
    "TURNS",
    "TopicSpec",
    "topic_name",
]
