"""Pipeline v2's knowledge graph, decided without a store: names, ids, counts and the boost walk.

The graph stage reads the rows a memory's triples touch, calls :func:`plan_upsert`, and
writes what it returns; retention calls :func:`plan_purge` the same way. Both are pure so
that counting rules are tested without Qdrant.

Counting deviates from the spec in one deliberate way: ``mentions`` counts *memories*, not
triples. A memory counts once per entity and once per relation however many of its triples
repeat them, and a memory that already has mention rows is not counted again (the plan is
empty), so re-processing or replaying it changes nothing. That also makes retention exact:
an entity's ``mentions`` equals its number of mention rows, so decrementing one per deleted
row reaches zero exactly when the last memory naming it is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, NamedTuple

import msgspec

from memstream.identity import derived_id
from memstream.schemas.events import Entity
from memstream.schemas.graph import GraphEntity, GraphMention, GraphRelation

#: Entities matched by the query's tokens, most mentioned first (Pipeline v2: 20).
MAX_ENTITY_HITS: Final = 20
#: Entities one relation away from those hits, added to them (Pipeline v2: 50).
MAX_NEIGHBOURS: Final = 50
#: Distinct memories the boost returns at most (Pipeline v2: 200).
MAX_BOOST_MEMORIES: Final = 200
#: Every pipeline-extracted relation has this strength (Pipeline v2).
RELATION_STRENGTH: Final = 1.0

_WHITESPACE = re.compile(r"\s+")
#: Pipeline v2's query tokens: runs of 2+ letters or digits ("_" separates, as in \W).
_TOKEN = re.compile(r"[^\W_]{2,}")


class GraphWrite(NamedTuple):
    """Rows to upsert, each complete (counts already incremented)."""

    entities: list[GraphEntity]
    relations: list[GraphRelation]
    mentions: list[GraphMention]

    def __bool__(self) -> bool:
        """False when there is nothing to write (a tuple of three lists would always be true)."""
        return bool(self.entities or self.relations or self.mentions)


class GraphKeys(NamedTuple):
    """The ids of the existing rows a plan needs to see."""

    entity_ids: set[str]
    relation_ids: set[str]


class GraphPurge(NamedTuple):
    """What retention removes for a set of memories, and the entities it only decrements."""

    mention_ids: list[str]
    #: Entities still mentioned elsewhere, with their new counts.
    entities: list[GraphEntity]
    #: Entities no memory mentions any more; their relations go with them.
    orphan_ids: list[str]


class _Triple(NamedTuple):
    source: str
    source_name: str
    target: str
    target_name: str
    relation_type: str
    confidence: float


def canonical_name(name: str) -> str:
    """Lowercased with whitespace collapsed and trimmed: ``"Redis  Cluster "`` → ``"redis cluster"``."""
    return _WHITESPACE.sub(" ", name).strip().lower()


def entity_id(scope_key: str, canonical: str) -> str:
    """One entity per canonical name per scope: the id is the spec's UNIQUE constraint."""
    return derived_id("graph-entity", scope_key, canonical)


def relation_id(scope_key: str, source_entity_id: str, target_entity_id: str, relation_type: str) -> str:
    return derived_id("graph-relation", scope_key, source_entity_id, target_entity_id, relation_type)


def mention_id(scope_key: str, memory_id: str, entity_id: str) -> str:
    """One row per (memory, entity), the spec's ``INSERT OR IGNORE`` key."""
    return derived_id("graph-mention", scope_key, memory_id, entity_id)


def running_average(average: float, count: int, value: float) -> float:
    """Pipeline v2's ``(old_avg * n + new) / (n + 1)``."""
    return (average * count + value) / (count + 1)


def query_tokens(query: str) -> list[str]:
    """Distinct lowercased 2+ character alphanumeric runs, in query order."""
    return list(dict.fromkeys(_TOKEN.findall(query.lower())))


def _triples(triples: Iterable[Entity]) -> Iterator[_Triple]:
    """Triples with every part non-empty after canonicalization; others name nothing."""
    for t in triples:
        source, target = canonical_name(t.source), canonical_name(t.target)
        relation = canonical_name(t.relationship)
        if source and target and relation:
            yield _Triple(source, t.source, target, t.target, relation, t.confidence)


def plan_keys(scope_key: str, triples: Sequence[Entity]) -> GraphKeys:
    """The entity and relation ids :func:`plan_upsert` will look up in ``entities``/``relations``."""
    keys = GraphKeys(set(), set())
    for t in _triples(triples):
        source, target = entity_id(scope_key, t.source), entity_id(scope_key, t.target)
        keys.entity_ids.update((source, target))
        keys.relation_ids.add(relation_id(scope_key, source, target, t.relation_type))
    return keys


def plan_upsert(
    scope_key: str,
    memory_id: str,
    triples: Sequence[Entity],
    *,
    entities: Iterable[GraphEntity] = (),
    relations: Iterable[GraphRelation] = (),
    mentions: Iterable[GraphMention] = (),
) -> GraphWrite:
    """The rows that record ``memory_id``'s triples in the graph of ``scope_key``.

    ``entities`` and ``relations`` are the stored rows with the ids of :func:`plan_keys`
    (missing ones are new); ``mentions`` are the stored mention rows of this memory. When
    there are any, the memory was applied before and the plan is empty. Within one memory
    the first triple naming an entity or relation gives its mention text and confidence.
    """
    if any(m.memory_id == memory_id for m in mentions):
        return GraphWrite([], [], [])
    stored_entities = {e.entity_id: e for e in entities}
    stored_relations = {r.relation_id: r for r in relations}
    new_entities: dict[str, GraphEntity] = {}
    new_relations: dict[str, GraphRelation] = {}
    new_mentions: dict[str, GraphMention] = {}

    def touch(canonical: str, raw: str, confidence: float) -> str:
        eid = entity_id(scope_key, canonical)
        if eid in new_entities:
            return eid
        old = stored_entities.get(eid)
        new_entities[eid] = (
            GraphEntity(
                entity_id=eid,
                scope_key=scope_key,
                name=_WHITESPACE.sub(" ", raw).strip(),
                canonical_name=canonical,
                mentions=1,
            )
            if old is None
            else msgspec.structs.replace(old, mentions=old.mentions + 1)
        )
        new_mentions[eid] = GraphMention(
            mention_id=mention_id(scope_key, memory_id, eid),
            scope_key=scope_key,
            memory_id=memory_id,
            entity_id=eid,
            mention_text=raw,
            confidence=confidence,
        )
        return eid

    for t in _triples(triples):
        source = touch(t.source, t.source_name, t.confidence)
        target = touch(t.target, t.target_name, t.confidence)
        rid = relation_id(scope_key, source, target, t.relation_type)
        if rid in new_relations:
            continue
        old = stored_relations.get(rid)
        new_relations[rid] = (
            GraphRelation(
                relation_id=rid,
                scope_key=scope_key,
                source_entity_id=source,
                target_entity_id=target,
                relation_type=t.relation_type,
                strength=RELATION_STRENGTH,
                mentions=1,
                confidence=t.confidence,
            )
            if old is None
            else msgspec.structs.replace(
                old,
                mentions=old.mentions + 1,
                confidence=running_average(old.confidence, old.mentions, t.confidence),
            )
        )
    return GraphWrite(list(new_entities.values()), list(new_relations.values()), list(new_mentions.values()))


def plan_purge(mentions: Iterable[GraphMention], entities: Iterable[GraphEntity]) -> GraphPurge:
    """Retention step 1: drop ``mentions``, decrement their entities, orphan those left at zero.

    ``entities`` are the stored rows the mentions point at; a mention of an entity that is
    already gone is still deleted.
    """
    mention_ids: list[str] = []
    lost: dict[str, int] = {}
    for m in mentions:
        mention_ids.append(m.mention_id)
        lost[m.entity_id] = lost.get(m.entity_id, 0) + 1
    kept: list[GraphEntity] = []
    orphan_ids: list[str] = []
    for e in entities:
        if e.entity_id not in lost:
            continue
        left = e.mentions - lost[e.entity_id]
        if left > 0:
            kept.append(msgspec.structs.replace(e, mentions=left))
        else:
            orphan_ids.append(e.entity_id)
    return GraphPurge(mention_ids, kept, orphan_ids)


def neighbours(
    entity_ids: Iterable[str], relations: Iterable[GraphRelation], *, limit: int = MAX_NEIGHBOURS
) -> list[str]:
    """Entities one relation away from ``entity_ids``, either direction, in ``relations`` order.

    Entities already in ``entity_ids`` are not neighbours, nor are entities reached only
    through another neighbour (one hop); at most ``limit`` are returned.
    """
    hits = set(entity_ids)
    found: dict[str, None] = {}
    for r in relations:
        for near, far in ((r.source_entity_id, r.target_entity_id), (r.target_entity_id, r.source_entity_id)):
            if near in hits and far not in hits and far not in found:
                if len(found) >= limit:
                    return list(found)
                found[far] = None
    return list(found)
