"""Recorded versions: read from installers' directory names, equal to importlib.metadata's."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from inferlab_bench.versions import handshake_facts, package_version


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it() -> None:
    names = sorted({d.metadata["Name"] for d in metadata.distributions()})
    assert {"aiperf", "transformers", "tokenizers", "numpy"} <= {n.lower() for n in names}
    for name in names:
        assert package_version.__wrapped__(name) == metadata.version(name), name
        spelled = name.upper().replace("-", ".")  # any spelling of the same project
        assert package_version.__wrapped__(spelled) == metadata.version(name), spelled
    assert package_version.__wrapped__("no-such-distribution-here") is None
    assert handshake_facts()["tokenizers_version"] == metadata.version("tokenizers")


def test_a_path_entry_with_two_records_of_one_project_is_left_to_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for directory in ("demo_pkg-1.0.dist-info", "demo_pkg-2.0.dist-info"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {directory[9:12]}\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    # importlib.metadata decides which of the two counts; we do not guess
    assert package_version.__wrapped__("demo-pkg") == metadata.version("demo-pkg")
    (tmp_path / "demo_pkg-2.0.dist-info" / "METADATA").unlink()
    (tmp_path / "demo_pkg-2.0.dist-info").rmdir()
    (tmp_path / "other-3.1.dist-info").mkdir()
    (tmp_path / "demo.pkg.extra-7.0.dist-info").mkdir()  # an older wheel's dotted name
    (tmp_path / "demo.egg-info").mkdir()  # no version in the name
    from inferlab_bench import versions

    versions._distributions.cache_clear()
    assert package_version.__wrapped__("demo_pkg") == "1.0"
    assert package_version.__wrapped__("demo-pkg-extra") == "7.0"
    assert versions._distributions(str(tmp_path))["demo"] == ["demo.egg-info"]
