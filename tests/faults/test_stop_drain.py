"""Ctrl-C during a backlog (issues 42.3 and 35.4): SIGINT to `memstream up`'s process group while the
pipeline works ends every memstream process within the drain bound and a grace, the embedded broker
serving the drain until the worker is done, and the exit status says that not everything was drained.
One run here; `python -m bench.stop_under_load` runs ten in a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.stop_under_load import stop_run
from memstream.worker.drain import EXIT_NOT_DRAINED, STOP_GRACE_SECONDS

pytestmark = [pytest.mark.e2e]


def test_sigint_to_the_group_during_a_backlog_ends_every_process_within_the_bound(tmp_path: Path) -> None:
    outcome = stop_run(tmp_path, exchanges=300, drain=3.0, grace=STOP_GRACE_SECONDS)
    assert not outcome.left, f"still running after {outcome.seconds:.0f}s: {outcome.left}\n{outcome.output}"
    assert outcome.seconds <= outcome.bound, outcome.line() + "\n" + outcome.output
    assert outcome.broker_alive_during_drain, "the broker died before the worker had drained"
    # 300 exchanges take minutes: the bound cuts the drain short, and the status says so.
    assert outcome.code == EXIT_NOT_DRAINED, outcome.line() + "\n" + outcome.output
    assert "memstream: draining " in outcome.output and "Ctrl-C again to stop now" in outcome.output
