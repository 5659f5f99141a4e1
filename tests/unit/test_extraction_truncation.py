"""A reply cut at the token cap (issue 28): what was complete before the cut survives.

Small local models run into `max_tokens` (a looping `entities` list, a long answer); the parser
closes the cut JSON after its last complete item instead of keeping only the first value it finds.
"""

from __future__ import annotations

import json

from memstream.rules.extraction import parse_facts

MEMORIES: list[dict[str, object]] = [
    {"memory": "Deploys run `make release` only from the main branch", "type": "project-config", "confidence": 1.0},
    {"memory": "The API is written in Go 1.22 with chi as the router", "type": "tech-context", "confidence": 0.9},
    {"memory": "Flaky login tests came from a shared Redis; each test now gets its own", "type": "error-solution"},
]
ENTITIES: list[dict[str, object]] = [
    {"source": "api", "relationship": "written in", "target": "Go", "confidence": 0.9},
    {"source": "api", "relationship": "uses", "target": "chi", "confidence": 0.9},
]


def whole() -> str:
    return json.dumps({"memories": MEMORIES, "entities": ENTITIES})


def test_a_reply_cut_inside_the_entities_keeps_every_memory_and_the_complete_entities() -> None:
    full = whole()
    # Cut in the middle of a third entity, as a looping list runs into the cap.
    cut = full[:-2] + ', {"source": "api", "relationship": "us'

    result = parse_facts(cut)

    assert [f.text for f in result.facts] == [m["memory"] for m in MEMORIES]
    assert [(e.source, e.relationship, e.target) for e in result.entities] == [
        ("api", "written in", "Go"),
        ("api", "uses", "chi"),
    ]
    assert any("cut off" in w for w in result.warnings)


def test_a_reply_cut_inside_the_memories_keeps_the_complete_ones() -> None:
    full = whole()
    cut = full[: full.index(str(MEMORIES[2]["memory"])) + 20]

    result = parse_facts(cut)

    assert [f.text for f in result.facts] == [MEMORIES[0]["memory"], MEMORIES[1]["memory"]]
    assert [f.type for f in result.facts] == ["project-config", "tech-context"]
    assert result.entities == []


def test_a_fenced_reply_cut_before_its_closing_fence_is_read_too() -> None:
    full = whole()
    cut = "```json\n" + full[: full.index('{"source": "api", "relationship": "uses"')]

    result = parse_facts(cut)

    assert len(result.facts) == 3
    assert [(e.source, e.target) for e in result.entities] == [("api", "Go")]


def test_a_cut_inside_a_string_with_escapes_and_brackets_does_not_confuse_the_repair() -> None:
    tricky = {"memory": 'Run `jq ".[] | {a}"` to list the "items" \\ paths', "type": "project-config"}
    full = json.dumps({"memories": [tricky, MEMORIES[1]], "entities": []})
    cut = full[: full.index(str(MEMORIES[1]["memory"])) + 5]

    result = parse_facts(cut)

    assert [f.text for f in result.facts] == [tricky["memory"]]


def test_a_complete_reply_gets_no_cut_off_warning() -> None:
    result = parse_facts(whole())

    assert len(result.facts) == 3 and len(result.entities) == 2
    assert not any("cut off" in w for w in result.warnings)


def test_a_looping_entity_list_keeps_each_triple_once() -> None:
    looping = ENTITIES + [ENTITIES[1]] * 30
    result = parse_facts(json.dumps({"memories": MEMORIES, "entities": looping}))

    assert [(e.source, e.relationship, e.target) for e in result.entities] == [
        ("api", "written in", "Go"),
        ("api", "uses", "chi"),
    ]
    assert any("repeated" in w for w in result.warnings)
