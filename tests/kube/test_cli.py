"""``run``/``sweep --engine kube``: dry runs end to end, and one-line errors for bad kube flags."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from inferlab_bench.cli import main
from inferlab_bench.kube.population import INIT_CONTAINER_NAME
from tests.case.support import population_line
from tests.protocol.examples import prep_request

SERVER = "http://vllm.serving.svc:8000"
RANDOM = ["--random-input-tokens", "64", "--random-output-tokens", "16"]


def base(out: Path, *extra: str) -> list[str]:
    return [
        "--url", SERVER,
        "--model", "qwen2",
        "--tokenizer", "Qwen/Qwen2-0.5B-Instruct",
        "--requests", "20",
        "--out", str(out),
        *extra,
    ]  # fmt: skip


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_dry_run_writes_validated_manifests_and_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "c8"
    args = base(out, "--concurrency", "8", *RANDOM, "--url", "http://vllm-1.serving.svc:8000")
    done = subprocess.run(
        [sys.executable, "-m", "inferlab_bench", "run", "--engine", "kube", "--namespace",
         "bench", "--dry-run", "--workers", "2", "--reset-prefix-cache", "vllm", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"manifests in {out / 'kube'}" in done.stdout
    assert "nothing was submitted" in done.stderr
    job = yaml.safe_load((out / "kube" / "aiperfjob.yaml").read_text())
    endpoint = job["spec"]["benchmark"]["endpoint"]
    assert endpoint["urls"] == [SERVER, "http://vllm-1.serving.svc:8000"]
    assert job["spec"]["benchmark"]["runtime"]["workers"] == 2
    translation = orjson.loads((out / "kube" / "translation.json").read_bytes())
    assert translation["prefix_cache_reset"] == "before-submit"
    assert (out / "request.json").is_file() and not (out / "result.json").exists()


def test_sweep_dry_run_writes_one_job_per_point_with_the_population_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pop").mkdir()
    data = b"".join(population_line(i, 8) + b"\n" for i in range(30))
    (tmp_path / "pop" / "population.jsonl").write_bytes(data)
    population = {"path": str(tmp_path / "pop" / "population.jsonl")}
    population["sha256"] = hashlib.sha256(data).hexdigest()
    (tmp_path / "pop" / "prepare-request.json").write_bytes(orjson.dumps(prep_request()))
    out = tmp_path / "sweep"
    code, stdout, err = in_process(
        capsys, "sweep", "--engine", "kube", "--namespace", "bench", "--dry-run",
        "--population", population["path"], "--population-pvc", "pops:population.jsonl",
        "--json", *base(out, "--rate", "1,2"),
    )  # fmt: skip
    assert code == 0, err
    cases = orjson.loads(stdout)["cases"]
    assert [Path(c["directory"]).name for c in cases] == ["01-rate1", "02-rate2"]
    rates = []
    for case in cases:
        cr = Path(case["directory"]) / "kube" / "aiperfjob.yaml"
        assert str(cr) in case["manifests"]
        spec = yaml.safe_load(cr.read_text())["spec"]
        rates.append(spec["benchmark"]["phases"][0]["rate"])
        (init,) = spec["podTemplate"]["initContainers"]
        env = {e["name"]: e["value"] for e in init["env"]}
        assert init["name"] == INIT_CONTAINER_NAME
        assert env["INFERLAB_POPULATION_SHA256"] == population["sha256"]
    assert rates == [1.0, 2.0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--namespace", "bench"], "--namespace needs --engine kube"),
        (["--dry-run"], "--dry-run needs --engine kube"),
        (["--url", "http://b:8000"], "--url given more than once needs --engine kube"),
        (["--engine", "kube"], "--engine kube needs --namespace"),
        (["--engine", "kube", "--namespace", "Bad_NS"], "not a valid Kubernetes namespace"),
        (["--engine", "kube", "--namespace", "b", "--workers", "0"], "--workers: expected an"),
        (
            ["--engine", "kube", "--namespace", "b", "--dry-run", "--trials", "2"],
            "--dry-run cannot be combined with --trials",
        ),
        (
            ["--engine", "kube", "--namespace", "b", "--population-url", "ftp://x"],
            "--population-url: expected http://HOST:PORT",
        ),
        (
            ["--engine", "kube", "--namespace", "b", "--dry-run", "--warmup", "2",
             "--reset-prefix-cache", "vllm"],
            "--warmup with --reset-prefix-cache cannot run on --engine kube",
        ),
    ],
)  # fmt: skip
def test_bad_kube_flags_give_one_line_errors(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = in_process(capsys, "run", *base(tmp_path, "--concurrency", "2", *RANDOM), *extra)
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith("inferlab-bench: error: ")


def test_a_local_tokenizer_needs_a_pod_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = base(tmp_path, "--concurrency", "2", *RANDOM)
    args[args.index("--tokenizer") + 1] = str(tmp_path)
    code, _, err = in_process(
        capsys, "run", "--engine", "kube", "--namespace", "b", "--dry-run", *args
    )
    assert code == 1 and "is a path on this machine" in err and "--pod-tokenizer" in err
