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
