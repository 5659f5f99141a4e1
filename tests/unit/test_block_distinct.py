"""The [MEMORY] block shows each memory once (issue 25): never twice, never as a prefix of another shown
memory, and a raw exchange does not spend the budget of several facts."""

from __future__ import annotations

from memstream.recall.search import ENTRY_CHARS, LAST_SESSION_LIMIT, RELEVANT, build_block
from memstream.schemas import HybridHit
from tests.unit.test_block import memory, sections

EXCHANGE = "[user] How do we deploy? [assistant] With `make ship`, which builds the image and rolls it out"


def bodies(block: str) -> list[str]:
    """Every entry's text, without its bullet and the type tag of a relevant hit."""
    out = []
    for title, lines in sections(block).items():
        for line in lines:
            text = line[2:]
            if title == RELEVANT:
                text = text.split("] ", 1)[1]
            out.append(text)
    return out


def test_a_snapshot_that_extends_an_exchange_is_shown_once_the_longer() -> None:
    # Raw mode stored the exchange as it grew: the earlier copies are prefixes of the last.
    copies = [
        memory("c1", "conversation", EXCHANGE[:40], minutes=1),
        memory("c2", "conversation", EXCHANGE[:70], minutes=2),
        memory("c3", "conversation", EXCHANGE, minutes=3),
        memory("other", "conversation", "[user] Which queue? [assistant] RabbitMQ", minutes=0),
        memory("older", "conversation", "[user] Which cache? [assistant] Redis", minutes=-1),
    ]
    last = sections(build_block(copies).text)["Last Session"]
    assert last == [
        f"- {EXCHANGE}",
        "- [user] Which queue? [assistant] RabbitMQ",
        "- [user] Which cache? [assistant] Redis",
    ]
    assert len(last) == LAST_SESSION_LIMIT  # the dropped copies left room for distinct exchanges


def test_a_memory_found_by_the_query_is_not_repeated_in_its_section() -> None:
    port = memory("port", "tech-context", "Staging Postgres listens on port 6543")
    queue = memory("queue", "architecture", "Jobs go through RabbitMQ")
    relevant = [HybridHit(port, 0.9, 0.8, 0.7), HybridHit(queue, 0.5, 0.5, None)]
    block = build_block([port, queue], relevant)
    shown = bodies(block.text)
    assert sorted(shown) == sorted(["Staging Postgres listens on port 6543", "Jobs go through RabbitMQ"])
    assert len(block.memories) == len({m.id for m in block.memories}) == 2


def test_the_same_text_in_two_scopes_or_cased_differently_is_shown_once() -> None:
    mine = memory("u1", "preference", "I prefer bun over npm", scope="user", minutes=2)
    project = memory("p1", "tech-context", "I  prefer Bun over npm", scope="project", minutes=1)
    brief = memory("b1", "project-brief", "Shop: a Django storefront")
    shown = bodies(build_block([mine, project, brief]).text)
    assert shown.count("I prefer bun over npm") + shown.count("I  prefer Bun over npm") == 1


def test_a_long_exchange_is_cut_to_its_share_of_the_block() -> None:
    long = memory("long", "conversation", "[user] why? [assistant] " + "because of the cache invalidation " * 100)
    facts = [memory(f"a{i}", "architecture", f"Architecture fact {i}") for i in range(5)]
    block = build_block([long, *facts], max_tokens=400)
    (entry,) = sections(block.text)["Last Session"]
    assert len(entry) <= ENTRY_CHARS + 2 and entry.endswith("…")
    assert len(sections(block.text)["Architecture"]) == 5  # the facts all fit beside it
