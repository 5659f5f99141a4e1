"""Kimi CLI wire logs (``~/.kimi/sessions/<md5 of the work dir>/<session uuid>/wire.jsonl``) to turns.

Read from MoonshotAI/kimi-cli (4a550eff): ``src/kimi_cli/wire/file.py`` (``WireFileMetadata`` header line
``{"type": "metadata", "protocol_version"}``, then ``WireMessageRecord`` lines ``{"timestamp": <epoch
seconds>, "message": {"type", "payload"}}``), ``src/kimi_cli/wire/types.py`` (the events: ``TurnBegin``,
``SteerInput``, ``StepBegin``, ``StepInterrupted``, ``TurnEnd``, ``CompactionBegin``/``End``,
``ContentPart``, ``ToolCall``/``ToolCallPart``/``ToolResult``, ``SubagentEvent``, ``BtwBegin``/``End``…),
``tests/core/test_wire_message.py`` (the exact serialised shapes: a text fragment is
``{"type": "ContentPart", "payload": {"type": "text", "text": …}}``), ``packages/kosong/src/kosong/
message.py`` (``TextPart``, ``ThinkPart``), ``src/kimi_cli/soul/kimisoul.py`` (what is sent when),
``src/kimi_cli/session.py``, ``session_fork.py``, ``subagents/store.py`` and ``metadata.py``
(``~/.kimi/kimi.json`` ``work_dirs``: the session folder is the md5 of the work dir path, prefixed with
``<kaos>_`` off the local machine), ``ui/shell/export_import.py``.

Why ``wire.jsonl`` and not ``context.jsonl``: the session folder also holds ``context.jsonl``, the model's
context (``{"role": …}`` lines, ``_checkpoint``/``_usage`` markers, injected system text). It is rewritten
by compaction and ``/undo`` and says nothing the wire does not; the wire is append-only and is what the
person saw, so it is the one read (``detect`` does not offer ``context.jsonl``).

Decisions, case by case:

- ``TurnBegin`` and ``SteerInput`` (follow-up typed while the model works) carry the person's prompt
  (``user_input``: text, or content parts of which the ``text`` ones count); ``BtwBegin``/``BtwEnd`` are a
  side question and its answer. The marker ``[Imported context from …]`` of ``/import`` is not a prompt.
- The model's answer is streamed as ``ContentPart`` text fragments: the fragments of one step (between
  ``StepBegin`` and the next step or turn boundary) are concatenated into one turn, stamped with the time
  and line of the first fragment. ``think`` parts, tool calls, their argument fragments and results,
  status, hook, MCP, approval and notification events are not conversation.
- With ``final=False`` (the CLI may still be writing), an answer whose step the records do not close is
  held back and ``Parsed.resume_offset``/``resume_line`` point at its first fragment, so a live reader
  never cuts one answer in two; with ``final=True`` (the default) it is emitted as far as it goes.
- Compaction (``CompactionBegin``/``End``) and interruption (``StepInterrupted``) only close the current
  answer; the wire keeps no summary text.
- ``SubagentEvent`` wraps a sub-agent's own events: skipped, and a sub-agent's wire file (under the
  session's ``subagents`` folder) gives no turns.
- A fork (``session_fork.py``) starts a new session whose wire begins with copies of the parent's lines;
  copies keep their timestamps, so each copied turn has the same ``message_id`` (the role and the epoch
  timestamp of its first record) and content as the parent's, under the fork's session id. Nothing in the
  fork's folder names its parent, so recognising the copies is left to the ingest's dedup (by message id).
- Turns are ordered by timestamp (stable). session id: the session folder's name; project: the CLI's own
  map (``projects[<folder name>]``, see :func:`load_projects`); model: not recorded in the wire, left "".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any

from memstream.capture.adapters._common import Draft, as_utc, finish, load, text_of, utc
from memstream.capture.model import Parsed, RawRecord, Source

LOCAL_KAOS = "local"
#: Events that end the answer being streamed.
_BOUNDARIES = frozenset(
    {"TurnBegin", "SteerInput", "StepBegin", "StepInterrupted", "TurnEnd", "CompactionBegin", "CompactionEnd"}
)
_IMPORTED = re.compile(r"^\[Imported context from .*\]$", flags=re.DOTALL)


def work_dir_folder(path: str, kaos: str = LOCAL_KAOS) -> str:
    """The folder name Kimi files a work dir's sessions under (``WorkDirMeta.sessions_dir``)."""
    # md5 is Kimi's own folder naming (metadata.py), not a security measure.
    digest = hashlib.md5(path.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest if kaos == LOCAL_KAOS else f"{kaos}_{digest}"


def load_projects(kimi_dir: Path) -> dict[str, str]:
    """Kimi's own project map from ``kimi.json``: session folder name -> work dir. Bad files give {}."""
    try:
        metadata = json.loads((kimi_dir / "kimi.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    work_dirs = metadata.get("work_dirs") if isinstance(metadata, dict) else None
    projects: dict[str, str] = {}
    for entry in work_dirs if isinstance(work_dirs, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            kaos = entry.get("kaos") if isinstance(entry.get("kaos"), str) else LOCAL_KAOS
            projects[work_dir_folder(entry["path"], str(kaos))] = entry["path"]
    return projects


def is_subagent_file(path: str) -> bool:
    """Whether ``path`` is a sub-agent's wire (``<session>/subagents/<agent id>/wire.jsonl``)."""
    return "subagents" in PurePath(path).parts


def parse(
    path: str,
    records: Iterable[RawRecord],
    *,
    mtime: datetime,
    projects: Mapping[str, str] | None = None,
    final: bool = True,
) -> Parsed:
    """The human-visible turns of one Kimi wire log."""
    result = Parsed()
    if is_subagent_file(path):
        return result
    session_folder = PurePath(path).parent
    wire = _Wire(
        session_id=session_folder.name,
        project=(projects or {}).get(session_folder.parent.name, ""),
        mtime=as_utc(mtime),
    )
    for record in records:
        line = load(record, path, result.problems)
        message = line.get("message") if line is not None else None
        if line is None or not isinstance(message, dict) or not isinstance(message.get("type"), str):
            continue  # the metadata header, or a shape this version does not know
        payload = message.get("payload")
        wire.take(message["type"], payload if isinstance(payload, dict) else {}, line.get("timestamp"), record)
    if not final and wire.answer is not None and wire.answer_start >= 0:
        # The answer is still streaming: read it again whole from its first fragment next time.
        result.resume_offset, result.resume_line = wire.answer_start, wire.answer.line
    else:
        wire.close()
    result.turns = finish(wire.drafts, source=Source.KIMI, file=path)
    return result


class _Wire:
    def __init__(self, *, session_id: str, project: str, mtime: datetime) -> None:
        self.session_id = session_id
        self.project = project
        self.mtime = mtime
        self.drafts: list[Draft] = []
        self.answer: Draft | None = None
        self.answer_start = -1
        self.fragments: list[str] = []

    def take(self, kind: str, payload: Mapping[str, Any], timestamp: object, record: RawRecord) -> None:
        if kind in _BOUNDARIES:
            self.close()
        if kind in ("TurnBegin", "SteerInput"):
            self._say("user", text_of(payload.get("user_input")), timestamp, record)
        elif kind == "BtwBegin":
            self._say("user", payload.get("question"), timestamp, record)
        elif kind == "BtwEnd":
            self._say("assistant", payload.get("response"), timestamp, record)
        elif kind in ("ContentPart", "TextPart") and payload.get("type") == "text":
            self._stream(payload.get("text"), timestamp, record)

    def close(self) -> None:
        if self.answer is not None:
            self.answer.add("".join(self.fragments))
            self.drafts.append(self.answer)
        self.answer = None
        self.fragments = []

    def _say(self, role: str, text: object, timestamp: object, record: RawRecord) -> None:
        if not isinstance(text, str) or not text.strip() or (role == "user" and _IMPORTED.match(text.strip())):
            return
        draft = self._draft(role, timestamp, record)
        draft.add(text)
        self.drafts.append(draft)

    def _stream(self, text: object, timestamp: object, record: RawRecord) -> None:
        if not isinstance(text, str):
            return
        if self.answer is None:
            self.answer = self._draft("assistant", timestamp, record)
            self.answer_start = record.start
        self.fragments.append(text)

    def _draft(self, role: str, timestamp: object, record: RawRecord) -> Draft:
        return Draft(
            role=role,
            ts=utc(timestamp, self.mtime),
            line=record.line,
            session_id=self.session_id,
            project=self.project,
            message_id=f"{role}@{timestamp}" if isinstance(timestamp, int | float) else "",
        )
