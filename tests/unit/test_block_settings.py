"""Injected-context settings per project (issue 38, build 4): stored, decoded with today's defaults,
and followed by the block, its explanation and SessionStart's output."""

from __future__ import annotations

from pathlib import Path

import msgspec

from memstream.console import explain
from memstream.recall import injected
from memstream.recall.search import build_block
from memstream.recall.session_start import output_for
from memstream.schemas.injected import ContextSettings
from tests.unit.test_block import memory, sections

MEMORIES = [
    memory("a", "architecture", "The bus is Kafka", minutes=1),
    memory("t", "tech-context", "Tests run with make test", minutes=2),
    memory("p", "progress", "Release 2 is out", minutes=3),
]


def test_settings_of_a_project_nobody_configured_are_todays_block(tmp_path: Path) -> None:
    stored = injected.SettingsFile(tmp_path / injected.FILE_NAME)
    chosen = stored.of("p_test")
    assert chosen.enabled and not chosen.hidden_sections and not chosen.hidden_types and chosen.max_tokens == 0
    assert build_block(MEMORIES, injected=chosen).text == build_block(MEMORIES).text


def test_settings_are_saved_per_project_and_old_records_decode_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / injected.FILE_NAME
    stored = injected.SettingsFile(path)
    stored.save(ContextSettings(scope_key="p_one", enabled=False, changed_by="ops"))
    stored.save(ContextSettings(scope_key="p_two", hidden_types=["progress"], max_tokens=300))
    again = injected.SettingsFile(path)
    assert not again.of("p_one").enabled and again.of("p_one").changed_by == "ops"
    assert again.of("p_two").hidden_types == ["progress"] and again.of("p_two").max_tokens == 300
    assert again.of("p_three").enabled
    # a record written before any optional field existed
    path.write_bytes(b'{"p_old": {"schema": "context-settings.v1", "scope_key": "p_old"}}')
    old = injected.SettingsFile(path).of("p_old")
    assert old == msgspec.convert({"scope_key": "p_old"}, ContextSettings)
    assert injected.project_of(["u_x", "p_old"]) == "p_old" and injected.project_of(["u_x"]) == ""


def test_the_block_leaves_out_what_the_settings_turn_off() -> None:
    off = build_block(MEMORIES, injected=ContextSettings(scope_key="p_test", enabled=False))
    assert off.text == "[MEMORY]\n[/MEMORY]" and off.memories == []
    assert output_for(off.text) == ""
    no_progress = sections(
        build_block(MEMORIES, injected=ContextSettings(scope_key="p_test", hidden_types=["progress"])).text
    )
    assert "Progress & Status" not in no_progress and "Architecture" in no_progress
    no_arch = sections(
        build_block(MEMORIES, injected=ContextSettings(scope_key="p_test", hidden_sections=["Architecture"])).text
    )
    assert list(no_arch) == ["Tech Context", "Progress & Status"]
    assert '"additionalContext": "[MEMORY]' in output_for(build_block(MEMORIES).text)


def test_a_memory_left_out_by_the_settings_says_so() -> None:
    settings = ContextSettings(scope_key="p_test", hidden_types=["progress"], hidden_sections=["Architecture"])
    block = build_block(MEMORIES, injected=settings)
    by_id = {m.id: m for m in MEMORIES}
    assert "type “progress” is left out" in str(explain.verdict(by_id["p"], block, MEMORIES, 1500, settings))
    assert "section “Architecture” is left out" in str(explain.verdict(by_id["a"], block, MEMORIES, 1500, settings))
    assert str(explain.verdict(by_id["t"], block, MEMORIES, 1500, settings)).startswith("in the next block")
    off = ContextSettings(scope_key="p_test", enabled=False)
    assert "injected context is off" in str(
        explain.verdict(by_id["t"], build_block(MEMORIES, injected=off), MEMORIES, 1500, off)
    )
