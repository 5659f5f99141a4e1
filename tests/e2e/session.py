"""A realistic coding session and the scripted model that answers for it.

The fake Anthropic server hands every request to :func:`respond`, which answers as a
model would: facts for the newest assistant turn (normal mode), a session summary
(summary mode), a lesson (condensation), or the superseded ids (contradiction check).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: (role, content) of the session, in order.
TURNS: list[tuple[str, str]] = [
    ("user", "Set up authentication for the shop API."),
    ("assistant", "Done: auth uses JWT stored in httpOnly cookies. The login endpoint is implemented."),
    ("user", "Great. By the way I prefer bun over npm. <private>my staging password is hunter2</private>"),
    ("assistant", "Noted, I will use bun. The signup endpoint is implemented as well."),
    ("user", "Let's move auth to server-side sessions in Redis instead of JWT."),
    ("assistant", "Switched: auth sessions are now kept server-side in Redis; the JWT cookies are gone."),
]

#: Facts the model "extracts" when the newest assistant turn contains the key.
FACTS: dict[str, list[dict[str, str]]] = {
    "login endpoint is implemented": [
        {"memory": "Authentication uses JWT tokens stored in httpOnly cookies", "type": "architecture"},
        # A paraphrase in the same reply: it reaches dedup before the first is stored.
        {"memory": "Authentication uses JWT tokens kept in httpOnly cookies", "type": "architecture"},
        {"memory": "Progress: the login endpoint is implemented", "type": "progress"},
    ],
    "signup endpoint is implemented": [
        {"memory": "User prefers bun over npm for all installs", "type": "preference", "scope": "user"},
        # The same fact again, differently punctuated: must refresh, not duplicate.
        {"memory": "Authentication uses JWT tokens stored in httpOnly cookies.", "type": "architecture"},
        {"memory": "Progress: login and signup endpoints are implemented, password reset is next", "type": "progress"},
    ],
    "server-side in Redis": [
        {"memory": "Auth sessions are stored server-side in Redis; JWT cookies were removed", "type": "architecture"},
    ],
}


def _last_assistant_line(prompt: str) -> str:
    lines = [line for line in prompt.splitlines() if line.startswith("[assistant]")]
    return lines[-1] if lines else ""


def _user_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def respond(request: dict[str, Any]) -> str:
    system = str(request.get("system", ""))
    prompt = _user_text(request)
    if "supersede" in system.lower() or "Does this new fact supersede" in prompt:
        new = re.search(r'New fact \(type=[^)]*\): "(.*)"', prompt)
        ids = re.findall(r'- id=(\S+) type=\S+: "(.*)"', prompt)
        superseded = [i for i, text in ids if new and "Redis" in new.group(1) and "JWT" in text]
        return json.dumps({"superseded": superseded})
    if "summarize" in system.lower():
        # One distinct summary per turn: what the newest turn did.
        did = _last_assistant_line(prompt).removeprefix("[assistant] ")
        return json.dumps([{"memory": did, "type": "session-summary"}])
    if "condense" in system.lower():
        return '[{"memory": "Keep auth changes small and test login first", "type": "learned-pattern"}]'
    last = _last_assistant_line(prompt)
    for key, facts in FACTS.items():
        if key in last:
            # Fenced, like real models often answer: the parser must cope.
            return "```json\n" + json.dumps(facts) + "\n```"
    return "[]"
