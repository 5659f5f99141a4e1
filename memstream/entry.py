"""The ``memstream`` console script: ``memstream hook`` straight to its light dispatcher, all else to the CLI.

A coding CLI runs ``memstream hook`` after every turn; it must not pay for the CLI module's imports
(asyncio, urllib, argparse's full parser) before exiting. Measured under load: the CLI's imports took
~200 ms of a hook's start-to-exit, the dispatcher's own well under half of that. And when a ``memstream
up`` takes the hooks' notes on the hook's data dir, the payload is handed to it here, with nothing
imported but ``os`` and ``time`` (:mod:`memstream.capture.handoff`): the hook then costs about what the
interpreter's start costs.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        return hook(sys.argv[2:])
    from memstream.cli import main as cli_main

    return cli_main()


def hook(args: list[str]) -> int:
    """``memstream hook HOST [--data-dir DIR]``: hand off to a running ``up``, else the full hook."""
    stdin = None
    try:
        given = args.index("--data-dir") + 1 if "--data-dir" in args else 0
        data_dir = args[given] if 0 < given < len(args) else os.environ.get("MEMSTREAM_DATA_DIR", "")
        # Codex's notify passes its JSON as the last argument: the full hook reads that.
        on_stdin = bool(args) and not args[-1].lstrip().startswith("{") and sys.stdin is not None
        if data_dir and on_stdin and not sys.stdin.isatty():
            from memstream.capture.handoff import hand_off, taker_alive

            if taker_alive(data_dir):
                payload = sys.stdin.buffer.read()
                if hand_off(data_dir, args[0], payload):
                    return 0
                import io

                stdin = io.StringIO(payload.decode("utf-8", errors="replace"))
    except Exception:  # the full hook below decides; a hook never fails the agent
        pass
    from memstream.hooks import main as hook_main

    return hook_main(args, stdin=stdin)
