"""How every store holds its Qdrant: an embedded shard on its own thread, or a server client.

Memories, the audit history and the knowledge graph all live in Qdrant, embedded
(qdrant-edge-py, a shard directory under the data dir) or on a server (qdrant-client).
These two holders own the lifecycle they share; each store adds only its collection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import EdgeConfig, EdgeShard, EdgeSparseVectorParams, UpdateOperation

T = TypeVar("T")

#: A shard's own persisted config; its presence means the shard exists.
SHARD_CONFIG_FILE: Final = "edge_config.json"
#: The sparse vector a payload-only shard declares and no point fills (a shard needs a vector kind).
NO_VECTOR: Final = "none"


class ShardHost:
    """A qdrant-edge shard at ``path`` and the one thread every call on it runs on.

    Every shard call blocks, and the shard is not meant to be shared between threads,
    so all of them run on one dedicated single-thread executor. That also makes each
    read-modify-write done inside one call atomic with respect to the others.
    """

    def __init__(self, path: Path, opener: Callable[[], EdgeShard], *, owner: str) -> None:
        self.path = path
        self._opener = opener
        self._owner = owner
        self._shard: EdgeShard | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        if self._shard is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"edge-{self.path.name}")
        try:
            self._shard = await asyncio.get_running_loop().run_in_executor(executor, self._opener)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._executor = executor

    async def run(self, fn: Callable[[EdgeShard], T]) -> T:
        if self._shard is None or self._executor is None:
            raise RuntimeError(f"{self._owner} at {self.path} is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, self._shard)

    async def close(self) -> None:
        if self._shard is None or self._executor is None:
            return
        shard, executor = self._shard, self._executor
        self._shard, self._executor = None, None

        def _close(s: EdgeShard) -> None:
            s.flush()
            s.close()

        try:
            await asyncio.get_running_loop().run_in_executor(executor, _close, shard)
        finally:
            executor.shutdown(wait=True)


class ClientHost:
    """A Qdrant server client: connected by ``url``/``api_key`` or ``location``, or an open
    ``client`` shared with other stores, which close() then leaves open."""

    def __init__(
        self,
        *,
        owner: str,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        client: AsyncQdrantClient | None = None,
    ) -> None:
        self._owner = owner
        self._url, self._api_key, self._location = url, api_key, location
        self._shared = client
        self._client: AsyncQdrantClient | None = None

    @property
    def client(self) -> AsyncQdrantClient:
        if self._client is None:
            raise RuntimeError(f"{self._owner} is not open")
        return self._client

    async def open(self, ensure: Callable[[AsyncQdrantClient], Awaitable[None]]) -> None:
        """Connect and run ``ensure`` (create the collection and its indexes); idempotent."""
        if self._client is not None:
            return
        client = self._shared or AsyncQdrantClient(location=self._location, url=self._url, api_key=self._api_key)
        try:
            await ensure(client)
        except BaseException:
            if client is not self._shared:
                await client.close()
            raise
        self._client = client

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            if client is not self._shared:
                await client.close()


async def create_collection(client: AsyncQdrantClient, name: str, create: Callable[[], Awaitable[object]]) -> None:
    """Create collection ``name`` with ``create`` unless it exists; another worker may race us."""
    if await client.collection_exists(name):
        return
    try:
        await create()
    except Exception:
        if not await client.collection_exists(name):
            raise


def open_payload_shard(path: Path, indexes: Mapping[str, Any]) -> EdgeShard:
    """Load, or create, a shard of payloads only (no vectors) with the given payload indexes:
    the audit history's and the graph's. Runs on the shard's thread (a ShardHost opener)."""
    if (path / SHARD_CONFIG_FILE).exists():
        shard = EdgeShard.load(str(path))
    else:
        shard = EdgeShard.create(str(path), EdgeConfig(sparse_vectors={NO_VECTOR: EdgeSparseVectorParams()}))
    existing = shard.info().payload_schema
    for field, schema in indexes.items():
        if field not in existing:
            shard.update(UpdateOperation.create_field_index(field, schema))
    return shard


async def ensure_payload_collection(
    client: AsyncQdrantClient, name: str, indexes: Mapping[str, models.PayloadSchemaType | models.KeywordIndexParams]
) -> None:
    """A collection of payloads only (no vectors) with the given payload indexes: the audit
    history's and the graph's. Existing collections get the indexes they lack."""
    await create_collection(client, name, lambda: client.create_collection(name, vectors_config={}))
    if is_local(client):
        return  # Local mode ignores payload indexes and warns on every create.
    existing = (await client.get_collection(name)).payload_schema
    for field, schema in indexes.items():
        if field not in existing:
            await client.create_payload_index(name, field, field_schema=schema)


def is_local(client: AsyncQdrantClient) -> bool:
    """True for the client's in-process mode (``:memory:`` or a ``path``), not a server."""
    options = client.init_options
    return options.get("location") == ":memory:" or options.get("path") is not None
