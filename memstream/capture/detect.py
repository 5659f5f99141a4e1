"""Where each coding CLI keeps its sessions, and which CLI a given file belongs to.

Standard locations (checked against each CLI's source, see the adapters' docstrings):

- claude: ``~/.claude/projects/<dashed project dir>/<session uuid>.jsonl``
- codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``, ``~/.codex/archived_sessions/rollout-*.jsonl``
  and the prompt log ``~/.codex/history.jsonl``
- gemini: ``~/.gemini/tmp/<project hash or slug>/chats/session-*.jsonl`` (and the older ``.json``), and
  ``/chat save`` checkpoints ``~/.gemini/tmp/<…>/checkpoint-*.json``
- kimi: ``~/.kimi/sessions/<md5 of the work dir>/<session uuid>/wire.jsonl``, and before the wire log
  ``~/.kimi/sessions/<md5 of the work dir>/<session uuid>.jsonl`` (the context log); Kimi Code's
  ``~/.kimi-code/sessions/<workspace>/<session>/agents/<agent>/wire.jsonl`` (beside the Kimi home)

Files deliberately not captured: Kimi's ``context.jsonl`` beside a wire log and its rotations
``context_<n>.jsonl`` (the model's context, rewritten on compaction and ``/undo``; ``wire.jsonl`` holds the
same conversation append-only), Claude's ``~/.claude/history.jsonl`` (prompt history of the input box), and
anything that is not a session file.

Detection (the capture spec): the path pattern first, then content markers of the first records, so that a session
file copied anywhere under any name is still recognised. The markers are the record shapes each CLI writes
(field names, envelope types), which are certain, rather than model names, which are not.

Discovery lists files in a stable order with Codex's ``history.jsonl`` after every rollout file: it repeats
prompts the rollouts already hold, and the ingest machinery's first-seen dedup then keeps the rollout's
provenance (see ``adapters.codex``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from memstream.capture.model import Source

#: How many bytes of a file's beginning :func:`detect` is given by :func:`discover`.
HEAD_BYTES = 65_536
#: How many complete records of the head are inspected for content markers.
HEAD_RECORDS = 20

CODEX_HISTORY_NAME = "history.jsonl"
KIMI_WIRE_NAME = "wire.jsonl"
#: Kimi CLI's context log beside its wire (its rotations, a Task sub-agent's ``context_sub_<n>``): never a session
#: file of its own.
_KIMI_CONTEXT_NAME = re.compile(r"^context(_sub)?(_\d+)?\.jsonl$")
#: The roles of a Kimi context log's bookkeeping lines: no other CLI writes them.
_KIMI_CONTEXT_ROLES = frozenset({"_checkpoint", "_usage", "_system_prompt"})
#: Kimi Code's record types (flat ``{"type", "time"}`` lines after the same metadata header as the wire).
_KIMI_CODE_TYPES = frozenset({"turn.prompt", "turn.steer", "context.append_message", "context.append_loop_event"})

#: Glob patterns of session files below each standard root (a root that is a file is taken as is).
PATTERNS: dict[Source, tuple[str, ...]] = {
    Source.CLAUDE: ("*/*.jsonl",),
    Source.CODEX: ("*/*/*/rollout-*.jsonl", "rollout-*.jsonl"),
    Source.GEMINI: ("*/chats/session-*.jsonl", "*/chats/session-*.json", "*/checkpoint-*.json"),
    Source.KIMI: ("*/*/wire.jsonl", "*/*.jsonl", "*/*/agents/*/wire.jsonl"),
}

_CODEX_ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation"})
_GEMINI_SESSION_NAME = re.compile(r"^session-.*\.jsonl?$")
_GEMINI_CHECKPOINT_NAME = re.compile(r"^checkpoint-.*\.json$")


def standard_roots(home: Path) -> dict[Source, list[Path]]:
    """The standard session roots of each CLI below ``home`` (existing or not)."""
    return {
        Source.CLAUDE: [home / ".claude" / "projects"],
        Source.CODEX: [
            home / ".codex" / "sessions",
            home / ".codex" / "archived_sessions",
            home / ".codex" / CODEX_HISTORY_NAME,
        ],
        Source.GEMINI: [home / ".gemini" / "tmp"],
        Source.KIMI: [home / ".kimi" / "sessions", home / ".kimi-code" / "sessions"],
    }


def detect(path: Path, head: bytes) -> Source | None:
    """The CLI that wrote ``path`` (whose first bytes are ``head``), or None if it is no session file."""
    if _KIMI_CONTEXT_NAME.match(path.name):
        return None
    return detect_by_path(path) or detect_by_content(path, head)


def detect_by_path(path: Path) -> Source | None:
    """The CLI whose standard layout ``path`` follows, or None."""
    parts = path.parts
    name = path.name
    if ".claude" in parts and "projects" in parts and name.endswith(".jsonl"):
        return Source.CLAUDE
    if ".codex" in parts and ((name.startswith("rollout-") and name.endswith(".jsonl")) or name == CODEX_HISTORY_NAME):
        return Source.CODEX
    if ".gemini" in parts and (_GEMINI_SESSION_NAME.match(name) or _GEMINI_CHECKPOINT_NAME.match(name)):
        return Source.GEMINI
    if (".kimi" in parts or ".kimi-code" in parts) and name == KIMI_WIRE_NAME:
        return Source.KIMI
    return None


def detect_by_content(path: Path, head: bytes) -> Source | None:
    """The CLI whose record shapes appear in ``head``, the first bytes of the file, or None."""
    text = head.decode("utf-8", errors="replace")
    if path.suffix == ".json" or text.lstrip().startswith(("[", "{\n")):
        found = _document_markers(text)
        if found is not None:
            return found
    for record in _head_records(text):
        found = _record_markers(record)
        if found is not None:
            return found
    return _prefix_markers(text)


def _head_records(text: str) -> Iterable[dict[str, object]]:
    for count, line in enumerate(text.split("\n")[:-1]):  # the last piece may be cut short
        if count >= HEAD_RECORDS:
            return
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def _record_markers(record: Mapping[str, object]) -> Source | None:
    kind = record.get("type")
    if kind in _CODEX_ENVELOPES and "payload" in record:
        return Source.CODEX
    if "record_type" in record or ({"id", "timestamp", "instructions"} <= record.keys()):
        return Source.CODEX  # the rollout format before the type/payload envelope (2025)
    if {"ts", "text"} <= record.keys() and ("conversation_id" in record or "session_id" in record):
        return Source.CODEX  # ~/.codex/history.jsonl
    if ("sessionId" in record and "projectHash" in record) or "$rewindTo" in record or "$set" in record:
        return Source.GEMINI
    message = record.get("message")
    if kind == "metadata" and "protocol_version" in record:
        return Source.KIMI
    if isinstance(message, dict) and "payload" in message and isinstance(record.get("timestamp"), int | float):
        return Source.KIMI
    if record.get("role") in _KIMI_CONTEXT_ROLES or (kind in _KIMI_CODE_TYPES and "time" in record):
        return Source.KIMI
    if kind in _CLAUDE_TYPES and any(key in record for key in ("sessionId", "leafUuid", "uuid", "messageId")):
        return Source.CLAUDE
    return None


#: Markers of a first line longer than the head (a Codex session_meta carries the whole system prompt):
#: the record's opening, as each CLI serialises it, with or without spaces after the separators.
_PREFIX_MARKERS = (
    (
        re.compile(r'^\{\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"type"\s*:\s*"(session_meta|response_item|event_msg)"'),
        Source.CODEX,
    ),
    (re.compile(r'^\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"'), Source.GEMINI),
    (re.compile(r'^\{\s*"timestamp"\s*:\s*[0-9.]+\s*,\s*"message"\s*:\s*\{\s*"type"'), Source.KIMI),
    (re.compile(r'^\{\s*"parentUuid"\s*:\s*(null|"[^"]*")\s*,\s*"isSidechain"'), Source.CLAUDE),
)


def _prefix_markers(text: str) -> Source | None:
    head = text.lstrip()
    return next((source for pattern, source in _PREFIX_MARKERS if pattern.match(head)), None)


def _document_markers(text: str) -> Source | None:
    # A single-JSON document may be longer than the head, so look for its keys rather than parse it.
    if '"sessionId"' in text and '"projectHash"' in text:
        return Source.GEMINI
    if '"role"' in text and '"parts"' in text:
        return Source.GEMINI  # a /chat save checkpoint: Gemini API contents
    return None


def discover(paths: Iterable[Path], roots: Mapping[Source, Iterable[Path]] | None = None) -> list[tuple[Path, Source]]:
    """Session files under ``paths`` (files or folders, any location) with their source.

    With no ``paths``, the ``roots`` (by default none; pass :func:`standard_roots`) are walked with their
    CLI's patterns. Paths given explicitly are walked whole and every ``.jsonl``/``.json`` file is detected.
    Unreadable files and folders are skipped. Each file appears once; Codex's history file comes last.
    """
    found: dict[Path, Source] = {}
    explicit = list(paths)
    if explicit:
        for path in explicit:
            for candidate in _walk(path):
                source = _detect_file(candidate)
                if source is not None:
                    found.setdefault(candidate, source)
    else:
        for source, source_roots in (roots or {}).items():
            for root in source_roots:
                for candidate in _walk_root(root, source):
                    found.setdefault(candidate, source)
    return sorted(found.items(), key=_discovery_order)


def _discovery_order(item: tuple[Path, Source]) -> tuple[bool, bool, str]:
    path, source = item
    is_codex_history = source is Source.CODEX and path.name == CODEX_HISTORY_NAME
    is_gemini_checkpoint = source is Source.GEMINI and path.name.startswith("checkpoint-")
    return (is_codex_history, is_gemini_checkpoint, str(path))


def _walk(path: Path) -> Iterable[Path]:
    if path.is_file():
        yield path
        return
    if not path.is_dir():
        return
    for candidate in sorted(path.rglob("*")):
        if candidate.suffix in (".jsonl", ".json") and candidate.is_file():
            yield candidate


def _walk_root(root: Path, source: Source) -> Iterable[Path]:
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        return
    for pattern in PATTERNS[source]:
        yield from (candidate for candidate in sorted(root.glob(pattern)) if candidate.is_file())


def _detect_file(path: Path) -> Source | None:
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    return detect(path, head)
