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
    """A provider failed after its retries; the message names the provider and why."""


class LLM(Protocol):
    provider: str
    model: str

    async def complete(self, system: str, prompt: str, *, max_tokens: int = 1024) -> Completion:
        """Return the model's text answer; raise LLMError when the provider fails."""

    async def close(self) -> None: ...
