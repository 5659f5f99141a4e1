"""A process's exact identity, so that a pid written in a file is never taken for a later process.

Pids are reused: after a crash or a reboot, the pid in ``runtime.json`` or in the hooks' ``taker.pid``
may name any process, even another memstream one (a hook, ``memstream mcp``), whose command line says
"memstream" as well. The boot id together with the process's start time (``/proc/<pid>/stat`` field 22,
clock ticks since boot) names one process and no other. Uses ``os`` only: a hook imports it.
"""

from __future__ import annotations

import os

#: Where there is no /proc (not Linux), "alive" is the best that can be said: the pid alone.
_PROC = "/proc"


def identity(pid: int) -> str | None:
    """``<boot id>:<start time>`` of process ``pid`` (``pid:<pid>`` without /proc); None: no such process."""
    if not os.path.isdir(os.path.join(_PROC, "self")):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return f"pid:{pid}"
    try:
        stat = _read(os.path.join(_PROC, str(pid), "stat"))
        boot = _read(os.path.join(_PROC, "sys", "kernel", "random", "boot_id")).strip()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count the fields after its ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    return f"{boot}:{fields[19]}"


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode()
    finally:
        os.close(fd)
