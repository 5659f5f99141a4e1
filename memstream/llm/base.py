"""The LLM interface: one prompt in, text out, with what it cost."""

from __future__ import annotations

from typing import Protocol

import msgspec


class Completion(msgspec.Struct, frozen=True):
    text: str
    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


class LLMError(RuntimeError):
    """A provider call failed; the message names the provider, the model and why.

    ``retryable`` says whether the same call may succeed later (429, 5xx, timeouts,
    dropped connections) or never will (bad key, bad request).
    """

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


class LLM(Protocol):
    # Read-only: a provider chain answers with its first provider's model.
    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def complete(self, system: str, prompt: str, *, max_tokens: int = 1024) -> Completion:
        """Return the model's text answer; raise LLMError when the provider fails."""

    async def close(self) -> None: ...
