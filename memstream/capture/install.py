"""``memstream install|uninstall HOST``: memstream's hooks and MCP server in each coding CLI's own settings.

Install is exact and idempotent: every hook or MCP entry whose command is memstream's own (whatever binary
or data dir an earlier install wrote) is replaced by the new one, every other setting keeps its bytes
(:mod:`memstream.capture.settings_files`), and installing twice changes nothing. Uninstall removes exactly
memstream's entries, and the files and folders install created once they hold nothing else
(:mod:`memstream.capture.install_record`): install then uninstall gives back every file byte for byte.

What goes where, from each CLI's current documentation and source:

- claude-code: hooks ``Stop`` (a turn's reply), ``SessionEnd`` (the session's last reply: it declares a
  ``timeout``, because Claude Code otherwise gives all SessionEnd hooks a shared 1.5 s budget) and
  ``SessionStart`` (the [MEMORY] block), as ``hooks.<Event>[].hooks[]`` in ``~/.claude/settings.json``; the
  MCP server in ``~/.claude.json``. A project install writes the hooks into ``.claude/settings.local.json``
  (this machine's, never committed) and the MCP server into ``.mcp.json``. No ``SubagentStop``: capture
  leaves sub-agents' turns out.
- codex: ``[[hooks.Stop]]`` (one capture process per turn; ``notify`` would be a second one) and
  ``[[hooks.SessionStart]]`` groups and ``[mcp_servers.memstream]`` in ``~/.codex/config.toml`` or a
  project's ``.codex/config.toml``. Codex has no session-end event: ``memstream up`` releases a session's
  last reply once its file is quiet. Codex runs hooks only once the user trusted them (``/hooks``).
- gemini: ``AfterAgent``, ``SessionEnd`` and ``SessionStart`` hooks and ``mcpServers`` in
  ``~/.gemini/settings.json`` or a project's ``.gemini/settings.json``.
- kimi: ``[[hooks]]`` tables for ``Stop`` and ``SessionEnd`` in ``~/.kimi/config.toml`` (user scope only),
  the MCP server in ``~/.kimi/mcp.json``; the same in Kimi Code's home (``$KIMI_CODE_HOME``, ``~/.kimi-code``)
  when it is in use. No SessionStart hook: kimi-cli discards its output, so Kimi gets
  its memory through the MCP tools instead.

This machine's hook commands run ``<data dir>/hook-bin/memstream hook HOST --data-dir DIR``, a shell
script install writes (:data:`memstream.capture.handoff.HOOK_SCRIPT`): it hands the payload to a running
``memstream up`` in milliseconds and runs the Python hook otherwise. Files a team commits (a project's
``.mcp.json``, ``.gemini/settings.json``, ``.codex/config.toml``) name no path of this machine: their
commands are ``memstream …`` as found on PATH, and the hook finds its data dir in the install record.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstream import hosts
from memstream.capture import jsonc
from memstream.capture import settings_files as sf
from memstream.capture.handoff import hook_script
from memstream.capture.install_record import InstallRecord, record_path
from memstream.settings import Settings

#: The events memstream's hook command is registered for, per host: capture events, then SessionStart.
EVENTS: dict[str, tuple[str, ...]] = {host.name: host.events for host in hosts.HOSTS}
#: Per-event ``timeout`` declared in the host's unit, where the host's default is too short for a hook.
#: Claude Code gives SessionEnd hooks a shared 1.5 s budget unless one declares a longer timeout (then up
#: to 60 s); the SessionEnd hook releases the session's last reply and was measured at 1.07 s under load.
TIMEOUTS: dict[tuple[str, str], int] = {("claude-code", "SessionEnd"): 10}
SERVER = "memstream"
#: The command a committed file names: found on PATH on whichever machine runs it.
ON_PATH = "memstream"
#: The folder of the data dir that holds the hook script.
HOOK_BIN = "hook-bin"


class InstallError(ValueError):
    """The host cannot be configured as asked; the message says why."""


@dataclass(frozen=True)
class Change:
    """One settings file, as it is and as it would be (None: absent)."""

    path: Path
    before: str | None
    after: str | None
    #: Top-level keys install added to the file (``hooks``, ``mcpServers``): uninstall drops them once empty.
    added_keys: frozenset[str] = frozenset()

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def after_keys(self) -> set[str]:
        """The top-level keys of the JSON file as it will be (none for TOML or an absent file)."""
        if self.after is None or self.path.suffix != ".json":
            return set()
        data = jsonc.loads(self.after)
        return set(data) if isinstance(data, dict) else set()

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                (self.before or "").splitlines(keepends=True),
                (self.after or "").splitlines(keepends=True),
                fromfile=str(self.path) if self.before is not None else "/dev/null",
                tofile=str(self.path) if self.after is not None else "/dev/null",
            )
        )


@dataclass
class Plan:
    """What install or uninstall of one host does: the file changes and the record's update."""

    host: str
    data_dir: Path
    changes: list[Change]
    record: InstallRecord
    remove: bool
    notes: list[str] = field(default_factory=list)
    #: The hook script (``<data dir>/hook-bin/memstream``) and its text, written by install.
    script: tuple[Path, str] | None = None


def memstream_executable() -> str:
    """The absolute path of the ``memstream`` command this Python runs."""
    beside = Path(sys.executable).with_name("memstream")
    if beside.is_file():
        return str(beside)
    found = shutil.which("memstream")
    if found:
        return str(Path(found).resolve())
    raise InstallError("cannot find the memstream executable beside this Python nor on PATH")


def hook_argv(executable: str, host: str, data_dir: Path | None) -> list[str]:
    """The hook's command line; without a data dir (a committed file) the hook finds it in the record."""
    return [executable, "hook", host] + (["--data-dir", str(data_dir)] if data_dir is not None else [])


def _argv(command: Any) -> list[str] | None:
    if isinstance(command, list):
        return [str(part) for part in command]
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            return None
    return None


def is_ours(command: Any, host: str) -> bool:
    """Whether a hook command is memstream's own for this host (whatever path it was installed from)."""
    argv = _argv(command)
    return argv is not None and len(argv) >= 3 and Path(argv[0]).name == "memstream" and argv[1:3] == ["hook", host]


def server_is_ours(entry: Any) -> bool:
    """Whether an MCP server entry runs ``memstream mcp`` (from any path, with any flags after it)."""
    if not isinstance(entry, dict):
        return False
    args = entry.get("args") or []
    return Path(str(entry.get("command", ""))).name == "memstream" and list(args)[:1] == ["mcp"]


def plan(
    host: str,
    settings: Settings,
    *,
    project: Path | None,
    home: Path,
    remove: bool = False,
    executable: str | None = None,
) -> Plan:
    """The changes ``install`` (or, with ``remove``, ``uninstall``) makes for ``host``."""
    if host not in EVENTS:
        raise InstallError(f"unknown host {host!r} (expected one of: {', '.join(EVENTS)})")
    if project is not None and "project" not in hosts.BY_NAME[host].install_scopes:
        raise InstallError(f"{host} reads its hooks from its user config only: use --user")
    if project is not None and not remove and shutil.which(ON_PATH) is None:
        # A project's shared files run `memstream` from PATH; here it is not there (a venv install, not
        # activated): the CLI would run a command that does not exist, and capture nothing.
        raise InstallError(
            f"`{ON_PATH}` is not on PATH here, and a project's shared files run it from PATH: put memstream on "
            f"PATH (activate its venv, or install it with pipx or uv tool) and install again, or install for "
            f"this user only (without --project)"
        )
    record = InstallRecord.load(record_path(home))
    exe = executable or (ON_PATH if remove else memstream_executable())
    data_dir = settings.data_dir.expanduser().resolve()
    # This machine's hooks run the hook script in the data dir: it hands a turn to a running `up` in a
    # few milliseconds and runs `exe` otherwise (memstream.capture.handoff).
    script = data_dir / HOOK_BIN / "memstream"
    local_command = shlex.join(hook_argv(str(script), host, data_dir))
    # A file a team commits names the command on PATH and no data dir (the record has it).
    shared_command = shlex.join(hook_argv(ON_PATH, host, None))
    local_server = {"command": exe, "args": ["mcp"], "env": {"MEMSTREAM_DATA_DIR": str(data_dir)}}
    shared_server = {"command": ON_PATH, "args": ["mcp", "--host", host]}
    created = record.created

    def js(path: Path, edit: Callable[[dict[str, Any]], None]) -> Change:
        return _json_change(path, edit, created)

    def hooks_and_server(command: str, server: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        def edit(data: dict[str, Any]) -> None:
            _json_hooks(data, host, None if remove else command)
            _json_server(data, None if remove else server)

        return edit

    changes: list[Change]
    if host == "claude-code":
        if project is None:
            claude = settings.claude_dir.expanduser()
            changes = [
                js(
                    claude / "settings.json",
                    lambda d: _json_hooks(d, host, None if remove else local_command),
                ),
                js(
                    claude_global_config(claude, home),
                    lambda d: _json_server(d, None if remove else dict(local_server, type="stdio")),
                ),
            ]
        else:
            changes = [
                js(
                    project / ".claude" / "settings.local.json",
                    lambda d: _json_hooks(d, host, None if remove else local_command),
                ),
                js(
                    project / ".mcp.json",
                    lambda d: _json_server(d, None if remove else dict(shared_server, type="stdio")),
                ),
            ]
    elif host == "gemini":
        if project is None:
            path = settings.gemini_dir.expanduser() / "settings.json"
            changes = [js(path, hooks_and_server(local_command, local_server))]
        else:
            changes = [js(project / ".gemini" / "settings.json", hooks_and_server(shared_command, shared_server))]
    elif host == "codex":
        if project is None:
            path = settings.codex_dir.expanduser() / "config.toml"
            changes = [_codex_change(path, host, None if remove else (local_command, local_server), created)]
        else:
            path = project / ".codex" / "config.toml"
            changes = [_codex_change(path, host, None if remove else (shared_command, shared_server), created)]
    else:
        changes = [
            change
            for kimi in kimi_homes(settings, installing=not remove)
            for change in (
                _kimi_change(kimi / "config.toml", host, None if remove else local_command, created),
                js(kimi / "mcp.json", lambda d: _json_server(d, None if remove else local_server)),
            )
        ]
    text = None if remove else (script, hook_script(exe, data_dir))
    return Plan(host, data_dir, changes, record, remove, notes=_notes(host, project, remove), script=text)


def kimi_homes(settings: Settings, *, installing: bool = True) -> list[Path]:
    """The Kimi homes whose ``config.toml`` (``[[hooks]]``) and ``mcp.json`` memstream writes: kimi-cli's
    (``KIMI_SHARE_DIR``, ``~/.kimi``), and Kimi Code's (``KIMI_CODE_HOME``, ``~/.kimi-code``, which reads the
    same ``[[hooks]]`` tables) when it is in use: its folder exists or its variable names one. Uninstalling
    looks in both."""
    homes = [settings.kimi_dir.expanduser()]
    code = settings.kimi_code_dir.expanduser()
    if not installing or code.exists() or settings.kimi_code_dir != Settings().kimi_code_dir:
        homes.append(code)
    return homes


def claude_global_config(claude_dir: Path, home: Path) -> Path:
    """Claude Code's global config (its MCP servers): ``~/.claude.json``, or inside ``CLAUDE_CONFIG_DIR``
    once that moves its home."""
    return home / ".claude.json" if claude_dir == home / ".claude" else claude_dir / ".claude.json"


def _notes(host: str, project: Path | None, remove: bool) -> list[str]:
    """What the user must know or do after installing for this host."""
    if remove:
        return []
    notes = []
    if host == "codex":
        notes.append(
            "Codex runs hooks only after you review and trust them: start `codex`, type /hooks and trust "
            "memstream's Stop and SessionStart hooks (again whenever their command changes, e.g. after "
            "installing with another data dir). Codex versions whose hooks are still behind a feature flag "
            "also need `codex_hooks = true` under [features] in config.toml (today's flag, `hooks`, is on by "
            "default)."
        )
        if project is not None:
            notes.append(
                "Codex reads a project's .codex/config.toml only once the project is trusted "
                f'([projects."{project}"] trust_level = "trusted" in ~/.codex/config.toml).'
            )
    if host == "kimi":
        notes.append(
            "Kimi CLI discards a SessionStart hook's output, so no [MEMORY] block is injected: Kimi reaches "
            "memory through memstream's MCP tools (search, remember), registered in ~/.kimi/mcp.json."
        )
    if project is not None:
        notes.append(
            f"The project's shared files run `memstream` from PATH ({shutil.which(ON_PATH)}); they hold no path "
            "of this machine."
        )
    return notes


def apply(planned: Plan) -> None:
    """Write every changed file atomically (a temporary file renamed over it); delete emptied ones; keep the
    record of what was created, and of the host's data dir."""
    record = planned.record
    for change in planned.changes:
        if not change.changed:
            continue
        key = str(change.path)
        gone = {k for k in record.created if k.startswith(f"{key}#") and k.split("#", 1)[1] not in change.after_keys()}
        record.created -= gone
        if change.after is None:
            change.path.unlink(missing_ok=True)
            record.created.discard(key)
            _remove_created_dirs(change.path.parent, record)
            continue
        _make_dirs(change.path.parent, record)
        if change.before is None:
            record.created.add(key)
        record.created.update(f"{key}#{name}" for name in change.added_keys)
        tmp = change.path.with_name(f".{change.path.name}.memstream-tmp")
        tmp.write_text(change.after)
        if change.path.exists():
            os.chmod(tmp, change.path.stat().st_mode & 0o777)
        os.replace(tmp, change.path)
    if planned.remove:
        was = record.data_dirs.pop(planned.host, None)
        if was is not None and was not in record.data_dirs.values():
            _remove_hook_script(Path(was), record)  # no host's hooks run it any more
        if not record.data_dirs:
            # No host's install is left: a folder install made that others have filled since (the data
            # dir's spool, a CLI's sessions) is theirs now, and a created file still there holds their
            # settings. Forget them, so the record (and its folders) goes too.
            record.created = {p for p in record.created if not p.endswith(os.sep) and not Path(p).exists()}
    else:
        record.data_dirs[planned.host] = str(planned.data_dir)
    if planned.script is not None:
        path, text = planned.script
        _make_dirs(path.parent, record)
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, path)
    record.save()


def _remove_hook_script(data_dir: Path, record: InstallRecord) -> None:
    script = data_dir / HOOK_BIN / "memstream"
    script.unlink(missing_ok=True)
    # Its folder, and the data dir too if install made it and nothing else was put there since.
    _remove_created_dirs(script.parent, record)


def _make_dirs(folder: Path, record: InstallRecord) -> None:
    """Create ``folder`` and its missing parents, recording each as install's (uninstall removes them)."""
    for parent in reversed([folder, *folder.parents]):
        if not parent.exists():
            parent.mkdir()
            record.created.add(str(parent) + os.sep)


def _remove_created_dirs(folder: Path, record: InstallRecord) -> None:
    """Remove the folders install created, from ``folder`` up, while they are empty."""
    while str(folder) + os.sep in record.created:
        try:
            folder.rmdir()
        except OSError:  # not empty: the user (or the CLI) put something there
            return
        record.created.discard(str(folder) + os.sep)
        folder = folder.parent


# --- JSON hosts ------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _json_change(path: Path, edit: Callable[[dict[str, Any]], None], created: set[str]) -> Change:
    before = _read(path)
    try:
        data = jsonc.loads(before) if before and before.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}): fix it first, memstream will not overwrite it") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object")
    original = json.loads(json.dumps(data))
    edit(data)
    # A container memstream's removal emptied goes only if memstream added it: the user's own
    # `"mcpServers": {}` stays as it was.
    for name, value in list(data.items()):
        if value == {} and original.get(name) and f"{path}#{name}" in created:
            del data[name]
    added = frozenset(name for name in data if name not in original)
    if before is not None and data == original:
        return Change(path, before, before)  # nothing to change: leave the file byte for byte
    if not data and (before is None or str(path) in created):
        return Change(path, before, None)  # memstream made this file, and it holds nothing else
    if not before or not before.strip():
        return Change(path, before, sf.DEFAULT_JSON_STYLE.dumps(data), added)
    style = sf.json_style(before, original)
    if style.dumps(original) == before:  # a file as a program writes it: it stays in that style
        return Change(path, before, style.dumps(data), added)
    # Comments or a person's own layout: only the members memstream changes are rewritten (jsonc).
    return Change(path, before, jsonc.edit(before, data), added)


def _json_hooks(data: dict[str, Any], host: str, command: str | None) -> None:
    """Remove memstream's hook entries from every event; then (``command`` given) add the current ones."""
    hooks = data.get("hooks")
    if hooks is None and command is None:
        return
    if hooks is None:
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise InstallError("the settings' 'hooks' is not an object")
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                kept.append(group)
                continue
            rest = [h for h in entries if not (isinstance(h, dict) and is_ours(h.get("command"), host))]
            if len(rest) == len(entries):
                kept.append(group)
            elif rest:
                kept.append({**group, "hooks": rest})
        if kept or not groups:
            hooks[event] = kept
        else:
            del hooks[event]  # only memstream's hooks were there
    if command is not None:
        for event in EVENTS[host]:
            entry: dict[str, Any] = {"type": "command", "command": command}
            if (host, event) in TIMEOUTS:
                entry["timeout"] = TIMEOUTS[(host, event)]
            hooks.setdefault(event, []).append({"hooks": [entry]})


def _json_server(data: dict[str, Any], server: dict[str, Any] | None) -> None:
    """Remove memstream's MCP server entry (whatever its command); then (``server`` given) add it."""
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and server_is_ours(servers.get(SERVER)):
        del servers[SERVER]
    if server is None:
        return
    if not isinstance(servers, dict):
        servers = data["mcpServers"] = {}
    servers[SERVER] = server


# --- TOML hosts ------------------------------------------------------------------------


def _toml_change(
    path: Path, created: set[str], doomed: Callable[[list[sf.Section]], list[bool]], block: str | None
) -> Change:
    """Remove the tables ``doomed`` flags, then append ``block``; the file stays byte for byte if the
    result means the same."""
    before = _read(path)
    text = before or ""
    original = sf.parses(text)
    if original is None:
        raise InstallError(f"{path} is not valid TOML: fix it first, memstream will not overwrite it")
    sections = sf.toml_sections(text)
    flags = doomed(sections)
    stripped = sf.remove_sections(text, flags) if any(flags) else text
    after = sf.append_block(stripped, block) if block else stripped
    parsed = sf.parses(after)
    if parsed is None:
        raise InstallError(
            f"{path}: memstream's tables cannot be added to it as they stand (is an inline table in the way?); "
            f"add them by hand:\n{block}"
        )
    if before is not None and parsed == original:
        return Change(path, before, before)
    if not after.strip() and (before is None or str(path) in created):
        return Change(path, before, None)
    return Change(path, before, after)


def _codex_change(path: Path, host: str, install: tuple[str, dict[str, Any]] | None, created: set[str]) -> Change:
    def doomed(sections: list[sf.Section]) -> list[bool]:
        flags = [False] * len(sections)
        for i, section in enumerate(sections):
            key = section.key
            if key is None:
                continue
            if key[:2] == ("mcp_servers", SERVER):
                flags[i] = _codex_server_is_ours(sections)
            elif len(key) == 3 and key[0] == "hooks" and key[2] == "hooks" and section.array:
                flags[i] = is_ours(section.body().get("command"), host)
        # A group ([[hooks.Event]]) goes when every handler table under it went.
        for i, section in enumerate(sections):
            key = section.key
            if key is not None and len(key) == 2 and key[0] == "hooks" and section.array:
                handlers = []
                for j in range(i + 1, len(sections)):
                    sub = sections[j].key
                    if sub is None or sub[:2] != key or len(sub) < 3:
                        break
                    handlers.append(j)
                body = section.body()
                if handlers and all(flags[j] for j in handlers) and set(body) <= {"matcher"}:
                    flags[i] = True
        return flags

    block = None
    if install is not None:
        command, server = install
        tables = []
        for event in EVENTS[host]:
            tables.append(
                f'[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = "command"\ncommand = {sf.toml_value(command)}\n'
            )
        server_table = (
            f"[mcp_servers.{SERVER}]\ncommand = {sf.toml_value(server['command'])}\n"
            f"args = {sf.toml_value(server['args'])}\n"
        )
        if server.get("env"):
            server_table += f"env = {sf.toml_value(server['env'])}\n"
        tables.append(server_table)
        block = "\n".join(tables)
    change = _toml_change(path, created, doomed, block)
    return _without_our_notify(change, host, created)


def _codex_server_is_ours(sections: list[sf.Section]) -> bool:
    """Whether ``[mcp_servers.memstream]`` (or one of its sub-tables) is memstream's server."""
    for section in sections:
        if section.key == ("mcp_servers", SERVER):
            return server_is_ours(section.body())
    return False


def _without_our_notify(change: Change, host: str, created: set[str]) -> Change:
    """Drop a ``notify = [memstream hook codex …]`` line an earlier install wrote (Stop now captures)."""
    text = change.after
    if text is None:
        return change
    sections = sf.toml_sections(text)
    lines = sections[0].lines
    for start, line in enumerate(lines):
        if not line.lstrip().startswith("notify"):
            continue
        for end in range(start + 1, len(lines) + 1):
            value = sf.parses("".join(lines[start:end]))
            if value is not None and "notify" in value:
                if is_ours(value["notify"], host):
                    del lines[start:end]
                    after = sf.join(sections)
                    if not after.strip() and (change.before is None or str(change.path) in created):
                        return Change(change.path, change.before, None)
                    return Change(change.path, change.before, after)
                return change
    return change


def _kimi_change(path: Path, host: str, command: str | None, created: set[str]) -> Change:
    def doomed(sections: list[sf.Section]) -> list[bool]:
        return [s.key == ("hooks",) and s.array and is_ours(s.body().get("command"), host) for s in sections]

    block = None
    if command is not None:
        block = "\n".join(
            f"[[hooks]]\nevent = {sf.toml_value(event)}\ncommand = {sf.toml_value(command)}\n" for event in EVENTS[host]
        )
    return _toml_change(path, created, doomed, block)
