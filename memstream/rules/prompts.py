"""The extraction prompts, one per mode of the extraction spec (normal, summary, init) plus condensation.

Bump PROMPT_VERSION whenever a prompt changes: facts carry it, so a replay can tell
which prompt produced what.
"""

from __future__ import annotations

import json

PROMPT_VERSION = "extract.v4"

#: The most memories and entities one answer holds, per mode. Each prompt says so, the JSON Schema
#: sent to a local model bounds its lists with them, and the answer's max_tokens is sized for them:
#: a small model's list that loops stops at the bound instead of running into the token cap.
ANSWER_BOUNDS: dict[str, tuple[int, int]] = {"normal": (12, 12), "summary": (1, 4), "init": (15, 15)}

#: Pipeline v2: input longer than this is truncated before the prompt is built (newest text kept).
MAX_INPUT_CHARS = 12_000

TYPE_GUIDE = """\
- project-brief: core project definition, goals, scope
- architecture: system design, patterns, component relationships
- tech-context: stack, tools, build commands, constraints
- product-context: why the project exists, problems solved, target users
- progress: current state of work (only the latest survives, so state it completely)
- session-summary: what was worked on in a session (summary mode only)
- error-solution: bug fixes, gotchas, approaches that worked or failed
- preference: the user's cross-project personal preferences (scope "user")
- learned-pattern: reusable patterns and lessons
- project-config: config preferences, run commands, environment setup
- conversation: raw conversation context (rarely used)"""

# Every answer shape and example is JSON on one line, its keys in the order of the answer's JSON Schema: a
# grammar-constrained server (llama-cpp-python's allows one optional space between tokens, no newline) holds
# the model to exactly that, and a small model that wants to write the line break its example shows is left
# with `]` as its likeliest allowed token: it answered `{"memories": [], ...}` to every conversation.
_ANSWER_SHAPE = (
    "Return ONLY a JSON object on one line, no prose:\n"
    '{"memories": [{"memory": "<one atomic, self-contained fact>", "type": "<type>", "confidence": <0..1>, '
    '"scope": "user" (only on the user\'s own preferences)}], "entities": [{"source": "<entity>", '
    '"relationship": "<verb phrase>", "target": "<entity>", "confidence": <0..1>}]}'
)


def _memory(text: str, kind: str, confidence: float, scope: str = "") -> dict[str, object]:
    # Scope only where it is not the project's: a small model shown it on every item picks "user" at random.
    return {"memory": text, "type": kind, "confidence": confidence, **({"scope": scope} if scope else {})}


def _entity(source: str, relationship: str, target: str, confidence: float) -> dict[str, object]:
    return {"source": source, "relationship": relationship, "target": target, "confidence": confidence}


_NORMAL_EXAMPLE = json.dumps(
    {
        "memories": [
            _memory("Auth uses JWT stored in first-party httpOnly cookies, not localStorage", "architecture", 0.95),
            _memory(
                "Safari login failures came from third-party cookie blocking; fixed by using a first-party cookie",
                "error-solution",
                0.9,
            ),
            _memory("Tests run with `bun test`", "project-config", 0.9),
            _memory("User prefers bun over npm for all installs", "preference", 0.6, "user"),
        ],
        "entities": [_entity("auth", "uses", "JWT", 0.95)],
    }
)

_SUMMARY_EXAMPLE = json.dumps(
    {
        "memories": [
            _memory(
                "Worked on checkout: fixed the currency KeyError for old carts (defaults to EUR), added a "
                "regression test; next is password reset.",
                "session-summary",
                0.9,
            )
        ],
        "entities": [],
    }
)

_INIT_EXAMPLE = json.dumps(
    {
        "memories": [
            _memory("demo-shop is an online shop API for small merchants", "project-brief", 0.9),
            _memory("The API is written in Python 3.12 with FastAPI and PostgreSQL", "tech-context", 0.95),
            _memory("Run the tests with `uv run pytest -q`", "project-config", 0.95),
        ],
        "entities": [_entity("demo-shop", "built with", "FastAPI", 0.95)],
    }
)

NORMAL_SYSTEM = f"""\
You extract durable memories from a coding agent's conversation, so its next session starts informed.
Each memory is one atomic fact that makes sense on its own, months later, without the conversation.
Types:
{TYPE_GUIDE}
Confidence is how sure you are the fact is true and lasting (0.9+ stated outright, 0.5 inferred).
Skip greetings, ephemeral details (what is being typed right now), secrets and anything obvious from code.
When a memory is about particular files of the project, name each by its path in the memory
(e.g. `src/auth/cookies.ts`): the memory is checked against that code when it is recalled.
If the user explicitly asks to remember something ("remember that…", "note that…", "save this:…"),
always include it with confidence 1.0.
If nothing is worth keeping, return {{"memories": [], "entities": []}}.
At most {ANSWER_BOUNDS["normal"][0]} memories and {ANSWER_BOUNDS["normal"][1]} entities, each entity once.
{_ANSWER_SHAPE}

Example conversation:
[user] Why do logins fail on Safari?
[assistant] Safari blocks third-party cookies; I moved the JWT to an httpOnly first-party cookie and the
login works now. I ran `bun test` and all 112 tests pass.
Example answer:
{_NORMAL_EXAMPLE}"""

SUMMARY_SYSTEM = f"""\
You summarize a coding agent's session for its future self.
The summary covers what was worked on, decisions made and progress achieved, in at most 5 sentences.
{_ANSWER_SHAPE}
Return exactly one memory of type "session-summary", and at most {ANSWER_BOUNDS["summary"][1]} entities.
Example answer:
{_SUMMARY_EXAMPLE}"""

INIT_SYSTEM = f"""\
You read a project's files (README, manifests, configs) and extract its foundational facts:
what it is and for whom (project-brief, product-context), how it is built (architecture, tech-context)
and how to run, test and configure it (project-config). Only facts the files state.
At most {ANSWER_BOUNDS["init"][0]} memories and {ANSWER_BOUNDS["init"][1]} entities, each entity once.
{_ANSWER_SHAPE}
Example answer:
{_INIT_EXAMPLE}"""

CONDENSE_SYSTEM = """\
You condense an old session summary into one reusable lesson for future sessions on this project.
Return ONLY a JSON array with one item: {"memory": "<the lesson>", "type": "learned-pattern"}."""

_SYSTEMS = {"normal": NORMAL_SYSTEM, "summary": SUMMARY_SYSTEM, "init": INIT_SYSTEM}


def system_prompt(mode: str) -> str:
    """The system prompt of an extraction mode; ValueError for a mode without one (raw)."""
    try:
        return _SYSTEMS[mode]
    except KeyError:
        raise ValueError(f"no extraction prompt for mode {mode!r}") from None


def extraction_prompt(text: str, mode: str = "normal") -> str:
    """The user message: the snapshot (or project files), newest text kept within the cap."""
    if len(text) > MAX_INPUT_CHARS:
        text = text[len(text) - MAX_INPUT_CHARS :]
    label = "Project files" if mode == "init" else "Conversation"
    return f"{label}:\n{text}\n\nReturn the JSON object now."
