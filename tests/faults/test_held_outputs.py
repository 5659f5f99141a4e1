"""A worker killed while its outputs are accepted by its producer but not yet on the broker.

The window kill -9 at random instants rarely hits: a stage sent its records and wrote its
table, the changelog record reached the broker, the output did not (it waited behind another
request, or was being retried). After the restart the event comes again (its offset was never
committed: the commit waits for the producer), and a stage whose table says it is done skips
it -- extract's done snapshots, decide's recent memories -- so the exchange never becomes a
memory. ``tests.support.chaos.hold_run`` makes the window certain by holding one topic's batches in
the worker's producer until the kill (``tests/support/hold``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos import hold_run

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


@pytest.mark.parametrize("topic", ["snapshots", "facts", "memory-ops"])
async def test_a_kill_while_a_stage_output_is_unsent_loses_nothing(tmp_path: Path, topic: str) -> None:
    outcome = await hold_run(tmp_path, topic=topic)
    print(outcome.render())
    assert topic in str(outcome.notes["held"])
    assert (outcome.lost, outcome.duplicated, outcome.corrupted) == (0, 0, 0), outcome.render()
    assert outcome.stored == outcome.expected == 6
