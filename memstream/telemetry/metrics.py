"""Prometheus metrics: per-stage throughput, errors, latency and lag; LLM calls, tokens, cost.

Served at GET /metrics by ``memstream up``. The names are a contract with the Grafana
dashboard in deploy/grafana and the autoscalers in helm/: change them together.
"""

from __future__ import annotations

from functools import cache

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

EVENTS_PROCESSED = Counter("memstream_events_processed", "Events a stage handled", ["stage"], registry=REGISTRY)
EVENTS_FAILED = Counter(
    "memstream_events_failed", "Events a stage could not handle (dead-lettered)", ["stage"], registry=REGISTRY
)
DEAD_LETTERS = Counter("memstream_dead_letters", "Events sent to the dead-letter topic", ["stage"], registry=REGISTRY)
STAGE_SECONDS = Histogram(
    "memstream_stage_seconds",
    "Time a stage spent on one event",
    ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
EMBED_SECONDS = Histogram(
    "memstream_embed_seconds",
    "Time one embedding batch took",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    registry=REGISTRY,
)
IN_FLIGHT = Gauge("memstream_in_flight", "Events a stage has read and not finished", ["stage"], registry=REGISTRY)
PARKED = Gauge(
    "memstream_parked",
    "Snapshots parked for a retry after an LLM outage, not yet retried (this worker's)",
    registry=REGISTRY,
)
PARKED_OLDEST_SECONDS = Gauge(
    "memstream_parked_oldest_seconds",
    "How long the oldest parked snapshot (or held embedding batch) has been failing",
    ["stage"],
    registry=REGISTRY,
)
CONSUMER_LAG = Gauge(
    "memstream_consumer_lag", "Messages behind the partition's end", ["topic", "partition"], registry=REGISTRY
)
LLM_SECONDS = Histogram(
    "memstream_llm_seconds",
    "Time one LLM provider call took",
    ["provider"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
    registry=REGISTRY,
)
LLM_CALLS = Counter(
    "memstream_llm_calls", "LLM calls by provider and outcome", ["provider", "outcome"], registry=REGISTRY
)
LLM_TOKENS = Counter("memstream_llm_tokens", "LLM tokens by provider and kind", ["provider", "kind"], registry=REGISTRY)
LLM_STAGE_CALLS = Counter(
    "memstream_llm_stage_calls",
    "LLM calls by the stage that made them (each provider tried)",
    ["stage"],
    registry=REGISTRY,
)
LLM_STAGE_TOKENS = Counter(
    "memstream_llm_stage_tokens",
    "LLM tokens by the stage that spent them and kind",
    ["stage", "kind"],
    registry=REGISTRY,
)
LLM_COST = Counter("memstream_llm_cost_usd", "Estimated LLM cost in US dollars", ["provider"], registry=REGISTRY)
RETENTION_PURGED = Counter(
    "memstream_retention_purged",
    "Rows the retention sweep deleted, by step (graph-links counts mention rows)",
    ["step"],
    registry=REGISTRY,
)
#: What an agent is handed, in estimated tokens (characters / 4, the [MEMORY] block budget's estimate).
#: ``answer="block"`` is one per session start (the SessionStart hook's block) or get_memory_block call:
#: its _sum over its _count is the tokens injected per session.
INJECTED_TOKENS = Histogram(
    "memstream_injected_tokens",
    "Estimated tokens (characters / 4) of one answer handed to an agent, by answer (block, search, timeline, get)",
    ["answer"],
    buckets=(50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000),
    registry=REGISTRY,
)

HEALTH_SCORE = Gauge(
    "memstream_health_score", "The maintenance worker's composite health score in [0, 1]", registry=REGISTRY
)
HEALTH_DELTA = Gauge(
    "memstream_health_delta", "Change of the health score over the last maintenance repairs", registry=REGISTRY
)
REPAIRS = Counter(
    "memstream_repairs",
    "Maintenance repairs by action and outcome (done, failed, skipped)",
    ["action", "outcome"],
    registry=REGISTRY,
)

#: US dollars per million (input, output) tokens, for the cost estimate; unknown models cost 0.
PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "grok-4-1-fast-non-reasoning": (0.2, 0.5),
    "gemini-3-flash-preview": (0.5, 3.0),
}


@cache
def _prompt_stages() -> dict[str, str]:
    """Each stage asks with a system prompt of its own: it names the stage that made a call."""
    from memstream.rules import contradiction, decision, phase1, phase2, prompts

    return {
        prompts.NORMAL_SYSTEM: "extract",
        prompts.SUMMARY_SYSTEM: "extract-summary",
        prompts.INIT_SYSTEM: "extract-init",
        prompts.CONDENSE_SYSTEM: "age",
        decision.SYSTEM: "decide",
        contradiction.SYSTEM: "contradiction",
        phase1.SYSTEM: "rollout",
        phase2.SYSTEM: "consolidate",
    }


def llm_stage(system: str) -> str:
    """The stage whose system prompt ``system`` is; ``other`` for one no stage uses."""
    return _prompt_stages().get(system, "other")


def record_llm_call(
    provider: str,
    model: str,
    outcome: str,
    input_tokens: int = 0,
    output_tokens: int = 0,
    *,
    seconds: float = 0.0,
    stage: str = "other",
) -> None:
    LLM_CALLS.labels(provider, outcome).inc()
    LLM_STAGE_CALLS.labels(stage).inc()
    LLM_SECONDS.labels(provider).observe(seconds)
    if input_tokens or output_tokens:
        LLM_TOKENS.labels(provider, "input").inc(input_tokens)
        LLM_TOKENS.labels(provider, "output").inc(output_tokens)
        LLM_STAGE_TOKENS.labels(stage, "input").inc(input_tokens)
        LLM_STAGE_TOKENS.labels(stage, "output").inc(output_tokens)
        price = next((p for name, p in PRICES_PER_MILLION.items() if model.startswith(name)), (0.0, 0.0))
        LLM_COST.labels(provider).inc((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000)


def exposition() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)
