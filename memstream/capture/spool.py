"""Send the spool to the turns topic, in capture order, dropping each turn once the broker acknowledged it.

One flusher at a time per data dir (an exclusive lock on ``capture.flush.lock``): a hook that finds one
running leaves the spool to it, ``ingest`` waits for it. Turns are keyed by session and sent in spool
order, so each session's turns reach its partition in order. A turn is deleted from the spool only after
the broker acknowledged it; if the process dies between the two, that turn is sent again on the next
flush (the only case where one is sent twice, and then with the same content, whose memory id is the
same, so the store keeps one memory).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from memstream.capture.state import CaptureState
from memstream.settings import Settings

#: The file whose mtime is the spool's last successful send.
SENT_MARKER = "capture.sent"
#: Turns read from the spool and sent per round.
BATCH = 2_000


@contextmanager
def flush_lock(settings: Settings, *, wait: bool) -> Iterator[bool]:
    """The data dir's flush lock; yields False (without waiting) when ``wait`` is off and it is taken."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(settings.data_dir / "capture.flush.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def make_turns(payloads: list[dict[str, Any]], user: str) -> list[Any]:
    """Spooled payloads as validated ``turn.v2`` events."""
    import msgspec

    from memstream.intake.publish import make_turn
    from memstream.schemas import Provenance

    turns = []
    for p in payloads:
        turns.append(
            make_turn(
                session_id=p["session_id"],
                project=p["project"],
                role=p["role"],
                content=p["content"],
                ts=datetime.fromisoformat(p["ts"].replace("Z", "+00:00")),
                user=user,
                source=p["source"],
                llm_source=p["llm_source"],
                llm_model=p["llm_model"],
                provenance=msgspec.convert(p["provenance"], Provenance),
                ends_session=bool(p.get("ends_session", False)),
            )
        )
    return turns


async def flush(
    settings: Settings,
    bootstrap: str,
    *,
    wait: bool = True,
    user: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Send every spooled turn; returns how many were sent. Raises if the broker cannot be reached."""
    from memstream.intake.publish import open_producer, send_turns
    from memstream.intake.turnlog import TurnLog
    from memstream.kafka import doorbell

    if not settings.capture_db.exists():
        return 0
    with flush_lock(settings, wait=wait) as locked:
        if not locked:
            return 0
        identity = settings.user if user is None else user
        with CaptureState.open(settings.capture_db) as state:
            if state.spool_size() == 0:
                return 0
            sent = 0
            log = TurnLog.for_settings(settings)  # on the embedded default: the copy that outlives the broker
            producer = await open_producer(bootstrap, settings.topic_prefix)
            try:
                while batch := state.spooled(BATCH):
                    turns = make_turns([s.payload for s in batch], identity)
                    await send_turns(producer, settings.topic_prefix, turns, log=log)
                    doorbell.ring(bootstrap)  # an idle worker on the embedded broker takes them at once
                    state.unspool(s.seq for s in batch)
                    sent += len(batch)
                    if progress is not None:
                        progress(len(batch))
            finally:
                await producer.stop()
                if log is not None:
                    log.close()
            if sent:  # `memstream install --check` reads when the spool was last sent from this file's mtime
                (settings.data_dir / SENT_MARKER).touch()
            return sent


async def drain(
    settings: Settings,
    bootstrap: str,
    *,
    user: str | None = None,
    interval: float = 1.0,
    on_sent: Callable[[int], None] | None = None,
) -> None:
    """Send the spool whenever it holds turns, checking every ``interval`` seconds, until cancelled.

    ``memstream up`` runs this: hooks then only write the spool and exit, and a turn reaches the broker
    about a second after its hook ran, without every hook starting a Kafka client.
    """
    import asyncio
    import logging

    log = logging.getLogger(__name__)
    while True:
        try:
            if await asyncio.to_thread(pending, settings):
                sent = await flush(settings, bootstrap, user=user)
                if sent and on_sent is not None:
                    on_sent(sent)
        except Exception:  # the broker went away for a moment: the spool keeps the turns
            log.warning("capture: could not send the spool", exc_info=True)
        await asyncio.sleep(interval)


def pending(settings: Settings) -> int:
    """Turns waiting in the spool (0 when capture never ran)."""
    path: Path = settings.capture_db
    if not path.exists():
        return 0
    with CaptureState.open(path) as state:
        return state.spool_size()
