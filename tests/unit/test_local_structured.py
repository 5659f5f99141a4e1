"""The local provider with small models (issue 28): the answer's schema in each server's dialect, bounded
answers, streaming waits that never cut off a model that is still writing, and one call at a time.

Each server is a fake on loopback that answers as that server does (tests/fakes/openai_server.py and
ollama_server.py): it checks the schema it receives, holds the answer to it, refuses a dialect it does not
speak, and cuts the answer at the token cap.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import jsonschema
import pytest

from memstream.llm.base import LLMError
from memstream.llm.chain import ProviderChain
from memstream.llm.local import LocalLLM
from memstream.llm.retry import RetryPolicy
from memstream.recall.rerank import LLMReranker, rerank_top
from memstream.rules.extraction import (
    ANSWER_BOUNDS,
    MODE_TYPES,
    answer_max_tokens,
    answer_schema,
    extraction_prompt,
    parse_facts,
    system_prompt,
)
from memstream.schemas.memory import HybridHit
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from tests.unit.factories import memory

MODEL = "qwen2.5-coder-1.5b-instruct"
CONVERSATION = "[user] Remember that we deploy with `make release` only from main.\n[assistant] Noted."
STRICT = {
    "memories": [
        {
            "memory": "Deploys run `make release`, and only from the main branch",
            "type": "project-config",
            "confidence": 1.0,
            "scope": "project",
        }
    ],
    "entities": [{"source": "release", "relationship": "runs from", "target": "main", "confidence": 0.9}],
}
# What a small model writes with no grammar to hold it: a fence, an invented type, a looping entity list.
SLOPPY = (
    "```json\n"
    + json.dumps(
        {
            "memories": [{"memory": "Deploys run `make release` only from main", "type": "project-context"}],
            "entities": [{"source": "release", "relationship": "runs from", "target": "main"}] * 5,
        }
    )
    + "\n```"
)


def strict(body: dict[str, Any]) -> str:
    return json.dumps(STRICT)


def sloppy(body: dict[str, Any]) -> str:
    return SLOPPY


@pytest.fixture
async def make_llm() -> AsyncIterator[Callable[..., LocalLLM]]:
    made: list[LocalLLM] = []

    def make(base_url: str, **options: Any) -> LocalLLM:
        llm = LocalLLM(base_url, model=MODEL, retry=RetryPolicy(max_retries=0), **options)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.close()


async def extract(llm: LocalLLM, mode: str = "normal") -> tuple[str, list[str], list[str]]:
    """One extraction call as the extract agent makes it: the reply, its facts' types and warnings."""
    completion = await llm.complete(
        system_prompt(mode),
        extraction_prompt(CONVERSATION, mode),
        max_tokens=answer_max_tokens(mode),
        schema=answer_schema(mode),
    )
    result = parse_facts(completion.text)
    return completion.text, [f.type for f in result.facts], result.warnings


# --- the schema ---


@pytest.mark.parametrize("mode", ["normal", "summary", "init"])
def test_the_answer_schema_has_typed_bounded_lists(mode: str) -> None:
    schema = answer_schema(mode)
    memories, entities = schema["properties"]["memories"], schema["properties"]["entities"]

    assert memories["items"]["properties"]["type"]["enum"] == list(MODE_TYPES[mode])
    assert (memories["maxItems"], entities["maxItems"]) == ANSWER_BOUNDS[mode]
    assert memories["items"]["properties"]["memory"]["maxLength"] > 0
    assert schema["required"] == ["memories", "entities"]
    # Scope is optional: a fact without one gets its type's scope (a small model asked for it picks at random).
    assert memories["items"]["required"] == ["memory", "type", "confidence"]
    # The budget fits the bounds: every memory and entity at its typical size, and more for a summary.
    assert answer_max_tokens(mode) >= 30 * sum(ANSWER_BOUNDS[mode])


def test_a_summary_may_only_be_a_session_summary() -> None:
    assert MODE_TYPES["summary"] == ("session-summary",)
    assert "session-summary" not in MODE_TYPES["normal"]


# --- each server's dialect ---


@pytest.mark.parametrize("server", ["llama.cpp", "vllm"])
async def test_openai_style_servers_get_the_schema_as_a_json_schema_response_format(
    server: str, make_llm: Callable[..., LocalLLM]
) -> None:
    with FakeOpenAI(strict, server=server) as fake:
        llm = make_llm(fake.base_url)
        text, types, warnings = await extract(llm)

    probe, chat = fake.requests
    assert probe.path == "/api/version"  # auto: is it Ollama? (a 404 says no)
    assert chat.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": answer_schema("normal"), "strict": True},
    }
    assert chat.schema == answer_schema("normal")
    assert chat.body["max_tokens"] == answer_max_tokens("normal")
    assert json.loads(text) == STRICT  # strict JSON: no fence, nothing to repair
    assert types == ["project-config"] and warnings == []
    assert llm.dialect == "json_schema"


async def test_llama_cpp_python_refuses_json_schema_so_auto_steps_down_to_json_object_and_stays(
    make_llm: Callable[..., LocalLLM], caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAI(strict, server="llama-cpp-python") as fake:
        llm = make_llm(fake.base_url)
        with caplog.at_level(logging.WARNING, logger="memstream.llm.local"):
            first = await extract(llm)
        second = await extract(llm)

    paths = [r.path for r in fake.requests]
    assert paths == ["/api/version"] + ["/v1/chat/completions"] * 3
    refused, took, again = fake.requests[1:]
    assert refused.body["response_format"]["type"] == "json_schema"
    assert took.body["response_format"] == {"type": "json_object", "schema": answer_schema("normal")}
    assert again.body["response_format"]["type"] == "json_object"  # remembered: no second refusal
    assert first[1] == second[1] == ["project-config"]
    assert "refused json_schema output" in caplog.text


async def test_ollama_is_detected_and_gets_the_schema_as_format_on_its_own_chat_api(
    make_llm: Callable[..., LocalLLM],
) -> None:
    with FakeOllama(strict) as fake:
        llm = make_llm(fake.base_url, context_tokens=16384)
        _, types, warnings = await extract(llm)

    probe, chat = fake.requests
    assert (probe.path, chat.path) == ("/api/version", "/api/chat")
    assert chat.schema == answer_schema("normal")
    assert chat.options == {"num_predict": answer_max_tokens("normal"), "num_ctx": 16384}
    assert chat.body["stream"] is True
    assert types == ["project-config"] and warnings == []
    assert llm.dialect == "ollama"


async def test_a_configured_dialect_is_used_without_asking_the_server(make_llm: Callable[..., LocalLLM]) -> None:
    with FakeOpenAI(strict, server="llama.cpp") as fake:
        await extract(make_llm(fake.base_url, dialect="json_object"))

    [chat] = fake.requests
    assert chat.body["response_format"] == {"type": "json_object", "schema": answer_schema("normal")}


async def test_a_configured_dialect_the_server_refuses_fails_clearly_and_is_not_retried(
    make_llm: Callable[..., LocalLLM],
) -> None:
    with FakeOpenAI(strict, server="llama-cpp-python") as fake:
        llm = LocalLLM(fake.base_url, model=MODEL, dialect="json_schema", retry=RetryPolicy(max_retries=2))
        try:
            with pytest.raises(LLMError, match=r"HTTP 500 .*validation error.*MEMSTREAM_LOCAL_LLM_DIALECT") as caught:
                await extract(llm)
        finally:
            await llm.close()

    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_dialect_none_sends_no_schema(make_llm: Callable[..., LocalLLM]) -> None:
    with FakeOpenAI(sloppy) as fake:
        await extract(make_llm(fake.base_url, dialect="none"))

    [chat] = fake.requests
    assert "response_format" not in chat.body


async def test_a_server_that_ignores_the_schema_is_read_by_the_tolerant_parser(
    make_llm: Callable[..., LocalLLM],
) -> None:
    with FakeOpenAI(sloppy, server="ignore") as fake:
        text, types, warnings = await extract(make_llm(fake.base_url))

    assert fake.requests[-1].schema == answer_schema("normal")  # sent, and ignored
    assert text.startswith("```json")
    assert types == ["learned-pattern"]  # the invented type falls back
    assert any("unknown type 'project-context'" in w for w in warnings)
    assert any("repeated entities" in w for w in warnings)


async def test_a_schema_the_server_cannot_build_a_grammar_from_is_refused(make_llm: Callable[..., LocalLLM]) -> None:
    broken = {"type": "object", "properties": {"memories": {"type": "list"}}}
    with FakeOpenAI(strict, server="llama.cpp") as fake:
        llm = make_llm(fake.base_url, dialect="json_schema")
        with pytest.raises(LLMError, match=r"HTTP 400 .*grammar"):
            await llm.complete("", "hello", schema=broken)


# --- bounded answers ---


@pytest.mark.parametrize("server", ["openai", "ollama"])
async def test_an_answer_cut_at_max_tokens_keeps_its_complete_memories_and_entities(
    server: str, make_llm: Callable[..., LocalLLM], caplog: pytest.LogCaptureFixture
) -> None:
    memory = {"memory": "The API is written in Go 1.22 with chi", "type": "tech-context", "confidence": 0.9}
    entity = {"source": "api", "relationship": "written in", "target": "Go", "confidence": 0.9}
    # A model whose entity list loops: the server cuts it at the token cap.
    looping = {"memories": [memory] * 2, "entities": [entity, {**entity, "target": "chi"}] + [entity] * 200}

    def responder(body: dict[str, Any]) -> str:
        return json.dumps(looping)

    fake_type = FakeOllama if server == "ollama" else FakeOpenAI
    with fake_type(responder) as fake:
        llm = make_llm(fake.base_url, dialect="ollama" if server == "ollama" else "none")
        with caplog.at_level(logging.INFO, logger="memstream.llm.local"):
            completion = await llm.complete("extract", "conversation", max_tokens=120)
    result = parse_facts(completion.text)

    assert completion.output_tokens == 120
    assert [f.text for f in result.facts] == [memory["memory"]] * 2
    assert [(e.target) for e in result.entities] == ["Go", "chi"]
    assert any("cut off" in w for w in result.warnings)
    assert "cut at max_tokens=120" in caplog.text


# --- waits that fit a slow model ---


async def test_a_model_that_keeps_writing_is_never_cut_off(make_llm: Callable[..., LocalLLM]) -> None:
    text = " ".join(f"word{i}" for i in range(40))
    # 40 tokens at 0.05 s: 2 s in all, twice the wait allowed for the first token and between tokens.
    # The waits leave the fake's thread a second's stall on a loaded machine (it serves in this process).
    with FakeOpenAI(lambda body: text, token_delay=0.05) as fake:
        completion = await make_llm(fake.base_url, timeout=1.0, idle_timeout=1.0).complete("", "write")

    assert completion.text == text


async def test_a_model_that_stops_writing_is_given_up_as_stalled(make_llm: Callable[..., LocalLLM]) -> None:
    with (
        FakeOpenAI(lambda body: "one two three", token_delay=1.0) as fake,
        pytest.raises(LLMError, match=r"stalled: no token for 0.3s after 1 tokens") as caught,
    ):
        await make_llm(fake.base_url, timeout=10.0, idle_timeout=0.3).complete("", "write")

    assert caught.value.retryable is True


@pytest.mark.parametrize("server", ["openai", "ollama"])
async def test_no_first_token_within_the_timeout_says_the_model_may_still_be_reading(
    server: str, make_llm: Callable[..., LocalLLM]
) -> None:
    fake_type = FakeOllama if server == "ollama" else FakeOpenAI
    with fake_type(lambda body: "hello") as fake:
        fake.delay_next(1, 5.0)
        llm = make_llm(fake.base_url, timeout=0.3, dialect="ollama" if server == "ollama" else "none")
        with pytest.raises(LLMError, match=r"no token yet .*MEMSTREAM_LOCAL_LLM_TIMEOUT") as caught:
            await llm.complete("", "hello")

    assert caught.value.retryable is True


async def test_each_call_logs_how_long_the_model_read_and_wrote(
    make_llm: Callable[..., LocalLLM], caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAI(strict) as fake:
        llm = make_llm(fake.base_url)
        with caplog.at_level(logging.INFO, logger="memstream.llm.local"):
            await extract(llm)

    [line] = [r.getMessage() for r in caplog.records if "call took" in r.getMessage()]
    assert f"local {MODEL}: call took " in line
    assert "prompt tokens in" in line and "tokens/s" in line and "schema as json_schema" in line
    assert llm.typical_call_s is not None


# --- one call at a time ---


async def wait_until(condition: Callable[[], bool], deadline_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        assert loop.time() < end, "the condition did not come true in time"
        await asyncio.sleep(0.01)


async def test_calls_wait_for_the_one_in_flight_and_busy_says_so(make_llm: Callable[..., LocalLLM]) -> None:
    with FakeOpenAI(lambda body: "a b c d e f g h", token_delay=0.05) as fake:
        llm = make_llm(fake.base_url)
        assert not llm.busy
        first = asyncio.create_task(llm.complete("", "first"))
        second = asyncio.create_task(llm.complete("", "second"))
        await wait_until(lambda: len(fake.requests) >= 1)
        seen_while_first_ran: set[int] = set()
        while not first.done():
            seen_while_first_ran.add(len(fake.requests))
            assert llm.busy
            await asyncio.sleep(0.01)
        await second

    assert seen_while_first_ran <= {0, 1}  # the second request is sent only once the first is answered
    assert [r.user_text for r in fake.requests] == ["first", "second"]
    assert not llm.busy


async def test_a_higher_concurrency_lets_calls_overlap(make_llm: Callable[..., LocalLLM]) -> None:
    with FakeOpenAI(lambda body: "a b c d e f g h", token_delay=0.05) as fake:
        llm = make_llm(fake.base_url, concurrency=2)
        first = asyncio.create_task(llm.complete("", "first"))
        second = asyncio.create_task(llm.complete("", "second"))
        overlapped = False
        while not first.done():
            overlapped = overlapped or len(fake.requests) == 2
            await asyncio.sleep(0.01)
        await second

    assert overlapped


def test_unknown_dialect_and_zero_concurrency_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown structured-output dialect"):
        LocalLLM("http://127.0.0.1:9/v1", dialect="grammar")
    with pytest.raises(ValueError, match="concurrency of at least 1"):
        LocalLLM("http://127.0.0.1:9/v1", concurrency=0)


async def test_search_does_not_wait_for_a_local_model_busy_with_extraction(
    make_llm: Callable[..., LocalLLM], caplog: pytest.LogCaptureFixture
) -> None:
    hits = [HybridHit(memory(f"m{i}", text=f"memory number {i}"), 1.0 - i / 100, 1.0 - i / 100, None) for i in range(5)]
    with FakeOpenAI(lambda body: "a b c d e f g h", token_delay=0.05) as fake:
        llm = make_llm(fake.base_url)
        extraction = asyncio.create_task(llm.complete("extract", "the conversation"))
        await wait_until(lambda: llm.busy)
        with caplog.at_level(logging.INFO, logger="memstream.recall.rerank"):
            # Waiting for the model would take until the extraction ends: far less than this timeout.
            ranked = await rerank_top("how is it built?", hits, LLMReranker(llm), timeout_s=60.0)
        still_extracting = not extraction.done()
        await extraction

    assert still_extracting
    assert ranked == hits  # the search's own order
    assert [r.user_text for r in fake.requests] == ["the conversation"]  # the reranker asked nothing
    assert "skipped" in caplog.text and "is busy" in caplog.text


async def test_the_provider_chain_passes_the_schema_on_and_is_busy_when_its_first_provider_is(
    make_llm: Callable[..., LocalLLM],
) -> None:
    with FakeOpenAI(lambda body: json.dumps(STRICT), token_delay=0.05) as fake:
        chain = ProviderChain([make_llm(fake.base_url, dialect="json_schema")])
        call = asyncio.create_task(chain.complete("extract", "conversation", schema=answer_schema("normal")))
        await wait_until(lambda: chain.busy)
        await call

    assert fake.requests[0].schema == answer_schema("normal")
    assert not chain.busy and chain.waiting == 0


@pytest.mark.parametrize("mode", ["normal", "summary", "init"])
def test_each_prompts_example_answer_is_one_line_the_schema_accepts(mode: str) -> None:
    # A grammar (llama-cpp-python's allows no line break) holds the model to the schema's shape: the example
    # the model imitates must be that shape, or the likeliest allowed token is the one that ends the list.
    example = system_prompt(mode).split("Example answer:\n", 1)[1]

    assert "\n" not in example
    jsonschema.validate(json.loads(example), answer_schema(mode))
    order = list(answer_schema(mode)["properties"]["memories"]["items"]["properties"])
    for item in json.loads(example)["memories"]:
        assert list(item) == order[: len(item)]  # the schema's order; scope only where it is given


async def test_once_ollama_is_known_calls_without_a_schema_use_its_own_api_too(
    make_llm: Callable[..., LocalLLM],
) -> None:
    with FakeOllama(strict) as fake:
        llm = make_llm(fake.base_url, context_tokens=16384)
        await extract(llm)
        await llm.complete("rank these", "query", max_tokens=50)

    paths = [r.path for r in fake.requests]
    assert paths == ["/api/version", "/api/chat", "/api/chat"]
    assert fake.requests[-1].schema is None
    assert fake.requests[-1].options == {"num_predict": 50, "num_ctx": 16384}
