"""The consolidation spec Phase 1: memstream.rules.secrets redacts secrets and leaves technical content alone."""

from __future__ import annotations

import base64
import hashlib
import random
import re
from collections.abc import Iterator

import pytest

from memstream.rules import secrets
from memstream.rules.secrets import find_secrets, redact
from tests.unit.secret_corpus import ANTHROPIC, GITHUB, JWT, LOOKALIKES, OPENAI, PG_PASSWORD, SECRETS, SecretCase

MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")


def _id(case: SecretCase) -> str:
    return f"{case.kind}:{case.text[:30]}"


def test_the_corpus_is_big_enough() -> None:
    assert len(SECRETS) >= 35 and len(LOOKALIKES) >= 35
    assert len({c.kind for c in SECRETS}) >= 15


@pytest.mark.parametrize("case", SECRETS, ids=_id)
def test_a_secret_disappears_and_its_context_survives(case: SecretCase) -> None:
    assert case.secret in case.text, "corpus entry must contain its secret"
    out = redact(case.text)
    assert case.secret not in out
    assert case.kind in MARKER.findall(out), out
    for word in case.context:
        assert word in out, f"{word!r} lost from {out!r}"


@pytest.mark.parametrize("text", LOOKALIKES, ids=lambda t: t[:40])
def test_a_lookalike_survives_unchanged(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


@pytest.mark.parametrize("text", [c.text for c in SECRETS] + LOOKALIKES, ids=lambda t: t[:40])
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"DATABASE_URL=postgres://app:{PG_PASSWORD}@db:5432/shop",
            "DATABASE_URL=postgres://app:[REDACTED:password]@db:5432/shop",
        ),
        (f"export ANTHROPIC_API_KEY={ANTHROPIC}", "export ANTHROPIC_API_KEY=[REDACTED:anthropic-key]"),
        (f'OPENAI_API_KEY="{OPENAI}"', 'OPENAI_API_KEY="[REDACTED:openai-key]"'),
        ('"api_key": "Zq81vXk2LmP0aR7t"', '"api_key": "[REDACTED:api-key]"'),
        ("password: hunter2", "password: [REDACTED:password]"),
        ("db.password=Hunter22", "db.password=[REDACTED:password]"),
        ("export GITHUB_TOKEN=" + GITHUB, "export GITHUB_TOKEN=[REDACTED:github-token]"),
        ("--password=p4ssw0rd! --verbose", "--password=[REDACTED:password] --verbose"),
        ("PGPASSWORD=Xy9fQ2 psql -h db", "PGPASSWORD=[REDACTED:password] psql -h db"),
        ("self.client_secret = 'Zq81vXk2LmP0aR7t'", "self.client_secret = '[REDACTED:secret]'"),
        (
            "https://api.shop.dev/v1/orders?access_token=Zq81vXk2LmP0aR7t&page=2",
            "https://api.shop.dev/v1/orders?access_token=[REDACTED:token]&page=2",
        ),
        (
            "/login?user=bob&password=Hunter22&api_key=Zq81vXk2Lm",
            "/login?user=bob&password=[REDACTED:password]&api_key=[REDACTED:api-key]",
        ),
        ("OPENAI_KEY=Zq81vXk2LmP0aR7tWw", "OPENAI_KEY=[REDACTED:api-key]"),
        ("token = 'Bearer " + JWT + "'", "token = '[REDACTED:token]'"),
        ("Authorization: Bearer " + JWT, "Authorization: Bearer [REDACTED:jwt]"),
    ],
)
def test_the_name_stays_visible_and_only_the_value_goes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_find_secrets_reports_kind_and_span() -> None:
    text = f"key one {ANTHROPIC} and two {GITHUB}."
    hits = find_secrets(text)
    assert [(kind, text[s:e]) for kind, s, e in hits] == [("anthropic-key", ANTHROPIC), ("github-token", GITHUB)]


def test_a_private_key_inside_escaped_json_goes_whole() -> None:
    case = next(c for c in SECRETS if '"private_key":' in c.context)
    out = redact(case.text)
    assert "BEGIN PRIVATE KEY" not in out and "END PRIVATE KEY" not in out
    assert all(line not in out for line in case.secret.split("\\n")[1:-1])


def test_an_unterminated_private_key_is_redacted_up_to_its_body() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1x2y3z\nQk9vb3N0ZXJzMTIzNDU2\n\n(output truncated)"
    out = redact(text)
    assert "MIIEowIBAAKCAQEA1x2y3z" not in out and "Qk9vb3N0ZXJzMTIzNDU2" not in out
    assert out.endswith("(output truncated)")


def test_an_unexpected_failure_withholds_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(text: str) -> Iterator[tuple[str, int, int]]:
        raise RuntimeError("boom")

    monkeypatch.setattr(secrets, "_scan", broken)
    assert redact(f"OPENAI_API_KEY={OPENAI}") == "[REDACTED:unscannable]"


def _random_text(rng: random.Random) -> str:
    alphabets = [
        "".join(map(chr, range(32, 127))),
        "abcdef0123456789-_=:/@.\"' \n",
        "äöüßéèçñ漢字かなЖЩЭ🙂🚀\u200b\u0000\t\r\n",
        "sk-ant-AKIAghp_eyJ.=:/@ ",
    ]
    return "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(0, 400)))


def test_redact_never_raises_on_random_input() -> None:
    rng = random.Random(4)
    for _ in range(300):
        text = _random_text(rng)
        out = redact(text)
        assert isinstance(out, str)
        assert out != "[REDACTED:unscannable]"
        assert redact(out) == out
    binaryish = bytes(range(256)).decode("latin-1") * 4
    assert redact(binaryish) == redact(redact(binaryish))


def _snapshot() -> str:
    """A ~12,000-character transcript full of hex, base64, code and two secrets."""
    rng = random.Random(12)
    parts = []
    for i in range(60):
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        blob = base64.b64encode(rng.randbytes(60)).decode()
        parts.append(f"commit {digest[:40]} blob {blob} size={i * 37} token_count={i}\n")
        parts.append(f"    def handler_{i}(self, event):\n        return self.store.get({i!r})\n")
    parts.insert(20, f"OPENAI_API_KEY={OPENAI}\n")
    parts.insert(40, f"DATABASE_URL=postgres://app:{PG_PASSWORD}@db/shop\n")
    return "".join(parts)


def test_a_large_snapshot_redacts_only_its_secrets() -> None:
    snapshot = _snapshot()
    assert len(snapshot) >= 12_000
    hits = find_secrets(snapshot)
    assert [kind for kind, _, _ in hits] == ["openai-key", "password"]
    out = redact(snapshot)
    assert OPENAI not in out and PG_PASSWORD not in out
    assert len(snapshot) - len(out) == len(OPENAI) + len(PG_PASSWORD) - len("[REDACTED:openai-key][REDACTED:password]")


@pytest.mark.parametrize(
    "text",
    [
        "a" * 50_000,
        "=" * 50_000,
        "token" * 10_000,
        "password=" * 5_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" * 300,
        "sk-" * 10_000,
        "eyJ" + "a" * 20_000 + "." * 10_000,
        "https://" + "u:" * 10_000 + "@",
        ('"' + "x" * 1_000 + "\\") * 30,
        "A" * 50_000,
        "-" * 50_000 + "password",
    ],
    ids=lambda t: repr(t[:16]),
)
def test_pathological_input_finishes(text: str) -> None:
    # No timing assertion: the pytest timeout catches catastrophic backtracking.
    out = redact(text)
    assert redact(out) == out
