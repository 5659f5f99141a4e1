"""``memstream install|uninstall HOST``: memstream's hooks and MCP server in each coding CLI's own settings.

Every hook runs ``<absolute memstream> hook <host> --data-dir <absolute data dir>`` (capture events, and
SessionStart for the [MEMORY] block); the MCP server entry runs ``<memstream> mcp`` over stdio. Installing
twice changes nothing; every other setting is kept (JSON key order; TOML through tomlkit, comments and
layout included); uninstall removes exactly the entries whose command is memstream's own, and a settings
file left empty by it. Where each host reads them (from its sources and docs):

- claude-code: hooks in ``.claude/settings.json`` (project) or ``~/.claude/settings.json`` (user), as
  ``hooks.<Event>[].hooks[]``; the MCP server in ``.mcp.json`` (project) or ``~/.claude.json`` (user).
- codex: ``.codex/config.toml`` or ``~/.codex/config.toml``: ``[[hooks.<Event>]]`` groups,
  ``[mcp_servers.memstream]``, and (user scope, when no notify program is set yet) ``notify``.
- gemini: ``.gemini/settings.json`` or ``~/.gemini/settings.json``: ``hooks.<Event>[].hooks[]`` and
  ``mcpServers``.
- kimi: ``~/.kimi/config.toml``: ``[[hooks]]`` tables with ``event`` and ``command`` (user scope only);
  the MCP server in ``~/.kimi/mcp.json``.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstream.settings import Settings

#: The events memstream's hook command is registered for, per host: capture events, then SessionStart.
EVENTS: dict[str, tuple[str, ...]] = {
    "claude-code": ("Stop", "SubagentStop", "SessionEnd", "SessionStart"),
    "codex": ("Stop", "SessionStart"),
    "gemini": ("AfterAgent", "SessionEnd", "SessionStart"),
    "kimi": ("Stop", "SessionEnd", "SessionStart"),
}
SERVER = "memstream"


class InstallError(ValueError):
    """The host cannot be configured as asked; the message says why."""


@dataclass(frozen=True)
class Change:
    """One settings file, as it is and as it would be (None: absent)."""

    path: Path
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                (self.before or "").splitlines(keepends=True),
                (self.after or "").splitlines(keepends=True),
                fromfile=str(self.path) if self.before is not None else "/dev/null",
                tofile=str(self.path) if self.after is not None else "/dev/null",
            )
        )


def memstream_executable() -> str:
    """The absolute path of the ``memstream`` command this Python runs."""
    beside = Path(sys.executable).with_name("memstream")
    if beside.is_file():
        return str(beside)
    found = shutil.which("memstream")
    if found:
        return str(Path(found).resolve())
    raise InstallError("cannot find the memstream executable beside this Python nor on PATH")


def hook_command(executable: str, host: str, data_dir: Path) -> str:
    return shlex.join([executable, "hook", host, "--data-dir", str(data_dir)])


def is_ours(command: Any, host: str) -> bool:
    """Whether a hook command is memstream's own for this host (whatever path it was installed from)."""
    if isinstance(command, list):
        argv = [str(part) for part in command]
    elif isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return False
    else:
        return False
    return len(argv) >= 3 and Path(argv[0]).name == "memstream" and argv[1:3] == ["hook", host]


def plan(
    host: str,
    settings: Settings,
    *,
    project: Path | None,
    home: Path,
    remove: bool = False,
    executable: str | None = None,
) -> list[Change]:
    """The changes ``install`` (or, with ``remove``, ``uninstall``) makes for ``host``."""
    if host not in EVENTS:
        raise InstallError(f"unknown host {host!r} (expected one of: {', '.join(EVENTS)})")
    exe = executable or memstream_executable()
    data_dir = settings.data_dir.expanduser().resolve()
    command = hook_command(exe, host, data_dir)
    server = {"command": exe, "args": ["mcp"], "env": {"MEMSTREAM_DATA_DIR": str(data_dir)}}
    if host == "claude-code":
        base = project / ".claude" if project else home / ".claude"
        mcp_file = project / ".mcp.json" if project else home / ".claude.json"
        return [
            _json_change(base / "settings.json", lambda d: _json_hooks(d, host, command, remove)),
            _json_change(mcp_file, lambda d: _json_server(d, dict(server, type="stdio"), remove)),
        ]
    if host == "gemini":
        path = project / ".gemini" / "settings.json" if project else settings.gemini_dir.expanduser() / "settings.json"

        def gemini(data: dict[str, Any]) -> None:
            _json_hooks(data, host, command, remove)
            _json_server(data, server, remove)

        return [_json_change(path, gemini)]
    if host == "codex":
        path = project / ".codex" / "config.toml" if project else settings.codex_dir.expanduser() / "config.toml"
        notify = None if project else [exe, "hook", host, "--data-dir", str(data_dir)]
        return [_toml_change(path, lambda doc: _codex(doc, host, command, notify, server, remove))]
    if project is not None:
        raise InstallError("Kimi CLI reads hooks from its user config only: use --user")
    kimi = settings.kimi_dir.expanduser()
    return [
        _toml_change(kimi / "config.toml", lambda doc: _kimi(doc, host, command, remove)),
        _json_change(kimi / "mcp.json", lambda d: _json_server(d, server, remove)),
    ]


def apply(changes: list[Change]) -> None:
    """Write every changed file atomically (a temporary file renamed over it); delete emptied ones."""
    for change in changes:
        if not change.changed:
            continue
        if change.after is None:
            change.path.unlink(missing_ok=True)
            continue
        change.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = change.path.with_name(f".{change.path.name}.memstream-tmp")
        tmp.write_text(change.after)
        if change.path.exists():
            os.chmod(tmp, change.path.stat().st_mode & 0o777)
        os.replace(tmp, change.path)


# --- JSON hosts ------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _json_change(path: Path, edit: Any) -> Change:
    before = _read(path)
    try:
        data = json.loads(before) if before and before.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}): fix it first, memstream will not overwrite it") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object")
    edit(data)
    if not data:
        after = None if before is None or not before.strip() or json.loads(before) != {} else before
        return Change(path, before, after if before is not None else None)
    after = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if before is not None and _same_json(before, data):
        after = before  # nothing to change: leave the file byte for byte
    return Change(path, before, after)


def _same_json(text: str, data: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(text) == data)
    except ValueError:
        return False


def _json_hooks(data: dict[str, Any], host: str, command: str, remove: bool) -> None:
    hooks = data.get("hooks")
    if hooks is None:
        if remove:
            return
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise InstallError("the settings' 'hooks' is not an object")
    for event in EVENTS[host]:
        groups = hooks.get(event) or []
        kept = []
        present = False
        for group in groups:
            entries = group.get("hooks", []) if isinstance(group, dict) else []
            ours = [h for h in entries if isinstance(h, dict) and is_ours(h.get("command"), host)]
            if remove and ours:
                rest = [h for h in entries if h not in ours]
                if rest:
                    kept.append({**group, "hooks": rest})
                continue
            present = present or any(h.get("command") == command for h in ours)
            kept.append(group)
        if not remove and not present:
            kept.append({"hooks": [{"type": "command", "command": command}]})
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
    if not hooks:
        data.pop("hooks", None)


def _json_server(data: dict[str, Any], server: dict[str, Any], remove: bool) -> None:
    servers = data.get("mcpServers")
    if remove:
        if isinstance(servers, dict) and isinstance(servers.get(SERVER), dict) and _server_is_ours(servers[SERVER]):
            del servers[SERVER]
            if not servers:
                del data["mcpServers"]
        return
    if servers is None:
        servers = data["mcpServers"] = {}
    servers[SERVER] = server


def _server_is_ours(entry: Any) -> bool:
    return Path(str(entry.get("command", ""))).name == "memstream" and list(entry.get("args", [])) == ["mcp"]


# --- TOML hosts ------------------------------------------------------------------------


def _toml_change(path: Path, edit: Any) -> Change:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    before = _read(path)
    try:
        doc = tomlkit.parse(before or "")
    except TOMLKitError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}): fix it first, memstream will not overwrite it") from None
    original = tomlkit.parse(before or "").unwrap()
    edit(doc)
    if before is not None and doc.unwrap() == original:
        return Change(path, before, before)  # nothing to change: leave the file byte for byte
    after = tomlkit.dumps(doc)
    if not after.strip():
        return Change(path, before, None if before is None or not before.strip() else before)
    # Removing tables leaves the blank lines that preceded them at the end.
    return Change(path, before, after.rstrip("\n") + "\n")


def _codex(doc: Any, host: str, command: str, notify: list[str] | None, server: dict[str, Any], remove: bool) -> None:
    import tomlkit

    if remove:
        if is_ours(doc.get("notify"), host):
            del doc["notify"]
    elif notify is not None and "notify" not in doc:
        # A top-level key: tomlkit places it before the first table. An existing notify program is the
        # user's: it is left alone (Codex runs one), and the Stop hook captures instead.
        doc.add("notify", notify)
    hooks = doc.get("hooks")
    if hooks is None and not remove:
        hooks = doc["hooks"] = tomlkit.table(is_super_table=True)
    if hooks is not None:
        for event in EVENTS[host]:
            groups = hooks.get(event)
            kept = tomlkit.aot()
            present = False
            for group in groups or []:
                entries = [h for h in group.get("hooks", [])]
                ours = [h for h in entries if is_ours(h.get("command"), host)]
                if remove and ours:
                    rest = [h for h in entries if not is_ours(h.get("command"), host)]
                    if rest:
                        group["hooks"] = rest
                        kept.append(group)
                    continue
                present = present or any(h.get("command") == command for h in ours)
                kept.append(group)
            if not remove and not present:
                entry = tomlkit.table()
                entry.add("type", "command")
                entry.add("command", command)
                group = tomlkit.table()
                group.add("hooks", tomlkit.aot())
                group["hooks"].append(entry)
                kept.append(group)
            if kept:
                hooks[event] = kept
            elif event in hooks:
                del hooks[event]
        if not hooks:
            del doc["hooks"]
    servers = doc.get("mcp_servers")
    if remove:
        if servers is not None and SERVER in servers and _server_is_ours(servers[SERVER]):
            del servers[SERVER]
            if not servers:
                del doc["mcp_servers"]
        return
    if servers is None:
        servers = doc["mcp_servers"] = tomlkit.table(is_super_table=True)
    table = tomlkit.table()
    table.add("command", server["command"])
    table.add("args", server["args"])
    table.add("env", server["env"])
    servers[SERVER] = table


def _kimi(doc: Any, host: str, command: str, remove: bool) -> None:
    import tomlkit

    hooks = doc.get("hooks")
    kept = tomlkit.aot()
    present: set[str] = set()
    for entry in hooks or []:
        if is_ours(entry.get("command"), host):
            if remove:
                continue
            if entry.get("command") == command:
                present.add(str(entry.get("event")))
        kept.append(entry)
    if not remove:
        for event in EVENTS[host]:
            if event not in present:
                entry = tomlkit.table()
                entry.add("event", event)
                entry.add("command", command)
                kept.append(entry)
    if len(kept):
        doc["hooks"] = kept
    elif "hooks" in doc:
        del doc["hooks"]
