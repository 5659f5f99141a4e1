"""The files a session's exchanges speak of, from its records' tool calls and text (issue 39).

The adapters give the human-visible turns; this module reads the same records for what they leave out:
the tool calls. It knows the four CLIs' call shapes, found in the real session fixtures
(``tests/fixtures/capture/real``):

- Claude Code: ``tool_use`` blocks, ``Read``/``Edit``/``Write``/``MultiEdit``/``NotebookEdit`` with
  ``file_path`` (``Read``'s ``offset``/``limit`` give a line range), ``Bash`` with ``command``.
- Codex: ``response_item`` payloads, ``function_call`` ``exec_command``/``shell`` (``cmd``/``command``,
  ``workdir``) and ``custom_tool_call``/``function_call`` ``apply_patch`` (``*** Update File:`` headers).
- Gemini CLI: ``toolCalls`` with ``name`` and ``args`` (``read_file``, ``write_file``, ``replace`` …:
  ``file_path``/``absolute_path``; ``run_shell_command``'s ``command``).
- Kimi: ``tool.call`` events (``name``, ``args`` with ``path``) and OpenAI-shaped ``tool_calls``
  (``function.name``, ``function.arguments`` as JSON text: ``ReadFile``, ``WriteFile``, ``StrReplaceFile``).

Shell commands and message text name paths too: a word that looks like a file path (a ``/`` or a known
extension) is a candidate, kept only when it names a file that exists in the project at capture time
(:func:`resolve`), so prose that merely looks like a path cites nothing. ``sed -n 'A,Bp' file`` gives
lines A–B. Each cited file becomes a :class:`~memstream.schemas.memory.Citation` with the repository's
HEAD and a fingerprint of the cited region as it is on disk.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import msgspec

from memstream.recall import git
from memstream.schemas.memory import Citation

#: Tools whose arguments name one file they read or write (any CLI; names compared lower-case).
FILE_TOOLS = frozenset(
    {
        "read", "edit", "write", "multiedit", "notebookedit", "notebookread",
        "read_file", "write_file", "replace", "edit_file", "create_file", "view",
        "readfile", "writefile", "strreplacefile", "readmediafile",
    }
)  # fmt: skip
#: Tools that run a shell command (its words may name files).
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run_shell_command", "shellcommand"})
PATCH_TOOLS = frozenset({"apply_patch"})
#: Argument keys that hold a file path.
PATH_KEYS = ("file_path", "absolute_path", "path", "notebook_path", "filename")
#: At most this many citations are kept per message: a session that reads the whole tree cites nothing useful.
MAX_CITATIONS_PER_TURN = 20
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.MULTILINE)
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")
#: A path-looking word in text: something/with/slashes or name.ext (an extension of 1–8 letters).
_TEXT_PATH = re.compile(
    r"(?<![\w@/.-])((?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7})(?::(\d+)(?:-(\d+))?)?"
)


@dataclass(frozen=True, slots=True)
class Cited:
    """A file named in a record: where (the record's line), the path as written, the lines, and how."""

    line: int
    path: str
    start: int = 0
    end: int = 0
    #: ``tool`` (a file tool's argument), ``patch``, ``shell`` or ``text``.
    how: str = "tool"
    #: The folder a relative path is relative to, where the call said (Codex's ``workdir``).
    cwd: str = ""


def cited_in_records(records: Iterable[Any]) -> list[Cited]:
    """Every file the records' tool calls name, in record order (records: ``RawRecord``s)."""
    found: list[Cited] = []
    for record in records:
        try:
            value = json.loads(record.text)
        except (ValueError, RecursionError):
            continue
        for name, args in _tool_calls(value):
            found.extend(_from_call(record.line, name, args))
    return found


def cited_in_text(line: int, text: str) -> list[Cited]:
    """Path-looking words of a message's text (kept only if :func:`resolve` finds them on disk)."""
    seen: set[str] = set()
    out: list[Cited] = []
    for match in _TEXT_PATH.finditer(text):
        path = match.group(1)
        if (
            path in seen
            or path.startswith(("http", "www."))
            or "://" in text[max(0, match.start() - 3) : match.start()]
        ):
            continue
        seen.add(path)
        start = int(match.group(2) or 0)
        out.append(Cited(line, path, start, int(match.group(3) or start), "text"))
    return out


def _tool_calls(value: object) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(tool name, arguments)`` of every tool call anywhere in a decoded record."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
            continue
        if not isinstance(item, dict):
            continue
        call = _as_call(item)
        if call is not None:
            yield call
            continue
        stack.extend(reversed([v for v in item.values() if isinstance(v, dict | list)]))


def _as_call(item: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    function = item.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"], _arguments(function.get("arguments"))
    name = item.get("name")
    if not isinstance(name, str):
        return None
    for key in ("input", "args", "arguments"):
        if key in item:
            raw = item[key]
            if name.lower() in PATCH_TOOLS and isinstance(raw, str) and "*** " in raw:
                return name, {"patch": raw}
            return name, _arguments(raw)
    return None


def _arguments(raw: object) -> Mapping[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return {"patch": raw} if "*** Begin Patch" in raw else {}
        return value if isinstance(value, dict) else {}
    return {}


def _from_call(line: int, name: str, args: Mapping[str, Any]) -> list[Cited]:
    tool = name.lower()
    if tool in PATCH_TOOLS or isinstance(args.get("patch"), str) or isinstance(args.get("input"), str):
        patch = args.get("patch") or args.get("input")
        if isinstance(patch, str) and "*** " in patch:
            cwd = str(args.get("workdir") or "")
            return [
                Cited(line, (m.group(1) or m.group(2)).strip(), how="patch", cwd=cwd)
                for m in _PATCH_HEADER.finditer(patch)
            ]
    if tool in SHELL_TOOLS:
        command = args.get("cmd") or args.get("command")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        return (
            _from_shell(line, command, str(args.get("workdir") or args.get("cwd") or ""))
            if isinstance(command, str)
            else []
        )
    if tool not in FILE_TOOLS:
        return []
    for key in PATH_KEYS:
        path = args.get(key)
        if isinstance(path, str) and path.strip():
            start, end = _read_range(args)
            return [Cited(line, path.strip(), start, end, "tool")]
    return []


def _read_range(args: Mapping[str, Any]) -> tuple[int, int]:
    offset, limit = args.get("offset"), args.get("limit")
    if isinstance(limit, int) and limit > 0:
        first = offset if isinstance(offset, int) and offset > 0 else 1
        return first, first + limit - 1
    start, end = args.get("start_line") or args.get("line_offset"), args.get("end_line")
    if isinstance(start, int) and start > 0:
        return start, end if isinstance(end, int) and end >= start else start
    return 0, 0


def _from_shell(line: int, command: str, cwd: str) -> list[Cited]:
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    out: list[Cited] = []
    pending: tuple[int, int] = (0, 0)
    for word in words:
        sed = _SED_RANGE.match(word)
        if sed:
            first = int(sed.group(1))
            pending = (first, int(sed.group(2) or first))
            continue
        if word.startswith("-") or ("/" not in word and "." not in word.strip(".")):
            continue
        for match in _TEXT_PATH.finditer(word):
            if match.start() == 0 and match.end() == len(word):
                out.append(Cited(line, match.group(1), *pending, how="shell", cwd=cwd))
                pending = (0, 0)
    return out


def resolve(cited: Cited, project: str, repo: git.RepoInfo | None) -> Citation | None:
    """The citation of ``cited`` in ``project``, or None when it names no file there (or it is outside it).

    A path is taken relative to the call's folder, else the project; a file in the repository is cited
    relative to the repository's root with its HEAD; a project with no repository cites absolute paths.
    Text and shell mentions must name a file that exists; a file tool's path is kept even when the file
    is gone by now (an edit's target deleted later in the session), with no fingerprint.
    """
    base = cited.cwd or project
    if not base:
        return None
    absolute = os.path.normpath(os.path.join(base, os.path.expanduser(cited.path)))
    lines = git.file_lines(absolute)
    if lines is None and cited.how in ("text", "shell"):
        return None
    home = repo.root if repo is not None else project
    if not (os.path.isabs(home) and os.path.isabs(absolute)) or not _inside(absolute, home):
        return None  # outside the project: a skill file, a temp file, another repository
    start, end = (cited.start, cited.end) if lines is None or cited.start <= len(lines) else (0, 0)
    fingerprint = git.fingerprint(git.region(lines, start, end)) if lines is not None else ""
    if repo is None:
        return Citation(path=absolute, start=start, end=end, fingerprint=fingerprint)
    return Citation(
        path=str(PurePosixPath(os.path.relpath(absolute, repo.root))),
        repo=repo.root,
        remote=repo.remote,
        commit=repo.head,
        dirty=repo.dirty,
        start=start,
        end=end,
        fingerprint=fingerprint,
    )


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([folder, path]) == folder
    except ValueError:
        return False


def by_turn(turn_lines: Sequence[int], cited: Iterable[Cited]) -> dict[int, list[Cited]]:
    """Each cited file given to the turn it belongs with: the last turn at or before its record (the
    prompt or reply of its exchange), else the first turn. Keyed by the turn's line."""
    ordered = sorted(set(turn_lines))
    out: dict[int, list[Cited]] = {}
    if not ordered:
        return out
    for item in cited:
        owner = ordered[0]
        for line in ordered:
            if line > item.line:
                break
            owner = line
        out.setdefault(owner, []).append(item)
    return out


def citations(cited: Iterable[Cited], project: str, repo: git.RepoInfo | None) -> list[Citation]:
    """The distinct citations ``cited`` resolve to, at most :data:`MAX_CITATIONS_PER_TURN`."""
    out: list[Citation] = []
    keys: set[tuple[str, int, int]] = set()
    for item in cited:
        citation = resolve(item, project, repo)
        if citation is None or (citation.path, citation.start, citation.end) in keys:
            continue
        keys.add((citation.path, citation.start, citation.end))
        out.append(citation)
        if len(out) >= MAX_CITATIONS_PER_TURN:
            break
    return out


def annotate(payloads: Sequence[dict[str, Any]], records: Sequence[Any], *, texts: bool = True) -> None:
    """Give each new turn payload (``ingest.turn_payload``'s shape) the citations of its part of the
    records: its ``provenance`` gets a ``citations`` list. Git is asked once per project folder."""
    if not payloads:
        return
    found = cited_in_records(records)
    if texts:
        found.extend(item for p in payloads for item in cited_in_text(p["provenance"]["line"], p["content"]))
    if not found:
        return
    owners = by_turn([p["provenance"]["line"] for p in payloads], found)
    repos: dict[str, git.RepoInfo | None] = {}
    for payload in payloads:
        mine = owners.pop(payload["provenance"]["line"], [])
        project = payload.get("project") or ""
        if not mine or not project:
            continue
        if project not in repos:
            repos[project] = git.repo_info(project)
        cited = citations(mine, project, repos[project])
        if cited:
            payload["provenance"]["citations"] = [msgspec.to_builtins(c) for c in cited]
