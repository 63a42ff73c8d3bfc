"""The README's layout block is true: what it names exists, and every module is named."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "inferlab_bench"
_NAME = re.compile(r"[a-z_][a-z0-9_]*(/[a-z_][a-z0-9_]*)?/?")


@dataclass(frozen=True)
class Entry:
    """One line of the layout block (with its continuation lines): a name and its text."""

    name: str
    text: str
    top: bool  # a line of the repository's top level, not of the package


def layout_entries(readme: str) -> list[Entry]:
    """The entries of the code block under ``## Layout``."""
    section = readme.split("\n## Layout\n", 1)[1]
    block = section.split("```", 2)[1].splitlines()[1:]
    entries: list[Entry] = []
    for line in block:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if entries and indent > 2 + (0 if entries[-1].top else 2):
            last = entries.pop()
            entries.append(Entry(last.name, f"{last.text} {line.strip()}", last.top))
            continue
        name, _, text = line.strip().partition(" ")
        entries.append(Entry(name, text.strip(), indent == 0))
    return entries


def listed(text: str) -> list[str]:
    """The items an entry lists: its text without parenthesized commentary, split at
    commas and semicolons."""
    depth, kept = 0, []
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return [item.strip() for item in re.split(r"[,;]", "".join(kept)) if item.strip()]


def modules(package: Path) -> list[str]:
    """A package's modules and subpackages (``name``, ``name/``)."""
    found = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    found += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(found)


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


ENTRIES = layout_entries((REPO / "README.md").read_text())
PACKAGE_ENTRIES = {e.name: e for e in ENTRIES if not e.top}
PACKAGES = sorted(
    p.parent.relative_to(PACKAGE).as_posix()
    for p in PACKAGE.rglob("__init__.py")
    if "__pycache__" not in p.parts
)


def test_the_block_is_read() -> None:
    assert [e.name for e in ENTRIES if e.top][0] == "inferlab_bench/"
    assert {"errors.py", "prepare/", "cli/"} <= PACKAGE_ENTRIES.keys()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_every_name_in_the_layout_exists(entry: Entry) -> None:
    if entry.top:
        assert (REPO / entry.name).exists(), f"README layout: {entry.name} does not exist"
        for script in re.findall(r"[\w-]+\.py", entry.text):
            assert (REPO / entry.name / script).is_file(), f"{entry.name}{script} is gone"
        return
    assert (PACKAGE / entry.name).exists(), f"README layout: inferlab_bench/{entry.name} is gone"
    if not entry.name.endswith("/"):
        return  # a module's text is prose
    for item in listed(entry.text):
        assert _NAME.fullmatch(item), (
            f"README layout, {entry.name}: {item!r} is not a module name "
            "(put commentary in parentheses)"
        )
        path = PACKAGE / entry.name / item
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), (
            f"README layout names inferlab_bench/{entry.name}{item}, which does not exist"
        )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_in_the_layout_or_its_package_docstring(package: str) -> None:
    """A module appears in its top-level package's layout entry (``sub/name`` for a
    subpackage's) or as ``name`` in its own package's ``__init__`` docstring."""
    directory = PACKAGE / package
    top, _, rest = package.partition("/") if package != "." else ("", "", "")
    if top:
        entry = PACKAGE_ENTRIES.get(f"{top}/")
        names = set(listed(entry.text)) if entry is not None else set()
    else:
        names = set(PACKAGE_ENTRIES)
    prefix = f"{rest}/" if rest else ""
    said = docstring(directory)
    missing = [
        module
        for module in modules(directory)
        if not (_in_entry(f"{prefix}{module}", names) or f"``{module.rstrip('/')}``" in said)
    ]
    where = "inferlab_bench" if package == "." else f"inferlab_bench/{package}"
    assert not missing, (
        f"{where}: {missing} named neither in the README's layout block nor "
        f"as ``name`` in {where}/__init__.py's docstring"
    )


def _in_entry(module: str, names: set[str]) -> bool:
    """``name`` or ``name.py`` listed; a subpackage ``sub/`` also by any ``sub/name``."""
    if module.endswith("/"):
        return module in names or any(name.startswith(module) for name in names)
    return module in names or f"{module}.py" in names
