"""``inferlab-bench prepare``: freeze a population — JSON mode (--input/--output) or human flags."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import orjson

from inferlab_bench.cli.jsonmode import run_json_command
from inferlab_bench.cli.progress import stderr_progress
from inferlab_bench.cli.render import EXIT_FAILED, EXIT_USAGE, print_json, report_error
from inferlab_bench.errors import DatasetError, InferlabError
from inferlab_bench.prepare.catalog import CATALOG_DIR_ENV
from inferlab_bench.prepare.stage import run_prepare
from inferlab_bench.protocol import (
    BenchDatasetPreparationRequest,
    BenchDatasetPreparationResult,
    ClientStatus,
)
from inferlab_bench.runs.prepare import (
    catalogued_sharegpt,
    local_file,
    preparation_request,
    prepare_and_save,
)

HUMAN_REQUIRED = ("model", "dataset", "entries", "max_input_tokens", "out")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("prepare", help="prepare a frozen dataset population")
    machine = parser.add_argument_group("JSON mode (control plane)")
    machine.add_argument("--input", type=Path, help="BenchDatasetPreparationRequest JSON")
    machine.add_argument("--output", type=Path, help="where to write the result JSON")
    machine.add_argument(
        "--catalog-dir",
        type=Path,
        default=None,
        help=f"use this catalog directory instead of the packaged one (env {CATALOG_DIR_ENV})",
    )
    human = parser.add_argument_group("human mode")
    human.add_argument("--model", help="local tokenizer directory of the model (its chat template)")
    human.add_argument(
        "--served-name", default=None, help="served model name (default: directory name)"
    )
    human.add_argument(
        "--dataset", help="'sharegpt' (catalogued) or a path to a ShareGPT-format file"
    )
    human.add_argument("--entries", type=int, help="population size")
    human.add_argument("--max-input-tokens", type=int, help="longest admitted input, in tokens")
    human.add_argument(
        "--output-tokens", type=int, default=None, help="fixed output length (default: target's)"
    )
    human.add_argument("--seed", type=int, default=0)
    human.add_argument(
        "--chat-template-kwargs", default=None, help="JSON object passed to the chat template"
    )
    human.add_argument("--out", type=Path, help="output directory")
    human.add_argument("--json", action="store_true", help="print the result JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.input is not None or args.output is not None:
        if args.input is None or args.output is None:
            print(
                "inferlab-bench: error: JSON mode needs both --input and --output", file=sys.stderr
            )
            return EXIT_USAGE
        return run_json_command(
            input_path=args.input,
            output_path=args.output,
            request_model=BenchDatasetPreparationRequest,
            stage=functools.partial(
                run_prepare, progress=stderr_progress(), catalog_dir=args.catalog_dir
            ),
            failed_result=failed_result,
            what="preparation",
        )
    return run_human(args)


def run_human(args: argparse.Namespace) -> int:
    missing = [
        f"--{name.replace('_', '-')}" for name in HUMAN_REQUIRED if getattr(args, name) is None
    ]
    if missing:
        print(
            f"inferlab-bench: error: prepare needs {', '.join(missing)} (or --input/--output)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        out = args.out.resolve()
        if args.dataset != "sharegpt" and not Path(args.dataset).is_file():
            raise DatasetError(
                f"--dataset {args.dataset}: no such file",
                hint="give 'sharegpt' or the path of a ShareGPT-format JSON/JSONL file",
            )
        choice = (
            catalogued_sharegpt()
            if args.dataset == "sharegpt"
            else local_file(Path(args.dataset), out / "catalog")
        )
        body = (
            {"chat_template_kwargs": orjson.loads(args.chat_template_kwargs)}
            if args.chat_template_kwargs
            else {}
        )
        request = preparation_request(
            choice,
            args.model,
            args.served_name or Path(args.model).name,
            required=args.entries,
            max_input_tokens=args.max_input_tokens,
            output_tokens=args.output_tokens,
            seed=args.seed,
            out=out,
            request_body=body,
        )
        result = prepare_and_save(request, choice, stderr_progress())
    except (OSError, orjson.JSONDecodeError) as exc:
        print(f"inferlab-bench: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except InferlabError as exc:
        return report_error(exc)
    return _render(result, choice.note, as_json=args.json)


def _render(result: BenchDatasetPreparationResult, note: str, *, as_json: bool) -> int:
    if as_json:
        print_json(result.model_dump(mode="json"))
    if result.status is ClientStatus.FAILED:
        print(f"inferlab-bench: error: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    if not as_json and result.population is not None:
        print(f"dataset: {note}")
        print(
            f"admitted {result.admitted_entries} of {result.candidate_entries} conversations; "
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
        print(
            f"population: {result.population.path} ({result.population.entries} entries, "
            f"sha256 {result.population.sha256})"
        )
    return 0


def failed_result(message: str, raw: bytes) -> BenchDatasetPreparationResult:
    """A failed result that echoes what could be read of an invalid request."""
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
