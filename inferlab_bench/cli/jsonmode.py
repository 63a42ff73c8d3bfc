"""The control plane's calling convention: read a JSON request, always write a JSON result."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from inferlab_bench import interrupts
from inferlab_bench.atomic import os_condition, write_bytes_atomic
from inferlab_bench.cli.wording import describe_fields
from inferlab_bench.errors import InferlabError, RequestError
from inferlab_bench.protocol import dump_json, parse_request

RequestT = TypeVar("RequestT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)


def run_json_command(
    *,
    input_path: Path,
    output_path: Path,
    request_model: type[RequestT],
    stage: Callable[[RequestT], ResultT],
    failed_result: Callable[[str, bytes], ResultT],
    what: str,
) -> int:
    """Run one stage in JSON mode.

    Whatever happens, a result is written to ``output_path`` (atomically) and the exit
    code is 0; only when even that is impossible do we exit 1 with the reason on stderr.
    ``failed_result(message, raw_request_bytes)`` builds the failed result so that it can
    echo what little of the request was readable.
    """
    raw = b""
    # A signal at any point, before the stage starts or after it ends, still gets a result.
    with interrupts.guard(what) as guard:
        try:
            raw = _read_request_bytes(input_path)
            request = _parse(request_model, raw)
            result = stage(request)
        except InferlabError as exc:
            result = failed_result(str(exc), raw)
        except OSError as exc:  # the machine, not a bug: say which file and why
            result = failed_result(str(os_condition(exc)), raw)
        except Exception as exc:  # a bug of ours: still a result, never a traceback
            if os.environ.get("INFERLAB_DEBUG"):
                traceback.print_exc()
            result = failed_result(f"internal error: {type(exc).__name__}: {exc}", raw)
        with guard.deferred():
            return write_result(output_path, result)


def write_result(output_path: Path, result: BaseModel) -> int:
    """Write ``result`` atomically; return the process exit code."""
    try:
        write_bytes_atomic(output_path, dump_json(result))
    except (OSError, InferlabError) as exc:
        print(f"inferlab-bench: cannot write result {output_path}: {exc}", file=sys.stderr)
        return 1
    return 0


def _parse(model: type[RequestT], raw: bytes) -> RequestT:
    """The request, or a RequestError worded as the CLI words the same mistake in a flag."""
    try:
        return parse_request(model, raw, check_paths=True)
    except RequestError as exc:
        cause = exc.__cause__
        if not isinstance(cause, ValidationError):
            raise
        message = f"invalid {model.__name__}: {describe_fields(cause)}"
        raise RequestError(message, hint=exc.hint) from cause


def _read_request_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RequestError(
            f"--input {path}: cannot read request file ({exc.strerror or exc})",
            hint="pass the path of a JSON request file",
        ) from exc
