"""``memstream watch``: follow the coding CLIs' session folders live and capture files as they change.

Changes are reported by ``watchfiles`` (inotify/FSEvents through Rust's ``notify``); each changed session
file is read from its checkpoint through the same :class:`~memstream.capture.ingest.Capture` as ``ingest``
and the hooks, and the spool is sent. A periodic sweep (``MEMSTREAM_WATCH_SWEEP``) reads every session file
whose stat changed, for what a missed event, a root created later or a CLI without hooks left behind.
``memstream up`` runs the same loop when ``MEMSTREAM_WATCH=1``.

Whether or not it watches, ``memstream up`` releases held-back replies (:func:`release_forever`): a file
read only in part (its trailing reply held back while the CLI might still be writing it, or an adapter
waiting for an unfinished message) is read to its end as final once it has been quiet for
``LIVE_WINDOW`` seconds. That is what a session-end hook does; it covers a CLI without one (Codex), a
session that was killed, and a hook that never ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from memstream.capture.ingest import HELD, LIVE_WINDOW, Capture, CliFormats, Formats, standard_roots
from memstream.capture.model import Source
from memstream.capture.state import CaptureState
from memstream.settings import Settings

log = logging.getLogger(__name__)

#: Seconds between two looks at the hooks' notes: a turn reaches the spool within this of its hook.
NOTE_INTERVAL = 0.25

Publish = Callable[[], Awaitable[int]]


def session_files(formats: Formats, roots: Mapping[Source, list[Path]]) -> dict[Path, Source]:
    """Every session file below the roots, with its source."""
    return dict(formats.discover([], roots))


def capture_paths(settings: Settings, formats: Formats, paths: dict[Path, Source]) -> int:
    """Read the given session files from their checkpoints into the spool; returns the new turns."""
    new = 0
    with CaptureState.open(settings.capture_db) as state:
        capture = Capture(state, formats)
        capture.preload_checkpoints()
        for path, source in sorted(paths.items()):
            outcome = capture.file(path, source)
            new += len(outcome.new)
            for problem in outcome.problems[:5]:
                log.info("capture: %s:%d: %s", problem.file, problem.line, problem.reason)
    return new


def release_quiet(
    settings: Settings,
    formats: Formats | None = None,
    *,
    quiet: float = LIVE_WINDOW,
    finished: set[tuple[str, int, int]] | None = None,
) -> int:
    """Read to the end, as final, every file read only in part whose last write is ``quiet`` seconds old;
    returns the turns this released into the spool. ``finished`` remembers the files (path, mtime, size)
    already read so: one whose end is not a turn (a line cut by a crash) is not read again every round."""
    if not settings.capture_db.exists():
        return 0
    released = 0
    with CaptureState.open(settings.capture_db) as state:
        unfinished = state.unfinished(HELD)
        if not unfinished:
            return 0
        capture = Capture(state, formats or CliFormats())
        now = time.time()
        for checkpoint in unfinished:
            path = Path(checkpoint.path)
            try:
                stat = path.stat()
            except OSError:  # the file is gone: nothing more to read
                continue
            if now - stat.st_mtime < quiet:
                continue  # still being written: the next sweep, a hook or the next prompt takes it
            key = (checkpoint.path, stat.st_mtime_ns, stat.st_size)
            if finished is not None and key in finished:
                continue
            outcome = capture.file(path, Source(checkpoint.source), final=True)
            released += len(outcome.new)
            if finished is not None:
                finished.add(key)
    return released


def take_notes(settings: Settings, formats: Formats | None = None) -> int:
    """Capture what the hooks that handed off to this ``up`` point at (:mod:`memstream.capture.handoff`);
    returns the notes taken."""
    from memstream.capture.handoff import mark_run, pending_notes, read_note
    from memstream.capture.hook import HOSTS, capture

    notes = pending_notes(settings.data_dir)
    for path in notes:
        note = read_note(path)
        if note is not None and note[0] in HOSTS:
            host, written, payload = note
            event = str(payload.get("hook_event_name") or payload.get("type") or "")
            mark_run(settings.data_dir, host, event, when=written)
            try:
                capture(host, payload, settings, formats=formats, send=False)  # this up's drain sends
            except Exception:  # the session file keeps its turns: the next hook or sweep reads them
                log.warning("capture: could not capture %s", path.name, exc_info=True)
        path.unlink(missing_ok=True)
    return len(notes)


async def take_notes_forever(
    settings: Settings,
    *,
    interval: float = NOTE_INTERVAL,
    stop: asyncio.Event | None = None,
    formats: Formats | None = None,
) -> None:
    """Take the hooks' notes every ``interval`` seconds until ``stop`` is set (or cancelled); hooks hand
    off to this process only while it runs."""
    from memstream.capture.handoff import claim, release

    stop = stop or asyncio.Event()
    claim(settings.data_dir)
    try:
        while not stop.is_set():
            try:
                await asyncio.to_thread(take_notes, settings, formats)
            except Exception:
                log.warning("capture: could not take the hooks' notes", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
    finally:
        release(settings.data_dir)
        # What came in while stopping: taken now, so no note waits for the next `up`.
        with contextlib.suppress(Exception):
            take_notes(settings, formats)


async def release_forever(
    settings: Settings,
    *,
    interval: float = LIVE_WINDOW / 2,
    stop: asyncio.Event | None = None,
    formats: Formats | None = None,
) -> None:
    """Run :func:`release_quiet` every ``interval`` seconds until ``stop`` is set (or cancelled)."""
    stop = stop or asyncio.Event()
    finished: set[tuple[str, int, int]] = set()
    while not stop.is_set():
        try:
            released = await asyncio.to_thread(release_quiet, settings, formats, finished=finished)
            if released:
                log.info("capture: released %d held-back turns of quiet session files", released)
        except Exception:  # a broken file or a locked database: the next round tries again
            log.warning("capture: could not release held-back turns", exc_info=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


async def watch(
    settings: Settings,
    publish: Publish,
    *,
    formats: Formats | None = None,
    roots: Mapping[Source, list[Path]] | None = None,
    stop: asyncio.Event | None = None,
    on_capture: Callable[[int], None] | None = None,
) -> None:
    """Capture changed session files until ``stop`` is set; ``publish`` sends the spool after each batch.

    ``roots`` default to each CLI's standard session folders below its home (``MEMSTREAM_CLAUDE_DIR`` …).
    """
    import watchfiles

    formats = formats or CliFormats()
    stop = stop or asyncio.Event()
    roots = roots if roots is not None else standard_roots(settings.capture_roots)
    folders = [root for paths in roots.values() for root in paths]

    async def sweep_forever() -> None:
        while not stop.is_set():
            await capture_and_publish(await asyncio.to_thread(session_files, formats, roots))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.watch_sweep)

    async def capture_and_publish(paths: dict[Path, Source]) -> None:
        if not paths:
            return
        try:
            new = await asyncio.to_thread(capture_paths, settings, formats, paths)
            if on_capture is not None:
                on_capture(new)
            await publish()
        except Exception:  # the next change or sweep tries again; the spool keeps what was read
            log.warning("capture: could not capture or publish", exc_info=True)

    sweeper = asyncio.create_task(sweep_forever())
    try:
        while not stop.is_set():
            watched = sorted({str(root if root.is_dir() else root.parent) for root in folders if root.exists()})
            if not watched:  # nothing to follow yet: the sweep notices when a CLI creates its folder
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), settings.watch_sweep)
                continue
            async for changes in watchfiles.awatch(*watched, stop_event=stop, recursive=True, debounce=500):
                changed = {Path(path) for _, path in changes if path.endswith((".jsonl", ".json"))}
                if not changed:
                    continue
                known = await asyncio.to_thread(session_files, formats, roots)
                await capture_and_publish({p: s for p, s in known.items() if p in changed})
    finally:
        stop.set()
        sweeper.cancel()
        await asyncio.gather(sweeper, return_exceptions=True)
