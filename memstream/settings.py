"""All of memstream's settings in one object, read from the environment when the app is built.

Every field names its environment variable. Nothing here is read at import time.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

#: The idle fetch wait on the embedded broker (MEMSTREAM_FETCH_IDLE_WAIT_MS's 0): an idle worker's
#: consumers fetch this seldom, and a record published meanwhile ends the pause at once. 8 s, not
#: 2: the worker's fetches were half of an idle `memstream up`'s CPU (0.83-1.01% of a core in all at
#: 2 s, 0.51-0.52% at 8 s, docs/benchmarks.md); only a writer that does not ring (a foreign Kafka
#: client) waits longer for it.
EMBEDDED_IDLE_WAIT_MS = 8000


class SettingsError(ValueError):
    """A setting has a value memstream cannot use; the message names the variable."""


def _env(
    name: str, *, low: float | None = None, high: float | None = None, choices: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A field's metadata: its variable, and the range (inclusive) or choices it is validated against."""
    meta: dict[str, Any] = {"env": name}
    if low is not None or high is not None:
        meta["range"] = (low, high)
    if choices:
        meta["choices"] = choices
    return meta


@dataclass(frozen=True, kw_only=True)
class Settings:
    # --- where things live -------------------------------------------------------------
    #: MEMSTREAM_DATA_DIR: vector store, Faust table state and the runtime file.
    data_dir: Path = field(default=Path(".memstream"), metadata=_env("MEMSTREAM_DATA_DIR"))
    #: MEMSTREAM_KAFKA_BOOTSTRAP: ``host:port[,host:port]`` of a Kafka cluster. Empty: start
    #: the embedded Tansu broker on a free loopback port.
    kafka_bootstrap: str = field(default="", metadata=_env("MEMSTREAM_KAFKA_BOOTSTRAP"))
    #: MEMSTREAM_KAFKA_SECURITY_PROTOCOL: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, for every Kafka client.
    kafka_security_protocol: str = field(default="PLAINTEXT", metadata=_env("MEMSTREAM_KAFKA_SECURITY_PROTOCOL"))
    #: MEMSTREAM_KAFKA_SASL_MECHANISM: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL protocol).
    kafka_sasl_mechanism: str = field(default="SCRAM-SHA-512", metadata=_env("MEMSTREAM_KAFKA_SASL_MECHANISM"))
    #: MEMSTREAM_KAFKA_SASL_USERNAME: the SASL user memstream connects as (its Kafka ACL principal).
    kafka_sasl_username: str = field(default="", metadata=_env("MEMSTREAM_KAFKA_SASL_USERNAME"))
    #: MEMSTREAM_KAFKA_SASL_PASSWORD: that user's password.
    kafka_sasl_password: str = field(default="", metadata=_env("MEMSTREAM_KAFKA_SASL_PASSWORD"))
    #: MEMSTREAM_KAFKA_SSL_CAFILE: a CA bundle to verify the brokers by (SSL protocols). Empty: the system's.
    kafka_ssl_cafile: str = field(default="", metadata=_env("MEMSTREAM_KAFKA_SSL_CAFILE"))
    #: MEMSTREAM_PROCESSING_GUARANTEE: at_least_once, or exactly_once (Faust's transactions: a stage's
    #: outputs, table writes and input offsets commit together; needs a Kafka with transactions, not
    #: the embedded broker, and costs a producer per partition). memstream is crash-consistent without it.
    processing_guarantee: str = field(default="at_least_once", metadata=_env("MEMSTREAM_PROCESSING_GUARANTEE"))
    #: MEMSTREAM_TOPIC_PREFIX: prefix of every topic and of the consumer group.
    topic_prefix: str = field(default="memstream", metadata=_env("MEMSTREAM_TOPIC_PREFIX"))
    #: MEMSTREAM_PARTITIONS: partitions of every keyed topic (consolidation always has 1).
    partitions: int = field(default=4, metadata=_env("MEMSTREAM_PARTITIONS"))
    #: MEMSTREAM_REPLICATION: replication factor of created topics.
    replication: int = field(default=1, metadata=_env("MEMSTREAM_REPLICATION"))
    #: MEMSTREAM_FETCH_MAX_WAIT_MS: longest a consumer fetch waits while records come. 0: 20 ms on the
    #: embedded broker (Tansu holds a fetch for the whole wait), 500 ms on Kafka.
    fetch_max_wait_ms: int = field(default=0, metadata=_env("MEMSTREAM_FETCH_MAX_WAIT_MS", low=0, high=60_000))
    #: MEMSTREAM_FETCH_IDLE_WAIT_MS: the longest wait once fetches come back empty: after three
    #: empty fetches in a row a consumer doubles its wait up to this, and drops back to
    #: MEMSTREAM_FETCH_MAX_WAIT_MS at the first record. 0: 8000 ms on the embedded broker, where the
    #: wait beyond the fetch wait is a pause between fetches that ends at once when a record is
    #: published (each Tansu fetch of the worker's partitions costs it ~5 ms of CPU: an idle worker
    #: fetches every 8 s instead of 50 times a second); the fetch wait itself on Kafka (which
    #: answers a waiting fetch as soon as data arrives).
    fetch_idle_wait_ms: int = field(default=0, metadata=_env("MEMSTREAM_FETCH_IDLE_WAIT_MS", low=0, high=60_000))
    #: MEMSTREAM_BROKER_MAX_MB: the embedded broker keeps every record in memory (~139 KB a turn);
    #: once it holds more than this and nothing is under way, `memstream up` starts it afresh, as a
    #: restart would, carrying the dead letters over (memstream.worker.recycle). 0: never.
    broker_max_mb: int = field(default=512, metadata=_env("MEMSTREAM_BROKER_MAX_MB", low=0, high=1_000_000))
    #: MEMSTREAM_DRAIN_SECONDS: on SIGINT/SIGTERM `memstream up` stops taking turns and lets the pipeline
    #: finish what it holds for at most this long before it cancels the rest and stops (a second
    #: Ctrl-C stops at once); it exits non-zero when something was left (memstream.worker.drain). Every
    #: process of memstream is gone within this plus a few seconds. 0: stop at once.
    drain_seconds: float = field(default=30.0, metadata=_env("MEMSTREAM_DRAIN_SECONDS", low=0, high=3600))
    #: MEMSTREAM_TURN_LOG: the durable turn log in the data dir (memstream.intake.turnlog), where every
    #: accepted turn is written (fsync'd) before it is published, kept until its memory is stored, and
    #: republished by the next `up`. ``auto``: on with the embedded broker (its topics live in memory
    #: only), off with MEMSTREAM_KAFKA_BOOTSTRAP (the topic is the durable copy); ``on``; ``off``.
    turn_log: str = field(default="auto", metadata=_env("MEMSTREAM_TURN_LOG", choices=("auto", "on", "off")))
    #: MEMSTREAM_TURN_LOG_RETENTION_DAYS: how long the turn log keeps a turn once its memory is stored,
    #: so `memstream replay` can reprocess it; unfinished turns are kept until stored.
    turn_log_retention_days: float = field(
        default=90.0, metadata=_env("MEMSTREAM_TURN_LOG_RETENTION_DAYS", low=0.0, high=36_500.0)
    )
    #: MEMSTREAM_PREFETCH_BACKOFF_MS: how long a consumer stops fetching from a broker while fetched
    #: records wait to be taken. aiokafka's 100 ms made p99 latency spikes of 300-500 ms; 10 ms
    #: costs no measurable throughput (bench, interleaved runs).
    prefetch_backoff_ms: int = field(default=10, metadata=_env("MEMSTREAM_PREFETCH_BACKOFF_MS"))
    #: MEMSTREAM_QDRANT_URL: a Qdrant server. Empty: Qdrant's engine in-process under data_dir.
    qdrant_url: str = field(default="", metadata=_env("MEMSTREAM_QDRANT_URL"))
    #: MEMSTREAM_STORE_COLLECTION: the collection to serve; empty: the one `memstream replay --switch`
    #: made active, else ``memories__<embedding model>``.
    store_collection: str = field(default="", metadata=_env("MEMSTREAM_STORE_COLLECTION"))
    #: MEMSTREAM_EDGE_INDEX_EVERY: the in-process store builds its vector index (HNSW), in a child
    #: process on a copy of the shard, after this many memories written since the last build
    #: (or since opening an unindexed shard). 0: never (every search is a filtered scan).
    edge_index_every: int = field(default=20_000, metadata=_env("MEMSTREAM_EDGE_INDEX_EVERY", low=0, high=10_000_000))
    #: MEMSTREAM_QDRANT_API_KEY: API key for the Qdrant server, if it needs one.
    qdrant_api_key: str = field(default="", metadata=_env("MEMSTREAM_QDRANT_API_KEY"))

    # --- providers ---------------------------------------------------------------------
    #: ANTHROPIC_API_KEY: enables extraction with Claude. Empty: raw mode (no inference).
    anthropic_api_key: str = field(default="", metadata=_env("ANTHROPIC_API_KEY"))
    #: MEMSTREAM_ANTHROPIC_BASE_URL: override the Anthropic API address (proxies, tests).
    anthropic_base_url: str = field(default="", metadata=_env("MEMSTREAM_ANTHROPIC_BASE_URL"))
    #: MEMSTREAM_ANTHROPIC_MODEL: the extraction model.
    anthropic_model: str = field(default="claude-haiku-4-5", metadata=_env("MEMSTREAM_ANTHROPIC_MODEL"))
    #: XAI_API_KEY: enables xAI (Grok) in the provider chain.
    xai_api_key: str = field(default="", metadata=_env("XAI_API_KEY"))
    #: MEMSTREAM_XAI_HOST: override the xAI API host (``host:port``; loopback hosts use plain gRPC).
    xai_host: str = field(default="", metadata=_env("MEMSTREAM_XAI_HOST"))
    #: MEMSTREAM_XAI_MODEL: the xAI extraction model.
    xai_model: str = field(default="grok-4-1-fast-non-reasoning", metadata=_env("MEMSTREAM_XAI_MODEL"))
    #: GOOGLE_API_KEY: enables Gemini in the provider chain.
    google_api_key: str = field(default="", metadata=_env("GOOGLE_API_KEY"))
    #: MEMSTREAM_GOOGLE_BASE_URL: override the Gemini API address (proxies, tests).
    google_base_url: str = field(default="", metadata=_env("MEMSTREAM_GOOGLE_BASE_URL"))
    #: MEMSTREAM_GOOGLE_MODEL: the Gemini extraction model.
    google_model: str = field(default="gemini-3-flash-preview", metadata=_env("MEMSTREAM_GOOGLE_MODEL"))
    #: MEMSTREAM_LOCAL_LLM_URL: an OpenAI-compatible endpoint such as Ollama's ``http://localhost:11434/v1``.
    local_llm_url: str = field(default="", metadata=_env("MEMSTREAM_LOCAL_LLM_URL"))
    #: MEMSTREAM_LOCAL_LLM_MODEL: the local model (Pipeline v2's default).
    local_llm_model: str = field(default="qwen3:4b", metadata=_env("MEMSTREAM_LOCAL_LLM_MODEL"))
    #: MEMSTREAM_LOCAL_LLM_DIALECT: how the answer's JSON Schema reaches the local server: auto, json_schema
    #: (llama-server, vLLM), json_object (llama-cpp-python), ollama (its /api/chat ``format``) or none.
    local_llm_dialect: str = field(
        default="auto",
        metadata=_env("MEMSTREAM_LOCAL_LLM_DIALECT", choices=("auto", "json_schema", "json_object", "ollama", "none")),
    )
    #: MEMSTREAM_LOCAL_LLM_TIMEOUT: seconds the local model may read the prompt before its first token (a 1.5B
    #: model on 2 busy CPU cores: up to ~450 s); the answer then streams with no total timeout.
    local_llm_timeout: float = field(default=600.0, metadata=_env("MEMSTREAM_LOCAL_LLM_TIMEOUT", low=5.0, high=3600.0))
    #: MEMSTREAM_LOCAL_LLM_IDLE_TIMEOUT: seconds without a new token, once the answer streams, before the
    #: local call is given up as stalled.
    local_llm_idle_timeout: float = field(
        default=60.0, metadata=_env("MEMSTREAM_LOCAL_LLM_IDLE_TIMEOUT", low=1.0, high=600.0)
    )
    #: MEMSTREAM_LOCAL_LLM_CONCURRENCY: calls the local model runs at once; extraction parks further
    #: snapshots meanwhile.
    local_llm_concurrency: int = field(default=1, metadata=_env("MEMSTREAM_LOCAL_LLM_CONCURRENCY", low=1, high=64))
    #: MEMSTREAM_LOCAL_LLM_CONTEXT: the context window (tokens) asked of Ollama per request; other servers
    #: set theirs when they start.
    local_llm_context: int = field(default=8192, metadata=_env("MEMSTREAM_LOCAL_LLM_CONTEXT", low=2048, high=262_144))
    #: MEMSTREAM_LLM_PRIMARY: the provider tried first: anthropic, xai, google or local.
    llm_primary: str = field(default="anthropic", metadata=_env("MEMSTREAM_LLM_PRIMARY"))
    #: MEMSTREAM_LLM_TIMEOUT: seconds per LLM request attempt (Pipeline v2's extractionTimeout: 45, 5 to 300).
    llm_timeout: float = field(default=45.0, metadata=_env("MEMSTREAM_LLM_TIMEOUT", low=5.0, high=300.0))
    #: MEMSTREAM_LLM_RETRIES: retries per provider before falling back to the next one.
    llm_retries: int = field(default=2, metadata=_env("MEMSTREAM_LLM_RETRIES"))
    #: MEMSTREAM_LLM_BACKOFF: seconds before the first retry; doubled each time, with full jitter.
    llm_backoff: float = field(default=0.5, metadata=_env("MEMSTREAM_LLM_BACKOFF"))
    #: MEMSTREAM_LLM_BACKOFF_MAX: the longest wait between two retries.
    llm_backoff_max: float = field(default=8.0, metadata=_env("MEMSTREAM_LLM_BACKOFF_MAX"))
    #: MEMSTREAM_LLM_CONCURRENCY: LLM-bound events in flight per stage (different sessions or projects).
    #: Above the sessions a worker serves at once, or they queue for the LLM: at 100 sessions and 1 s
    #: calls, 64 gave 48.6 turns/s and 128 gave 55.0 (bench, interleaved). 429s back off through retries.
    llm_concurrency: int = field(default=128, metadata=_env("MEMSTREAM_LLM_CONCURRENCY"))
    #: MEMSTREAM_RETRY_BUDGET: seconds an LLM or embedding outage may last before the work it holds up is
    #: dead-lettered (6 h; at most 12 h, half the day the derived topics keep records); until then it is
    #: parked and retried with capped backoff.
    retry_budget: float = field(default=21_600.0, metadata=_env("MEMSTREAM_RETRY_BUDGET"))
    #: MEMSTREAM_EXTRACT_ATTEMPTS: attempts at a document's ingest before it is failed (Pipeline v2's
    #: workerMaxRetries: 3, 1 to 10). A snapshot's extraction waits out outages within MEMSTREAM_RETRY_BUDGET.
    extract_attempts: int = field(default=3, metadata=_env("MEMSTREAM_EXTRACT_ATTEMPTS", low=1, high=10))
    #: MEMSTREAM_PARK_DELAY: seconds a parked snapshot waits before its first retry (Pipeline v2: 1).
    park_delay: float = field(default=1.0, metadata=_env("MEMSTREAM_PARK_DELAY"))
    #: MEMSTREAM_PARK_DELAY_MAX: the longest a parked snapshot waits (Pipeline v2: 30).
    park_delay_max: float = field(default=30.0, metadata=_env("MEMSTREAM_PARK_DELAY_MAX"))
    #: MEMSTREAM_MIN_FACT_CONFIDENCE: facts below this confidence are not written (Pipeline v2: 0.7).
    min_fact_confidence: float = field(default=0.7, metadata=_env("MEMSTREAM_MIN_FACT_CONFIDENCE"))
    #: VOYAGE_API_KEY: enables voyage-code-3 embeddings (1024-d). Empty: the bundled model.
    voyage_api_key: str = field(default="", metadata=_env("VOYAGE_API_KEY"))
    #: MEMSTREAM_VOYAGE_BASE_URL: override the Voyage API address (proxies, tests).
    voyage_base_url: str = field(default="", metadata=_env("MEMSTREAM_VOYAGE_BASE_URL"))
    #: MEMSTREAM_VOYAGE_MODEL: the Voyage embedding model.
    voyage_model: str = field(default="voyage-code-3", metadata=_env("MEMSTREAM_VOYAGE_MODEL"))

    # --- pipeline (defaults from the extraction and memory specs) ------------------------------------
    #: MEMSTREAM_SNAPSHOT_MESSAGES: messages in a snapshot (the extraction spec: the last 8).
    snapshot_messages: int = field(default=8, metadata=_env("MEMSTREAM_SNAPSHOT_MESSAGES"))
    #: MEMSTREAM_SNAPSHOT_MAX_CHARS: a snapshot's maximum length; older text is cut first.
    snapshot_max_chars: int = field(default=12_000, metadata=_env("MEMSTREAM_SNAPSHOT_MAX_CHARS"))
    #: MEMSTREAM_MESSAGE_MAX_CHARS: one message's maximum length inside a snapshot.
    message_max_chars: int = field(default=4_000, metadata=_env("MEMSTREAM_MESSAGE_MAX_CHARS"))
    #: MEMSTREAM_SUMMARY_EVERY: every Nth assistant turn runs summary mode (the extraction spec: 5).
    summary_every: int = field(default=5, metadata=_env("MEMSTREAM_SUMMARY_EVERY"))
    #: MEMSTREAM_SESSION_SUMMARY_CAP: summaries kept per project before condensing (the memory spec: 3).
    session_summary_cap: int = field(default=3, metadata=_env("MEMSTREAM_SESSION_SUMMARY_CAP"))
    #: MEMSTREAM_EMBED_BATCH: most texts per embedding request.
    embed_batch: int = field(default=64, metadata=_env("MEMSTREAM_EMBED_BATCH"))
    #: MEMSTREAM_EMBED_BATCH_WINDOW: seconds the embed agent waits at most for more facts to fill a
    #: batch. 0: embed the facts that have arrived at once (batches still grow under load).
    embed_batch_window: float = field(default=0.0, metadata=_env("MEMSTREAM_EMBED_BATCH_WINDOW"))
    #: MEMSTREAM_EMBED_THREADS: the bundled embedder's OpenMP threads. 0: one per core, the engine's
    #: default (bench/perf/raw_ingest.py measures the choice on a machine).
    embed_threads: int = field(default=0, metadata=_env("MEMSTREAM_EMBED_THREADS"))

    # --- memory lifecycle (Pipeline v2) ------------------------------------------------------
    #: MEMSTREAM_SHADOW_MODE: decide and audit every fact, write nothing (Pipeline v2's shadowMode).
    shadow_mode: bool = field(default=False, metadata=_env("MEMSTREAM_SHADOW_MODE"))
    #: MEMSTREAM_ALLOW_UPDATE_DELETE: apply the decision stage's UPDATE and DELETE, as supersedes.
    allow_update_delete: bool = field(default=False, metadata=_env("MEMSTREAM_ALLOW_UPDATE_DELETE"))
    #: MEMSTREAM_MUTATIONS_FROZEN: the emergency brake: no decision writes, whatever the other flags.
    mutations_frozen: bool = field(default=False, metadata=_env("MEMSTREAM_MUTATIONS_FROZEN"))
    #: MEMSTREAM_DECISION_ALPHA: weight of the vector score against BM25 in the decision stage's candidates.
    decision_alpha: float = field(default=0.7, metadata=_env("MEMSTREAM_DECISION_ALPHA"))
    #: MEMSTREAM_DECISION_MIN_SCORE: candidates below this hybrid score are dropped; 0: the embedding
    #: model's calibrated value.
    decision_min_score: float = field(default=0.0, metadata=_env("MEMSTREAM_DECISION_MIN_SCORE"))
    #: MEMSTREAM_GRAPH_ENABLED: keep the knowledge graph of entities and boost search with it.
    graph_enabled: bool = field(default=False, metadata=_env("MEMSTREAM_GRAPH_ENABLED"))
    #: MEMSTREAM_GRAPH_BOOST_WEIGHT: added to the score of memories the query's entities link to.
    graph_boost_weight: float = field(default=0.15, metadata=_env("MEMSTREAM_GRAPH_BOOST_WEIGHT"))
    #: MEMSTREAM_GRAPH_BOOST_TIMEOUT_MS: the graph lookup's deadline; past it, search goes on without.
    graph_boost_timeout_ms: int = field(default=500, metadata=_env("MEMSTREAM_GRAPH_BOOST_TIMEOUT_MS"))
    #: MEMSTREAM_TOMBSTONE_RETENTION_DAYS: superseded memories are hard-deleted this long after.
    tombstone_retention_days: float = field(default=30.0, metadata=_env("MEMSTREAM_TOMBSTONE_RETENTION_DAYS"))
    #: MEMSTREAM_HISTORY_RETENTION_DAYS: audit records are purged this long after.
    history_retention_days: float = field(default=180.0, metadata=_env("MEMSTREAM_HISTORY_RETENTION_DAYS"))
    #: MEMSTREAM_WORDS_RETENTION_DAYS: caps the retention of every topic holding people's words (turns
    #: included) at topic creation, so a forget's words leave the broker within it; 0: the declared
    #: retentions (docs/security.md). Capping ``turns`` bounds how far back a replay can re-extract.
    words_retention_days: float = field(default=0.0, metadata=_env("MEMSTREAM_WORDS_RETENTION_DAYS"))
    #: MEMSTREAM_RETENTION_INTERVAL: seconds between two retention sweeps.
    retention_interval: float = field(default=21_600.0, metadata=_env("MEMSTREAM_RETENTION_INTERVAL"))

    # --- maintenance worker (Pipeline v2) ----------------------------------------------------
    #: MEMSTREAM_AUTONOMOUS_ENABLED: run the maintenance worker on its interval (Pipeline v2's autonomousEnabled).
    autonomous_enabled: bool = field(default=False, metadata=_env("MEMSTREAM_AUTONOMOUS_ENABLED"))
    #: MEMSTREAM_AUTONOMOUS_FROZEN: keep the maintenance worker's interval stopped even when enabled;
    #: ``memstream doctor`` still works (Pipeline v2's autonomousFrozen).
    autonomous_frozen: bool = field(default=False, metadata=_env("MEMSTREAM_AUTONOMOUS_FROZEN"))
    #: MEMSTREAM_MAINTENANCE_INTERVAL_MS: milliseconds between two maintenance cycles (30 min; 1 min to 1 day).
    maintenance_interval_ms: int = field(
        default=1_800_000, metadata=_env("MEMSTREAM_MAINTENANCE_INTERVAL_MS", low=60_000, high=86_400_000)
    )
    #: MEMSTREAM_MAINTENANCE_MODE: observe (log the recommendations) or execute (run the repairs).
    maintenance_mode: str = field(
        default="observe", metadata=_env("MEMSTREAM_MAINTENANCE_MODE", choices=("observe", "execute"))
    )
    #: MEMSTREAM_REPAIR_REEMBED_COOLDOWN_MS: least milliseconds between two runs of a store repair (re-embed,
    #: sparse vectors, payload indexes, retention sweep; 10 s to 1 h).
    repair_reembed_cooldown_ms: int = field(
        default=300_000, metadata=_env("MEMSTREAM_REPAIR_REEMBED_COOLDOWN_MS", low=10_000, high=3_600_000)
    )
    #: MEMSTREAM_REPAIR_REEMBED_HOURLY_BUDGET: most runs of each store repair per hour (1 to 1000).
    repair_reembed_hourly_budget: int = field(
        default=10, metadata=_env("MEMSTREAM_REPAIR_REEMBED_HOURLY_BUDGET", low=1, high=1000)
    )
    #: MEMSTREAM_REPAIR_REQUEUE_COOLDOWN_MS: least milliseconds between two re-drives of dead letters (5 s to 1 h).
    repair_requeue_cooldown_ms: int = field(
        default=60_000, metadata=_env("MEMSTREAM_REPAIR_REQUEUE_COOLDOWN_MS", low=5_000, high=3_600_000)
    )
    #: MEMSTREAM_REPAIR_REQUEUE_HOURLY_BUDGET: most re-drives of dead letters per hour (1 to 1000).
    repair_requeue_hourly_budget: int = field(
        default=50, metadata=_env("MEMSTREAM_REPAIR_REQUEUE_HOURLY_BUDGET", low=1, high=1000)
    )

    # --- document ingest (Pipeline v2) ------------------------------------------------------
    #: MEMSTREAM_DOCUMENT_WORKER_INTERVAL_MS: milliseconds before a failed document ingest is tried again
    #: (Pipeline v2's document worker tick; 1 s to 5 min).
    document_worker_interval_ms: int = field(
        default=10_000, metadata=_env("MEMSTREAM_DOCUMENT_WORKER_INTERVAL_MS", low=1_000, high=300_000)
    )
    #: MEMSTREAM_DOCUMENT_CHUNK_SIZE: characters per document chunk (200 to 50000).
    document_chunk_size: int = field(
        default=2_000, metadata=_env("MEMSTREAM_DOCUMENT_CHUNK_SIZE", low=200, high=50_000)
    )
    #: MEMSTREAM_DOCUMENT_CHUNK_OVERLAP: characters a chunk shares with the previous one (0 to 10000).
    document_chunk_overlap: int = field(
        default=200, metadata=_env("MEMSTREAM_DOCUMENT_CHUNK_OVERLAP", low=0, high=10_000)
    )
    #: MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES: most bytes fetched from a document's URL (10 MB; 1 KiB to 100 MiB).
    document_max_content_bytes: int = field(
        default=10_485_760, metadata=_env("MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES", low=1024, high=104_857_600)
    )

    # --- Phase 1 and Phase 2 (the consolidation spec) -------------------------------------------------
    #: MEMSTREAM_PHASE1_IDLE_SECONDS: a session is distilled once idle this long (never while active).
    phase1_idle_seconds: float = field(default=900.0, metadata=_env("MEMSTREAM_PHASE1_IDLE_SECONDS"))
    #: MEMSTREAM_PHASE1_MAX_AGE_DAYS: sessions last active longer ago than this are not distilled.
    phase1_max_age_days: float = field(default=30.0, metadata=_env("MEMSTREAM_PHASE1_MAX_AGE_DAYS"))
    #: MEMSTREAM_PHASE1_CONCURRENCY: Phase 1 LLM calls in flight per worker.
    phase1_concurrency: int = field(default=4, metadata=_env("MEMSTREAM_PHASE1_CONCURRENCY"))
    #: MEMSTREAM_PHASE1_SCAN_INTERVAL: seconds between two looks for idle sessions.
    phase1_scan_interval: float = field(default=30.0, metadata=_env("MEMSTREAM_PHASE1_SCAN_INTERVAL"))
    #: MEMSTREAM_PHASE1_SCAN_LIMIT: most sessions claimed per look (bounded work).
    phase1_scan_limit: int = field(default=32, metadata=_env("MEMSTREAM_PHASE1_SCAN_LIMIT"))
    #: MEMSTREAM_PHASE1_MAX_CHARS: most characters of a session kept for Phase 1; the oldest go first.
    phase1_max_chars: int = field(default=24_000, metadata=_env("MEMSTREAM_PHASE1_MAX_CHARS"))
    #: MEMSTREAM_PHASE1_RETRY_DELAY: seconds before a failed Phase 1 job is retried; doubled each time.
    phase1_retry_delay: float = field(default=60.0, metadata=_env("MEMSTREAM_PHASE1_RETRY_DELAY"))
    #: MEMSTREAM_PHASE1_RETRY_DELAY_MAX: the longest a failed Phase 1 job waits.
    phase1_retry_delay_max: float = field(default=3600.0, metadata=_env("MEMSTREAM_PHASE1_RETRY_DELAY_MAX"))
    #: MEMSTREAM_CONSOLIDATION_DEBOUNCE: seconds of quiet after new Phase 1 output before Phase 2 is asked for.
    consolidation_debounce: float = field(default=30.0, metadata=_env("MEMSTREAM_CONSOLIDATION_DEBOUNCE"))
    #: MEMSTREAM_CONSOLIDATION_INTERVAL: seconds between two scheduled Phase 2 requests.
    consolidation_interval: float = field(default=3600.0, metadata=_env("MEMSTREAM_CONSOLIDATION_INTERVAL"))
    #: MEMSTREAM_CONSOLIDATION_TOP_N: most Phase 1 outputs one Phase 2 run selects.
    consolidation_top_n: int = field(default=64, metadata=_env("MEMSTREAM_CONSOLIDATION_TOP_N"))
    #: MEMSTREAM_CONSOLIDATION_MAX_UNUSED_DAYS: outputs unused (or, never used, generated) longer ago are ignored.
    consolidation_max_unused_days: float = field(default=30.0, metadata=_env("MEMSTREAM_CONSOLIDATION_MAX_UNUSED_DAYS"))
    #: MEMSTREAM_CONSOLIDATION_RETRY_DELAY: seconds before a failed Phase 2 run is retried; doubled each time.
    consolidation_retry_delay: float = field(default=5.0, metadata=_env("MEMSTREAM_CONSOLIDATION_RETRY_DELAY"))
    #: MEMSTREAM_CONSOLIDATION_RETRY_DELAY_MAX: the longest a failed Phase 2 run waits.
    consolidation_retry_delay_max: float = field(
        default=300.0, metadata=_env("MEMSTREAM_CONSOLIDATION_RETRY_DELAY_MAX")
    )

    # --- capture (the capture spec) -------------------------------------------------------------
    #: MEMSTREAM_CLAUDE_DIR: Claude Code's home (``CLAUDE_CONFIG_DIR``), whose ``projects/`` holds its sessions.
    #: Each of these four, unset, follows the CLI's own variable (named in brackets), else the CLI's default.
    claude_dir: Path = field(default=Path("~/.claude"), metadata=_env("MEMSTREAM_CLAUDE_DIR"))
    #: MEMSTREAM_CODEX_DIR: Codex's home (``CODEX_HOME``), whose ``sessions/`` holds its rollouts.
    codex_dir: Path = field(default=Path("~/.codex"), metadata=_env("MEMSTREAM_CODEX_DIR"))
    #: MEMSTREAM_GEMINI_DIR: Gemini CLI's home (``$GEMINI_CLI_HOME/.gemini``), whose ``tmp/<project hash>/chats/``
    #: holds its sessions.
    gemini_dir: Path = field(default=Path("~/.gemini"), metadata=_env("MEMSTREAM_GEMINI_DIR"))
    #: MEMSTREAM_KIMI_DIR: Kimi CLI's home (``KIMI_SHARE_DIR``), whose ``sessions/`` holds its wire logs.
    kimi_dir: Path = field(default=Path("~/.kimi"), metadata=_env("MEMSTREAM_KIMI_DIR"))
    #: MEMSTREAM_WATCH: ``memstream up`` also follows the CLIs' session folders, as ``memstream watch`` does.
    watch: bool = field(default=False, metadata=_env("MEMSTREAM_WATCH"))
    #: MEMSTREAM_WATCH_SWEEP: seconds between two full sweeps of the session folders while watching.
    watch_sweep: float = field(default=300.0, metadata=_env("MEMSTREAM_WATCH_SWEEP"))

    # --- recall ------------------------------------------------------------------------
    #: MEMSTREAM_BLOCK_MAX_TOKENS: token budget of the [MEMORY] block (about 4 characters a token);
    #: sections are trimmed by priority to fit (see memstream.recall.search.TRIM_ORDER).
    block_max_tokens: int = field(default=2000, metadata=_env("MEMSTREAM_BLOCK_MAX_TOKENS"))
    #: MEMSTREAM_CHECK_CITATIONS: check recalled memories' citations (the files they speak of) against the git
    #: work trees on this machine: a memory whose files are gone leaves the [MEMORY] block and sinks in search,
    #: one whose code changed or moved is marked (docs/recall.md, "Citations"). On where the work trees are
    #: (the embedded default, the hook, ``memstream mcp`` over stdio, the CLI); set false on a shared query
    #: service, which must never read paths its clients name.
    check_citations: bool = field(default=True, metadata=_env("MEMSTREAM_CHECK_CITATIONS"))
    #: MEMSTREAM_CODE_GONE_DAYS: the aging stage retires a memory every file of which it cites has been deleted
    #: for this many days (by the deleting commit's date), checked every MEMSTREAM_RETENTION_INTERVAL where the
    #: work trees are on the worker's machine (MEMSTREAM_CHECK_CITATIONS, the embedded default); audited as
    #: ``aged-out``, restorable from the console. 0: never.
    code_gone_days: float = field(default=30.0, metadata=_env("MEMSTREAM_CODE_GONE_DAYS"))
    #: MEMSTREAM_RECALL_ALPHA: weight of the vector leg in search's hybrid score (the BM25 leg gets 1 - alpha),
    #: both legs min-max scaled per query; 0.5 weighs them equally (bench/quality/retrieval's dev half: 0.5-0.7 within
    #: one or two questions of each other). The decision stage keeps its own 0.7 over raw scores.
    recall_alpha: float = field(default=0.5, metadata=_env("MEMSTREAM_RECALL_ALPHA"))
    #: MEMSTREAM_RECALL_FLOOR: search's relevance floor. A search returns nothing unless one of its hits has a
    #: cosine similarity to the query of at least this, or a BM25 match of at least MEMSTREAM_RECALL_BM25_FLOOR:
    #: a query with nothing relevant finds nothing (when one hit clears it, every hit keeps its rank).
    #: -1: the embedding model's calibrated floor (bundled e5: 0.80; none for other models); 0: no floor.
    recall_floor: float = field(default=-1.0, metadata=_env("MEMSTREAM_RECALL_FLOOR", low=-1.0, high=1.0))
    #: MEMSTREAM_RECALL_BM25_FLOOR: the BM25 match (0-1, 0: no query term) that clears the floor whatever the
    #: cosine: an exact identifier, file name or error message found by keyword though its meaning scores low.
    recall_bm25_floor: float = field(default=0.9, metadata=_env("MEMSTREAM_RECALL_BM25_FLOOR", low=0.0, high=1.0))
    #: MEMSTREAM_RERANKER: rerank search's top results: none (default), voyage or llm (the configured LLM chain).
    reranker: str = field(default="none", metadata=_env("MEMSTREAM_RERANKER"))
    #: MEMSTREAM_RERANKER_MODEL: the Voyage rerank model.
    reranker_model: str = field(default="rerank-2.5-lite", metadata=_env("MEMSTREAM_RERANKER_MODEL"))
    #: MEMSTREAM_RERANKER_TOP_N: how many of the top results are reranked (1-100).
    reranker_top_n: int = field(default=20, metadata=_env("MEMSTREAM_RERANKER_TOP_N"))
    #: MEMSTREAM_RERANKER_TIMEOUT_MS: after this the original order stands, with no second attempt (100-30000).
    reranker_timeout_ms: int = field(default=2000, metadata=_env("MEMSTREAM_RERANKER_TIMEOUT_MS"))

    # --- serving -----------------------------------------------------------------------
    #: MEMSTREAM_HTTP_HOST: the address the search API of ``memstream up`` listens on.
    http_host: str = field(default="127.0.0.1", metadata=_env("MEMSTREAM_HTTP_HOST"))
    #: MEMSTREAM_HTTP_PORT: the port of the search API.
    http_port: int = field(default=8765, metadata=_env("MEMSTREAM_HTTP_PORT"))
    #: MEMSTREAM_USER: the user identity for user-scoped memories (default: git email). Only the
    #: CLI reads it, as the identity of the local token ``memstream up`` creates; servers never
    #: use their own identity for anyone's turns or reads.
    user: str = field(default="", metadata=_env("MEMSTREAM_USER"))
    #: MEMSTREAM_TOKEN: the bearer token the CLI sends to the API. Empty: the local token that
    #: ``memstream up`` created in the data dir.
    token: str = field(default="", metadata=_env("MEMSTREAM_TOKEN"))
    #: MEMSTREAM_TOKENS_FILE: the hashed tokens the API accepts (``memstream token``). Empty:
    #: ``tokens.json`` in the data dir. Point it at a mounted Secret in Kubernetes.
    tokens_path: str = field(default="", metadata=_env("MEMSTREAM_TOKENS_FILE"))
    #: MEMSTREAM_API_OPEN: serve the API without tokens. Allowed only on a loopback address.
    api_open: bool = field(default=False, metadata=_env("MEMSTREAM_API_OPEN"))
    #: MEMSTREAM_EVENTS_BUFFER: memory-updated events one GET /events client may have waiting; a client
    #: that falls further behind is dropped (it reconnects with Last-Event-ID), never slowing the others.
    events_buffer: int = field(default=1000, metadata=_env("MEMSTREAM_EVENTS_BUFFER", low=1, high=1_000_000))
    #: MEMSTREAM_EVENTS_HEARTBEAT_S: seconds between heartbeats on a quiet GET /events stream.
    events_heartbeat_s: float = field(default=15.0, metadata=_env("MEMSTREAM_EVENTS_HEARTBEAT_S", low=0.1, high=3600))
    #: MEMSTREAM_CONSOLE_SESSION_HOURS: how long a console sign-in lasts before it must be made again.
    console_session_hours: float = field(
        default=12.0, metadata=_env("MEMSTREAM_CONSOLE_SESSION_HOURS", low=0.1, high=24 * 30)
    )
    #: MEMSTREAM_TRUSTED_PROXIES: comma-separated addresses or networks (CIDR) of the reverse
    #: proxies in front of the API. Only a request from one of them has its X-Forwarded-For
    #: read, for the client address the failure limiter counts; empty (the default): the
    #: header is ignored and the connection's own address counts.
    trusted_proxies: str = field(default="", metadata=_env("MEMSTREAM_TRUSTED_PROXIES"))
    #: MEMSTREAM_LOG_LEVEL: debug, info, warning, error.
    log_level: str = field(default="warning", metadata=_env("MEMSTREAM_LOG_LEVEL"))
    #: MEMSTREAM_TRACE_EXPORTER: none, console or otlp (OTLP uses OTEL_EXPORTER_OTLP_ENDPOINT).
    trace_exporter: str = field(default="none", metadata=_env("MEMSTREAM_TRACE_EXPORTER"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from the environment; ``overrides`` win over it."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = f.metadata["env"]
            if f.name in overrides:
                values[f.name] = overrides[f.name]
            elif environ.get(name, "") != "":
                values[f.name] = _parse(name, environ[name], f.default)
        from memstream import hosts

        for host in hosts.HOSTS:  # a CLI's own home variable (CODEX_HOME …) moves its sessions and settings
            home = host.home_from(environ.get(host.home_env, "")) if host.home_env else None
            if host.session_root not in values and home is not None:
                values[host.session_root] = Path(home)
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if "range" in f.metadata:
                low, high = f.metadata["range"]
                if (low is not None and value < low) or (high is not None and value > high):
                    raise SettingsError(
                        f"{f.metadata['env']} must be between {_num(low)} and {_num(high)}, got {value!r}"
                    )
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                raise SettingsError(f"{f.metadata['env']} must be {' or '.join(f.metadata['choices'])}, got {value!r}")
        try:
            proxy_networks(self.trusted_proxies)
        except ValueError as exc:
            raise SettingsError(f"{_var('trusted_proxies')}: {exc}") from None
        if self.document_chunk_overlap >= self.document_chunk_size:
            raise SettingsError(
                f"{_var('document_chunk_overlap')} must be below {_var('document_chunk_size')} "
                f"({self.document_chunk_overlap} >= {self.document_chunk_size})"
            )
        for name in (
            "partitions",
            "replication",
            "snapshot_messages",
            "summary_every",
            "embed_batch",
            "llm_concurrency",
        ):
            if getattr(self, name) < 1:
                raise SettingsError(f"{_var(name)} must be at least 1, got {getattr(self, name)}")
        if self.message_max_chars < 100 or self.snapshot_max_chars < 100:
            raise SettingsError(f"{_var('message_max_chars')} and {_var('snapshot_max_chars')} must be at least 100")
        if self.session_summary_cap < 1:
            raise SettingsError(f"{_var('session_summary_cap')} must be at least 1")
        if self.llm_primary not in {"anthropic", "xai", "google", "local"}:
            raise SettingsError(
                f"{_var('llm_primary')} must be anthropic, xai, google or local, got {self.llm_primary!r}"
            )
        if not 0.0 <= self.min_fact_confidence <= 1.0:
            raise SettingsError(f"{_var('min_fact_confidence')} must be between 0 and 1")
        if self.processing_guarantee not in ("at_least_once", "exactly_once"):
            raise SettingsError(
                f"{_var('processing_guarantee')} must be at_least_once or exactly_once, "
                f"got {self.processing_guarantee!r}"
            )
        if self.processing_guarantee == "exactly_once" and not self.kafka_bootstrap:
            raise SettingsError(
                f"{_var('processing_guarantee')}=exactly_once needs a Kafka with transactions "
                "(MEMSTREAM_KAFKA_BOOTSTRAP); the embedded broker has none"
            )
        if not 0 <= self.retry_budget <= RETRY_BUDGET_MAX:
            # Work held through an outage stays on its topic, which keeps records a day
            # (topics.catalog.DERIVED_RETENTION_MS): a longer wait would outlive them.
            raise SettingsError(f"{_var('retry_budget')} must be between 0 and {RETRY_BUDGET_MAX:.0f} seconds")
        for name in ("phase1_concurrency", "phase1_scan_limit", "consolidation_top_n"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{_var(name)} must be at least 1, got {getattr(self, name)}")
        for name in (
            "phase1_idle_seconds",
            "phase1_max_age_days",
            "phase1_scan_interval",
            "phase1_retry_delay",
            "consolidation_debounce",
            "consolidation_interval",
            "consolidation_max_unused_days",
            "consolidation_retry_delay",
        ):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{_var(name)} must be positive, got {getattr(self, name)}")
        for name in ("decision_alpha", "decision_min_score", "graph_boost_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SettingsError(f"{_var(name)} must be between 0 and 1, got {getattr(self, name)}")
        if not 50 <= self.graph_boost_timeout_ms <= 5000:
            raise SettingsError(f"{_var('graph_boost_timeout_ms')} must be between 50 and 5000")
        for name in (
            "tombstone_retention_days",
            "history_retention_days",
            "embed_batch_window",
            "embed_threads",
            "words_retention_days",
            "code_gone_days",
        ):
            if getattr(self, name) < 0:
                raise SettingsError(f"{_var(name)} must not be negative")
        if self.watch_sweep <= 0:
            raise SettingsError(f"{_var('watch_sweep')} must be positive, got {self.watch_sweep}")
        if self.retention_interval <= 0:
            raise SettingsError(f"{_var('retention_interval')} must be positive")
        if not 1 <= self.prefetch_backoff_ms <= 1000:
            raise SettingsError(f"{_var('prefetch_backoff_ms')} must be between 1 and 1000")
        if self.phase1_max_chars < 500:
            raise SettingsError(f"{_var('phase1_max_chars')} must be at least 500")
        if self.block_max_tokens < 100:
            raise SettingsError(f"{_var('block_max_tokens')} must be at least 100, got {self.block_max_tokens}")
        if not 0.0 <= self.recall_alpha <= 1.0:
            raise SettingsError(f"{_var('recall_alpha')} must be between 0 and 1, got {self.recall_alpha}")
        if self.reranker not in {"none", "voyage", "llm"}:
            raise SettingsError(f"{_var('reranker')} must be none, voyage or llm, got {self.reranker!r}")
        if not 1 <= self.reranker_top_n <= 100:
            raise SettingsError(f"{_var('reranker_top_n')} must be between 1 and 100")
        if not 100 <= self.reranker_timeout_ms <= 30_000:
            raise SettingsError(f"{_var('reranker_timeout_ms')} must be between 100 and 30000")
        if self.trace_exporter not in {"none", "console", "otlp"}:
            raise SettingsError(f"{_var('trace_exporter')} must be none, console or otlp, got {self.trace_exporter!r}")
        from memstream.kafka.security import problems

        for problem in problems(
            self.kafka_security_protocol, self.kafka_sasl_mechanism, self.kafka_sasl_username, self.kafka_sasl_password
        ):
            raise SettingsError(f"{_var('kafka_security_protocol')}: {problem}")
        if self.api_open:
            from memstream.auth import is_loopback

            if not is_loopback(self.http_host):
                raise SettingsError(
                    f"{_var('api_open')} serves the API without tokens: allowed on a loopback "
                    f"{_var('http_host')} only, not {self.http_host!r}"
                )

    @property
    def embedded_broker(self) -> bool:
        return not self.kafka_bootstrap

    @property
    def effective_fetch_max_wait_ms(self) -> int:
        if self.fetch_max_wait_ms > 0:
            return self.fetch_max_wait_ms
        return 20 if self.embedded_broker else 500

    @property
    def effective_fetch_idle_wait_ms(self) -> int:
        """Never below the fetch wait: an idle consumer only ever waits longer."""
        idle = self.fetch_idle_wait_ms or (EMBEDDED_IDLE_WAIT_MS if self.embedded_broker else 0)
        return max(idle, self.effective_fetch_max_wait_ms)

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "qdrant"

    @property
    def active_collections_file(self) -> Path:
        """Which collection serves each embedding model, as ``memstream replay --switch`` set it."""
        return self.data_dir / "active-collections.json"

    @property
    def runtime_file(self) -> Path:
        """Written by ``memstream up``: where its broker and API listen, for the other commands."""
        return self.data_dir / "runtime.json"

    @property
    def proxy_networks(self) -> tuple[IPNetwork, ...]:
        """The trusted proxies (``MEMSTREAM_TRUSTED_PROXIES``) as networks; ValueError on a bad entry."""
        return proxy_networks(self.trusted_proxies)

    @property
    def tokens_file(self) -> Path:
        """The hashed tokens and their principals (``memstream token``)."""
        return Path(self.tokens_path) if self.tokens_path else self.data_dir / "tokens.json"

    @property
    def sharing_file(self) -> Path:
        """Which projects share their members' conversations, and who changed it (``memstream share``)."""
        return self.tokens_file.with_name("sharing.json")

    @property
    def local_token_file(self) -> Path:
        """The token of this machine's user, created by the first ``memstream up`` on loopback."""
        return self.data_dir / "local-token"

    @property
    def memories_dir(self) -> Path:
        """Phase 2's workspace: raw memories, rollout summaries and consolidated summaries."""
        return self.data_dir / "memories"

    @property
    def capture_db(self) -> Path:
        """Capture's durable state: per-file checkpoints, first-seen message hashes and the spool."""
        return self.data_dir / "capture.db"

    @property
    def capture_roots(self) -> dict[str, Path]:
        """Each coding CLI's home folder (``~`` expanded), by its ``llm_source`` name."""
        from memstream import hosts

        return {host.llm_source: Path(getattr(self, host.session_root)).expanduser() for host in hosts.HOSTS}

    @property
    def api_url(self) -> str:
        return f"http://{self.http_host}:{self.http_port}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _var(field_name: str) -> str:
    return next(f.metadata["env"] for f in fields(Settings) if f.name == field_name)


#: The longest MEMSTREAM_RETRY_BUDGET: half the day the derived topics keep their records.
RETRY_BUDGET_MAX = 43_200.0


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_networks(spec: str) -> tuple[IPNetwork, ...]:
    """Comma-separated addresses or CIDR networks, as networks (an address is a network of one)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def _parse(name: str, raw: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, Path):
            return Path(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a valid {type(default).__name__}") from None
    return raw


def settings_table() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, for the README and ``memstream config``."""
    import inspect

    source = inspect.getsource(Settings)
    docs: dict[str, str] = {}
    lines = source.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#:"):
            continue
        for f in fields(Settings):
            if stripped.startswith(f"{f.name}:"):
                comment: list[str] = []
                j = i - 1
                while j >= 0 and lines[j].strip().startswith("#:"):
                    comment.insert(0, lines[j].strip()[2:].strip())
                    j -= 1
                text = " ".join(comment)
                docs[f.name] = text.split(":", 1)[1].strip() if ":" in text else text
    return [(f.metadata["env"], str(f.default), docs.get(f.name, "")) for f in fields(Settings)]
