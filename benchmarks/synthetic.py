"""A population file of hand-written prompts, for the benchmark scripts that need one.

Each line has the population's shape (``session_id``, ``messages``, ``output_length``,
``extra``); the benchmarks import it as ``from synthetic import write_population`` (a script's
own folder is first on its path).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson


def write_population(path: Path, texts: Iterable[str], output_tokens: int) -> None:
    """One user message per text, each asking for exactly ``output_tokens``."""
    with path.open("wb") as out:
        for i, text in enumerate(texts):
            line = {
                "extra": {"ignore_eos": True, "min_tokens": output_tokens},
                "messages": [{"role": "user", "content": text}],
                "output_length": output_tokens,
                "session_id": f"inferlab-{i:08d}",
            }
            out.write(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n")
