"""The dependency direction errors <- protocol <- stages <- report <- cli, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "inferlab_bench"
STAGES = ("prepare", "case", "simulator")
# What each area may import from inside the package (besides itself).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "protocol": {"errors", "atomic"},
    "atomic": {"errors"},
    "progress": set(),
    "layout": set(),
    "metric_tags": set(),
    "load": {"errors", "protocol"},
    "interrupts": {"errors"},
    "tokenizer": {"errors", "atomic"},  # the kept tokenizer backend is written atomically
    "versions": {"protocol"},
    "prepare": {
        "errors",
        "protocol",
        "atomic",
        "progress",
        "versions",
        "layout",
        "interrupts",
        "tokenizer",
    },
    "case": {
        "errors",
        "protocol",
        "atomic",
        "progress",
        "versions",
        "layout",
        "validity",
        "load",
        "metric_tags",
        "interrupts",
        "tokenizer",
    },
    "simulator": {"errors", "atomic", "tokenizer"},
    "report": {
        "errors",
        "protocol",
        "atomic",
        "versions",
        "validity",
        "load",
        "metric_tags",
        "layout",
    },
    "validity": {"errors", "protocol", "load", "metric_tags"},
    "kube": {
        "errors",
        "protocol",
        "atomic",
        "progress",
        "versions",
        "case",
        "layout",
        "interrupts",
    },
    "schema": {"protocol", "validity"},  # the documents whose schemas it commits
    # Human workflows sit above every stage and the report, below the CLI.
    "runs": {
        "errors",
        "protocol",
        "atomic",
        "progress",
        "versions",
        "layout",
        "load",
        "metric_tags",
        "interrupts",
        "tokenizer",
        "prepare",
        "case",
        "simulator",
        "validity",
        "kube",
        "report",
    },
    # The capacity search: runs each probe as a human run does, above the same layers.
    "capacity": {
        "errors",
        "interrupts",
        "protocol",
        "atomic",
        "progress",
        "layout",
        "load",
        "metric_tags",
        "case",
        "validity",
        "report",
        "runs",
    },
    # Publishing and reproducing sits beside runs (it reuses its workflows), below the CLI.
    "publish": {
        "errors",
        "protocol",
        "atomic",
        "progress",
        "versions",
        "layout",
        "load",
        "metric_tags",
        "interrupts",
        "tokenizer",
        "prepare",
        "case",
        "validity",
        "report",
        "runs",
    },
}


def area_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def internal_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "inferlab_bench" and len(parts) > 1:
                found.add(parts[1])
    return found


SOURCES = sorted(
    p for p in PACKAGE.rglob("*.py") if area_of(p) not in ("cli", "__init__", "__main__")
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_follow_the_layering(path: Path) -> None:
    area = area_of(path)
    allowed = ALLOWED.get(area)
    assert allowed is not None, f"{area}: new top-level area; add it to ALLOWED with its layer"
    illegal = internal_imports(path) - allowed - {area}
    assert not illegal, f"{path.relative_to(PACKAGE)} imports {sorted(illegal)}"


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if ast.get_docstring(ast.parse(p.read_text())) is None
    ]
    assert not missing, missing


def test_stages_never_print() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if area_of(path) not in (*STAGES, "report"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders


def test_the_case_runs_its_load_only_through_the_engine_seam() -> None:
    """One orchestration: the stage hands the load to an engine and never starts AIPerf
    itself; only the local engine reaches the subprocess, and kube plugs into the seam."""
    case = PACKAGE / "case"
    stage = internal_modules(case / "stage.py")
    assert "inferlab_bench.case.runner" not in stage and "inferlab_bench.kube" not in stage
    runner_users = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "inferlab_bench.case.runner" in internal_modules(p)
    )
    assert runner_users == ["case/local.py"]
    job = internal_modules(PACKAGE / "kube" / "job.py")
    assert "inferlab_bench.case.engine" in job and "inferlab_bench.case.runner" not in job


def internal_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_both_engines_satisfy_the_seam() -> None:
    from inferlab_bench.case.engine import LoadEngine
    from inferlab_bench.case.local import LocalEngine
    from inferlab_bench.kube.job import KubeEngine
    from inferlab_bench.kube.options import KubeOptions

    for engine in (LocalEngine(), KubeEngine(KubeOptions(namespace="bench"))):
        assert isinstance(engine, LoadEngine)


def test_token_counting_never_imports_the_rest_of_the_stage() -> None:
    """``prepare/tokens`` is counted on by the stage, never the other way: from the rest
    of ``prepare`` it takes only the file stamps (a tokenizer's fingerprint)."""
    tokens = PACKAGE / "prepare" / "tokens"
    offenders = {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in tokens.rglob("*.py")
        for module in internal_modules(path)
        if module.startswith("inferlab_bench.prepare.")
        and not module.startswith(("inferlab_bench.prepare.tokens", "inferlab_bench.prepare.stamp"))
    }
    assert not offenders, sorted(offenders)
