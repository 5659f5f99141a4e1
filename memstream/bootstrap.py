"""One place that wires real providers from settings (or fakes, in tests) into the pipeline: it builds the
:class:`memstream.ports.Providers` bundle its users take."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from memstream.embed.base import Embedder
from memstream.llm.base import LLM
from memstream.ports import Providers
from memstream.settings import Settings
from memstream.store.base import MemoryStore
from memstream.store.documents import DocumentStore
from memstream.store.graph import GraphStore
from memstream.store.history import HistoryStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from memstream.llm.retry import RetryPolicy

log = logging.getLogger(__name__)


def build_embedder(settings: Settings) -> Embedder:
    if settings.voyage_api_key:
        from memstream.embed.voyage import VoyageEmbedder

        return VoyageEmbedder(
            api_key=settings.voyage_api_key,
            base_url=settings.voyage_base_url or None,
            model=settings.voyage_model,
        )
    from memstream.embed.bundled import BundledEmbedder

    return BundledEmbedder(threads=settings.embed_threads)


def active_collection(settings: Settings, embedding_model: str) -> str | None:
    """The collection to serve: the setting, else the one a replay switched to, else the default."""
    if settings.store_collection:
        return settings.store_collection
    try:
        return str(json.loads(settings.active_collections_file.read_text())[embedding_model])
    except (FileNotFoundError, KeyError, ValueError):
        return None


def build_store(settings: Settings, embedder: Embedder, *, collection: str | None = None) -> MemoryStore:
    collection = collection or active_collection(settings, embedder.model)
    if settings.qdrant_url:
        from memstream.store.qdrant import QdrantServerStore

        return QdrantServerStore(
            embedder.model,
            embedder.dim,
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key or None,
            collection=collection,
        )
    from memstream.store.edge import EdgeStore

    return EdgeStore(
        settings.store_dir,
        embedder.model,
        embedder.dim,
        collection=collection,
        index_every=settings.edge_index_every,
    )


def build_history(settings: Settings) -> HistoryStore:
    if settings.qdrant_url:
        from memstream.store.history import ServerHistoryStore

        return ServerHistoryStore(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    from memstream.store.history import EdgeHistoryStore

    return EdgeHistoryStore(settings.store_dir)


def build_graph(settings: Settings) -> GraphStore | None:
    if not settings.graph_enabled:
        return None
    if settings.qdrant_url:
        from memstream.store.graph import ServerGraphStore

        return ServerGraphStore(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    from memstream.store.graph import EdgeGraphStore

    return EdgeGraphStore(settings.store_dir)


def build_documents(settings: Settings) -> DocumentStore:
    if settings.qdrant_url:
        from memstream.store.documents import ServerDocumentStore

        return ServerDocumentStore(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    from memstream.store.documents import EdgeDocumentStore

    return EdgeDocumentStore(settings.store_dir)


def build_llm(settings: Settings) -> LLM | None:
    """The provider chain of every configured provider, primary first; None is raw mode."""
    from memstream.llm.chain import ProviderChain, ordered
    from memstream.llm.retry import RetryPolicy

    retry = RetryPolicy(
        max_retries=settings.llm_retries, base_delay=settings.llm_backoff, max_delay=settings.llm_backoff_max
    )
    providers = [build(settings, retry) for configured, build in _LLM_PROVIDERS if configured(settings)]
    return ProviderChain(ordered(providers, settings.llm_primary)) if providers else None


# One builder per provider, each importing its SDK only when configured; their order is the chain's
# before MEMSTREAM_LLM_PRIMARY moves the primary first.


def _anthropic(settings: Settings, retry: RetryPolicy) -> LLM:
    from memstream.llm.anthropic import AnthropicLLM

    url = settings.anthropic_base_url or None
    return AnthropicLLM(
        settings.anthropic_api_key,
        base_url=url,
        model=settings.anthropic_model,
        timeout=settings.llm_timeout,
        retry=retry,
    )


def _xai(settings: Settings, retry: RetryPolicy) -> LLM:
    from memstream.llm.xai import XaiLLM

    host = settings.xai_host or None
    return XaiLLM(
        settings.xai_api_key, model=settings.xai_model, api_host=host, timeout=settings.llm_timeout, retry=retry
    )


def _google(settings: Settings, retry: RetryPolicy) -> LLM:
    from memstream.llm.google import GoogleLLM

    url = settings.google_base_url or None
    return GoogleLLM(
        settings.google_api_key, model=settings.google_model, base_url=url, timeout=settings.llm_timeout, retry=retry
    )


def _local(settings: Settings, retry: RetryPolicy) -> LLM:
    from memstream.llm.local import LocalLLM

    return LocalLLM(
        settings.local_llm_url,
        model=settings.local_llm_model,
        # Its own waits, not MEMSTREAM_LLM_TIMEOUT: a CPU model reads a prompt for minutes.
        timeout=settings.local_llm_timeout,
        idle_timeout=settings.local_llm_idle_timeout,
        dialect=settings.local_llm_dialect,
        concurrency=settings.local_llm_concurrency,
        context_tokens=settings.local_llm_context,
        retry=retry,
    )


#: Each provider: whether it is configured, and how it is built.
_LLM_PROVIDERS: tuple[tuple[Callable[[Settings], object], Callable[[Settings, RetryPolicy], LLM]], ...] = (
    (lambda settings: settings.anthropic_api_key, _anthropic),
    (lambda settings: settings.xai_api_key, _xai),
    (lambda settings: settings.google_api_key, _google),
    (lambda settings: settings.local_llm_url, _local),
)


def build_providers(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    store: MemoryStore | None = None,
    llm: LLM | None = None,
    history: HistoryStore | None = None,
) -> Providers:
    from memstream.recall.rerank import build_reranker

    embedder = embedder or build_embedder(settings)
    llm = llm or build_llm(settings)
    return Providers(
        settings=settings,
        embedder=embedder,
        store=store or build_store(settings, embedder),
        llm=llm,
        history=history or build_history(settings),
        graph=build_graph(settings),
        documents=build_documents(settings),
        reranker=build_reranker(settings, llm),
    )
