"""A hook's hand-off to a running ``memstream up``: the hook leaves a note and exits; ``up`` reads the file.

A capture hook used to read the session file from its checkpoint and commit the new turns to
``capture.db`` itself. With ``up`` running that cost every agent turn ~0.5 s on a loaded 2-core machine:
~0.35 s importing the capture machinery (dataclasses, the settings, the adapters) and up to 0.3 s waiting
for ``capture.db``'s write lock while ``up`` drained the spool. Neither is needed when ``up`` runs: it has
the machinery imported and owns the database. So while ``up`` takes notes (it names itself in
``<data dir>/hook-queue/taker.pid``), a hook writes its payload, as it came, to one small file in that
folder (written under a temporary name, then renamed: ``up`` never sees half a note) and exits. ``up``
takes the notes about four times a second and runs the same :func:`memstream.capture.hook.capture` on
each. When ``up`` is down the hook captures itself, into the durable spool, as before.

Nothing is lost: a note outlives a crash of either side (``up`` takes what is left when it starts), the
session file holds the turns it points to, and the checkpoint makes reading them twice harmless.

The hook's side (:func:`hand_off`) uses ``os``, ``time`` and :mod:`memstream.process` only: ``memstream.entry``
calls it before importing anything else, so a hook costs little more than the interpreter's start.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from memstream.process import identity

if TYPE_CHECKING:
    from pathlib import Path

#: The queue's folder in the data dir, and the file naming the process that takes the notes.
QUEUE = "hook-queue"
TAKER = "taker.pid"
#: A note's name ends with ``.<host>`` and this suffix; its content is the hook's payload as received.
SUFFIX = ".json"
#: Payloads never handed off: the CLI waits for SessionStart's answer (the [MEMORY] block).
ANSWERED = b"SessionStart"


def taker_alive(data_dir: str) -> bool:
    """Whether the ``memstream up`` that claimed ``data_dir``'s notes still runs: its pid file holds its pid
    and its exact identity (:mod:`memstream.process`), which a reused pid cannot match."""
    try:
        fd = os.open(os.path.join(data_dir, QUEUE, TAKER), os.O_RDONLY)
        try:
            pid_text, recorded = os.read(fd, 256).decode().split()
        finally:
            os.close(fd)
        pid = int(pid_text)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return pid != os.getpid() and identity(pid) == recorded


def hand_off(data_dir: str, host: str, payload: bytes) -> bool:
    """Leave ``payload`` for the ``up`` taking notes on ``data_dir``; False (nothing written) if none runs
    or if the payload is one the CLI waits an answer for."""
    if ANSWERED in payload or not host.replace("-", "").isalnum() or not taker_alive(data_dir):
        return False
    folder = os.path.join(data_dir, QUEUE)
    name = f"{time.time_ns()}-{os.getpid()}.{host}{SUFFIX}"
    partial = os.path.join(folder, f".{name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.rename(partial, os.path.join(folder, name))
    return True


# --- up's side ---------------------------------------------------------------------------


def claim(data_dir: Path) -> None:
    """Name this process as the one taking notes on ``data_dir``."""
    folder = data_dir / QUEUE
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{TAKER}.partial"
    # "<pid> <identity>", with its newline: sh's `read` fails on a last line without one.
    partial.write_text(f"{os.getpid()} {identity(os.getpid())}\n")
    os.replace(partial, folder / TAKER)


def release(data_dir: Path) -> None:
    """Stop taking notes: hooks capture by themselves again (the file is removed if it still names us)."""
    path = data_dir / QUEUE / TAKER
    try:
        if path.read_text().split()[0] == str(os.getpid()):
            path.unlink()
    except (OSError, ValueError):
        pass


def pending_notes(data_dir: Path) -> list[Path]:
    """The notes waiting, oldest first."""
    found = []
    try:
        for path in (data_dir / QUEUE).iterdir():
            if path.suffix == SUFFIX and not path.name.startswith("."):
                try:
                    found.append((path.stat().st_mtime_ns, path))
                except FileNotFoundError:
                    continue
    except FileNotFoundError:
        return []
    return [path for _, path in sorted(found)]


def read_note(path: Path) -> tuple[str, float, dict[str, Any]] | None:
    """A note's host (its name is ``<unique>.<host>.json``), the time its hook ran and its payload (None
    for a note that is not one)."""
    import json

    parts = path.name[: -len(SUFFIX)].split(".", 1)
    try:
        written = path.stat().st_mtime
        payload = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if len(parts) != 2 or not isinstance(payload, dict):
        return None
    return parts[1], written, payload


#: The hook command ``memstream install`` writes (as ``<data dir>/hook-bin/memstream``): the hand-off in
#: POSIX shell, which starts in a few milliseconds where Python needs ~100 ms on a loaded machine, and
#: the Python hook for everything else (``up`` down, SessionStart, Codex's notify with its argument).
HOOK_SCRIPT = """#!/bin/sh
# memstream's hook, written by `memstream install` (and rewritten by each install): while a `memstream up`
# takes notes on the data dir, the payload is left for it in hook-queue/ (memstream.capture.handoff);
# otherwise, and for SessionStart, the Python hook runs.
real={real}
queue={queue}
# Whether process $1 is the very one whose identity up recorded as $2 (memstream.process): the boot id and
# the start time, field 22 of /proc/PID/stat, so a pid reused after a crash is never taken for up.
same_process() {{
    [ -d /proc/self ] || {{ [ "$2" = "pid:$1" ] && kill -0 "$1" 2>/dev/null; return; }}
    {{ read -r boot < /proc/sys/kernel/random/boot_id && read -r stat < "/proc/$1/stat"; }} 2>/dev/null || return 1
    set -- "$2" "$boot" ${{stat##*) }}
    [ "$1" = "$2:${{22}}" ]
}}
pid= ident=
if [ "$#" -eq 4 ] && [ "$1" = hook ] && [ -r "$queue/taker.pid" ] \
    && {{ read -r pid ident < "$queue/taker.pid" || [ -n "$ident" ]; }} && same_process "$pid" "$ident"; then
    note=$(mktemp "$queue/.XXXXXX") || exec "$real" "$@"
    cat > "$note"
    if grep -q SessionStart "$note"; then
        "$real" "$@" < "$note"
        status=$?
        rm -f "$note"
        exit $status
    fi
    mv "$note" "$queue/${{note##*/.}}-$$.$2.json" && exit 0
fi
exec "$real" "$@"
"""


def hook_script(real: str, data_dir: Path) -> str:
    """The hook script for the memstream executable ``real`` and ``data_dir``."""
    import shlex

    return HOOK_SCRIPT.format(real=shlex.quote(real), queue=shlex.quote(str(data_dir / QUEUE)))


def run_marker(data_dir: Path, host: str, event: str) -> Path:
    """The file whose mtime says when a host's hook for an event last ran (``memstream install --check``)."""
    name = "".join(c for c in event if c.isalnum() or c in "-_") or "unknown"
    return data_dir / "hook-runs" / f"{host}.{name}"


def mark_run(data_dir: Path, host: str, event: str, when: float | None = None) -> None:
    """Note that a hook ran (now, or at ``when``): one file's mtime."""
    marker = run_marker(data_dir, host, event)
    try:
        marker.touch()
    except FileNotFoundError:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    if when is not None:
        os.utime(marker, (when, when))
