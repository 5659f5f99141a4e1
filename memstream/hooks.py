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


def usage() -> str:
    """``memstream hook --help``: what the command is for and how it is called."""
    return (
        "usage: memstream hook HOST [--data-dir DIR] [PAYLOAD]\n\n"
        "The command the coding CLIs' hooks run (written by `memstream install HOST`); not for typing by hand.\n"
        "It reads the hook's JSON on stdin (Codex's notify: as the last argument), answers SessionStart with\n"
        "the [MEMORY] block and captures every other event, and always exits 0 so it never breaks the agent.\n\n"
        f"HOST: one of {', '.join(HOSTS)}\n"
        "--data-dir DIR: memstream's data dir (else MEMSTREAM_DATA_DIR, else the one `install` recorded)"
    )


def main(argv: list[str], *, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """``memstream hook HOST [--data-dir DIR] [PAYLOAD]``; always 0."""
    try:
        args = list(argv)
        if args and args[0] in ("-h", "--help"):
            print(usage(), file=stdout or sys.stdout)
            return 0
        if not args:  # a person, not a hook (hooks always name their host): stdout stays a hook's answer
            print(usage(), file=sys.stderr)
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
