"""A graceful stop (issues 35.4 and 42.3): finish what the pipeline holds, within a bound, then stop for sure.

On SIGINT or SIGTERM `memstream up` stops taking turns (its capture tasks end) and waits, at most
``MEMSTREAM_DRAIN_SECONDS``, until no record is left that a stage has not finished: every partition
the worker reads, from its committed offset to the broker's end, less the offsets the stages
finished (:func:`memstream.worker.recycle.unprocessed`, the same bookkeeping a broker fresh start
carries over by). The broker runs in its own session, so a terminal's Ctrl-C to the foreground group
does not reach it: it serves the drain and is stopped last. What the bound leaves is cancelled, and
`up`'s exit status says so (:data:`EXIT_NOT_DRAINED`).

Whatever a stop meets (a wedged agent, a dead broker, a client retrying it forever), :class:`Deadline`
ends the process once the drain bound and :data:`STOP_GRACE_SECONDS` have passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.kafka import offsets
from memstream.kafka.security import client_options
from memstream.worker import runner
from memstream.worker.recycle import unprocessed

log = logging.getLogger(__name__)

#: Exit status of `memstream up` when the pipeline still held records at the stop (EX_TEMPFAIL).
EXIT_NOT_DRAINED = 75
#: Seconds a stop may take past the drain bound: the worker's own stop (runner.STOP_TIMEOUT_SECONDS),
#: closing the store and stopping the broker (its 5 s grace), with room to spare.
STOP_GRACE_SECONDS = 20.0
#: How often the drain looks at what is left.
CHECK_SECONDS = 0.5
#: A drain is over once nothing is left this many looks in a row: a record a stage sends as it
#: finishes another reaches the broker's end before the next look (the producer is flushed first).
QUIET_LOOKS = 2


async def left(running: runner.Running, probe: AIOKafkaConsumer) -> int:
    """Records on the worker's partitions that no stage has finished."""
    app: Any = running.pipeline.app
    consumer = getattr(app, "_consumer", None)
    if consumer is None:
        return 0
    # What the finished events sent is in the broker before its end is read.
    await app.producer.flush()
    tps = sorted(TopicPartition(tp.topic, tp.partition) for tp in consumer.assignment())
    tps = [tp for tp in tps if not tp.topic.endswith("-changelog")]  # tables: written, never "finished"
    ends = await offsets.end_offsets(probe, tps)
    return sum(len(found) for found in unprocessed(consumer, tps, ends).values())


async def drain(running: runner.Running, bound: float, say: Callable[[str], None], now: asyncio.Event) -> bool:
    """Wait until the pipeline holds nothing it has not finished, at most ``bound`` seconds or until
    ``now`` is set (a second Ctrl-C); True when it did."""
    deadline = time.monotonic() + bound
    security = client_options(running.settings) if running.broker is None else {}
    probe = AIOKafkaConsumer(
        bootstrap_servers=running.bootstrap, enable_auto_commit=False, request_timeout_ms=5000, **security
    )
    try:
        await asyncio.wait_for(probe.start(), max(1.0, deadline - time.monotonic()))
        quiet, told = 0, False
        while True:
            remaining = await asyncio.wait_for(left(running, probe), max(1.0, deadline - time.monotonic()))
            quiet = quiet + 1 if remaining == 0 else 0
            if quiet >= QUIET_LOOKS:
                return True
            if remaining and not told:
                say(f"memstream: draining {remaining} records… (up to {bound:.0f}s; Ctrl-C again to stop now)")
                told = True
            if time.monotonic() >= deadline or now.is_set():
                if remaining:
                    say(f"memstream: {remaining} records were not drained; they are cancelled")
                return remaining == 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(now.wait(), CHECK_SECONDS)
    except Exception as exc:  # a broker that cannot be read: nothing more can drain
        say(f"memstream: cannot drain ({type(exc).__name__}: {exc}); stopping")
        return False
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(probe.stop(), 5)


class Deadline:
    """Ends the process ``seconds`` after :meth:`start`, whatever it is doing then: a stop that hangs
    (a task that will not be cancelled, a client retrying a broker that is gone) must not keep
    memstream, or its broker, alive."""

    def __init__(self, seconds: float, broker_pid: Callable[[], int | None]) -> None:
        self.seconds = seconds
        self.broker_pid = broker_pid
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="memstream-stop-deadline", daemon=True)
            self._thread.start()

    def cancel(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        with contextlib.suppress(OSError, ValueError):
            print(f"memstream: not stopped after {self.seconds:.0f}s; exiting now", file=sys.stderr, flush=True)
        pid = self.broker_pid()
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(EXIT_NOT_DRAINED)
