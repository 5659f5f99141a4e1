"""`memstream watch`: a session file written or appended under a watched root is captured without a re-run."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from memstream.capture.model import Source
from memstream.capture.state import CaptureState
from memstream.capture.watch import watch
from memstream.settings import Settings
from tests.unit.capture_fakes import FakeFormats, message, session_file


def spooled(settings: Settings) -> list[str]:
    if not settings.capture_db.exists():
        return []
    with CaptureState.open(settings.capture_db) as state:
        return [s.payload["content"] for s in state.spooled(1000)]


async def until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.asyncio
async def test_new_and_appended_files_are_captured_live_and_published(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data", watch_sweep=3600.0)
    root = tmp_path / "claude" / "projects"
    root.mkdir(parents=True)
    session_file(root / "p" / "old.jsonl", "old", 2)  # there before: the first sweep takes it
    publishes: list[int] = []

    async def publish() -> int:
        publishes.append(len(spooled(settings)))
        return 0

    stop = asyncio.Event()
    task = asyncio.create_task(
        watch(settings, publish, formats=FakeFormats(), roots={Source.CLAUDE: [root]}, stop=stop)
    )
    try:
        await until(lambda: len(spooled(settings)) == 2)
        await asyncio.sleep(0.3)  # let the watcher start before the next write
        live = session_file(root / "p" / "live.jsonl", "live", 2)
        await until(lambda: len(spooled(settings)) == 4)
        with live.open("a") as handle:
            handle.write(message(2))
        await until(lambda: len(spooled(settings)) == 5)
        assert spooled(settings)[-1] == "message 2 of the session"
        await until(lambda: bool(publishes) and publishes[-1] == 5)  # publish runs just after the capture
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def test_up_releases_a_held_back_reply_once_its_file_is_quiet(tmp_path: Path) -> None:
    """Codex has no session-end event: a session's last reply, held back while the file was live, is
    released by `memstream up`'s sweep once the file is quiet, with no watcher and no further hook."""
    import os
    import shutil

    from memstream.capture.hook import capture
    from memstream.capture.watch import release_quiet
    from memstream.commands.capture import start_capture

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "capture" / "codex"
    rollout = tmp_path / "rollout.jsonl"
    shutil.copy(next(fixtures.glob("rollout-2026-01-02*.jsonl")), rollout)
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    capture("codex", {"hook_event_name": "Stop", "transcript_path": str(rollout)}, settings)
    before = spooled(settings)
    assert release_quiet(settings) == 0  # just written: the reply may still be coming
    assert spooled(settings) == before
    old = time.time() - 120
    os.utime(rollout, (old, old))

    async def sweep() -> None:
        # What `memstream up` starts (MEMSTREAM_WATCH off); no broker here, so the turns stay spooled.
        tasks = start_capture(settings, "127.0.0.1:9")
        try:
            await until(lambda: len(spooled(settings)) > len(before))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(sweep())
    with CaptureState.open(settings.capture_db) as state:
        released = [s.payload for s in state.spooled(1000)][len(before) :]
    assert [p["role"] for p in released] == ["assistant"]
    assert release_quiet(settings) == 0  # read to its end: nothing held any more


def test_a_quiet_file_whose_end_is_not_a_turn_is_read_once_not_on_every_sweep(tmp_path: Path) -> None:
    import os

    from memstream.capture.ingest import Capture
    from memstream.capture.watch import release_quiet

    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    path = session_file(tmp_path / "s.jsonl", "s", 2)
    with path.open("a") as handle:
        handle.write('{"role": "user", "text": "half a li')  # a crash mid-line: never completed
    formats = FakeFormats()
    with CaptureState.open(settings.capture_db) as state:
        Capture(state, formats).file(path)
    old = time.time() - 120
    os.utime(path, (old, old))
    reads = len(formats.reads)
    finished: set[tuple[str, int, int]] = set()
    release_quiet(settings, formats, finished=finished)
    assert len(formats.reads) == reads + 1  # read to its end once it was quiet
    release_quiet(settings, formats, finished=finished)
    release_quiet(settings, formats, finished=finished)
    assert len(formats.reads) == reads + 1  # and not again: nothing there will ever become a turn
    with path.open("a") as handle:
        handle.write("ne\n")  # it grew after all: read again
    os.utime(path, (old + 1, old + 1))
    release_quiet(settings, formats, finished=finished)
    assert len(formats.reads) == reads + 2
