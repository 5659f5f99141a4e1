"""The [MEMORY] block within MEMSTREAM_BLOCK_MAX_TOKENS: sections trimmed by TRIM_ORDER."""

from __future__ import annotations

from memstream.recall.search import CHARS_PER_TOKEN, RELEVANT, TRIM_ORDER, build_block, estimate_tokens
from memstream.schemas import ScoredMemory
from tests.unit.test_block import memory, sections


def full_project() -> list:
    kinds = ["project-brief", "architecture", "tech-context", "product-context", "progress", "conversation"]
    return [
        memory(f"{kind}-{i}", kind, f"{kind} fact number {i} " + "x" * 300, minutes=i)
        for kind in kinds
        for i in range(6)
    ] + [memory(f"pref-{i}", "preference", f"preference {i} " + "y" * 60, minutes=i) for i in range(4)]


def test_an_unbounded_block_keeps_everything_and_a_budget_is_met() -> None:
    whole = build_block(full_project())
    assert estimate_tokens(whole.text) > 2000
    for budget in (2000, 800, 300, 100):
        fitted = build_block(full_project(), max_tokens=budget)
        assert len(fitted.text) <= budget * CHARS_PER_TOKEN, budget
        assert fitted.text.startswith("[MEMORY]") and fitted.text.endswith("[/MEMORY]")


def test_sections_are_trimmed_in_the_stated_order_project_brief_last() -> None:
    relevant = [ScoredMemory(memory(f"r{i}", "error-solution", f"relevant fix {i}"), 0.1) for i in range(3)]
    whole = sections(build_block(full_project(), relevant).text)
    fitted = sections(build_block(full_project(), relevant, max_tokens=600).text)
    # Whatever was dropped, a section later in TRIM_ORDER only loses entries once every earlier one is gone.
    lost = [title for title in TRIM_ORDER if title in whole and len(fitted.get(title, [])) < len(whole[title])]
    assert lost, "the budget should have trimmed something"
    last_trimmed = TRIM_ORDER.index(lost[-1])
    for title in TRIM_ORDER[:last_trimmed]:
        assert title not in fitted, f"{title} should be gone before {lost[-1]} is touched"
    assert fitted["Project Brief"], "the project brief is the last to go"
    assert RELEVANT in fitted


def test_within_a_section_the_oldest_entries_go_first() -> None:
    fitted = sections(build_block(full_project(), max_tokens=1500).text)
    progress = fitted.get("Progress & Status") or fitted.get("Architecture") or fitted["Project Brief"]
    # Entries are newest first; trimming pops from the end, so what is left is a prefix of the newest.
    numbers = [int(line.split("number ")[1].split()[0]) for line in progress]
    assert numbers == sorted(numbers, reverse=True)


def test_one_entry_longer_than_the_budget_is_cut_short() -> None:
    huge = memory("brief", "project-brief", "b" * 5000)
    fitted = build_block([huge], max_tokens=100)
    assert len(fitted.text) <= 100 * CHARS_PER_TOKEN
    assert "…" in fitted.text
