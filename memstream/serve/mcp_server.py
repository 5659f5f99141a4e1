"""memstream's MCP server: search, read, add and forget memories from any MCP client.

Every tool is a thin call to memstream's HTTP API, so the server has no Faust, store or
provider in it: ``memstream mcp`` (stdio) talks to the running ``memstream up`` over HTTP,
and the stateless streamable HTTP endpoint at ``/mcp`` on the API calls the API's own app
in process (no socket). Failures are MCP tool errors with a one-line reason.

The project defaults to the client's working directory: its first MCP root when the client
offers roots, else the server's working directory (stdio). Over HTTP the server's directory
means nothing, so a client without roots passes ``project``.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, cast
from urllib.parse import unquote, urlparse

import anyio
import httpx
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ListRootsResult
from pydantic import Field, ValidationError

from memstream.serve.mcp_stdio import INSTRUCTIONS, NAME, package_version

log = logging.getLogger(__name__)

#: How long a tool waits on the API (writes wait up to 5 s for the store to show their outcome).
API_TIMEOUT_S = 30.0

#: The schema's StoredType, spelled out: importing memstream.schemas would load numpy into the stdio
#: server. tests/unit/test_mcp_server.py checks the two stay the same.
MemoryTypeName = Literal[
    "project-brief",
    "architecture",
    "tech-context",
    "product-context",
    "progress",
    "session-summary",
    "error-solution",
    "preference",
    "learned-pattern",
    "project-config",
    "conversation",
    "consolidated",
    "document_chunk",
]

#: The API's limits (memstream/serve/context.py), spelled again so the stdio server stays light;
#: tests/unit/test_mcp_server.py checks they stay the same.
MAX_QUERY_CHARS = 4_000
MAX_PROJECT_CHARS = 4_096
MAX_MEMORY_CHARS = 8_000
#: Limits of the MCP's own: an id (a memory's, a session's), a reason or title, a URL, a document's text.
MAX_ID_CHARS = 200
MAX_REASON_CHARS = 1_000
MAX_URL_CHARS = 4_096
MAX_DOCUMENT_CHARS = 900_000  # the API takes a body of 1,000,000 bytes at most
#: How much of a memory's text add_memory's answer shows.
PREVIEW_CHARS = 160

Project = Annotated[
    str | None,
    Field(
        description="Absolute path of the project directory; default: the client's working directory.",
        max_length=MAX_PROJECT_CHARS,
    ),
]


class Requester(Protocol):
    """What :class:`ApiClient` asks of its client: :class:`httpx.AsyncClient`, or the API's app called
    in process (``memstream.front.app.InProcessClient``)."""

    base_url: Any

    async def request(
        self, method: str, url: str, *, params: dict[str, str] | None = None, json: Any = None
    ) -> httpx.Response: ...


class ApiClient:
    """memstream's HTTP API, as the tools need it; every failure becomes a ToolError."""

    def __init__(self, client: Requester, user: str = ""):
        self.client = client
        self.user = user

    async def call(self, method: str, path: str, *, params: dict[str, str] | None = None, json: Any = None) -> Any:
        try:
            response = await self.client.request(method, path, params=params, json=json)
        except httpx.TimeoutException:
            raise ToolError(f"memstream did not answer {path} within {API_TIMEOUT_S:.0f}s") from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"cannot reach memstream at {self.client.base_url} ({exc}): is `memstream up` running?"
            ) from None
        if response.status_code >= 400:
            try:
                message = str(response.json()["error"])
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            raise ToolError(f"{path} failed ({response.status_code}): {' '.join(message.split())}")
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text


async def client_roots(ctx: Context, project: str | None = None) -> ListRoots | None:
    """Ask the client for its roots (the SDK sends ``roots/list`` on the transport's terms) unless
    ``project`` was given or the client offers no roots. A coroutine: the SDK runs a plain function
    on a worker thread, a hop per tool call that a backlog makes slow (issue 42)."""
    if project and project.strip():
        return None
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    return ListRoots()


#: A tool parameter the SDK fills with the client's roots (hidden from the tool's schema).
Roots = Annotated[ListRootsResult | None, Resolve(client_roots)]


#: Each tool's description, as the client's model reads it.
DESCRIPTIONS = {
    "search_memories": (
        "Step 1 of 3: search the project's (and the user's) memories by meaning and keywords. "
        "Answers a compact index: 'fields' names the columns of each row in 'hits' (id, type, scope, date, session, "
        "score, preview), "
        "best first, with a one-line preview; 'same' holds the columns every row shares, said once (its "
        "'preview' is the start every row's preview goes on from); 'score' says which score the rows show "
        "(fused: the hybrid rank, "
        "1.0 = best of this query's candidates). Then call get_memories with the ids you need (step 3), or "
        "timeline around one (step 2). detail='full' returns full records instead (costs ~10x the tokens)."
    ),
    "timeline": (
        "Step 2 of 3: what was stored before and after a memory (give 'id', from search_memories), "
        "or a session's memories (give 'session'), in the order stored, as compact rows like search's. Then "
        "get_memories for the ids you need."
    ),
    "get_memories": (
        "Step 3 of 3: the full records of the memories you picked from search_memories or timeline, "
        "several ids at once (text, type, scope, session, provenance as file:line, times; forgotten ones "
        "too). Ids not found come back under 'missing'."
    ),
    "get_memory_block": (
        "The [MEMORY] block for the project: its brief, architecture, tech and product context, "
        "progress, last session and the user's preferences, plus memories relevant to 'query' if given. "
        "Call it at the start of a task; for more, search_memories, then get_memories."
    ),
    "add_memory": (
        "Remember a statement: it goes through memstream's pipeline (deduplication, audit). Returns "
        "the memory's id once stored, or its status if it is still in flight. scope='user' needs no project. "
        "To check what is already remembered, search_memories first, then get_memories."
    ),
    "memory_history": (
        "The audit trail of one memory, oldest first: every decision and change (created, "
        "deduped, updated, superseded, deleted/forgotten…) with its reason. The id comes from search_memories; "
        "get_memories gives the memory itself."
    ),
    "list_memories": (
        "The project's (and the user's) active memories, newest first, as compact rows "
        "(id, type, scope, date, session, preview). To find something, search_memories is cheaper; get_memories gives "
        "the full records of the ids you need."
    ),
    "forget_memory": (
        "Forget a memory: it leaves search and the [MEMORY] block, and is kept as a tombstone with "
        "your reason in its audit trail (never silently deleted). Find it with search_memories and check it "
        "with get_memories first."
    ),
    "forget_user": (
        "Admin only: forget a person. Removes every memory holding their words in every scope (their own "
        "memories, their exchanges in every project, facts drawn only from their turns), their audit records, "
        "their turns in the durable log and their session state, then answers what was removed per scope. "
        "Cannot be undone; a caller that is not an admin is refused. Give the exact identity (an email) and "
        "confirm=true. To see first what of theirs would go, search_memories, then get_memories."
    ),
    "add_document": (
        "Add a document to the project's memory: a web page by its URL, or text. It is split into "
        "chunks that search_memories then finds beside the memories. Returns the document's id; list_documents "
        "shows its progress (extracting, chunking, embedding, indexing, done or failed); then search_memories "
        "finds its chunks and get_memories reads them."
    ),
    "list_documents": (
        "The project's documents, newest first, with their status and number of chunks. To read "
        "what they say, search_memories (their chunks are found beside the memories), then get_memories."
    ),
}


class Tools:
    """memstream's MCP tools over ``api``; ``default_project`` when the client offers no roots (None: required).

    Each method is one tool (its name, arguments and schema are the method's), importable and testable alone."""

    def __init__(self, api: ApiClient, default_project: str | None, *, recheck: bool = False) -> None:
        self.api = api
        self.default_project = default_project
        #: Over stdio the tools run in the user's work tree: they check the code the server's answers cite
        #: (a remote server cannot), issue 39. The HTTP endpoint, inside the server, does not.
        self.recheck = recheck

    def checked(self, records: Any) -> Any:
        """Full records with their ``code`` checked in this work tree (stdio only)."""
        if not self.recheck or not isinstance(records, list):
            return records
        from memstream.recall import staleness  # loads msgspec and the schemas: only when asked

        return staleness.recheck_records(records, staleness.shared_checker())

    async def scope(self, roots: ListRootsResult | None, project: str | None) -> dict[str, str]:
        """The API's scope parameters: the project (given, else the client's first root, else the default)
        and this machine's user."""
        return {"project": await self.project_of(roots, project), "user": self.api.user}

    async def project_of(self, roots: ListRootsResult | None, project: str | None) -> str:
        if project and project.strip():
            return project.strip()
        root = _first_root(roots)
        if root:
            return root
        if self.default_project:
            return self.default_project
        raise ToolError("give 'project' (the project directory's absolute path): this client offers no MCP roots")

    async def search_memories(
        self,
        query: Annotated[
            str,
            Field(
                description="What to look for, in natural language or keywords.",
                min_length=1,
                max_length=MAX_QUERY_CHARS,
            ),
        ],
        roots: Roots,
        project: Project = None,
        limit: Annotated[int, Field(description="Most results to return.", ge=1, le=100)] = 10,
        types: Annotated[
            list[MemoryTypeName] | None, Field(description="Only memories of these types (default: every type).")
        ] = None,
        detail: Annotated[
            Literal["index", "full"],
            Field(description="'index' (default): compact rows; 'full': every field of each memory."),
        ] = "index",
    ) -> str:
        # Ask for more when filtering by type, so the filter still leaves ``limit`` results.
        asked = limit if not types else min(100, limit * 5)
        params = {"q": query, "limit": str(asked), "detail": detail, **await self.scope(roots, project)}
        if self.recheck and detail == "index":
            params["cited"] = "1"
        found = await self.api.call("GET", "/search", params=params)
        if self.recheck and detail == "index":
            from memstream.recall import staleness

            found = staleness.recheck_index(found, staleness.shared_checker())
        if detail == "full":
            results = self.checked([hit for hit in found["results"] if not types or hit["type"] in types][:limit])
            return compact({**found, "results": results})
        if types and "type" not in found["fields"]:  # every hit is of one type, said once in 'same'
            kept = found["hits"][:limit] if found["same"]["type"] in types else []
            return compact({**found, "hits": kept})
        column = found["fields"].index("type") if types else -1
        return compact({**found, "hits": [row for row in found["hits"] if not types or row[column] in types][:limit]})

    async def timeline(
        self,
        roots: Roots,
        id: Annotated[str | None, Field(description="A memory id to look around.", max_length=MAX_ID_CHARS)] = None,
        session: Annotated[
            str | None, Field(description="A session id to follow from its start.", max_length=MAX_ID_CHARS)
        ] = None,
        project: Project = None,
        before: Annotated[int, Field(description="Memories shown before 'id'.", ge=0, le=100)] = 5,
        after: Annotated[int, Field(description="Memories shown after 'id'.", ge=0, le=100)] = 5,
        limit: Annotated[int, Field(description="Most memories of 'session' shown.", ge=1, le=100)] = 20,
    ) -> str:
        if bool(id) == bool(session):
            raise ToolError("give either 'id' (a memory to look around) or 'session' (a session to follow)")
        params = {**await self.scope(roots, project), "before": str(before), "after": str(after), "limit": str(limit)}
        params.update({"id": id} if id else {"session": session or ""})
        return compact(await self.api.call("GET", "/timeline", params=params))

    async def get_memories(
        self,
        ids: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]],
            Field(description="The memory ids, from search_memories or timeline.", min_length=1, max_length=50),
        ],
    ) -> str:
        wanted = [_segment(one) for one in ids]
        if any("," in one for one in wanted):
            raise ToolError("each of 'ids' is one memory id, without commas")
        found = await self.api.call("GET", "/memories", params={"ids": ",".join(wanted)})
        if isinstance(found, dict) and "memories" in found:
            found = {**found, "memories": self.checked(found["memories"])}
        return compact(found)

    async def get_memory_block(
        self,
        roots: Roots,
        project: Project = None,
        query: Annotated[
            str | None,
            Field(description="The current task; fills 'Relevant to Current Task'.", max_length=MAX_QUERY_CHARS),
        ] = None,
        max_tokens: Annotated[
            int | None, Field(description="Token budget of the block (default: the server's).", ge=100, le=50_000)
        ] = None,
    ) -> str:
        params = {"q": query or "", **await self.scope(roots, project)}
        if max_tokens:
            params["max_tokens"] = str(max_tokens)
        if self.recheck:
            params["cited"] = "1"
        answer = await self.api.call("GET", "/block", params=params)
        if isinstance(answer, dict):
            from memstream.recall.session_start import checked_here

            return checked_here(answer)
        return str(answer)

    async def add_memory(
        self,
        text: Annotated[
            str,
            Field(description="The statement to remember, self-contained.", min_length=10, max_length=MAX_MEMORY_CHARS),
        ],
        roots: Roots,
        project: Project = None,
        type: Annotated[
            MemoryTypeName | None, Field(description="Memory type (default: guessed from the wording).")
        ] = None,
        scope: Annotated[
            Literal["project", "user"],
            Field(description="'project' (this project only) or 'user' (the user's, in every project)."),
        ] = "project",
    ) -> str:
        # A user memory belongs to no project: it is never asked for one (nor the client's roots).
        where = await self.scope(roots, project) if scope == "project" else {"user": self.api.user}
        body = {"text": text, "type": type, "scope": scope, "origin": "mcp:add_memory", **where}
        added = await self.api.call("POST", "/memories", json=body)
        # The stored memory's full record is one get_memories away: the answer says what happened, and
        # shows the start of the text, never all of it back.
        answer = {key: value for key, value in added.items() if key != "memory"}
        return compact({**answer, "preview": preview(text)})

    async def memory_history(
        self, id: Annotated[str, Field(description="The memory's id.", min_length=1, max_length=MAX_ID_CHARS)]
    ) -> str:
        found = await self.api.call("GET", "/history", params={"memory_id": id})
        if not found["records"]:
            raise ToolError(f"no history for memory {id}")
        return compact(found)

    async def list_memories(
        self,
        roots: Roots,
        project: Project = None,
        type: Annotated[MemoryTypeName | None, Field(description="Only memories of this type.")] = None,
        limit: Annotated[int, Field(description="Most memories to return.", ge=1, le=1000)] = 50,
    ) -> str:
        params = {"limit": str(limit), "detail": "index", **await self.scope(roots, project)}
        if type:
            params["type"] = type
        return compact(await self.api.call("GET", "/memories", params=params))

    async def forget_memory(
        self,
        id: Annotated[str, Field(description="The memory's id.", min_length=1, max_length=MAX_ID_CHARS)],
        reason: Annotated[
            str,
            Field(description="Why it should be forgotten (recorded).", min_length=3, max_length=MAX_REASON_CHARS),
        ],
    ) -> str:
        return compact(await self.api.call("POST", f"/memories/{_segment(id)}/forget", json={"reason": reason}))

    async def forget_user(
        self,
        user: Annotated[
            str,
            Field(
                description="The person's identity, as their token names it (an email).",
                min_length=1,
                max_length=MAX_ID_CHARS,
            ),
        ],
        confirm: Annotated[
            bool, Field(description="true: you mean it (the forget cannot be undone); false refuses.")
        ] = False,
    ) -> str:
        if not confirm:
            raise ToolError("forgetting a user cannot be undone: call again with confirm=true")
        # The API's own forget (POST /admin/forget), which refuses any caller but an admin.
        return compact(await self.api.call("POST", "/admin/forget", json={"user": user.strip()}))

    async def add_document(
        self,
        roots: Roots,
        url: Annotated[
            str | None,
            Field(description="An http(s) URL to fetch (HTML is reduced to its text).", max_length=MAX_URL_CHARS),
        ] = None,
        content: Annotated[
            str | None,
            Field(description="The document's text, when there is no URL.", max_length=MAX_DOCUMENT_CHARS),
        ] = None,
        title: Annotated[
            str | None, Field(description="The title (default: the page's).", max_length=MAX_REASON_CHARS)
        ] = None,
        project: Project = None,
    ) -> str:
        if bool(url) == bool(content):
            raise ToolError("give either 'url' or 'content'")
        where = await self.project_of(roots, project)
        body = {"source": url, "content": content, "title": title or "", "project": where}
        return compact(await self.api.call("POST", "/documents", json={k: v for k, v in body.items() if v is not None}))

    async def list_documents(self, roots: Roots, project: Project = None) -> str:
        where = await self.project_of(roots, project)
        found = await self.api.call("GET", "/documents", params={"project": where})
        return compact({"project": where, "documents": found["documents"]})


def build_server(api: ApiClient, default_project: str | None, *, recheck: bool = False) -> MCPServer:
    """The MCP server over ``api``; ``default_project`` when the client offers no roots (None: required);
    ``recheck``: check the code cited by what the server answers in this process's work tree (stdio).

    Every tool answers text only (no structured copy of the same answer: the client would get it twice)."""
    server = Server(NAME, instructions=INSTRUCTIONS, log_level="WARNING", version=package_version())
    tools = Tools(api, default_project, recheck=recheck)
    for name, description in DESCRIPTIONS.items():
        server.add_tool(getattr(tools, name), name=name, description=description, structured_output=False)
    return server


def preview(text: str) -> str:
    """The start of ``text`` on one line, at most PREVIEW_CHARS characters."""
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def compact(answer: Any) -> str:
    """An answer as the agent reads it: JSON without indentation or spaces (the SDK would indent it)."""
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False)


class Server(MCPServer):
    """The SDK's server, with every tool error on one line that names the tool, the argument and the fix."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(argument_error(name, cause)) from cause
            raise ToolError(_one_line(str(exc).removeprefix(f"Error executing tool {name}: "), name)) from cause


def argument_error(tool: str, exc: ValidationError) -> str:
    """Pydantic's multi-line report as one line: each bad argument, what it must be (never its value)."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "missing":
            problems.append(f"'{where}' is required")
        elif err["type"] == "extra_forbidden":
            problems.append(f"'{where}' is not an argument of {tool}")
        else:
            problems.append(f"'{where}': {err['msg'][0].lower()}{err['msg'][1:]}")
    return _one_line("; ".join(problems) + " (see the tool's input schema)", tool)


def _one_line(message: str, tool: str) -> str:
    line = " ".join(message.split())
    return line if line.startswith(f"{tool}:") else f"{tool}: {line}"


def _segment(memory_id: str) -> str:
    if "/" in memory_id or not memory_id.strip():
        raise ToolError(f"{memory_id!r} is not a memory id")
    return memory_id.strip()


def _first_root(listed: ListRootsResult | None) -> str | None:
    """The client's first file root as a directory."""
    for root in listed.roots if listed is not None else []:
        uri = urlparse(str(root.uri))
        if uri.scheme == "file" and uri.path:
            return str(Path(unquote(uri.path)))
    return None


def stdio_main(
    api_url: str,
    user: str,
    cwd: str,
    *,
    headers: dict[str, str] | None = None,
    first: bytes | None = None,
    answered: Any = None,
) -> None:
    """``memstream mcp``: serve over stdio, calling the API at ``api_url`` (with this machine's token).

    ``first``: a line already read from standard input (``memstream.serve.mcp_stdio`` answered the
    handshake), handed to the SDK before the rest; ``answered``: the id of the request already answered,
    whose second answer is dropped."""
    client = httpx.AsyncClient(base_url=api_url, timeout=API_TIMEOUT_S, headers=headers or {})
    server = build_server(ApiClient(client, user), default_project=cwd, recheck=True)
    if first is None:
        server.run("stdio")
        return
    if not first:
        return  # standard input closed before any request
    anyio.run(_serve_after_handshake, server, first, answered)


async def _serve_after_handshake(server: MCPServer, first: bytes, answered: Any) -> None:
    from mcp.server.stdio import stdio_server

    stdin = _Replayed(first.decode("utf-8", errors="replace"), _text(sys.stdin.buffer))
    stdout = _Deduplicated(_text(sys.stdout.buffer), answered)
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does the same, over its own streams
    async with stdio_server(stdin=cast(Any, stdin), stdout=cast(Any, stdout)) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _text(buffer: Any) -> Any:
    return anyio.wrap_file(io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", write_through=True))


class _Replayed:
    """Standard input with the line the handshake read put back in front."""

    def __init__(self, first: str, rest: Any) -> None:
        self.first, self.rest = first, rest

    async def __aiter__(self) -> AsyncIterator[str]:
        yield self.first
        async for line in self.rest:
            yield line


class _Deduplicated:
    """Standard output without the SDK's answer to the request the handshake already answered."""

    def __init__(self, out: Any, answered: Any) -> None:
        self.out, self.answered = out, answered

    async def write(self, text: str) -> None:
        if self.answered is not None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self.answered and "method" not in message:
                self.answered = None  # one answer per id: any later message with this id is new
                return
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()
