"""Kimi CLI and Kimi Code session logs to turns: the wire log, Kimi Code's wire, and the old context log.

Three formats, each known by its own records (``detect`` and this module agree on them):

1. Kimi CLI's wire log (``~/.kimi/sessions/<md5 of the work dir>/<session uuid>/wire.jsonl``), read from
   MoonshotAI/kimi-cli (4a550eff): ``src/kimi_cli/wire/file.py`` (``WireFileMetadata`` header line
   ``{"type": "metadata", "protocol_version"}``, then ``WireMessageRecord`` lines ``{"timestamp": <epoch
   seconds>, "message": {"type", "payload"}}``), ``src/kimi_cli/wire/types.py`` (``TurnBegin``,
   ``SteerInput``, ``StepBegin``, ``StepInterrupted``, ``TurnEnd``, ``CompactionBegin``/``End``,
   ``ContentPart``, ``ToolCall``/``ToolCallPart``/``ToolResult``, ``SubagentEvent``, ``BtwBegin``/``End``),
   ``tests/core/test_wire_message.py`` (the serialised shapes), ``src/kimi_cli/soul/kimisoul.py``
   (``run``: what is sent when), ``soul/slash.py`` and ``utils/slashcmd.py`` (slash commands),
   ``soul/btw.py`` (side questions), ``session.py``, ``session_fork.py``, ``subagents/store.py`` and
   ``metadata.py`` (``~/.kimi/kimi.json`` ``work_dirs``: the session folder is the md5 of the work dir
   path, prefixed with ``<kaos>_`` off the local machine).
2. Kimi Code's wire (``~/.kimi-code/sessions/<workspace>/<session>/agents/<agent>/wire.jsonl``), read from
   recorded files (``tests/fixtures/capture/real/kimi``) and MoonshotAI/kimi-code's own fixture
   (``apps/vis/server/test/fixtures/sessions``): flat records ``{"type": …, "time": <epoch ms>}``:
   ``turn.prompt`` and ``turn.steer`` (``input`` parts, ``origin.kind``), ``context.append_message``
   (the model's context: the prompt again, and injected ``<system-reminder>`` text of origin
   ``injection``), ``context.append_loop_event`` (``step.begin``, ``content.part`` with a ``text`` or
   ``think`` part and its ``stepUuid``, ``tool.call``, ``tool.result``, ``step.end``), ``config.update``
   (``cwd``), ``llm.request``, ``usage.record``, ``turn.cancel``/``turn.ended``. The workspace folder's
   root is in ``~/.kimi-code/workspaces.json`` (``{"workspaces": {<folder>: {"root"}}}``).
3. Kimi CLI before the wire log (2025): ``~/.kimi/sessions/<md5 of the work dir>/<session uuid>.jsonl``,
   the model's context (``soul/context.py``): ``{"role": "user"|"assistant"|"tool", "content", …}``
   messages and ``_checkpoint``/``_usage``/``_system_prompt`` markers. It was the only record then. Its
   rotations (``<uuid>_1.jsonl``, after ``/clear`` or an undo) are earlier text of the same session;
   ``<uuid>_read_<n>.jsonl`` is the transcript of a ``ReadContext`` sub-agent, ``<uuid>_sub_<n>.jsonl``
   (``<uuid>-sub-<n>.jsonl`` before 2025-09-26) a Task sub-agent's (``tools/task/__init__.py``).

Why the wire and not ``context.jsonl`` where both exist: the session folder of Kimi CLI 1.x also holds
``context.jsonl``, the model's context, rewritten by compaction and ``/undo``; the wire is append-only and
is what the person saw, so ``detect`` offers the wire and not ``context*.jsonl``.

Decisions, case by case:

- The person's words: ``TurnBegin`` and ``SteerInput`` (typed while the model works); in Kimi Code
  ``turn.prompt`` and ``turn.steer`` of origin ``user`` (other origins are the CLI's); in the old log the
  ``user`` messages. Never the CLI's text in the person's place: its ``<system>…</system>`` markers
  (``CHECKPOINT n``), ``<system-reminder>`` injections and the synthetic prompts of background-task
  follow-ups (``ui/print``) and notifications (``<notification …>``). The marker ``[Imported context
  from …]`` of ``/import`` is not a prompt either.
- Slash commands reach the log when the agent core runs them (``kimisoul.run``): a built-in (``/clear``,
  ``/compact``, ``/yolo``, ``/plan``, ``/init``…) is answered by the CLI itself, with text parts outside
  any step ("The context has been cleared."): neither the command nor that feedback is conversation.
  ``/init`` runs the agent on the CLI's own prompt, as a turn inside the command's turn: that prompt is
  not the person's, the model's answer to it is kept as any answer. A skill or prompt flow
  (``/skill:<name>``, ``/flow:<name>``) sends a prompt to the model: with arguments the command as typed
  is the person's request (as for Claude Code); without, its only words are the name.
- The model's answer: the text parts of one step (between ``StepBegin`` and the next step or turn
  boundary; Kimi Code: one ``stepUuid``; the old log: one assistant message) make one turn, stamped with
  the time and line of its first part. Kimi Code also appends the model's message to the context
  (``context.append_message``, role ``assistant``): the same text, read only from a log without parts.
  Text parts outside a step are the CLI's (a command's feedback, a hook's block). ``think`` parts, tool
  calls and results, status, hook, MCP, approval and notification events are not conversation.
- A side question (``/btw``: ``BtwBegin``/``BtwEnd``) is asked and answered beside the conversation,
  without entering it: left out.
- With ``final=False`` (the CLI may still be writing), an answer whose step the records do not close is
  held back and ``Parsed.resume_offset``/``resume_line`` point at its first part, so a live reader never
  cuts one answer in two; with ``final=True`` it is emitted as far as it goes. The ingest machinery passes
  ``final=True`` once the file has been quiet for its live window (a crashed or killed session): the same
  rule as every CLI's held-back reply.
- Compaction and interruption only close the current answer; the logs keep no summary text. A
  ``SteerInput`` is written the moment the person types it, while the step's answer may still stream:
  it is a turn of its own and leaves the answer whole.
- Sub-agents: ``SubagentEvent`` wraps a sub-agent's own events (skipped); a sub-agent's own log (under
  ``subagents/``, Kimi Code's ``agents/<agent>`` other than ``main``, the old ``_read_<n>`` transcripts and
  the Task tool's ``<session>-sub-<n>``, ``<session>_sub_<n>`` and ``context_sub_<n>`` logs) gives no turns;
  so does a Kimi Code wire whose prompt has the sub-agent's origin (``system_trigger``/``subagent``), wherever
  the file is (an export read with ``memstream ingest FILE`` has no ``agents/<agent>`` folder to go by).
- A fork (``session_fork.py``) starts a new session whose wire begins with copies of the parent's lines;
  copies keep their timestamps, so each copied turn has the same ``message_id`` (the role and the epoch
  timestamp of its first record) and content as the parent's, under the fork's session id; recognising
  the copies is left to the ingest's dedup (by message id).
- Turns are ordered by timestamp (stable; the old log has none: file order, at the file's mtime).
  session id: the session folder's name (``wire.jsonl``), else the file's name (without a rotation's
  ``_<n>``). project: the CLI's own map by the session's folder (``kimi.json``: md5 of the work dir;
  ``workspaces.json``: Kimi Code's workspace folder), else Kimi Code's recorded ``cwd``, else the path
  named in the file (tool arguments) whose md5 is the folder's name, else "". model: not recorded, "".
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
WIRE_NAME = "wire.jsonl"
#: Kimi Code's main agent: the other ``agents/<agent>`` folders are sub-agents.
MAIN_AGENT = "main"
#: Events that end the answer being streamed (Kimi CLI's wire). Compaction runs inside a step, before the
#: model is called: it ends nothing but what came before it.
_BOUNDARIES = frozenset({"TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd", "CompactionBegin", "CompactionEnd"})
#: Events after which text is the model's (True) or the CLI's (False) until the next of them.
_STEP_STATE = {"StepBegin": True, "TurnBegin": False, "StepInterrupted": False, "TurnEnd": False}
#: Kimi Code's loop events and records that end a step's answer.
_CODE_BOUNDARIES = frozenset({"step.begin", "step.end", "step.interrupted"})
_CODE_TURN_RECORDS = frozenset({"turn.prompt", "turn.steer", "turn.cancel", "turn.ended"})
#: The origin of the prompt that starts a sub-agent's turn in its own wire (Kimi Code's
#: ``session/subagent/runAgentTurn.ts``, ``AGENT_RUN_PROMPT_ORIGIN``): the main agent's brief.
_SUBAGENT_ORIGIN = {"kind": "system_trigger", "name": "subagent"}
_IMPORTED = re.compile(r"^\[Imported context from .*\]$", flags=re.DOTALL)
#: Slash commands that send the model a prompt (skills, prompt flows); every other one is the CLI's own.
PROMPT_COMMAND_PREFIXES = ("skill:", "flow:")
_SLASH = re.compile(r"^/([a-zA-Z0-9_-]+(?::[a-zA-Z0-9_-]+)*)(?:\s+(.*))?$", flags=re.DOTALL)
#: The CLI's own text in the person's place: markers in a context log's user messages (``message.system``,
#: ``system_reminder``), and the synthetic prompts of background-task follow-ups and notifications.
_CLI_TEXT_OPENINGS = ("<system>", "<system-reminder>", "<notification ")
_ROTATION = re.compile(r"_\d+$")
#: A sub-agent's context log beside its session's: the Task tool's (``<session>-sub-<n>`` until 2025-09-26,
#: ``<session>_sub_<n>`` until 2025-11-25, then ``context_sub_<n>`` in the session's folder) or ``_read_<n>``.
_SUBAGENT_CONTEXT = re.compile(r"(_read|[-_]sub)[-_]\d+$")
#: Absolute paths in tool arguments: candidates for the work dir whose md5 names the session folder.
_ABSOLUTE_PATH = re.compile(r"(?:[A-Za-z]:\\|/)[^\s\"'`<>|*?]*")
MAX_PATH_CANDIDATES = 200


def work_dir_folder(path: str, kaos: str = LOCAL_KAOS) -> str:
    """The folder name Kimi files a work dir's sessions under (``WorkDirMeta.sessions_dir``)."""
    # md5 is Kimi's own folder naming (metadata.py), not a security measure.
    digest = hashlib.md5(path.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest if kaos == LOCAL_KAOS else f"{kaos}_{digest}"


def load_projects(kimi_dir: Path) -> dict[str, str]:
    """Kimi's own project map: session folder name -> work dir. Bad or missing files give {}.

    From Kimi CLI's ``kimi.json`` (``work_dirs``: the folder is the md5 of the path) and Kimi Code's
    ``workspaces.json`` (``workspaces``: folder -> ``{"root"}``), whichever the home holds.
    """
    projects: dict[str, str] = {}
    metadata = _read_json(kimi_dir / "kimi.json")
    work_dirs = metadata.get("work_dirs") if isinstance(metadata, dict) else None
    for entry in work_dirs if isinstance(work_dirs, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            kaos = entry.get("kaos") if isinstance(entry.get("kaos"), str) else LOCAL_KAOS
            projects[work_dir_folder(entry["path"], str(kaos))] = entry["path"]
    index = _read_json(kimi_dir / "workspaces.json")
    workspaces = index.get("workspaces") if isinstance(index, dict) else None
    for folder, entry in (workspaces if isinstance(workspaces, dict) else {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("root"), str):
            projects[str(folder)] = entry["root"]
    return projects


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_subagent_file(path: str) -> bool:
    """Whether ``path`` is a sub-agent's log rather than a session's."""
    pure = PurePath(path)
    if "subagents" in pure.parts or _SUBAGENT_CONTEXT.search(pure.stem):
        return True
    return _is_kimi_code_layout(pure) and pure.parent.name != MAIN_AGENT


def _is_kimi_code_layout(pure: PurePath) -> bool:
    return pure.name == WIRE_NAME and pure.parent.parent.name == "agents"


def session_of(path: str) -> tuple[str, str]:
    """``(session id, the folder the CLI's project map names it by)`` from the file's place."""
    pure = PurePath(path)
    if _is_kimi_code_layout(pure):
        session = pure.parents[2]
        return session.name, session.parent.name
    if pure.name == WIRE_NAME or _ROTATION.sub("", pure.stem) == "context":
        # the wire, or (read only when forced) the context log beside it: named by the session folder
        return pure.parent.name, pure.parent.parent.name
    return _ROTATION.sub("", pure.stem), pure.parent.name


def parse(
    path: str,
    records: Iterable[RawRecord],
    *,
    mtime: datetime,
    projects: Mapping[str, str] | None = None,
    final: bool = True,
) -> Parsed:
    """The human-visible turns of one Kimi CLI or Kimi Code log, whichever of the three formats it is."""
    result = Parsed()
    if is_subagent_file(path):
        return result
    session_id, folder = session_of(path)
    log = _Log(session_id=session_id, project=(projects or {}).get(folder, ""), mtime=as_utc(mtime))
    for record in records:
        line = load(record, path, result.problems)
        if line is not None:
            log.take(line, record)
    if not final and log.answer is not None and log.answer_start >= 0:
        # The answer is still streaming: read it again whole from its first part next time.
        result.resume_offset, result.resume_line = log.answer_start, log.answer.line
    else:
        log.close()
    if log.subagent:
        return result
    if log.appended and not log.streamed:
        log.drafts.extend(log.appended)
    project = log.project or log.cwd or _root_by_md5(folder, log.paths)
    for draft in log.drafts:
        draft.project = project
    result.turns = finish(log.drafts, source=Source.KIMI, file=path)
    return result


def _root_by_md5(folder: str, paths: Iterable[str]) -> str:
    """The path (or ancestor) named in the file whose md5 names the session folder (the work dir)."""
    digest = folder.rsplit("_", 1)[-1]
    if len(digest) != 32:
        return ""
    seen: set[str] = set()
    for candidate in paths:
        pure = PurePath(candidate)
        for root in (pure, *pure.parents):
            text = str(root)
            if text not in seen:
                seen.add(text)
                if hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == digest:
                    return text
    return ""


def command_request(text: str) -> str | None:
    """For a slash command: the request to keep (``/skill:x args``) or "" (the CLI's own); None otherwise.

    Kimi's agent core takes a prompt starting with ``/name`` followed by a space or its end as a command
    (``parse_slash_command_call``); anything else starting with "/" (a path) is a prompt.
    """
    match = _SLASH.match(text.strip())
    if match is None:
        return None
    name, args = match.group(1), (match.group(2) or "").strip()
    return f"/{name} {args}" if name.startswith(PROMPT_COMMAND_PREFIXES) and args else ""


class _Log:
    def __init__(self, *, session_id: str, project: str, mtime: datetime) -> None:
        self.session_id = session_id
        self.project = project
        self.mtime = mtime
        self.cwd = ""
        self.paths: dict[str, None] = {}
        self.drafts: list[Draft] = []
        self.answer: Draft | None = None
        self.answer_start = -1
        self.answer_key: object = None
        self.fragments: list[str] = []
        # A read may start inside a step (resumed at an answer's first part): text counts until a turn
        # boundary says otherwise.
        self.in_step = True
        # A slash command's turn is open: a turn begun inside it is the command's own (``/init`` runs the
        # agent on the CLI's prompt), and its prompt is not the person's.
        self.command_open = False
        # The log is a sub-agent's (its prompt came from the main agent): none of it is the conversation.
        self.subagent = False
        self.nested = 0
        #: Kimi Code's assistant messages as appended to the context, and whether any step part was read.
        self.appended: list[Draft] = []
        self.streamed = False

    def take(self, line: Mapping[str, Any], record: RawRecord) -> None:
        message = line.get("message")
        if isinstance(message, dict) and isinstance(message.get("type"), str):
            payload = message.get("payload")
            self._take_wire(
                message["type"], payload if isinstance(payload, dict) else {}, line.get("timestamp"), record
            )
        elif isinstance(line.get("type"), str) and "role" not in line:
            self._take_code(str(line["type"]), line, record)
        elif isinstance(line.get("role"), str):
            self._take_context(str(line["role"]), line, record)

    # Kimi CLI's wire --------------------------------------------------------------------------------

    def _take_wire(self, kind: str, payload: Mapping[str, Any], timestamp: object, record: RawRecord) -> None:
        if kind in _BOUNDARIES:
            self.close()
        self.in_step = _STEP_STATE.get(kind, self.in_step)
        if kind == "TurnBegin" and self.command_open:
            self.nested += 1
        elif kind == "TurnBegin":
            text = text_of(payload.get("user_input"))
            self.command_open = command_request(text) is not None
            self._prompt(text, timestamp, record)
        elif kind == "TurnEnd":
            self.nested, self.command_open = max(self.nested - 1, 0), self.command_open and self.nested > 0
        elif kind == "SteerInput":
            self._prompt(text_of(payload.get("user_input")), timestamp, record)
        elif kind in ("ContentPart", "TextPart") and payload.get("type") == "text" and self.in_step:
            self._stream(payload.get("text"), timestamp, record, key=None)
        elif kind in ("ToolCall", "ToolCallPart"):
            self._collect_paths(json.dumps(payload, ensure_ascii=False))

    # Kimi Code's wire -------------------------------------------------------------------------------

    def _take_code(self, kind: str, line: Mapping[str, Any], record: RawRecord) -> None:
        timestamp = line.get("time")
        if kind == "config.update" and isinstance(line.get("cwd"), str):
            self.cwd = line["cwd"]
        if kind in _CODE_TURN_RECORDS:
            self.close()
            self.in_step = False
        if kind in ("turn.prompt", "turn.steer"):
            origin = line.get("origin")
            if isinstance(origin, dict) and all(origin.get(k) == v for k, v in _SUBAGENT_ORIGIN.items()):
                self.subagent = True  # a sub-agent's own wire, wherever the file now is
            if not isinstance(origin, dict) or origin.get("kind", "user") == "user":
                self._prompt(text_of(line.get("input")), timestamp, record)
            return
        message = line.get("message")
        if kind == "context.append_message" and isinstance(message, dict) and message.get("role") == "assistant":
            # The model's message as it entered the context: the same text as its step's parts, kept only
            # for a log that records no parts.
            text = text_of(message.get("content"))
            if text.strip():
                draft = self._draft("assistant", timestamp, record)
                draft.add(text)
                self.appended.append(draft)
            return
        event = line.get("event")
        if kind != "context.append_loop_event" or not isinstance(event, dict):
            return
        event_kind = event.get("type")
        if event_kind in _CODE_BOUNDARIES:
            self.close()
            self.in_step = event_kind == "step.begin"
        elif event_kind == "content.part":
            part = event.get("part")
            if isinstance(part, dict) and part.get("type") == "text":
                key = event.get("stepUuid") or event.get("step")
                if key != self.answer_key:
                    self.close()
                self._stream(part.get("text"), timestamp, record, key=key)
        elif event_kind == "tool.call":
            self._collect_paths(json.dumps(event.get("args"), ensure_ascii=False))

    # The context log of Kimi CLI before the wire --------------------------------------------------

    def _take_context(self, role: str, line: Mapping[str, Any], record: RawRecord) -> None:
        for call in line.get("tool_calls") or []:
            if isinstance(call, dict):
                self._collect_paths(json.dumps(call.get("function"), ensure_ascii=False))
        content = line.get("content")
        if role == "user":
            self._prompt(text_of(content), None, record)
        elif role == "assistant":
            parts = content if isinstance(content, list) else [content]
            text = "\n\n".join(
                piece
                for piece in (
                    part
                    if isinstance(part, str)
                    else part.get("text")
                    if isinstance(part, dict) and part.get("type") == "text"
                    else None
                    for part in parts
                )
                if isinstance(piece, str) and piece.strip()
            )
            self._say("assistant", text, None, record)

    # Shared -----------------------------------------------------------------------------------------

    def close(self) -> None:
        if self.answer is not None:
            self.answer.add("".join(self.fragments))
            self.drafts.append(self.answer)
        self.answer = None
        self.answer_key = None
        self.fragments = []

    def _prompt(self, text: str, timestamp: object, record: RawRecord) -> None:
        if text.lstrip().startswith(_CLI_TEXT_OPENINGS):
            return
        command = command_request(text)
        if command is not None:
            text = command
        if _IMPORTED.match(text.strip()):
            return
        self._say("user", text, timestamp, record)

    def _say(self, role: str, text: object, timestamp: object, record: RawRecord) -> None:
        if not isinstance(text, str) or not text.strip():
            return
        draft = self._draft(role, timestamp, record)
        draft.add(text)
        self.drafts.append(draft)

    def _stream(self, text: object, timestamp: object, record: RawRecord, *, key: object) -> None:
        if not isinstance(text, str):
            return
        if self.answer is None:
            self.answer = self._draft("assistant", timestamp, record)
            self.answer_start = record.start
            self.answer_key = key
        self.fragments.append(text)
        self.streamed = True

    def _collect_paths(self, text: str) -> None:
        for found in _ABSOLUTE_PATH.findall(text):
            if len(self.paths) >= MAX_PATH_CANDIDATES:
                return
            self.paths.setdefault(found.replace("\\\\", "\\"), None)

    def _draft(self, role: str, timestamp: object, record: RawRecord) -> Draft:
        return Draft(
            role=role,
            ts=utc(timestamp, self.mtime),
            line=record.line,
            session_id=self.session_id,
            project=self.project,
            message_id=f"{role}@{timestamp}" if isinstance(timestamp, int | float) else "",
        )
