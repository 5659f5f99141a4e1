"""A backlog at start (the turn log's recovery, an ingest) makes Faust's conductor wait for its
changelog producer buffer to drain, and Faust says so at WARNING on every wait ("producer buffer full
size 101"): flow control doing its work, not a fault. memstream.logs.quiet_flow_control keeps those
lines out of `up`'s log at the default level and counts the waits."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from faust.transport import producer as faust_producer

from memstream import logs


@pytest.fixture
def faust_logger() -> Iterator[logging.Logger]:
    logger = faust_producer.logger
    before = list(logger.filters)
    # Start as Faust does: a pipeline started earlier in this process (another test) made it quiet.
    logger.filters[:] = [f for f in before if f is not logs.FLOW_CONTROL]
    yield logger
    logger.filters[:] = before


def faust_waits_for_its_buffer() -> None:
    """What faust.transport.producer.ProducerBuffer.wait_until_ebb logs when the buffer is over 100."""
    faust_producer.logger.warning("producer buffer full size 101")
    faust_producer.logger.info("producer flush took 0.54")


def test_faust_warns_on_each_wait_without_it(caplog: pytest.LogCaptureFixture, faust_logger: logging.Logger) -> None:
    with caplog.at_level(logging.INFO):
        faust_waits_for_its_buffer()
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]  # what users saw


def test_the_waits_do_not_reach_the_log_at_info(caplog: pytest.LogCaptureFixture, faust_logger: logging.Logger) -> None:
    logs.quiet_flow_control()
    logs.quiet_flow_control()  # once is enough, twice changes nothing
    waits = logs.FLOW_CONTROL.waits
    with caplog.at_level(logging.INFO):
        faust_waits_for_its_buffer()
        faust_producer.logger.error("producer buffer full size 101")  # an error is never hidden
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert logs.FLOW_CONTROL.waits == waits + 1  # the flush line is not a wait


def test_at_debug_they_are_kept_as_debug(caplog: pytest.LogCaptureFixture, faust_logger: logging.Logger) -> None:
    logs.quiet_flow_control()
    with caplog.at_level(logging.DEBUG):
        faust_waits_for_its_buffer()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "producer buffer full size 101"),
        ("DEBUG", "producer flush took 0.54"),
    ]
