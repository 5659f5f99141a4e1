"""Optional reranking of search results (Pipeline v2's "Optional Reranking").

Off by default (MEMSTREAM_RERANKER=none). When on, the top N results (MEMSTREAM_RERANKER_TOP_N,
default 20) go to the reranker and the rest keep their place after them. A reranker that takes
longer than MEMSTREAM_RERANKER_TIMEOUT_MS (default 2 s), fails, or answers nonsense leaves the
original order, and is not asked again for that search. Scores are never rewritten: only the order.
A local model busy with extraction is not asked at all: search never waits for it.

Providers: Voyage's reranker through the ``voyageai`` SDK, and the configured LLM chain as a
listwise reranker (one prompt with the numbered candidates, the answer a JSON list of numbers).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from memstream.schemas.memory import HybridHit

if TYPE_CHECKING:
    from memstream.llm.base import LLM
    from memstream.settings import Settings

log = logging.getLogger(__name__)


class RerankerBusy(RuntimeError):
    """The reranker would have to wait for a busy local model: search keeps its own order at once."""


class Reranker(Protocol):
    name: str

    async def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        """Indices into ``documents``, most relevant first (every index at most once)."""

    async def close(self) -> None: ...


def apply_order(count: int, order: Sequence[Any]) -> list[int]:
    """A reranker's answer as a full permutation of ``range(count)``: valid indices in its order, each
    once, then whatever it left out in the original order."""
    seen: list[int] = []
    for index in order:
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count and index not in seen:
            seen.append(index)
    return seen + [i for i in range(count) if i not in seen]


async def rerank_top(
    query: str, hits: Sequence[HybridHit], reranker: Reranker, *, top_n: int = 20, timeout_s: float = 2.0
) -> list[HybridHit]:
    """``hits`` with the first ``top_n`` in the reranker's order, or unchanged if it fails or is late."""
    head, tail = list(hits[:top_n]), list(hits[top_n:])
    if len(head) < 2:
        return list(hits)
    try:
        order = await asyncio.wait_for(reranker.rerank(query, [hit.memory.text for hit in head]), timeout_s)
    except TimeoutError:
        log.warning("reranker %s gave no answer within %.1fs; keeping the search order", reranker.name, timeout_s)
        return list(hits)
    except RerankerBusy as busy:
        log.info("reranker %s skipped: %s; keeping the search order", reranker.name, busy)
        return list(hits)
    except Exception:
        log.warning("reranker %s failed; keeping the search order", reranker.name, exc_info=True)
        return list(hits)
    return [head[i] for i in apply_order(len(head), order)] + tail


class VoyageReranker:
    """Voyage's rerank endpoint through the official SDK (``AsyncClient.rerank``)."""

    def __init__(self, api_key: str, model: str, *, base_url: str | None = None, timeout_s: float = 2.0):
        from voyageai.client_async import AsyncClient

        self.name = f"voyage/{model}"
        self.model = model
        # The SDK's max_retries counts attempts: 1 is one try, as Pipeline v2 wants (no second attempt).
        self.client = AsyncClient(api_key=api_key, max_retries=1, timeout=timeout_s, base_url=base_url)
        self._session: Any = None

    async def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        import aiohttp
        import voyageai

        if self._session is None:
            self._session = aiohttp.ClientSession()
        # The SDK opens a session per request unless one is in this context variable (as the embedder does).
        token = voyageai.aiosession.set(self._session)
        try:
            result = await self.client.rerank(query, list(documents), model=self.model, truncation=True)
        finally:
            voyageai.aiosession.reset(token)
        ranked = sorted(result.results, key=lambda r: r.relevance_score, reverse=True)
        return [r.index for r in ranked]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


LISTWISE_SYSTEM = (
    "You rank memories by how useful each is for answering a search query. "
    "Answer with a JSON array of the memories' numbers, most useful first, and nothing else."
)
_ARRAY = re.compile(r"\[[^\[\]]*\]")


class LLMReranker:
    """The configured LLM chain as a listwise reranker: one prompt, all candidates, one JSON answer."""

    def __init__(self, llm: LLM, *, max_chars: int = 600):
        self.llm = llm
        self.name = f"llm/{getattr(llm, 'provider', '?')}"
        self.max_chars = max_chars

    def prompt(self, query: str, documents: Sequence[str]) -> str:
        lines = [f"Query: {query}", "", "Memories:"]
        lines += [f"[{i}] {' '.join(doc.split())[: self.max_chars]}" for i, doc in enumerate(documents)]
        lines += ["", f"Rank all {len(documents)} by usefulness for the query: a JSON array of their numbers."]
        return "\n".join(lines)

    async def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        from memstream.llm.base import is_busy

        if is_busy(self.llm):  # a local model, working on extraction: the search would wait minutes
            raise RerankerBusy(f"{getattr(self.llm, 'model', 'the LLM')} is busy")
        completion = await self.llm.complete(LISTWISE_SYSTEM, self.prompt(query, documents), max_tokens=256)
        found = _ARRAY.search(completion.text)
        if found is None:
            raise ValueError(f"the listwise reranker answered no JSON array: {completion.text[:80]!r}")
        order = json.loads(found.group(0))
        if not isinstance(order, list):
            raise ValueError("the listwise reranker's answer is not a list")
        return [int(i) for i in order if isinstance(i, int | float | str) and str(i).strip().lstrip("-").isdigit()]

    async def close(self) -> None:
        return None  # the LLM chain belongs to the providers, which close it


def build_reranker(settings: Settings, llm: LLM | None) -> Reranker | None:
    """The reranker MEMSTREAM_RERANKER asks for, or None (off, the default)."""
    if settings.reranker == "none":
        return None
    if settings.reranker == "llm":
        if llm is None:
            log.warning("MEMSTREAM_RERANKER=llm needs an LLM (raw mode has none): search is not reranked")
            return None
        return LLMReranker(llm)
    if not settings.voyage_api_key:
        log.warning("MEMSTREAM_RERANKER=voyage needs VOYAGE_API_KEY: search is not reranked")
        return None
    return VoyageReranker(
        settings.voyage_api_key,
        settings.reranker_model,
        base_url=settings.voyage_base_url or None,
        timeout_s=settings.reranker_timeout_ms / 1000,
    )
