"""Settings.from_env with an explicit environment, validation and the settings table."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from memstream.settings import Settings, SettingsError, settings_table


def test_defaults_from_an_empty_environment() -> None:
    s = Settings.from_env({})
    assert s.data_dir == Path(".memstream")
    assert s.kafka_bootstrap == ""
    assert s.topic_prefix == "memstream"
    assert (s.partitions, s.replication) == (4, 1)
    assert (s.anthropic_model, s.voyage_model) == ("claude-haiku-4-5", "voyage-code-3")
    assert (s.llm_timeout, s.llm_retries) == (45.0, 2)
    assert (s.snapshot_messages, s.snapshot_max_chars, s.message_max_chars) == (8, 12_000, 4_000)
    assert (s.summary_every, s.session_summary_cap) == (5, 3)
    assert (s.embed_batch, s.embed_batch_window) == (64, 0.0)
    assert (s.http_host, s.http_port) == ("127.0.0.1", 8765)
    assert (s.log_level, s.trace_exporter) == ("warning", "none")
    assert s.api_url == "http://127.0.0.1:8765"
    assert s.store_dir == Path(".memstream/qdrant")
    assert s.runtime_file == Path(".memstream/runtime.json")


def test_the_process_environment_is_not_read_when_one_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_PARTITIONS", "9")
    assert Settings.from_env({}).partitions == 4


def test_each_kind_of_variable_is_parsed() -> None:
    s = Settings.from_env(
        {
            "MEMSTREAM_DATA_DIR": "/tmp/ms-data",
            "MEMSTREAM_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
            "MEMSTREAM_PARTITIONS": "12",
            "MEMSTREAM_LLM_TIMEOUT": "7.5",
            "MEMSTREAM_EMBED_BATCH_WINDOW": "1",
            "MEMSTREAM_HTTP_PORT": "9000",
            "ANTHROPIC_API_KEY": "sk-test",
            "MEMSTREAM_TRACE_EXPORTER": "console",
        }
    )
    assert s.data_dir == Path("/tmp/ms-data")
    assert isinstance(s.data_dir, Path)
    assert s.kafka_bootstrap == "k1:9092,k2:9092"
    assert s.partitions == 12 and isinstance(s.partitions, int)
    assert s.llm_timeout == 7.5 and isinstance(s.llm_timeout, float)
    assert s.embed_batch_window == 1.0 and isinstance(s.embed_batch_window, float)
    assert s.http_port == 9000
    assert s.anthropic_api_key == "sk-test"
    assert s.trace_exporter == "console"
    assert s.store_dir == Path("/tmp/ms-data/qdrant")


@pytest.mark.parametrize("f", fields(Settings), ids=lambda f: f.metadata["env"])
def test_every_variable_is_read(f: object) -> None:
    name = f.metadata["env"]  # type: ignore[attr-defined]
    default = f.default  # type: ignore[attr-defined]
    if "range" in f.metadata or "choices" in f.metadata:  # type: ignore[attr-defined]
        # The far end of its range, or its last choice: a value the setting accepts.
        value = f.metadata["range"][1] if "range" in f.metadata else f.metadata["choices"][-1]  # type: ignore[attr-defined]
        value = type(default)(value)
        # The widest chunks, so that the widest overlap stays below them.
        environ = {"MEMSTREAM_DOCUMENT_CHUNK_SIZE": "50000", name: str(value)}
        assert getattr(Settings.from_env(environ), f.name) == value  # type: ignore[attr-defined]
        return
    raw, expected = {
        bool: ("true", True),
        # Pipeline v2 bounds the reranker's top N to 1-100.
        int: ("70", 70) if name == "MEMSTREAM_RERANKER_TOP_N" else ("700", 700),
        float: ("0.75", 0.75),
        str: {
            "MEMSTREAM_TRACE_EXPORTER": ("console", "console"),
            "MEMSTREAM_LLM_PRIMARY": ("xai", "xai"),
            "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": ("SSL", "SSL"),
            "MEMSTREAM_PROCESSING_GUARANTEE": ("at_least_once", "at_least_once"),
            "MEMSTREAM_RERANKER": ("voyage", "voyage"),
            "MEMSTREAM_TRUSTED_PROXIES": ("10.0.0.1, 10.9.0.0/16", "10.0.0.1, 10.9.0.0/16"),
        }.get(name, ("value-x", "value-x")),
    }.get(type(default), ("/some/dir", Path("/some/dir")))
    assert getattr(Settings.from_env({name: raw}), f.name) == expected  # type: ignore[attr-defined]


def test_an_empty_variable_means_the_default() -> None:
    assert Settings.from_env({"MEMSTREAM_PARTITIONS": "", "MEMSTREAM_TOPIC_PREFIX": ""}).partitions == 4


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("MEMSTREAM_PARTITIONS", "four"),
        ("MEMSTREAM_HTTP_PORT", "80.5"),
        ("MEMSTREAM_LLM_RETRIES", "2x"),
        ("MEMSTREAM_LLM_TIMEOUT", "soon"),
        ("MEMSTREAM_EMBED_BATCH_WINDOW", "1,5"),
    ],
)
def test_an_invalid_number_names_the_variable(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name) as info:
        Settings.from_env({name: raw})
    assert repr(raw) in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        "MEMSTREAM_PARTITIONS",
        "MEMSTREAM_REPLICATION",
        "MEMSTREAM_SNAPSHOT_MESSAGES",
        "MEMSTREAM_SUMMARY_EVERY",
        "MEMSTREAM_EMBED_BATCH",
        "MEMSTREAM_SESSION_SUMMARY_CAP",
    ],
)
@pytest.mark.parametrize("raw", ["0", "-1"])
def test_counts_below_one_are_rejected(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: raw})


def test_partitions_override_below_one_is_rejected() -> None:
    with pytest.raises(SettingsError, match="MEMSTREAM_PARTITIONS"):
        Settings.from_env({}, partitions=0)


@pytest.mark.parametrize("exporter", ["jaeger", "OTLP", "off"])
def test_a_bad_trace_exporter_is_rejected(exporter: str) -> None:
    with pytest.raises(SettingsError, match="MEMSTREAM_TRACE_EXPORTER"):
        Settings.from_env({"MEMSTREAM_TRACE_EXPORTER": exporter})


@pytest.mark.parametrize("exporter", ["none", "console", "otlp"])
def test_good_trace_exporters(exporter: str) -> None:
    assert Settings.from_env({"MEMSTREAM_TRACE_EXPORTER": exporter}).trace_exporter == exporter


def test_overrides_win_over_the_environment() -> None:
    s = Settings.from_env(
        {"MEMSTREAM_PARTITIONS": "8", "MEMSTREAM_TOPIC_PREFIX": "env"}, partitions=2, topic_prefix="override"
    )
    assert (s.partitions, s.topic_prefix) == (2, "override")


def test_an_override_skips_parsing_a_bad_variable() -> None:
    assert Settings.from_env({"MEMSTREAM_PARTITIONS": "bad"}, partitions=3).partitions == 3


def test_embedded_broker_iff_no_bootstrap() -> None:
    assert Settings.from_env({}).embedded_broker is True
    assert Settings.from_env({"MEMSTREAM_KAFKA_BOOTSTRAP": "localhost:9092"}).embedded_broker is False
    assert Settings.from_env({}, kafka_bootstrap="k:9092").embedded_broker is False


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


# --- settings_table ---


def test_settings_table_lists_every_field_with_its_variable_and_default() -> None:
    table = settings_table()
    assert [row[0] for row in table] == [f.metadata["env"] for f in fields(Settings)]
    assert [row[1] for row in table] == [str(f.default) for f in fields(Settings)]
    assert len({row[0] for row in table}) == len(table)


def test_settings_table_meanings_examples() -> None:
    meanings = {name: meaning for name, _, meaning in settings_table()}
    assert meanings["MEMSTREAM_PARTITIONS"] == "partitions of every keyed topic (consolidation always has 1)."
    assert meanings["ANTHROPIC_API_KEY"] == "enables extraction with Claude. Empty: raw mode (no inference)."
    assert meanings["MEMSTREAM_KAFKA_BOOTSTRAP"].startswith("``host:port[,host:port]`` of a Kafka cluster. Empty:")


def test_settings_table_gives_every_variable_a_meaning() -> None:
    empty = [name for name, _, meaning in settings_table() if not meaning.strip()]
    assert empty == []


def test_a_negative_embed_batch_window_is_refused() -> None:
    with pytest.raises(SettingsError, match="MEMSTREAM_EMBED_BATCH_WINDOW"):
        Settings.from_env({"MEMSTREAM_EMBED_BATCH_WINDOW": "-0.1"})


def test_exactly_once_needs_a_kafka_with_transactions() -> None:
    with pytest.raises(SettingsError, match="embedded broker has none"):
        Settings.from_env({"MEMSTREAM_PROCESSING_GUARANTEE": "exactly_once"})
    with pytest.raises(SettingsError, match="at_least_once or exactly_once"):
        Settings.from_env({"MEMSTREAM_PROCESSING_GUARANTEE": "twice"})
    settings = Settings.from_env(
        {"MEMSTREAM_PROCESSING_GUARANTEE": "exactly_once", "MEMSTREAM_KAFKA_BOOTSTRAP": "k:9092"}
    )
    assert settings.processing_guarantee == "exactly_once"


def test_seed_003_configuration_defaults() -> None:
    s = Settings.from_env({})
    assert (s.autonomous_enabled, s.autonomous_frozen, s.maintenance_mode) == (False, False, "observe")
    assert (s.maintenance_interval_ms, s.llm_timeout, s.extract_attempts) == (1_800_000, 45.0, 3)
    assert (s.repair_reembed_cooldown_ms, s.repair_reembed_hourly_budget) == (300_000, 10)
    assert (s.repair_requeue_cooldown_ms, s.repair_requeue_hourly_budget) == (60_000, 50)
    assert (s.document_worker_interval_ms, s.document_chunk_size, s.document_chunk_overlap) == (10_000, 2_000, 200)
    assert s.document_max_content_bytes == 10 * 1024 * 1024


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("MEMSTREAM_MAINTENANCE_INTERVAL_MS", "59999", "between 60000 and 86400000, got 59999"),
        ("MEMSTREAM_MAINTENANCE_INTERVAL_MS", "86400001", "between 60000 and 86400000"),
        ("MEMSTREAM_MAINTENANCE_MODE", "fix", "must be observe or execute, got 'fix'"),
        ("MEMSTREAM_REPAIR_REEMBED_COOLDOWN_MS", "9999", "between 10000 and 3600000"),
        ("MEMSTREAM_REPAIR_REEMBED_HOURLY_BUDGET", "0", "between 1 and 1000"),
        ("MEMSTREAM_REPAIR_REQUEUE_COOLDOWN_MS", "3600001", "between 5000 and 3600000"),
        ("MEMSTREAM_REPAIR_REQUEUE_HOURLY_BUDGET", "1001", "between 1 and 1000"),
        ("MEMSTREAM_DOCUMENT_WORKER_INTERVAL_MS", "999", "between 1000 and 300000"),
        ("MEMSTREAM_DOCUMENT_CHUNK_SIZE", "199", "between 200 and 50000"),
        ("MEMSTREAM_DOCUMENT_CHUNK_OVERLAP", "-1", "between 0 and 10000"),
        ("MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES", "1023", "between 1024 and 104857600"),
        ("MEMSTREAM_LLM_TIMEOUT", "4.5", "between 5 and 300, got 4.5"),
        ("MEMSTREAM_EXTRACT_ATTEMPTS", "11", "between 1 and 10"),
    ],
)
def test_seed_003_ranges_are_enforced_in_one_line_naming_the_setting(name: str, raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: raw})
    text = str(info.value)
    assert text.startswith(name) and message in text and "\n" not in text


def test_a_chunk_overlap_not_below_the_chunk_size_is_rejected() -> None:
    with pytest.raises(
        SettingsError, match="MEMSTREAM_DOCUMENT_CHUNK_OVERLAP must be below MEMSTREAM_DOCUMENT_CHUNK_SIZE"
    ):
        Settings.from_env({"MEMSTREAM_DOCUMENT_CHUNK_SIZE": "500", "MEMSTREAM_DOCUMENT_CHUNK_OVERLAP": "500"})


def test_the_idle_fetch_wait_is_long_on_the_embedded_broker_and_the_fetch_wait_on_kafka() -> None:
    embedded = Settings.from_env({})
    assert (embedded.effective_fetch_max_wait_ms, embedded.effective_fetch_idle_wait_ms) == (20, 8000)
    kafka = Settings.from_env({"MEMSTREAM_KAFKA_BOOTSTRAP": "k:9092"})
    assert (kafka.effective_fetch_max_wait_ms, kafka.effective_fetch_idle_wait_ms) == (500, 500)
    chosen = Settings.from_env({"MEMSTREAM_FETCH_MAX_WAIT_MS": "5", "MEMSTREAM_FETCH_IDLE_WAIT_MS": "80"})
    assert (chosen.effective_fetch_max_wait_ms, chosen.effective_fetch_idle_wait_ms) == (5, 80)
    # An idle consumer only ever waits longer than a busy one.
    assert Settings.from_env({}, fetch_max_wait_ms=300, fetch_idle_wait_ms=100).effective_fetch_idle_wait_ms == 300


@pytest.mark.parametrize("name", ["MEMSTREAM_FETCH_MAX_WAIT_MS", "MEMSTREAM_FETCH_IDLE_WAIT_MS"])
def test_fetch_waits_are_bounded(name: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: "-1"})
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: "60001"})


def test_trusted_proxies_are_addresses_or_networks() -> None:
    settings = Settings.from_env({"MEMSTREAM_TRUSTED_PROXIES": "10.0.0.1, 10.9.0.0/16, ::1"})
    assert [str(n) for n in settings.proxy_networks] == ["10.0.0.1/32", "10.9.0.0/16", "::1/128"]
    assert Settings.from_env({}).proxy_networks == ()
    with pytest.raises(SettingsError, match="MEMSTREAM_TRUSTED_PROXIES"):
        Settings.from_env({"MEMSTREAM_TRUSTED_PROXIES": "10.0.0.1, proxy.local"})
