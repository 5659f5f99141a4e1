"""`memstream install|uninstall`: exact and idempotent, for every host, in a throwaway home.

Everything goes through the ``memstream`` command as a user runs it, with ``HOME`` pointing at a fresh
folder: install → uninstall must give back every file (and folder) byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from memstream import hosts
from memstream.capture.ingest import standard_roots
from memstream.capture.install import EVENTS, InstallError, plan
from memstream.capture.model import Source
from memstream.cli import main
from memstream.settings import Settings

HOSTS = list(EVENTS)
EXE = "/opt/memstream/.venv/bin/memstream"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    for name in ("CLAUDE", "CODEX", "GEMINI", "KIMI", "KIMI_CODE"):
        monkeypatch.delenv(f"MEMSTREAM_{name}_DIR", raising=False)
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "KIMI_SHARE_DIR", "KIMI_CODE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MEMSTREAM_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    # `memstream` runs from PATH, as for a user who installed it (a project's shared files need that).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return home


def run(*argv: str) -> int:
    return main(list(argv))


def tree(root: Path) -> dict[str, str | None]:
    """Every file's bytes and every folder (None) below ``root``."""
    return {str(p.relative_to(root)): (p.read_text() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def hook_commands(host: str, home: Path, project: Path | None = None) -> dict[str, list[str]]:
    """memstream's hook commands per event, as the host would read them."""
    from memstream.capture.check import installed_hooks

    return installed_hooks(host, Settings.from_env(), project, home).commands


#: A user's own settings, each in the style its CLI (or the user) wrote it.
USER_FILES = {
    ".claude/settings.json": json.dumps(
        {"model": "opus", "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]}},
        indent=2,
    )
    + "\n",
    # Claude Code's own ~/.claude.json: compact, no final newline.
    ".claude.json": json.dumps({"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}, separators=(",", ":")),
    ".codex/config.toml": (
        '# mine\nmodel = "o3"\n\n\n[mcp_servers.docs]\ncommand = "docs-mcp"  # keep me\n\n'
        '[projects."/src/shop"]\ntrust_level = "trusted"\n'
    ),
    ".gemini/settings.json": json.dumps({"theme": "dark", "ui": {"hideTips": True}}, indent=4) + "\n",
    ".kimi/config.toml": (
        'default_model = "kimi-k2"\n\n[[hooks]]\nevent = "Stop"\ncommand = "notify-send kimi"\n\n'
        "[loop_control]\nmax_steps_per_turn = 100\n"
    ),
    ".kimi/mcp.json": json.dumps({"mcpServers": {}}, indent=2),
}


def write_user_files(home: Path) -> None:
    for name, text in USER_FILES.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)


@pytest.mark.parametrize("host", HOSTS)
def test_install_then_uninstall_leaves_a_fresh_home_as_it_was(host: str, home: Path, tmp_path: Path) -> None:
    before = tree(home)
    assert run("install", host) == 0
    assert tree(home) != before
    script = tmp_path / "data" / "hook-bin" / "memstream"
    assert script.is_file() and os.access(script, os.X_OK)  # what this machine's hooks run
    assert run("uninstall", host) == 0
    assert tree(home) == before  # no file, no folder, no record left behind
    assert not script.exists()


@pytest.mark.parametrize("host", HOSTS)
def test_install_then_uninstall_gives_back_the_users_files_byte_for_byte(host: str, home: Path) -> None:
    write_user_files(home)
    before = tree(home)
    assert run("install", host) == 0
    once = tree(home)
    assert once != before
    assert run("install", host) == 0
    assert tree(home) == once  # twice is once
    assert run("uninstall", host) == 0
    assert tree(home) == before


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini"])
def test_a_project_install_then_uninstall_leaves_the_project_as_it_was(host: str, home: Path, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    (project / ".gemini").mkdir(parents=True)
    (project / ".gemini" / "settings.json").write_text('{"contextFileName":"AGENTS.md"}')
    (project / "README.md").write_text("shop\n")
    before, home_before = tree(project), tree(home)
    assert run("install", host, "--project", str(project)) == 0
    assert tree(project) != before
    assert run("uninstall", host, "--project", str(project)) == 0
    assert tree(project) == before
    assert tree(home) == home_before


@pytest.mark.parametrize("host", ["codex", "kimi"])
def test_uninstall_removes_a_toml_file_holding_only_memstreams_entries(
    host: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run("install", host)
    config = home / f".{host}" / "config.toml"
    assert config.is_file()
    capsys.readouterr()
    assert run("uninstall", host) == 0
    assert f"removed: {config}" in capsys.readouterr().out
    assert not config.exists()


def test_a_file_the_user_had_is_kept_even_when_uninstall_leaves_it_empty(home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("")
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text("{}\n")
    for host in ("codex", "gemini"):
        run("install", host)
        run("uninstall", host)
    assert (home / ".codex" / "config.toml").read_text() == ""
    assert (home / ".gemini" / "settings.json").read_text() == "{}\n"


@pytest.mark.parametrize("host", HOSTS)
def test_a_reinstall_with_another_data_dir_and_binary_replaces_memstreams_entries(
    host: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_user_files(home)
    settings = Settings.from_env()
    from memstream.capture.install import apply

    apply(plan(host, settings, project=None, home=home, executable="/old/bin/memstream"))
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "elsewhere"))
    assert run("install", host) == 0
    commands = hook_commands(host, home)
    assert set(commands) == set(EVENTS[host])
    for event, found in commands.items():
        assert len(found) == 1, (event, found)  # the event runs once, not once per install
        argv = shlex.split(found[0])
        assert argv[0] != "/old/bin/memstream" and argv[-1] == str(tmp_path / "elsewhere"), argv


def test_compact_json_stays_compact_and_other_entries_keep_their_bytes(home: Path) -> None:
    write_user_files(home)
    run("install", "claude-code")
    text = (home / ".claude.json").read_text()
    assert "\n" not in text and text.startswith('{"numStartups":3,"mcpServers":{"other":{"command":"x"},"memstream":')
    gemini_before = USER_FILES[".gemini/settings.json"]
    run("install", "gemini")
    text = (home / ".gemini" / "settings.json").read_text()
    assert text.startswith(gemini_before[: gemini_before.index("}\n")].rstrip())  # 4-space indent kept
    assert '\n    "hooks": {' in text


def test_toml_keeps_the_users_blank_lines_comments_and_tables(home: Path) -> None:
    write_user_files(home)
    run("install", "codex")
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(USER_FILES[".codex/config.toml"] + "\n[[hooks.Stop]]\n")
    run("install", "kimi")
    text = (home / ".kimi" / "config.toml").read_text()
    assert text.startswith(USER_FILES[".kimi/config.toml"] + "\n[[hooks]]\n")


def test_uninstall_keeps_what_codex_wrote_after_memstreams_tables(home: Path) -> None:
    run("install", "codex")
    config = home / ".codex" / "config.toml"
    # Codex appends its own tables (a trusted project, a hook of the user's) after memstream's block.
    config.write_text(
        config.read_text()
        + '\n[projects."/src/app"]\ntrust_level = "trusted"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\n'
        'type = "command"\ncommand = "say done"\n'
    )
    run("uninstall", "codex")
    assert config.read_text() == (
        '[projects."/src/app"]\ntrust_level = "trusted"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\n'
        'type = "command"\ncommand = "say done"\n'
    )
    assert tomllib.loads(config.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"] == "say done"


def test_hooks_registered_per_host(home: Path, tmp_path: Path) -> None:
    for host in HOSTS:
        run("install", host)
    claude = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    # No SubagentStop: sub-agents' turns are not captured. SessionEnd declares its own timeout (Claude Code's
    # shared SessionEnd budget is 1.5 s otherwise).
    assert set(claude) == {"Stop", "SessionEnd", "SessionStart"}
    assert claude["SessionEnd"][0]["hooks"][0]["timeout"] == 10
    assert "timeout" not in claude["Stop"][0]["hooks"][0]
    codex = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert "notify" not in codex  # the Stop hook captures: one process per turn, not two
    assert set(codex["hooks"]) == {"Stop", "SessionStart"}
    kimi = tomllib.loads((home / ".kimi" / "config.toml").read_text())
    assert [h["event"] for h in kimi["hooks"]] == ["Stop", "SessionEnd"]  # kimi-cli discards SessionStart output
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())
    assert set(gemini["hooks"]) == {"AfterAgent", "SessionEnd", "SessionStart"}
    data = str((tmp_path / "data").resolve())
    assert shlex.split(claude["Stop"][0]["hooks"][0]["command"])[1:] == ["hook", "claude-code", "--data-dir", data]
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["memstream"]
    assert server["args"] == ["mcp"] and server["env"] == {"MEMSTREAM_DATA_DIR": data}


def test_an_earlier_installs_extra_hooks_and_notify_are_removed(home: Path, tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    old = shlex.join([EXE, "hook", "claude-code", "--data-dir", data])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": old}]}]}}, indent=2) + "\n"
    )
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(f"notify = {json.dumps([EXE, 'hook', 'codex', '--data-dir', data])}\n")
    (home / ".kimi").mkdir()
    (home / ".kimi" / "config.toml").write_text(
        f'[[hooks]]\nevent = "SessionStart"\ncommand = {json.dumps(old.replace("claude-code", "kimi"))}\n'
    )
    for host in ("claude-code", "codex", "kimi"):
        run("install", host)
    assert "SubagentStop" not in json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    assert "notify" not in tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert "SessionStart" not in hook_commands("kimi", home)
    for host in ("claude-code", "codex", "kimi"):
        run("uninstall", host)
    assert not (home / ".codex" / "config.toml").read_text().strip()


def test_a_project_install_keeps_machine_paths_out_of_committed_files(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    for host in ("claude-code", "codex", "gemini"):
        assert run("install", host, "--project", str(project)) == 0
    committed = [project / ".mcp.json", project / ".gemini" / "settings.json", project / ".codex" / "config.toml"]
    for path in committed:
        text = path.read_text()
        assert str(tmp_path) not in text and "/bin/" not in text, path
    codex = tomllib.loads((project / ".codex" / "config.toml").read_text())
    assert codex["hooks"]["Stop"][0]["hooks"][0]["command"] == "memstream hook codex"
    assert codex["mcp_servers"]["memstream"]["args"] == ["mcp", "--host", "codex"]
    # Claude Code's hooks go to this machine's own settings.local.json, with absolute paths.
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert str((tmp_path / "data").resolve()) in local["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert not (project / ".claude" / "settings.json").exists()


def test_a_committed_hook_finds_its_data_dir_in_the_install_record(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstream.hooks import resolve_data_dir

    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "chosen"))
    run("install", "gemini", "--project", str(tmp_path))
    monkeypatch.delenv("MEMSTREAM_DATA_DIR")
    assert resolve_data_dir("gemini") == (tmp_path / "chosen").resolve()
    assert resolve_data_dir("gemini", "/given") == Path("/given")
    run("uninstall", "gemini", "--project", str(tmp_path))
    assert resolve_data_dir("gemini") == Path(".memstream")


def test_install_prints_the_data_dir_and_warns_when_nothing_uses_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMSTREAM_DATA_DIR")
    monkeypatch.chdir(home)  # the case: `cd ~ && memstream install claude-code`
    assert run("install", "claude-code") == 0
    captured = capsys.readouterr()
    assert f"data dir: {home / '.memstream'}" in captured.out
    assert f"no running or configured memstream uses {home / '.memstream'}" in captured.err
    # Named explicitly (flag or MEMSTREAM_DATA_DIR): the user's configuration, no warning.
    assert run("install", "claude-code", "--data-dir", str(tmp_path / "data")) == 0
    captured = capsys.readouterr()
    assert f"data dir: {tmp_path / 'data'}" in captured.out and "warning" not in captured.err
    assert len(hook_commands("claude-code", home)["Stop"]) == 1


def test_install_does_not_warn_when_a_running_memstream_uses_the_data_dir(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import memstream.runtime

    monkeypatch.delenv("MEMSTREAM_DATA_DIR")
    monkeypatch.setattr(memstream.runtime, "read_runtime_file", lambda settings: {"pid": 1})
    assert run("install", "gemini") == 0
    assert "warning" not in capsys.readouterr().err


def test_codex_install_prints_the_trust_step(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run("install", "codex")
    out = capsys.readouterr().out
    assert "/hooks" in out and "codex_hooks = true" in out
    run("install", "kimi")
    assert "MCP" in capsys.readouterr().out


def test_invalid_settings_are_never_overwritten(home: Path) -> None:
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text("{not json")
    with pytest.raises(InstallError, match="not valid JSON"):
        plan("gemini", Settings.from_env(), project=None, home=home, executable=EXE)
    (home / ".kimi").mkdir()
    (home / ".kimi" / "config.toml").write_text("[[hooks]\n")
    with pytest.raises(InstallError, match="not valid TOML"):
        plan("kimi", Settings.from_env(), project=None, home=home, executable=EXE)
    with pytest.raises(InstallError, match="user config only"):
        plan("kimi", Settings.from_env(), project=home, home=home, executable=EXE)


def test_dry_run_prints_the_diff_and_writes_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    assert run("install", "gemini", "--project", str(project), "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.startswith("--- /dev/null\n+++ ") and '+  "hooks": {' in out and "memstream hook gemini" in out
    assert tree(project) == {}


def test_check_says_what_is_installed_when_each_hook_last_ran_and_whether_the_spool_is_sent(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from memstream.hooks import main as hook_main

    assert run("install", "claude-code", "--check") == 1
    assert "Stop: not installed" in capsys.readouterr().out
    run("install", "claude-code")
    command = hook_commands("claude-code", home)["Stop"][0]
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "s", "transcript_path": str(tmp_path / "none")})
    assert hook_main(shlex.split(command)[2:], stdin=io.StringIO(payload)) == 0
    capsys.readouterr()
    assert run("install", "claude-code", "--check") == 0
    out = capsys.readouterr().out
    data = tmp_path / "data"
    assert re.search(rf"Stop: installed, last ran \d+ s ago, data dir {re.escape(str(data))}\n", out)
    assert "SessionEnd: installed, never ran" in out
    assert f"spool {data / 'capture.db'}: 0 turns waiting, never sent; no memstream up runs on it" in out
    # A second install entry for an event (a stale copy) is called out.
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": command}]})
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    run("install", "claude-code", "--check")
    assert "Stop: installed (2 entries: run 2 times)" in capsys.readouterr().out


def test_install_names_the_data_dir_of_a_memstream_up_running_elsewhere(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys
    import time

    from memstream.capture.check import running_data_dirs

    # A stand-in `memstream up` started in another folder: its data dir is that folder's .memstream.
    where = tmp_path / "server"
    (where / ".memstream").mkdir(parents=True)
    fake = tmp_path / "bin" / "memstream"
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, time\n"
        "open('.memstream/runtime.json', 'w').write(json.dumps({'pid': os.getpid()}))\ntime.sleep(60)\n"
    )
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "MEMSTREAM_DATA_DIR"}
    server = subprocess.Popen([str(fake), "up"], cwd=where, env=env)
    try:
        deadline = time.monotonic() + 20
        while (where / ".memstream").resolve() not in running_data_dirs():
            assert time.monotonic() < deadline, "the stand-in memstream up was never found"
            time.sleep(0.05)
        monkeypatch.delenv("MEMSTREAM_DATA_DIR")
        monkeypatch.chdir(home)
        run("install", "gemini")
        err = capsys.readouterr().err
        assert f"memstream up runs on {(where / '.memstream').resolve()}: install with --data-dir" in err
    finally:
        server.kill()
        server.wait()


def test_install_then_uninstall_from_home_leaves_no_data_dir_behind(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTREAM_DATA_DIR")
    monkeypatch.chdir(home)  # `cd ~ && memstream install …`: the data dir would be ~/.memstream
    before = tree(home)
    for host in HOSTS:
        assert run("install", host) == 0
    assert (home / ".memstream" / "hook-bin" / "memstream").is_file()
    for host in HOSTS:
        assert run("uninstall", host) == 0
    assert tree(home) == before


def test_a_committed_mcp_entry_serves_the_data_dir_install_chose(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstream.runtime
    import memstream.serve.mcp_server
    import memstream.serve.mcp_stdio

    run("install", "gemini", "--project", str(tmp_path), "--data-dir", str(tmp_path / "chosen"))
    server = json.loads((tmp_path / ".gemini" / "settings.json").read_text())["mcpServers"]["memstream"]
    assert server == {"command": "memstream", "args": ["mcp", "--host", "gemini"]}
    served: list[Path] = []

    def api_url(settings: Settings) -> str:
        served.append(settings.data_dir)
        return "http://127.0.0.1:9"

    monkeypatch.setattr(memstream.runtime, "api_url", api_url)
    monkeypatch.setattr(memstream.serve.mcp_server, "stdio_main", lambda *args, **kwargs: None)
    # The handshake is answered before the settings are read (memstream.serve.mcp_stdio): skip to serving.
    monkeypatch.setattr(memstream.serve.mcp_stdio, "main", lambda serve: serve(b"", None))
    monkeypatch.delenv("MEMSTREAM_DATA_DIR")
    assert run(*server["args"]) == 0
    assert served == [(tmp_path / "chosen").resolve()]


#: Each CLI's own home variable, and where (relative to it) the CLI reads the file holding its hooks.
HOME_VARIABLES = {
    "claude-code": ("CLAUDE_CONFIG_DIR", "settings.json"),
    "codex": ("CODEX_HOME", "config.toml"),
    "gemini": ("GEMINI_CLI_HOME", ".gemini/settings.json"),
    "kimi": ("KIMI_SHARE_DIR", "config.toml"),
}


@pytest.mark.parametrize("host", HOSTS)
def test_install_writes_where_the_cli_reads_when_its_home_variable_is_set(
    host: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    variable, hooks_file = HOME_VARIABLES[host]
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv(variable, str(elsewhere))
    before = tree(home)
    assert run("install", host) == 0
    # Nothing the CLI never reads: only install's record goes under HOME.
    assert {k: v for k, v in tree(home).items() if not k.startswith(".local")} == before
    assert (elsewhere / hooks_file).is_file()
    assert set(hook_commands(host, home)) == set(EVENTS[host])
    capsys.readouterr()
    assert run("install", host, "--check") == 0
    assert str(elsewhere / hooks_file) in capsys.readouterr().out
    assert run("uninstall", host) == 0
    assert not elsewhere.exists()  # install made the folder, uninstall took it back
    assert tree(home) == before


def test_claude_codes_mcp_server_goes_beside_its_config_dir(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    assert run("install", "claude-code") == 0
    # Claude Code keeps its global config in $CLAUDE_CONFIG_DIR/.claude.json once that is set.
    assert "memstream" in json.loads((tmp_path / "claude" / ".claude.json").read_text())["mcpServers"]
    assert not (home / ".claude.json").exists()


def test_session_roots_follow_the_clis_home_variables(tmp_path: Path) -> None:
    env = {
        "CODEX_HOME": str(tmp_path / "codex"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "GEMINI_CLI_HOME": str(tmp_path / "g"),
        "KIMI_SHARE_DIR": str(tmp_path / "kimi"),
    }
    settings = Settings.from_env(env)
    assert settings.codex_dir == tmp_path / "codex"
    assert settings.claude_dir == tmp_path / "claude"
    assert settings.gemini_dir == tmp_path / "g" / ".gemini"
    assert settings.kimi_dir == tmp_path / "kimi"
    assert Settings.from_env({}).kimi_code_dir == Path("~/.kimi-code")
    # Kimi Code (the CLI after kimi-cli) has its own home: KIMI_CODE_HOME, its sessions below it.
    kimi_code = Settings.from_env({**env, "KIMI_CODE_HOME": str(tmp_path / "kc")})
    assert kimi_code.kimi_code_dir == tmp_path / "kc"
    assert tmp_path / "kc" / "sessions" in standard_roots(kimi_code.capture_roots)[Source.KIMI]
    assert tmp_path / "kimi" / "sessions" in standard_roots(kimi_code.capture_roots)[Source.KIMI]
    # memstream's own variable, and an explicit setting, win.
    assert Settings.from_env({**env, "MEMSTREAM_CODEX_DIR": "/x"}).codex_dir == Path("/x")
    assert Settings.from_env(env, codex_dir=Path("/y")).codex_dir == Path("/y")
    assert Settings.from_env({}).codex_dir == Path("~/.codex")


def test_kimi_install_writes_kimi_codes_config_under_kimi_code_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kimi Code reads its hooks from ``$KIMI_CODE_HOME/config.toml`` (``[[hooks]]`` event/command, as kimi-cli)
    and its MCP servers from ``$KIMI_CODE_HOME/mcp.json``; Kimi CLI's ``~/.kimi`` is still written too."""
    kimi_code = tmp_path / "kc"
    monkeypatch.setenv("KIMI_CODE_HOME", str(kimi_code))
    assert run("install", "kimi") == 0
    hooks = tomllib.loads((kimi_code / "config.toml").read_text())["hooks"]
    assert {h["event"] for h in hooks} == set(EVENTS["kimi"])
    assert "memstream" in json.loads((kimi_code / "mcp.json").read_text())["mcpServers"]
    assert (home / ".kimi" / "config.toml").is_file()
    capsys.readouterr()
    assert run("install", "kimi", "--check") == 0
    assert str(kimi_code / "config.toml") in capsys.readouterr().out
    assert run("uninstall", "kimi") == 0
    assert not kimi_code.exists()  # install made the folder, uninstall took it back


def test_uninstalling_every_host_removes_the_install_record(home: Path, tmp_path: Path) -> None:
    from memstream.capture.install_record import record_path

    write_user_files(home)
    project = tmp_path / "shop"
    project.mkdir()
    for host in HOSTS:
        assert run("install", host) == 0
    assert run("install", "gemini", "--project", str(project)) == 0
    assert record_path(home).exists()
    # Meanwhile the folders install made filled up: the data dir holds the spool, ~/.codex the sessions.
    (tmp_path / "data" / "capture.db").write_text("")
    (home / ".codex" / "sessions").mkdir()
    for host in HOSTS:
        assert run("uninstall", host) == 0
    assert run("uninstall", "gemini", "--project", str(project)) == 0
    assert not record_path(home).exists()
    assert not (home / ".local").exists()


def test_hook_help_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    from memstream.hooks import main as hook_main

    assert hook_main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert "unknown host" not in err
    assert "usage: memstream hook" in out and "claude-code" in out


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini"])
def test_a_project_install_refuses_a_command_that_is_not_on_path(
    host: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # a venv install, not activated
    assert run("install", host, "--project", str(project)) != 0
    assert "not on PATH" in capsys.readouterr().err
    assert list(project.iterdir()) == []  # nothing written that cannot run


def test_check_says_not_runnable_when_the_hook_command_cannot_run(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    assert run("install", "gemini", "--project", str(project)) == 0
    capsys.readouterr()
    assert run("install", "gemini", "--project", str(project), "--check") == 0
    assert "not runnable" not in capsys.readouterr().out
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert run("install", "gemini", "--project", str(project), "--check") == 1
    out = capsys.readouterr().out
    assert re.search(r"AfterAgent: installed but not runnable: .*memstream.* not on PATH", out)


#: docs/capture.md's names for the hosts.
DOC_NAMES = {"Claude Code": "claude-code", "Codex": "codex", "Gemini CLI": "gemini", "Kimi CLI": "kimi"}


def test_the_docs_hooks_table_says_what_install_writes(home: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "capture.md").read_text()
    table = docs[docs.index("| host | events | settings written |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = {
        DOC_NAMES[cells[0]]: cells[1:] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in table)
    }
    assert set(rows) == set(HOSTS)
    for host, (events, files) in rows.items():
        assert run("install", host) == 0
        written = hook_commands(host, home)
        assert events.split(", ") == list(written) == list(hosts.BY_NAME[host].events), host
        for path in installed_hooks_files(host, home):
            assert f"`~/{path.relative_to(home)}`" in files, (host, path)


def installed_hooks_files(host: str, home: Path) -> list[Path]:
    from memstream.capture.check import installed_hooks

    return installed_hooks(host, Settings.from_env(), None, home).files


#: A Gemini settings file as a person writes it: comments (which gemini-cli accepts) and their own layout.
COMMENTED_GEMINI = """{
  // the model I use at work
  "model": { "name": "gemini-2.5-pro" },   /* not flash */
  "hooks": {
    "AfterAgent": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ]
  },

  "contextFileName":   "AGENTS.md"
}
"""


def test_a_gemini_settings_file_with_comments_is_edited_in_place(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(COMMENTED_GEMINI)
    assert run("install", "gemini") == 0
    after = path.read_text()
    assert '// the model I use at work\n  "model": { "name": "gemini-2.5-pro" },   /* not flash */' in after
    assert '"contextFileName":   "AGENTS.md"' in after
    assert '"AfterAgent": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] }' in after
    assert set(hook_commands("gemini", home)) == set(EVENTS["gemini"])
    assert run("install", "gemini") == 0
    assert path.read_text() == after  # twice is once
    assert run("uninstall", "gemini") == 0
    assert path.read_text() == COMMENTED_GEMINI  # byte for byte


def test_a_hand_formatted_claude_settings_file_comes_back_byte_for_byte(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    text = '{\n    "model" : "opus",\n\n    "permissions": {"allow": ["Bash(ls)"]}\n}\n'
    path.write_text(text)
    assert run("install", "claude-code") == 0
    assert '"permissions": {"allow": ["Bash(ls)"]}' in path.read_text()
    assert run("uninstall", "claude-code") == 0
    assert path.read_text() == text
