"""Is the code a memory speaks of still as it was? Each citation checked against the work tree (issue 39).

A citation (:class:`~memstream.schemas.memory.Citation`) names a file, the commit checked out when it was
captured, the cited lines and a fingerprint of their text then. Against the work tree it is:

- ``current``: the cited region's text is in the file at its path (at the same lines, or shifted by
  edits elsewhere in the file: the new first line is said);
- ``changed``: the file is at its path but the cited text is not; how much is said as the lines added
  and removed in the file since the cited commit (``git diff --numstat``);
- ``moved``: the path is gone and git follows a rename since the cited commit
  (``git diff --name-status -M <commit> HEAD``): the new path is said;
- ``gone``: the path is gone and git follows no rename: deleted, by the commit git names
  (``git log --diff-filter=D``), or not yet committed;
- ``unknown``: the work tree is not at hand (the repository is not on this machine).

Only where the work tree is at hand: the hook, ``memstream mcp`` over stdio, the CLI and the console
of the embedded default call this; a remote server never reads its clients' disks. Answers are cached
per repository HEAD (git's answers) and per file version on disk (the file's text), so a warm check
costs a ``stat`` and a dictionary look-up per citation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Final, Literal

import msgspec

from memstream.recall import git
from memstream.schemas.memory import Citation, HybridHit, Memory
from memstream.settings import Settings

Status = Literal["current", "changed", "moved", "gone", "unknown"]
STATUSES: Final[tuple[str, ...]] = Status.__args__  # type: ignore[attr-defined]
#: The statuses that make a memory stale: shown as such, listed by ``memstream doctor --stale``.
STALE: Final = frozenset({"changed", "moved", "gone"})
#: How much a search hit's score is multiplied by when the code it speaks of is gone (it also ranks last).
GONE_SCORE_FACTOR: Final = 0.5
#: Said after a block entry whose cited code changed or moved since the memory was captured.
CODE_CHANGED: Final = " (code changed since)"
#: How many citation answers a checker keeps before it starts again (a long-lived MCP process).
RESULTS_KEPT: Final = 20_000


@dataclass(frozen=True, slots=True)
class Checked:
    """One citation's status, with what the status can say: the new path or first line, the deleting
    commit, the lines added and removed in the file since the cited commit."""

    citation: Citation
    status: Status
    path: str = ""  # moved: the new path; current: the path
    start: int = 0  # current: where the cited region starts now (0: the whole file, or unknown)
    commit: str = ""  # gone: the commit that deleted the file ("" if git does not know, or not committed)
    added: int = 0
    removed: int = 0

    @property
    def note(self) -> str:
        """A few words for a person: ``changed (+3 −1 lines)``, ``moved to a/b.py``, ``gone (deleted in 1a2b3c4)``."""
        if self.status == "changed":
            return f"changed (+{self.added} −{self.removed} lines)" if self.added or self.removed else "changed"
        if self.status == "moved":
            return f"moved to {self.path}"
        if self.status == "gone":
            return f"gone (deleted in {self.commit[:7]})" if self.commit else "gone (deleted)"
        return self.status


@dataclass(slots=True)
class Checker:
    """Checks citations, keeping git's answers per (repository, HEAD) and file texts per version on disk."""

    _renames: dict[tuple[str, str, str], dict[str, str] | None] = field(default_factory=dict)
    _deleted: dict[tuple[str, str, str], str] = field(default_factory=dict)
    _numstat: dict[tuple[str, str, str, int, int], tuple[int, int]] = field(default_factory=dict)
    _heads: dict[str, str] = field(default_factory=dict)
    _results: dict[tuple[Citation, str, int, int], Checked] = field(default_factory=dict)
    _starts: dict[tuple[Citation, int], int | None] = field(default_factory=dict)

    def check(self, citation: Citation) -> Checked:
        """The citation's status against the work tree now."""
        return self.check_all([citation])[0]

    def check_all(self, citations: Iterable[Citation]) -> list[Checked]:
        """Every citation's status. HEAD is read once per repository for the whole call, and what git must
        answer for the citations not checked before is asked in one go (:meth:`_ask_git`)."""
        self._heads.clear()
        self._starts.clear()
        try:
            cited = list(citations)
            keys = [self._key(citation) for citation in cited]
            todo = {key: citation for key, citation in zip(keys, cited, strict=True) if key not in self._results}
            if len(self._results) + len(todo) >= RESULTS_KEPT:
                self._results.clear()
            self._ask_git(todo.values())
            for key, citation in todo.items():
                self._results[key] = self._check(citation)
            return [self._results[key] for key in keys]
        finally:
            self._heads.clear()
            self._starts.clear()

    def _head(self, repo: str) -> str:
        head = self._heads.get(repo)
        if head is None:
            head = self._heads[repo] = git.read_head(repo)
        return head

    def _key(self, citation: Citation) -> tuple[Citation, str, int, int]:
        # Cached per HEAD and version of the file on disk: a warm check is a stat and a look-up.
        head = self._head(citation.repo) if citation.repo else ""
        try:
            stat = os.stat(os.path.join(citation.repo, citation.path) if citation.repo else citation.path)
        except OSError:
            return (citation, head, -1, -1)
        return (citation, head, stat.st_mtime_ns, stat.st_size)

    def _check(self, citation: Citation) -> Checked:
        if citation.repo:
            if not os.path.isdir(citation.repo):
                return Checked(citation, "unknown")
            head = self._head(citation.repo)
            absolute = os.path.join(citation.repo, citation.path)
        else:
            head, absolute = "", citation.path
        lines = git.file_lines(absolute)
        if lines is not None:
            return self._present(citation, head, absolute, lines)
        if citation.repo and citation.commit:
            renamed = self._renamed(citation.repo, citation.commit, head).get(citation.path)
            if renamed and os.path.isfile(os.path.join(citation.repo, renamed)):
                return Checked(citation, "moved", path=renamed)
            return Checked(citation, "gone", commit=self._deleting(citation.repo, citation.path, citation.commit, head))
        return Checked(citation, "gone")

    def _start(self, citation: Citation, lines: tuple[str, ...]) -> int | None:
        # Where the cited text is now, found once per call (asking git first looks for it too).
        key = (citation, len(lines))
        if key not in self._starts:
            self._starts[key] = _find(lines, citation)
        return self._starts[key]

    def _present(self, citation: Citation, head: str, absolute: str, lines: tuple[str, ...]) -> Checked:
        if citation.fingerprint:
            start = self._start(citation, lines)
            if start is not None:
                return Checked(citation, "current", path=citation.path, start=start)
        elif not citation.repo or not citation.commit:
            return Checked(citation, "unknown")
        added, removed = self._changes(citation, head, absolute)
        if not citation.fingerprint and not added and not removed:
            return Checked(citation, "current", path=citation.path)
        return Checked(citation, "changed", path=citation.path, added=added, removed=removed)

    def _ask_git(self, citations: Iterable[Citation]) -> None:
        """Ask git, per repository, what the citations will need in as few processes as it takes: one
        ``git diff --numstat`` per cited commit for the files whose cited text changed, one ``git diff-tree
        --stdin`` for the renames since every cited commit, one ``git log`` for the commits that deleted the
        files neither there nor moved. After a new HEAD a search pays a few processes, not one per file.
        What is not asked here (or that git did not answer in one go) is asked file by file when checked."""
        by_repo: dict[str, list[Citation]] = {}
        for citation in citations:
            if citation.repo and citation.commit and os.path.isdir(citation.repo):
                by_repo.setdefault(citation.repo, []).append(citation)
        for repo, cited in by_repo.items():
            head = self._head(repo)
            changed: dict[str, list[str]] = {}
            missing: list[Citation] = []
            for citation in cited:
                lines = git.file_lines(os.path.join(repo, citation.path))
                if lines is None:
                    missing.append(citation)
                elif not citation.fingerprint or self._start(citation, lines) is None:
                    changed.setdefault(citation.commit, []).append(citation.path)
            for commit, paths in changed.items():
                self._ask_numstat(repo, commit, paths)
            self._ask_renames(repo, head, {citation.commit for citation in missing})
            gone = [
                citation.path
                for citation in missing
                if not os.path.isfile(
                    os.path.join(repo, self._renamed(repo, citation.commit, head).get(citation.path, citation.path))
                )
            ]
            self._ask_deleted(repo, head, gone)

    def _ask_numstat(self, repo: str, commit: str, paths: list[str]) -> None:
        versions = {}
        for path in dict.fromkeys(paths):
            try:
                stat = os.stat(os.path.join(repo, path))
            except OSError:
                continue
            key = (repo, commit, path, stat.st_mtime_ns, stat.st_size)
            if key not in self._numstat:
                versions[path] = key
        if len(versions) < 2:
            return  # one file: asked as it is checked
        out = git.git(repo, "diff", "--numstat", "--no-renames", "-z", commit, "--", *versions)
        if out is None:
            return
        found = {path: (0, 0) for path in versions}
        for record in out.split("\0"):
            parts = record.split("\t")
            if len(parts) == 3 and parts[2] in found:
                found[parts[2]] = _numstat(record)
        for path, key in versions.items():
            self._numstat[key] = found[path]

    def _ask_renames(self, repo: str, head: str, commits: set[str]) -> None:
        # One diff-tree reads "HEAD commit" pairs: each block starts with HEAD's id (--always: even when empty).
        asked = sorted(c for c in commits if (repo, c, head) not in self._renames and _HEX.fullmatch(c))
        if len(asked) < 2 or not _HEX.fullmatch(head):
            return
        pairs = "".join(f"{head} {commit}\n" for commit in asked)
        out = git.git(
            repo, "diff-tree", "--stdin", "--always", "-r", "-M", "--name-status", "--diff-filter=R", stdin=pairs
        )
        if out is None:  # one commit git does not know fails them all: each is asked on its own
            return
        blocks: list[list[str]] = []
        for line in out.splitlines():
            if line == head:
                blocks.append([])
            elif blocks:
                blocks[-1].append(line)
        if len(blocks) != len(asked):
            return
        for commit, block in zip(asked, blocks, strict=True):
            self._renames[(repo, commit, head)] = _renames("\n".join(block))

    def _ask_deleted(self, repo: str, head: str, paths: list[str]) -> None:
        # The newest commit deleting each path: the first that names it in one walk of the history.
        asked = [path for path in dict.fromkeys(paths) if (repo, path, head) not in self._deleted]
        if len(asked) < 2:
            return
        out = git.git(
            repo,
            "log",
            "--no-renames",
            "--diff-filter=D",
            "--name-only",
            "-z",
            "--format=%x01%H",
            head or "HEAD",
            "--",
            *asked,
        )
        if out is None:
            return
        found: dict[str, str] = {}
        commit = ""
        for item in out.split("\0"):  # "\x01<commit>", then "\n<path>", then "<path>"…
            name = item.removeprefix("\n")
            if name.startswith("\x01"):
                commit = name[1:]
            elif name and commit:
                found.setdefault(name, commit)
        for path in asked:
            self._deleted[(repo, path, head)] = found.get(path, "")

    def _changes(self, citation: Citation, head: str, absolute: str) -> tuple[int, int]:
        if not citation.repo or not citation.commit:
            return 0, 0
        try:
            stat = os.stat(absolute)
        except OSError:
            return 0, 0
        key = (citation.repo, citation.commit, citation.path, stat.st_mtime_ns, stat.st_size)
        if key not in self._numstat:
            out = git.git(citation.repo, "diff", "--numstat", "--no-renames", citation.commit, "--", citation.path)
            self._numstat[key] = _numstat(out)
        del head
        return self._numstat[key]

    def _renamed(self, repo: str, commit: str, head: str) -> dict[str, str]:
        key = (repo, commit, head)
        if key not in self._renames:
            out = git.git(repo, "diff", "--name-status", "-M", "--diff-filter=R", commit, head or "HEAD")
            self._renames[key] = _renames(out) if out is not None else None
        return self._renames[key] or {}

    def _deleting(self, repo: str, path: str, commit: str, head: str) -> str:
        key = (repo, path, head)
        if key not in self._deleted:
            out = git.git(repo, "log", "-1", "--format=%H", "--diff-filter=D", head or "HEAD", "--", path)
            self._deleted[key] = (out or "").strip()
        del commit
        return self._deleted[key]


#: A full commit id (SHA-1 or SHA-256): what ``git diff-tree --stdin`` reads without guessing.
_HEX: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _find(lines: tuple[str, ...], citation: Citation) -> int | None:
    """Where the cited region's text is in ``lines`` now (its first line; 0 for a whole file), or None."""
    if citation.start <= 0:
        return 0 if git.fingerprint(list(lines)) == citation.fingerprint else None
    size = max(1, citation.end - citation.start + 1)
    if git.fingerprint(git.region(lines, citation.start, citation.end)) == citation.fingerprint:
        return citation.start
    # Edits above the region shift it: look for its text at every other first line, nearest first.
    for first in sorted(range(1, max(1, len(lines) - size + 2)), key=lambda n: abs(n - citation.start)):
        if git.fingerprint(list(lines[first - 1 : first - 1 + size])) == citation.fingerprint:
            return first
    return None


def _numstat(out: str | None) -> tuple[int, int]:
    added = removed = 0
    for line in (out or "").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            added, removed = added + int(parts[0]), removed + int(parts[1])
    return added, removed


def _renames(out: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].startswith("R"):
            found[parts[1]] = parts[2]
    return found


def citations_of(memory: Memory) -> list[Citation]:
    """The distinct citations of a memory: those of every source its text came from, first seen first."""
    out: list[Citation] = []
    keys: set[tuple[str, str, int, int]] = set()
    for source in memory.sources:
        for citation in source.citations:
            key = (citation.repo, citation.path, citation.start, citation.end)
            if key not in keys:
                keys.add(key)
                out.append(citation)
    return out


def memory_status(checked: Sequence[Checked]) -> str:
    """One status for a memory from its citations' ("" when none could be checked): ``gone`` when every
    checked file is gone, ``changed`` when any changed or some are gone, else ``moved`` or ``current``."""
    known = [c.status for c in checked if c.status != "unknown"]
    if not known:
        return ""
    if all(status == "gone" for status in known):
        return "gone"
    if "changed" in known or "gone" in known:
        return "changed"
    return "moved" if "moved" in known else "current"


def gone_since(checked: Sequence[Checked]) -> list[datetime | None] | None:
    """When each cited file went, for a memory whose every citation is ``gone`` (None otherwise: one
    file still there, moved, or not checkable here): the committer date of the commit that deleted it,
    None for a file git names no deleting commit for (deleted in the work tree only). What the aging
    stage weighs with :func:`memstream.rules.aging.gone_long_enough`."""
    if not checked or any(c.status != "gone" for c in checked):
        return None
    return [git.commit_time(c.citation.repo, c.commit) if c.commit and c.citation.repo else None for c in checked]


@lru_cache(maxsize=1)
def shared_checker() -> Checker:
    """This process's checker: its caches serve every recall the process answers."""
    return Checker()


def checker_for(settings: Settings) -> Checker | None:
    """The process's checker when ``MEMSTREAM_CHECK_CITATIONS`` allows reading work trees here, else None."""
    return shared_checker() if settings.check_citations else None


def statuses(memories: Iterable[Memory], checker: Checker | None) -> dict[str, str]:
    """Each cited memory's status by id (:func:`memory_status`); memories with no checkable citation are left out."""
    if checker is None:
        return {}
    cited = {memory.id: citations_of(memory) for memory in memories}
    out: dict[str, str] = {}
    for memory_id, checked in zip(cited, check_groups(checker, list(cited.values())), strict=True):
        status = memory_status(checked)
        if status:
            out[memory_id] = status
    return out


def check_groups(checker: Checker, groups: Sequence[Sequence[Citation]]) -> list[list[Checked]]:
    """Each group's citations checked (a memory's, say), in one :meth:`Checker.check_all`: git is asked
    once for them all."""
    flat = checker.check_all(citation for group in groups for citation in group)
    out, at = [], 0
    for group in groups:
        out.append(flat[at : at + len(group)])
        at += len(group)
    return out


def marked(hits: Sequence[HybridHit], checker: Checker | None) -> list[HybridHit]:
    """Search hits with their code status (``HybridHit.code``, "" for current); those whose code is gone
    are scored :data:`GONE_SCORE_FACTOR` times lower and ranked after every other hit (whose order,
    the reranker's included, is kept)."""
    found = statuses((hit.memory for hit in hits), checker)
    if not found:
        return list(hits)
    out = []
    for hit in hits:
        status = found.get(hit.memory.id, "")
        code = "" if status == "current" else status
        score = hit.score * GONE_SCORE_FACTOR if code == "gone" else hit.score
        out.append(msgspec.structs.replace(hit, code=code, score=score))
    out.sort(key=lambda hit: hit.code == "gone")  # stable
    return out


def _citations(records: Iterable[Any]) -> list[Citation]:
    """The citations of records sent by a server (``get`` records, a block's cited entries)."""
    out: list[Citation] = []
    for record in records:
        raw = (record.get("citations") or []) if isinstance(record, Mapping) else []
        out.extend(msgspec.convert(item, Citation) for item in raw if isinstance(item, dict))
    return out


def check_record(record: Mapping[str, Any], checker: Checker) -> tuple[str, list[Checked]]:
    """A memory's status and its citations' from its ``get`` record (``answers.full_record``): how a
    client where the work tree is at hand (the CLI, ``memstream mcp`` over stdio) checks what a server sent."""
    checked = checker.check_all(_citations([record]))
    return memory_status(checked), checked


def describe(checked: Checked) -> str:
    """One line for a person: the cited file and lines, the commit, and what became of it."""
    c = checked.citation
    where = f"{c.path}:{c.start}-{c.end}" if c.start else c.path
    at = f" @ {c.commit[:7]}{'+dirty' if c.dirty else ''}" if c.commit else ""
    return f"{where}{at}: {checked.note}"


def cited_entries(memories: Sequence[Memory]) -> list[dict[str, Any]]:
    """A block's shown memories (``Block.memories``, in the order of its entry lines) or a search's hits'
    memories, those that cite code: the entry's index among the block's ``- `` lines (the hit's row) and
    its citations, for a client to check them (``GET /block?cited=1``, ``GET /search?cited=1``)."""
    out = []
    for index, memory in enumerate(memories):
        cited = citations_of(memory)
        if cited:
            out.append({"entry": index, "id": memory.id, "citations": [msgspec.to_builtins(c) for c in cited]})
    return out


def recheck_block(answer: Mapping[str, Any], checker: Checker) -> str:
    """The block text of a ``GET /block?cited=1`` answer, its cited entries checked here, where the work
    tree is (a remote server cannot read it): a ``gone`` entry is left out (and a section it leaves empty),
    a ``changed`` or ``moved`` one ends with :data:`CODE_CHANGED`. Unchanged when the server checked."""
    text = str(answer.get("text") or "")
    cited = {int(e["entry"]): e for e in answer.get("cited") or [] if isinstance(e, dict) and "entry" in e}
    if answer.get("checked") or not cited:
        return text
    checker.check_all(_citations(cited.values()))  # git asked once for every entry
    lines: list[str] = []
    entry = -1
    for line in text.split("\n"):
        if line.startswith("- "):
            entry += 1
            if entry in cited:
                status, _ = check_record(cited[entry], checker)
                if status == "gone":
                    continue
                if status in ("changed", "moved") and not line.endswith(CODE_CHANGED):
                    line += CODE_CHANGED
        lines.append(line)
    # A section whose every entry was left out goes too.
    kept = [
        line
        for i, line in enumerate(lines)
        if not (line.startswith("## ") and (i + 1 >= len(lines) or not lines[i + 1].startswith("- ")))
    ]
    return "\n".join(kept)


def recheck_index(answer: Mapping[str, Any], checker: Checker) -> dict[str, Any]:
    """A search index (``GET /search?cited=1``, compact rows) checked here where the server could not: each
    cited hit's row gets its ``code`` (``changed``, ``moved``, ``gone``; "" when current), and a ``gone`` one
    is scored :data:`GONE_SCORE_FACTOR` times lower and ranked last, as :func:`marked` does on a server that
    checks. ``cited`` and ``checked`` (what the client checked with) are left out of what it returns."""
    out = {key: value for key, value in answer.items() if key not in ("cited", "checked")}
    cited = {int(e["entry"]): e for e in answer.get("cited") or [] if isinstance(e, dict) and "entry" in e}
    fields = list(answer.get("fields") or [])
    if answer.get("checked") or not cited or "code" not in fields:
        return out
    code, score = fields.index("code"), fields.index("score") if "score" in fields else -1
    checker.check_all(_citations(cited.values()))  # git asked once for every row
    rows: list[Any] = []
    gone: list[Any] = []
    for index, row in enumerate(answer.get("hits") or []):
        if index in cited and isinstance(row, list) and len(row) == len(fields):
            status, _ = check_record(cited[index], checker)
            row = list(row)
            row[code] = "" if status in ("current", "") else status
            if status == "gone" and score >= 0 and isinstance(row[score], (int, float)):
                row[score] = round(row[score] * GONE_SCORE_FACTOR, 3)
        (gone if isinstance(row, list) and row[code] == "gone" else rows).append(row)
    out["hits"] = rows + gone
    return out


def recheck_records(records: Sequence[Any], checker: Checker) -> list[Any]:
    """Full records (``get``, a full search's ``results``) with their ``code`` checked here: a client's answer
    about the work tree it runs in, where a remote server could not say (``current`` says nothing)."""
    checker.check_all(_citations(records))  # git asked once for every record
    out = []
    for record in records:
        if isinstance(record, dict) and record.get("citations"):
            status, _ = check_record(record, checker)
            if status:
                record = {k: v for k, v in record.items() if k != "code"}
                if status != "current":
                    record["code"] = status
        out.append(record)
    return out


#: The order a stale listing shows memories in: the staler first, then those that cannot be checked here.
LISTING_ORDER: Final = {"gone": 0, "changed": 1, "moved": 2, "unknown": 3}


@dataclass(frozen=True, slots=True)
class Stale:
    """A memory whose cited code changed, moved or is gone, or cannot be checked here (``unknown``)."""

    memory: Memory
    status: str
    checked: list[Checked]


def stale_memories(memories: Iterable[Memory], checker: Checker | None) -> list[Stale]:
    """The memories (of a project) whose code is stale, the staler first, then the ``unknown`` ones: every
    cited memory when ``checker`` is None (the work trees are not read on this host). Blocking: git runs."""
    cited = [(memory, citations_of(memory)) for memory in memories]
    cited = [(memory, found) for memory, found in cited if found]
    if checker is not None:
        groups = check_groups(checker, [found for _, found in cited])
    else:
        groups = [[Checked(c, "unknown") for c in found] for _, found in cited]
    out = []
    for (memory, _), checked in zip(cited, groups, strict=True):
        status = memory_status(checked) or "unknown"
        if status in LISTING_ORDER:
            out.append(Stale(memory, status, checked))
    out.sort(key=lambda one: LISTING_ORDER[one.status])  # stable: newest first within a status
    return out
