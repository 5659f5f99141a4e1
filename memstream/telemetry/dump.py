"""What a running worker is doing, written to its log on ``kill -USR1 <pid>``.

A worker that answers ``/health`` but makes no progress is the hardest state to explain after
the fact, so ``memstream up`` writes, on SIGUSR1 and without stopping anything:

- where every asyncio task of its event loops waits (the main loop and the Kafka consumer's
  own thread): a line each, its chain of awaits;
- every thread's Python stack (:mod:`faulthandler`);
- per consumed partition, the consumer's view: its read offset, the committed offset, the
  highwater, the offsets finished but not yet committed, where the commit is held, and the
  offset each stage takes next (:func:`partitions`).

Nothing here imports Faust: it reads the app it is given.
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Frames shown per task, innermost last: enough to see what it awaits, short enough for a
#: line per task.
TASK_FRAMES = 4


def tasks(loop: asyncio.AbstractEventLoop) -> list[str]:
    """One line per task of ``loop``: its name and the chain of awaits it is suspended in,
    outermost first (``Task.get_stack`` shows only a suspended task's outermost frame)."""
    try:
        every = list(asyncio.all_tasks(loop))
    except RuntimeError:  # the set changed while read from another thread: try once more
        every = list(asyncio.all_tasks(loop))
    lines = []
    for task in sorted(every, key=lambda t: t.get_name()):
        chain = " > ".join(awaiting(task.get_coro())[-TASK_FRAMES:]) or repr(task.get_coro())
        lines.append(f"{task.get_name()[:80]}: {chain}")  # Faust names some tasks by a long repr
    return lines


def awaiting(awaitable: Any) -> list[str]:
    """``file:line function`` of each coroutine or generator in ``awaitable``'s chain of awaits.
    The chain ends at a future: awaiting another task, it shows where, and that task its own."""
    frames = []
    seen = 0
    while awaitable is not None and seen < 100:
        seen += 1
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        frame = frame or getattr(awaitable, "ag_frame", None)
        if frame is None:
            break
        frames.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} {frame.f_code.co_name}")
        awaitable = (
            getattr(awaitable, "cr_await", None)
            or getattr(awaitable, "gi_yieldfrom", None)
            or getattr(awaitable, "ag_await", None)
        )
    return frames


def partitions(consumer: Any) -> list[str]:
    """Per assigned partition: the consumer's read offset, the committed offset, the highwater,
    the offsets finished past the commit, the offset the commit is held at (with the commit
    rounds it has been held), and the offset each stage takes next (memstream's consumer keeps
    these: memstream.kafka.order)."""
    try:
        assigned = sorted(consumer.assignment())
    except Exception as exc:  # not started, or stopping
        return [f"no assignment ({exc!r})"]
    committed = getattr(consumer, "_committed_offset", {})
    finished = getattr(consumer, "_finished", {})
    held = getattr(consumer, "_held", {})
    read = getattr(consumer, "_read_offset", {})
    order = getattr(consumer, "_order", None)
    lines = []
    for tp in assigned:
        done = sorted(finished.get(tp, ()))
        span = f"{done[0]}..{done[-1]} ({len(done)})" if done else "-"
        places = sorted(order.places(tp).items()) if order is not None else []
        nexts = ", ".join(f"{stage} {offset}" for stage, offset in places) or "-"
        lines.append(
            f"{tp.topic}:{tp.partition} read {read.get(tp)} committed {committed.get(tp)} "
            f"highwater {_highwater(consumer, tp)} finished {span} held {held.get(tp, '-')} next {nexts}"
        )
    return lines


def _highwater(consumer: Any, tp: Any) -> int | None:
    try:
        return int(consumer.highwater(tp))
    except Exception:
        return None


def report(loops: Iterable[asyncio.AbstractEventLoop], consumer: Any = None) -> str:
    """The whole dump as text."""
    out = io.StringIO()
    for n, loop in enumerate(loops):
        lines = tasks(loop)
        out.write(f"--- event loop {n}: {len(lines)} tasks\n" + "\n".join(lines) + "\n")
    if consumer is not None:
        out.write("--- partitions\n" + "\n".join(partitions(consumer)) + "\n")
    return out.getvalue()


def install(loop: asyncio.AbstractEventLoop, app: Callable[[], Any]) -> None:
    """On SIGUSR1, log :func:`report` of ``loop`` and of the app's consumer thread, and dump
    every thread's stack to stderr. ``app`` returns the running Faust app (it changes when the
    embedded broker is started afresh)."""

    def dump() -> None:
        running = app()
        consumer = getattr(running, "consumer", None) if running is not None else None
        loops = [loop]
        thread_loop = getattr(getattr(consumer, "_thread", None), "thread_loop", None)
        if thread_loop is not None and thread_loop is not loop:
            loops.append(thread_loop)
        log.warning("SIGUSR1: what this worker is doing\n%s--- threads", report(loops, consumer))
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)

    loop.add_signal_handler(signal.SIGUSR1, dump)
