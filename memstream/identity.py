"""Deterministic identities: scope keys, content hashes and memory ids.

Ids derive from content so that at-least-once delivery and replays from offset 0
never create duplicates (DESIGN: "Replays are idempotent").
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the schemas import this module
    from memstream.schemas import Turn

#: Namespace of every memstream uuid5.
_NAMESPACE = uuid.UUID("6f1d2c8e-3b6a-5e0f-9a41-1d7c5b2e8a90")

_WHITESPACE = re.compile(r"\s+")
_TRAILING_PUNCTUATION = re.compile(r"[.,!?;:]+$")


class NormalizedContent(NamedTuple):
    """Pipeline v2's ``normalizeAndHashContent``."""

    #: Trimmed, whitespace collapsed, original casing: what is stored.
    storage: str
    #: Lowercased storage content without trailing punctuation: the hash basis.
    normalized: str
    #: SHA-256 hex of the hash basis; the exact-duplicate key.
    content_hash: str


def normalize_content(text: str) -> NormalizedContent:
    storage = _WHITESPACE.sub(" ", text).strip()
    normalized = _TRAILING_PUNCTUATION.sub("", storage.lower())
    basis = normalized if normalized else storage.lower()
    return NormalizedContent(storage, normalized, hashlib.sha256(basis.encode()).hexdigest())


_LINE_ENDINGS = re.compile(r"\r\n?")
_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_MARKDOWN = re.compile(
    r"^\s{0,3}(#{1,6}\s|[-*+]\s|\d+[.)]\s|>\s|\|.*\|)|\*\*[^*\n]+\*\*|\[[^\]\n]+\]\([^)\n]+\)",
    re.MULTILINE,
)


def normalized_turn_content(content: str) -> str:
    """The capture spec's normalization of a message: line endings as ``\\n``, the whole trimmed."""
    return _LINE_ENDINGS.sub("\n", content).strip()


def turn_hash(content: str) -> str:
    """The capture spec's message hash: SHA-256 hex of the normalized content (its dedup key, with the session)."""
    return hashlib.sha256(normalized_turn_content(content).encode()).hexdigest()


def content_features(content: str) -> tuple[int, bool, bool]:
    """The capture spec's metadata of a message: (content_length, has_code, has_markdown) of its normalized text.

    Code is a fenced block or inline code; Markdown is code, headings, lists, quotes, tables, bold or links.
    """
    text = normalized_turn_content(content)
    has_code = bool(_FENCE.search(text) or _INLINE_CODE.search(text))
    return len(text), has_code, has_code or bool(_MARKDOWN.search(text))


def project_key(project_dir: str) -> str:
    """The memory spec: "the project tag is a deterministic hash of the directory path"."""
    path = os.path.normpath(os.path.abspath(os.path.expanduser(project_dir))) if project_dir else ""
    return "p_" + hashlib.sha256(path.encode()).hexdigest()[:16]


def user_key(identity: str) -> str:
    """The memory spec: user scope is "derived from git email"; empty identity gives ""."""
    identity = identity.strip().lower()
    return "u_" + hashlib.sha256(identity.encode()).hexdigest()[:16] if identity else ""


def memory_id(scope_key: str, content_hash: str) -> str:
    """The id a memory with this content gets in this scope, on every replay."""
    return str(uuid.uuid5(_NAMESPACE, f"{scope_key}:{content_hash}"))


def session_key(session_id: str, project_key: str, user_key: str) -> str:
    """Where a session's state lives, and its key on the turns and snapshots topics: its id
    within its project and its user's scope. Session ids are not unique across users or
    projects (``s-42``, a CLI's counter), so two tenants who pick the same one never share a
    window, a turn counter or a snapshot id."""
    return f"{project_key}/{user_key or '-'}/{session_id}"


def session_user_key(key: str) -> str:
    """The user scope a :func:`session_key` names ("" for none, or for a key kept before keys
    named the tenant: a bare session id)."""
    parts = key.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0].startswith("p_") and parts[1].startswith("u_") else ""


def session_id_of_key(key: str) -> str:
    """The session id a :func:`session_key` was made from (a bare session id is its own)."""
    parts = key.split("/", 2)
    return parts[2] if len(parts) == 3 and parts[0].startswith("p_") else key


def turn_session_key(session_id: str, project: str, user: str) -> str:
    """:func:`session_key` of a turn (its session id, project directory and user identity)."""
    return session_key(session_id, project_key(project), user_key(user))


def turn_key(turn: Turn) -> bytes:
    """A turn's key on the turns topic, as memstream's publishers set it: its :func:`turn_session_key`."""
    return turn_session_key(turn.session_id, turn.project, turn.user).encode()


def derived_id(*parts: str) -> str:
    """A stable id for an event derived from the ids it came from."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def exchange_memory_id(scope_key: str, exchange_id: str) -> str:
    """The id of a raw exchange's memory in this scope: derived from the exchange's identity (its
    session and where it began), not its text, so the exchange keeps one memory as it goes on and
    every replay writes that same one."""
    return str(uuid.uuid5(_NAMESPACE, f"{scope_key}:exchange:{exchange_id}"))
