"""Shared test set-up: one in-memory span exporter for the whole run, unique settings per test."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memstream.kafka.broker import free_port
from memstream.settings import Settings
from memstream.telemetry.tracing import configure_tracing

_EXPORTER = InMemorySpanExporter()
configure_tracing("memory", exporter=_EXPORTER)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    """Every finished span of the run so far (filter by trace or name)."""
    return _EXPORTER


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    """Settings isolated from the developer's environment, with unique topics and ports.

    The API runs open on loopback (one principal, admin on every project, as ``user``):
    tests of the pipeline read it without tokens. tests/tenancy turns ``api_open`` off.
    """
    values: dict[str, object] = {
        "data_dir": data_dir,
        "topic_prefix": f"t{uuid.uuid4().hex[:10]}",
        "http_port": free_port(),
        "partitions": 2,
        "api_open": True,
    }
    values.update(overrides)
    return Settings.from_env({}, **values)
