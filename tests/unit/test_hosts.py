"""One registry of the supported coding CLIs (memstream.hosts) that every place reads (issue 36, Build 4)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memstream import hosts
from memstream.capture import hook as capture_hook
from memstream.capture import install
from memstream.capture.model import Source
from memstream.commands import capture as capture_commands
from memstream.recall import session_start

MEMSTREAM = Path(hosts.__file__).resolve().parent


def test_the_tables_read_from_the_registry_are_the_ones_each_place_had() -> None:
    assert hosts.NAMES == ("claude-code", "codex", "gemini", "kimi")
    assert hosts.LLM_SOURCES == ("claude", "codex", "gemini", "kimi") == capture_commands.LLM_SOURCES
    assert capture_hook.HOSTS == {
        "claude-code": Source.CLAUDE,
        "codex": Source.CODEX,
        "gemini": Source.GEMINI,
        "kimi": Source.KIMI,
    }
    assert install.EVENTS == {
        "claude-code": ("Stop", "SessionEnd", "SessionStart"),
        "codex": ("Stop", "SessionStart"),
        "gemini": ("AfterAgent", "SessionEnd", "SessionStart"),
        "kimi": ("Stop", "SessionEnd"),
    }
    assert session_start.HOSTS == {
        "claude-code": "claude-code",
        "claude": "claude-code",
        "codex": "codex",
        "gemini": "gemini",
        "gemini-cli": "gemini",
    }
    assert {
        "claude-code": frozenset({"startup", "resume", "clear", "compact"}),
        "codex": frozenset({"startup", "resume", "clear", "compact"}),
        "gemini": frozenset({"startup", "resume", "clear"}),
    } == session_start.SOURCES


def test_each_host_names_a_session_root_the_settings_have_and_is_found_by_its_aliases() -> None:
    from memstream.settings import Settings

    fields = set(Settings.__dataclass_fields__)
    for host in hosts.HOSTS:
        assert host.session_root in fields, host.name
        assert hosts.find(host.name) is host
        assert all(hosts.find(alias) is host for alias in host.aliases)
    assert hosts.find("no-such-cli") is None
    assert [h.name for h in hosts.HOSTS if "project" not in h.install_scopes] == ["kimi"]


def test_the_registry_is_a_leaf_the_hook_can_import() -> None:
    tree = ast.parse((MEMSTREAM / "hosts.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert imported <= {"__future__", "dataclasses"}


def test_no_other_module_lists_the_hosts_again() -> None:
    listing = re.compile(r"""["'](claude-code|claude)["']\s*[,:][^\n]*["']codex["']""")
    repeated = [
        str(path.relative_to(MEMSTREAM))
        for path in MEMSTREAM.rglob("*.py")
        if path.name != "hosts.py" and listing.search(path.read_text(encoding="utf-8"))
    ]
    assert repeated == []
