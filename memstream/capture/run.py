"""``memstream ingest``: a backlog of session files into the turns topic, with a progress bar and a summary.

Files are found (the CLIs' standard roots, or the given paths), read from their checkpoints through
:class:`~memstream.capture.ingest.Capture`, and their new turns spooled; the spool is then sent to the
broker. A malformed file never stops the run: its problems are listed with file:line in the summary.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from memstream.capture.ingest import Capture, CliFormats, FileOutcome, Formats, standard_roots
from memstream.capture.model import Problem, Source
from memstream.capture.state import CaptureState
from memstream.settings import Settings

#: The fields of one ``--json`` line: the contract other tools check an adapter with.
JSON_FIELDS = ("session_id", "project", "role", "content", "ts", "source")
#: Problems listed per source in the summary; the rest are counted.
PROBLEMS_SHOWN = 20


@dataclass
class SourceTally:
    """One row of the summary table."""

    files: int = 0
    sessions: set[str] = field(default_factory=set)
    new: int = 0
    seen: int = 0
    skipped: int = 0
    unreadable: int = 0
    problems: list[Problem] = field(default_factory=list)


@dataclass
class Tally:
    """What an ingest run came to, per source; ``per_session`` for the dry run's listing."""

    sources: dict[str, SourceTally] = field(default_factory=dict)
    per_session: dict[tuple[str, str, str], int] = field(default_factory=dict)
    read_ok: int = 0
    published: int = 0

    def add(self, outcome: FileOutcome) -> None:
        row = self.sources.setdefault(outcome.source.value if outcome.source else "unknown", SourceTally())
        row.files += 1
        row.sessions |= outcome.sessions
        row.new += len(outcome.new)
        row.seen += outcome.seen
        row.skipped += outcome.skipped
        row.problems.extend(outcome.problems)
        if outcome.status == "failed":
            row.unreadable += 1
        else:
            self.read_ok += 1
        for payload in outcome.new:
            key = (payload["source"], payload["session_id"], payload["project"])
            self.per_session[key] = self.per_session.get(key, 0) + 1

    @property
    def new(self) -> int:
        return sum(row.new for row in self.sources.values())


def json_line(payload: dict[str, Any]) -> str:
    """One turn as ``--json`` prints it."""
    provenance = payload["provenance"]
    data = {name: payload[name] for name in JSON_FIELDS}
    data["provenance"] = {"file": provenance["file"], "line": provenance["line"]}
    return json.dumps(data, ensure_ascii=False)


def parse_since(text: str) -> datetime:
    """``--since``: an ISO date or time; a date means its midnight UTC, a time without zone is UTC."""
    from datetime import UTC

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r} is not an ISO date or time (e.g. 2026-01-31)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def find_files(
    settings: Settings, formats: Formats, paths: Sequence[Path], forced: Source | None
) -> list[tuple[Path, Source]]:
    """The session files to read: the given paths (any file or folder), else every CLI's standard roots."""
    if paths:
        if forced is not None:
            found: list[tuple[Path, Source]] = []
            for path in paths:
                found.extend(
                    (p, forced) for p in ([path] if path.is_file() else sorted(path.rglob("*.json*"))) if p.is_file()
                )
            return found
        return formats.discover(list(paths), {})
    roots = standard_roots(settings.capture_roots)
    if forced is not None:
        roots = {forced: roots[forced]}
    return formats.discover([], roots)


def ingest(
    settings: Settings,
    paths: Sequence[Path] = (),
    *,
    llm: Source | None = None,
    since: datetime | None = None,
    dry_run: bool = False,
    as_json: bool = False,
    formats: Formats | None = None,
    bootstrap: str | None = None,
    user: str = "",
    project: str = "",
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """Run one ingest; returns the exit status: 1 if nothing could be read, or if a path given on the
    command line gave no turn at all (``project`` names the project of files that cannot know theirs)."""
    out = out or sys.stdout
    err = err or sys.stderr
    formats = formats or CliFormats(homes=settings.capture_roots)
    files = find_files(settings, formats, paths, llm)
    if not files:
        where = ", ".join(str(p) for p in paths) if paths else "the standard locations"
        print(f"memstream: no session files found in {where}", file=err)
        return 1
    state = CaptureState.open(settings.capture_db, readonly=True) if dry_run else CaptureState.open(settings.capture_db)
    tally = Tally()
    began = time.monotonic()
    with state:
        capture = Capture(state, formats, dry_run=dry_run, since=since, forced=llm, project=project)
        capture.preload_checkpoints()
        given = {Path(os.path.abspath(p)): _Given() for p in paths}
        with _progress(err, len(files), enabled=not as_json) as advance:
            for path, source in files:
                if since is not None and _older_than(path, since):
                    _account(given, Path(os.path.abspath(path)), gave=True, unplaced=False)
                    continue
                outcome = capture.file(path, source)
                tally.add(outcome)
                gave = outcome.status == "unchanged" or outcome.produced > 0
                _account(given, outcome.path, gave=gave, unplaced=bool(outcome.unplaced))
                if as_json:
                    for payload in outcome.new:
                        print(json_line(payload), file=out)
                advance(1, len(outcome.new))
    read_seconds = time.monotonic() - began
    if not dry_run:
        tally.published = _publish(settings, bootstrap, user, err)
    if not as_json:
        if dry_run:
            _print_dry_run(tally, out)
        _print_summary(tally, read_seconds, dry_run=dry_run, out=out)
    silent = [(path, given_path) for path, given_path in given.items() if not given_path.gave]
    for path, given_path in silent:
        print(f"memstream: {path} gave no turn: {given_path.why()}", file=err)
    return 0 if tally.read_ok and not silent else 1


@dataclass
class _Given:
    """What became of one path given on the command line."""

    files: int = 0
    gave: bool = False
    unplaced: bool = False

    def why(self) -> str:
        if not self.files:
            return "no session file of a known CLI in it"
        if self.unplaced:
            return "its project cannot be known from the file; name it with --project DIR"
        return "no conversation in it (see the problems above)"


def _account(given: dict[Path, _Given], path: Path, *, gave: bool, unplaced: bool) -> None:
    for root, state in given.items():
        if path == root or root in path.parents:
            state.files += 1
            state.gave = state.gave or gave
            state.unplaced = state.unplaced or unplaced


def _older_than(path: Path, since: datetime) -> bool:
    try:
        return path.stat().st_mtime < since.timestamp()
    except OSError:
        return False


def _publish(settings: Settings, bootstrap: str | None, user: str, err: IO[str]) -> int:
    import dataclasses

    from memstream.capture.spool import flush, pending
    from memstream.runtime import publish_target

    waiting = pending(settings)
    if not waiting:
        return 0
    target = (bootstrap, settings.topic_prefix) if bootstrap else publish_target(settings)
    if target is None:
        print(
            f"memstream: memstream is not running: {waiting} turns are spooled in {settings.capture_db} and will be "
            "sent by `memstream up` or the next ingest",
            file=err,
        )
        return 0
    bootstrap, prefix = target
    try:
        return asyncio.run(flush(dataclasses.replace(settings, topic_prefix=prefix), bootstrap, user=user))
    except Exception as exc:  # the broker went away: the spool keeps what was not sent
        print(f"memstream: could not publish ({exc}); {pending(settings)} turns stay spooled", file=err)
        return 0


class _progress:
    """A rich progress bar (files, turns/s, ETA) on a terminal; nothing otherwise."""

    def __init__(self, err: IO[str], total: int, *, enabled: bool):
        self.err, self.total, self.enabled = err, total, enabled and err.isatty()
        self.turns = 0
        self.began = time.monotonic()

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda files, turns: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("reading sessions"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files  {task.fields[rate]} turns/s"),
            TimeRemainingColumn(),
            console=Console(file=self.err),
            transient=True,
        )
        self.bar.__enter__()
        task = self.bar.add_task("read", total=self.total, rate="0")

        def advance(files: int, turns: int) -> None:
            self.turns += turns
            rate = self.turns / max(time.monotonic() - self.began, 1e-6)
            self.bar.update(task, advance=files, rate=f"{rate:,.0f}")

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(None, None, None)


def _print_dry_run(tally: Tally, out: IO[str]) -> None:
    if not tally.per_session:
        print("nothing new to publish", file=out)
        return
    print("would publish:", file=out)
    for (source, session, project), count in sorted(tally.per_session.items()):
        print(f"  {source:<7} session {session}  {count} turn{'s' if count != 1 else ''}  ({project})", file=out)


def _print_summary(tally: Tally, seconds: float, *, dry_run: bool, out: IO[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dry run: nothing published" if dry_run else None)
    for column in ("source", "files", "sessions", "new", "already seen", "skipped", "problems"):
        table.add_column(column, justify="left" if column == "source" else "right")
    for source, row in sorted(tally.sources.items()):
        table.add_row(
            source,
            str(row.files),
            str(len(row.sessions)),
            str(row.new),
            str(row.seen),
            str(row.skipped),
            str(len(row.problems)),
        )
    console = Console(file=out, width=160, soft_wrap=True)
    console.print(table)
    for source, row in sorted(tally.sources.items()):
        for problem in row.problems[:PROBLEMS_SHOWN]:
            console.print(f"  {source}: {problem.file}:{problem.line}: {problem.reason}", markup=False, highlight=False)
        if len(row.problems) > PROBLEMS_SHOWN:
            console.print(f"  {source}: … and {len(row.problems) - PROBLEMS_SHOWN} more problems", markup=False)
    files = sum(row.files for row in tally.sources.values())
    rate = files / seconds if seconds > 0 else 0.0
    done = f"would publish {tally.new}" if dry_run else f"{tally.new} new, {tally.published} published"
    console.print(
        f"{files} files read in {seconds:.2f}s ({rate:,.0f} files/s); turns: {done}", markup=False, highlight=False
    )
