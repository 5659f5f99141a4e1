"""The ports bundle: what the pipeline and the read side take from the outside world.

Declared beside the interfaces it bundles (embedder, stores, LLM), below everything that uses it — the
agents, the read side, serving — and filled by ``memstream.bootstrap`` (real providers) or by tests (fakes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memstream.embed.base import Embedder
from memstream.llm.base import LLM
from memstream.settings import Settings
from memstream.store.base import MemoryStore
from memstream.store.documents import DocumentStore
from memstream.store.graph import GraphStore
from memstream.store.history import HistoryStore

if TYPE_CHECKING:
    from memstream.recall.rerank import Reranker

log = logging.getLogger(__name__)


@dataclass
class Providers:
    """The pipeline's outside world: an embedder, a store for its vectors, and maybe an LLM.

    ``llm is None`` is raw mode: turns are stored as conversation memories, no inference.
    """

    settings: Settings
    embedder: Embedder
    store: MemoryStore
    llm: LLM | None
    #: The audit trail of every decision and change (Pipeline v2's memory_history).
    history: HistoryStore
    #: The knowledge graph; None unless MEMSTREAM_GRAPH_ENABLED.
    graph: GraphStore | None = None
    #: Ingested documents, their status trail and chunk links (Pipeline v2); None: no document ingest.
    documents: DocumentStore | None = None
    #: Reorders search's top results; None unless MEMSTREAM_RERANKER (Pipeline v2's optional reranking).
    reranker: Reranker | None = None

    @property
    def raw_mode(self) -> bool:
        return self.llm is None

    async def open(self) -> None:
        await self.store.open()
        await self.history.open()
        if self.graph is not None:
            await self.graph.open()
        if self.documents is not None:
            await self.documents.open()

    async def close(self) -> None:
        closers = [self.store.close, self.history.close, self.embedder.close]
        closers += [self.graph.close] if self.graph is not None else []
        closers += [self.documents.close] if self.documents is not None else []
        closers += [self.llm.close] if self.llm is not None else []
        closers += [self.reranker.close] if self.reranker is not None else []
        for closer in closers:
            try:
                await closer()
            except Exception:  # closing must go on for the others
                log.exception("error while closing a provider")
