"""kill -9 of a worker at random instants over the whole turn path -- while the restarted worker recovers,
joins its group and takes its first batches -- with sessions sharing projects and turns carrying their user,
as the CLI's do: nothing lost, duplicated or mispaired. The harness and its faults are told in
tests/faults/test_kill9.py; this case is in a file of its own so that the suite's workers share the two
(a file runs on one worker). ``python -m bench.faults.chaos --kill-every`` is its heavy version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos import kill_run

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_kills_at_any_instant_of_the_turn_path_lose_nothing(tmp_path: Path) -> None:
    outcome = await kill_run(
        tmp_path, sessions=12, exchanges=6, projects=4, kills=4, kill_every=4.0, rate=8.0, seed=27, timeout=240
    )
    print(outcome.render())
    assert (outcome.lost, outcome.duplicated, outcome.corrupted) == (0, 0, 0), outcome.render()
    assert outcome.stored == outcome.expected == 72
