"""A test's event loop closes even when a task it left does not end once cancelled.

asyncio's ``Runner.close`` (which pytest-asyncio calls when a test's or module's loop is torn down)
cancels the tasks left on the loop and then waits for all of them without a bound
(``asyncio.runners._cancel_all_tasks``). A task of a Faust service that was not stopped, say after a
failed end-to-end test (an aiokafka client retrying a broker that is gone), never ends once cancelled,
so the teardown waited forever: a fresh-clone CI at load 45 sat for 30 minutes in the teardown of
``tests/e2e/test_replay_e2e.py`` and ``tests/faults/test_replay_batches.py`` on both workers, after
their tests had failed, and never reported the failures. ``memstream up`` bounds the same wait
(``memstream.commands.pipeline._end``); the tests now do too.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import warnings

#: Seconds the tasks left on a closing test loop get to end once cancelled.
LEFTOVER_SECONDS = 10.0


def cancel_left_tasks(loop: asyncio.AbstractEventLoop, seconds: float = LEFTOVER_SECONDS) -> list[asyncio.Task[object]]:
    """Cancel the tasks left on ``loop`` and wait at most ``seconds`` for them; return (and warn of) those
    that did not end. asyncio's own version waits without end."""
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    if not left:
        return []
    loop.run_until_complete(asyncio.wait(left, timeout=seconds))
    stuck = [task for task in left if not task.done()]
    for task in left:
        if task.done() and not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {"message": "unhandled exception as a test loop closed", "exception": task.exception(), "task": task}
            )
    if stuck:
        names = ", ".join(sorted(task.get_name() + ": " + repr(task.get_coro()) for task in stuck))
        warnings.warn(
            f"{len(stuck)} tasks did not end within {seconds:.0f} s of being cancelled: {names}", stacklevel=2
        )
    return stuck


def bound_loop_teardown() -> None:
    """Make asyncio's Runner (pytest-asyncio's loops) use :func:`cancel_left_tasks` when it closes."""
    asyncio.runners._cancel_all_tasks = cancel_left_tasks  # type: ignore[attr-defined]
