"""Deterministic identities: Pipeline v2's content normalization, scope keys and memory ids."""

from __future__ import annotations

import hashlib
import re

import pytest

from memstream.identity import memory_id, normalize_content, project_key, user_key


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- normalize_content (Pipeline v2 normalizeAndHashContent) ---


def test_storage_trims_and_collapses_whitespace_keeping_case() -> None:
    result = normalize_content("  Auth uses\tJWT \n\n in   httpOnly Cookies.  ")
    assert result.storage == "Auth uses JWT in httpOnly Cookies."


def test_normalized_lowercases_and_strips_trailing_punctuation() -> None:
    result = normalize_content("  Auth uses\tJWT \n\n in   httpOnly Cookies.  ")
    assert result.normalized == "auth uses jwt in httponly cookies"


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Done.", "done"),
        ("Really?!", "really"),
        ("a, b; c: d...", "a, b; c: d"),
        ("Wait...!?;:,", "wait"),
        ("Mid. sentence. Punctuation", "mid. sentence. punctuation"),
        ("keep (parens)", "keep (parens)"),
        ("quote.'", "quote.'"),
        ("hello !", "hello "),
    ],
)
def test_only_trailing_punctuation_is_stripped(text: str, normalized: str) -> None:
    assert normalize_content(text).normalized == normalized


def test_hash_is_sha256_of_the_normalized_content() -> None:
    result = normalize_content("Use Bun.")
    assert result.content_hash == sha("use bun")
    assert re.fullmatch(r"[0-9a-f]{64}", result.content_hash)


def test_variants_that_normalize_alike_share_a_hash() -> None:
    hashes = {normalize_content(t).content_hash for t in ["Use bun", "use   BUN.", "\tUse bun!!\n", "USE BUN;"]}
    assert hashes == {sha("use bun")}


def test_case_is_kept_in_storage_but_not_in_the_hash() -> None:
    a, b = normalize_content("Use Bun"), normalize_content("use bun")
    assert (a.storage, b.storage) == ("Use Bun", "use bun")
    assert a.content_hash == b.content_hash


def test_punctuation_only_text_hashes_its_lowercased_storage() -> None:
    result = normalize_content("  ?!.  ")
    assert result == ("?!.", "", sha("?!."))


def test_empty_text() -> None:
    assert normalize_content("   ") == ("", "", sha(""))


def test_different_content_has_different_hashes() -> None:
    assert normalize_content("use bun").content_hash != normalize_content("use npm").content_hash


# --- scope keys ---


def test_project_key_is_deterministic_and_prefixed() -> None:
    key = project_key("/work/project")
    assert key == project_key("/work/project")
    assert re.fullmatch(r"p_[0-9a-f]{16}", key)
    assert key == "p_" + sha("/work/project")[:16]


@pytest.mark.parametrize("variant", ["/a/b/", "/a/b//", "/a/./b", "/a/c/../b", "/a/b/."])
def test_project_key_normalizes_paths(variant: str) -> None:
    assert project_key(variant) == project_key("/a/b")


def test_different_projects_have_different_keys() -> None:
    assert project_key("/a/b") != project_key("/a/c")


def test_user_key_is_case_and_space_insensitive() -> None:
    key = user_key("Dev@Example.com")
    assert key == user_key("  dev@example.COM ")
    assert key == "u_" + sha("dev@example.com")[:16]


def test_user_key_of_nobody_is_empty() -> None:
    assert user_key("") == ""
    assert user_key("   ") == ""


def test_user_and_project_keys_differ_in_prefix() -> None:
    assert project_key("/x")[:2] == "p_"
    assert user_key("x")[:2] == "u_"


# --- memory_id ---


def test_memory_id_is_deterministic_per_scope_and_hash() -> None:
    h = normalize_content("Use bun").content_hash
    assert memory_id("p_1", h) == memory_id("p_1", h)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", memory_id("p_1", h))


def test_memory_id_differs_across_scopes_and_contents() -> None:
    h1, h2 = normalize_content("Use bun").content_hash, normalize_content("Use npm").content_hash
    assert memory_id("p_1", h1) != memory_id("p_2", h1)
    assert memory_id("p_1", h1) != memory_id("u_1", h1)
    assert memory_id("p_1", h1) != memory_id("p_1", h2)


def test_same_fact_reworded_trivially_gets_the_same_id() -> None:
    scope = project_key("/repo")
    assert memory_id(scope, normalize_content("Use bun.").content_hash) == memory_id(
        scope, normalize_content("use  BUN").content_hash
    )
