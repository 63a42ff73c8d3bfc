"""A head start for ``prepare`` in JSON mode, taken before the command line is even parsed.

A warm preparation's longest step is reading the kept tokenizer (``tokenstore``), which needs
only the request's tokenizer locator and template kwargs. So when the arguments name
``prepare`` with ``--input``, that file is read raw and the helper is forked at once, while
this process imports the parser, the flags' models and the stage. It is speculative and
read-only: the flags are still validated before any work, and a helper never taken (invalid
flags, a failed request, a cold run) is stopped at exit (``tokenstore.stop_early``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson


def start_reading_kept_tokenizer(args: Sequence[str]) -> None:
    """Fork the kept-tokenizer helper if ``args`` (after the subcommand) give a readable
    ``--input`` request naming a tokenizer; anything else just means no head start."""
    path = _flag_value(args, "--input")
    if path is None:
        return
    try:
        request = orjson.loads(Path(path).read_bytes())
        locator = request["model"]["locator"]
        kwargs = (request.get("request_body") or {}).get("chat_template_kwargs") or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    if isinstance(locator, str) and isinstance(kwargs, dict):
        from inferlab_bench.prepare import tokenstore

        tokenstore.start_early(locator, kwargs)


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` given once as ``--flag VALUE`` or ``--flag=VALUE``, else None."""
    found = []
    for k, arg in enumerate(args):
        if arg == flag and k + 1 < len(args):
            found.append(args[k + 1])
        elif arg.startswith(flag + "="):
            found.append(arg[len(flag) + 1 :])
    return found[0] if len(found) == 1 else None
