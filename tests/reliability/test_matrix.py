"""The request fault matrix: every field of both stages' requests x every fault class.

Each variant goes through JSON mode in-process (real parsing, validation and result
writing; a stub stands in for the stage, so accepted variants start no real work) and
must give a schema-valid result; a refused one names its field, never as an internal
error, with no traceback, nothing written outside the output, and every target intact.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.protocol import BenchClientRequest, BenchDatasetPreparationRequest
from tests.conftest import SchemaCheck
from tests.reliability.jsonmode import STAGES, STUB_ERROR, is_failed, run_stubbed
from tests.reliability.targets import fingerprint
from tests.reliability.variants import Variant, generate

MODELS = {"case": BenchClientRequest, "prepare": BenchDatasetPreparationRequest}
# Variants are generated against a fixed sandbox path, made for real by the fixture below.
SANDBOX = Path(f"/tmp/inferlab-fault-matrix-{os.getpid()}")
VARIANTS = generate(SANDBOX, MODELS)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The targets a request may name, in a private folder; a link makes it ``SANDBOX``."""
    real = tmp_path_factory.mktemp("fault-matrix")
    targets = real / "targets"
    targets.mkdir()
    (targets / "file.json").write_text("[]\n")
    (targets / "population.jsonl").write_text("{}\n")
    (targets / "dir").mkdir()
    (targets / "dir" / "keep.txt").write_text("user data\n")
    os.mkfifo(targets / "fifo")
    (targets / "link-to-file").symlink_to(targets / "file.json")
    (targets / "link-to-dir").symlink_to(targets / "dir")
    for name in ("cwd", "home", "requests", "out"):
        (real / name).mkdir()
    if SANDBOX.is_symlink():
        SANDBOX.unlink()
    SANDBOX.symlink_to(real)
    yield SANDBOX
    SANDBOX.unlink()


@pytest.fixture(scope="module")
def baseline(sandbox: Path) -> dict[str, Any]:
    return _untouchable(sandbox)


def _untouchable(sandbox: Path) -> dict[str, Any]:
    real = sandbox.resolve()
    info = os.stat("/dev/null")
    return {
        "targets": fingerprint(real / "targets"),
        "cwd": fingerprint(real / "cwd"),
        "home": fingerprint(real / "home"),
        "artifacts": (real / "artifacts").exists(),
        "dev-null": (stat.S_ISCHR(info.st_mode), info.st_rdev),
    }


def names_field(error: str, variant: Variant) -> bool:
    """The error names the field's dotted path (pydantic may add a union tag in between)."""
    parts = variant.field.split(".")
    if variant.fault == "unknown_sibling":
        parts[-1] += "_unexpected"
    if parts[-1] == "kind" and variant.fault in ("missing", "wrong_type", "empty", "nul"):
        # A discriminator's problem is reported on its union, naming 'kind'.
        parent = r"\.(?:[a-z_]+\.)?".join(map(re.escape, parts[:-1]))
        if re.search(parent + r"(\.[a-z_]+)?: .*'kind'", error):
            return True
    pattern = r"\.(?:[a-z_]+\.)?".join(map(re.escape, parts))
    return re.search(rf"(^|[ ;]){pattern}(\.\w+)?: ", error) is not None


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_request_fault(
    variant: Variant,
    sandbox: Path,
    baseline: dict[str, Any],
    check_v6: SchemaCheck,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(sandbox / "cwd")
    monkeypatch.setenv("HOME", str(sandbox / "home"))
    stage = STAGES[variant.stage]
    number = VARIANTS.index(variant)
    request = sandbox / "requests" / f"{number}.json"
    request.write_text(json.dumps(variant.request))
    output = sandbox / "out" / f"{number}.json"
    outcome = run_stubbed(stage, request, output)
    assert outcome.exit_code == 0
    assert outcome.result is not None
    check_v6(stage.result_definition, outcome.result)
    assert is_failed(outcome.result)
    error = outcome.result["error"]
    if variant.refused:
        assert not outcome.accepted, f"accepted, expected refused: {variant.request}"
        assert "internal error" not in error
        assert names_field(error, variant), error
    else:
        assert outcome.accepted, f"refused, expected accepted: {error}"
        assert error == STUB_ERROR
    assert "Traceback" not in capsys.readouterr().err
    assert _untouchable(sandbox) == baseline


def test_matrix_covers_every_class() -> None:
    counts = Counter(v.fault.split(":")[0] for v in VARIANTS)
    assert len(VARIANTS) >= 400, counts
    assert set(counts) >= {
        "missing",
        "wrong_type",
        "unknown_sibling",
        "empty",
        "nul",
        "negative",
        "zero",
        "huge",
        "path",
    }
    fields = {(v.stage, v.tagged) for v in VARIANTS}
    assert len(fields) >= 70
