"""memstream.capture.jsonc: JSON with comments, edited in place."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from memstream.capture.jsonc import edit, loads, strip_comments

TEXT = """{
  // a comment with "quotes" and a /* fake */ opener
  "url": "http://example.com/*not a comment*/",  // trailing
  /* block
     over lines */
  "list": [1,   2, 3],
  "nested": {"a": 1, "b": {"c": []}}
}
"""


def test_comments_are_read_and_strings_that_look_like_comments_are_kept() -> None:
    assert loads(TEXT) == {
        "url": "http://example.com/*not a comment*/",
        "list": [1, 2, 3],
        "nested": {"a": 1, "b": {"c": []}},
    }
    assert len(strip_comments(TEXT)) == len(TEXT)
    with pytest.raises(ValueError):
        loads('{"a": 1,, }')


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.__setitem__("added", {"x": [1, {"y": "z"}]}),
        lambda d: d["list"].append(4),
        lambda d: d["nested"].__setitem__("d", True),
        lambda d: d["nested"]["b"]["c"].append("first"),
    ],
)
def test_an_addition_keeps_every_other_byte_and_its_removal_gives_the_text_back(change: Callable[[Any], None]) -> None:
    data = loads(TEXT)
    changed = copy.deepcopy(data)
    change(changed)
    after = edit(TEXT, changed)
    assert loads(after) == changed
    assert "// a comment with" in after and "/* block\n     over lines */" in after and '"list": [1,   2, 3' in after
    assert edit(after, data) == TEXT


def test_members_removed_from_the_front_or_middle_leave_valid_jsonc() -> None:
    data = loads(TEXT)
    for key in ("url", "list", "nested"):
        less = {k: v for k, v in data.items() if k != key}
        after = edit(TEXT, less)
        assert loads(after) == less
    assert loads(edit(TEXT, {})) == {}
    assert edit(TEXT, data) == TEXT
