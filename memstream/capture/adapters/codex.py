"""Codex rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) and its prompt log to turns.

Read from openai/codex: ``codex-rs/protocol/src/protocol.rs`` (``RolloutLine`` = ``timestamp`` + a
``RolloutItem`` tagged ``type``/``payload``: ``session_meta``, ``response_item``, ``compacted``,
``turn_context``, ``event_msg``; ``SessionMeta`` with ``id``, ``cwd``, ``source``), ``codex-rs/core/src/
rollout/policy.rs`` (which items are persisted: ``UserMessage``/``AgentMessage`` events and ``Message``
response items among them), ``codex-rs/core/src/event_mapping.rs`` and ``codex-rs/core/src/context/*``
(``is_contextual_user_fragment``: which user messages are injected context), and
``codex-rs/core/src/message_history.rs`` (``history.jsonl``).

Decisions, case by case:

- Every message is recorded twice in most rollouts: the ``response_item`` (what the model saw) and the
  ``event_msg`` (``user_message`` / ``agent_message``, what the UI showed). Each role is read from the
  events when the file holds an event of that role, else from its ``message`` response items: files
  written before Codex persisted those events (and the pre-envelope format of 2025, one ``ResponseItem``
  a line) have only items, and some versions (Codex Desktop 0.128) persist prompts as events but replies
  only as items. Either way each message is taken once.
- Prompts sent from the IDE extension or Codex Desktop carry a preamble the extension writes: ``# Context
  from my IDE setup:`` (active file, open tabs, selection) or ``# Files mentioned by the user:``, then the
  person's words after ``## My request for Codex:`` (``## My request:`` in some versions). The turn is
  the request; the preamble (file names the extension listed) is dropped.
- Injected context is not a prompt: user messages that are contextual fragments in Codex's own sense
  (``<user_instructions>``, ``<environment_context>``, ``# AGENTS.md instructions for …``, ``<skill>``,
  ``<user_shell_command>``, ``<turn_aborted>``, ``<subagents>``, ``<subagent_notification>``, hook prompts)
  are dropped, and so are ``developer``/``system`` role messages (permissions, collaboration mode…).
- Reasoning (``reasoning`` items, ``agent_reasoning`` events), tool calls and outputs
  (``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` and their outputs),
  compaction (``compacted`` lines, ``compaction`` items, ``context_compacted`` events), interruption
  (``turn_aborted``), token counts and unknown record types carry no conversation and are skipped.
- Sub-agent traffic: a rollout whose ``session_meta.source`` is a ``subagent`` gives no turns (it starts
  with a copy of its parent's lines, already read from the parent's file).
- A resumed session appends to the same rollout, so there are no copies inside a file; a fork starts a new
  file (``session_meta.forked_from_id``) with copies of the parent's messages under the fork's id, which
  only a dedup by content across sessions recognises (the adapter reads one file).
- Lines are ordered by their ``timestamp`` (stable). session id: ``session_meta.id`` (else the uuid at the
  end of the file name); project: ``session_meta.cwd``, updated by ``turn_context.cwd``; model: the
  latest ``turn_context.model`` before an assistant message.

``~/.codex/history.jsonl`` (``message_history.rs``) holds one line per prompt the person submitted, across
all sessions: ``{"conversation_id" (older: "session_id"), "ts" (epoch seconds), "text"}``; no replies, no
cwd. Its prompts are the same texts as the rollouts' ``user_message`` events, so it adds nothing for a
session whose rollout exists: it is read as user turns of that session (project unknown), discovery
lists it after every rollout, and the ingest's first-seen content dedup keeps the rollout's copy (with
its project and line). It contributes only the prompts of sessions whose rollout is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import PurePath
from typing import Any

from memstream.capture.adapters._common import Draft, as_utc, finish, load, text_of, utc
from memstream.capture.model import Parsed, RawRecord, Source

HISTORY_NAME = "history.jsonl"
#: Openings of the user-role texts Codex injects (codex-rs/core/src/context: CONTEXTUAL_USER_FRAGMENTS).
CONTEXTUAL_OPENINGS = (
    "<user_instructions>",
    "<environment_context>",
    "# agents.md instructions for",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagents>",
    "<subagent_notification>",
    "<hook_prompt",
)
_CONTEXT_KINDS = frozenset({"user_instructions", "environment_context"})
#: Openings of the preamble the IDE extension / Codex Desktop puts before the person's request.
IDE_PREAMBLE_OPENINGS = ("# Context from my IDE setup:", "# Files mentioned by the user:")
#: The heading that ends the preamble: the request follows it.
_IDE_REQUEST = re.compile(r"^#{1,2} My request(?: for Codex)?:[ \t]*\n?", flags=re.MULTILINE)
_SESSION_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
_CWD = re.compile(r"<cwd>(.*?)</cwd>", flags=re.DOTALL)


def ide_request(text: str) -> str:
    """The person's request in an IDE-extension prompt (its preamble dropped); other texts unchanged."""
    if not text.lstrip().startswith(IDE_PREAMBLE_OPENINGS):
        return text
    match = _IDE_REQUEST.search(text)
    return text[match.end() :].strip() if match else text


def is_contextual(text: str) -> bool:
    """Whether a user-role text is context Codex injected rather than something the person typed."""
    return text.lstrip().lower().startswith(CONTEXTUAL_OPENINGS)


def parse(
    path: str,
    records: Iterable[RawRecord],
    *,
    mtime: datetime,
    projects: Mapping[str, str] | None = None,
    final: bool = True,
) -> Parsed:
    """The human-visible turns of one rollout, or the prompts of ``history.jsonl`` (``projects`` unused)."""
    records = list(records)
    if PurePath(path).name == HISTORY_NAME or (records and _is_history_entry(records[0])):
        return _parse_history(path, records, mtime=as_utc(mtime))
    return _Rollout(path, as_utc(mtime)).parse(records)


def _is_history_entry(record: RawRecord) -> bool:
    # A copy of history.jsonl under another name is known by its shape (detect.py uses the same markers).
    entry = load(record, "", [])
    return (
        entry is not None
        and {"ts", "text"} <= entry.keys()
        and ("conversation_id" in entry or "session_id" in entry)
        and "type" not in entry
    )


class _Rollout:
    def __init__(self, path: str, mtime: datetime) -> None:
        self.path = path
        self.mtime = mtime
        match = _SESSION_UUID.search(PurePath(path).stem)
        self.session_id = match.group(1) if match else PurePath(path).stem
        self.project = ""
        self.model = ""
        self.subagent = False
        self.events: list[Draft] = []
        self.items: list[Draft] = []

    def parse(self, records: Iterable[RawRecord]) -> Parsed:
        result = Parsed()
        for record in records:
            line = load(record, self.path, result.problems)
            if line is not None:
                self._take(line, record)
        if not self.subagent:
            drafts = [
                draft
                for role in ("user", "assistant")
                for draft in (self.events if any(d.role == role for d in self.events) else self.items)
                if draft.role == role
            ]
            for draft in drafts:  # the session id and project may be learnt after the first message
                draft.session_id = self.session_id
                draft.project = draft.project or self.project
            result.turns = finish(drafts, source=Source.CODEX, file=self.path)
        return result

    def _take(self, line: Mapping[str, Any], record: RawRecord) -> None:
        kind = line.get("type")
        payload = line.get("payload")
        ts = utc(line.get("timestamp"), self.mtime)
        if not isinstance(payload, dict):
            self._take_legacy(line, record)
            return
        if kind == "session_meta":
            self._take_meta(payload)
        elif kind == "turn_context":
            self.project = str(payload.get("cwd") or self.project)
            self.model = str(payload.get("model") or self.model)
        elif kind == "event_msg":
            self._take_event(payload, record, ts)
        elif kind == "response_item":
            self._take_item(payload, record, ts)

    def _take_meta(self, meta: Mapping[str, Any]) -> None:
        self.session_id = str(meta.get("id") or self.session_id)
        self.project = str(meta.get("cwd") or self.project)
        source = meta.get("source")
        self.subagent = (isinstance(source, dict) and "subagent" in source) or source == "subagent"

    def _take_event(self, event: Mapping[str, Any], record: RawRecord, ts: datetime) -> None:
        kind = event.get("type")
        message = event.get("message")
        if kind not in ("user_message", "agent_message") or not isinstance(message, str):
            return
        role = "user" if kind == "user_message" else "assistant"
        # Some versions label injected context on the event itself (InputMessageKind).
        if role == "user" and (is_contextual(message) or event.get("kind") in _CONTEXT_KINDS):
            return
        self.events.append(self._draft(role, message, record, ts))

    def _take_item(self, item: Mapping[str, Any], record: RawRecord, ts: datetime) -> None:
        if item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
            return
        role = str(item["role"])
        content = item.get("content")
        parts = content if isinstance(content, list) else [content]
        texts = [text_of(part) for part in parts if isinstance(part, dict | str)]
        texts = [text for text in texts if text.strip() and not (role == "user" and is_contextual(text))]
        if role == "user":
            self._learn_cwd(content)
        if texts:
            self.items.append(self._draft(role, "\n\n".join(texts), record, ts, message_id=item.get("id")))

    def _take_legacy(self, line: Mapping[str, Any], record: RawRecord) -> None:
        # Before the type/payload envelope: the first line is the session meta, then one ResponseItem a line
        # (and {"record_type": "state"} markers), without timestamps.
        if "record_type" in line:
            return
        if line.get("type") is None and "id" in line and "timestamp" in line:
            self.session_id = str(line.get("id") or self.session_id)
            return
        self._take_item(line, record, self.mtime)

    def _learn_cwd(self, content: object) -> None:
        # Rollouts without session_meta.cwd still name it in the injected environment context.
        if not self.project:
            match = _CWD.search(text_of(content))
            if match:
                self.project = match.group(1).strip()

    def _draft(self, role: str, text: str, record: RawRecord, ts: datetime, message_id: object = None) -> Draft:
        if role == "user":
            text = ide_request(text)
        draft = Draft(
            role=role,
            ts=ts,
            line=record.line,
            session_id=self.session_id,
            project=self.project,
            model=self.model if role == "assistant" else "",
            message_id=str(message_id or ""),
        )
        draft.add(text)
        return draft


def _parse_history(path: str, records: Iterable[RawRecord], *, mtime: datetime) -> Parsed:
    result = Parsed()
    drafts: list[Draft] = []
    for record in records:
        entry = load(record, path, result.problems)
        if entry is None:
            continue
        text = entry.get("text")
        session = entry.get("conversation_id") or entry.get("session_id")
        if not isinstance(text, str) or not text.strip() or not isinstance(session, str):
            continue
        draft = Draft(role="user", ts=utc(entry.get("ts"), mtime), line=record.line, session_id=session)
        draft.add(ide_request(text))
        drafts.append(draft)
    result.turns = finish(drafts, source=Source.CODEX, file=path)
    return result
