"""kill -9 of a worker at random moments under load: nothing lost, duplicated or mispaired.

A real `memstream up` subprocess on an external embedded broker (the broker survives the
kill, as a crashed worker's broker would), raw mode, killed and restarted on its data dir;
its memories are compared with the exact set the exchanges must make.
tests/faults/test_kill9_any_instant.py (a file of its own, so that the suite's two workers share
the two minute-long cases) kills at random instants over the whole turn path -- while the restarted
worker recovers, joins its group and takes its first batches -- with sessions sharing projects and
turns carrying their user, as the CLI's do; ``python -m bench.faults.chaos --kill-every`` is its
heavy version.
The faults these find by chance are pinned case by case: the consumer's commit rule in
tests/unit/test_commits.py, the state tables' partitioning in tests/faults/test_state_partitions.py,
a seek undone by the batch before it in tests/faults/test_rebalance_order.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos import kill_run

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_kills_under_load_lose_duplicate_and_mispair_nothing(tmp_path: Path) -> None:
    outcome = await kill_run(tmp_path, sessions=10, exchanges=6, kills=3, seed=15, timeout=180)
    print(outcome.render())
    assert (outcome.lost, outcome.duplicated, outcome.corrupted) == (0, 0, 0), outcome.render()
    assert outcome.stored == outcome.expected == 60
