"""`memstream install|uninstall`: round trips on temporary homes for every host, other settings kept."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import tomlkit

from memstream.capture.install import EVENTS, InstallError, apply, plan
from memstream.cli import main
from memstream.settings import Settings

EXE = "/opt/memstream/.venv/bin/memstream"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def settings(home: Path, tmp_path: Path) -> Settings:
    return Settings.from_env(
        {},
        data_dir=tmp_path / "data",
        codex_dir=home / ".codex",
        gemini_dir=home / ".gemini",
        kimi_dir=home / ".kimi",
    )


def install(host: str, settings: Settings, home: Path, *, project: Path | None = None, remove: bool = False) -> None:
    apply(plan(host, settings, project=project, home=home, remove=remove, executable=EXE))


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def command(host: str, settings: Settings) -> str:
    return shlex.join([EXE, "hook", host, "--data-dir", str(settings.data_dir.resolve())])


USER_FILES = {
    ".claude/settings.json": json.dumps(
        {
            "model": "opus",
            "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]},
        },
        indent=2,
    )
    + "\n",
    ".claude.json": json.dumps({"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}, indent=2) + "\n",
    ".codex/config.toml": '# mine\nmodel = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"  # keep me\n',
    ".gemini/settings.json": json.dumps({"theme": "dark"}, indent=2) + "\n",
    ".kimi/config.toml": 'default_model = "kimi-k2"\n\n[[hooks]]\nevent = "Stop"\ncommand = "notify-send kimi"\n',
}


@pytest.mark.parametrize("host", list(EVENTS))
def test_install_is_idempotent_keeps_other_settings_and_uninstall_restores_them(
    host: str, settings: Settings, home: Path
) -> None:
    for name, text in USER_FILES.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    before = snapshot(home)
    install(host, settings, home)
    once = snapshot(home)
    assert once != before
    install(host, settings, home)
    assert snapshot(home) == once  # twice is once
    install(host, settings, home, remove=True)
    after = snapshot(home)
    for name in before:
        if name.endswith(".toml"):
            assert tomlkit.parse(after[name]) == tomlkit.parse(before[name]), name
            assert "# mine" in after[name] or "# mine" not in before[name]
        else:
            assert after[name] == before[name], name
    assert set(after) == set(before)


def test_claude_code_gets_every_event_and_the_mcp_server(settings: Settings, home: Path) -> None:
    install("claude-code", settings, home)
    data = json.loads((home / ".claude" / "settings.json").read_text())
    assert set(data["hooks"]) == {"Stop", "SubagentStop", "SessionEnd", "SessionStart"}
    assert data["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": command("claude-code", settings)}]}]
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["memstream"]
    assert (server["command"], server["args"], server["type"]) == (EXE, ["mcp"], "stdio")


def test_a_project_install_writes_the_project_files(settings: Settings, home: Path, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    install("claude-code", settings, home, project=project)
    assert (project / ".claude" / "settings.json").is_file() and (project / ".mcp.json").is_file()
    assert not home.exists()
    install("claude-code", settings, home, project=project, remove=True)
    assert snapshot(project) == {}


def test_codex_gets_notify_hooks_and_mcp_server(settings: Settings, home: Path) -> None:
    install("codex", settings, home)
    doc = tomlkit.parse((home / ".codex" / "config.toml").read_text())
    assert doc["notify"] == [EXE, "hook", "codex", "--data-dir", str(settings.data_dir.resolve())]
    assert doc["hooks"]["Stop"][0]["hooks"][0]["command"] == command("codex", settings)
    assert set(doc["hooks"]) == {"Stop", "SessionStart"}
    assert doc["mcp_servers"]["memstream"]["args"] == ["mcp"]


def test_codex_keeps_a_notify_program_the_user_already_has(settings: Settings, home: Path) -> None:
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('notify = ["notify-send"]\n')
    install("codex", settings, home)
    doc = tomlkit.parse((home / ".codex" / "config.toml").read_text())
    assert doc["notify"] == ["notify-send"]
    install("codex", settings, home, remove=True)
    assert (home / ".codex" / "config.toml").read_text() == 'notify = ["notify-send"]\n'


def test_gemini_and_kimi_events(settings: Settings, home: Path) -> None:
    install("gemini", settings, home)
    install("kimi", settings, home)
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())
    assert set(gemini["hooks"]) == {"AfterAgent", "SessionEnd", "SessionStart"} and "memstream" in gemini["mcpServers"]
    kimi = tomlkit.parse((home / ".kimi" / "config.toml").read_text())
    assert [h["event"] for h in kimi["hooks"]] == ["Stop", "SessionEnd", "SessionStart"]
    assert "memstream" in json.loads((home / ".kimi" / "mcp.json").read_text())["mcpServers"]
    with pytest.raises(InstallError, match="user config only"):
        plan("kimi", settings, project=home, home=home, executable=EXE)


def test_invalid_settings_are_never_overwritten(settings: Settings, home: Path) -> None:
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text("{not json")
    with pytest.raises(InstallError, match="not valid JSON"):
        plan("gemini", settings, project=None, home=home, executable=EXE)


def test_dry_run_prints_the_diff_and_writes_nothing(
    settings: Settings, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(settings.data_dir))
    assert main(["install", "gemini", "--project", str(project), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- /dev/null\n+++ ") and '+  "hooks": {' in out and " hook gemini --data-dir " in out
    assert snapshot(project) == {}
