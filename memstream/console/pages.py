"""The console's pages, rendered on the server from escaping templates (``memstream.console.html``).

Each function takes what its view read and returns the page's ``<main>``; :func:`layout` wraps it.
No page holds inline script or style: the Content-Security-Policy forbids both, and the one
script (``static/console.js``) only follows the live stream and ticks checkboxes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstream import hosts
from memstream.auth import Principal
from memstream.console.html import Html, join, options, render, url, when
from memstream.schemas import MEMORY_TYPES, HistoryRecord, Memory
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
        if chrome.principal.is_admin:
            links += [("documents", "Documents", f"{BASE}/documents"), ("pipeline", "Pipeline", f"{BASE}/pipeline")]
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


def filters_form(params: Mapping[str, str], projects: Sequence[tuple[str, str]]) -> Html:
    project_choices = [("", "every project I may read"), *[(key, label) for key, label in projects]]
    return render(
        '<form method="get" action="{base}/" class="filters" role="search">'
        '<div class="q"><label for="q">Search</label>'
        '<input id="q" name="q" type="search" value="{q}" placeholder="what do you remember about…"></div>'
        '<div><label for="project">Project</label><select id="project" name="project">{projects}</select></div>'
        '<div><label for="type">Type</label><select id="type" name="type">{types}</select></div>'
        '<div><label for="scope">Scope</label><select id="scope" name="scope">{scopes}</select></div>'
        '<div><label for="session">Session</label><input id="session" name="session" value="{session}"></div>'
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
            [("", "any source"), *[(s, s) for s in (*hosts.LLM_SOURCES, "api", "mcp", "console")]],
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


def memories(params: Mapping[str, str], projects: Sequence[tuple[str, str]], rows: Sequence[Row], csrf: str) -> Html:
    if not rows:
        listing = render('<p class="empty">{text}</p>', text="No memory matches.")
    else:
        items = join(
            render(
                '<li class="memory {status_class}"><div class="pick"><input type="checkbox" name="id" value="{id}" '
                'id="pick-{id}" aria-label="select this memory"></div><div>'
                '<p class="text"><a href="{href}">{text}</a></p>'
                '<p class="meta"><span class="type">{type}</span> <span class="scope">{scope}</span> '
                '<span class="status">{status}</span> {date}{score} <span class="origin">{origin}</span></p>'
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
                origin=origin(r.memory),
            )
            for r in rows
        )
        listing = render(
            '<form method="post" action="{base}/forget" class="bulk">{csrf}'
            '<ol class="memories">{items}</ol>'
            "<fieldset><legend>Forget the selected memories</legend>"
            '<label for="bulk-reason">Reason</label><input id="bulk-reason" name="reason" required>'
            '<button type="submit" class="danger">Forget selected</button></fieldset></form>',
            base=BASE,
            csrf=csrf_field(csrf),
            items=items,
        )
    export = render(
        '<p class="export"><a href="{href}" download>Export my memories (JSON Lines)</a></p>', href=f"{BASE}/export"
    )
    return join([filters_form(params, projects), render("<p>{n} shown</p>", n=len(rows)), listing, export])


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
) -> Html:
    facts = render(
        '<dl class="facts"><dt>Type</dt><dd>{type}</dd><dt>Scope</dt><dd>{scope} <code>{key}</code></dd>'
        "<dt>Status</dt><dd>{status}</dd><dt>Importance</dt><dd>{importance}</dd>"
        "<dt>Created</dt><dd>{created}</dd><dt>Updated</dt><dd>{updated}</dd>"
        "<dt>Id</dt><dd><code>{id}</code></dd></dl>",
        type=item.type,
        scope=item.scope,
        key=item.scope_key,
        status=status_of(item),
        importance="unset" if item.importance is None else f"{item.importance:.2f}",
        created=when(item.created_at),
        updated=when(item.updated_at),
        id=item.id,
    )
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
    sources = join(
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
    turn = Html("")
    if item.source_chunk:
        turn = render('<h2>The turn it came from</h2><pre class="turn">{chunk}</pre>', chunk=item.source_chunk)
    timeline = join(
        render(
            '<li><span class="outcome">{outcome}</span> {ts}{by}{reason}{link}</li>',
            outcome=r.outcome,
            ts=when(r.ts),
            by=render(" by <strong>{w}</strong>", w=r.requested_by) if r.requested_by else "",
            reason=render(' — <span class="reason">{t}</span>', t=r.reason) if r.reason else "",
            link=_record_link(r, item.id),
        )
        for r in records
    )
    graph = Html("<p>No graph links.</p>")
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
    actions = Html("")
    if may_act and item.superseded_by is None:
        actions = _actions(item, csrf)
    return render(
        '<article class="one"><pre class="text">{text}</pre>{chain}{facts}'
        "<h2>Sources</h2><ul>{sources}</ul>{turn}"
        '<h2>History</h2><ol class="timeline">{timeline}</ol>'
        "<h2>Graph neighbours</h2>{graph}{actions}</article>",
        text=item.text,
        chain=chain,
        facts=facts,
        sources=sources or Html("<li>none recorded</li>"),
        turn=turn,
        timeline=timeline or Html("<li>no record yet</li>"),
        graph=graph,
        actions=actions,
    )


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


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    source: str
    first: Any
    last: Any
    turns: int
    memories: int


def sessions(project: str, projects: Sequence[tuple[str, str]], rows: Sequence[SessionRow]) -> Html:
    picker = render(
        '<form method="get" action="{base}/sessions" class="filters"><div><label for="project">Project</label>'
        '<select id="project" name="project">{options}</select>'
        '</div><div><button type="submit">Show</button></div></form>',
        base=BASE,
        options=options([("", "choose a project"), *projects], project),
    )
    if not project:
        return picker
    if not rows:
        return join([picker, Html('<p class="empty">No session made memories in this project.</p>')])
    body = join(
        render(
            '<tr><td><a href="{h}">{id}</a></td><td>{src}</td>'
            "<td>{first}</td><td>{last}</td><td>{turns}</td><td>{n}</td></tr>",
            h=url(f"{BASE}/sessions/{r.session_id}", {"project": project}),
            id=r.session_id,
            src=r.source,
            first=when(r.first),
            last=when(r.last),
            turns=r.turns,
            n=r.memories,
        )
        for r in rows
    )
    return join(
        [
            picker,
            render(
                '<div class="wide"><table><caption>Sessions, newest first</caption>'
                '<thead><tr><th scope="col">Session</th>'
                '<th scope="col">CLI</th><th scope="col">First</th><th scope="col">Last</th><th scope="col">Turns</th>'
                '<th scope="col">Memories</th></tr></thead><tbody>{body}</tbody></table></div>',
                body=body,
            ),
        ]
    )


def session(session_id: str, turns: Sequence[tuple[str, str, Sequence[Memory]]]) -> Html:
    """``turns``: (where, excerpt, memories made from it), in the session's order."""
    items = join(
        render(
            '<li><p class="meta">{where}</p><pre class="turn">{excerpt}</pre><ul>{made}</ul></li>',
            where=where,
            excerpt=excerpt or "(no excerpt kept)",
            made=join(
                render(
                    '<li><a href="{h}">{t}</a> <span class="type">{ty}</span> <span class="status">{st}</span></li>',
                    h=f"{BASE}/memories/{m.id}",
                    t=_preview(m.text, 160),
                    ty=m.type,
                    st=status_of(m),
                )
                for m in made
            ),
        )
        for where, excerpt, made in turns
    )
    return render(
        "<p>Session <code>{id}</code>: the turns that produced memories, in order, with what each produced.</p>"
        '<ol class="turns">{items}</ol>',
        id=session_id,
        items=items or Html("<li>No memory came from this session.</li>"),
    )


# -- block, live, pipeline, documents ---------------------------------------------------------


def block(project: str, query: str, projects: Sequence[tuple[str, str]], text: str | None, tokens: int) -> Html:
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
        return form
    return render(
        "{form}<p>About <strong>{tokens}</strong> tokens: what the next session in this project gets.</p>"
        '<pre class="block">{text}</pre>',
        form=form,
        tokens=tokens,
        text=text,
    )


def live() -> Html:
    return Html(
        "<p>Memory changes as the pipeline makes them, for the scopes you may read. "
        '<span id="live-state" role="status">connecting…</span></p>'
        '<ol id="live" class="memories" aria-live="polite" data-stream="/events"></ol>'
    )


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
    lag_rows = join(render("<tr><td>{t}</td><td>{p}</td><td>{v}</td></tr>", t=t, p=p, v=int(v)) for t, p, v in lag)
    done_rows = join(render("<tr><td>{s}</td><td>{v}</td></tr>", s=s, v=int(v)) for s, v in processed)
    if letters is None:
        dead = Html("<p>Dead letters are read from the broker: not reachable from this process.</p>")
    elif not letters:
        dead = Html("<p>No dead letters.</p>")
    else:
        dead = render(
            '<div class="wide"><table><caption>Dead letters</caption>'
            '<thead><tr><th scope="col">Id</th><th scope="col">Stage</th>'
            '<th scope="col">Reason</th><th scope="col">When</th></tr></thead><tbody>{rows}</tbody></table></div>'
            '<form method="post" action="{base}/pipeline/redrive">{csrf}<button type="submit">Re-drive all</button>'
            "</form>",
            rows=join(
                render(
                    "<tr><td><code>{i}</code></td><td>{s}</td><td>{r}</td><td>{w}</td></tr>",
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
        import json

        report = render('<pre class="block">{j}</pre>', j=json.dumps(doctor, indent=2, default=str))
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


def documents(
    project: str, projects: Sequence[tuple[str, str]], listed: Sequence[Mapping[str, Any]], csrf: str
) -> Html:
    rows = join(
        render(
            "<tr><td>{title}</td><td>{status}</td><td>{chunks}</td><td>{source}</td><td>"
            '<form method="post" action="{base}/documents/remove">{csrf}<input type="hidden" name="id" value="{id}">'
            '<input type="hidden" name="project" value="{project}">'
            '<button type="submit" class="danger">Remove</button></form></td></tr>',
            title=d.get("title") or d.get("id"),
            status=d.get("status"),
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
        '<div class="wide"><table><caption>Documents</caption><thead>'
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
