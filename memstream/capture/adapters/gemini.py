"""Gemini CLI chats (``~/.gemini/tmp/<project>/chats/session-*.jsonl`` / ``.json``) and checkpoints to turns.

Read from google-gemini/gemini-cli (5411f113): ``packages/core/src/services/chatRecordingService.ts``
(``appendRecord``, ``pushMessage``, ``updateMetadata``, ``rewindTo``, ``loadConversationRecord``,
``parseLegacyRecordFallback``), ``chatRecordingTypes.ts`` (``MessageRecord``, ``ConversationRecord``,
``RewindRecord``, ``MetadataUpdateRecord``), ``packages/core/src/utils/sessionUtils.ts``
(``isIgnoredUserContent``), ``packages/core/src/core/geminiChat.ts`` (what is recorded as which type),
``packages/core/src/context/chatCompressionService.ts`` and ``utils/environmentContext.ts`` (the synthetic
messages of compression and of the session context), ``packages/core/src/core/logger.ts``
(``checkpoint-<tag>.json``), ``packages/core/src/config/storage.ts``, ``projectRegistry.ts`` and
``utils/paths.ts`` (``getProjectHash`` = sha256 of the project root; newer versions name the folder by a
slug registered in ``~/.gemini/projects.json`` with a ``.project_root`` marker inside it).

The JSONL format: a first metadata line (``sessionId``, ``projectHash``, ``startTime``, ``kind``…), then
one line per message write. ``pushMessage`` appends the whole message again whenever it changes (tokens,
tool calls), so an id comes back; ``{"$set": {...}}`` updates metadata and, with ``messages``, rewrites
the whole list; ``{"$rewindTo": id}`` removes that message and every later one from the CLI's view.
The older format is one JSON document with the same metadata and a ``messages`` list; a ``/chat save``
checkpoint is ``{"history": [Content…]}`` (or a bare list): ``{role: user|model, parts}``, no ids, no times.

Decisions, case by case:

- Each message id gives one turn, at its first line; a later copy of the id (re-append, ``$set``
  messages) replaces the text only if it has some. ``$rewindTo`` retracts nothing: what was said was said.
- ``user`` messages: the text the person saw (``displayContent`` when recorded, the typed prompt before
  ``@file`` expansion or the slash command that submitted a prompt; else ``content``), text parts only
  (``functionResponse`` parts are tool results recorded as user messages). Dropped like Gemini's own
  resume drops them (``convertSessionToClientHistory``: ``isIgnoredUserContent`` of the *content*, the
  prompt sent): empty, slash (``/``) and help (``?``) commands, ``<session_context>`` and
  ``<hook_context>``. So ``/stats`` (its content is the command) is dropped while ``/init`` (its content is
  the prompt it submitted) is kept, as typed. Also dropped: the compression summary (a
  ``<state_snapshot>``), the old session-context opening of checkpoints, and tool output that older
  versions recorded as user text (``[Function Response: read_many_files]…``, how ``partToString`` renders a
  ``functionResponse`` part).
- ``gemini`` messages: their text parts without ``thought`` parts; ``toolCalls`` and ``thoughts`` are
  not text; the compression and context acknowledgements ("Got it. Thanks for the … context!") are
  dropped. ``info``, ``warning`` and ``error`` messages are the CLI's own notices: dropped.
- A sub-agent's chat (``kind: "subagent"``, kept under ``chats/<parent session id>/``) gives no turns.
- Ordered by ``timestamp`` (stable); a checkpoint has none, so its turns take the file's mtime.
- session id: ``sessionId`` (a checkpoint: its file name); project: ``projects[projectHash]``, else
  ``projects[<folder name under tmp>]`` (see :func:`load_projects`), else the ancestor of an absolute path
  named in the file (tool arguments and results, the recorded ``<session_context>``, ``directories``)
  whose sha256 is the ``projectHash``, else ""; model: ``model``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from memstream.capture.adapters._common import Draft, as_utc, finish, load, text_of, utc
from memstream.capture.model import Parsed, RawRecord, Source

#: Openings of user texts Gemini CLI does not treat as conversation (sessionUtils.isIgnoredUserContent),
#: plus the session-context opening of older versions' checkpoints.
IGNORED_USER_OPENINGS = (
    "/",
    "?",
    "<session_context>",
    "<hook_context>",
    "This is the Gemini CLI. We are setting up the context for our chat.",
)
COMPRESSION_SUMMARY_MARK = "<state_snapshot>"
#: How gemini-cli renders tool parts as text (``partToString``): recorded as user text by older versions.
TOOL_OUTPUT_OPENINGS = ("[Function Response:", "[Function Call:")
TRUSTED_FOLDERS = "trustedFolders.json"
#: Absolute paths (POSIX or Windows) in tool arguments and the session context: candidate project roots.
_ABSOLUTE_PATH = re.compile(r"(?:[A-Za-z]:\\|/)[^\s\"'`<>|*?]*")
#: How much of each recorded tool result is searched for paths.
RESULT_SCAN_CHARS = 4_096
#: How many distinct candidate paths one file may contribute to the project-hash search.
MAX_PATH_CANDIDATES = 200
ACKNOWLEDGEMENTS = frozenset({"Got it. Thanks for the additional context!", "Got it. Thanks for the context!"})


def project_hash(project_root: str) -> str:
    """Gemini CLI's ``getProjectHash``: the sha256 of the project root as given."""
    return hashlib.sha256(project_root.encode("utf-8")).hexdigest()


def load_projects(gemini_dir: Path, candidates: Iterable[str] = ()) -> dict[str, str]:
    """Gemini CLI's own project map: folder slug or project hash -> project root.

    From ``projects.json`` (``{"projects": {root: slug}}``), the ``.project_root`` markers in the folders
    under ``tmp``, and, by their sha256 (the older hash folders and every file's ``projectHash``), the
    roots of ``trustedFolders.json`` and ``candidates`` (roots known elsewhere, e.g. other CLIs' cwds).
    Missing or unreadable files give an empty map; nothing here raises on content.
    """
    roots: dict[str, str] = {}
    registry = _read_json(gemini_dir / "projects.json")
    entries = registry.get("projects") if isinstance(registry, dict) else None
    for root, slug in (entries or {}).items():
        if isinstance(root, str) and isinstance(slug, str):
            roots[slug] = root
    tmp = gemini_dir / "tmp"
    if tmp.is_dir():
        for marker in tmp.glob("*/.project_root"):
            try:
                roots[marker.parent.name] = marker.read_text(encoding="utf-8").strip()
            except OSError:
                continue
    trusted = _read_json(gemini_dir / TRUSTED_FOLDERS)  # {root: trust level}: roots the person opened
    for root in [*roots.values(), *(trusted if isinstance(trusted, dict) else {}), *candidates]:
        if isinstance(root, str):
            roots.setdefault(project_hash(root), root)
    return roots


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def parse(
    path: str,
    records: Iterable[RawRecord],
    *,
    mtime: datetime,
    projects: Mapping[str, str] | None = None,
    final: bool = True,
) -> Parsed:
    """The human-visible turns of one Gemini CLI chat or checkpoint file."""
    return _Chat(path, as_utc(mtime), projects or {}).parse(records)


class _Chat:
    def __init__(self, path: str, mtime: datetime, projects: Mapping[str, str]) -> None:
        self.path = path
        self.mtime = mtime
        self.projects = projects
        self.metadata: dict[str, Any] = {}
        self.messages: dict[str, tuple[Mapping[str, Any], int]] = {}  # id -> (latest record, first line)
        self.paths: dict[str, None] = {}  # absolute paths seen in the file, in order

    def parse(self, records: Iterable[RawRecord]) -> Parsed:
        result = Parsed()
        for index, record in enumerate(records):
            value = load(record, self.path, result.problems)
            if value is not None:
                self._take(value, record.line, index)
        if self.metadata.get("kind") == "subagent":
            return result
        session = str(self.metadata.get("sessionId") or PurePath(self.path).stem)
        project = self._project()
        drafts = [self._draft(message, line, session, project) for message, line in self.messages.values()]
        result.turns = finish([draft for draft in drafts if draft is not None], source=Source.GEMINI, file=self.path)
        return result

    def _take(self, value: Mapping[str, Any], line: int, index: int) -> None:
        if "$rewindTo" in value:
            return  # no retraction: every message that was said is kept
        update = value.get("$set")
        if isinstance(update, dict):
            self.metadata.update({key: item for key, item in update.items() if key != "messages"})
            for message in update.get("messages") or []:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self._keep(message["id"], message, line)
        elif isinstance(value.get("id"), str):
            self._keep(value["id"], value, line)
        elif "role" in value and "parts" in value:
            self._keep(f"#{index}", _from_content(value), line)  # a checkpoint's Content: no id
        elif "sessionId" in value or "projectHash" in value or not self.messages:
            self.metadata.update({key: item for key, item in value.items() if key != "messages"})

    def _keep(self, message_id: str, message: Mapping[str, Any], line: int) -> None:
        self._collect_paths(message)
        known = self.messages.get(message_id)
        if known is None:
            self.messages[message_id] = (message, line)
        elif _visible_text(message):
            self.messages[message_id] = (message, known[1])

    def _project(self) -> str:
        folder = PurePath(self.path).parent
        if folder.name == "chats":
            folder = folder.parent
        elif folder.parent.name == "chats":  # a sub-agent's chats/<parent>/ folder
            folder = folder.parent.parent
        wanted = self.metadata.get("projectHash")
        for key in (wanted, folder.name):
            if isinstance(key, str) and key in self.projects:
                return self.projects[key]
        return self._root_by_hash(wanted) if isinstance(wanted, str) else ""

    def _collect_paths(self, message: Mapping[str, Any]) -> None:
        # Tool arguments, tool results ("wrote to new file: /abs/path") and the recorded session context
        # name files inside the project; the root is the ancestor whose sha256 is the file's projectHash
        # (how Gemini CLI itself names it), so a path outside the project can never be taken for it.
        calls = [call for call in message.get("toolCalls") or [] if isinstance(call, dict)]
        texts = [json.dumps(call.get("args")) for call in calls]
        # A result can be a whole file read (hundreds of KB); the path a tool names comes first.
        texts += [json.dumps([call.get("result"), call.get("resultDisplay")])[:RESULT_SCAN_CHARS] for call in calls]
        content = text_of(message.get("content"))
        if content.lstrip().startswith("<session_context>"):
            texts.append(content)
        for text in texts:
            for found in _ABSOLUTE_PATH.findall(text):
                if len(self.paths) >= MAX_PATH_CANDIDATES:
                    return
                self.paths.setdefault(found.replace("\\\\", "\\"), None)

    def _root_by_hash(self, wanted: str) -> str:
        directories = self.metadata.get("directories")
        seen: set[str] = set()
        for candidate in [*(directories if isinstance(directories, list) else []), *self.paths]:
            if not isinstance(candidate, str):
                continue
            pure = PureWindowsPath(candidate) if ":\\" in candidate[:3] else PurePosixPath(candidate)
            for root in (pure, *pure.parents):
                text = str(root)
                if text not in seen:
                    seen.add(text)
                    if project_hash(text) == wanted:
                        return text
        return ""

    def _draft(self, message: Mapping[str, Any], line: int, session: str, project: str) -> Draft | None:
        kind = message.get("type")
        if kind not in ("user", "gemini"):
            return None
        text = _visible_text(message).strip()
        if kind == "user" and _not_conversation(text_of(message.get("content")).strip()):
            return None
        if kind == "gemini" and text in ACKNOWLEDGEMENTS:
            return None
        draft = Draft(
            role="user" if kind == "user" else "assistant",
            ts=utc(message.get("timestamp"), self.mtime),
            line=line,
            session_id=session,
            project=project,
            model=str(message.get("model") or "") if kind == "gemini" else "",
            message_id=str(message.get("id") or ""),
        )
        draft.add(text)
        return draft


def _not_conversation(content: str) -> bool:
    """Whether a user message's content (the prompt sent) is not something the person said."""
    return (
        content.startswith(IGNORED_USER_OPENINGS)
        or content.startswith(TOOL_OUTPUT_OPENINGS)
        or COMPRESSION_SUMMARY_MARK in content
    )


def _visible_text(message: Mapping[str, Any]) -> str:
    if message.get("type") == "user" and message.get("displayContent") is not None:
        return text_of(message["displayContent"])
    return text_of(message.get("content"))


def _from_content(content: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``{role, parts}`` as a message record (``model`` is the assistant)."""
    return {"type": "user" if content.get("role") == "user" else "gemini", "content": content.get("parts")}
