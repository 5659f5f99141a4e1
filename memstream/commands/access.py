"""Access: tokens, the principal this CLI acts as, forgetting a scope, and the query-only API.

``memstream token create|list|revoke`` edit the token file; ``memstream forget`` asks the admin API;
``memstream console`` asks the API for a one-time sign-in link to the console;
``memstream api`` serves the API without the pipeline. The helpers here let the pipeline verbs
(up, publish, init, remember) act as the token's principal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import msgspec

from memstream.commands import CliError
from memstream.runtime import client_token, git_email
from memstream.settings import Settings


def local_token_for_up(settings: Settings) -> None:
    """Zero config for one user on one machine: the first `up` on loopback makes the local token."""
    from memstream.auth import TokenStore, ensure_local_token, is_loopback

    if settings.api_open or not is_loopback(settings.http_host):
        return
    ensure_local_token(TokenStore(settings.tokens_file), settings.local_token_file, local_identity(settings))


def local_identity(settings: Settings) -> str:
    """This machine's user: MEMSTREAM_USER, else the git email, else the OS login."""
    import getpass

    return settings.user or git_email() or f"{getpass.getuser()}@localhost"


def principal_of_cli(settings: Settings) -> Any:
    """The principal of the token this CLI uses, when the token file is readable here; else None."""
    from memstream.auth import AuthError, TokenStore

    token = client_token(settings)
    if not token:
        return None
    try:
        return TokenStore(settings.tokens_file).authenticate(token)
    except AuthError:
        return None


def write_principal(settings: Settings) -> Any:
    """The principal a writing verb acts as (memstream.runtime.write_principal), or CliError
    with the one line that says why there is none."""
    from memstream.auth import AuthError
    from memstream.runtime import write_principal as resolve

    try:
        return resolve(settings)
    except AuthError as exc:
        raise CliError(str(exc)) from None


def as_principal(settings: Settings, turns: list[Any]) -> list[Any]:
    """The turns as the caller's token may publish them (:func:`write_principal`): its user,
    its projects, or refused with the reason -- the checks POST /turns makes."""
    from memstream.auth import Forbidden, check_publish
    from memstream.identity import project_key

    principal = write_principal(settings)
    checked = []
    for turn in turns:
        try:
            check_publish(principal, project_key(turn.project), turn.user)
        except Forbidden as exc:
            raise CliError(f"refused: {exc} ({turn.user or principal.user}, {turn.project})") from None
        checked.append(msgspec.structs.replace(turn, user=principal.user))
    return checked


def kafka_security(settings: Settings) -> dict[str, Any]:
    """TLS/SASL options for a configured Kafka; none for the embedded broker found in the runtime file."""
    from memstream.kafka.security import client_options

    return client_options(settings) if settings.kafka_bootstrap else {}


def access_line(settings: Settings) -> str:
    if settings.api_open:
        return "OPEN on loopback: no token needed (MEMSTREAM_API_OPEN)"
    if settings.local_token_file.exists():
        return f"bearer token; this machine's is in {settings.local_token_file} (the CLI uses it)"
    return f"bearer tokens from {settings.tokens_file} (`memstream token create`)"


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.auth import AuthError, TokenStore, admin_principal, user_principal

    try:
        if args.user:
            projects = [str(Path(p).resolve()) if not p.startswith("p_") else p for p in args.project]
            principal = user_principal(
                args.user, projects, all_projects=args.all_projects, admin=args.admin, label=args.label
            )
        elif args.admin and not args.project and not args.all_projects:
            principal = admin_principal(args.label)
        else:
            raise AuthError("give --user (with --project or --all-projects), or --admin alone")
        token, record = TokenStore(settings.tokens_file).create(principal)
    except AuthError as exc:
        raise CliError(str(exc)) from None
    print(f"created token {record.id} for {principal.describe()} in {settings.tokens_file}", file=sys.stderr)
    print("it is shown once; only its hash is stored:", file=sys.stderr)
    print(token)
    return 0


def cmd_token_list(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.auth import AuthError, TokenStore

    try:
        records = TokenStore(settings.tokens_file).records()
    except AuthError as exc:
        raise CliError(str(exc)) from None
    if not records:
        print(f"no tokens in {settings.tokens_file}")
    for record in records:
        state = f"revoked {record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else "active"
        label = f"  ({record.principal.label})" if record.principal.label else ""
        print(f"{record.id}  {record.created_at:%Y-%m-%d %H:%M}  {state:<24}  {record.principal.describe()}{label}")
    return 0


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.auth import AuthError, TokenStore

    try:
        record = TokenStore(settings.tokens_file).revoke(args.id)
    except AuthError as exc:
        raise CliError(str(exc)) from None
    print(f"revoked token {record.id} ({record.principal.describe()})")
    return 0


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.memory_id) + bool(args.user) + bool(args.project) != 1:
        raise CliError("forget one memory (`memstream forget ID --reason TEXT`), a --user or a --project")
    if args.memory_id:
        return forget_memory(settings, args.memory_id.strip(), args.reason)
    what = f"user {args.user}" if args.user else f"project {Path(args.project).resolve()}"
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError(f"forgetting {what} cannot be undone: add --yes")
        answer = input(f"Forget {what}: every memory, graph link and audit record? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing forgotten")
            return 1
    body = {"user": args.user} if args.user else {"project": str(Path(args.project).resolve())}
    from memstream.commands.read import api_request

    _, reply = api_request(settings, "POST", "/admin/forget", {}, body)
    data = json.loads(reply)
    print(f"forgetting {what} (scope {data['scope_key']}): the pipeline is purging it")
    removed = data.get("removed") or {}
    for scope, count in (data.get("memories") or {}).items():
        print(f"  {scope}: {removed.get(scope, 0)} of {count} memories removed")
    if not data.get("done", True):
        print("  (the pipeline is still removing the rest)")
    held = data.get("words_held_until") or {}
    if held:
        print("still on topics until their retention passes (a Kafka cluster's own retention may differ):")
        for topic, until in held.items():
            print(f"  {topic}: {until or 'kept forever'}")
    return 0


def cmd_share(args: argparse.Namespace, settings: Settings) -> int:
    """Share a project's conversations with its members (or stop), through ``POST /admin/sharing``; without
    a project, list the shared projects and the recorded changes."""
    from memstream.commands.read import api_request

    if args.project:
        body = {"project": str(Path(args.project).resolve()), "shared": not args.off}
        _, reply = api_request(settings, "POST", "/admin/sharing", {}, body)
        change = json.loads(reply)["change"]
        state = "share their conversations" if change["shared"] else "each read only their own conversations"
        print(f"the members of {args.project} now {state} (changed by {change['by']} at {change['at']})")
        return 0
    _, reply = api_request(settings, "GET", "/admin/sharing", {})
    data = json.loads(reply)
    print("projects sharing their members' conversations: " + (", ".join(data["shared"]) or "none"))
    for change in data["changes"]:
        print(
            f"  {change['at']}  {change['project']}  {'shared' if change['shared'] else 'private'}  by {change['by']}"
        )
    return 0


def forget_memory(settings: Settings, memory_id: str, reason: str) -> int:
    """Forget one memory through the API's forget (the path MCP and the console take): it stays in the
    store marked forgotten, with the reason in its audit trail, and the console can restore it."""
    from memstream.commands.read import api_request

    reason = " ".join(reason.split())
    if not reason:
        raise CliError("give the --reason for forgetting it (it goes into the memory's audit trail)")
    _, reply = api_request(
        settings, "POST", f"/memories/{urllib.parse.quote(memory_id, safe='')}/forget", {}, {"reason": reason}
    )
    data = json.loads(reply)
    status = data.get("status")
    if status == "already-forgotten":
        print(f"memory {memory_id} was already forgotten")
    elif status == "in-flight":
        print(f"forgetting memory {memory_id}: the pipeline has it and will mark it shortly")
    else:
        print(f"forgot memory {memory_id} ({reason}); the console's memory page can restore it")
    return 0


def cmd_console(args: argparse.Namespace, settings: Settings) -> int:
    """A one-time sign-in link to the console, for this CLI's token: opened in the browser, and printed.

    The link carries a code good once for two minutes, never the token; the server exchanges it for
    an HttpOnly session cookie and takes it out of the address bar at once.
    """
    import webbrowser

    from memstream.commands.read import api_request
    from memstream.runtime import api_url

    _, reply = api_request(settings, "POST", "/console/codes", {})
    link = api_url(settings).rstrip("/") + json.loads(reply)["path"]
    print(link)
    if not args.print and not webbrowser.open(link):
        print("(no browser could be opened here: open the link above within two minutes)", file=sys.stderr)
    return 0


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    from memstream.front.query_api import QueryApiError, serve

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(settings))
    except QueryApiError as exc:
        raise CliError(str(exc)) from None
    return 0
