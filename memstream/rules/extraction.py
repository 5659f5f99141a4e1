"""Seed 000 step 2: prompts that ask for typed facts, and tolerant parsing of the answer.

Parsing never raises: a reply it cannot read yields no facts and a warning.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from schemas import MEMORY_TYPES, USER_SCOPED_TYPES

#: Bump when a prompt changes, so a replay can tell which prompt produced a fact.
PROMPT_VERSION = "extract.v1"

#: Type given to facts whose type is missing or unknown; plain string arrays get it too (seed 000).
FALLBACK_TYPE = "learned-pattern"

TYPE_GUIDE = """\
- project-brief: core project definition, goals, scope
- architecture: system design, patterns, component relationships
- tech-context: stack, tools, build commands, constraints
- product-context: why the project exists, problems solved, target users
- progress: current state of work (only the latest survives)
- session-summary: what was worked on in a session
- error-solution: bug fixes, gotchas, approaches that worked or failed
- preference: the user's cross-project personal preferences (user scope)
- learned-pattern: reusable patterns
- project-config: config preferences, run commands, environment setup
- conversation: raw conversation context (rarely used)"""

NORMAL_SYSTEM = f"""\
You extract durable memories from a coding agent's conversation.
Return ONLY a JSON array. Each item: {{"memory": "<one atomic, self-contained fact>", "type": "<type>"}}.
Add "scope": "user" only for personal preferences that apply across projects.
Types:
{TYPE_GUIDE}
Skip greetings, ephemeral details and anything already obvious from code. If nothing is worth
keeping, return [].
Example: [{{"memory": "Auth uses JWT stored in httpOnly cookies, not localStorage", "type": "architecture"}},
{{"memory": "User prefers bun over npm for all installs", "type": "preference", "scope": "user"}}]"""

SUMMARY_SYSTEM = """\
You summarize a coding agent's session for its future self.
Return ONLY a JSON array with one item: {"memory": "<summary>", "type": "session-summary"}.
The summary covers what was worked on, decisions made and progress achieved, in at most 5 sentences."""

CONDENSE_SYSTEM = """\
You condense an old session summary into one reusable lesson for future sessions on this project.
Return ONLY a JSON array with one item: {"memory": "<the lesson>", "type": "learned-pattern"}."""


def extraction_prompt(snapshot_text: str) -> str:
    return f"Conversation:\n{snapshot_text}\n\nReturn the JSON array now."


class ExtractedFact(msgspec.Struct, frozen=True):
    text: str
    type: str
    scope: str  # "project" | "user"


class ParseResult(msgspec.Struct, frozen=True):
    facts: list[ExtractedFact]
    warnings: list[str]


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _strip_wrappers(raw: str) -> str:
    text = _THINK.sub("", raw).strip()
    fenced = _FENCE.match(text)
    if fenced:
        return fenced.group(1).strip()
    # A fence somewhere inside surrounding prose.
    inner = re.search(r"```[a-zA-Z0-9_-]*\s*\n(.*?)```", text, re.DOTALL)
    return inner.group(1).strip() if inner else text


def _first_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    # Prose around the JSON (which may hold brackets of its own): the first position
    # where a whole array or object decodes wins.
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "[{":
            try:
                return decoder.raw_decode(text, start)[0]
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON array or object found")


def load_json_reply(raw: str) -> Any:
    """The JSON inside an LLM reply, past ``<think>`` blocks, fences and prose; ValueError if none."""
    return _first_json(_strip_wrappers(raw))


def parse_facts(raw: str) -> ParseResult:
    """Read an LLM reply into facts, tolerating fences, ``<think>``, wrappers and strings."""
    warnings: list[str] = []
    try:
        data = load_json_reply(raw)
    except ValueError as exc:
        return ParseResult([], [f"unparseable reply: {exc}"])
    if isinstance(data, dict):
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

    facts: list[ExtractedFact] = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            text, kind, scope = item, FALLBACK_TYPE, ""
        elif isinstance(item, dict):
            text = item.get("memory") or item.get("content") or item.get("fact") or ""
            kind = str(item.get("type") or "")
            scope = str(item.get("scope") or "")
        else:
            warnings.append(f"item {i}: not a string or object, skipped")
            continue
        if not isinstance(text, str):
            warnings.append(f"item {i}: memory is a {type(text).__name__}, not text, skipped")
            continue
        text = text.strip()
        if not text:
            warnings.append(f"item {i}: empty memory, skipped")
            continue
        if kind not in MEMORY_TYPES:
            if kind:
                warnings.append(f"item {i}: unknown type {kind!r}, using {FALLBACK_TYPE}")
            kind = FALLBACK_TYPE
        if scope not in ("project", "user"):
            scope = "user" if kind in USER_SCOPED_TYPES else "project"
        facts.append(ExtractedFact(text=text, type=kind, scope=scope))
    return ParseResult(facts, warnings)


#: A conversation memory (raw mode) keeps at most this much of the exchange.
CONVERSATION_MAX_CHARS = 2_000


def system_prompt(mode: str) -> str:
    return SUMMARY_SYSTEM if mode == "summary" else NORMAL_SYSTEM


def raw_fact(exchange: str) -> ExtractedFact | None:
    """Raw mode: the exchange itself becomes one ``conversation`` memory, no inference."""
    text = exchange.strip()
    if not text:
        return None
    if len(text) > CONVERSATION_MAX_CHARS:
        text = text[: CONVERSATION_MAX_CHARS - 1] + "…"
    return ExtractedFact(text=text, type="conversation", scope="project")
