"""Logging rules that protect what memstream carries."""

from __future__ import annotations

import logging

#: Libraries whose DEBUG logs print message payloads: conversation text must not reach a log.
PAYLOAD_LOGGERS = ("aiokafka.producer", "aiokafka.consumer", "aiokafka.conn", "aiokafka")


def quiet_payload_loggers() -> None:
    """Keep libraries that log whole messages at DEBUG from ever doing so."""
    for name in PAYLOAD_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.INFO, logger.getEffectiveLevel()))


#: Faust's producer module, whose changelog buffer (``ProducerBuffer``) the conductor waits on.
FLOW_CONTROL_LOGGER = "faust.transport.producer"


class FlowControlNotes(logging.Filter):
    """Faust's notes that its conductor waited for the changelog producer buffer to drain.

    When events come faster than the producer sends what their table writes produce -- a backlog at
    start: the turn log's unfinished turns published again (memstream.worker.durable.recover), an
    ``ingest``, a replay -- ``ProducerBuffer.wait_until_ebb`` holds the streams until the buffer is
    back under 100 messages: the pipeline pacing itself, as it should. Faust logs each wait at
    WARNING ("producer buffer full size 101") and its length at INFO, so a restart with a backlog
    printed warnings users took for a fault. They are kept as DEBUG lines (seen at
    ``MEMSTREAM_LOG_LEVEL=debug``) and counted in :attr:`waits`; anything above WARNING passes."""

    def __init__(self) -> None:
        super().__init__()
        #: Waits seen since the process started.
        self.waits = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            return True
        text = str(record.msg)
        if not text.startswith(("producer buffer full", "producer flush took")):
            return True
        if text.startswith("producer buffer full"):
            self.waits += 1
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


#: The one filter on Faust's producer logger (:func:`quiet_flow_control`).
FLOW_CONTROL = FlowControlNotes()


def quiet_flow_control() -> None:
    """Keep Faust's flow-control waits out of the log below DEBUG (:class:`FlowControlNotes`)."""
    logger = logging.getLogger(FLOW_CONTROL_LOGGER)
    if FLOW_CONTROL not in logger.filters:
        logger.addFilter(FLOW_CONTROL)
