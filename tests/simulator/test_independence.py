"""The simulator stands alone: it never imports the prepare or case stages."""

from __future__ import annotations

import ast
from pathlib import Path

import inferlab_bench.simulator

FORBIDDEN = ("inferlab_bench.prepare", "inferlab_bench.case", "inferlab_bench.cli")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_stage_imports() -> None:
    package = Path(inferlab_bench.simulator.__file__).parent
    for path in package.rglob("*.py"):
        bad = [n for n in _imports(path) if n.startswith(FORBIDDEN)]
        assert not bad, f"{path.name} imports {bad}"


def test_the_simulator_loads_its_tokenizer_through_the_one_loader() -> None:
    package = Path(inferlab_bench.simulator.__file__).parent
    users = {p.name for p in package.rglob("*.py") if "transformers" in _imports(p)}
    assert users == set()  # inferlab_bench.tokenizer is the one place a tokenizer is loaded
    loaders = {p.name for p in package.rglob("*.py") if "inferlab_bench.tokenizer" in _imports(p)}
    assert loaders == {"prompt.py"}
