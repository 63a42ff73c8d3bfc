"""``inferlab-bench prepare``: freeze a population — JSON mode (--input/--output) or human flags.

In JSON mode the stage (the protocol's models, numpy, pyarrow) is imported only once the
flags are valid.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from inferlab_bench.cli.flags import bind, with_flags
from inferlab_bench.cli.options import PrepareFlags
from inferlab_bench.layout import CATALOG_DIR_ENV
from inferlab_bench.prepare.sessions import MATERIALIZATION_IDENTITY as SESSIONS

if TYPE_CHECKING:
    from inferlab_bench.protocol import BenchDatasetPreparationResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "prepare", help="prepare a frozen dataset population", argument_default=argparse.SUPPRESS
    )
    machine = parser.add_argument_group("JSON mode (control plane)")
    machine.add_argument("--input", help="BenchDatasetPreparationRequest JSON")
    machine.add_argument("--output", help="where to write the result JSON")
    machine.add_argument(
        "--catalog-dir",
        help=f"use this catalog directory instead of the packaged one (env {CATALOG_DIR_ENV})",
    )
    human = parser.add_argument_group("human mode")
    human.add_argument("--model", help="local tokenizer directory of the model (its chat template)")
    human.add_argument("--served-name", help="served model name (default: directory name)")
    human.add_argument(
        "--dataset", help="'sharegpt' (catalogued) or a path to a ShareGPT-format file"
    )
    human.add_argument("--entries", help="population size")
    human.add_argument("--max-input-tokens", help="longest admitted input, in tokens")
    human.add_argument("--output-tokens", help="fixed output length (default: target's)")
    human.add_argument("--seed", help="seed of the sample (default 0)")
    human.add_argument("--chat-template-kwargs", help="JSON object passed to the chat template")
    human.add_argument("--out", help="output directory")
    human.add_argument(
        "--sessions",
        action="store_true",
        help="a conversation population (sharegpt-multi-turn-v1): --entries counts sessions, "
        "one line per turn with its whole history",
    )
    human.add_argument("--json", dest="as_json", action="store_true", help="print the result JSON")
    bind(parser, run)


def run(args: argparse.Namespace) -> int:
    return with_flags(args, PrepareFlags, _run)


def _run(flags: PrepareFlags) -> int:
    if flags.input is not None and flags.output is not None:
        from inferlab_bench.cli.jsonmode import run_json_command
        from inferlab_bench.cli.progress import stderr_progress
        from inferlab_bench.prepare.stage import run_prepare
        from inferlab_bench.protocol import BenchDatasetPreparationRequest

        return run_json_command(
            input_path=flags.input,
            output_path=flags.output,
            request_model=BenchDatasetPreparationRequest,
            stage=functools.partial(
                run_prepare, progress=stderr_progress(), catalog_dir=flags.catalog_dir
            ),
            failed_result=failed_result,
            what="preparation",
        )
    return run_human(flags)


def run_human(flags: PrepareFlags) -> int:
    """Human mode; ``cli.options.PrepareFlags`` made sure every needed flag is there."""
    from inferlab_bench.cli.progress import stderr_progress
    from inferlab_bench.cli.render import EXIT_FAILED, report_error
    from inferlab_bench.errors import InferlabError
    from inferlab_bench.runs.prepare import (
        catalogued_sharegpt,
        local_file,
        preparation_request,
        prepare_and_save,
    )

    model, dataset, out = Path(str(flags.model)), str(flags.dataset), Path(str(flags.out))
    try:
        out = out.resolve()
        choice = (
            catalogued_sharegpt()
            if dataset == "sharegpt"
            else local_file(Path(dataset), out / "catalog")
        )
        kwargs = flags.chat_template_kwargs
        request = preparation_request(
            choice,
            str(model),
            flags.served_name or model.name,
            required=flags.entries or 0,
            max_input_tokens=flags.max_input_tokens or 0,
            output_tokens=flags.output_tokens,
            seed=flags.seed,
            out=out,
            request_body={"chat_template_kwargs": kwargs} if kwargs else {},
            materialization=SESSIONS if flags.sessions else None,
        )
        result = prepare_and_save(request, choice, stderr_progress())
    except OSError as exc:
        print(f"inferlab-bench: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except InferlabError as exc:
        return report_error(exc)
    return _render(result, choice.note, as_json=flags.as_json)


def _render(result: BenchDatasetPreparationResult, note: str, *, as_json: bool) -> int:
    from inferlab_bench.cli.render import EXIT_FAILED, print_json
    from inferlab_bench.protocol import ClientStatus

    if as_json:
        print_json(result.model_dump(mode="json"))
    if result.status is ClientStatus.FAILED:
        from inferlab_bench.cli.wording import in_flag_words

        print(f"inferlab-bench: error: {in_flag_words(result.error or '')}", file=sys.stderr)
        return EXIT_FAILED
    if not as_json and result.population is not None:
        print(f"dataset: {note}")
        admitted = "sessions" if result.materialization_identity == SESSIONS else "entries"
        print(
            f"admitted {result.admitted_entries} {admitted} of {result.candidate_entries} "
            "conversations; "
            f"ineligible: {dict(result.ineligible_reasons)}"
        )
        if result.input_tokens and result.output_tokens:
            print(
                f"input tokens  min {result.input_tokens.minimum} "
                f"mean {result.input_tokens.mean:.1f} max {result.input_tokens.maximum}"
            )
            print(
                f"output tokens min {result.output_tokens.minimum} "
                f"mean {result.output_tokens.mean:.1f} max {result.output_tokens.maximum}"
            )
        lines = "turns" if result.materialization_identity == SESSIONS else "entries"
        print(
            f"population: {result.population.path} ({result.population.entries} {lines}, "
            f"sha256 {result.population.sha256})"
        )
    return 0


def failed_result(message: str, raw: bytes) -> BenchDatasetPreparationResult:
    """A failed result that echoes what could be read of an invalid request."""
    from inferlab_bench.protocol import BenchDatasetPreparationResult, ClientStatus

    identity, requested = "", 0
    try:
        data = orjson.loads(raw)
        requested = int(data.get("required_entries", 0))
        source = data.get("request_source") or {}
        identity = str((source.get("catalog") or {}).get("materialization_identity", ""))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        pass
    if not 0 <= requested < 2**32:
        requested = 0
    return BenchDatasetPreparationResult(
        status=ClientStatus.FAILED,
        materialization_identity=identity,
        requested_entries=requested,
        error=message,
    )
