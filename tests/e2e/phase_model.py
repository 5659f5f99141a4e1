"""A scripted model for the consolidation spec's two phases, for the fake Anthropic server.

Phase 1 answers with a raw memory, a summary and a slug naming the session by its first
user line; Phase 2 answers with a summary listing the sessions it was told were added,
retained and removed, so a test can read the diff back from the consolidated memory.
Extraction gets one architecture fact per assistant turn, so searches and blocks return
memories of the sessions (their usage feeds Phase 2); contradiction checks find none.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any

from memstream.rules import phase1, phase2


def _user_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def _system(request: dict[str, Any]) -> str:
    system = request.get("system", "")
    return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)


def _section(prompt: str, title: str) -> list[str]:
    match = re.search(rf"^{title}:\n(.*?)(?=\n\n[A-Z]+ sessions:|\n\nReturn the JSON|\Z)", prompt, re.S | re.M)
    return re.findall(r"^### (\S+)", match.group(1), re.M) if match else []


class PhaseModel:
    """Answers Phase 1 and Phase 2 prompts and keeps what it was asked (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase1_prompts: list[str] = []
        self.phase2_prompts: list[str] = []
        #: Phase 1 and Phase 2 calls to fail before answering (the responder raises: the API's 500).
        self.fail_phase1 = 0
        self.fail_phase2 = 0
        #: Seconds each Phase 1 answer takes, and the most Phase 1 calls seen at once.
        self.phase1_delay = 0.0
        self.phase1_in_flight = 0
        self.phase1_max_in_flight = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        if self.phase1_delay and _system(request) == phase1.SYSTEM:
            return self._slow_phase1(request)
        return self.answer(request)

    async def _slow_phase1(self, request: dict[str, Any]) -> str:
        with self.lock:
            self.phase1_in_flight += 1
            self.phase1_max_in_flight = max(self.phase1_max_in_flight, self.phase1_in_flight)
        try:
            await asyncio.sleep(self.phase1_delay)
            return self.answer(request)
        finally:
            with self.lock:
                self.phase1_in_flight -= 1

    def answer(self, request: dict[str, Any]) -> str:
        system, prompt = _system(request), _user_text(request)
        if system == phase1.SYSTEM:
            with self.lock:
                self.phase1_prompts.append(prompt)
                if self.fail_phase1 > 0:
                    self.fail_phase1 -= 1
                    raise RuntimeError("scripted Phase 1 failure")
            first = re.search(r"^\[user\] (.*)$", prompt, re.M)
            topic = first.group(1) if first else "session"
            said = prompt.split("Session:", 1)[-1].rsplit("Return the JSON", 1)[0].strip()
            return json.dumps(
                {
                    "raw_memory": f"Worked on: {topic}\nEverything said:\n{said}",
                    "rollout_summary": f"The session was about {topic}",
                    "rollout_slug": " ".join(topic.split()[:4]),
                }
            )
        if system == phase2.SYSTEM:
            with self.lock:
                self.phase2_prompts.append(prompt)
                if self.fail_phase2 > 0:
                    self.fail_phase2 -= 1
                    raise RuntimeError("scripted Phase 2 failure")
            lines = [
                f"- {label}: {', '.join(_section(prompt, f'{label.upper()} sessions')) or 'none'}"
                for label in ("added", "retained", "removed")
            ]
            return json.dumps({"summary": "\n".join(lines)})
        if "Does this new fact supersede" in prompt:
            return '{"superseded": []}'
        answers = [line for line in prompt.splitlines() if line.startswith("[assistant] ")]
        if not answers:
            return "[]"
        return json.dumps([{"memory": answers[-1].removeprefix("[assistant] "), "type": "architecture"}])
