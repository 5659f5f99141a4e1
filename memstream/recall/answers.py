"""What a reader is handed: the compact index of search and timeline, and one shape of full record.

An agent pays for every character of an answer, so reads disclose in steps (the pattern of
claude-mem's index → timeline → records): ``search`` and ``timeline`` answer with one row per
memory (its id, type, scope, date, session, score and a one-line preview), and ``get`` returns
the full records of the ids the agent picked, each field once.

The index is a table: its column names once, then one JSON array per memory, never indented.
Each row is held to :data:`INDEX_ROW_CHARS` of JSON by shortening its preview, so ten hits take
at most :data:`INDEX_CHARS` characters whatever the memories hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from memstream.recall.staleness import citations_of
from memstream.schemas import Memory, Provenance
from memstream.schemas.memory import HybridHit

#: The longest preview of a memory's text in an index row (one line, cut at a word).
PREVIEW_CHARS = 160
#: The shortest preview an index row is cut down to, however long its id and session are.
MIN_PREVIEW_CHARS = 40
#: The most characters of compact JSON one index row takes (its preview shrinks to fit).
INDEX_ROW_CHARS = 190
#: What ten rows plus the index's header come to at most: the budget of a default search.
INDEX_CHARS = 2_000
#: The columns of a search index, in row order.
#: ``code`` is what became of the code the memory cites, where recall checked it: "" (current, or nothing
#: checked), ``changed``, ``moved`` or ``gone`` (docs/recall.md, "Citations").
SEARCH_FIELDS: tuple[str, ...] = ("id", "type", "scope", "date", "session", "score", "preview", "code")
#: The columns of a timeline: a search's without the score (a timeline ranks nothing).
TIMELINE_FIELDS: tuple[str, ...] = ("id", "type", "scope", "date", "session", "preview")

#: The score a search result shows. ``fused``: search's own ranking score, the weighted sum of the
#: vector and BM25 legs each min-max scaled over this query's candidates (so 1.0 means "best of these
#: candidates", not "identical"); ``vector``: the cosine similarity of the query and the memory;
#: ``bm25``: the BM25 match squashed to 0-1 (0: no query term in the memory).
ScoreKind = Literal["fused", "vector", "bm25"]
SCORE_KINDS: tuple[str, ...] = ("fused", "vector", "bm25")

#: Search answers an index unless asked for ``full`` records.
Detail = Literal["index", "full"]
DETAILS: tuple[str, ...] = ("index", "full")

_ELLIPSIS = "…"


def preview(text: str, width: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, at most ``width`` characters: cut at the last word that fits, with an ellipsis."""
    line = " ".join(text.split())
    if len(line) <= width:
        return line
    head = line[: max(1, width - len(_ELLIPSIS))]
    space = head.rfind(" ")
    # A word longer than half the room (a path, a hash) is cut inside rather than dropped whole.
    if space > len(head) // 2:
        head = head[:space]
    return head.rstrip(" ,;:.-") + _ELLIPSIS


def _encoded_len(value: Any) -> int:
    return len(msgspec.json.encode(value).decode())


def index_row(
    memory: Memory, *, score: float | None = None, with_score: bool = True, code: str | None = None
) -> list[Any]:
    """One memory as a row of the index, within :data:`INDEX_ROW_CHARS` of JSON; ``code`` (a search's
    last column) is given for search rows."""
    row: list[Any] = [memory.id, memory.type, memory.scope, memory.created_at.date().isoformat(), memory.session_id]
    if with_score:
        row.append(None if score is None else round(score, 3))
    tail = [] if code is None else [code]
    fixed = _encoded_len([*row, "", *tail])
    width = max(MIN_PREVIEW_CHARS, min(PREVIEW_CHARS, INDEX_ROW_CHARS - fixed))
    shown = preview(memory.text, width)
    # JSON escapes (quotes, backslashes, control characters) lengthen a row past its count of characters.
    while width > MIN_PREVIEW_CHARS and fixed + _encoded_len(shown) - 2 > INDEX_ROW_CHARS:
        width -= max(1, fixed + _encoded_len(shown) - 2 - INDEX_ROW_CHARS)
        shown = preview(memory.text, max(MIN_PREVIEW_CHARS, width))
    return [*row, shown, *tail]


def search_index(hits: Sequence[HybridHit], score: ScoreKind = "fused") -> dict[str, Any]:
    """Search's default answer: which score the rows show, the column names, one row per hit, best first."""
    return {
        "score": score,
        "fields": list(SEARCH_FIELDS),
        "hits": [index_row(hit.memory, score=shown_score(hit, score), code=hit.code) for hit in hits],
    }


def timeline_index(memories: Sequence[Memory], anchor: str = "") -> dict[str, Any]:
    """A timeline's answer: its rows in the order they were stored; ``anchor`` names the memory it is around."""
    answer: dict[str, Any] = {"fields": list(TIMELINE_FIELDS)}
    if anchor:
        answer["anchor"] = anchor
    answer["memories"] = [index_row(memory, with_score=False) for memory in memories]
    return answer


def shown_score(hit: HybridHit, kind: ScoreKind) -> float | None:
    """The score of ``kind`` for this hit (None: that leg did not score it)."""
    if kind == "fused":
        return hit.score
    if kind == "vector":
        return hit.vector_score
    return hit.bm25_score


def provenance(memory: Memory) -> list[dict[str, Any]]:
    """Where the memory's text came from, first seen first: source, session, and ``file:line`` when from a file."""
    sources: list[Provenance] = list(memory.sources)
    if not sources and memory.session_id:
        sources = [Provenance(source_type="", session_id=memory.session_id)]
    shown: list[dict[str, Any]] = []
    for p in sources:
        entry: dict[str, Any] = {"source": p.source_type, "session": p.session_id}
        if p.file:
            entry["at"] = f"{p.file}:{p.line}" if p.line else p.file
        shown.append(entry)
    return shown


def full_record(memory: Memory) -> dict[str, Any]:
    """A memory as ``get`` (and ``detail=full``) returns it: every field a reader can use, each once.

    Left out: the excerpt it was extracted from (``source_chunk``, often longer than the memory), the
    content hash and the embedding model (the store's bookkeeping), and the raw ``sources`` (shown as
    ``provenance``). Empty optional fields are left out too.
    """
    record: dict[str, Any] = {
        "id": memory.id,
        "text": memory.text,
        "type": memory.type,
        "scope": memory.scope,
        "scope_key": memory.scope_key,
        "session": memory.session_id,
        "provenance": provenance(memory),
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }
    if memory.project:
        record["project"] = memory.project
    if memory.superseded_by is not None:
        record["superseded_by"] = memory.superseded_by
        record["superseded_at"] = memory.superseded_at
    if memory.importance is not None:
        record["importance"] = memory.importance
    if memory.document_id:
        record["document_id"] = memory.document_id
        record["title"] = memory.title
    cited = citations(memory)
    if cited:
        record["citations"] = cited
    return dict(msgspec.to_builtins(record))


def citations(memory: Memory) -> list[dict[str, Any]]:
    """The code the memory cites, each file once, as stored (``Citation``'s fields): a client where the
    work tree is at hand checks them itself (``memstream.recall.staleness``)."""
    return [msgspec.to_builtins(c) for c in citations_of(memory)]


def full_hit(hit: HybridHit, score: ScoreKind = "fused") -> dict[str, Any]:
    """A search hit's full record: which score it shows and each leg's, beside the memory's fields."""
    return {
        **full_record(hit.memory),
        **({"code": hit.code} if hit.code else {}),
        "score": _rounded(shown_score(hit, score)),
        "score_kind": score,
        "vector_score": _rounded(hit.vector_score),
        "bm25_score": _rounded(hit.bm25_score),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
