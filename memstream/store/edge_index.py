"""Building a memories shard's vector index (HNSW) in a child process.

qdrant-edge-py's ``EdgeShard.optimize()`` holds the GIL for its whole run (the binding never
releases it: no ``py.detach``/``allow_threads`` in lib/edge/python), and building HNSW over
100k memories takes minutes, so it cannot run in the serving process without freezing its
event loop. :class:`~memstream.store.edge.EdgeStore` copies its shard, runs this module on the
copy in a child process, and swaps the indexed copy in (see ``EdgeStore.build_index``):

    python -m memstream.store.edge_index SHARD_DIR

The child loads the copy with the memories' vectors and an indexing threshold of 1 KB, so
every segment is indexed whatever its size (the store decides when a build is worth it),
runs the optimizers to the end, flushes and prints what it did as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    Modifier,
)

from memstream.store.base import BM25_VECTOR, DENSE_VECTOR
from memstream.store.hosts import SHARD_CONFIG_FILE

#: Segments above this size (KB) get an HNSW index when the optimizers run: all of them.
INDEX_ALL_KB: Final = 1
#: The child's niceness: the build is background work, serving goes first.
BUILD_NICENESS: Final = 10


def memories_config(dim: int, *, optimizers: EdgeOptimizersConfig | None = None) -> EdgeConfig:
    """The shard config of a memories shard: cosine ``dense`` vectors of ``dim``, BM25 terms with IDF."""
    vectors = {DENSE_VECTOR: EdgeVectorParams(size=dim, distance=Distance.Cosine)}
    # IDF is left to Qdrant, from the shard's own statistics at query time.
    sparse = {BM25_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf)}
    return EdgeConfig(vectors=vectors, sparse_vectors=sparse, optimizers=optimizers)


def stored_dim(shard_dir: Path) -> int:
    """The dense vectors' dimension, read from the shard's own config file (it has no accessor)."""
    config = json.loads((shard_dir / SHARD_CONFIG_FILE).read_text())
    return int(config["vectors"][DENSE_VECTOR]["size"])


def hnsw_segments(shard_dir: Path) -> int:
    """How many of the shard's segments hold an HNSW index on the dense vectors (from their segment.json)."""
    count = 0
    for meta in (shard_dir / "segments").glob("*/segment.json"):
        index = json.loads(meta.read_text())["config"]["vector_data"].get(DENSE_VECTOR, {}).get("index", {})
        count += index.get("type") == "hnsw"
    return count


def build(shard_dir: Path) -> dict[str, Any]:
    """Index every segment of the (closed, copied) shard at ``shard_dir``; what was done."""
    began = time.monotonic()
    config = memories_config(stored_dim(shard_dir), optimizers=EdgeOptimizersConfig(indexing_threshold=INDEX_ALL_KB))
    shard = EdgeShard.load(str(shard_dir), config)
    try:
        optimized = shard.optimize()
        shard.flush()
        info = shard.info()
    finally:
        shard.close()
    return {
        "optimized": optimized,
        "points": info.points_count,
        "segments": info.segments_count,
        "hnsw_segments": hnsw_segments(shard_dir),
        "seconds": round(time.monotonic() - began, 3),
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m memstream.store.edge_index SHARD_DIR")
    os.nice(BUILD_NICENESS)
    print(json.dumps(build(Path(args[0]))), flush=True)


if __name__ == "__main__":
    main()
