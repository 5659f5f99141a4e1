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

import logging
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlparse

import httpx
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ListRootsResult
from pydantic import Field

log = logging.getLogger(__name__)

NAME = "memstream"
INSTRUCTIONS = (
    "memstream is the long-term memory of this project and user. Call get_memory_block at the start of "
    "a task for the project's context; search_memories before answering questions about past work, "
    "decisions, preferences or errors; add_memory when the user asks to remember something; add_document "
    "for a web page or text the project should know."
)
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

Project = Annotated[
    str | None,
    Field(description="Absolute path of the project directory; default: the client's working directory."),
]


class ApiClient:
    """memstream's HTTP API, as the tools need it; every failure becomes a ToolError."""

    def __init__(self, client: httpx.AsyncClient, user: str = ""):
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


def client_roots(ctx: Context, project: str | None = None) -> ListRoots | None:
    """Ask the client for its roots (the SDK sends ``roots/list`` on the transport's terms) unless
    ``project`` was given or the client offers no roots."""
    if project and project.strip():
        return None
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    return ListRoots()


#: A tool parameter the SDK fills with the client's roots (hidden from the tool's schema).
Roots = Annotated[ListRootsResult | None, Resolve(client_roots)]


def build_server(api: ApiClient, default_project: str | None) -> MCPServer:
    """The MCP server over ``api``; ``default_project`` when the client offers no roots (None: required)."""
    server = MCPServer(NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def project_of(roots: ListRootsResult | None, project: str | None) -> str:
        if project and project.strip():
            return project.strip()
        root = _first_root(roots)
        if root:
            return root
        if default_project:
            return default_project
        raise ToolError("give 'project' (the project directory): this client offers no MCP roots")

    def scope_params(project: str) -> dict[str, str]:
        return {"project": project, "user": api.user}

    @server.tool(
        description="Search the project's (and the user's) memories by meaning and keywords (hybrid BM25 + "
        "vector ranking). Returns the best matches with id, text, type, scope, score, session, provenance "
        "and times."
    )
    async def search_memories(
        query: Annotated[str, Field(description="What to look for, in natural language or keywords.", min_length=1)],
        roots: Roots,
        project: Project = None,
        limit: Annotated[int, Field(description="Most results to return.", ge=1, le=100)] = 10,
        types: Annotated[
            list[MemoryTypeName] | None, Field(description="Only memories of these types (default: every type).")
        ] = None,
    ) -> dict[str, Any]:
        where = await project_of(roots, project)
        # Ask for more when filtering by type, so the filter still leaves ``limit`` results.
        asked = limit if not types else min(100, limit * 5)
        found = await api.call("GET", "/search", params={"q": query, "limit": str(asked), **scope_params(where)})
        results = [hit for hit in found["results"] if not types or hit["type"] in types][:limit]
        return {"query": query, "project": where, "results": results}

    @server.tool(
        description="The [MEMORY] block for the project: its brief, architecture, tech and product context, "
        "progress, last session and the user's preferences, plus memories relevant to 'query' if given. "
        "Call it at the start of a task."
    )
    async def get_memory_block(
        roots: Roots,
        project: Project = None,
        query: Annotated[str | None, Field(description="The current task; fills 'Relevant to Current Task'.")] = None,
        max_tokens: Annotated[
            int | None, Field(description="Token budget of the block (default: the server's).", ge=100, le=50_000)
        ] = None,
    ) -> str:
        where = await project_of(roots, project)
        params = {"q": query or "", **scope_params(where)}
        if max_tokens:
            params["max_tokens"] = str(max_tokens)
        return str(await api.call("GET", "/block", params=params))

    @server.tool(
        description="Remember a statement: it goes through memstream's pipeline (deduplication, audit). Returns "
        "the memory's id once stored, or its status if it is still in flight."
    )
    async def add_memory(
        text: Annotated[str, Field(description="The statement to remember, self-contained.", min_length=10)],
        roots: Roots,
        project: Project = None,
        type: Annotated[
            MemoryTypeName | None, Field(description="Memory type (default: guessed from the wording).")
        ] = None,
        scope: Annotated[
            Literal["project", "user"],
            Field(description="'project' (this project only) or 'user' (the user's, in every project)."),
        ] = "project",
    ) -> dict[str, Any]:
        where = await project_of(roots, project)
        body = {"text": text, "type": type, "scope": scope, "origin": "mcp:add_memory", **scope_params(where)}
        return dict(await api.call("POST", "/memories", json=body))

    @server.tool(description="One memory by its id, with its provenance and times (forgotten ones too).")
    async def get_memory(id: Annotated[str, Field(description="The memory's id.", min_length=1)]) -> dict[str, Any]:
        return dict((await api.call("GET", f"/memories/{_segment(id)}"))["memory"])

    @server.tool(
        description="The audit trail of one memory, oldest first: every decision and change (created, "
        "deduped, updated, superseded, deleted/forgotten…) with its reason."
    )
    async def memory_history(id: Annotated[str, Field(description="The memory's id.", min_length=1)]) -> dict[str, Any]:
        found = await api.call("GET", "/history", params={"memory_id": id})
        if not found["records"]:
            raise ToolError(f"no history for memory {id}")
        return dict(found)

    @server.tool(description="The project's (and the user's) active memories, newest first.")
    async def list_memories(
        roots: Roots,
        project: Project = None,
        type: Annotated[MemoryTypeName | None, Field(description="Only memories of this type.")] = None,
        limit: Annotated[int, Field(description="Most memories to return.", ge=1, le=1000)] = 50,
    ) -> dict[str, Any]:
        where = await project_of(roots, project)
        params = {"limit": str(limit), **scope_params(where)}
        if type:
            params["type"] = type
        found = await api.call("GET", "/memories", params=params)
        return {"project": where, "memories": found["memories"]}

    @server.tool(
        description="Forget a memory: it leaves search and the [MEMORY] block, and is kept as a tombstone with "
        "your reason in its audit trail (never silently deleted)."
    )
    async def forget_memory(
        id: Annotated[str, Field(description="The memory's id.", min_length=1)],
        reason: Annotated[str, Field(description="Why it should be forgotten (recorded).", min_length=3)],
    ) -> dict[str, Any]:
        return dict(await api.call("POST", f"/memories/{_segment(id)}/forget", json={"reason": reason}))

    @server.tool(
        description="Add a document to the project's memory: a web page by its URL, or text. It is split into "
        "chunks that search_memories then finds beside the memories. Returns the document's id; list_documents "
        "shows its progress (extracting, chunking, embedding, indexing, done or failed)."
    )
    async def add_document(
        roots: Roots,
        url: Annotated[str | None, Field(description="An http(s) URL to fetch (HTML is reduced to its text).")] = None,
        content: Annotated[str | None, Field(description="The document's text, when there is no URL.")] = None,
        title: Annotated[str | None, Field(description="The title (default: the page's).")] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        if bool(url) == bool(content):
            raise ToolError("give either 'url' or 'content'")
        where = await project_of(roots, project)
        body = {"source": url, "content": content, "title": title or "", "project": where}
        return dict(await api.call("POST", "/documents", json={k: v for k, v in body.items() if v is not None}))

    @server.tool(description="The project's documents, newest first, with their status and number of chunks.")
    async def list_documents(roots: Roots, project: Project = None) -> dict[str, Any]:
        where = await project_of(roots, project)
        found = await api.call("GET", "/documents", params={"project": where})
        return {"project": where, "documents": found["documents"]}

    return server


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


def stdio_main(api_url: str, user: str, cwd: str, *, headers: dict[str, str] | None = None) -> None:
    """``memstream mcp``: serve over stdio, calling the API at ``api_url`` (with this machine's token)."""
    client = httpx.AsyncClient(base_url=api_url, timeout=API_TIMEOUT_S, headers=headers or {})
    server = build_server(ApiClient(client, user), default_project=cwd)
    server.run("stdio")
