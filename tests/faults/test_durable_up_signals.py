"""The default install keeps what it acknowledged (issue 35), up stopped by a signal it can act on: its
process group interrupted (SIGINT, a terminal's Ctrl-C) or up alone sent SIGTERM (a service manager's
stop). The same run as tests/faults/test_durable_up.py (whose docstring tells it), in a file of its own so
that the suite's workers share the cases (a file runs on one worker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.test_durable_up import TIMEOUT, check_stopped_and_started

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


@TIMEOUT
@pytest.mark.parametrize(
    ("how", "llm", "sessions"),
    [("sigint-group", False, 60), ("sigterm-up", False, 60)],
    ids=["sigint-group", "sigterm-up"],
)
async def test_up_stopped_keeps_every_acknowledged_exchange(tmp_path: Path, how: str, llm: bool, sessions: int) -> None:
    await check_stopped_and_started(tmp_path, how, llm, sessions)
