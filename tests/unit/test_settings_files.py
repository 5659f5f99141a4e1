"""Editing other programs' settings files without touching a byte of what memstream did not add."""

from __future__ import annotations

import json

import pytest

from memstream.capture import settings_files as sf


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"a": 1, "b": [1, 2], "c": {"d": "é"}}, indent=2) + "\n",
        json.dumps({"a": 1, "b": [1, 2]}, indent=4),
        json.dumps({"a": 1, "b": {"c": []}}, indent="\t") + "\n",
        json.dumps({"a": 1, "b": [1, 2]}, separators=(",", ":")),
        json.dumps({"a": 1, "b": [1, 2]}) + "\n",
        json.dumps({"a": "é"}, indent=2, ensure_ascii=True),
    ],
)
def test_a_json_files_own_style_reproduces_it_byte_for_byte(text: str) -> None:
    data = json.loads(text)
    assert sf.json_style(text, data).dumps(data) == text


def test_an_unusual_json_layout_keeps_its_indent() -> None:
    text = '{\n    "a": [1, 2],\n    "b": {"c": 1}\n}\n'  # arrays inline: no json.dumps option writes this
    style = sf.json_style(text, json.loads(text))
    assert sf.json_style(text, json.loads(text)).dumps({"a": 1}) == '{\n    "a": 1\n}\n'
    assert style.newline


def test_toml_sections_split_by_table_and_join_back_exactly() -> None:
    text = (
        '# top\nmodel = "o3"\nprompt = """\n[not a table]\n"""\n\n'
        '[mcp_servers."my server"]\ncommand = "x"  # keep\n\n'
        "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = 'y'\n"
    )
    sections = sf.toml_sections(text)
    assert [s.key for s in sections] == [
        None,
        ("mcp_servers", "my server"),
        ("hooks", "Stop"),
        ("hooks", "Stop", "hooks"),
    ]
    assert [s.array for s in sections] == [False, False, True, True]
    assert sf.join(sections) == text
    assert sections[1].body() == {"command": "x"}


def test_appending_a_block_then_removing_it_gives_the_text_back() -> None:
    block = '[[hooks]]\nevent = "Stop"\ncommand = "memstream hook kimi"\n'
    for text in ("", "a = 1\n", "a = 1\n\n", "[x]\ny = 2\n\n\n[z]\nw = 3\n"):
        added = sf.append_block(text, block)
        assert sf.parses(added) is not None
        doomed = [s.key == ("hooks",) for s in sf.toml_sections(added)]
        assert sf.remove_sections(added, doomed) == text, repr(text)


def test_toml_values_are_written_as_toml() -> None:
    assert sf.toml_value('a "quoted" path\\x') == '"a \\"quoted\\" path\\\\x"'
    assert sf.toml_value(["mcp", "--host", "codex"]) == '["mcp", "--host", "codex"]'
    assert sf.parses(f"env = {sf.toml_value({'MEMSTREAM_DATA_DIR': '/d'})}\n") == {"env": {"MEMSTREAM_DATA_DIR": "/d"}}
