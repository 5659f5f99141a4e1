"""The [MEMORY] block of the memory spec: memstream.recall.search.render_block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.recall.search import LAST_SESSION_LIMIT, RELEVANT_LIMIT, SECTION_LIMIT, render_block, scopes
from memstream.schemas import MEMORY_TYPES, Memory, ScoredMemory

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def memory(id: str, type: str, text: str = "", *, minutes: int = 0, scope: str = "", **fields: object) -> Memory:
    scope = scope or ("user" if type == "preference" else "project")
    values: dict[str, object] = {
        "id": id,
        "text": text or f"{type} {id}",
        "type": type,
        "scope": scope,
        "scope_key": "u_test" if scope == "user" else "p_test",
        "created_at": T0,
        "updated_at": T0 + timedelta(minutes=minutes),
        "content_hash": f"h-{id}",
        "embedding_model": "test",
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


def sections(block: str) -> dict[str, list[str]]:
    """Section title → its bullet lines, in order of appearance."""
    out: dict[str, list[str]] = {}
    current = ""
    for row in block.splitlines()[1:-1]:
        if row.startswith("## "):
            current = row[3:]
            out[current] = []
        else:
            out[current].append(row)
    return out


def test_every_type_lands_in_its_seed_001_section_in_order() -> None:
    memories = [memory(f"m-{t}", t, f"about {t}") for t in reversed(MEMORY_TYPES)]
    block = render_block(memories)
    found = sections(block)
    assert list(found) == [
        "Project Brief",
        "Architecture",
        "Tech Context",
        "Product Context",
        "Progress & Status",
        "Last Session",
        "User Preferences",
    ]
    assert sorted(found["Project Brief"]) == ["- about project-brief", "- about project-config"]
    assert found["Architecture"] == ["- about architecture"]
    assert found["Tech Context"] == ["- about tech-context"]
    assert found["Product Context"] == ["- about product-context"]
    assert found["Progress & Status"] == ["- about progress"]
    assert sorted(found["Last Session"]) == ["- about conversation", "- about session-summary"]
    assert found["User Preferences"] == ["- about preference"]
    # Types with no section of their own are not listed outside "Relevant to Current Task".
    assert "about learned-pattern" not in block
    assert "about error-solution" not in block


def test_block_is_framed_by_memory_tags() -> None:
    block = render_block([memory("a", "architecture", "JWT in cookies")])
    assert block == "[MEMORY]\n## Architecture\n- JWT in cookies\n[/MEMORY]"
    assert block.startswith("[MEMORY]")
    assert block.endswith("[/MEMORY]")


def test_an_empty_block_is_just_the_tags() -> None:
    assert render_block([]) == "[MEMORY]\n[/MEMORY]"


def test_empty_sections_are_omitted() -> None:
    block = render_block([memory("p", "progress", "CI is green"), memory("u", "preference", "Use bun")])
    assert block == "[MEMORY]\n## Progress & Status\n- CI is green\n## User Preferences\n- Use bun\n[/MEMORY]"


def test_superseded_memories_are_never_shown() -> None:
    old = memory("old", "architecture", "Auth uses sessions", superseded_by="new")
    new = memory("new", "architecture", "Auth uses JWT")
    gone_pref = memory("gp", "preference", "Use npm", superseded_by="x")
    block = render_block([old, new, gone_pref], relevant=[ScoredMemory(old, 0.01), ScoredMemory(new, 0.02)])
    assert "Auth uses sessions" not in block
    assert "Use npm" not in block
    assert "User Preferences" not in block
    assert sections(block)["Relevant to Current Task"] == ["- [architecture] Auth uses JWT"]


def test_only_superseded_memories_leave_the_section_out() -> None:
    assert render_block([memory("a", "tech-context", superseded_by="b")]) == "[MEMORY]\n[/MEMORY]"


def test_newest_first_within_a_section() -> None:
    memories = [
        memory("b", "project-config", "middle", minutes=5),
        memory("a", "project-brief", "oldest", minutes=1),
        memory("c", "project-brief", "newest", minutes=9),
    ]
    assert sections(render_block(memories))["Project Brief"] == ["- newest", "- middle", "- oldest"]


def test_last_session_keeps_the_latest_three() -> None:
    memories = [memory(f"s{i}", "session-summary", f"summary {i}", minutes=i) for i in range(5)]
    memories.append(memory("c", "conversation", "raw exchange", minutes=3))
    assert LAST_SESSION_LIMIT == 3
    assert sections(render_block(memories))["Last Session"] == ["- summary 4", "- summary 3", "- raw exchange"]


def test_sections_are_capped() -> None:
    memories = [memory(f"a{i}", "architecture", f"fact {i:02d}", minutes=i) for i in range(SECTION_LIMIT + 3)]
    shown = sections(render_block(memories))["Architecture"]
    assert len(shown) == SECTION_LIMIT
    assert shown[0] == f"- fact {SECTION_LIMIT + 2:02d}"


def test_user_preferences_prefer_user_scope() -> None:
    memories = [
        memory("u", "preference", "Use bun", scope="user"),
        memory("p", "preference", "Tabs here", scope="project"),
    ]
    assert sections(render_block(memories))["User Preferences"] == ["- Use bun"]


def test_relevant_section_lists_hits_in_order_with_their_type() -> None:
    hits = [
        ScoredMemory(memory("e", "error-solution", "Fix flaky test with --forked"), 0.1),
        ScoredMemory(memory("l", "learned-pattern", "Run migrations before seeding"), 0.2),
    ]
    block = render_block([memory("a", "architecture", "Hexagonal layout")], relevant=hits)
    assert block.splitlines() == [
        "[MEMORY]",
        "## Architecture",
        "- Hexagonal layout",
        "## Relevant to Current Task",
        "- [error-solution] Fix flaky test with --forked",
        "- [learned-pattern] Run migrations before seeding",
        "[/MEMORY]",
    ]


def test_relevant_section_is_capped() -> None:
    hits = [ScoredMemory(memory(f"h{i}", "progress", f"hit {i}"), i / 10) for i in range(RELEVANT_LIMIT + 2)]
    shown = sections(render_block([], relevant=hits))["Relevant to Current Task"]
    assert shown == [f"- [progress] hit {i}" for i in range(RELEVANT_LIMIT)]


def test_no_relevant_hits_no_relevant_section() -> None:
    assert "Relevant to Current Task" not in render_block([memory("a", "progress")], relevant=[])


def test_scopes_drop_empty_keys() -> None:
    assert scopes("p_1", "u_1") == ["p_1", "u_1"]
    assert scopes("p_1", "") == ["p_1"]


def test_one_very_long_memory_is_cut_and_every_other_section_stays() -> None:
    # An 11k-character `remember` (issue 37.5): with a query the block became one truncated entry and every
    # other section disappeared; without one the long memory silently vanished from its section.
    from memstream.recall.search import FACT_CHARS, build_block

    long_text = "Deploys go through make ship. " + "The release checklist says more. " * 350
    others = [
        memory("a", "architecture", "Services talk over NATS"),
        memory("p", "progress", "Checkout flow half done"),
        memory("u", "preference", "I prefer small commits"),
        memory("c", "conversation", "[user] what broke? [assistant] the cache key"),
    ]
    long = memory("l", "tech-context", long_text)
    for relevant in ([], [ScoredMemory(long, 0.9), ScoredMemory(others[0], 0.5)]):
        block = build_block([long, *others], relevant, max_tokens=2000)
        # Every memory is shown (a relevant one once, under Relevant to Current Task).
        assert {m.id for m in block.memories} == {"l", "a", "p", "u", "c"}, block.text
        shown = sections(block.text)
        assert {"Progress & Status", "Last Session", "User Preferences"} <= set(shown), block.text
        entry = next(line for lines in shown.values() for line in lines if "Deploys go through make ship" in line)
        assert entry.endswith("…") and len(entry) <= FACT_CHARS + len("- [tech-context] ")
        assert len(block.text) <= 2000 * 4
