"""The LLM interface: one prompt in, text out, with what it cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

#: A JSON Schema (draft 2020-12) of the answer a prompt asks for.
JsonSchema = Mapping[str, Any]


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

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        """Return the model's text answer; raise LLMError when the provider fails.

        ``schema`` is the JSON Schema of the answer the prompt asks for: a provider that can constrain
        its output to it does (the local one); the hosted ones follow the prompt, which states it too.
        """

    async def close(self) -> None: ...


def is_busy(llm: object) -> bool:
    """Whether ``llm`` would make a new call wait for one in flight: a local model with every
    slot taken. Hosted providers have no such property and are never busy."""
    return bool(getattr(llm, "busy", False))


def waiting_calls(llm: object) -> int:
    """How many calls wait for a slot of ``llm`` (a local model's); 0 for hosted providers."""
    waiting = getattr(llm, "waiting", 0)
    return waiting if isinstance(waiting, int) else 0


def connection_cause(err: Exception) -> str:
    """What went wrong with a provider's connection, without aiohttp's `ssl:<SSLContext object at 0x…>` noise."""
    import aiohttp  # only on a failure: the providers that use it have loaded it already

    if isinstance(err, aiohttp.ClientConnectorError):
        return f"{err.host}:{err.port}: {err.os_error.strerror or err.os_error}"
    return str(err) or type(err).__name__


def one_line(text: str) -> str:
    """A provider's error message on one line (LLMError reasons go into logs and answers)."""
    return " ".join(text.split())
