"""What every store asks of its points, in terms neither Qdrant library owns.

The memories, the audit history and the graph each have two backends, an embedded shard
(qdrant-edge-py) and a server (qdrant-client), that must select and index points alike.
A store states which points it reads as a :class:`Select` and how a field is indexed as
an :data:`IndexKind`, once; ``memstream.store.hosts`` translates both into each library's
types, so the two backends cannot drift apart in what they match.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol

#: Points fetched per scroll call when a read pages through every match.
SCROLL_PAGE: Final = 256

#: How a payload field is indexed: exact match, exact match plus substrings (``prefix``),
#: integer (ordering), datetime (ranges and ordering).
IndexKind = Literal["keyword", "keyword-prefix", "integer", "datetime"]


@dataclass(frozen=True)
class Select:
    """The points a read keeps: every condition given holds; none given keeps every point."""

    #: Every field listed holds one of its values.
    all_of: Mapping[str, Collection[str]] = field(default_factory=dict)
    #: At least one field listed holds one of its values.
    any_of: Mapping[str, Collection[str]] = field(default_factory=dict)
    #: Every field listed contains at least one of its substrings (Pipeline v2's ``LIKE %token%``).
    contains: Mapping[str, Collection[str]] = field(default_factory=dict)
    #: Points with these ids are left out.
    exclude_ids: Collection[str] = ()
    #: Every field listed holds one of its values or is missing (points stored before it existed).
    absent_or: Mapping[str, Collection[str]] = field(default_factory=dict)
    #: Every field listed is set and holds none of its values (see :func:`excluding`).
    none_of: Mapping[str, Collection[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.all_of or self.any_of or self.contains or self.exclude_ids or self.absent_or or self.none_of)


def excluding(select: Select, key: str, present: Collection[str] | None) -> Select:
    """``select`` with its ``all_of`` condition on ``key`` turned round when that names fewer values:
    "set, and none of the other values present" instead of "one of these".

    The same points, when ``present`` holds every value any point has in ``key`` (more is harmless,
    fewer is not); None (not known) leaves ``select`` as it is. Why: on a segment without a vector
    index Qdrant checks the filter point by point, and a long "one of" is the costly check. A reader
    of 20 of 20 projects asked for the 20 scope keys; now it asks that the scope key be set (160 vs
    25 ms CPU for a dense search of 100k memories).
    """
    wanted = select.all_of.get(key)
    if present is None or wanted is None:
        return select
    asked, known = set(wanted), set(present)
    others = known - asked
    if len(others) >= len(asked & known):
        return select
    all_of = {k: v for k, v in select.all_of.items() if k != key}
    return replace(select, all_of=all_of, none_of={**select.none_of, key: sorted(others)})


class Stored(Protocol):
    """A point as either library reads it back."""

    @property
    def payload(self) -> dict[str, Any] | None: ...


def payload_of(point: Stored) -> dict[str, Any]:
    """A point's payload; an empty one when it was read without (either library then gives None)."""
    return point.payload or {}
