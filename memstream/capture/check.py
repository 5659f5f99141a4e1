"""``memstream install --check HOST``, and who uses a data dir: can the user see that capture works?

For a host: which of memstream's hooks its settings hold (and the data dir each one writes to), when each
last ran (``memstream hook`` touches ``<data dir>/hook-runs/<host>.<event>``), and whether the spool is
being sent (turns waiting, the last send, whether a ``memstream up`` runs on that data dir).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstream.capture import jsonc
from memstream.capture.handoff import pending_notes, run_marker
from memstream.capture.install import EVENTS, is_ours, kimi_homes
from memstream.capture.install_record import installed_data_dir
from memstream.settings import Settings


@dataclass
class Installed:
    """memstream's hook commands found in a host's settings, by event, and the files read."""

    commands: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def hook_files(host: str, settings: Settings, project: Path | None, home: Path) -> list[Path]:
    """The settings files that hold a host's hooks, in the scope asked."""
    if host == "claude-code":
        return (
            [project / ".claude" / "settings.local.json", project / ".claude" / "settings.json"]
            if project
            else [settings.claude_dir.expanduser() / "settings.json"]
        )
    if host == "gemini":
        return (
            [project / ".gemini" / "settings.json"] if project else [settings.gemini_dir.expanduser() / "settings.json"]
        )
    if host == "codex":
        return [project / ".codex" / "config.toml"] if project else [settings.codex_dir.expanduser() / "config.toml"]
    return [kimi / "config.toml" for kimi in kimi_homes(settings, installing=False)]


def installed_hooks(host: str, settings: Settings, project: Path | None, home: Path) -> Installed:
    found = Installed()
    for path in hook_files(host, settings, project, home):
        try:
            text = path.read_text()
            data: Any = tomllib.loads(text) if path.suffix == ".toml" else jsonc.loads(text)
        except (FileNotFoundError, ValueError):
            continue
        found.files.append(path)
        hooks = data.get("hooks") if isinstance(data, dict) else None
        pairs: list[tuple[str, Any]] = []
        if isinstance(hooks, list):  # kimi: [[hooks]] tables with event and command
            pairs = [(str(h.get("event")), h.get("command")) for h in hooks if isinstance(h, dict)]
        elif isinstance(hooks, dict):
            for event, groups in hooks.items():
                for group in groups if isinstance(groups, list) else []:
                    entries = group.get("hooks") if isinstance(group, dict) else None
                    for entry in entries if isinstance(entries, list) else []:
                        if isinstance(entry, dict):
                            pairs.append((str(event), entry.get("command")))
        for event, command in pairs:
            if is_ours(command, host):
                found.commands.setdefault(event, []).append(str(command))
    return found


def not_runnable(command: str) -> str:
    """Why a hook command cannot run here ('' when it can): its program is missing or not on PATH."""
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        return f"cannot parse {command!r}"
    if os.sep in program:
        return "" if os.access(program, os.X_OK) else f"{program} does not exist or is not executable"
    return "" if shutil.which(program) else f"`{program}` is not on PATH"


def command_data_dir(command: str, host: str) -> Path:
    """The data dir a hook command writes to (its ``--data-dir``, else the install record's)."""
    argv = shlex.split(command)
    if "--data-dir" in argv and argv.index("--data-dir") + 1 < len(argv):
        return Path(argv[argv.index("--data-dir") + 1])
    return installed_data_dir(host) or Settings().data_dir.resolve()


def running_data_dirs() -> list[Path]:
    """The data dirs of the ``memstream up`` processes running on this machine (Linux; else none)."""
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not any(a.endswith(b"memstream") for a in argv) or b"up" not in argv:
                continue
            env = dict(
                line.split(b"=", 1) for line in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in line
            )
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        data_dir = (cwd / os.fsdecode(env.get(b"MEMSTREAM_DATA_DIR", b".memstream"))).resolve()
        try:
            if int(json.loads((data_dir / "runtime.json").read_text())["pid"]) == int(pid):
                found.append(data_dir)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(set(found))


def data_dir_warning(data_dir: Path, *, chosen: bool) -> str | None:
    """A warning when no running or configured memstream uses ``data_dir`` (None: one does).

    ``chosen``: the user named it (``--data-dir`` or ``MEMSTREAM_DATA_DIR``), which is configuration.
    """
    from memstream.runtime import read_runtime_file

    settings = Settings.from_env(data_dir=data_dir)
    if read_runtime_file(settings) is not None or chosen:
        return None
    others = [d for d in running_data_dirs() if d != data_dir]
    hint = (
        f"memstream up runs on {', '.join(map(str, others))}: install with --data-dir {others[0]}"
        if others
        else f"start memstream with MEMSTREAM_DATA_DIR={data_dir} (or from {data_dir.parent}), or install "
        "with --data-dir naming the data dir your memstream up uses"
    )
    return f"no running or configured memstream uses {data_dir}: the hooks would spool where nothing reads. {hint}"


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def check(host: str, settings: Settings, *, project: Path | None, home: Path) -> tuple[int, list[str]]:
    """The report's lines, and the exit status: 0 when every hook is installed, 1 otherwise."""
    from memstream.capture.spool import SENT_MARKER, pending
    from memstream.runtime import read_runtime_file

    found = installed_hooks(host, settings, project, home)
    lines = [f"{host}: settings read: {', '.join(map(str, found.files)) or 'none found'}"]
    now = time.time()
    data_dirs: set[Path] = set()
    missing = 0
    for event in EVENTS[host]:
        commands = found.commands.get(event, [])
        if not commands:
            missing += 1
            lines.append(f"  {event}: not installed")
            continue
        unrunnable = not_runnable(commands[0])
        if unrunnable:
            missing += 1
            lines.append(f"  {event}: installed but not runnable: {unrunnable}")
            continue
        data_dir = command_data_dir(commands[0], host)
        data_dirs.add(data_dir)
        marker = run_marker(data_dir, host, event)
        ran = f"last ran {_ago(now - marker.stat().st_mtime)}" if marker.exists() else "never ran"
        twice = f" ({len(commands)} entries: run {len(commands)} times)" if len(commands) > 1 else ""
        lines.append(f"  {event}: installed{twice}, {ran}, data dir {data_dir}")
    for event in sorted(set(found.commands) - set(EVENTS[host])):
        lines.append(f"  {event}: a hook memstream no longer installs: run `memstream install {host}` to remove it")
    for data_dir in sorted(data_dirs):
        local = Settings.from_env(data_dir=data_dir)
        waiting = pending(local)
        runtime = read_runtime_file(local)
        sent = data_dir / SENT_MARKER
        last = f"last sent {_ago(now - sent.stat().st_mtime)}" if sent.exists() else "never sent"
        if runtime is not None:
            state = f"memstream up runs on it (pid {runtime['pid']}): the spool is sent every second"
        elif settings.kafka_bootstrap:
            state = f"hooks send it to {settings.kafka_bootstrap}"
        else:
            state = "no memstream up runs on it: turns wait in the spool"
        lines.append(f"  spool {data_dir / 'capture.db'}: {waiting} turns waiting, {last}; {state}")
        notes = len(pending_notes(data_dir))
        if notes:
            lines.append(f"  {notes} hook notes wait for memstream up to read their session files")
        others = [d for d in running_data_dirs() if d != data_dir] if runtime is None else []
        if others:
            lines.append(
                f"  warning: memstream up runs on {', '.join(map(str, others))}, not on this data dir: "
                f"run `memstream install {host} --data-dir {others[0]}`"
            )
    return (1 if missing else 0), lines
