"""The trust boundary as a user meets it: reproduce never writes outside --out nor calls an
undocumented reset, bundle never replaces the run's own files, report reads a damaged or
escaping folder with one line naming the file.

Each refusal also shows that no request reached the server: the --url is a real listener on
127.0.0.1 that counts the connections it accepts.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from inferlab_bench.cli import main
from inferlab_bench.publish.archive import read_bundle
from inferlab_bench.publish.reproduce import ReproduceSettings, reset_option
from tests.case.support import TOKENIZER_DIR
from tests.publish.support import published_bundle
from tests.reliability import bundles as b
from tests.reliability.targets import fingerprint


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return published_bundle(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def hostile_reset(real_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real bundle with its reset evidence saying DELETE /v1/models/sim, re-signed."""
    entries = b.read_entries(real_bundle)
    for trial in (b.C1, b.C2):
        entries = b.edit_json(
            f"{trial}/reset-evidence.json",
            lambda d: d["target"].update(method="DELETE", path="/v1/models/sim"),
        )(entries)
    index = b.index_of(entries)
    for case in index["cases"]:
        case["reset"] = "DELETE:/v1/models/sim"
    target = tmp_path_factory.mktemp("hostile") / "hostile.tar.gz"
    return b.write_archive(target, b.set_index(entries, index))


@contextmanager
def counting_listener() -> Iterator[tuple[str, list[socket.socket]]]:
    """A real TCP listener on 127.0.0.1 that accepts and keeps every connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def _reproduce(bundle: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [
        "reproduce",
        str(bundle),
        *("--url", url, "--model", "sim", "--tokenizer", TOKENIZER_DIR, "--out", str(out)),
        *extra,
    ]


def test_an_undocumented_reset_is_refused_before_any_request_or_write(
    hostile_reset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    before = fingerprint(tmp_path)
    with counting_listener() as (url, accepted):
        code = main(_reproduce(hostile_reset, url, out))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "records the reset call 'DELETE:/v1/models/sim'" in err
    assert "pass --reset-prefix-cache" in err
    assert accepted == []  # no request reached the server
    assert fingerprint(tmp_path) == before


def test_the_users_reset_flag_replaces_the_bundles_choice(hostile_reset: Path) -> None:
    bundle = read_bundle(hostile_reset)
    case = bundle.cases[0]
    assert case.reset is not None and case.reset.framework is None
    settings = ReproduceSettings(hostile_reset, "http://127.0.0.1:1", "sim", Path("."), Path("."))
    user = ReproduceSettings(
        hostile_reset, "http://127.0.0.1:1", "sim", Path("."), Path("."), prefix_cache_reset="vllm"
    )
    assert reset_option(bundle, case, user) == "vllm"
    with pytest.raises(Exception, match="none of the documented ones"):
        reset_option(bundle, case, settings)


def test_a_documented_reset_comes_from_the_checksummed_evidence(real_bundle: Path) -> None:
    bundle = read_bundle(real_bundle)
    settings = ReproduceSettings(real_bundle, "http://127.0.0.1:1", "sim", Path("."), Path("."))
    assert [reset_option(bundle, c, settings) for c in bundle.cases] == ["vllm", "vllm"]


@pytest.mark.parametrize(
    "link", ["reproduced", "reproduced/run/01-c1/trial-03", "published/run/02-c2"]
)
def test_a_link_in_out_is_refused_before_any_request_or_write(
    real_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "trials.json").write_text("the user's own file\n")
    out = tmp_path / "out"
    (out / link).parent.mkdir(parents=True)
    (out / link).symlink_to(outside)
    before = fingerprint(tmp_path)
    with counting_listener() as (url, accepted):
        code = main(_reproduce(real_bundle, url, out))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "resolves outside --out" in err
    assert accepted == []
    assert fingerprint(tmp_path) == before


def test_an_absolute_case_path_is_refused_before_any_request_or_write(
    real_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "trials.json").write_text("the user's own file\n")
    entries = b.edit_index(lambda d: d["cases"][0].update(path=str(victim)))(
        b.read_entries(real_bundle)
    )
    crafted = b.write_archive(tmp_path / "crafted.tar.gz", entries)
    out = tmp_path / "out"
    out.mkdir()
    before = fingerprint(tmp_path)
    with counting_listener() as (url, accepted):
        code = main(_reproduce(crafted, url, out))
    err = capsys.readouterr().err
    assert code == 1 and "has an absolute name" in err and "Traceback" not in err
    assert accepted == []
    assert fingerprint(tmp_path) == before


def _run_copy(real_bundle: Path, tmp_path: Path) -> Path:
    sweep = real_bundle.parent / "sweep"
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy, symlinks=True)
    return copy


def test_bundle_never_writes_into_the_folder_it_bundles(
    real_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_copy(real_bundle, tmp_path)
    before = fingerprint(tmp_path)
    for target in (run / "01-c1" / "result.json", run / "bundle.tar.gz"):
        code = main(["bundle", str(run), "--out", str(target)])
        err = capsys.readouterr().err
        assert code == 1 and "inside the folder being bundled" in err
    assert fingerprint(tmp_path) == before


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda run: (run / "01-c1" / "validity.json").write_text("{ nope"), "validity.json"),
        (lambda run: (run / "01-c1" / "validity.json").write_text("[1]"), "validity.json"),
        (
            lambda run: (run / "01-c1" / "validity.json").write_text(
                json.dumps({"schema_name": "inferlab-validity-v1", "verdict": 3})
            ),
            "validity.json",
        ),
        (lambda run: (run / "01-c1" / "result.json").write_text("{ nope"), "result.json"),
        (lambda run: (run / "01-c1" / "result.json").write_text('{"status": 5}'), "result.json"),
        (lambda run: (run / "01-c1" / "request.json").write_text("[]"), "request.json"),
    ],
    ids=[
        "validity-not-json",
        "validity-a-list",
        "validity-wrong-types",
        "result-not-json",
        "result-wrong-type",
        "request-wrong-type",
    ],
)
@pytest.mark.parametrize("command", ["report", "report-html", "compare"])
def test_report_and_compare_name_the_damaged_file(
    real_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: object,
    named: str,
    command: str,
) -> None:
    run = _run_copy(real_bundle, tmp_path)
    damage(run)  # type: ignore[operator]
    args = {
        "report": ["report", str(run), "--no-plots"],
        "report-html": ["report", str(run), "--html", str(tmp_path / "page.html")],
        "compare": ["compare", str(run / "01-c1"), str(run / "02-c2")],
    }[command]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"01-c1/{named}" in lines[0], err
    assert not (tmp_path / "page.html").exists()


def _trials_folder(real_bundle: Path, tmp_path: Path, listing: dict[str, object]) -> Path:
    run = _run_copy(real_bundle, tmp_path)
    folder = tmp_path / "trials"
    folder.mkdir()
    shutil.copytree(run / "01-c1", folder / "trial-01")
    (folder / "trials.json").write_text(json.dumps(listing))
    return folder


@pytest.mark.parametrize(
    ("listing", "said"),
    [
        ({"trials": ["trial-01"], "succeeded": ["trial-01"], "summaries": [{"x": 1}]}, "summaries"),
        ({"trials": ["trial-01"], "succeeded": ["../sweep/01-c1"]}, "not a folder name"),
        ({"trials": ["trial-01"], "succeeded": ["/etc"]}, "not a folder name"),
        ({"trials": ["trial-01"], "succeeded": "trial-01"}, "no succeeded trials"),
    ],
    ids=["summaries-wrong", "succeeded-dotdot", "succeeded-absolute", "succeeded-a-string"],
)
def test_a_damaged_trials_listing_is_named(
    real_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    listing: dict[str, object],
    said: str,
) -> None:
    folder = _trials_folder(real_bundle, tmp_path, listing)
    command = ["report", str(folder), "--no-plots"] if said == "summaries" else ["compare"]
    code = main(command if said == "summaries" else [*command, str(folder), str(folder)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and said in err
    assert "trials.json" in err


def test_report_html_does_not_follow_a_trials_entry_out_of_the_folder(
    real_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _trials_folder(
        real_bundle, tmp_path, {"trials": ["trial-01", "escape"], "succeeded": ["trial-01"]}
    )
    (folder / "escape").symlink_to(tmp_path / "sweep" / "02-c2")
    code = main(["report", str(folder), "--html", str(tmp_path / "page.html")])
    err = capsys.readouterr().err
    assert code == 1 and "resolves outside" in err and "Traceback" not in err
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize(
    "trials",
    [5, "trial-01", ["../sweep/01-c1"], ["/etc"], [None]],
    ids=["an-int", "a-string", "dotdot", "absolute", "null"],
)
@pytest.mark.parametrize("command", ["report-html", "bundle"])
def test_a_trials_listing_that_is_no_list_of_folder_names_is_named(
    real_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    trials: object,
    command: str,
) -> None:
    folder = _trials_folder(real_bundle, tmp_path, {"trials": trials, "succeeded": ["trial-01"]})
    target = tmp_path / ("page.html" if command == "report-html" else "b.tar.gz")
    args = (
        ["report", str(folder), "--html", str(target)]
        if command == "report-html"
        else ["bundle", str(folder), "--out", str(target)]
    )
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "trials.json: trials must list folder names" in err
    assert not target.exists()
