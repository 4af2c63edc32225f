"""No upward arrows (DESIGN.md's layer table): the engine imports no Dagster-layer package;
resources import the engine; assets and sensors import resources (not each other); platform_defs
imports them all. The command line (``cli/``) sits on top, may import anything, and nothing imports
it; the engine (``changelake/``) imports neither Dagster nor any package above it. And no import circles between modules, counting the imports inside functions
(which hide an arrow from a reader but not from the import system)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: package -> the project packages it may import (DESIGN.md: "Arrows point down the table only")
ALLOWED = {
    "changelake": {"changelake"},
    "resources": {"changelake", "resources"},
    "assets": {"changelake", "resources", "assets"},
    "sensors": {"changelake", "resources", "sensors"},
    "platform_defs": {"changelake", "resources", "assets", "sensors", "platform_defs"},
    "cli": {"changelake", "resources", "assets", "sensors", "platform_defs", "cli"},
}
#: package -> single modules of a package it may not import as a whole: sensors name the assets
#: and jobs they watch with the platform's names (assets/keys.py imports only Dagster and the engine)
ALLOWED_MODULES = {"sensors": {"assets.keys"}}
#: engine package -> the engine packages it may import (DESIGN.md's table, below the Dagster layer);
#: every engine module may import the root modules in ENGINE_ROOT.
ENGINE = {
    "changelog": {"changelog"},
    "formats": {"changelog", "formats"},
    "connectors": {"changelog", "formats", "connectors"},
    "checks": {"checks"},
    "pipeline": {"changelog", "formats", "connectors", "checks", "pipeline"},
    "pageviews": {"changelog", "formats", "connectors", "pageviews"},
}
ENGINE_ROOT = {"changelake", "changelake.collector", "changelake.errors", "changelake.options", "changelake.state_dir"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _module_imports(path: Path) -> set[str]:
    """The dotted project modules a file imports (``from a.b import c`` -> ``a.b`` and ``a.b.c``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _modules() -> list[Path]:
    return [p for package in ALLOWED for p in sorted((ROOT / package).rglob("*.py"))]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_layer_above_its_own(path):
    package = path.relative_to(ROOT).parts[0]
    allowed = ALLOWED[package]
    upward = sorted(m for m in _imports(path) if m in ALLOWED and m not in allowed)
    singles = ALLOWED_MODULES.get(package, set())
    imported = _module_imports(path)
    upward = [m for m in upward  # an upward package is allowed only through its allowed single modules
              if not all(i in singles or i.rsplit(".", 1)[0] in singles for i in imported if i.split(".")[0] == m)]
    assert not upward, f"{path.relative_to(ROOT)} imports {upward}, not below its layer"


def test_the_single_modules_allowed_upward_import_nothing_above_the_engine():
    for module in set().union(*ALLOWED_MODULES.values()):
        path = ROOT / (module.replace(".", "/") + ".py")
        assert path.is_file(), module
        assert sorted(m for m in _imports(path) if m in ALLOWED and m != "changelake") == [], module


def test_the_engine_has_no_dagster_import():
    engine = [p for p in _modules() if p.relative_to(ROOT).parts[0] == "changelake"]
    assert engine, "no engine module found"
    dagster = [str(p.relative_to(ROOT)) for p in engine
               if any(m == "dagster" or m.startswith("dagster_") for m in _imports(p))]
    assert dagster == []


def test_the_command_line_is_its_own_top_level_package():
    """The CLI drives Dagster, so it sits above the Dagster layer, outside the engine package."""
    assert not (ROOT / "changelake" / "commands").exists() and not (ROOT / "changelake" / "cli.py").exists()
    assert (ROOT / "cli" / "main.py").is_file()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its text (module level, in functions,
    under ``TYPE_CHECKING``); ``from package import name`` counts as importing ``package.name``
    when that is a module."""
    paths = {_module_name(p): p for package in ALLOWED for p in sorted((ROOT / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        out: set[str] = set()
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    target = f"{module}.{alias.name}"
                    if target in paths:
                        out.add(target)
                    elif module in paths:
                        out.add(module)
        out.discard(name)
        graph[name] = out
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_engine_packages_import_only_the_packages_below_them():
    upward = []
    for module, imported in sorted(_import_graph().items()):
        parts = module.split(".")
        if parts[0] != "changelake" or len(parts) < 3 or parts[1] not in ENGINE:
            continue
        for target in sorted(imported):
            tparts = target.split(".")
            if tparts[0] != "changelake" or target in ENGINE_ROOT:
                continue
            if len(tparts) < 2 or tparts[1] not in ENGINE[parts[1]]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_the_circle_finder_finds_a_circle_through_function_level_imports():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert _circles(_import_graph()) == []
