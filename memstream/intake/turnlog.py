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

from memstream.identity import turn_session_key
from memstream.schemas import ForgetScope, Turn, encode
from memstream.settings import Settings

#: The log's file in the data dir.
FILE_NAME = "turnlog.db"
#: How long an append waits for another process's write to finish (SQLite's busy timeout), in ms.
BUSY_TIMEOUT_MS = 30_000

#: Bytes per page of a new log. A WAL commit writes each page as a frame of its own (a write call and
#: a checksum each): a batch of 2,000 turns (~1.6 MB) cost ~4.4 µs of CPU a turn to commit in 4 KB
#: pages, ~1.4 in 16 KB ones, and its inserts no more (bench/perf/durable_cost.py, docs/failures.md).
PAGE_SIZE = 16_384
#: The WAL's size, in pages, past which an append copies it into the database itself (SQLite's
#: auto-checkpoint, 1,000 pages by default). `up`'s done sweep checkpoints every couple of seconds
#: (:meth:`TurnLog.checkpoint`), off the path that accepts turns, where a checkpoint in a commit
#: held that batch's sends back for up to ~150 ms; this only bounds the WAL where no `up` runs.
BACKSTOP_PAGES = 4_096
#: The shape :class:`TurnLog` writes (``PRAGMA user_version``); older logs are brought to it on open.
VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    accepted REAL NOT NULL,
    session TEXT NOT NULL,
    role TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    event BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_unfinished ON turns (seq) WHERE done = 0;
DROP INDEX IF EXISTS turns_session;
CREATE TABLE IF NOT EXISTS acks (first INTEGER PRIMARY KEY, last INTEGER NOT NULL);
"""
# ``acks``: the runs of seqs the broker acknowledged, one row per append mostly. A flag on each turn's
# row cost ~5 µs of CPU a turn (the UPDATE rewrote every row, events and all). No user or project key
# columns: both are parts of the session key (memstream.identity.session_key), and hashing them and
# writing them cost ~4 µs of CPU a turn on every append; ``forget`` (rare) reads the session key.
_MIGRATIONS = {
    # 0 -> 1: a log that flagged each acknowledged turn: its flags become runs.
    1: """
INSERT OR IGNORE INTO acks (first, last) SELECT seq, seq FROM turns WHERE published = 1 AND done = 0;
INSERT OR IGNORE INTO acks (first, last) SELECT MAX(seq), MAX(seq) FROM turns WHERE published = 1 HAVING MAX(seq);
UPDATE turns SET published = 0 WHERE published = 1;
""",
    # 1 -> 2: the scope keys and the flags leave the rows.
    2: """
ALTER TABLE turns DROP COLUMN user_key;
ALTER TABLE turns DROP COLUMN project_key;
ALTER TABLE turns DROP COLUMN published;
""",
}
#: SQL: is ``turns.seq`` acknowledged by the broker?
_PUBLISHED = "EXISTS (SELECT 1 FROM acks WHERE acks.first <= turns.seq AND acks.last >= turns.seq)"
# No index on the session key: it cost ~8 of the ~19 µs of CPU an append spent per turn (random inserts of
# ~60-character keys; bench/perf/durable_cost.py); :meth:`TurnLog.mark_done` reads a range of seqs instead.


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
        self._db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only: a log made before keeps its pages
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        # FULL: every commit fsyncs the WAL, so an appended turn survives a power loss, not only a crash.
        self._db.execute("PRAGMA synchronous=FULL")
        #: One statement or transaction at a time on this connection (the API appends from threads).
        self._lock = threading.RLock()
        with self._transaction():  # made or brought up to date once, whichever process opens it first
            old = self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'turns'").fetchone()
            version = self._db.execute("PRAGMA user_version").fetchone()[0] if old else VERSION
            for statement in _statements(_SCHEMA):
                self._db.execute(statement)
            for step in range(version + 1, VERSION + 1):
                for statement in _statements(_MIGRATIONS[step]):
                    self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {VERSION}")

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
        rows = [(now, key, t.role, event) for t, (key, event) in zip(turns, keyed, strict=True)]
        with self._transaction():
            self._db.executemany("INSERT INTO turns (accepted, session, role, event) VALUES (?, ?, ?, ?)", rows)
            last = self._db.execute("SELECT last_insert_rowid()").fetchone()[0]
        return list(range(last - len(rows) + 1, last + 1))

    def published(self, seqs: Sequence[int]) -> None:
        """The broker acknowledged these turns: one row per run of consecutive seqs in ``acks`` (a run
        next to the one before extends it). Not fsync'd: a run lost at a crash only makes the next start publish
        those turns again, which land once."""
        if not seqs:
            return
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._transaction():
                    for first, last in _runs(sorted(seqs)):
                        # A run that ends right before this one (the previous append's, mostly) grows
                        # instead: runs are pruned only below the oldest unfinished turn, so with one
                        # left unacknowledged a row per append piled up for every mark_done to search.
                        before = self._db.execute(
                            "SELECT first FROM acks WHERE first <= ? AND last >= ? ORDER BY first DESC LIMIT 1",
                            (first, first - 1),
                        ).fetchone()
                        self._db.execute(
                            "INSERT INTO acks (first, last) VALUES (?, ?)"
                            " ON CONFLICT (first) DO UPDATE SET last = MAX(last, excluded.last)",
                            (first if before is None else before[0], last),
                        )
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    def checkpoint(self) -> int:
        """Copy what the WAL holds into the database (a passive checkpoint: appends go on meanwhile),
        so an append never does it (see :data:`BACKSTOP_PAGES`); how many of the WAL's frames are in it."""
        with self._lock:
            _busy, _frames, copied = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(0, int(copied))

    def last_published(self) -> int:
        """The highest sequence number the broker acknowledged (0: none)."""
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(last), 0) FROM acks").fetchone()
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
            # Each session's last answer among the seqs from the oldest unfinished *acknowledged* turn to
            # ``through``: one range read of the table (no index on the session key, see _SCHEMA). Only
            # acknowledged turns are marked, so no answer before that one counts; and a turn whose send
            # failed, unacknowledged until the next start, does not make every look read every turn
            # accepted since (bench/perf/turnlog_held.py --stuck).
            self._db.execute(
                f"""WITH answered(session, last) AS MATERIALIZED (
                       SELECT session, MAX(seq) FROM turns
                       WHERE seq >= COALESCE(
                           (SELECT seq FROM turns WHERE done = 0 AND {_PUBLISHED} ORDER BY seq LIMIT 1),
                           :through + 1)
                       AND seq <= :through AND role = 'assistant' GROUP BY session)
                   UPDATE turns SET done = 1 WHERE done = 0 AND seq <= :through AND {_PUBLISHED} AND (
                       role = 'assistant' OR accepted < :open_before
                       OR seq < (SELECT last FROM answered WHERE answered.session = turns.session))""",
                {"through": through, "open_before": open_before},
            )
            marked = int(self._db.execute("SELECT changes()").fetchone()[0])  # rowcount is -1 after WITH
            # The runs wholly before the oldest unfinished turn say nothing more (the last one stays:
            # it is last_published()).
            self._db.execute(
                """DELETE FROM acks WHERE last < (SELECT MAX(last) FROM acks) AND last < COALESCE(
                       (SELECT MIN(seq) FROM turns WHERE done = 0), (SELECT MAX(seq) + 1 FROM turns))"""
            )
        return marked

    def expire(self, older_than: float) -> int:
        """Delete the done turns accepted before ``older_than`` (retention); unfinished ones stay."""
        with self._transaction():
            cursor = self._db.execute("DELETE FROM turns WHERE done = 1 AND accepted < ?", (older_than,))
        return cursor.rowcount

    def forget(self, *, user_key: str = "", project_key: str = "", before: float | None = None) -> int:
        """Delete the turns of a user or of a project (by their keys, memstream.identity) accepted
        before ``before`` (a Unix time; None: all of them); how many."""
        # A session key is "<project key>/<user key or ->/<session id>" (memstream.identity.session_key).
        part = "substr(session, instr(session, '/') + 1, :n)" if user_key else "substr(session, 1, :n)"
        key = user_key or project_key
        if not key:
            return 0
        with self._transaction():
            cursor = self._db.execute(
                f"DELETE FROM turns WHERE {part} = :part AND accepted <= :before",
                {"part": f"{key}/", "n": len(key) + 1, "before": float("inf") if before is None else before},
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


def _statements(script: str) -> list[str]:
    """A script's statements, to run one by one inside a transaction (``executescript`` commits first)."""
    return [statement.strip() for statement in script.split(";") if statement.strip()]


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
