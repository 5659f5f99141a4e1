"""``memstream hook <host>``: the one command every coding CLI's hooks run. It never fails the agent.

A minimal dispatcher: read the payload (JSON on stdin; for Codex's ``notify``, the last argument), route by
its event, print what the handler returns (nothing, except where the host reads JSON back), and exit 0
whatever happens. ``SessionStart`` goes to :func:`memstream.recall.session_start.hook_output` (the [MEMORY] block
as the host's additional context); every other event is capture (:mod:`memstream.capture.hook`).
Imports stay light: no Faust, no Kafka client, no SDK.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import IO, Any

from memstream import hosts

#: The hosts, as ``memstream hook`` and ``memstream install`` name them.
HOSTS = hosts.NAMES
USAGE = f"""usage: memstream hook HOST [--data-dir DIR] [PAYLOAD]

A coding agent's hook (memstream install writes it into the CLI's settings): captures the session's new
turns; at SessionStart prints the [MEMORY] block. It never fails the agent (exit status 0).

  HOST            {", ".join(HOSTS)}
  --data-dir DIR  memstream's data dir (default: MEMSTREAM_DATA_DIR, else the one install recorded)
  PAYLOAD         the hook's JSON when the CLI passes it as an argument (Codex notify); else read on stdin"""
#: Events that start a session: answered with memory, not captured.
SESSION_START = "SessionStart"


def read_payload(args: list[str], stdin: IO[str]) -> dict[str, Any]:
    """The hook's JSON: Codex's ``notify`` passes it as the last argument, every other hook on stdin."""
    if args and args[-1].lstrip().startswith("{"):
        text = args[-1]
    elif stdin.isatty():
        return {}
    else:
        text = stdin.read()
    try:
        payload = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def dispatch(host: str, payload: dict[str, Any], *, data_dir: str = "") -> str:
    """What to print for one hook call (usually nothing). Raises on failure; :func:`main` swallows it."""
    from memstream.capture.handoff import hand_off, mark_run

    directory = resolve_data_dir(host, data_dir)
    event = str(payload.get("hook_event_name") or payload.get("type") or "")
    # A running `memstream up` reads the session file itself: the hook leaves a note and exits,
    # without importing the capture machinery or waiting for capture.db (memstream.capture.handoff).
    # `up` marks the run when it takes the note.
    if event != SESSION_START and hand_off(str(directory), host, json.dumps(payload).encode()):
        return ""
    mark_run(directory, host, event)
    from memstream.settings import Settings

    settings = Settings.from_env(data_dir=directory)
    if event == SESSION_START:
        try:
            from memstream.recall.session_start import hook_output

            return str(hook_output(host, payload, settings) or "")
        except Exception:  # the recall side answers or says nothing: never a failed session
            return ""
    from memstream.capture.hook import capture

    capture(host, payload, settings)
    return ""


def resolve_data_dir(host: str, given: str = "") -> Path:
    """The hook's data dir: ``--data-dir``, else ``MEMSTREAM_DATA_DIR``, else the one ``memstream install
    HOST`` recorded (a hook in a committed file names none), else the default."""
    import os

    if given:
        return Path(given)
    if os.environ.get("MEMSTREAM_DATA_DIR"):
        return Path(os.environ["MEMSTREAM_DATA_DIR"])
    from memstream.capture.install_record import installed_data_dir

    from_install = installed_data_dir(host)
    if from_install is not None:
        return from_install
    return Path(".memstream")  # Settings' default, without importing the settings on a hook's path


def main(argv: list[str], *, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """``memstream hook HOST [--data-dir DIR] [PAYLOAD]``; always 0."""
    try:
        args = list(argv)
        if args[:1] in (["--help"], ["-h"]):
            print(USAGE, file=stdout or sys.stdout)
            return 0
        if not args:  # a person, not a hook (hooks always name their host): stdout stays a hook's answer
            print(USAGE, file=sys.stderr)
            return 0
        host = args.pop(0)
        data_dir = ""
        if "--data-dir" in args:
            at = args.index("--data-dir")
            data_dir = args[at + 1] if at + 1 < len(args) else ""
            del args[at : at + 2]
        if host not in HOSTS:
            print(f"memstream hook: unknown host {host!r} (expected one of: {', '.join(HOSTS)})", file=sys.stderr)
            return 0
        output = dispatch(host, read_payload(args, stdin or sys.stdin), data_dir=data_dir)
        if output:
            print(output, file=stdout or sys.stdout)
    except BaseException as exc:  # a hook never breaks the agent, whatever happened
        with contextlib.suppress(Exception):
            print(f"memstream hook: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0
