"""The wheel installs one top-level name, `memstream`, and every module of the tree is in it.

The repository keeps the design card's folders (agents/, topics/, schemas/) at the top, mapped into
memstream's namespace by pyproject's package-dir: a top-level `agents` would collide with OpenAI's
Agents SDK in the same environment.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"agents": "memstream.agents", "topics": "memstream.topics", "schemas": "memstream.schemas"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: the venv's setuptools builds it, offline and in seconds.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("memstream-*.whl")
    return zipfile.ZipFile(built)


def _source_modules() -> set[str]:
    """Every module of the four package roots, by the dotted name it must have once installed."""
    names = set()
    for root in ("memstream", *MAPPED):
        for path in (ROOT / root).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            parts[0] = MAPPED.get(parts[0], parts[0])
            names.add(".".join(parts))
    return names


def _wheel_modules(wheel: zipfile.ZipFile) -> set[str]:
    return {
        name.removesuffix(".py").replace("/", ".")
        for name in wheel.namelist()
        if name.endswith(".py") and ".dist-info/" not in name
    }


def test_the_wheel_has_one_top_level_name(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist() if ".dist-info/" not in name}
    assert tops == {"memstream"}
    top_level = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    if top_level:  # setuptools writes it; newer backends may not
        assert wheel.read(top_level[0]).decode().split() == ["memstream"]


def test_every_module_of_the_tree_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    # A new sub-package must be listed in pyproject's [tool.setuptools] packages, or it is left out.
    missing = _source_modules() - _wheel_modules(wheel)
    assert not missing, f"not packaged (add to [tool.setuptools] packages): {sorted(missing)}"


def test_pyproject_lists_every_package_folder() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {
        ".".join([MAPPED.get(init.parent.relative_to(ROOT).parts[0], init.parent.relative_to(ROOT).parts[0])])
        + "".join(f".{p}" for p in init.parent.relative_to(ROOT).parts[1:])
        for root in ("memstream", *MAPPED)
        for init in (ROOT / root).rglob("__init__.py")
    }
    assert folders == listed
    assert setuptools["package-dir"] == {v: k for k, v in MAPPED.items()}


def test_the_console_assets_ship_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    # The console fetches nothing from the network: its stylesheet, script and icon are package data.
    shipped = {n for n in wheel.namelist() if n.startswith("memstream/console/static/")}
    assert shipped == {
        "memstream/console/static/console.css",
        "memstream/console/static/console.js",
        "memstream/console/static/favicon.svg",
    }
