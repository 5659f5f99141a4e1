"""The knowledge graph of Pipeline v2: entities, the relations between them, and the memories
that mention them (its ``entities``, ``relations`` and ``memory_entity_mentions`` tables).

Rows are written only by the graph stage, keyed by scope; every id derives from the scope
and what the row names (``memstream.rules.graph``), so a replay rewrites the same rows.
"""

from __future__ import annotations

import msgspec


class GraphEntity(msgspec.Struct, tag="graph-entity.v1", tag_field="schema", kw_only=True, frozen=True):
    """A named thing of one scope, unique by ``canonical_name``."""

    entity_id: str
    scope_key: str
    #: As first seen (original casing, whitespace collapsed).
    name: str
    #: Lowercased, whitespace-normalized: what matching and the id use.
    canonical_name: str
    entity_type: str = ""
    #: How many memories mention it; the entity is deleted when this reaches zero.
    mentions: int


class GraphRelation(msgspec.Struct, tag="graph-relation.v1", tag_field="schema", kw_only=True, frozen=True):
    """A typed, directed link between two entities of one scope."""

    relation_id: str
    scope_key: str
    source_entity_id: str
    target_entity_id: str
    #: Canonical (lowercased, whitespace-normalized), so "Depends on" and "depends  on" are one.
    relation_type: str
    #: Fixed at 1.0 for relations the pipeline extracts (Pipeline v2).
    strength: float = 1.0
    #: How many memories stated it.
    mentions: int
    #: Running average of the stated confidences.
    confidence: float


class GraphMention(msgspec.Struct, tag="graph-mention.v1", tag_field="schema", kw_only=True, frozen=True):
    """One memory mentions one entity: the join from graph hits back to memories."""

    mention_id: str
    scope_key: str
    memory_id: str
    entity_id: str
    #: The name as the memory's triple gave it, before canonicalization.
    mention_text: str
    confidence: float


GraphRow = GraphEntity | GraphRelation | GraphMention
