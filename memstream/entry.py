"""The ``memstream`` console script: ``memstream hook`` straight to its light dispatcher, all else to the CLI.

A coding CLI runs ``memstream hook`` after every turn; it must not pay for the CLI module's imports
(asyncio, urllib, argparse's full parser) before exiting. Measured under load: the CLI's imports took
~200 ms of a hook's start-to-exit, the dispatcher's own well under half of that.
"""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        from memstream.hooks import main as hook_main

        return hook_main(sys.argv[2:])
    from memstream.cli import main as cli_main

    return cli_main()
