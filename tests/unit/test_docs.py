"""The docs' configuration reference is generated from the Settings class, and the README stays short."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from memstream.settings import settings_table

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "settings_reference", ROOT / "docs" / "hooks" / "settings_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_lists_every_variable_with_its_default_under_its_section() -> None:
    reference = _hook().render()
    rows = {line.split("|")[1].strip(" `"): line for line in reference.splitlines() if line.startswith("| `")}
    assert set(rows) == {variable for variable, _, _ in settings_table()}
    for variable, default, _ in settings_table():
        shown = f"`{default}`" if default else "(empty)"
        assert rows[variable].startswith(f"| `{variable}` | {shown} |"), rows[variable]
    assert "### Where things live" in reference
    assert "| `MEMSTREAM_FETCH_MAX_WAIT_MS` | `0` | 0 to 60000 |" in reference


def test_the_configuration_page_holds_the_marker_the_hook_replaces() -> None:
    hook = _hook()
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert hook.MARKER in page
    built = hook.on_page_markdown(page)
    assert "MEMSTREAM_DATA_DIR" in built and hook.MARKER not in built


def test_the_readme_is_read_in_five_minutes_and_links_only_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), link
