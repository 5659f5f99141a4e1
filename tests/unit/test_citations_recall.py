"""Citations used at recall (issue 39): gone memories leave the block and sink in search, changed or moved
ones are marked; facts keep the citations they name; aging retires memories whose code is long gone."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstream.recall.answers import search_index
from memstream.recall.search import CODE_CHANGED, build_block
from memstream.recall.staleness import Checker, marked
from memstream.rules.aging import gone_long_enough
from memstream.rules.citations import fact_sources, named_in
from memstream.schemas import Citation, Memory, Provenance
from memstream.schemas.memory import HybridHit, StoredType
from tests.unit.test_citations_capture import commit_all, make_repo
from tests.unit.test_staleness import cite

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def memory(mid: str, text: str, kind: StoredType = "architecture", citations: list[Citation] | None = None) -> Memory:
    return Memory(
        id=mid, text=text, type=kind, scope="project", scope_key="p", created_at=NOW, updated_at=NOW,
        content_hash=mid, embedding_model="e",
        sources=[Provenance(source_type="claude", citations=citations or [])],
    )  # fmt: skip


def test_the_block_leaves_out_gone_memories_and_marks_changed_ones() -> None:
    memories = [memory("a", "Login lives in api/auth.py"), memory("b", "Retries in http.yaml"), memory("c", "Uses JWT")]
    text = build_block(memories, code={"a": "gone", "b": "changed", "c": "current"}).text
    assert "api/auth.py" not in text
    assert f"- Retries in http.yaml{CODE_CHANGED}" in text
    assert "- Uses JWT\n" in text + "\n" and f"Uses JWT{CODE_CHANGED}" not in text


def test_search_sinks_gone_hits_and_marks_the_others_in_the_index_row(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    (repo / "b.py").write_text("y = 2\n")
    make_repo(repo)
    first = commit_all(repo, "first")
    gone, changed, loose = cite(repo, "a.py", first), cite(repo, "b.py", first), Citation(path=str(tmp_path / "no.py"))
    (repo / "a.py").unlink()
    (repo / "b.py").write_text("y = 3\n")
    commit_all(repo, "second")
    hits = [
        HybridHit(memory("g", "a is here", citations=[gone]), 0.9, 0.9, None),
        HybridHit(memory("c", "b is here", citations=[changed]), 0.8, 0.8, None),
        HybridHit(memory("n", "nothing cited"), 0.7, 0.7, None),
        HybridHit(memory("u", "no repository", citations=[loose]), 0.6, 0.6, None),
    ]
    ranked = marked(hits, Checker())
    # A citation with no repository is checked by its path alone: missing here, so gone too.
    assert [(h.memory.id, h.code) for h in ranked] == [("c", "changed"), ("n", ""), ("g", "gone"), ("u", "gone")]
    assert ranked[-1].score < 0.9
    rows = search_index(ranked)["hits"]
    assert [row[-1] for row in rows] == ["changed", "", "gone", "gone"]
    assert marked(hits, None) == hits  # MEMSTREAM_CHECK_CITATIONS off: nothing checked


def test_a_fact_keeps_the_citations_it_names_and_a_raw_exchange_keeps_all() -> None:
    auth, cfg = Citation(path="api/auth.py"), Citation(path="config/http.yaml")
    sources = [Provenance(source_type="claude", citations=[auth, cfg])]
    assert fact_sources(sources, "Login is handled in auth.py", raw=False)[0].citations == [auth]
    assert fact_sources(sources, "The team prefers tabs", raw=False)[0].citations == []
    assert fact_sources(sources, "anything", raw=True)[0].citations == [auth, cfg]
    assert not named_in("see oauth.pyc", auth)
    assert named_in("edit `config/http.yaml` line 12", cfg)


def test_aging_retires_only_when_every_cited_file_has_been_gone_long_enough() -> None:
    old, recent = NOW - timedelta(days=40), NOW - timedelta(days=2)
    assert gone_long_enough([old, old], NOW, 30)
    assert not gone_long_enough([old, recent], NOW, 30)
    assert not gone_long_enough([old, None], NOW, 30)  # a deletion not committed may be undone
    assert not gone_long_enough([old], NOW, 0)
    assert not gone_long_enough([], NOW, 30)


def test_the_console_memory_page_lists_the_code_a_memory_cites() -> None:
    from memstream.console.pages import memory as memory_page

    cited = Citation(path="api/auth.py", repo="/r", remote="git@x:me/r.git", commit="a" * 40, start=3, end=6)
    html = str(memory_page(memory("m", "t", citations=[cited]), [], None, [], None, [], "csrf", may_act=False))
    assert "<code>api/auth.py:3-6</code> @ aaaaaaaaaaaa · git@x:me/r.git" in html
    assert "no file cited" in str(memory_page(memory("n", "t"), [], None, [], None, [], "csrf", may_act=False))


def test_doctor_stale_lists_the_memories_whose_code_is_gone_or_changed_checked_in_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from memstream.commands import stale
    from memstream.recall.answers import full_record
    from memstream.settings import Settings

    repo = tmp_path / "r"
    repo.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(f"{name} = 1\n")
    make_repo(repo)
    first = commit_all(repo, "first")
    cited = {name: cite(repo, name, first) for name in ("a.py", "b.py", "c.py")}
    (repo / "a.py").unlink()
    (repo / "b.py").write_text("b = 2\n")
    commit_all(repo, "second")
    records = [full_record(memory(f"m-{n}", f"about {n}", citations=[c])) for n, c in cited.items()]
    monkeypatch.setattr(
        stale,
        "api_get",
        lambda settings, path, params: ("application/json", json.dumps({"memories": records}, default=str)),
    )
    args = argparse.Namespace(project=str(repo), json=False)
    assert stale.cmd_stale(args, Settings.from_env({}, data_dir=tmp_path / "data")) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("2 stale of 3 memories citing code")
    assert "gone     m-a.py" in out and "changed  m-b.py" in out and "m-c.py" not in out
