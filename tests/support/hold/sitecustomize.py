"""Fault injection for ``tests.support.chaos.hold_run``: records of one topic accepted but never sent.

Python imports ``sitecustomize`` at start-up from the first directory on its path that has
one; the harness puts this directory first on a worker's ``PYTHONPATH`` with ``CHAOS_HOLD_TOPIC``
set. From then on aiokafka's producer treats every partition of the topics whose names end
with ``.<CHAOS_HOLD_TOPIC>`` as busy: their batches stay in the accumulator, their delivery
futures pending, while every other record (the stages' other outputs and their tables'
changelogs) goes out as usual. That is the state a SIGKILL finds a worker in when a batch
waits behind another request: the stage already sent the record, the broker never got it.
Once a held batch has waited ``CHAOS_HOLD_SECONDS`` (default 2), the file ``CHAOS_HOLD_MARK``
is written: the harness kills the worker then.
"""

from __future__ import annotations

import os


def _install(suffix: str, mark: str, after: float) -> None:
    import asyncio
    from pathlib import Path

    from aiokafka.producer.message_accumulator import MessageAccumulator

    drain = MessageAccumulator.drain_by_nodes
    held_since: list[float] = []

    def drain_holding(self: MessageAccumulator, ignore_nodes: object, muted_partitions: frozenset = frozenset()):
        held = {tp for tp in self._batches if tp.topic.endswith(f".{suffix}") and self._batches[tp]}
        if held and not held_since:
            loop = asyncio.get_running_loop()
            held_since.append(loop.time())
            names = ",".join(sorted(f"{tp.topic}:{tp.partition}" for tp in held))
            loop.call_later(after, Path(mark).write_text, names)
        return drain(self, ignore_nodes, frozenset(muted_partitions) | held)

    MessageAccumulator.drain_by_nodes = drain_holding


if os.environ.get("CHAOS_HOLD_TOPIC"):
    _install(
        os.environ["CHAOS_HOLD_TOPIC"],
        os.environ["CHAOS_HOLD_MARK"],
        float(os.environ.get("CHAOS_HOLD_SECONDS", "2")),
    )
