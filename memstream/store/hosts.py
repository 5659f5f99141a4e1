"""How every store holds its Qdrant: an embedded shard on its own thread, or a server client.

Memories, the audit history and the knowledge graph all live in Qdrant, embedded
(qdrant-edge-py, a shard directory under the data dir) or on a server (qdrant-client).
The two base classes own the lifecycle every store shares (:class:`EdgeBacked`, a shard
on its own thread; :class:`ServerBacked`, a client), and the translators below turn a
store's :class:`~memstream.store.points.Select` and index kinds into each library's
types; each store adds only its collection and its reads and writes.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Final, TypeVar

from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import (
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    FieldCondition,
    Filter,
    HasIdCondition,
    IsEmptyCondition,
    KeywordIndexParams,
    MatchAny,
    MatchSubstring,
    MatchValue,
    PayloadSchemaType,
    Record,
    ScrollRequest,
    UpdateOperation,
)

from memstream.store.points import SCROLL_PAGE, IndexKind, Select

T = TypeVar("T")

#: A shard's own persisted config; its presence means the shard exists.
SHARD_CONFIG_FILE: Final = "edge_config.json"
#: The sparse vector a payload-only shard declares and no point fills (a shard needs a vector kind).
NO_VECTOR: Final = "none"


class EdgeBacked(ABC):
    """A store on one qdrant-edge shard at ``root / collection``, and the one thread every call on it runs on.

    Every shard call blocks, and the shard is not meant to be shared between threads,
    so all of them run on one dedicated single-thread executor. That also makes each
    read-modify-write done inside one call atomic with respect to the others.
    """

    #: The shard directory's name when the constructor is given none.
    default_collection: ClassVar[str]

    def __init__(self, root: Path, *, collection: str | None = None) -> None:
        self.collection = collection or self.default_collection
        self.path = Path(root) / self.collection
        self._shard: EdgeShard | None = None
        self._executor: ThreadPoolExecutor | None = None
        super().__init__()

    @abstractmethod
    def _open_shard(self) -> EdgeShard:
        """Load or create the shard with its vectors and indexes; runs on the shard's thread."""

    async def open(self) -> None:
        if self._shard is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"edge-{self.path.name}")
        try:
            self._shard = await asyncio.get_running_loop().run_in_executor(executor, self._open_shard)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._executor = executor

    async def _run(self, fn: Callable[[EdgeShard], T]) -> T:
        if self._shard is None or self._executor is None:
            raise RuntimeError(f"{type(self).__name__} at {self.path} is not open")
        # The shard is looked up when the call runs, not when it is queued: a store may
        # replace its shard on the thread (EdgeStore's index swap) while calls wait.
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[EdgeShard], T]) -> T:
        if self._shard is None:
            raise RuntimeError(f"{type(self).__name__} at {self.path} is not open")
        return fn(self._shard)

    async def close(self) -> None:
        if self._shard is None or self._executor is None:
            return
        executor, self._executor = self._executor, None  # refuses new calls; queued ones still run

        def _close() -> None:
            shard, self._shard = self._shard, None
            if shard is not None:
                shard.flush()
                shard.close()

        try:
            await asyncio.get_running_loop().run_in_executor(executor, _close)
        finally:
            executor.shutdown(wait=True)


class ServerBacked(ABC):
    """A store in the collection ``collection`` of a Qdrant server (or the client's local mode)."""

    #: The collection's name when the constructor is given none.
    default_collection: ClassVar[str]

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        client: AsyncQdrantClient | None = None,
        collection: str | None = None,
    ) -> None:
        """Connect by ``url``/``api_key`` or ``location``, or share an open ``client``.

        A shared client (one connection for every store) is left open by close().
        """
        self.collection = collection or self.default_collection
        self._url, self._api_key, self._location = url, api_key, location
        self._shared = client
        self._client: AsyncQdrantClient | None = None
        super().__init__()

    @abstractmethod
    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        """Create the collection and its indexes where they are missing."""

    @property
    def _qdrant(self) -> AsyncQdrantClient:
        if self._client is None:
            raise RuntimeError(f"{type(self).__name__} for {self.collection} is not open")
        return self._client

    async def open(self) -> None:
        """Connect and create the collection and its indexes; idempotent."""
        if self._client is not None:
            return
        client = self._shared or AsyncQdrantClient(location=self._location, url=self._url, api_key=self._api_key)
        try:
            await self._ensure_collection(client)
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


# -- one Select, two filters ---------------------------------------------------------


def edge_filter(select: Select) -> Filter | None:
    """``select`` as a qdrant-edge filter; None when it keeps every point."""
    if not select:
        return None

    def one_of(key: str, values: Collection[str]) -> FieldCondition:
        # One value as MatchValue: Qdrant then walks that value's points from the keyword index alone,
        # where a one-value MatchAny also checks each of them (36 vs 21 ms CPU over 100k memories).
        [*listed] = values
        if len(listed) == 1 and isinstance(listed[0], str):
            return FieldCondition(key, match=MatchValue(listed[0]))
        return FieldCondition(key, match=MatchAny(listed))

    must: list[Any] = [one_of(k, v) for k, v in select.all_of.items()]
    if select.any_of:
        must.append(Filter(should=[one_of(k, v) for k, v in select.any_of.items()]))
    for key, parts in select.contains.items():
        must.append(Filter(should=[FieldCondition(key, match=MatchSubstring(p)) for p in parts]))
    for key, values in select.absent_or.items():
        must.append(Filter(should=[IsEmptyCondition(key), one_of(key, values)]))
    # HasIdCondition insists on a set; a list raises TypeError.
    must_not: list[Any] = [HasIdCondition(set(select.exclude_ids))] if select.exclude_ids else []
    for key, values in select.none_of.items():
        must_not.append(IsEmptyCondition(key))
        if values:
            must_not.append(one_of(key, values))
    return Filter(must=must or None, must_not=must_not or None)


def server_filter(select: Select) -> models.Filter | None:
    """``select`` as a qdrant-client filter; None when it keeps every point."""
    if not select:
        return None

    def one_of(key: str, values: Collection[str]) -> models.FieldCondition:
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))

    must: list[models.Condition] = [one_of(k, v) for k, v in select.all_of.items()]
    if select.any_of:
        must.append(models.Filter(should=[one_of(k, v) for k, v in select.any_of.items()]))
    for key, parts in select.contains.items():
        names = [models.FieldCondition(key=key, match=models.MatchSubstring(substring=p)) for p in parts]
        must.append(models.Filter(should=list(names)))
    for key, values in select.absent_or.items():
        missing = models.IsEmptyCondition(is_empty=models.PayloadField(key=key))
        must.append(models.Filter(should=[missing, one_of(key, values)]))
    must_not: list[models.Condition] = []
    if select.exclude_ids:
        must_not.append(models.HasIdCondition(has_id=list(select.exclude_ids)))
    for key, values in select.none_of.items():
        must_not.append(models.IsEmptyCondition(is_empty=models.PayloadField(key=key)))
        if values:
            must_not.append(one_of(key, values))
    return models.Filter(must=must or None, must_not=must_not or None)


# -- paging --------------------------------------------------------------------------


def edge_pages(
    shard: EdgeShard, flt: Filter | None, *, with_payload: bool | list[str] = True
) -> Iterator[list[Record]]:
    """Every point ``flt`` keeps, a scroll page at a time in id order; on the shard's thread."""
    offset: Any = None
    while True:
        request = ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=flt, with_payload=with_payload)
        page, offset = shard.scroll(request)
        yield page
        if offset is None:
            return


async def server_pages(
    client: AsyncQdrantClient, collection: str, flt: models.Filter | None, *, with_payload: bool | list[str] = True
) -> AsyncIterator[list[models.Record]]:
    """Every point ``flt`` keeps, a scroll page at a time in id order."""
    offset: Any = None
    while True:
        page, offset = await client.scroll(
            collection, scroll_filter=flt, limit=SCROLL_PAGE, offset=offset, with_payload=with_payload
        )
        yield page
        if offset is None:
            return


# -- collections and their indexes ---------------------------------------------------


_EDGE_SCHEMAS: Final = {
    "keyword": PayloadSchemaType.Keyword,
    "integer": PayloadSchemaType.Integer,
    "datetime": PayloadSchemaType.Datetime,
}
_SERVER_SCHEMAS: Final = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "datetime": models.PayloadSchemaType.DATETIME,
}


def edge_index(kind: IndexKind) -> PayloadSchemaType | KeywordIndexParams:
    """The qdrant-edge schema of an index kind."""
    return KeywordIndexParams(prefix=True) if kind == "keyword-prefix" else _EDGE_SCHEMAS[kind]


def server_index(kind: IndexKind) -> models.PayloadSchemaType | models.KeywordIndexParams:
    """The qdrant-client schema of an index kind."""
    if kind == "keyword-prefix":
        return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, prefix=True)
    return _SERVER_SCHEMAS[kind]


def ensure_edge_indexes(
    shard: EdgeShard,
    indexes: Mapping[str, IndexKind],
    update: Callable[[UpdateOperation], None] | None = None,
) -> None:
    """Create the payload indexes the shard lacks, through ``update`` (default: the shard's own)."""
    apply = update or shard.update
    existing = shard.info().payload_schema
    for field, kind in indexes.items():
        if field not in existing:
            apply(UpdateOperation.create_field_index(field, edge_index(kind)))


async def ensure_server_indexes(client: AsyncQdrantClient, name: str, indexes: Mapping[str, IndexKind]) -> None:
    """Create the payload indexes collection ``name`` lacks."""
    if is_local(client):
        return  # Local mode ignores payload indexes and warns on every create.
    existing = (await client.get_collection(name)).payload_schema
    for field, kind in indexes.items():
        if field not in existing:
            await client.create_payload_index(name, field, field_schema=server_index(kind))


async def create_collection(client: AsyncQdrantClient, name: str, create: Callable[[], Awaitable[object]]) -> None:
    """Create collection ``name`` with ``create`` unless it exists; another worker may race us."""
    if await client.collection_exists(name):
        return
    try:
        await create()
    except Exception:
        if not await client.collection_exists(name):
            raise


def open_payload_shard(path: Path, indexes: Mapping[str, IndexKind]) -> EdgeShard:
    """Load, or create, a shard of payloads only (no vectors) with the given payload indexes:
    the audit history's and the graph's. Runs on the shard's thread (an EdgeBacked opener)."""
    if (path / SHARD_CONFIG_FILE).exists():
        shard = EdgeShard.load(str(path))
    else:
        shard = EdgeShard.create(str(path), EdgeConfig(sparse_vectors={NO_VECTOR: EdgeSparseVectorParams()}))
    ensure_edge_indexes(shard, indexes)
    return shard


async def ensure_payload_collection(client: AsyncQdrantClient, name: str, indexes: Mapping[str, IndexKind]) -> None:
    """A collection of payloads only (no vectors) with the given payload indexes: the audit
    history's and the graph's. Existing collections get the indexes they lack."""
    await create_collection(client, name, lambda: client.create_collection(name, vectors_config={}))
    await ensure_server_indexes(client, name, indexes)


def is_local(client: AsyncQdrantClient) -> bool:
    """True for the client's in-process mode (``:memory:`` or a ``path``), not a server."""
    options = client.init_options
    return options.get("location") == ":memory:" or options.get("path") is not None
