"""A fake Voyage AI embeddings API on loopback, speaking the real wire protocol so tests exercise the real SDK.

    with FakeVoyage(api_key="pa-test") as fake:
        embedder = VoyageEmbedder("pa-test", base_url=fake.base_url)

It serves aiohttp on its own event loop in a background thread (see `LoopbackFake`): a sync test, an async test
(whose loop it never blocks) and another process all reach it the same way, at `base_url`. `POST /v1/embeddings`
and `POST /v1/rerank` exist.

Vectors are unit length, derived from a hash of the text alone (not of `input_type`), so identical text gives
an identical vector and distinct texts are nearly orthogonal; `pin` sets a text's vector when a test needs
two texts at a chosen distance.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from aiohttp import web

from tests.fakes.loopback import HttpRecord, LoopbackFake

DEFAULT_DIM = 1024
#: Texts per request the fake accepts: the limit the SDK (VOYAGE_EMBED_BATCH_SIZE) and memstream batch to.
MAX_BATCH = 128
_DIMENSIONS = (256, 512, 1024, 2048)


def fake_vector(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The vector the fake returns for `text`, for tests that compare against it."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    unit: list[float] = (v / np.linalg.norm(v)).tolist()
    return unit


class RecordedRequest(HttpRecord):
    """A request as the fake received it: headers, parsed body, path and query (see `HttpRecord`)."""

    @property
    def api_key(self) -> str | None:
        return self.headers.get("authorization", "").removeprefix("Bearer ").strip() or None

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def input_type(self) -> str | None:
        return self.body.get("input_type")

    @property
    def texts(self) -> list[str]:
        raw = self.body.get("input")
        return [raw] if isinstance(raw, str) else list(raw or [])

    @property
    def batch_size(self) -> int:
        return len(self.texts)


class FakeVoyage(LoopbackFake[RecordedRequest]):
    """`requests` holds every request received, rejected ones included (unknown paths not), oldest first.

    `fail_next` answers with the API's `{"detail": ...}` error body.
    """

    name = "FakeVoyage"

    def __init__(self, *, api_key: str | None = None, max_batch: int = MAX_BATCH) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is."""
        super().__init__()
        self._api_key = api_key
        self._max_batch = max_batch
        self._pinned: dict[str, list[float]] = {}  # guarded by self._lock, like requests and script
        #: Rerank scores by document text, overriding the word-overlap score.
        self.relevance_scores: dict[str, float] = {}

    @property
    def base_url(self) -> str:
        """The API root including `/v1`: the SDK appends only `/embeddings`."""
        return f"{self._root_url}/v1"

    def pin(self, text: str, vector: Sequence[float]) -> None:
        """Return `vector` (normalised here) for `text` instead of its hash-derived one."""
        v = np.asarray(vector, dtype=np.float32)
        with self._lock:
            self._pinned[text] = (v / np.linalg.norm(v)).tolist()

    # --- the API ---

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/rerank", self._rerank)
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"detail": message}

    async def _embeddings(self, request: web.Request) -> web.Response:
        recorded, parsed = await self._record_request(request, RecordedRequest)
        body = recorded.body

        # A rejected request does not use up a scripted failure or delay.
        if recorded.api_key is None or (self._api_key is not None and recorded.api_key != self._api_key):
            return self._error(401, "Provided API key is invalid.")
        problem = self._invalid(parsed)
        if problem:
            return self._error(400, problem)

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        dim = body.get("output_dimension") or DEFAULT_DIM
        with self._lock:
            vectors = [self._pinned.get(t) or fake_vector(t, dim) for t in recorded.texts]
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "embedding": _b64(v) if as_base64 else v, "index": i} for i, v in enumerate(vectors)
        ]
        # Words stand in for tokens: tests need counts that are stable and predictable, not exact.
        tokens = sum(len(t.split()) for t in recorded.texts)
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": tokens}}
        )

    async def _rerank(self, request: web.Request) -> web.Response:
        """``POST /v1/rerank``: documents scored by how many distinct query words they contain (then
        by their position), so a test knows the order; ``relevance_scores`` sets a document's score."""
        parsed = await self._read_json(request)
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        recorded = RecordedRequest({k.lower(): v for k, v in request.headers.items()}, body)
        self._record(recorded)
        if recorded.api_key is None or (self._api_key is not None and recorded.api_key != self._api_key):
            return self._error(401, "Provided API key is invalid.")
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not query:
            return self._error(400, "Field 'query' must be a non-empty string.")
        if not isinstance(documents, list) or not documents or not all(isinstance(d, str) for d in documents):
            return self._error(400, "Field 'documents' must be a non-empty list of strings.")
        if not isinstance(body.get("model"), str):
            return self._error(400, "Field 'model' is required.")
        scripted = await self._scripted()
        if scripted is not None:
            return scripted
        words = set(query.lower().split())
        with self._lock:
            pinned = dict(self.relevance_scores)
        scores = [pinned.get(doc, len(words & set(doc.lower().split())) / (len(words) or 1)) for doc in documents]
        order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
        top_k = body.get("top_k")
        if isinstance(top_k, int):
            order = order[:top_k]
        data = [{"index": i, "relevance_score": scores[i]} for i in order]
        tokens = len(query.split()) + sum(len(d.split()) for d in documents)
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": tokens}}
        )

    def _invalid(self, parsed: object) -> str | None:
        """The real API's 400 reasons that a test of memstream could plausibly trip."""
        if not isinstance(parsed, dict):
            return "Request body must be a JSON object."
        if not isinstance(parsed.get("model"), str):
            return "Field 'model' is required."
        texts = parsed.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return "Field 'input' must be a string or a non-empty list of strings."
        if len(texts) > self._max_batch:
            return f"The batch size limit is {self._max_batch}. Your batch size is {len(texts)}."
        if parsed.get("input_type") not in (None, "query", "document"):
            return "Field 'input_type' must be null, 'query' or 'document'."
        if parsed.get("output_dtype") not in (None, "float"):
            return "This fake only serves output_dtype 'float'."
        if parsed.get("encoding_format") not in (None, "base64"):
            return "Field 'encoding_format' must be null or 'base64'."
        if parsed.get("output_dimension") not in (None, *_DIMENSIONS):
            return f"Field 'output_dimension' must be one of {_DIMENSIONS}."
        return None

    async def _not_found(self, request: web.Request) -> web.Response:
        return self._error(404, "Not Found")


def _b64(vector: list[float]) -> str:
    # What the SDK asks for by default: little-endian float32 bytes, base64-encoded.
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
