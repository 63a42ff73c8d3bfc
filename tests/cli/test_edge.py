"""What a person sees at the CLI's edge: flag words in every hint, "did you mean", one line
per error, the population's size checked before any load, and the server's own answers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from inferlab_bench.cli.flags import default_of, flag_table
from inferlab_bench.cli.outcome import show_verdicts
from inferlab_bench.cli.wording import in_flag_words
from inferlab_bench.simulator import SimulatorConfig, running_simulator
from tests.case.support import TOKENIZER_DIR
from tests.cli.flag_matrix import COMMANDS, Command, leaf_parser
from tests.cli.test_human import cli, cli_in_process, common
from tests.cli.test_outcome_failures import saved_case

DEAD = "http://127.0.0.1:9"


def _run(tmp_path: Path, *extra: str, url: str = DEAD) -> list[str]:
    return ["run", *common(url, tmp_path / "out"), "--requests", "4", *extra]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--budget", "0.001"), "--budget: expected a number >= 1 (found '0.001')"),
        (("--url", "not a url"), "--url: expected http://HOST:PORT"),
        (("--chat-path", "v1/chat"), "--chat-path: expected a URL path starting with '/'"),
    ],
)
def test_values_the_protocol_refuses_are_refused_as_flags(
    extra: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """These once reached the request models and ended in a pydantic traceback."""
    argv = _run(tmp_path, "--concurrency", "1", *extra)
    if extra[0] == "--url":
        argv = [a for a in argv if a != DEAD]
        argv.remove("--url")
    code, err = cli_in_process(capsys, *argv)
    assert code == 2, err
    assert message in err and "hint: " in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_mistyped_flag_gets_the_closest_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli_in_process(capsys, *_run(tmp_path, "--concurency", "8"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "unrecognized arguments: --concurency" in err
    assert "did you mean --concurrency" in err and "inferlab-bench run --help" in err
    code, err = cli_in_process(capsys, "dataset", "path", "sharegpt", "--catalog-dri", "x")
    assert code == 2 and "did you mean --catalog-dir" in err
    # A typo of a required flag: said as the typo, not as the required flag it hides.
    code, err = cli_in_process(capsys, "run", "--tokeniser", "x", "--concurrency", "1")
    assert code == 2 and "did you mean --tokenizer (for --tokeniser)?" in err
    assert "required" not in err
    code, err = cli_in_process(capsys, "run", "--conc", "1", "--url", DEAD)
    assert "did you mean" not in err  # an abbreviation argparse accepts is not a typo


def test_a_typo_far_from_every_flag_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli_in_process(capsys, "report", ".", "--zzzzzz")
    assert code == 2 and "did you mean" not in err and "unrecognized arguments" in err


def _population(directory: Path, entries: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "population.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"output_length": 4}) + b"\n" for _ in range(entries)))
    return path


@pytest.mark.parametrize("command", ["run", "sweep", "capacity"])
def test_a_population_too_small_for_requests_and_warmup_is_refused_in_flag_words(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: three failed trials, a table and "the case needs 208" (three times)."""
    population = _population(tmp_path / "pop", 20)
    load = {
        "run": ["--concurrency", "2", "--trials", "3"],
        "sweep": ["--concurrency", "1,2"],
        "capacity": ["--concurrency-range", "1:4", "--slo-ttft-ms", "500"],
    }[command]
    code, err = cli_in_process(
        capsys,
        command,
        "--url",
        DEAD,
        "--model",
        "sim",
        "--tokenizer",
        TOKENIZER_DIR,
        "--population",
        population,
        "--requests",
        "20",
        "--warmup",
        "2",
        *load,
        "--out",
        tmp_path / "out",
    )
    assert code == 2, err
    assert err.strip().endswith(
        "20 entries, but --requests 20 + --warmup 2 need 22 "
        "(hint: prepare again with --entries 22 or more, or lower --requests / --warmup)"
    )
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


def test_stage_messages_read_in_flag_words() -> None:
    said = in_flag_words(
        "prepare a larger population or lower request_count / warmup_request_count; "
        "fix endpoint.host/port; raise max_input_tokens, lower required_entries"
    )
    assert said == (
        "prepare a larger population or lower --requests / --warmup; fix --url; "
        "raise --max-input-tokens, lower --entries"
    )
    assert in_flag_words("case.request_count: expected") == "case.request_count: expected"


def test_a_refused_connection_is_said_once_in_flag_words(tmp_path: Path) -> None:
    proc = cli(*_run(tmp_path, "--concurrency", "1"))
    assert proc.returncode == 1
    said = proc.stdout + proc.stderr
    assert said.count("nothing is listening") == 1, said
    assert "inferlab-bench: error: out: endpoint" in proc.stderr  # on stderr, the table says failed
    assert "--url" in said and "endpoint.host/port" not in said
    saved = orjson.loads((tmp_path / "out" / "result.json").read_bytes())
    assert "endpoint.host/port" in saved["error"]  # the protocol file keeps the field words


def test_a_model_the_server_does_not_serve_is_named_with_what_it_serves(tmp_path: Path) -> None:
    """Before: warmup failed on every request and the hint said "the server is not ready"."""
    config = SimulatorConfig(model="qwen-sim", tokenizer=TOKENIZER_DIR)
    with running_simulator(config) as sim:
        argv = _run(tmp_path, "--concurrency", "1", "--warmup", "1", url=sim.base_url)
        argv[argv.index("sim")] = "qwen-sm"
        proc = cli(*argv)
    said = " ".join((proc.stdout + proc.stderr).split())  # the table wraps its lines
    assert proc.returncode == 1
    assert "model 'qwen-sm' is not served here; its /v1/models lists 'qwen-sim'" in said
    assert "(hint: name one of the served models (--model); no load was sent)" in said
    assert said.count("is not served here") == 1 and "not ready" not in said


def test_simulate_without_a_tokenizer_warns_that_prompt_counts_will_differ() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "inferlab_bench", "simulate", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        serving = proc.stdout.readline()
        warning = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "serving sim-model" in serving
    assert warning.startswith("inferlab-bench: warning: no --tokenizer: prompt tokens are counted")
    assert "pass --tokenizer DIR" in warning


def test_failed_prompt_reconciliation_names_the_servers_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = saved_case(tmp_path)
    show_verdicts([case], ())
    assert "tokenizer" not in capsys.readouterr().out
    assert case.validity is not None
    case.validity["verdicts"]["prompt_tokens_reconciled"] = "fail"
    show_verdicts([case], ())
    out = " ".join(capsys.readouterr().out.split())
    assert "another tokenizer than --tokenizer" in out and "without --tokenizer" in out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c.words))
def test_every_default_a_help_names_is_the_flag_models(command: Command) -> None:
    """The flag models are the one source of defaults: a help saying ``(default X)`` says
    the model's default, so the two cannot drift apart."""
    table = flag_table(leaf_parser(command.words))
    for dest, text in table.helps.items():
        said = re.search(r"default:? ([^;)\s]+)", text)
        if said is None or said.group(1) in ("derived", "decided", "directory", "target's"):
            continue
        value = command.model.model_fields[dest].get_default(call_default_factory=True)
        if value is None:  # decided from other flags, said in words ("beside it")
            continue
        assert said.group(0).replace("default: ", "default ") == default_of(command.model, dest)
