"""No upward arrows (DESIGN.md's layer table): the engine imports no Dagster-layer package;
resources import the engine; assets and sensors import resources (not each other); platform_defs
imports them all. The command line (``changelake/commands``, ``changelake/cli.py``) sits on top and
may import anything."""

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
}
TOP = ("changelake/commands/", "changelake/cli.py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _modules() -> list[Path]:
    return [p for package in ALLOWED for p in sorted((ROOT / package).rglob("*.py"))
            if not str(p.relative_to(ROOT)).startswith(TOP)]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_layer_above_its_own(path):
    allowed = ALLOWED[path.relative_to(ROOT).parts[0]]
    upward = sorted(m for m in _imports(path) if m in ALLOWED and m not in allowed)
    assert not upward, f"{path.relative_to(ROOT)} imports {upward}, not below its layer"


def test_the_engine_has_no_dagster_import():
    engine = [p for p in _modules() if p.relative_to(ROOT).parts[0] == "changelake"]
    assert [str(p.relative_to(ROOT)) for p in engine if "dagster" in _imports(p)] == []
