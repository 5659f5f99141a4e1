"""The extraction spec step 2: prompts that ask for typed facts, and tolerant parsing of the answer.

Parsing never raises: a reply it cannot read yields no facts and a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import msgspec

from memstream.rules.explicit import standing_preferences
from memstream.rules.prompts import (  # noqa: F401 - the prompts are part of this stage's surface
    ANSWER_BOUNDS,
    CONDENSE_SYSTEM,
    INIT_SYSTEM,
    NORMAL_SYSTEM,
    PROMPT_VERSION,
    SUMMARY_SYSTEM,
    TYPE_GUIDE,
    extraction_prompt,
    system_prompt,
)
from memstream.schemas import MEMORY_TYPES, ROLES, USER_SCOPED_TYPES, Entity

#: Type given to facts whose type is missing or unknown; plain string arrays get it too (the extraction spec).
FALLBACK_TYPE = "learned-pattern"

#: Pipeline v2's validation caps.
MAX_FACTS = 20
MIN_FACT_CHARS = 10
MAX_FACT_CHARS = 2_000
MAX_ENTITIES = 50
#: A fact without a confidence passes the default write gate (0.7), but not a stricter one.
DEFAULT_CONFIDENCE = 0.8


#: The memory types each mode may answer with: a summary is one session-summary, the files of an
#: init run state what a project is and how it is built and run, and a conversation anything but a summary.
MODE_TYPES: dict[str, tuple[str, ...]] = {
    "normal": tuple(t for t in MEMORY_TYPES if t != "session-summary"),
    "summary": ("session-summary",),
    "init": ("project-brief", "product-context", "architecture", "tech-context", "project-config"),
}
#: The longest memory the answer schema allows, per mode: one atomic fact, or a summary of up to 5 sentences.
_SCHEMA_MEMORY_CHARS = {"normal": 400, "summary": 1_200, "init": 400}
#: The longest entity name or relationship the answer schema allows.
_SCHEMA_ENTITY_CHARS = 80
#: Output tokens an answer is given per item (a 400-character fact is ~100 tokens, a typical one 30, plus
#: ~20 of JSON around it), and for the braces around the lists. Summaries get room for their 5 sentences.
_TOKENS_PER_MEMORY = {"normal": 80, "summary": 320, "init": 80}
_TOKENS_PER_ENTITY = 30
_TOKENS_AROUND = 40


def answer_schema(mode: str) -> dict[str, Any]:
    """The JSON Schema of an extraction answer in ``mode``: the memory types as an enum, every list
    bounded (ANSWER_BOUNDS) and every string too, so a model held to it writes valid, typed, finite JSON.

    The fields are listed in the order the prompt shows, and all but a memory's scope are required:
    grammar-constrained servers (llama.cpp) then write each item in one fixed shape. ValueError for a mode
    without a prompt (raw).
    """
    system_prompt(mode)  # the same error for a mode without one
    memories, entities = ANSWER_BOUNDS[mode]
    memory = {
        "type": "object",
        "properties": {
            "memory": {"type": "string", "minLength": MIN_FACT_CHARS, "maxLength": _SCHEMA_MEMORY_CHARS[mode]},
            "type": {"type": "string", "enum": list(MODE_TYPES[mode])},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "scope": {"type": "string", "enum": ["project", "user"]},
        },
        # Scope is left out unless it is the user's: the parser gives a fact without one the scope of its
        # type, where a small model asked for it on every fact picks "user" at random (and such a fact of
        # a turn without a user is dropped).
        "required": ["memory", "type", "confidence"],
        "additionalProperties": False,
    }
    name = {"type": "string", "minLength": 1, "maxLength": _SCHEMA_ENTITY_CHARS}
    entity = {
        "type": "object",
        "properties": {
            "source": name,
            "relationship": name,
            "target": name,
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["source", "relationship", "target", "confidence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "memories": {"type": "array", "items": memory, "maxItems": memories},
            "entities": {"type": "array", "items": entity, "maxItems": entities},
        },
        "required": ["memories", "entities"],
        "additionalProperties": False,
    }


def answer_max_tokens(mode: str) -> int:
    """The output tokens an answer in ``mode`` needs at its bounds: what the prompt asks for, not more,
    so a reply that loops ends soon (and keeps what it completed, see :func:`parse_facts`)."""
    memories, entities = ANSWER_BOUNDS[mode]
    return memories * _TOKENS_PER_MEMORY[mode] + entities * _TOKENS_PER_ENTITY + _TOKENS_AROUND


class ExtractedFact(msgspec.Struct, frozen=True):
    text: str
    type: str
    scope: str  # "project" | "user"
    confidence: float = DEFAULT_CONFIDENCE


class ParseResult(msgspec.Struct, frozen=True):
    facts: list[ExtractedFact]
    warnings: list[str]
    entities: list[Entity] = []


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


_OPEN_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n")


def _strip_wrappers(raw: str) -> str:
    text = _THINK.sub("", raw).strip()
    fenced = _FENCE.match(text)
    if fenced:
        return fenced.group(1).strip()
    # A fence somewhere inside surrounding prose.
    inner = re.search(r"```[a-zA-Z0-9_-]*\s*\n(.*?)```", text, re.DOTALL)
    if inner:
        return inner.group(1).strip()
    # A fence that never closes: the reply was cut at the token cap inside it.
    return _OPEN_FENCE.sub("", text, count=1)


def _first_json(text: str) -> tuple[Any, bool]:
    """The reply's JSON value, and whether it was cut off (then closed after its last complete item)."""
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        pass
    # Prose around the JSON (which may hold brackets of its own): the first position
    # where a whole array or object decodes wins; one that is still open when the text ends
    # was cut at the token cap, and keeps what it completed.
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "[{":
            try:
                return decoder.raw_decode(text, start)[0], False
            except json.JSONDecodeError:
                closed = _close_cut_json(text, start)
                if closed is not None:
                    return closed, True
    raise ValueError("no JSON array or object found")


def _close_cut_json(text: str, start: int) -> Any:
    """The value opened at ``start`` when the text ends inside it: cut after its last complete
    object or array and closed, so every item finished before the cut survives. None when the
    value closes before the end (it is malformed, not cut) or nothing complete is left."""
    stack: list[str] = []
    in_string = escaped = False
    # The last place a nested container closed, with the containers still open there.
    cut: tuple[int, str] | None = None
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}":
            if not stack or stack.pop() != char:
                return None  # mismatched: not JSON
            if not stack:
                return None  # the value is whole, so it did not decode for another reason
            cut = (i + 1, "".join(reversed(stack)))
    if cut is None:
        return None
    end, closers = cut
    try:
        return json.loads(text[start:end] + closers)
    except json.JSONDecodeError:
        return None


def load_json_reply(raw: str) -> Any:
    """The JSON inside an LLM reply, past ``<think>`` blocks, fences and prose; ValueError if none.

    A reply cut at the token cap yields what it completed before the cut."""
    return _first_json(_strip_wrappers(raw))[0]


def parse_facts(raw: str) -> ParseResult:
    """Read an LLM reply into validated facts and entities (the extraction spec and Pipeline v2).

    Tolerates ``<think>`` blocks, fences, prose, plain string arrays (learned-pattern) and
    wrapped objects; applies the caps; never raises: what it cannot use becomes a warning.
    """
    warnings: list[str] = []
    try:
        data, cut = _first_json(_strip_wrappers(raw))
    except ValueError as exc:
        return ParseResult([], [f"unparseable reply: {exc}"])
    if cut:
        warnings.append("the reply was cut off (token cap?): kept the items completed before the cut")
    raw_entities: Any = []
    if isinstance(data, dict):
        raw_entities = data.get("entities", [])
        for key in ("memories", "facts", "items", "results"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            if "memory" not in data and "content" not in data:
                return ParseResult([], [f"JSON object without memories (keys: {', '.join(sorted(data)) or 'none'})"])
            data = [data]
    if not isinstance(data, list):
        return ParseResult([], [f"expected a JSON array, got {type(data).__name__}"])
    if len(data) > MAX_FACTS:
        warnings.append(f"{len(data)} facts, keeping the first {MAX_FACTS}")
        data = data[:MAX_FACTS]
    facts = [fact for i, item in enumerate(data) if (fact := _fact(i, item, warnings)) is not None]
    return ParseResult(facts, warnings, _entities(raw_entities, warnings))


def _fact(i: int, item: Any, warnings: list[str]) -> ExtractedFact | None:
    if isinstance(item, str):
        text, kind, scope, confidence = item, FALLBACK_TYPE, "", None
    elif isinstance(item, dict):
        text = item.get("memory") or item.get("content") or item.get("fact") or ""
        kind = str(item.get("type") or "")
        scope = str(item.get("scope") or "")
        confidence = item.get("confidence")
    else:
        warnings.append(f"item {i}: not a string or object, skipped")
        return None
    if not isinstance(text, str):
        warnings.append(f"item {i}: memory is a {type(text).__name__}, not text, skipped")
        return None
    text = text.strip()
    if not text:
        warnings.append(f"item {i}: empty memory, skipped")
        return None
    if len(text) < MIN_FACT_CHARS:
        warnings.append(f"item {i}: {len(text)} characters is too short for a fact, skipped")
        return None
    if len(text) > MAX_FACT_CHARS:
        warnings.append(f"item {i}: {len(text)} characters, truncated to {MAX_FACT_CHARS}")
        text = text[:MAX_FACT_CHARS]
    if kind not in MEMORY_TYPES:
        if kind:
            warnings.append(f"item {i}: unknown type {kind!r}, using {FALLBACK_TYPE}")
        kind = FALLBACK_TYPE
    if kind in USER_SCOPED_TYPES:
        # A preference is its speaker's, whatever scope the reply names: in a shared project's
        # scope every member would read one person's taste as the project's convention (issue 27.5).
        scope = "user"
    elif scope not in ("project", "user"):
        scope = "project"
    return ExtractedFact(text=text, type=kind, scope=scope, confidence=_confidence(i, confidence, warnings))


def _confidence(i: int, value: Any, warnings: list[str]) -> float:
    if value is None:
        return DEFAULT_CONFIDENCE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        warnings.append(f"item {i}: confidence {value!r} is not a number, using {DEFAULT_CONFIDENCE}")
        return DEFAULT_CONFIDENCE
    return min(1.0, max(0.0, float(value)))


def _entities(items: Any, warnings: list[str]) -> list[Entity]:
    if not isinstance(items, list):
        warnings.append("'entities' is not a list, ignored")
        return []
    if len(items) > MAX_ENTITIES:
        warnings.append(f"{len(items)} entities, keeping the first {MAX_ENTITIES}")
        items = items[:MAX_ENTITIES]
    entities: list[Entity] = []
    seen: set[tuple[str, str, str]] = set()
    repeated = 0
    for i, item in enumerate(items):
        fields = [item.get(k) if isinstance(item, dict) else None for k in ("source", "relationship", "target")]
        if not all(isinstance(f, str) and f.strip() for f in fields):
            warnings.append(f"entity {i}: needs non-empty source, relationship and target, skipped")
            continue
        source, relationship, target = (str(f).strip() for f in fields)
        # A small model's list can loop on one triple until the token cap: keep each once.
        triple = (source.casefold(), relationship.casefold(), target.casefold())
        if triple in seen:
            repeated += 1
            continue
        seen.add(triple)
        entities.append(
            Entity(
                source=source,
                relationship=relationship,
                target=target,
                confidence=_confidence(i, item.get("confidence"), warnings),
            )
        )
    if repeated:
        warnings.append(f"{repeated} repeated entities, each kept once")
    return entities


#: A conversation memory (raw mode) keeps at most this much of the exchange.
CONVERSATION_MAX_CHARS = 2_000
#: What stands in for the middle of a message cut to fit.
CUT_MARK = " […] "
#: A cut message keeps at least this much of its text (head and tail together).
MIN_KEPT_CHARS = 200


def raw_facts(exchange: str) -> list[ExtractedFact]:
    """Raw mode: the exchange itself becomes one ``conversation`` memory, no inference, in the project.

    The conversation is the project's, whoever spoke (issue 25.4: an exchange moved to its user's
    scope whenever a user line merely mentioned liking something, and showed in every other project
    of that user). What the user states as a standing preference ("I prefer…", "always use…",
    "remember that I…") becomes a separate ``preference`` memory in the user's scope besides.
    """
    text = exchange.strip()
    if not text:
        return []
    facts = [ExtractedFact(text=fit_exchange(text), type="conversation", scope="project", confidence=1.0)]
    for line in _user_messages(text):
        for preference in standing_preferences(line):
            facts.append(ExtractedFact(text=preference, type="preference", scope="user", confidence=1.0))
    return facts


def fit_exchange(text: str, max_chars: int = CONVERSATION_MAX_CHARS) -> str:
    """The exchange within ``max_chars``: its question and its final answer kept whole, what came between
    them cut first.

    An exchange is a question (the user messages it opens with), then what the agent said while it worked
    (progress notes), then its final answer (the last message). The question and the answer say what was
    asked and what was done; the notes are what to cut (issue 37.2: cutting every message to its ends, then
    the end of the whole, lost a 13-message exchange's final report). So: the notes give up their middles,
    then go, oldest first, leaving a line that says how many; only then do the question and the answer give
    up their middles, the longer the more, never below ``MIN_KEPT_CHARS``; only then is the end cut.
    """
    if len(text) <= max_chars:
        return text
    messages: list[str | None] = list(_messages(text))
    asked = next((i for i, m in enumerate(messages) if not str(m).startswith("[user] ")), len(messages))
    answer = [len(messages) - 1] if asked < len(messages) else []
    notes = list(range(asked, len(messages) - len(answer)))

    def joined() -> str:
        return "\n".join(m for m in messages if m is not None)

    _give_up_middles(messages, notes, joined, max_chars)
    for left_out, index in enumerate(notes, start=1):
        if len(joined()) <= max_chars:
            break
        messages[index] = None
        # One line where the first of them was says how many are left out.
        messages[notes[0]] = f"[…] {left_out} message{'s' if left_out > 1 else ''} in between left out"
    # Then the question and the answer, the longer giving up more: an answer within the limit stays whole
    # beside a long question, and only an answer over the limit alone loses much of its middle.
    _give_up_middles(messages, [*range(asked), *answer], joined, max_chars)
    text = joined()
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _give_up_middles(messages: list[str | None], indices: list[int], joined: Callable[[], str], max_chars: int) -> None:
    """Cut the middles of ``messages[indices]`` until the whole fits: every one longer than a common length
    is cut to it (the longest give up the most, a short one nothing), and none below ``MIN_KEPT_CHARS``."""
    live = [i for i in indices if messages[i] is not None]
    excess = len(joined()) - max_chars
    if excess <= 0 or not live:
        return
    lengths = sorted(len(str(messages[i])) for i in live)
    remaining = sum(lengths) - excess
    target = lengths[-1]
    for k, length in enumerate(lengths):
        share = remaining // (len(lengths) - k)
        if length > share:
            target = share
            break
        remaining -= length
    for i in live:
        message = str(messages[i])
        if len(message) <= target:
            continue
        head, body = _body(message)
        keep = max(MIN_KEPT_CHARS, target - len(head) - len(CUT_MARK))
        if keep + len(CUT_MARK) >= len(body):
            continue
        front = keep - keep // 2
        messages[i] = head + body[:front].rstrip() + CUT_MARK + body[len(body) - keep // 2 :].lstrip()


def _body(message: str) -> tuple[str, str]:
    """A ``[role] content`` message's role mark and its content."""
    head_len = message.index("] ") + 2 if message.startswith("[") and "] " in message else 0
    return message[:head_len], message[head_len:]


def _messages(exchange: str) -> list[str]:
    """The ``[role] content`` messages of an exchange (a message may span lines)."""
    messages: list[str] = []
    for line in exchange.splitlines():
        head, sep, _ = line[1:].partition("] ")
        if (line.startswith("[") and sep and head in ROLES) or not messages:
            messages.append(line)
        else:
            messages[-1] += "\n" + line
    return messages


def _user_messages(exchange: str) -> list[str]:
    """The user's messages in a ``[role] content`` exchange, without their role mark."""
    return [m.removeprefix("[user] ") for m in _messages(exchange) if m.startswith("[user] ")]
