"""What a reader is handed: the compact index of search and timeline, and one shape of full record.

An agent pays for every character of an answer, so reads disclose in steps (the pattern of
claude-mem's index → timeline → records): ``search`` and ``timeline`` answer with one row per
memory (its id, type, scope, date, session, score and a one-line preview), and ``get`` returns
the full records of the ids the agent picked, each field once.

The index is a table: its column names once, then one JSON array per memory, never indented.
What every row would repeat is said once, in ``same``: a column whose value is the same in every row
(hook-captured hits are often one session's, of one type and day) leaves ``fields`` and the rows, and
the words every preview starts with (``[user] …``) are ``same["preview"]``, each row's preview going on
from there. Previews so get their :data:`PREVIEW_CHARS`: each row is held to :data:`INDEX_ROW_CHARS` of
JSON, or to its share of what the header leaves of :data:`INDEX_CHARS` when that is less, by shortening
its preview, so ten hits take at most :data:`INDEX_CHARS` characters whatever the memories hold.
:func:`index_rows` reads an index back into whole rows.
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
#: The most characters of compact JSON one index row takes (its preview shrinks to fit): an id, a score and
#: a whole preview once the columns every row repeats are hoisted into ``same``.
INDEX_ROW_CHARS = 215
#: What ten rows plus the index's header (its ``same`` too) come to at most: the budget of a default search.
INDEX_CHARS = 2_450
#: Room kept in :data:`INDEX_CHARS` for what the caller adds around the table: search's ``"score":"fused",``,
#: a timeline's ``"anchor":"<id>",``.
OUTER_CHARS = 64
#: How many rows :data:`INDEX_CHARS` is the budget of (a default search's limit).
BUDGETED_ROWS = 10
#: Columns that are each memory's own: never hoisted into ``same``.
OWN_COLUMNS = frozenset({"id", "score", "preview", "code"})
#: The shortest start shared by every preview that is said once rather than in each row.
MIN_SHARED_START = 6
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


def _shared_start(texts: Sequence[str]) -> str:
    """The whole words every one of ``texts`` starts with (and goes on after), or ""."""
    if len(texts) < 2:
        return ""
    first, last = min(texts), max(texts)
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    if any(len(text) == common or text[common] != " " for text in texts):
        common = first.rfind(" ", 0, common + 1)  # back to the end of the last whole word
    shared = first[: max(0, common)].rstrip()
    return shared[:PREVIEW_CHARS] if len(shared) >= MIN_SHARED_START else ""


def _table(entries: Sequence[tuple[Memory, dict[str, Any]]], fields: Sequence[str], rows_key: str) -> dict[str, Any]:
    """An index of ``entries`` (a memory and its columns' values but the preview): ``fields``, what every
    row repeats hoisted into ``same``, then one row per memory within :data:`INDEX_ROW_CHARS`."""
    same: dict[str, Any] = {}
    texts = [" ".join(memory.text.split()) for memory, _ in entries]
    if len(entries) > 1:
        for name in fields:
            if name not in OWN_COLUMNS and len({_encoded(values[name]) for _, values in entries}) == 1:
                same[name] = entries[0][1][name]
        if shared := _shared_start(texts):
            same["preview"] = shared
    kept = [name for name in fields if name == "preview" or name not in same]
    start = len(same.get("preview", ""))
    header = {"fields": kept, **({"same": same} if same else {}), rows_key: []}
    # The rows share what the header leaves of the budget (a long shared opening takes from each row).
    room = (INDEX_CHARS - OUTER_CHARS - _encoded_len(header)) // max(len(entries), BUDGETED_ROWS) - 1
    limit = min(INDEX_ROW_CHARS, room)
    rows = [_row(values, kept, text[start:].lstrip(), limit) for (_, values), text in zip(entries, texts, strict=True)]
    return {**header, rows_key: rows}


def _row(values: dict[str, Any], kept: Sequence[str], text: str, limit: int = INDEX_ROW_CHARS) -> list[Any]:
    """One row of ``kept`` columns, its preview of ``text`` as long as the row's ``limit`` allows."""
    at = list(kept).index("preview")
    row = [values[name] if name != "preview" else "" for name in kept]
    fixed = _encoded_len(row)
    width = max(MIN_PREVIEW_CHARS, min(PREVIEW_CHARS, limit - fixed))
    shown = preview(text, width)
    # JSON escapes (quotes, backslashes, control characters) lengthen a row past its count of characters.
    while width > MIN_PREVIEW_CHARS and fixed + _encoded_len(shown) - 2 > limit:
        width -= max(1, fixed + _encoded_len(shown) - 2 - limit)
        shown = preview(text, max(MIN_PREVIEW_CHARS, width))
    row[at] = shown
    return row


def _encoded(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _columns(memory: Memory, *, score: float | None = None, code: str | None = None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": memory.id,
        "type": memory.type,
        "scope": memory.scope,
        "date": memory.created_at.date().isoformat(),
        "session": memory.session_id,
        "score": None if score is None else round(score, 3),
    }
    if code is not None:
        values["code"] = code
    return values


def search_index(hits: Sequence[HybridHit], score: ScoreKind = "fused") -> dict[str, Any]:
    """Search's default answer: which score the rows show, the column names, what every row repeats
    (``same``), one row per hit, best first."""
    entries = [(hit.memory, _columns(hit.memory, score=shown_score(hit, score), code=hit.code)) for hit in hits]
    return {"score": score, **_table(entries, SEARCH_FIELDS, "hits")}


def timeline_index(memories: Sequence[Memory], anchor: str = "") -> dict[str, Any]:
    """A timeline's answer: its rows in the order they were stored; ``anchor`` names the memory it is around."""
    table = _table([(memory, _columns(memory)) for memory in memories], TIMELINE_FIELDS, "memories")
    return {"fields": table["fields"], **({"anchor": anchor} if anchor else {}), **table}


def index_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """An index's rows (search's ``hits`` or a timeline's ``memories``) as whole rows again: each column by
    name, what ``same`` hoisted put back, and the preview with the start every preview shared."""
    same = dict(answer.get("same") or {})
    shared = same.pop("preview", "")
    rows = answer.get("hits", answer.get("memories")) or []
    whole = []
    for row in rows:
        values = {**same, **dict(zip(answer["fields"], row, strict=True))}
        if shared:
            values["preview"] = f"{shared} {values.get('preview', '')}".rstrip()
        whole.append(values)
    return whole


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
