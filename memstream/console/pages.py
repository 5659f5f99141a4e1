"""The console's pages, rendered on the server from escaping templates (``memstream.console.html``).

Each function takes what its view read and returns the page's ``<main>``; :func:`layout` wraps it.
No page holds inline script or style: the Content-Security-Policy forbids both, and the one
script (``static/console.js``) only follows the live stream and ticks checkboxes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstream.auth import Principal
from memstream.console.html import Html, esc, join, options, render, url, when
from memstream.recall.staleness import Stale, citations_of, describe
from memstream.rules.forgotten import taken_out
from memstream.schemas import MEMORY_TYPES, HistoryRecord, Memory
from memstream.schemas.injected import ContextSettings
from memstream.store.graph import GraphAround

BASE = "/console"
TYPES = [*MEMORY_TYPES, "consolidated", "document_chunk"]


@dataclass(frozen=True)
class Chrome:
    """What every page shows around its content: who is signed in, their CSRF token, the nav."""

    principal: Principal
    csrf: str
    current: str


def layout(title: str, main: Html, chrome: Chrome | None, *, notice: str = "", error: str = "") -> Html:
    nav = Html("")
    if chrome is not None:
        links = [("memories", "Memories", f"{BASE}/"), ("sessions", "Sessions", f"{BASE}/sessions")]
        links += [("block", "[MEMORY] block", f"{BASE}/block"), ("live", "Live", f"{BASE}/live")]
        links += [("stats", "Stats", f"{BASE}/stats"), ("stale", "Stale code", f"{BASE}/stale")]
        if chrome.principal.is_admin:
            links += [("documents", "Documents", f"{BASE}/documents"), ("pipeline", "Pipeline", f"{BASE}/pipeline")]
            links += [("forget-user", "Forget a user", f"{BASE}/forget-user")]
        items = join(
            render(
                '<li><a href="{href}"{current}>{label}</a></li>',
                href=href,
                label=label,
                current=Html(' aria-current="page"') if key == chrome.current else Html(""),
            )
            for key, label, href in links
        )
        nav = render(
            '<nav aria-label="Console"><ul>{items}</ul>'
            '<form method="post" action="{base}/signout" class="signout">{csrf}'
            '<span class="who">{who}</span> <button type="submit">Sign out</button></form></nav>',
            items=items,
            base=BASE,
            csrf=csrf_field(chrome.csrf),
            who=chrome.principal.name,
        )
    flash = Html("")
    if notice:
        flash = render('<p class="notice" role="status">{text}</p>', text=notice)
    if error:
        flash = render('<p class="error" role="alert">{text}</p>', text=error)
    return render(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{title} · memstream</title>"
        '<link rel="icon" href="{base}/static/favicon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="{base}/static/console.css">'
        '<script src="{base}/static/console.js" defer></script></head>'
        '<body><a class="skip" href="#main">Skip to content</a>'
        '<header><a class="brand" href="{base}/">memstream</a>{nav}</header>'
        '<main id="main"><h1>{title}</h1>{flash}{main}</main></body></html>',
        title=title,
        base=BASE,
        nav=nav,
        flash=flash,
        main=main,
    )


def csrf_field(token: str) -> Html:
    return render('<input type="hidden" name="csrf" value="{token}">', token=token)


# -- sign-in ---------------------------------------------------------------------------


def sign_in(csrf: str, *, open_mode: bool) -> Html:
    hint = (
        "This server runs in open mode: run <code>memstream console</code> on this machine for a sign-in link."
        if open_mode
        else "Run <code>memstream console</code> on the server's machine for a one-time link, or paste a token."
    )
    form = Html("")
    if not open_mode:
        form = render(
            '<form method="post" action="{base}/signin" class="stack">{csrf}'
            '<label for="token">Token</label>'
            '<input id="token" name="token" type="password" autocomplete="current-password" required>'
            '<button type="submit">Sign in</button></form>',
            base=BASE,
            csrf=csrf_field(csrf),
        )
    return render("<p>{hint}</p>{form}", hint=Html(hint), form=form)


# -- memories ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    memory: Memory
    score: float | None
    #: Why a search hit matched (vector, words, session), when the search says.
    why: str = ""


def project_of(memory: Memory, paths: Mapping[str, str] | None = None) -> str:
    """The memory's project by its path (as stored with it), or "your user scope"."""
    if memory.scope == "user" or memory.scope_key.startswith("u_"):
        return "your user scope"
    return memory.project or (paths or {}).get(memory.scope_key) or f"project {memory.scope_key}"


def source_of(memory: Memory) -> str:
    """The source CLI as stored (``claude-code``, ``cli``, ``publish``…)."""
    return ", ".join(dict.fromkeys(s.source_type for s in memory.sources if s.source_type)) or "not recorded"


def filters_form(params: Mapping[str, str], projects: Sequence[tuple[str, str]], sources: Sequence[str] = ()) -> Html:
    project_choices = [("", "every project I may read"), *[(key, label) for key, label in projects]]
    return render(
        '<form method="get" action="{base}/" class="filters" role="search">'
        '<div class="q"><label for="q">Search</label>'
        '<input id="q" name="q" type="search" value="{q}" placeholder="what do you remember about…"></div>'
        '<div><label for="project">Project</label><select id="project" name="project">{projects}</select></div>'
        '<div><label for="type">Type</label><select id="type" name="type">{types}</select></div>'
        '<div><label for="scope">Scope</label><select id="scope" name="scope">{scopes}</select></div>'
        '<div><label for="session">Session (its id or the start of it)</label>'
        '<input id="session" name="session" value="{session}"></div>'
        '<div><label for="source">Source CLI</label><select id="source" name="source">{sources}</select></div>'
        '<div><label for="since">From</label><input id="since" name="since" type="date" value="{since}"></div>'
        '<div><label for="until">To</label><input id="until" name="until" type="date" value="{until}"></div>'
        '<div class="check"><input id="all" name="all" type="checkbox" value="1"{all}>'
        '<label for="all">include superseded and forgotten</label></div>'
        '<div><button type="submit">Search</button></div></form>',
        base=BASE,
        q=params.get("q", ""),
        projects=options(project_choices, params.get("project", "")),
        types=options([("", "any type"), *[(t, t) for t in TYPES]], params.get("type", "")),
        scopes=options([("", "any scope"), ("project", "project"), ("user", "user")], params.get("scope", "")),
        session=params.get("session", ""),
        sources=options(
            [
                ("", "any source"),
                *[(s, s) for s in sorted({*sources, *([params["source"]] if params.get("source") else [])})],
            ],
            params.get("source", ""),
        ),
        since=params.get("since", ""),
        until=params.get("until", ""),
        all=Html(" checked") if params.get("all") else Html(""),
    )


def status_of(memory: Memory) -> str:
    if memory.superseded_by is None:
        return "pinned" if (memory.importance or 0) >= 1.0 else "active"
    if memory.superseded_by.startswith("forgotten:"):
        return "forgotten"
    if memory.superseded_by.startswith("wrong:"):
        return "marked wrong"
    return "superseded"


def origin(memory: Memory) -> str:
    source = memory.sources[0] if memory.sources else None
    if source is None:
        return f"session {memory.session_id}" if memory.session_id else ""
    where = source.source_type or "?"
    if source.file:
        where += f" · {source.file}:{source.line}" if source.line else f" · {source.file}"
    elif source.session_id:
        where += f" · session {source.session_id}"
    return where


def memories(
    params: Mapping[str, str],
    projects: Sequence[tuple[str, str]],
    rows: Sequence[Row],
    csrf: str,
    *,
    sources: Sequence[str] = (),
    total: int | None = None,
    next_cursor: str = "",
    problems: Sequence[str] = (),
    filtered: bool = False,
) -> Html:
    if not rows:
        why = "No memory matches."
        if problems:
            why = "No memory matches: " + "; ".join(problems) + "."
        elif filtered:
            why = "No memory matches these filters (they keep only memories whose stored values equal them)."
        listing = render('<p class="empty">{text}</p>', text=why)
    else:
        items = join(
            render(
                '<li class="memory {status_class}"><div class="pick"><input type="checkbox" name="id" value="{id}" '
                'id="pick-{id}" aria-label="select this memory"></div><div class="body">'
                '<p class="text"><a href="{href}">{text}</a></p>'
                '<p class="meta"><span class="type">{type}</span> <span class="scope">{scope}</span> '
                '<span class="status">{status}</span> {date}{score}{why}</p>'
                '<p class="meta where"><span class="project" title="project">{project}</span> · '
                '<span class="source" title="source CLI">{source}</span> <span class="origin">{origin}</span></p>'
                "</div></li>",
                status_class=status_of(r.memory).replace(" ", "-"),
                id=r.memory.id,
                href=f"{BASE}/memories/{r.memory.id}",
                text=_preview(r.memory.text),
                type=r.memory.type,
                scope=r.memory.scope,
                status=status_of(r.memory),
                date=when(r.memory.updated_at),
                score=render(' <span class="score">score {s}</span>', s=f"{r.score:.3f}")
                if r.score is not None
                else "",
                why=render(' <span class="why">matched by {w}</span>', w=r.why) if r.why else "",
                project=project_of(r.memory),
                source=source_of(r.memory),
                origin=origin_place(r.memory),
            )
            for r in rows
        )
        listing = bulk_forget(items, csrf)
    counted = render('<p class="count" role="status">{n} shown</p>', n=len(rows))
    if total is not None:
        counted = render(
            '<p class="count" role="status">{n} shown{start} of <strong>{total}</strong> {what}</p>',
            n=len(rows),
            start=" (from where the last page ended)" if params.get("after") else "",
            total=total,
            what="memories" + (" (before the session, source and date filters)" if filtered else ""),
        )
    pager = Html("")
    if next_cursor or params.get("after"):
        kept = {k: v for k, v in params.items() if k not in ("after", "notice")}
        links = []
        if params.get("after"):
            links.append(render('<a href="{h}">Newest first</a>', h=url(f"{BASE}/", kept)))
        if next_cursor:
            links.append(
                render(
                    '<a href="{h}" rel="next">Next {n} →</a>',
                    h=url(f"{BASE}/", {**kept, "after": next_cursor}),
                    n=len(rows),
                )
            )
        pager = render('<nav class="pager" aria-label="Pages">{links}</nav>', links=join(links, " "))
    export = render(
        '<p class="export"><a href="{href}" download>Export my memories (JSON Lines)</a></p>', href=f"{BASE}/export"
    )
    problem = join(render('<p class="error" role="alert">{p}</p>', p=p) for p in problems)
    return join([filters_form(params, projects, sources), problem, counted, listing, pager, export])


def origin_place(memory: Memory) -> str:
    """Where in the source it came from: the session file and line, or the session."""
    source = memory.sources[0] if memory.sources else None
    if source is None:
        return f"session {memory.session_id}" if memory.session_id else ""
    if source.file:
        return f"{source.file}:{source.line}" if source.line else source.file
    return f"session {source.session_id}" if source.session_id else ""


def _preview(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- one memory ---------------------------------------------------------------------------


def memory(
    item: Memory,
    records: Sequence[HistoryRecord],
    around: GraphAround | None,
    neighbours: Sequence[Memory],
    successor: Memory | None,
    predecessors: Sequence[Memory],
    csrf: str,
    *,
    may_act: bool,
    graph_enabled: bool = True,
    in_block: str = "",
) -> Html:
    """One memory's page: its text, what superseded it, its facts, sources, cited code, turn, history,
    graph neighbours, and the actions of who may act on it."""
    return render(
        '<article class="one"><pre class="text">{text}</pre>{chain}{in_block}{facts}'
        "<h2>Sources</h2><ul>{sources}</ul>"
        '<h2>Code it cites</h2><ul class="citations">{cites}</ul>{turn}'
        '<h2>History</h2><ol class="timeline">{timeline}</ol>'
        "<h2>Graph neighbours</h2>{graph}{actions}</article>",
        text=item.text,
        chain=_memory_chain(item, successor, predecessors),
        in_block=render('<p class="in-block">{v}</p>', v=in_block) if in_block else "",
        facts=_memory_facts(item),
        sources=_memory_sources(item) or Html("<li>none recorded</li>"),
        cites=_memory_cites(item) or Html("<li>no file cited</li>"),
        turn=_memory_turn(item),
        timeline=_memory_timeline(item, records) or Html("<li>no record yet</li>"),
        graph=_memory_graph(around, neighbours, graph_enabled=graph_enabled),
        actions=_memory_actions(item, csrf, may_act=may_act),
    )


def _memory_facts(item: Memory) -> Html:
    """The memory page's facts list: project, source, type, scope, status, importance, times, id."""
    return render(
        '<dl class="facts"><dt>Project</dt><dd class="project">{project}</dd>'
        '<dt>Source CLI</dt><dd class="source">{source}</dd>'
        "<dt>Type</dt><dd>{type}</dd><dt>Scope</dt><dd>{scope} <code>{key}</code></dd>"
        "<dt>Status</dt><dd>{status}</dd><dt>Importance</dt><dd>{importance}</dd>"
        "<dt>Created</dt><dd>{created}</dd><dt>Updated</dt><dd>{updated}</dd>"
        "<dt>Id</dt><dd><code>{id}</code></dd></dl>",
        project=project_of(item),
        source=source_of(item),
        type=item.type,
        scope=item.scope,
        key=item.scope_key,
        status=status_of(item),
        importance="unset" if item.importance is None else f"{item.importance:.2f}",
        created=when(item.created_at),
        updated=when(item.updated_at),
        id=item.id,
    )


def _memory_chain(item: Memory, successor: Memory | None, predecessors: Sequence[Memory]) -> Html:
    """What superseded the memory, and what it supersedes."""
    chain = Html("")
    if successor is not None:
        chain = render(
            '<p class="chain">Superseded by <a href="{href}" rel="next">{text}</a></p>',
            href=f"{BASE}/memories/{successor.id}",
            text=_preview(successor.text, 120),
        )
    elif item.superseded_by:
        chain = render(
            '<p class="chain">{status} (<code>{marker}</code>)</p>', status=status_of(item), marker=item.superseded_by
        )
    if predecessors:
        chain = join(
            [
                chain,
                render(
                    '<p class="chain">Supersedes {links}</p>',
                    links=join(
                        (
                            render(
                                '<a href="{h}" rel="prev">{t}</a>', h=f"{BASE}/memories/{p.id}", t=_preview(p.text, 80)
                            )
                            for p in predecessors
                        ),
                        ", ",
                    ),
                ),
            ]
        )
    return chain


def _memory_sources(item: Memory) -> Html:
    """Where the memory was said: source CLI, session and file line, one item each."""
    return join(
        render(
            "<li>{source} {session} {where}</li>",
            source=s.source_type or "?",
            session=render(
                '· session <a href="{h}">{s}</a>',
                h=url(f"{BASE}/sessions/{s.session_id}", {"project": item.scope_key}),
                s=s.session_id,
            )
            if s.session_id
            else "",
            where=f"· {s.file}:{s.line}" if s.file else "",
        )
        for s in item.sources
    )


def _memory_cites(item: Memory) -> Html:
    """The code the memory cites, one item per citation."""
    return join(
        render(
            "<li><code>{where}</code>{at}{repo}</li>",
            where=f"{c.path}:{c.start}-{c.end}" if c.start else c.path,
            at=f" @ {c.commit[:12]}{'+dirty' if c.dirty else ''}" if c.commit else "",
            repo=f" · {c.remote or c.repo}" if c.repo else "",
        )
        for c in citations_of(item)
    )


def _memory_turn(item: Memory) -> Html:
    """The turn the memory came from, when it kept it."""
    turn = Html("")
    if item.source_chunk:
        turn = render('<h2>The turn it came from</h2><pre class="turn">{chunk}</pre>', chunk=item.source_chunk)
    return turn


def _memory_timeline(item: Memory, records: Sequence[HistoryRecord]) -> Html:
    """The memory's history, repeated outcomes collapsed."""
    from memstream.console.reads import collapse_history

    timeline = join(
        render(
            '<li><span class="outcome">{outcome}</span>{times} {ts}{until}{by}{reason}{link}</li>',
            outcome=c.record.outcome,
            times=render(' <span class="times">×{n}</span>', n=c.times) if c.times > 1 else "",
            ts=when(c.record.ts),
            until=render(" to {t}", t=when(c.last)) if c.times > 1 else "",
            by=render(" by <strong>{w}</strong>", w=c.record.requested_by) if c.record.requested_by else "",
            reason=render(' — <span class="reason">{t}</span>', t=c.record.reason) if c.record.reason else "",
            link=_record_link(c.record, item.id),
        )
        for c in collapse_history(records)
    )
    return timeline


def _memory_graph(around: GraphAround | None, neighbours: Sequence[Memory], *, graph_enabled: bool) -> Html:
    """The memory's entities, their relations and the memories sharing one."""
    graph = Html("<p>No graph links: no entity of this memory is linked to another memory.</p>")
    if not graph_enabled:
        graph = Html(
            '<p class="hint">The knowledge graph is off on this server, so no memory has graph links '
            "(turn it on with <code>MEMSTREAM_GRAPH_ENABLED=1</code>).</p>"
        )
    if around is not None and (around.entities or neighbours):
        names = {e.entity_id: e.name for e in around.entities}
        rels = join(
            render(
                "<li>{a} <em>{rel}</em> {b}</li>",
                a=names.get(r.source_entity_id, "?"),
                rel=r.relation_type,
                b=names.get(r.target_entity_id, "?"),
            )
            for r in around.relations
        )
        near = join(
            render('<li><a href="{h}">{t}</a></li>', h=f"{BASE}/memories/{m.id}", t=_preview(m.text, 120))
            for m in neighbours
        )
        graph = render(
            '<p class="entities">{entities}</p><ul class="relations">{rels}</ul>'
            '<h3>Memories sharing an entity</h3><ul class="graph-memories">{near}</ul>',
            entities=", ".join(e.name for e in around.entities),
            rels=rels,
            near=near,
        )
    return graph


def _memory_actions(item: Memory, csrf: str, *, may_act: bool) -> Html:
    """The forms of who may act on the memory: change it, or restore it once taken out."""
    actions = Html("")
    if may_act and item.superseded_by is None:
        actions = _actions(item, csrf)
    elif may_act and taken_out(item.superseded_by):
        actions = render(
            '<h2>Undo</h2><form method="post" action="{base}/memories/{id}/restore" class="stack">{csrf}'
            '<label for="restore-reason">Why restore it (optional)</label><input id="restore-reason" name="reason">'
            '<button type="submit">Restore</button></form>',
            base=BASE,
            id=item.id,
            csrf=csrf_field(csrf),
        )
    return actions


def _record_link(record: HistoryRecord, current: str) -> Html:
    other = record.target_id if record.memory_id == current else record.memory_id
    if not other or other == current or ":" in other:
        return Html("")
    return render(' → <a href="{h}">{id}</a>', h=f"{BASE}/memories/{other}", id=other)


def _actions(item: Memory, csrf: str) -> Html:
    base = f"{BASE}/memories/{item.id}"
    pinned = (item.importance or 0) >= 1.0
    return render(
        '<h2>Act on it</h2><div class="actions">'
        '<form method="post" action="{base}/forget" class="stack">{csrf}'
        '<label for="forget-reason">Reason to forget</label><input id="forget-reason" name="reason" required>'
        '<button type="submit" class="danger">Forget</button></form>'
        '<form method="post" action="{base}/correct" class="stack">{csrf}'
        '<label for="correct-text">Corrected text</label>'
        '<textarea id="correct-text" name="text" rows="4" required>{text}</textarea>'
        '<label for="correct-reason">Reason for the correction</label>'
        '<input id="correct-reason" name="reason" required><button type="submit">Correct</button></form>'
        '<form method="post" action="{base}/wrong" class="stack">{csrf}'
        '<label for="wrong-reason">Why it is wrong (optional)</label><input id="wrong-reason" name="reason">'
        '<button type="submit" class="danger">Mark wrong</button></form>'
        '<form method="post" action="{base}/{pin}" class="stack">{csrf}<button type="submit">{pin_label}</button>'
        "</form>"
        "</div>",
        base=base,
        csrf=csrf_field(csrf),
        text=item.text,
        pin="unpin" if pinned else "pin",
        pin_label="Unpin" if pinned else "Pin (importance 1.0)",
    )


# -- sessions -------------------------------------------------------------------------------


def session_list(project: str, projects: Sequence[tuple[str, str]], rows: Sequence[Any], most: int = 0) -> Html:
    """Sessions newest first, each titled by its first prompt (``timeline.SessionRow``); across every
    project the caller may read when none is chosen."""
    picker = render(
        '<form method="get" action="{base}/sessions" class="filters"><div><label for="project">Project</label>'
        '<select id="project" name="project">{options}</select>'
        '</div><div><button type="submit">Show</button></div></form>',
        base=BASE,
        options=options([("", "every project I may read"), *projects], project),
    )
    if not rows:
        return join([picker, Html('<p class="empty">No session made memories here yet.</p>')])
    items = join(
        render(
            '<li class="session"><p class="text"><a href="{h}">{title}</a></p>'
            '<p class="meta"><span class="project">{project}</span> · <span class="source">{src}</span> · '
            "{first} to {last} · {n} exchange{ns}, {m} memor{ms} · <code>{id}</code></p></li>",
            h=url(f"{BASE}/sessions/{r.session_id}", {"project": project}),
            title=r.title or f"session {r.session_id}",
            project=r.project or "?",
            src=r.source or "source not recorded",
            first=when(r.first),
            last=when(r.last),
            n=r.exchanges,
            ns="" if r.exchanges == 1 else "s",
            m=r.memories,
            ms="y" if r.memories == 1 else "ies",
            id=r.session_id,
        )
        for r in rows
    )
    counted = render(
        '<p class="count" role="status">{n} session{s}, the newest first{most}</p>',
        n=len(rows),
        s="" if len(rows) == 1 else "s",
        most=f" (the newest {most} at most)" if most and len(rows) >= most else "",
    )
    return join([picker, counted, render('<ol class="memories sessions">{items}</ol>', items=items)])


def session_timeline(session_id: str, line: Any) -> Html:
    """One session (``timeline.Timeline``): each exchange with its own turns, then what it produced."""
    exchanges = join(
        render(
            '<li class="exchange"><p class="meta">{where}</p>{turns}<ul class="made">{made}</ul></li>',
            where=e.where,
            turns=join(
                render(
                    '<div class="turn {role}"><span class="role">{label}</span><pre>{text}</pre></div>',
                    role=role or "text",
                    label=role or "kept text",
                    text=text,
                )
                for role, text in e.turns
            )
            or Html('<p class="muted">(no excerpt kept)</p>'),
            made=join(
                render(
                    '<li><a href="{h}">{t}</a> <span class="type">{ty}</span> <span class="status">{st}</span></li>',
                    h=f"{BASE}/memories/{m.id}",
                    t=_preview(m.text, 160),
                    ty=m.type,
                    st=status_of(m),
                )
                for m in e.memories
            ),
        )
        for e in line.exchanges
    )
    forgotten = Html("")
    if line.forgotten:
        forgotten = render(
            "<h2>Forgotten or marked wrong from this session</h2><ul>{items}</ul>",
            items=join(
                render(
                    '<li><a href="{h}">{t}</a> <span class="status">{st}</span></li>',
                    h=f"{BASE}/memories/{m.id}",
                    t=_preview(m.text, 160),
                    st=status_of(m),
                )
                for m in line.forgotten
            ),
        )
    return render(
        '<h2 class="session-title">{title}</h2><p class="meta">Session <code>{id}</code>: its exchanges in order, '
        "each with its turns and the memories it produced.</p>"
        '<ol class="timeline exchanges">{items}</ol>{forgotten}',
        title=line.title or "(no prompt kept)",
        id=session_id,
        items=exchanges or Html("<li>No memory came from this session.</li>"),
        forgotten=forgotten,
    )


# -- block, live, pipeline, documents ---------------------------------------------------------


@dataclass(frozen=True)
class HostPreview:
    """What one host's next SessionStart in the project prints (``output`` "" : nothing, ``why``)."""

    host: str
    output: str
    why: str = ""


@dataclass(frozen=True)
class BlockSettings:
    """The block page's settings form: the project's settings, who may change them, their trail."""

    chosen: ContextSettings
    may_change: bool
    csrf: str
    sections: Sequence[str]
    types: Sequence[str]
    budget: int
    changes: Sequence[HistoryRecord] = ()


@dataclass(frozen=True)
class SettingsPreview:
    """The block the unsaved choices of the settings form would give (nothing saved)."""

    text: str
    tokens: int
    budget: int
    hosts: Sequence[HostPreview]


def host_details(hosts: Sequence[HostPreview]) -> Html:
    """Per host, what its SessionStart hook prints, folded."""
    return join(
        render(
            '<details class="host" data-host="{host}"><summary>{host}: {what}</summary>{body}</details>',
            host=h.host,
            what="prints the block below" if h.output else h.why,
            body=render('<pre class="hook">{o}</pre>', o=h.output) if h.output else "",
        )
        for h in hosts
    )


def settings_preview(preview: SettingsPreview | None) -> Html:
    """Where the settings form's preview goes (console.js fills it as the choices change; the Preview
    button shows it without the script)."""
    if preview is None:
        return Html(
            '<section id="settings-preview" class="preview" aria-live="polite" hidden><h3>Preview (not saved)</h3>'
            '<p class="preview-tokens"></p><pre class="preview-block"></pre><div class="hosts"></div></section>'
        )
    return render(
        '<section id="settings-preview" class="preview" aria-live="polite"><h3>Preview (not saved)</h3>'
        '<p class="preview-tokens">About <strong>{tokens}</strong> tokens of a budget of {budget}: what the next '
        "session would get with these choices. Nothing is saved until Save.</p>"
        '<pre class="preview-block">{text}</pre><div class="hosts">{hosts}</div></section>',
        tokens=preview.tokens,
        budget=preview.budget,
        text=preview.text or "(empty: nothing would be injected)",
        hosts=host_details(preview.hosts),
    )


def block(
    project: str,
    query: str,
    projects: Sequence[tuple[str, str]],
    text: str | None,
    tokens: int,
    settings: BlockSettings | None = None,
    hosts: Sequence[HostPreview] = (),
    *,
    preview: SettingsPreview | None = None,
) -> Html:
    form = render(
        '<form method="get" action="{base}/block" class="filters"><div><label for="project">Project</label>'
        '<select id="project" name="project">{options}</select></div>'
        '<div class="q"><label for="q">Query (optional: adds relevant memories)</label>'
        '<input id="q" name="q" value="{q}"></div><div><button type="submit">Show</button></div></form>',
        base=BASE,
        options=options([("", "choose a project"), *projects], project),
        q=query,
    )
    if text is None:
        if preview is not None and settings is not None:
            return render("{form}{settings}", form=form, settings=block_settings(project, settings, preview))
        return form
    shown = render(
        "{form}<p>About <strong>{tokens}</strong> tokens of a budget of {budget}: what the next session in this "
        'project gets.</p><pre class="block">{text}</pre>',
        form=form,
        tokens=tokens,
        budget=settings.budget if settings is not None else "",
        text=text,
    )
    previews = host_details(hosts)
    if hosts:
        shown = render(
            "{shown}<h2>Per host</h2><p>Exactly what each coding CLI's SessionStart hook prints for its next "
            'session here (without a query).</p><div class="hosts">{previews}</div>',
            shown=shown,
            previews=previews,
        )
    if settings is None:
        return shown
    return render("{shown}{form}", shown=shown, form=block_settings(project, settings))


def block_settings(project: str, s: BlockSettings, preview: SettingsPreview | None = None) -> Html:
    """The injected-context settings of the project: a form for its admin or owner, read-only otherwise,
    with the preview of its unsaved choices."""
    off = Html("" if s.may_change else " disabled")

    def boxes(name: str, values: Sequence[str], hidden: Collection[str]) -> Html:
        """One checkbox per value, ticked unless the settings hide it."""
        return join(
            render(
                '<li><label><input type="checkbox" name="{name}" value="{v}"{checked}{off}> {v}</label></li>',
                name=name,
                v=value,
                checked=Html("" if value in hidden else " checked"),
                off=off,
            )
            for value in values
        )

    sections = boxes("section", s.sections, s.chosen.hidden_sections)
    types = boxes("type", s.types, s.chosen.hidden_types)
    changes = join(
        render(
            "<li>{when} · {who}: {what}</li>",
            when=when(r.ts),
            who=r.requested_by or "?",
            what=r.reason,
        )
        for r in reversed(s.changes)
    )
    return render(
        '<h2 id="settings">Injected context</h2>'
        "<p>What SessionStart injects for this project. {who}</p>"
        '<form method="post" action="{base}/block/settings" class="stack settings" '
        'data-preview="{base}/block/preview">{csrf}'
        '<input type="hidden" name="project" value="{project}">'
        '<label><input type="checkbox" name="enabled" value="on"{enabled}{off}> Inject the [MEMORY] block at '
        "session start</label>"
        '<fieldset><legend>Sections</legend><ul class="checks">{sections}</ul></fieldset>'
        '<fieldset><legend>Memory types</legend><ul class="checks">{types}</ul></fieldset>'
        '<label for="max-tokens">Token budget (0: the one the session asks for)</label>'
        '<input id="max-tokens" name="max_tokens" type="number" min="0" max="50000" value="{budget}"{off}>'
        '<label for="settings-reason">Why (kept in the audit trail)</label>'
        '<input id="settings-reason" name="reason"{off}>'
        "{button}</form>{preview}"
        '<h3>Changes</h3><ul class="changes">{changes}</ul>',
        base=BASE,
        csrf=csrf_field(s.csrf),
        project=project,
        who="An admin or the project's owner may change it."
        if s.may_change
        else "Only an admin or the project's owner may change it.",
        enabled=Html(" checked" if s.chosen.enabled else ""),
        off=Html(off),
        sections=sections,
        types=types,
        budget=s.chosen.max_tokens,
        button=Html(
            '<div class="buttons"><button type="submit" class="save">Save</button> <button type="submit" '
            f'formaction="{BASE}/block/preview" class="secondary" name="preview" value="1">Preview</button></div>'
            if s.may_change
            else ""
        ),
        preview=settings_preview(preview) if s.may_change else "",
        changes=changes or Html("<li>none: the defaults (every section and type, the session's budget)</li>"),
    )


def live(newest: Sequence[Memory] = ()) -> Html:
    """The feed: the newest memories first, then every change as the pipeline makes it (console.js)."""
    items = join(
        render(
            '<li class="memory"><div class="body"><p class="text"><a href="{h}">{t}</a></p>'
            '<p class="meta"><span class="type">{type}</span> {date} · <span class="project">{project}</span> · '
            '<span class="source">{source}</span></p></div></li>',
            h=f"{BASE}/memories/{m.id}",
            t=_preview(m.text),
            type=m.type,
            date=when(m.updated_at),
            project=project_of(m),
            source=source_of(m),
        )
        for m in newest
    )
    return render(
        "<p>The newest memories, then each change as the pipeline makes it, for the scopes you may read. "
        '<span id="live-state" role="status">connecting…</span></p>'
        '<ol id="live" class="memories" aria-live="polite" data-stream="/events">{items}</ol>',
        items=items,
    )


def readable(value: Any) -> Html:
    """A report (the doctor's) as nested definition lists and lists, never a JSON dump."""
    if isinstance(value, Mapping):
        if not value:
            return Html('<span class="muted">none</span>')
        return render(
            '<dl class="facts report">{items}</dl>',
            items=join(
                render("<dt>{k}</dt><dd>{v}</dd>", k=str(k).replace("_", " "), v=readable(v)) for k, v in value.items()
            ),
        )
    if isinstance(value, list | tuple):
        if not value:
            return Html('<span class="muted">none</span>')
        return render("<ul>{items}</ul>", items=join(render("<li>{v}</li>", v=readable(v)) for v in value))
    if isinstance(value, float):
        return esc(f"{value:.3g}")
    if value is None:
        return Html('<span class="muted">—</span>')
    return esc(value)


def pipeline(
    lag: Sequence[tuple[str, str, float]],
    processed: Sequence[tuple[str, float]],
    parked: float,
    letters: Sequence[Any] | None,
    doctor: Mapping[str, Any] | None,
    capture: Mapping[str, Any],
    csrf: str,
    events: Mapping[str, int],
) -> Html:
    behind = [(t, p, v) for t, p, v in lag if v > 0]
    lag_rows = join(render("<tr><td>{t}</td><td>{p}</td><td>{v}</td></tr>", t=t, p=p, v=int(v)) for t, p, v in behind)
    if lag and not behind:
        lag_rows = render('<tr><td colspan="3">all {n} partitions caught up (lag 0)</td></tr>', n=len(lag))
    elif behind and len(behind) < len(lag):
        lag_rows = join(
            [
                lag_rows,
                render('<tr><td colspan="3">the other {n} partitions: lag 0</td></tr>', n=len(lag) - len(behind)),
            ]
        )
    done_rows = join(render("<tr><td>{s}</td><td>{v}</td></tr>", s=s, v=int(v)) for s, v in processed)
    if letters is None:
        dead = Html("<p>Dead letters are read from the broker: not reachable from this process.</p>")
    elif not letters:
        dead = Html("<p>No dead letters.</p>")
    else:
        dead = render(
            '<div class="wide"><table class="cards"><caption>Dead letters</caption>'
            '<thead><tr><th scope="col">Id</th><th scope="col">Stage</th>'
            '<th scope="col">Reason</th><th scope="col">When</th></tr></thead><tbody>{rows}</tbody></table></div>'
            '<form method="post" action="{base}/pipeline/redrive">{csrf}<button type="submit">Re-drive all</button>'
            "</form>",
            rows=join(
                render(
                    '<tr><td data-label="Id"><code>{i}</code></td><td data-label="Stage">{s}</td>'
                    '<td data-label="Reason">{r}</td><td data-label="When">{w}</td></tr>',
                    i=x.id,
                    s=x.letter.stage,
                    r=x.letter.reason,
                    w=when(x.letter.ts),
                )
                for x in letters
            ),
            base=BASE,
            csrf=csrf_field(csrf),
        )
    report = Html("<p>No maintenance worker runs in this process.</p>")
    if doctor is not None:
        report = readable(doctor)
    cap = join(render("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in capture.items())
    ev = join(render("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in events.items())
    return render(
        '<h2>Consumer lag</h2><div class="wide"><table><thead><tr>'
        '<th scope="col">Topic</th><th scope="col">Partition</th>'
        '<th scope="col">Lag</th></tr></thead><tbody>{lag}</tbody></table></div>'
        '<h2>Events processed, per stage</h2><div class="wide"><table><thead><tr><th scope="col">Stage</th>'
        '<th scope="col">Events</th></tr></thead><tbody>{done}</tbody></table></div>'
        "<p>Parked extractions waiting for a retry: <strong>{parked}</strong></p>"
        "<h2>Dead letters</h2>{dead}<h2>Doctor</h2>{report}"
        '<h2>Capture on this host</h2><dl class="facts">{cap}</dl><h2>GET /events</h2><dl class="facts">{ev}</dl>',
        lag=lag_rows or Html('<tr><td colspan="3">no consumer in this process</td></tr>'),
        done=done_rows or Html('<tr><td colspan="2">nothing processed in this process</td></tr>'),
        parked=int(parked),
        dead=dead,
        report=report,
        cap=cap,
        ev=ev,
    )


def stats(shown: Any, capture: Mapping[str, Any]) -> Html:
    """``shown``: ``views.Stats``. Every figure says what it counts and over what."""

    def table(caption: str, head: tuple[str, ...], rows: Sequence[tuple[Any, ...]]) -> Html:
        return render(
            '<div class="wide"><table><caption>{c}</caption><thead><tr>{h}</tr></thead>'
            "<tbody>{b}</tbody></table></div>",
            c=caption,
            h=join(render('<th scope="col">{x}</th>', x=x) for x in head),
            b=join(render("<tr>{cells}</tr>", cells=join(render("<td>{v}</td>", v=v) for v in row)) for row in rows)
            or render('<tr><td colspan="{n}">none</td></tr>', n=len(head)),
        )

    size = shown.storage_bytes
    storage = "unknown" if size is None else f"{size / 1_000_000:.1f} MB"
    return join(
        [
            render("<h2>Memories</h2>"),
            table("Active memories per project", ("Project (active memories)",), [(p,) for p in shown.by_project]),
            table("Active memories per type, in the projects you may read", ("Type", "Memories"), shown.by_type),
            table(f"Memories made per day, among the newest {shown.sampled}", ("Day", "Memories"), shown.by_day),
            table(f"Source CLI of the newest {shown.sampled} memories", ("CLI", "Memories"), shown.by_cli),
            render("<h2>Injected into agents</h2>"),
            table(
                "Answers handed to agents by this server process since it started (memstream_injected_tokens)",
                ("Answer", "Answers", "Tokens (estimated)"),
                shown.injected,
            ),
            render("<h2>Capture on this host</h2>"),
            render(
                '<dl class="facts">{items}</dl>',
                items=join(render("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in capture.items()),
            ),
            render(
                "<h2>Storage</h2><p>The data directory holds <strong>{s}</strong> (store, history, broker log).</p>",
                s=storage,
            ),
        ]
    )


def documents(
    project: str, projects: Sequence[tuple[str, str]], listed: Sequence[Mapping[str, Any]], csrf: str
) -> Html:
    rows = join(
        render(
            '<tr><td data-label="Title">{title}</td><td data-label="Status">{status}{error}</td>'
            '<td data-label="Chunks">{chunks}</td><td data-label="Source">{source}</td><td class="act">'
            '<form method="post" action="{base}/documents/remove" data-confirm="Remove {title_attr} and its chunks?">'
            '{csrf}<input type="hidden" name="id" value="{id}">'
            '<input type="hidden" name="project" value="{project}">'
            '<button type="submit" class="danger">Remove</button></form></td></tr>',
            title=d.get("title") or d.get("id"),
            title_attr=d.get("title") or d.get("id"),
            status=d.get("status"),
            error=render('<p class="reason">why: {e}</p>', e=d.get("error")) if d.get("error") else "",
            chunks=d.get("chunks"),
            source=d.get("source"),
            base=BASE,
            csrf=csrf_field(csrf),
            id=d.get("id"),
            project=project,
        )
        for d in listed
    )
    return render(
        '<form method="get" action="{base}/documents" class="filters"><div><label for="project">Project</label>'
        '<select id="project" name="project">{options}</select>'
        '</div><div><button type="submit">Show</button></div></form>'
        '<div class="wide"><table class="cards"><caption>Documents</caption><thead>'
        '<tr><th scope="col">Title</th><th scope="col">Status</th>'
        '<th scope="col">Chunks</th><th scope="col">Source</th><th scope="col">'
        '<span class="visually-hidden">Remove</span></th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>"
        '<h2>Add a document</h2><form method="post" action="{base}/documents" class="stack">{csrf}'
        '<input type="hidden" name="project" value="{project}">'
        '<label for="doc-title">Title</label><input id="doc-title" name="title">'
        '<label for="doc-source">URL (or leave empty and paste the text)</label>'
        '<input id="doc-source" name="source" type="url">'
        '<label for="doc-content">Text</label><textarea id="doc-content" name="content" rows="6"></textarea>'
        '<button type="submit">Add</button></form>',
        base=BASE,
        options=options([("", "choose a project"), *projects], project),
        rows=rows or Html('<tr><td colspan="5">none</td></tr>'),
        csrf=csrf_field(csrf),
        project=project,
    )


def stale(
    project: str,
    projects: Sequence[tuple[str, str]],
    rows: Sequence[Stale],
    csrf: str,
    *,
    checked_here: bool,
    read: int,
) -> Html:
    """A project's memories whose cited code changed, moved or is gone (issue 39), each with what became
    of each file, and the bulk forget form; ``unknown`` where the work tree is not on this host."""
    picker = render(
        '<form method="get" action="{base}/stale" class="filters"><div><label for="project">Project</label>'
        '<select id="project" name="project">{choices}</select></div><button type="submit">Check</button></form>',
        base=BASE,
        choices=options([("", "every project I may read"), *projects], project),
    )
    where = Html("")
    if not checked_here:
        where = render(
            '<p class="notice" role="note">The work trees are not read on this host (MEMSTREAM_CHECK_CITATIONS is '
            "off): every status is <strong>unknown</strong>. Run <code>memstream doctor --stale</code> in the "
            "project to check it where its files are.</p>"
        )
    elif any(row.status == "unknown" for row in rows):
        where = render(
            '<p class="notice" role="note">Memories marked <strong>unknown</strong> cite a work tree that is not on '
            "this host: run <code>memstream doctor --stale</code> where it is.</p>"
        )
    stale_count = sum(1 for row in rows if row.status != "unknown")
    counted = render(
        '<p class="count" role="status">{n} stale, {u} unknown, of {read} memories read</p>',
        n=stale_count,
        u=len(rows) - stale_count,
        read=read,
    )
    if not rows:
        return join([picker, where, counted, render('<p class="empty">No memory cites code that changed.</p>')])
    items = join(
        render(
            '<li class="memory code-{status}"><div class="pick"><input type="checkbox" name="id" value="{id}" '
            'id="pick-{id}" aria-label="select this memory"></div><div class="body">'
            '<p class="text"><a href="{href}">{text}</a></p>'
            '<p class="meta"><span class="code-status">{status}</span> <span class="type">{type}</span> {date}</p>'
            '<ul class="cited">{cited}</ul></div></li>',
            status=row.status,
            id=row.memory.id,
            href=f"{BASE}/memories/{row.memory.id}",
            text=_preview(row.memory.text),
            type=row.memory.type,
            date=when(row.memory.updated_at),
            cited=join(render("<li><code>{line}</code></li>", line=describe(one)) for one in row.checked),
        )
        for row in rows
    )
    listing = bulk_forget(items, csrf)
    return join([picker, where, counted, listing])


def bulk_forget(items: Html, csrf: str) -> Html:
    """Memory rows with a checkbox each, inside the form that forgets the selected ones (with a reason)."""
    return render(
        '<form method="post" action="{base}/forget" class="bulk">{csrf}'
        '<ol class="memories">{items}</ol>'
        "<fieldset><legend>Forget the selected memories</legend>"
        '<label for="bulk-reason">Reason</label><input id="bulk-reason" name="reason" required>'
        '<button type="submit" class="danger">Forget selected</button></fieldset></form>',
        base=BASE,
        csrf=csrf_field(csrf),
        items=items,
    )


def forget_user(
    csrf: str,
    *,
    user: str = "",
    scopes: Sequence[tuple[str, str, int]] = (),
    report: Mapping[str, Any] | None = None,
) -> Html:
    """Forget a person (admin): the form; with ``scopes`` (key, where, memories holding their words) the
    confirmation of what will be removed; with ``report`` (``POST /admin/forget``'s reply) what was."""
    if report is not None:
        removed = report.get("removed") or {}
        rows = join(
            render(
                '<tr><td data-label="Scope"><code>{key}</code> {where}</td><td data-label="Held">{held}</td>'
                '<td data-label="Removed">{gone}</td></tr>',
                key=key,
                where=where,
                held=count,
                gone=removed.get(key, 0),
            )
            for key, where, count in scopes
        )
        held = join(
            render("<li><code>{topic}</code>: until {until}</li>", topic=topic, until=until or "kept forever")
            for topic, until in (report.get("words_held_until") or {}).items()
        )
        return render(
            '<p class="forget-report">Forgot {user} (scope <code>{key}</code>) at {at}. {done}</p>'
            '<div class="wide"><table class="cards"><caption>Removed, per scope</caption><thead><tr>'
            '<th scope="col">Scope</th><th scope="col">Memories holding their words</th>'
            '<th scope="col">Removed</th></tr></thead><tbody>{rows}</tbody></table></div>'
            "{held}",
            user=user,
            key=report.get("scope_key", ""),
            at=report.get("forgotten_at", ""),
            done="Every one is removed."
            if report.get("done")
            else "The pipeline is still removing the rest; its audit records and turns go with them.",
            rows=rows,
            held=render(
                "<h2>Still on topics until their retention passes</h2><ul>{items}</ul>",
                items=held,
            )
            if held
            else Html(""),
        )
    if scopes:
        rows = join(
            render(
                '<tr><td data-label="Scope"><code>{key}</code> {where}</td><td data-label="Memories">{count}</td></tr>',
                key=key,
                where=where,
                count=count,
            )
            for key, where, count in scopes
        )
        return render(
            "<p>Forgetting <strong>{user}</strong> cannot be undone. It removes, per scope, the memories holding "
            "their words (their own memories, their exchanges in every project, the facts drawn only from their "
            "turns), with their audit records, their turns in the durable log and their session state:</p>"
            '<div class="wide"><table class="cards"><caption>Will be removed, per scope</caption><thead><tr>'
            '<th scope="col">Scope</th><th scope="col">Memories</th></tr></thead><tbody>{rows}</tbody></table></div>'
            '<form method="post" action="{base}/forget-user" class="stack">{csrf}'
            '<input type="hidden" name="user" value="{user}"><input type="hidden" name="confirm" value="yes">'
            '<button type="submit" class="danger">Forget {user}</button></form>'
            '<p><a href="{base}/forget-user">Cancel</a></p>',
            user=user,
            rows=rows,
            base=BASE,
            csrf=csrf_field(csrf),
        )
    return render(
        "<p>Forget a person: every memory holding their words in every scope, their audit records, their "
        "turns in the durable log and their session state. You are shown what will be removed before "
        "anything is.</p>"
        '<form method="post" action="{base}/forget-user" class="stack">{csrf}'
        '<label for="forget-user">Their identity (an email, as their token names it)</label>'
        '<input id="forget-user" name="user" required value="{user}">'
        '<button type="submit">Show what would be removed</button></form>',
        base=BASE,
        csrf=csrf_field(csrf),
        user=user,
    )
