"""Voyage AI embeddings (voyage-code-3 by default) through the official ``voyageai`` SDK."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence

import aiohttp
import voyageai
from voyageai import error
from voyageai.client_async import AsyncClient
from voyageai.object import EmbeddingsObject

from memstream.embed.base import DistanceProfile, EmbeddingOutage

log = logging.getLogger(__name__)

#: Texts per request; the SDK's own ``VOYAGE_EMBED_BATCH_SIZE``.
MAX_BATCH = 128
#: Longest wait between two attempts, whatever the backoff or a Retry-After says.
MAX_RETRY_WAIT = 16.0

#: Transient failures worth another attempt. The SDK's own retry loop covers only
#: 429, 502-504 and timeouts: it gives up on HTTP 500 (ServerError) and on dropped
#: connections, which is why the retries live here.
_RETRYABLE: tuple[type[error.VoyageError], ...] = (
    error.RateLimitError,
    error.ServiceUnavailableError,
    error.ServerError,
    error.Timeout,
    error.APIConnectionError,
)


class VoyageEmbedder:
    """Batches texts into requests of at most :data:`MAX_BATCH`, sent one after another.

    Sequential batches keep a large backfill under Voyage's per-minute token limit
    instead of turning it into a burst of 429s.
    """

    model: str
    dim: int
    #: The extraction spec's thresholds, which were set for voyage-code-3.
    profile: DistanceProfile = DistanceProfile(dedup_general=0.12, dedup_structural=0.25, contradiction=0.35)

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        model: str = "voyage-code-3",
        dim: int = 1024,
        timeout: float = 30.0,
        max_retries: int = 3,
        retry_wait: float = 1.0,
    ) -> None:
        """``api_key`` falls back to the SDK's ``VOYAGE_API_KEY``; ``base_url`` ends in ``/v1``.

        ``max_retries`` counts retries after the first attempt; ``retry_wait`` is the
        first backoff in seconds, doubled on each retry.
        """
        # The SDK's max_retries is tenacity's stop_after_attempt, i.e. attempts, so
        # 1 means "try once": retrying is done by _with_retries.
        self._client = AsyncClient(api_key=api_key, max_retries=1, timeout=timeout, base_url=base_url)
        if not self._client.api_key:
            # Without a key the SDK also drops base_url and fails only at the first call.
            raise ValueError("VoyageEmbedder needs an API key (api_key= or VOYAGE_API_KEY)")
        self.model = model
        self.dim = dim
        self._max_retries = max_retries
        self._retry_wait = retry_wait
        self._session: aiohttp.ClientSession | None = None
        #: Tokens billed so far, from the responses' ``usage.total_tokens``.
        self.total_tokens = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), MAX_BATCH):
            vectors.extend(await self._embed(list(texts[start : start + MAX_BATCH]), "document"))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed([text], "query")
        return vector

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _embed(self, batch: list[str], input_type: str) -> list[list[float]]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        # Without a session in this context variable the SDK opens and closes one
        # per request, paying a new connection (and TLS handshake) every batch.
        token = voyageai.aiosession.set(self._session)
        try:
            result = await self._with_retries(batch, input_type)
        finally:
            voyageai.aiosession.reset(token)
        self.total_tokens += result.total_tokens
        vectors = [list(map(float, v)) for v in result.embeddings]
        if len(vectors) != len(batch) or any(len(v) != self.dim for v in vectors):
            raise ValueError(
                f"{self.model} returned {len(vectors)} vectors for {len(batch)} texts; "
                f"expected {self.dim} dimensions each"
            )
        return vectors

    async def _with_retries(self, batch: list[str], input_type: str) -> EmbeddingsObject:
        for attempt in range(self._max_retries + 1):
            try:
                return await self._client.embed(batch, model=self.model, input_type=input_type)
            except _RETRYABLE as exc:
                if attempt == self._max_retries:
                    raise EmbeddingOutage(f"{self.model}: {type(exc).__name__}: {exc}") from exc
                wait = self._backoff(attempt, exc)
                log.warning("voyage embed failed (%r); retry %d in %.2fs", exc, attempt + 1, wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, exc: error.VoyageError) -> float:
        # A 429 may say when to come back; otherwise exponential with jitter, so
        # several workers throttled together do not retry in lockstep.
        retry_after = exc.headers.get("retry-after")
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date rather than seconds
                return min(max(float(retry_after), 0.0), MAX_RETRY_WAIT)
        return min(self._retry_wait * 2.0**attempt, MAX_RETRY_WAIT) * random.uniform(0.5, 1.0)
