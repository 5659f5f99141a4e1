"""Session files to spooled turns: checkpoints, first-seen dedup, and the decisions of an ingest run.

Every way capture reads a file goes through :meth:`Capture.file`: ``memstream ingest``, the hooks and
``memstream watch``. It reads a file from its checkpoint, has the file's adapter turn the records into
turns, keeps those never seen before, and (unless it is a dry run) writes them to the spool in the same
transaction that advances the checkpoint. :mod:`memstream.capture.spool` then sends the spool to the
broker. This module imports neither Faust nor Kafka: hooks use it.

The dedup key (the capture spec: SHA-256 of the normalized content, first seen wins) is the content hash within
a session and role: ``sha256(session_id, role, hash)``. The session is part of it because short messages
("yes", "go on", "run the tests") recur across sessions and each session needs its own to make sense of
its exchanges; a resumed session's copied lines, a message written twice, a rewritten file re-read and a
file read again by a hook and by ``ingest`` all keep their session and are published once. The role keeps
an assistant quoting the user's words from swallowing them. A turn whose CLI gives it a message id is also
known by that id, so a copy of part of a reply taken whole before is not published as a new turn.

A reply the CLI may still be writing (the file's trailing assistant turn, written in the last
``LIVE_WINDOW`` seconds) waits for the next read, so that it is published whole (see ``_held_back``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any, Protocol

from memstream.capture.model import CapturedTurn, Parsed, Problem, RawRecord, Source
from memstream.capture.state import CaptureState, Checkpoint
from memstream.identity import turn_hash

#: Bytes of the read prefix hashed into a checkpoint's fingerprint: its head and the end of what was read.
FINGERPRINT_HEAD = 65_536
FINGERPRINT_TAIL = 4_096
#: Longest first line read to give an adapter a file's header on an incremental read.
HEADER_MAX_BYTES = 1 << 20
#: Seconds since its last write during which a file counts as live: its trailing reply may be unfinished.
LIVE_WINDOW = 30.0
#: The checkpoint mtime of a file whose trailing reply was held back: never equal to a real one.
HELD = -1
#: Roles a captured turn may have.
CAPTURED_ROLES = ("user", "assistant")


class ReadResult(Protocol):
    """What a read of a session file gives (``memstream.capture.reader.Read``)."""

    records: list[RawRecord]
    problems: list[Problem]
    offset: int
    line: int


class Formats(Protocol):
    """The reading side of capture: find, recognise, read and parse the CLIs' session files."""

    def discover(self, paths: Sequence[Path], roots: Mapping[Source, list[Path]]) -> list[tuple[Path, Source]]: ...

    def detect(self, path: Path) -> Source | None: ...

    def read(self, path: Path, *, offset: int, line: int, final: bool) -> ReadResult: ...

    def parse(
        self, source: Source, path: Path, records: list[RawRecord], *, mtime: datetime, final: bool
    ) -> Parsed: ...


class CliFormats:
    """The real formats: ``memstream.capture.reader``, ``.detect`` and the ``.adapters`` registry.

    ``homes`` are the CLIs' home folders by source name (``Settings.capture_roots``): a session file
    outside them is read with the project map of its CLI's configured home.
    """

    def __init__(self, homes: Mapping[str, Path] | None = None) -> None:
        self._homes = dict(homes or {})
        self._reader = importlib.import_module("memstream.capture.reader")
        self._detect = importlib.import_module("memstream.capture.detect")
        self._adapters = importlib.import_module("memstream.capture.adapters")

    def discover(self, paths: Sequence[Path], roots: Mapping[Source, list[Path]]) -> list[tuple[Path, Source]]:
        return list(self._detect.discover(paths, roots))

    def detect(self, path: Path) -> Source | None:
        with path.open("rb") as handle:
            head = handle.read(self._detect.HEAD_BYTES)
        source: Source | None = self._detect.detect(path, head)
        return source

    def read(self, path: Path, *, offset: int, line: int, final: bool) -> ReadResult:
        result: ReadResult = self._reader.read_session(path, offset=offset, line=line, final=final)
        return result

    def parse(self, source: Source, path: Path, records: list[RawRecord], *, mtime: datetime, final: bool) -> Parsed:
        home = self._homes.get(source.value)
        parsed: Parsed = self._adapters.parse(source, str(path), records, mtime=mtime, final=final, home=home)
        return parsed


def standard_roots(homes: Mapping[str, Path]) -> dict[Source, list[Path]]:
    """Each CLI's session roots below its home folder (``MEMSTREAM_CLAUDE_DIR`` …), as the detect module knows
    them; a root of another home (Kimi Code's ``~/.kimi-code/sessions`` for Kimi) is below that home where
    ``homes`` names it (``kimi-code``: ``KIMI_CODE_HOME``), else beside the CLI's own."""
    detect = importlib.import_module("memstream.capture.detect")
    placeholder = Path("/HOME")
    roots: dict[Source, list[Path]] = {}
    for source, paths in detect.standard_roots(placeholder).items():
        home = homes[Source(source).value]
        dot = placeholder / f".{Source(source).value}"
        roots[Source(source)] = []
        for path in paths:
            if path.is_relative_to(dot):
                roots[Source(source)].append(home / path.relative_to(dot))
                continue
            top = path.relative_to(placeholder).parts[0]
            other = homes.get(top.removeprefix("."))
            roots[Source(source)].append(
                other / path.relative_to(placeholder / top) if other else home.parent / path.relative_to(placeholder)
            )
    return roots


def dedup_key(session_id: str, role: str, content_hash: str) -> str:
    """The first-seen key of a message (see the module docstring for why session and role are in it)."""
    return hashlib.sha256(f"{session_id}\x1f{role}\x1f{content_hash}".encode()).hexdigest()


def fingerprint(path: Path, length: int) -> str:
    """SHA-256 of the first ``length`` bytes' head and tail: equal means the read prefix was not rewritten."""
    digest = hashlib.sha256(str(length).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(min(length, FINGERPRINT_HEAD)))
        if length > FINGERPRINT_HEAD:
            start = max(FINGERPRINT_HEAD, length - FINGERPRINT_TAIL)
            handle.seek(start)
            digest.update(handle.read(length - start))
    return digest.hexdigest()


def turn_payload(turn: CapturedTurn, content_hash: str, extracted_at: datetime) -> dict[str, Any]:
    """A captured turn as the JSON the spool keeps and ``--json`` prints.

    Its fields are ``memstream.intake.publish.make_turn``'s.
    """
    return {
        "session_id": turn.session_id,
        "project": turn.project,
        "role": turn.role,
        "content": turn.content,
        "ts": turn.ts.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "source": turn.source.value,
        "llm_source": turn.source.value,
        "llm_model": turn.model,
        "hash": content_hash,
        "provenance": {
            "source_type": turn.source.value,
            "session_id": turn.session_id,
            "file": turn.file,
            "line": turn.line,
        },
        "extracted_at": extracted_at.isoformat().replace("+00:00", "Z"),
    }


@dataclass
class FileOutcome:
    """What reading one session file came to."""

    path: Path
    source: Source | None
    #: ``unchanged`` (stat says so: not read), ``read`` (from its checkpoint or the start), ``rewritten``
    #: (re-read from the start), ``not-a-session`` or ``failed`` (could not be read at all).
    status: str
    new: list[dict[str, Any]] = field(default_factory=list)
    seen: int = 0
    skipped: int = 0
    problems: list[Problem] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    #: Turns skipped because no project is known for their session, by session id (also in ``skipped``).
    unplaced: dict[str, int] = field(default_factory=dict)

    @property
    def produced(self) -> int:
        """Turns the file gave, whatever became of them, except those skipped for want of a project."""
        return len(self.new) + self.seen + self.skipped - sum(self.unplaced.values())


class Capture:
    """Reads session files against the durable state; ``dry_run`` reads and decides but writes nothing."""

    def __init__(
        self,
        state: CaptureState,
        formats: Formats,
        *,
        dry_run: bool = False,
        since: datetime | None = None,
        forced: Source | None = None,
        live_window: float = LIVE_WINDOW,
        project: str = "",
    ):
        self.state = state
        #: The project named by the user (``ingest --project``) for turns whose file cannot know theirs.
        self.project = project
        self.live_window = live_window
        self.formats = formats
        self.dry_run = dry_run
        self.since = since
        self.forced = forced
        self._checkpoints: dict[str, Checkpoint] | None = None
        #: Keys decided in this run (a dry run records nothing in the state).
        self._run_keys: set[str] = set()
        #: The project of every session seen in this run, by (source, session): Codex's history.jsonl
        #: names none, its rollouts (read first) do; a dry run has no state to remember them in.
        self._projects: dict[tuple[str, str], str] = {}

    def preload_checkpoints(self) -> None:
        """Load every checkpoint at once: a run over many files then needs one query, not one per file."""
        self._checkpoints = self.state.checkpoints()

    def _checkpoint(self, path: str) -> Checkpoint | None:
        if self._checkpoints is not None:
            return self._checkpoints.get(path)
        return self.state.checkpoint(path)

    def file(
        self, path: Path, source: Source | None = None, *, final: bool = False, host_ended: bool = False
    ) -> FileOutcome:
        """Read one session file from its checkpoint; spool its new turns (unless dry run). Never raises for
        what is in the file; an unreadable file gives a ``failed`` outcome with the reason as a problem.
        ``final``: the file is complete (its last line is read even without a newline, its last new turn
        ends the session); ``host_ended``: its host said the session ended (``SessionEnd``), so an end is
        sent even when nothing is new (see ``_session_end``)."""
        path = Path(os.path.abspath(path))
        key = str(path)
        try:
            stat = path.stat()
        except OSError as exc:
            return FileOutcome(path, source, "failed", problems=[Problem(key, 0, f"cannot read: {exc.strerror}")])
        checkpoint = self._checkpoint(key)
        if (
            checkpoint is not None
            and (checkpoint.inode, checkpoint.size, checkpoint.mtime_ns)
            == (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            and not final
        ):
            return FileOutcome(path, Source(checkpoint.source), "unchanged")
        try:
            source = self.forced or source or (Source(checkpoint.source) if checkpoint else None)
            source = source or self.formats.detect(path)
            if source is None:
                return FileOutcome(path, None, "not-a-session")
            offset, line, status = self._start(path, stat, checkpoint)
            read = self.formats.read(path, offset=offset, line=line, final=final)
            records = list(read.records)
            if offset > 0:
                records = [*self._header(path), *records]
            mtime = datetime.fromtimestamp(stat.st_mtime, UTC)
            # A message the file has not finished (a Kimi step never closed: a crashed or killed session)
            # is taken as it stands once the file is quiet: the rule every CLI's held-back reply follows.
            parsed = self.formats.parse(source, path, records, mtime=mtime, final=final or self._quiet(stat))
        except OSError as exc:
            return FileOutcome(path, source, "failed", problems=[Problem(key, 0, f"cannot read: {exc.strerror}")])
        turns = [t for t in parsed.turns if offset == 0 or t.line >= line]
        # An adapter may hold back a message the file has not finished (a Kimi answer still
        # streaming): the next read starts at that message, not at the end of what was read.
        end, end_line = read.offset, read.line
        if parsed.resume_offset is not None and parsed.resume_line is not None:
            end, end_line = parsed.resume_offset, parsed.resume_line
        held = self._held_back(path, stat, turns, records, final=final)
        if held is not None:
            turns, end, end_line = turns[:-1], held.start, held.line
        outcome = FileOutcome(path, source, status, problems=[*read.problems, *parsed.problems])
        self._decide(turns, outcome)
        ended: dict[str, Any] | None = None
        if final and outcome.new:
            # The host's SessionEnd: a user turn the session ended on is stored at once (agents.snapshot),
            # not after the idle window.
            outcome.new[-1]["ends_session"] = True
        elif final and host_ended and not self.dry_run:
            ended = self._session_end(path, source, mtime)
        # The files each new turn's exchange read, edited or named (issue 39): on its provenance.
        importlib.import_module("memstream.capture.citations").annotate(outcome.new, records)
        if not self.dry_run:
            done = Checkpoint(
                path=key,
                source=source.value,
                inode=stat.st_ino,
                size=stat.st_size,
                # A held-back reply (or a message the adapter left unfinished) must be read again even if
                # the file never changes (a session that ended without SessionEnd, a killed CLI): no stat
                # matches this mtime, so the next read takes it, whole once the file is quiet.
                mtime_ns=HELD if held is not None or parsed.resume_offset is not None else stat.st_mtime_ns,
                offset=end,
                line=end_line,
                fingerprint=fingerprint(path, end),
            )
            # Turns skipped for want of a project are not passed over for good: the checkpoint stays where
            # it was, so the next read (with --project, or once the session's project is known) takes them.
            self._commit(outcome, None if outcome.unplaced else done, ended)
        return outcome

    def _session_end(self, path: Path, source: Source, mtime: datetime) -> dict[str, Any] | None:
        """The end of a session whose last turn was taken before its host said it ended, or None.

        A live session's last ``Stop`` (or the quiet file's release) usually takes every message, and its
        ``SessionEnd`` then finds nothing new: with nothing marked as the end, questions the session ended
        on (a cancelled prompt, an interrupted turn) waited for the idle flush, 15 minutes, where whole-file
        capture stored them at once (issue 37). So the file's last turn is sent again as the end, with the
        place it was first published from: the snapshot stage knows it (``rules.snapshot.ends_applied``) and
        only ends the session. Only a question needs it: a session ending on a reply has nothing waiting."""
        read = self.formats.read(path, offset=0, line=1, final=True)
        parsed = self.formats.parse(source, path, list(read.records), mtime=mtime, final=True)
        last = next(
            (t for t in reversed(parsed.turns) if t.role in CAPTURED_ROLES and t.content.strip() and t.session_id),
            None,
        )
        if last is None or last.role != "user":
            return None
        content_hash = turn_hash(last.content)
        key = dedup_key(last.session_id, last.role, content_hash)
        first = self.state.first_seen(key)
        project = self.state.project_of(last.source.value, last.session_id)
        if first is None or not project:
            return None  # never published (no project known, or taken before by another route): no end to send
        payload = turn_payload(last, content_hash, datetime.now(UTC))
        payload["provenance"].update(file=first[0], line=first[1])
        return {**payload, "project": project, "ends_session": True, "key": f"end:{key}"}

    def _held_back(
        self, path: Path, stat: os.stat_result, turns: list[CapturedTurn], records: list[RawRecord], *, final: bool
    ) -> RawRecord | None:
        """The record to resume at when the file's last turn is a reply the CLI may still be writing.

        A reply is written as several records (Claude Code: one line per content block), and a hook can
        fire before the last of them reaches the disk. Publishing the part read so far would make it a
        turn of its own, and the rest another. So while the file is live (written in the last
        ``live_window`` seconds) and not final, a trailing assistant turn waits: the next read, once
        the next prompt follows it or the file has been quiet, or a ``SessionEnd``, takes it whole.
        """
        if final or self._quiet(stat) or path.suffix == ".json" or not turns:
            return None
        last = turns[-1]
        if last.role != "assistant":
            return None
        first = next((r for r in records if r.line == last.line and r.start >= 0), None)
        return first

    def _quiet(self, stat: os.stat_result) -> bool:
        """Whether the file has not been written for the live window: its CLI is done with what it holds."""
        return self.live_window <= 0 or time.time() - stat.st_mtime > self.live_window

    def _start(self, path: Path, stat: os.stat_result, checkpoint: Checkpoint | None) -> tuple[int, int, str]:
        """Where to read from: the checkpoint if the file only grew since, else the start (a rewrite)."""
        if checkpoint is None:
            return 0, 1, "read"
        appended = (
            path.suffix != ".json"
            and checkpoint.inode == stat.st_ino
            and stat.st_size >= checkpoint.offset
            and fingerprint(path, checkpoint.offset) == checkpoint.fingerprint
        )
        if appended:
            return checkpoint.offset, checkpoint.line, "read"
        return 0, 1, "rewritten"

    def _header(self, path: Path) -> list[RawRecord]:
        """The file's first line, which some formats (Codex, Gemini) put the session's id and project in."""
        with path.open("rb") as handle:
            first = handle.readline(HEADER_MAX_BYTES)
        if not first.endswith(b"\n"):
            return []
        text = first.decode("utf-8", errors="replace").rstrip("\r\n")
        return [RawRecord(line=1, offset=len(first), text=text, start=0)]

    def _decide(self, turns: list[CapturedTurn], outcome: FileOutcome) -> None:
        extracted_at = datetime.now(UTC)
        first_lines: dict[str, int] = {}
        for t in turns:
            # A session's project is fixed when it is first captured, by the whole-file rule on what was
            # read then: a live read from a checkpoint sees only the lines after it, and judging the project
            # again from those (Claude Code's lines follow the agent's `cd`) split a session across
            # projects (issue 37.1). It holds for the folder and what lies beneath it: a turn naming an
            # unrelated folder is another session under the same id (two agents, or two tenants, whose
            # CLIs picked one id), which keeps its own project.
            named = (t.source.value, t.session_id)
            if t.project and named not in self._projects:
                fixed = self.state.project_of(*named)
                self._projects[named] = fixed if fixed and _within(t.project, fixed) else t.project
        for turn in turns:
            if self.since is not None and turn.ts < self.since:
                outcome.skipped += 1
                continue
            if turn.role not in CAPTURED_ROLES or not turn.content.strip() or not turn.session_id:
                outcome.skipped += 1
                outcome.problems.append(Problem(turn.file, turn.line, f"not a {'/'.join(CAPTURED_ROLES)} message"))
                continue
            fixed = self._projects.get((turn.source.value, turn.session_id)) or self.state.project_of(
                turn.source.value, turn.session_id
            )
            if turn.project and not (fixed and _within(turn.project, fixed)):
                fixed = turn.project
            project = fixed or self.project
            if not project:
                outcome.skipped += 1
                outcome.unplaced[turn.session_id] = outcome.unplaced.get(turn.session_id, 0) + 1
                first_lines.setdefault(turn.session_id, turn.line)
                continue
            content_hash = turn_hash(turn.content)
            key = dedup_key(turn.session_id, turn.role, content_hash)
            # The CLI's own message id, where it has one, is a second identity: a copy of part of a reply
            # already taken whole (a resumed session's copied lines) is the same message.
            keys = [key, *([dedup_key(turn.session_id, turn.role, f"id:{turn.message_id}")] if turn.message_id else [])]
            if any(k in self._run_keys or self.state.is_seen(k) for k in keys):
                outcome.seen += 1
                continue
            self._run_keys.update(keys)
            payload = turn_payload(turn, content_hash, extracted_at)
            payload["project"] = project
            payload["key"] = key
            payload["keys"] = keys
            outcome.new.append(payload)
            outcome.sessions.add(turn.session_id)
        # One line per session, with the fix, rather than one per turn.
        for session, count in outcome.unplaced.items():
            outcome.problems.append(
                Problem(
                    str(outcome.path),
                    first_lines[session],
                    f"{count} turn{'s' if count != 1 else ''} of session {session} skipped: no project directory "
                    f"is known for it (the file does not name one); name it with: "
                    f"memstream ingest --project DIR {outcome.path}",
                )
            )

    def _commit(self, outcome: FileOutcome, checkpoint: Checkpoint | None, end: dict[str, Any] | None = None) -> None:
        """New turns into the spool, their keys into ``seen`` and the checkpoint forward: all or nothing.
        ``end``, a session's end naming a turn sent before (see ``_session_end``), is spooled with them."""
        kept: list[dict[str, Any]] = []
        with self.state.transaction():
            if end is not None:
                self.state.spool(end["key"], end["session_id"], end)
            for payload in outcome.new:
                provenance = payload["provenance"]
                # Another process may have taken this message since we looked: first seen wins.
                fresh = [self.state.mark_seen(k, provenance["file"], provenance["line"]) for k in payload["keys"]]
                if not all(fresh):
                    outcome.seen += 1
                    continue
                self.state.remember_project(payload["source"], payload["session_id"], payload["project"])
                self.state.spool(payload["key"], payload["session_id"], payload)
                kept.append(payload)
            if checkpoint is not None:
                self.state.save_checkpoint(checkpoint)
        outcome.new = kept
        if self._checkpoints is not None and checkpoint is not None:
            self._checkpoints[checkpoint.path] = checkpoint


def _within(folder: str, project: str) -> bool:
    """Whether ``folder`` is ``project`` or a folder beneath it (where the agent's ``cd`` may have gone)."""
    return folder == project or PurePath(folder).is_relative_to(project)
