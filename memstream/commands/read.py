"""The read verbs: search, block, history. They call the running memstream's HTTP API and import
nothing of the pipeline (no Faust, Kafka client, store or provider SDK), so they answer in the time
the API takes plus Python's start."""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from memstream.commands import CliError
from memstream.recall.answers import index_rows
from memstream.runtime import api_url, auth_headers
from memstream.settings import Settings

# --- search and block ----------------------------------------------------------------


#: How long a read waits for the API (a block with a query embeds it first).
API_TIMEOUT_S = 30.0


def api_get(settings: Settings, path: str, params: dict[str, str]) -> tuple[str, str]:
    """GET ``path`` from the running memstream's API: (content type, body); a CliError on failure."""
    return api_request(settings, "GET", path, params)


def api_request(
    settings: Settings,
    method: str,
    path: str,
    params: dict[str, str],
    body: dict[str, Any] | None = None,
    *,
    timeout: float = API_TIMEOUT_S,
) -> tuple[str, str]:
    """Call the running memstream's API with this machine's bearer token (MEMSTREAM_TOKEN, else the
    local token): (content type, body); a CliError on failure."""
    base = api_url(settings)
    url = urllib.parse.urlsplit(base)
    headers = auth_headers(settings)
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    target = f"{url.path.rstrip('/')}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=timeout)
    try:
        connection.request(method, target, body=data, headers=headers)
        response = connection.getresponse()
        reply = response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        raise CliError(f"cannot reach memstream at {base} ({exc}): is `memstream up` running?") from None
    finally:
        connection.close()
    if response.status >= 400:
        try:
            message = json.loads(reply)["error"]
        except (ValueError, KeyError, TypeError):
            message = reply[:200]
        if response.status == 401 and "Authorization" not in headers:
            message += " (set MEMSTREAM_TOKEN, or run `memstream up` here once to make the local token)"
        raise CliError(f"{path} failed ({response.status}): {message}")
    return (response.getheader("Content-Type") or "").split(";")[0].strip(), reply


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project).resolve())
    detail = "full" if args.full else "index"
    params = {"q": args.query, "project": project, "limit": str(args.limit), "detail": detail}
    if getattr(args, "documents", "include") != "include":
        params["documents"] = args.documents
    _, body = api_get(settings, "/search", params)
    if args.json:
        print(body)
        return 0
    found = json.loads(body)
    rows = found["results"] if args.full else index_rows(found)
    if not rows:
        print(f"no memories match {args.query!r} in {project}")
        return 0
    print(f"score: {SCORE_NAMES.get(found['score'], found['score'])}")
    for row in rows:
        print(format_hit(row) if args.full else format_row(row))
    return 0


#: What each score a search can show means, printed above the results.
SCORE_NAMES = {
    "fused": "fused (vector and BM25, each scaled over this query's candidates; 1 = the best of them)",
    "vector": "vector (cosine similarity of query and memory)",
    "bm25": "bm25 (keyword match, 0 = no query word in the memory)",
}


def format_row(row: dict[str, Any]) -> str:
    """One row of an index (search or timeline) on one line: score, id, type, scope, date, session, what became
    of the code it cites (when recall checked it and the code is not as it was); then the preview."""
    score = row.get("score")
    lead = [] if "score" not in row else [f"{score:.3f}" if score is not None else "  -  "]
    session = f"  session {row['session']}" if row.get("session") else ""
    code = f"  (code {row['code']})" if row.get("code") else ""
    return (
        "  ".join([*lead, row["id"], f"[{row['type']}, {row['scope']}]", row["date"]])
        + session
        + code
        + f"\n    {row['preview']}"
    )


def format_hit(hit: dict[str, Any]) -> str:
    """A full search result in two lines: score, type, scope and text; then id, session, provenance, times."""
    sources = ", ".join(
        ":".join(str(part) for part in (p.get("source") or "?", p.get("at") or p.get("session")) if part)
        for p in hit.get("provenance") or []
    )
    details = [f"id {hit['id']}"]
    if hit.get("session"):
        details.append(f"session {hit['session']}")
    if sources:
        details.append(f"from {sources}")
    details.append(f"created {_minute(hit['created_at'])}")
    if hit.get("code"):
        details.append(f"code {hit['code']}")
    if hit.get("updated_at") != hit.get("created_at"):
        details.append(f"updated {_minute(hit['updated_at'])}")
    score = f"{hit['score']:.3f}" if hit.get("score") is not None else "  -  "
    return f"{score}  [{hit['type']}, {hit['scope']}] {hit['text']}\n       {'  '.join(details)}"


def cmd_timeline(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.id) == bool(args.session):
        raise CliError("give a memory id, or --session, to follow")
    project = str(Path(args.project).resolve())
    params = {"project": project, "before": str(args.before), "after": str(args.after), "limit": str(args.limit)}
    params.update({"id": args.id} if args.id else {"session": args.session})
    _, body = api_get(settings, "/timeline", params)
    if args.json:
        print(body)
        return 0
    found = json.loads(body)
    for marked in index_rows(found):
        print(("> " if marked["id"] == found.get("anchor") else "  ") + format_row(marked))
    return 0


def cmd_get(args: argparse.Namespace, settings: Settings) -> int:
    ids = [one.strip() for one in args.ids if one.strip()]
    if not ids or any("," in one for one in ids):
        raise CliError("give one or more memory ids, separated by spaces")
    _, body = api_get(settings, "/memories", {"ids": ",".join(ids)})
    if args.json:
        print(body)
        return 0
    found = json.loads(body)
    for record in found["memories"]:
        print(format_hit({**record, "score": None}))
        print_citations(record, settings)
    for missing in found["missing"]:
        print(f"memstream: no memory {missing}", file=sys.stderr)
    return 1 if found["missing"] else 0


def print_citations(record: dict[str, Any], settings: Settings) -> None:
    """The code a memory cites, each checked here against the work tree (issue 39) unless
    ``MEMSTREAM_CHECK_CITATIONS`` is off."""
    if not record.get("citations"):
        return
    from memstream.recall.staleness import check_record, checker_for, describe

    checker = checker_for(settings)
    if checker is None:
        for item in record["citations"]:
            print(f"    cites {item['path']}")
        return
    status, checked = check_record(record, checker)
    print(f"    code: {status or 'not checked here'}")
    for one in checked:
        print(f"    cites {describe(one)}")


def _minute(ts: str) -> str:
    return str(ts)[:16].replace("T", " ")


def cmd_block(args: argparse.Namespace, settings: Settings) -> int:
    project = str(Path(args.project).resolve())
    params = {"project": project, "q": args.query}
    _, body = api_get(settings, "/block", params)
    print(body)
    return 0


# --- history -------------------------------------------------------------------------


def format_record(record: dict[str, Any]) -> str:
    """One audit record (as the API returns it) on one line.

    Time (UTC, to the second), outcome, action, the memory and the one it points at
    (``->``: the successor of a superseded memory, the target of a proposal), the reason,
    the model and prompt version that decided, and a flag when a human should review.
    """
    from datetime import UTC, datetime

    ts = datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00")).astimezone(UTC)
    about = record.get("memory_id") or "-"
    if record.get("target_id"):
        about += f" -> {record['target_id']}"
    model, prompt = record.get("model") or "", record.get("prompt_version") or ""
    decided_by = f"{model or '?'} ({prompt})" if prompt else model or "-"
    line = "  ".join(
        [
            ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            f"{record['outcome']:<10}",
            f"{record.get('action') or '-':<6}",
            about,
            record.get("reason") or "-",
            decided_by,
        ]
    )
    where = ", ".join(f"{s['file']}:{s.get('line') or 0}" for s in record.get("sources") or [] if s.get("file"))
    line += f"  from {where}" if where else ""
    return line + ("  REVIEW NEEDED" if record.get("review_needed") else "")


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    memory_id = args.memory_id.strip()
    if not memory_id:
        raise CliError("give the id of a memory")
    if args.limit < 1:
        raise CliError("--limit must be 1 or more")
    _, body = api_get(settings, "/history", {"memory_id": memory_id, "limit": str(args.limit)})
    records = json.loads(body)["records"]
    if not records:
        raise CliError(f"no history for memory {memory_id}")
    if args.json:
        print(body)
        return 0
    for record in records:
        print(format_record(record))
    return 0
