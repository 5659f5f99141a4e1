"""The durable turn log: on the embedded default, the copy of every accepted turn that survives a crash.

The embedded broker (Tansu) keeps its topics in memory only, so a turn acknowledged once the broker
had it was lost with `memstream up` (issue 35). Every way a turn enters (``POST /turns``, ``memstream
publish``, the spool's flush behind hooks, ``ingest`` and ``watch``) goes through :func:`publish`,
:func:`send_turns` (memstream.intake.publish) or the worker's turn sink (memstream.worker.app), and
each of them appends the turns here, fsync'd, before it sends them; the caller hears "ok" only after.

A turn stays *unfinished* until what it feeds is stored (memstream.worker.durable marks it done);
`up` republishes the unfinished turns on start, in log order, which is each session's order, and
the pipeline's idempotence (content-derived memory ids) makes a turn processed twice land once.
``memstream replay`` reads the log from its first turn. Turns are kept ``MEMSTREAM_TURN_LOG_RETENTION_DAYS``
once done; ``forget`` deletes a user's or a project's turns.

**Why SQLite in WAL mode** rather than append-only segment files (measured by
``bench/perf/turnlog_append.py`` on this 2-core machine; see docs/failures.md): an append of a batch is one
transaction, one fsync of the WAL (``synchronous=FULL``), ~the same latency as ``write`` +
``fdatasync`` of a segment file, while the parts a segment log would have to build itself come with
SQLite: several processes append at once (the CLI's ``publish``, a hook's flusher and `up` itself)
under SQLite's write lock, each append's turns get consecutive sequence numbers, so per-session order
is the order of the log; marking done, retention and forget are ``UPDATE``/``DELETE`` by index
instead of segment rewrites; and a torn write at a crash is rolled back by the WAL, not parsed around.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memstream.identity import project_key, turn_session_key, user_key
from memstream.schemas import ForgetScope, Turn, encode
from memstream.settings import Settings

#: The log's file in the data dir.
FILE_NAME = "turnlog.db"
#: How long an append waits for another process's write to finish (SQLite's busy timeout), in ms.
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    accepted REAL NOT NULL,
    session TEXT NOT NULL,
    user_key TEXT NOT NULL,
    project_key TEXT NOT NULL,
    role TEXT NOT NULL,
    published INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0,
    event BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_unfinished ON turns (seq) WHERE done = 0;
CREATE INDEX IF NOT EXISTS turns_session ON turns (session, seq);
"""
# No index on user_key or project_key: each would cost every append; ``forget`` (rare) scans instead.


@dataclass(frozen=True)
class Logged:
    """A turn as the log holds it: its sequence number, its key on the turns topic and its bytes."""

    seq: int
    key: str
    event: bytes


def enabled(settings: Settings) -> bool:
    """Is the log on? ``MEMSTREAM_TURN_LOG``: ``auto`` (the default) keeps it on the embedded broker
    only (a Kafka cluster's topic is the durable copy there), ``on`` and ``off`` say so."""
    mode = settings.turn_log.strip().lower()
    return mode == "on" or (mode == "auto" and settings.embedded_broker)


def path_of(settings: Settings) -> Path:
    return settings.data_dir / FILE_NAME


class TurnLog:
    """One process's connection to the data dir's log. Safe for several processes at once: SQLite's
    WAL lets readers go on while one writer appends, and a writer waits its turn (busy timeout)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: every commit fsyncs the WAL, so an appended turn survives a power loss, not only a crash.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        #: One statement or transaction at a time on this connection (the API appends from threads).
        self._lock = threading.RLock()

    @classmethod
    def for_settings(cls, settings: Settings) -> TurnLog | None:
        """The data dir's log, or None where it is off (see :func:`enabled`)."""
        return cls(path_of(settings)) if enabled(settings) else None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TurnLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, turns: Sequence[Turn], prepared: Sequence[tuple[str, bytes]] | None = None) -> list[int]:
        """Write the turns durably, in order, in one transaction (one fsync); their sequence numbers.
        ``prepared``: each turn's session key and encoded bytes, where the caller has them already
        (the spool's flush sends the same bytes: made once, ~8 µs a turn less)."""
        now = time.time()
        keyed = prepared if prepared is not None else [prepare(t) for t in turns]
        rows = [
            (now, key, user_key(t.user), project_key(t.project), t.role, event)
            for t, (key, event) in zip(turns, keyed, strict=True)
        ]
        with self._transaction():
            self._db.executemany(
                "INSERT INTO turns (accepted, session, user_key, project_key, role, event) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            last = self._db.execute("SELECT last_insert_rowid()").fetchone()[0]
        return list(range(last - len(rows) + 1, last + 1))

    def published(self, seqs: Sequence[int]) -> None:
        """The broker acknowledged these turns. Not fsync'd: a flag lost at a crash only makes the
        next start publish the turn again, which lands once."""
        if not seqs:
            return
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._transaction():  # by runs of consecutive seqs: one statement per append, mostly
                    self._db.executemany(
                        "UPDATE turns SET published = 1 WHERE seq BETWEEN ? AND ?", list(_runs(sorted(seqs)))
                    )
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    def last_published(self) -> int:
        """The highest sequence number the broker acknowledged (0: none)."""
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM turns WHERE published = 1").fetchone()
        return int(row[0])

    def unfinished(self) -> Iterator[Logged]:
        """The turns whose memory is not known to be stored, oldest first (each session in its order)."""
        with self._lock:
            rows = self._db.execute("SELECT seq, session, event FROM turns WHERE done = 0 ORDER BY seq").fetchall()
        for seq, key, event in rows:
            yield Logged(seq, key, bytes(event))

    def all(self, after: int = 0, limit: int = 10_000) -> list[Logged]:
        """Every turn the log keeps after ``after``, oldest first, at most ``limit`` (replay reads it so)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, session, event FROM turns WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
            ).fetchall()
        return [Logged(seq, key, bytes(event)) for seq, key, event in rows]

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    def count_unfinished(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM turns WHERE done = 0").fetchone()[0])

    def mark_done(self, through: int, *, open_before: float) -> int:
        """The pipeline held nothing unprocessed once every turn up to ``through`` was published: mark
        them done, except a session's trailing turns after its last assistant turn (a question waits in
        its session's window for the answer) unless accepted before ``open_before`` (a Unix time past
        which the snapshot stage's idle timer has stored them). How many were marked."""
        with self._transaction():
            cursor = self._db.execute(
                """UPDATE turns SET done = 1 WHERE done = 0 AND published = 1 AND seq <= :through AND (
                       role = 'assistant' OR accepted < :open_before OR EXISTS (
                           SELECT 1 FROM turns later WHERE later.session = turns.session
                           AND later.seq > turns.seq AND later.seq <= :through AND later.role = 'assistant'))""",
                {"through": through, "open_before": open_before},
            )
        return cursor.rowcount

    def expire(self, older_than: float) -> int:
        """Delete the done turns accepted before ``older_than`` (retention); unfinished ones stay."""
        with self._transaction():
            cursor = self._db.execute("DELETE FROM turns WHERE done = 1 AND accepted < ?", (older_than,))
        return cursor.rowcount

    def forget(self, *, user_key: str = "", project_key: str = "", before: float | None = None) -> int:
        """Delete the turns of a user or of a project (by their keys, memstream.identity) accepted
        before ``before`` (a Unix time; None: all of them); how many."""
        column, key = ("user_key", user_key) if user_key else ("project_key", project_key)
        if not key:
            return 0
        with self._transaction():
            cursor = self._db.execute(
                f"DELETE FROM turns WHERE {column} = ? AND accepted <= ?",
                (key, float("inf") if before is None else before),
            )
        return cursor.rowcount

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error): the write lock is taken at once, so two
        processes appending never deadlock upgrading a read lock to a write."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


def prepare(turn: Turn) -> tuple[str, bytes]:
    """A turn's key on the turns topic and its bytes, as the log keeps and the producer sends them."""
    return turn_session_key(turn.session_id, turn.project, turn.user), encode(turn)


def _runs(seqs: Sequence[int]) -> Iterator[tuple[int, int]]:
    """Sorted ``seqs`` as (first, last) runs of consecutive numbers."""
    if not seqs:
        return
    first = last = seqs[0]
    for seq in seqs[1:]:
        if seq != last + 1:
            yield first, last
            first = seq
        last = seq
    yield first, last


def append_for(settings: Settings, turns: Sequence[Turn]) -> tuple[TurnLog | None, list[int]]:
    """Append to the data dir's log where it is on; the open log (to mark them published) and the seqs."""
    log = TurnLog.for_settings(settings)
    if log is None:
        return None, []
    return log, log.append(turns)


def forget_logged(settings: Settings, op: ForgetScope) -> int:
    """Delete a forgotten user's or project's turns said up to the forget from the data dir's log."""
    if not enabled(settings) or not path_of(settings).exists():
        return 0
    with TurnLog(path_of(settings)) as log:
        keys = {"user_key": op.scope_key} if op.scope == "user" else {"project_key": op.scope_key}
        return log.forget(**keys, before=op.forgotten_at.timestamp())
