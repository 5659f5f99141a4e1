"""The packages' layers, as the README's "How it flows" draws them: every import points down (or sideways).

A module may import from its own layer and the layers below it, never from one above. Imports made only
for type annotations (``if TYPE_CHECKING:``) are not dependencies at run time and are not counted; every
other import is, including one made inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Top to bottom. A name is a package or a module; the longest name that prefixes a module decides its layer.
LAYERS: list[tuple[str, set[str]]] = [
    ("entry points", {"memstream.entry", "memstream.cli", "memstream.hooks", "memstream.commands"}),
    ("the worker", {"memstream.worker"}),
    ("the front door", {"memstream.front"}),
    ("the console", {"memstream.console"}),
    ("serving: the API, MCP, events and the guard", {"memstream.serve"}),
    ("stream agents", {"memstream.agents"}),
    ("operations", {"memstream.ops"}),
    ("wiring of providers", {"memstream.bootstrap"}),
    ("read, intake and capture", {"memstream.recall", "memstream.intake", "memstream.capture"}),
    (
        "providers and Kafka",
        {
            "memstream.llm",
            "memstream.embed",
            "memstream.store",
            "memstream.kafka",
            "memstream.topics",
            "memstream.ports",
        },
    ),
    ("rules and telemetry", {"memstream.rules", "memstream.telemetry"}),
    (
        "foundation",
        {
            "memstream.settings",
            "memstream.identity",
            "memstream.limits",
            "memstream.logs",
            "memstream.auth",
            "memstream.runtime",
            "memstream.schemas",
            # TLS/SASL checks of the settings: a leaf (stdlib only), which Settings.validate calls.
            "memstream.kafka.security",
            # The supported coding CLIs: a leaf (stdlib only), which the hook, install, capture and recall read.
            "memstream.hosts",
            "memstream",
        },
    ),
]

#: Installed under memstream's namespace from the design card's top-level folders (pyproject's package-dir).
MAPPED = {"agents": "memstream.agents", "topics": "memstream.topics", "schemas": "memstream.schemas"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in MAPPED:
        parts = [*MAPPED[parts[0]].split("."), *parts[1:]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = index, len(name)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS"
    return best


def runtime_imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, imported module) for every memstream import outside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            # `from memstream.x import y` may name a submodule y: judge by the deepest name that exists.
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "memstream" or name.startswith("memstream.")]


def source_files() -> list[Path]:
    files = [*ROOT.joinpath("memstream").rglob("*.py")]
    for folder in MAPPED:
        files += ROOT.joinpath(folder).rglob("*.py")
    return sorted(files)


def test_every_import_points_down_or_sideways() -> None:
    violations = []
    for path in source_files():
        module = module_name(path)
        mine = layer_of(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, imported in runtime_imports(tree, module, path.name == "__init__.py"):
            theirs = layer_of(imported)
            if theirs < mine:
                violations.append(
                    f"{path.relative_to(ROOT)}:{line} imports {imported}: "
                    f"{LAYERS[mine][0]} may not import from {LAYERS[theirs][0]}"
                )
    assert not violations, "imports that point up:\n" + "\n".join(violations)


def test_every_module_has_a_layer() -> None:
    for path in source_files():
        layer_of(module_name(path))


def test_the_check_sees_an_upward_import() -> None:
    """The rule itself: a foundation module importing the worker is caught, a type-only import is not."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from memstream.worker.app import build_app\n"
        "def f():\n    from memstream.front import app\n"
    )
    found = runtime_imports(tree, "memstream.settings", is_package=False)
    assert found == [(5, "memstream.front.app")]
    assert layer_of("memstream.front.app") < layer_of("memstream.settings")
