"""``python -m memstream.capture.flusher``: send the spool once, detached from the hook that started it.

Quiet by design: nothing on stdout or stderr (the hook's host never sees it); a failure is appended to
``capture.log`` in the data dir and the spool keeps every turn for the next attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import traceback
from datetime import UTC, datetime

from memstream.auth import AuthError
from memstream.capture.spool import flush
from memstream.runtime import capture_user, publish_target
from memstream.settings import Settings


def main() -> int:
    settings = Settings.from_env()
    target = publish_target(settings)
    if target is None:
        return 0
    bootstrap, prefix = target
    settings = dataclasses.replace(settings, topic_prefix=prefix)
    try:
        # As the caller's token's user; without a usable token the turns stay spooled (a hook
        # never loses what it was handed) and `memstream up` sends them as its own user.
        user = capture_user(settings)
    except AuthError as exc:
        with (settings.data_dir / "capture.log").open("a") as log:
            log.write(f"{datetime.now(UTC).isoformat()} {exc}; the spool keeps its turns\n")
        return 0
    try:
        asyncio.run(flush(settings, bootstrap, wait=True, user=user))
    except Exception:
        with (settings.data_dir / "capture.log").open("a") as log:
            log.write(f"{datetime.now(UTC).isoformat()} flush failed; the spool keeps its turns\n")
            log.write(traceback.format_exc())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
