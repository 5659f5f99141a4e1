"""`memstream token` and the CLI's publishing rules, without a running server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memstream.auth import TokenStore
from memstream.cli import main


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [n for n in os.environ if n.startswith("MEMSTREAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")  # never reached: refusals come first
    return tmp_path / "data"


def test_create_list_revoke(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "create", "--user", "alice@example.com", "-p", "/repos/a", "--label", "alice"]) == 0
    token = capsys.readouterr().out.strip()
    store = TokenStore(data_dir / "tokens.json")
    assert store.authenticate(token).user == "alice@example.com"
    assert main(["token", "list"]) == 0
    listed = capsys.readouterr().out
    assert "alice@example.com on 1 project(s)" in listed and "active" in listed and token not in listed
    token_id = store.records()[0].id
    assert main(["token", "revoke", token_id]) == 0
    assert main(["token", "list"]) == 0 and "revoked" in capsys.readouterr().out
    assert main(["token", "revoke", "nope"]) == 2


def test_create_refuses_a_user_without_projects_and_a_mixed_admin(data_dir: Path) -> None:
    assert main(["token", "create", "--user", "bob@example.com"]) == 2
    assert main(["token", "create", "-p", "/repos/a"]) == 2
    assert main(["token", "create", "--admin"]) == 0


def publish_as(token: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("MEMSTREAM_TOKEN", token)
    return main(["publish", "hello there", "--session", "s1", "-r", "user", *args])


def test_publish_refuses_another_user_and_another_project(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "create", "--user", "alice@example.com", "-p", "/repos/a"]) == 0
    token = capsys.readouterr().out.strip()
    assert publish_as(token, monkeypatch, "-p", "/repos/a", "--user", "bob@example.com") == 2
    assert "another user" in capsys.readouterr().err
    assert publish_as(token, monkeypatch, "-p", "/repos/b") == 2
    assert "project" in capsys.readouterr().err
    assert publish_as(token + "x", monkeypatch, "-p", "/repos/a") == 2
    assert "not in" in capsys.readouterr().err
