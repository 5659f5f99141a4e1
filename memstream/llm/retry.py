"""One retry policy for every provider: exponential backoff with full jitter.

Providers call their SDK with the SDK's own retries off and wrap the call here, so
every provider retries the same configurable way and reports the same way.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from memstream.llm.base import LLMError

log = logging.getLogger(__name__)
T = TypeVar("T")


class RetryPolicy(msgspec.Struct, frozen=True):
    #: Retries after the first attempt.
    max_retries: int = 2
    #: Delay before the first retry, doubled for each one after.
    base_delay: float = 0.5
    #: The longest delay between two attempts.
    max_delay: float = 8.0

    def delay(self, retry: int) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**retry)]."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2**retry))


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, what: str) -> T:
    """Run ``call``; retry a retryable LLMError up to the policy's limit, then re-raise it."""
    retry = 0
    while True:
        try:
            return await call()
        except LLMError as err:
            if not err.retryable or retry >= policy.max_retries:
                raise
            delay = policy.delay(retry)
            log.info("%s failed (%s); retry %d/%d in %.2fs", what, err, retry + 1, policy.max_retries, delay)
            retry += 1
            await asyncio.sleep(delay)
