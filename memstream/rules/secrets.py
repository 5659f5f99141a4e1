"""The consolidation spec Phase 1: redact secrets from snapshots before an LLM sees them, and from every fact.

``redact`` replaces each secret with ``[REDACTED:<kind>]`` and keeps what makes the text useful:
the variable name of an assignment, the user and host of a URL, the header a token came in.

All rules are compiled once into a single alternation and the text is scanned left to right in
one pass. A rule whose match needs a judgement the regex cannot make (is ``token_count`` a
secret name? is ``get_password`` a value or code?) has a small judge function; when the judge
declines, the scan resumes one character later, so a provider key inside a declined candidate is
still found by its own rule.

What survives on purpose: hashes and digests (git SHAs, sha256/sha512, ETags, UUIDs), which look
random but are not credentials; values that are syntactically placeholders (``<your-key>``,
``${TOKEN}``, ``YOUR_TOKEN_HERE``, ``sk-...``, ``****``); code that names a secret without holding
one (``password = get_password()``, ``api_key=api_key``); public keys and certificates; and bare
high-entropy strings with no provider prefix and no secret-named key, since telling them from a
digest would need entropy guessing that destroys ordinary technical content. Weak but real values
such as ``changeme`` or ``guest`` are redacted: a placeholder is recognised by its syntax, not by
how weak a password looks.

Tunables: ``MAX_PEM_BODY`` and the value-length bounds inside the patterns keep every rule linear.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["find_secrets", "redact"]

log = logging.getLogger(__name__)

#: Longest PEM body searched for its END line; an unterminated block is redacted up to its base64.
MAX_PEM_BODY = 20_000

#: The marker a secret becomes; ``kind`` is one of the rule kinds below.
MARKER = "[REDACTED:{kind}]"

Hit = tuple[str, int, int]
Judge = Callable[["_Rule", re.Match[str], str], Hit | None]

# ---------------------------------------------------------------------------------------------
# Patterns


_START = r"(?<![\w-])"  # a token starts where no word character or dash precedes it
_END = r"(?![\w-])"
# Real provider keys are random mixed-case alphanumerics; placeholders and slugs are not.
_UPPER_AND_DIGIT = r"(?=[a-z0-9_-]{0,200}[A-Z])(?=[A-Za-z_-]{0,200}[0-9])"
_UPPER_AND_LOWER = r"(?=[a-z0-9]{0,200}[A-Z])(?=[A-Z0-9]{0,200}[a-z])"
_PEM_LABEL = r"-----(?:BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

#: Provider tokens recognisable by themselves, as (kind, pattern), each starting with a literal so
#: that the regex engine skips the ones that cannot start at a position. Also used to name the kind
#: of a value found through its key (``TOKEN=ghp_…`` is a github-token, not a generic token).
_TOKENS: list[tuple[str, str]] = [
    ("anthropic-key", r"sk-ant-" + _UPPER_AND_DIGIT + r"[A-Za-z0-9_-]{24,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-|admin-)?" + _UPPER_AND_DIGIT + r"[A-Za-z0-9_-]{20,}"),
    ("xai-key", r"xai-" + _UPPER_AND_DIGIT + r"[A-Za-z0-9_-]{20,}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}" + _END),
    ("voyage-key", r"pa-" + _UPPER_AND_DIGIT + r"[A-Za-z0-9_-]{30,}"),
    ("huggingface-token", r"hf_" + _UPPER_AND_LOWER + r"[A-Za-z0-9]{30,}"),
    ("stripe-key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/]{24,}"),
    ("slack-token", r"(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})"),
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("gitlab-token", r"gl(?:pat|dt|rt|cbt|ptt)-[A-Za-z0-9_-]{20,}"),
    ("npm-token", r"npm_[A-Za-z0-9]{36}" + _END),
    ("sendgrid-key", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    ("twilio-api-key", r"SK[0-9a-f]{32}" + _END),
    ("twilio-account-sid", r"AC[0-9a-f]{32}" + _END),
    ("aws-access-key", r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}+\.ey[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"),
]

# A value of unknown shape: up to 512 characters that cannot end a shell word or a YAML scalar.
_BARE = r"[^\s\"'`,;|<>()\[\]{}]{1,512}+"
_DQ = r"(?:[^\"\\\n]|\\.){1,1024}"
_SQ = r"(?:[^'\\\n]|\\.){1,1024}"
_IDENT = r"[A-Za-z_][\w.-]{0,63}+"


# ---------------------------------------------------------------------------------------------
# Judges: decide on a candidate, return (kind, start, end) or None to decline it.


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: str
    judge: Judge | None = None
    index: int = -1

    def group(self, m: re.Match[str], name: str) -> str | None:
        full = f"{name}_{self.index}"
        return m.group(full) if full in m.re.groupindex else None

    def value(self, m: re.Match[str]) -> tuple[str, int, int, bool] | None:
        """The first value group that took part: (text, start, end, quoted)."""
        for name, quoted in (("v1", True), ("v2", True), ("v3", False)):
            full = f"{name}_{self.index}"
            if full in m.re.groupindex and m.group(full) is not None:
                return m.group(full), m.start(full), m.end(full), quoted
        return None


def _value_or_whole(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
    found = rule.value(m)
    if found is None:
        return rule.kind, m.start(), m.end()
    value, start, end, _ = found
    return None if _is_placeholder(value) else (_refine(rule.kind, value), start, end)


def _refine(kind: str, value: str) -> str:
    """The provider's kind when a value found by its context is also a known token."""
    specific = _SPECIFIC.fullmatch(value)
    return _TOKENS[int(specific.lastgroup[1:])][0] if specific and specific.lastgroup else kind


def _provider_token(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
    return _refine(rule.kind, m.group()), m.start(), m.end()


def _authorization(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
    value, start, end, _ = rule.value(m) or ("", 0, 0, False)
    scheme = (rule.group(m, "scheme") or "").strip().lower()
    if _is_placeholder(value) or value.lower() in _CODE_WORDS:
        return None
    if scheme == "basic":
        return "basic-auth", start, end
    if not any(c.isdigit() for c in value) and not (scheme and len(value) >= 20):
        return None  # "Authorization: required" is prose; real tokens carry digits
    return _refine(rule.kind, value), start, end


def _needs_digit(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
    hit = _value_or_whole(rule, m, text)
    return hit if hit and any(c.isdigit() for c in text[hit[1] : hit[2]]) else None


def _on_command_line(*commands: str) -> Judge:
    """Accept the flag only on a line running one of ``commands`` (``-p`` means port elsewhere)."""
    command = re.compile(r"\b(?:" + "|".join(commands) + r")\b")

    def judge(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
        line_start = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 400)
        if not command.search(text, line_start, m.start()):
            return None
        return _value_or_whole(rule, m, text)

    return judge


def _assignment(rule: _Rule, m: re.Match[str], text: str) -> Hit | None:
    """``KEY=value``, ``key: value``, ``"key": "value"``, ``--key value``, ``<key>value</key>``."""
    key = rule.group(m, "flag") or rule.group(m, "key") or ""
    found = rule.value(m)
    if found is None or not _is_secret_name(key):
        return None
    value, start, end, quoted = found
    if value.startswith("-----BEGIN") or _URL_CREDENTIALS.search(value):
        return None  # the private-key and URL rules keep more of the context
    if not quoted:
        # ``--password X`` takes a value; ``--export-secret-keys shop`` and ``--password --verbose`` do not.
        flag_with_value = rule.group(m, "flag") and rule.group(m, "fsep") != "="
        if flag_with_value and (value.startswith("-") or _words(key)[-1] not in _FLAG_NOUNS):
            return None
        sep = rule.group(m, "sep") or ""
        if sep.strip() == ":" and not _ends_scalar(text, end):
            return None  # ``Password: reset it via the admin page`` is prose, not YAML
        if text[m.start() - 1 : m.start()] in ("?", "&"):
            amp = value.find("&")  # a query parameter ends at the next one
            if amp >= 0:
                value, end = value[:amp], start + amp
        if _looks_like_code(value, key):
            return None
    if _is_placeholder(value):
        return None
    return _refine(_kind_of_name(key), value), start, end


# ---------------------------------------------------------------------------------------------
# Rules, in priority order for candidates starting at the same position.

_RULES: list[_Rule] = [
    _Rule(
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        rf"(?:[\s\S]{{0,{MAX_PEM_BODY}}}?{_PEM_LABEL}|(?:[A-Za-z0-9+/=\s:-]|\\[nr])*+)",
    ),
    _Rule("token", _START + "(?:" + "|".join(pattern for _, pattern in _TOKENS) + ")", _provider_token),
    _Rule(
        "slack-webhook",
        r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/(?P<v1>[A-Za-z0-9]{16,})",
        _value_or_whole,
    ),
    _Rule(
        "discord-webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/(?P<v1>[\w-]{20,})",
        _value_or_whole,
    ),
    _Rule("azure-storage-key", r"(?<!\w)AccountKey=(?P<v1>[A-Za-z0-9+/]{20,}={0,2})", _value_or_whole),
    _Rule("azure-sas-token", r"[?&]sig=(?P<v1>[A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})", _value_or_whole),
    _Rule(
        "bearer-token",
        r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?:(?P<scheme>(?i:bearer|token|basic|digest|apikey|api-key|sso-key))[ \t]+)?+"
        r"(?P<v1>[A-Za-z0-9._~+/=:-]{8,}+)",
        _authorization,
    ),
    _Rule("bearer-token", _START + r"(?i:bearer)[ \t]+(?P<v1>[A-Za-z0-9._~+/-]{16,}+=*)", _needs_digit),
    # scheme://user:password@host — the last @ before the path ends the password.
    _Rule(
        "password",
        r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}+://[^\s:/@\"'<>]*+:(?P<v1>[^\s/\"'<>]{1,256})@(?=[\w\[])",
        _value_or_whole,
    ),
    # ODBC / ADO.NET: Server=db;User Id=sa;Password=...;
    _Rule(
        "connection-string",
        r"(?<!\w)(?i:password|pwd)[ \t]*=[ \t]*(?P<v1>\{[^}\n]{1,256}\}|[^;\n\"']{1,256}+)(?=;)",
        _value_or_whole,
    ),
    _Rule(
        "password",
        r"(?<!\S)(?:-u|--user)[ \t]+[\"']?[^\s:\"']+:(?P<v1>[^\s\"']+)",
        _on_command_line("curl", "wget"),
    ),
    _Rule(
        "password",
        r"(?<!\S)-p(?P<v1>[^\s\"'-][^\s\"']*)",
        _on_command_line("mysql", "mysqldump", "mysqladmin", "mariadb", "sshpass"),
    ),
    _Rule("password", r"(?<!\S)-a[ \t]+[\"']?(?P<v1>[^\s\"'-][^\s\"']*)", _on_command_line("redis-cli")),
    _Rule("password", r"(?<!\S)-p[ \t]+[\"']?(?P<v1>[^\s\"'-][^\s\"']*)", _on_command_line("sshpass")),
    # Kubernetes env entries: - name: DB_PASSWORD \n value: ...
    _Rule(
        "password",
        rf"(?<![\w-])name:[ \t]*[\"']?(?P<key>{_IDENT})[\"']?[ \t]*\r?\n[ \t]*(?:-[ \t]*)?value:[ \t]*"
        rf"(?:\"(?P<v1>{_DQ})\"|'(?P<v2>{_SQ})'|(?P<v3>[^\s\"'#{{}}\[\]]\S{{0,511}}+))",
        _assignment,
    ),
    _Rule("password", rf"<(?P<key>{_IDENT})>(?P<v1>[^<\n]{{1,512}}+)</(?P=key)>", _assignment),
    _Rule(
        "password",
        r"(?<![\w.$-])(?:"
        r"(?P<flag>--[A-Za-z][\w-]{0,63}+)(?P<fsep>=|[ \t]+)"
        rf"|(?P<q>[\"']?)(?P<key>{_IDENT})(?P=q)\]?(?P<sep>[ \t]*(?:=>|:=|[:=])[ \t]*)"
        rf")(?:\"(?P<v1>{_DQ})\"|'(?P<v2>{_SQ})'|(?P<v3>{_BARE})(?![(\[]))",
        _assignment,
    ),
]


def _compile(rules: list[_Rule]) -> tuple[re.Pattern[str], list[_Rule]]:
    """One alternation; each rule's groups are suffixed with its index so names stay unique."""
    indexed = [_Rule(r.kind, r.pattern, r.judge or _value_or_whole, i) for i, r in enumerate(rules)]
    parts = [
        f"(?P<r{i}>" + re.sub(r"\(\?P([<=])(\w+)", rf"(?P\g<1>\g<2>_{i}", r.pattern) + ")"
        for i, r in enumerate(indexed)
    ]
    # Every rule starts at a word boundary or on one of these characters; checking that once
    # first lets the scan skip through the inside of words without trying every alternative.
    return re.compile(r"(?:(?<!\w)|(?=[-?&<]))(?:" + "|".join(parts) + ")"), indexed


_PATTERN, _COMPILED = _compile(_RULES)
_SPECIFIC = re.compile("|".join(f"(?P<s{i}>{pattern})" for i, (_, pattern) in enumerate(_TOKENS)))
_URL_CREDENTIALS = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,30}+://[^\s:/@]*:[^\s/@]+@")

# ---------------------------------------------------------------------------------------------
# Names and values

_STRONG_WORDS = {"password", "passwd", "passphrase", "pwd", "pass", "pw", "secret", "secrets", "token", "apikey"}
_STRONG_SUFFIXES = ("password", "passwd", "passphrase", "pwd", "secret", "token", "apikey", "accesskey")
#: The last word of a ``--flag`` that takes its secret as the next argument.
_FLAG_NOUNS = {"password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "key", "apikey"}
_KEY_QUALIFIERS = {
    "api", "secret", "access", "private", "auth", "signing", "encryption", "encrypt", "master",
    "client", "license", "app", "service", "account", "webhook", "shared", "hmac", "jwt", "session",
    "storage", "admin", "root", "consumer", "subscription", "deploy", "write", "fernet",
}  # fmt: skip
_PUBLIC_KEY_QUALIFIERS = {
    "primary", "foreign", "sort", "partition", "cache", "public", "publishable", "routing", "hash",
    "lookup", "shard", "idempotency", "dedup", "group", "composite", "unique", "map", "dict", "sequence",
}  # fmt: skip
#: A key whose last word is one of these names a property of a secret, not the secret.
_DESCRIPTIVE_LAST_WORDS = {
    "count", "counts", "limit", "limits", "len", "length", "size", "type", "types", "file", "files",
    "path", "dir", "url", "uri", "endpoint", "host", "name", "names", "field", "header", "env", "var",
    "prefix", "suffix", "ttl", "expiry", "expires", "expiration", "expire", "timeout", "min", "max",
    "budget", "usage", "policy", "rotation", "required", "enabled", "enable", "disabled", "regex",
    "pattern", "hint", "label", "prompt", "placeholder", "id", "ids", "format", "encoding", "version",
    "mode", "style", "ref", "arn", "index", "kind", "provider", "manager", "store", "scope", "scopes",
    "audience", "issuer", "algorithm", "alg", "method", "source", "location", "region", "stdin",
    "generator", "validator", "class", "handler", "strength", "reset", "changed", "at", "in", "by",
    "description", "help", "error", "message", "title",
}  # fmt: skip
_CODE_WORDS = {
    "none", "null", "nil", "undefined", "true", "false", "yes", "no", "on", "off", "required",
    "optional", "str", "string", "int", "bytes", "bool", "any", "secretstr", "self", "this", "env",
    "ellipsis",
}  # fmt: skip
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_PATH = re.compile(r"(?:~|\.{1,2})?(?:/[\w.@-]+){2,}/?")
_PLACEHOLDER = re.compile(
    r"<[^<>]*>|\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_]\w*|\{\{.*\}\}|\{[\w.]*\}|%\(?\w*\)?s|%\w+%"
    r"|(.)\1+|\*{3,}.*|.*(?:\.\.\.|…)|(?i:your[-_ ].*|.*[-_ ]here|x{3,}|replace[-_]?me|placeholder|tbd|todo|fixme)"
)


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def _is_secret_name(name: str) -> bool:
    words = _words(name)
    if not words or words[-1] in _DESCRIPTIVE_LAST_WORDS:
        return False
    for i, word in enumerate(words):
        if word in _STRONG_WORDS or word.endswith(_STRONG_SUFFIXES):
            return True
        if word in ("key", "keys") and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
    # OPENAI_KEY, FERNET_KEY: an upper-case env name ending in KEY is a secret unless it names a role.
    bare = name.strip("\"'-")
    return bare.isupper() and len(words) >= 2 and words[-1] == "key" and words[-2] not in _PUBLIC_KEY_QUALIFIERS


def _kind_of_name(name: str) -> str:
    joined = "".join(_words(name))
    if "secretaccesskey" in joined:
        return "aws-secret-key"
    if any(w in joined for w in ("password", "passwd", "passphrase", "pwd")) or "pass" in _words(name):
        return "password"
    if "token" in joined:
        return "token"
    if "secret" in joined:
        return "secret"
    return "api-key"


def _is_placeholder(value: str) -> bool:
    return len(value.strip()) < 3 or "REDACTED" in value or _PLACEHOLDER.fullmatch(value.strip()) is not None


def _looks_like_code(value: str, key: str) -> bool:
    """An unquoted value that names something (a variable, attribute, path) rather than holding a secret."""
    if value.lower() in _CODE_WORDS or not any(c.isalnum() for c in value):
        return True
    if _DOTTED.fullmatch(value) or _PATH.fullmatch(value):
        return True
    if _IDENTIFIER.fullmatch(value):
        same = value.lower().strip("_") == key.lower().strip("\"'-_").rsplit(".", 1)[-1]  # self.token = token
        compound = "_" in value.strip("_") or re.search(r"[a-z][A-Z]", value) is not None
        return same or (compound and _is_secret_name(value))
    return False


def _ends_scalar(text: str, end: int) -> bool:
    """After a YAML/log ``key: value``, only a line end, a comment or a closing bracket may follow."""
    rest = text[end : end + 64].lstrip(" \t")
    return not rest or rest[0] in "\r\n#,}]\"'"


# ---------------------------------------------------------------------------------------------
# API


def _scan(text: str) -> Iterator[Hit]:
    pos = 0
    while (m := _PATTERN.search(text, pos)) is not None:
        rule = _COMPILED[int((m.lastgroup or "r0")[1:])]
        hit = rule.judge(rule, m, text) if rule.judge else None
        if hit is None or hit[1] >= hit[2]:
            pos = m.start() + 1  # declined: let the other rules look inside it
            continue
        yield hit
        pos = hit[2]  # not m.end(): a query value trimmed at "&" leaves the next parameter to scan


def find_secrets(text: str) -> list[Hit]:
    """Every secret in ``text`` as (kind, start, end), in order and non-overlapping."""
    return list(_scan(text))


def redact(text: str) -> str:
    """``text`` with each secret replaced by ``[REDACTED:<kind>]``; never raises.

    If scanning fails unexpectedly, the whole text is withheld rather than passed on unscanned.
    """
    try:
        pieces: list[str] = []
        last = 0
        for kind, start, end in _scan(text):
            pieces.append(text[last:start])
            pieces.append(MARKER.format(kind=kind))
            last = end
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)
    except Exception:  # fail closed: an unscanned snapshot must not reach the LLM or the store
        log.exception("secret redaction failed; withholding the text")
        return MARKER.format(kind="unscannable")
