"""The default install keeps what it acknowledged (issue 35): `memstream up` with its embedded broker,
stopped at a random instant, loses no turn `memstream publish` was told was published.

A real ``memstream up`` on a fresh data dir (the embedded broker as its child), 300 exchanges
published with ``memstream publish --file`` (which exits 0 once they are acknowledged), then up is
stopped at a random instant -- its whole process group, the broker with it, killed (SIGKILL) or
interrupted (SIGINT, a terminal's Ctrl-C), or up alone sent SIGTERM (a service manager's stop) --
and started again on the same data dir: every exchange becomes its memory, exactly once. Raw mode,
and LLM mode with a slow fake model (each answer 0.5 s late), whose held snapshots are the turns a
stop catches most of. Before the durable turn log, most were lost (the broker's memory was the only
copy): with ``MEMSTREAM_TURN_LOG=off`` the kill-9 case stored 0 of 300.

One run of each here; ``python -m bench.faults.durable`` runs series of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.durable_up import stopped_and_started

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


#: Minutes on a loaded 2-core runner: two starts and 300 exchanges embedded.
TIMEOUT = pytest.mark.timeout(900)


async def check_stopped_and_started(tmp_path: Path, how: str, llm: bool, sessions: int) -> None:
    run = await stopped_and_started(tmp_path, how, llm=llm, sessions=sessions)
    assert (run.lost, run.duplicated, run.unexpected) == (0, 0, 0), f"{run.as_dict()}"
    assert run.stored == run.expected == sessions * 5
    # The backlog after the restart paces the pipeline (Faust's producer buffer): no warning says so.
    assert run.buffer_warnings == 0, run.log


# The two signal cases are in test_durable_up_signals.py: each case runs minutes, and a file runs on one
# worker (--dist loadfile), so the four in one file made the suite's longest file.
@TIMEOUT
@pytest.mark.parametrize(
    ("how", "llm", "sessions"),
    # LLM mode here with 100 exchanges: the fake model answers one snapshot at a time, 0.5 s each, and
    # 300 of them at load 15+ outlasted the wait for every memory (299 of 300 at its 600 s deadline in
    # one CI run: late or lost cannot be told apart there). The bench runs the 300-exchange series.
    [("kill-9-group", False, 60), ("kill-9-group", True, 20)],
    ids=["kill-9-group", "llm-slow-kill-9-group"],
)
async def test_up_stopped_keeps_every_acknowledged_exchange(tmp_path: Path, how: str, llm: bool, sessions: int) -> None:
    await check_stopped_and_started(tmp_path, how, llm, sessions)
